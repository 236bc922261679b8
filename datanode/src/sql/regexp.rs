//! Regular expressions: `REGEXP`, `RLIKE` and `REGEXP_LIKE`, on the regex
//! crate, whose matching takes time linear in the text whatever the
//! pattern — a tenant's pattern cannot hold a worker the way a
//! backtracking engine's can. Its syntax is the one MySQL's ICU takes,
//! but for backreferences and look-around, which are refused (1235)
//! rather than read otherwise.
//!
//! As text compares byte by byte (`utf8mb4_bin`), a match is case
//! sensitive unless asked otherwise (`REGEXP_LIKE(s, p, 'i')`); on bytes
//! (BINARY, VARBINARY) `.` is any one byte.

use std::fmt;

use regex::bytes::{Regex, RegexBuilder};

use super::eval::Scalar;
use super::func::text_of;

/// Most characters of a pattern.
pub(crate) const MAX_REGEXP_PATTERN: usize = 1024;
/// Most bytes a compiled pattern (and, apart, its lazy DFA's cache) may
/// take: `a{1000}{1000}` is refused rather than built.
const MAX_COMPILED_BYTES: usize = 1 << 20;

/// Why a pattern is not taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum BadRegexp {
    /// Not a regular expression, or a match type that is not one: why.
    Invalid(String),
    /// A feature MySQL has and Shoal does not: which.
    Unsupported(&'static str),
    /// Longer than `MAX_REGEXP_PATTERN` characters, or compiled larger
    /// than `MAX_COMPILED_BYTES`.
    TooLarge(String),
}

impl fmt::Display for BadRegexp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BadRegexp::Invalid(why) | BadRegexp::TooLarge(why) => f.write_str(why),
            BadRegexp::Unsupported(what) => write!(f, "{what} in a regular expression"),
        }
    }
}

/// A compiled pattern.
#[derive(Debug, Clone)]
pub(crate) struct Regexp(Regex);

impl Regexp {
    /// `pattern` with `REGEXP_LIKE`'s match type (`c` case sensitive, `i`
    /// not, `m` lines, `n` `.` matches a line's end, `u` only `\n` ends a
    /// line; the last of `c` and `i` wins), over bytes when `binary`.
    pub(crate) fn new(
        pattern: &[u8],
        match_type: &[u8],
        binary: bool,
    ) -> Result<Regexp, BadRegexp> {
        let pattern = std::str::from_utf8(pattern)
            .map_err(|_| BadRegexp::Invalid("a pattern that is not UTF-8".into()))?;
        let chars = pattern.chars().count();
        if chars > MAX_REGEXP_PATTERN {
            return Err(BadRegexp::TooLarge(format!(
                "a regular expression has at most {MAX_REGEXP_PATTERN} characters; this one has {chars}"
            )));
        }
        let mut builder = RegexBuilder::new(pattern);
        builder
            .unicode(!binary)
            .crlf(true)
            .size_limit(MAX_COMPILED_BYTES)
            .dfa_size_limit(MAX_COMPILED_BYTES);
        for flag in match_type {
            match flag {
                b'c' => builder.case_insensitive(false),
                b'i' => builder.case_insensitive(true),
                b'm' => builder.multi_line(true),
                b'n' => builder.dot_matches_new_line(true),
                b'u' => builder.crlf(false),
                _ => {
                    return Err(BadRegexp::Invalid(format!(
                        "'{}' is not a match type (c, i, m, n, u)",
                        String::from_utf8_lossy(match_type)
                            .chars()
                            .take(16)
                            .collect::<String>()
                    )));
                }
            };
        }
        builder.build().map(Regexp).map_err(|e| match e {
            regex::Error::CompiledTooBig(limit) => BadRegexp::TooLarge(format!(
                "the regular expression compiles past {limit} bytes"
            )),
            regex::Error::Syntax(why) if why.contains("look-around") => {
                BadRegexp::Unsupported("look-around")
            }
            regex::Error::Syntax(why) if why.contains("backreferences") => {
                BadRegexp::Unsupported("a backreference")
            }
            // The parser's message points at the pattern with a caret
            // over several lines; the last one says what is wrong.
            other => BadRegexp::Invalid(
                other
                    .to_string()
                    .lines()
                    .rev()
                    .find(|l| !l.trim().is_empty())
                    .unwrap_or("not a regular expression")
                    .trim()
                    .trim_start_matches("error: ")
                    .to_string(),
            ),
        })
    }

    /// Whether `v` (not NULL) has a match: a value that is not text as
    /// MySQL writes it (`12`, `2024-01-31`).
    pub(crate) fn matches_scalar(&self, v: &Scalar<'_>) -> bool {
        self.0.is_match(&text_of(v))
    }
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use super::*;

    fn text(s: &str) -> Scalar<'_> {
        Scalar::Text(Cow::Borrowed(s.as_bytes()))
    }

    fn matches(pattern: &str, match_type: &str, s: &str) -> bool {
        Regexp::new(pattern.as_bytes(), match_type.as_bytes(), false)
            .unwrap()
            .matches_scalar(&text(s))
    }

    #[test]
    fn matches_as_mysql_does_with_a_binary_collation() {
        assert!(matches("^b.b$", "", "bob"));
        assert!(!matches("^b.b$", "", "Bob"));
        assert!(matches("^b.b$", "i", "Bob"));
        // The last of c and i wins.
        assert!(!matches("^b.b$", "ic", "Bob"));
        assert!(matches("^b.b$", "ci", "Bob"));
        assert!(matches("ü+", "", "grüün"));
        assert!(matches("[[:digit:]]{4}", "", "in 2024"));
        assert!(!matches("^two$", "", "one\ntwo"));
        assert!(matches("^two$", "m", "one\ntwo"));
        assert!(matches("^two$", "m", "one\r\ntwo\r\n"));
        assert!(!matches("a.b", "", "a\nb"));
        assert!(matches("a.b", "n", "a\nb"));
        // A number is matched as it is written.
        let twelve = Regexp::new(b"^1[0-9]$", b"", false).unwrap();
        assert!(twelve.matches_scalar(&Scalar::Int(12)));
        assert!(!twelve.matches_scalar(&Scalar::Int(120)));
    }

    #[test]
    fn bytes_are_matched_byte_by_byte() {
        let any_one = Regexp::new(b"^a.b$", b"", true).unwrap();
        assert!(any_one.matches_scalar(&Scalar::Binary(Cow::Borrowed(b"a\xffb"))));
        assert!(!any_one.matches_scalar(&Scalar::Binary(Cow::Borrowed("aüb".as_bytes()))));
    }

    #[test]
    fn what_is_not_taken_says_why() {
        let bad = |p: &str, t: &str| Regexp::new(p.as_bytes(), t.as_bytes(), false).unwrap_err();
        assert!(
            matches!(bad("(ab", ""), BadRegexp::Invalid(why) if why.contains("unclosed group"))
        );
        assert!(matches!(bad("a", "x"), BadRegexp::Invalid(why) if why.contains("match type")));
        assert_eq!(bad("(a)\\1", ""), BadRegexp::Unsupported("a backreference"));
        assert_eq!(bad("a(?=b)", ""), BadRegexp::Unsupported("look-around"));
        assert!(matches!(bad(&"a".repeat(1025), ""), BadRegexp::TooLarge(_)));
        assert!(
            matches!(bad("(a{1000}){1000}", ""), BadRegexp::TooLarge(why) if why.contains("compiles past"))
        );
        assert!(matches!(
            Regexp::new(b"\xff", b"", false).unwrap_err(),
            BadRegexp::Invalid(_)
        ));
    }

    #[test]
    fn a_pathological_pattern_takes_linear_time() {
        // `(a+)+$` backtracks exponentially in a backtracking engine.
        let re = Regexp::new(b"^(a+)+$", b"", false).unwrap();
        let mut s = "a".repeat(100_000);
        s.push('!');
        assert!(!re.matches_scalar(&text(&s)));
    }
}
