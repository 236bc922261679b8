//! A connection to a database this node holds a backup of is handed to the
//! database's primary once it has authenticated: the node opens a
//! connection of its own to the primary's Redis port, authenticates it the
//! same way, and from then on relays bytes both ways. Every command then
//! runs where the database's writes are made — read-modify-write commands,
//! `WATCH` and `MULTI` need their keys' locks in one place.

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Longest the node waits to reach the primary and authenticate there.
const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// Where and how to hand a connection on.
pub(super) struct Target {
    pub(super) db: std::sync::Arc<crate::tc::Database>,
    pub(super) cluster: crate::cluster::Cluster,
    pub(super) addr: String,
    pub(super) primary: u32,
    pub(super) database: String,
    pub(super) key: Vec<u8>,
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

/// Opens and authenticates the connection to the primary: the stream, or
/// the error to answer the client with.
async fn open(target: &Target) -> Result<TcpStream, String> {
    let unreachable = |e: String| {
        format!(
            "ERR data node {}, the primary of database '{}', cannot be reached ({e}); retry",
            target.primary, target.database
        )
    };
    let mut upstream = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(&target.addr))
        .await
        .map_err(|_| unreachable("timed out".into()))?
        .map_err(|e| unreachable(e.to_string()))?;
    let _ = upstream.set_nodelay(true);
    // AUTH, the protocol if RESP3, then an ECHO of a marker: everything up
    // to the marker's reply answers the greeting.
    let mut marker = [0u8; 8];
    getrandom::fill(&mut marker).expect("the OS random source works");
    let marker: String = marker.iter().map(|b| format!("{b:02x}")).collect();
    let mut greeting = command(&[b"AUTH", target.database.as_bytes(), &target.key]);
    if target.resp3 {
        greeting.extend(command(&[b"HELLO", b"3"]));
    }
    greeting.extend(command(&[b"ECHO", marker.as_bytes()]));
    let handshake = async {
        upstream.write_all(&greeting).await?;
        let mut seen = Vec::new();
        let end = format!("{marker}\r\n");
        while !seen.ends_with(end.as_bytes()) {
            if seen.len() > 64 << 10 || upstream.read_buf(&mut seen).await? == 0 {
                return Err(std::io::Error::other("the primary closed the connection"));
            }
        }
        Ok(seen)
    };
    let seen = tokio::time::timeout(CONNECT_TIMEOUT, handshake)
        .await
        .map_err(|_| unreachable("no answer".into()))?
        .map_err(|e| unreachable(e.to_string()))?;
    if !seen.starts_with(b"+OK\r\n") {
        let first = seen.split(|&b| b == b'\r').next().unwrap_or_default();
        return Err(String::from_utf8_lossy(first.strip_prefix(b"-").unwrap_or(first)).into());
    }
    Ok(upstream)
}

/// Hands `client` to the primary: `pending` (bytes the client sent that
/// were not yet run) go first. Ends when either side closes.
pub(super) async fn relay(mut client: TcpStream, target: Target, pending: &[u8]) {
    let mut upstream = match open(&target).await {
        Ok(upstream) => upstream,
        Err(error) => {
            let _ = client.write_all(format!("-{error}\r\n").as_bytes()).await;
            return;
        }
    };
    if upstream.write_all(pending).await.is_err() {
        return;
    }
    // Once the view moves the database's primary (that node failed or
    // paused), the connection is closed: the client reconnects, and is
    // handed to the new primary or served here.
    let moved = (target.cluster).moved(std::slice::from_ref(&target.db), target.primary);
    tokio::select! {
        _ = tokio::io::copy_bidirectional(&mut client, &mut upstream) => {}
        () = moved => {}
    }
}
