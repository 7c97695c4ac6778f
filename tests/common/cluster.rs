//! Redis Cluster on loopback: primaries started by the harness with `cluster-enabled`
//! (each with a free cluster bus port), slots assigned, and `cluster_state:ok` on every
//! node before the tests see it; slots moved between nodes, by Valkey 9's atomic slot
//! migration or by the legacy `CLUSTER SETSLOT` + `MIGRATE` steps; and a small client
//! that follows `MOVED`, `ASK` and `TRYAGAIN`.

use super::{Client, Server, Value};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
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

    /// A client connected to every node, sending to the first one until redirected.
    pub fn client(&self) -> ClusterClient {
        ClusterClient {
            nodes: self.nodes.iter().map(|n| (n.port, n.client())).collect(),
            moved: 0,
            asked: 0,
            tried_again: 0,
            attempts: Arc::new(AtomicUsize::new(0)),
            last: 0,
        }
    }

    /// The client of node `i`.
    pub fn node(&self, i: usize) -> Client {
        self.nodes[i].client()
    }

    /// Node `i`'s cluster node id.
    pub fn node_id(&self, i: usize) -> String {
        self.node(i).cmd(&["CLUSTER", "MYID"]).text()
    }

    /// The hash slot of `key`.
    pub fn keyslot(&self, key: &str) -> u16 {
        self.node(0).cmd(&["CLUSTER", "KEYSLOT", key]).int() as u16
    }

    /// Which node serves `slot`, as node `asked` sees it (`CLUSTER SLOTS`).
    pub fn owner_as_seen_by(&self, asked: usize, slot: u16) -> usize {
        let slots = self.node(asked).cmd(&["CLUSTER", "SLOTS"]);
        for range in slots.array() {
            let r = range.array();
            let (lo, hi) = (r[0].int(), r[1].int());
            if (lo..=hi).contains(&i64::from(slot)) {
                let port = r[2].array()[1].int() as u16;
                return self
                    .nodes
                    .iter()
                    .position(|n| n.port == port)
                    .unwrap_or_else(|| panic!("slot {slot} served by unknown port {port}"));
            }
        }
        panic!("slot {slot} is served by no node (as node {asked} sees it)")
    }

    /// Wait (bounded) until every node says that `slot` is served by node `to`.
    pub fn wait_for_owner(&self, slot: u16, to: usize) {
        let deadline = Instant::now() + OK_WITHIN;
        for asked in 0..self.nodes.len() {
            while self.owner_as_seen_by(asked, slot) != to {
                assert!(
                    Instant::now() < deadline,
                    "node {asked} never saw slot {slot} move to node {to} within {OK_WITHIN:?}"
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }

    /// Valkey 9's atomic slot migration of one slot, from node `from` to node `to`:
    /// `CLUSTER MIGRATESLOTS` on the source (its reply returned as it came, so a refusal
    /// is the caller's to report), then, when accepted, a bounded wait until the
    /// migration is over and every node sees the new owner.
    pub fn migrate_slot_atomically(&self, slot: u16, from: usize, to: usize) -> Value {
        let target = self.node_id(to);
        let s = slot.to_string();
        let mut source = self.node(from);
        let reply = source.cmd(&[
            "CLUSTER",
            "MIGRATESLOTS",
            "SLOTSRANGE",
            &s,
            &s,
            "NODE",
            &target,
        ]);
        if reply.is_err() {
            return reply;
        }
        self.wait_for_owner(slot, to);
        // The source drops the slot's keys once the target owns it.
        let deadline = Instant::now() + OK_WITHIN;
        while source.cmd(&["CLUSTER", "COUNTKEYSINSLOT", &s]).int() != 0 {
            assert!(
                Instant::now() < deadline,
                "the source still holds keys of slot {slot} after its migration:\n{:?}",
                source.cmd(&["CLUSTER", "GETSLOTMIGRATIONS"])
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        reply
    }

    /// The legacy resharding of one slot, as `redis-cli --cluster reshard` does it: the
    /// target marked `IMPORTING`, the source `MIGRATING`, the keys moved with `MIGRATE`
    /// (one key a call, `between` run after each), then the slot given to the target on
    /// every node. Returns, for each key moved, its name and the local clock (ms) just
    /// before and just after its `MIGRATE`.
    pub fn migrate_slot_legacy(
        &self,
        slot: u16,
        from: usize,
        to: usize,
        between: &mut dyn FnMut(),
    ) -> Vec<(String, u64, u64)> {
        let (source_id, target_id) = (self.node_id(from), self.node_id(to));
        let s = slot.to_string();
        let ok = Value::Status("OK".into());
        let mut source = self.node(from);
        let mut target = self.node(to);
        assert_eq!(
            target.cmd(&["CLUSTER", "SETSLOT", &s, "IMPORTING", &source_id]),
            ok
        );
        assert_eq!(
            source.cmd(&["CLUSTER", "SETSLOT", &s, "MIGRATING", &target_id]),
            ok
        );
        let port = self.nodes[to].port.to_string();
        let mut moved = Vec::new();
        loop {
            let keys = source.cmd(&["CLUSTER", "GETKEYSINSLOT", &s, "1"]);
            let Some(key) = keys.array().first().map(Value::text) else {
                break;
            };
            let before = super::unix_ms();
            let reply = source.cmd(&[
                "MIGRATE",
                "127.0.0.1",
                &port,
                "",
                "0",
                "10000",
                "KEYS",
                &key,
            ]);
            let after = super::unix_ms();
            assert_eq!(reply, ok, "MIGRATE of {key}");
            moved.push((key, before, after));
            assert!(moved.len() <= 10_000, "slot {slot} never emptied");
            between();
        }
        // The target first, so that the source's MOVED points where the keys are.
        for i in std::iter::once(to)
            .chain(std::iter::once(from))
            .chain((0..self.nodes.len()).filter(|&i| i != to && i != from))
        {
            assert_eq!(
                self.node(i)
                    .cmd(&["CLUSTER", "SETSLOT", &s, "NODE", &target_id]),
                ok
            );
        }
        self.wait_for_owner(slot, to);
        moved
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

/// A small cluster-aware client: sends to the node that last served it, follows
/// `MOVED` (and remembers the node), `ASK` (one `ASKING` call on the node named, for
/// this call only) and `TRYAGAIN` (a multi-key call while its keys are split between
/// the two nodes of a migration: tried again after a short pause), a bounded number of
/// times per call.
pub struct ClusterClient {
    /// Each node's port and connection.
    pub nodes: Vec<(u16, Client)>,
    /// How many `MOVED` redirections were followed.
    pub moved: usize,
    /// How many `ASK` redirections were followed.
    pub asked: usize,
    /// How many `TRYAGAIN` replies were tried again.
    pub tried_again: usize,
    /// Every call sent to a node, redirections and tries again included (shared with
    /// whoever wants to see the client make progress).
    pub attempts: Arc<AtomicUsize>,
    /// The node the next call goes to first.
    last: usize,
}

/// How many redirections or retries one call may take (a `TRYAGAIN` lasts while one
/// key of a slot is in flight; a pause of 2 ms each).
const MAX_REDIRECTIONS: usize = 5_000;

impl ClusterClient {
    pub fn cmd<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Value {
        let mut i = self.last;
        let mut asking = false;
        for _ in 0..MAX_REDIRECTIONS {
            self.attempts.fetch_add(1, Ordering::SeqCst);
            let v = if asking {
                let c = &mut self.nodes[i].1;
                assert_eq!(c.cmd(&["ASKING"]), Value::Status("OK".into()));
                c.cmd(args)
            } else {
                self.nodes[i].1.cmd(args)
            };
            let Some(e) = v.err() else {
                return v;
            };
            if let Some(target) = e.strip_prefix("MOVED ") {
                i = self.node_at(target);
                self.last = i;
                self.moved += 1;
                asking = false;
            } else if let Some(target) = e.strip_prefix("ASK ") {
                i = self.node_at(target);
                self.asked += 1;
                asking = true;
            } else if e.starts_with("TRYAGAIN") {
                self.tried_again += 1;
                i = self.last;
                asking = false;
                std::thread::sleep(Duration::from_millis(2));
            } else {
                return v;
            }
        }
        panic!("too many redirections for a call");
    }

    /// The node of a redirection's `slot host:port`.
    fn node_at(&self, target: &str) -> usize {
        let port: u16 = target
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("bad redirection {target}"));
        self.nodes
            .iter()
            .position(|(p, _)| *p == port)
            .unwrap_or_else(|| panic!("redirected to an unknown node {target}"))
    }
}
