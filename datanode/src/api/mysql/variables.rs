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
use sqlparser::tokenizer::{Token, Word};

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

    /// `tokens` with each user variable replaced by its value; one that is
    /// a whole item of a SELECT's list, unaliased, keeps its name as the
    /// column's (`SELECT @a` answers a column named `@a`, as in MySQL).
    pub(crate) fn substitute(&self, tokens: Vec<Token>) -> Vec<Token> {
        // Most statements name none: they go through as they are.
        if !tokens.iter().any(|t| user_variable(t).is_some()) {
            return tokens;
        }
        let mut out = Vec::with_capacity(tokens.len());
        let (mut depth, mut listing) = (0usize, false);
        for (i, t) in tokens.iter().enumerate() {
            match t {
                Token::LParen => depth += 1,
                Token::RParen => depth = depth.saturating_sub(1),
                Token::Word(w) if depth == 0 && w.quote_style.is_none() => {
                    if w.keyword == Keyword::SELECT {
                        listing = true;
                    } else if ends_list(w.keyword) {
                        listing = false;
                    }
                }
                Token::SemiColon => listing = false,
                _ => {}
            }
            let Some(name) = user_variable(t) else {
                out.push(t.clone());
                continue;
            };
            out.push(self.get(name));
            let item_begins = matches!(
                i.checked_sub(1).map(|p| &tokens[p]),
                Some(Token::Comma)
                    | Some(Token::Word(Word {
                        keyword: Keyword::SELECT,
                        ..
                    }))
            );
            let item_ends = match tokens.get(i + 1) {
                None | Some(Token::Comma | Token::SemiColon) => true,
                Some(Token::Word(w)) => w.quote_style.is_none() && ends_list(w.keyword),
                _ => false,
            };
            if listing && depth == 0 && item_begins && item_ends {
                out.push(Token::make_keyword("AS"));
                out.push(Token::make_word(&format!("@{name}"), Some('`')));
            }
        }
        out
    }

    /// Forgets every variable.
    pub(crate) fn clear(&mut self) {
        *self = UserVariables::default();
    }

    /// Every variable, as a session carried to another node takes them;
    /// `None` if one's value cannot travel.
    pub(crate) fn export(&self) -> Option<Vec<(String, Literal)>> {
        (self.values.iter())
            .map(|(name, value)| Some((name.clone(), Literal::of(value)?)))
            .collect()
    }

    /// The variables `export` gave, under the same bounds as `set`.
    pub(crate) fn import(values: Vec<(String, Literal)>) -> Result<UserVariables, MyError> {
        let mut kept = UserVariables::default();
        for (name, value) in values {
            kept.set(&name, value.token())?;
        }
        Ok(kept)
    }
}

/// A user variable's value as it travels between nodes: each kind of
/// literal token `set` keeps.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) enum Literal {
    Number(String, bool),
    Single(String),
    Double(String),
    National(String),
    Hex(String),
    /// `NULL`, `TRUE` or `FALSE`.
    Keyword(String),
}

impl Literal {
    fn of(t: &Token) -> Option<Literal> {
        Some(match t {
            Token::Number(n, long) => Literal::Number(n.clone(), *long),
            Token::SingleQuotedString(s) => Literal::Single(s.clone()),
            Token::DoubleQuotedString(s) => Literal::Double(s.clone()),
            Token::NationalStringLiteral(s) => Literal::National(s.clone()),
            Token::HexStringLiteral(s) => Literal::Hex(s.clone()),
            Token::Word(w) if is_literal(t) => Literal::Keyword(w.value.clone()),
            _ => return None,
        })
    }

    fn token(self) -> Token {
        match self {
            Literal::Number(n, long) => Token::Number(n, long),
            Literal::Single(s) => Token::SingleQuotedString(s),
            Literal::Double(s) => Token::DoubleQuotedString(s),
            Literal::National(s) => Token::NationalStringLiteral(s),
            Literal::Hex(s) => Token::HexStringLiteral(s),
            Literal::Keyword(k) => match k.to_ascii_uppercase().as_str() {
                "TRUE" => Token::make_keyword("TRUE"),
                "FALSE" => Token::make_keyword("FALSE"),
                _ => null(),
            },
        }
    }
}

/// Whether a keyword ends a SELECT's list of items.
fn ends_list(k: Keyword) -> bool {
    matches!(
        k,
        Keyword::FROM
            | Keyword::WHERE
            | Keyword::GROUP
            | Keyword::HAVING
            | Keyword::ORDER
            | Keyword::LIMIT
            | Keyword::INTO
            | Keyword::FOR
            | Keyword::LOCK
            | Keyword::UNION
    )
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
    fn a_variable_that_is_a_select_item_names_its_column() {
        let mut v = UserVariables::default();
        v.set("a", Token::Number("7".into(), false)).unwrap();
        let sql = "SELECT @a, (@a), @a x, 1 FROM t WHERE id IN (1, @a, 2) AND k = @a; SELECT @a";
        let tokens: Vec<Token> =
            sqlparser::tokenizer::Tokenizer::new(&sqlparser::dialect::MySqlDialect {}, sql)
                .tokenize()
                .unwrap()
                .into_iter()
                .filter(|t| !matches!(t, Token::Whitespace(_)))
                .collect();
        let out: Vec<String> = v.substitute(tokens).iter().map(Token::to_string).collect();
        assert_eq!(
            out.join(" "),
            "SELECT 7 AS `@a` , ( 7 ) , 7 x , 1 FROM t WHERE id IN ( 1 , 7 , 2 ) AND k = 7 ; SELECT 7 AS `@a`"
        );
    }

    #[test]
    fn variables_travel_as_they_were_kept() {
        let mut v = UserVariables::default();
        let kept = [
            ("n", Token::Number("-12.5".into(), false)),
            ("s", Token::SingleQuotedString("it's \\ 'quoted'".into())),
            ("d", Token::DoubleQuotedString("x".into())),
            ("h", Token::HexStringLiteral("FF00".into())),
            ("u", null()),
            ("t", Token::make_keyword("TRUE")),
        ];
        for (name, value) in &kept {
            v.set(name, value.clone()).unwrap();
        }
        let back = UserVariables::import(v.export().unwrap()).unwrap();
        for (name, value) in &kept {
            assert_eq!(&back.get(name), value, "@{name}");
        }
        assert_eq!(back.bytes, v.bytes);
        // A peer's list is held to the same bounds as SET.
        let many = (0..=MAX_VARIABLES)
            .map(|n| (format!("v{n}"), Literal::Number("1".into(), false)))
            .collect();
        assert!(UserVariables::import(many).is_err());
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
