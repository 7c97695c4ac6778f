//! A whole-keyspace sweep: find the nodes (every primary of a Cluster, or the one
//! server) and, on each, the databases to sweep (every one that has keys, or
//! `--db`); check them all before changing anything; then sweep the nodes at once,
//! one thread per node going through its databases in turn, each node at most
//! `--max-rate` keys per second, while the main thread shows progress. Ctrl-C or
//! SIGTERM, or an error on one node, stops every node after its current call, and
//! the summary says what was done.

use crate::cli::Options;
use crate::cluster;
use crate::node::{DbInfo, Node, SweepCall};
use crate::progress::{self, Snapshot};
use crate::signal;
use crate::url::Target;
use ratelimit_core::limits::SWEEP_MAX_COUNT;
use std::collections::BTreeMap;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
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
/// How often a node reads `DBSIZE` again during a sweep, so that the progress total
/// follows keys added meanwhile.
const DBSIZE_EVERY: Duration = Duration::from_secs(1);

/// A database to sweep on a node, with its key count (`DBSIZE`) when checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DbPlan {
    pub db: u32,
    pub keys: u64,
}

/// How far the sweep of one database got.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DbState {
    /// Its cursor came back to 0: every key that was there all along was visited.
    Finished,
    /// Stopped (signal or error) after some calls.
    Stopped,
    NotStarted,
}

/// What the sweep did in one database of one node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DbResult {
    pub db: u32,
    /// `DBSIZE` when checked.
    pub keys: u64,
    pub scanned: u64,
    pub expired: u64,
    pub calls: u64,
    pub state: DbState,
}

/// What one node's sweep did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeResult {
    pub node: String,
    /// The databases swept (or to be swept), in order.
    pub dbs: Vec<DbResult>,
    /// Databases that have keys and were left alone (not in `--db`).
    pub skipped: Vec<DbInfo>,
}

impl NodeResult {
    pub fn scanned(&self) -> u64 {
        self.dbs.iter().map(|d| d.scanned).sum()
    }
    pub fn expired(&self) -> u64 {
        self.dbs.iter().map(|d| d.expired).sum()
    }
    pub fn calls(&self) -> u64 {
        self.dbs.iter().map(|d| d.calls).sum()
    }
}

/// How the sweep ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ending {
    Done,
    /// By this signal (SIGINT, SIGTERM), before every database was finished.
    Interrupted(i32),
    /// By this error on a node; the others stopped after their current call.
    Failed(String),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Summary {
    pub nodes: Vec<NodeResult>,
    pub elapsed: Duration,
    pub ending: Ending,
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
        "cluster: sweeping {} {}: {}",
        primaries.len(),
        if primaries.len() == 1 {
            "primary"
        } else {
            "primaries"
        },
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

/// The databases to sweep on a node whose `INFO keyspace` says `infos`, and those
/// left alone: `--db` (`wanted`) as given, whether they have keys or not; by default
/// every database that has keys (database 0 when none has, so that the module and
/// the options are still checked).
pub fn choose_dbs(infos: &[DbInfo], wanted: Option<&[u32]>) -> (Vec<u32>, Vec<DbInfo>) {
    match wanted {
        Some(list) => (
            list.to_vec(),
            infos
                .iter()
                .filter(|d| d.keys > 0 && !list.contains(&d.db))
                .copied()
                .collect(),
        ),
        None => {
            let with_keys: Vec<u32> = infos.iter().filter(|d| d.keys > 0).map(|d| d.db).collect();
            if with_keys.is_empty() {
                (vec![0], Vec::new())
            } else {
                (with_keys, Vec::new())
            }
        }
    }
}

/// The COUNT to send: `--count`, or with `--max-rate` a tenth of the rate (about ten
/// calls a second, so that the pace is smooth), or the server's default.
pub fn count_for(o: &Options) -> Option<u64> {
    o.count
        .or_else(|| o.max_rate.map(|r| (r / 10).clamp(1, SWEEP_MAX_COUNT)))
}

/// Where one node stands, for the progress display.
#[derive(Clone, Copy, Debug, Default)]
struct Progress {
    /// Keys visited in the databases finished.
    finished: u64,
    /// Keys visited in the database being swept.
    current: u64,
    /// Its `DBSIZE`, as last read.
    current_size: u64,
    /// The key counts of the databases not started.
    pending: u64,
    expired: u64,
}

impl Progress {
    fn scanned(&self) -> u64 {
        self.finished + self.current
    }
    fn total(&self) -> u64 {
        self.finished + self.current_size.max(self.current) + self.pending
    }
}

/// A node ready to sweep: connected, checked, with its plan.
struct Prepared {
    node: Node,
    plans: Vec<DbPlan>,
    skipped: Vec<DbInfo>,
}

/// Run the sweep. `log` receives the informative lines (to stderr). An error before
/// anything was changed is `Err`; once the sweep has started, what was done is
/// always in the `Summary`, whatever ended it.
pub fn run(o: &Options, display: Display, log: &mut dyn FnMut(&str)) -> Result<Summary, String> {
    let targets = nodes(&o.target, log)?;
    let call = SweepCall {
        ttl: o.ttl.clone(),
        pattern: o.pattern.clone(),
        count: count_for(o),
        key_type: o.key_type.clone(),
        dry_run: o.dry_run,
    };
    // Check every node before changing anything: reachable, authenticated, its
    // databases (INFO keyspace, SELECT, DBSIZE), module loaded, arguments accepted,
    // permission to run RL.SWEEP.
    let mut prepared = Vec::new();
    for t in &targets {
        let mut node = Node::connect(t)?;
        let infos = node.keyspace()?;
        let (dbs, skipped) = choose_dbs(&infos, o.dbs.as_deref());
        let mut plans = Vec::new();
        for db in dbs {
            node.select(db)?;
            plans.push(DbPlan {
                db,
                keys: node.dbsize()?,
            });
        }
        let probe = SweepCall {
            count: Some(1),
            dry_run: true,
            ..call.clone()
        };
        node.sweep(b"0", &probe)?;
        prepared.push(Prepared {
            node,
            plans,
            skipped,
        });
    }
    let total: u64 = prepared.iter().flat_map(|p| &p.plans).map(|d| d.keys).sum();
    let swept: BTreeMap<u32, u64> = sum_by_db(
        prepared
            .iter()
            .flat_map(|p| &p.plans)
            .map(|d| (d.db, d.keys)),
    );
    log(&format!(
        "sweeping {} ({}): {total} keys, ttl {}{}",
        if prepared.len() == 1 {
            o.target.to_string()
        } else {
            format!("{} primaries", prepared.len())
        },
        db_list(swept.keys().copied()),
        o.ttl,
        if o.dry_run { ", dry run" } else { "" }
    ));
    for (db, (keys, without)) in skipped_by_db(prepared.iter().flat_map(|p| &p.skipped)) {
        log(&format!(
            "skipping db {db}: {keys} keys, {without} of them without a TTL (not in --db)"
        ));
    }

    signal::install()?;
    let progress: Vec<Mutex<Progress>> = prepared
        .iter()
        .map(|p| {
            Mutex::new(Progress {
                pending: p.plans.iter().map(|d| d.keys).sum(),
                ..Progress::default()
            })
        })
        .collect();
    let done = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let start = Instant::now();
    let n_nodes = prepared.len();
    let snapshot = || {
        let mut s = Snapshot {
            scanned: 0,
            expired: 0,
            total: 0,
            elapsed: start.elapsed(),
            nodes_done: done.load(Ordering::Relaxed),
            nodes: n_nodes,
            dry_run: o.dry_run,
        };
        for p in &progress {
            let p = p.lock().map(|p| *p).unwrap_or_default();
            s.scanned += p.scanned();
            s.expired += p.expired;
            s.total += p.total();
        }
        s
    };

    let outcomes: Vec<(NodeResult, Option<String>)> = std::thread::scope(|s| {
        let handles: Vec<_> = prepared
            .into_iter()
            .zip(&progress)
            .map(|(p, progress)| {
                let (call, done, stop) = (&call, &done, &stop);
                s.spawn(move || {
                    let Prepared {
                        mut node,
                        plans,
                        skipped,
                    } = p;
                    let (dbs, error) =
                        sweep_node(&mut node, &plans, call, o.max_rate, stop, progress);
                    if error.is_some() {
                        // The other nodes stop after their current call.
                        stop.store(true, Ordering::Relaxed);
                    }
                    done.fetch_add(1, Ordering::Relaxed);
                    (
                        NodeResult {
                            node: node.target.to_string(),
                            dbs,
                            skipped,
                        },
                        error,
                    )
                })
            })
            .collect();

        let mut last_line = Instant::now();
        let mut last_text = String::new();
        let mut stderr = std::io::stderr();
        // The terminal may be resized during the sweep: its width is read at every
        // redraw.
        let columns = || crate::terminal::stderr_columns().unwrap_or(80);
        while done.load(Ordering::Relaxed) < n_nodes {
            std::thread::sleep(Duration::from_millis(50));
            match display {
                Display::Bar if last_line.elapsed() >= BAR_EVERY => {
                    let _ = write!(stderr, "\r\x1b[2K{}", snapshot().bar_line(columns()));
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
                let _ = writeln!(stderr, "\r\x1b[2K{}", snapshot().bar_line(columns()));
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
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    (
                        NodeResult {
                            node: "?".into(),
                            dbs: Vec::new(),
                            skipped: Vec::new(),
                        },
                        Some("a sweep thread stopped unexpectedly".into()),
                    )
                })
            })
            .collect()
    });
    let elapsed = start.elapsed();
    let mut nodes = Vec::new();
    let mut first_error = None;
    for (node, error) in outcomes {
        nodes.push(node);
        if first_error.is_none() {
            first_error = error;
        }
    }
    let finished = nodes
        .iter()
        .flat_map(|n| &n.dbs)
        .all(|d| d.state == DbState::Finished);
    let ending = match (first_error, signal::received()) {
        (Some(e), _) => Ending::Failed(e),
        (None, Some(sig)) if !finished => Ending::Interrupted(sig),
        (None, _) => Ending::Done,
    };
    Ok(Summary {
        nodes,
        elapsed,
        ending,
    })
}

/// Sweep one node's databases in turn, each from cursor 0 until the cursor comes
/// back to 0, unless a stop (`stop`, or a signal) comes first: that is seen between
/// calls, so every key counted really got its TTL. Returns what was done, and the
/// error that ended it, if one did.
fn sweep_node(
    node: &mut Node,
    plans: &[DbPlan],
    call: &SweepCall,
    max_rate: Option<u64>,
    stop: &AtomicBool,
    progress: &Mutex<Progress>,
) -> (Vec<DbResult>, Option<String>) {
    let stopping = || stop.load(Ordering::Relaxed) || signal::received().is_some();
    let update = |f: &mut dyn FnMut(&mut Progress)| {
        if let Ok(mut p) = progress.lock() {
            f(&mut p);
        }
    };
    let mut results: Vec<DbResult> = plans
        .iter()
        .map(|p| DbResult {
            db: p.db,
            keys: p.keys,
            scanned: 0,
            expired: 0,
            calls: 0,
            state: DbState::NotStarted,
        })
        .collect();
    let start = Instant::now();
    let mut scanned_on_node = 0u64;
    for (r, plan) in results.iter_mut().zip(plans) {
        if stopping() {
            break;
        }
        if let Err(e) = node.select(plan.db) {
            return (results, Some(e));
        }
        update(&mut |p| {
            p.pending = p.pending.saturating_sub(plan.keys);
            p.current = 0;
            p.current_size = plan.keys;
        });
        r.state = DbState::Stopped;
        let mut cursor = b"0".to_vec();
        let mut last_size = Instant::now();
        loop {
            if stopping() {
                return (results, None);
            }
            let chunk = match node.sweep(&cursor, call) {
                Ok(c) => c,
                Err(e) => return (results, Some(e)),
            };
            r.calls += 1;
            r.scanned += chunk.scanned;
            r.expired += chunk.expired;
            scanned_on_node += chunk.scanned;
            update(&mut |p| {
                p.current += chunk.scanned;
                p.expired += chunk.expired;
            });
            if chunk.cursor == b"0" {
                r.state = DbState::Finished;
                update(&mut |p| {
                    p.finished += p.current;
                    p.current = 0;
                    p.current_size = 0;
                });
                break;
            }
            cursor = chunk.cursor;
            if last_size.elapsed() >= DBSIZE_EVERY {
                // For the display only: a failure shows at the next call.
                if let Ok(n) = node.dbsize() {
                    update(&mut |p| p.current_size = n);
                }
                last_size = Instant::now();
            }
            if let Some(rate) = max_rate {
                // Not ahead of `rate` keys per second since the node started.
                let due = Duration::from_micros(scanned_on_node.saturating_mul(1_000_000) / rate);
                while start.elapsed() < due && !stopping() {
                    std::thread::sleep(pacing_wait(due, start.elapsed()));
                }
            }
        }
    }
    (results, None)
}

/// How long to sleep before the next call when it is due at `due` and `elapsed` has
/// passed: at most 100 ms at a time (so a stop is seen soon), nothing once late. The
/// clock is read again after the caller's check, so `elapsed` may already exceed `due`.
fn pacing_wait(due: Duration, elapsed: Duration) -> Duration {
    due.saturating_sub(elapsed).min(Duration::from_millis(100))
}

/// Sums by database number.
fn sum_by_db(items: impl Iterator<Item = (u32, u64)>) -> BTreeMap<u32, u64> {
    let mut out = BTreeMap::new();
    for (db, n) in items {
        *out.entry(db).or_insert(0) += n;
    }
    out
}

/// Keys and keys without a TTL of the skipped databases, by database number.
fn skipped_by_db<'a>(items: impl Iterator<Item = &'a DbInfo>) -> BTreeMap<u32, (u64, u64)> {
    let mut out = BTreeMap::new();
    for d in items {
        let e = out.entry(d.db).or_insert((0, 0));
        e.0 += d.keys;
        e.1 += d.without_ttl();
    }
    out
}

/// `db 0`, `db 0, 2`.
fn db_list(dbs: impl Iterator<Item = u32>) -> String {
    let list: Vec<String> = dbs.map(|d| d.to_string()).collect();
    format!("db {}", list.join(", "))
}

/// The summary lines (stdout): one per node, then one per database when a node
/// swept more than database 0 or did not finish, then the databases swept and
/// skipped when there is more to say than "database 0", then the total.
pub fn summary_lines(o: &Options, s: &Summary) -> Vec<String> {
    let mut out = Vec::new();
    let verb = if o.dry_run { "would expire" } else { "expired" };
    for n in &s.nodes {
        out.push(format!(
            "node {}: scanned {}, {verb} {}, {} calls",
            n.node,
            n.scanned(),
            n.expired(),
            n.calls()
        ));
        let only_db0_finished = matches!(
            n.dbs.as_slice(),
            [DbResult {
                db: 0,
                state: DbState::Finished,
                ..
            }]
        );
        if !only_db0_finished {
            for d in &n.dbs {
                out.push(format!(
                    "  db {}: scanned {}, {verb} {}, {} calls{}",
                    d.db,
                    d.scanned,
                    d.expired,
                    d.calls,
                    match d.state {
                        DbState::Finished => "",
                        DbState::Stopped => " (stopped before the end)",
                        DbState::NotStarted => " (not started)",
                    }
                ));
            }
        }
    }
    let swept = sum_by_db(s.nodes.iter().flat_map(|n| &n.dbs).map(|d| (d.db, d.keys)));
    let skipped = skipped_by_db(s.nodes.iter().flat_map(|n| &n.skipped));
    if swept.keys().any(|&db| db != 0) || !skipped.is_empty() {
        let mut line = format!(
            "databases: swept {}",
            swept
                .iter()
                .map(|(db, keys)| format!("db {db} ({keys} keys)"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        if !skipped.is_empty() {
            line.push_str(&format!(
                "; skipped (not in --db) {}",
                skipped
                    .iter()
                    .map(|(db, (keys, without))| {
                        format!("db {db} ({keys} keys, {without} without a TTL)")
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        out.push(line);
    }
    let scanned: u64 = s.nodes.iter().map(NodeResult::scanned).sum();
    let expired: u64 = s.nodes.iter().map(NodeResult::expired).sum();
    let ms = s.elapsed.as_millis().max(1) as u64;
    let figures = format!(
        "scanned {scanned} keys on {} node{} in {} s ({} keys/s); {verb} {expired} (ttl {})",
        s.nodes.len(),
        if s.nodes.len() == 1 { "" } else { "s" },
        progress::seconds(s.elapsed),
        scanned.saturating_mul(1000) / ms,
        o.ttl,
    );
    let nothing_changed = if o.dry_run {
        "; nothing was changed"
    } else {
        ""
    };
    out.push(match &s.ending {
        Ending::Done => format!(
            "{}{figures}{nothing_changed}",
            if o.dry_run { "dry run: " } else { "done: " }
        ),
        Ending::Interrupted(sig) => format!(
            "interrupted by {}: {figures} before stopping{nothing_changed}; run the same command again to sweep the rest",
            signal::name(*sig)
        ),
        Ending::Failed(_) => format!(
            "stopped by an error: {figures} before stopping{nothing_changed}"
        ),
    });
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
            dbs: None,
            password_file: None,
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

    fn db(db: u32, keys: u64, scanned: u64, expired: u64, calls: u64, state: DbState) -> DbResult {
        DbResult {
            db,
            keys,
            scanned,
            expired,
            calls,
            state,
        }
    }

    fn node(name: &str, dbs: Vec<DbResult>, skipped: Vec<DbInfo>) -> NodeResult {
        NodeResult {
            node: name.into(),
            dbs,
            skipped,
        }
    }

    #[test]
    fn summary() {
        let s = Summary {
            nodes: vec![
                node("h:1", vec![db(0, 10, 10, 4, 2, DbState::Finished)], vec![]),
                node("h:2", vec![db(0, 5, 6, 0, 1, DbState::Finished)], vec![]),
            ],
            elapsed: Duration::from_millis(1_500),
            ending: Ending::Done,
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

    #[test]
    fn which_databases() {
        let info = |db, keys, expires| DbInfo { db, keys, expires };
        let infos = [info(0, 10, 0), info(2, 0, 0), info(3, 7, 2), info(5, 1, 1)];
        // By default: every database with keys.
        assert_eq!(choose_dbs(&infos, None), (vec![0, 3, 5], vec![]));
        // An empty server: database 0, to check the module and options.
        assert_eq!(choose_dbs(&[], None), (vec![0], vec![]));
        assert_eq!(choose_dbs(&[info(4, 0, 0)], None), (vec![0], vec![]));
        // --db: those, with keys or not; the others that have keys are skipped.
        assert_eq!(
            choose_dbs(&infos, Some(&[2, 3])),
            (vec![2, 3], vec![info(0, 10, 0), info(5, 1, 1)])
        );
        assert_eq!(choose_dbs(&infos, Some(&[9])).0, vec![9]);
    }

    /// Several databases, some skipped: the summary names both, with key counts and
    /// the keys without a TTL left behind.
    #[test]
    fn summary_names_the_databases() {
        let s = Summary {
            nodes: vec![node(
                "h:1",
                vec![
                    db(0, 10, 10, 4, 2, DbState::Finished),
                    db(2, 5, 5, 5, 1, DbState::Finished),
                ],
                vec![DbInfo {
                    db: 3,
                    keys: 1_200,
                    expires: 200,
                }],
            )],
            elapsed: Duration::from_millis(1_000),
            ending: Ending::Done,
        };
        assert_eq!(
            summary_lines(&opts(), &s),
            vec![
                "node h:1: scanned 15, expired 9, 3 calls",
                "  db 0: scanned 10, expired 4, 2 calls",
                "  db 2: scanned 5, expired 5, 1 calls",
                "databases: swept db 0 (10 keys), db 2 (5 keys); skipped (not in --db) db 3 (1200 keys, 1000 without a TTL)",
                "done: scanned 15 keys on 1 node in 1.0 s (15 keys/s); expired 9 (ttl 60)",
            ]
        );
        // Database 0 alone, but another skipped: still named.
        let s = Summary {
            nodes: vec![node(
                "h:1",
                vec![db(0, 10, 10, 4, 2, DbState::Finished)],
                vec![DbInfo {
                    db: 1,
                    keys: 3,
                    expires: 0,
                }],
            )],
            ..s
        };
        assert_eq!(
            summary_lines(&opts(), &s)[1],
            "databases: swept db 0 (10 keys); skipped (not in --db) db 1 (3 keys, 3 without a TTL)"
        );
    }

    /// Stopped by a signal or an error: per node and database, what was done, and
    /// that it was not all.
    #[test]
    fn summary_after_a_stop() {
        let nodes = vec![
            node(
                "h:1",
                vec![
                    db(0, 10, 10, 4, 2, DbState::Finished),
                    db(1, 9, 3, 3, 1, DbState::Stopped),
                    db(4, 9, 0, 0, 0, DbState::NotStarted),
                ],
                vec![],
            ),
            node("h:2", vec![db(0, 5, 2, 1, 1, DbState::Stopped)], vec![]),
        ];
        let s = Summary {
            nodes,
            elapsed: Duration::from_millis(2_000),
            ending: Ending::Interrupted(libc::SIGINT),
        };
        assert_eq!(
            summary_lines(&opts(), &s),
            vec![
                "node h:1: scanned 13, expired 7, 3 calls",
                "  db 0: scanned 10, expired 4, 2 calls",
                "  db 1: scanned 3, expired 3, 1 calls (stopped before the end)",
                "  db 4: scanned 0, expired 0, 0 calls (not started)",
                "node h:2: scanned 2, expired 1, 1 calls",
                "  db 0: scanned 2, expired 1, 1 calls (stopped before the end)",
                "databases: swept db 0 (15 keys), db 1 (9 keys), db 4 (9 keys)",
                "interrupted by SIGINT: scanned 15 keys on 2 nodes in 2.0 s (7 keys/s); expired 8 (ttl 60) before stopping; run the same command again to sweep the rest",
            ]
        );
        let term = Summary {
            ending: Ending::Interrupted(libc::SIGTERM),
            ..s.clone()
        };
        let dry = Options {
            dry_run: true,
            ..opts()
        };
        assert_eq!(
            summary_lines(&dry, &term).last().map(String::as_str),
            Some("interrupted by SIGTERM: scanned 15 keys on 2 nodes in 2.0 s (7 keys/s); would expire 8 (ttl 60) before stopping; nothing was changed; run the same command again to sweep the rest")
        );
        let failed = Summary {
            ending: Ending::Failed("h:2: gone".into()),
            ..s
        };
        assert_eq!(
            summary_lines(&opts(), &failed).last().map(String::as_str),
            Some("stopped by an error: scanned 15 keys on 2 nodes in 2.0 s (7 keys/s); expired 8 (ttl 60) before stopping")
        );
    }

    /// The progress total of a node: visited keys of finished databases, the larger
    /// of DBSIZE and visited keys for the current one, the others' counts.
    #[test]
    fn progress_total_grows_with_added_keys() {
        let p = Progress {
            finished: 100,
            current: 50,
            current_size: 40,
            pending: 30,
            expired: 0,
        };
        assert_eq!(p.scanned(), 150);
        assert_eq!(p.total(), 180);
        let p = Progress {
            current_size: 90,
            ..p
        };
        assert_eq!(p.total(), 220);
    }
}
