//! The decision of a limiter and the five integers every limiter reply starts with.

use crate::units::Micros;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    Allowed,
    /// Denied; the same request would be allowed after this long.
    Denied {
        retry_after: Micros,
    },
    /// Recorded over the limit (`FORCE`): the request is written, the limit is now
    /// exceeded, and a request of cost 1 fits again after this long. Replied as a
    /// denial (field 1 is 1); it does not stop the call.
    Over {
        retry_after: Micros,
    },
}

/// What a limiter tells the client about one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub decision: Decision,
    /// The capacity: requests allowed in a full window (or max_burst + 1 for GCRA).
    pub limit: i64,
    /// How much more cost would be allowed right now, after this request.
    pub remaining: i64,
    /// Time until the state is back to full capacity.
    pub reset_after: Micros,
}

/// Field 4 of a reply for an allowed request.
pub const NO_RETRY: i64 = -1;

impl Verdict {
    /// An allowed request that found a limiter at full capacity and used nothing.
    pub const fn untouched(limit: i64) -> Verdict {
        Verdict {
            decision: Decision::Allowed,
            limit,
            remaining: limit,
            reset_after: Micros::ZERO,
        }
    }

    pub fn is_allowed(&self) -> bool {
        self.decision == Decision::Allowed
    }

    /// Whether it denies the request (a forced request over the limit does not).
    pub fn is_denied(&self) -> bool {
        matches!(self.decision, Decision::Denied { .. })
    }

    /// The wait field 4 tells of, when there is one (denied, or forced over).
    pub fn retry_after(&self) -> Option<Micros> {
        match self.decision {
            Decision::Allowed => None,
            Decision::Denied { retry_after } | Decision::Over { retry_after } => Some(retry_after),
        }
    }

    /// `[limited, limit, remaining, retry_after_ms, reset_after_ms]` as sent to clients:
    /// times in milliseconds rounded up, retry_after at least 1 when denied, -1 when allowed.
    pub fn fields(&self) -> [i64; 5] {
        let (limited, retry_after_ms) = match self.decision {
            Decision::Allowed => (0, NO_RETRY),
            Decision::Denied { retry_after } | Decision::Over { retry_after } => {
                (1, ms_i64(retry_after).max(1))
            }
        };
        [
            limited,
            self.limit,
            self.remaining,
            retry_after_ms,
            ms_i64(self.reset_after),
        ]
    }
}

/// A span as a reply field: whole milliseconds, rounded up.
pub(crate) fn ms_i64(t: Micros) -> i64 {
    i64::try_from(t.ceil_millis()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_encoding() {
        let allowed = Verdict {
            decision: Decision::Allowed,
            limit: 10,
            remaining: 9,
            reset_after: Micros(1_000_001),
        };
        assert_eq!(allowed.fields(), [0, 10, 9, -1, 1001]);
        let denied = Verdict {
            decision: Decision::Denied {
                retry_after: Micros(1),
            },
            limit: 10,
            remaining: 0,
            reset_after: Micros(0),
        };
        assert_eq!(denied.fields(), [1, 10, 0, 1, 0]);
        let denied_zero = Verdict {
            decision: Decision::Denied {
                retry_after: Micros(0),
            },
            ..denied
        };
        assert_eq!(
            denied_zero.fields()[3],
            1,
            "a denial always says to wait at least 1 ms"
        );
    }
}
