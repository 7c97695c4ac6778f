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
}

/// The result of one RL.SWEEP call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chunk {
    pub cursor: Vec<u8>,
    pub scanned: u64,
    pub expired: u64,
}

impl Node {
    pub fn connect(target: &Target) -> Result<Node, String> {
        let client = Client::connect_to(&target.host, target.port, CONNECT_TIMEOUT, IO_TIMEOUT)
            .map_err(|e| format!("cannot connect to {target}: {e}"))?;
        let mut node = Node {
            target: target.clone(),
            client,
        };
        if let Some(password) = &target.password {
            let mut auth = vec!["AUTH".to_string()];
            auth.extend(target.user.clone());
            auth.push(password.clone());
            if let Value::Error(e) = node.raw(&auth)? {
                return Err(format!("authentication failed at {target}: {e}"));
            }
        }
        if target.db != 0 {
            let db = target.db.to_string();
            node.call(&["SELECT", db.as_str()])?;
        }
        Ok(node)
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
        format!("{target} requires authentication: put the user and password in --url (redis://user:password@host:port)")
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

#[cfg(test)]
mod tests {
    use super::*;

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
