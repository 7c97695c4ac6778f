//! The connections to one Redis deployment: a single server (a few multiplexed
//! connections that reconnect by themselves) or a Cluster (the `redis` crate's async
//! Cluster client, each pipeline sent to the primary of the slot its keys share).

use crate::settings::{RedisSettings, RedisType};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{Route, SingleNodeRoutingInfo, SlotAddr};
use redis::io::tcp::TcpSettings;
use redis::{IntoConnectionInfo, Pipeline, RedisResult, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::sync::OnceCell;

pub struct Backend {
    settings: RedisSettings,
    timeout: Duration,
    conns: OnceCell<Conns>,
    next: AtomicUsize,
}

enum Conns {
    Single(Vec<ConnectionManager>),
    Cluster(ClusterConnection),
}

/// Every request is a small write waiting for its answer: no Nagle delay.
fn nodelay() -> TcpSettings {
    TcpSettings::default().set_nodelay(true)
}

/// The hash slot of a key (the part between the first `{` and the next `}` when it is
/// not empty), as Redis Cluster computes it.
pub fn slot(key: &[u8]) -> u16 {
    let tag = key
        .iter()
        .position(|&b| b == b'{')
        .and_then(|open| {
            let rest = &key[open + 1..];
            rest.iter()
                .position(|&b| b == b'}')
                .map(|close| &rest[..close])
        })
        .filter(|t| !t.is_empty())
        .unwrap_or(key);
    crc16::State::<crc16::XMODEM>::calculate(tag) % 16384
}

impl Backend {
    pub fn new(settings: RedisSettings, timeout: Duration) -> Backend {
        Backend {
            settings,
            timeout,
            conns: OnceCell::new(),
            next: AtomicUsize::new(0),
        }
    }

    pub fn is_cluster(&self) -> bool {
        self.settings.kind == RedisType::Cluster
    }

    async fn connect(&self) -> RedisResult<Conns> {
        match self.settings.kind {
            RedisType::Single => {
                let info = self.settings.urls[0]
                    .as_str()
                    .into_connection_info()?
                    .set_tcp_settings(nodelay());
                let client = redis::Client::open(info)?;
                let config = ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(self.timeout))
                    .set_response_timeout(Some(self.timeout))
                    .set_number_of_retries(1)
                    .set_max_delay(Duration::from_millis(500));
                let mut pool = Vec::with_capacity(self.settings.pool_size);
                for _ in 0..self.settings.pool_size {
                    pool.push(
                        client
                            .get_connection_manager_with_config(config.clone())
                            .await?,
                    );
                }
                Ok(Conns::Single(pool))
            }
            RedisType::Cluster => {
                let client = ClusterClient::builder(self.settings.urls.clone())
                    .tcp_settings(nodelay())
                    .connection_timeout(self.timeout)
                    .response_timeout(self.timeout)
                    .retries(2)
                    .build()?;
                Ok(Conns::Cluster(client.get_async_connection().await?))
            }
        }
    }

    /// Connect now (at start), so that the first request does not wait for it.
    pub async fn warm(&self) -> RedisResult<()> {
        self.conns
            .get_or_try_init(|| self.connect())
            .await
            .map(|_| ())
    }

    /// Send `pipe` in one round trip: to the server, or in a Cluster to the primary of
    /// `slot`. The replies, in order.
    pub async fn run(&self, slot: u16, pipe: &Pipeline, count: usize) -> RedisResult<Vec<Value>> {
        let conns = self.conns.get_or_try_init(|| self.connect()).await?;
        match conns {
            Conns::Single(pool) => {
                let i = self.next.fetch_add(1, Ordering::Relaxed) % pool.len();
                let mut c = pool[i].clone();
                pipe.query_async(&mut c).await
            }
            Conns::Cluster(conn) => {
                let mut c = conn.clone();
                let route = SingleNodeRoutingInfo::SpecificNode(Route::new(slot, SlotAddr::Master));
                c.route_pipeline(pipe.clone(), 0, count, route).await
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::slot;

    #[test]
    fn slots_as_redis_cluster_computes_them() {
        // CLUSTER KEYSLOT's documented values.
        assert_eq!(slot(b"foo"), 12182);
        assert_eq!(slot(b"{user1000}.following"), slot(b"user1000"));
        assert_eq!(slot(b"foo{}{bar}"), slot(b"foo{}{bar}"));
        // The CRC16 (XMODEM) check value of "123456789" is 0x31C3, below 16384.
        assert_eq!(slot(b"123456789"), 0x31C3);
    }
}
