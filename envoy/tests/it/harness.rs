//! What the tests run: redis-server (or `$REDIS_SERVER`, e.g. valkey-server) with the
//! module on free 127.0.0.1 ports, checked to be the process the test spawned; a
//! three-node Cluster of them; and the service itself (the built binary) on ports it
//! picks, with a configuration directory of the test's own, talked to over gRPC and
//! HTTP. Every wait is bounded; everything is stopped and removed on drop.

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tonic::transport::Channel;

/// How long a server or the service may take to start.
const START_WITHIN: Duration = Duration::from_secs(30);

pub fn temp_dir(what: &str) -> PathBuf {
    static N: AtomicU64 = AtomicU64::new(0);
    let dir = std::env::temp_dir().join(format!(
        "ratelimit-envoy-{what}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    dir
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// The window of the unit `year`, in seconds.
pub const YEAR: u64 = 365 * 86_400;

pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("a clock after 1970")
        .as_secs()
}

/// The module: `$RATELIMIT_MODULE`, or this workspace's debug build (built once).
fn module_path() -> PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        if let Ok(p) = std::env::var("RATELIMIT_MODULE") {
            let p = PathBuf::from(p);
            assert!(
                p.is_file(),
                "RATELIMIT_MODULE={} does not exist",
                p.display()
            );
            return p;
        }
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let ok = Command::new(&cargo)
            .args(["build", "--quiet", "--lib", "-p", "redis-ratelimit"])
            .current_dir(&root)
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        assert!(ok, "cargo build --lib -p redis-ratelimit failed");
        let target = std::env::var("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|_| root.join("target"));
        let p = target.join("debug").join("libredis_ratelimit.so");
        assert!(p.is_file(), "{} not found after the build", p.display());
        p
    })
    .clone()
}

pub fn server_binary() -> String {
    std::env::var("REDIS_SERVER").unwrap_or_else(|_| "redis-server".into())
}

pub struct Redis {
    pub port: u16,
    dir: PathBuf,
    child: Option<Child>,
    cluster: bool,
}

impl Redis {
    pub fn start() -> Redis {
        Redis::start_on(free_port(), false, None)
    }

    /// A server on `port` (a restart reuses it), retried on new ports when it cannot
    /// bind unless the port is given.
    fn start_on(port: u16, cluster: bool, dir: Option<PathBuf>) -> Redis {
        let mut last = String::new();
        for attempt in 0..5 {
            let port = if attempt == 0 || dir.is_some() {
                port
            } else {
                free_port()
            };
            let mut r = Redis {
                port,
                dir: dir.clone().unwrap_or_else(|| temp_dir("redis")),
                child: None,
                cluster,
            };
            match r.spawn() {
                Ok(()) => return r,
                Err(e) => last = e,
            }
        }
        panic!("redis-server did not start: {last}");
    }

    fn spawn(&mut self) -> Result<(), String> {
        let mut conf = format!(
            "port {}\nbind 127.0.0.1\ndir {}\nlogfile {}\nsave \"\"\nappendonly no\nprotected-mode no\nloadmodule {}\n",
            self.port,
            self.dir.display(),
            self.dir.join("server.log").display(),
            module_path().display()
        );
        if self.cluster {
            conf.push_str(&format!(
                "cluster-enabled yes\ncluster-config-file nodes.conf\ncluster-node-timeout 5000\ncluster-port {}\n",
                free_port()
            ));
        }
        let path = self.dir.join("redis.conf");
        std::fs::write(&path, conf).map_err(|e| e.to_string())?;
        let child = Command::new(server_binary())
            .arg(&path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", server_binary()))?;
        let pid = child.id();
        self.child = Some(child);
        let deadline = Instant::now() + START_WITHIN;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.as_mut().map_or(Ok(None), Child::try_wait) {
                self.child = None;
                return Err(format!("exited ({status}):\n{}", self.log()));
            }
            if let Ok(mut c) = self.try_conn() {
                let info: Result<String, _> = redis::cmd("INFO").arg("server").query(&mut c);
                if let Ok(info) = info {
                    let theirs = info
                        .lines()
                        .find_map(|l| l.strip_prefix("process_id:"))
                        .map(|p| p.trim().parse::<u32>().unwrap_or(0));
                    if theirs == Some(pid) {
                        return Ok(());
                    }
                    self.kill();
                    return Err(format!(
                        "port {} answers as pid {theirs:?}, not {pid}",
                        self.port
                    ));
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.kill();
        Err(format!(
            "no answer within {START_WITHIN:?}:\n{}",
            self.log()
        ))
    }

    fn try_conn(&self) -> redis::RedisResult<redis::Connection> {
        let client = redis::Client::open(format!("redis://127.0.0.1:{}", self.port))?;
        client.get_connection_with_timeout(Duration::from_secs(5))
    }

    pub fn conn(&self) -> redis::Connection {
        self.try_conn()
            .unwrap_or_else(|e| panic!("connect to {}: {e}\n{}", self.port, self.log()))
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }

    pub fn pid(&self) -> u32 {
        self.child
            .as_ref()
            .map(Child::id)
            .expect("a running server")
    }

    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Start it again on the same port and directory.
    pub fn restart(&mut self) {
        self.kill();
        self.spawn().unwrap_or_else(|e| panic!("restart: {e}"));
    }

    /// Stop or resume the process (SIGSTOP / SIGCONT): a server that does not answer.
    pub fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .args([sig, &self.pid().to_string()])
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        assert!(ok, "kill {sig} {}", self.pid());
    }

    /// How many times each command ran (INFO commandstats), by lower-case name.
    pub fn calls(&self, command: &str) -> u64 {
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query(&mut self.conn())
            .expect("INFO");
        let prefix = format!("cmdstat_{}:calls=", command.to_ascii_lowercase());
        // Module commands are listed by their registered name (cmdstat_RL.ALL).
        info.lines()
            .map(str::to_ascii_lowercase)
            .find_map(|l| l.strip_prefix(&prefix).map(str::to_string))
            .and_then(|rest| rest.split(',').next().map(str::to_string))
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    }

    pub fn get(&self, key: &str) -> Option<u64> {
        redis::cmd("GET")
            .arg(key)
            .query(&mut self.conn())
            .expect("GET")
    }

    /// Empty it (FLUSHALL), for a run of [`in_one_window`].
    pub fn flushall(&self) -> Result<(), String> {
        redis::cmd("FLUSHALL")
            .query(&mut self.conn())
            .map_err(|e| e.to_string())
    }

    pub fn dbsize(&self) -> u64 {
        redis::cmd("DBSIZE")
            .query(&mut self.conn())
            .expect("DBSIZE")
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        if self.child.is_some() {
            let _ = Command::new("kill")
                .args(["-CONT", &self.pid().to_string()])
                .status();
        }
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Three primaries with every slot assigned, `cluster_state:ok` on each.
pub struct Cluster {
    pub nodes: Vec<Redis>,
}

impl Cluster {
    pub fn start() -> Cluster {
        let nodes: Vec<Redis> = (0..3)
            .map(|_| Redis::start_on(free_port(), true, None))
            .collect();
        let cli = std::env::var("REDIS_CLI").unwrap_or_else(|_| "redis-cli".into());
        let out = Command::new(&cli)
            .args(["--cluster", "create"])
            .args(nodes.iter().map(|n| format!("127.0.0.1:{}", n.port)))
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .output()
            .unwrap_or_else(|e| panic!("cannot run {cli}: {e}"));
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
        let deadline = Instant::now() + START_WITHIN;
        for n in &nodes {
            loop {
                let info: String = redis::cmd("CLUSTER")
                    .arg("INFO")
                    .query(&mut n.conn())
                    .expect("CLUSTER INFO");
                if info.contains("cluster_state:ok") {
                    break;
                }
                assert!(Instant::now() < deadline, "the cluster is not ok: {info}");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        Cluster { nodes }
    }

    pub fn urls(&self) -> String {
        self.nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect::<Vec<_>>()
            .join(",")
    }

    pub fn keyslot(&self, key: &str) -> u16 {
        redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(key)
            .query(&mut self.nodes[0].conn())
            .expect("KEYSLOT")
    }

    /// The node that holds `key`, and its value there.
    pub fn get(&self, key: &str) -> Option<u64> {
        for n in &self.nodes {
            // The nodes that do not serve the key answer MOVED.
            let v: redis::RedisResult<Option<u64>> =
                redis::cmd("GET").arg(key).query(&mut n.conn());
            if let Ok(v) = v {
                return v;
            }
        }
        panic!("no node serves {key}")
    }

    pub fn calls(&self, command: &str) -> u64 {
        self.nodes.iter().map(|n| n.calls(command)).sum()
    }
}

/// The service, run from its binary with a configuration directory of its own.
pub struct Service {
    child: Option<Child>,
    pub dir: PathBuf,
    pub grpc: String,
    pub http: String,
    log: PathBuf,
}

pub struct ServiceBuilder {
    env: Vec<(String, String)>,
    files: Vec<(String, String)>,
    wait_healthy: bool,
}

impl ServiceBuilder {
    pub fn env(mut self, k: &str, v: &str) -> Self {
        self.env.push((k.into(), v.into()));
        self
    }

    pub fn file(mut self, name: &str, yaml: &str) -> Self {
        self.files.push((name.into(), yaml.into()));
        self
    }

    /// Do not wait for `/healthcheck` to say OK (Redis down at start).
    pub fn unhealthy(mut self) -> Self {
        self.wait_healthy = false;
        self
    }

    pub fn start(self) -> Service {
        let dir = temp_dir("service");
        let conf = dir.join("runtime").join("ratelimit").join("config");
        std::fs::create_dir_all(&conf).expect("config dir");
        for (name, yaml) in &self.files {
            std::fs::write(conf.join(name), yaml).expect("config file");
        }
        let log = dir.join("service.log");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_ratelimit-envoy"));
        cmd.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("RUNTIME_ROOT", dir.join("runtime"))
            .env("RUNTIME_SUBDIRECTORY", "ratelimit")
            .env("GRPC_HOST", "127.0.0.1")
            .env("GRPC_PORT", "0")
            .env("HOST", "127.0.0.1")
            .env("PORT", "0")
            .env("LOG_LEVEL", "info");
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        let child = cmd
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log file"))
            .spawn()
            .expect("run ratelimit-envoy");
        let mut s = Service {
            child: Some(child),
            dir,
            grpc: String::new(),
            http: String::new(),
            log,
        };
        let deadline = Instant::now() + START_WITHIN;
        loop {
            let log = s.log();
            let addr = |what: &str| {
                log.lines()
                    .find_map(|l| l.split(&format!("Listening for {what} on ")).nth(1))
                    .map(|a| a.trim().to_string())
            };
            if let (Some(g), Some(h)) = (addr("gRPC"), addr("HTTP")) {
                s.grpc = format!("http://{g}");
                s.http = format!("http://{h}");
                break;
            }
            if let Some(Ok(Some(status))) = s.child.as_mut().map(Child::try_wait) {
                panic!("the service exited ({status}):\n{log}");
            }
            assert!(
                Instant::now() < deadline,
                "the service did not listen:\n{log}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        if self.wait_healthy {
            s.wait_until(|s| s.http_get("/healthcheck").0 == 200, "healthy");
        }
        s
    }
}

impl Service {
    pub fn builder(redis_url: &str) -> ServiceBuilder {
        ServiceBuilder {
            env: vec![("REDIS_URL".into(), redis_url.into())],
            files: Vec::new(),
            wait_healthy: true,
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn config_dir(&self) -> PathBuf {
        self.dir.join("runtime").join("ratelimit").join("config")
    }

    /// Wait (bounded) until `cond` holds.
    pub fn wait_until(&self, cond: impl Fn(&Service) -> bool, what: &str) {
        let deadline = Instant::now() + START_WITHIN;
        while !cond(self) {
            assert!(Instant::now() < deadline, "never {what}:\n{}", self.log());
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    pub async fn client(&self) -> RateLimitServiceClient<Channel> {
        RateLimitServiceClient::connect(self.grpc.clone())
            .await
            .unwrap_or_else(|e| panic!("connect to {}: {e}", self.grpc))
    }

    fn agent() -> ureq::Agent {
        ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(10)))
            .build()
            .into()
    }

    pub fn http_get(&self, path: &str) -> (u16, String) {
        match Self::agent().get(&format!("{}{path}", self.http)).call() {
            Ok(mut r) => (
                r.status().as_u16(),
                r.body_mut().read_to_string().unwrap_or_default(),
            ),
            Err(e) => (0, e.to_string()),
        }
    }

    pub fn http_post(&self, path: &str, body: &str) -> (u16, String) {
        match Self::agent()
            .post(&format!("{}{path}", self.http))
            .send(body)
        {
            Ok(mut r) => (
                r.status().as_u16(),
                r.body_mut().read_to_string().unwrap_or_default(),
            ),
            Err(e) => (0, e.to_string()),
        }
    }

    /// The value of one Prometheus sample (0 when absent), e.g.
    /// `ratelimit_service_rate_limit_total_hits{domain="d",key1="k",key2=""}`.
    pub fn metric(&self, sample: &str) -> u64 {
        let (_, text) = self.http_get("/metrics");
        text.lines()
            .find_map(|l| {
                l.strip_prefix(sample)
                    .and_then(|rest| rest.strip_prefix(' '))
            })
            .map(|v| v.trim().parse::<f64>().unwrap_or(0.0) as u64)
            .unwrap_or(0)
    }

    /// Replace the configuration files (written to a new file, then renamed over).
    pub fn write_file(&self, name: &str, yaml: &str) {
        let tmp = self.dir.join(format!(".{name}.tmp"));
        std::fs::write(&tmp, yaml).expect("write");
        std::fs::rename(&tmp, self.config_dir().join(name)).expect("rename");
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A descriptor from (key, value) pairs.
pub fn desc(pairs: &[(&str, &str)]) -> RateLimitDescriptor {
    RateLimitDescriptor {
        entries: pairs
            .iter()
            .map(|(k, v)| Entry {
                key: k.to_string(),
                value: v.to_string(),
            })
            .collect(),
        ..Default::default()
    }
}

pub fn request(domain: &str, descriptors: Vec<RateLimitDescriptor>) -> RateLimitRequest {
    RateLimitRequest {
        domain: domain.into(),
        descriptors,
        hits_addend: 0,
    }
}

pub async fn call(
    c: &mut RateLimitServiceClient<Channel>,
    r: RateLimitRequest,
) -> RateLimitResponse {
    c.should_rate_limit(r)
        .await
        .expect("ShouldRateLimit")
        .into_inner()
}

pub const OK: i32 = 1;
pub const OVER_LIMIT: i32 = 2;

/// The codes of a response: the overall one, then each descriptor's.
pub fn codes(r: &RateLimitResponse) -> (i32, Vec<i32>) {
    (r.overall_code, r.statuses.iter().map(|s| s.code).collect())
}

/// The `requests_per_unit` of descriptor `i`'s status, if it has a limit.
pub fn limit_of(r: &RateLimitResponse, i: usize) -> Option<u32> {
    r.statuses[i]
        .current_limit
        .as_ref()
        .map(|l| l.requests_per_unit)
}

/// The reference's Redis key of a descriptor in the window of `unit_s` seconds now.
pub fn key(domain: &str, pairs: &[(&str, &str)], unit_s: u64) -> String {
    let mut k = format!("{domain}_");
    for (a, b) in pairs {
        k.push_str(&format!("{a}_{b}_"));
    }
    k.push_str(&((unix_now() / unit_s) * unit_s).to_string());
    k
}

/// Run `f` until one run starts and ends in the same window of `unit_s` seconds (at
/// most 20 runs), and require that run to pass: what `f` checks about counts holds
/// within one window, and a run that crossed a boundary proves nothing. What that run
/// returns, for checks that need not be in the window.
pub async fn in_one_window<F, Fut, T>(unit_s: u64, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, String>>,
{
    for _ in 0..20 {
        let w = unix_now() / unit_s;
        let result = f().await;
        if unix_now() / unit_s == w {
            return result.unwrap_or_else(|e| panic!("{e}"));
        }
    }
    panic!("20 runs each crossed a window's boundary");
}

/// `Err(message)` unless `left == right`.
#[macro_export]
macro_rules! check_eq {
    ($left:expr, $right:expr) => {{
        let (l, r) = (&$left, &$right);
        if l != r {
            return Err(format!(
                "{}:{}: {} = {:?}, expected {:?}",
                file!(),
                line!(),
                stringify!($left),
                l,
                r
            ));
        }
    }};
}

/// `clients` clients at once, each making `calls` calls of `make(client, call)`: how
/// many calls were let through.
pub async fn allowed_among(
    c: &RateLimitServiceClient<Channel>,
    clients: usize,
    calls: usize,
    make: impl Fn(usize, usize) -> RateLimitRequest + Send + Sync + 'static,
) -> usize {
    let make = std::sync::Arc::new(make);
    let mut tasks = Vec::new();
    for n in 0..clients {
        let (mut c, make) = (c.clone(), make.clone());
        tasks.push(tokio::spawn(async move {
            let mut allowed = 0;
            for i in 0..calls {
                if call(&mut c, make(n, i)).await.overall_code == OK {
                    allowed += 1;
                }
            }
            allowed
        }));
    }
    let mut allowed = 0;
    for t in tasks {
        allowed += t.await.expect("a client");
    }
    allowed
}
