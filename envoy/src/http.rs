//! The HTTP endpoints the reference service has: `/healthcheck`, `/json` (a
//! `RateLimitRequest` in the proto3 JSON mapping, answered with the
//! `RateLimitResponse`, status 429 when over the limit), and `/metrics` (Prometheus);
//! `/rlconfig` prints the loaded rules.

use crate::config::Unit;
use crate::service::State;
use axum::extract::State as Shared;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::{
    Entry, RateLimitOverride,
};
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use envoy_types::pb::google::protobuf::UInt64Value;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::sync::Arc;

/// The proto3 JSON form of a `RateLimitRequest` (field names in lowerCamelCase or as
/// in the proto, 64-bit integers as numbers or strings, enums by name or number).
#[derive(Deserialize)]
struct JsonRequest {
    #[serde(default)]
    domain: String,
    #[serde(default)]
    descriptors: Vec<JsonDescriptor>,
    #[serde(default, alias = "hits_addend", rename = "hitsAddend")]
    hits_addend: Option<Value>,
}

#[derive(Deserialize)]
struct JsonDescriptor {
    #[serde(default)]
    entries: Vec<JsonEntry>,
    #[serde(default)]
    limit: Option<JsonOverride>,
    #[serde(default, alias = "hits_addend", rename = "hitsAddend")]
    hits_addend: Option<Value>,
    #[serde(default, alias = "is_negative_hits", rename = "isNegativeHits")]
    is_negative_hits: bool,
}

#[derive(Deserialize)]
struct JsonEntry {
    #[serde(default)]
    key: String,
    #[serde(default)]
    value: String,
}

#[derive(Deserialize)]
struct JsonOverride {
    #[serde(default, alias = "requests_per_unit", rename = "requestsPerUnit")]
    requests_per_unit: Option<Value>,
    #[serde(default)]
    unit: Option<Value>,
}

fn unsigned(v: &Value, what: &str) -> Result<u64, String> {
    match v {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
    .ok_or_else(|| format!("{what}: expected an unsigned integer, found {v}"))
}

fn unit(v: &Value) -> Result<i32, String> {
    match v {
        Value::String(s) if s.eq_ignore_ascii_case("UNKNOWN") => Ok(0),
        Value::String(s) => Unit::parse(s)
            .map(Unit::to_proto)
            .ok_or_else(|| format!("unit: unknown unit {s}")),
        Value::Number(n) => n
            .as_i64()
            .and_then(|n| i32::try_from(n).ok())
            .ok_or_else(|| format!("unit: {n}")),
        other => Err(format!("unit: expected a name, found {other}")),
    }
}

fn request(body: &[u8]) -> Result<RateLimitRequest, String> {
    let j: JsonRequest = serde_json::from_slice(body).map_err(|e| e.to_string())?;
    let hits_addend = match &j.hits_addend {
        None => 0,
        Some(v) => {
            u32::try_from(unsigned(v, "hitsAddend")?).map_err(|e| format!("hitsAddend: {e}"))?
        }
    };
    let mut descriptors = Vec::with_capacity(j.descriptors.len());
    for d in j.descriptors {
        let limit = match d.limit {
            None => None,
            Some(o) => Some(RateLimitOverride {
                requests_per_unit: match &o.requests_per_unit {
                    None => 0,
                    Some(v) => u32::try_from(unsigned(v, "requestsPerUnit")?)
                        .map_err(|e| format!("requestsPerUnit: {e}"))?,
                },
                unit: o.unit.as_ref().map(unit).transpose()?.unwrap_or(0),
            }),
        };
        let hits_addend = match &d.hits_addend {
            None => None,
            Some(v) => Some(UInt64Value {
                value: unsigned(v, "hitsAddend")?,
            }),
        };
        descriptors.push(RateLimitDescriptor {
            entries: d
                .entries
                .into_iter()
                .map(|e| Entry {
                    key: e.key,
                    value: e.value,
                })
                .collect(),
            limit,
            hits_addend,
            is_negative_hits: d.is_negative_hits,
        });
    }
    Ok(RateLimitRequest {
        domain: j.domain,
        descriptors,
        hits_addend,
    })
}

fn code_name(code: i32) -> &'static str {
    match Code::try_from(code) {
        Ok(Code::Ok) => "OK",
        Ok(Code::OverLimit) => "OVER_LIMIT",
        _ => "UNKNOWN",
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct JsonLimit {
    #[serde(skip_serializing_if = "String::is_empty")]
    name: String,
    #[serde(skip_serializing_if = "is_zero")]
    requests_per_unit: u32,
    unit: &'static str,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// The proto3 JSON form of a response, as the reference writes it (fields at their
/// default left out, enums by name, durations as `"<seconds>s"`).
fn response_json(r: &RateLimitResponse) -> Value {
    let statuses: Vec<Value> = r
        .statuses
        .iter()
        .map(|s| {
            let mut m = serde_json::Map::new();
            m.insert("code".into(), code_name(s.code).into());
            if let Some(l) = &s.current_limit {
                let limit = JsonLimit {
                    name: l.name.clone(),
                    requests_per_unit: l.requests_per_unit,
                    unit: Unit::from_proto(l.unit).map_or("UNKNOWN", Unit::name),
                };
                m.insert(
                    "currentLimit".into(),
                    serde_json::to_value(limit).unwrap_or_default(),
                );
            }
            if s.limit_remaining != 0 {
                m.insert("limitRemaining".into(), s.limit_remaining.into());
            }
            if let Some(d) = &s.duration_until_reset {
                m.insert(
                    "durationUntilReset".into(),
                    format!("{}s", d.seconds).into(),
                );
            }
            Value::Object(m)
        })
        .collect();
    let mut m = serde_json::Map::new();
    m.insert("overallCode".into(), code_name(r.overall_code).into());
    if !statuses.is_empty() {
        m.insert("statuses".into(), statuses.into());
    }
    if !r.response_headers_to_add.is_empty() {
        let headers: Vec<Value> = r
            .response_headers_to_add
            .iter()
            .map(|h| serde_json::json!({"key": h.key, "value": h.value}))
            .collect();
        m.insert("responseHeadersToAdd".into(), headers.into());
    }
    Value::Object(m)
}

async fn healthcheck(Shared(state): Shared<Arc<State>>) -> Response {
    if state.health.ok() {
        "OK".into_response()
    } else {
        StatusCode::INTERNAL_SERVER_ERROR.into_response()
    }
}

async fn json(Shared(state): Shared<Arc<State>>, body: axum::body::Bytes) -> Response {
    let req = match request(&body) {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!("/json: {e}");
            return (StatusCode::BAD_REQUEST, format!("Bad Request: {e}\n")).into_response();
        }
    };
    match state.should_rate_limit(&req).await {
        Err(e) => {
            tracing::warn!("/json: {}", e.message());
            (
                StatusCode::BAD_REQUEST,
                format!("Bad Request: {}\n", e.message()),
            )
                .into_response()
        }
        Ok(resp) => {
            let status = match Code::try_from(resp.overall_code) {
                Ok(Code::Ok) => StatusCode::OK,
                Ok(Code::OverLimit) => StatusCode::TOO_MANY_REQUESTS,
                _ => StatusCode::INTERNAL_SERVER_ERROR,
            };
            (status, axum::Json(response_json(&resp))).into_response()
        }
    }
}

async fn metrics(Shared(state): Shared<Arc<State>>) -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        state.stats.render(),
    )
        .into_response()
}

async fn rlconfig(Shared(state): Shared<Arc<State>>) -> String {
    state.current_config().map(|c| c.dump()).unwrap_or_default()
}

/// The router of the HTTP port; `metrics_path` also serves the counters.
pub fn router(state: Arc<State>, metrics_path: &str) -> Router {
    let mut r = Router::new()
        .route("/healthcheck", get(healthcheck))
        .route("/json", post(json))
        .route("/rlconfig", get(rlconfig))
        .route("/metrics", get(metrics));
    if metrics_path != "/metrics" && metrics_path.starts_with('/') {
        r = r.route(metrics_path, get(metrics));
    }
    r.with_state(state)
}

/// The router of the Prometheus port (`USE_PROMETHEUS`).
pub fn metrics_router(state: Arc<State>, path: &str) -> Router {
    Router::new().route(path, get(metrics)).with_state(state)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_in_the_proto3_json_mapping() {
        let r = request(
            br#"{"domain": "d", "hits_addend": 2, "descriptors": [
                {"entries": [{"key": "k", "value": "v"}], "limit": {"requestsPerUnit": 5, "unit": "MINUTE"}, "hitsAddend": "3"},
                {"entries": [{"key": "k2"}], "isNegativeHits": true}]}"#,
        )
        .unwrap();
        assert_eq!(r.hits_addend, 2);
        assert_eq!(
            r.descriptors[0].limit,
            Some(RateLimitOverride {
                requests_per_unit: 5,
                unit: 2
            })
        );
        assert_eq!(r.descriptors[0].hits_addend, Some(UInt64Value { value: 3 }));
        assert!(r.descriptors[1].is_negative_hits);
        assert!(request(br#"{"domain": 3}"#).is_err());
        assert!(request(br#"{"domain": "d", "hitsAddend": -1}"#).is_err());
    }
}
