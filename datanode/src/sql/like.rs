//! LIKE patterns: `%` any run, `_` any one character, an escape for
//! either, matched exactly — as text compares, byte by byte — in time at
//! most the text's length times the pattern's. The MySQL front end checks
//! them on the rows it finds (and finds an index range by a pattern's
//! prefix); RonSQL in the workers, as any condition.

use std::fmt;

use super::eval::Scalar;
use super::func::text_of;
use crate::types::value::Value;

/// Most characters (or bytes) of a LIKE pattern: matching costs a row's
/// length times the pattern's at worst.
pub(crate) const MAX_LIKE_PATTERN: usize = 1024;

/// The escape character of `ESCAPE e` (`\\` without one; none for
/// `ESCAPE ''`); `Err` if `e` is more than one character.
pub(crate) fn escape_of(e: Option<&sqlparser::ast::Value>) -> Result<Option<char>, ()> {
    use sqlparser::ast::Value;
    match e {
        None => Ok(Some('\\')),
        Some(Value::SingleQuotedString(e) | Value::DoubleQuotedString(e))
            if e.chars().nth(1).is_none() =>
        {
            Ok(e.chars().next())
        }
        Some(_) => Err(()),
    }
}

/// Why a pattern is not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BadPattern {
    /// A pattern over text that is not UTF-8.
    NotText,
    /// Longer than `MAX_LIKE_PATTERN`: its length.
    TooLong(usize),
}

impl fmt::Display for BadPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BadPattern::NotText => f.write_str("a LIKE pattern that is not UTF-8 on text"),
            BadPattern::TooLong(n) => write!(
                f,
                "a LIKE pattern has at most {MAX_LIKE_PATTERN} characters; this one has {n}"
            ),
        }
    }
}

/// A LIKE pattern, compiled: `%` any run, `_` any one character (a byte,
/// on a binary column), anything else itself, exactly — as `compare`
/// tells text apart, byte by byte.
#[derive(Debug, Clone)]
pub(crate) struct Like {
    pieces: Vec<Piece>,
    binary: bool,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Piece {
    /// A character, or on a binary column a byte.
    One(u32),
    AnyOne,
    AnyRun,
}

impl Like {
    pub(crate) fn new(
        pattern: &[u8],
        escape: Option<char>,
        binary: bool,
    ) -> Result<Like, BadPattern> {
        let units: Vec<u32> = if binary {
            pattern.iter().map(|&b| u32::from(b)).collect()
        } else {
            std::str::from_utf8(pattern)
                .map_err(|_| BadPattern::NotText)?
                .chars()
                .map(u32::from)
                .collect()
        };
        if units.len() > MAX_LIKE_PATTERN {
            return Err(BadPattern::TooLong(units.len()));
        }
        let escape = escape.map(u32::from);
        let mut pieces = Vec::with_capacity(units.len());
        let mut units = units.into_iter();
        while let Some(u) = units.next() {
            let piece = match u {
                // An escape escapes what follows it; at the end, itself.
                _ if Some(u) == escape => Piece::One(units.next().unwrap_or(u)),
                0x25 => Piece::AnyRun,
                0x5f => Piece::AnyOne,
                u => Piece::One(u),
            };
            if !(piece == Piece::AnyRun && pieces.last() == Some(&Piece::AnyRun)) {
                pieces.push(piece);
            }
        }
        Ok(Like { pieces, binary })
    }

    /// A `SHOW … LIKE` pattern over names, which MySQL matches without
    /// regard to case; `\\` escapes.
    pub(crate) fn names(pattern: &str) -> Result<Like, BadPattern> {
        Like::new(pattern.to_ascii_lowercase().as_bytes(), Some('\\'), false)
    }

    /// Whether a name matches a `names` pattern, case aside.
    pub(crate) fn matches_name(&self, name: &str) -> bool {
        self.matches_text(&name.to_ascii_lowercase())
    }

    /// Whether `v` matches: `None` for NULL. A value that is not text is
    /// matched as MySQL writes it (`12`, `2024-01-31`, `1.50`).
    pub(crate) fn matches(&self, v: &Value) -> Option<bool> {
        Some(match v {
            Value::Null => return None,
            Value::Bytes(b) => wildcard_match(&self.pieces, b),
            Value::Text(t) => self.matches_text(t),
            Value::Bool(b) => wildcard_match(&self.pieces, if *b { b"1" } else { b"0" }),
            other => self.matches_text(&other.to_string()),
        })
    }

    /// Whether `v` (not NULL) matches, as `matches` says of a value.
    pub(crate) fn matches_scalar(&self, v: &Scalar<'_>) -> bool {
        match v {
            Scalar::Binary(b) => wildcard_match(&self.pieces, b),
            other => {
                let text = text_of(other);
                match std::str::from_utf8(&text) {
                    Ok(t) => self.matches_text(t),
                    Err(_) => wildcard_match(&self.pieces, &text),
                }
            }
        }
    }

    /// Whether `text` matches: by its bytes on a binary column, and where
    /// its bytes are its characters (ASCII), else by its characters.
    fn matches_text(&self, text: &str) -> bool {
        if self.binary || text.is_ascii() {
            return wildcard_match(&self.pieces, text.as_bytes());
        }
        let chars: Vec<char> = text.chars().collect();
        wildcard_match(&self.pieces, &chars)
    }

    /// The range of texts the rows it matches lie in: from its literal
    /// prefix to the first text past every text that starts with it. Only
    /// for an ASCII prefix without trailing spaces (a CHAR's are not kept).
    pub(crate) fn prefix_range(&self) -> Option<(String, String)> {
        let prefix: String = (self.pieces.iter())
            .map_while(|p| match p {
                Piece::One(u) => char::from_u32(*u),
                _ => None,
            })
            .collect();
        if prefix.is_empty() || !prefix.is_ascii() || prefix.ends_with(' ') {
            return None;
        }
        let last = prefix.chars().next_back()?;
        let next = char::from_u32(u32::from(last) + 1).filter(char::is_ascii)?;
        let mut high = prefix[..prefix.len() - 1].to_owned();
        high.push(next);
        Some((prefix, high))
    }
}

/// Whether `text` matches `pattern`: the greedy match that goes back only
/// to the last `%`, which is exact for `%` and `_` and takes at most
/// `text.len() * pattern.len()` steps.
fn wildcard_match<T: Copy + Into<u32>>(pattern: &[Piece], text: &[T]) -> bool {
    let (mut p, mut t) = (0, 0);
    // After the last `%` seen: where the pattern goes on, and the text
    // position it was last tried at.
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match pattern.get(p) {
            Some(Piece::AnyRun) => {
                star = Some((p + 1, t));
                p += 1;
            }
            Some(Piece::AnyOne) => {
                p += 1;
                t += 1;
            }
            Some(Piece::One(u)) if *u == text[t].into() => {
                p += 1;
                t += 1;
            }
            _ => match star {
                Some((after, tried)) => {
                    p = after;
                    t = tried + 1;
                    star = Some((after, tried + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|piece| *piece == Piece::AnyRun)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// LIKE as its definition says, by trying every split: slow, plainly
    /// right.
    fn like_by_definition(p: &[Piece], t: &[char]) -> bool {
        match p.split_first() {
            None => t.is_empty(),
            Some((Piece::AnyRun, rest)) => (0..=t.len()).any(|i| like_by_definition(rest, &t[i..])),
            Some((Piece::AnyOne, rest)) => !t.is_empty() && like_by_definition(rest, &t[1..]),
            Some((Piece::One(u), rest)) => {
                t.first().map(|&c| u32::from(c)) == Some(*u) && like_by_definition(rest, &t[1..])
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn like_matches_as_its_definition_says(
            pattern in "[ab%_]{0,8}",
            text in "[ab]{0,10}",
        ) {
            let like = Like::new(pattern.as_bytes(), Some('\\'), false).unwrap();
            let units: Vec<char> = text.chars().collect();
            proptest::prop_assert_eq!(
                like.matches(&Value::Text(text.clone())),
                Some(like_by_definition(&like.pieces, &units)),
                "{} LIKE {}", text, pattern
            );
        }
    }

    #[test]
    fn a_like_prefix_bounds_a_range_that_holds_every_match() {
        let range = |p: &str| {
            Like::new(p.as_bytes(), Some('\\'), false)
                .unwrap()
                .prefix_range()
        };
        assert_eq!(range("ab%"), Some(("ab".into(), "ac".into())));
        assert_eq!(range("a\\%b%"), Some(("a%b".into(), "a%c".into())));
        assert_eq!(range("%ab"), None);
        assert_eq!(range("ab %"), None);
        assert_eq!(range("\u{e9}%"), None);
    }
}
