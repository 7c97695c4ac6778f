//! Finding the primaries of a Cluster from `CLUSTER NODES`.

/// A primary node as `CLUSTER NODES` lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Primary {
    pub host: String,
    pub port: u16,
    /// Marked `fail` (not only `fail?`): its keys cannot be swept now.
    pub failed: bool,
}

/// The primaries in a `CLUSTER NODES` reply. A node that shows no address (a node that
/// has not learned its own IP yet shows `:port`) is taken to be at `fallback_host`,
/// the host the tool connected to. Nodes in handshake or without an address are
/// skipped. Sorted by address, without duplicates.
pub fn primaries(nodes: &str, fallback_host: &str) -> Vec<Primary> {
    let mut out = Vec::new();
    for line in nodes.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (Some(addr), Some(flags)) = (fields.get(1), fields.get(2)) else {
            continue;
        };
        let flags: Vec<&str> = flags.split(',').collect();
        if !flags.contains(&"master") || flags.contains(&"handshake") || flags.contains(&"noaddr") {
            continue;
        }
        // ip:port@cport[,hostname]
        let hostport = addr.split(['@', ',']).next().unwrap_or_default();
        let Some((host, port)) = hostport.rsplit_once(':') else {
            continue;
        };
        let Ok(port) = port.parse::<u16>() else {
            continue;
        };
        if port == 0 {
            continue;
        }
        let host = if host.is_empty() { fallback_host } else { host };
        out.push(Primary {
            host: host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_string(),
            port,
            failed: flags.contains(&"fail"),
        });
    }
    out.sort_by(|a, b| (&a.host, a.port).cmp(&(&b.host, b.port)));
    out.dedup_by(|a, b| a.host == b.host && a.port == b.port);
    out
}

/// Whether an `INFO cluster` reply says Cluster mode is on.
pub fn enabled(info: &str) -> bool {
    info.lines().any(|l| l.trim() == "cluster_enabled:1")
}

#[cfg(test)]
mod tests {
    use super::*;

    const NODES: &str = "\
07c37dfeb235213a872192d90877d0cd55635b91 127.0.0.1:30004@31004,host-a slave e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 0 1426238317239 4 connected
67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1 127.0.0.1:30002@31002 master - 0 1426238316232 2 connected 5461-10922
292f8b365bb7edb5e285caf0b7e6ddc7265d2f4f 127.0.0.1:30003@31003 master - 0 1426238318243 3 connected 10923-16383
6ec23923021cf3ffec47632106199cb7f496ce01 127.0.0.1:30005@31005 slave 67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1 0 1426238316232 5 connected
824fe116063bc5fcf9f4ffd895bc17aee7731ac3 127.0.0.1:30006@31006 slave 292f8b365bb7edb5e285caf0b7e6ddc7265d2f4f 0 1426238317741 6 connected
e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca :30001@31001 myself,master - 0 0 1 connected 0-5460
aaaa 10.0.0.9:30009@31009 master,fail - 0 0 9 disconnected
bbbb 10.0.0.8:30008@31008 handshake - 0 0 0 disconnected
cccc :0@0 master,noaddr - 0 0 0 disconnected
dddd [::1]:30010@31010 master - 0 0 10 connected
";

    #[test]
    fn finds_the_primaries() {
        let p = |host: &str, port, failed| Primary {
            host: host.into(),
            port,
            failed,
        };
        assert_eq!(
            primaries(NODES, "192.168.1.1"),
            vec![
                p("10.0.0.9", 30009, true),
                p("127.0.0.1", 30002, false),
                p("127.0.0.1", 30003, false),
                p("192.168.1.1", 30001, false),
                p("::1", 30010, false),
            ]
        );
        assert!(primaries("", "h").is_empty());
        assert!(primaries("garbage\n\n x y\n", "h").is_empty());
    }

    #[test]
    fn cluster_mode() {
        assert!(enabled("# Cluster\r\ncluster_enabled:1\r\n"));
        assert!(!enabled("# Cluster\r\ncluster_enabled:0\r\n"));
        assert!(!enabled(""));
    }
}
