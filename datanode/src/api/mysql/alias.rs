//! A table's alias (`FROM users u`, `UPDATE users AS u`, `DELETE FROM
//! users u`), resolved as a statement is parsed: the one table a statement
//! reads or changes may be named by its alias in its column names
//! (`u.id`, `SET u.n = u.n + 1`), and the planners see each column's plain
//! name, as they do when the statement gives none.

use std::ops::ControlFlow;

use sqlparser::ast::{
    self, AssignmentTarget, Expr, ObjectNamePart, SetExpr, Statement, TableFactor,
    visit_expressions_mut,
};

use super::error::MyError;

/// Takes the alias off the one table `statement` reads or changes, and
/// the alias's qualifier off the column names that carry it. A statement
/// of several tables is left as it is (the planners refuse it by name).
pub(crate) fn unalias(statement: &mut Statement) -> Result<(), MyError> {
    let Some(relation) = relation(statement) else {
        return Ok(());
    };
    let TableFactor::Table { alias, .. } = relation else {
        return Ok(());
    };
    let Some(taken) = alias.take() else {
        return Ok(());
    };
    if !taken.columns.is_empty() {
        return Err(MyError::unsupported("column aliases on a table"));
    }
    let name = taken.name.value;
    // As in MySQL on Linux, an alias is told apart by its case.
    let _ = visit_expressions_mut(statement, |e| {
        if let Expr::CompoundIdentifier(parts) = e
            && let [qualifier, column] = parts.as_slice()
            && qualifier.value == name
        {
            *e = Expr::Identifier(column.clone());
        }
        ControlFlow::<()>::Continue(())
    });
    if let Statement::Update { assignments, .. } = statement {
        for a in assignments {
            if let AssignmentTarget::ColumnName(target) = &mut a.target
                && let [ObjectNamePart::Identifier(qualifier), _] = target.0.as_slice()
                && qualifier.value == name
            {
                target.0.remove(0);
            }
        }
    }
    Ok(())
}

/// The table factor of a statement that reads or changes one table.
fn relation(statement: &mut Statement) -> Option<&mut TableFactor> {
    let from = match statement {
        Statement::Query(q) => match q.body.as_mut() {
            SetExpr::Select(select) => match select.from.as_mut_slice() {
                [from] => from,
                _ => return None,
            },
            _ => return None,
        },
        Statement::Update { table, .. } => table,
        Statement::Delete(delete) => match &mut delete.from {
            ast::FromTable::WithFromKeyword(from) | ast::FromTable::WithoutKeyword(from) => {
                match from.as_mut_slice() {
                    [from] => from,
                    _ => return None,
                }
            }
        },
        _ => return None,
    };
    from.joins.is_empty().then_some(&mut from.relation)
}
