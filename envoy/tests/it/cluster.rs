//! A three-node Cluster: a request's descriptors in different slots are settled slot
//! by slot in slot order, and a refusal in a later slot gives back what the earlier
//! ones took; concurrent requests never get more than a limit between them.

use crate::harness::*;

const CONF: &str = "
domain: c
descriptors:
  - key: tight
    rate_limit:
      unit: year
      requests_per_unit: 1
  - key: roomy
    rate_limit:
      unit: year
      requests_per_unit: 1000
  - key: shared
    rate_limit:
      unit: year
      requests_per_unit: 20
";

fn service(cluster: &Cluster) -> Service {
    Service::builder(&cluster.urls())
        .env("REDIS_TYPE", "cluster")
        .file("c.yaml", CONF)
        .start()
}

#[tokio::test]
async fn a_later_slot_refuses_and_the_earlier_one_is_refunded() {
    let cluster = Cluster::start();
    let svc = service(&cluster);
    let tight = key("c", &[("tight", "t")], YEAR);
    let tight_slot = cluster.keyslot(&tight);
    // A roomy descriptor whose key's slot comes first: it is taken, then given back.
    let (value, roomy) = (0..1000)
        .map(|n| {
            let v = format!("r{n}");
            let k = key("c", &[("roomy", &v)], YEAR);
            (v, k)
        })
        .find(|(_, k)| cluster.keyslot(k) < tight_slot)
        .expect("a key in an earlier slot");
    let mut c = svc.client().await;
    let r = request(
        "c",
        vec![desc(&[("tight", "t")]), desc(&[("roomy", &value)])],
    );
    assert_eq!(codes(&call(&mut c, r.clone()).await), (OK, vec![OK, OK]));
    assert_eq!(cluster.calls("rl.all"), 2);
    for _ in 0..3 {
        let resp = call(&mut c, r.clone()).await;
        assert_eq!(codes(&resp), (OVER_LIMIT, vec![OVER_LIMIT, OK]));
        assert_eq!(resp.statuses[1].limit_remaining, 999);
    }
    assert_eq!(cluster.get(&tight), Some(1));
    assert_eq!(cluster.get(&roomy), Some(1));
    // Each refused request: the roomy slot taken, the tight one refused, the roomy one refunded.
    assert_eq!(cluster.calls("rl.all"), 2 + 3 * 3);
}

#[tokio::test]
async fn concurrent_requests_across_slots_never_get_more_than_a_limit() {
    let cluster = Cluster::start();
    let svc = service(&cluster);
    let c = svc.client().await;
    // Requests that share only the shared key, in several slots: each client's own
    // roomy descriptor, and every other call one of three more.
    let allowed = allowed_among(&c, 6, 10, |n, i| {
        let mut d = vec![
            desc(&[("shared", "s")]),
            desc(&[("roomy", &format!("c{n}"))]),
        ];
        if i % 2 == 0 {
            d.push(desc(&[("roomy", &format!("x{}", i % 3))]));
        }
        request("c", d)
    })
    .await;
    assert_eq!(allowed, 20);
    assert_eq!(cluster.get(&key("c", &[("shared", "s")], YEAR)), Some(20));
    let roomy: u64 = (0..6)
        .map(|n| {
            cluster
                .get(&key("c", &[("roomy", &format!("c{n}"))], YEAR))
                .unwrap_or(0)
        })
        .sum();
    assert_eq!(
        roomy, 20,
        "each allowed request counted once in its client's key, refused ones nowhere"
    );
}
