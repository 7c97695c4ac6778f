//! A single-key command or one form of its Lua twin, called the same way: the sides of
//! the tests that compare them.

use super::{Client, Twin, Value};

#[derive(Clone, Debug)]
pub struct Side {
    /// The native command's name (`RL.GCRA`).
    pub command: &'static str,
    /// `None`: the native command; `Some(twin)`: its function or its script.
    pub twin: Option<Twin>,
}

impl Side {
    pub fn native(command: &'static str) -> Side {
        Side {
            command,
            twin: None,
        }
    }

    pub fn twin(command: &'static str, twin: Twin) -> Side {
        Side {
            command,
            twin: Some(twin),
        }
    }

    /// The native command and both forms of its twin: `twins` picks the twin of each form.
    pub fn all(command: &'static str, twins: [Twin; 2]) -> Vec<Side> {
        let [a, b] = twins;
        vec![
            Side::native(command),
            Side::twin(command, a),
            Side::twin(command, b),
        ]
    }

    pub fn name(&self) -> &'static str {
        match &self.twin {
            Some(t) => t.name(),
            None => "native",
        }
    }

    /// The call of `key` with `args` after it.
    pub fn argv(&self, key: &str, args: &[&str]) -> Vec<String> {
        match &self.twin {
            None => {
                let mut v: Vec<String> = vec![self.command.into(), key.into()];
                v.extend(args.iter().map(|a| a.to_string()));
                v
            }
            Some(t) => t.argv(&[key], args),
        }
    }

    pub fn call(&self, c: &mut Client, key: &str, args: &[&str]) -> Value {
        c.cmd(&self.argv(key, args))
    }
}
