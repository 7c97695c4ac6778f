//! ratelimit-envoy-load: a gRPC load generator for any Envoy rate limit service
//! (`envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit`), this one or the
//! reference. Two modes:
//!
//! - `max`: `--concurrency` clients in a closed loop for `--seconds`: requests per
//!   second;
//! - `rate`: an open loop at `--rate` requests per second for `--seconds`, each
//!   latency measured from the moment its request was due (so a slow answer delays no
//!   measurement): p50, p99, p99.9.
//!
//! Each request carries `--descriptors` descriptors (`user`, `route`, `tenant`, in that
//! order, or the keys of `--keys a,b`) of the `--domain` domain (`bench`), with values
//! drawn from `--users` users (the same value every time with `--constant`). It prints
//! one JSON object.

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tonic::transport::Channel;

struct Args {
    target: String,
    mode: String,
    concurrency: usize,
    rate: u64,
    seconds: u64,
    descriptors: usize,
    users: u64,
    channels: usize,
    domain: String,
    keys: Vec<String>,
    constant: bool,
}

fn args() -> Result<Args, String> {
    let mut a = Args {
        target: "http://127.0.0.1:8081".into(),
        mode: "max".into(),
        concurrency: 32,
        rate: 1000,
        seconds: 10,
        descriptors: 2,
        users: 10_000,
        channels: 4,
        domain: "bench".into(),
        keys: vec!["user".into(), "route".into(), "tenant".into()],
        constant: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        let num = |v: String| {
            v.parse::<u64>()
                .map_err(|_| format!("{flag}: not a number: {v}"))
        };
        match flag.as_str() {
            "--target" => a.target = value()?,
            "--mode" => a.mode = value()?,
            "--concurrency" => a.concurrency = num(value()?)? as usize,
            "--rate" => a.rate = num(value()?)?,
            "--seconds" => a.seconds = num(value()?)?,
            "--descriptors" => a.descriptors = num(value()?)? as usize,
            "--users" => a.users = num(value()?)?.max(1),
            "--channels" => a.channels = num(value()?)?.max(1) as usize,
            "--domain" => a.domain = value()?,
            "--keys" => {
                a.keys = value()?.split(',').map(str::to_string).collect();
                a.descriptors = a.keys.len();
            }
            "--constant" => a.constant = true,
            "--help" | "-h" => {
                return Err("ratelimit-envoy-load [--target URL] [--mode max|rate] [--concurrency N] [--rate N] [--seconds N] [--descriptors N] [--users N] [--channels N] [--domain D] [--keys a,b] [--constant]".into())
            }
            other => return Err(format!("unknown option {other}")),
        }
    }
    if a.descriptors == 0 || a.descriptors > a.keys.len() {
        return Err(format!("--descriptors takes 1 to {}", a.keys.len()));
    }
    if a.mode != "max" && a.mode != "rate" {
        return Err("--mode takes max or rate".into());
    }
    Ok(a)
}

fn request(n: u64, a: &Args) -> RateLimitRequest {
    let entry = |k: &str, v: String| RateLimitDescriptor {
        entries: vec![Entry {
            key: k.into(),
            value: v,
        }],
        ..Default::default()
    };
    let spread = [a.users, 16, 64];
    let descriptors = a.keys[..a.descriptors]
        .iter()
        .enumerate()
        .map(|(i, k)| {
            let v = if a.constant {
                0
            } else {
                n % spread.get(i).copied().unwrap_or(64)
            };
            entry(k, format!("v{v}"))
        })
        .collect();
    RateLimitRequest {
        domain: a.domain.clone(),
        descriptors,
        hits_addend: 0,
    }
}

/// Count a failed call, or an answer over the limit.
fn tally(
    r: Result<
        tonic::Response<envoy_types::pb::envoy::service::ratelimit::v3::RateLimitResponse>,
        tonic::Status,
    >,
    errors: &AtomicU64,
    over: &AtomicU64,
) {
    match r {
        Ok(r) if r.get_ref().overall_code == 2 => {
            over.fetch_add(1, Ordering::Relaxed);
        }
        Ok(_) => {}
        Err(_) => {
            errors.fetch_add(1, Ordering::Relaxed);
        }
    }
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

#[tokio::main]
async fn main() {
    let a = match args() {
        Ok(a) => Arc::new(a),
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let mut clients = Vec::new();
    for _ in 0..a.channels {
        match RateLimitServiceClient::connect(a.target.clone()).await {
            Ok(c) => clients.push(c),
            Err(e) => {
                eprintln!("cannot connect to {}: {e}", a.target);
                std::process::exit(1);
            }
        }
    }
    let counter = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let over = Arc::new(AtomicU64::new(0));
    let duration = Duration::from_secs(a.seconds);
    let started = Instant::now();
    let mut latencies: Vec<u64> = Vec::new();
    if a.mode == "max" {
        let mut tasks = Vec::new();
        for i in 0..a.concurrency {
            let mut c: RateLimitServiceClient<Channel> = clients[i % clients.len()].clone();
            let (a, counter, errors, over) =
                (a.clone(), counter.clone(), errors.clone(), over.clone());
            tasks.push(tokio::spawn(async move {
                let mut lat = Vec::new();
                while started.elapsed() < duration {
                    let n = counter.fetch_add(1, Ordering::Relaxed);
                    let t = Instant::now();
                    let r = c.should_rate_limit(request(n, &a)).await;
                    tally(r, &errors, &over);
                    lat.push(t.elapsed().as_micros() as u64);
                }
                lat
            }));
        }
        for t in tasks {
            latencies.extend(t.await.unwrap_or_default());
        }
    } else {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<u64>();
        let period = Duration::from_nanos(1_000_000_000 / a.rate.max(1));
        let total = a.rate * a.seconds;
        for n in 0..total {
            let due = started + period * n as u32;
            tokio::time::sleep_until(due.into()).await;
            let mut c = clients[n as usize % clients.len()].clone();
            let (a, tx, errors, over) = (a.clone(), tx.clone(), errors.clone(), over.clone());
            counter.fetch_add(1, Ordering::Relaxed);
            tokio::spawn(async move {
                tally(c.should_rate_limit(request(n, &a)).await, &errors, &over);
                let _ = tx.send(due.elapsed().as_micros() as u64);
            });
        }
        drop(tx);
        while let Some(l) = rx.recv().await {
            latencies.push(l);
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    latencies.sort_unstable();
    println!(
        "{{\"mode\": \"{}\", \"descriptors\": {}, \"requests\": {}, \"seconds\": {:.3}, \"rps\": {:.1}, \"p50_us\": {}, \"p99_us\": {}, \"p999_us\": {}, \"errors\": {}, \"over_limit\": {}}}",
        a.mode,
        a.descriptors,
        latencies.len(),
        elapsed,
        latencies.len() as f64 / elapsed,
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.99),
        percentile(&latencies, 0.999),
        errors.load(Ordering::Relaxed),
        over.load(Ordering::Relaxed),
    );
}
