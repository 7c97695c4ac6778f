//! The service against real servers: its binary, a gRPC client, redis-server (or
//! `$REDIS_SERVER`) with the module, and a three-node Cluster.

mod behaviour;
mod cluster;
mod docs;
mod examples;
mod failure;
mod harness;
mod reload;
