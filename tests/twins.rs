//! The twins' two forms themselves: the scripts are what the build writes from the
//! library; the library loads on a server without the module, again with `REPLACE`,
//! reaches replicas and survives a restart; every function and its script answer alike.

use crate::common;

use common::twins::{library, load_library, script, FUNCTIONS};
use common::{at_base, wait_for_replicas, Server, Twins, Value, HOUR, MINUTE};
use std::path::Path;
use std::process::Command;

#[test]
fn the_scripts_are_what_the_build_writes_from_the_library() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new("python3")
        .arg(root.join("lua/build.py"))
        .arg("--check")
        .output()
        .expect("python3 lua/build.py --check");
    assert!(
        out.status.success(),
        "lua/scripts/ is stale: run `python3 lua/build.py`\n{}",
        String::from_utf8_lossy(&out.stderr)
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
