//! User variables: `@name`, a connection's own values. `SET @name = v`
//! keeps one (a literal, a system variable's value `@@x`, or another user
//! variable's), and `@name` anywhere else in a statement stands for it —
//! NULL if it was never set, as in MySQL. mysqldump's files lean on them to
//! save and restore settings (`SET @OLD_SQL_MODE = @@SQL_MODE`, …).
//!
//! A value is kept as the literal token it is read as, and put in place
//! of each `@name` before the statement is parsed. Names are compared
//! without case. A connection keeps at most `MAX_VARIABLES` of them and
//! `MAX_BYTES` of their text; `COM_RESET_CONNECTION` forgets them.

use std::collections::HashMap;

use sqlparser::keywords::Keyword;
use sqlparser::tokenizer::Token;

use super::error::MyError;

/// Most user variables a connection keeps.
const MAX_VARIABLES: usize = 1024;
/// Most bytes of names and values they take together.
const MAX_BYTES: usize = 1 << 20;

#[derive(Debug, Default)]
pub(crate) struct UserVariables {
    values: HashMap<String, Token>,
    bytes: usize,
}

impl UserVariables {
    /// Sets `@name` (without its `@`) to a literal.
    pub(crate) fn set(&mut self, name: &str, value: Token) -> Result<(), MyError> {
        let name = name.to_ascii_lowercase();
        if name.is_empty() || name.len() > 64 {
            return Err(MyError::syntax(
                "a user variable's name is 1 to 64 characters",
            ));
        }
        let size = |name: &str, value: &Token| name.len() + value.to_string().len();
        let now = size(&name, &value);
        let before = self.values.get(&name).map_or(0, |v| size(&name, v));
        let bytes = self.bytes - before + now;
        if bytes > MAX_BYTES || (before == 0 && self.values.len() >= MAX_VARIABLES) {
            return Err(MyError::new(
                1105,
                "HY000",
                format!(
                    "a connection keeps at most {MAX_VARIABLES} user variables and {} KiB of their values",
                    MAX_BYTES >> 10
                ),
            ));
        }
        self.bytes = bytes;
        self.values.insert(name, value);
        Ok(())
    }

    /// The value of `@name` (without its `@`): NULL if never set.
    pub(crate) fn get(&self, name: &str) -> Token {
        (self.values.get(&name.to_ascii_lowercase()))
            .cloned()
            .unwrap_or_else(null)
    }

    /// `tokens` with each user variable replaced by its value.
    pub(crate) fn substitute(&self, mut tokens: Vec<Token>) -> Vec<Token> {
        for t in &mut tokens {
            if let Some(name) = user_variable(t) {
                *t = self.get(name);
            }
        }
        tokens
    }

    /// Forgets every variable.
    pub(crate) fn clear(&mut self) {
        *self = UserVariables::default();
    }
}

/// The name (without its `@`) if `t` is a user variable: `@name`, not a
/// system variable's `@@name`.
pub(crate) fn user_variable(t: &Token) -> Option<&str> {
    match t {
        Token::Word(w) if w.quote_style.is_none() => {
            let name = w.value.strip_prefix('@')?;
            (!name.starts_with('@')).then_some(name)
        }
        _ => None,
    }
}

/// Whether `t` can be kept as a user variable's value as it is.
pub(crate) fn is_literal(t: &Token) -> bool {
    match t {
        Token::Number(..)
        | Token::SingleQuotedString(_)
        | Token::DoubleQuotedString(_)
        | Token::NationalStringLiteral(_)
        | Token::HexStringLiteral(_) => true,
        Token::Word(w) => {
            w.quote_style.is_none()
                && matches!(w.keyword, Keyword::NULL | Keyword::TRUE | Keyword::FALSE)
        }
        _ => false,
    }
}

pub(crate) fn null() -> Token {
    Token::make_keyword("NULL")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn word(s: &str) -> Token {
        Token::make_word(s, None)
    }

    #[test]
    fn variables_stand_for_their_values_and_unset_ones_for_null() {
        let mut v = UserVariables::default();
        v.set("Old_Mode", Token::SingleQuotedString("x".into()))
            .unwrap();
        let tokens = vec![
            word("SELECT"),
            word("@old_mode"),
            word("@never"),
            word("@@mode"),
        ];
        let out = v.substitute(tokens);
        assert_eq!(out[1], Token::SingleQuotedString("x".into()));
        assert_eq!(out[2], null());
        assert_eq!(out[3], word("@@mode"), "a system variable stays");
        assert_eq!(
            v.substitute(vec![Token::make_word("@old_mode", Some('`'))])[0],
            Token::make_word("@old_mode", Some('`')),
            "a quoted name is a name"
        );
    }

    #[test]
    fn a_connection_keeps_a_bounded_number_of_bytes_and_names() {
        let mut v = UserVariables::default();
        for n in 0..MAX_VARIABLES {
            v.set(&format!("v{n}"), Token::Number("1".into(), false))
                .unwrap();
        }
        assert!(v.set("one_more", null()).is_err());
        // Setting one again is not one more.
        v.set("v0", Token::Number("2".into(), false)).unwrap();
        v.clear();
        let big = Token::SingleQuotedString("x".repeat(MAX_BYTES / 2));
        v.set("a", big.clone()).unwrap();
        v.set("a", big.clone()).unwrap();
        assert_eq!(v.bytes, 1 + big.to_string().len());
        assert!(v.set("b", big).is_err());
        assert!(v.set(&"n".repeat(65), null()).is_err());
    }
}
