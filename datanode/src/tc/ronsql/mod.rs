//! RonSQL in the coordinator: a query planned against its table (`plan`),
//! its program sent to every fragment at once, a step at a time, the
//! partial groups merged, and the answer written (`print`).
//!
//! A query is admitted as one read; every row (or index entry) a fragment
//! examines is charged a read unit that the database's next reads pay,
//! counted step by step so that a long query weighs on its database while
//! it runs. The groups are bounded in number and bytes and the query in
//! time; past a bound it fails with a clear error and nothing is answered.

use std::time::Instant;

pub(crate) mod plan;
pub(crate) mod print;

use self::plan::{Access, Plan};
use super::{Grant, Tc, TcError, Transaction};
use crate::ldm::Walk;
use crate::sql::agg::Groups;
use crate::sql::eval::Datum;
use crate::sql::{Class, MAX_GROUP_BYTES, MAX_GROUPS, MAX_TIME, SqlError};

/// Why a query failed: refused by the coordinator, or by the query's own
/// bounds and values.
#[derive(Debug, thiserror::Error)]
pub(crate) enum QueryError {
    #[error(transparent)]
    Tc(#[from] TcError),
    #[error(transparent)]
    Sql(#[from] SqlError),
}

/// A range of an index is read instead of every row only if it holds at
/// most this share of the index. Walking an index costs about 1.3 times
/// what a full scan costs a row (TPC-H Q1 over 1M rows: 725 ms through the
/// index, 548 ms scanning), so the two break even near 0.75; the estimate
/// is rough, so the range must win clearly.
const MOST_SHARE_FOR_RANGE: f64 = 0.6;

impl Tc {
    /// Chooses how `plan` reaches its rows: the candidate range that
    /// holds the smallest share of its index, estimated on one fragment
    /// (rows are spread evenly), or a full scan if none is narrow enough.
    pub(crate) async fn choose_access(&self, plan: &mut Plan) -> Result<(), QueryError> {
        let Some(&place) = plan.table.fragments.first() else {
            return Ok(());
        };
        let mut best: Option<Access> = None;
        for candidate in &plan.candidates {
            let Access::Range {
                name, lower, upper, ..
            } = candidate
            else {
                continue;
            };
            let share = (self.inner.workers)
                .range_share(plan.table.id, place, name, lower.clone(), upper.clone())
                .await
                .map_err(TcError::from)?
                .unwrap_or(1.0);
            let better = match &best {
                Some(Access::Range { share: Some(s), .. }) => share < *s,
                _ => true,
            };
            if share <= MOST_SHARE_FOR_RANGE && better {
                let mut chosen = candidate.clone();
                if let Access::Range { share: s, .. } = &mut chosen {
                    *s = Some(share);
                }
                best = Some(chosen);
            }
        }
        plan.access = best.unwrap_or(Access::Full);
        if let Access::Range { exact: true, .. } = plan.access {
            // The range is the filter: the rows it reaches pass. (A program
            // shared with another plan keeps its filter, which passes them.)
            if let Some(program) = std::sync::Arc::get_mut(&mut plan.program) {
                program.filter = None;
            }
        }
        Ok(())
    }

    /// Runs `plan` for the holder of `grant`: the answer's rows, from rows
    /// `reader` holds as it left them and every other as committed (every
    /// row, if `None`).
    pub(crate) async fn ronsql(
        &self,
        grant: &Grant,
        reader: Option<&Transaction>,
        plan: &Plan,
    ) -> Result<Vec<Vec<Datum>>, QueryError> {
        self.serving()?;
        let table = &plan.table;
        let reader = Transaction::reader_id(reader);
        let admitted = self.admit_scan(grant, table).await?;
        let started = Instant::now();
        let walk = match &plan.access {
            Access::Full => Walk::Rows(0),
            Access::Range {
                name, lower, upper, ..
            } => Walk::Index {
                index: name.as_str().into(),
                from: lower.clone(),
                to: upper.clone().map(std::sync::Arc::new),
            },
        };
        let mut pending: Vec<_> = (table.fragments.iter())
            .map(|&place| (place, walk.clone()))
            .collect();
        let mut groups = Groups::default();
        let mut examined = 0u64;
        let result = loop {
            if pending.is_empty() {
                plan.program.ensure_single_group(&mut groups);
                break print::rows(plan, &groups)
                    .map_err(|e| SqlError::new(Class::OutOfRange, e.0.to_string()).into());
            }
            if started.elapsed() > MAX_TIME {
                break Err(SqlError::new(
                    Class::Resource,
                    format!(
                        "the query ran longer than its limit of {} s; narrow its WHERE clause",
                        MAX_TIME.as_secs()
                    ),
                )
                .into());
            }
            let places: Vec<_> = pending.iter().map(|(place, _)| *place).collect();
            let steps = match (self.inner.workers)
                .aggregate(
                    table.id,
                    reader,
                    &plan.program,
                    std::mem::take(&mut pending),
                )
                .await
            {
                Ok(steps) => steps,
                Err(e) => break Err(TcError::from(e).into()),
            };
            let mut failed = None;
            let mut step_examined = 0u64;
            for (place, step) in places.into_iter().zip(steps) {
                let step = match step {
                    None => {
                        failed = Some(SqlError::new(
                            Class::Semantic,
                            format!("table '{}' was dropped while the query ran", table.name()),
                        ));
                        break;
                    }
                    Some(Err(e)) => {
                        failed = Some(SqlError::new(Class::OutOfRange, e.0.to_string()));
                        break;
                    }
                    Some(Ok(step)) => step,
                };
                step_examined += step.examined as u64;
                if let Err(e) = groups.merge(&plan.program, step.groups) {
                    failed = Some(SqlError::new(Class::OutOfRange, e.0.to_string()));
                    break;
                }
                if groups.len() > MAX_GROUPS || groups.bytes > MAX_GROUP_BYTES {
                    failed = Some(SqlError::new(
                        Class::TooLarge,
                        format!(
                            "the query makes more than {MAX_GROUPS} groups or {} MiB of them; group by fewer distinct values or narrow its WHERE clause",
                            MAX_GROUP_BYTES >> 20
                        ),
                    ));
                    break;
                }
                if let Some(next) = step.next {
                    pending.push((place, next));
                }
            }
            // The first row was paid for when the query was admitted.
            let owed = step_examined.saturating_sub(u64::from(examined == 0));
            examined += step_examined;
            admitted.owe_reads(owed);
            if let Some(e) = failed {
                break Err(e.into());
            }
        };
        self.finished(&admitted.db, started);
        result
    }
}
