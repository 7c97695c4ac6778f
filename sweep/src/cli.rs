//! Command-line options of `ratelimit-sweep`.

use crate::url::{self, Secret, Source, Target};
use ratelimit_core::limits::SWEEP_MAX_COUNT;
use ratelimit_core::parse::duration::parse_duration;

pub const USAGE: &str = "\
Usage: ratelimit-sweep --ttl DURATION [options]

Give a TTL to every key that has none, with RL.SWEEP (the ratelimit module), one
bounded chunk per call, in every database that has keys, on a single server or on
every primary of a Cluster.

Options:
  --url URL, -u URL redis://[[user]:password@]host[:port][/db]  (default redis://127.0.0.1:6379)
  -h HOST           the server's host, as redis-cli (default 127.0.0.1); not with --url
  -p PORT           its port, as redis-cli (default 6379); not with --url
  -a PASSWORD       the password, as redis-cli (visible to other users: prefer
                    REDISCLI_AUTH or --password-file)
  -n DB             the database, as redis-cli (the same as --db DB)
  --user NAME       the ACL user (the password comes from REDISCLI_AUTH or --password-file)
  --password-file PATH
                    the password is the first line of PATH (- reads it from stdin)
  --db N[,N...]     only these databases (repeatable; default: every database with keys)
  --ttl DURATION    the TTL to give: 90, 1500ms, 10m, 24h, 7d (a bare number is seconds)
  --match PATTERN   only keys matching this glob pattern (as SCAN MATCH)
  --type TYPE       only keys of this type: string, list, set, zset, hash, stream, or a
                    module type's 9-character name (what TYPE key answers, e.g. ReJSON-RL)
  --count N         keys visited per call, 1 to 5000 (default: the server's, 1000)
  --max-rate N      at most N keys visited per second on each node (default: no limit)
  --dry-run         count the keys that would get a TTL; change nothing
  --quiet           no progress, only the summary (and warnings)
  --help            this text (also -h alone)
  -V, --version     the version

The password: --password-file, or the one in --url or -a, or else the environment
variable REDISCLI_AUTH (as redis-cli). A password in --url or -a can be seen by other
users in the process list; prefer REDISCLI_AUTH or --password-file.

Progress goes to stderr (a bar on a terminal, a line every few seconds otherwise);
the summary goes to stdout. Ctrl-C (SIGINT) or SIGTERM stops after the current call
and prints the summary of what was done. Exit status: 0 done, 1 error, 2 bad usage,
130 interrupted by SIGINT, 143 stopped by SIGTERM.
";

/// The environment variable redis-cli reads the password from.
pub const PASSWORD_ENV: &str = "REDISCLI_AUTH";

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// Where, and (once [`resolve_password`] has run) the credentials.
    pub target: Target,
    /// `--db` and the URL's `/db`, sorted, without duplicates; `None`: every database
    /// that has keys.
    pub dbs: Option<Vec<u32>>,
    /// `--password-file` (`-` is stdin).
    pub password_file: Option<String>,
    /// As given (the server parses it again); checked here first.
    pub ttl: String,
    pub pattern: Option<String>,
    pub key_type: Option<String>,
    pub count: Option<u64>,
    pub max_rate: Option<u64>,
    pub dry_run: bool,
    pub quiet: bool,
}

/// What the command line asks for. (Made once per run: the size of the `Sweep`
/// variant does not matter.)
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    Sweep(Options),
    Help,
    Version,
}

/// Parse the arguments after the program name. Errors are one line, and never quote
/// a password (a URL in them is masked).
pub fn parse(args: &[String]) -> Result<Command, String> {
    let mut url = None;
    let mut ttl = None;
    let (mut pattern, mut key_type, mut count, mut max_rate) = (None, None, None, None);
    let (mut user, mut password_file) = (None, None);
    let (mut host, mut port, mut password) = (None, None, None);
    let mut dbs: Option<Vec<u32>> = None;
    let (mut dry_run, mut quiet) = (false, false);
    let mut i = 0;
    while let Some(arg) = args.get(i) {
        i += 1;
        // -h alone (or before another option) is the help; with a value, redis-cli's
        // host. A host name never starts with '-'.
        let help_h = arg == "-h" && args.get(i).is_none_or(|next| next.starts_with('-'));
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
            "--help" => return Ok(Command::Help),
            "-h" if help_h => return Ok(Command::Help),
            "-V" | "--version" => return Ok(Command::Version),
            "--url" | "-u" => set(&mut url, "--url", url::parse(&value()?)?)?,
            "-h" => {
                let v = value()?;
                if v.is_empty() {
                    return Err("-h needs a host name".into());
                }
                set(&mut host, name, v)?;
            }
            "-p" => {
                let v = value()?;
                let n = v.parse::<u16>().ok().filter(|&n| n > 0).ok_or_else(|| {
                    format!("invalid -p '{v}': must be a port number, 1 to 65535")
                })?;
                set(&mut port, name, n)?;
            }
            "-a" => {
                let v = value()?;
                if v.is_empty() {
                    return Err("-a needs a password".into());
                }
                set(&mut password, name, v)?;
            }
            "-n" => {
                let v = value()?;
                let n = v.parse::<u32>().map_err(|_| {
                    format!("invalid -n '{v}': must be a database number (0, 1, ...)")
                })?;
                dbs.get_or_insert_with(Vec::new).push(n);
            }
            "--user" => {
                let v = value()?;
                if v.is_empty() {
                    return Err("--user needs a user name".into());
                }
                set(&mut user, name, v)?;
            }
            "--password-file" => {
                let v = value()?;
                if v.is_empty() {
                    return Err("--password-file needs a path (or - for stdin)".into());
                }
                set(&mut password_file, name, v)?;
            }
            "--db" => {
                let v = value()?;
                let list = dbs.get_or_insert_with(Vec::new);
                for part in v.split(',') {
                    let n = part.trim().parse::<u32>().map_err(|_| {
                        format!("invalid --db '{v}': must be database numbers (0, 1, ...), comma-separated")
                    })?;
                    list.push(n);
                }
            }
            "--ttl" => {
                let v = value()?;
                parse_duration("--ttl", v.as_bytes()).map_err(|e| server_text(&e.to_string()))?;
                set(&mut ttl, name, v)?;
            }
            "--match" => set(&mut pattern, name, value()?)?,
            "--type" => set(&mut key_type, name, key_type_arg(&value()?)?)?,
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
            other => {
                return Err(format!(
                    "unknown option '{}' (see --help)",
                    mask_argument(other)
                ))
            }
        }
    }
    let ttl = ttl.ok_or("--ttl is required (e.g. --ttl 1h); see --help")?;
    if url.is_some() && (host.is_some() || port.is_some()) {
        return Err(
            "the address is given both in --url and with -h/-p: keep one (--url, or -h and -p)"
                .into(),
        );
    }
    let url = url.unwrap_or_else(|| {
        let default = Target::default();
        url::Url {
            target: Target {
                host: host.unwrap_or(default.host),
                port: port.unwrap_or(default.port),
                ..Target::default()
            },
            db: None,
        }
    });
    let mut target = url.target;
    if let Some(pw) = password {
        if target.password.is_some() {
            return Err("a password is given both in --url and with -a: keep one".into());
        }
        if password_file.is_some() {
            return Err(
                "a password is given both with -a and with --password-file: keep one".into(),
            );
        }
        target.password = Some(Secret::new(pw, Source::Argument));
    }
    if let Some(u) = user {
        if target.user.is_some() {
            return Err("the user is given both in --url and with --user: keep one".into());
        }
        target.user = Some(u);
    }
    if let Some(db) = url.db {
        if dbs.is_some() {
            return Err(format!(
                "the database is given both in --url (/{db}) and with --db: keep one"
            ));
        }
        dbs = Some(vec![db]);
    }
    if let Some(list) = dbs.as_mut() {
        list.sort_unstable();
        list.dedup();
    }
    Ok(Command::Sweep(Options {
        target,
        dbs,
        password_file,
        ttl,
        pattern,
        key_type,
        count,
        max_rate,
        dry_run,
        quiet,
    }))
}

/// The core types a `--type` can name (as SCAN TYPE and RL.SWEEP, case-insensitive).
const CORE_TYPES: [&str; 6] = ["string", "list", "set", "zset", "hash", "stream"];

/// `--type`: a core type, or what can only be a module type's name (a module names
/// its type with exactly 9 characters from A-Z, a-z, 0-9, '-' and '_'). Anything else
/// is a typo that would match no key (the sweep would report 0 keys, as SCAN does):
/// an error.
fn key_type_arg(v: &str) -> Result<String, String> {
    let core = CORE_TYPES.iter().any(|t| t.eq_ignore_ascii_case(v));
    let module = v.len() == 9
        && v.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if core || module {
        return Ok(v.to_string());
    }
    let hint = match v.to_ascii_lowercase().as_str() {
        "str" | "strings" => " (did you mean string?)",
        "sortedset" | "sorted-set" | "sorted_set" | "zsets" => " (did you mean zset?)",
        "lists" => " (did you mean list?)",
        "sets" => " (did you mean set?)",
        "hashes" | "hashmap" | "map" => " (did you mean hash?)",
        "streams" => " (did you mean stream?)",
        _ => "",
    };
    Err(format!(
        "unknown --type '{}': must be string, list, set, zset, hash or stream, or a module \
         type's 9-character name (what TYPE key answers, e.g. ReJSON-RL){hint}",
        mask_argument(v)
    ))
}

/// An argument quoted in a message: a URL in it (a forgotten `--url`) is masked.
fn mask_argument(arg: &str) -> String {
    if arg.contains('@') || arg.contains("://") {
        url::redact(arg)
    } else {
        arg.to_string()
    }
}

/// Settle which password to send, and say what the user should know about it (lines
/// for stderr, without the password).
///
/// The rule: `--password-file`, or else the password in `--url`, or else
/// `REDISCLI_AUTH` (`env`). What is on the command line wins over the environment,
/// as in redis-cli; a password both in the URL and in a file is a usage error.
/// `read_file` returns the password file's first line and its own warnings.
pub fn resolve_password(
    o: &mut Options,
    env: Option<String>,
    read_file: impl FnOnce(&str) -> Result<(String, Vec<String>), String>,
) -> Result<Vec<String>, String> {
    let mut notes = Vec::new();
    let env = env.filter(|v| !v.is_empty());
    if let Some(path) = &o.password_file {
        if o.target.password.is_some() {
            return Err(
                "a password is given both in --url and with --password-file: keep one".into(),
            );
        }
        let (password, warnings) = read_file(path)?;
        notes.extend(warnings);
        o.target.password = Some(Secret::new(password, Source::File));
    } else if o.target.password.is_some() {
        let given = o
            .target
            .password
            .as_ref()
            .map_or("the password", |p| p.source.describe());
        notes.push(format!(
            "warning: {given} can be read by other users of this machine \
             (ps, /proc); give it with REDISCLI_AUTH or --password-file instead"
        ));
        if env.is_some() {
            notes.push(format!("note: {PASSWORD_ENV} is set but {given} is used"));
        }
    } else if let Some(password) = env {
        o.target.password = Some(Secret::new(password, Source::Environment));
    }
    if o.target.user.is_some() && o.target.password.is_none() {
        return Err(format!(
            "a user name without a password: give the password with {PASSWORD_ENV}, \
             --password-file or in --url"
        ));
    }
    Ok(notes)
}

/// The first line of the password file (`-`: stdin), without its line end, and a
/// warning when others may read the file. Errors do not quote the path (a password
/// given there by mistake would show).
pub fn read_password_file(path: &str) -> Result<(String, Vec<String>), String> {
    use std::io::Read;
    let what = "the file given with --password-file";
    let mut text = String::new();
    let mut warnings = Vec::new();
    if path == "-" {
        std::io::stdin()
            .lock()
            .take(64 * 1024)
            .read_to_string(&mut text)
            .map_err(|e| format!("cannot read the password from stdin: {e}"))?;
    } else {
        let file = std::fs::File::open(path).map_err(|e| format!("cannot read {what}: {e}"))?;
        if let Ok(meta) = file.metadata() {
            use std::os::unix::fs::PermissionsExt;
            let mode = meta.permissions().mode() & 0o777;
            if mode & 0o077 != 0 {
                warnings.push(format!(
                    "warning: {what} can be read by other users (mode {mode:04o}); chmod 600 it"
                ));
            }
        }
        file.take(64 * 1024)
            .read_to_string(&mut text)
            .map_err(|e| format!("cannot read {what}: {e}"))?;
    }
    Ok((first_line(&text)?, warnings))
}

/// The password in a password file's text: its first line, without `\n` or `\r\n`.
pub fn first_line(text: &str) -> Result<String, String> {
    let line = text.split('\n').next().unwrap_or_default();
    let line = line.strip_suffix('\r').unwrap_or(line);
    if line.is_empty() {
        return Err(
            "the password file is empty (its first line is the password, as given to AUTH)".into(),
        );
    }
    Ok(line.to_string())
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
            dbs: None,
            password_file: None,
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
                    password: Some(Secret::new("pw", Source::Url)),
                },
                dbs: Some(vec![3]),
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
            (&["--ttl", "1", "--db", "x"], "invalid --db 'x': must be database numbers (0, 1, ...), comma-separated"),
            (&["--ttl", "1", "--db", "1,-2"], "invalid --db '1,-2': must be database numbers (0, 1, ...), comma-separated"),
            (
                &["--ttl", "1", "--url", "redis://h/2", "--db", "3"],
                "the database is given both in --url (/2) and with --db: keep one",
            ),
            (
                &["--ttl", "1", "--url", "redis://a:b@h", "--user", "c"],
                "the user is given both in --url and with --user: keep one",
            ),
            (&["--ttl", "1", "--user", ""], "--user needs a user name"),
            (&["--ttl", "1", "--password-file"], "--password-file needs a value"),
            // A URL without --url before it: masked in the message.
            (
                &["--ttl", "1", "redis://:s3cret@h"],
                "unknown option 'redis://:***@h' (see --help)",
            ),
            (&["--ttl", "1", "--url:redis://s3cret@h"], "unknown option '--url:***@h' (see --help)"),
        ];
        for (args, want) in cases {
            assert_eq!(p(args), Err(want.to_string()), "{args:?}");
        }
    }

    #[test]
    fn takes_h_p_a_n_like_redis_cli() {
        let Ok(Command::Sweep(o)) = p(&[
            "-h", "db.local", "-p", "7000", "-a", "pw", "-n", "2", "--ttl", "1",
        ]) else {
            panic!("parse");
        };
        assert_eq!(
            o.target,
            Target {
                host: "db.local".into(),
                port: 7000,
                user: None,
                password: Some(Secret::new("pw", Source::Argument)),
            }
        );
        assert_eq!(o.dbs, Some(vec![2]));
        // -p alone keeps the default host; -u is --url.
        let Ok(Command::Sweep(o)) = p(&["-p", "6380", "--ttl", "1"]) else {
            panic!("parse");
        };
        assert_eq!((o.target.host.as_str(), o.target.port), ("127.0.0.1", 6380));
        let Ok(Command::Sweep(o)) = p(&["-u", "redis://h:1", "--ttl", "1"]) else {
            panic!("parse");
        };
        assert_eq!((o.target.host.as_str(), o.target.port), ("h", 1));
        // -h alone, or before another option, is the help.
        assert_eq!(p(&["-h"]), Ok(Command::Help));
        assert_eq!(p(&["-h", "--ttl", "1"]), Ok(Command::Help));
        assert_eq!(p(&["--help"]), Ok(Command::Help));
        let errors: &[(&[&str], &str)] = &[
            (
                &["--ttl", "1", "-p", "0"],
                "invalid -p '0': must be a port number, 1 to 65535",
            ),
            (
                &["--ttl", "1", "-p", "x"],
                "invalid -p 'x': must be a port number, 1 to 65535",
            ),
            (&["--ttl", "1", "-a"], "-a needs a value"),
            (
                &["--ttl", "1", "-n", "x"],
                "invalid -n 'x': must be a database number (0, 1, ...)",
            ),
            (
                &["--ttl", "1", "--url", "redis://h", "-h", "g"],
                "the address is given both in --url and with -h/-p: keep one (--url, or -h and -p)",
            ),
            (
                &["--ttl", "1", "--url", "redis://:x@h", "-a", "y"],
                "a password is given both in --url and with -a: keep one",
            ),
            (
                &["--ttl", "1", "-a", "y", "--password-file", "f"],
                "a password is given both with -a and with --password-file: keep one",
            ),
        ];
        for (args, want) in errors {
            assert_eq!(p(args), Err(want.to_string()), "{args:?}");
        }
        // -a warns as a password in the URL does, naming where it came from.
        let Ok(Command::Sweep(mut o)) = p(&["-a", "pw", "--ttl", "1"]) else {
            panic!("parse");
        };
        let notes = resolve_password(&mut o, Some("env".into()), |_| Err("no file".into()))
            .expect("resolve");
        assert_eq!(
            notes,
            vec![
                "warning: the password given with -a can be read by other users of this \
                 machine (ps, /proc); give it with REDISCLI_AUTH or --password-file instead"
                    .to_string(),
                "note: REDISCLI_AUTH is set but the password given with -a is used".to_string(),
            ]
        );
    }

    #[test]
    fn an_unknown_type_is_an_error() {
        let key_type = |t: &str| match p(&["--ttl", "1", "--type", t]) {
            Ok(Command::Sweep(o)) => Ok(o.key_type),
            Ok(other) => Err(format!("{other:?}")),
            Err(e) => Err(e),
        };
        for t in [
            "string",
            "LIST",
            "set",
            "zset",
            "Hash",
            "stream",
            "ReJSON-RL",
            "vectorset",
        ] {
            assert_eq!(key_type(t), Ok(Some(t.to_string())), "{t}");
        }
        assert_eq!(
            key_type("strnig"),
            Err(
                "unknown --type 'strnig': must be string, list, set, zset, hash or stream, or a \
                 module type's 9-character name (what TYPE key answers, e.g. ReJSON-RL)"
                    .into()
            )
        );
        assert!(key_type("sorted_set")
            .expect_err("sorted_set")
            .ends_with("(did you mean zset?)"));
        assert!(key_type("").is_err());
    }

    #[test]
    fn databases() {
        let dbs = |args: &[&str]| match p(args) {
            Ok(Command::Sweep(o)) => Ok(o.dbs),
            Ok(other) => Err(format!("{other:?}")),
            Err(e) => Err(e),
        };
        assert_eq!(dbs(&["--ttl", "1"]), Ok(None));
        assert_eq!(
            dbs(&["--ttl", "1", "--url", "redis://h/0"]),
            Ok(Some(vec![0]))
        );
        assert_eq!(
            dbs(&["--ttl", "1", "--db", "3,1", "--db=0", "--db", "1"]),
            Ok(Some(vec![0, 1, 3]))
        );
    }

    fn resolve(
        url: &str,
        args: &[&str],
        env: Option<&str>,
        file: Result<&str, &str>,
    ) -> Result<(Target, Vec<String>), String> {
        let mut all = vec!["--ttl", "1", "--url", url];
        all.extend(args);
        let Ok(Command::Sweep(mut o)) = p(&all) else {
            return Err("parse".into());
        };
        let notes = resolve_password(&mut o, env.map(Into::into), |_| {
            file.map(|f| (f.to_string(), vec![])).map_err(Into::into)
        })?;
        Ok((o.target, notes))
    }

    fn secret(t: &Target) -> Option<(&str, Source)> {
        t.password.as_ref().map(|s| (s.expose(), s.source))
    }

    #[test]
    fn password_sources_and_their_order() {
        // The environment, as redis-cli.
        let (t, notes) = resolve("redis://h", &[], Some("envpw"), Ok("")).expect("env");
        assert_eq!(secret(&t), Some(("envpw", Source::Environment)));
        assert!(notes.is_empty(), "{notes:?}");
        // An empty REDISCLI_AUTH is no password.
        let (t, _) = resolve("redis://h", &[], Some(""), Ok("")).expect("empty env");
        assert_eq!(secret(&t), None);
        // The file wins over the environment.
        let (t, _) = resolve(
            "redis://h",
            &["--password-file", "f"],
            Some("envpw"),
            Ok("filepw"),
        )
        .expect("file");
        assert_eq!(secret(&t), Some(("filepw", Source::File)));
        // The URL wins over the environment, with a warning and a note, neither
        // quoting a password.
        let (t, notes) = resolve("redis://:urlpw@h", &[], Some("envpw"), Ok("")).expect("url");
        assert_eq!(secret(&t), Some(("urlpw", Source::Url)));
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(notes[0].starts_with("warning: the password in --url can be read by other users"));
        assert!(notes[1].contains("REDISCLI_AUTH is set but the password in --url is used"));
        for n in &notes {
            assert!(!n.contains("urlpw") && !n.contains("envpw"), "{n}");
        }
        // A file and a URL password: refused.
        assert_eq!(
            resolve("redis://:urlpw@h", &["--password-file", "f"], None, Ok("x")).map(|_| ()),
            Err("a password is given both in --url and with --password-file: keep one".into())
        );
        // A user from --user or the URL, the password from elsewhere.
        let (t, _) = resolve("redis://h", &["--user", "app"], Some("envpw"), Ok("")).expect("user");
        assert_eq!(t.user.as_deref(), Some("app"));
        assert_eq!(secret(&t), Some(("envpw", Source::Environment)));
        let (t, _) = resolve("redis://app:@h", &["--password-file", "f"], None, Ok("fp"))
            .expect("user in url");
        assert_eq!(t.user.as_deref(), Some("app"));
        assert_eq!(secret(&t), Some(("fp", Source::File)));
        // A user and no password anywhere.
        assert!(resolve("redis://h", &["--user", "app"], None, Ok(""))
            .expect_err("no password")
            .starts_with("a user name without a password"));
        // The file's own errors come through.
        assert_eq!(
            resolve(
                "redis://h",
                &["--password-file", "f"],
                None,
                Err("cannot read it")
            )
            .map(|_| ()),
            Err("cannot read it".into())
        );
    }

    #[test]
    fn password_file_lines() {
        assert_eq!(first_line("pw\n"), Ok("pw".into()));
        assert_eq!(first_line("pw\r\nsecond\n"), Ok("pw".into()));
        assert_eq!(first_line("p w:@/ \t"), Ok("p w:@/ \t".into()));
        assert!(first_line("").is_err());
        assert!(first_line("\nx").is_err());
        // Reading a real file; the error names neither the path nor its content.
        let dir = std::env::temp_dir().join(format!("rl-sweep-pw-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("pw");
        std::fs::write(&path, "s3cret\n").expect("write");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let (pw, warnings) = read_password_file(path.to_str().expect("utf-8")).expect("read");
        assert_eq!(pw, "s3cret");
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains("mode 0644"), "{warnings:?}");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        assert_eq!(
            read_password_file(path.to_str().expect("utf-8")).map(|r| r.1),
            Ok(vec![])
        );
        let missing = dir.join("s3cretPassword");
        let e = read_password_file(missing.to_str().expect("utf-8")).expect_err("missing");
        assert!(
            e.starts_with("cannot read the file given with --password-file: "),
            "{e}"
        );
        assert!(!e.contains("s3cret"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
