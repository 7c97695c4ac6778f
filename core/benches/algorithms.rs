//! Nanoseconds per decision of the pure algorithms, with a fake clock: no Redis, no
//! system clock. `make bench-core` runs these (and `make bench` before the server
//! benchmark); the run is kept short on purpose.
//!
//! Each benchmark's name is `<algorithm>/<function>/<case>`; `python3 -m bench` (bench/criterion.py) reads
//! criterion's estimates under `target/criterion/` into `bench/results.md`.

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use ratelimit_core::call::{memory, Call};
use ratelimit_core::limiters::{self, fixed};
use ratelimit_core::parse::duration::parse_duration;
use ratelimit_core::{Micros, Stored, UnixMillis};
use std::time::Duration;

/// An arbitrary instant on a second boundary, in µs since the Unix epoch.
const T0: u64 = 1_700_000_000_000_000;

/// A clock that moves 1 µs per reading, so no two decisions see the same time.
struct FakeClock(u64);

impl FakeClock {
    fn tick(&mut self) -> Micros {
        self.0 += 1;
        Micros(self.0)
    }
}

/// RL.FIXED's call of cost 1 on one key, `limit` an hour.
fn call(limit: i64) -> Call<fixed::Fixed> {
    let rule = fixed::Fixed::new(limit, Micros::from_secs(3600), false).expect("valid parameters");
    Call::one(rule, 1)
}

/// A benchmark's name, the counter the key holds and the call.
type Case = (&'static str, Option<Stored<i64>>, Call<fixed::Fixed>);

fn fixed_settle(c: &mut Criterion) {
    let window_end = Some(UnixMillis(T0 / 1000 + 3_600_000));
    let cases: [Case; 4] = [
        ("new_key", None, call(1_000_000)),
        (
            "existing_allowed",
            Some(Stored {
                state: 41,
                expires_at: window_end,
            }),
            call(1_000_000),
        ),
        (
            "denied",
            Some(Stored {
                state: 1,
                expires_at: window_end,
            }),
            call(1),
        ),
        (
            "missing_ttl",
            Some(Stored {
                state: 7,
                expires_at: None,
            }),
            call(1_000_000),
        ),
    ];
    for (name, stored, p) in cases {
        let mut clock = FakeClock(T0);
        let stored = [stored];
        c.bench_function(&format!("fixed/run/{name}"), |b| {
            b.iter(|| memory::run_on(black_box(&p), black_box(&stored), clock.tick()))
        });
    }
}

fn fixed_parse_args(c: &mut Criterion) {
    let cases: [(&str, &[&[u8]]); 2] = [
        ("limit_window", &[b"key", b"1000000", b"1h"]),
        (
            "all_options",
            &[
                b"key",
                b"100",
                b"1500ms",
                b"COST",
                b"2",
                b"align",
                b"AT",
                b"1700000000000",
            ],
        ),
    ];
    for (name, args) in cases {
        c.bench_function(&format!("fixed/parse/{name}"), |b| {
            b.iter(|| limiters::fixed::parse(black_box(args)))
        });
    }
    // An error reply's text is built only when the arguments are wrong; time that too.
    let bad: &[&[u8]] = &[b"key", b"100", b"0s"];
    c.bench_function("fixed/parse/invalid_window", |b| {
        b.iter(|| limiters::fixed::parse(black_box(bad)).map_err(|e| e.to_string()))
    });
}

fn duration_parse(c: &mut Criterion) {
    for raw in ["90", "1500ms", "24h"] {
        c.bench_function(&format!("duration/parse_duration/{raw}"), |b| {
            b.iter(|| parse_duration("window", black_box(raw.as_bytes())))
        });
    }
}

fn config() -> Criterion {
    // Short on purpose: these figures are a guide to where time goes, and `make bench`
    // must stay within a few minutes on a small machine.
    Criterion::default()
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1))
        .sample_size(30)
        .without_plots()
}

criterion_group! {
    name = algorithms;
    config = config();
    targets = fixed_settle, fixed_parse_args, duration_parse
}
criterion_main!(algorithms);
