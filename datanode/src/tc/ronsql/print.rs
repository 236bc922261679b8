//! The answer of a query as RonSQL writes it: JSON (an array of objects,
//! one per row, keyed by output name) or MySQL-style tab-separated text,
//! and EXPLAIN as plain text.

use std::cmp::Ordering;
use std::fmt::Write as _;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

use super::plan::{Access, Plan, Source};
use crate::sql::agg::Groups;
use crate::sql::eval::{self, Datum, EvalError, MAX_SCALE, Row, Scalar, TimeKind, Ty};
use crate::types::value::{Date, Decimal, WithFsp};

/// How the answer is written (RonDB's `outputFormat`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    /// JSON, UTF-8.
    Json,
    /// JSON with every character past ASCII escaped.
    JsonAscii,
    /// Tab-separated, with a header line of the output names.
    Text,
    /// Tab-separated, without the header.
    TextNoHeader,
}

impl Format {
    pub(crate) fn parse(name: &str) -> Option<Format> {
        Some(match name {
            "JSON" => Format::Json,
            "JSON_ASCII" => Format::JsonAscii,
            "TEXT" => Format::Text,
            "TEXT_NOHEADER" => Format::TextNoHeader,
            _ => return None,
        })
    }

    pub(crate) fn is_json(self) -> bool {
        matches!(self, Format::Json | Format::JsonAscii)
    }
}

/// The value an output (or sort key) has in group `g`, whose slots
/// (`Plan::slots`) have the values `slots`.
fn value_of(
    plan: &Plan,
    source: Source,
    groups: &Groups,
    g: usize,
    slots: &[Datum],
) -> Result<Datum, EvalError> {
    Ok(match source {
        Source::Group(i) => groups.keys[g][i].clone(),
        Source::Aggregate(i) => groups.states[g][i].value(),
        Source::Avg { sum, count, ty } => {
            let (sum, count) = (
                groups.states[g][sum].value(),
                groups.states[g][count].value(),
            );
            let Scalar::Int(count) = count else {
                return Ok(Scalar::Null);
            };
            avg(&sum, count, ty)
        }
        Source::Computed(i) => plan.computed[i].0.eval(over(plan, slots))?.to_owned(),
    })
}

/// A finished group as the row its expressions are evaluated over: no
/// columns, only the values of its slots.
fn over<'a>(plan: &'a Plan, slots: &'a [Datum]) -> Row<'a> {
    Row {
        layout: &plan.table.layout,
        fixed: &[],
        var: &[],
        slots,
    }
}

/// A SUM divided by a COUNT as MySQL answers AVG: for integers and
/// decimals exactly, four more digits after the point than the argument
/// has, rounded half away from zero; for floating point, as a double.
fn avg(sum: &Datum, count: i128, ty: Ty) -> Datum {
    if count == 0 {
        return Scalar::Null;
    }
    let (m, s) = match (sum, ty) {
        (Scalar::Double(x), _) => return Scalar::Double(x / count as f64),
        (Scalar::Int(x), _) => (*x, 0),
        (Scalar::Decimal(m, s), _) => (*m, *s),
        _ => return Scalar::Null,
    };
    let scale = (s + 4).min(MAX_SCALE);
    let Some(up) = m.checked_mul(10i128.pow(u32::from(scale - s))) else {
        return Scalar::Double(m as f64 / 10f64.powi(i32::from(s)) / count as f64);
    };
    let q = up / count;
    let r = up % count;
    let q = if r.abs() * 2 >= count {
        q + up.signum()
    } else {
        q
    };
    Scalar::Decimal(q, scale)
}

/// The finished rows: one per group that passes HAVING, sorted, then cut
/// by OFFSET and LIMIT.
pub(crate) fn rows(plan: &Plan, groups: &Groups) -> Result<Vec<Vec<Datum>>, EvalError> {
    // Each group's slot values, which HAVING and the computed values read.
    let slots: Vec<Vec<Datum>> = (0..groups.len())
        .map(|g| {
            (plan.slots.iter())
                .map(|&s| value_of(plan, s, groups, g, &[]))
                .collect()
        })
        .collect::<Result<_, _>>()?;
    let value = |source, g: usize| value_of(plan, source, groups, g, &slots[g]);
    let mut order: Vec<usize> = (0..groups.len()).collect();
    if let Some(having) = &plan.having {
        let mut kept = Vec::with_capacity(order.len());
        for g in order {
            if having.test(over(plan, &slots[g]))? == Some(true) {
                kept.push(g);
            }
        }
        order = kept;
    }
    if !plan.order.is_empty() {
        let mut keys: Vec<Vec<Datum>> = vec![Vec::new(); groups.len()];
        for &g in &order {
            keys[g] = (plan.order.iter())
                .map(|&(s, _)| value(s, g))
                .collect::<Result<_, _>>()?;
        }
        order.sort_by(|&a, &b| {
            for (i, &(_, ascending)) in plan.order.iter().enumerate() {
                let ord = sort_order(&keys[a][i], &keys[b][i]);
                let ord = if ascending { ord } else { ord.reverse() };
                if ord.is_ne() {
                    return ord;
                }
            }
            Ordering::Equal
        });
    }
    let offset = usize::try_from(plan.offset).unwrap_or(usize::MAX);
    let limit = plan
        .limit
        .map_or(usize::MAX, |l| usize::try_from(l).unwrap_or(usize::MAX));
    (order.into_iter().skip(offset).take(limit))
        .map(|g| plan.outputs.iter().map(|o| value(o.source, g)).collect())
        .collect()
}

/// Values in sort order: NULL first, as MySQL sorts ascending.
fn sort_order(a: &Datum, b: &Datum) -> Ordering {
    match (a.is_null(), b.is_null()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Less,
        (false, true) => Ordering::Greater,
        (false, false) => eval::compare(a, b).unwrap_or(Ordering::Equal),
    }
}

/// A value as text: numbers as digits, strings as they are, binary as
/// base64, dates and times as MySQL writes them.
pub(crate) fn plain(v: &Datum) -> String {
    match v {
        Scalar::Null => "NULL".into(),
        Scalar::Int(x) => x.to_string(),
        Scalar::Decimal(m, s) => Decimal {
            mantissa: *m,
            scale: *s,
        }
        .to_string(),
        Scalar::Double(x) => double(*x),
        Scalar::Text(b) => String::from_utf8_lossy(b).into_owned(),
        Scalar::Binary(b) => STANDARD.encode(b),
        Scalar::Time(TimeKind::Date, d) => Date(*d as i32).to_string(),
        Scalar::Time(TimeKind::DateTime(fsp) | TimeKind::Timestamp(fsp), t) => {
            WithFsp(*t, *fsp).to_string()
        }
    }
}

/// A double in the shortest form that reads back the same.
fn double(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{x}")
    } else {
        format!("{x:?}")
    }
}

fn json_string(out: &mut String, s: &str, ascii: bool) {
    out.push('"');
    for ch in s.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || (ascii && !c.is_ascii()) => {
                let mut buf = [0u16; 2];
                for unit in c.encode_utf16(&mut buf) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

fn json_value(out: &mut String, v: &Datum, ascii: bool) {
    match v {
        Scalar::Null => out.push_str("null"),
        Scalar::Double(x) if !x.is_finite() => out.push_str("null"),
        Scalar::Int(_) | Scalar::Decimal(..) | Scalar::Double(_) => out.push_str(&plain(v)),
        v => json_string(out, &plain(v), ascii),
    }
}

/// Text as the mysql client writes a field in batch mode.
fn text_field(out: &mut String, v: &Datum) {
    for ch in plain(v).chars() {
        match ch {
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\\' => out.push_str("\\\\"),
            '\0' => out.push_str("\\0"),
            c => out.push(c),
        }
    }
}

/// The answer's body.
pub(crate) fn answer(plan: &Plan, rows: &[Vec<Datum>], format: Format) -> String {
    let mut out = String::new();
    match format {
        Format::Json | Format::JsonAscii => {
            let ascii = format == Format::JsonAscii;
            out.push('[');
            for (r, row) in rows.iter().enumerate() {
                if r > 0 {
                    out.push(',');
                }
                out.push('{');
                for (i, (o, v)) in plan.outputs.iter().zip(row).enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    json_string(&mut out, &o.name, ascii);
                    out.push(':');
                    json_value(&mut out, v, ascii);
                }
                out.push_str("}\n");
            }
            out.push_str("]\n");
        }
        Format::Text | Format::TextNoHeader => {
            if format == Format::Text {
                let names: Vec<&str> = plan.outputs.iter().map(|o| o.name.as_str()).collect();
                out.push_str(&names.join("\t"));
                out.push('\n');
            }
            for row in rows {
                for (i, v) in row.iter().enumerate() {
                    if i > 0 {
                        out.push('\t');
                    }
                    text_field(&mut out, v);
                }
                out.push('\n');
            }
        }
    }
    out
}

/// EXPLAIN: how the query would run.
pub(crate) fn explain(plan: &Plan, format: Format) -> String {
    let mut out = String::new();
    let table = plan.table.name();
    match &plan.access {
        Access::Full if plan.candidates.is_empty() => {
            let _ = writeln!(
                out,
                "Full scan of table `{table}`, every fragment in parallel."
            );
        }
        Access::Full => {
            let _ = writeln!(
                out,
                "Full scan of table `{table}`, every fragment in parallel: no index range the WHERE clause allows is narrow enough to be cheaper."
            );
        }
        Access::Range {
            name, shown, share, ..
        } => {
            let _ = writeln!(
                out,
                "Range scan of index `{name}` of table `{table}` where {shown}, every fragment in parallel{}.",
                share.map_or(String::new(), |s| format!(
                    " (about {:.0}% of the index)",
                    s * 100.0
                ))
            );
        }
    }
    match &plan.filter_sql {
        Some(filter) if plan.program.filter.is_none() => {
            let _ = writeln!(
                out,
                "Filter not evaluated: the range holds exactly the rows it lets in: {filter}"
            );
        }
        Some(filter) => {
            let _ = writeln!(
                out,
                "Filter evaluated in the data node on every row reached: {filter}"
            );
        }
        None => {}
    }
    let columns = &plan.table.def().columns;
    let group_by: Vec<String> = (plan.program.group_by.iter())
        .map(|&c| format!("`{}`", columns[c as usize].name))
        .collect();
    if group_by.is_empty() {
        let _ = writeln!(out, "One group of all rows.");
    } else {
        let _ = writeln!(out, "Grouped by {} in the data node.", group_by.join(", "));
    }
    let aggregates: Vec<String> = (plan.program.aggregates.iter())
        .map(|a| match a.arg {
            None => format!("{}(*)", a.func.name()),
            Some(_) => format!("{}(…)", a.func.name()),
        })
        .collect();
    if !aggregates.is_empty() {
        let _ = writeln!(
            out,
            "Aggregates computed per fragment and merged in the coordinator: {}.",
            aggregates.join(", ")
        );
    }
    if !plan.computed.is_empty() {
        let _ = writeln!(
            out,
            "{} value(s) computed from each group's in the coordinator.",
            plan.computed.len()
        );
    }
    if plan.having.is_some() {
        let _ = writeln!(out, "Groups filtered by HAVING in the coordinator.");
    }
    if !plan.order.is_empty() {
        let _ = writeln!(out, "Result sorted by {} key(s).", plan.order.len());
    }
    if let Some(limit) = plan.limit {
        let _ = writeln!(
            out,
            "Result limited to {limit} row{}{}.",
            if limit == 1 { "" } else { "s" },
            if plan.offset > 0 {
                format!(" after {}", plan.offset)
            } else {
                String::new()
            }
        );
    }
    let _ = writeln!(
        out,
        "Output in {} format.",
        match format {
            Format::Json => "UTF-8 encoded JSON",
            Format::JsonAscii => "ASCII encoded JSON",
            Format::Text => "tab separated",
            Format::TextNoHeader => "tab separated, header-less",
        }
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn avg_is_exact_with_four_more_digits() {
        assert_eq!(avg(&Scalar::Int(10), 4, Ty::Int), Scalar::Decimal(25000, 4));
        assert_eq!(avg(&Scalar::Int(2), 3, Ty::Int), Scalar::Decimal(6667, 4));
        assert_eq!(avg(&Scalar::Int(-2), 3, Ty::Int), Scalar::Decimal(-6667, 4));
        assert_eq!(
            avg(&Scalar::Decimal(1001, 2), 2, Ty::Decimal(2)),
            Scalar::Decimal(5005000, 6)
        );
        assert_eq!(
            avg(&Scalar::Double(1.0), 4, Ty::Double),
            Scalar::Double(0.25)
        );
        assert_eq!(avg(&Scalar::Null, 0, Ty::Int), Scalar::Null);
    }

    #[test]
    fn json_escapes_what_it_must() {
        let mut out = String::new();
        json_string(&mut out, "a\"b\\c\u{1}é", true);
        assert_eq!(out, r#""a\"b\\c\u0001\u00e9""#);
        let mut out = String::new();
        json_string(&mut out, "é</script>", false);
        assert_eq!(out, "\"é</script>\"");
    }
}
