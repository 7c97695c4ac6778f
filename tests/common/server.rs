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
        built(
            "RATELIMIT_MODULE",
            &["--lib", "-p", "redis-ratelimit"],
            "libredis_ratelimit.so",
        )
    })
    .clone()
}

/// The `ratelimit-sweep` binary: `$RATELIMIT_SWEEP`, or the debug build of this
/// workspace (built once per test binary).
pub fn sweep_tool_path() -> PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        built(
            "RATELIMIT_SWEEP",
            &["-p", "ratelimit-sweep"],
            "ratelimit-sweep",
        )
    })
    .clone()
}

/// The file named by the environment variable `var`, or else `file` of this workspace's
/// debug build, built with `cargo build <build_args>` into cargo's target directory
/// (`$CARGO_TARGET_DIR` when set). A file that is not there is reported in one line.
fn built(var: &str, build_args: &[&str], file: &str) -> PathBuf {
    if let Ok(p) = std::env::var(var) {
        let p = PathBuf::from(p);
        assert!(
            p.is_file(),
            "{var}={} does not exist: build it (make test-binaries) or unset {var} to let the tests build it",
            p.display()
        );
        return p;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(&cargo)
        .args(["build", "--quiet"])
        .args(build_args)
        .current_dir(root)
        .status()
        .unwrap_or_else(|e| panic!("cannot run {cargo}: {e}"));
    assert!(status.success(), "cargo build {build_args:?} failed");
    let target = std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| root.join("target"));
    let path = target.join("debug").join(file);
    assert!(
        path.is_file(),
        "{file} not found at {} after cargo build",
        path.display()
    );
    path
}

/// Whether the server binary runs at all (`--version`); checked once per test binary
/// (`$REDIS_SERVER` does not change during a run), so that a missing server is one
/// clear line instead of a failed start per test.
fn check_server_binary() -> Result<(), String> {
    static CHECKED: OnceLock<Result<(), String>> = OnceLock::new();
    CHECKED
        .get_or_init(|| {
            let binary = server_binary();
            match Command::new(&binary).arg("--version").output() {
                Ok(out) if out.status.success() => Ok(()),
                Ok(out) => Err(format!(
                    "server binary {binary} --version failed ({}): {}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr).trim()
                )),
                Err(e) => Err(format!(
                    "server binary {binary} cannot run: {e} (install redis-server, or set REDIS_SERVER)"
                )),
            }
        })
        .clone()
}

/// Why a server did not start: a missing binary or module (no server was started), or
/// every attempt's reason with the server's log.
#[derive(Debug)]
pub struct StartFailure {
    /// Set when nothing was started at all.
    pub before_start: Option<String>,
    pub attempts: Vec<Attempt>,
}

/// One failed attempt to start a server.
#[derive(Clone, Debug)]
pub struct Attempt {
    pub port: u16,
    pub reason: String,
    pub log: String,
}

impl std::fmt::Display for StartFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(why) = &self.before_start {
            return write!(f, "no server started: {why}");
        }
        writeln!(
            f,
            "server failed to start {} times ({}):",
            self.attempts.len(),
            server_binary()
        )?;
        for (i, a) in self.attempts.iter().enumerate() {
            writeln!(
                f,
                "--- attempt {} on port {}: {}\n{}",
                i + 1,
                a.port,
                a.reason,
                a.log.trim_end()
            )?;
        }
        Ok(())
    }
}

/// How many times a start is tried, each on a new port in a new directory.
pub const START_ATTEMPTS: usize = 5;

#[derive(Clone, Debug)]
pub struct ServerBuilder {
    module: bool,
    aof: bool,
    replica_of: Option<u16>,
    cluster: bool,
    extra: Vec<(String, String)>,
    /// Another module file than [`module_path`] (tests of the harness).
    module_file: Option<PathBuf>,
    /// The port of the first attempt (tests of the harness); later ones pick free ports.
    first_port: Option<u16>,
}

impl Default for ServerBuilder {
    fn default() -> Self {
        ServerBuilder {
            module: true,
            aof: false,
            replica_of: None,
            cluster: false,
            extra: Vec::new(),
            module_file: None,
            first_port: None,
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

    /// Load this module file instead of the workspace's build.
    pub fn module_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.module_file = Some(path.into());
        self
    }

    /// Try this port first (it may be taken: the next attempt picks a free one).
    pub fn first_port(mut self, port: u16) -> Self {
        self.first_port = Some(port);
        self
    }

    /// Start the server, or panic with every attempt's reason and log.
    pub fn start(self) -> Server {
        self.try_start().unwrap_or_else(|e| panic!("{e}"))
    }

    /// Start the server: up to [`START_ATTEMPTS`] attempts, each on its own port and in
    /// its own directory (a port can be taken between choosing it and the server's bind,
    /// and a slow machine can miss the deadline). A missing server binary or module file
    /// is reported before anything is started.
    pub fn try_start(self) -> Result<Server, StartFailure> {
        let before = |why: String| StartFailure {
            before_start: Some(why),
            attempts: Vec::new(),
        };
        check_server_binary().map_err(before)?;
        if self.module {
            let file = self.module_file.clone().unwrap_or_else(module_path);
            if !file.is_file() {
                return Err(before(format!(
                    "module file {} does not exist",
                    file.display()
                )));
            }
        }
        let mut attempts = Vec::new();
        for i in 0..START_ATTEMPTS {
            let port = match (i, self.first_port) {
                (0, Some(p)) => p,
                _ => free_port(),
            };
            let mut server = Server {
                port,
                // A cluster bus port of its own: the default (port + 10 000) may be
                // taken, or past 65 535.
                cluster_port: self.cluster.then(free_port),
                dir: temp_dir(),
                child: None,
                builder: self.clone(),
                failed_attempts: Vec::new(),
            };
            match server.spawn() {
                Ok(()) => {
                    server.failed_attempts = attempts;
                    return Ok(server);
                }
                Err(reason) => {
                    // Keep the log before the drop removes this attempt's directory.
                    attempts.push(Attempt {
                        port,
                        reason,
                        log: server.log(),
                    });
                }
            }
        }
        Err(StartFailure {
            before_start: None,
            attempts,
        })
    }
}

pub struct Server {
    pub port: u16,
    /// The cluster bus port, for a server started with `cluster(true)`.
    pub cluster_port: Option<u16>,
    pub dir: PathBuf,
    child: Option<Child>,
    builder: ServerBuilder,
    /// The attempts that failed before this server started.
    pub failed_attempts: Vec<Attempt>,
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

    /// The server's log file, and what it wrote to stdout/stderr before it had one (a
    /// bad configuration is reported there).
    /// The process id of the server spawned here (`None`: stopped).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    pub fn log(&self) -> String {
        let mut log = std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default();
        let early = std::fs::read_to_string(self.dir.join("server.out")).unwrap_or_default();
        if !early.trim().is_empty() {
            log.push_str("--- stdout/stderr ---\n");
            log.push_str(&early);
        }
        log
    }

    /// Stop the server and start it again on the same port and directory (so it
    /// reloads its AOF or RDB). `hard`: SIGKILL, as a crash; otherwise SHUTDOWN.
    pub fn restart(&mut self, hard: bool) {
        self.stop(hard);
        if let Err(reason) = self.spawn() {
            panic!("server failed to restart: {reason}\n{}", self.log());
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
            let file = b.module_file.clone().unwrap_or_else(module_path);
            conf.push_str(&format!("loadmodule {}\n", file.display()));
        }
        if let Some(p) = b.replica_of {
            conf.push_str(&format!("replicaof 127.0.0.1 {p}\n"));
        }
        if b.cluster {
            conf.push_str(
                "cluster-enabled yes\ncluster-config-file nodes.conf\ncluster-node-timeout 5000\n",
            );
        }
        if let Some(p) = self.cluster_port {
            conf.push_str(&format!("cluster-port {p}\n"));
        }
        for (k, v) in &b.extra {
            conf.push_str(&format!("{k} {v}\n"));
        }
        let path = self.dir.join("redis.conf");
        std::fs::write(&path, conf)
            .unwrap_or_else(|e| panic!("write config {}: {e}", path.display()));
        path
    }

    /// Start the process and wait for PING; on failure return why (the log is in
    /// `self.log()`).
    fn spawn(&mut self) -> Result<(), String> {
        let conf = self.write_config();
        let out = std::fs::File::create(self.dir.join("server.out"))
            .map_err(|e| format!("create server.out: {e}"))?;
        let err = out.try_clone().map_err(|e| format!("server.out: {e}"))?;
        let child = Command::new(server_binary())
            .arg(&conf)
            .current_dir(&self.dir)
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", server_binary()));
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if let Some(Ok(Some(status))) = self.child.as_mut().map(|c| c.try_wait()) {
                self.child = None;
                return Err(format!("server exited with {status}"));
            }
            // Short timeouts: whatever answers on the port may not be this server (a
            // port taken by another process accepts the connection and stays silent).
            let probe = Client::connect_to(
                "127.0.0.1",
                self.port,
                Duration::from_secs(1),
                Duration::from_secs(1),
            );
            if let Ok(mut c) = probe {
                match c.try_cmd(&["PING"]) {
                    Ok(v) if v == super::Value::Status("PONG".into()) => {
                        // The server that answers is the one spawned here, not another
                        // test's that holds the port (ours then fails to bind it).
                        let ours = self.child.as_ref().map(Child::id);
                        let answering = process_id(&mut c);
                        if answering.is_some() && answering == ours {
                            return Ok(());
                        }
                        self.stop(true);
                        return Err(format!(
                            "port {} answers for another server (process_id {answering:?}, ours {ours:?})",
                            self.port
                        ));
                    }
                    // LOADING: still reading its AOF/RDB.
                    _ => {}
                }
            }
            if Instant::now() > deadline {
                self.stop(true);
                return Err("server did not answer PING in 15 s".to_string());
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

/// The `process_id` a server reports in `INFO server`.
fn process_id(c: &mut Client) -> Option<u32> {
    let info = c.try_cmd(&["INFO", "server"]).ok()?.text();
    info.lines()
        .find_map(|l| l.strip_prefix("process_id:"))
        .and_then(|pid| pid.trim().parse().ok())
}

/// A port nothing listens on now (the kernel's pick for `bind(0)`).
pub fn free_port() -> u16 {
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
