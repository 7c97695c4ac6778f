//! The decision of a call from the verdicts of its rules: allowed iff every rule
//! allows, and the *binding* rule whose numbers the reply carries.

use crate::call::limiter::Settled;
use crate::call::verdict::{Decision, Verdict};
use crate::units::Micros;

/// Picks the binding verdict while verdicts are offered one by one, in order: when any
/// denies, the denying one with the largest retry_after (ties keep the first), so that
/// after that wait every one allows the same request; when all allow, the one with the
/// least remaining (ties keep the first).
#[derive(Debug)]
pub struct Chooser<T> {
    denied: Option<(Micros, Verdict, T)>,
    least: Option<(Verdict, T)>,
}

impl<T> Default for Chooser<T> {
    fn default() -> Self {
        Chooser {
            denied: None,
            least: None,
        }
    }
}

impl<T> Chooser<T> {
    pub fn offer(&mut self, verdict: Verdict, tag: T) {
        match verdict.decision {
            Decision::Denied { retry_after } => {
                if self
                    .denied
                    .as_ref()
                    .is_none_or(|(r, _, _)| retry_after > *r)
                {
                    self.denied = Some((retry_after, verdict, tag));
                }
            }
            Decision::Allowed => {
                if self
                    .least
                    .as_ref()
                    .is_none_or(|(v, _)| verdict.remaining < v.remaining)
                {
                    self.least = Some((verdict, tag));
                }
            }
        }
    }

    /// Whether some verdict denied.
    pub fn is_denied(&self) -> bool {
        self.denied.is_some()
    }

    /// The binding verdict and its tag; `None` when nothing was offered.
    pub fn finish(self) -> Option<(Verdict, T)> {
        match (self.denied, self.least) {
            (Some((_, v, t)), _) => Some((v, t)),
            (None, least) => least,
        }
    }
}

/// The decision on a call: whether every rule allowed, and the binding rule (an index
/// into the judgements).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decided {
    pub settled: Settled,
    pub binding: usize,
}

/// Decide a call from the verdicts of its rules, in the order the call gives them.
/// `None` for a call without rules (never made: every call names a key).
pub fn decide(verdicts: impl IntoIterator<Item = Verdict>) -> Option<Decided> {
    let mut chooser = Chooser::default();
    for (i, v) in verdicts.into_iter().enumerate() {
        chooser.offer(v, i);
    }
    let settled = if chooser.is_denied() {
        Settled::Denied
    } else {
        Settled::Allowed
    };
    chooser
        .finish()
        .map(|(_, binding)| Decided { settled, binding })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allowed(remaining: i64) -> Verdict {
        Verdict {
            decision: Decision::Allowed,
            limit: 10,
            remaining,
            reset_after: Micros::ZERO,
        }
    }

    fn denied(retry_us: u64) -> Verdict {
        Verdict {
            decision: Decision::Denied {
                retry_after: Micros(retry_us),
            },
            limit: 10,
            remaining: 0,
            reset_after: Micros(retry_us),
        }
    }

    #[test]
    fn the_binding_rule_follows_the_tie_rules() {
        let d = |vs: &[Verdict]| decide(vs.iter().copied());
        assert_eq!(
            d(&[allowed(5), allowed(3), allowed(3)]),
            Some(Decided {
                settled: Settled::Allowed,
                binding: 1
            }),
            "least remaining, first on ties"
        );
        assert_eq!(
            d(&[allowed(0), denied(500), denied(900), denied(900)]),
            Some(Decided {
                settled: Settled::Denied,
                binding: 2
            }),
            "largest retry, first on ties, allowed rules never bind a denial"
        );
        assert_eq!(d(&[]), None);
    }
}
