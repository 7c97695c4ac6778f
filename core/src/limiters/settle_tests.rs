//! `REFUND`, `FORCE` and RL.ALL's `BAN` rule, on every limiter: calls parsed by each
//! command's parser and run by the module's one loop on keys held in memory
//! ([`memory::run`]), with explicit times.

use crate::call::limiter::Limiter;
use crate::call::memory::{self, Key};
use crate::call::{Call, Shape};
use crate::error::{Error, Result};
use crate::units::{Micros, UnixMillis};
use proptest::prelude::*;
use std::collections::BTreeMap;

/// An arbitrary instant on a second boundary, in ms.
const T0: u64 = 1_900_000_000_000;

/// Keys held in memory by name, as a server holds them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Server(BTreeMap<Vec<u8>, Key>);

/// What a call replies: its five fields, and for RL.ALL the binding rule (1-based).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Reply {
    fields: [i64; 5],
    binding: usize,
    /// With `UPTO`: the units taken.
    granted: Option<i64>,
}

impl Server {
    /// `CMD args...` at `T0 + ms`: the reply or the error; the writes applied.
    fn call(&mut self, ms: u64, line: &str) -> Result<Reply> {
        let words: Vec<&str> = line.split_whitespace().collect();
        let (cmd, args) = words.split_first().expect("a command");
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        let now = Micros::from_millis(T0 + ms);
        match cmd.to_ascii_uppercase().as_str() {
            "RL.FIXED" => self.run(crate::limiters::fixed::parse(&args), &args, now),
            "RL.GCRA" => self.run(crate::limiters::gcra::parse(&args), &args, now),
            "RL.MULTI" => self.run(crate::limiters::multi::parse(&args), &args, now),
            "RL.SLIDING" => self.run(crate::limiters::sliding::parse(&args), &args, now),
            "RL.LOG" => self.run(crate::limiters::log::parse(&args), &args, now),
            "RL.ALL" => self.run(crate::limiters::all(&args), &args, now),
            other => panic!("not a limiter: {other}"),
        }
    }

    fn run<R: Limiter>(
        &mut self,
        call: Result<Call<R>>,
        args: &[&[u8]],
        now: Micros,
    ) -> Result<Reply> {
        let call = call?;
        let first = call.first_key() - 1;
        let names: Vec<Vec<u8>> = (0..call.numkeys)
            .map(|k| args[first + k].to_vec())
            .collect();
        let mut keys: Vec<Option<Key>> = names.iter().map(|n| self.0.get(n).cloned()).collect();
        let s = memory::run(&call, &mut keys, call.at.unwrap_or(now))?;
        for (name, key) in names.into_iter().zip(keys) {
            match key {
                Some(k) => self.0.insert(name, k),
                None => self.0.remove(&name),
            };
        }
        Ok(Reply {
            fields: s.verdict.fields(),
            binding: if call.shape == Shape::All {
                s.binding + 1
            } else {
                0
            },
            granted: s.granted,
        })
    }

    fn fields(&mut self, ms: u64, line: &str) -> [i64; 5] {
        match self.call(ms, line) {
            Ok(r) => r.fields,
            Err(e) => panic!("{line}: {e}"),
        }
    }

    /// A string key's value and its expiry (ms after T0).
    fn string(&self, name: &str) -> Option<(String, u64)> {
        match self.0.get(name.as_bytes())? {
            Key::String { value, expires_at } => Some((
                String::from_utf8_lossy(value).into_owned(),
                expires_at.map_or(u64::MAX, |e| e.0 - T0),
            )),
            Key::SortedSet { .. } => None,
        }
    }

    /// A sorted set's members (ms after T0, member) and its expiry (ms after T0).
    fn members(&self, name: &str) -> Option<(Vec<(u64, String)>, u64)> {
        match self.0.get(name.as_bytes())? {
            Key::SortedSet {
                members,
                expires_at,
            } => Some((
                members
                    .iter()
                    .map(|(s, m)| (s / 1000 - T0, String::from_utf8_lossy(m).into_owned()))
                    .collect(),
                expires_at.map_or(u64::MAX, |e| e.0 - T0),
            )),
            Key::String { .. } => None,
        }
    }

    fn set(&mut self, name: &str, value: &str, expires_ms: Option<u64>) {
        self.0.insert(
            name.as_bytes().to_vec(),
            Key::String {
                value: value.as_bytes().to_vec(),
                expires_at: expires_ms.map(|ms| UnixMillis(T0 + ms)),
            },
        );
    }
}

/// One step of a table: (ms after T0, the call, its five fields).
type Step = (u64, &'static str, [i64; 5]);

fn steps(server: &mut Server, steps: &[Step]) {
    for &(ms, line, want) in steps {
        assert_eq!(server.fields(ms, line), want, "at {ms}: {line}");
    }
}

#[test]
fn fixed_refund_and_force() {
    let mut s = Server::default();
    steps(
        &mut s,
        &[
            (0, "RL.FIXED k 10 1m COST 4", [0, 10, 6, -1, 60_000]),
            (
                1_000,
                "RL.FIXED k 10 1m COST 3 REFUND",
                [0, 10, 9, -1, 59_000],
            ),
        ],
    );
    assert_eq!(
        s.string("k"),
        Some(("1".into(), 60_000)),
        "the window's end kept"
    );
    steps(
        &mut s,
        &[
            // More than was taken empties, and the key goes.
            (2_000, "RL.FIXED k 10 1m COST 5 refund", [0, 10, 10, -1, 0]),
            // A refund on a missing key is a no-op.
            (3_000, "RL.FIXED k 10 1m REFUND", [0, 10, 10, -1, 0]),
        ],
    );
    assert_eq!(s.string("k"), None);
    steps(
        &mut s,
        &[
            (0, "RL.FIXED f 10 1m COST 8", [0, 10, 2, -1, 60_000]),
            (
                1_000,
                "RL.FIXED f 10 1m COST 2 FORCE",
                [0, 10, 0, -1, 59_000],
            ),
            // Over: field 1 is 1, field 4 is when a request of cost 1 fits again.
            (
                2_000,
                "RL.FIXED f 10 1m COST 5 FORCE",
                [1, 10, 0, 58_000, 58_000],
            ),
            (3_000, "RL.FIXED f 10 1m", [1, 10, 0, 57_000, 57_000]),
            (
                3_000,
                "RL.FIXED f 10 1m COST 3 REFUND",
                [0, 10, 0, -1, 57_000],
            ),
            (
                3_000,
                "RL.FIXED f 10 1m COST 3 REFUND",
                [0, 10, 1, -1, 57_000],
            ),
            (60_000, "RL.FIXED f 10 1m", [0, 10, 9, -1, 60_000]),
            // A forced cost above the limit is recorded, not refused.
            (
                0,
                "RL.FIXED g 10 1m COST 25 FORCE",
                [1, 10, 0, 60_000, 60_000],
            ),
            // A refund in a window that has ended touches nothing.
            (
                60_000,
                "RL.FIXED g 10 1m COST 25 REFUND",
                [0, 10, 10, -1, 0],
            ),
        ],
    );
    assert_eq!(s.string("g"), Some(("25".into(), 60_000)));
    // A counter without TTL gets a window starting now.
    s.set("n", "4", None);
    steps(
        &mut s,
        &[(0, "RL.FIXED n 10 1m COST 1 REFUND", [0, 10, 7, -1, 60_000])],
    );
    assert_eq!(s.string("n"), Some(("3".into(), 60_000)));
}

#[test]
fn gcra_refund_and_force() {
    let mut s = Server::default();
    // One per second, a burst of 5: T = 1 s.
    steps(
        &mut s,
        &[
            (0, "RL.GCRA k 4 1 1s COST 3", [0, 5, 2, -1, 3_000]),
            (0, "RL.GCRA k 4 1 1s COST 2 REFUND", [0, 5, 4, -1, 1_000]),
        ],
    );
    let tat = (T0 + 1_000) * 1_000;
    assert_eq!(s.string("k"), Some((tat.to_string(), 1_000)));
    steps(
        &mut s,
        &[
            // tat = max(now, tat - T * cost): at or before now, the key goes.
            (500, "RL.GCRA k 4 1 1s COST 5 REFUND", [0, 5, 5, -1, 0]),
            (600, "RL.GCRA k 4 1 1s REFUND", [0, 5, 5, -1, 0]),
        ],
    );
    assert_eq!(s.string("k"), None);
    steps(
        &mut s,
        &[
            // TAT 8 s ahead, the burst window 5 s: a cost of 1 fits after 4 s.
            (0, "RL.GCRA f 4 1 1s COST 8 FORCE", [1, 5, 0, 4_000, 8_000]),
            (3_999, "RL.GCRA f 4 1 1s", [1, 5, 0, 1, 4_001]),
            (4_000, "RL.GCRA f 4 1 1s", [0, 5, 0, -1, 5_000]),
            (4_000, "RL.GCRA f 4 1 1s COST 0 FORCE", [0, 5, 0, -1, 5_000]),
            (
                4_000,
                "RL.GCRA f 4 1 1s COST 1 FORCE",
                [1, 5, 0, 2_000, 6_000],
            ),
        ],
    );
    // The bound: a TAT beyond the latest AT plus the longest burst window.
    s.set("b", &crate::limits::MAX_TAT.0.to_string(), None);
    assert_eq!(
        s.call(0, "RL.GCRA b 4 1 1s FORCE"),
        Err(Error::ForceOutOfBounds {
            what: "a theoretical arrival time beyond the latest AT plus the longest burst window"
        })
    );
    assert_eq!(
        s.string("b").map(|(v, _)| v),
        Some(crate::limits::MAX_TAT.0.to_string())
    );
}

#[test]
fn multi_and_sliding_refund_and_force() {
    let mut s = Server::default();
    let m = "RL.MULTI 1 m LIMIT 1s 5 LIMIT 1m 10";
    steps(
        &mut s,
        &[(
            0,
            "RL.MULTI 1 m LIMIT 1s 5 LIMIT 1m 10 COST 4",
            [0, 5, 1, -1, 1_000],
        )],
    );
    let _ = m;
    // The 1 s window has ended: untouched (and dropped); the minute gives back 1.
    steps(
        &mut s,
        &[(
            1_500,
            "RL.MULTI 1 m LIMIT 1s 5 LIMIT 1m 10 COST 1 REFUND",
            [0, 5, 5, -1, 0],
        )],
    );
    assert_eq!(
        s.string("m"),
        Some((format!("60000:3:{}", T0 + 60_000), 60_000))
    );
    steps(
        &mut s,
        &[(
            1_600,
            "RL.MULTI 1 m LIMIT 1s 5 LIMIT 1m 10 COST 9 REFUND",
            [0, 5, 5, -1, 0],
        )],
    );
    assert_eq!(s.string("m"), None, "every window empty again: deleted");
    // Forced over the 1 s window: it binds, with its wait.
    steps(
        &mut s,
        &[
            (
                0,
                "RL.MULTI 1 m LIMIT 1s 5 LIMIT 1m 10 COST 7 FORCE",
                [1, 5, 0, 1_000, 1_000],
            ),
            (
                1_000,
                "RL.MULTI 1 m LIMIT 1s 5 LIMIT 1m 10 COST 3",
                [0, 10, 0, -1, 59_000],
            ),
            (
                1_000,
                "RL.MULTI 1 m LIMIT 1s 5 LIMIT 1m 10 COST 3 REFUND",
                [0, 10, 3, -1, 59_000],
            ),
            // Over both: the minute frees up last.
            (
                1_000,
                "RL.MULTI 1 m LIMIT 1s 5 LIMIT 1m 10 COST 6 FORCE",
                [1, 10, 0, 59_000, 59_000],
            ),
            // Over the second and exactly full in the minute: a cost of 1 fits when
            // the minute ends.
            (
                0,
                "RL.MULTI 1 z LIMIT 1s 5 LIMIT 1m 6 COST 6 FORCE",
                [1, 5, 0, 60_000, 1_000],
            ),
        ],
    );
    assert_eq!(
        s.string("m"),
        Some((
            format!("1000:6:{},60000:13:{}", T0 + 2_000, T0 + 60_000),
            60_000
        ))
    );

    // Sliding: 10 per 10 s in buckets of 1 s.
    let mut s = Server::default();
    steps(
        &mut s,
        &[
            (
                0,
                "RL.SLIDING 1 s LIMIT 10s 10 COST 3",
                [0, 10, 7, -1, 11_000],
            ),
            (
                2_000,
                "RL.SLIDING 1 s LIMIT 10s 10 COST 2",
                [0, 10, 5, -1, 11_000],
            ),
            // Newest first: the 2 of the bucket at 2 s, then 2 of the bucket at 0 s.
            (
                3_000,
                "RL.SLIDING 1 s LIMIT 10s 10 COST 4 REFUND",
                [0, 10, 9, -1, 8_000],
            ),
        ],
    );
    let first = T0 / 1_000;
    assert_eq!(s.string("s"), Some((format!("10000:10:{first}:1"), 11_000)));
    steps(
        &mut s,
        &[
            // 13 counted: a cost of 1 fits when the forced bucket (at 3 s) has left.
            (
                3_000,
                "RL.SLIDING 1 s LIMIT 10s 10 COST 12 FORCE",
                [1, 10, 0, 11_000, 11_000],
            ),
            (13_999, "RL.SLIDING 1 s LIMIT 10s 10", [1, 10, 0, 1, 1]),
            (
                14_000,
                "RL.SLIDING 1 s LIMIT 10s 10",
                [0, 10, 9, -1, 11_000],
            ),
            (
                14_000,
                "RL.SLIDING 1 s LIMIT 10s 10 COST 99 REFUND",
                [0, 10, 10, -1, 0],
            ),
        ],
    );
    assert_eq!(s.string("s"), None);
}

#[test]
fn log_refund_and_force() {
    let mut s = Server::default();
    steps(
        &mut s,
        &[
            (0, "RL.LOG l 5 1m META a COST 2", [0, 5, 3, -1, 60_000]),
            (1_000, "RL.LOG l 5 1m META b COST 2", [0, 5, 1, -1, 60_000]),
            // b's whole cost, then one of a's two units.
            (2_000, "RL.LOG l 5 1m COST 3 REFUND", [0, 5, 4, -1, 58_000]),
        ],
    );
    assert_eq!(
        s.members("l"),
        Some((vec![(0, "0000000000000001:1:a".into())], 60_000)),
        "a keeps its META, its time and the rest of its cost"
    );
    steps(
        &mut s,
        &[
            (2_000, "RL.LOG l 5 1m META c", [0, 5, 3, -1, 60_000]),
            (3_000, "RL.LOG l 5 1m COST 9 REFUND", [0, 5, 5, -1, 0]),
            (3_000, "RL.LOG l 5 1m REFUND", [0, 5, 5, -1, 0]),
        ],
    );
    assert_eq!(s.members("l"), None, "nothing counted is left: deleted");
    steps(
        &mut s,
        &[
            (0, "RL.LOG f 5 1m META a COST 2", [0, 5, 3, -1, 60_000]),
            // 7 counted; a cost of 1 fits when the forced entry itself has left.
            (
                1_000,
                "RL.LOG f 5 1m META x COST 5 FORCE",
                [1, 5, 0, 60_000, 60_000],
            ),
            (1_000, "RL.LOG f 5 1m", [1, 5, 0, 60_000, 60_000]),
        ],
    );
    // Twice the limit at most: an error, nothing written.
    let before = s.clone();
    assert_eq!(
        s.call(2_000, "RL.LOG f 5 1m COST 4 FORCE"),
        Err(Error::LogForceOverTwice { limit: 5 })
    );
    assert_eq!(s, before);
    // A cost of 1 fits when the forced entry at 1 s has left.
    steps(
        &mut s,
        &[(
            2_000,
            "RL.LOG f 5 1m COST 3 FORCE",
            [1, 5, 0, 59_000, 60_000],
        )],
    );
    let (members, expiry) = s.members("f").unwrap();
    assert_eq!(members.len(), 3);
    assert_eq!(expiry, 62_000);
}

#[test]
fn all_applies_the_flag_to_every_rule() {
    let mut s = Server::default();
    let call = "RL.ALL 2 a b FIXED 1 10 1m GCRA 2 4 1 1s";
    steps(
        &mut s,
        &[(
            0,
            "RL.ALL 2 a b FIXED 1 10 1m GCRA 2 4 1 1s COST 3",
            [0, 5, 2, -1, 3_000],
        )],
    );
    let _ = call;
    steps(
        &mut s,
        &[(
            0,
            "RL.ALL 2 a b FIXED 1 10 1m GCRA 2 4 1 1s COST 3 REFUND",
            [0, 5, 5, -1, 0],
        )],
    );
    assert_eq!(s, Server::default(), "both keys full again: deleted");
    let r = s
        .call(0, "RL.ALL 2 a b FIXED 1 10 1m GCRA 2 4 1 1s COST 12 FORCE")
        .unwrap();
    // Both over: the FIXED rule frees up last (its window ends in a minute; the
    // GCRA rule after 12 + 1 - 5 = 8 s).
    assert_eq!(
        r,
        Reply {
            fields: [1, 10, 0, 60_000, 60_000],
            binding: 1,
            granted: None,
        }
    );
    assert_eq!(s.string("a"), Some(("12".into(), 60_000)));
    // Regression: the reply of a forced call waited for the rules over their limit
    // only, not for a rule left exactly full (the sliding window, full until 12 s).
    let mut s = Server::default();
    let all = "RL.ALL 3 k j i FIXED 1 1 2s GCRA 2 0 1 1s SLIDING 3 LIMIT 10s 7 BUCKETS 5";
    let r = s.call(0, &format!("{all} COST 7 FORCE")).unwrap();
    assert_eq!(
        r,
        Reply {
            fields: [1, 1, 0, 12_000, 7_000],
            binding: 2,
            granted: None,
        }
    );
    assert_eq!(s.call(11_999, all).unwrap().fields[0], 1);
    assert_eq!(s.call(12_000, all).unwrap().fields[0], 0);
}

#[test]
fn settle_flag_errors_write_nothing() {
    let mut s = Server::default();
    let bad: &[(&str, Error)] = &[
        ("RL.FIXED k 10 1m REFUND FORCE", Error::RefundAndForce),
        (
            "RL.GCRA k 4 1 1s DELAY 1s FORCE",
            Error::SettleWithDelay { flag: "FORCE" },
        ),
        (
            "RL.GCRA k 4 1 1s REFUND DELAY 1s",
            Error::SettleWithDelay { flag: "REFUND" },
        ),
        (
            "RL.MULTI 1 k LIMIT 1s 5 FORCE REFUND",
            Error::RefundAndForce,
        ),
        (
            "RL.SLIDING 1 k LIMIT 1s 5 REFUND REFUND",
            Error::RepeatedOption { name: "REFUND" },
        ),
        ("RL.LOG k 5 1m FORCE REFUND", Error::RefundAndForce),
        (
            "RL.ALL 1 k FIXED 1 5 1m REFUND FORCE",
            Error::RefundAndForce,
        ),
        (
            "RL.ALL 2 k b FIXED 1 5 1m BAN 2 2 1m 1h BAN 2 3 1m 1h",
            Error::InRule {
                index: 3,
                kind: "BAN",
                inner: Box::new(Error::PositionTaken { position: 2, by: 2 }),
            },
        ),
        (
            "RL.ALL 3 k b c FIXED 1 5 1m BAN 2 3 1m 1h BAN 3 3 1m 1h",
            Error::InRule {
                index: 3,
                kind: "BAN",
                inner: Box::new(Error::SecondBan),
            },
        ),
        (
            "RL.ALL 2 k b FIXED 1 5 1m BAN 2 0 1m 1h",
            Error::InRule {
                index: 2,
                kind: "BAN",
                inner: Box::new(Error::InvalidInteger {
                    what: "strikes",
                    value: b"0".to_vec(),
                    min: 1,
                }),
            },
        ),
    ];
    for (line, want) in bad {
        assert_eq!(s.call(0, line), Err(want.clone()), "{line}");
    }
    for line in [
        "RL.ALL 2 k b FIXED 1 5 1m BAN 2 3 0 1h",
        "RL.ALL 2 k b FIXED 1 5 1m BAN 2 3 1m 11y",
        "RL.ALL 2 k b FIXED 1 5 1m BAN 2 3 1m",
    ] {
        assert!(s.call(0, line).is_err(), "{line}");
    }
    assert_eq!(s, Server::default());
}

#[test]
fn a_ban_after_strikes_denies_every_call_until_it_ends() {
    let mut s = Server::default();
    let c = |cost: &str| format!("RL.ALL 2 u b FIXED 1 1 1m BAN 2 2 1m 10m{cost}");
    let call = |s: &mut Server, ms: u64, extra: &str| s.call(ms, &c(extra)).unwrap();
    assert_eq!(
        call(&mut s, 0, ""),
        Reply {
            fields: [0, 1, 0, -1, 60_000],
            binding: 1,
            granted: None,
        }
    );
    assert_eq!(
        s.string("b"),
        None,
        "an allowed call leaves the BAN key alone"
    );
    // Denied by FIXED: a strike, the FIXED rule binds.
    assert_eq!(
        call(&mut s, 1_000, ""),
        Reply {
            fields: [1, 1, 0, 59_000, 59_000],
            binding: 1,
            granted: None,
        }
    );
    assert_eq!(
        s.string("b"),
        Some((format!("strikes:1:{}", T0 + 61_000), 61_000))
    );
    // A denied peek records no strike.
    assert_eq!(call(&mut s, 1_500, " COST 0").fields[0], 0);
    assert_eq!(call(&mut s, 1_500, " COST 0 FORCE").fields[0], 0);
    assert_eq!(
        s.string("b"),
        Some((format!("strikes:1:{}", T0 + 61_000), 61_000))
    );
    // The second strike starts the ban: the BAN rule binds.
    assert_eq!(
        call(&mut s, 2_000, ""),
        Reply {
            fields: [1, 2, 0, 600_000, 600_000],
            binding: 2,
            granted: None,
        }
    );
    assert_eq!(
        s.string("b"),
        Some((format!("banned:{}", T0 + 602_000), 602_000))
    );
    let u = s.string("u");
    // Banned: denied without reading or writing the other keys, FORCE too.
    for (ms, extra) in [(61_000, ""), (300_000, " FORCE"), (601_999, " COST 0")] {
        assert_eq!(
            call(&mut s, ms, extra),
            Reply {
                fields: [1, 2, 0, 602_000 - ms as i64, 602_000 - ms as i64],
                binding: 2,
                granted: None,
            },
            "{ms}{extra}"
        );
    }
    assert_eq!(s.string("u"), u);
    // A refund is never denied, and records no strike.
    assert_eq!(call(&mut s, 300_000, " REFUND").fields[0], 0);
    assert_eq!(
        s.string("b"),
        Some((format!("banned:{}", T0 + 602_000), 602_000))
    );
    // The ban ends exactly at its end.
    assert_eq!(
        call(&mut s, 602_000, ""),
        Reply {
            fields: [0, 1, 0, -1, 60_000],
            binding: 1,
            granted: None,
        }
    );
    // A key that holds something else is refused.
    s.set("b", "banned:x", None);
    assert!(matches!(
        s.call(700_000, &c("")),
        Err(Error::InRule {
            index: 2,
            kind: "BAN",
            ..
        })
    ));
    // DEL lifts a ban.
    s.set("b", &format!("banned:{}", T0 + 10_000_000), None);
    assert_eq!(call(&mut s, 700_000, "").binding, 2);
    s.0.remove(&b"b"[..]);
    assert_eq!(call(&mut s, 700_000, "").fields[0], 0);
    // A BAN rule alone binds the allowed call: the strikes left, the window left.
    let mut s = Server::default();
    s.set("b", &format!("strikes:1:{}", T0 + 30_000), None);
    assert_eq!(
        s.call(0, "RL.ALL 1 b BAN 1 3 1m 1h").unwrap(),
        Reply {
            fields: [0, 3, 2, -1, 30_000],
            binding: 1,
            granted: None,
        }
    );
}

/// A random limiter rule on key `k`, as its command writes it, with a small capacity
/// (or RL.ALL with rules of three kinds on `k` and two more keys).
fn command() -> impl Strategy<Value = String> {
    prop_oneof![
        (1i64..8, prop_oneof![Just("1s"), Just("10s")], any::<bool>()).prop_map(|(l, w, a)| {
            format!("RL.FIXED k {l} {w}{}", if a { " ALIGN" } else { "" })
        }),
        (0i64..6, 1i64..4, prop_oneof![Just("1s"), Just("3s")])
            .prop_map(|(b, c, p)| format!("RL.GCRA k {b} {c} {p}")),
        (1i64..8, 1i64..12).prop_map(|(a, b)| format!("RL.MULTI 1 k LIMIT 1s {a} LIMIT 10s {b}")),
        (
            1i64..8,
            1i64..12,
            prop_oneof![Just(1u64), Just(5), Just(10)]
        )
            .prop_map(|(a, b, n)| format!("RL.SLIDING 1 k LIMIT 1s {a} LIMIT 10s {b} BUCKETS {n}")),
        (1i64..8, prop_oneof![Just("1s"), Just("10s")])
            .prop_map(|(l, w)| format!("RL.LOG k {l} {w} META m")),
        (1i64..8, 0i64..4, 1i64..12).prop_map(|(l, b, s)| format!(
            "RL.ALL 3 k j i FIXED 1 {l} 2s GCRA 2 {b} 1 1s SLIDING 3 LIMIT 10s {s} BUCKETS 5"
        )),
    ]
}

/// A history on one key: (ms after the previous step, cost, 0 take / 1 refund / 2 force).
fn history() -> impl Strategy<Value = Vec<(u64, i64, u8)>> {
    proptest::collection::vec((0u64..2_500, 0i64..6, 0u8..3), 0..24)
}

/// Play a history on `s`, ignoring errors (a cost above a capacity, a log at twice its
/// limit); the time after it.
fn play(s: &mut Server, cmd: &str, hist: &[(u64, i64, u8)]) -> u64 {
    let mut ms = 0;
    for &(dt, cost, mode) in hist {
        ms += dt;
        let flag = ["", " REFUND", " FORCE"][mode as usize];
        let _ = s.call(ms, &format!("{cmd} COST {cost}{flag}"));
    }
    ms
}

/// A peek's reply at `ms`.
fn peek(s: &mut Server, cmd: &str, ms: u64) -> [i64; 5] {
    s.clone().fields(ms, &format!("{cmd} COST 0"))
}

proptest! {
    /// A refund right after an allowed request of the same cost at the same time
    /// gives back exactly what it took: every reply after it is the same as without
    /// the pair, and FIXED's, GCRA's and LOG's keys are as they were (or gone, when
    /// they were empty).
    #[test]
    fn a_refund_undoes_the_request_it_follows(
        cmd in command(), hist in history(), dt in 0u64..3_000, cost in 1i64..4,
    ) {
        let mut s = Server::default();
        let ms = play(&mut s, &cmd, &hist) + dt;
        let before = s.clone();
        let taken = s.call(ms, &format!("{cmd} COST {cost}"));
        prop_assume!(matches!(taken, Ok(r) if r.fields[0] == 0));
        s.call(ms, &format!("{cmd} COST {cost} REFUND")).unwrap();
        for later in [ms, ms + 400, ms + 1_000, ms + 5_000, ms + 20_000] {
            prop_assert_eq!(peek(&mut s, &cmd, later), peek(&mut before.clone(), &cmd, later));
        }
        if cmd.starts_with("RL.FIXED") || cmd.starts_with("RL.GCRA") {
            let live = peek(&mut before.clone(), &cmd, ms)[4] > 0;
            if live {
                prop_assert_eq!(s.0.get(&b"k"[..]), before.0.get(&b"k"[..]));
            } else {
                prop_assert_eq!(s.0.get(&b"k"[..]), None);
            }
        }
    }

    /// Refunds never go below empty: a refund replies allowed with at most the
    /// capacity remaining, and one larger than anything taken leaves the key full
    /// again and deleted.
    #[test]
    fn refunds_never_go_below_empty(
        cmd in command(), hist in history(), dt in 0u64..3_000, cost in 1i64..40,
    ) {
        let mut s = Server::default();
        let ms = play(&mut s, &cmd, &hist) + dt;
        let r = s.fields(ms, &format!("{cmd} COST {cost} REFUND"));
        prop_assert_eq!(r[0], 0);
        prop_assert_eq!(r[3], -1);
        prop_assert!((0..=r[1]).contains(&r[2]));
        let all = s.fields(ms, &format!("{cmd} COST 9007199254740991 REFUND"));
        // Full: the binding window is the one of the smallest limit.
        prop_assert_eq!(all, [0, all[1], all[1], -1, 0]);
        if cmd.starts_with("RL.GCRA") {
            prop_assert_eq!(s.0.get(&b"k"[..]), None);
        }
        prop_assert_eq!(peek(&mut s, &cmd, ms), all);
    }

    /// A forced request is recorded; when it goes over, waiting its retry_after
    /// (in ms, as replied) always lets a request of cost 1 through, and the reply
    /// says so exactly when the state is over its limit.
    #[test]
    fn after_a_forced_request_retry_after_is_enough_for_a_cost_of_1(
        cmd in command(), hist in history(), dt in 0u64..3_000, cost in 1i64..12,
    ) {
        let mut s = Server::default();
        let ms = play(&mut s, &cmd, &hist) + dt;
        let Ok(r) = s.call(ms, &format!("{cmd} COST {cost} FORCE")) else {
            // Only a log refuses a force (twice its limit), and writes nothing.
            prop_assert!(cmd.starts_with("RL.LOG"));
            return Ok(());
        };
        let [limited, _, remaining, retry, _] = r.fields;
        prop_assert_eq!(limited == 1, retry > 0);
        if limited == 1 {
            prop_assert_eq!(remaining, 0);
            let later = ms + retry as u64;
            prop_assert_eq!(s.clone().fields(later, &format!("{cmd} COST 1"))[0], 0);
        } else {
            prop_assert_eq!(retry, -1);
        }
    }

    /// `UPTO` takes the largest cost up to `n` that a call of that cost would be allowed
    /// (found here by trying every cost), replies and writes exactly as that call
    /// (as `COST 1` when not even 1 fits), and says how much it took.
    #[test]
    fn upto_takes_the_largest_cost_that_fits_and_is_that_call(
        cmd in command(), hist in history(), dt in 0u64..3_000, n in 1i64..14,
    ) {
        let mut s = Server::default();
        let ms = play(&mut s, &cmd, &hist) + dt;
        let before = s.clone();
        let fits = |k: i64| {
            matches!(before.clone().call(ms, &format!("{cmd} COST {k}")), Ok(r) if r.fields[0] == 0)
        };
        let want = (1..=n).rev().find(|&k| fits(k)).unwrap_or(0);
        let upto = s.call(ms, &format!("{cmd} COST {n} UPTO"));
        let mut alone = before.clone();
        let same = alone.call(ms, &format!("{cmd} COST {}", want.max(1)));
        match (upto, same) {
            (Ok(u), Ok(c)) => {
                prop_assert_eq!(u.granted, Some(want));
                prop_assert_eq!((u.fields, u.binding), (c.fields, c.binding));
                prop_assert_eq!(&s.0, &alone.0);
            }
            (u, c) => prop_assert_eq!(u.map(|r| r.fields), c.map(|r| r.fields)),
        }
    }

    /// A call of one rule takes a path of its own (no lists of judgements and writes):
    /// it resolves every call exactly as the path of several rules does.
    #[test]
    fn the_path_of_one_rule_resolves_as_the_path_of_several(
        cmd in command(), hist in history(), dt in 0u64..3_000, cost in 0i64..6, flag in 0usize..3,
    ) {
        let mut s = Server::default();
        let ms = play(&mut s, &cmd, &hist) + dt;
        let line = format!("{cmd} COST {cost}{}", ["", " REFUND", " FORCE"][flag]);
        let words: Vec<&str> = line.split_whitespace().collect();
        let args: Vec<&[u8]> = words[1..].iter().map(|a| a.as_bytes()).collect();
        let now = Micros::from_millis(T0 + ms);
        macro_rules! both {
            ($call:expr) => {{
                let Ok(call) = $call else { return Ok(()) };
                let first = call.first_key() - 1;
                let mut keys: Vec<Option<Key>> = (0..call.numkeys)
                    .map(|k| s.0.get(args[first + k]).cloned())
                    .collect();
                let in_memory = memory::InMemory::new(&call, &mut keys);
                if let Some([one, all]) = call.resolve_both(&in_memory, now) {
                    prop_assert_eq!(one, all, "{}", line);
                }
            }};
        }
        match words[0] {
            "RL.FIXED" => both!(crate::limiters::fixed::parse(&args)),
            "RL.GCRA" => both!(crate::limiters::gcra::parse(&args)),
            "RL.MULTI" => both!(crate::limiters::multi::parse(&args)),
            "RL.SLIDING" => both!(crate::limiters::sliding::parse(&args)),
            "RL.LOG" => both!(crate::limiters::log::parse(&args)),
            "RL.ALL" => both!(crate::limiters::all(&args)),
            _ => {}
        }
    }

    /// `COST 0` with `REFUND` or `FORCE` is the peek `COST 0` is: the same reply, nothing
    /// written (a forced peek once replied the wait for a cost of 1 on a key over its
    /// limit).
    #[test]
    fn cost_0_with_a_flag_is_the_peek_cost_0_is(
        cmd in command(), hist in history(), dt in 0u64..3_000, flag in 0usize..2,
    ) {
        let mut s = Server::default();
        let ms = play(&mut s, &cmd, &hist) + dt;
        let before = s.clone();
        let flag = ["REFUND", "FORCE"][flag];
        let flagged = s.call(ms, &format!("{cmd} COST 0 {flag}")).map(|r| r.fields);
        prop_assert_eq!(flagged, Ok(peek(&mut before.clone(), &cmd, ms)));
        prop_assert_eq!(s.0, before.0);
    }

    /// A ban never lets a call through before its end, and every allowed call leaves
    /// the BAN key as it was.
    #[test]
    fn a_ban_holds_until_its_end_and_allowed_calls_leave_it_alone(
        steps in proptest::collection::vec((0u64..1_500, 0i64..3, 0u8..4), 1..60),
        strikes in 1i64..4,
    ) {
        let mut s = Server::default();
        let mut ms = 0;
        let mut banned_until: Option<u64> = None;
        for (dt, cost, mode) in steps {
            ms += dt;
            let flag = ["", "", " REFUND", " FORCE"][mode as usize];
            let line = format!("RL.ALL 2 u b GCRA 1 1 1 1s BAN 2 {strikes} 2s 3s COST {cost}{flag}");
            let ban_before = s.string("b");
            let r = s.call(ms, &line).unwrap();
            let taking = flag != " REFUND";
            if let Some(end) = banned_until.filter(|&e| ms < e) {
                if taking {
                    prop_assert_eq!(r.fields[0], 1, "allowed at {} in a ban until {}", ms, end);
                    prop_assert_eq!(r.binding, 2);
                    prop_assert_eq!(r.fields[3] as u64, end - ms);
                }
            }
            if r.fields[0] == 0 {
                prop_assert_eq!(s.string("b"), ban_before);
            }
            if let Some((v, end)) = s.string("b") {
                if v.starts_with("banned:") {
                    banned_until = Some(end);
                }
            }
        }
    }
}

#[test]
fn upto_errors_and_its_rules_beside_a_lease_and_a_ban() {
    let mut s = Server::default();
    let err = |s: &mut Server, line: &str| s.call(0, line).err().map(|e| e.to_string());
    assert_eq!(
        err(&mut s, "RL.FIXED k 5 1m COST 0 UPTO").as_deref(),
        Some("ERR UPTO takes COST n with n at least 1 (COST 0 alone peeks)")
    );
    for (line, flag) in [
        ("RL.FIXED k 5 1m COST 3 UPTO REFUND", "REFUND"),
        ("RL.LOG k 5 1m COST 3 FORCE UPTO", "FORCE"),
        ("RL.GCRA k 1 1 1s COST 2 UPTO DELAY 1s", "DELAY"),
    ] {
        assert_eq!(
            err(&mut s, line),
            Some(format!(
                "ERR UPTO cannot be given with {flag}: UPTO takes as much of COST as fits now"
            )),
            "{line}"
        );
    }
    // A LEASE rule keeps its cost rule: UPTO with n above 1 is its error.
    assert_eq!(
        err(&mut s, "RL.ALL 2 l f LEASE 1 2 10s FIXED 2 5 1m COST 3 UPTO ID a").as_deref(),
        Some("ERR rule 1 (LEASE): invalid cost 3: a lease takes COST 1 (the default) or COST 0 to peek")
    );
    // n above the capacity is no error: it takes what fits.
    let r = s.call(0, "RL.FIXED f 5 1m COST 9 UPTO").unwrap();
    assert_eq!((r.fields, r.granted), ([0, 5, 0, -1, 60_000], Some(5)));
    let r = s.call(10, "RL.FIXED f 5 1m COST 9 UPTO").unwrap();
    assert_eq!((r.fields[0], r.granted), (1, Some(0)), "denied as COST 1");
    // A lease's renewal fits a full key: UPTO of 1 takes it.
    let lease = "RL.ALL 2 l g LEASE 1 1 10s GCRA 2 9 1 1s COST 1 UPTO ID a";
    assert_eq!(s.call(0, lease).unwrap().granted, Some(1));
    assert_eq!(s.call(5, lease).unwrap().granted, Some(1), "a renewal");
    let other = "RL.ALL 2 l g LEASE 1 1 10s GCRA 2 9 1 1s COST 1 UPTO ID b";
    assert_eq!(
        s.call(6, other).unwrap().granted,
        Some(0),
        "the key is full"
    );
    // A BAN rule gates and strikes as usual: a call UPTO denies records its strike.
    let ban = "RL.ALL 2 f b FIXED 1 5 1m BAN 2 1 1m 1h COST 4 UPTO";
    let r = s.call(20, ban).unwrap();
    assert_eq!((r.fields[0], r.granted), (1, Some(0)), "f is full");
    assert!(s.string("b").is_some(), "a strike");
    // A call of the BAN rule alone takes all of it.
    let alone = s.call(20, "RL.ALL 1 c BAN 1 2 1m 1h COST 7 UPTO").unwrap();
    assert_eq!(alone.granted, Some(7));
}
