//! A single-key command or its Lua twin, called the same way: the two sides of the
//! tests that compare them.

use super::{Client, Value};

#[derive(Clone, Debug)]
pub struct Side {
    /// The native command's name (`RL.GCRA`).
    pub command: &'static str,
    /// `None`: the native command; `Some(sha)`: the twin.
    pub twin: Option<String>,
}

impl Side {
    pub fn native(command: &'static str) -> Side {
        Side {
            command,
            twin: None,
        }
    }

    pub fn twin(command: &'static str, sha: String) -> Side {
        Side {
            command,
            twin: Some(sha),
        }
    }

    pub fn name(&self) -> &'static str {
        if self.twin.is_some() {
            "twin"
        } else {
            "native"
        }
    }

    /// The call of `key` with `args` after it.
    pub fn argv(&self, key: &str, args: &[&str]) -> Vec<String> {
        let mut v: Vec<String> = match &self.twin {
            None => vec![self.command.into(), key.into()],
            Some(sha) => vec!["EVALSHA".into(), sha.clone(), "1".into(), key.into()],
        };
        v.extend(args.iter().map(|a| a.to_string()));
        v
    }

    pub fn call(&self, c: &mut Client, key: &str, args: &[&str]) -> Value {
        c.cmd(&self.argv(key, args))
    }
}
