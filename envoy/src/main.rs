//! ratelimit-envoy: an Envoy rate limit service (`envoy.service.ratelimit.v3`) on
//! Redis or Valkey with the ratelimit module, configured as envoyproxy/ratelimit is
//! (its YAML files, its environment variables), judging every descriptor of a request
//! all or nothing in one RL.ALL.

mod backend;
mod config;
mod http;
mod limiter;
mod service;
mod settings;
mod stats;
mod watch;

use axum::serve::ListenerExt;
use backend::Backend;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::RateLimitServiceServer;
use service::{Health, Service, State};
use settings::Settings;
use std::sync::{Arc, RwLock};
use std::time::Duration;
use tokio::net::TcpListener;
use tonic::transport::server::TcpIncoming;
use tracing::{error, warn};

fn init_logging(level: &str, json: bool) {
    let level = match level.to_ascii_lowercase().as_str() {
        "trace" => "trace",
        "debug" => "debug",
        "info" => "info",
        "error" | "fatal" | "panic" => "error",
        _ => "warn",
    };
    let filter = tracing_subscriber::EnvFilter::new(format!("warn,ratelimit_envoy={level}"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    if json {
        builder.json().init();
    } else {
        builder.init();
    }
}

async fn bind(what: &str, addr: &str) -> Result<TcpListener, String> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|e| format!("cannot listen for {what} on {addr}: {e}"))?;
    let local = listener.local_addr().map_err(|e| e.to_string())?;
    warn!("Listening for {what} on {local}");
    Ok(listener)
}

/// Resolves on SIGTERM or Ctrl-C, after marking the service unhealthy.
async fn shutdown(state: Arc<State>) {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(s) => s,
        Err(e) => {
            error!("cannot wait for SIGTERM: {e}");
            return std::future::pending().await;
        }
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    warn!("stopping: unhealthy from now on, finishing the calls under way");
    state.health.set("sigterm", false).await;
}

/// Connect to every Redis deployment, retrying until each answers; the Redis
/// component of the health is healthy once they all have.
async fn connect(state: Arc<State>) {
    let mut wait = Duration::from_millis(100);
    loop {
        let mut all = true;
        for b in &state.backends {
            if let Err(e) = b.warm().await {
                warn!("redis: cannot connect yet: {e}");
                all = false;
            }
        }
        if all {
            state.health.set("redis", true).await;
            return;
        }
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(Duration::from_secs(5));
    }
}

async fn run() -> Result<(), String> {
    let env: std::collections::HashMap<String, String> = std::env::vars().collect();
    let settings = Settings::from_map(&env)?;
    init_logging(&settings.log_level, settings.log_json);
    for why in Settings::ignored(&env) {
        warn!("{why}");
    }
    let (reporter, health_service) = tonic_health::server::health_reporter();
    let mut backends = vec![Backend::new(settings.redis.clone(), settings.redis_timeout)];
    if let Some(per_second) = &settings.redis_per_second {
        backends.push(Backend::new(per_second.clone(), settings.redis_timeout));
    }
    let state = Arc::new(State {
        stats: stats::Stats::new(settings.near_limit_ratio),
        health: Health::new(reporter, settings.healthy_with_at_least_one_config_loaded),
        config: RwLock::new(None),
        backends,
        settings,
    });
    state.health.set("sigterm", true).await;
    let _watcher = watch::start(state.clone()).await;
    tokio::spawn(connect(state.clone()));

    let s = &state.settings;
    let grpc = bind("gRPC", &s.grpc_addr).await?;
    let http = bind("HTTP", &s.http_addr).await?;
    let prometheus = if s.use_prometheus {
        Some(bind("Prometheus", &s.prometheus_addr).await?)
    } else {
        None
    };

    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    {
        let state = state.clone();
        tokio::spawn(async move {
            shutdown(state).await;
            let _ = stop_tx.send(true);
        });
    }
    let stopped = move || {
        let mut rx = stop_rx.clone();
        async move {
            let _ = rx.wait_for(|v| *v).await;
        }
    };

    let mut tasks = tokio::task::JoinSet::new();
    let mut serve_http = |what: &'static str, listener: TcpListener, router: axum::Router| {
        let stop = stopped();
        tasks.spawn(async move {
            let listener = listener.tap_io(|tcp| {
                let _ = tcp.set_nodelay(true);
            });
            axum::serve(listener, router)
                .with_graceful_shutdown(stop)
                .await
                .map_err(|e| format!("{what}: {e}"))
        });
    };
    serve_http(
        "HTTP",
        http,
        http::router(state.clone(), &s.prometheus_path),
    );
    if let Some(listener) = prometheus {
        serve_http(
            "Prometheus",
            listener,
            http::metrics_router(state.clone(), &s.prometheus_path),
        );
    }
    let service = RateLimitServiceServer::new(Service(state.clone()));
    let stop = stopped();
    tasks.spawn(async move {
        tonic::transport::Server::builder()
            .add_service(health_service)
            .add_service(service)
            .serve_with_incoming_shutdown(TcpIncoming::from(grpc).with_nodelay(Some(true)), stop)
            .await
            .map_err(|e| format!("gRPC: {e}"))
    });
    while let Some(done) = tasks.join_next().await {
        match done {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(e),
            Err(e) => return Err(e.to_string()),
        }
    }
    Ok(())
}

#[tokio::main]
async fn main() {
    if let Err(e) = run().await {
        eprintln!("ratelimit-envoy: {e}");
        std::process::exit(1);
    }
}
