//! Client connections carried from one node of a group to another over
//! the node-to-node transport: a node that serves a client of a database
//! whose primary is another node opens a connection to that node's peer
//! port, greets it with `Relay` (Redis) or `RelaySql` (MySQL) — the
//! cluster secret, as every peer connection — and from then on speaks the
//! client's protocol on it. The primary hands the connection to that
//! front end, where the client's own key authenticates it: grants, limits
//! and quotas apply there as to any client. Peer connections are not held
//! to the client ports' caps per address: one node may carry thousands of
//! clients to another.

use std::sync::OnceLock;
use std::time::Duration;

use tokio::net::TcpStream;

use super::Cluster;
use super::link::{self, Opening};

/// Which front end a relayed connection is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Relayed {
    Redis,
    Sql,
}

/// What a front end does with a relayed connection: serves it, starting
/// with the bytes that came after the greeting.
pub(crate) struct Front(Box<dyn Fn(TcpStream, Vec<u8>) + Send + Sync>);

impl Front {
    pub(crate) fn new(serve: impl Fn(TcpStream, Vec<u8>) + Send + Sync + 'static) -> Front {
        Front(Box::new(serve))
    }
}

impl std::fmt::Debug for Front {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Front")
    }
}

/// The front ends that serve relayed connections, once they are up.
#[derive(Debug, Default)]
pub(super) struct Fronts {
    redis: OnceLock<Front>,
    sql: OnceLock<Front>,
}

impl Fronts {
    fn of(&self, which: Relayed) -> &OnceLock<Front> {
        match which {
            Relayed::Redis => &self.redis,
            Relayed::Sql => &self.sql,
        }
    }
}

/// Longest the node waits to reach a peer and be greeted.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

impl Cluster {
    /// Names the front end that serves connections relayed here for it.
    pub(crate) fn serve_relayed(&self, which: Relayed, front: Front) {
        let _ = self.inner.relayed.of(which).set(front);
    }

    /// Hands a relayed connection to its front end (closed if there is
    /// none).
    pub(super) fn hand_to_front(&self, which: Relayed, stream: TcpStream, sent_on: Vec<u8>) {
        if let Some(front) = self.inner.relayed.of(which).get() {
            (front.0)(stream, sent_on);
        }
    }

    /// Opens a connection to node `node` of the group that carries a
    /// client's connection to its front end `which`; why not, if it
    /// cannot.
    pub(crate) async fn relay_to(&self, node: u32, which: Relayed) -> Result<TcpStream, String> {
        let Some(member) = self.member(node) else {
            return Err(format!("node {node} is not of this node's group"));
        };
        link::open(self, &member, Opening::Relay(which), CONNECT_TIMEOUT).await
    }
}
