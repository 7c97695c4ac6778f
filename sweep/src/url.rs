//! `--url redis://[user:password@]host[:port][/db]`.

use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub host: String,
    pub port: u16,
    /// `AUTH user password` (with a user) or `AUTH password` (without).
    pub user: Option<String>,
    pub password: Option<String>,
    /// `SELECT db` (RL.SWEEP, like SCAN, sweeps the selected database).
    pub db: u32,
}

impl Default for Target {
    fn default() -> Self {
        Target {
            host: "127.0.0.1".into(),
            port: 6379,
            user: None,
            password: None,
            db: 0,
        }
    }
}

impl Target {
    /// The same credentials and database on another node (a Cluster primary).
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

/// Parse a `redis://` URL; a bare `host[:port]` is accepted too.
pub fn parse(url: &str) -> Result<Target, String> {
    let shown = redact(url);
    let bad = |why: &str| format!("invalid --url '{shown}': {why}");
    let rest = match url.split_once("://") {
        Some(("redis", rest)) => rest,
        Some(("rediss", _)) => return Err(bad("TLS (rediss://) is not supported")),
        Some(_) => return Err(bad("the scheme must be redis://")),
        None => url,
    };
    let (authority, path) = match rest.split_once('/') {
        Some((a, p)) => (a, p),
        None => (rest, ""),
    };
    let mut t = Target::default();
    let hostport = match authority.rsplit_once('@') {
        Some((userinfo, hostport)) => {
            let (user, password) = match userinfo.split_once(':') {
                Some((u, p)) => (u, Some(p)),
                None => ("", None),
            };
            let Some(password) = password else {
                return Err(bad("credentials are user:password@ or :password@"));
            };
            t.user = (!user.is_empty())
                .then(|| decode(user))
                .transpose()
                .map_err(|e| bad(&e))?;
            t.password = Some(decode(password).map_err(|e| bad(&e))?);
            hostport
        }
        None => authority,
    };
    let (host, port) = if let Some(v6) = hostport.strip_prefix('[') {
        let (h, after) = v6
            .split_once(']')
            .ok_or_else(|| bad("unclosed [ in the host"))?;
        match after.strip_prefix(':') {
            Some(p) => (h, Some(p)),
            None if after.is_empty() => (h, None),
            None => return Err(bad("unexpected text after the host")),
        }
    } else {
        match hostport.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (hostport, None),
        }
    };
    if !host.is_empty() {
        t.host = host.to_string();
    }
    if let Some(p) = port {
        t.port = p
            .parse()
            .ok()
            .filter(|&p| p > 0)
            .ok_or_else(|| bad("the port must be a number from 1 to 65535"))?;
    }
    if !path.is_empty() {
        t.db = path
            .parse()
            .map_err(|_| bad("the path must be a database number"))?;
    }
    Ok(t)
}

/// The URL with its password replaced by `***`, fit for messages.
pub fn redact(url: &str) -> String {
    let (scheme, rest) = match url.split_once("://") {
        Some((s, r)) => (format!("{s}://"), r),
        None => (String::new(), url),
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    match rest[..authority_end].rsplit_once('@') {
        Some((userinfo, _)) => {
            let user = userinfo.split_once(':').map_or(userinfo, |(u, _)| u);
            let after = &rest[userinfo.len()..];
            format!("{scheme}{user}:***{after}")
        }
        None => url.to_string(),
    }
}

/// Percent-decoding of the user and password.
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
                .ok_or("bad %-escape in the credentials")?;
            out.push(hex);
            i += 3;
        } else {
            out.push(c);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| "the credentials are not UTF-8".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(host: &str, port: u16, user: Option<&str>, pw: Option<&str>, db: u32) -> Target {
        Target {
            host: host.into(),
            port,
            user: user.map(Into::into),
            password: pw.map(Into::into),
            db,
        }
    }

    #[test]
    fn urls() {
        let cases: &[(&str, Target)] = &[
            (
                "redis://127.0.0.1:7000",
                t("127.0.0.1", 7000, None, None, 0),
            ),
            ("redis://localhost", t("localhost", 6379, None, None, 0)),
            ("redis://", t("127.0.0.1", 6379, None, None, 0)),
            ("10.0.0.5:6380", t("10.0.0.5", 6380, None, None, 0)),
            ("redis://:secret@h:1/2", t("h", 1, None, Some("secret"), 2)),
            (
                "redis://app:p%40ss%3A@h:1",
                t("h", 1, Some("app"), Some("p@ss:"), 0),
            ),
            ("redis://a:b:c@h", t("h", 6379, Some("a"), Some("b:c"), 0)),
            ("redis://[::1]:7000", t("::1", 7000, None, None, 0)),
            ("redis://[::1]", t("::1", 6379, None, None, 0)),
        ];
        for (url, want) in cases {
            assert_eq!(parse(url).as_ref(), Ok(want), "{url}");
        }
        assert_eq!(
            parse("redis://[::1]:7000").map(|t| t.to_string()),
            Ok("[::1]:7000".into())
        );
        assert_eq!(
            parse("redis://u:p@h:1").map(|t| t.to_string()),
            Ok("h:1".into())
        );
    }

    #[test]
    fn passwords_are_never_shown() {
        assert_eq!(redact("redis://u:secret@h:1/0"), "redis://u:***@h:1/0");
        assert_eq!(redact("redis://:secret@h"), "redis://:***@h");
        assert_eq!(redact("redis://h:1"), "redis://h:1");
        assert_eq!(redact("u:p@h"), "u:***@h");
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
            "redis://user@h",
            "redis://u:%zz@h",
            "redis://[::1",
            "redis://[::1]x",
        ] {
            let e = parse(url).expect_err(url);
            assert!(
                e.starts_with(&format!("invalid --url '{}': ", redact(url))),
                "{e}"
            );
            assert!(!e.contains("secret"), "{e}");
            assert!(!e.contains('\n'));
        }
    }
}
