//! The *binding* rule of a call, whose numbers the reply carries, from the verdicts of
//! its rules; and whether the call is allowed: iff no rule denies.

use crate::call::verdict::{Decision, Verdict};
use crate::units::Micros;

/// Picks the binding verdict while verdicts are offered one by one, in order: when any
/// denies, the denying one with the largest retry_after (ties keep the first), so that
/// after that wait every one allows the same request; when all allow, the one with the
/// least remaining (ties keep the first).
#[derive(Debug)]
pub struct Binding<T> {
    /// The denying verdict with the largest wait.
    denied: Option<(Micros, Verdict, T)>,
    /// The verdict forced over its limit with the largest wait: it binds a call that
    /// no rule denies (a request forced over a limit is written, it does not deny).
    over: Option<(Micros, Verdict, T)>,
    least: Option<(Verdict, T)>,
    /// The longest reset of the verdicts that allowed with nothing remaining: a
    /// request of cost 1 fits them again by then (see [`Binding::finish`]).
    full_until: Micros,
}

impl<T> Default for Binding<T> {
    fn default() -> Self {
        Binding {
            denied: None,
            over: None,
            least: None,
            full_until: Micros::ZERO,
        }
    }
}

impl<T> Binding<T> {
    pub fn offer(&mut self, verdict: Verdict, tag: T) {
        match verdict.decision {
            Decision::Denied { retry_after } => {
                keep_longest(&mut self.denied, retry_after, verdict, tag)
            }
            Decision::Over { retry_after } => {
                keep_longest(&mut self.over, retry_after, verdict, tag)
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
        self.denied.is_some()
    }

    /// The binding verdict and its tag; `None` when nothing was offered. A denying
    /// verdict binds before any other (a request forced over a limit elsewhere is not
    /// written when another rule denies). A request forced over a limit, no rule
    /// denying, tells when a request of cost 1 fits again everywhere: the longest of
    /// the waits of the verdicts over their limit and of the resets of those left
    /// with nothing remaining (full again by then; exact for fixed windows, a bound
    /// for the others).
    pub fn finish(self) -> Option<(Verdict, T)> {
        match (self.denied, self.over, self.least) {
            (Some((_, v, t)), _, _) => Some((v, t)),
            (None, Some((retry_after, mut v, t)), _) => {
                v.decision = Decision::Over {
                    retry_after: retry_after.max(self.full_until),
                };
                Some((v, t))
            }
            (None, None, least) => least,
        }
    }
}

/// Keep in `slot` the verdict with the longest wait (the first of equals).
fn keep_longest<T>(
    slot: &mut Option<(Micros, Verdict, T)>,
    wait: Micros,
    verdict: Verdict,
    tag: T,
) {
    if slot.as_ref().is_none_or(|(r, _, _)| wait > *r) {
        *slot = Some((wait, verdict, tag));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The decision on a call: whether every rule allowed, and the binding rule (an index
    /// into the judgements).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    struct Picked {
        /// Whether every rule allowed.
        allowed: bool,
        binding: usize,
    }

    /// Decide a call from the verdicts of its rules, in the order the call gives them.
    /// `None` for a call without rules (never made: every call names a key).
    fn decide(verdicts: impl IntoIterator<Item = Verdict>) -> Option<Picked> {
        let mut chooser = Binding::default();
        for (i, v) in verdicts.into_iter().enumerate() {
            chooser.offer(v, i);
        }
        let allowed = !chooser.is_denied();
        chooser
            .finish()
            .map(|(_, binding)| Picked { allowed, binding })
    }

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
            Some(Picked {
                allowed: true,
                binding: 1
            }),
            "least remaining, first on ties"
        );
        assert_eq!(
            d(&[allowed(0), denied(500), denied(900), denied(900)]),
            Some(Picked {
                allowed: false,
                binding: 2
            }),
            "largest retry, first on ties, allowed rules never bind a denial"
        );
        assert_eq!(d(&[]), None);
    }

    fn over(retry_us: u64) -> Verdict {
        Verdict {
            decision: Decision::Over {
                retry_after: Micros(retry_us),
            },
            ..denied(retry_us)
        }
    }

    #[test]
    fn a_forced_rule_over_its_limit_never_binds_a_call_another_rule_denies() {
        let d = |vs: &[Verdict]| decide(vs.iter().copied());
        assert_eq!(
            d(&[denied(5_000), over(60_000)]),
            Some(Picked {
                allowed: false,
                binding: 0
            }),
            "the denying rule binds, whatever the forced rule's wait"
        );
        assert_eq!(
            d(&[over(60_000), allowed(0), denied(5_000)]),
            Some(Picked {
                allowed: false,
                binding: 2
            })
        );
        assert_eq!(
            d(&[over(5_000), allowed(1), over(60_000)]),
            Some(Picked {
                allowed: true,
                binding: 2
            }),
            "no rule denies: the forced rule with the longest wait binds"
        );
    }
}
