//! Counters in Prometheus format, under the names and labels the reference service
//! exports with its built-in Prometheus mapping: `ratelimit_service_rate_limit_<stat>`
//! with `domain`, `key1` and `key2` taken from the stats key
//! `domain.key1[.key2[...]]`, and the service's own counters.

use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, Opts, Registry, TextEncoder,
};

pub struct Stats {
    registry: Registry,
    total_hits: IntCounterVec,
    over_limit: IntCounterVec,
    near_limit: IntCounterVec,
    within_limit: IntCounterVec,
    shadow_mode: IntCounterVec,
    pub domain_not_found: IntCounterVec,
    pub should_rate_limit_error: IntCounterVec,
    pub total_requests: IntCounterVec,
    pub response_time: HistogramVec,
    pub config_load_success: IntCounter,
    pub config_load_error: IntCounter,
    pub global_shadow_mode: IntCounter,
    pub failure_mode_answers: IntCounterVec,
    near_limit_ratio: f32,
}

/// What one request did to one rule, for its counters: the count in the window before
/// it, its hits, whether the rule is in shadow mode.
#[derive(Clone, Copy, Debug)]
pub struct Hits {
    pub before: u64,
    pub hits: u64,
    pub limit: u64,
    pub shadow: bool,
}

/// The labels of a stats key: `domain.key1.key2...` (dots in an IPv4 address and the
/// characters `:` and `|` made `_` first, as the reference does).
pub fn labels(stats_key: &str) -> [String; 3] {
    let clean = sanitize(stats_key);
    let mut parts = clean.splitn(4, '.');
    let mut next = || parts.next().unwrap_or_default().to_string();
    [next(), next(), next()]
}

/// The reference's stat name sanitising: `:` and `|` become `_`, and so do the dots
/// of anything that looks like an IPv4 address.
pub fn sanitize(name: &str) -> String {
    let mut s: Vec<char> = name
        .chars()
        .map(|c| if c == ':' || c == '|' { '_' } else { c })
        .collect();
    // In place: an address's dots are changed after it was found, and the search goes
    // on from its end.
    let mut i = 0;
    while i < s.len() {
        if let Some(end) = ipv4_at(&s, i) {
            for c in &mut s[i..end] {
                if *c == '.' {
                    *c = '_';
                }
            }
            i = end;
        } else {
            i += 1;
        }
    }
    s.into_iter().collect()
}

/// The end of `\d{1,3}(\.\d{1,3}){3}` starting at `i` (leftmost, greedy, as the
/// reference's regular expression finds it).
fn ipv4_at(s: &[char], i: usize) -> Option<usize> {
    let mut j = i;
    for group in 0..4 {
        if group > 0 {
            if s.get(j) != Some(&'.') {
                return None;
            }
            j += 1;
        }
        let start = j;
        while j < s.len() && j - start < 3 && s[j].is_ascii_digit() {
            j += 1;
        }
        if j == start {
            return None;
        }
    }
    Some(j)
}

fn counter_vec(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    let c = IntCounterVec::new(Opts::new(name, help), labels).expect("a valid metric");
    registry
        .register(Box::new(c.clone()))
        .expect("registered once");
    c
}

fn counter(registry: &Registry, name: &str, help: &str) -> IntCounter {
    let c = IntCounter::new(name, help).expect("a valid metric");
    registry
        .register(Box::new(c.clone()))
        .expect("registered once");
    c
}

const KEY_LABELS: &[&str] = &["domain", "key1", "key2"];

impl Stats {
    pub fn new(near_limit_ratio: f32) -> Stats {
        let registry = Registry::new();
        let r = &registry;
        let response_time = HistogramVec::new(
            HistogramOpts::new(
                "ratelimit_service_response_time_seconds",
                "Time to answer a call",
            )
            .buckets(vec![
                0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
            ]),
            &["grpc_method"],
        )
        .expect("a valid metric");
        registry
            .register(Box::new(response_time.clone()))
            .expect("registered once");
        Stats {
            total_hits: counter_vec(
                r,
                "ratelimit_service_rate_limit_total_hits",
                "Hits of a rule",
                KEY_LABELS,
            ),
            over_limit: counter_vec(
                r,
                "ratelimit_service_rate_limit_over_limit",
                "Hits over a rule's limit",
                KEY_LABELS,
            ),
            near_limit: counter_vec(
                r,
                "ratelimit_service_rate_limit_near_limit",
                "Hits over the near-limit ratio of a rule's limit, within it",
                KEY_LABELS,
            ),
            within_limit: counter_vec(
                r,
                "ratelimit_service_rate_limit_within_limit",
                "Hits within a rule's limit",
                KEY_LABELS,
            ),
            shadow_mode: counter_vec(
                r,
                "ratelimit_service_rate_limit_shadow_mode",
                "Hits over the limit of a rule in shadow mode, passed",
                KEY_LABELS,
            ),
            domain_not_found: counter_vec(
                r,
                "ratelimit_service_rate_limit_domain_not_found",
                "Calls for a domain that is not configured",
                &["domain"],
            ),
            should_rate_limit_error: counter_vec(
                r,
                "ratelimit_service_should_rate_limit_error",
                "Calls that failed",
                &["err_type"],
            ),
            total_requests: counter_vec(
                r,
                "ratelimit_service_total_requests",
                "Calls",
                &["grpc_method"],
            ),
            response_time,
            config_load_success: counter(
                r,
                "ratelimit_service_config_load_success",
                "Configurations loaded",
            ),
            config_load_error: counter(
                r,
                "ratelimit_service_config_load_error",
                "Configurations refused (the last good one stays)",
            ),
            global_shadow_mode: counter(
                r,
                "ratelimit_service_global_shadow_mode",
                "Calls passed by the global shadow mode",
            ),
            failure_mode_answers: counter_vec(
                r,
                "ratelimit_service_failure_mode_answers",
                "Calls answered without Redis, by REDIS_FAILURE_MODE",
                &["answer"],
            ),
            registry,
            near_limit_ratio,
        }
    }

    /// Count one request's hits on one rule as the reference counts them:
    /// `total_hits`; the hits past the limit in `over_limit` (and `shadow_mode` for a
    /// rule in shadow mode); those past `floor(limit * NEAR_LIMIT_RATIO)` and within
    /// the limit in `near_limit`; `within_limit` when the rule allows them.
    pub fn record(&self, stats_key: &str, h: Hits) {
        let l = labels(stats_key);
        let l = [l[0].as_str(), l[1].as_str(), l[2].as_str()];
        let after = h.before.saturating_add(h.hits);
        let near = (h.limit as f32 * self.near_limit_ratio).floor() as u64;
        self.total_hits.with_label_values(&l).inc_by(h.hits);
        if after > h.limit {
            let over = if h.before >= h.limit {
                h.hits
            } else {
                after - h.limit
            };
            self.over_limit.with_label_values(&l).inc_by(over);
            if h.before < h.limit {
                self.near_limit
                    .with_label_values(&l)
                    .inc_by(h.limit - near.max(h.before));
            }
            if h.shadow {
                self.shadow_mode.with_label_values(&l).inc_by(over);
            }
        } else {
            if after > near {
                let n = if h.before >= near {
                    h.hits
                } else {
                    after - near
                };
                self.near_limit.with_label_values(&l).inc_by(n);
            }
            self.within_limit.with_label_values(&l).inc_by(h.hits);
        }
    }

    /// Every counter in the Prometheus text format.
    pub fn render(&self) -> String {
        let mut buf = Vec::new();
        let encoder = TextEncoder::new();
        if let Err(e) = encoder.encode(&self.registry.gather(), &mut buf) {
            return format!("# error: {e}\n");
        }
        String::from_utf8_lossy(&buf).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(s: &Stats, stat: &str, key: &str) -> u64 {
        let l = labels(key);
        let v = match stat {
            "total_hits" => &s.total_hits,
            "over_limit" => &s.over_limit,
            "near_limit" => &s.near_limit,
            "within_limit" => &s.within_limit,
            _ => &s.shadow_mode,
        };
        v.with_label_values(&[&l[0], &l[1], &l[2]]).get()
    }

    #[test]
    fn labels_follow_the_references_mapping() {
        assert_eq!(
            labels("mongo_cps.database_users"),
            ["mongo_cps", "database_users", ""].map(String::from)
        );
        assert_eq!(
            labels("messaging.message_type_marketing.to_number.extra"),
            ["messaging", "message_type_marketing", "to_number"].map(String::from)
        );
        assert_eq!(
            sanitize("d.remote_address_50.0.0.5"),
            "d.remote_address_50_0_0_5"
        );
        assert_eq!(sanitize("d.k_a:b|c"), "d.k_a_b_c");
    }

    #[test]
    fn near_and_over_limit_split_the_hits_as_the_reference_does() {
        let s = Stats::new(0.8);
        // limit 10: near threshold 8. From 7 with 3 hits: 8 -> 10 within, 2 of them near.
        s.record(
            "d.k",
            Hits {
                before: 7,
                hits: 3,
                limit: 10,
                shadow: false,
            },
        );
        assert_eq!(value(&s, "within_limit", "d.k"), 3);
        assert_eq!(value(&s, "near_limit", "d.k"), 2);
        // From 9 with 3 hits: 2 over, the one up to the limit near.
        s.record(
            "d.k",
            Hits {
                before: 9,
                hits: 3,
                limit: 10,
                shadow: true,
            },
        );
        assert_eq!(value(&s, "over_limit", "d.k"), 2);
        assert_eq!(value(&s, "near_limit", "d.k"), 3);
        assert_eq!(value(&s, "shadow_mode", "d.k"), 2);
        // Already at the limit: every hit over.
        s.record(
            "d.k",
            Hits {
                before: 10,
                hits: 4,
                limit: 10,
                shadow: false,
            },
        );
        assert_eq!(value(&s, "over_limit", "d.k"), 6);
        assert_eq!(value(&s, "total_hits", "d.k"), 10);
        assert!(s.render().contains(
            "ratelimit_service_rate_limit_total_hits{domain=\"d\",key1=\"k\",key2=\"\"} 10"
        ));
    }
}
