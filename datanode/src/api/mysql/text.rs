//! A statement's text from the bytes a client sent.
//!
//! A connection speaks utf8mb4, but MySQL takes any bytes inside a string
//! literal: they are then bytes, not text — a binary column stores them as
//! they are, a text column refuses them. mysqldump writes a binary column's
//! values so (`'\0\xff…'`, escaped as `mysql_real_escape_string` does)
//! unless told `--hex-blob`. A statement that is not all UTF-8 is therefore
//! read again here: each string literal that is not text becomes the hex
//! literal of its bytes, escapes undone (`X'00ff…'`), which the rest of
//! the planner already takes as bytes, as it takes a prepared statement's
//! argument that is not text. Bytes that are not text anywhere else — in a
//! name, a comment, a keyword — leave the statement refused.

use shoal_wire::apikey::hex;

/// `body` as text, each string literal that is not UTF-8 written as the
/// hex literal of its bytes; `None` if bytes outside a literal are not
/// UTF-8, or a literal is not closed.
pub(crate) fn with_byte_literals(body: &[u8]) -> Option<String> {
    let mut out: Vec<u8> = Vec::with_capacity(body.len() + body.len() / 2);
    // Inside `/*! … */` (or MariaDB's `/*M! … */`), which hold SQL.
    let mut executable = false;
    let mut at = 0;
    while at < body.len() {
        let rest = &body[at..];
        let len = match rest[0] {
            quote @ (b'\'' | b'"') => {
                let (len, bytes) = literal(rest, quote)?;
                if std::str::from_utf8(&rest[1..len - 1]).is_err() {
                    out.extend_from_slice(format!("X'{}'", hex(&bytes)).as_bytes());
                    at += len;
                    continue;
                }
                len
            }
            // A quoted name: copied as it is, checked below.
            b'`' => quoted_name(rest)?,
            b'#' => line_end(rest),
            b'-' if rest.starts_with(b"--")
                && rest.get(2).is_none_or(|c| c.is_ascii_whitespace()) =>
            {
                line_end(rest)
            }
            b'/' if rest.starts_with(b"/*!") || rest.starts_with(b"/*M!") => {
                executable = true;
                if rest[2] == b'M' { 4 } else { 3 }
            }
            b'/' if rest.starts_with(b"/*") => {
                rest.windows(2).skip(2).position(|w| w == b"*/")? + 4
            }
            b'*' if executable && rest.starts_with(b"*/") => {
                executable = false;
                2
            }
            _ => 1,
        };
        out.extend_from_slice(&rest[..len]);
        at += len;
    }
    String::from_utf8(out).ok()
}

/// The literal `s` starts with (its quote `quote`): its length with both
/// quotes, and its bytes with MySQL's escapes undone.
fn literal(s: &[u8], quote: u8) -> Option<(usize, Vec<u8>)> {
    let mut bytes = Vec::with_capacity(s.len());
    let mut at = 1;
    loop {
        match *s.get(at)? {
            b'\\' => {
                let escaped = *s.get(at + 1)?;
                match escaped {
                    b'0' => bytes.push(0),
                    b'b' => bytes.push(0x08),
                    b'n' => bytes.push(b'\n'),
                    b'r' => bytes.push(b'\r'),
                    b't' => bytes.push(b'\t'),
                    b'Z' => bytes.push(0x1a),
                    // Kept escaped: a LIKE pattern's literal % and _.
                    b'%' | b'_' => bytes.extend_from_slice(&[b'\\', escaped]),
                    other => bytes.push(other),
                }
                at += 2;
            }
            c if c == quote => {
                if s.get(at + 1) == Some(&quote) {
                    bytes.push(quote);
                    at += 2;
                } else {
                    return Some((at + 1, bytes));
                }
            }
            c => {
                bytes.push(c);
                at += 1;
            }
        }
    }
}

/// The length of the `` `name` `` `s` starts with (a doubled backtick
/// inside it is one).
fn quoted_name(s: &[u8]) -> Option<usize> {
    let mut at = 1;
    loop {
        if *s.get(at)? == b'`' {
            if s.get(at + 1) == Some(&b'`') {
                at += 2;
                continue;
            }
            return Some(at + 1);
        }
        at += 1;
    }
}

/// The length of the comment `s` starts with, to the end of its line.
fn line_end(s: &[u8]) -> usize {
    s.iter().position(|&c| c == b'\n').unwrap_or(s.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_literal_that_is_not_text_becomes_its_bytes_in_hex() {
        let sql = b"INSERT INTO `t` VALUES (1,'\\0\xff\\'\\\"\\\\\\n','h\xc3\xa9llo'),(2,'','x')";
        assert_eq!(
            with_byte_literals(sql).as_deref(),
            Some("INSERT INTO `t` VALUES (1,X'00ff27225c0a','héllo'),(2,'','x')")
        );
        // Doubled quotes, double quotes, and escapes kept for LIKE.
        assert_eq!(
            with_byte_literals(b"SELECT 'a''\xfe', \"\xfe\"\"\", '\\%\xfe'").as_deref(),
            Some("SELECT X'6127fe', X'fe22', X'5c25fe'")
        );
    }

    #[test]
    fn bytes_that_are_not_text_outside_a_literal_are_refused() {
        assert_eq!(with_byte_literals(b"SELECT \xff"), None);
        assert_eq!(with_byte_literals(b"SELECT `\xff` FROM t"), None);
        assert_eq!(with_byte_literals(b"SELECT 1 /* \xff */"), None);
        assert_eq!(with_byte_literals(b"SELECT 1 -- \xff\n"), None);
        assert_eq!(with_byte_literals(b"SELECT 1 # \xff"), None);
        // Not closed.
        assert_eq!(with_byte_literals(b"SELECT '\xff"), None);
        assert_eq!(with_byte_literals(b"SELECT '\xff\\'"), None);
        assert_eq!(with_byte_literals(b"SELECT `a"), None);
        assert_eq!(with_byte_literals(b"SELECT 1 /* a"), None);
    }

    #[test]
    fn quotes_in_names_and_comments_start_no_literal() {
        assert_eq!(
            with_byte_literals(b"SELECT `it's` -- it's\n, 1 # it's\n, '\xff' /* it's */")
                .as_deref(),
            Some("SELECT `it's` -- it's\n, 1 # it's\n, X'ff' /* it's */")
        );
        // An executable comment holds SQL, its literals too.
        assert_eq!(
            with_byte_literals(b"/*!40101 SET @a = '\xff' */").as_deref(),
            Some("/*!40101 SET @a = X'ff' */")
        );
    }

    /// What `mysql_real_escape_string` makes of `bytes`, quoted.
    fn escaped(bytes: &[u8]) -> Vec<u8> {
        let mut out = vec![b'\''];
        for &b in bytes {
            match b {
                0 => out.extend_from_slice(b"\\0"),
                b'\n' => out.extend_from_slice(b"\\n"),
                b'\r' => out.extend_from_slice(b"\\r"),
                0x1a => out.extend_from_slice(b"\\Z"),
                b'\\' | b'\'' | b'"' => out.extend_from_slice(&[b'\\', b]),
                b => out.push(b),
            }
        }
        out.push(b'\'');
        out
    }

    proptest! {
        #[test]
        fn a_dumped_value_reads_back_as_its_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let mut sql = b"INSERT INTO t VALUES (".to_vec();
            sql.extend(escaped(&bytes));
            sql.extend_from_slice(b", '\xff')");
            let text = with_byte_literals(&sql).expect("text");
            let literal = text
                .strip_prefix("INSERT INTO t VALUES (")
                .and_then(|t| t.strip_suffix(", X'ff')"))
                .expect("the literals in place");
            match std::str::from_utf8(&bytes) {
                // Text stays as it was sent.
                Ok(_) => prop_assert_eq!(literal.as_bytes(), &escaped(&bytes)[..]),
                Err(_) => {
                    let hex = literal.strip_prefix("X'").and_then(|h| h.strip_suffix('\'')).expect("hex");
                    let decoded: Vec<u8> = (0..hex.len()).step_by(2)
                        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex digits"))
                        .collect();
                    prop_assert_eq!(decoded, bytes);
                }
            }
        }
    }
}
