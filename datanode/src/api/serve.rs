//! The front ends' limits, and where their connections run.
//!
//! Each front end holds at most `max_connections` connections, and
//! `max_per_address` from one client address (the accept loop is
//! `shoal_listen`'s, which every Shoal server shares): past that, a new one
//! is told so in its protocol and closed. A request head (HTTP) must arrive
//! within `head_timeout`, and a RESP client must authenticate within it; a
//! connection that sends nothing for `idle_timeout` is closed. On stop, no
//! connection is accepted, requests in flight finish, and idle connections
//! are closed.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use hyper_util::server::graceful::GracefulShutdown;
use shoal_listen::Caps;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use crate::tc::Tc;

/// What one front end allows.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_connections: usize,
    /// Most connections from one client address.
    pub max_per_address: usize,
    /// A connection idle for this long is closed.
    pub idle_timeout: Duration,
    /// A request head must arrive whole, and a RESP client authenticate,
    /// within this long.
    pub head_timeout: Duration,
    /// Largest request (HTTP body) or command (RESP) read.
    pub max_request_bytes: usize,
}

impl Limits {
    pub(crate) fn caps(&self) -> Caps {
        Caps {
            max_connections: self.max_connections,
            max_per_address: self.max_per_address,
        }
    }
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_connections: 4096,
            max_per_address: shoal_listen::MAX_PER_ADDRESS,
            idle_timeout: Duration::from_secs(300),
            head_timeout: shoal_listen::HEAD_TIMEOUT,
            max_request_bytes: 64 << 20,
        }
    }
}

/// Deals each new connection to the place serving the fewest live
/// connections: an LDM worker thread, where what a connection asks of that
/// worker's fragments is done without a thread hop, or a place on the
/// runtime the front end runs on, one per core no worker runs on. A worker
/// wins a tie, so a lone connection is never handed off.
pub(crate) struct Workers {
    tc: Tc,
    /// Live connections per place: one per worker thread, then the front
    /// end's runtime's (if it takes any).
    live: Vec<Arc<AtomicUsize>>,
}

/// A connection's place in `Workers::live`, given back when it ends
/// (however it ends).
struct Dealt(Arc<AtomicUsize>);

impl Dealt {
    /// Counts a connection at `place` until the guard is dropped.
    fn at(place: &Arc<AtomicUsize>) -> Dealt {
        place.fetch_add(1, Ordering::Relaxed);
        Dealt(Arc::clone(place))
    }
}

impl Drop for Dealt {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Workers {
    /// Deals connections to the worker threads only: the Redis front end,
    /// whose commands cost less than a hand-off between threads.
    pub(crate) fn new(tc: Tc) -> Workers {
        let places = tc.ldm_threads();
        Workers::with_places(tc, places)
    }

    /// Deals connections to the worker threads and, one place per core no
    /// worker runs on, to the calling runtime: the REST and MySQL front
    /// ends, whose parsing and encoding cost more than a request's
    /// hand-off to a worker, and would otherwise have only the workers'
    /// cores.
    pub(crate) fn with_spare_cores(tc: Tc) -> Workers {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let places = tc.ldm_threads().max(cores);
        Workers::with_places(tc, places)
    }

    fn with_places(tc: Tc, places: usize) -> Workers {
        let live = (0..places.max(1)).map(|_| Arc::default()).collect();
        Workers { tc, live }
    }

    /// Runs `serve` with `stream` on the worker thread (or the calling
    /// runtime) serving the fewest connections.
    pub(crate) fn spawn<F, Fut>(&mut self, stream: TcpStream, serve: F)
    where
        F: FnOnce(TcpStream) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let place = fewest(&self.live);
        let dealt = Dealt::at(&self.live[place]);
        if place >= self.tc.ldm_threads() {
            drop(tokio::spawn(async move {
                serve(stream).await;
                drop(dealt);
            }));
            return;
        }
        // A stream belongs to the runtime it was made in: it moves as the
        // operating system's socket, and is made anew over there.
        let Ok(stream) = stream.into_std() else {
            return;
        };
        self.tc.spawn_on_worker(place, async move {
            if let Ok(stream) = TcpStream::from_std(stream) {
                serve(stream).await;
            }
            drop(dealt);
        });
    }
}

/// The place with the fewest live connections, the first on a tie.
fn fewest(live: &[Arc<AtomicUsize>]) -> usize {
    (0..live.len())
        .min_by_key(|&p| live[p].load(Ordering::Relaxed))
        .unwrap_or(0)
}

/// How long a stopping front end lets requests in flight finish.
pub(crate) const DRAIN: Duration = Duration::from_secs(30);

/// What an HTTP front end answers a connection past its caps.
const HTTP_REFUSAL: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: 95\r\n\r\n{\"error\":{\"code\":\"TOO_MANY_CONNECTIONS\",\"message\":\"the node has all the connections it takes\"}}";

/// Serves `router` over HTTP/1.1 until `stopped`, each connection on the
/// thread `workers` deals it to (none: the calling runtime's), then lets
/// requests in flight finish.
pub(crate) async fn http(
    listener: TcpListener,
    router: Router,
    mut workers: Option<Workers>,
    limits: Limits,
    stopped: watch::Receiver<bool>,
) {
    let graceful = GracefulShutdown::new();
    // hyper's head timeout also bounds the idle wait between requests, so
    // an idle timeout shorter than it wins.
    let head_timeout = limits.head_timeout.min(limits.idle_timeout);
    let gate = shoal_listen::accept(
        listener,
        limits.caps(),
        HTTP_REFUSAL,
        stopped,
        |stream, _, permit| {
            let (router, watcher) = (router.clone(), graceful.watcher());
            let serve = move |stream| async move {
                shoal_listen::http_connection(stream, router, head_timeout, watcher).await;
                drop(permit);
            };
            match workers.as_mut() {
                Some(workers) => workers.spawn(stream, serve),
                None => drop(tokio::spawn(serve(stream))),
            }
        },
    )
    .await;
    shoal_listen::finish(graceful, gate, DRAIN).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_goes_where_fewest_are_and_a_worker_wins_a_tie() {
        let live = |counts: &[usize]| -> Vec<Arc<AtomicUsize>> {
            counts
                .iter()
                .map(|&n| Arc::new(AtomicUsize::new(n)))
                .collect()
        };
        assert_eq!(fewest(&live(&[0, 0])), 0);
        assert_eq!(fewest(&live(&[1, 0])), 1);
        assert_eq!(fewest(&live(&[1, 1])), 0);
        assert_eq!(fewest(&live(&[2, 1, 1])), 1);
        // A connection that ends gives its place back.
        let places = live(&[1, 0]);
        let dealt = Dealt(Arc::clone(&places[0]));
        places[1].fetch_add(1, Ordering::Relaxed);
        drop(dealt);
        assert_eq!(fewest(&places), 0);
    }
}
