//! Real servers for tests: `redis-server` (or `$REDIS_SERVER`, e.g. a valkey-server)
//! with the module, on a free 127.0.0.1 port, in a temporary directory; killed and
//! cleaned up on drop. The server log is printed when a server fails to start.

use super::Client;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The server binary: `$REDIS_SERVER` or `redis-server` from PATH.
pub fn server_binary() -> String {
    std::env::var("REDIS_SERVER").unwrap_or_else(|_| "redis-server".to_string())
}

/// The module file: `$RATELIMIT_MODULE`, or the debug build of this workspace (built
/// once per test binary, since `cargo test` does not build the cdylib).
pub fn module_path() -> PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        if let Ok(p) = std::env::var("RATELIMIT_MODULE") {
            return PathBuf::from(p);
        }
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = Command::new(cargo)
            .args(["build", "--quiet", "--lib", "-p", "redis-ratelimit"])
            .current_dir(root)
            .status()
            .expect("run cargo build");
        assert!(status.success(), "building the module failed");
        let target = std::env::var("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|_| root.join("target"));
        let so = target.join("debug").join("libredis_ratelimit.so");
        assert!(so.exists(), "module not found at {}", so.display());
        so
    })
    .clone()
}

/// The `ratelimit-sweep` binary: `$RATELIMIT_SWEEP`, or the debug build of this
/// workspace (built once per test binary).
pub fn sweep_tool_path() -> PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        if let Ok(p) = std::env::var("RATELIMIT_SWEEP") {
            return PathBuf::from(p);
        }
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = Command::new(cargo)
            .args(["build", "--quiet", "-p", "ratelimit-sweep"])
            .current_dir(root)
            .status()
            .expect("run cargo build");
        assert!(status.success(), "building ratelimit-sweep failed");
        let target = std::env::var("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|_| root.join("target"));
        let bin = target.join("debug").join("ratelimit-sweep");
        assert!(
            bin.exists(),
            "ratelimit-sweep not found at {}",
            bin.display()
        );
        bin
    })
    .clone()
}

#[derive(Clone, Debug)]
pub struct ServerBuilder {
    module: bool,
    aof: bool,
    replica_of: Option<u16>,
    cluster: bool,
    extra: Vec<(String, String)>,
}

impl Default for ServerBuilder {
    fn default() -> Self {
        ServerBuilder {
            module: true,
            aof: false,
            replica_of: None,
            cluster: false,
            extra: Vec::new(),
        }
    }
}

impl ServerBuilder {
    /// Load the module (default) or not.
    pub fn module(mut self, yes: bool) -> Self {
        self.module = yes;
        self
    }

    /// Append-only file on, fsync always.
    pub fn aof(mut self, yes: bool) -> Self {
        self.aof = yes;
        self
    }

    pub fn replica_of(mut self, port: u16) -> Self {
        self.replica_of = Some(port);
        self
    }

    pub fn cluster(mut self, yes: bool) -> Self {
        self.cluster = yes;
        self
    }

    /// Any other config directive.
    pub fn config(mut self, name: &str, value: &str) -> Self {
        self.extra.push((name.to_string(), value.to_string()));
        self
    }

    pub fn start(self) -> Server {
        let dir = temp_dir();
        let mut last_log = String::new();
        for _attempt in 0..5 {
            let port = free_port();
            let mut server = Server {
                port,
                dir: dir.clone(),
                child: None,
                builder: self.clone(),
            };
            match server.spawn() {
                Ok(()) => return server,
                Err(log) => {
                    last_log = log;
                    // Drop kills whatever is left; the port may have been taken: retry.
                }
            }
        }
        panic!("server failed to start 5 times; last log:\n{last_log}");
    }
}

pub struct Server {
    pub port: u16,
    pub dir: PathBuf,
    child: Option<Child>,
    builder: ServerBuilder,
}

impl Server {
    /// A server with the module loaded.
    pub fn start() -> Server {
        Server::builder().start()
    }

    pub fn builder() -> ServerBuilder {
        ServerBuilder::default()
    }

    /// A replica of this server (with the module loaded or not), synced before return.
    pub fn start_replica(&self, module: bool) -> Server {
        let replica = Server::builder()
            .module(module)
            .replica_of(self.port)
            .start();
        replica.wait_for_sync();
        replica
    }

    pub fn client(&self) -> Client {
        Client::connect(self.port)
            .unwrap_or_else(|e| panic!("connect to {}: {e}\n{}", self.port, self.log()))
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }

    /// Stop the server and start it again on the same port and directory (so it
    /// reloads its AOF or RDB). `hard`: SIGKILL, as a crash; otherwise SHUTDOWN.
    pub fn restart(&mut self, hard: bool) {
        self.stop(hard);
        if let Err(log) = self.spawn() {
            panic!("server failed to restart:\n{log}");
        }
    }

    pub fn stop(&mut self, hard: bool) {
        if let Some(mut child) = self.child.take() {
            if !hard {
                if let Ok(mut c) = Client::connect(self.port) {
                    let _ = c.try_cmd(&["SHUTDOWN", "NOSAVE"]);
                }
                let deadline = Instant::now() + Duration::from_secs(10);
                while Instant::now() < deadline {
                    if let Ok(Some(_)) = child.try_wait() {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Wait until this replica reports its link to the primary up.
    pub fn wait_for_sync(&self) {
        let mut c = self.client();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let info = c.cmd(&["INFO", "replication"]).text();
            if info.contains("master_link_status:up") {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "replica never synced:\n{info}\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn write_config(&self) -> PathBuf {
        let b = &self.builder;
        let mut conf = format!(
            "port {}\nbind 127.0.0.1\ndir {}\nlogfile {}\nsave \"\"\nappendonly {}\nappendfsync always\n\
             enable-debug-command local\nenable-module-command local\nprotected-mode no\nrepl-diskless-sync-delay 0\n",
            self.port,
            self.dir.display(),
            self.dir.join("server.log").display(),
            if b.aof { "yes" } else { "no" },
        );
        if b.module {
            conf.push_str(&format!("loadmodule {}\n", module_path().display()));
        }
        if let Some(p) = b.replica_of {
            conf.push_str(&format!("replicaof 127.0.0.1 {p}\n"));
        }
        if b.cluster {
            conf.push_str(
                "cluster-enabled yes\ncluster-config-file nodes.conf\ncluster-node-timeout 5000\n",
            );
        }
        for (k, v) in &b.extra {
            conf.push_str(&format!("{k} {v}\n"));
        }
        let path = self.dir.join("redis.conf");
        std::fs::write(&path, conf).expect("write config");
        path
    }

    /// Start the process and wait for PING; on failure return the log.
    fn spawn(&mut self) -> Result<(), String> {
        let conf = self.write_config();
        let child = Command::new(server_binary())
            .arg(&conf)
            .current_dir(&self.dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", server_binary()));
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if let Some(Ok(Some(status))) = self.child.as_mut().map(|c| c.try_wait()) {
                self.child = None;
                return Err(format!("server exited with {status}\n{}", self.log()));
            }
            if let Ok(mut c) = Client::connect(self.port) {
                match c.try_cmd(&["PING"]) {
                    Ok(v) if v == super::Value::Status("PONG".into()) => return Ok(()),
                    // LOADING: still reading its AOF/RDB.
                    _ => {}
                }
            }
            if Instant::now() > deadline {
                self.stop(true);
                return Err(format!(
                    "server did not answer PING in 15 s\n{}",
                    self.log()
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop(true);
        if std::thread::panicking() {
            eprintln!("--- server log (port {}) ---\n{}", self.port, self.log());
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().expect("local addr").port()
}

fn temp_dir() -> PathBuf {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("rl-test-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create temp dir");
    dir
}
