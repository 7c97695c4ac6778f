//! Redis down or hung: `REDIS_FAILURE_MODE` answers OK (allow), OVER_LIMIT (deny) or a
//! gRPC error (error, the reference's answer), within `REDIS_TIMEOUT`; the service
//! judges again once Redis is back.

use crate::harness::*;

const CONF: &str = "domain: f\ndescriptors:\n  - key: user\n    rate_limit:\n      unit: year\n      requests_per_unit: 100\n";

/// `REDIS_TIMEOUT` where Redis is killed: long, as it also bounds the calls that must
/// be judged (a killed server refuses at once, whatever the timeout).
const KILLED_TIMEOUT: &str = "5s";

fn start(redis: &Redis, mode: &str, timeout: &str) -> Service {
    Service::builder(&format!("127.0.0.1:{}", redis.port))
        .file("f.yaml", CONF)
        .env("REDIS_FAILURE_MODE", mode)
        .env("REDIS_TIMEOUT", timeout)
        .env("REDIS_POOL_SIZE", "2")
        .start()
}

fn one() -> envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest {
    request("f", vec![desc(&[("user", "u")])])
}

#[tokio::test]
async fn redis_down_fail_open() {
    let mut redis = Redis::start();
    let svc = start(&redis, "allow", KILLED_TIMEOUT);
    let mut c = svc.client().await;
    assert_eq!(call(&mut c, one()).await.statuses[0].limit_remaining, 99);
    redis.kill();
    let r = call(&mut c, one()).await;
    assert_eq!(codes(&r), (OK, vec![OK]));
    assert_eq!(
        svc.metric(r#"ratelimit_service_failure_mode_answers{answer="allow"}"#),
        1
    );
    assert_eq!(
        svc.metric(r#"ratelimit_service_should_rate_limit_error{err_type="redis_error"}"#),
        1
    );
    // Back on its port (empty): judged again.
    redis.restart();
    let mut remaining = None;
    for _ in 0..200 {
        let r = call(&mut c, one()).await;
        if let Some(s) = r.statuses.first().filter(|s| s.limit_remaining > 0) {
            remaining = Some(s.limit_remaining);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    assert_eq!(remaining, Some(99), "{}", svc.log());
}

#[tokio::test]
async fn redis_down_fail_closed() {
    let mut redis = Redis::start();
    let svc = start(&redis, "deny", KILLED_TIMEOUT);
    let mut c = svc.client().await;
    assert_eq!(call(&mut c, one()).await.overall_code, OK);
    redis.kill();
    let r = call(&mut c, one()).await;
    assert_eq!(codes(&r), (OVER_LIMIT, vec![OVER_LIMIT]));
    assert_eq!(
        svc.metric(r#"ratelimit_service_failure_mode_answers{answer="deny"}"#),
        1
    );
}

#[tokio::test]
async fn redis_down_as_the_reference_answers() {
    let mut redis = Redis::start();
    let svc = start(&redis, "error", KILLED_TIMEOUT);
    let mut c = svc.client().await;
    redis.kill();
    let e = c.should_rate_limit(one()).await.expect_err("an error");
    assert_eq!(e.code(), tonic::Code::Unavailable, "{e}");
}

/// A server that accepts and never answers: the timeout decides, then the mode. The
/// timeout is short, as the stopped server makes a call wait it out, and long enough for
/// the calls that must be judged.
#[tokio::test]
async fn redis_hung_times_out() {
    let redis = Redis::start();
    let svc = start(&redis, "deny", "2s");
    let mut c = svc.client().await;
    assert_eq!(call(&mut c, one()).await.overall_code, OK);
    redis.signal("-STOP");
    let r = call(&mut c, one()).await;
    assert_eq!(codes(&r), (OVER_LIMIT, vec![OVER_LIMIT]));
    assert!(svc.log().contains("redis:"), "{}", svc.log());
    redis.signal("-CONT");
    let mut judged = false;
    for _ in 0..200 {
        if call(&mut c, one()).await.overall_code == OK {
            judged = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    assert!(judged, "{}", svc.log());
}

/// Unlimited descriptors and unknown ones need no Redis: answered as usual while it is
/// down, and a service started without Redis answers by its mode until Redis comes.
#[tokio::test]
async fn started_without_redis() {
    let port = free_port();
    let svc = Service::builder(&format!("127.0.0.1:{port}"))
        .file(
            "f.yaml",
            &format!("{CONF}  - key: internal\n    rate_limit:\n      unlimited: true\n"),
        )
        .env("REDIS_FAILURE_MODE", "deny")
        .env("REDIS_TIMEOUT", "300ms")
        .unhealthy()
        .start();
    assert_eq!(svc.http_get("/healthcheck").0, 500);
    let mut c = svc.client().await;
    let r = call(&mut c, request("f", vec![desc(&[("internal", "x")])])).await;
    assert_eq!(codes(&r), (OK, vec![OK]));
    assert_eq!(call(&mut c, one()).await.overall_code, OVER_LIMIT);
}
