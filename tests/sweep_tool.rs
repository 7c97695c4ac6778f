//! The `ratelimit-sweep` tool end to end: against a real server (dry run, real run,
//! ACL user, rate limit, errors) and against a three-primary Cluster.

mod common;

use common::{sweep_tool_path, unix_ms, Client, Cluster, Server, Value};
use std::collections::BTreeMap;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
    took: Duration,
}

fn tool(args: &[&str]) -> Run {
    let start = Instant::now();
    let Output {
        status,
        stdout,
        stderr,
    } = Command::new(sweep_tool_path())
        .args(args)
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
