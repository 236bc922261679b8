//! The node-to-node transport's framing: each message is a little-endian
//! `u32` length and that many bytes of the message in postcard (a compact,
//! schema-less serde format; record bytes go as length and raw bytes, so a
//! batch of change records costs a copy into the frame and nothing more).
//!
//! Every connection starts with `Hello` from the side that opened it; the
//! other answers `Welcome` or `Refused` and closes.

use serde::{Deserialize, Serialize};
use shoal_wire::schema::TableDef;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Largest frame either side reads: a batch of change records is cut well
/// below it (`link::BATCH_BYTES`), one record is at most a request's size.
pub(crate) const MAX_FRAME: usize = 1 << 30;
/// Largest frame read before the other side has proved it is of the
/// cluster: a stranger cannot make the node set aside more than this.
pub(crate) const MAX_GREETING: usize = 4 << 10;

/// The shape of everything the transport carries — these messages and
/// the MySQL session handoff: a greeting of another version is refused,
/// never misread. Bumped whenever any of them changes.
pub(crate) const TRANSPORT_VERSION: u32 = 1;

/// The first message of every connection, whatever it is for: who opens
/// it, of which build, the view it knows, and proof that it belongs to
/// the cluster.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Greeting<'a> {
    /// `TRANSPORT_VERSION` of the node that opens the connection.
    pub(crate) version: u32,
    pub(crate) node: u32,
    pub(crate) group: u32,
    pub(crate) view: u64,
    #[serde(borrow, with = "serde_bytes")]
    pub(crate) secret: &'a [u8],
}

/// What the transport carries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) enum Message<'a> {
    /// The greeting of a link: the stream, heartbeats, catch-up questions.
    Hello(#[serde(borrow)] Greeting<'a>),
    Welcome {
        node: u32,
        view: u64,
    },
    Refused {
        reason: String,
    },
    /// The primary's table `id` is `database`'s table `def`, for the
    /// records that follow (a backup's own tables may have other ids).
    Table {
        id: u32,
        database: String,
        #[serde(with = "as_json")]
        def: TableDef,
    },
    /// Change records of the stream, in order; the stream is at `last`
    /// after them (records for other nodes alone are not sent).
    Changes {
        last: u64,
        #[serde(borrow)]
        records: Vec<Record<'a>>,
    },
    /// The backup holds the stream up to `seq`: applied, and durable as its
    /// durability says.
    Applied {
        seq: u64,
    },
    /// Sent on an idle link now and then: the sender is alive, in `view`.
    Heartbeat {
        view: u64,
    },
    /// The answer to a heartbeat: the receiver's view, and whether it
    /// serves.
    Alive {
        view: u64,
        serving: bool,
    },
    /// A node back asks to be caught up and let into the view.
    Join {
        node: u32,
    },
    /// The node asked will catch the joining node up, from `view` on:
    /// only a later view lets the joining node in.
    Joining {
        view: u64,
    },
    /// From the node catching `node` up, to another node of the view
    /// `view`: copy your primaries to `node` too, and count it. Answered
    /// `Copied` once it is counted and holds your stream, or `Refused`.
    Copy {
        node: u32,
        view: u64,
    },
    /// The node asked has copied its primaries to the node named in
    /// `Copy`: rows and bytes.
    Copied {
        rows: u64,
        bytes: u64,
    },
    /// A node back waiting to be let in asks whether its catching up is
    /// still under way: answered `Joining` if so, `Refused` if not.
    Progress {
        node: u32,
    },
    /// Instead of `Hello`, the first message of a connection that carries
    /// a Redis client's connection on to this node, the primary of the
    /// client's database: after `Welcome` the connection is RESP, served
    /// by the Redis front end as if the client had connected here.
    Relay(#[serde(borrow)] Greeting<'a>),
    /// Instead of `Hello`, the first message of a connection that sends
    /// REST requests on to this node, the primary of their databases:
    /// after `Welcome` it carries `Request`s one way and `Answer`s the
    /// other.
    Forward(#[serde(borrow)] Greeting<'a>),
    /// A REST request sent on as it came (`path`, its API key if it had
    /// one, its body), by a node of the group that knew view `view`.
    Request {
        id: u64,
        view: u64,
        path: &'a str,
        #[serde(borrow, with = "serde_bytes")]
        key: Option<&'a [u8]>,
        #[serde(borrow, with = "serde_bytes")]
        body: &'a [u8],
    },
    /// The answer to `Request` `id`: its status, the headers a client
    /// reads (`retry-after`, `www-authenticate`), its body.
    Answer {
        id: u64,
        status: u16,
        #[serde(borrow)]
        headers: Vec<(&'a str, &'a str)>,
        #[serde(borrow, with = "serde_bytes")]
        body: &'a [u8],
    },
    /// Sent on a link now and then: the units the sender admitted for
    /// each of its databases with a rate limit since its last report, for
    /// the receiver's limiters to take too.
    Admitted {
        used: Vec<Used>,
    },
    /// A node being caught up answers a digest of catch-up `run` (the
    /// primary's `table`, its `fragment`): the buckets it did not hold
    /// alike, whose rows it has deleted, for the primary to copy.
    Mismatched {
        run: u64,
        table: u32,
        fragment: u16,
        buckets: Vec<u32>,
    },
    /// Instead of `Hello`, the first message of a connection that carries
    /// a MySQL client's session on to this node, the primary of a
    /// database it writes: after `Welcome` comes the session's state, then
    /// the client's packets, served by the MySQL front end.
    RelaySql(#[serde(borrow)] Greeting<'a>),
}

/// Units a node admitted for one database.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Used {
    pub(crate) database: String,
    pub(crate) reads: u64,
    pub(crate) writes: u64,
}

/// One commit's change records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Record<'a>(#[serde(borrow, with = "serde_bytes")] pub(crate) &'a [u8]);

/// Why a connection ended.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FrameError {
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("a frame of {0} bytes, more than the transport takes")]
    TooLarge(usize),
    #[error("a frame that does not decode: {0}")]
    Garbled(#[from] postcard::Error),
}

/// Appends `message` as a frame to `out`.
pub(crate) fn encode(message: &Message<'_>, out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(&[0; 4]);
    // Writing into a Vec cannot fail.
    *out = postcard::to_extend(message, std::mem::take(out)).expect("a message encodes");
    let len = (out.len() - start - 4) as u32;
    out[start..start + 4].copy_from_slice(&len.to_le_bytes());
}

/// Reads the next frame's bytes, at most `max` of them, into `buf`;
/// `Ok(false)` at a clean end of the stream between frames.
pub(crate) async fn read<R: AsyncReadExt + Unpin>(
    reader: &mut R,
    buf: &mut Vec<u8>,
    max: usize,
) -> Result<bool, FrameError> {
    let mut len = [0u8; 4];
    match reader.read_exact(&mut len).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(false),
        Err(e) => return Err(e.into()),
    }
    let len = u32::from_le_bytes(len) as usize;
    if len > max {
        return Err(FrameError::TooLarge(len));
    }
    buf.clear();
    buf.resize(len, 0);
    reader.read_exact(buf).await?;
    Ok(true)
}

/// The message a frame's bytes hold.
pub(crate) fn decode(bytes: &[u8]) -> Result<Message<'_>, FrameError> {
    Ok(postcard::from_bytes(bytes)?)
}

/// Writes one message as a frame.
pub(crate) async fn send<W: AsyncWriteExt + Unpin>(
    writer: &mut W,
    message: &Message<'_>,
) -> Result<(), FrameError> {
    let mut out = Vec::new();
    encode(message, &mut out);
    writer.write_all(&out).await?;
    Ok(())
}

/// A table definition travels as its JSON: its fields at their defaults
/// (no indexes, an ordered primary key) are left out of it, which only a
/// format that names its fields can read back, and frames do not.
mod as_json {
    use serde::{Deserialize, Deserializer, Serializer, de, ser};
    use shoal_wire::schema::TableDef;

    pub(super) fn serialize<S: Serializer>(def: &TableDef, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&serde_json::to_string(def).map_err(ser::Error::custom)?)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<TableDef, D::Error> {
        let json = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        serde_json::from_str(&json).map_err(de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip_through_frames() {
        let records = [Record(b"one"), Record(b"")];
        let messages = [
            Message::Hello(Greeting {
                version: TRANSPORT_VERSION,
                node: 2,
                group: 0,
                view: 3,
                secret: b"s3cret",
            }),
            Message::Changes {
                last: 42,
                records: records.to_vec(),
            },
            Message::Alive {
                view: 3,
                serving: true,
            },
            Message::Applied { seq: 42 },
            // A table with every optional field, and one with none.
            Message::Table {
                id: 3,
                database: "shop".into(),
                def: serde_json::from_str(
                    r#"{"name":"t","columns":[{"name":"id","type":"INT"},{"name":"x","type":"INT","nullable":true}],
                        "primary_key":["id"],"primary_key_index":"hash","indexes":[{"name":"by_x","columns":["x"]}]}"#,
                )
                .unwrap(),
            },
            Message::Table {
                id: 4,
                database: "shop".into(),
                def: serde_json::from_str(
                    r#"{"name":"u","columns":[{"name":"id","type":"INT"}],"primary_key":["id"]}"#,
                )
                .unwrap(),
            },
            Message::Request {
                id: 7,
                view: 3,
                path: "/0.1.0/shop/orders/pk-write",
                key: Some(b"k.s"),
                body: b"{}",
            },
            Message::Answer {
                id: 7,
                status: 429,
                headers: vec![("retry-after", "1")],
                body: b"{}",
            },
            Message::Admitted {
                used: vec![Used {
                    database: "shop".into(),
                    reads: 7,
                    writes: 0,
                }],
            },
        ];
        let mut out = Vec::new();
        for m in &messages {
            encode(m, &mut out);
        }
        crate::test_runtime().block_on(async {
            let mut reader = &out[..];
            let mut buf = Vec::new();
            for m in &messages {
                assert!(read(&mut reader, &mut buf, MAX_FRAME).await.unwrap());
                assert_eq!(&decode(&buf).unwrap(), m);
            }
            assert!(
                !read(&mut reader, &mut buf, MAX_FRAME).await.unwrap(),
                "a clean end"
            );
        });
    }

    #[test]
    fn a_frame_too_large_or_cut_short_or_garbled_is_refused() {
        crate::test_runtime().block_on(async {
            let mut buf = Vec::new();
            let huge = ((MAX_FRAME + 1) as u32).to_le_bytes();
            assert!(matches!(
                read(&mut &huge[..], &mut buf, MAX_FRAME).await,
                Err(FrameError::TooLarge(_))
            ));
            let short = [5, 0, 0, 0, 1];
            assert!(matches!(
                read(&mut &short[..], &mut buf, MAX_FRAME).await,
                Err(FrameError::Io(_))
            ));
            assert!(decode(&[200, 200, 200]).is_err());
        });
    }
}
