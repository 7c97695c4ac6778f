//! The API beyond the documented examples: `hits_addend`, limits sent in the request,
//! refunds, the response headers, `/json`, `/healthcheck`, `/metrics` and gRPC health,
//! the near-limit ratio, and exactness: a request refused by one descriptor is counted
//! in none, and concurrent requests never get more than a limit between them.

use crate::harness::*;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::RateLimitOverride;
use envoy_types::pb::google::protobuf::UInt64Value;

/// Limits in years and months: a test's few requests never cross a window's end in
/// practice; [`in_one_window`] guards the ones whose counts matter.
const API: &str = "
domain: api
descriptors:
  - key: user
    rate_limit:
      unit: year
      requests_per_unit: 10
  - key: account
    rate_limit:
      unit: month
      requests_per_unit: 1000
  - key: route
    value: /login
    descriptors:
      - key: address
        rate_limit:
          unit: year
          requests_per_unit: 3
  - key: tier
    value: free
    shadow_mode: true
    rate_limit:
      unit: year
      requests_per_unit: 2
";

const MONTH: u64 = 30 * 86_400;

fn service(redis: &Redis) -> ServiceBuilder {
    Service::builder(&format!("127.0.0.1:{}", redis.port)).file("api.yaml", API)
}

fn with_hits(
    mut d: envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor,
    n: u64,
) -> envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor {
    d.hits_addend = Some(UInt64Value { value: n });
    d
}

#[tokio::test]
async fn hits_addend_of_the_request_and_of_a_descriptor() {
    let redis = Redis::start();
    let svc = service(&redis).start();
    let mut c = svc.client().await;
    let mut r = request("api", vec![desc(&[("user", "u1")])]);
    r.hits_addend = 4;
    let resp = call(&mut c, r.clone()).await;
    assert_eq!(codes(&resp), (OK, vec![OK]));
    assert_eq!(resp.statuses[0].limit_remaining, 6);
    // A descriptor's own hits_addend wins over the request's; 0 only reads.
    r.descriptors[0].hits_addend = Some(UInt64Value { value: 0 });
    let resp = call(&mut c, r.clone()).await;
    assert_eq!(
        (resp.overall_code, resp.statuses[0].limit_remaining),
        (OK, 6)
    );
    assert_eq!(redis.get(&key("api", &[("user", "u1")], YEAR)), Some(4));
    // 7 does not fit in the 6 left: refused, nothing taken; 6 fits.
    r.descriptors[0].hits_addend = Some(UInt64Value { value: 7 });
    let resp = call(&mut c, r.clone()).await;
    assert_eq!(codes(&resp), (OVER_LIMIT, vec![OVER_LIMIT]));
    assert_eq!(resp.statuses[0].limit_remaining, 6);
    r.descriptors[0].hits_addend = Some(UInt64Value { value: 6 });
    assert_eq!(call(&mut c, r.clone()).await.overall_code, OK);
    assert_eq!(redis.get(&key("api", &[("user", "u1")], YEAR)), Some(10));
    // Two descriptors with different hits: both taken, all or nothing.
    let r = request(
        "api",
        vec![
            with_hits(desc(&[("user", "u2")]), 2),
            with_hits(desc(&[("account", "a2")]), 500),
        ],
    );
    let resp = call(&mut c, r.clone()).await;
    assert_eq!(codes(&resp), (OK, vec![OK, OK]));
    assert_eq!(
        (
            resp.statuses[0].limit_remaining,
            resp.statuses[1].limit_remaining
        ),
        (8, 500)
    );
    assert_eq!(call(&mut c, r.clone()).await.overall_code, OK);
    // The account is full: the user's 2 hits are given back.
    let resp = call(&mut c, r).await;
    assert_eq!(codes(&resp), (OVER_LIMIT, vec![OK, OVER_LIMIT]));
    assert_eq!(redis.get(&key("api", &[("user", "u2")], YEAR)), Some(4));
    assert_eq!(
        redis.get(&key("api", &[("account", "a2")], MONTH)),
        Some(1000)
    );
}

#[tokio::test]
async fn a_limit_sent_in_the_request_overrides_the_file() {
    let redis = Redis::start();
    let svc = service(&redis).start();
    let mut c = svc.client().await;
    let mut d = desc(&[("user", "o1")]);
    d.limit = Some(RateLimitOverride {
        requests_per_unit: 2,
        unit: 6,
    });
    let r = request("api", vec![d]);
    let codes_seen: Vec<i32> = {
        let mut v = Vec::new();
        for _ in 0..3 {
            v.push(call(&mut c, r.clone()).await.overall_code);
        }
        v
    };
    assert_eq!(codes_seen, vec![OK, OK, OVER_LIMIT]);
    let resp = call(&mut c, r).await;
    assert_eq!(
        resp.statuses[0]
            .current_limit
            .as_ref()
            .map(|l| (l.requests_per_unit, l.unit)),
        Some((2, 6))
    );
    assert_eq!(
        svc.metric(
            r#"ratelimit_service_rate_limit_over_limit{domain="api",key1="user_o1",key2=""}"#
        ),
        2
    );
}

/// Example 2's point, on keys of their own: a request refused by its route's limit
/// takes nothing from the user's or the account's.
#[tokio::test]
async fn a_request_refused_by_one_descriptor_is_counted_in_none() {
    let redis = Redis::start();
    let svc = service(&redis).start();
    let mut c = svc.client().await;
    let r = request(
        "api",
        vec![
            desc(&[("user", "n1")]),
            desc(&[("account", "n1")]),
            desc(&[("route", "/login"), ("address", "192.0.2.1")]),
        ],
    );
    let mut answers = Vec::new();
    for _ in 0..6 {
        answers.push(codes(&call(&mut c, r.clone()).await));
    }
    assert_eq!(answers[..3], vec![(OK, vec![OK, OK, OK]); 3][..]);
    assert_eq!(
        answers[3..],
        vec![(OVER_LIMIT, vec![OK, OK, OVER_LIMIT]); 3][..]
    );
    assert_eq!(redis.get(&key("api", &[("user", "n1")], YEAR)), Some(3));
    assert_eq!(redis.get(&key("api", &[("account", "n1")], MONTH)), Some(3));
    assert_eq!(
        redis.get(&key(
            "api",
            &[("route", "/login"), ("address", "192.0.2.1")],
            YEAR
        )),
        Some(3)
    );
    // One RL.ALL (and one MGET) per request.
    assert_eq!(redis.calls("rl.all"), 6);
    assert_eq!(redis.calls("incrby"), 0);
}

#[tokio::test]
async fn concurrent_requests_never_get_more_than_a_limit() {
    let redis = Redis::start();
    let svc = service(&redis).start();
    let c = svc.client().await;
    let r = request(
        "api",
        vec![desc(&[("user", "c1")]), desc(&[("account", "c1")])],
    );
    let allowed = allowed_among(&c, 8, 6, move |_, _| r.clone()).await;
    assert_eq!(allowed, 10);
    assert_eq!(redis.get(&key("api", &[("user", "c1")], YEAR)), Some(10));
    assert_eq!(
        redis.get(&key("api", &[("account", "c1")], MONTH)),
        Some(10)
    );
}

/// `is_negative_hits` gives hits back (RL.ALL ... REFUND).
#[tokio::test]
async fn negative_hits_give_back() {
    let redis = Redis::start();
    let svc = service(&redis).start();
    let mut c = svc.client().await;
    let mut r = request("api", vec![desc(&[("user", "g1")])]);
    r.hits_addend = 8;
    call(&mut c, r.clone()).await;
    r.descriptors[0].is_negative_hits = true;
    r.descriptors[0].hits_addend = Some(UInt64Value { value: 5 });
    let resp = call(&mut c, r).await;
    assert_eq!(codes(&resp), (OK, vec![OK]));
    assert_eq!(resp.statuses[0].limit_remaining, 7);
    assert_eq!(redis.get(&key("api", &[("user", "g1")], YEAR)), Some(3));
}

/// Shadow mode: a rule over its limit answers OK, is counted in `shadow_mode`, and its
/// count stops at the limit; a request another rule refuses is not counted in it.
#[tokio::test]
async fn shadow_rules_count_what_passes() {
    let redis = Redis::start();
    let svc = service(&redis).start();
    let mut c = svc.client().await;
    let r = request(
        "api",
        vec![desc(&[("tier", "free")]), desc(&[("user", "s1")])],
    );
    let mut answers = Vec::new();
    for _ in 0..12 {
        answers.push(codes(&call(&mut c, r.clone()).await));
    }
    assert_eq!(answers[..10], vec![(OK, vec![OK, OK]); 10][..]);
    assert_eq!(
        answers[10..],
        vec![(OVER_LIMIT, vec![OK, OVER_LIMIT]); 2][..]
    );
    assert_eq!(redis.get(&key("api", &[("tier", "free")], YEAR)), Some(2));
    let m = |stat: &str| {
        svc.metric(&format!(
            r#"ratelimit_service_rate_limit_{stat}{{domain="api",key1="tier_free",key2=""}}"#
        ))
    };
    assert_eq!(
        (
            m("total_hits"),
            m("within_limit"),
            m("over_limit"),
            m("shadow_mode")
        ),
        (12, 2, 10, 10)
    );
}

#[tokio::test]
async fn response_headers_name_the_descriptor_closest_to_its_limit() {
    let redis = Redis::start();
    let svc = service(&redis)
        .env("LIMIT_RESPONSE_HEADERS_ENABLED", "true")
        .env("LIMIT_RESET_HEADER", "X-RateLimit-Reset")
        .start();
    let mut c = svc.client().await;
    let r = request(
        "api",
        vec![desc(&[("account", "h1")]), desc(&[("user", "h1")])],
    );
    let resp = call(&mut c, r).await;
    let headers: Vec<(String, String)> = resp
        .response_headers_to_add
        .iter()
        .map(|h| (h.key.clone(), h.value.clone()))
        .collect();
    assert_eq!(headers[0], ("RateLimit-Limit".into(), "10".into()));
    assert_eq!(headers[1], ("RateLimit-Remaining".into(), "9".into()));
    assert_eq!(headers[2].0, "X-RateLimit-Reset");
    let reset: u64 = headers[2].1.parse().expect("seconds");
    assert!(reset > 0 && reset <= YEAR);
}

#[tokio::test]
async fn http_endpoints_and_grpc_health() {
    let redis = Redis::start();
    let svc = service(&redis).env("NEAR_LIMIT_RATIO", "0.5").start();
    assert_eq!(svc.http_get("/healthcheck"), (200, "OK".into()));
    let body = r#"{"domain": "api", "descriptors": [{"entries": [{"key": "route", "value": "/login"}, {"key": "address", "value": "j1"}]}]}"#;
    let (status, text) = svc.http_post("/json", body);
    assert_eq!(status, 200, "{text}");
    let json: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(json["overallCode"], "OK");
    assert_eq!(json["statuses"][0]["currentLimit"]["requestsPerUnit"], 3);
    assert_eq!(json["statuses"][0]["currentLimit"]["unit"], "YEAR");
    assert_eq!(json["statuses"][0]["limitRemaining"], 2);
    svc.http_post("/json", body);
    svc.http_post("/json", body);
    let (status, text) = svc.http_post("/json", body);
    assert_eq!(status, 429, "{text}");
    let json: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(json["statuses"][0]["code"], "OVER_LIMIT");
    assert!(json["statuses"][0].get("limitRemaining").is_none());
    assert_eq!(svc.http_post("/json", "{not json").0, 400);
    assert_eq!(
        svc.http_post("/json", r#"{"domain": "", "descriptors": []}"#)
            .0,
        400
    );
    // Counters: near_limit from floor(3 * 0.5) = 1: the 2nd and 3rd hits.
    let m = |stat: &str| {
        svc.metric(&format!(r#"ratelimit_service_rate_limit_{stat}{{domain="api",key1="route_/login",key2="address"}}"#))
    };
    assert_eq!(
        (
            m("total_hits"),
            m("within_limit"),
            m("near_limit"),
            m("over_limit")
        ),
        (4, 3, 2, 1)
    );
    assert_eq!(svc.metric("ratelimit_service_config_load_success"), 1);
    assert!(svc.metric(r#"ratelimit_service_total_requests{grpc_method="ShouldRateLimit"}"#) >= 4);

    use tonic_health::pb::health_client::HealthClient;
    use tonic_health::pb::HealthCheckRequest;
    let channel = tonic::transport::Endpoint::from_shared(svc.grpc.clone())
        .expect("an address")
        .connect()
        .await
        .expect("connect");
    let mut h = HealthClient::new(channel);
    for service in ["", "ratelimit"] {
        let resp = h
            .check(HealthCheckRequest {
                service: service.into(),
            })
            .await
            .expect("check")
            .into_inner();
        assert_eq!(resp.status, 1, "{service:?} SERVING");
    }
}

#[tokio::test]
async fn unknown_domains_and_bad_requests() {
    let redis = Redis::start();
    let svc = service(&redis).start();
    let mut c = svc.client().await;
    let r = call(&mut c, request("nope", vec![desc(&[("user", "x")])])).await;
    assert_eq!(codes(&r), (OK, vec![OK]));
    assert_eq!(
        svc.metric(r#"ratelimit_service_rate_limit_domain_not_found{domain="nope"}"#),
        1
    );
    let e = c
        .should_rate_limit(request("", vec![desc(&[("user", "x")])]))
        .await
        .expect_err("empty domain");
    assert!(e.message().contains("domain must not be empty"), "{e}");
    let e = c
        .should_rate_limit(request("api", vec![]))
        .await
        .expect_err("no descriptors");
    assert!(
        e.message().contains("descriptor list must not be empty"),
        "{e}"
    );
    assert_eq!(
        svc.metric(r#"ratelimit_service_should_rate_limit_error{err_type="service_error"}"#),
        2
    );
}

/// The global shadow mode (`SHADOW_MODE=true`) answers OK, counts it, and still judges
/// all or nothing.
#[tokio::test]
async fn global_shadow_mode() {
    let redis = Redis::start();
    let svc = service(&redis).env("SHADOW_MODE", "true").start();
    let mut c = svc.client().await;
    let r = request("api", vec![desc(&[("route", "/login"), ("address", "g")])]);
    let mut answers = Vec::new();
    for _ in 0..5 {
        answers.push(codes(&call(&mut c, r.clone()).await));
    }
    assert_eq!(answers[4], (OK, vec![OVER_LIMIT]));
    assert_eq!(svc.metric("ratelimit_service_global_shadow_mode"), 2);
    assert_eq!(
        redis.get(&key("api", &[("route", "/login"), ("address", "g")], YEAR)),
        Some(3)
    );
}

/// `REDIS_PERSECOND`: limits in seconds on a server of their own. A request with both
/// kinds is settled on each; refused by the per-second one, it is given back on the
/// other.
#[tokio::test]
async fn per_second_limits_on_their_own_server() {
    let main = Redis::start();
    let per_second = Redis::start();
    let svc = Service::builder(&format!("127.0.0.1:{}", main.port))
        .env("REDIS_PERSECOND", "true")
        .env("REDIS_PERSECOND_URL", &format!("127.0.0.1:{}", per_second.port))
        .file(
            "p.yaml",
            "domain: p\ndescriptors:\n  - key: fast\n    rate_limit: {unit: second, requests_per_unit: 2}\n  - key: slow\n    rate_limit: {unit: year, requests_per_unit: 1000}\n",
        )
        .start();
    let c = svc.client().await;
    // A run (two FLUSHALLs, three calls, three GETs) takes well under a second.
    in_one_window(1, || {
        let mut c = c.clone();
        let (main, per_second) = (&main, &per_second);
        async move {
            for r in [main, per_second] {
                r.flushall()?;
            }
            let r = request("p", vec![desc(&[("fast", "f")]), desc(&[("slow", "s")])]);
            let mut seen = Vec::new();
            for _ in 0..3 {
                seen.push(codes(&call(&mut c, r.clone()).await));
            }
            crate::check_eq!(seen[2], (OVER_LIMIT, vec![OVER_LIMIT, OK]));
            crate::check_eq!(per_second.get(&key("p", &[("fast", "f")], 1)), Some(2));
            crate::check_eq!(main.get(&key("p", &[("slow", "s")], YEAR)), Some(2));
            crate::check_eq!(main.get(&key("p", &[("fast", "f")], 1)), None);
            Ok(())
        }
    })
    .await;
}
