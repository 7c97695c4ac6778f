//! The twins' two forms themselves: the library and the scripts are what the build writes
//! from lua/src/, and a limiter added as one file there is a function, a script and a
//! rule of RL.ALL; the library loads on a server without the module, again with
//! `REPLACE`, reaches replicas and survives a restart; every function and its script
//! answer alike.

use crate::common;

use common::twins::{library, load_library, script, FUNCTIONS};
use common::{at_base, wait_for_replicas, Server, Twins, Value, HOUR, MINUTE};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Run a tree's `lua/build.py` (with `--check`: only say what is stale); panics with
/// `why` and the build's errors when it fails.
fn build(lua: &Path, check: bool, why: &str) {
    let mut command = Command::new("python3");
    command.arg(lua.join("build.py"));
    if check {
        command.arg("--check");
    }
    let out = command.output().expect("python3 lua/build.py");
    assert!(
        out.status.success(),
        "{why}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_library_and_the_scripts_are_what_the_build_writes() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    build(
        &root.join("lua"),
        true,
        "lua/ratelimit.lua or lua/scripts/ is stale: run `python3 lua/build.py`",
    );
    // One script per registered function, and nothing else.
    let mut scripts: Vec<String> = std::fs::read_dir(root.join("lua/scripts"))
        .expect("lua/scripts")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    scripts.sort();
    let mut want: Vec<String> = FUNCTIONS.iter().map(|f| format!("{f}.lua")).collect();
    want.sort();
    assert_eq!(scripts, want);
    for f in FUNCTIONS {
        assert!(
            library().contains(&format!("redis.register_function('{f}', {f})")),
            "{f} is not registered"
        );
        // A script carries only what it uses: no other command's entry point.
        let text = script(f);
        for other in FUNCTIONS.iter().filter(|&&o| o != f) {
            assert!(
                !text.contains(&format!("local function {other}(")),
                "{f}.lua carries {other}"
            );
        }
    }
}

#[test]
fn the_library_loads_without_the_module_and_again_with_replace() {
    let s = Server::builder().module(false).start();
    let mut c = s.client();
    assert_eq!(
        c.cmd(&["MODULE", "LIST"])
            .array()
            .iter()
            .filter(|m| format!("{m:?}").contains("ratelimit"))
            .count(),
        0
    );
    load_library(&mut c);
    // Without REPLACE a second load is the server's error; with it, twice, fine.
    let again = c.cmd(&["FUNCTION", "LOAD", &library()]);
    assert!(
        again.err().unwrap_or("").contains("already exists"),
        "{again:?}"
    );
    load_library(&mut c);
    load_library(&mut c);
    let listed = c.cmd(&["FUNCTION", "LIST", "LIBRARYNAME", "ratelimit"]);
    assert_eq!(listed.array().len(), 1, "{listed:?}");
    // Every function is there: called with no key, each names itself.
    for f in FUNCTIONS {
        let r = c.cmd(&["FCALL", f, "0", "a", "b", "c", "d", "e"]);
        assert!(
            r.err().unwrap_or("").contains(&format!("'{f}'")),
            "{f}: {r:?}"
        );
    }
    // Every function and its script answer alike on a server without the module.
    let [functions, scripts] = Twins::both(&mut c);
    let at = at_base(HOUR, MINUTE).to_string();
    let calls: Vec<(&str, Vec<&str>, Vec<&str>)> = vec![
        ("fixed", vec!["k:fixed"], vec!["5", "1m", "AT", &at]),
        ("gcra", vec!["k:gcra"], vec!["2", "1", "10s", "AT", &at]),
        (
            "multi",
            vec!["{k}a", "{k}b"],
            vec!["LIMIT", "1s", "3", "AT", &at],
        ),
        ("sliding", vec!["{s}a"], vec!["LIMIT", "1m", "3", "AT", &at]),
        (
            "log",
            vec!["k:log"],
            vec!["3", "1m", "META", "u", "AT", &at],
        ),
        (
            "all",
            vec!["{a}f", "{a}g"],
            vec![
                "FIXED", "1", "2", "1m", "GCRA", "2", "5", "1", "1s", "AT", &at,
            ],
        ),
        ("throttle", vec!["k:cell"], vec!["2", "1", "60"]),
        ("bulkexpire", vec!["k:fixed", "k:plain"], vec!["1h"]),
    ];
    c.cmd(&["SET", "k:plain", "x"]);
    for (name, keys, args) in &calls {
        let pick = |t: &Twins| match *name {
            "fixed" => t.fixed.clone(),
            "gcra" => t.gcra.clone(),
            "multi" => t.multi.clone(),
            "sliding" => t.sliding.clone(),
            "log" => t.log.clone(),
            "all" => t.all.clone(),
            "throttle" => t.throttle.clone(),
            _ => t.bulkexpire.clone(),
        };
        let f = c.cmd(&pick(&functions).argv(keys, args));
        let s = c.cmd(&pick(&scripts).argv(keys, args));
        assert!(!f.is_err(), "{name}: {f:?}");
        if *name == "bulkexpire" {
            // The function gave the plain key its TTL; the script finds none to give.
            assert_eq!(f, Value::Array(vec![Value::Bulk(b"k:plain".to_vec())]));
            assert_eq!(s, Value::Array(vec![]));
        } else if *name != "throttle" {
            // The second call counts one more: remaining is one less.
            let (f, s) = (f.array(), s.array());
            assert_eq!(f[..2], s[..2], "{name}");
            assert_eq!(f[2].int(), s[2].int() + 1, "{name}");
        }
    }
    // FUNCTION FLUSH removes it; the scripts do not need it.
    c.cmd(&["FUNCTION", "FLUSH"]);
    assert!(c.cmd(&["FCALL", "rl_fixed", "1", "k", "5", "1m"]).is_err());
    let r = c.cmd(&scripts.fixed.argv(&["k"], &["5", "1m"]));
    assert_eq!(r.ints()[..3], [0, 5, 4]);
}

#[test]
fn a_replica_gets_the_library_and_a_restart_keeps_it() {
    let mut primary = Server::builder().aof(true).start();
    let replica = primary.start_replica(false);
    let mut c = primary.client();
    load_library(&mut c);
    c.cmd(&["FCALL", "rl_gcra", "1", "k", "2", "1", "10s"]);
    wait_for_replicas(&mut c, 1);
    let mut r = replica.client();
    let listed = r.cmd(&["FUNCTION", "LIST", "LIBRARYNAME", "ratelimit"]);
    assert_eq!(
        listed.array().len(),
        1,
        "the replica has the library: {listed:?}"
    );
    // A read-only replica refuses the write, as it refuses any write.
    let denied = r.cmd(&["FCALL", "rl_gcra", "1", "k", "2", "1", "10s"]);
    assert!(denied.is_err(), "{denied:?}");
    drop(c);
    primary.restart(true);
    let mut c = primary.client();
    let r = c.cmd(&["FCALL", "rl_fixed", "1", "after", "5", "1m"]);
    assert_eq!(r.ints()[..3], [0, 5, 4], "the library is in the AOF");
}

/// A limiter of its own for the test below: `RL.QUOTA key limit`, at most `limit` an hour
/// (RL.FIXED's counter over a fixed window), in one file that names no other place.
const QUOTA: &str = r#"-- RL.QUOTA: at most `limit` an hour.
local QUOTA = (function()
  local L = { kind = 'QUOTA', command = 'RL.QUOTA', storage = 'string', expiry = true, nargs = 1,
    expected = 'a non-negative integer counter', options = {}, accepts = { COST = true, AT = true },
    syntax = 'RL.QUOTA key limit [COST n] [AT unix_ms]', rule_syntax = 'QUOTA i limit' }
  function L.parse_args(args, i)
    return { L = L, limit = count_in_order('limit', args[i], 1, 'RL.QUOTA key limit') }
  end
  function L.build(r)
    return r
  end
  function L.check_cost(r, cost, mode)
    if cost > r.limit then cost_over(cost, 'limit', r.limit) end
  end
  function L.judge(r, key, named, raw, exp, now, cost)
    local count = raw and tonumber(raw)
    local limited, limit, remaining, retry_ms, reset, retry, after, ends =
      fixed_window(r.limit, 3600000, false, count, exp, now, cost)
    local allow
    if cost > 0 and not retry then allow = { 'SET', key, after, 'PXAT', ends } end
    return { limited, limit, remaining, retry_ms, reset }, retry, allow
  end
  return L
end)()

local function rl_quota(keys, args)
  return run(single_command, keys, args, QUOTA, 'rl_quota')
end
"#;

/// A directory of its own under the system's temporary directory.
fn scratch_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rl-twins-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create a scratch directory");
    dir
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read_dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("file type").is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

/// A new limiter is one Lua file: dropped into a copy of lua/src/limiters/, the build
/// registers its function, writes its script and makes it a rule of RL.ALL, and both
/// forms answer on a server; nothing else is edited.
#[test]
fn a_limiter_added_as_one_file_is_a_function_a_script_and_a_rule() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = scratch_dir("new-limiter");
    let lua = dir.join("lua");
    std::fs::create_dir_all(&lua).expect("mkdir lua");
    std::fs::copy(root.join("lua/build.py"), lua.join("build.py")).expect("copy build.py");
    copy_tree(&root.join("lua/src"), &lua.join("src"));
    std::fs::write(lua.join("src/limiters/quota.lua"), QUOTA).expect("write quota.lua");
    build(&lua, false, "the build refuses the new limiter");
    let library = std::fs::read_to_string(lua.join("ratelimit.lua")).expect("the library");
    assert!(library.contains("redis.register_function('rl_quota', rl_quota)"));
    assert!(
        library.contains("MULTI = MULTI, QUOTA = QUOTA, SLIDING = SLIDING }"),
        "RL.ALL's rules, in the order of their files' names"
    );
    let quota_script =
        std::fs::read_to_string(lua.join("scripts/rl_quota.lua")).expect("its script");
    // The other functions' scripts are the repository's, byte for byte.
    for f in FUNCTIONS {
        if f != "rl_all" {
            assert_eq!(
                std::fs::read_to_string(lua.join(format!("scripts/{f}.lua"))).expect("a script"),
                script(f),
                "{f}"
            );
        }
    }

    let s = Server::builder().module(false).start();
    let mut c = s.client();
    let loaded = c.cmd(&["FUNCTION", "LOAD", "REPLACE", &library]);
    assert_eq!(loaded, Value::Bulk(b"ratelimit".to_vec()));
    let at = at_base(HOUR, MINUTE).to_string();
    let sha = match c.cmd(&["SCRIPT", "LOAD", &quota_script]) {
        Value::Bulk(sha) => String::from_utf8(sha).expect("sha"),
        other => panic!("SCRIPT LOAD: {other:?}"),
    };
    // Its function and its script share the key: 2 an hour.
    let first = c.cmd(&["FCALL", "rl_quota", "1", "q", "2", "AT", &at]);
    assert_eq!(first.ints(), [0, 2, 1, -1, HOUR as i64]);
    let second = c.cmd(&["EVALSHA", &sha, "1", "q", "2", "AT", &at]);
    assert_eq!(second.ints(), [0, 2, 0, -1, HOUR as i64]);
    let third = c.cmd(&["FCALL", "rl_quota", "1", "q", "2", "AT", &at]);
    assert_eq!(third.ints()[..3], [1, 2, 0]);
    // Its errors are the shared ones, with its syntax.
    let arity = c.cmd(&["FCALL", "rl_quota", "1", "q"]);
    assert_eq!(
        arity.err(),
        Some("ERR wrong number of arguments for 'RL.QUOTA' command (syntax: RL.QUOTA key limit [COST n] [AT unix_ms])")
    );
    // A rule of RL.ALL, beside the others, all or nothing.
    let all = c.cmd(&[
        "FCALL", "rl_all", "2", "{a}q", "{a}f", "QUOTA", "1", "1", "FIXED", "2", "5", "1m", "AT",
        &at,
    ]);
    let head = |v: &Value| v.array()[..3].iter().map(Value::int).collect::<Vec<i64>>();
    assert_eq!(head(&all), [0, 1, 0], "{all:?}");
    let denied = c.cmd(&[
        "FCALL", "rl_all", "2", "{a}q", "{a}f", "QUOTA", "1", "1", "FIXED", "2", "5", "1m", "AT",
        &at,
    ]);
    assert_eq!(head(&denied)[..2], [1, 1], "{denied:?}");
    assert_eq!(
        c.cmd(&["GET", "{a}f"]),
        Value::Bulk(b"1".to_vec()),
        "a denial writes nothing"
    );
    let unknown = c.cmd(&["FCALL", "rl_all", "1", "k", "NOPE", "1"]);
    assert!(
        unknown
            .err()
            .unwrap_or("")
            .contains("a rule is BAN, FIXED, GCRA, LEASE, LOG, MULTI, QUOTA or SLIDING"),
        "{unknown:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
