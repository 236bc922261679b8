//! Redis connections carried from one node of a group to another over the
//! node-to-node transport: a node that serves a client of a database whose
//! primary is another node opens a connection to that node's peer port,
//! greets it with `Relay` (the cluster secret, as every peer connection),
//! and from then on speaks RESP on it, as the client would. The primary
//! hands the connection to its Redis front end, where the client's own key
//! authenticates it: grants, limits and quotas apply there as to any
//! client. Peer connections are not held to the client ports' caps per
//! address: one node may carry thousands of clients to another.

use std::time::Duration;

use tokio::net::TcpStream;

use super::Cluster;
use super::link::{self, Opening};

/// What the Redis front end does with a relayed connection: serves it,
/// starting with the bytes that came after the greeting.
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

/// Longest the node waits to reach a peer and be greeted.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

impl Cluster {
    /// Names the Redis front end that serves connections relayed here.
    pub(crate) fn serve_relayed(&self, front: Front) {
        let _ = self.inner.relayed.set(front);
    }

    /// Hands a relayed connection to the Redis front end (closed if there
    /// is none).
    pub(super) fn hand_to_front(&self, stream: TcpStream, sent_on: Vec<u8>) {
        if let Some(front) = self.inner.relayed.get() {
            (front.0)(stream, sent_on);
        }
    }

    /// Opens a connection to node `node` of the group that carries a Redis
    /// connection to its front end; why not, if it cannot.
    pub(crate) async fn relay_to(&self, node: u32) -> Result<TcpStream, String> {
        let Some(member) = self.member(node) else {
            return Err(format!("node {node} is not of this node's group"));
        };
        link::open(self, &member, Opening::Relay, CONNECT_TIMEOUT).await
    }
}
