//! The `ratelimit-sweep` tool end to end: against a real server (dry run, real run,
//! ACL user, rate limit, errors, passwords and where they come from, databases,
//! Ctrl-C and SIGTERM, keys added during a sweep) and against a three-primary Cluster.

use crate::{args, common};

use common::{sweep_tool_path, unix_ms, Client, Cluster, Server, Value};
use std::collections::BTreeMap;
use std::os::unix::process::CommandExt;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
    took: Duration,
}

fn tool(args: &[&str]) -> Run {
    tool_env(args, &[])
}

/// The tool with these environment variables (and no REDISCLI_AUTH but theirs).
fn tool_env(args: &[&str], env: &[(&str, &str)]) -> Run {
    let start = Instant::now();
    let Output {
        status,
        stdout,
        stderr,
    } = Command::new(sweep_tool_path())
        .args(args)
        .env_remove("REDISCLI_AUTH")
        .envs(env.iter().copied())
        .output()
        .expect("run ratelimit-sweep");
    Run {
        code: status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
        took: start.elapsed(),
    }
}

fn url(port: u16) -> String {
    format!("redis://127.0.0.1:{port}")
}

/// Every key with its PEXPIRETIME.
fn expiries(c: &mut Client) -> BTreeMap<String, i64> {
    let mut keys = Vec::new();
    let mut cursor = "0".to_string();
    loop {
        let r = c.cmd(&["SCAN", &cursor, "COUNT", "1000"]);
        cursor = r.array()[0].text();
        keys.extend(r.array()[1].array().iter().map(Value::text));
        if cursor == "0" {
            break;
        }
    }
    let cmds: Vec<Vec<Vec<u8>>> = keys.iter().map(|k| args!["PEXPIRETIME", k]).collect();
    let exps = c.pipeline(&cmds);
    keys.into_iter().zip(exps.iter().map(Value::int)).collect()
}

/// 4 000 persistent `app:N`, 500 `app:ttl:N` with TTLs, 1 000 persistent `other:N`,
/// an `app:h` hash.
fn fill(c: &mut Client) {
    c.cmd(&["DEBUG", "POPULATE", "4000", "app"]);
    c.cmd(&["DEBUG", "POPULATE", "1000", "other"]);
    let cmds: Vec<Vec<Vec<u8>>> = (0..500)
        .map(|i| args!["SET", format!("app:ttl:{i}"), "v", "PX", 900_000 + i])
        .collect();
    c.pipeline(&cmds);
    c.cmd(&["HSET", "app:h", "f", "v"]);
}

#[test]
fn dry_run_then_real_run() {
    let s = Server::start();
    let mut c = s.client();
    fill(&mut c);
    let before = expiries(&mut c);

    let dry = tool(&[
        "--url",
        &url(s.port),
        "--ttl",
        "2h",
        "--match",
        "app:*",
        "--dry-run",
    ]);
    assert_eq!(dry.code, 0, "{}", dry.stderr);
    assert!(
        dry.stdout
            .contains("would expire 4001 (ttl 2h); nothing was changed"),
        "{}",
        dry.stdout
    );
    // Not a terminal: plain progress lines, no bar.
    assert!(
        dry.stderr.contains("progress: scanned ") && dry.stderr.contains("/5501 keys (100.0%)"),
        "{}",
        dry.stderr
    );
    assert!(!dry.stderr.contains('\r'));
    assert_eq!(expiries(&mut c), before, "a dry run changes nothing");

    let t0 = unix_ms() as i64;
    let run = tool(&[
        "--url",
        &url(s.port),
        "--ttl",
        "2h",
        "--match",
        "app:*",
        "--count",
        "300",
    ]);
    let t1 = unix_ms() as i64;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains("expired 4001 (ttl 2h)"),
        "{}",
        run.stdout
    );
    assert!(run
        .stdout
        .starts_with(&format!("node 127.0.0.1:{}: scanned ", s.port)));
    for (k, e) in expiries(&mut c) {
        if k.starts_with("app:ttl:") || k.starts_with("other:") {
            assert_eq!(e, before[&k], "{k} changed");
        } else {
            assert!(
                e >= t0 + 7_200_000 && e <= t1 + 7_200_000,
                "{k}: {e} not in [{t0}, {t1}] + 2 h"
            );
        }
    }
    let again = tool(&["--url", &url(s.port), "--ttl", "2h", "--quiet"]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert!(
        again.stdout.contains("expired 1000 (ttl 2h)"),
        "{}",
        again.stdout
    );
    assert_eq!(again.stderr, "", "--quiet prints only the summary");
    assert!(expiries(&mut c).values().all(|&e| e > 0));
}

#[test]
fn type_filter_and_acl_user_from_the_url() {
    let s = Server::start();
    let mut c = s.client();
    fill(&mut c);
    c.cmd(&[
        "ACL", "SETUSER", "sweeper", "on", ">s3cr:t@", "~app:*", "+@all",
    ]);
    // The password holds `:` and `@`: percent-encoded in the URL.
    let u = format!("redis://sweeper:s3cr%3At%40@127.0.0.1:{}", s.port);
    let r = tool(&["--url", &u, "--ttl", "10m", "--type", "hash"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("expired 1 (ttl 10m)"), "{}", r.stdout);
    assert!(c.cmd(&["PEXPIRETIME", "app:h"]).int() > 0);
    let r = tool(&["--url", &u, "--ttl", "10m"]);
    assert!(r.stdout.contains("expired 4000 (ttl 10m)"), "{}", r.stdout);
    for (k, e) in expiries(&mut c) {
        assert_eq!(e > 0, k.starts_with("app:"), "{k}: {e}");
    }
}

#[test]
fn max_rate_paces_the_sweep() {
    let s = Server::start();
    let mut c = s.client();
    c.cmd(&["DEBUG", "POPULATE", "3000", "k"]);
    // 3 000 keys at 2 000 keys/s: calls of 200 keys, the last one due at about 1.4 s.
    let r = tool(&["--url", &url(s.port), "--ttl", "1h", "--max-rate", "2000"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("expired 3000"), "{}", r.stdout);
    assert!(r.took >= Duration::from_millis(1_200), "took {:?}", r.took);
    let calls: u64 = r
        .stdout
        .lines()
        .next()
        .and_then(|l| l.strip_suffix(" calls"))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .expect("calls in the summary");
    assert!(calls >= 10, "{calls} calls: COUNT follows the rate");
}

fn one_line_error(r: &Run, code: i32, want: &str) {
    assert_eq!(r.code, code, "stdout {} stderr {}", r.stdout, r.stderr);
    assert_eq!(r.stderr.lines().count(), 1, "{}", r.stderr);
    assert!(
        r.stderr.starts_with("ratelimit-sweep: ") && r.stderr.contains(want),
        "{}",
        r.stderr
    );
    assert_eq!(r.stdout, "");
}

#[test]
fn errors_are_one_line_and_a_non_zero_exit() {
    // A port nobody listens on.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    };
    one_line_error(
        &tool(&["--url", &url(closed), "--ttl", "1h"]),
        1,
        &format!("cannot connect to 127.0.0.1:{closed}"),
    );
    let plain = Server::builder().module(false).start();
    plain.client().cmd(&["SET", "k", "v"]);
    one_line_error(
        &tool(&["--url", &url(plain.port), "--ttl", "1h"]),
        1,
        "does not have the ratelimit module loaded",
    );
    let locked = Server::start();
    locked
        .client()
        .cmd(&["CONFIG", "SET", "requirepass", "right"]);
    one_line_error(
        &tool(&["--url", &url(locked.port), "--ttl", "1h"]),
        1,
        "requires authentication",
    );
    one_line_error(
        &tool(&[
            "--url",
            &format!("redis://:wrong@127.0.0.1:{}", locked.port),
            "--ttl",
            "1h",
        ]),
        1,
        "authentication failed at 127.0.0.1:",
    );
    let ok = tool(&[
        "--url",
        &format!("redis://:right@127.0.0.1:{}", locked.port),
        "--ttl",
        "1h",
    ]);
    assert_eq!(ok.code, 0, "{}", ok.stderr);
    // A user without RL.SWEEP.
    let s = Server::start();
    let mut c = s.client();
    c.cmd(&["SET", "k", "v"]);
    c.cmd(&["ACL", "SETUSER", "ro", "on", ">pw", "~*", "+@read", "+info"]);
    one_line_error(
        &tool(&[
            "--url",
            &format!("redis://ro:pw@127.0.0.1:{}", s.port),
            "--ttl",
            "1h",
        ]),
        1,
        "the ACL user may not do this",
    );
    assert_eq!(c.cmd(&["PEXPIRETIME", "k"]).int(), -1);
    // Usage errors exit with 2.
    one_line_error(&tool(&["--url", &url(s.port)]), 2, "--ttl is required");
    one_line_error(&tool(&["--ttl", "5y"]), 2, "unknown unit");
    one_line_error(
        &tool(&["--ttl", "5", "--url", "redis://u:secret@h:0"]),
        2,
        "invalid --url 'redis://u:***@h:0'",
    );
    let help = tool(&["--help"]);
    assert_eq!(help.code, 0);
    assert!(help
        .stdout
        .starts_with("Usage: ratelimit-sweep --ttl DURATION"));
}

/// CRC16 (XMODEM) of the key's hash tag, as Cluster computes slots.
fn slot(key: &[u8]) -> u16 {
    let tag = match key.iter().position(|&b| b == b'{') {
        Some(open) => match key[open + 1..].iter().position(|&b| b == b'}') {
            Some(len) if len > 0 => &key[open + 1..open + 1 + len],
            _ => key,
        },
        None => key,
    };
    let mut crc: u16 = 0;
    for &b in tag {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc & 0x3fff
}

#[test]
fn cluster_of_three_primaries() {
    let cluster = Cluster::start(3);
    let nodes = &cluster.nodes;
    // Which node serves which slot.
    let mut owner = vec![usize::MAX; 16384];
    let mut c0 = nodes[0].client();
    for range in c0.cmd(&["CLUSTER", "SLOTS"]).array() {
        let r = range.array();
        let port = r[2].array()[1].int() as u16;
        let i = nodes
            .iter()
            .position(|n| n.port == port)
            .expect("known node");
        for s in r[0].int()..=r[1].int() {
            owner[s as usize] = i;
        }
    }
    // 3 000 persistent `app:N`, 300 `app:ttl:N` with TTLs, 600 persistent `other:N`,
    // each written to its own node.
    let mut per_node: Vec<Vec<Vec<Vec<u8>>>> = vec![Vec::new(); 3];
    let mut names = Vec::new();
    for i in 0..3_000 {
        names.push((format!("app:{i}"), None));
    }
    for i in 0..300 {
        names.push((format!("app:ttl:{i}"), Some(900_000 + i)));
    }
    for i in 0..600 {
        names.push((format!("other:{i}"), None));
    }
    for (k, ttl) in &names {
        let cmd = match ttl {
            Some(ms) => args!["SET", k, "v", "PX", ms],
            None => args!["SET", k, "v"],
        };
        per_node[owner[slot(k.as_bytes()) as usize]].push(cmd);
    }
    let mut clients: Vec<Client> = nodes.iter().map(Server::client).collect();
    let mut before = BTreeMap::new();
    for (c, cmds) in clients.iter_mut().zip(&per_node) {
        assert!(cmds.len() > 500, "keys spread over the nodes");
        for r in c.pipeline(cmds) {
            assert_eq!(r, Value::Status("OK".into()));
        }
        before.extend(expiries(c));
    }
    assert_eq!(before.len(), names.len());

    let dry = tool(&[
        "--url",
        &url(nodes[1].port),
        "--ttl",
        "1d",
        "--match",
        "app:*",
        "--dry-run",
    ]);
    assert_eq!(dry.code, 0, "{}", dry.stderr);
    assert!(
        dry.stderr.contains("cluster: sweeping 3 primaries"),
        "{}",
        dry.stderr
    );
    assert!(dry.stdout.contains("on 3 nodes"), "{}", dry.stdout);
    assert!(dry.stdout.contains("would expire 3000 "), "{}", dry.stdout);
    let t0 = unix_ms() as i64;
    let run = tool(&[
        "--url",
        &url(nodes[1].port),
        "--ttl",
        "1d",
        "--match",
        "app:*",
    ]);
    let t1 = unix_ms() as i64;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        run.stdout
            .lines()
            .filter(|l| l.starts_with("node "))
            .count(),
        3
    );
    assert!(
        run.stdout.contains("expired 3000 (ttl 1d)"),
        "{}",
        run.stdout
    );
    let mut after = BTreeMap::new();
    for c in clients.iter_mut() {
        after.extend(expiries(c));
    }
    assert_eq!(after.len(), before.len());
    for (k, e) in after {
        if k.starts_with("app:ttl:") || k.starts_with("other:") {
            assert_eq!(e, before[&k], "{k}");
        } else {
            assert!(e >= t0 + 86_400_000 && e <= t1 + 86_400_000, "{k}: {e}");
        }
    }
}

/// The parts of `secret` of 4 characters or more found in `text`.
fn leaked(text: &str, secret: &str) -> Vec<String> {
    let c: Vec<char> = secret.chars().collect();
    let mut out = Vec::new();
    for len in 4..=c.len() {
        for w in c.windows(len) {
            let piece: String = w.iter().collect();
            if text.contains(&piece) {
                out.push(piece);
            }
        }
    }
    out
}

fn assert_no_leak(r: &Run, secrets: &[&str]) {
    for secret in secrets {
        let shown = leaked(&format!("{}{}", r.stdout, r.stderr), secret);
        assert!(
            shown.is_empty(),
            "{secret:?} shows as {shown:?} in\nstdout {}\nstderr {}",
            r.stdout,
            r.stderr
        );
    }
}

/// Runs the tool for each argument list (with `--ttl 1h` added) and checks it stops
/// with a one-line usage error that shows no part of `secrets`.
fn usage_errors_show_no_secret(cases: &[Vec<String>], secrets: &[&str]) {
    for args in cases {
        let mut all: Vec<&str> = args.iter().map(String::as_str).collect();
        all.extend(["--ttl", "1h"]);
        let r = tool(&all);
        assert_no_leak(&r, secrets);
        one_line_error(&r, 2, "");
    }
}

/// The password alone in the URL, as redis-cli reads `redis://pass@host`: it works
/// against `requirepass`, and no message (usage errors, a wrong password, the
/// warning about the command line) shows any part of it.
#[test]
fn password_alone_in_the_url_works_and_is_never_shown() {
    let s = Server::start();
    let mut c = s.client();
    c.cmd(&["SET", "k", "v"]);
    c.cmd(&["CONFIG", "SET", "requirepass", "S3cretPass"]);
    let at = |userinfo: &str| format!("redis://{userinfo}@127.0.0.1:{}", s.port);
    let secrets = ["S3cretPass", "Wr0ngPass"];
    let arg = |a: &str| a.to_string();

    // Usage errors with the password in the URL: a bad port, a bad escape, TLS, a
    // URL without --url before it.
    usage_errors_show_no_secret(
        &[
            vec![arg("--url"), arg("redis://S3cretPass@127.0.0.1:0")],
            vec![
                arg("--url"),
                format!("redis://S3cretPass@127.0.0.1:{}x", s.port),
            ],
            vec![arg("--url"), at("S3cretPass%zz")],
            vec![
                arg("--url"),
                format!("rediss://S3cretPass@127.0.0.1:{}", s.port),
            ],
            vec![at("S3cretPass")],
            vec![format!("--url:{}", at("S3cretPass"))],
        ],
        &secrets,
    );
    for url in [
        at("S3cretPass"),
        at(":S3cretPass"),
        at("default:S3cretPass"),
    ] {
        let r = tool(&["--url", &url, "--ttl", "1h", "--dry-run"]);
        assert_no_leak(&r, &secrets);
        assert_eq!(r.code, 0, "{url}: {}", r.stderr);
        assert!(r.stdout.contains("would expire 1 "), "{}", r.stdout);
        // A password on the command line: a warning, without it.
        assert!(
            r.stderr
                .contains("warning: the password in --url can be read by other users"),
            "{}",
            r.stderr
        );
    }
    for url in [at("Wr0ngPass"), at(":Wr0ngPass"), at("default:Wr0ngPass")] {
        let r = tool(&["--url", &url, "--ttl", "1h"]);
        assert_no_leak(&r, &secrets);
        one_line_error(
            &r,
            1,
            &format!(
                "authentication failed at 127.0.0.1:{} with the password in --url: WRONGPASS",
                s.port
            ),
        );
    }
    assert_eq!(c.cmd(&["PEXPIRETIME", "k"]).int(), -1, "nothing changed");
}

/// A password with unencoded `@`, `:` and `/` (an ACL user's, and the default
/// user's): it works written as it is (the userinfo ends at the last `@`) or
/// percent-encoded; a password alone cut in two by them is refused; no message
/// shows any part of it.
#[test]
fn unencoded_at_colon_slash_in_a_password_never_show() {
    let s = Server::start();
    let mut c = s.client();
    c.cmd(&["SET", "k", "v"]);
    c.cmd(&[
        "ACL",
        "SETUSER",
        "sweeper",
        "on",
        ">p@ss:w/rd",
        "~*",
        "+@all",
    ]);
    let at = |userinfo: &str| format!("redis://{userinfo}@127.0.0.1:{}", s.port);
    let secrets = ["p@ss:w/rd", "n0t@th:e/one"];
    let arg = |a: &str| a.to_string();

    usage_errors_show_no_secret(
        &[
            // A bad port after the password.
            vec![
                arg("--url"),
                format!("redis://sweeper:p@ss:w/rd@127.0.0.1:{}x", s.port),
            ],
            vec![arg("--url"), arg("redis://:p@ss:w/rd@127.0.0.1:0")],
            // A password alone whose `:` would make a user name of its start.
            vec![arg("--url"), at("p@ss:w/rd")],
            vec![arg("--url"), at("n0t@th:e/one")],
            vec![
                arg("--url"),
                format!("redis://p@ss:w/rd@127.0.0.1:{}/x", s.port),
            ],
        ],
        &secrets,
    );
    for url in [
        at("sweeper:p@ss:w/rd"),
        at("sweeper:p%40ss%3Aw%2Frd"),
        format!("redis://sweeper:p@ss:w/rd@127.0.0.1:{}/0", s.port),
    ] {
        let r = tool(&["--url", &url, "--ttl", "1h", "--dry-run"]);
        assert_no_leak(&r, &secrets);
        assert_eq!(r.code, 0, "{url}: {}", r.stderr);
        assert!(r.stdout.contains("would expire 1 "), "{}", r.stdout);
    }
    for url in [at("sweeper:n0t@th:e/one"), at("sweeper:n0t%40th%3Ae%2Fone")] {
        let r = tool(&["--url", &url, "--ttl", "1h"]);
        assert_no_leak(&r, &secrets);
        one_line_error(&r, 1, "authentication failed at 127.0.0.1:");
    }
    // The default user's password, the same way.
    c.cmd(&["CONFIG", "SET", "requirepass", "p@ss:w/rd"]);
    let r = tool(&["--url", &at(":p@ss:w/rd"), "--ttl", "1h", "--dry-run"]);
    assert_no_leak(&r, &secrets);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let r = tool(&["--url", &at(":n0t@th:e/one"), "--ttl", "1h"]);
    assert_no_leak(&r, &secrets);
    one_line_error(&r, 1, "WRONGPASS");
    assert_eq!(c.cmd(&["PEXPIRETIME", "k"]).int(), -1, "nothing changed");
}

/// The password from REDISCLI_AUTH (as redis-cli) or a file, off the command line;
/// a file wins over the environment, a URL password too (as in redis-cli); wrong
/// ones are reported by source, without the password.
#[test]
fn password_from_the_environment_or_a_file() {
    let s = Server::start();
    let mut c = s.client();
    c.cmd(&["SET", "k", "v"]);
    c.cmd(&["CONFIG", "SET", "requirepass", "Env:S3cret@x"]);
    c.cmd(&["ACL", "SETUSER", "app", "on", ">f1le/S3cret", "~*", "+@all"]);
    let u = url(s.port);
    let secrets = ["Env:S3cret@x", "f1le/S3cret", "Wr0ngPass"];
    let dir = s.dir.join("pw");
    std::fs::create_dir_all(&dir).expect("dir");
    let file = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).expect("write");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        p.to_str().expect("utf-8").to_string()
    };
    let right = file("right", "f1le/S3cret\n");
    let wrong = file("wrong", "Wr0ngPass\r\n");

    let r = tool_env(
        &["--url", &u, "--ttl", "1h", "--dry-run"],
        &[("REDISCLI_AUTH", "Env:S3cret@x")],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!r.stderr.contains("warning"), "{}", r.stderr);
    assert_no_leak(&r, &secrets);

    // The file (first line, line end stripped), with a user, wins over the environment.
    let r = tool_env(
        &[
            "--url",
            &u,
            "--user",
            "app",
            "--password-file",
            &right,
            "--ttl",
            "1h",
            "--dry-run",
        ],
        &[("REDISCLI_AUTH", "Wr0ngPass")],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!r.stderr.contains("warning"), "{}", r.stderr);
    assert_no_leak(&r, &secrets);
    // A user in the URL with an empty password: the password comes from the environment.
    let r = tool_env(
        &[
            "--url",
            &format!("redis://app:@127.0.0.1:{}", s.port),
            "--ttl",
            "1h",
            "--dry-run",
        ],
        &[("REDISCLI_AUTH", "f1le/S3cret")],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    // A password in the URL wins over the environment, and says so.
    let r = tool_env(
        &[
            "--url",
            &format!("redis://:Env%3AS3cret%40x@127.0.0.1:{}", s.port),
            "--ttl",
            "1h",
            "--dry-run",
        ],
        &[("REDISCLI_AUTH", "Wr0ngPass")],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("REDISCLI_AUTH is set but the password in --url is used"),
        "{}",
        r.stderr
    );
    assert_no_leak(&r, &secrets);

    // Wrong ones, by source.
    let r = tool_env(
        &["--url", &u, "--ttl", "1h"],
        &[("REDISCLI_AUTH", "Wr0ngPass")],
    );
    one_line_error(&r, 1, "with the password in REDISCLI_AUTH: WRONGPASS");
    assert_no_leak(&r, &secrets);
    let r = tool(&["--url", &u, "--password-file", &wrong, "--ttl", "1h"]);
    one_line_error(&r, 1, "with the password from --password-file: WRONGPASS");
    assert_no_leak(&r, &secrets);
    // No password: the hint names the ways to give one.
    let r = tool(&["--url", &u, "--ttl", "1h"]);
    one_line_error(
        &r,
        1,
        "requires authentication: give the password with REDISCLI_AUTH or --password-file",
    );
    // A missing file: the path is not quoted (a password put there by mistake).
    let r = tool(&["--url", &u, "--password-file", "Wr0ngPass", "--ttl", "1h"]);
    one_line_error(&r, 2, "cannot read the file given with --password-file: ");
    assert_no_leak(&r, &secrets);
    // Two passwords on the command line: refused.
    let r = tool(&[
        "--url",
        &format!("redis://:x@127.0.0.1:{}", s.port),
        "--password-file",
        &right,
        "--ttl",
        "1h",
    ]);
    one_line_error(
        &r,
        2,
        "a password is given both in --url and with --password-file",
    );
    // A file others may read: a warning.
    let open = dir.join("open");
    std::fs::write(&open, "Env:S3cret@x\n").expect("write");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let r = tool(&[
        "--url",
        &u,
        "--password-file",
        open.to_str().expect("utf-8"),
        "--ttl",
        "1h",
        "--dry-run",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr.contains("can be read by other users (mode 0644)"),
        "{}",
        r.stderr
    );
    assert_no_leak(&r, &secrets);
    assert_eq!(
        c.cmd(&["PEXPIRETIME", "k"]).int(),
        -1,
        "dry runs and failures change nothing"
    );
}

/// `INFO keyspace` of a client: (keys, keys with a TTL) by database.
fn keyspace(c: &mut Client) -> BTreeMap<u32, (u64, u64)> {
    let info = c.cmd(&["INFO", "keyspace"]).text();
    let mut out = BTreeMap::new();
    for line in info.lines() {
        let Some((db, fields)) = line.trim().split_once(':') else {
            continue;
        };
        let Some(db) = db.strip_prefix("db").and_then(|d| d.parse().ok()) else {
            continue;
        };
        let field = |name: &str| -> u64 {
            fields
                .split(',')
                .find_map(|f| f.strip_prefix(name)?.strip_prefix('=')?.parse().ok())
                .unwrap_or(0)
        };
        out.insert(db, (field("keys"), field("expires")));
    }
    out
}

/// Every database that has keys is swept, not only database 0; `--db` (or `/db` in
/// the URL) restricts it, and the summary names what was skipped, with its keys
/// without a TTL.
#[test]
fn every_database_with_keys_or_those_named() {
    let s = Server::start();
    let mut c = s.client();
    for (db, n) in [("0", "300"), ("2", "200"), ("5", "100")] {
        c.cmd(&["SELECT", db]);
        c.cmd(&["DEBUG", "POPULATE", n, "k"]);
    }
    c.cmd(&["SELECT", "5"]);
    c.cmd(&["SET", "withttl", "v", "EX", "1000"]);
    c.cmd(&["SELECT", "0"]);

    // By default every database with keys; a dry run first.
    let r = tool(&["--url", &url(s.port), "--ttl", "1h", "--dry-run"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains("would expire 600 (ttl 1h)"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout
            .contains("databases: swept db 0 (300 keys), db 2 (200 keys), db 5 (101 keys)\n"),
        "{}",
        r.stdout
    );

    // --db 2 (and the URL's /0 in a second run): only those, the others named.
    let r = tool(&["--url", &url(s.port), "--ttl", "1h", "--db", "2"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("expired 200 (ttl 1h)"), "{}", r.stdout);
    assert!(
        r.stdout.contains(
            "databases: swept db 2 (200 keys); skipped (not in --db) db 0 (300 keys, 300 without a TTL), db 5 (101 keys, 100 without a TTL)"
        ),
        "{}",
        r.stdout
    );
    assert!(
        r.stderr
            .contains("skipping db 5: 101 keys, 100 of them without a TTL"),
        "{}",
        r.stderr
    );
    let ks = keyspace(&mut c);
    assert_eq!(ks[&0], (300, 0));
    assert_eq!(ks[&2], (200, 200));
    assert_eq!(ks[&5], (101, 1));
    let r = tool(&[
        "--url",
        &format!("{}/0", url(s.port)),
        "--ttl",
        "1h",
        "--dry-run",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("would expire 300 "), "{}", r.stdout);
    assert!(
        r.stdout
            .contains("skipped (not in --db) db 2 (200 keys, 0 without a TTL), db 5"),
        "{}",
        r.stdout
    );

    // By default: every database with keys, each one named with its own figures.
    let r = tool(&["--url", &url(s.port), "--ttl", "1h"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("expired 400 (ttl 1h)"), "{}", r.stdout);
    assert!(
        r.stdout.contains("  db 0: scanned 300, expired 300, "),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("  db 2: scanned 200, expired 0, "),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("  db 5: scanned 101, expired 100, "),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout
            .contains("databases: swept db 0 (300 keys), db 2 (200 keys), db 5 (101 keys)\n"),
        "{}",
        r.stdout
    );
    assert!(
        r.stderr.contains(&format!(
            "sweeping 127.0.0.1:{} (db 0, 2, 5): 601 keys",
            s.port
        )),
        "{}",
        r.stderr
    );
    let ks = keyspace(&mut c);
    assert!(ks.values().all(|&(keys, ttl)| keys == ttl), "{ks:?}");
    // A database that does not exist: an error before anything is done.
    one_line_error(
        &tool(&["--url", &url(s.port), "--ttl", "1h", "--db", "99"]),
        1,
        "cannot select database 99",
    );
}

/// Runs the tool in the background, waits until `started` says the sweep is under
/// way, sends `signal`, and returns what the tool printed.
///
/// The tool keeps a signal ignored when it was ignored at its start (as `nohup` and
/// the background jobs of a non-interactive shell start it), so the test gives it the
/// default dispositions whatever the test itself was started with: a test run in the
/// background once saw SIGINT ignored, and the sweep ran to its end.
fn interrupt(args: &[&str], signal: i32, mut started: impl FnMut() -> bool) -> Run {
    let start = Instant::now();
    let mut command = Command::new(sweep_tool_path());
    command
        .args(args)
        .env_remove("REDISCLI_AUTH")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: between fork and exec the closure only calls signal(), which is
    // async-signal-safe, and allocates nothing.
    unsafe {
        command.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            libc::signal(libc::SIGTERM, libc::SIG_DFL);
            Ok(())
        });
    }
    let child = command.spawn().expect("run ratelimit-sweep");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !started() {
        assert!(Instant::now() < deadline, "the sweep never started");
        std::thread::sleep(Duration::from_millis(10));
    }
    let pid = i32::try_from(child.id()).expect("pid");
    // SAFETY: kill() only sends a signal to the child started above.
    assert_eq!(unsafe { libc::kill(pid, signal) }, 0);
    let out = child.wait_with_output().expect("wait");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        took: start.elapsed(),
    }
}

/// The number after `word ` in `line`.
fn figure(line: &str, word: &str) -> u64 {
    line.split_once(&format!("{word} "))
        .and_then(|(_, rest)| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no '{word} N' in {line:?}"))
}

/// Ctrl-C (SIGINT) and SIGTERM in the middle of a sweep of two databases: the tool
/// stops after its current call, prints per node and database what it did, and
/// exits with 130 or 143; the keys it says it gave a TTL are exactly those that
/// have one on the server. A third run finishes the job.
#[test]
fn ctrl_c_and_sigterm_print_what_was_done() {
    let s = Server::start();
    let mut c = s.client();
    c.cmd(&["DEBUG", "POPULATE", "20000", "a"]);
    c.cmd(&["SELECT", "1"]);
    c.cmd(&["DEBUG", "POPULATE", "20000", "b"]);
    c.cmd(&["SELECT", "0"]);
    let with_ttl = |c: &mut Client| -> (u64, u64) {
        let ks = keyspace(c);
        (ks[&0].1, ks[&1].1)
    };
    // 40 000 keys at 5 000 keys/s: 8 s; stopped as soon as keys get TTLs.
    let u = url(s.port);
    let args = ["--url", &u, "--ttl", "1h", "--max-rate", "5000"];
    let mut probe = s.client();
    let r = interrupt(&args, libc::SIGINT, || with_ttl(&mut probe).0 > 0);
    assert_eq!(r.code, 130, "stdout {}\nstderr {}", r.stdout, r.stderr);
    let last = r.stdout.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("interrupted by SIGINT: scanned "),
        "{}",
        r.stdout
    );
    assert!(
        last.ends_with("before stopping; run the same command again to sweep the rest"),
        "{last}"
    );
    let (db0, db1) = with_ttl(&mut c);
    assert!(
        db0 > 0 && db0 < 20_000 && db1 == 0,
        "{db0} {db1}: stopped mid-sweep"
    );
    assert_eq!(figure(last, "expired"), db0, "{}", r.stdout);
    assert!(r.stdout.contains("  db 0: scanned "), "{}", r.stdout);
    assert!(
        r.stdout.contains(&format!(", expired {db0}, ")),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("(stopped before the end)"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout
            .contains("  db 1: scanned 0, expired 0, 0 calls (not started)"),
        "{}",
        r.stdout
    );

    // SIGTERM, later: a second run goes on with what is left.
    let r = interrupt(&args, libc::SIGTERM, || {
        with_ttl(&mut probe).0 > db0 + 2_000
    });
    assert_eq!(r.code, 143, "stdout {}\nstderr {}", r.stdout, r.stderr);
    let last = r.stdout.lines().last().unwrap_or_default();
    assert!(last.starts_with("interrupted by SIGTERM: "), "{}", r.stdout);
    let (db0_now, db1_now) = with_ttl(&mut c);
    assert_eq!(
        figure(last, "expired"),
        db0_now + db1_now - db0,
        "{}",
        r.stdout
    );

    // To the end.
    let r = tool(&args);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        figure(r.stdout.lines().last().unwrap_or_default(), "expired"),
        40_000 - db0_now - db1_now,
        "{}",
        r.stdout
    );
    assert_eq!(with_ttl(&mut c), (20_000, 20_000));
}

/// Keys added during a sweep: the progress total grows with them, so it never
/// shows more keys scanned than the total, nor more than 100 %.
#[test]
fn progress_never_claims_more_than_all_keys() {
    let s = Server::start();
    let mut c = s.client();
    c.cmd(&["DEBUG", "POPULATE", "3000", "old"]);
    let u = url(s.port);
    let mut child = Command::new(sweep_tool_path())
        .args([
            "--url",
            &u,
            "--ttl",
            "1h",
            "--max-rate",
            "4000",
            "--count",
            "200",
        ])
        .env_remove("REDISCLI_AUTH")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run ratelimit-sweep");
    // As soon as the sweep has begun, 9 000 more keys.
    let deadline = Instant::now() + Duration::from_secs(10);
    while keyspace(&mut c).get(&0).map_or(0, |k| k.1) == 0 {
        assert!(Instant::now() < deadline, "the sweep never started");
        std::thread::sleep(Duration::from_millis(5));
    }
    let cmds: Vec<Vec<Vec<u8>>> = (0..9_000)
        .map(|i| args!["SET", format!("new:{i}"), "v"])
        .collect();
    c.pipeline(&cmds);
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().expect("wait").is_none() {
        assert!(Instant::now() < deadline, "the sweep never ended");
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().expect("output");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("progress: "))
        .collect();
    assert!(!lines.is_empty(), "{stderr}");
    let mut biggest_total = 0;
    for line in &lines {
        let (scanned, total) = line
            .strip_prefix("progress: scanned ")
            .and_then(|l| l.split_once(" keys"))
            .and_then(|(counts, _)| counts.split_once('/'))
            .and_then(|(a, b)| Some((a.parse::<u64>().ok()?, b.parse::<u64>().ok()?)))
            .unwrap_or_else(|| panic!("{line}"));
        assert!(scanned <= total, "{line}");
        let pct: f64 = line
            .split_once(" keys (")
            .and_then(|(_, p)| p.split_once("%)"))
            .and_then(|(p, _)| p.parse().ok())
            .unwrap_or_else(|| panic!("{line}"));
        assert!(pct <= 100.0, "{line}");
        biggest_total = biggest_total.max(total);
    }
    // The sweep did visit added keys, and the total followed.
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(figure(&stdout, "scanned") > 3_000, "{stdout}");
    assert!(biggest_total > 3_000, "{lines:?}");
}

#[test]
fn takes_h_p_a_like_redis_cli_and_an_unknown_type_is_an_error() {
    let s = Server::start();
    let mut c = s.client();
    fill(&mut c);
    c.cmd(&["ACL", "SETUSER", "default", ">pw-of-default"]);
    let port = s.port.to_string();
    // A misspelt type matched no key and reported "expired 0": now a usage error, and
    // nothing is touched.
    let r = tool_env(
        &[
            "-h",
            "127.0.0.1",
            "-p",
            &port,
            "--ttl",
            "10m",
            "--type",
            "hahs",
        ],
        &[("REDISCLI_AUTH", "pw-of-default")],
    );
    assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stderr
            .contains("unknown --type 'hahs': must be string, list, set, zset, hash or stream"),
        "{}",
        r.stderr
    );
    // -h, -p and -a as redis-cli takes them (with its warning about -a).
    let r = tool(&[
        "-h",
        "127.0.0.1",
        "-p",
        &port,
        "-a",
        "pw-of-default",
        "--ttl",
        "10m",
        "--type",
        "hash",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("expired 1 (ttl 10m)"), "{}", r.stdout);
    assert!(
        r.stderr
            .contains("warning: the password given with -a can be read by other users"),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("pw-of-default") && !r.stdout.contains("pw-of-default"));
    c.cmd(&["AUTH", "pw-of-default"]);
    assert!(c.cmd(&["PEXPIRETIME", "app:h"]).int() > 0);
    // -n is the database, as redis-cli's.
    let r = tool(&[
        "-p",
        &port,
        "-a",
        "pw-of-default",
        "-n",
        "5",
        "--ttl",
        "10m",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("expired 0"), "{}", r.stdout);
    // The address in both forms is refused.
    let r = tool(&["--url", &url(s.port), "-p", &port, "--ttl", "10m"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("the address is given both in --url and with -h/-p"),
        "{}",
        r.stderr
    );
    c.cmd(&["ACL", "SETUSER", "default", "nopass"]);
}
