//! The MySQL client/server protocol, the part Shoal speaks: packets and
//! their framing, the handshake, OK/ERR/EOF, column definitions, and rows
//! in the text and the binary (prepared statement) forms.
//!
//! A packet is a 3-byte little-endian length, a sequence number and the
//! payload; a payload of 2^24 - 1 bytes or more goes on in the next packet.
//! A payload is read whole only up to `max` bytes: past it the connection
//! is answered error 1153 and closed, as MySQL does past
//! `max_allowed_packet`, so a client cannot make the node hold more.

use std::io;
use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Capability flags (`CLIENT_*`).
pub(super) mod cap {
    pub(crate) const LONG_PASSWORD: u32 = 1;
    pub(crate) const FOUND_ROWS: u32 = 1 << 1;
    pub(crate) const LONG_FLAG: u32 = 1 << 2;
    pub(crate) const CONNECT_WITH_DB: u32 = 1 << 3;
    pub(crate) const PROTOCOL_41: u32 = 1 << 9;
    pub(crate) const SSL: u32 = 1 << 11;
    pub(crate) const TRANSACTIONS: u32 = 1 << 13;
    pub(crate) const SECURE_CONNECTION: u32 = 1 << 15;
    pub(crate) const MULTI_RESULTS: u32 = 1 << 17;
    pub(crate) const PS_MULTI_RESULTS: u32 = 1 << 18;
    pub(crate) const PLUGIN_AUTH: u32 = 1 << 19;
    pub(crate) const CONNECT_ATTRS: u32 = 1 << 20;
    pub(crate) const PLUGIN_AUTH_LENENC_DATA: u32 = 1 << 21;
    pub(crate) const DEPRECATE_EOF: u32 = 1 << 24;

    /// What the node offers. No TLS, compression or multi-statements:
    /// a client that requires them is told so by its own library.
    pub(crate) const SERVER: u32 = LONG_PASSWORD
        | FOUND_ROWS
        | LONG_FLAG
        | CONNECT_WITH_DB
        | PROTOCOL_41
        | TRANSACTIONS
        | SECURE_CONNECTION
        | MULTI_RESULTS
        | PS_MULTI_RESULTS
        | PLUGIN_AUTH
        | CONNECT_ATTRS
        | PLUGIN_AUTH_LENENC_DATA
        | DEPRECATE_EOF;
}

/// Server status flags.
pub(super) mod status {
    pub(crate) const IN_TRANS: u16 = 1;
    pub(crate) const AUTOCOMMIT: u16 = 2;
}

/// Command bytes (`COM_*`).
pub(super) mod com {
    pub(crate) const QUIT: u8 = 0x01;
    pub(crate) const INIT_DB: u8 = 0x02;
    pub(crate) const QUERY: u8 = 0x03;
    pub(crate) const FIELD_LIST: u8 = 0x04;
    pub(crate) const STATISTICS: u8 = 0x09;
    pub(crate) const PING: u8 = 0x0e;
    pub(crate) const STMT_PREPARE: u8 = 0x16;
    pub(crate) const STMT_EXECUTE: u8 = 0x17;
    pub(crate) const STMT_SEND_LONG_DATA: u8 = 0x18;
    pub(crate) const STMT_CLOSE: u8 = 0x19;
    pub(crate) const STMT_RESET: u8 = 0x1a;
    pub(crate) const SET_OPTION: u8 = 0x1b;
    pub(crate) const RESET_CONNECTION: u8 = 0x1f;
}

/// Column types (`MYSQL_TYPE_*`).
pub(super) mod ty {
    pub(crate) const DECIMAL: u8 = 0;
    pub(crate) const TINY: u8 = 1;
    pub(crate) const SHORT: u8 = 2;
    pub(crate) const LONG: u8 = 3;
    pub(crate) const FLOAT: u8 = 4;
    pub(crate) const DOUBLE: u8 = 5;
    pub(crate) const NULL: u8 = 6;
    pub(crate) const TIMESTAMP: u8 = 7;
    pub(crate) const LONGLONG: u8 = 8;
    pub(crate) const INT24: u8 = 9;
    pub(crate) const DATE: u8 = 10;
    pub(crate) const TIME: u8 = 11;
    pub(crate) const DATETIME: u8 = 12;
    pub(crate) const YEAR: u8 = 13;
    pub(crate) const VARCHAR: u8 = 15;
    pub(crate) const BIT: u8 = 16;
    pub(crate) const JSON: u8 = 245;
    pub(crate) const NEWDECIMAL: u8 = 246;
    pub(crate) const ENUM: u8 = 247;
    pub(crate) const SET: u8 = 248;
    pub(crate) const TINY_BLOB: u8 = 249;
    pub(crate) const MEDIUM_BLOB: u8 = 250;
    pub(crate) const LONG_BLOB: u8 = 251;
    pub(crate) const BLOB: u8 = 252;
    pub(crate) const VAR_STRING: u8 = 253;
    pub(crate) const STRING: u8 = 254;
}

/// Column definition flags.
pub(super) mod flag {
    pub(crate) const NOT_NULL: u16 = 1;
    pub(crate) const PRI_KEY: u16 = 2;
    pub(crate) const UNSIGNED: u16 = 32;
    pub(crate) const BINARY: u16 = 128;
    pub(crate) const NUM: u16 = 32768;
}

/// `utf8mb4_general_ci`: what text is sent in.
pub(super) const UTF8MB4: u16 = 45;
/// `binary`: what bytes and numbers are sent in.
pub(super) const BINARY: u16 = 63;
/// The one authentication method: the stored form is SHA-1(SHA-1(secret)).
pub(super) const NATIVE_PASSWORD: &str = "mysql_native_password";
/// Longest payload of one packet; a longer one goes on in the next.
const MAX_PAYLOAD: usize = 0xff_ffff;

/// Why a packet was not read.
#[derive(Debug, thiserror::Error)]
pub(super) enum ReadError {
    #[error(transparent)]
    Io(#[from] io::Error),
    /// The peer closed the connection between packets.
    #[error("the client closed the connection")]
    Closed,
    /// The payload is longer than the connection reads.
    #[error("a packet of more than {0} bytes")]
    TooLarge(usize),
}

/// Reads one payload (joining continued packets), at most `max` bytes:
/// the payload and the sequence number of its last packet.
pub(super) async fn read_packet<R: AsyncRead + Unpin>(
    r: &mut R,
    max: usize,
    payload: &mut Vec<u8>,
) -> Result<u8, ReadError> {
    payload.clear();
    let mut first = true;
    loop {
        let mut head = [0u8; 4];
        if first {
            // A close before a packet begins is a client going away.
            match r.read(&mut head[..1]).await? {
                0 => return Err(ReadError::Closed),
                _ => r.read_exact(&mut head[1..]).await?,
            };
        } else {
            r.read_exact(&mut head).await?;
        }
        first = false;
        let len = usize::from(head[0]) | usize::from(head[1]) << 8 | usize::from(head[2]) << 16;
        if payload.len() + len > max {
            // This packet (at most 16 MiB) is read and dropped, so that a
            // client still sending it reads the refusal, not a reset.
            tokio::io::copy(&mut r.take(len as u64), &mut tokio::io::sink()).await?;
            return Err(ReadError::TooLarge(max));
        }
        let at = payload.len();
        payload.resize(at + len, 0);
        r.read_exact(&mut payload[at..]).await?;
        if len < MAX_PAYLOAD {
            return Ok(head[3]);
        }
    }
}

/// Packets being written: each is framed as it ends, and all are sent on
/// `flush`.
#[derive(Debug, Default)]
pub(super) struct Out {
    buf: Vec<u8>,
    /// Where the packet being written begins (its header's place).
    start: usize,
    /// The next packet's sequence number.
    pub(super) seq: u8,
    /// Bytes sent since `take_sent` was last called.
    sent: u64,
}

impl Out {
    /// Begins a packet; its payload is written with the `put_*` methods.
    pub(super) fn begin(&mut self) {
        self.start = self.buf.len();
        self.buf.extend_from_slice(&[0; 4]);
    }

    /// Ends the packet begun last, splitting a long payload as the
    /// protocol does. One shorter than a packet's most — nearly every
    /// one — has its header written in the place `begin` left for it.
    pub(super) fn end(&mut self) {
        let len = self.buf.len() - self.start - 4;
        if len < MAX_PAYLOAD {
            let l = (len as u32).to_le_bytes();
            self.buf[self.start..self.start + 4].copy_from_slice(&[l[0], l[1], l[2], self.seq]);
            self.seq = self.seq.wrapping_add(1);
            return;
        }
        let payload = self.buf.split_off(self.start + 4);
        self.buf.truncate(self.start);
        let mut rest = &payload[..];
        loop {
            let n = rest.len().min(MAX_PAYLOAD);
            let len = (n as u32).to_le_bytes();
            self.buf
                .extend_from_slice(&[len[0], len[1], len[2], self.seq]);
            self.seq = self.seq.wrapping_add(1);
            self.buf.extend_from_slice(&rest[..n]);
            rest = &rest[n..];
            if n < MAX_PAYLOAD {
                break;
            }
        }
    }

    pub(super) fn pending(&self) -> usize {
        self.buf.len()
    }

    pub(super) async fn flush<W: AsyncWrite + Unpin>(&mut self, w: &mut W) -> io::Result<()> {
        if !self.buf.is_empty() {
            w.write_all(&self.buf).await?;
            self.sent += self.buf.len() as u64;
            self.buf.clear();
        }
        w.flush().await
    }

    /// The bytes written since this was last asked.
    pub(super) fn take_sent(&mut self) -> u64 {
        std::mem::take(&mut self.sent)
    }

    pub(super) fn put(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    pub(super) fn put_u8(&mut self, v: u8) {
        self.buf.push(v);
    }

    pub(super) fn put_u16(&mut self, v: u16) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    pub(super) fn put_u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    pub(super) fn put_lenenc(&mut self, v: u64) {
        shoal_wire::mysql::put_lenenc(&mut self.buf, v);
    }

    pub(super) fn put_lenenc_bytes(&mut self, b: &[u8]) {
        self.put_lenenc(b.len() as u64);
        self.put(b);
    }

    /// The buffer itself, for a value written in place.
    pub(super) fn buf(&mut self) -> &mut Vec<u8> {
        &mut self.buf
    }
}

/// Reads what a client sent, field by field; every read is bounds-checked.
#[derive(Debug)]
pub(super) struct Reader<'a> {
    rest: &'a [u8],
}

/// A client's packet ended early or did not hold what it should.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("malformed packet")]
pub(super) struct Malformed;

impl<'a> Reader<'a> {
    pub(super) fn new(bytes: &'a [u8]) -> Reader<'a> {
        Reader { rest: bytes }
    }

    pub(super) fn rest(&self) -> &'a [u8] {
        self.rest
    }

    pub(super) fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    pub(super) fn take(&mut self, n: usize) -> Result<&'a [u8], Malformed> {
        if self.rest.len() < n {
            return Err(Malformed);
        }
        let (taken, rest) = self.rest.split_at(n);
        self.rest = rest;
        Ok(taken)
    }

    pub(super) fn u8(&mut self) -> Result<u8, Malformed> {
        Ok(self.take(1)?[0])
    }

    pub(super) fn u16(&mut self) -> Result<u16, Malformed> {
        Ok(u16::from_le_bytes(self.take(2)?.try_into().expect("2")))
    }

    pub(super) fn u32(&mut self) -> Result<u32, Malformed> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().expect("4")))
    }

    pub(super) fn u64(&mut self) -> Result<u64, Malformed> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().expect("8")))
    }

    pub(super) fn lenenc(&mut self) -> Result<u64, Malformed> {
        let (v, used) = shoal_wire::mysql::lenenc(self.rest).ok_or(Malformed)?;
        self.take(used)?;
        Ok(v)
    }

    pub(super) fn lenenc_bytes(&mut self) -> Result<&'a [u8], Malformed> {
        let n = self.lenenc()?;
        self.take(usize::try_from(n).map_err(|_| Malformed)?)
    }

    /// Bytes up to a NUL, which is taken and not returned.
    pub(super) fn nul_terminated(&mut self) -> Result<&'a [u8], Malformed> {
        let end = self.rest.iter().position(|&b| b == 0).ok_or(Malformed)?;
        let s = &self.rest[..end];
        self.rest = &self.rest[end + 1..];
        Ok(s)
    }
}

/// The first packet the server sends: who it is, and the scramble the
/// client proves it knows the secret with.
pub(super) fn greeting(out: &mut Out, version: &str, connection_id: u32, scramble: &[u8; 20]) {
    out.begin();
    out.put_u8(10);
    out.put(version.as_bytes());
    out.put_u8(0);
    out.put_u32(connection_id);
    out.put(&scramble[..8]);
    out.put_u8(0);
    out.put_u16(cap::SERVER as u16);
    out.put_u8(UTF8MB4 as u8);
    out.put_u16(status::AUTOCOMMIT);
    out.put_u16((cap::SERVER >> 16) as u16);
    out.put_u8(21);
    out.put(&[0; 10]);
    out.put(&scramble[8..]);
    out.put_u8(0);
    out.put(NATIVE_PASSWORD.as_bytes());
    out.put_u8(0);
    out.end();
}

/// What a client answers the greeting with.
#[derive(Debug)]
pub(super) struct Login {
    pub(super) capabilities: u32,
    pub(super) user: Vec<u8>,
    pub(super) auth: Vec<u8>,
    pub(super) database: Option<Vec<u8>>,
    pub(super) plugin: Option<Vec<u8>>,
}

/// Reads a HandshakeResponse41. `Ok(None)`: the client asked for TLS,
/// which the node does not offer.
pub(super) fn login(payload: &[u8]) -> Result<Option<Login>, Malformed> {
    let mut r = Reader::new(payload);
    let capabilities = r.u32()?;
    if capabilities & cap::PROTOCOL_41 == 0 {
        return Err(Malformed);
    }
    let _max_packet = r.u32()?;
    let _charset = r.u8()?;
    r.take(23)?;
    if capabilities & cap::SSL != 0 && r.is_empty() {
        return Ok(None);
    }
    let user = r.nul_terminated()?.to_vec();
    let auth = if capabilities & cap::PLUGIN_AUTH_LENENC_DATA != 0 {
        r.lenenc_bytes()?
    } else if capabilities & cap::SECURE_CONNECTION != 0 {
        let n = r.u8()?;
        r.take(usize::from(n))?
    } else {
        r.nul_terminated()?
    }
    .to_vec();
    let database = if capabilities & cap::CONNECT_WITH_DB != 0 && !r.is_empty() {
        Some(r.nul_terminated()?.to_vec()).filter(|d| !d.is_empty())
    } else {
        None
    };
    let plugin = if capabilities & cap::PLUGIN_AUTH != 0 && !r.is_empty() {
        Some(r.nul_terminated()?.to_vec())
    } else {
        None
    };
    // Connection attributes follow; nothing of them is used.
    Ok(Some(Login {
        capabilities,
        user,
        auth,
        database,
        plugin,
    }))
}

/// Asks the client to answer the scramble with `mysql_native_password`.
pub(super) fn auth_switch(out: &mut Out, scramble: &[u8; 20]) {
    out.begin();
    out.put_u8(0xfe);
    out.put(NATIVE_PASSWORD.as_bytes());
    out.put_u8(0);
    out.put(scramble);
    out.put_u8(0);
    out.end();
}

/// What an OK packet says.
#[derive(Debug, Default, Clone)]
pub(super) struct Ok {
    pub(super) affected_rows: u64,
    pub(super) last_insert_id: u64,
    pub(super) status: u16,
    pub(super) warnings: u16,
    pub(super) info: String,
}

pub(super) fn ok(out: &mut Out, ok: &Ok) {
    ok_with_header(out, 0x00, ok);
}

/// An OK packet, or (`0xfe`) the OK that ends a result set in place of
/// an EOF.
fn ok_with_header(out: &mut Out, header: u8, ok: &Ok) {
    out.begin();
    out.put_u8(header);
    out.put_lenenc(ok.affected_rows);
    out.put_lenenc(ok.last_insert_id);
    out.put_u16(ok.status);
    out.put_u16(ok.warnings);
    // Clients read the note length-encoded, whatever the protocol
    // documents say of it without session tracking.
    if !ok.info.is_empty() {
        out.put_lenenc_bytes(ok.info.as_bytes());
    }
    out.end();
}

pub(super) fn err(out: &mut Out, code: u16, state: &str, message: &str) {
    out.begin();
    out.put_u8(0xff);
    out.put_u16(code);
    out.put_u8(b'#');
    out.put(&state.as_bytes()[..5]);
    // A message is bounded, as MySQL's are (MYSQL_ERRMSG_SIZE).
    let mut end = message.len().min(511);
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    out.put(&message.as_bytes()[..end]);
    out.end();
}

/// Ends column definitions, or rows: an EOF packet, or for a client that
/// takes none (`DEPRECATE_EOF`) nothing after columns and an OK after rows.
pub(super) fn eof(out: &mut Out, capabilities: u32, status: u16, after_rows: bool) {
    if capabilities & cap::DEPRECATE_EOF != 0 {
        if after_rows {
            let ok = Ok {
                status,
                ..Ok::default()
            };
            ok_with_header(out, 0xfe, &ok);
        }
        return;
    }
    out.begin();
    out.put_u8(0xfe);
    out.put_u16(0);
    out.put_u16(status);
    out.end();
}

/// One column of a result, as a client is told of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ColumnDef {
    pub(super) schema: String,
    pub(super) table: String,
    pub(super) name: String,
    pub(super) charset: u16,
    /// Longest value, as MySQL counts it.
    pub(super) length: u32,
    pub(super) ty: u8,
    pub(super) flags: u16,
    pub(super) decimals: u8,
}

pub(super) fn column(out: &mut Out, c: &ColumnDef) {
    out.begin();
    out.put_lenenc_bytes(b"def");
    out.put_lenenc_bytes(c.schema.as_bytes());
    out.put_lenenc_bytes(c.table.as_bytes());
    out.put_lenenc_bytes(c.table.as_bytes());
    out.put_lenenc_bytes(c.name.as_bytes());
    out.put_lenenc_bytes(c.name.as_bytes());
    out.put_u8(0x0c);
    out.put_u16(c.charset);
    out.put_u32(c.length);
    out.put_u8(c.ty);
    out.put_u16(c.flags);
    out.put_u8(c.decimals);
    out.put_u16(0);
    out.end();
}

/// Column definitions of a result set, after its column count.
pub(super) fn columns(out: &mut Out, capabilities: u32, status: u16, columns: &[ColumnDef]) {
    out.begin();
    out.put_lenenc(columns.len() as u64);
    out.end();
    for c in columns {
        column(out, c);
    }
    eof(out, capabilities, status, false);
}

/// The column definitions a prepared statement's execute last answered,
/// as packets: an execute of a kept plan answers the same columns (the
/// same `Arc`) every time, so they are encoded once and copied after.
#[derive(Debug, Default)]
pub(super) struct SentColumns {
    /// The columns, the capabilities and status they were written with,
    /// and the sequence number they began at.
    of: Option<(Arc<[ColumnDef]>, u32, u16, u8)>,
    packets: Vec<u8>,
    /// The sequence number after them.
    seq_after: u8,
}

/// The most bytes of column definitions a connection keeps for its next
/// execute: a result of a few hundred columns is encoded each time.
const KEEP_COLUMNS: usize = 16 << 10;

impl SentColumns {
    /// `columns(out, …)`, from the packets kept if they are these.
    pub(super) fn write(
        &mut self,
        out: &mut Out,
        capabilities: u32,
        status: u16,
        cols: &Arc<[ColumnDef]>,
    ) {
        let same = |(c, caps, st, seq): &(Arc<[ColumnDef]>, u32, u16, u8)| {
            Arc::ptr_eq(c, cols) && *caps == capabilities && *st == status && *seq == out.seq
        };
        if self.of.as_ref().is_some_and(same) {
            out.buf.extend_from_slice(&self.packets);
            out.seq = self.seq_after;
            return;
        }
        let (start, seq) = (out.buf.len(), out.seq);
        columns(out, capabilities, status, cols);
        self.of = None;
        self.packets.clear();
        if out.buf.len() - start <= KEEP_COLUMNS {
            self.packets.extend_from_slice(&out.buf[start..]);
            self.seq_after = out.seq;
            self.of = Some((Arc::clone(cols), capabilities, status, seq));
        }
    }
}

/// A prepared statement's answer: its id, its parameters and columns.
pub(super) fn prepared(
    out: &mut Out,
    capabilities: u32,
    id: u32,
    params: u16,
    columns: &[ColumnDef],
) {
    out.begin();
    out.put_u8(0);
    out.put_u32(id);
    out.put_u16(columns.len() as u16);
    out.put_u16(params);
    out.put_u8(0);
    out.put_u16(0);
    out.end();
    if params > 0 {
        let param = ColumnDef {
            schema: String::new(),
            table: String::new(),
            name: "?".into(),
            charset: BINARY,
            length: 0,
            ty: ty::VAR_STRING,
            flags: 0,
            decimals: 0,
        };
        for _ in 0..params {
            column(out, &param);
        }
        eof(out, capabilities, 0, false);
    }
    if !columns.is_empty() {
        for c in columns {
            column(out, c);
        }
        eof(out, capabilities, 0, false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_column_packets_are_what_encoding_them_again_writes() {
        let def = |name: &str| ColumnDef {
            schema: "db".into(),
            table: "t".into(),
            name: name.into(),
            charset: 63,
            length: 11,
            ty: 3,
            flags: 0,
            decimals: 0,
        };
        let a: Arc<[ColumnDef]> = vec![def("id"), def("c")].into();
        let a_again: Arc<[ColumnDef]> = vec![def("id"), def("k")].into();
        let b: Arc<[ColumnDef]> = vec![def("k")].into();
        let mut kept = SentColumns::default();
        // Each execute: the columns, capabilities, status and sequence
        // number it answers with; kept or not, the bytes must be a fresh
        // encoding's.
        for (cols, caps, status, seq) in [
            (&a, 0, 2, 1),
            (&a, 0, 2, 1),
            (&a, 0, 3, 1),
            (&a, 0, 3, 1),
            (&a, 1 << 24, 3, 1),
            (&a, 1 << 24, 3, 2),
            (&a_again, 1 << 24, 3, 2),
            (&b, 0, 2, 1),
            (&a, 0, 2, 1),
        ] {
            let mut fresh = Out {
                seq,
                ..Out::default()
            };
            columns(&mut fresh, caps, status, cols);
            let mut out = Out {
                seq,
                ..Out::default()
            };
            out.put(b"before");
            kept.write(&mut out, caps, status, cols);
            assert_eq!(&out.buf[6..], &fresh.buf[..], "{caps} {status} {seq}");
            assert_eq!(out.seq, fresh.seq);
        }
        // Too many columns to keep: encoded each time, nothing held.
        let wide: Arc<[ColumnDef]> = (0..1000).map(|i| def(&format!("c{i}"))).collect();
        let mut out = Out::default();
        kept.write(&mut out, 0, 2, &wide);
        assert!(kept.of.is_none() && kept.packets.is_empty());
    }

    #[tokio::test]
    async fn a_long_payload_is_split_and_joined_again() {
        for len in [
            0,
            1,
            MAX_PAYLOAD - 1,
            MAX_PAYLOAD,
            MAX_PAYLOAD + 1,
            2 * MAX_PAYLOAD,
        ] {
            let mut out = Out {
                seq: 3,
                ..Out::default()
            };
            out.begin();
            let payload: Vec<u8> = (0..len).map(|i| i as u8).collect();
            out.put(&payload);
            out.end();
            let mut wire: &[u8] = &out.buf;
            let mut read = Vec::new();
            let last = read_packet(&mut wire, 64 << 20, &mut read).await.unwrap();
            assert_eq!(read, payload, "{len} bytes");
            assert_eq!(last, 3 + (len / MAX_PAYLOAD) as u8);
            assert!(wire.is_empty());
        }
    }

    #[tokio::test]
    async fn a_payload_past_the_limit_is_refused_before_it_is_read() {
        let mut out = Out::default();
        out.begin();
        out.put(&[7; 1000]);
        out.end();
        let mut wire: &[u8] = &out.buf;
        let mut read = Vec::new();
        assert!(matches!(
            read_packet(&mut wire, 999, &mut read).await,
            Err(ReadError::TooLarge(999))
        ));
        assert!(read.capacity() < 1000);
        let mut empty: &[u8] = &[];
        assert!(matches!(
            read_packet(&mut empty, 999, &mut read).await,
            Err(ReadError::Closed)
        ));
    }

    #[test]
    fn length_encoded_integers_read_back() {
        let mut b = Vec::new();
        shoal_wire::mysql::put_lenenc(&mut b, 0x1_0000);
        b.push(7);
        let mut r = Reader::new(&b);
        assert_eq!(r.lenenc(), Ok(0x1_0000));
        assert_eq!(r.lenenc(), Ok(7));
        assert!(r.is_empty());
        assert_eq!(Reader::new(&[0xfb]).lenenc(), Err(Malformed));
        assert_eq!(Reader::new(&[0xfe, 1]).lenenc(), Err(Malformed));
    }
}
