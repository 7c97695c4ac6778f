//! docs/envoy.md, run: its example configuration is the one `make envoy-run` serves,
//! and its `/json` request gets the answer the page shows.

use crate::harness::*;
use serde_json::Value;
use std::path::Path;

fn repo() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

fn page() -> String {
    std::fs::read_to_string(repo().join("docs/envoy.md")).expect("docs/envoy.md")
}

/// The fenced blocks of a language, in order.
fn blocks(text: &str, lang: &str) -> Vec<String> {
    let fence = format!("```{lang}\n");
    text.split(&fence)
        .skip(1)
        .map(|rest| rest.split("```").next().unwrap_or_default().to_string())
        .collect()
}

/// Every `durationUntilReset` (a time to the end of the window) set to one value.
fn without_reset(mut v: Value) -> Value {
    if let Some(statuses) = v.get_mut("statuses").and_then(Value::as_array_mut) {
        for s in statuses {
            if let Some(d) = s.get_mut("durationUntilReset") {
                assert!(d.as_str().is_some_and(|d| d.ends_with('s')), "{d}");
                *d = Value::from("…");
            }
        }
    }
    v
}

#[tokio::test]
async fn the_page_runs() {
    let text = page();
    let example =
        std::fs::read_to_string(repo().join("envoy/examples/ratelimit/config/example.yaml"))
            .expect("example");
    assert!(
        blocks(&text, "yaml").contains(&example),
        "docs/envoy.md shows envoy/examples/ratelimit/config/example.yaml as it is"
    );

    let shell = blocks(&text, "sh")
        .into_iter()
        .find(|b| b.contains("/json"))
        .expect("the curl block");
    let body = shell
        .split("-d '")
        .nth(1)
        .and_then(|b| b.split('\'').next())
        .expect("the request body");
    let shown: Value = serde_json::from_str(&blocks(&text, "json")[0]).expect("the answer shown");

    let redis = Redis::start();
    let examples = repo().join("envoy/examples");
    let svc = Service::builder(&format!("127.0.0.1:{}", redis.port))
        .env("RUNTIME_ROOT", examples.to_str().expect("utf-8"))
        .start();
    assert_eq!(svc.metric("ratelimit_service_config_load_success"), 1);
    in_one_window(60, || {
        let (svc, redis, body, shown) = (&svc, &redis, body, &shown);
        async move {
            redis.flushall()?;
            let (status, answer) = svc.http_post("/json", body);
            crate::check_eq!(status, 200);
            let answer: Value = serde_json::from_str(&answer).map_err(|e| e.to_string())?;
            crate::check_eq!(without_reset(answer), without_reset(shown.clone()));
            for _ in 0..4 {
                svc.http_post("/json", body);
            }
            let (status, answer) = svc.http_post("/json", body);
            crate::check_eq!(status, 429);
            let answer: Value = serde_json::from_str(&answer).map_err(|e| e.to_string())?;
            crate::check_eq!(answer["overallCode"], "OVER_LIMIT");
            crate::check_eq!(answer["statuses"][1]["code"], "OVER_LIMIT");
            crate::check_eq!(answer["statuses"][0]["limitRemaining"], 95);
            Ok(())
        }
    })
    .await;
}
