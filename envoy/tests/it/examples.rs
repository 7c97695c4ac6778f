//! The reference service's documented configurations (its README's examples 1 to 8,
//! as they are) and the answers it documents for them, over gRPC against a real
//! server with the module.

use crate::check_eq;
use crate::harness::*;

const EXAMPLE1: &str = "
domain: mongo_cps
descriptors:
  - key: database
    value: users
    rate_limit:
      unit: second
      requests_per_unit: 500

  - key: database
    value: default
    rate_limit:
      unit: second
      requests_per_unit: 500
";

pub const EXAMPLE2: &str = "
domain: messaging
descriptors:
  # Only allow 5 marketing messages a day
  - key: message_type
    value: marketing
    descriptors:
      - key: to_number
        rate_limit:
          unit: day
          requests_per_unit: 5

  # Only allow 100 messages a day to any unique phone number
  - key: to_number
    rate_limit:
      unit: day
      requests_per_unit: 100
";

const EXAMPLE3: &str = "
domain: edge_proxy_per_ip
descriptors:
  - key: remote_address
    rate_limit:
      unit: second
      requests_per_unit: 10

  # Black list IP
  - key: remote_address
    value: 50.0.0.5
    rate_limit:
      unit: second
      requests_per_unit: 0
";

const EXAMPLE4: &str = "
domain: example4
descriptors:
  - key: key
    value: value
    rate_limit:
      requests_per_unit: 300
      unit: second
";

const EXAMPLE4_NESTED: &str = "
domain: example4
descriptors:
  - key: key
    value: value
    descriptors:
      - key: subkey
        rate_limit:
          requests_per_unit: 300
          unit: second
";

const EXAMPLE5: &str = "
domain: internal
descriptors:
  - key: ldap
    rate_limit:
      unlimited: true

  - key: azure
    rate_limit:
      unit: minute
      requests_per_unit: 100
";

const EXAMPLE6: &str = "
domain: example6
descriptors:
  - key: service
    descriptors:
      - key: user
        value: user-a
        rate_limit:
          requests_per_unit: 10
          unit: second
        shadow_mode: true
      - key: user
        value: user-b
        rate_limit:
          requests_per_unit: 20
          unit: second
";

const EXAMPLE7: &str = "
domain: example7
descriptors:
  - key: key_1
    value: value_1
    descriptors:
      - key: user
        value: bkthomps
        rate_limit:
          name: specific_limit
          requests_per_unit: 5
          unit: second
  - key: key_2
    value: value_2
    descriptors:
      - key: user
        value: bkthomps
        rate_limit:
          replaces:
            - name: specific_limit
          requests_per_unit: 10
          unit: second
";

const EXAMPLE8: &str = "
domain: example8
descriptors:
  - key: key1
    detailed_metric: true
    rate_limit:
      unit: minute
      requests_per_unit: 10
  - key: key1
    value: value1
    rate_limit:
      unit: minute
      requests_per_unit: 20
";

fn service(redis: &Redis, files: &[(&str, &str)]) -> Service {
    let mut b = Service::builder(&format!("127.0.0.1:{}", redis.port));
    for (name, yaml) in files {
        b = b.file(name, yaml);
    }
    b.start()
}

#[tokio::test]
async fn example1_two_values_of_one_key() {
    let redis = Redis::start();
    let svc = service(&redis, &[("example1.yaml", EXAMPLE1)]);
    let mut c = svc.client().await;
    let r = call(
        &mut c,
        request("mongo_cps", vec![desc(&[("database", "users")])]),
    )
    .await;
    assert_eq!(codes(&r), (OK, vec![OK]));
    let l = r.statuses[0].current_limit.as_ref().expect("a limit");
    assert_eq!((l.requests_per_unit, l.unit), (500, 1));
    assert!(r.statuses[0].limit_remaining <= 499);
    assert_eq!(
        r.statuses[0]
            .duration_until_reset
            .as_ref()
            .map(|d| d.seconds),
        Some(1)
    );
    // A value the file does not name has no limit.
    let r = call(
        &mut c,
        request("mongo_cps", vec![desc(&[("database", "orders")])]),
    )
    .await;
    assert_eq!(codes(&r), (OK, vec![OK]));
    assert_eq!(r.statuses[0].current_limit, None);
}

/// Example 2: 5 marketing messages a day per number, 100 messages a day per number, in
/// one request. The sixth is refused by the first descriptor and, unlike the
/// reference, counted in neither.
#[tokio::test]
async fn example2_nested_descriptors_all_or_nothing() {
    let redis = Redis::start();
    let svc = service(&redis, &[("messaging.yaml", EXAMPLE2)]);
    let mut c = svc.client().await;
    let both = || {
        request(
            "messaging",
            vec![
                desc(&[("message_type", "marketing"), ("to_number", "2061111111")]),
                desc(&[("to_number", "2061111111")]),
            ],
        )
    };
    in_one_window(86_400, || {
        let mut c = c.clone();
        let redis = &redis;
        async move {
            redis.flushall()?;
            for n in 1..=5u32 {
                let r = call(&mut c, both()).await;
                check_eq!(codes(&r), (OK, vec![OK, OK]));
                check_eq!(r.statuses[0].limit_remaining, 5 - n);
                check_eq!(r.statuses[1].limit_remaining, 100 - n);
            }
            for _ in 0..3 {
                let r = call(&mut c, both()).await;
                check_eq!(codes(&r), (OVER_LIMIT, vec![OVER_LIMIT, OK]));
                check_eq!(r.statuses[1].limit_remaining, 95);
            }
            let marketing = key(
                "messaging",
                &[("message_type", "marketing"), ("to_number", "2061111111")],
                86_400,
            );
            let number = key("messaging", &[("to_number", "2061111111")], 86_400);
            check_eq!(redis.get(&marketing), Some(5));
            check_eq!(redis.get(&number), Some(5));
            // Another number has its own counts; the number alone still has 95.
            let r = call(
                &mut c,
                request("messaging", vec![desc(&[("to_number", "2061111111")])]),
            )
            .await;
            check_eq!(codes(&r), (OK, vec![OK]));
            check_eq!(r.statuses[0].limit_remaining, 94);
            Ok(())
        }
    })
    .await;
    let _ = &mut c;
}

/// Example 3: the most specific match; a limit of 0 refuses without Redis.
#[tokio::test]
async fn example3_black_list_an_address() {
    let redis = Redis::start();
    let svc = service(&redis, &[("edge.yaml", EXAMPLE3)]);
    let mut c = svc.client().await;
    for _ in 0..3 {
        let r = call(
            &mut c,
            request(
                "edge_proxy_per_ip",
                vec![desc(&[("remote_address", "50.0.0.5")])],
            ),
        )
        .await;
        assert_eq!(codes(&r), (OVER_LIMIT, vec![OVER_LIMIT]));
        assert_eq!(limit_of(&r, 0), Some(0));
    }
    assert_eq!(redis.calls("rl.all"), 0);
    assert_eq!(redis.dbsize(), 0);
    let r = call(
        &mut c,
        request(
            "edge_proxy_per_ip",
            vec![desc(&[("remote_address", "50.0.0.1")])],
        ),
    )
    .await;
    assert_eq!(codes(&r), (OK, vec![OK]));
    assert_eq!(limit_of(&r, 0), Some(10));
    assert_eq!(
        svc.metric(r#"ratelimit_service_rate_limit_over_limit{domain="edge_proxy_per_ip",key1="remote_address_50_0_0_5",key2=""}"#),
        3
    );
}

/// Example 4: a rule applies only at the request's depth.
#[tokio::test]
async fn example4_depth_must_match() {
    let redis = Redis::start();
    let two = || {
        request(
            "example4",
            vec![desc(&[("key", "value"), ("subkey", "subvalue")])],
        )
    };
    let svc = service(&redis, &[("example4.yaml", EXAMPLE4)]);
    let mut c = svc.client().await;
    let r = call(&mut c, two()).await;
    assert_eq!(r.statuses[0].current_limit, None);
    drop(svc);
    let svc = service(&redis, &[("example4.yaml", EXAMPLE4_NESTED)]);
    let mut c = svc.client().await;
    let r = call(&mut c, two()).await;
    assert_eq!(limit_of(&r, 0), Some(300));
}

/// Example 5: an unlimited descriptor is answered OK with the largest remaining, and
/// never reaches Redis.
#[tokio::test]
async fn example5_unlimited_never_touches_redis() {
    let redis = Redis::start();
    let svc = service(&redis, &[("internal.yaml", EXAMPLE5)]);
    let mut c = svc.client().await;
    for _ in 0..5 {
        let r = call(&mut c, request("internal", vec![desc(&[("ldap", "bind")])])).await;
        assert_eq!(codes(&r), (OK, vec![OK]));
        assert_eq!(r.statuses[0].limit_remaining, u32::MAX);
        assert_eq!(r.statuses[0].current_limit, None);
    }
    assert_eq!(redis.calls("rl.all"), 0);
    let r = call(
        &mut c,
        request(
            "internal",
            vec![desc(&[("ldap", "x")]), desc(&[("azure", "y")])],
        ),
    )
    .await;
    assert_eq!(codes(&r), (OK, vec![OK, OK]));
    assert_eq!(
        r.statuses[1]
            .current_limit
            .as_ref()
            .map(|l| (l.requests_per_unit, l.unit)),
        Some((100, 2))
    );
    assert_eq!(redis.calls("rl.all"), 1);
}

/// Example 6: user-a's rule is in shadow mode: over its 10 a second it is counted and
/// passed; user-b is limited to 20.
#[tokio::test]
async fn example6_shadow_mode_counts_and_passes() {
    let redis = Redis::start();
    let svc = service(&redis, &[("example6.yaml", EXAMPLE6)]);
    let c = svc.client().await;
    let user = |u: &str| {
        request(
            "example6",
            vec![desc(&[("service", "auth-service"), ("user", u)])],
        )
    };
    let shadow = r#"ratelimit_service_rate_limit_shadow_mode{domain="example6",key1="service",key2="user_user-a"}"#;
    // Each run (a FLUSHALL, a scrape, 13 calls, a GET) takes well under a second. Only
    // this test moves the shadow-mode counter: the passing run's share of it is read
    // after the window.
    let before = in_one_window(1, || {
        let mut c = c.clone();
        let (svc, redis) = (&svc, &redis);
        async move {
            redis.flushall()?;
            let before = svc.metric(shadow);
            for _ in 0..13 {
                let r = call(&mut c, user("user-a")).await;
                check_eq!(codes(&r), (OK, vec![OK]));
            }
            // Counted up to its limit, not past it.
            let k = key(
                "example6",
                &[("service", "auth-service"), ("user", "user-a")],
                1,
            );
            check_eq!(redis.get(&k), Some(10));
            Ok(before)
        }
    })
    .await;
    assert_eq!(svc.metric(shadow) - before, 3);
    // A run (a FLUSHALL, 21 calls) takes well under a second.
    in_one_window(1, || {
        let mut c = c.clone();
        let redis = &redis;
        async move {
            redis.flushall()?;
            let mut refused = 0;
            for _ in 0..21 {
                let r = call(&mut c, user("user-b")).await;
                if r.overall_code == OVER_LIMIT {
                    refused += 1;
                }
            }
            check_eq!(refused, 1);
            Ok(())
        }
    })
    .await;
}

/// Example 7: a rule that replaces another by name: with both descriptors only the
/// replacing one applies, and the replaced one's count does not move.
#[tokio::test]
async fn example7_replaces() {
    let redis = Redis::start();
    let svc = service(&redis, &[("example7.yaml", EXAMPLE7)]);
    let c = svc.client().await;
    let one = desc(&[("key_1", "value_1"), ("user", "bkthomps")]);
    let two = desc(&[("key_2", "value_2"), ("user", "bkthomps")]);
    // A run (a FLUSHALL, 13 calls, a GET) takes well under a second.
    in_one_window(1, || {
        let mut c = c.clone();
        let (one, two, redis) = (one.clone(), two.clone(), &redis);
        async move {
            redis.flushall()?;
            let mut allowed = 0;
            for _ in 0..12 {
                let r = call(&mut c, request("example7", vec![one.clone(), two.clone()])).await;
                check_eq!(r.statuses[0].current_limit, None);
                check_eq!(limit_of(&r, 1), Some(10));
                if r.overall_code == OK {
                    allowed += 1;
                }
            }
            check_eq!(allowed, 10);
            check_eq!(
                redis.get(&key(
                    "example7",
                    &[("key_1", "value_1"), ("user", "bkthomps")],
                    1
                )),
                None
            );
            // Alone, the first descriptor keeps its own 5 a second.
            let r = call(&mut c, request("example7", vec![one.clone()])).await;
            check_eq!(
                r.statuses[0]
                    .current_limit
                    .as_ref()
                    .map(|l| (l.requests_per_unit, l.name.clone())),
                Some((5, "specific_limit".to_string()))
            );
            check_eq!(r.statuses[0].limit_remaining, 4);
            Ok(())
        }
    })
    .await;
}

/// Example 8: `detailed_metric` names the counters after the value sent.
#[tokio::test]
async fn example8_detailed_metric() {
    let redis = Redis::start();
    let svc = service(&redis, &[("example8.yaml", EXAMPLE8)]);
    let mut c = svc.client().await;
    for v in ["unspecified_value", "unspecified_value2", "value1"] {
        call(&mut c, request("example8", vec![desc(&[("key1", v)])])).await;
    }
    for key1 in [
        "key1_unspecified_value",
        "key1_unspecified_value2",
        "key1_value1",
    ] {
        let sample = format!(
            r#"ratelimit_service_rate_limit_total_hits{{domain="example8",key1="{key1}",key2=""}}"#
        );
        assert_eq!(svc.metric(&sample), 1, "{sample}");
    }
    assert_eq!(
        svc.metric(
            r#"ratelimit_service_rate_limit_total_hits{domain="example8",key1="key1",key2=""}"#
        ),
        0
    );
}

const EXAMPLE11: &str = "
domain: example11
descriptors:
  # With share_threshold: true, all files/* matches share the same threshold
  - key: files
    value: files/*
    share_threshold: true
    rate_limit:
      unit: hour
      requests_per_unit: 10

  # Without share_threshold, each files_no_share/* match has its own isolated threshold
  - key: files_no_share
    value: files_no_share/*
    share_threshold: false
    rate_limit:
      unit: hour
      requests_per_unit: 10
";

/// Examples 9 and 11: wildcard values; with `share_threshold` every match counts in one
/// counter (its key holds the pattern), without it each value has its own.
#[tokio::test]
async fn example11_wildcards_and_shared_thresholds() {
    let redis = Redis::start();
    let svc = service(&redis, &[("example11.yaml", EXAMPLE11)]);
    let c = svc.client().await;
    in_one_window(3600, || {
        let mut c = c.clone();
        let redis = &redis;
        async move {
            redis.flushall()?;
            let one = |k: &str, v: &str| request("example11", vec![desc(&[(k, v)])]);
            for f in ["files/a.pdf", "files/b.csv"].iter().cycle().take(10) {
                check_eq!(call(&mut c, one("files", f)).await.overall_code, OK);
            }
            check_eq!(
                call(&mut c, one("files", "files/c.txt")).await.overall_code,
                OVER_LIMIT
            );
            check_eq!(
                redis.get(&key("example11", &[("files", "files/*")], 3600)),
                Some(10)
            );
            for _ in 0..10 {
                check_eq!(
                    call(&mut c, one("files_no_share", "files_no_share/a.pdf"))
                        .await
                        .overall_code,
                    OK
                );
            }
            check_eq!(
                call(&mut c, one("files_no_share", "files_no_share/a.pdf"))
                    .await
                    .overall_code,
                OVER_LIMIT
            );
            check_eq!(
                call(&mut c, one("files_no_share", "files_no_share/b.csv"))
                    .await
                    .overall_code,
                OK
            );
            // Not a match: no limit.
            check_eq!(
                call(&mut c, one("files", "other/a.pdf")).await.statuses[0].current_limit,
                None
            );
            Ok(())
        }
    })
    .await;
}
