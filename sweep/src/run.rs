//! A whole-keyspace sweep: find the nodes (every primary of a Cluster, or the one
//! server), check each of them before changing anything, then sweep them all at once,
//! one thread per node, each at most `--max-rate` keys per second, while the main
//! thread shows progress.

use crate::cli::Options;
use crate::cluster;
use crate::node::{Node, SweepCall};
use crate::progress::{self, Snapshot};
use crate::url::Target;
use ratelimit_core::limits::SWEEP_MAX_COUNT;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How progress is shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Display {
    /// A bar redrawn in place (stderr is a terminal).
    Bar,
    /// A line every `PLAIN_EVERY`.
    Lines,
    None,
}

const BAR_EVERY: Duration = Duration::from_millis(200);
const PLAIN_EVERY: Duration = Duration::from_secs(2);

/// What one node's sweep did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeResult {
    pub node: String,
    pub keys: u64,
    pub scanned: u64,
    pub expired: u64,
    pub calls: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Summary {
    pub nodes: Vec<NodeResult>,
    pub elapsed: Duration,
}

/// The nodes to sweep: the primaries when `target` is a Cluster node, else `target`.
pub fn nodes(target: &Target, log: &mut dyn FnMut(&str)) -> Result<Vec<Target>, String> {
    let mut first = Node::connect(target)?;
    let info = first.text(&["INFO", "cluster"])?;
    if !cluster::enabled(&info) {
        return Ok(vec![target.clone()]);
    }
    let nodes = first.text(&["CLUSTER", "NODES"])?;
    let primaries = cluster::primaries(&nodes, &target.host);
    if let Some(failed) = primaries.iter().find(|p| p.failed) {
        return Err(format!(
            "the Cluster primary {}:{} is marked as failed: its keys cannot be swept; repair the Cluster first",
            failed.host, failed.port
        ));
    }
    if primaries.is_empty() {
        return Err(format!("{target}: CLUSTER NODES lists no primary"));
    }
    log(&format!(
        "cluster: sweeping {} primaries: {}",
        primaries.len(),
        primaries
            .iter()
            .map(|p| target.with_addr(&p.host, p.port).to_string())
            .collect::<Vec<_>>()
            .join(" ")
    ));
    Ok(primaries
        .iter()
        .map(|p| target.with_addr(&p.host, p.port))
        .collect())
}

/// The COUNT to send: `--count`, or with `--max-rate` a tenth of the rate (about ten
/// calls a second, so that the pace is smooth), or the server's default.
pub fn count_for(o: &Options) -> Option<u64> {
    o.count
        .or_else(|| o.max_rate.map(|r| (r / 10).clamp(1, SWEEP_MAX_COUNT)))
}

/// Run the sweep. `log` receives the informative lines (to stderr).
pub fn run(o: &Options, display: Display, log: &mut dyn FnMut(&str)) -> Result<Summary, String> {
    let targets = nodes(&o.target, log)?;
    let call = SweepCall {
        ttl: o.ttl.clone(),
        pattern: o.pattern.clone(),
        count: count_for(o),
        key_type: o.key_type.clone(),
        dry_run: o.dry_run,
    };
    // Check every node before changing anything: reachable, authenticated, module
    // loaded, arguments accepted, permission to run RL.SWEEP.
    let mut prepared = Vec::new();
    for t in &targets {
        let mut node = Node::connect(t)?;
        let keys = node.dbsize()?;
        let probe = SweepCall {
            count: Some(1),
            dry_run: true,
            ..call.clone()
        };
        node.sweep(b"0", &probe)?;
        prepared.push((node, keys));
    }
    let total: u64 = prepared.iter().map(|(_, k)| k).sum();
    log(&format!(
        "{}: {total} keys (DBSIZE), ttl {}{}",
        if prepared.len() == 1 {
            format!("sweeping {}", o.target)
        } else {
            format!("sweeping {} primaries", prepared.len())
        },
        o.ttl,
        if o.dry_run { ", dry run" } else { "" }
    ));

    let scanned = AtomicU64::new(0);
    let expired = AtomicU64::new(0);
    let done = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let first_error: Mutex<Option<String>> = Mutex::new(None);
    let start = Instant::now();
    let n_nodes = prepared.len();
    let snapshot = || Snapshot {
        scanned: scanned.load(Ordering::Relaxed),
        expired: expired.load(Ordering::Relaxed),
        total,
        elapsed: start.elapsed(),
        nodes_done: done.load(Ordering::Relaxed),
        nodes: n_nodes,
        dry_run: o.dry_run,
    };

    let results: Vec<NodeResult> = std::thread::scope(|s| {
        let handles: Vec<_> = prepared
            .into_iter()
            .map(|(mut node, keys)| {
                let (call, scanned, expired, done, stop, first_error) =
                    (&call, &scanned, &expired, &done, &stop, &first_error);
                s.spawn(move || {
                    let r = sweep_node(&mut node, keys, call, o.max_rate, stop, |sc, ex| {
                        scanned.fetch_add(sc, Ordering::Relaxed);
                        expired.fetch_add(ex, Ordering::Relaxed);
                    });
                    done.fetch_add(1, Ordering::Relaxed);
                    match r {
                        Ok(r) => Some(r),
                        Err(e) => {
                            // The error first, then the stop that makes the other
                            // threads end with errors of their own.
                            if let Ok(mut slot) = first_error.lock() {
                                slot.get_or_insert(e);
                            }
                            stop.store(true, Ordering::Relaxed);
                            None
                        }
                    }
                })
            })
            .collect();

        let columns = crate::terminal::stderr_columns().unwrap_or(80);
        let mut last_line = Instant::now();
        let mut last_text = String::new();
        let mut stderr = std::io::stderr();
        while done.load(Ordering::Relaxed) < n_nodes {
            std::thread::sleep(Duration::from_millis(50));
            match display {
                Display::Bar if last_line.elapsed() >= BAR_EVERY => {
                    let _ = write!(stderr, "\r\x1b[2K{}", snapshot().bar_line(columns));
                    let _ = stderr.flush();
                    last_line = Instant::now();
                }
                Display::Lines if last_line.elapsed() >= PLAIN_EVERY => {
                    last_text = snapshot().plain_line();
                    log(&last_text);
                    last_line = Instant::now();
                }
                _ => {}
            }
        }
        match display {
            Display::Bar => {
                let _ = writeln!(stderr, "\r\x1b[2K{}", snapshot().bar_line(columns));
            }
            Display::Lines => {
                let text = snapshot().plain_line();
                if text != last_text {
                    log(&text);
                }
            }
            Display::None => {}
        }
        handles
            .into_iter()
            .filter_map(|h| h.join().ok().flatten())
            .collect()
    });
    if let Some(e) = first_error.lock().ok().and_then(|mut e| e.take()) {
        return Err(e);
    }
    if results.len() != n_nodes {
        return Err("a sweep thread stopped unexpectedly".into());
    }
    Ok(Summary {
        nodes: results,
        elapsed: start.elapsed(),
    })
}

/// Sweep one node from cursor 0 until the cursor comes back to 0.
fn sweep_node(
    node: &mut Node,
    keys: u64,
    call: &SweepCall,
    max_rate: Option<u64>,
    stop: &AtomicBool,
    mut add: impl FnMut(u64, u64),
) -> Result<NodeResult, String> {
    let start = Instant::now();
    let mut r = NodeResult {
        node: node.target.to_string(),
        keys,
        scanned: 0,
        expired: 0,
        calls: 0,
    };
    let mut cursor = b"0".to_vec();
    loop {
        if stop.load(Ordering::Relaxed) {
            return Err("stopped".into());
        }
        let chunk = node.sweep(&cursor, call)?;
        r.calls += 1;
        r.scanned += chunk.scanned;
        r.expired += chunk.expired;
        add(chunk.scanned, chunk.expired);
        if chunk.cursor == b"0" {
            return Ok(r);
        }
        cursor = chunk.cursor;
        if let Some(rate) = max_rate {
            // Not ahead of `rate` keys per second since the start.
            let due = Duration::from_micros(r.scanned.saturating_mul(1_000_000) / rate);
            while start.elapsed() < due && !stop.load(Ordering::Relaxed) {
                std::thread::sleep(pacing_wait(due, start.elapsed()));
            }
        }
    }
}

/// How long to sleep before the next call when it is due at `due` and `elapsed` has
/// passed: at most 100 ms at a time (so a stop is seen soon), nothing once late. The
/// clock is read again after the caller's check, so `elapsed` may already exceed `due`.
fn pacing_wait(due: Duration, elapsed: Duration) -> Duration {
    due.saturating_sub(elapsed).min(Duration::from_millis(100))
}

/// The summary lines (stdout).
pub fn summary_lines(o: &Options, s: &Summary) -> Vec<String> {
    let mut out = Vec::new();
    let verb = if o.dry_run { "would expire" } else { "expired" };
    for n in &s.nodes {
        out.push(format!(
            "node {}: scanned {}, {verb} {}, {} calls",
            n.node, n.scanned, n.expired, n.calls
        ));
    }
    let scanned: u64 = s.nodes.iter().map(|n| n.scanned).sum();
    let expired: u64 = s.nodes.iter().map(|n| n.expired).sum();
    let ms = s.elapsed.as_millis().max(1) as u64;
    out.push(format!(
        "{}scanned {scanned} keys on {} node{} in {} s ({} keys/s); {verb} {expired} (ttl {}){}",
        if o.dry_run { "dry run: " } else { "done: " },
        s.nodes.len(),
        if s.nodes.len() == 1 { "" } else { "s" },
        progress::seconds(s.elapsed),
        scanned.saturating_mul(1000) / ms,
        o.ttl,
        if o.dry_run {
            "; nothing was changed"
        } else {
            ""
        },
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: the pacing loop subtracted the elapsed time from the due time and
    /// panicked ("overflow when subtracting durations") when the clock passed the due
    /// time between the check and the subtraction.
    #[test]
    fn pacing_wait_is_zero_once_the_call_is_late() {
        let ms = Duration::from_millis;
        assert_eq!(pacing_wait(ms(500), ms(501)), Duration::ZERO);
        assert_eq!(pacing_wait(ms(500), ms(500)), Duration::ZERO);
        assert_eq!(pacing_wait(ms(500), ms(450)), ms(50));
        assert_eq!(pacing_wait(ms(500), ms(0)), ms(100));
    }

    fn opts() -> Options {
        Options {
            target: Target::default(),
            ttl: "60".into(),
            pattern: None,
            key_type: None,
            count: None,
            max_rate: None,
            dry_run: false,
            quiet: false,
        }
    }

    #[test]
    fn count_follows_the_rate() {
        assert_eq!(count_for(&opts()), None);
        assert_eq!(
            count_for(&Options {
                count: Some(7),
                max_rate: Some(1_000_000),
                ..opts()
            }),
            Some(7)
        );
        assert_eq!(
            count_for(&Options {
                max_rate: Some(5),
                ..opts()
            }),
            Some(1)
        );
        assert_eq!(
            count_for(&Options {
                max_rate: Some(50_000),
                ..opts()
            }),
            Some(5_000)
        );
        assert_eq!(
            count_for(&Options {
                max_rate: Some(10_000_000),
                ..opts()
            }),
            Some(5_000)
        );
    }

    #[test]
    fn summary() {
        let s = Summary {
            nodes: vec![
                NodeResult {
                    node: "h:1".into(),
                    keys: 10,
                    scanned: 10,
                    expired: 4,
                    calls: 2,
                },
                NodeResult {
                    node: "h:2".into(),
                    keys: 5,
                    scanned: 6,
                    expired: 0,
                    calls: 1,
                },
            ],
            elapsed: Duration::from_millis(1_500),
        };
        assert_eq!(
            summary_lines(&opts(), &s),
            vec![
                "node h:1: scanned 10, expired 4, 2 calls".to_string(),
                "node h:2: scanned 6, expired 0, 1 calls".to_string(),
                "done: scanned 16 keys on 2 nodes in 1.5 s (10 keys/s); expired 4 (ttl 60)"
                    .to_string(),
            ]
        );
        let dry = summary_lines(
            &Options {
                dry_run: true,
                ..opts()
            },
            &s,
        );
        assert_eq!(
            dry.last().map(String::as_str),
            Some("dry run: scanned 16 keys on 2 nodes in 1.5 s (10 keys/s); would expire 4 (ttl 60); nothing was changed")
        );
    }
}
