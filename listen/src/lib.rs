//! Accepting connections within limits, for every server Shoal runs (the
//! data node's REST, RESP and internal API, the control plane's API and
//! console), and stopping cleanly.
//!
//! A server holds at most `max_connections` connections, and at most
//! `max_per_address` from any one client address: one client that opens
//! thousands of idle or slow connections is refused past its share, and
//! clients at other addresses are still served. A refused connection is
//! told so in its protocol and closed, so that a flood costs one small
//! write each. Over HTTP a request head must arrive whole within
//! `head_timeout`, also between the requests of a kept-alive connection;
//! protocols without request heads (RESP) enforce their own deadline to
//! authenticate. On stop no connection is accepted and those open are
//! given a while to finish.
//!
//! - [`accept`]: the accept loop and its caps; [`Permit`] is a connection's
//!   place, let go when it is dropped.
//! - [`http_connection`]: one HTTP/1.1 connection served by a router.
//! - [`raise_open_files_limit`]: the process's file descriptors, as many as
//!   it may have.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use hyper_util::service::TowerToHyperService;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};

/// How many connections a server holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caps {
    /// In all.
    pub max_connections: usize,
    /// From one client address.
    pub max_per_address: usize,
}

/// Default `max_per_address`.
pub const MAX_PER_ADDRESS: usize = 256;
/// Default deadline for a request head, or for a RESP client to
/// authenticate. Over HTTP it also bounds how long a kept-alive connection
/// may wait idle for its next request.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// How long Shoal's own HTTP clients (control plane, console, data nodes,
/// CLI) keep an idle connection for reuse: less than the servers'
/// `HEAD_TIMEOUT`, so that a client never sends a request on a connection
/// the server is closing for being idle.
pub const CLIENT_POOL_IDLE: Duration = Duration::from_secs(5);

/// Connections open now, per client address.
#[derive(Debug, Default)]
struct PerAddress(Mutex<HashMap<IpAddr, usize>>);

impl PerAddress {
    fn take(&self, ip: IpAddr, max: usize) -> bool {
        let mut open = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let n = open.entry(ip).or_default();
        if *n >= max {
            return false;
        }
        *n += 1;
        true
    }

    fn release(&self, ip: IpAddr) {
        let mut open = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = open.get_mut(&ip) {
            *n -= 1;
            if *n == 0 {
                open.remove(&ip);
            }
        }
    }
}

/// A connection's place among a server's: let go when dropped.
#[derive(Debug)]
pub struct Permit {
    _total: OwnedSemaphorePermit,
    ip: IpAddr,
    per_address: Arc<PerAddress>,
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.per_address.release(self.ip);
    }
}

/// The places of a server's connections, to wait on with [`drained`].
#[derive(Debug)]
pub struct Gate {
    total: Arc<Semaphore>,
    max: usize,
}

/// Accepts connections until `stopped`, handing each within the caps to
/// `handle` with its client's address and its [`Permit`]; answers others
/// `refusal` and closes them.
pub async fn accept<F>(
    listener: TcpListener,
    caps: Caps,
    refusal: &'static [u8],
    mut stopped: watch::Receiver<bool>,
    mut handle: F,
) -> Gate
where
    F: FnMut(TcpStream, SocketAddr, Permit),
{
    let total = Arc::new(Semaphore::new(caps.max_connections));
    let per_address = Arc::new(PerAddress::default());
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = stopped.wait_for(|s| *s) => break,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of file descriptors, most likely: wait a little, as
                // the connections that hold them may end.
                tracing::warn!(error = %e, "accepting a connection failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let Ok(permit) = Arc::clone(&total).try_acquire_owned() else {
            tokio::spawn(refuse(stream, refusal));
            continue;
        };
        let ip = canonical(peer.ip());
        if !per_address.take(ip, caps.max_per_address) {
            tracing::debug!(%ip, "a client address is at its connection cap");
            tokio::spawn(refuse(stream, refusal));
            continue;
        }
        let permit = Permit {
            _total: permit,
            ip,
            per_address: Arc::clone(&per_address),
        };
        handle(stream, peer, permit);
    }
    Gate {
        total,
        max: caps.max_connections,
    }
}

/// An IPv4 client reached over an IPv6 socket counts as its IPv4 address.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// Waits until every connection of `gate` has ended, or for `drain` at most.
pub async fn drained(gate: Gate, drain: Duration) {
    let all = u32::try_from(gate.max).unwrap_or(u32::MAX);
    if tokio::time::timeout(drain, gate.total.acquire_many(all))
        .await
        .is_err()
    {
        tracing::warn!("connections still open after {drain:?}; stopping anyway");
    }
}

/// After [`accept`] has stopped: lets the requests in flight on
/// `graceful`'s connections finish, and the connections of `gate` end, for
/// `drain` at most.
pub async fn finish(graceful: GracefulShutdown, gate: Gate, drain: Duration) {
    if tokio::time::timeout(drain, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("requests still in flight after {drain:?}; stopping anyway");
    }
    drained(gate, drain).await;
}

async fn refuse(mut stream: TcpStream, refusal: &'static [u8]) {
    let _ = tokio::time::timeout(Duration::from_secs(1), stream.write_all(refusal)).await;
}

/// Serves one HTTP/1.1 connection with `router` until it closes or the
/// `watcher`'s server stops. A request head must arrive whole within
/// `head_timeout` of the connection's opening or of the previous reply.
pub async fn http_connection(
    stream: TcpStream,
    router: Router,
    head_timeout: Duration,
    watcher: Watcher,
) {
    let service = TowerToHyperService::new(router);
    let connection = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(head_timeout)
        .serve_connection(TokioIo::new(stream), service);
    let _ = watcher.watch(connection).await;
}

/// Raises the soft limit of open files to the hard limit: a server holds a
/// descriptor per connection. Answers the limit now.
pub fn raise_open_files_limit() -> std::io::Result<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit read and write the struct given,
    // which lives for both calls.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        if limit.rlim_cur < limit.rlim_max {
            limit.rlim_cur = limit.rlim_max;
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
    }
    Ok(limit.rlim_cur)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_address_has_its_own_share() {
        let per = PerAddress::default();
        let a: IpAddr = "127.0.0.1".parse().unwrap();
        let b: IpAddr = "127.0.0.2".parse().unwrap();
        assert!(per.take(a, 2) && per.take(a, 2));
        assert!(!per.take(a, 2), "a's share is taken");
        assert!(per.take(b, 2), "b has its own");
        per.release(a);
        assert!(per.take(a, 2), "a place came free");
        per.release(a);
        per.release(a);
        per.release(b);
        assert!(
            per.0.lock().unwrap().is_empty(),
            "nothing is kept for closed addresses"
        );
    }

    #[test]
    fn mapped_ipv4_counts_as_ipv4() {
        let mapped: IpAddr = "::ffff:127.0.0.2".parse().unwrap();
        assert_eq!(canonical(mapped), "127.0.0.2".parse::<IpAddr>().unwrap());
    }
}
