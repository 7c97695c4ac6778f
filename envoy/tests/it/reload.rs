//! Reloading: a changed file is picked up while requests flow, without a failed
//! request; a bad file keeps the last good configuration and says why; a swap of the
//! `RUNTIME_ROOT` symlink loads the new directory.

use crate::harness::*;

fn limits(n: u32) -> String {
    format!("domain: live\ndescriptors:\n  - key: user\n    rate_limit:\n      unit: year\n      requests_per_unit: {n}\n")
}

/// The limit the service answers with now.
async fn current(
    c: &mut envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient<tonic::transport::Channel>,
    user: &str,
) -> u32 {
    let r = call(c, request("live", vec![desc(&[("user", user)])])).await;
    limit_of(&r, 0).unwrap_or(0)
}

async fn wait_for_limit(svc: &Service, user: &str, want: u32) {
    let mut c = svc.client().await;
    for _ in 0..400 {
        if current(&mut c, user).await == want {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    panic!("the limit never became {want}:\n{}", svc.log());
}

#[tokio::test]
async fn a_change_while_requests_flow() {
    let redis = Redis::start();
    let svc = Service::builder(&format!("127.0.0.1:{}", redis.port))
        .file("live.yaml", &limits(100))
        .start();
    let c = svc.client().await;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut flows = Vec::new();
    for n in 0..4 {
        let (mut c, stop) = (c.clone(), stop.clone());
        flows.push(tokio::spawn(async move {
            let mut seen = std::collections::BTreeSet::new();
            let mut calls = 0;
            // Bounded: at most 20 000 calls per client.
            while !stop.load(std::sync::atomic::Ordering::SeqCst) && calls < 20_000 {
                let r = c
                    .should_rate_limit(request(
                        "live",
                        vec![desc(&[("user", &format!("flow{n}"))])],
                    ))
                    .await
                    .expect("no failed call during a reload")
                    .into_inner();
                seen.insert(limit_of(&r, 0).unwrap_or(0));
                calls += 1;
            }
            seen
        }));
    }
    svc.write_file("live.yaml", &limits(7));
    wait_for_limit(&svc, "probe", 7).await;
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    for f in flows {
        let seen = f.await.expect("a client");
        assert!(seen.iter().all(|l| *l == 100 || *l == 7), "{seen:?}");
    }
    assert_eq!(svc.metric("ratelimit_service_config_load_success"), 2);
}

#[tokio::test]
async fn a_bad_file_keeps_the_last_good_configuration() {
    let redis = Redis::start();
    let svc = Service::builder(&format!("127.0.0.1:{}", redis.port))
        .file("live.yaml", &limits(5))
        .start();
    let mut c = svc.client().await;
    assert_eq!(current(&mut c, "b").await, 5);
    svc.write_file("live.yaml", "domain: live\ndescriptors:\n  - key: user\n    rate_limit:\n      unit: fortnight\n      requests_per_unit: 1\n");
    svc.wait_until(
        |s| s.metric("ratelimit_service_config_load_error") == 1,
        "refused the bad file",
    );
    assert!(
        svc.log()
            .contains("config.live: invalid rate limit unit 'fortnight'"),
        "{}",
        svc.log()
    );
    assert_eq!(current(&mut c, "b").await, 5);
    // A file that is not YAML at all, in a second file: refused too.
    svc.write_file("other.yaml", "domain: [\n");
    svc.wait_until(
        |s| s.metric("ratelimit_service_config_load_error") == 2,
        "refused the second bad file",
    );
    assert_eq!(current(&mut c, "b").await, 5);
    // Unrelated changes beside the runtime root do not refuse the same file again.
    std::fs::write(svc.dir.join("unrelated"), "x").expect("write");
    std::fs::remove_file(svc.config_dir().join("other.yaml")).expect("remove");
    svc.write_file("live.yaml", &limits(9));
    wait_for_limit(&svc, "b", 9).await;
    assert_eq!(svc.http_get("/healthcheck").0, 200);
    assert_eq!(svc.metric("ratelimit_service_config_load_success"), 2);
    assert!(
        svc.metric("ratelimit_service_config_load_error") <= 3,
        "{}",
        svc.log()
    );
}

/// The reference's way to deploy a configuration: `RUNTIME_ROOT` is a symlink swapped
/// to a new directory.
#[tokio::test]
async fn a_swap_of_the_root_symlink() {
    let redis = Redis::start();
    let base = temp_dir("swap");
    let make = |name: &str, n: u32| {
        let d = base.join(name).join("ratelimit").join("config");
        std::fs::create_dir_all(&d).expect("dir");
        std::fs::write(d.join("live.yaml"), limits(n)).expect("file");
        base.join(name)
    };
    let v1 = make("v1", 11);
    let v2 = make("v2", 22);
    let current_link = base.join("current");
    std::os::unix::fs::symlink(&v1, &current_link).expect("symlink");
    let svc = Service::builder(&format!("127.0.0.1:{}", redis.port))
        .env("RUNTIME_ROOT", current_link.to_str().expect("utf-8"))
        .env("RUNTIME_IGNOREDOTFILES", "true")
        .start();
    let mut c = svc.client().await;
    assert_eq!(current(&mut c, "s").await, 11);
    let tmp = base.join("current.new");
    std::os::unix::fs::symlink(&v2, &tmp).expect("symlink");
    std::fs::rename(&tmp, &current_link).expect("swap");
    wait_for_limit(&svc, "s", 22).await;
    let _ = std::fs::remove_dir_all(&base);
}
