//! Accepting connections within limits, and stopping cleanly.
//!
//! Each front end holds at most `max_connections` connections: past that, a
//! new one is told so in its protocol and closed, so that a flood of
//! connections costs the node one small write each. A connection that sends
//! nothing for `idle_timeout` is closed. On stop, no connection is accepted,
//! requests in flight finish, and idle connections are closed.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};

use crate::engine::Engine;

/// What one front end allows.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_connections: usize,
    /// A connection idle for this long is closed.
    pub idle_timeout: Duration,
    /// Largest request (HTTP body) or command (RESP) read.
    pub max_request_bytes: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_connections: 4096,
            idle_timeout: Duration::from_secs(300),
            max_request_bytes: 64 << 20,
        }
    }
}

/// Deals connections to the LDM worker threads in turn: what a connection
/// asks of that worker's fragments is done there without a thread hop. It
/// may also deal some to the runtime the front end runs on, whose threads
/// use the cores no worker runs on.
pub(crate) struct Workers {
    engine: Engine,
    next: usize,
    /// Turns: one per worker thread, then the front end's runtime's.
    turns: usize,
}

impl Workers {
    /// Deals connections to the worker threads only: the Redis front end,
    /// whose commands cost less than a hand-off between threads.
    pub(crate) fn new(engine: Engine) -> Workers {
        let turns = engine.ldm_threads();
        Workers {
            engine,
            next: 0,
            turns,
        }
    }

    /// Deals connections to the worker threads and, one turn per core no
    /// worker runs on, to the calling runtime: the REST front end, whose
    /// HTTP and JSON cost many times a request's hand-off to a worker, and
    /// would otherwise have only the workers' cores.
    pub(crate) fn with_spare_cores(engine: Engine) -> Workers {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        Workers {
            turns: engine.ldm_threads().max(cores),
            ..Workers::new(engine)
        }
    }

    /// Runs `serve` with `stream` on the next worker's thread, or on the
    /// calling runtime when its turn comes.
    pub(crate) fn spawn<F, Fut>(&mut self, stream: TcpStream, serve: F)
    where
        F: FnOnce(TcpStream) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.next = (self.next + 1) % self.turns;
        if self.next >= self.engine.ldm_threads() {
            drop(tokio::spawn(serve(stream)));
            return;
        }
        // A stream belongs to the runtime it was made in: it moves as the
        // operating system's socket, and is made anew over there.
        let Ok(stream) = stream.into_std() else {
            return;
        };
        self.engine.spawn_on_worker(self.next, async move {
            if let Ok(stream) = TcpStream::from_std(stream) {
                serve(stream).await;
            }
        });
    }
}

/// How long a stopping front end lets requests in flight finish.
const DRAIN: Duration = Duration::from_secs(30);

/// Accepts connections until `stopped`, handing each to `handle` with the
/// permit it holds (to drop when the connection ends); refuses with
/// `refusal` when all permits are taken. Answers the permits, to wait on
/// with `drained`.
pub(crate) async fn accept<F>(
    listener: TcpListener,
    max_connections: usize,
    refusal: &'static [u8],
    mut stopped: watch::Receiver<bool>,
    mut handle: F,
) -> Arc<Semaphore>
where
    F: FnMut(TcpStream, OwnedSemaphorePermit),
{
    let permits = Arc::new(Semaphore::new(max_connections));
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = stopped.wait_for(|s| *s) => break,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(e) => {
                // Out of file descriptors, most likely: wait a little, as
                // the connections that hold them may end.
                tracing::warn!(error = %e, "accepting a connection failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        match Arc::clone(&permits).try_acquire_owned() {
            Ok(permit) => handle(stream, permit),
            Err(_) => {
                tokio::spawn(refuse(stream, refusal));
            }
        }
    }
    permits
}

/// Waits until every connection holding one of `permits` has ended, or
/// for `DRAIN` at most.
pub(crate) async fn drained(permits: Arc<Semaphore>, max_connections: usize) {
    let all = u32::try_from(max_connections).unwrap_or(u32::MAX);
    if tokio::time::timeout(DRAIN, permits.acquire_many(all))
        .await
        .is_err()
    {
        tracing::warn!("connections still open after {DRAIN:?}; stopping anyway");
    }
}

async fn refuse(mut stream: TcpStream, refusal: &'static [u8]) {
    let _ = tokio::time::timeout(Duration::from_secs(1), stream.write_all(refusal)).await;
}

/// Serves `router` over HTTP/1.1 until `stopped`, then lets requests in
/// flight finish.
pub(crate) async fn http(
    listener: TcpListener,
    router: Router,
    engine: Engine,
    limits: Limits,
    stopped: watch::Receiver<bool>,
) {
    const REFUSAL: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: 95\r\n\r\n{\"error\":{\"code\":\"TOO_MANY_CONNECTIONS\",\"message\":\"the node has all the connections it takes\"}}";
    let graceful = GracefulShutdown::new();
    let mut workers = Workers::with_spare_cores(engine);
    accept(
        listener,
        limits.max_connections,
        REFUSAL,
        stopped,
        |stream, permit| {
            let (router, watcher) = (router.clone(), graceful.watcher());
            workers.spawn(stream, move |stream| async move {
                let service = TowerToHyperService::new(router);
                let connection = hyper::server::conn::http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(limits.idle_timeout)
                    .serve_connection(TokioIo::new(stream), service);
                let _ = watcher.watch(connection).await;
                drop(permit);
            });
        },
    )
    .await;
    if tokio::time::timeout(DRAIN, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("requests still in flight after {DRAIN:?}; stopping anyway");
    }
}
