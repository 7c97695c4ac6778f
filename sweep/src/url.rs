//! `--url redis://[[user]:password@]host[:port][/db]`, and the password that is never
//! shown.
//!
//! Forms accepted (the scheme is optional, and case-insensitive):
//! - `redis://host:port`
//! - `redis://user:password@host:port` (`AUTH user password`)
//! - `redis://:password@host:port` and `redis://password@host:port` (`AUTH password`;
//!   the second is how redis-cli reads userinfo without a `:`)
//! - `/db` after the address: that database only
//!
//! The user name and password are percent-decoded (`%40` is `@`). The userinfo ends at
//! the **last** `@`, so an unencoded password with `@`, `:` or `/` in it still parses
//! in the `user:password@` and `:password@` forms (redis-cli stops at the first `@`
//! and connects to a host made of the rest of the password). In the userinfo the
//! first `:` separates the user from the password, as in redis-cli; a user part that
//! holds an unencoded `@` or `/` can only be a password cut in two, and is refused.
//!
//! No message ever shows the password, nor a part of the userinfo that could be one:
//! [`redact`] masks it, and [`Secret`] has no `Display` and a masked `Debug`.

use std::fmt;

/// Where the password came from (named in messages, never the password itself).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    Url,
    /// `-a`, as redis-cli.
    Argument,
    Environment,
    File,
}

impl Source {
    pub fn describe(self) -> &'static str {
        match self {
            Source::Url => "the password in --url",
            Source::Argument => "the password given with -a",
            Source::Environment => "the password in REDISCLI_AUTH",
            Source::File => "the password from --password-file",
        }
    }
}

/// A password. `Debug` masks it and there is no `Display`: only [`Secret::expose`],
/// called where `AUTH` is sent, gives the text.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret {
    value: String,
    pub source: Source,
}

impl Secret {
    pub fn new(value: impl Into<String>, source: Source) -> Secret {
        Secret {
            value: value.into(),
            source,
        }
    }

    pub fn expose(&self) -> &str {
        &self.value
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Secret(***, {:?})", self.source)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub host: String,
    pub port: u16,
    /// `AUTH user password` (with a user) or `AUTH password` (without).
    pub user: Option<String>,
    pub password: Option<Secret>,
}

impl Default for Target {
    fn default() -> Self {
        Target {
            host: "127.0.0.1".into(),
            port: 6379,
            user: None,
            password: None,
        }
    }
}

impl Target {
    /// The same credentials on another node (a Cluster primary).
    pub fn with_addr(&self, host: &str, port: u16) -> Target {
        Target {
            host: host.to_string(),
            port,
            ..self.clone()
        }
    }
}

impl fmt::Display for Target {
    /// `host:port`, never the credentials.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// What a `--url` says: where, as whom, and which database (`/db`), if any.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Url {
    pub target: Target,
    pub db: Option<u32>,
}

/// The pieces of a URL, split the same way for parsing and for [`redact`].
struct Parts<'a> {
    /// `redis://` (as written), or empty.
    scheme: &'a str,
    /// Between the scheme and the last `@`.
    userinfo: Option<&'a str>,
    /// After the last `@` (or the scheme): `host[:port][/db][?query]`.
    rest: &'a str,
}

fn split(url: &str) -> Parts<'_> {
    // A scheme is letters, digits, `+`, `-`, `.` (RFC 3986) before `://`; anything
    // else before a `://` is part of a bare `user:password@host` (a password may hold
    // `://`), and must not be shown as a scheme.
    let (scheme, after) = match url.find("://") {
        Some(i)
            if i > 0
                && url[..i].starts_with(|c: char| c.is_ascii_alphabetic())
                && url[..i]
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c)) =>
        {
            url.split_at(i + 3)
        }
        _ => ("", url),
    };
    match after.rfind('@') {
        Some(at) => Parts {
            scheme,
            userinfo: Some(&after[..at]),
            rest: &after[at + 1..],
        },
        None => Parts {
            scheme,
            userinfo: None,
            rest: after,
        },
    }
}

/// The user part of a userinfo, when it can be shown: there is a `:` (so the text
/// before it is a user name, as redis-cli reads it) and no `@` or `/` in it (which
/// only a password written without percent-encoding puts there).
fn shown_user(userinfo: &str) -> Option<&str> {
    let (user, _) = userinfo.split_once(':')?;
    (!user.contains(['@', '/'])).then_some(user)
}

/// The URL with its password masked, fit for messages: `redis://user:***@host:6379`,
/// `redis://:***@host`, or `redis://***@host` when the userinfo is a password alone
/// (or cannot be told apart from one). A query (`?...`) is masked too, since some
/// clients put a password there.
pub fn redact(url: &str) -> String {
    let p = split(url);
    let userinfo = match p.userinfo {
        None => String::new(),
        Some(ui) => match shown_user(ui) {
            Some(user) => format!("{user}:***@"),
            None => "***@".to_string(),
        },
    };
    let rest = match p.rest.split_once('?') {
        Some((before, _)) => format!("{before}?***"),
        None => p.rest.to_string(),
    };
    format!("{}{userinfo}{rest}", p.scheme)
}

/// Parse a `redis://` URL; a bare `[userinfo@]host[:port][/db]` is accepted too.
/// Errors are one line and show the URL only through [`redact`].
pub fn parse(url: &str) -> Result<Url, String> {
    let shown = redact(url);
    let bad = |why: &str| format!("invalid --url '{shown}': {why}");
    let p = split(url);
    let scheme = p.scheme.trim_end_matches("://").to_ascii_lowercase();
    match scheme.as_str() {
        "" | "redis" => {}
        "rediss" => return Err(bad("TLS (rediss://) is not supported")),
        _ => return Err(bad("the scheme must be redis://")),
    }
    let mut t = Target::default();
    if let Some(userinfo) = p.userinfo {
        let (user, password) = match userinfo.split_once(':') {
            Some((u, pw)) => (u, pw),
            // No `:`: the whole userinfo is the password, as redis-cli reads it.
            None => ("", userinfo),
        };
        if user.contains(['@', '/']) {
            return Err(bad(
                "the user name would hold an unencoded '@' or '/', so a password is cut in two: \
                 percent-encode '@' as %40, ':' as %3A and '/' as %2F, write a password alone \
                 as :password@, or give it with REDISCLI_AUTH or --password-file",
            ));
        }
        let user = decode(user).map_err(|e| bad(&e))?;
        let password = decode(password).map_err(|e| bad(&e))?;
        t.user = (!user.is_empty()).then_some(user);
        // `redis://user:@host`: a user whose password comes from elsewhere.
        t.password = (!password.is_empty()).then(|| Secret::new(password, Source::Url));
    }
    if p.rest.contains('?') {
        return Err(bad(
            "query parameters (?...) are not supported; give the database as /db",
        ));
    }
    let (hostport, path) = match p.rest.split_once('/') {
        Some((a, path)) => (a, Some(path)),
        None => (p.rest, None),
    };
    let (host, port) = if let Some(v6) = hostport.strip_prefix('[') {
        let (h, after) = v6
            .split_once(']')
            .ok_or_else(|| bad("unclosed [ in the host"))?;
        match after.strip_prefix(':') {
            Some(port) => (h, Some(port)),
            None if after.is_empty() => (h, None),
            None => return Err(bad("unexpected text after the host")),
        }
    } else {
        match hostport.split_once(':') {
            Some((h, port)) => (h, Some(port)),
            None => (hostport, None),
        }
    };
    if !host.is_empty() {
        t.host = host.to_string();
    }
    if let Some(port) = port {
        t.port = port
            .parse()
            .ok()
            .filter(|&n| n > 0)
            .ok_or_else(|| bad("the port must be a number from 1 to 65535"))?;
    }
    let db = match path {
        None | Some("") => None,
        Some(path) => Some(
            path.parse()
                .map_err(|_| bad("the path must be a database number (/0, /1, ...)"))?,
        ),
    };
    Ok(Url { target: t, db })
}

/// Percent-decoding of the user and password. The errors do not quote the text.
fn decode(s: &str) -> Result<String, String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while let Some(&c) = b.get(i) {
        if c == b'%' {
            let hex = b
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or("bad %-escape in the user name or password (write a '%' as %25)")?;
            out.push(hex);
            i += 3;
        } else {
            out.push(c);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| "the user name or password is not UTF-8".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(host: &str, port: u16, user: Option<&str>, pw: Option<&str>, db: u32) -> Url {
        Url {
            target: Target {
                host: host.into(),
                port,
                user: user.map(Into::into),
                password: pw.map(|p| Secret::new(p, Source::Url)),
            },
            db: Some(db),
        }
    }

    /// As `t`, without a `/db`.
    fn n(host: &str, port: u16, user: Option<&str>, pw: Option<&str>) -> Url {
        Url {
            db: None,
            ..t(host, port, user, pw, 0)
        }
    }

    #[test]
    fn urls() {
        let cases: &[(&str, Url)] = &[
            ("redis://127.0.0.1:7000", n("127.0.0.1", 7000, None, None)),
            ("redis://localhost", n("localhost", 6379, None, None)),
            ("redis://", n("127.0.0.1", 6379, None, None)),
            ("10.0.0.5:6380", n("10.0.0.5", 6380, None, None)),
            ("redis://:secret@h:1/2", t("h", 1, None, Some("secret"), 2)),
            (
                "redis://app:p%40ss%3A@h:1",
                n("h", 1, Some("app"), Some("p@ss:")),
            ),
            ("redis://a:b:c@h", n("h", 6379, Some("a"), Some("b:c"))),
            ("redis://[::1]:7000", n("::1", 7000, None, None)),
            ("redis://[::1]", n("::1", 6379, None, None)),
            // The password alone, as redis-cli reads `redis://pass@host`.
            ("redis://s3cret@h:1", n("h", 1, None, Some("s3cret"))),
            ("redis://s3cret@h:1/4", t("h", 1, None, Some("s3cret"), 4)),
            ("REDIS://s%3Acret@h", n("h", 6379, None, Some("s:cret"))),
            // Unencoded `@`, `:` and `/` in the password: the userinfo ends at the last `@`.
            (
                "redis://u:p@ss:w/rd@h:1",
                n("h", 1, Some("u"), Some("p@ss:w/rd")),
            ),
            (
                "redis://:p@ss:w/rd@h:1/3",
                t("h", 1, None, Some("p@ss:w/rd"), 3),
            ),
            ("redis://p@ss/w@h", n("h", 6379, None, Some("p@ss/w"))),
            ("redis://:a://b@h", n("h", 6379, None, Some("a://b"))),
            (":a://b@h:2", n("h", 2, None, Some("a://b"))),
            (
                "redis://u:p@[::1]:7000/1",
                t("::1", 7000, Some("u"), Some("p"), 1),
            ),
            // A user whose password comes from elsewhere; an empty userinfo.
            ("redis://app:@h", n("h", 6379, Some("app"), None)),
            ("redis://@h", n("h", 6379, None, None)),
            ("redis://h:1/", n("h", 1, None, None)),
            ("redis://h:1/0", t("h", 1, None, None, 0)),
        ];
        for (url, want) in cases {
            assert_eq!(parse(url).as_ref(), Ok(want), "{url}");
        }
        assert_eq!(
            parse("redis://[::1]:7000").map(|u| u.target.to_string()),
            Ok("[::1]:7000".into())
        );
        assert_eq!(
            parse("redis://u:p@h:1").map(|u| u.target.to_string()),
            Ok("h:1".into())
        );
    }

    #[test]
    fn passwords_are_never_shown() {
        assert_eq!(redact("redis://u:secret@h:1/0"), "redis://u:***@h:1/0");
        assert_eq!(redact("redis://:secret@h"), "redis://:***@h");
        assert_eq!(redact("redis://h:1"), "redis://h:1");
        assert_eq!(redact("u:p@h"), "u:***@h");
        assert_eq!(redact("redis://s3cret@h:1"), "redis://***@h:1");
        assert_eq!(redact("redis://u:p@ss:w/rd@h:1/2"), "redis://u:***@h:1/2");
        assert_eq!(redact("redis://p@ss:w/rd@h:1"), "redis://***@h:1");
        assert_eq!(redact("redis://p/ss:w@h"), "redis://***@h");
        assert_eq!(redact(":a://b@h"), ":***@h");
        assert_eq!(redact("x:a://b@h"), "x:***@h");
        assert_eq!(redact("redis://h:1?password=s3cret"), "redis://h:1?***");
        // Neither `Debug` of what is parsed shows it.
        let u = parse("redis://u:s3cret@h").expect("parses");
        assert!(!format!("{u:?}").contains("s3cret"), "{u:?}");
        assert_eq!(
            u.target.password.as_ref().map(Secret::expose),
            Some("s3cret")
        );
    }

    /// Every part of `secret` of 4 characters or more.
    fn pieces(secret: &str) -> Vec<String> {
        let c: Vec<char> = secret.chars().collect();
        let mut out = Vec::new();
        for len in 4..=c.len() {
            for w in c.windows(len) {
                out.push(w.iter().collect());
            }
        }
        out
    }

    /// Every error path of the parser, with a password in every form: the message is
    /// one line, starts with the masked URL, and holds no part of the password.
    #[test]
    fn errors_never_show_any_part_of_the_password() {
        for secret in ["s3cretPW", "p@ss:w/rd", "pa%zzss", "=x://yz@w"] {
            let enc = secret
                .replace('%', "%25")
                .replace('@', "%40")
                .replace(':', "%3A");
            let userinfos = [
                format!("u:{secret}"),
                format!(":{secret}"),
                secret.to_string(),
                format!("u:{enc}"),
                enc.clone(),
            ];
            let tails = [
                "h:x", "h:0", "h:70000", "h/x", "[::1", "[::1]x", "h?db=1", "h:1/2/3",
            ];
            let mut urls = Vec::new();
            for ui in &userinfos {
                for tail in tails {
                    for scheme in ["redis://", "rediss://", "http://", ""] {
                        urls.push(format!("{scheme}{ui}@{tail}"));
                    }
                }
                urls.push(format!("rediss://{ui}@h"));
                urls.push(format!("http://{ui}@h"));
            }
            // A password alone cut in two by an unencoded `@` or `/`, and bad escapes.
            urls.push("redis://p@ss:w/rd@h:1".to_string());
            urls.push("redis://p/ss:w@h:1".to_string());
            urls.push(format!("redis://u:{secret}%zz@h"));
            urls.push(format!("redis://u:{secret}%ff@h"));
            for url in &urls {
                let Err(e) = parse(url) else {
                    continue;
                };
                assert!(
                    e.starts_with(&format!("invalid --url '{}': ", redact(url))),
                    "{e}"
                );
                assert!(!e.contains('\n'), "{e}");
                for piece in pieces(secret) {
                    assert!(!e.contains(&piece), "{url} -> {e} shows {piece:?}");
                }
            }
        }
        // The error-path URLs above do fail.
        for url in [
            "redis://p@ss:w/rd@h:1",
            "redis://u:p@ss:w/rd@h:x",
            "redis://p@ss:w/rd@h?x",
            "rediss://:p@ss:w/rd@h",
            "redis://u:p@ss%zz@h",
        ] {
            assert!(parse(url).is_err(), "{url}");
        }
    }

    #[test]
    fn bad_urls() {
        for url in [
            "rediss://h",
            "redis://u:secret@h:x",
            "http://h",
            "redis://h:0",
            "redis://h:70000",
            "redis://h:x",
            "redis://h/x",
            "redis://u:%zz@h",
            "redis://[::1",
            "redis://[::1]x",
            "redis://h?password=secret",
        ] {
            let e = parse(url).expect_err(url);
            assert!(
                e.starts_with(&format!("invalid --url '{}': ", redact(url))),
                "{e}"
            );
            assert!(!e.contains("secret"), "{e}");
            assert!(!e.contains('\n'));
        }
        // `redis://user@h` was refused; it is the password alone, as in redis-cli.
        assert!(parse("redis://user@h").is_ok());
        // As in redis-cli, the first `:` of the userinfo ends the user name: a
        // password alone with a `:` in it must be written `:password@` (or encoded).
        assert_eq!(
            parse("redis://ab:cd@h").map(|u| u.target.user),
            Ok(Some("ab".to_string()))
        );
    }
}
