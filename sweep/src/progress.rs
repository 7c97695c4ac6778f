//! Progress display: a bar redrawn in place when stderr is a terminal, a plain line
//! every few seconds otherwise (logs, CI). Formatting only; `run` decides when.

use std::time::Duration;

/// Where a sweep stands, summed over all nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Snapshot {
    pub scanned: u64,
    pub expired: u64,
    /// The sum of `DBSIZE` over the swept nodes when the sweep started.
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

    /// Per mille done (SCAN may visit a key twice, or keys may be added: capped).
    pub fn permille(&self) -> u64 {
        if self.total == 0 {
            return if self.nodes_done == self.nodes {
                1000
            } else {
                0
            };
        }
        (self.scanned.saturating_mul(1000) / self.total).min(1000)
    }

    /// Time left at the current rate; `None` before there is a rate.
    pub fn eta(&self) -> Option<Duration> {
        let rate = self.rate();
        if rate == 0 {
            return None;
        }
        let left = self.total.saturating_sub(self.scanned);
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
    /// rewrites it in place, so it must not wrap): the bar takes what the figures
    /// leave, from 8 to 30 cells, and goes when there is no room for 8; the figures
    /// are cut at the right edge when even they do not fit.
    pub fn bar_line(&self, columns: usize) -> String {
        let pm = self.permille();
        let figures = format!(
            " {:>3}.{}%  {}/{}  {}/s  ETA {}  {} {}{}",
            pm / 10,
            pm % 10,
            thousands(self.scanned),
            thousands(self.total),
            thousands(self.rate()),
            self.eta().map_or_else(|| "--".to_string(), clock),
            self.expired_word(),
            thousands(self.expired),
            nodes_note(self.nodes_done, self.nodes),
        );
        // One column stays free: writing into the last one wraps on some terminals.
        let room = columns.saturating_sub(1);
        let cells = room.saturating_sub(figures.len() + 2).min(30);
        let line = if cells >= 8 {
            format!("{}{figures}", bar(pm, cells))
        } else {
            figures.trim_start().to_string()
        };
        line.chars().take(room).collect()
    }

    /// The line printed every few seconds when stderr is not a terminal.
    pub fn plain_line(&self) -> String {
        let pm = self.permille();
        format!(
            "progress: scanned {}/{} keys ({}.{}%), {} {}, {} keys/s, ETA {}{}",
            self.scanned,
            self.total,
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
        if i > 0 && (digits.len() - i) % 3 == 0 {
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
        assert_eq!(s.bar_line(20), figures.trim_start()[..19]);
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
}
