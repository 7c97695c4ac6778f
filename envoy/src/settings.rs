//! Settings from the environment: the reference service's variables where they apply,
//! with its defaults unless the docs (docs/envoy.md) say otherwise, and a few of this
//! service's own.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

/// What a decision answers when Redis fails or does not answer within `REDIS_TIMEOUT`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailureMode {
    /// A gRPC error (UNAVAILABLE), as the reference answers: Envoy's
    /// `failure_mode_deny` decides.
    Error,
    /// OK: the request passes (fail open).
    Allow,
    /// OVER_LIMIT: the request is refused (fail closed).
    Deny,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RedisType {
    Single,
    Cluster,
}

/// How to reach one Redis deployment.
#[derive(Clone, Debug)]
pub struct RedisSettings {
    pub kind: RedisType,
    /// `redis://` URLs, one per node (one for a single server).
    pub urls: Vec<String>,
    pub pool_size: usize,
}

#[derive(Clone, Debug)]
pub struct Settings {
    pub grpc_addr: String,
    pub http_addr: String,
    pub use_prometheus: bool,
    pub prometheus_addr: String,
    pub prometheus_path: String,
    pub log_level: String,
    pub log_json: bool,
    pub runtime_root: PathBuf,
    pub runtime_subdirectory: String,
    pub runtime_appdirectory: String,
    pub runtime_ignore_dotfiles: bool,
    pub merge_domain_config: bool,
    pub redis: RedisSettings,
    /// `REDIS_PERSECOND`: the limits in seconds go to this deployment.
    pub redis_per_second: Option<RedisSettings>,
    pub redis_timeout: Duration,
    pub failure_mode: FailureMode,
    pub near_limit_ratio: f32,
    pub cache_key_prefix: String,
    pub global_shadow_mode: bool,
    pub response_headers: Option<[String; 3]>,
    pub healthy_with_at_least_one_config_loaded: bool,
}

/// The reference's variables that this service reads but does not act on, with why:
/// a set one is named in the log at start.
pub const NOT_APPLICABLE: &[(&str, &str)] = &[
    (
        "STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT",
        "a refused request is never counted: every request is judged all or nothing",
    ),
    (
        "LOCAL_CACHE_SIZE_IN_BYTES",
        "no local cache of over-limit keys: every decision is Redis's",
    ),
    (
        "EXPIRATION_JITTER_MAX_SECONDS",
        "each key expires at the end of its window, set by the module",
    ),
    (
        "REDIS_PIPELINE_WINDOW",
        "one request's commands go in one round trip; the client multiplexes requests",
    ),
    (
        "REDIS_PIPELINE_LIMIT",
        "one request's commands go in one round trip; the client multiplexes requests",
    ),
    ("REDIS_TLS", "TLS to Redis is not supported"),
    ("REDIS_PERSECOND_TLS", "TLS to Redis is not supported"),
    (
        "USE_STATSD",
        "counters are exported in Prometheus format only",
    ),
    (
        "USE_DOG_STATSD",
        "counters are exported in Prometheus format only",
    ),
    ("TRACING_ENABLED", "no tracing export"),
    (
        "GRPC_SERVER_USE_TLS",
        "the gRPC port is plaintext: put TLS in front of it",
    ),
    (
        "RESPONSE_DYNAMIC_METADATA",
        "no dynamic metadata in responses",
    ),
    ("QUOTA_MODE", "quota mode is not supported"),
];

fn var(env: &HashMap<String, String>, name: &str, default: &str) -> String {
    env.get(name)
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| default.to_string())
}

fn flag(env: &HashMap<String, String>, name: &str) -> Result<bool, String> {
    match var(env, name, "false").to_ascii_lowercase().as_str() {
        "true" | "1" | "t" | "yes" => Ok(true),
        "false" | "0" | "f" | "no" => Ok(false),
        other => Err(format!("{name}={other}: expected true or false")),
    }
}

fn number<T: std::str::FromStr>(
    env: &HashMap<String, String>,
    name: &str,
    default: &str,
) -> Result<T, String> {
    let v = var(env, name, default);
    v.parse()
        .map_err(|_| format!("{name}={v}: expected a number"))
}

/// A Go duration as the reference reads it (`10s`, `500ms`, `1m30s`, `250us`).
pub fn duration(name: &str, text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text).map_err(|e| format!("{name}={text}: {e}"))
}

/// `host:port` of a bind address; an address given as `:port` binds every interface.
fn bind(host: &str, port: &str) -> String {
    format!("{host}:{port}")
}

/// A `REDIS_URL` entry as a `redis://` URL: `host:port`, a socket path (socket type
/// `unix`), or a URL already; `REDIS_AUTH` (`password` or `user:password`) added.
fn redis_url(entry: &str, socket_type: &str, auth: &str) -> String {
    if entry.contains("://") {
        return entry.to_string();
    }
    let credentials = match auth.split_once(':') {
        _ if auth.is_empty() => String::new(),
        Some((user, pass)) => format!("{user}:{pass}@"),
        None => format!(":{auth}@"),
    };
    if socket_type.eq_ignore_ascii_case("unix") {
        let pass = auth.split_once(':').map_or(auth, |(_, p)| p);
        if pass.is_empty() {
            format!("unix://{entry}")
        } else {
            format!("unix://{entry}?pass={pass}")
        }
    } else {
        format!("redis://{credentials}{entry}")
    }
}

fn redis_settings(
    env: &HashMap<String, String>,
    prefix: &str,
    default_url: &str,
) -> Result<RedisSettings, String> {
    let kind_name = var(env, &format!("{prefix}_TYPE"), "SINGLE");
    let kind = match kind_name.to_ascii_uppercase().as_str() {
        "SINGLE" => RedisType::Single,
        "CLUSTER" => RedisType::Cluster,
        "SENTINEL" => {
            return Err(format!(
                "{prefix}_TYPE=sentinel is not supported: use a single server or a Cluster"
            ))
        }
        other => return Err(format!("{prefix}_TYPE={other}: expected single or cluster")),
    };
    let socket_type = var(env, &format!("{prefix}_SOCKET_TYPE"), "tcp");
    let auth = var(env, &format!("{prefix}_AUTH"), "");
    let urls: Vec<String> = var(env, &format!("{prefix}_URL"), default_url)
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| redis_url(s, &socket_type, &auth))
        .collect();
    if urls.is_empty() {
        return Err(format!("{prefix}_URL is empty"));
    }
    if kind == RedisType::Single && urls.len() > 1 {
        return Err(format!(
            "{prefix}_URL names {} servers: set {prefix}_TYPE=cluster for a Cluster",
            urls.len()
        ));
    }
    let pool_size: usize = number(env, &format!("{prefix}_POOL_SIZE"), "10")?;
    Ok(RedisSettings {
        kind,
        urls,
        pool_size: pool_size.max(1),
    })
}

impl Settings {
    pub fn from_map(env: &HashMap<String, String>) -> Result<Settings, String> {
        match var(env, "CONFIG_TYPE", "FILE")
            .to_ascii_uppercase()
            .as_str()
        {
            "FILE" => {}
            other => {
                return Err(format!(
                    "CONFIG_TYPE={other} is not supported: configuration comes from files"
                ))
            }
        }
        match var(env, "BACKEND_TYPE", "redis").to_ascii_lowercase().as_str() {
            "redis" => {}
            other => return Err(format!("BACKEND_TYPE={other} is not supported: the backend is Redis with the ratelimit module")),
        }
        let prometheus_addr = var(env, "PROMETHEUS_ADDR", ":9090");
        let prometheus_addr = match prometheus_addr.strip_prefix(':') {
            Some(port) => format!("0.0.0.0:{port}"),
            None => prometheus_addr,
        };
        let failure_mode = match var(env, "REDIS_FAILURE_MODE", "error")
            .to_ascii_lowercase()
            .as_str()
        {
            "error" => FailureMode::Error,
            "allow" | "open" => FailureMode::Allow,
            "deny" | "closed" => FailureMode::Deny,
            other => {
                return Err(format!(
                    "REDIS_FAILURE_MODE={other}: expected error, allow or deny"
                ))
            }
        };
        let near_limit_ratio: f32 = number(env, "NEAR_LIMIT_RATIO", "0.8")?;
        if !(0.0..=1.0).contains(&near_limit_ratio) {
            return Err(format!(
                "NEAR_LIMIT_RATIO={near_limit_ratio}: expected a ratio between 0 and 1"
            ));
        }
        let redis_timeout = duration("REDIS_TIMEOUT", &var(env, "REDIS_TIMEOUT", "10s"))?;
        if redis_timeout.is_zero() {
            return Err("REDIS_TIMEOUT must be positive".into());
        }
        Ok(Settings {
            grpc_addr: bind(
                &var(env, "GRPC_HOST", "0.0.0.0"),
                &var(env, "GRPC_PORT", "8081"),
            ),
            http_addr: bind(&var(env, "HOST", "0.0.0.0"), &var(env, "PORT", "8080")),
            use_prometheus: flag(env, "USE_PROMETHEUS")?,
            prometheus_addr,
            prometheus_path: var(env, "PROMETHEUS_PATH", "/metrics"),
            log_level: var(env, "LOG_LEVEL", "WARN"),
            log_json: var(env, "LOG_FORMAT", "text").eq_ignore_ascii_case("json"),
            runtime_root: PathBuf::from(var(env, "RUNTIME_ROOT", "/srv/runtime_data/current")),
            runtime_subdirectory: var(env, "RUNTIME_SUBDIRECTORY", ""),
            runtime_appdirectory: var(env, "RUNTIME_APPDIRECTORY", "config"),
            runtime_ignore_dotfiles: flag(env, "RUNTIME_IGNOREDOTFILES")?,
            merge_domain_config: flag(env, "MERGE_DOMAIN_CONFIG")?,
            redis: redis_settings(env, "REDIS", "127.0.0.1:6379")?,
            redis_per_second: if flag(env, "REDIS_PERSECOND")? {
                Some(redis_settings(env, "REDIS_PERSECOND", "127.0.0.1:6380")?)
            } else {
                None
            },
            redis_timeout,
            failure_mode,
            near_limit_ratio,
            cache_key_prefix: env.get("CACHE_KEY_PREFIX").cloned().unwrap_or_default(),
            global_shadow_mode: flag(env, "SHADOW_MODE")?,
            response_headers: if flag(env, "LIMIT_RESPONSE_HEADERS_ENABLED")? {
                Some([
                    var(env, "LIMIT_LIMIT_HEADER", "RateLimit-Limit"),
                    var(env, "LIMIT_REMAINING_HEADER", "RateLimit-Remaining"),
                    var(env, "LIMIT_RESET_HEADER", "RateLimit-Reset"),
                ])
            } else {
                None
            },
            healthy_with_at_least_one_config_loaded: flag(
                env,
                "HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED",
            )?,
        })
    }

    /// The directory the configuration files are read from:
    /// `RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY`.
    pub fn config_dir(&self) -> PathBuf {
        self.runtime_root
            .join(&self.runtime_subdirectory)
            .join(&self.runtime_appdirectory)
    }

    /// The variables of [`NOT_APPLICABLE`] that are set (to anything but false or
    /// empty), with why they do nothing here.
    pub fn ignored(env: &HashMap<String, String>) -> Vec<String> {
        NOT_APPLICABLE
            .iter()
            .filter(|(name, _)| {
                env.get(*name)
                    .is_some_and(|v| !v.is_empty() && !v.eq_ignore_ascii_case("false") && v != "0")
            })
            .map(|(name, why)| format!("{name} is set but does nothing here: {why}"))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn defaults_are_the_references_where_they_apply() {
        let s = Settings::from_map(&env(&[])).unwrap();
        assert_eq!(s.grpc_addr, "0.0.0.0:8081");
        assert_eq!(s.http_addr, "0.0.0.0:8080");
        assert_eq!(
            s.config_dir(),
            PathBuf::from("/srv/runtime_data/current/config")
        );
        assert_eq!(s.redis.urls, vec!["redis://127.0.0.1:6379".to_string()]);
        assert_eq!(s.redis_timeout, Duration::from_secs(10));
        assert_eq!(s.failure_mode, FailureMode::Error);
        assert!((s.near_limit_ratio - 0.8).abs() < 1e-6);
    }

    #[test]
    fn redis_urls_from_the_references_forms() {
        let s = Settings::from_map(&env(&[
            ("REDIS_TYPE", "cluster"),
            ("REDIS_URL", "127.0.0.1:7000, 127.0.0.1:7001"),
            ("REDIS_AUTH", "user:secret"),
        ]))
        .unwrap();
        assert_eq!(s.redis.kind, RedisType::Cluster);
        assert_eq!(s.redis.urls[1], "redis://user:secret@127.0.0.1:7001");
        let s = Settings::from_map(&env(&[
            ("REDIS_SOCKET_TYPE", "unix"),
            ("REDIS_URL", "/run/r.sock"),
        ]))
        .unwrap();
        assert_eq!(s.redis.urls, vec!["unix:///run/r.sock".to_string()]);
        assert!(Settings::from_map(&env(&[("REDIS_TYPE", "sentinel")])).is_err());
        assert!(Settings::from_map(&env(&[("REDIS_URL", "a:1,b:2")])).is_err());
    }

    #[test]
    fn failure_mode_timeout_and_ignored_variables() {
        let e = env(&[
            ("REDIS_FAILURE_MODE", "deny"),
            ("REDIS_TIMEOUT", "250ms"),
            ("LOCAL_CACHE_SIZE_IN_BYTES", "1000"),
            ("STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", "false"),
        ]);
        let s = Settings::from_map(&e).unwrap();
        assert_eq!(s.failure_mode, FailureMode::Deny);
        assert_eq!(s.redis_timeout, Duration::from_millis(250));
        let ignored = Settings::ignored(&e);
        assert_eq!(ignored.len(), 1);
        assert!(ignored[0].starts_with("LOCAL_CACHE_SIZE_IN_BYTES"));
        assert!(Settings::from_map(&env(&[("NEAR_LIMIT_RATIO", "2")])).is_err());
        assert!(Settings::from_map(&env(&[("CONFIG_TYPE", "GRPC_XDS_SOTW")])).is_err());
    }
}
