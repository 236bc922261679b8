//! RESP framing: commands in, replies out.
//!
//! A command is an array of bulk strings (`*2\r\n$3\r\nGET\r\n$1\r\nk\r\n`),
//! or an inline line (`PING\r\n`) as typed into a terminal. The parser works
//! on whatever bytes have arrived: it answers a whole command, "not yet", or
//! a protocol error — after which the connection is closed, as Redis does.
//! Every length is checked before anything is buffered for it, so a client
//! cannot make the node hold more than the limits.

use std::ops::Range;

/// Limits on one command.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FrameLimits {
    /// Most arguments in one command.
    pub max_args: usize,
    /// Largest command, in bytes on the wire; bounds every bulk string.
    pub max_command_bytes: usize,
}

/// Longest inline command line, and longest `*`/`$` header line.
const MAX_INLINE: usize = 64 * 1024;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ProtocolError {
    #[error("Protocol error: invalid multibulk length")]
    MultibulkLength,
    #[error("Protocol error: invalid bulk length")]
    BulkLength,
    #[error("Protocol error: expected '$', got '{0}'")]
    ExpectedBulk(char),
    #[error("Protocol error: the command is larger than the {0} bytes allowed")]
    TooLarge(usize),
    #[error("Protocol error: too big inline request")]
    InlineTooLong,
    #[error("Protocol error: unbalanced quotes in request")]
    Unbalanced,
    #[error("Protocol error: bulk string not followed by CRLF")]
    MissingCrlf,
}

/// Parses commands; reusable, it keeps its buffers.
#[derive(Debug)]
pub(crate) struct Parser {
    limits: FrameLimits,
    /// Where each argument of the last command lies in the buffer parsed.
    args: Vec<Range<usize>>,
    /// Arguments of an inline command, unquoted.
    inline: Vec<Vec<u8>>,
}

/// Where the arguments of a parsed command are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Parsed {
    /// A command of `len` bytes at the buffer's start.
    Command { len: usize },
    /// More bytes are needed; at least this many in all, when known.
    Incomplete { need: Option<usize> },
}

impl Parser {
    pub(crate) fn new(limits: FrameLimits) -> Parser {
        Parser {
            limits,
            args: Vec::new(),
            inline: Vec::new(),
        }
    }

    /// Parses the command at the start of `buf`.
    pub(crate) fn parse(&mut self, buf: &[u8]) -> Result<Parsed, ProtocolError> {
        self.args.clear();
        self.inline.clear();
        match buf.first() {
            None => Ok(Parsed::Incomplete { need: None }),
            Some(b'*') => self.parse_multibulk(buf),
            Some(_) => self.parse_inline(buf),
        }
    }

    /// Where the arguments of the command just parsed lie in the buffer
    /// parsed; `None` for an inline command, whose arguments are unquoted.
    pub(crate) fn ranges(&self) -> Option<&[Range<usize>]> {
        self.inline.is_empty().then_some(&self.args)
    }

    /// The arguments of the command just parsed, in `buf`.
    pub(crate) fn args<'a>(
        &'a self,
        buf: &'a [u8],
    ) -> impl ExactSizeIterator<Item = &'a [u8]> + 'a {
        let inline = self.inline.iter().map(Vec::as_slice);
        let ranges = self.args.iter().map(move |r| &buf[r.clone()]);
        // One of the two is empty.
        Args {
            inline,
            ranges,
            len: self.args.len() + self.inline.len(),
        }
    }

    fn parse_multibulk(&mut self, buf: &[u8]) -> Result<Parsed, ProtocolError> {
        let Some((count, mut at)) = header(buf, 0)? else {
            return Ok(Parsed::Incomplete { need: None });
        };
        if count > self.limits.max_args as i64 {
            return Err(ProtocolError::MultibulkLength);
        }
        if count <= 0 {
            // `*0` and `*-1` are empty commands: skipped.
            return Ok(Parsed::Command { len: at });
        }
        for _ in 0..count {
            match buf.get(at) {
                None => return Ok(Parsed::Incomplete { need: None }),
                Some(b'$') => {}
                Some(&c) => return Err(ProtocolError::ExpectedBulk(c as char)),
            }
            let Some((len, start)) = header(buf, at)? else {
                return Ok(Parsed::Incomplete { need: None });
            };
            if len < 0 || len as u64 > self.limits.max_command_bytes as u64 {
                return Err(ProtocolError::BulkLength);
            }
            let end = start + len as usize;
            if end + 2 > self.limits.max_command_bytes {
                return Err(ProtocolError::TooLarge(self.limits.max_command_bytes));
            }
            if buf.len() < end + 2 {
                return Ok(Parsed::Incomplete {
                    need: Some(end + 2),
                });
            }
            if &buf[end..end + 2] != b"\r\n" {
                return Err(ProtocolError::MissingCrlf);
            }
            self.args.push(start..end);
            at = end + 2;
        }
        Ok(Parsed::Command { len: at })
    }

    fn parse_inline(&mut self, buf: &[u8]) -> Result<Parsed, ProtocolError> {
        let Some(nl) = buf.iter().take(MAX_INLINE).position(|&b| b == b'\n') else {
            if buf.len() >= MAX_INLINE {
                return Err(ProtocolError::InlineTooLong);
            }
            return Ok(Parsed::Incomplete { need: None });
        };
        let line = buf[..nl].strip_suffix(b"\r").unwrap_or(&buf[..nl]);
        self.inline = split_inline(line)?;
        if self.inline.len() > self.limits.max_args {
            return Err(ProtocolError::MultibulkLength);
        }
        Ok(Parsed::Command { len: nl + 1 })
    }
}

struct Args<I, R> {
    inline: I,
    ranges: R,
    len: usize,
}

impl<'a, I, R> Iterator for Args<I, R>
where
    I: Iterator<Item = &'a [u8]>,
    R: Iterator<Item = &'a [u8]>,
{
    type Item = &'a [u8];
    fn next(&mut self) -> Option<&'a [u8]> {
        let next = self.ranges.next().or_else(|| self.inline.next());
        if next.is_some() {
            self.len -= 1;
        }
        next
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.len, Some(self.len))
    }
}

impl<'a, I, R> ExactSizeIterator for Args<I, R>
where
    I: Iterator<Item = &'a [u8]>,
    R: Iterator<Item = &'a [u8]>,
{
}

/// A `*<n>\r\n` or `$<n>\r\n` line at `at`: the number and where the next
/// line starts, or `None` when the line has not all arrived.
fn header(buf: &[u8], at: usize) -> Result<Option<(i64, usize)>, ProtocolError> {
    let line = &buf[at + 1..];
    let Some(cr) = line.iter().take(32).position(|&b| b == b'\r') else {
        if line.len() >= 32 {
            return Err(ProtocolError::MultibulkLength);
        }
        return Ok(None);
    };
    if line.len() < cr + 2 {
        return Ok(None);
    }
    if line[cr + 1] != b'\n' {
        return Err(ProtocolError::MissingCrlf);
    }
    let bad = || {
        if buf[at] == b'*' {
            ProtocolError::MultibulkLength
        } else {
            ProtocolError::BulkLength
        }
    };
    let n = parse_length(&line[..cr]).ok_or_else(bad)?;
    Ok(Some((n, at + 1 + cr + 2)))
}

/// A length as `*` and `$` lines carry it: an optional `-`, then 1 to 18
/// digits (more cannot be a length anyone means).
fn parse_length(text: &[u8]) -> Option<i64> {
    let (negative, digits) = match text {
        [b'-', rest @ ..] => (true, rest),
        _ => (false, text),
    };
    if digits.is_empty() || digits.len() > 18 {
        return None;
    }
    let mut n: i64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        n = n * 10 + i64::from(d - b'0');
    }
    Some(if negative { -n } else { n })
}

/// Splits an inline command into arguments: spaces separate, double quotes
/// (with `\n`, `\r`, `\t`, `\\`, `\"` and `\xHH`) and single quotes group.
fn split_inline(line: &[u8]) -> Result<Vec<Vec<u8>>, ProtocolError> {
    let mut args = Vec::new();
    let mut i = 0;
    while i < line.len() {
        while i < line.len() && line[i].is_ascii_whitespace() {
            i += 1;
        }
        if i == line.len() {
            break;
        }
        let mut arg = Vec::new();
        match line[i] {
            b'"' => {
                i += 1;
                loop {
                    match line.get(i) {
                        None => return Err(ProtocolError::Unbalanced),
                        Some(b'"') => break,
                        Some(b'\\') => {
                            let (byte, used) = unescape(&line[i + 1..])?;
                            arg.push(byte);
                            i += used;
                        }
                        Some(&b) => arg.push(b),
                    }
                    i += 1;
                }
                i += 1;
            }
            b'\'' => {
                i += 1;
                loop {
                    match line.get(i) {
                        None => return Err(ProtocolError::Unbalanced),
                        Some(b'\'') => break,
                        Some(b'\\') if line.get(i + 1) == Some(&b'\'') => {
                            arg.push(b'\'');
                            i += 1;
                        }
                        Some(&b) => arg.push(b),
                    }
                    i += 1;
                }
                i += 1;
            }
            _ => {
                while i < line.len() && !line[i].is_ascii_whitespace() {
                    arg.push(line[i]);
                    i += 1;
                }
            }
        }
        if i < line.len() && !line[i].is_ascii_whitespace() {
            return Err(ProtocolError::Unbalanced);
        }
        args.push(arg);
    }
    Ok(args)
}

/// The byte a backslash escape stands for, and how many bytes after the
/// backslash it took.
fn unescape(rest: &[u8]) -> Result<(u8, usize), ProtocolError> {
    let hex = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    Ok(match rest {
        [b'x', h, l, ..] if hex(*h).is_some() && hex(*l).is_some() => {
            (hex(*h).expect("hex") << 4 | hex(*l).expect("hex"), 3)
        }
        [b'n', ..] => (b'\n', 1),
        [b'r', ..] => (b'\r', 1),
        [b't', ..] => (b'\t', 1),
        [b'b', ..] => (8, 1),
        [b'a', ..] => (7, 1),
        [c, ..] => (*c, 1),
        [] => return Err(ProtocolError::Unbalanced),
    })
}

/// Replies, written into one buffer per round of pipelined commands.
#[derive(Debug, Default)]
pub(crate) struct Out {
    pub buf: Vec<u8>,
    /// RESP3 (after `HELLO 3`): nulls, maps and doubles have their own types.
    pub resp3: bool,
}

impl Out {
    pub(crate) fn simple(&mut self, s: &str) {
        self.buf.push(b'+');
        self.buf.extend_from_slice(s.as_bytes());
        self.buf.extend_from_slice(b"\r\n");
    }

    pub(crate) fn ok(&mut self) {
        self.buf.extend_from_slice(b"+OK\r\n");
    }

    /// An error: `prefix` is its first word (`ERR`, `WRONGTYPE`, …).
    pub(crate) fn error(&mut self, prefix: &str, message: &str) {
        self.buf.push(b'-');
        self.buf.extend_from_slice(prefix.as_bytes());
        self.buf.push(b' ');
        // A reply line cannot hold a line break.
        self.buf.extend(
            message
                .bytes()
                .map(|b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
        );
        self.buf.extend_from_slice(b"\r\n");
    }

    pub(crate) fn int(&mut self, n: i64) {
        self.line(b':', n);
    }

    pub(crate) fn bulk(&mut self, data: &[u8]) {
        self.line(b'$', data.len() as i64);
        self.buf.extend_from_slice(data);
        self.buf.extend_from_slice(b"\r\n");
    }

    pub(crate) fn null(&mut self) {
        if self.resp3 {
            self.buf.extend_from_slice(b"_\r\n");
        } else {
            self.buf.extend_from_slice(b"$-1\r\n");
        }
    }

    /// The null array: RESP2's `*-1`, RESP3's null (`EXEC` aborted by `WATCH`).
    pub(crate) fn null_array(&mut self) {
        if self.resp3 {
            self.buf.extend_from_slice(b"_\r\n");
        } else {
            self.buf.extend_from_slice(b"*-1\r\n");
        }
    }

    pub(crate) fn array(&mut self, len: usize) {
        self.line(b'*', len as i64);
    }

    /// An array of values, a null for each missing one (`MGET`).
    pub(crate) fn values(&mut self, values: &[Option<Vec<u8>>]) {
        self.array(values.len());
        for value in values {
            match value {
                Some(v) => self.bulk(v),
                None => self.null(),
            }
        }
    }

    /// A map of `len` pairs: RESP3's map, or a flat array in RESP2.
    pub(crate) fn map(&mut self, len: usize) {
        if self.resp3 {
            self.line(b'%', len as i64);
        } else {
            self.line(b'*', 2 * len as i64);
        }
    }

    /// A set of `len` elements: RESP3's set, or an array in RESP2.
    pub(crate) fn set(&mut self, len: usize) {
        if self.resp3 {
            self.line(b'~', len as i64);
        } else {
            self.line(b'*', len as i64);
        }
    }

    /// A hash's fields and values (`HGETALL`).
    pub(crate) fn hash_all(&mut self, fields: &[(Vec<u8>, Vec<u8>)]) {
        self.map(fields.len());
        for (field, value) in fields {
            self.bulk(field);
            self.bulk(value);
        }
    }

    /// The value of one field of a hash, or null (`HGET`).
    pub(crate) fn hash_field(&mut self, fields: &[(Vec<u8>, Vec<u8>)], want: &[u8]) {
        match fields.iter().find(|(field, _)| field == want) {
            Some((_, value)) => self.bulk(value),
            None => self.null(),
        }
    }

    fn line(&mut self, kind: u8, n: i64) {
        use std::io::Write;
        self.buf.push(kind);
        let _ = write!(self.buf, "{n}\r\n");
    }
}

/// Most elements one reply may nest, all levels together: a reply relayed
/// from another node is read only this far before it is judged garbled.
const MAX_REPLY_ELEMENTS: u64 = 1 << 32;

/// A reply that is not RESP.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a reply that is not RESP")]
pub(crate) struct GarbledReply;

/// The length of the whole reply at the start of `buf` — RESP2 or RESP3,
/// aggregates and attributes included — or `None` while more bytes are
/// needed. For a connection relayed to another node, which counts the
/// replies it passes on: it looks at each header once and steps over
/// bulk payloads without reading them.
pub(crate) fn reply_len(buf: &[u8]) -> Result<Option<usize>, GarbledReply> {
    let mut at = 0;
    // Values still to read, at every level of nesting.
    let mut want: u64 = 1;
    while want > 0 {
        want -= 1;
        let Some(kind) = buf.get(at).copied() else {
            return Ok(None);
        };
        let Some(end) = memchr_crlf(&buf[at + 1..]) else {
            if buf.len() - at > MAX_INLINE {
                return Err(GarbledReply);
            }
            return Ok(None);
        };
        let line = &buf[at + 1..at + 1 + end];
        at += end + 3;
        let count = || -> Result<i64, GarbledReply> {
            let text = std::str::from_utf8(line).map_err(|_| GarbledReply)?;
            text.parse().map_err(|_| GarbledReply)
        };
        match kind {
            b'+' | b'-' | b':' | b'_' | b',' | b'#' | b'(' => {}
            b'$' | b'!' | b'=' => {
                let n = count()?;
                if n < 0 {
                    if n != -1 || kind != b'$' {
                        return Err(GarbledReply);
                    }
                    continue;
                }
                let end = at + n as usize + 2;
                if buf.len() < end {
                    return Ok(None);
                }
                if &buf[end - 2..end] != b"\r\n" {
                    return Err(GarbledReply);
                }
                at = end;
            }
            b'*' | b'~' | b'>' | b'%' | b'|' => {
                let n = count()?;
                if n < 0 {
                    if n != -1 || kind != b'*' {
                        return Err(GarbledReply);
                    }
                    continue;
                }
                let n = n as u64;
                want += match kind {
                    b'%' => 2 * n,
                    // An attribute's pairs come before the value they describe.
                    b'|' => 2 * n + 1,
                    _ => n,
                };
                if want > MAX_REPLY_ELEMENTS {
                    return Err(GarbledReply);
                }
            }
            _ => return Err(GarbledReply),
        }
    }
    Ok(Some(at))
}

/// Where the first `\r\n` of `bytes` starts.
fn memchr_crlf(bytes: &[u8]) -> Option<usize> {
    bytes.windows(2).position(|w| w == b"\r\n")
}

/// What must hold of any bytes a client sends, checked by the fuzz target
/// (`fuzz/fuzz_targets/resp_parser.rs`) and by the test suite: parsing
/// never panics; a command found lies within the bytes; and its arguments,
/// sent again as a multibulk command, parse back to the same arguments.
#[cfg(any(test, feature = "testing"))]
#[cfg_attr(not(feature = "testing"), allow(unreachable_pub))]
pub fn check_parse(bytes: &[u8]) {
    let limits = FrameLimits {
        max_args: 1024,
        max_command_bytes: 1 << 16,
    };
    let mut parser = Parser::new(limits);
    let mut at = 0;
    // Every command in the bytes, as a pipelining client would send them.
    while let Ok(Parsed::Command { len }) = parser.parse(&bytes[at..]) {
        assert!(
            len > 0 && at + len <= bytes.len(),
            "a command within the input"
        );
        let args: Vec<Vec<u8>> = parser
            .args(&bytes[at..at + len])
            .map(<[u8]>::to_vec)
            .collect();
        let mut wire = format!("*{}\r\n", args.len()).into_bytes();
        for arg in &args {
            wire.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
            wire.extend_from_slice(arg);
            wire.extend_from_slice(b"\r\n");
        }
        let mut again = Parser::new(limits);
        match again.parse(&wire) {
            Ok(Parsed::Command { len: n }) => {
                assert_eq!(n, wire.len());
                let back: Vec<Vec<u8>> = again.args(&wire).map(<[u8]>::to_vec).collect();
                assert_eq!(back, args, "arguments survive a round trip");
            }
            other => panic!("a re-encoded command did not parse: {other:?}"),
        }
        at += len;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const LIMITS: FrameLimits = FrameLimits {
        max_args: 1024,
        max_command_bytes: 1 << 20,
    };

    fn args(buf: &[u8]) -> Result<Option<Vec<Vec<u8>>>, ProtocolError> {
        let mut p = Parser::new(LIMITS);
        Ok(match p.parse(buf)? {
            Parsed::Command { len } => {
                assert!(len <= buf.len());
                Some(p.args(buf).map(<[u8]>::to_vec).collect())
            }
            Parsed::Incomplete { .. } => None,
        })
    }

    #[test]
    fn replies_are_measured_whole_and_only_whole() {
        let replies: [&[u8]; 12] = [
            b"+OK\r\n",
            b"-TRYAGAIN the view moved\r\n",
            b":-12\r\n",
            b"$5\r\nhe\r\no\r\n",
            b"$-1\r\n",
            b"*-1\r\n",
            b"*2\r\n$1\r\na\r\n*1\r\n:1\r\n",
            b"_\r\n",
            b"%1\r\n+key\r\n,1.5\r\n",
            b"~2\r\n#t\r\n(123\r\n",
            b"|1\r\n+ttl\r\n:3\r\n=7\r\ntxt:abc\r\n",
            b"*0\r\n",
        ];
        for reply in replies {
            assert_eq!(reply_len(reply), Ok(Some(reply.len())), "{reply:?}");
            for cut in 0..reply.len() {
                assert_eq!(reply_len(&reply[..cut]), Ok(None), "{reply:?} cut at {cut}");
            }
            let mut two = reply.to_vec();
            two.extend_from_slice(b"+next\r\n");
            assert_eq!(reply_len(&two), Ok(Some(reply.len())));
        }
        for garbled in [
            &b"?\r\n"[..],
            b"$x\r\n",
            b"$3\r\nabcd\r\n",
            b"%-1\r\n",
            b"$-2\r\n",
            b"*4294967297\r\n",
        ] {
            assert_eq!(reply_len(garbled), Err(GarbledReply), "{garbled:?}");
        }
        // A header line that never ends is garbled once past any real one.
        assert_eq!(reply_len(&[b':'; MAX_INLINE + 2]), Err(GarbledReply));
    }

    #[test]
    fn parses_multibulk_and_inline_commands() {
        let got = args(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n").unwrap().unwrap();
        assert_eq!(got, vec![b"GET".to_vec(), b"k".to_vec()]);
        let got = args(b"SET k \"a b\\x41\" 'c d'\r\n").unwrap().unwrap();
        assert_eq!(
            got,
            vec![
                b"SET".to_vec(),
                b"k".to_vec(),
                b"a bA".to_vec(),
                b"c d".to_vec()
            ]
        );
        assert_eq!(args(b"PING\n").unwrap().unwrap(), vec![b"PING".to_vec()]);
    }

    #[test]
    fn every_truncation_is_incomplete_not_an_error() {
        let full = b"*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nvalue\r\n";
        for cut in 0..full.len() {
            assert_eq!(args(&full[..cut]).unwrap(), None, "cut at {cut}");
        }
        assert!(args(full).unwrap().is_some());
    }

    #[test]
    fn absurd_lengths_are_refused_before_buffering() {
        assert_eq!(
            args(b"*1\r\n$99999999999\r\n").unwrap_err(),
            ProtocolError::BulkLength
        );
        assert_eq!(
            args(b"*1\r\n$-5\r\n").unwrap_err(),
            ProtocolError::BulkLength
        );
        assert_eq!(
            args(b"*99999999\r\n").unwrap_err(),
            ProtocolError::MultibulkLength
        );
        assert_eq!(args(b"*x\r\n").unwrap_err(), ProtocolError::MultibulkLength);
        assert_eq!(
            args(b"*1\r\n$2000000\r\n").unwrap_err(),
            ProtocolError::BulkLength
        );
        assert_eq!(
            args(b"*1\r\n:5\r\n").unwrap_err(),
            ProtocolError::ExpectedBulk(':')
        );
        assert_eq!(
            args(b"*1\r\n$1\r\nabc\r\n").unwrap_err(),
            ProtocolError::MissingCrlf
        );
        assert_eq!(args(b"SET \"k\r\n").unwrap_err(), ProtocolError::Unbalanced);
        assert_eq!(
            args(&[b'A'; MAX_INLINE]).unwrap_err(),
            ProtocolError::InlineTooLong
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn arbitrary_bytes_hold_the_parse_invariants(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            check_parse(&bytes);
        }

        /// Bytes that look like RESP — markers, digits, CRLFs, quotes — reach
        /// far deeper into the parser than uniform noise.
        #[test]
        fn resp_like_bytes_hold_the_parse_invariants(pieces in proptest::collection::vec(
            prop_oneof![
                Just(b"*".to_vec()), Just(b"$".to_vec()), Just(b"\r\n".to_vec()),
                Just(b"\"".to_vec()), Just(b"'".to_vec()), Just(b" ".to_vec()), Just(b"\\x4".to_vec()),
                (0i64..40).prop_map(|n| n.to_string().into_bytes()),
                Just(b"-1".to_vec()), Just(b"GET".to_vec()),
                proptest::collection::vec(any::<u8>(), 0..4),
            ], 0..40)) {
            check_parse(&pieces.concat());
        }

        #[test]
        fn encoded_commands_parse_back(cmd in proptest::collection::vec(
            proptest::collection::vec(any::<u8>(), 0..40), 1..8)) {
            let mut wire = format!("*{}\r\n", cmd.len()).into_bytes();
            for arg in &cmd {
                wire.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
                wire.extend_from_slice(arg);
                wire.extend_from_slice(b"\r\n");
            }
            wire.extend_from_slice(b"*1\r\n$4\r\nPING\r\n");
            let mut p = Parser::new(LIMITS);
            let Parsed::Command { len } = p.parse(&wire).unwrap() else { panic!("incomplete") };
            let got: Vec<Vec<u8>> = p.args(&wire).map(<[u8]>::to_vec).collect();
            prop_assert_eq!(got, cmd);
            prop_assert_eq!(&wire[len..], b"*1\r\n$4\r\nPING\r\n");
        }
    }
}
