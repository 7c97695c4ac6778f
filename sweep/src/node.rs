//! One server connection: connect, authenticate, select the database, and the calls a
//! sweep makes, with every failure turned into one line that says what to do.

use crate::url::Target;
use ratelimit_resp::{Client, Value};
use std::time::Duration;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// One RL.SWEEP call is short (COUNT is capped); this only catches a dead server.
const IO_TIMEOUT: Duration = Duration::from_secs(60);

pub struct Node {
    pub target: Target,
    client: Client,
    /// The database the connection has selected.
    selected: u32,
}

/// The result of one RL.SWEEP call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chunk {
    pub cursor: Vec<u8>,
    pub scanned: u64,
    pub expired: u64,
}

/// A database as `INFO keyspace` shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DbInfo {
    pub db: u32,
    pub keys: u64,
    /// Keys with a TTL.
    pub expires: u64,
}

impl DbInfo {
    pub fn without_ttl(&self) -> u64 {
        self.keys.saturating_sub(self.expires)
    }
}

impl Node {
    pub fn connect(target: &Target) -> Result<Node, String> {
        let client = Client::connect_to(&target.host, target.port, CONNECT_TIMEOUT, IO_TIMEOUT)
            .map_err(|e| format!("cannot connect to {target}: {e}"))?;
        let mut node = Node {
            target: target.clone(),
            client,
            selected: 0,
        };
        if let Some(password) = &target.password {
            let mut auth: Vec<&str> = vec!["AUTH"];
            auth.extend(target.user.as_deref());
            auth.push(password.expose());
            if let Value::Error(e) = node.raw(&auth)? {
                // The server's text never holds the password. The user name is not
                // quoted either: in `redis://a:b@host` it may be the start of a
                // password written alone.
                return Err(format!(
                    "authentication failed at {target} with {}: {}",
                    password.source.describe(),
                    e.trim()
                ));
            }
        }
        Ok(node)
    }

    /// `SELECT db`, when it is not the selected one already (so that a user without
    /// SELECT can sweep database 0).
    pub fn select(&mut self, db: u32) -> Result<(), String> {
        if db != self.selected {
            let n = db.to_string();
            match self.raw(&["SELECT", n.as_str()])? {
                Value::Error(e) if e.starts_with("NOPERM") => {
                    return Err(explain(&self.target, &e));
                }
                Value::Error(e) => {
                    return Err(format!(
                        "{}: cannot select database {db}: {}",
                        self.target,
                        e.trim()
                    ));
                }
                _ => self.selected = db,
            }
        }
        Ok(())
    }

    /// The databases that hold keys, from `INFO keyspace`.
    pub fn keyspace(&mut self) -> Result<Vec<DbInfo>, String> {
        Ok(parse_keyspace(&self.text(&["INFO", "keyspace"])?))
    }

    /// Send a command; an I/O failure is an error line.
    fn raw<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Result<Value, String> {
        self.client
            .try_cmd(args)
            .map_err(|e| format!("lost the connection to {}: {e}", self.target))
    }

    /// Send a command; an error reply is an error line too, explained when it is one
    /// of the usual ones.
    pub fn call<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Result<Value, String> {
        match self.raw(args)? {
            Value::Error(e) => Err(explain(&self.target, &e)),
            v => Ok(v),
        }
    }

    pub fn text(&mut self, args: &[&str]) -> Result<String, String> {
        match self.call(args)? {
            Value::Bulk(b) => Ok(String::from_utf8_lossy(&b).into_owned()),
            Value::Status(s) => Ok(s),
            other => Err(format!("{}: unexpected reply {other:?}", self.target)),
        }
    }

    pub fn dbsize(&mut self) -> Result<u64, String> {
        match self.call(&["DBSIZE"])? {
            Value::Int(n) if n >= 0 => Ok(n as u64),
            other => Err(format!(
                "{}: unexpected DBSIZE reply {other:?}",
                self.target
            )),
        }
    }

    /// One `RL.SWEEP cursor ttl [MATCH p] [COUNT n] [TYPE t] [DRYRUN]`.
    pub fn sweep(&mut self, cursor: &[u8], args: &SweepCall) -> Result<Chunk, String> {
        let mut cmd: Vec<&[u8]> = vec![b"RL.SWEEP", cursor, args.ttl.as_bytes()];
        if let Some(p) = &args.pattern {
            cmd.extend([&b"MATCH"[..], p.as_bytes()]);
        }
        let count = args.count.map(|n| n.to_string());
        if let Some(n) = &count {
            cmd.extend([&b"COUNT"[..], n.as_bytes()]);
        }
        if let Some(t) = &args.key_type {
            cmd.extend([&b"TYPE"[..], t.as_bytes()]);
        }
        if args.dry_run {
            cmd.push(b"DRYRUN");
        }
        match self.call(&cmd)? {
            Value::Array(items) => match items.as_slice() {
                [Value::Bulk(cursor), Value::Int(scanned), Value::Int(expired)] => Ok(Chunk {
                    cursor: cursor.clone(),
                    scanned: (*scanned).max(0) as u64,
                    expired: (*expired).max(0) as u64,
                }),
                _ => Err(format!(
                    "{}: unexpected RL.SWEEP reply {items:?}",
                    self.target
                )),
            },
            other => Err(format!(
                "{}: unexpected RL.SWEEP reply {other:?}",
                self.target
            )),
        }
    }
}

/// The fixed arguments of every RL.SWEEP call of a sweep.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SweepCall {
    pub ttl: String,
    pub pattern: Option<String>,
    pub count: Option<u64>,
    pub key_type: Option<String>,
    pub dry_run: bool,
}

/// One line for an error reply from `target`.
pub fn explain(target: &Target, e: &str) -> String {
    let e = e.trim();
    if e.starts_with("NOAUTH") {
        format!("{target} requires authentication: give the password with REDISCLI_AUTH or --password-file (and the ACL user with --user)")
    } else if e.starts_with("WRONGPASS") {
        format!("authentication failed at {target}: {e}")
    } else if e.starts_with("ERR unknown command") && e.to_ascii_lowercase().contains("rl.sweep") {
        format!("{target} does not have the ratelimit module loaded (RL.SWEEP is an unknown command); load it with MODULE LOAD or loadmodule")
    } else if e.starts_with("NOPERM") {
        format!("the ACL user may not do this on {target}: {e}")
    } else if e.starts_with("READONLY") {
        format!("{target} is a replica: sweep its primary instead")
    } else {
        format!("{target}: {e}")
    }
}

/// The `dbN:keys=K,expires=E,...` lines of an `INFO keyspace` reply, by database.
pub fn parse_keyspace(info: &str) -> Vec<DbInfo> {
    let mut out: Vec<DbInfo> = info
        .lines()
        .filter_map(|line| {
            let (name, fields) = line.trim().split_once(':')?;
            let db = name.strip_prefix("db")?.parse().ok()?;
            let field = |want: &str| {
                fields
                    .split(',')
                    .filter_map(|f| f.split_once('='))
                    .find(|(k, _)| *k == want)
                    .and_then(|(_, v)| v.parse::<u64>().ok())
            };
            Some(DbInfo {
                db,
                keys: field("keys")?,
                expires: field("expires").unwrap_or(0),
            })
        })
        .collect();
    out.sort_by_key(|d| d.db);
    out.dedup_by_key(|d| d.db);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyspace_lines() {
        let redis =
            "# Keyspace\r\ndb0:keys=1,expires=0,avg_ttl=0\r\ndb3:keys=20,expires=5,avg_ttl=9\r\n";
        let valkey = "# Keyspace\r\ndb3:keys=20,expires=5,avg_ttl=0,keys_with_volatile_items=0\r\ndb0:keys=1,expires=0,avg_ttl=0,keys_with_volatile_items=0\r\n";
        let want = vec![
            DbInfo {
                db: 0,
                keys: 1,
                expires: 0,
            },
            DbInfo {
                db: 3,
                keys: 20,
                expires: 5,
            },
        ];
        assert_eq!(parse_keyspace(redis), want);
        assert_eq!(parse_keyspace(valkey), want);
        assert_eq!(want[1].without_ttl(), 15);
        assert_eq!(parse_keyspace("# Keyspace\r\n"), vec![]);
        assert_eq!(
            parse_keyspace("dbx:keys=1\ndb1:keys=y\ndb2:expires=1\nfoo"),
            vec![]
        );
    }

    #[test]
    fn errors_are_explained_on_one_line() {
        let t = Target::default();
        let cases = [
            ("NOAUTH Authentication required.", "requires authentication"),
            (
                "WRONGPASS invalid username-password pair or user is disabled.",
                "authentication failed at 127.0.0.1:6379: WRONGPASS",
            ),
            (
                "ERR unknown command 'RL.SWEEP', with args beginning with: '0' ",
                "does not have the ratelimit module loaded",
            ),
            (
                "ERR unknown command 'rl.sweep', with args beginning with: ",
                "does not have the ratelimit module loaded",
            ),
            (
                "NOPERM this user has no permissions to run the 'rl.sweep' command",
                "the ACL user may not",
            ),
            (
                "READONLY You can't write against a read only replica.",
                "is a replica",
            ),
            (
                "ERR invalid count '0': must be an integer from 1 to 5000",
                "127.0.0.1:6379: ERR invalid count",
            ),
        ];
        for (e, want) in cases {
            let line = explain(&t, e);
            assert!(line.contains(want), "{e} -> {line}");
            assert!(!line.contains('\n'));
        }
    }
}
