//! The syntax of each command and of each RL.ALL rule, as its page in `docs/` writes it
//! (and `COMMAND DOCS` renders it): errors about the number or the order of arguments
//! quote it, so a caller sees what the command expects. `tests/command_docs.rs` keeps
//! these lines equal to the pages.

/// Each command's syntax line.
pub const COMMANDS: &[(&str, &str)] = &[
    ("RL.FIXED", "RL.FIXED key limit window [COST n] [ALIGN] [AT unix_ms]"),
    (
        "RL.GCRA",
        "RL.GCRA key max_burst count period [COST n] [AT unix_ms] [DELAY max_delay]",
    ),
    (
        "RL.MULTI",
        "RL.MULTI numkeys key [key ...] LIMIT window limit [LIMIT window limit ...] [COST n] [ALIGN] [AT unix_ms]",
    ),
    (
        "RL.SLIDING",
        "RL.SLIDING numkeys key [key ...] LIMIT window limit [LIMIT window limit ...] [BUCKETS n] [COST n] [AT unix_ms]",
    ),
    ("RL.LOG", "RL.LOG key limit window [META value] [COST n] [AT unix_ms]"),
    (
        "RL.ALL",
        "RL.ALL numkeys key [key ...] rule [rule ...] [COST n] [AT unix_ms]",
    ),
    ("RL.BULKEXPIRE", "RL.BULKEXPIRE seconds key [key ...]"),
    (
        "CL.THROTTLE",
        "CL.THROTTLE key max_burst count period [quantity]",
    ),
    (
        "RL.SWEEP",
        "RL.SWEEP cursor seconds [MATCH pattern] [COUNT n] [TYPE type] [DRYRUN]",
    ),
];

/// Each RL.ALL rule's syntax (`i` is its key's position).
pub const RULES: &[(&str, &str)] = &[
    ("FIXED", "FIXED i limit window [ALIGN]"),
    ("GCRA", "GCRA i max_burst count period"),
    (
        "MULTI",
        "MULTI i LIMIT window limit [LIMIT window limit ...] [ALIGN]",
    ),
    (
        "SLIDING",
        "SLIDING i LIMIT window limit [LIMIT window limit ...] [BUCKETS n]",
    ),
    ("LOG", "LOG i limit window [META value]"),
];

fn find(table: &[(&str, &'static str)], name: &str) -> Option<&'static str> {
    table.iter().find(|(n, _)| *n == name).map(|&(_, s)| s)
}

/// The syntax line of `command`, if it is one of the module's.
pub fn command(command: &str) -> Option<&'static str> {
    find(COMMANDS, command)
}

/// The syntax of the RL.ALL rule `kind`.
pub fn rule(kind: &str) -> Option<&'static str> {
    find(RULES, kind)
}

/// Whether `raw` is written as a duration with a unit (`1m`, `500ms`): in the place of
/// a count, the sign of two arguments given in the wrong order.
pub fn looks_like_a_duration(raw: &[u8]) -> bool {
    let digits = raw.iter().take_while(|b| b.is_ascii_digit()).count();
    let unit = raw.get(digits..).unwrap_or(&[]);
    digits > 0 && [&b"ms"[..], b"s", b"m", b"h", b"d"].contains(&unit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_with_a_unit_are_told_from_counts() {
        for yes in ["1m", "500ms", "10s", "2h", "7d"] {
            assert!(looks_like_a_duration(yes.as_bytes()), "{yes}");
        }
        for no in ["10", "", "m", "1.5s", "10y", "-1m", "1 m"] {
            assert!(!looks_like_a_duration(no.as_bytes()), "{no}");
        }
    }

    #[test]
    fn every_command_and_rule_has_its_syntax() {
        for (name, line) in COMMANDS {
            assert!(line.starts_with(&format!("{name} ")), "{line}");
        }
        for (kind, line) in RULES {
            assert!(line.starts_with(&format!("{kind} i ")), "{line}");
        }
        assert_eq!(RULES.len(), crate::limiters::KINDS_COUNT);
    }
}
