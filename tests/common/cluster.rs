//! Redis Cluster on loopback: primaries started by the harness with `cluster-enabled`
//! (each with a free cluster bus port), slots assigned, and `cluster_state:ok` on every
//! node before the tests see it; and a small client that follows `MOVED`.

use super::{Client, Server, Value};
use std::process::Command;
use std::time::{Duration, Instant};

/// The cluster tool: `$REDIS_CLI` (e.g. valkey-cli) or `redis-cli` from PATH. It
/// creates clusters of valkey-server nodes too.
pub fn cli_binary() -> String {
    std::env::var("REDIS_CLI").unwrap_or_else(|_| "redis-cli".to_string())
}

/// How long a new cluster may take to reach `cluster_state:ok` on every node.
const OK_WITHIN: Duration = Duration::from_secs(30);

pub struct Cluster {
    /// The primaries, in the order they were started.
    pub nodes: Vec<Server>,
}

impl Cluster {
    /// `n` primaries (at least 3, as `--cluster create` wants), no replicas, the slots
    /// spread over them by `redis-cli --cluster create`.
    pub fn start(n: usize) -> Cluster {
        let nodes: Vec<Server> = (0..n)
            .map(|_| Server::builder().cluster(true).start())
            .collect();
        let cli = cli_binary();
        let out = Command::new(&cli)
            .args(["--cluster", "create"])
            .args(nodes.iter().map(|n| format!("127.0.0.1:{}", n.port)))
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .output()
            .unwrap_or_else(|e| panic!("cannot run {cli} --cluster create: {e}"));
        assert!(
            out.status.success(),
            "{cli} --cluster create failed:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let cluster = Cluster { nodes };
        cluster.wait_until_ok();
        cluster
    }

    /// One primary that owns every slot (`CLUSTER ADDSLOTSRANGE`; no cluster tool).
    pub fn single() -> Cluster {
        let node = Server::builder().cluster(true).start();
        assert_eq!(
            node.client()
                .cmd(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]),
            Value::Status("OK".into())
        );
        let cluster = Cluster { nodes: vec![node] };
        cluster.wait_until_ok();
        cluster
    }

    /// A client connected to every node, sending to the first one.
    pub fn client(&self) -> ClusterClient {
        ClusterClient {
            nodes: self.nodes.iter().map(|n| (n.port, n.client())).collect(),
            moved: 0,
        }
    }

    /// Wait (bounded) until every node reports `cluster_state:ok`.
    fn wait_until_ok(&self) {
        let deadline = Instant::now() + OK_WITHIN;
        for n in &self.nodes {
            let mut c = n.client();
            loop {
                let info = c.cmd(&["CLUSTER", "INFO"]).text();
                if info.contains("cluster_state:ok") {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "cluster never became ok on port {} within {OK_WITHIN:?}:\n{info}",
                    n.port
                );
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

/// A small cluster-aware client: sends to the first node and follows `MOVED` (no
/// `ASK`: the tests never migrate slots).
pub struct ClusterClient {
    /// Each node's port and connection.
    pub nodes: Vec<(u16, Client)>,
    /// How many redirections were followed.
    pub moved: usize,
}

impl ClusterClient {
    pub fn cmd(&mut self, args: &[&str]) -> Value {
        let mut i = 0;
        for _ in 0..4 {
            let v = self.nodes[i].1.cmd(args);
            let Some(target) = v.err().and_then(|e| e.strip_prefix("MOVED ")) else {
                return v;
            };
            let port: u16 = target
                .rsplit(':')
                .next()
                .and_then(|p| p.parse().ok())
                .unwrap_or_else(|| panic!("bad MOVED {target}"));
            i = self
                .nodes
                .iter()
                .position(|(p, _)| *p == port)
                .unwrap_or_else(|| panic!("MOVED to an unknown node {target}"));
            self.moved += 1;
        }
        panic!("too many redirections for {args:?}");
    }
}
