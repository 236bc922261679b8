//! From SQL text to a plan: the statement parsed by `sqlparser` (MySQL's
//! dialect), checked against the table, and turned into the program every
//! fragment runs, how the rows are reached, and what the coordinator does
//! with the groups at the end.
//!
//! What is outside the subset is refused by name, never half-understood:
//! every part of the parsed statement is either taken or answered with an
//! `unsupported` error.

use std::sync::Arc;

use sqlparser::ast::{
    self, BinaryOperator, DuplicateTreatment, FunctionArg, FunctionArgExpr, FunctionArguments,
    GroupByExpr, LimitClause, ObjectName, ObjectNamePart, OrderByKind, SelectItem, SetExpr,
    Statement, TableFactor, UnaryOperator,
};
use sqlparser::dialect::MySqlDialect;
use sqlparser::keywords::Keyword;
use sqlparser::parser::{Parser, ParserError};
use sqlparser::tokenizer::{Token, Tokenizer};

use crate::sql::agg::{Aggregate, Func, Program};
use crate::sql::eval::{self, Arith, Cmp, Datum, Expr, Pred, Scalar, TimeKind, Ty};
use crate::sql::func::{DiffUnit, Function};
use crate::sql::like::{BadPattern, Like, escape_of};
use crate::sql::regexp::{BadRegexp, Regexp};
use crate::sql::{Class, SqlError};
use crate::storage::codec;
use crate::storage::fragment::Bound;
use crate::storage::layout::Layout;
use crate::tc::Table;
use crate::types::value::{Date, DateTime, Decimal, Spelled, Timestamp};

/// Longest query text, in bytes.
pub(crate) const MAX_QUERY_BYTES: usize = 64 << 10;
/// Most tokens in a query: bounds how deep the parsed tree can be.
pub(crate) const MAX_TOKENS: usize = 4096;
/// Deepest nesting of expressions.
pub(crate) const MAX_DEPTH: usize = 64;
/// Most values in one IN list.
pub(crate) const MAX_IN_LIST: usize = 1000;
/// Most expressions in the SELECT list, GROUP BY or ORDER BY.
pub(crate) const MAX_ITEMS: usize = 64;

/// How a query's rows are reached.
#[derive(Debug, Clone)]
pub(crate) enum Access {
    /// Every row of every fragment.
    Full,
    /// The rows of an ordered index between bounds.
    Range {
        name: String,
        lower: Option<Bound>,
        upper: Option<Bound>,
        /// The bounds as SQL, for EXPLAIN.
        shown: String,
        /// About what share of the index the range holds, once estimated.
        share: Option<f64>,
        /// The range holds exactly the rows the filter lets in (`id
        /// BETWEEN ? AND ?` on an integer primary key): once it is chosen,
        /// no row it reaches is checked again.
        exact: bool,
    },
}

/// Where an output (or a sort key) comes from in a finished group.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Source {
    /// The group's value of its `i`th GROUP BY column.
    Group(usize),
    /// The `i`th aggregate's value.
    Aggregate(usize),
    /// A SUM divided by a COUNT, with the SUM argument's type.
    Avg { sum: usize, count: usize, ty: Ty },
    /// The `i`th computed value: an expression over the group's values
    /// (`MAX(id) + 1`, `COALESCE(SUM(n), 0)`), see `Plan::computed`.
    Computed(usize),
}

/// A column of the answer.
#[derive(Debug, Clone)]
pub(crate) struct Output {
    pub(crate) name: String,
    pub(crate) source: Source,
}

/// A planned query.
#[derive(Debug)]
pub(crate) struct Plan {
    /// EXPLAIN: describe the plan instead of running it.
    pub(crate) explain: bool,
    pub(crate) table: Arc<Table>,
    pub(crate) program: Arc<Program>,
    /// How the rows are reached: chosen by the coordinator among
    /// `candidates` and a full scan (`Tc::choose_access`).
    pub(crate) access: Access,
    /// Ranges of ordered indexes the filter bounds, the most leading
    /// columns fixed first.
    pub(crate) candidates: Vec<Access>,
    pub(crate) outputs: Vec<Output>,
    /// Sort keys, ascending or not.
    pub(crate) order: Vec<(Source, bool)>,
    pub(crate) limit: Option<u64>,
    pub(crate) offset: u64,
    /// HAVING: a condition on each finished group, over its `slots`.
    pub(crate) having: Option<Pred>,
    /// The values of a finished group that HAVING and the computed values
    /// read (their `Expr::Slot`s): never a computed value itself.
    pub(crate) slots: Vec<Source>,
    /// Values computed from each finished group's `slots`, and their types.
    pub(crate) computed: Vec<(Expr, Ty)>,
    /// The WHERE clause as SQL, for EXPLAIN.
    pub(crate) filter_sql: Option<String>,
}

fn syntax(message: impl Into<String>) -> SqlError {
    SqlError::new(Class::Syntax, message)
}

fn semantic(message: impl Into<String>) -> SqlError {
    SqlError::new(Class::Semantic, message)
}

fn unsupported(what: impl std::fmt::Display) -> SqlError {
    SqlError::new(Class::Unsupported, format!("{what} is not supported"))
}

fn too_large(message: impl Into<String>) -> SqlError {
    SqlError::new(Class::TooLarge, message)
}

/// Parses one statement: a SELECT, or EXPLAIN of one.
pub(crate) fn parse(text: &str) -> Result<(bool, ast::Query), SqlError> {
    if text.len() > MAX_QUERY_BYTES {
        return Err(too_large(format!(
            "the query is {} bytes; at most {MAX_QUERY_BYTES} are taken",
            text.len()
        )));
    }
    let dialect = MySqlDialect {};
    // Counted before parsing: a flat chain of operators parses into a tree
    // as deep as it is long, which no later check could bound.
    let tokens = Tokenizer::new(&dialect, text)
        .tokenize()
        .map_err(|e| syntax(format!("syntax error: {e}")))?;
    if tokens.len() > MAX_TOKENS {
        return Err(too_large(format!(
            "the query has {} tokens; at most {MAX_TOKENS} are taken",
            tokens.len()
        )));
    }
    refuse_div(&tokens)?;
    let mut statements = Parser::new(&dialect)
        .with_recursion_limit(MAX_DEPTH)
        .with_tokens(tokens)
        .parse_statements()
        .map_err(|e| match e {
            ParserError::RecursionLimitExceeded => too_large(format!(
                "the query is nested deeper than {MAX_DEPTH} levels"
            )),
            ParserError::TokenizerError(m) | ParserError::ParserError(m) => {
                syntax(format!("syntax error: {m}"))
            }
        })?;
    if statements.len() != 1 {
        return Err(syntax(format!(
            "one statement is taken; this has {}",
            statements.len()
        )));
    }
    match statements.pop().expect("one statement") {
        Statement::Query(q) => Ok((false, *q)),
        Statement::Explain {
            statement,
            analyze: false,
            verbose: false,
            query_plan: false,
            estimate: false,
            format: None,
            options: None,
            ..
        } => match *statement {
            Statement::Query(q) => Ok((true, *q)),
            _ => Err(unsupported("EXPLAIN of anything but a SELECT")),
        },
        Statement::Explain { .. } => Err(unsupported("EXPLAIN with options")),
        _ => Err(unsupported(
            "a statement other than SELECT (RonSQL only reads)",
        )),
    }
}

/// MySQL's integer division `DIV`, which Shoal does not compute, refused
/// before the text is parsed: the parser's MySQL dialect panics on a
/// `DIV` with nothing after it, and binds what follows one looser than
/// MySQL does (`7 DIV 2 + 1` as `7 DIV (2 + 1)`).
pub(crate) fn refuse_div(tokens: &[Token]) -> Result<(), SqlError> {
    let div = |t: &Token| matches!(t, Token::Word(w) if w.keyword == Keyword::DIV && w.quote_style.is_none());
    if tokens.iter().any(div) {
        return Err(unsupported(
            "the operator DIV (integer division; a / b is exact)",
        ));
    }
    Ok(())
}

/// The table a query reads, as named in its FROM: `(database, table)`.
pub(crate) fn table_of(query: &ast::Query) -> Result<(Option<String>, String), SqlError> {
    let select = select_of(query)?;
    let [from] = select.from.as_slice() else {
        return Err(if select.from.is_empty() {
            semantic("the query reads no table: it needs a FROM")
        } else {
            unsupported("reading more than one table")
        });
    };
    if !from.joins.is_empty() {
        return Err(unsupported("JOIN"));
    }
    let TableFactor::Table {
        name,
        args: None,
        with_hints,
        version: None,
        with_ordinality: false,
        partitions,
        json_path: None,
        sample: None,
        index_hints,
        ..
    } = &from.relation
    else {
        return Err(unsupported(
            "FROM anything but a table (subqueries, functions)",
        ));
    };
    if !with_hints.is_empty() || !partitions.is_empty() || !index_hints.is_empty() {
        return Err(unsupported("table hints and partitions"));
    }
    let parts = name_parts(name)?;
    match parts.as_slice() {
        [table] => Ok((None, table.clone())),
        [db, table] => Ok((Some(db.clone()), table.clone())),
        _ => Err(semantic(format!("'{name}' is not a table name"))),
    }
}

fn name_parts(name: &ObjectName) -> Result<Vec<String>, SqlError> {
    (name.0.iter())
        .map(|p| match p {
            ObjectNamePart::Identifier(i) => Ok(i.value.clone()),
            ObjectNamePart::Function(_) => Err(unsupported("a function in a name")),
        })
        .collect()
}

/// The SELECT of a query, refusing what no Shoal SQL runs; locking
/// clauses (FOR UPDATE) are left to the caller.
pub(crate) fn select_of(query: &ast::Query) -> Result<&ast::Select, SqlError> {
    if query.with.is_some() {
        return Err(unsupported("WITH (common table expressions)"));
    }
    if query.fetch.is_some()
        || query.for_clause.is_some()
        || query.settings.is_some()
        || query.format_clause.is_some()
        || !query.pipe_operators.is_empty()
    {
        return Err(unsupported("FETCH, FOR UPDATE and other query modifiers"));
    }
    match query.body.as_ref() {
        SetExpr::Select(select) => Ok(select),
        SetExpr::Query(_) => Err(unsupported("a parenthesized query")),
        SetExpr::SetOperation { .. } => Err(unsupported("UNION, EXCEPT and INTERSECT")),
        _ => Err(unsupported("a query that is not a SELECT")),
    }
}

/// What planning one query keeps track of.
struct Planner<'a> {
    layout: &'a Layout,
    /// Names the query may qualify columns with: the table's, its alias.
    qualifiers: Vec<String>,
    group_by: Vec<u16>,
    aggregates: Vec<Aggregate>,
    /// Each aggregate's function and argument as SQL: the same aggregate
    /// written twice is computed once.
    aggregate_keys: Vec<String>,
    /// While an expression over finished groups is planned (HAVING, or a
    /// SELECT item or sort key computed from aggregates): what its names
    /// may refer to.
    scope: Option<Scope>,
    /// The group values those expressions read (their slots).
    slots: Vec<Source>,
    /// The values computed from them.
    computed: Vec<(Expr, Ty)>,
    /// A second row of the table the expressions may read (an INSERT's
    /// row, in its ON DUPLICATE KEY UPDATE): the column of it an
    /// expression names, if it names one. Its column `c` is read at the
    /// table's width + `c`.
    second: Option<&'a SecondRow<'a>>,
}

/// What the names of an expression over finished groups refer to.
struct Scope {
    /// The clause, as an error names it.
    clause: &'static str,
    /// The outputs whose aliases the expression may name (HAVING's and
    /// ORDER BY's; a SELECT item cannot name another's alias).
    aliases: Vec<Output>,
}

/// How the expressions over a pair of rows name the second row's columns.
pub(crate) type SecondRow<'a> = dyn Fn(&ast::Expr) -> Result<Option<u16>, SqlError> + 'a;

/// Plans a parsed query over `table`.
pub(crate) fn plan(explain: bool, query: &ast::Query, table: Arc<Table>) -> Result<Plan, SqlError> {
    if !query.locks.is_empty() {
        return Err(unsupported("FOR UPDATE and FOR SHARE in an aggregate"));
    }
    let select = select_of(query)?;
    let layout = Arc::clone(&table.layout);
    let mut qualifiers = vec![table.name().to_string()];
    if let Some([from]) = Some(select.from.as_slice())
        && let TableFactor::Table {
            alias: Some(alias), ..
        } = &from.relation
    {
        if !alias.columns.is_empty() {
            return Err(unsupported("column aliases on a table"));
        }
        qualifiers = vec![alias.name.value.clone()];
    }
    let mut p = Planner {
        layout: &layout,
        qualifiers,
        group_by: Vec::new(),
        aggregates: Vec::new(),
        aggregate_keys: Vec::new(),
        scope: None,
        slots: Vec::new(),
        computed: Vec::new(),
        second: None,
    };
    if select.distinct.is_some() {
        return Err(unsupported(
            "SELECT DISTINCT (GROUP BY the columns instead)",
        ));
    }
    if select.top.is_some()
        || select.into.is_some()
        || select.exclude.is_some()
        || !select.lateral_views.is_empty()
        || select.prewhere.is_some()
        || !select.cluster_by.is_empty()
        || !select.distribute_by.is_empty()
        || !select.sort_by.is_empty()
        || !select.named_window.is_empty()
        || select.qualify.is_some()
        || select.connect_by.is_some()
        || select.value_table_mode.is_some()
    {
        return Err(unsupported("this SELECT clause"));
    }
    match &select.group_by {
        GroupByExpr::Expressions(exprs, modifiers) if modifiers.is_empty() => {
            if exprs.len() > MAX_ITEMS {
                return Err(too_large(format!(
                    "GROUP BY has {} columns; at most {MAX_ITEMS}",
                    exprs.len()
                )));
            }
            for e in exprs {
                let c = p.group_column(select, e)?;
                if !p.group_by.contains(&c) {
                    p.group_by.push(c);
                }
            }
        }
        _ => return Err(unsupported("GROUP BY ALL and GROUP BY modifiers")),
    }
    let filter = select
        .selection
        .as_ref()
        .map(|w| p.pred(w, 0))
        .transpose()?;
    if select.projection.len() > MAX_ITEMS {
        return Err(too_large(format!(
            "the SELECT list has {} items; at most {MAX_ITEMS}",
            select.projection.len()
        )));
    }
    let mut outputs = Vec::with_capacity(select.projection.len());
    for item in &select.projection {
        let (expr, name) = match item {
            SelectItem::UnnamedExpr(e) => (e, e.to_string()),
            SelectItem::ExprWithAlias { expr, alias } => (expr, alias.value.clone()),
            SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..) => {
                return Err(unsupported(
                    "SELECT * (name the GROUP BY columns and aggregates to answer)",
                ));
            }
        };
        let source = p.output(expr)?;
        outputs.push(Output { name, source });
    }
    if p.aggregates.is_empty() && p.group_by.is_empty() {
        return Err(unsupported(
            "a query without aggregates or GROUP BY (RonSQL aggregates rows; use /scan to read them)",
        ));
    }
    let order = match &query.order_by {
        None => Vec::new(),
        Some(order_by) => {
            if order_by.interpolate.is_some() {
                return Err(unsupported("INTERPOLATE"));
            }
            let OrderByKind::Expressions(exprs) = &order_by.kind else {
                return Err(unsupported("ORDER BY ALL"));
            };
            if exprs.len() > MAX_ITEMS {
                return Err(too_large(format!(
                    "ORDER BY has {} items; at most {MAX_ITEMS}",
                    exprs.len()
                )));
            }
            let mut order = Vec::with_capacity(exprs.len());
            for e in exprs {
                if e.options.nulls_first.is_some() || e.with_fill.is_some() {
                    return Err(unsupported("NULLS FIRST/LAST and WITH FILL"));
                }
                let source = p.sort_key(&e.expr, &outputs)?;
                order.push((source, e.options.asc != Some(false)));
            }
            order
        }
    };
    let having = match &select.having {
        None => None,
        Some(h) => Some(p.over_groups("HAVING", &outputs, |p| p.pred(h, 0))?),
    };
    let (limit, offset) = limit_of(query.limit_clause.as_ref())?;
    let candidates = match &filter {
        Some(f) => ranges(&layout, f),
        None => Vec::new(),
    };
    let program = Arc::new(Program {
        filter,
        group_by: p.group_by,
        aggregates: p.aggregates,
    });
    Ok(Plan {
        explain,
        table,
        program,
        access: Access::Full,
        candidates,
        outputs,
        order,
        limit,
        offset,
        having,
        slots: p.slots,
        computed: p.computed,
        filter_sql: select.selection.as_ref().map(ToString::to_string),
    })
}

/// A value expression over one row of `table`, as a front end evaluates
/// it on each row it found (`SELECT n * 2 FROM t`, `SET n = n * 2`): no
/// aggregates. The expression and its type.
pub(crate) fn row_value(table: &Table, e: &ast::Expr) -> Result<(Expr, Ty), SqlError> {
    Planner::over(table).value(e, 0)
}

/// The layout of no row, which the outputs of a SELECT without a table
/// are computed over.
pub(crate) fn no_row() -> &'static Layout {
    use shoal_wire::schema::{PrimaryKeyIndex, TableDef, TableName};
    static NO_ROW: std::sync::LazyLock<Layout> = std::sync::LazyLock::new(|| {
        Layout::new(TableDef {
            name: TableName::parse("dual").expect("a table name"),
            columns: Vec::new(),
            primary_key: Vec::new(),
            primary_key_index: PrimaryKeyIndex::Ordered,
            indexes: Vec::new(),
        })
    });
    &NO_ROW
}

/// A value expression of no row (an output of a SELECT without a table):
/// constants, and functions and arithmetic of them.
pub(crate) fn constant_value(e: &ast::Expr) -> Result<(Expr, Ty), SqlError> {
    Planner::of(no_row(), Vec::new()).value(e, 0)
}

/// A value expression over a row of `table` and a second row of it, whose
/// columns `second` finds named (`VALUES(c)`): read at the table's width
/// + `c`.
pub(crate) fn pair_value(
    table: &Table,
    e: &ast::Expr,
    second: &SecondRow<'_>,
) -> Result<(Expr, Ty), SqlError> {
    let mut p = Planner::over(table);
    p.second = Some(second);
    p.value(e, 0)
}

/// A condition over one row of `table`, as a front end checks it on each
/// row it found.
pub(crate) fn row_pred(table: &Table, e: &ast::Expr) -> Result<Pred, SqlError> {
    Planner::over(table).pred(e, 0)
}

/// LIMIT and OFFSET, whole numbers only: `(limit, offset)`.
pub(crate) fn limit_of(clause: Option<&LimitClause>) -> Result<(Option<u64>, u64), SqlError> {
    let number = |e: &ast::Expr, what: &str| match e {
        ast::Expr::Value(v) => match &v.value {
            ast::Value::Number(n, _) => n
                .parse::<u64>()
                .map_err(|_| semantic(format!("{what} must be a whole number, not {n}"))),
            other => Err(semantic(format!(
                "{what} must be a whole number, not {other}"
            ))),
        },
        other => Err(unsupported(format!("{what} '{other}' (only a number)"))),
    };
    match clause {
        None => Ok((None, 0)),
        Some(LimitClause::LimitOffset {
            limit,
            offset,
            limit_by,
        }) => {
            if !limit_by.is_empty() {
                return Err(unsupported("LIMIT BY"));
            }
            let limit = limit.as_ref().map(|l| number(l, "LIMIT")).transpose()?;
            let offset = offset
                .as_ref()
                .map(|o| number(&o.value, "OFFSET"))
                .transpose()?
                .unwrap_or(0);
            Ok((limit, offset))
        }
        Some(LimitClause::OffsetCommaLimit { offset, limit }) => {
            Ok((Some(number(limit, "LIMIT")?), number(offset, "OFFSET")?))
        }
    }
}

impl<'a> Planner<'a> {
    /// A planner of expressions over single rows of `table`.
    fn over(table: &'a Table) -> Planner<'a> {
        Planner::of(&table.layout, vec![table.name().to_string()])
    }

    /// A planner of expressions over single rows of `layout`, whose
    /// columns the names `qualifiers` may qualify.
    fn of(layout: &'a Layout, qualifiers: Vec<String>) -> Planner<'a> {
        Planner {
            layout,
            qualifiers,
            group_by: Vec::new(),
            aggregates: Vec::new(),
            aggregate_keys: Vec::new(),
            scope: None,
            slots: Vec::new(),
            computed: Vec::new(),
            second: None,
        }
    }

    /// The column a GROUP BY item names, as MySQL resolves it: a column
    /// of the table, else an output by its position (from 1) or its alias,
    /// where that output is a column.
    fn group_column(&self, select: &ast::Select, e: &ast::Expr) -> Result<u16, SqlError> {
        let only_columns =
            || unsupported(format!("GROUP BY '{e}': only columns can be grouped by"));
        let output = match e {
            ast::Expr::Value(v) => match &v.value {
                ast::Value::Number(n, _) => {
                    let item = (n.parse::<usize>().ok())
                        .and_then(|n| n.checked_sub(1))
                        .and_then(|i| select.projection.get(i))
                        .ok_or_else(|| {
                            SqlError::new(
                                Class::NoSuchColumn,
                                format!("Unknown column '{n}' in 'group statement'"),
                            )
                        })?;
                    Some(item)
                }
                _ => None,
            },
            ast::Expr::Identifier(name) => match self.column_ref(e) {
                Ok(Some(c)) => return Ok(c),
                _ => select.projection.iter().find(|item| {
                    matches!(item, SelectItem::ExprWithAlias { alias, .. }
                        if alias.value.eq_ignore_ascii_case(&name.value))
                }),
            },
            _ => None,
        };
        let e = match output {
            Some(
                SelectItem::UnnamedExpr(output) | SelectItem::ExprWithAlias { expr: output, .. },
            ) => output,
            Some(_) => return Err(only_columns()),
            None => e,
        };
        self.column_ref(e)?.ok_or_else(only_columns)
    }

    /// The column an expression names, if it is a column reference.
    fn column_ref(&self, e: &ast::Expr) -> Result<Option<u16>, SqlError> {
        let (qualifier, name) = match e {
            ast::Expr::Identifier(i) => (None, &i.value),
            ast::Expr::CompoundIdentifier(parts) => match parts.as_slice() {
                [t, c] => (Some(&t.value), &c.value),
                _ => return Err(unsupported(format!("the column name '{e}'"))),
            },
            ast::Expr::Nested(inner) => return self.column_ref(inner),
            _ => return Ok(None),
        };
        if let Some(q) = qualifier
            && !self.qualifiers.iter().any(|t| t == q)
        {
            return Err(match self.qualifiers.first() {
                Some(table) => semantic(format!(
                    "'{q}' is not the table the query reads (it reads '{table}')"
                )),
                None => SqlError::new(
                    Class::NoSuchColumn,
                    format!("Unknown column '{e}': the statement reads no table"),
                ),
            });
        }
        let c = self
            .layout
            .column_index(name)
            .or_else(|| {
                (self.layout.def.columns.iter())
                    .position(|c| c.name.as_str().eq_ignore_ascii_case(name))
                    .map(|c| c as u16)
            })
            .ok_or_else(|| {
                SqlError::new(
                    Class::NoSuchColumn,
                    match self.qualifiers.first() {
                        Some(table) => format!("could not find column '{name}' in table '{table}'"),
                        None => format!("Unknown column '{name}': the statement reads no table"),
                    },
                )
            })?;
        Ok(Some(c))
    }

    fn column_ty(&self, c: u16) -> Ty {
        Ty::of_column(self.layout.columns[c as usize].ty)
    }

    /// A value expression and its type; constants folded.
    fn value(&mut self, e: &ast::Expr, depth: usize) -> Result<(Expr, Ty), SqlError> {
        if depth > MAX_DEPTH {
            return Err(too_large(format!(
                "an expression is nested deeper than {MAX_DEPTH} levels"
            )));
        }
        if self.scope.is_some()
            && let Some(slot) = self.group_slot(e)?
        {
            return Ok(slot);
        }
        if let Some(second) = self.second
            && let Some(c) = second(e)?
        {
            let width = self.layout.columns.len() as u16;
            return Ok((Expr::Column(width + c), self.column_ty(c)));
        }
        if let Some(c) = self.column_ref(e)? {
            return Ok((Expr::Column(c), self.column_ty(c)));
        }
        match e {
            ast::Expr::Value(v) => literal(&v.value),
            ast::Expr::TypedString(t) => match &t.value.value {
                // DATE '…' and TIMESTAMP '…' are read as the column they
                // meet reads a string.
                ast::Value::SingleQuotedString(s) | ast::Value::DoubleQuotedString(s) => Ok((
                    Expr::Literal(Scalar::Text(s.as_bytes().to_vec().into())),
                    Ty::Text,
                )),
                _ => Err(unsupported(format!("the literal '{e}'"))),
            },
            ast::Expr::Nested(inner) => self.value(inner, depth + 1),
            ast::Expr::IsNull(_)
            | ast::Expr::IsNotNull(_)
            | ast::Expr::Between { .. }
            | ast::Expr::InList { .. }
            | ast::Expr::Like { .. }
            | ast::Expr::RLike { .. }
            | ast::Expr::UnaryOp {
                op: UnaryOperator::Not,
                ..
            } => self.truth(e, depth),
            ast::Expr::UnaryOp { op, expr } => {
                let (x, ty) = self.value(expr, depth + 1)?;
                let (x, ty) = match op {
                    UnaryOperator::Plus | UnaryOperator::Minus => operand((x, ty), e)?,
                    _ => (x, ty),
                };
                match op {
                    UnaryOperator::Plus if ty.is_numeric() => Ok((x, ty)),
                    UnaryOperator::Minus if ty.is_numeric() => match x {
                        Expr::Literal(v) => {
                            let v = if v.is_null() {
                                v
                            } else {
                                eval::negate(&v).map_err(|e| semantic(e.0.to_string()))?
                            };
                            Ok((Expr::Literal(v), ty))
                        }
                        x => Ok((Expr::Neg(Box::new(x)), ty)),
                    },
                    UnaryOperator::Plus | UnaryOperator::Minus => Err(semantic(format!(
                        "'{e}': {} is not a number",
                        ty.describe()
                    ))),
                    _ => Err(unsupported(format!("the operator {op}"))),
                }
            }
            ast::Expr::BinaryOp { left, op, right } => {
                let op = match op {
                    BinaryOperator::Plus => Arith::Add,
                    BinaryOperator::Minus => Arith::Sub,
                    BinaryOperator::Multiply => Arith::Mul,
                    BinaryOperator::Divide => Arith::Div,
                    BinaryOperator::Modulo => Arith::Mod,
                    BinaryOperator::Eq
                    | BinaryOperator::NotEq
                    | BinaryOperator::Lt
                    | BinaryOperator::LtEq
                    | BinaryOperator::Gt
                    | BinaryOperator::GtEq
                    | BinaryOperator::Spaceship
                    | BinaryOperator::And
                    | BinaryOperator::Or => return self.truth(e, depth),
                    other => return Err(unsupported(format!("the operator {other}"))),
                };
                let (a, at) = operand(self.value(left, depth + 1)?, e)?;
                let (b, bt) = operand(self.value(right, depth + 1)?, e)?;
                let ty = op.result(at, bt).ok_or_else(|| {
                    semantic(format!(
                        "'{e}': {} {} {} is not arithmetic on numbers",
                        at.describe(),
                        op.symbol(),
                        bt.describe()
                    ))
                })?;
                if let (Expr::Literal(x), Expr::Literal(y)) = (&a, &b) {
                    let v = if x.is_null() || y.is_null() {
                        Scalar::Null
                    } else {
                        eval::arith(op, x, y)
                            .map_err(|err| semantic(format!("'{e}': {}", err.0)))?
                    };
                    return Ok((Expr::Literal(v), ty));
                }
                Ok((Expr::Arith(op, Box::new(a), Box::new(b)), ty))
            }
            ast::Expr::Function(f) => {
                if aggregate_func(f).is_some() {
                    return Err(SqlError::new(
                        Class::GroupFunction,
                        format!(
                            "'{e}': an aggregate is allowed only in the SELECT list, HAVING and ORDER BY, and not inside another"
                        ),
                    ));
                }
                let args = plain_args(f)?;
                self.function(&f.name.to_string(), &args, e, depth)
            }
            ast::Expr::Substring {
                expr,
                substring_from,
                substring_for,
                ..
            } => {
                let args: Vec<&ast::Expr> = std::iter::once(expr.as_ref())
                    .chain(substring_from.as_deref())
                    .chain(substring_for.as_deref())
                    .collect();
                self.function("SUBSTRING", &args, e, depth)
            }
            ast::Expr::Position { expr, r#in } => {
                self.function("LOCATE", &[expr.as_ref(), r#in.as_ref()], e, depth)
            }
            ast::Expr::Trim {
                expr,
                trim_where,
                trim_what,
                trim_characters: None,
            } => {
                let (start, end) = match trim_where {
                    None | Some(ast::TrimWhereField::Both) => (true, true),
                    Some(ast::TrimWhereField::Leading) => (true, false),
                    Some(ast::TrimWhereField::Trailing) => (false, true),
                };
                let mut args = vec![self.value(expr, depth + 1)?];
                if let Some(what) = trim_what {
                    args.push(self.value(what, depth + 1)?);
                }
                call(Function::Trim { start, end }, args, e)
            }
            ast::Expr::Ceil { expr, field } | ast::Expr::Floor { expr, field }
                if matches!(
                    field,
                    ast::CeilFloorKind::DateTimeField(ast::DateTimeField::NoDateTime)
                ) =>
            {
                let name = if matches!(e, ast::Expr::Ceil { .. }) {
                    "CEIL"
                } else {
                    "FLOOR"
                };
                self.function(name, &[expr.as_ref()], e, depth)
            }
            ast::Expr::Extract { field, expr, .. } => {
                use ast::DateTimeField as Unit;
                let part = match field {
                    Unit::Year => "YEAR",
                    Unit::Quarter => "QUARTER",
                    Unit::Month => "MONTH",
                    Unit::Day => "DAY",
                    Unit::Hour => "HOUR",
                    Unit::Minute => "MINUTE",
                    Unit::Second => "SECOND",
                    Unit::Microsecond => "MICROSECOND",
                    other => return Err(unsupported(format!("EXTRACT of {other}"))),
                };
                self.function(part, &[expr.as_ref()], e, depth)
            }
            ast::Expr::Cast {
                kind: ast::CastKind::Cast,
                expr,
                data_type,
                format: None,
            } => {
                let to = match data_type {
                    ast::DataType::Char(_)
                    | ast::DataType::Varchar(_)
                    | ast::DataType::Text
                    | ast::DataType::String(_) => Function::Cast(Ty::Text),
                    ast::DataType::Signed | ast::DataType::SignedInteger => Function::Cast(Ty::Int),
                    ast::DataType::Unsigned | ast::DataType::UnsignedInteger => {
                        Function::CastUnsigned
                    }
                    ast::DataType::Decimal(info) => {
                        let scale = match info {
                            ast::ExactNumberInfo::PrecisionAndScale(_, s) => *s,
                            _ => 0,
                        };
                        match u8::try_from(scale).ok().filter(|s| *s <= eval::MAX_SCALE) {
                            Some(s) => Function::Cast(Ty::Decimal(s)),
                            None => {
                                return Err(semantic(format!(
                                    "'{e}': a DECIMAL has at most {} decimals",
                                    eval::MAX_SCALE
                                )));
                            }
                        }
                    }
                    ast::DataType::Double(_) | ast::DataType::DoublePrecision => {
                        Function::Cast(Ty::Double)
                    }
                    ast::DataType::Date => Function::Cast(Ty::Time(TimeKind::Date)),
                    ast::DataType::Datetime(fsp) => match fsp.unwrap_or(0) {
                        fsp @ 0..=6 => Function::Cast(Ty::Time(TimeKind::DateTime(fsp as u8))),
                        fsp => {
                            return Err(semantic(format!(
                                "'{e}': a DATETIME has at most 6 fractional digits, not {fsp}"
                            )));
                        }
                    },
                    other => return Err(unsupported(format!("CAST to {other}"))),
                };
                let x = self.value(expr, depth + 1)?;
                call(to, vec![x], e)
            }
            ast::Expr::Case {
                operand,
                conditions,
                else_result,
                ..
            } => {
                let mut arms = Vec::with_capacity(conditions.len());
                for when in conditions {
                    // `CASE x WHEN v …`: each arm is `x = v`.
                    let pred = match operand {
                        Some(x) => {
                            let a = self.value(x, depth + 1)?;
                            let b = self.value(&when.condition, depth + 1)?;
                            let (a, b) = comparable(a, b, e)?;
                            Pred::Cmp(Cmp::Eq, a, b)
                        }
                        None => self.pred(&when.condition, depth + 1)?,
                    };
                    arms.push((pred, self.value(&when.result, depth + 1)?));
                }
                let otherwise = match else_result {
                    Some(x) => self.value(x, depth + 1)?,
                    None => (Expr::Literal(Scalar::Null), Ty::Null),
                };
                case(arms, otherwise, e)
            }
            _ => Err(unsupported(format!("the expression '{e}'"))),
        }
    }

    /// A condition as a value, as MySQL makes one: 1 when true, 0 when
    /// false, NULL when unknown (`SELECT qty > 5`).
    fn truth(&mut self, e: &ast::Expr, depth: usize) -> Result<(Expr, Ty), SqlError> {
        Ok(truth_of(self.pred(e, depth)?))
    }

    /// `x [NOT] REGEXP pattern`, with `REGEXP_LIKE`'s match type: the
    /// pattern and match type constant strings, `x` of any type (a number
    /// or date is matched as MySQL writes it).
    fn regexp(
        &self,
        (x, ty): (Expr, Ty),
        (pattern, _): (Expr, Ty),
        match_type: Option<(Expr, Ty)>,
        negated: bool,
        e: &ast::Expr,
    ) -> Result<Pred, SqlError> {
        let constant = |v: &Expr, what: &str| match v {
            Expr::Literal(Scalar::Text(p) | Scalar::Binary(p)) => Ok(Some(p.to_vec())),
            Expr::Literal(Scalar::Null) => Ok(None),
            _ => Err(unsupported(format!(
                "'{e}': REGEXP with anything but a constant string as its {what}"
            ))),
        };
        let Some(pattern) = constant(&pattern, "pattern")? else {
            return Ok(Pred::Const(None));
        };
        let match_type = match &match_type {
            Some((m, _)) => match constant(m, "match type")? {
                Some(m) => m,
                None => return Ok(Pred::Const(None)),
            },
            None => Vec::new(),
        };
        let re = Regexp::new(&pattern, &match_type, ty == Ty::Binary).map_err(|bad| match bad {
            BadRegexp::Unsupported(_) => unsupported(bad),
            // The statement is not echoed: its pattern may be what is too long.
            BadRegexp::TooLarge(why) => too_large(why),
            BadRegexp::Invalid(why) => SqlError::new(Class::Regexp, why),
        })?;
        Ok(Pred::Regexp {
            expr: x,
            re: Box::new(re),
            negated,
        })
    }

    /// A call of the scalar function `name` with `args`.
    fn function(
        &mut self,
        name: &str,
        args: &[&ast::Expr],
        e: &ast::Expr,
        depth: usize,
    ) -> Result<(Expr, Ty), SqlError> {
        let upper = name.to_ascii_uppercase();
        let arity = |n: std::ops::RangeInclusive<usize>| {
            if n.contains(&args.len()) {
                Ok(())
            } else {
                Err(semantic(format!(
                    "'{e}': {upper} takes {} arguments, not {}",
                    if n.start() == n.end() {
                        n.start().to_string()
                    } else {
                        format!("{} to {}", n.start(), n.end())
                    },
                    args.len()
                )))
            }
        };
        if upper == "IF" {
            arity(3..=3)?;
            let when = self.pred(args[0], depth + 1)?;
            let then = self.value(args[1], depth + 1)?;
            let otherwise = self.value(args[2], depth + 1)?;
            return case(vec![(when, then)], otherwise, e);
        }
        if upper == "TIMESTAMPDIFF" {
            arity(3..=3)?;
            let unit = match args[0] {
                ast::Expr::Identifier(unit) => DiffUnit::named(&unit.value.to_ascii_uppercase()),
                _ => None,
            }
            .ok_or_else(|| {
                semantic(format!(
                    "'{e}': TIMESTAMPDIFF counts in MICROSECOND, SECOND, MINUTE, HOUR, DAY, WEEK, MONTH, QUARTER or YEAR"
                ))
            })?;
            let a = self.value(args[1], depth + 1)?;
            let b = self.value(args[2], depth + 1)?;
            return call(Function::TimestampDiff(unit), vec![a, b], e);
        }
        let mut planned = Vec::with_capacity(args.len());
        for a in args {
            planned.push(self.value(a, depth + 1)?);
        }
        let not_null = |x: &Expr| Pred::IsNull(x.clone(), true);
        match upper.as_str() {
            "COALESCE" | "IFNULL" => {
                if upper == "IFNULL" {
                    arity(2..=2)?;
                } else if args.is_empty() {
                    return Err(semantic(format!("'{e}': COALESCE takes arguments")));
                }
                let (last, rest) = planned.split_last().expect("at least one");
                let arms = rest
                    .iter()
                    .map(|(x, t)| (not_null(x), (x.clone(), *t)))
                    .collect();
                return case(arms, last.clone(), e);
            }
            "NULLIF" => {
                arity(2..=2)?;
                let (a, b) = (planned[0].clone(), planned[1].clone());
                let (x, y) = comparable(a.clone(), b, e)?;
                let arms = vec![(
                    Pred::Cmp(Cmp::Eq, x, y),
                    (Expr::Literal(Scalar::Null), Ty::Null),
                )];
                return case(arms, a, e);
            }
            "ROUND" | "TRUNCATE" => {
                // TRUNCATE must say to how many decimals.
                let (make, arguments): (fn(i32) -> Function, _) = if upper == "ROUND" {
                    (Function::Round, 1..=2)
                } else {
                    (Function::Truncate, 2..=2)
                };
                arity(arguments)?;
                let d = match planned.get(1) {
                    None => 0,
                    Some((Expr::Literal(Scalar::Int(d)), _)) => i32::try_from(*d)
                        .ok()
                        .filter(|d| d.abs() <= 38)
                        .ok_or_else(|| semantic(format!("'{e}': {upper} to {d} decimals")))?,
                    Some(_) => {
                        return Err(unsupported(format!(
                            "'{e}': {upper} to anything but a constant number of decimals"
                        )));
                    }
                };
                planned.truncate(1);
                return call(make(d), planned, e);
            }
            "CONVERT_TZ" => {
                arity(3..=3)?;
                if planned.iter().any(|(_, t)| *t == Ty::Null) {
                    return Ok((Expr::Literal(Scalar::Null), Ty::Time(TimeKind::DateTime(0))));
                }
                let zone = |(x, _): &(Expr, Ty)| match x {
                    Expr::Literal(Scalar::Text(z)) => {
                        let z = String::from_utf8_lossy(z);
                        crate::sql::func::zone_offset(&z).ok_or_else(|| {
                            unsupported(format!(
                                "'{e}': the time zone '{}' (Shoal knows UTC, SYSTEM and offsets as '+05:30')",
                                z.chars().take(64).collect::<String>()
                            ))
                        })
                    }
                    _ => Err(unsupported(format!(
                        "'{e}': CONVERT_TZ between zones that are not constant strings"
                    ))),
                };
                let shift = zone(&planned[2])? - zone(&planned[1])?;
                planned.truncate(1);
                return call(Function::ConvertTz(shift), planned, e);
            }
            "INSTR" => {
                arity(2..=2)?;
                planned.swap(0, 1);
                return call(Function::Locate, planned, e);
            }
            "GREATEST" | "LEAST" => {
                if args.len() < 2 {
                    return Err(semantic(format!(
                        "'{e}': {upper} takes 2 or more arguments"
                    )));
                }
                let mut ty = Ty::Null;
                for (_, t) in &planned {
                    ty = Ty::common(ty, *t).ok_or_else(|| {
                        semantic(format!(
                            "'{e}' compares {} with {}; Shoal does not convert between them",
                            ty.describe(),
                            t.describe()
                        ))
                    })?;
                }
                let greatest = upper == "GREATEST";
                return call(Function::Extreme { greatest, ty }, planned, e);
            }
            "REGEXP_LIKE" => {
                arity(2..=3)?;
                let match_type = planned.pop().filter(|_| args.len() == 3);
                let pattern = planned.pop().expect("two or three");
                let x = planned.pop().expect("two or three");
                return Ok(truth_of(self.regexp(x, pattern, match_type, false, e)?));
            }
            "MOD" => {
                arity(2..=2)?;
                let (b, bt) = planned.pop().expect("two");
                let (a, at) = planned.pop().expect("two");
                let ty = Arith::Mod
                    .result(at, bt)
                    .ok_or_else(|| semantic(format!("'{e}': MOD takes numbers")))?;
                return Ok((Expr::Arith(Arith::Mod, Box::new(a), Box::new(b)), ty));
            }
            _ => {}
        }
        match Function::named(&upper) {
            Some((f, takes)) if takes.contains(&args.len()) => {
                if f == Function::DateFormat {
                    match &planned[1].0 {
                        Expr::Literal(Scalar::Text(format)) => {
                            if let Some(refused) = crate::sql::func::format_refusal(format) {
                                return Err(unsupported(format!("'{e}': {refused}")));
                            }
                        }
                        Expr::Literal(Scalar::Null) => {}
                        _ => {
                            return Err(unsupported(format!(
                                "'{e}': DATE_FORMAT with a format that is not a constant string"
                            )));
                        }
                    }
                }
                call(f, planned, e)
            }
            Some(_) => Err(semantic(format!(
                "'{e}': {upper} does not take {} arguments",
                args.len()
            ))),
            None => Err(unsupported(format!("the function {name}"))),
        }
    }

    /// In an expression over finished groups: what a name or an
    /// aggregate refers to — an output by its alias, a GROUP BY column, an
    /// aggregate — as a slot of the group's values, and its type; `None`
    /// for anything else.
    fn group_slot(&mut self, e: &ast::Expr) -> Result<Option<(Expr, Ty)>, SqlError> {
        let scope = self.scope.as_ref().expect("planning over groups");
        let clause = scope.clause;
        let alias = match e {
            ast::Expr::Identifier(i) => (scope.aliases.iter())
                .find(|o| o.name.eq_ignore_ascii_case(&i.value))
                .map(|o| o.source),
            _ => None,
        };
        let source = match (alias, e) {
            // A computed output is its expression, over slots already.
            (Some(Source::Computed(i)), _) => return Ok(Some(self.computed[i].clone())),
            (Some(source), _) => source,
            (None, ast::Expr::Function(f)) if aggregate_func(f).is_some() => {
                // Planned outside the scope: its argument reads rows.
                let scope = self.scope.take();
                let source = self.aggregate(f, e);
                self.scope = scope;
                source?
            }
            (None, _) => match self.column_ref(e)? {
                None => return Ok(None),
                Some(c) => self.grouped(c, |name| {
                    format!("{clause} names column '{name}', which is not in GROUP BY")
                })?,
            },
        };
        let ty = self.source_ty(source);
        let slot = match self.slots.iter().position(|s| *s == source) {
            Some(i) => i,
            None => {
                self.slots.push(source);
                self.slots.len() - 1
            }
        };
        Ok(Some((Expr::Slot(slot), ty)))
    }

    /// `plan` run over finished groups: in `clause`, with the names
    /// `aliases` give outputs.
    fn over_groups<T>(
        &mut self,
        clause: &'static str,
        aliases: &[Output],
        plan: impl FnOnce(&mut Self) -> Result<T, SqlError>,
    ) -> Result<T, SqlError> {
        self.scope = Some(Scope {
            clause,
            aliases: aliases.to_vec(),
        });
        let planned = plan(self);
        self.scope = None;
        planned
    }

    /// A value computed from each finished group (`MAX(id) + 1`), planned
    /// in `clause` with the names `aliases` give outputs.
    fn computed(
        &mut self,
        e: &ast::Expr,
        clause: &'static str,
        aliases: &[Output],
    ) -> Result<Source, SqlError> {
        let planned = self.over_groups(clause, aliases, |p| p.value(e, 0))?;
        self.computed.push(planned);
        Ok(Source::Computed(self.computed.len() - 1))
    }

    /// The type of a finished group's value.
    fn source_ty(&self, source: Source) -> Ty {
        match source {
            Source::Group(i) => self.column_ty(self.group_by[i]),
            Source::Aggregate(i) => {
                let a = &self.aggregates[i];
                match a.func {
                    Func::Count | Func::CountDistinct => Ty::Int,
                    Func::Sum | Func::Min | Func::Max => a.ty,
                }
            }
            Source::Avg { ty: Ty::Double, .. } => Ty::Double,
            Source::Avg { ty, .. } => Ty::Decimal((scale(ty) + 4).min(eval::MAX_SCALE)),
            Source::Computed(i) => self.computed[i].1,
        }
    }

    /// A condition.
    fn pred(&mut self, e: &ast::Expr, depth: usize) -> Result<Pred, SqlError> {
        if depth > MAX_DEPTH {
            return Err(too_large(format!(
                "a condition is nested deeper than {MAX_DEPTH} levels"
            )));
        }
        let boxed = |p| Ok::<_, SqlError>(Box::new(p));
        match e {
            ast::Expr::Nested(inner) => self.pred(inner, depth + 1),
            // Rows compared: `(a, b) = (1, 2)`, `(a, b) <> (1, 2)`.
            ast::Expr::BinaryOp {
                left,
                op: op @ (BinaryOperator::Eq | BinaryOperator::NotEq),
                right,
            } if is_row(left) || is_row(right) => {
                let equal = self.rows_equal(left, right, depth)?;
                Ok(match op {
                    BinaryOperator::Eq => equal,
                    _ => Pred::Not(boxed(equal)?),
                })
            }
            // `(a, b) [NOT] IN ((1, 2), (3, 4))`: whether the row equals one
            // of the list's, balanced so that a long list nests shallowly.
            ast::Expr::InList {
                expr,
                list,
                negated,
            } if is_row(expr) => {
                if list.len() > MAX_IN_LIST {
                    return Err(too_large(format!(
                        "an IN list has {} rows; at most {MAX_IN_LIST} are taken",
                        list.len()
                    )));
                }
                let rows = (list.iter())
                    .map(|row| self.rows_equal(expr, row, depth))
                    .collect::<Result<Vec<_>, _>>()?;
                let any = balanced(rows, Pred::Or);
                Ok(if *negated {
                    Pred::Not(boxed(any)?)
                } else {
                    any
                })
            }
            ast::Expr::BinaryOp { left, op, right } => {
                let cmp = match op {
                    BinaryOperator::And => {
                        return Ok(Pred::And(
                            boxed(self.pred(left, depth + 1)?)?,
                            boxed(self.pred(right, depth + 1)?)?,
                        ));
                    }
                    BinaryOperator::Or => {
                        return Ok(Pred::Or(
                            boxed(self.pred(left, depth + 1)?)?,
                            boxed(self.pred(right, depth + 1)?)?,
                        ));
                    }
                    op if Cmp::of(op).is_some() => Cmp::of(op).expect("a comparison"),
                    // MySQL's NULL-safe equality: true when both are NULL,
                    // false when one is, else `=`; never NULL.
                    BinaryOperator::Spaceship => {
                        let a = self.value(left, depth + 1)?;
                        let b = self.value(right, depth + 1)?;
                        let (a, b) = comparable(a, b, e)?;
                        let both = |negated| {
                            Pred::And(
                                Box::new(Pred::IsNull(a.clone(), negated)),
                                Box::new(Pred::IsNull(b.clone(), negated)),
                            )
                        };
                        let (null, valued) = (both(false), both(true));
                        return Ok(Pred::Or(
                            boxed(null)?,
                            boxed(Pred::And(boxed(valued)?, boxed(Pred::Cmp(Cmp::Eq, a, b))?))?,
                        ));
                    }
                    BinaryOperator::Plus
                    | BinaryOperator::Minus
                    | BinaryOperator::Multiply
                    | BinaryOperator::Divide
                    | BinaryOperator::Modulo => {
                        return Err(unsupported(format!(
                            "a number used as a condition ('{e}'); compare it instead"
                        )));
                    }
                    other => return Err(unsupported(format!("the operator {other}"))),
                };
                let a = self.value(left, depth + 1)?;
                let b = self.value(right, depth + 1)?;
                let (a, b) = comparable(a, b, e)?;
                Ok(Pred::Cmp(cmp, a, b))
            }
            ast::Expr::UnaryOp {
                op: UnaryOperator::Not,
                expr,
            } => Ok(Pred::Not(boxed(self.pred(expr, depth + 1)?)?)),
            ast::Expr::IsNull(x) => Ok(Pred::IsNull(self.value(x, depth + 1)?.0, false)),
            ast::Expr::IsNotNull(x) => Ok(Pred::IsNull(self.value(x, depth + 1)?.0, true)),
            ast::Expr::Between {
                expr,
                negated,
                low,
                high,
            } => {
                let x = self.value(expr, depth + 1)?;
                let (lo, a) = comparable(self.value(low, depth + 1)?, x.clone(), e)?;
                let (hi, b) = comparable(self.value(high, depth + 1)?, x, e)?;
                let within = Pred::And(
                    Box::new(Pred::Cmp(Cmp::Ge, a, lo)),
                    Box::new(Pred::Cmp(Cmp::Le, b, hi)),
                );
                Ok(if *negated {
                    Pred::Not(Box::new(within))
                } else {
                    within
                })
            }
            ast::Expr::InList {
                expr,
                list,
                negated,
            } => {
                if list.len() > MAX_IN_LIST {
                    return Err(too_large(format!(
                        "an IN list has {} values; at most {MAX_IN_LIST} are taken",
                        list.len()
                    )));
                }
                let x = self.value(expr, depth + 1)?;
                let mut values = Vec::with_capacity(list.len());
                let mut has_null = false;
                let mut target = x.0.clone();
                for item in list {
                    let v = self.value(item, depth + 1)?;
                    let (t, v) = comparable(x.clone(), v, e)?;
                    target = t;
                    match v {
                        Expr::Literal(Scalar::Null) => has_null = true,
                        Expr::Literal(v) => values.push(v),
                        _ => return Err(unsupported("an IN list of anything but constants")),
                    }
                }
                Ok(Pred::In {
                    expr: target,
                    list: values,
                    has_null,
                    negated: *negated,
                })
            }
            ast::Expr::Value(v) if matches!(v.value, ast::Value::Boolean(_) | ast::Value::Null) => {
                Ok(Pred::Const(match v.value {
                    ast::Value::Boolean(b) => Some(b),
                    _ => None,
                }))
            }
            ast::Expr::IsTrue(_) | ast::Expr::IsFalse(_) | ast::Expr::IsUnknown(_) => {
                Err(unsupported("IS TRUE, IS FALSE and IS UNKNOWN"))
            }
            ast::Expr::Like {
                negated,
                any: false,
                expr,
                pattern,
                escape_char,
            } => {
                let (x, ty) = self.value(expr, depth + 1)?;
                if ty == Ty::Double {
                    return Err(unsupported("LIKE on a FLOAT or DOUBLE"));
                }
                let pattern = match self.value(pattern, depth + 1)?.0 {
                    Expr::Literal(Scalar::Text(p) | Scalar::Binary(p)) => p,
                    Expr::Literal(Scalar::Null) => return Ok(Pred::Const(None)),
                    _ => {
                        return Err(unsupported(format!(
                            "'{e}': LIKE with anything but a constant string as the pattern"
                        )));
                    }
                };
                let escape = escape_of(escape_char.as_ref())
                    .map_err(|()| semantic(format!("'{e}': ESCAPE takes one character")))?;
                let like =
                    Like::new(&pattern, escape, ty == Ty::Binary).map_err(|bad| match bad {
                        BadPattern::NotText => unsupported(bad),
                        BadPattern::TooLong(_) => too_large(bad.to_string()),
                    })?;
                Ok(Pred::Like {
                    expr: x,
                    like: Box::new(like),
                    negated: *negated,
                })
            }
            ast::Expr::Like { .. } | ast::Expr::ILike { .. } => {
                Err(unsupported("LIKE ANY and ILIKE"))
            }
            ast::Expr::RLike {
                negated,
                expr,
                pattern,
                ..
            } => {
                let x = self.value(expr, depth + 1)?;
                let pattern = self.value(pattern, depth + 1)?;
                self.regexp(x, pattern, None, *negated, e)
            }
            ast::Expr::Subquery(_) | ast::Expr::InSubquery { .. } | ast::Expr::Exists { .. } => {
                Err(unsupported("subqueries"))
            }
            other => {
                // A number is true when it is not zero, as in MySQL
                // (`WHERE active`); anything else must be compared.
                let (x, ty) = self.value(other, depth + 1)?;
                if let Expr::Truth(p) = x {
                    return Ok(*p);
                }
                if !ty.is_numeric() {
                    return Err(unsupported(format!(
                        "'{other}' as a condition: {} (compare it with something)",
                        ty.describe()
                    )));
                }
                Ok(Pred::Cmp(Cmp::Ne, x, Expr::Literal(Scalar::Int(0))))
            }
        }
    }

    /// Two rows equal, as MySQL compares them: each column of one equal
    /// to the other's (`(a, b) = (1, 2)` is `a = 1 AND b = 2`, NULL where
    /// that is). Rows of different widths, or a row and a value, are 1241.
    fn rows_equal(
        &mut self,
        left: &ast::Expr,
        right: &ast::Expr,
        depth: usize,
    ) -> Result<Pred, SqlError> {
        let width = |e: &ast::Expr| match e {
            ast::Expr::Tuple(columns) => columns.len(),
            _ => 1,
        };
        let (ast::Expr::Tuple(l), ast::Expr::Tuple(r)) = (left, right) else {
            return Err(SqlError::new(
                Class::Cardinality,
                format!(
                    "Operand should contain {} column(s)",
                    width(left).max(width(right))
                ),
            ));
        };
        if l.len() != r.len() {
            return Err(SqlError::new(
                Class::Cardinality,
                format!("Operand should contain {} column(s)", l.len()),
            ));
        }
        let each = (l.iter().zip(r))
            .map(|(a, b)| {
                let equal = ast::Expr::BinaryOp {
                    left: Box::new(a.clone()),
                    op: BinaryOperator::Eq,
                    right: Box::new(b.clone()),
                };
                self.pred(&equal, depth + 1)
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(balanced(each, Pred::And))
    }

    /// Column `c` as a GROUP BY column of the finished groups; `refused`
    /// says why not (given the column's name) when it is not one.
    fn grouped(&self, c: u16, refused: impl FnOnce(&str) -> String) -> Result<Source, SqlError> {
        (self.group_by.iter().position(|&g| g == c))
            .map(Source::Group)
            .ok_or_else(|| {
                let name = self.layout.def.columns[c as usize].name.as_str();
                SqlError::new(Class::NotGrouped, refused(name))
            })
    }

    /// An item of the SELECT list: a GROUP BY column, an aggregate, or a
    /// value computed from them.
    fn output(&mut self, e: &ast::Expr) -> Result<Source, SqlError> {
        if let Some(c) = self.column_ref(e)? {
            return self.grouped(c, |name| {
                format!(
                    "the SELECT list names column '{name}' outside an aggregate and not in GROUP BY"
                )
            });
        }
        match e {
            ast::Expr::Nested(inner) => self.output(inner),
            ast::Expr::Function(f) if aggregate_func(f).is_some() => self.aggregate(f, e),
            _ => self.computed(e, "the SELECT list", &[]),
        }
    }

    /// An aggregate of the SELECT list or ORDER BY.
    fn aggregate(&mut self, f: &ast::Function, e: &ast::Expr) -> Result<Source, SqlError> {
        let Some(name) = aggregate_func(f) else {
            return Err(unsupported(format!("the function {}", f.name)));
        };
        if has_modifiers(f) {
            return Err(unsupported(format!(
                "'{e}': FILTER, OVER and other aggregate modifiers"
            )));
        }
        let FunctionArguments::List(list) = &f.args else {
            return Err(semantic(format!("'{e}' needs one argument")));
        };
        let distinct = matches!(list.duplicate_treatment, Some(DuplicateTreatment::Distinct));
        if distinct && name != "COUNT" {
            return Err(unsupported(format!("'{e}': {name}(DISTINCT …)")));
        }
        if !list.clauses.is_empty() {
            return Err(unsupported(format!("'{e}': clauses inside an aggregate")));
        }
        if distinct && list.args.len() > 1 {
            return Err(unsupported(format!(
                "'{e}': COUNT(DISTINCT …) of several values"
            )));
        }
        let [FunctionArg::Unnamed(arg)] = list.args.as_slice() else {
            return Err(semantic(format!("'{e}' takes exactly one argument")));
        };
        let arg = match arg {
            FunctionArgExpr::Wildcard if name == "COUNT" && !distinct => None,
            FunctionArgExpr::Wildcard | FunctionArgExpr::QualifiedWildcard(_) => {
                return Err(semantic(format!("'{e}': only COUNT takes *")));
            }
            FunctionArgExpr::Expr(x) => Some(self.value(x, 1)?),
        };
        let ty = arg.as_ref().map_or(Ty::Int, |(_, ty)| *ty);
        if matches!(name, "SUM" | "AVG") && !ty.is_numeric() {
            return Err(semantic(format!(
                "'{e}': {name} of {} (it takes numbers)",
                ty.describe()
            )));
        }
        let arg = arg.map(|(x, _)| x);
        let mut add = |func: Func| {
            let key = format!("{}({:?})", func.name(), arg);
            if let Some(i) = self.aggregate_keys.iter().position(|k| *k == key) {
                return i;
            }
            self.aggregate_keys.push(key);
            self.aggregates.push(Aggregate {
                func,
                arg: arg.clone(),
                ty,
            });
            self.aggregates.len() - 1
        };
        Ok(match name {
            "COUNT" if distinct => Source::Aggregate(add(Func::CountDistinct)),
            "COUNT" => Source::Aggregate(add(Func::Count)),
            "SUM" => Source::Aggregate(add(Func::Sum)),
            "MIN" => Source::Aggregate(add(Func::Min)),
            "MAX" => Source::Aggregate(add(Func::Max)),
            _ => Source::Avg {
                sum: add(Func::Sum),
                count: add(Func::Count),
                ty,
            },
        })
    }

    /// An ORDER BY item: a position in the SELECT list, an output's alias,
    /// a GROUP BY column, an aggregate, or a value computed from them.
    fn sort_key(&mut self, e: &ast::Expr, outputs: &[Output]) -> Result<Source, SqlError> {
        if let ast::Expr::Value(v) = e
            && let ast::Value::Number(n, _) = &v.value
        {
            return (n.parse::<usize>().ok())
                .filter(|&i| (1..=outputs.len()).contains(&i))
                .map(|i| outputs[i - 1].source)
                .ok_or_else(|| {
                    semantic(format!(
                        "ORDER BY {n}: the SELECT list has {} items",
                        outputs.len()
                    ))
                });
        }
        if let ast::Expr::Identifier(i) = e
            && let Some(o) = outputs
                .iter()
                .find(|o| o.name.eq_ignore_ascii_case(&i.value))
        {
            return Ok(o.source);
        }
        if let Some(c) = self.column_ref(e)? {
            return self.grouped(c, |name| {
                format!("ORDER BY column '{name}', which is not in GROUP BY")
            });
        }
        match e {
            ast::Expr::Function(f) if aggregate_func(f).is_some() => self.aggregate(f, e),
            _ => self.computed(e, "ORDER BY", outputs),
        }
    }
}

/// Whether an expression is a row of several values (`(a, b)`).
fn is_row(e: &ast::Expr) -> bool {
    matches!(e, ast::Expr::Tuple(_))
}

/// `preds` joined by `join` (AND or OR) as a balanced tree: as deep as the
/// logarithm of their number.
fn balanced(mut preds: Vec<Pred>, join: fn(Box<Pred>, Box<Pred>) -> Pred) -> Pred {
    if preds.len() <= 1 {
        return preds.pop().unwrap_or(Pred::Const(None));
    }
    let right = preds.split_off(preds.len() / 2);
    join(
        Box::new(balanced(preds, join)),
        Box::new(balanced(right, join)),
    )
}

/// Whether a call carries FILTER, OVER or another modifier.
fn has_modifiers(f: &ast::Function) -> bool {
    f.filter.is_some()
        || f.over.is_some()
        || f.null_treatment.is_some()
        || !f.within_group.is_empty()
        || !matches!(f.parameters, FunctionArguments::None)
}

/// A function call's arguments: plain expressions, nothing else.
fn plain_args(f: &ast::Function) -> Result<Vec<&ast::Expr>, SqlError> {
    if has_modifiers(f) {
        return Err(unsupported(format!(
            "'{f}': FILTER, OVER and other modifiers"
        )));
    }
    let list = match &f.args {
        FunctionArguments::None => return Ok(Vec::new()),
        FunctionArguments::Subquery(_) => return Err(unsupported("subqueries")),
        FunctionArguments::List(list) => list,
    };
    if list.duplicate_treatment.is_some() || !list.clauses.is_empty() {
        return Err(unsupported(format!("'{f}': DISTINCT or clauses in a call")));
    }
    (list.args.iter())
        .map(|a| match a {
            FunctionArg::Unnamed(FunctionArgExpr::Expr(x)) => Ok(x),
            _ => Err(unsupported(format!("'{f}': named or * arguments"))),
        })
        .collect()
}

/// `p` as a value: 1 when true, 0 when false, NULL when unknown.
fn truth_of(p: Pred) -> (Expr, Ty) {
    (Expr::Truth(Box::new(p)), Ty::Int)
}

/// A call of `f` on planned arguments, its type checked.
fn call(f: Function, mut args: Vec<(Expr, Ty)>, e: &ast::Expr) -> Result<(Expr, Ty), SqlError> {
    // A function of dates reads a string constant as one, as MySQL does
    // (`YEAR('2024-05-01')`), with the fractional digits it was written with.
    let dates = match f {
        Function::Part(_) | Function::Date | Function::DateFormat | Function::ConvertTz(_) => 1,
        Function::DateDiff | Function::TimestampDiff(_) => 2,
        _ => 0,
    };
    for (x, ty) in args.iter_mut().take(dates) {
        let Expr::Literal(Scalar::Text(text)) = &*x else {
            continue;
        };
        let text = String::from_utf8_lossy(text).into_owned();
        let micros = DateTime::parse(&text)
            .or_else(|_| Date::parse(&text).map(|d| DateTime(i64::from(d.0) * 86_400_000_000)))
            .map_err(|m| semantic(format!("'{e}': {m}")))?
            .0;
        let fsp = text
            .rsplit_once('.')
            .map_or(0, |(_, f)| f.len().min(6) as u8);
        let kind = TimeKind::DateTime(fsp);
        *x = Expr::Literal(Scalar::Time(kind, micros));
        *ty = Ty::Time(kind);
    }
    let types: Vec<Ty> = args.iter().map(|(_, t)| *t).collect();
    let ty = f
        .result(&types)
        .map_err(|m| semantic(format!("'{e}': {m}")))?;
    Ok((
        Expr::Call(f, args.into_iter().map(|(x, _)| x).collect()),
        ty,
    ))
}

/// A CASE of planned arms: its type the one every arm's value fits.
fn case(
    arms: Vec<(Pred, (Expr, Ty))>,
    (otherwise, other_ty): (Expr, Ty),
    e: &ast::Expr,
) -> Result<(Expr, Ty), SqlError> {
    let mut ty = other_ty;
    for (_, (_, t)) in &arms {
        ty = Ty::common(ty, *t).ok_or_else(|| {
            semantic(format!(
                "'{e}' answers both {} and {}; Shoal does not convert between them",
                ty.describe(),
                t.describe()
            ))
        })?;
    }
    let arms = arms.into_iter().map(|(p, (x, _))| (p, x)).collect();
    Ok((
        Expr::Case(Box::new(eval::Case {
            arms,
            otherwise,
            ty,
        })),
        ty,
    ))
}

/// Whether an expression holds an aggregate anywhere in it
/// (`COALESCE(SUM(x), 0)`): what a front end answers through a plan.
pub(crate) fn has_aggregate(e: &ast::Expr) -> bool {
    use std::ops::ControlFlow;
    ast::visit_expressions(e, |e| match e {
        ast::Expr::Function(f) if aggregate_func(f).is_some() => ControlFlow::Break(()),
        _ => ControlFlow::Continue(()),
    })
    .is_break()
}

/// The aggregate a function call is, by its name in capitals.
fn aggregate_func(f: &ast::Function) -> Option<&'static str> {
    let [ObjectNamePart::Identifier(name)] = f.name.0.as_slice() else {
        return None;
    };
    ["COUNT", "SUM", "MIN", "MAX", "AVG"]
        .into_iter()
        .find(|n| name.value.eq_ignore_ascii_case(n))
}

/// An operand of arithmetic: a string constant as the number it spells,
/// as MySQL reads one there (`qty + '5'`, as drivers that send every
/// argument as a string write it); one that spells none is refused,
/// never read as 0. A string column stays text, and is refused.
fn operand((x, ty): (Expr, Ty), whole: &ast::Expr) -> Result<(Expr, Ty), SqlError> {
    let Expr::Literal(Scalar::Text(text)) = &x else {
        return Ok((x, ty));
    };
    let n = spelled_number(text).ok_or_else(|| {
        semantic(format!(
            "'{whole}': '{}' is not a number; Shoal does not read it as 0",
            String::from_utf8_lossy(&text[..text.len().min(64)])
        ))
    })?;
    let ty = match &n {
        Expr::Literal(Scalar::Int(_)) => Ty::Int,
        Expr::Literal(Scalar::Decimal(_, scale)) => Ty::Decimal(*scale),
        _ => Ty::Double,
    };
    Ok((n, ty))
}

/// The number a string spells, as MySQL reads one compared with a
/// number: spaces around it, a sign, digits with a point and an exponent
/// (`' -2.5e3 '`). `None` if it spells none, or more than one.
fn spelled_number(text: &[u8]) -> Option<Expr> {
    let text = std::str::from_utf8(text).ok()?.trim_matches(' ');
    let Spelled {
        negative,
        whole,
        fraction,
        exponent,
    } = Spelled::parse(text)?;
    // As a literal would be written: `5.` and `.5` as `5` and `0.5`.
    let whole = if whole.is_empty() { "0" } else { whole };
    let written = match (fraction.is_empty(), exponent) {
        (_, Some(x)) => format!(
            "{whole}.{}e{x}",
            if fraction.is_empty() { "0" } else { fraction }
        ),
        (true, None) => whole.to_owned(),
        (false, None) => format!("{whole}.{fraction}"),
    };
    let (e, _) = literal(&ast::Value::Number(written, false)).ok()?;
    Some(match (negative, e) {
        (false, e) => e,
        (true, Expr::Literal(Scalar::Int(v))) => Expr::Literal(Scalar::Int(-v)),
        (true, Expr::Literal(Scalar::Decimal(m, scale))) => {
            Expr::Literal(Scalar::Decimal(-m, scale))
        }
        (true, Expr::Literal(Scalar::Double(x))) => Expr::Literal(Scalar::Double(-x)),
        (true, _) => return None,
    })
}

/// A literal value and its type.
fn literal(v: &ast::Value) -> Result<(Expr, Ty), SqlError> {
    let lit = |v: Datum, ty| Ok((Expr::Literal(v), ty));
    match v {
        ast::Value::Number(n, _) => {
            if n.contains(['e', 'E']) {
                let x: f64 = n
                    .parse()
                    .ok()
                    .filter(|x: &f64| x.is_finite())
                    .ok_or_else(|| semantic(format!("{n} is not a finite number")))?;
                lit(Scalar::Double(x), Ty::Double)
            } else if let Some(point) = n.find('.') {
                let scale = (n.len() - point - 1) as u8;
                if scale > eval::MAX_SCALE {
                    return Err(semantic(format!(
                        "{n} has more than {} digits after the point",
                        eval::MAX_SCALE
                    )));
                }
                let m = Decimal::parse(n, 38, scale).map_err(|e| semantic(e.to_string()))?;
                lit(Scalar::Decimal(m, scale), Ty::Decimal(scale))
            } else {
                match n.parse::<i128>() {
                    Ok(v) if (i128::from(i64::MIN)..=i128::from(u64::MAX)).contains(&v) => {
                        lit(Scalar::Int(v), Ty::Int)
                    }
                    // Past 64 bits an integer is a DECIMAL, as MySQL reads it.
                    _ => {
                        let m = Decimal::parse(n, 38, 0).map_err(|e| semantic(e.to_string()))?;
                        lit(Scalar::Decimal(m, 0), Ty::Decimal(0))
                    }
                }
            }
        }
        ast::Value::SingleQuotedString(s) | ast::Value::DoubleQuotedString(s) => {
            lit(Scalar::Text(s.as_bytes().to_vec().into()), Ty::Text)
        }
        ast::Value::Boolean(b) => lit(Scalar::Int(i128::from(*b)), Ty::Int),
        ast::Value::Null => lit(Scalar::Null, Ty::Null),
        other => Err(unsupported(format!("the literal {other}"))),
    }
}

/// Two operands made comparable: a string constant met by a date or time
/// becomes one, read as the column's type reads it; one met by a number
/// becomes the number it spells (`id < '10'`, as drivers that send every
/// argument as a string write it); other mixes of types are refused
/// rather than coerced.
fn comparable(
    (a, at): (Expr, Ty),
    (b, bt): (Expr, Ty),
    whole: &ast::Expr,
) -> Result<(Expr, Expr), SqlError> {
    let timed = |kind: TimeKind, e: Expr| -> Result<Expr, SqlError> {
        let Expr::Literal(Scalar::Text(text)) = &e else {
            return Ok(e);
        };
        let text = String::from_utf8_lossy(text);
        let v = match kind {
            TimeKind::Date => match Date::parse(&text) {
                Ok(d) => Ok(i64::from(d.0)),
                // A date-time with a time of day met by a DATE stays a
                // date-time: the date compares as its midnight (`d < NOW()`).
                Err(e) => match DateTime::parse(&text) {
                    Ok(t) => return Ok(Expr::Literal(Scalar::Time(TimeKind::DateTime(6), t.0))),
                    Err(_) => Err(e),
                },
            },
            TimeKind::DateTime(_) => DateTime::parse(&text)
                .or_else(|_| Date::parse(&text).map(|d| DateTime(i64::from(d.0) * 86_400_000_000)))
                .map(|d| d.0),
            TimeKind::Timestamp(_) => Timestamp::parse(&text)
                .or_else(|_| Date::parse(&text).map(|d| Timestamp(i64::from(d.0) * 86_400_000_000)))
                .map(|t| t.0),
        }
        .map_err(|m| semantic(format!("'{whole}': {m}")))?;
        Ok(Expr::Literal(Scalar::Time(kind, v)))
    };
    let numbered = |e: Expr| -> Result<Expr, SqlError> {
        let Expr::Literal(Scalar::Text(text)) = &e else {
            return Ok(e);
        };
        spelled_number(text).ok_or_else(|| {
            semantic(format!(
                "'{whole}' compares a number with a string that is not one; Shoal does not convert it"
            ))
        })
    };
    match (at, bt) {
        (Ty::Null, _) | (_, Ty::Null) => Ok((a, b)),
        (x, y) if x.is_numeric() && y.is_numeric() => Ok((a, b)),
        (x, Ty::Text) if x.is_numeric() && matches!(b, Expr::Literal(_)) => Ok((a, numbered(b)?)),
        (Ty::Text, y) if y.is_numeric() && matches!(a, Expr::Literal(_)) => Ok((numbered(a)?, b)),
        (Ty::Text, Ty::Text) | (Ty::Binary, Ty::Binary) => Ok((a, b)),
        (Ty::Time(_), Ty::Time(_)) => Ok((a, b)),
        (Ty::Time(k), Ty::Text) if matches!(b, Expr::Literal(_)) => Ok((a, timed(k, b)?)),
        (Ty::Text, Ty::Time(k)) if matches!(a, Expr::Literal(_)) => Ok((timed(k, a)?, b)),
        (x, y) => Err(semantic(format!(
            "'{whole}' compares {} with {}; Shoal does not convert between them",
            x.describe(),
            y.describe()
        ))),
    }
}

/// A constant as a column of the layout stores it, if it is exactly one.
fn stored_as(layout: &Layout, c: u16, v: &Datum) -> Option<Vec<u8>> {
    if v.is_null() {
        return None;
    }
    let value = v.to_value();
    let bytes = codec::encode_operand(layout, c, &value).ok()?;
    // Only a constant the column holds exactly bounds a scan: one it would
    // round (2.5 for an INT) could shut out rows the filter lets in.
    let back = eval::stored(layout.columns[c as usize].ty, &bytes);
    (eval::compare(&back, v) == Some(std::cmp::Ordering::Equal)).then_some(bytes)
}

/// A bound a condition puts on one column: `column op constant`.
struct Limit<'a> {
    column: u16,
    op: Cmp,
    value: &'a Datum,
}

/// The conditions ANDed at the top of a filter that bound a column, into
/// `out`; whether every condition ANDed there is one.
fn limits<'a>(p: &'a Pred, out: &mut Vec<Limit<'a>>) -> bool {
    match p {
        Pred::And(a, b) => limits(a, out) & limits(b, out),
        Pred::Cmp(op, Expr::Column(c), Expr::Literal(v)) if *op != Cmp::Ne => {
            out.push(Limit {
                column: *c,
                op: *op,
                value: v,
            });
            true
        }
        Pred::Cmp(op, Expr::Literal(v), Expr::Column(c)) if *op != Cmp::Ne => {
            out.push(Limit {
                column: *c,
                op: op.flip(),
                value: v,
            });
            true
        }
        _ => false,
    }
}

/// The ranges of ordered indexes that the filter's top-level conditions
/// bound: for each index, its leading columns fixed by `=`, then a range on
/// the next; those fixing the most columns first, the primary key's index
/// first among equals. The filter checks every row a range reaches unless
/// the range is exactly the filter: every condition ANDed in it made one
/// of the range's ends, on a NOT NULL integer column, whose values compare
/// in the index as in the filter (`exact`).
fn ranges(layout: &Layout, filter: &Pred) -> Vec<Access> {
    let mut found = Vec::new();
    let only_limits = limits(filter, &mut found);
    let integer = |c: u16| {
        let column = &layout.columns[c as usize];
        column.null_bit.is_none() && column.ty.is_integer()
    };
    let spelled = |i: usize| {
        let l = &found[i];
        let name = &layout.def.columns[l.column as usize].name;
        format!("{name} {} {}", l.op.symbol(), show(l.value))
    };
    // The first of `found` on column `c` with one of `ops` that is a
    // value the column holds exactly: its position and stored bytes.
    let bound = |c: u16, ops: &[Cmp]| {
        found.iter().enumerate().find_map(|(i, l)| {
            (l.column == c && ops.contains(&l.op))
                .then(|| stored_as(layout, c, l.value).map(|b| (i, b)))
                .flatten()
        })
    };
    let mut ranges: Vec<((usize, bool), Access)> = Vec::new();
    for index in &layout.ordered {
        let mut lower: Vec<Option<Vec<u8>>> = Vec::new();
        let mut shown = Vec::new();
        // Which of `found` made the range's ends.
        let mut made = vec![false; found.len()];
        let mut equal = 0;
        for &c in &index.order[..index.columns] {
            let Some((i, bytes)) = bound(c, &[Cmp::Eq]) else {
                break;
            };
            lower.push(Some(bytes));
            shown.push(spelled(i));
            made[i] = true;
            equal += 1;
        }
        let mut upper = lower.clone();
        let (mut lower_inclusive, mut upper_inclusive) = (true, true);
        let mut ranged = false;
        if equal < index.columns {
            let c = index.order[equal];
            if let Some((i, b)) = bound(c, &[Cmp::Gt, Cmp::Ge]) {
                lower.push(Some(b));
                lower_inclusive = found[i].op == Cmp::Ge;
                shown.push(spelled(i));
                made[i] = true;
                ranged = true;
            }
            if let Some((i, b)) = bound(c, &[Cmp::Lt, Cmp::Le]) {
                upper.push(Some(b));
                upper_inclusive = found[i].op == Cmp::Le;
                shown.push(spelled(i));
                made[i] = true;
                ranged = true;
            }
        }
        if equal == 0 && !ranged {
            continue;
        }
        let exact =
            only_limits && made.iter().all(|&m| m) && found.iter().all(|l| integer(l.column));
        let make = |values: Vec<Option<Vec<u8>>>, inclusive| {
            (!values.is_empty()).then_some(Bound { values, inclusive })
        };
        ranges.push((
            (equal, ranged),
            Access::Range {
                name: index.name.clone(),
                lower: make(lower, lower_inclusive),
                upper: make(upper, upper_inclusive),
                shown: shown.join(" AND "),
                share: None,
                exact,
            },
        ));
    }
    // Stable: among equals, the order of the indexes (the primary key's first).
    ranges.sort_by_key(|r| std::cmp::Reverse(r.0));
    ranges.into_iter().map(|(_, access)| access).collect()
}

fn scale(ty: Ty) -> u8 {
    match ty {
        Ty::Decimal(s) => s,
        _ => 0,
    }
}

/// A constant as SQL, for EXPLAIN.
fn show(v: &Datum) -> String {
    match v {
        Scalar::Text(b) => format!("'{}'", String::from_utf8_lossy(b).replace('\'', "''")),
        Scalar::Time(..) => format!("'{}'", super::print::plain(v)),
        v => super::print::plain(v),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_string_compared_with_a_number_reads_as_the_number_it_spells() {
        let read = |s: &str| match spelled_number(s.as_bytes()) {
            Some(Expr::Literal(v)) => Some(v),
            Some(other) => panic!("{s}: {other:?}"),
            None => None,
        };
        assert_eq!(read("10"), Some(Scalar::Int(10)));
        assert_eq!(read("  -7 "), Some(Scalar::Int(-7)));
        assert_eq!(read("+7"), Some(Scalar::Int(7)));
        assert_eq!(read("2.50"), Some(Scalar::Decimal(250, 2)));
        assert_eq!(read("-.5"), Some(Scalar::Decimal(-5, 1)));
        assert_eq!(read("5."), Some(Scalar::Int(5)));
        assert_eq!(read("1e3"), Some(Scalar::Double(1000.0)));
        assert_eq!(read("-2.5E-1"), Some(Scalar::Double(-0.25)));
        assert_eq!(
            read("18446744073709551615"),
            Some(Scalar::Int(i128::from(u64::MAX)))
        );
        // Past 64 bits a DECIMAL, as MySQL reads an integer that long.
        assert_eq!(
            read("18446744073709551616"),
            Some(Scalar::Decimal(18446744073709551616, 0))
        );
        // Anything else is no number: refused, never read as 0.
        for not in [
            "", " ", "-", "+", ".", "abc", "1x", "1 2", "1..2", "1e", "1e+", "e5", "--1", "0x10",
            "1,5", "1e999", "\u{a0}1", "1\t",
        ] {
            assert_eq!(read(not), None, "{not:?}");
        }
    }
}
