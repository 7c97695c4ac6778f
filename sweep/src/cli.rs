//! Command-line options of `ratelimit-sweep`.

use crate::url::{self, Target};
use ratelimit_core::duration::parse_duration;
use ratelimit_core::limits::SWEEP_MAX_COUNT;

pub const USAGE: &str = "\
Usage: ratelimit-sweep --ttl DURATION [options]

Give a TTL to every key that has none, with RL.SWEEP (the ratelimit module), one
bounded chunk per call, on a single server or on every primary of a Cluster.

Options:
  --url URL         redis://[user:password@]host[:port][/db]  (default redis://127.0.0.1:6379)
  --ttl DURATION    the TTL to give: 90, 1500ms, 10m, 24h, 7d (a bare number is seconds)
  --match PATTERN   only keys matching this glob pattern (as SCAN MATCH)
  --type TYPE       only keys of this type: string, list, set, zset, hash, stream, ...
  --count N         keys visited per call, 1 to 5000 (default: the server's, 1000)
  --max-rate N      at most N keys visited per second on each node (default: no limit)
  --dry-run         count the keys that would get a TTL; change nothing
  --quiet           no progress, only the summary
  -h, --help        this text
  -V, --version     the version

Progress goes to stderr (a bar on a terminal, a line every few seconds otherwise);
the summary goes to stdout. Exit status: 0 done, 1 error, 2 bad usage.
";

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    pub target: Target,
    /// As given (the server parses it again); checked here first.
    pub ttl: String,
    pub pattern: Option<String>,
    pub key_type: Option<String>,
    pub count: Option<u64>,
    pub max_rate: Option<u64>,
    pub dry_run: bool,
    pub quiet: bool,
}

/// What the command line asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    Sweep(Options),
    Help,
    Version,
}

/// Parse the arguments after the program name. Errors are one line.
pub fn parse(args: &[String]) -> Result<Command, String> {
    let mut target = None;
    let mut ttl = None;
    let (mut pattern, mut key_type, mut count, mut max_rate) = (None, None, None, None);
    let (mut dry_run, mut quiet) = (false, false);
    let mut i = 0;
    while let Some(arg) = args.get(i) {
        i += 1;
        let (name, inline) = match arg.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n, Some(v.to_string())),
            _ => (arg.as_str(), None),
        };
        let mut value = || -> Result<String, String> {
            if let Some(v) = inline.clone() {
                return Ok(v);
            }
            let v = args
                .get(i)
                .cloned()
                .ok_or_else(|| format!("{name} needs a value"))?;
            i += 1;
            Ok(v)
        };
        match name {
            "-h" | "--help" => return Ok(Command::Help),
            "-V" | "--version" => return Ok(Command::Version),
            "--url" => set(&mut target, name, url::parse(&value()?)?)?,
            "--ttl" => {
                let v = value()?;
                parse_duration("--ttl", v.as_bytes()).map_err(|e| server_text(&e.to_string()))?;
                set(&mut ttl, name, v)?;
            }
            "--match" => set(&mut pattern, name, value()?)?,
            "--type" => set(&mut key_type, name, value()?)?,
            "--count" => {
                let v = value()?;
                let n = v
                    .parse::<u64>()
                    .ok()
                    .filter(|n| (1..=SWEEP_MAX_COUNT).contains(n))
                    .ok_or_else(|| {
                        format!(
                            "invalid --count '{v}': must be an integer from 1 to {SWEEP_MAX_COUNT}"
                        )
                    })?;
                set(&mut count, name, n)?;
            }
            "--max-rate" => {
                let v = value()?;
                let n = v.parse::<u64>().ok().filter(|&n| n >= 1).ok_or_else(|| {
                    format!(
                        "invalid --max-rate '{v}': must be a positive integer (keys per second)"
                    )
                })?;
                set(&mut max_rate, name, n)?;
            }
            "--dry-run" | "--quiet" if inline.is_some() => {
                return Err(format!("{name} takes no value"));
            }
            "--dry-run" => dry_run = true,
            "--quiet" => quiet = true,
            other => return Err(format!("unknown option '{other}' (see --help)")),
        }
    }
    let ttl = ttl.ok_or("--ttl is required (e.g. --ttl 1h); see --help")?;
    Ok(Command::Sweep(Options {
        target: target.unwrap_or_default(),
        ttl,
        pattern,
        key_type,
        count,
        max_rate,
        dry_run,
        quiet,
    }))
}

fn set<T>(slot: &mut Option<T>, name: &str, v: T) -> Result<(), String> {
    if slot.replace(v).is_some() {
        return Err(format!("{name} given more than once"));
    }
    Ok(())
}

/// A server-style error text without its `ERR ` code.
fn server_text(e: &str) -> String {
    e.strip_prefix("ERR ").unwrap_or(e).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(args: &[&str]) -> Result<Command, String> {
        let v: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        parse(&v)
    }

    fn opts(ttl: &str) -> Options {
        Options {
            target: Target::default(),
            ttl: ttl.into(),
            pattern: None,
            key_type: None,
            count: None,
            max_rate: None,
            dry_run: false,
            quiet: false,
        }
    }

    #[test]
    fn options() {
        assert_eq!(p(&["--ttl", "60"]), Ok(Command::Sweep(opts("60"))));
        assert_eq!(
            p(&[
                "--url=redis://:pw@h:7000/3",
                "--ttl=1h",
                "--match",
                "sess:*",
                "--type",
                "hash",
                "--count",
                "500",
                "--max-rate",
                "20000",
                "--dry-run",
                "--quiet",
            ]),
            Ok(Command::Sweep(Options {
                target: Target {
                    host: "h".into(),
                    port: 7000,
                    user: None,
                    password: Some("pw".into()),
                    db: 3
                },
                pattern: Some("sess:*".into()),
                key_type: Some("hash".into()),
                count: Some(500),
                max_rate: Some(20_000),
                dry_run: true,
                quiet: true,
                ..opts("1h")
            }))
        );
        assert_eq!(p(&["--ttl", "1", "--help"]), Ok(Command::Help));
        assert_eq!(p(&["-V"]), Ok(Command::Version));
        // A value may start with dashes.
        assert_eq!(
            p(&["--ttl", "5", "--match", "--x*"]).map(|c| match c {
                Command::Sweep(o) => o.pattern,
                _ => None,
            }),
            Ok(Some("--x*".into()))
        );
    }

    #[test]
    fn usage_errors() {
        let cases: &[(&[&str], &str)] = &[
            (&[], "--ttl is required (e.g. --ttl 1h); see --help"),
            (&["--ttl"], "--ttl needs a value"),
            (
                &["--ttl", "0"],
                "invalid --ttl '0': must be a positive duration (an integer with an optional unit ms, s, m, h or d)",
            ),
            (&["--ttl", "1w"], "invalid --ttl '1w': unknown unit (use ms, s, m, h or d)"),
            (&["--ttl", "1", "--ttl", "2"], "--ttl given more than once"),
            (&["--ttl", "1", "--count", "0"], "invalid --count '0': must be an integer from 1 to 5000"),
            (&["--ttl", "1", "--count", "5001"], "invalid --count '5001': must be an integer from 1 to 5000"),
            (
                &["--ttl", "1", "--max-rate", "0"],
                "invalid --max-rate '0': must be a positive integer (keys per second)",
            ),
            (&["--ttl", "1", "--dry-run=yes"], "--dry-run takes no value"),
            (&["--ttl", "1", "--frobnicate"], "unknown option '--frobnicate' (see --help)"),
            (&["--ttl", "1", "extra"], "unknown option 'extra' (see --help)"),
            (&["--ttl", "1", "--url", "http://x"], "invalid --url 'http://x': the scheme must be redis://"),
        ];
        for (args, want) in cases {
            assert_eq!(p(args), Err(want.to_string()), "{args:?}");
        }
    }
}
