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
    /// Whether a verdict denied (one forced over the limit binds as a denial but
    /// does not deny).
    blocked: bool,
    /// The longest reset of the verdicts that allowed with nothing remaining: a
    /// request of cost 1 fits them again by then (see [`Chooser::finish`]).
    full_until: Micros,
}

impl<T> Default for Chooser<T> {
    fn default() -> Self {
        Chooser {
            denied: None,
            least: None,
            blocked: false,
            full_until: Micros::ZERO,
        }
    }
}

impl<T> Chooser<T> {
    pub fn offer(&mut self, verdict: Verdict, tag: T) {
        match verdict.decision {
            Decision::Denied { retry_after } | Decision::Over { retry_after } => {
                self.blocked |= verdict.is_denied();
                if self
                    .denied
                    .as_ref()
                    .is_none_or(|(r, _, _)| retry_after > *r)
                {
                    self.denied = Some((retry_after, verdict, tag));
                }
            }
            Decision::Allowed => {
                if verdict.remaining <= 0 {
                    self.full_until = self.full_until.max(verdict.reset_after);
                }
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

    /// Whether some verdict denied (a request forced over the limit is not denied).
    pub fn is_denied(&self) -> bool {
        self.blocked
    }

    /// The binding verdict and its tag; `None` when nothing was offered. A request
    /// forced over a limit tells when a request of cost 1 fits again everywhere: the
    /// longest of the waits of the verdicts over their limit and of the resets of
    /// those left with nothing remaining (full again by then; exact for fixed
    /// windows, a bound for the others).
    pub fn finish(self) -> Option<(Verdict, T)> {
        match (self.denied, self.least) {
            (Some((_, mut v, t)), _) => {
                if let Decision::Over { retry_after } = v.decision {
                    v.decision = Decision::Over {
                        retry_after: retry_after.max(self.full_until),
                    };
                }
                Some((v, t))
            }
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
