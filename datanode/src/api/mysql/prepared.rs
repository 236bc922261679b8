//! What a prepared statement keeps from COM_STMT_PREPARE, so that each
//! COM_STMT_EXECUTE does not tokenize, bind and parse its text again.
//!
//! - A read by key keeps its plan (`Lookup`), run as it is with each
//!   execute's arguments while its table is the catalog's.
//! - Any other SELECT keeps its parse, `?`s numbered: an execute puts each
//!   argument in its `?`'s place, as the expression `bind` would have
//!   written there, and plans the query — the very query that binding the
//!   text and parsing it gives, for a quarter of the instructions the parse
//!   took (7,500 against 30,000 for sysbench's range selects).
//! - Anything else (writes, statements with user variables or NOW() and
//!   its kin, whose values change between executes) is bound and parsed at
//!   each execute.

use std::ops::ControlFlow;
use std::sync::Arc;

use shoal_wire::apikey::hex;
use sqlparser::ast::{
    self, Expr, Statement, UnaryOperator, visit_expressions, visit_expressions_mut,
};
use sqlparser::keywords::Keyword;
use sqlparser::tokenizer::Token;

use super::error::MyError;
use super::query::{self, Lookup, Select, keyword};
use super::session::Session;
use super::value::Lit;
use super::{clock, variables};

/// What a prepared statement keeps.
#[derive(Debug, Clone)]
pub(crate) enum Kept {
    /// A read by key, planned.
    Lookup(Arc<Lookup>),
    /// A SELECT, parsed, its `?`s numbered from 0.
    Query(Arc<ast::Query>),
}

impl Session {
    /// What the statement `tokens` hold keeps between executes, if it
    /// keeps anything.
    pub(crate) fn keep(&mut self, tokens: &[Token]) -> Option<Kept> {
        // A user variable's value may change between executes.
        if keyword(tokens.first()) != Some(Keyword::SELECT)
            || tokens.iter().any(|t| variables::user_variable(t).is_some())
        {
            return None;
        }
        let Ok(Statement::Query(q)) = query::parse(query::numbered(tokens)) else {
            return None;
        };
        if let Ok(Select::Keys(lookup)) = self.plan_select(&q) {
            return Some(Kept::Lookup(Arc::new(lookup)));
        }
        // So may NOW()'s, which a query's text has worked out before it is
        // planned.
        (!clock::may_fold(tokens) && every_placeholder_replaceable(&q, query::placeholders(tokens)))
            .then(|| Kept::Query(Arc::new(*q)))
    }
}

/// Whether each of the `n` numbered `?`s stands where an expression does,
/// so that `bound` replaces it (one elsewhere would be left a `?`).
fn every_placeholder_replaceable(q: &ast::Query, n: usize) -> bool {
    let mut seen = vec![false; n];
    let mut stray = false;
    let _ = visit_expressions(q, |e| {
        if let Some(i) = placeholder(e) {
            match seen.get_mut(i) {
                Some(s) => *s = true,
                None => stray = true,
            }
        }
        ControlFlow::<()>::Continue(())
    });
    !stray && seen.iter().all(|s| *s)
}

/// The kept query with each `?` replaced by its argument; `None` if there
/// are fewer arguments than `?`s.
pub(crate) fn bound(q: &ast::Query, args: &[Lit]) -> Option<ast::Query> {
    // Each `?i` is numbered once: its argument moves into its place.
    let mut values: Vec<Option<Expr>> = args.iter().map(|a| Some(argument(a))).collect();
    let mut q = q.clone();
    let mut missing = false;
    let _ = visit_expressions_mut(&mut q, |e| {
        if let Some(i) = placeholder(e) {
            match values.get_mut(i).and_then(Option::take) {
                Some(v) => *e = v,
                None => missing = true,
            }
        }
        ControlFlow::<()>::Continue(())
    });
    (!missing).then_some(q)
}

/// The `i` of a numbered `?i`.
fn placeholder(e: &Expr) -> Option<usize> {
    match e {
        Expr::Value(v) => match &v.value {
            ast::Value::Placeholder(p) => p.strip_prefix('?')?.parse().ok(),
            _ => None,
        },
        _ => None,
    }
}

/// An argument as the expression its tokens in bound text (`bind_one`)
/// parse to: a literal, a negative number as `(-n)`.
fn argument(arg: &Lit) -> Expr {
    let value = |v: ast::Value| Expr::value(v);
    let number = |text: String| match text.strip_prefix('-') {
        Some(positive) => Expr::Nested(Box::new(Expr::UnaryOp {
            op: UnaryOperator::Minus,
            expr: Box::new(value(ast::Value::Number(positive.to_owned(), false))),
        })),
        None => value(ast::Value::Number(text, false)),
    };
    match arg {
        Lit::Null | Lit::Param(_) => value(ast::Value::Null),
        Lit::Bool(b) => value(ast::Value::Boolean(*b)),
        Lit::Int(v) => number(v.to_string()),
        Lit::UInt(v) => number(v.to_string()),
        Lit::Number(n) => number(n.clone()),
        Lit::Double(v) => number(format!("{v:e}")),
        Lit::Str(b) => match std::str::from_utf8(b) {
            Ok(s) => value(ast::Value::SingleQuotedString(s.to_owned())),
            Err(_) => value(ast::Value::HexStringLiteral(hex(b))),
        },
        Lit::Bytes(b) => value(ast::Value::HexStringLiteral(hex(b))),
    }
}

impl Session {
    /// Runs a kept query with an execute's arguments in place.
    pub(crate) async fn run_bound(&mut self, q: ast::Query) -> Result<query::Reply, MyError> {
        self.now = None;
        self.select(&q).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::mysql::query::{bind, tokenize};

    /// The query an execute plans from the kept parse is the one binding
    /// the text and parsing it gives, for every kind of argument.
    #[test]
    fn bound_queries_are_the_parses_of_bound_text() {
        let text = "SELECT c, ? AS x FROM t WHERE id BETWEEN ? AND ? AND c LIKE ? \
                    AND d IN (?, ?) AND e = ? ORDER BY c LIMIT ?";
        let tokens = tokenize(text).unwrap();
        let Statement::Query(kept) = query::parse(query::numbered(&tokens)).unwrap() else {
            panic!("a query");
        };
        assert!(every_placeholder_replaceable(&kept, 8));
        let arguments = [
            vec![
                Lit::Int(-5),
                Lit::Int(1),
                Lit::UInt(u64::MAX),
                Lit::Str(b"a'b%".to_vec()),
                Lit::Null,
                Lit::Bool(true),
                Lit::Double(-1.5e-300),
                Lit::Int(10),
            ],
            vec![
                Lit::Number("-12.50".into()),
                Lit::Bytes(vec![0, 0xff]),
                Lit::Str(vec![0xc3, 0x28]),
                Lit::Str("ünï".as_bytes().to_vec()),
                Lit::Bool(false),
                Lit::Param(3),
                Lit::Int(i64::MIN),
                Lit::UInt(0),
            ],
        ];
        for args in arguments {
            let Statement::Query(expected) = query::parse(bind(&tokens, &args)).unwrap() else {
                panic!("a query");
            };
            assert_eq!(bound(&kept, &args).as_ref(), Some(&*expected), "{args:?}");
        }
        // Fewer arguments than `?`s: not bound this way.
        assert_eq!(bound(&kept, &[Lit::Int(1)]), None);
    }

    /// A statement keeps its parse only where every `?` is an expression.
    #[test]
    fn only_queries_with_every_placeholder_an_expression_keep_their_parse() {
        let tokens = tokenize("SELECT a FROM t WHERE a > ?").unwrap();
        let Statement::Query(q) = query::parse(query::numbered(&tokens)).unwrap() else {
            panic!("a query");
        };
        assert!(every_placeholder_replaceable(&q, 1));
        assert!(!every_placeholder_replaceable(&q, 2));
    }
}
