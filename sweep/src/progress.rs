//! Progress display: a bar redrawn in place when stderr is a terminal, a plain line
//! every few seconds otherwise (logs, CI). Formatting only; `run` decides when.

use std::time::Duration;

/// Where a sweep stands, summed over all nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Snapshot {
    pub scanned: u64,
    pub expired: u64,
    /// The keys to visit: for a database not started, its key count when the sweep
    /// started; for the one being swept, its `DBSIZE`, read again during the sweep
    /// (keys are added while it runs); for one finished, what was visited in it.
    /// A snapshot never shows less than `scanned` (see [`Snapshot::shown_total`]).
    pub total: u64,
    pub elapsed: Duration,
    pub nodes_done: usize,
    pub nodes: usize,
    pub dry_run: bool,
}

impl Snapshot {
    /// Keys scanned per second so far.
    pub fn rate(&self) -> u64 {
        let ms = self.elapsed.as_millis() as u64;
        if ms == 0 {
            return 0;
        }
        self.scanned.saturating_mul(1000) / ms
    }

    /// The total shown: never below what was scanned (keys added since `DBSIZE` was
    /// read, or a key SCAN visited twice), so the display never says `12/10`.
    pub fn shown_total(&self) -> u64 {
        self.total.max(self.scanned)
    }

    /// Per mille done, at most 1000.
    pub fn permille(&self) -> u64 {
        let total = self.shown_total();
        if total == 0 {
            return if self.nodes_done == self.nodes {
                1000
            } else {
                0
            };
        }
        (self.scanned.saturating_mul(1000) / total).min(1000)
    }

    /// Time left at the current rate; `None` before there is a rate.
    pub fn eta(&self) -> Option<Duration> {
        let rate = self.rate();
        if rate == 0 {
            return None;
        }
        let left = self.shown_total().saturating_sub(self.scanned);
        Some(Duration::from_millis(left.saturating_mul(1000) / rate))
    }

    fn expired_word(&self) -> &'static str {
        if self.dry_run {
            "would expire"
        } else {
            "expired"
        }
    }

    /// The terminal line for a terminal `columns` wide (no newline; the caller
    /// rewrites it in place, so it must not wrap: it leaves the last column free).
    /// With room, a bar of 8 to 30 cells and every figure. Narrower, parts go whole,
    /// never cut: first the bar, then the rate and ETA, then the nodes note, then
    /// the scanned/total count, then the expired count; the percentage goes last
    /// (below 7 columns the line is empty).
    pub fn bar_line(&self, columns: usize) -> String {
        let pm = self.permille();
        let pct = format!("{:>3}.{}%", pm / 10, pm % 10);
        let count = format!(
            "{}/{}",
            thousands(self.scanned),
            thousands(self.shown_total())
        );
        let speed = format!(
            "{}/s  ETA {}",
            thousands(self.rate()),
            self.eta().map_or_else(|| "--".to_string(), clock)
        );
        let expired = format!("{} {}", self.expired_word(), thousands(self.expired));
        let nodes = nodes_note(self.nodes_done, self.nodes);
        let figures = format!(" {pct}  {count}  {speed}  {expired}{nodes}");
        // One column stays free: writing into the last one wraps on some terminals.
        let room = columns.saturating_sub(1);
        let cells = room.saturating_sub(figures.len() + 2).min(30);
        if cells >= 8 {
            return format!("{}{figures}", bar(pm, cells));
        }
        let pct = pct.trim_start();
        [
            format!("{pct}  {count}  {speed}  {expired}{nodes}"),
            format!("{pct}  {count}  {expired}{nodes}"),
            format!("{pct}  {count}  {expired}"),
            format!("{pct}  {expired}"),
            pct.to_string(),
        ]
        .into_iter()
        .find(|line| line.chars().count() <= room)
        .unwrap_or_default()
    }

    /// The line printed every few seconds when stderr is not a terminal.
    pub fn plain_line(&self) -> String {
        let pm = self.permille();
        format!(
            "progress: scanned {}/{} keys ({}.{}%), {} {}, {} keys/s, ETA {}{}",
            self.scanned,
            self.shown_total(),
            pm / 10,
            pm % 10,
            self.expired_word(),
            self.expired,
            self.rate(),
            self.eta().map_or_else(|| "--".to_string(), clock),
            nodes_note(self.nodes_done, self.nodes),
        )
    }
}

fn nodes_note(done: usize, nodes: usize) -> String {
    if nodes > 1 {
        format!(", {done}/{nodes} nodes done")
    } else {
        String::new()
    }
}

/// `[#####-----]` with `width` cells for `permille` / 1000.
pub fn bar(permille: u64, width: usize) -> String {
    let full = (permille.min(1000) as usize * width) / 1000;
    format!("[{}{}]", "#".repeat(full), "-".repeat(width - full))
}

/// `1234567` as `1,234,567`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A duration as `h:mm:ss` or `m:ss`.
pub fn clock(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 3600 {
        format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
    } else {
        format!("{}:{:02}", s / 60, s % 60)
    }
}

/// Seconds with one decimal, for the summary.
pub fn seconds(d: Duration) -> String {
    let ms = d.as_millis();
    format!("{}.{}", ms / 1000, ms % 1000 / 100)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(scanned: u64, total: u64, ms: u64) -> Snapshot {
        Snapshot {
            scanned,
            expired: scanned / 2,
            total,
            elapsed: Duration::from_millis(ms),
            nodes_done: 0,
            nodes: 1,
            dry_run: false,
        }
    }

    #[test]
    fn numbers() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_000), "1,000");
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(clock(Duration::from_secs(5)), "0:05");
        assert_eq!(clock(Duration::from_secs(125)), "2:05");
        assert_eq!(clock(Duration::from_secs(3 * 3600 + 61)), "3:01:01");
        assert_eq!(seconds(Duration::from_millis(6_249)), "6.2");
        assert_eq!(bar(0, 4), "[----]");
        assert_eq!(bar(500, 4), "[##--]");
        assert_eq!(bar(2000, 4), "[####]");
    }

    #[test]
    fn rate_progress_and_eta() {
        let s = snap(250_000, 1_000_000, 2_000);
        assert_eq!(s.rate(), 125_000);
        assert_eq!(s.permille(), 250);
        assert_eq!(s.eta(), Some(Duration::from_secs(6)));
        assert_eq!(
            s.plain_line(),
            "progress: scanned 250000/1000000 keys (25.0%), expired 125000, 125000 keys/s, ETA 0:06"
        );
        let figures = "  25.0%  250,000/1,000,000  125,000/s  ETA 0:06  expired 125,000";
        assert_eq!(
            s.bar_line(200),
            format!("[#######-----------------------]{figures}")
        );
        // The bar shrinks to fit, then goes; the line never reaches the last column.
        let w = figures.len() + 2 + 8 + 1;
        assert_eq!(s.bar_line(w), format!("[##------]{figures}"));
        assert_eq!(s.bar_line(w - 1), figures.trim_start());
        // Narrower, whole parts go (the line used to be cut mid-number here).
        assert_eq!(s.bar_line(20), "25.0%");
        assert_eq!(s.bar_line(30), "25.0%  expired 125,000");
        // A 1 000 000-key sweep keeps a bar on an 80-column terminal.
        assert!(s.bar_line(80).starts_with("[###-"), "{}", s.bar_line(80));
        for cols in [0, 1, 40, 80, 120] {
            assert!(s.bar_line(cols).chars().count() < cols.max(1), "{cols}");
        }
        // Before any time has passed there is no rate and no ETA.
        assert_eq!(snap(0, 10, 0).eta(), None);
        // More keys scanned than DBSIZE said (rehashing, new keys): capped at 100%.
        let over = snap(12, 10, 1_000);
        assert_eq!(over.permille(), 1000);
        assert_eq!(over.eta(), Some(Duration::ZERO));
        // An empty keyspace is done when its nodes are.
        let mut empty = snap(0, 0, 10);
        assert_eq!(empty.permille(), 0);
        empty.nodes_done = 1;
        assert_eq!(empty.permille(), 1000);
        let mut dry = snap(10, 10, 1_000);
        dry.dry_run = true;
        dry.nodes = 3;
        assert!(dry.plain_line().contains("would expire 5"));
        assert!(dry.plain_line().ends_with(", 0/3 nodes done"));
    }

    /// Snapshots of every shape: small and large numbers, one and several nodes,
    /// dry runs, before any rate, done.
    fn shapes() -> Vec<Snapshot> {
        let mut out = Vec::new();
        for (scanned, total) in [
            (0, 0),
            (7, 10),
            (250_000, 1_000_000),
            (123_456_789, 987_654_321),
        ] {
            for nodes in [1, 3] {
                for dry_run in [false, true] {
                    for ms in [0, 1_500] {
                        out.push(Snapshot {
                            scanned,
                            expired: scanned / 3,
                            total,
                            elapsed: Duration::from_millis(ms),
                            nodes_done: nodes - 1,
                            nodes,
                            dry_run,
                        });
                    }
                }
            }
        }
        out
    }

    fn is_bar(word: &str) -> bool {
        word.len() >= 10
            && word.starts_with('[')
            && word.ends_with(']')
            && word[1..word.len() - 1]
                .chars()
                .all(|c| c == '#' || c == '-')
    }

    /// At every width from 10 to 200 columns: the line never reaches the last
    /// column, never cuts a word (every word is one of the full line's), keeps the
    /// percentage from 7 columns up, drops the bar before any figure, and shows no
    /// less as the terminal widens.
    #[test]
    fn bar_line_fits_every_width_without_cutting_words() {
        for s in shapes() {
            let full = s.bar_line(1_000);
            // Words, with the comma that joins the nodes note left out.
            let full_words: Vec<&str> = full
                .split_whitespace()
                .filter(|w| !is_bar(w))
                .map(|w| w.trim_end_matches(','))
                .collect();
            let mut previous: Vec<String> = Vec::new();
            for cols in 10..=200 {
                let line = s.bar_line(cols);
                assert!(line.chars().count() < cols, "{cols}: {line:?}");
                assert!(!line.contains('\n') && !line.contains('\r'), "{line:?}");
                let words: Vec<String> = line
                    .split_whitespace()
                    .filter(|w| !is_bar(w))
                    .map(|w| w.trim_end_matches(',').to_string())
                    .collect();
                // Whole words only, in the full line's order.
                let mut rest = full_words.iter();
                for w in &words {
                    assert!(
                        rest.any(|f| f == w),
                        "{cols}: {w:?} cut or out of place in {line:?} (full {full:?})"
                    );
                }
                assert!(
                    words.first().is_some_and(|w| w.ends_with('%')),
                    "{cols}: {line:?}"
                );
                // A bar only with every figure.
                if line.starts_with('[') {
                    assert_eq!(words, full_words, "{cols}: {line:?}");
                }
                // Widening never hides a figure.
                for w in &previous {
                    assert!(words.contains(w), "{cols}: {w:?} gone from {line:?}");
                }
                previous = words;
            }
            // With room to spare, the bar is there.
            assert!(s.bar_line(200).starts_with('['), "{:?}", s.bar_line(200));
        }
    }

    /// Keys added during a sweep (or visited twice by SCAN): the display never says
    /// more than 100 %, nor more keys scanned than the total.
    #[test]
    fn never_more_than_all() {
        let s = Snapshot {
            scanned: 205_024,
            expired: 200_000,
            total: 100_000,
            elapsed: Duration::from_secs(2),
            nodes_done: 0,
            nodes: 1,
            dry_run: false,
        };
        assert_eq!(s.permille(), 1000);
        assert_eq!(s.eta(), Some(Duration::ZERO));
        let plain = s.plain_line();
        assert!(
            plain.starts_with("progress: scanned 205024/205024 keys (100.0%)"),
            "{plain}"
        );
        for cols in [20, 45, 80, 200] {
            let line = s.bar_line(cols);
            assert!(!line.contains("100,000"), "{cols}: {line}");
        }
        assert!(
            s.bar_line(200).contains(" 100.0%  205,024/205,024  "),
            "{}",
            s.bar_line(200)
        );
        // Every ratio of scanned to total, at every width.
        for scanned in [0, 1, 99, 100, 101, 1_000, u64::MAX / 2000] {
            for total in [0, 1, 100, 1_000] {
                let s = Snapshot {
                    scanned,
                    total,
                    ..s
                };
                assert!(s.permille() <= 1000);
                let plain = s.plain_line();
                let (done, rest) = plain
                    .strip_prefix("progress: scanned ")
                    .and_then(|p| p.split_once('/'))
                    .expect("counts");
                let all = rest.split(' ').next().expect("total");
                assert!(
                    done.parse::<u64>().ok() <= all.parse::<u64>().ok(),
                    "{plain}"
                );
                let pct = plain
                    .split_once(" keys (")
                    .and_then(|(_, p)| p.split_once("%)"))
                    .map(|(p, _)| p.replace('.', ""))
                    .and_then(|p| p.parse::<u64>().ok())
                    .expect("percentage");
                assert!(pct <= 1000, "{plain}");
            }
        }
    }
}
