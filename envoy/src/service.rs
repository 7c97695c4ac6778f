//! `ShouldRateLimit`: a request's descriptors looked up in the configuration (limit
//! overrides, `replaces`, `unlimited`, `shadow_mode`), settled by the module all or
//! nothing, answered with the reference's fields (overall code, one status per
//! descriptor, the optional `RateLimit-*` headers) and counted under its stat names.

use crate::backend::Backend;
use crate::config::{override_key, Config, Lookup, Matched, Rule, Unit};
use crate::limiter::{self, Item, Judged};
use crate::settings::{FailureMode, Settings};
use crate::stats::{Hits, Stats};
use envoy_types::pb::envoy::config::core::v3::HeaderValue;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{
    Code, DescriptorStatus, RateLimit,
};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::RateLimitService;
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use envoy_types::pb::google::protobuf::Duration as ProtoDuration;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Instant, SystemTime, UNIX_EPOCH};
use tonic::{Request, Response, Status};
use tonic_health::server::HealthReporter;

/// The service's health: every component must be healthy (Redis reached, a
/// configuration with a domain when `HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED`, no
/// SIGTERM yet), as the reference's health checker decides it, for `/healthcheck` and
/// for gRPC health checking (services `""` and `ratelimit`).
pub struct Health {
    components: Mutex<HashMap<&'static str, bool>>,
    ok: AtomicBool,
    reporter: HealthReporter,
}

impl Health {
    pub fn new(reporter: HealthReporter, with_config: bool) -> Health {
        let mut components = HashMap::from([("redis", false), ("sigterm", true)]);
        if with_config {
            components.insert("config", false);
        }
        Health {
            components: Mutex::new(components),
            ok: AtomicBool::new(false),
            reporter,
        }
    }

    pub fn ok(&self) -> bool {
        self.ok.load(Ordering::SeqCst)
    }

    /// Set one component (ignored when it is not watched); the overall status follows.
    pub async fn set(&self, component: &'static str, healthy: bool) {
        let all = {
            let mut c = self.components.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(v) = c.get_mut(component) {
                *v = healthy;
            }
            c.values().all(|v| *v)
        };
        self.ok.store(all, Ordering::SeqCst);
        let status = if all {
            tonic_health::ServingStatus::Serving
        } else {
            tonic_health::ServingStatus::NotServing
        };
        for name in ["", "ratelimit"] {
            self.reporter.set_service_status(name, status).await;
        }
    }
}

pub struct State {
    pub settings: Settings,
    pub config: RwLock<Option<Arc<Config>>>,
    pub stats: Stats,
    pub backends: Vec<Backend>,
    pub health: Health,
}

/// A descriptor's part in the answer.
enum Part {
    /// No rule (or a replaced one): OK, no limit.
    None,
    Unlimited,
    /// Its rule, its stats key and its item (which holds its unit).
    Limited {
        rule: Arc<Rule>,
        stats_key: String,
        item: usize,
    },
}

impl Part {
    /// Its status: OK without a limit for no rule or an unlimited one, `limited(rule,
    /// stats_key, item)` for a limited one.
    fn status(
        &self,
        limited: impl FnOnce(&Rule, &str, usize) -> DescriptorStatus,
    ) -> DescriptorStatus {
        match self {
            Part::None => status(Code::Ok, None, 0, None),
            Part::Unlimited => status(Code::Ok, None, u64::from(u32::MAX), None),
            Part::Limited {
                rule,
                stats_key,
                item,
            } => limited(rule, stats_key, *item),
        }
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default()
}

fn status(
    code: Code,
    limit: Option<RateLimit>,
    remaining: u64,
    reset: Option<u64>,
) -> DescriptorStatus {
    DescriptorStatus {
        code: code as i32,
        current_limit: limit,
        limit_remaining: remaining.min(u64::from(u32::MAX)) as u32,
        duration_until_reset: reset.map(|s| ProtoDuration {
            seconds: s as i64,
            nanos: 0,
        }),
        quota: None,
    }
}

fn current_limit(rule: &Rule, unit: Unit) -> RateLimit {
    RateLimit {
        name: rule.name.clone(),
        requests_per_unit: rule.requests_per_unit,
        unit: unit.to_proto(),
    }
}

/// Seconds to the end of the window `now` is in.
fn reset(unit: Unit, now: u64) -> u64 {
    let w = unit.seconds();
    w - now % w
}

impl State {
    pub fn current_config(&self) -> Option<Arc<Config>> {
        self.config
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Answer one request (the gRPC call and `/json` alike).
    pub async fn should_rate_limit(
        &self,
        req: &RateLimitRequest,
    ) -> Result<RateLimitResponse, Status> {
        let started = Instant::now();
        self.stats
            .total_requests
            .with_label_values(&["ShouldRateLimit"])
            .inc();
        let result = self.decide(req).await;
        self.stats
            .response_time
            .with_label_values(&["ShouldRateLimit"])
            .observe(started.elapsed().as_secs_f64());
        result
    }

    fn service_error(&self, msg: &str) -> Status {
        self.stats
            .should_rate_limit_error
            .with_label_values(&["service_error"])
            .inc();
        Status::unknown(msg.to_string())
    }

    async fn decide(&self, req: &RateLimitRequest) -> Result<RateLimitResponse, Status> {
        if req.domain.is_empty() {
            return Err(self.service_error("rate limit domain must not be empty"));
        }
        if req.descriptors.is_empty() {
            return Err(self.service_error("rate limit descriptor list must not be empty"));
        }
        let Some(config) = self.current_config() else {
            return Err(self.service_error("no rate limit configuration loaded"));
        };
        let now = unix_now();
        let found = self.lookup(&config, req)?;
        let (parts, items) = self.plan(req, &found, now);
        match self.judge(&items).await {
            Ok(outcome) => {
                let (statuses, over) = self.statuses(&parts, &items, &outcome, now);
                Ok(self.respond(statuses, over || !outcome.allowed))
            }
            Err(why) => self.redis_failure(&why, &parts, &items, now),
        }
    }

    /// Each descriptor's rule, if any (a limit sent in the descriptor wins over the
    /// files').
    fn lookup(
        &self,
        config: &Config,
        req: &RateLimitRequest,
    ) -> Result<Vec<Option<Matched>>, Status> {
        let mut found = Vec::with_capacity(req.descriptors.len());
        for d in &req.descriptors {
            let matched = match (config.lookup(&req.domain, &d.entries), &d.limit) {
                (Lookup::UnknownDomain, _) => {
                    self.stats
                        .domain_not_found
                        .with_label_values(&[&crate::stats::sanitize(&req.domain)])
                        .inc();
                    None
                }
                (_, Some(o)) => {
                    let Some(unit) = Unit::from_proto(o.unit) else {
                        return Err(self.service_error(&format!(
                            "descriptor limit override has an unknown unit ({})",
                            o.unit
                        )));
                    };
                    let key = override_key(&req.domain, &d.entries);
                    let rule = Rule {
                        full_key: key.clone(),
                        requests_per_unit: o.requests_per_unit,
                        unit: Some(unit),
                        unlimited: false,
                        shadow_mode: false,
                        name: String::new(),
                        replaces: Vec::new(),
                        detailed_metric: false,
                    };
                    Some(Matched {
                        rule: Arc::new(rule),
                        stats_key: key,
                        shared: Vec::new(),
                    })
                }
                (Lookup::Found(m), None) => Some(m),
                (Lookup::NoRule, None) => None,
            };
            found.push(matched);
        }
        Ok(found)
    }

    /// What each descriptor is (replaced rules dropped), and the limited ones as items
    /// for Redis: their keys, limits and hits.
    fn plan(
        &self,
        req: &RateLimitRequest,
        found: &[Option<Matched>],
        now: u64,
    ) -> (Vec<Part>, Vec<Item>) {
        let replaced: HashSet<&str> = found
            .iter()
            .flatten()
            .flat_map(|m| m.rule.replaces.iter().map(String::as_str))
            .collect();
        let mut parts = Vec::with_capacity(found.len());
        let mut items: Vec<Item> = Vec::new();
        for (matched, d) in found.iter().zip(&req.descriptors) {
            let part = match matched {
                None => Part::None,
                Some(Matched { rule, .. })
                    if !rule.name.is_empty() && replaced.contains(rule.name.as_str()) =>
                {
                    Part::None
                }
                Some(Matched { rule, .. }) if rule.unlimited => Part::Unlimited,
                Some(Matched {
                    rule,
                    stats_key,
                    shared,
                }) => {
                    let unit = rule.unit.unwrap_or(Unit::Second);
                    let cost = match &d.hits_addend {
                        Some(h) => h.value,
                        None => u64::from(req.hits_addend.max(1)),
                    };
                    let per_second = unit == Unit::Second && self.backends.len() > 1;
                    let prefix = &self.settings.cache_key_prefix;
                    items.push(Item {
                        key: limiter::cache_key(prefix, &req.domain, &d.entries, shared, unit, now),
                        limit: u64::from(rule.requests_per_unit),
                        unit,
                        cost,
                        shadow: rule.shadow_mode,
                        refund: d.is_negative_hits,
                        backend: usize::from(per_second),
                    });
                    Part::Limited {
                        rule: rule.clone(),
                        stats_key: stats_key.clone(),
                        item: items.len() - 1,
                    }
                }
            };
            parts.push(part);
        }
        (parts, items)
    }

    /// Settle the items with Redis, within `REDIS_TIMEOUT`. An enforced rule with a
    /// limit of 0 or a cost above its limit refuses without Redis; then the others are
    /// only read, for their remaining.
    async fn judge(&self, items: &[Item]) -> Result<limiter::Outcome, String> {
        let mut enforced = Vec::new();
        let mut independent = Vec::new();
        let mut denied_locally = false;
        for (i, it) in items.iter().enumerate() {
            if it.limit == 0 {
                denied_locally |= !it.shadow && !it.refund && it.cost > 0;
            } else if it.shadow || it.refund {
                independent.push(i);
            } else {
                denied_locally |= it.cost > it.limit;
                enforced.push(i);
            }
        }
        if enforced.is_empty() && independent.is_empty() {
            return Ok(limiter::Outcome {
                allowed: !denied_locally,
                judged: vec![Judged::default(); items.len()],
            });
        }
        let settle = limiter::settle(
            &self.backends,
            items,
            &enforced,
            &independent,
            denied_locally,
        );
        let timeout = self.settings.redis_timeout;
        match tokio::time::timeout(timeout, settle).await {
            Ok(r) => r.map_err(|e| e.to_string()),
            Err(_) => Err(format!("no answer from Redis within {timeout:?}")),
        }
    }

    /// One status per descriptor, each limited one counted in the stats; whether a
    /// rule refused.
    fn statuses(
        &self,
        parts: &[Part],
        items: &[Item],
        outcome: &limiter::Outcome,
        now: u64,
    ) -> (Vec<DescriptorStatus>, bool) {
        let mut over = false;
        let statuses = parts
            .iter()
            .map(|part| {
                part.status(|rule, stats_key, item| {
                    let it = &items[item];
                    let mut j = outcome.judged[item];
                    if !j.asked {
                        // Judged without Redis: a zero limit, a cost above the limit, or a
                        // shadow rule whose call failed.
                        j.allowed = it.cost <= it.limit;
                        j.remaining = it.limit;
                    }
                    if !it.refund {
                        let hits = Hits {
                            before: j.before,
                            hits: it.cost,
                            limit: it.limit,
                            shadow: it.shadow,
                        };
                        self.stats.record(stats_key, hits);
                    }
                    let refused = !j.allowed && !it.shadow && !it.refund;
                    over |= refused;
                    let code = if refused { Code::OverLimit } else { Code::Ok };
                    status(
                        code,
                        Some(current_limit(rule, it.unit)),
                        j.remaining,
                        Some(reset(it.unit, now)),
                    )
                })
            })
            .collect();
        (statuses, over)
    }

    /// The answer when Redis failed or was too slow, by `REDIS_FAILURE_MODE`.
    fn redis_failure(
        &self,
        why: &str,
        parts: &[Part],
        items: &[Item],
        now: u64,
    ) -> Result<RateLimitResponse, Status> {
        self.stats
            .should_rate_limit_error
            .with_label_values(&["redis_error"])
            .inc();
        tracing::error!("redis: {why}");
        let code = match self.settings.failure_mode {
            FailureMode::Error => return Err(Status::unavailable(format!("redis: {why}"))),
            FailureMode::Allow => Code::Ok,
            FailureMode::Deny => Code::OverLimit,
        };
        let answer = if code == Code::Ok { "allow" } else { "deny" };
        self.stats
            .failure_mode_answers
            .with_label_values(&[answer])
            .inc();
        let statuses = parts
            .iter()
            .map(|p| {
                p.status(|rule, _, item| {
                    let unit = items[item].unit;
                    status(
                        code,
                        Some(current_limit(rule, unit)),
                        0,
                        Some(reset(unit, now)),
                    )
                })
            })
            .collect();
        Ok(RateLimitResponse {
            overall_code: code as i32,
            statuses,
            ..Default::default()
        })
    }

    /// The overall code (OK under the global shadow mode), and the headers of the
    /// descriptor closest to its limit (a refusing one first) when enabled.
    fn respond(&self, statuses: Vec<DescriptorStatus>, over: bool) -> RateLimitResponse {
        let mut headers = Vec::new();
        if let Some([limit_h, remaining_h, reset_h]) = &self.settings.response_headers {
            // The reference's choice: the least remaining among the limited statuses,
            // and a refusing one over any (the last of them).
            let mut closest: Option<&DescriptorStatus> = None;
            let mut least = u32::MAX;
            for st in &statuses {
                if st.current_limit.is_some() && st.limit_remaining < least {
                    closest = Some(st);
                    least = st.limit_remaining;
                }
                if st.code == Code::OverLimit as i32 {
                    closest = Some(st);
                    least = 0;
                }
            }
            if let Some(st) = closest {
                let l = st.current_limit.as_ref().map_or(0, |l| l.requests_per_unit);
                let reset = st.duration_until_reset.as_ref().map_or(0, |d| d.seconds);
                for (key, value) in [
                    (limit_h, l.to_string()),
                    (remaining_h, st.limit_remaining.to_string()),
                    (reset_h, reset.to_string()),
                ] {
                    headers.push(HeaderValue {
                        key: key.clone(),
                        value: value.clone(),
                        raw_value: Vec::new(),
                    });
                }
            }
        }
        let mut code = if over { Code::OverLimit } else { Code::Ok };
        if over && self.settings.global_shadow_mode {
            code = Code::Ok;
            self.stats.global_shadow_mode.inc();
        }
        RateLimitResponse {
            overall_code: code as i32,
            statuses,
            response_headers_to_add: headers,
            ..Default::default()
        }
    }
}

/// The gRPC service.
pub struct Service(pub Arc<State>);

#[tonic::async_trait]
impl RateLimitService for Service {
    async fn should_rate_limit(
        &self,
        request: Request<RateLimitRequest>,
    ) -> Result<Response<RateLimitResponse>, Status> {
        self.0
            .should_rate_limit(request.get_ref())
            .await
            .map(Response::new)
    }
}
