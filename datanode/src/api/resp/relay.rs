//! Commands of a database whose primary is another node of the group go
//! to that node: read-modify-write commands, `WATCH` and `MULTI` need their
//! keys' locks where the database's writes are made. A connection opens
//! its own connection to the primary over the node-to-node transport
//! (`Cluster::relay_to`), authenticates it with the client's key, and
//! sends the commands on as they came, pipelined; the replies come back in
//! order, counted whole (`frame::reply_len`), and go to the client in
//! their place among the replies of commands run here (`PING`, `AUTH`,
//! `CLIENT`…, which are the connection's own).
//!
//! When the view moves the database's primary (that node failed, paused,
//! stopped, or is given its primaries back), the connection goes on: the
//! commands the old primary has not answered within `MOVED_GRACE` — which
//! may or may not have been applied — are answered `TRYAGAIN`, and later
//! commands go to the new primary, or run here if that is this node. Only
//! a connection with a transaction under way on the old primary (`MULTI`
//! or `WATCH` sent and not ended) is closed: its queued commands and
//! watched keys are gone with that node, and nothing of it was applied.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::frame::{self, Out};
use crate::cluster::{Cluster, Relayed};
use crate::tc::Database;

/// How long a primary the view has moved away from may still answer the
/// commands it has: one handing its databases on answers what it holds.
pub(super) const MOVED_GRACE: Duration = Duration::from_millis(200);
/// Most bytes of commands waiting to be sent on: the client is read no
/// further until they are.
pub(super) const MAX_SENDING: usize = 4 << 20;
/// Largest reply taken from the primary.
const MAX_REPLY: usize = 1 << 30;

/// The connection to a database's primary on behalf of a client.
pub(super) struct Upstream {
    stream: TcpStream,
    pub(super) db: Arc<Database>,
    /// The node it goes to.
    pub(super) primary: u32,
    /// Commands sent whose replies have not come back.
    awaiting: usize,
    /// `MULTI` sent, and no `EXEC` or `DISCARD` since.
    multi: bool,
    /// `WATCH` sent, and no `EXEC`, `DISCARD` or `UNWATCH` since.
    watching: bool,
    /// Commands not yet written.
    sending: Vec<u8>,
    /// What the primary sent after its last whole reply.
    received: Vec<u8>,
}

/// Why the connection to the primary ended.
#[derive(Debug)]
pub(super) struct Broken(pub(super) String);

/// Where and how to open the connection to the primary.
pub(super) struct Target<'a> {
    pub(super) cluster: &'a Cluster,
    pub(super) db: &'a Arc<Database>,
    pub(super) primary: u32,
    /// The client's key, as it presented it.
    pub(super) key: &'a [u8],
    pub(super) resp3: bool,
}

/// A command as a RESP array of bulk strings.
fn command(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for arg in args {
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
    out
}

impl Upstream {
    /// Opens and authenticates the connection to the primary: it, or the
    /// reply to give the client instead (`Err((word, message))`), and
    /// whether the primary could not be reached at all.
    pub(super) async fn open(target: Target<'_>) -> Result<Upstream, (String, bool)> {
        let database = &target.db.name;
        let unreachable = |e: String| {
            format!(
                "data node {}, the primary of database '{database}', cannot be reached ({e}); retry",
                target.primary
            )
        };
        let mut stream = (target
            .cluster
            .relay_to(target.primary, Relayed::Redis)
            .await)
            .map_err(|e| (unreachable(e), true))?;
        // AUTH, the protocol if RESP3, then an ECHO of a marker: everything
        // up to the marker's reply answers the greeting.
        let mut marker = [0u8; 8];
        getrandom::fill(&mut marker).expect("the OS random source works");
        let marker: String = marker.iter().map(|b| format!("{b:02x}")).collect();
        let mut greeting = command(&[b"AUTH", database.as_str().as_bytes(), target.key]);
        if target.resp3 {
            greeting.extend(command(&[b"HELLO", b"3"]));
        }
        greeting.extend(command(&[b"ECHO", marker.as_bytes()]));
        let handshake = async {
            stream.write_all(&greeting).await?;
            let mut seen = Vec::new();
            let end = format!("{marker}\r\n");
            while !seen.ends_with(end.as_bytes()) {
                if seen.len() > 64 << 10 || stream.read_buf(&mut seen).await? == 0 {
                    return Err(std::io::Error::other("the primary closed the connection"));
                }
            }
            Ok(seen)
        };
        let seen = tokio::time::timeout(Duration::from_secs(2), handshake)
            .await
            .map_err(|_| (unreachable("no answer".into()), false))?
            .map_err(|e| (unreachable(e.to_string()), false))?;
        if !seen.starts_with(b"+OK\r\n") {
            let first = seen.split(|&b| b == b'\r').next().unwrap_or_default();
            let refusal = first.strip_prefix(b"-").unwrap_or(first);
            return Err((String::from_utf8_lossy(refusal).into(), false));
        }
        Ok(Upstream {
            stream,
            db: Arc::clone(target.db),
            primary: target.primary,
            awaiting: 0,
            multi: false,
            watching: false,
            sending: Vec::new(),
            received: Vec::new(),
        })
    }

    /// Queues `bytes`, one command named `name`, to be sent on.
    pub(super) fn queue(&mut self, name: &[u8], bytes: &[u8]) {
        let is = |word: &str| name.eq_ignore_ascii_case(word.as_bytes());
        if is("MULTI") {
            self.multi = true;
        } else if is("EXEC") || is("DISCARD") {
            self.multi = false;
            self.watching = false;
        } else if is("WATCH") {
            self.watching = true;
        } else if is("UNWATCH") && !self.multi {
            self.watching = false;
        }
        self.sending.extend_from_slice(bytes);
        self.awaiting += 1;
    }

    /// Whether the primary holds a transaction of this connection: its
    /// commands must all go there until it ends, and it is lost if the
    /// primary moves.
    pub(super) fn in_transaction(&self) -> bool {
        self.multi || self.watching
    }

    /// Commands sent whose replies have not come back.
    pub(super) fn awaiting(&self) -> usize {
        self.awaiting
    }

    /// Bytes of commands not yet sent.
    pub(super) fn sending(&self) -> usize {
        self.sending.len()
    }

    /// Whether the view has moved the database's primary off this node.
    pub(super) fn moved(&self) -> bool {
        self.db.primary() != self.primary
    }

    /// Writes what the socket takes now of the commands queued.
    pub(super) fn send_now(&mut self) -> Result<(), Broken> {
        let mut written = 0;
        while written < self.sending.len() {
            match self.stream.try_write(&self.sending[written..]) {
                Ok(n) => written += n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(Broken(e.to_string())),
            }
        }
        self.sending.drain(..written);
        Ok(())
    }

    /// Sends what it can and takes the whole replies that arrive into
    /// `out`: one step, as soon as either happens. Cancel-safe: a step
    /// given up has done nothing.
    pub(super) async fn pump(&mut self, out: &mut Out) -> Result<(), Broken> {
        if self.received.len() > MAX_REPLY {
            return Err(Broken("a reply larger than the relay takes".into()));
        }
        let Upstream {
            stream,
            sending,
            received,
            ..
        } = self;
        let (mut reader, mut writer) = stream.split();
        let read = tokio::select! {
            written = writer.write(sending), if !sending.is_empty() => {
                let n = written.map_err(|e| Broken(e.to_string()))?;
                sending.drain(..n);
                return Ok(());
            }
            read = reader.read_buf(received) => read,
        };
        match read {
            Ok(0) => Err(Broken("the primary closed the connection".into())),
            Ok(_) => self.take_replies(out),
            Err(e) => Err(Broken(e.to_string())),
        }
    }

    /// Moves the whole replies received into `out`.
    fn take_replies(&mut self, out: &mut Out) -> Result<(), Broken> {
        let mut at = 0;
        while let Some(len) = frame::reply_len(&self.received[at..])
            .map_err(|e| Broken(format!("the primary sent {e}")))?
        {
            if self.awaiting == 0 {
                return Err(Broken("the primary sent a reply nobody asked for".into()));
            }
            self.awaiting -= 1;
            at += len;
        }
        out.buf.extend_from_slice(&self.received[..at]);
        self.received.drain(..at);
        Ok(())
    }

    /// Pumps until every command sent has its reply.
    pub(super) async fn finish(&mut self, out: &mut Out) -> Result<(), Broken> {
        while self.awaiting > 0 {
            self.pump(out).await?;
        }
        Ok(())
    }

    /// Answers every command still awaiting its reply: it was with the
    /// primary when `why`, and may or may not have been applied.
    pub(super) fn give_up(&mut self, out: &mut Out, why: &str) {
        for _ in 0..std::mem::take(&mut self.awaiting) {
            out.error(
                "TRYAGAIN",
                &format!(
                    "{why} while the command was with data node {}, the primary of database '{}'; it may or may not have been applied, retry",
                    self.primary, self.db.name
                ),
            );
        }
    }

    /// Lets go of a primary the view has moved away from: the replies it
    /// still gives within `MOVED_GRACE` go to the client, the rest are
    /// answered `TRYAGAIN`. Whether the connection can go on (not if the
    /// old primary held its transaction).
    pub(super) async fn leave_moved(mut self, out: &mut Out) -> bool {
        let answered = tokio::time::timeout(MOVED_GRACE, self.finish(out)).await;
        if !matches!(answered, Ok(Ok(()))) {
            self.give_up(out, "the view moved the primary");
        }
        !self.in_transaction()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_multibulk() {
        assert_eq!(
            command(&[b"AUTH", b"shop", b"k.s"]),
            b"*3\r\n$4\r\nAUTH\r\n$4\r\nshop\r\n$3\r\nk.s\r\n"
        );
    }
}
