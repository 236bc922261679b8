//! REST requests sent on to a database's primary over the node-to-node
//! transport: a node that gets a write of a database another node of its
//! group is the primary of sends it there as it came — path, API key,
//! body — and gives back that node's answer as it is.
//!
//! Each node keeps one connection to each other node for this, opened when
//! first needed (greeted with `Forward` and the cluster secret), on which
//! requests from all its clients travel at once, each with its own number,
//! and their answers come back as they are ready (`Request`, `Answer`).
//! The node sent to runs each request through its REST front end
//! (`serve_forwarded` names it), marked as sent on, so that it is never
//! sent on again. A request whose connection could not be opened was not
//! sent (`Unreachable`); one whose connection broke before its answer may
//! or may not have been applied (`Broken`).

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};

use super::Cluster;
use super::frame::{self, Message};
use super::link::{self, Opening};

/// Longest the node waits to reach a peer and be greeted.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// Longest a request sent on waits for its answer.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);
/// Requests waiting to be written to one peer: a sender waits past it.
const QUEUED: usize = 1024;

/// A request sent on to this node.
#[derive(Debug)]
pub(crate) struct Request {
    /// The node it came through, and the view that node knew.
    pub(crate) from: u32,
    pub(crate) view: u64,
    pub(crate) path: String,
    /// The API key it came with.
    pub(crate) key: Option<Vec<u8>>,
    pub(crate) body: Vec<u8>,
}

/// A node's answer to a request sent on.
#[derive(Debug)]
pub(crate) struct Answered {
    pub(crate) status: u16,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
}

/// Why a request sent on has no answer.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ForwardError {
    /// It was not sent: the node could not be reached.
    #[error("{0}")]
    Unreachable(String),
    /// It was sent, and may or may not have been applied.
    #[error("{0}")]
    Broken(String),
}

/// An answer on its way.
type Answering = Pin<Box<dyn Future<Output = Answered> + Send>>;

/// What the REST front end does with a request sent on to this node.
pub(crate) struct Handler(Box<dyn Fn(Request) -> Answering + Send + Sync>);

impl Handler {
    pub(crate) fn new<F, Fut>(handle: F) -> Handler
    where
        F: Fn(Request) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Answered> + Send + 'static,
    {
        Handler(Box::new(move |request| Box::pin(handle(request))))
    }
}

impl std::fmt::Debug for Handler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Handler")
    }
}

/// The connections this node sends requests on by, one per peer.
#[derive(Debug, Default)]
pub(super) struct Channels {
    peers: Mutex<HashMap<u32, Arc<Slot>>>,
}

/// The connection to one peer, if open; held while one is opened.
type Slot = tokio::sync::Mutex<Option<Arc<Channel>>>;

/// One connection to a peer: requests go to its writer; answers come to
/// the senders waiting for them.
#[derive(Debug)]
struct Channel {
    frames: mpsc::Sender<Vec<u8>>,
    waiting: Mutex<HashMap<u64, oneshot::Sender<Answered>>>,
    next: AtomicU64,
    ended: AtomicBool,
}

impl Channel {
    fn waiting(&self) -> std::sync::MutexGuard<'_, HashMap<u64, oneshot::Sender<Answered>>> {
        self.waiting.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Ends the channel: every request still waiting is told it broke.
    fn end(&self) {
        self.ended.store(true, Ordering::Release);
        self.waiting().clear();
    }

    fn ended(&self) -> bool {
        self.ended.load(Ordering::Acquire)
    }
}

impl Cluster {
    /// Names the REST front end that answers requests sent on to this node.
    pub(crate) fn serve_forwarded(&self, handler: Handler) {
        let _ = self.inner.forwarded.set(handler);
    }

    /// Sends `request` on to node `node` and waits for its answer.
    pub(crate) async fn forward(
        &self,
        node: u32,
        path: &str,
        key: Option<&[u8]>,
        body: &[u8],
    ) -> Result<Answered, ForwardError> {
        let channel = self.channel(node).await?;
        let id = channel.next.fetch_add(1, Ordering::Relaxed);
        let (answer, answered) = oneshot::channel();
        channel.waiting().insert(id, answer);
        // Ended after this looks, the channel drops the answer's sender
        // (`Broken`); ended before, nothing of the request is sent.
        let unreachable =
            || ForwardError::Unreachable(format!("the connection to node {node} ended"));
        if channel.ended() {
            channel.waiting().remove(&id);
            return Err(unreachable());
        }
        let mut frame = Vec::with_capacity(body.len() + path.len() + 64);
        let request = Message::Request {
            id,
            view: self.view_number(),
            path,
            key,
            body,
        };
        frame::encode(&request, &mut frame);
        // The writer gone, nothing of this request was written.
        if channel.frames.send(frame).await.is_err() {
            channel.waiting().remove(&id);
            return Err(unreachable());
        }
        match tokio::time::timeout(ANSWER_TIMEOUT, answered).await {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(_)) => Err(ForwardError::Broken(format!(
                "the connection to node {node} broke before its answer"
            ))),
            Err(_) => {
                channel.waiting().remove(&id);
                Err(ForwardError::Broken(format!(
                    "node {node} did not answer within {} s",
                    ANSWER_TIMEOUT.as_secs()
                )))
            }
        }
    }

    /// The live connection to `node`, opened if there is none.
    async fn channel(&self, node: u32) -> Result<Arc<Channel>, ForwardError> {
        let slot = {
            let mut peers = (self.inner.channels.peers.lock()).unwrap_or_else(|e| e.into_inner());
            Arc::clone(peers.entry(node).or_default())
        };
        // One opening at a time: those who come meanwhile take its channel.
        let mut slot = slot.lock().await;
        if let Some(channel) = slot.as_ref().filter(|c| !c.ended()) {
            return Ok(Arc::clone(channel));
        }
        let channel = self.open(node).await.map_err(ForwardError::Unreachable)?;
        *slot = Some(Arc::clone(&channel));
        Ok(channel)
    }

    /// Opens a connection to `node` for requests sent on, with the tasks
    /// that write it and read it.
    async fn open(&self, node: u32) -> Result<Arc<Channel>, String> {
        let Some(member) = self.member(node) else {
            return Err(format!("node {node} is not of this node's group"));
        };
        let stream = link::open(self, &member, Opening::Forward, CONNECT_TIMEOUT)
            .await
            .map_err(|e| format!("node {node}: {e}"))?;
        let (reader, mut writer) = stream.into_split();
        let (frames, mut to_write) = mpsc::channel::<Vec<u8>>(QUEUED);
        let channel = Arc::new(Channel {
            frames,
            waiting: Mutex::default(),
            next: AtomicU64::new(1),
            ended: AtomicBool::new(false),
        });
        let serving = Arc::clone(&channel);
        self.spawn(async move {
            let write = async {
                // Whatever is queued goes out in one write.
                while let Some(mut frame) = to_write.recv().await {
                    while let Ok(more) = to_write.try_recv() {
                        frame.extend_from_slice(&more);
                    }
                    if let Err(e) = writer.write_all(&frame).await {
                        return e.to_string();
                    }
                }
                "closed".to_owned()
            };
            let read = async {
                let mut reader = BufReader::new(reader);
                let mut buf = Vec::new();
                loop {
                    if super::cut_off() {
                        return "cut off (failpoint)".to_owned();
                    }
                    match frame::read(&mut reader, &mut buf, frame::MAX_FRAME).await {
                        Ok(true) => {}
                        Ok(false) => return "closed".to_owned(),
                        Err(e) => return e.to_string(),
                    }
                    let Ok(Message::Answer {
                        id,
                        status,
                        headers,
                        body,
                    }) = frame::decode(&buf)
                    else {
                        return "sent something else than an answer".to_owned();
                    };
                    if let Some(waiting) = serving.waiting().remove(&id) {
                        let _ = waiting.send(Answered {
                            status,
                            headers: (headers.iter())
                                .map(|&(n, v)| (n.to_owned(), v.to_owned()))
                                .collect(),
                            body: body.to_vec(),
                        });
                    }
                }
            };
            // Either side ending ends the connection, and every request
            // still waiting on it.
            let why = tokio::select! {
                why = write => why,
                why = read => why,
            };
            tracing::info!(peer = node, reason = %why, "a connection for requests sent on ended");
            serving.end();
        });
        Ok(channel)
    }

    /// Serves a connection a peer opened to send requests on: each runs
    /// through the REST front end, as many at once as come.
    pub(super) fn take_forwarded(&self, from: u32, stream: TcpStream, sent_on: Vec<u8>) {
        let cluster = self.clone();
        self.spawn(async move {
            let Some(_) = cluster.inner.forwarded.get() else {
                return;
            };
            let (reader, mut writer) = stream.into_split();
            let (answers, mut to_write) = mpsc::channel::<Vec<u8>>(QUEUED);
            let write = async move {
                while let Some(mut frame) = to_write.recv().await {
                    while let Ok(more) = to_write.try_recv() {
                        frame.extend_from_slice(&more);
                    }
                    if writer.write_all(&frame).await.is_err() {
                        return;
                    }
                }
            };
            let read = async {
                use tokio::io::AsyncReadExt;
                let mut reader = BufReader::new(std::io::Cursor::new(sent_on).chain(reader));
                let mut buf = Vec::new();
                while let Ok(true) = frame::read(&mut reader, &mut buf, frame::MAX_FRAME).await {
                    if super::cut_off() {
                        return;
                    }
                    let Ok(Message::Request {
                        id,
                        view,
                        path,
                        key,
                        body,
                    }) = frame::decode(&buf)
                    else {
                        tracing::warn!(
                            peer = from,
                            "a peer sent something else than a request; closing"
                        );
                        return;
                    };
                    let request = Request {
                        from,
                        view,
                        path: path.to_owned(),
                        key: key.map(<[u8]>::to_vec),
                        body: body.to_vec(),
                    };
                    let (cluster, answers) = (cluster.clone(), answers.clone());
                    tokio::spawn(async move {
                        let handler = cluster.inner.forwarded.get().expect("named above");
                        let answered = (handler.0)(request).await;
                        let headers: Vec<(&str, &str)> = (answered.headers.iter())
                            .map(|(n, v)| (n.as_str(), v.as_str()))
                            .collect();
                        let mut frame = Vec::with_capacity(answered.body.len() + 64);
                        let answer = Message::Answer {
                            id,
                            status: answered.status,
                            headers,
                            body: &answered.body,
                        };
                        frame::encode(&answer, &mut frame);
                        let _ = answers.send(frame).await;
                    });
                }
            };
            tokio::select! {
                () = read => {}
                () = write => {}
            }
        });
    }
}
