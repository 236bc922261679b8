//! Grouping and aggregation: what an LDM worker computes over the rows of
//! a fragment step by step, and how the coordinator merges the partial
//! results of every fragment into one.
//!
//! A group is found by a key made of its GROUP BY values; each holds one
//! state per aggregate. AVG is not a state of its own: the planner asks
//! for a SUM and a COUNT and divides at the end, so partial results merge
//! exactly.

use std::cmp::Ordering;

use rustc_hash::{FxHashMap, FxHashSet};

use super::eval::{self, Datum, EvalError, Expr, Pred, Row, Scalar, Ty};

/// An aggregate function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Func {
    Count,
    /// `COUNT(DISTINCT x)`: the distinct non-null values.
    CountDistinct,
    Sum,
    Min,
    Max,
}

impl Func {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Func::Count => "COUNT",
            Func::CountDistinct => "COUNT_DISTINCT",
            Func::Sum => "SUM",
            Func::Min => "MIN",
            Func::Max => "MAX",
        }
    }
}

/// One aggregate to compute: its function and argument (`None`: `COUNT(*)`).
#[derive(Debug, Clone)]
pub(crate) struct Aggregate {
    pub(crate) func: Func,
    pub(crate) arg: Option<Expr>,
    /// The argument's type.
    pub(crate) ty: Ty,
}

/// The state of one aggregate in one group. A SUM, MIN or MAX that has
/// seen no value is NULL.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum State {
    Count(u64),
    /// The distinct values seen, by their group-key bytes, and the bytes
    /// they hold.
    Distinct(FxHashSet<Box<[u8]>>, usize),
    SumInt(Option<i128>),
    SumDecimal(Option<i128>, u8),
    SumDouble(Option<f64>),
    Min(Datum),
    Max(Datum),
}

impl State {
    fn new(a: &Aggregate) -> State {
        match (a.func, a.ty) {
            (Func::Count, _) => State::Count(0),
            (Func::CountDistinct, _) => State::Distinct(FxHashSet::default(), 0),
            (Func::Sum, Ty::Decimal(s)) => State::SumDecimal(None, s),
            (Func::Sum, Ty::Double) => State::SumDouble(None),
            (Func::Sum, _) => State::SumInt(None),
            (Func::Min, _) => State::Min(Scalar::Null),
            (Func::Max, _) => State::Max(Scalar::Null),
        }
    }

    /// Takes one non-null value in.
    fn add(&mut self, v: &Scalar<'_>) -> Result<(), EvalError> {
        let too_big = || EvalError::new("a SUM is out of range");
        match (self, v) {
            (State::Count(n), _) => *n += 1,
            (State::Distinct(seen, bytes), v) => {
                let mut key = Vec::new();
                // As GROUP BY tells values apart (an argument's decimals
                // share its type's scale).
                v.key_into(&mut key);
                if !seen.contains(key.as_slice()) {
                    *bytes += DISTINCT_OVERHEAD + key.len();
                    seen.insert(key.into_boxed_slice());
                }
            }
            (State::SumInt(sum), Scalar::Int(x)) => {
                *sum = Some(sum.unwrap_or(0).checked_add(*x).ok_or_else(too_big)?);
            }
            (State::SumDecimal(sum, s), v) => {
                let m = match *v {
                    Scalar::Decimal(m, t) if t == *s => m,
                    Scalar::Int(x) if *s == 0 => x,
                    _ => return Err(EvalError::new("a SUM of mixed decimal scales")),
                };
                *sum = Some(sum.unwrap_or(0).checked_add(m).ok_or_else(too_big)?);
            }
            (State::SumDouble(sum), v) => {
                let x = match *v {
                    Scalar::Double(x) => x,
                    Scalar::Int(x) => x as f64,
                    Scalar::Decimal(m, s) => m as f64 / 10f64.powi(i32::from(s)),
                    _ => return Err(EvalError::new("a SUM of a value that is not a number")),
                };
                *sum = Some(sum.unwrap_or(0.0) + x);
            }
            (State::Min(best), v) => {
                if best.is_null() || eval::compare(v, best) == Some(Ordering::Less) {
                    *best = v.to_owned();
                }
            }
            (State::Max(best), v) => {
                if best.is_null() || eval::compare(v, best) == Some(Ordering::Greater) {
                    *best = v.to_owned();
                }
            }
            (State::SumInt(_), _) => {
                return Err(EvalError::new("a SUM of a value that is not a number"));
            }
        }
        Ok(())
    }

    /// Takes in another fragment's state of the same aggregate and group.
    fn merge(&mut self, other: State) -> Result<(), EvalError> {
        let too_big = || EvalError::new("a SUM is out of range");
        let sum = |a: Option<i128>, b: Option<i128>| match (a, b) {
            (Some(x), Some(y)) => x.checked_add(y).map(Some).ok_or_else(too_big),
            (x, y) => Ok(x.or(y)),
        };
        match (self, other) {
            (State::Count(n), State::Count(m)) => *n += m,
            (State::Distinct(seen, bytes), State::Distinct(theirs, _)) => {
                for key in theirs {
                    if !seen.contains(&key) {
                        *bytes += DISTINCT_OVERHEAD + key.len();
                        seen.insert(key);
                    }
                }
            }
            (State::SumInt(a), State::SumInt(b)) => *a = sum(*a, b)?,
            (State::SumDecimal(a, _), State::SumDecimal(b, _)) => *a = sum(*a, b)?,
            (State::SumDouble(a), State::SumDouble(b)) => {
                *a = match (*a, b) {
                    (Some(x), Some(y)) => Some(x + y),
                    (x, y) => x.or(y),
                }
            }
            (State::Min(a), State::Min(b)) => {
                if !b.is_null() && (a.is_null() || eval::compare(&b, a) == Some(Ordering::Less)) {
                    *a = b;
                }
            }
            (State::Max(a), State::Max(b)) => {
                if !b.is_null() && (a.is_null() || eval::compare(&b, a) == Some(Ordering::Greater))
                {
                    *a = b;
                }
            }
            _ => return Err(EvalError::new("partial results of different queries")),
        }
        Ok(())
    }

    /// The aggregate's value.
    pub(crate) fn value(&self) -> Datum {
        match self {
            State::Count(n) => Scalar::Int(i128::from(*n)),
            State::Distinct(seen, _) => Scalar::Int(seen.len() as i128),
            State::SumInt(v) => v.map_or(Scalar::Null, Scalar::Int),
            State::SumDecimal(v, s) => v.map_or(Scalar::Null, |m| Scalar::Decimal(m, *s)),
            State::SumDouble(v) => v.map_or(Scalar::Null, Scalar::Double),
            State::Min(v) | State::Max(v) => v.clone(),
        }
    }

    fn heap_bytes(&self) -> usize {
        match self {
            State::Min(v) | State::Max(v) => v.heap_bytes(),
            State::Distinct(_, bytes) => *bytes,
            _ => 0,
        }
    }
}

/// Bytes a distinct value costs besides its key: the set's entry.
const DISTINCT_OVERHEAD: usize = 24;

/// What every fragment runs over its rows: a filter, the GROUP BY columns
/// and the aggregates.
#[derive(Debug)]
pub(crate) struct Program {
    pub(crate) filter: Option<Pred>,
    pub(crate) group_by: Vec<u16>,
    pub(crate) aggregates: Vec<Aggregate>,
}

/// Groups found so far, in the order first seen.
#[derive(Debug, Default)]
pub(crate) struct Groups {
    index: FxHashMap<Vec<u8>, usize>,
    /// Each group's GROUP BY values.
    pub(crate) keys: Vec<Vec<Datum>>,
    /// Each group's aggregate states.
    pub(crate) states: Vec<Vec<State>>,
    /// Bytes the groups hold, about: what the coordinator bounds.
    pub(crate) bytes: usize,
}

/// Bytes a group costs besides its values: its key, vectors and map entry.
const GROUP_OVERHEAD: usize = 96;

impl Groups {
    pub(crate) fn len(&self) -> usize {
        self.keys.len()
    }

    fn group(
        &mut self,
        program: &Program,
        key: &[u8],
        values: impl FnOnce() -> Vec<Datum>,
    ) -> usize {
        // Without GROUP BY every row is in the one group, whose key is
        // empty. Not looked up: comparing two empty keys reads through
        // their dangling pointers, which costs a masked vector load a
        // fault-suppression assist (~150 ns) on AVX-512 machines.
        if key.is_empty() && !self.keys.is_empty() {
            return 0;
        }
        if let Some(&g) = self.index.get(key) {
            return g;
        }
        let values = values();
        let states: Vec<State> = program.aggregates.iter().map(State::new).collect();
        self.bytes += GROUP_OVERHEAD
            + 2 * key.len()
            + values.iter().map(Scalar::heap_bytes).sum::<usize>()
            + std::mem::size_of::<State>() * states.len();
        let g = self.keys.len();
        self.index.insert(key.to_vec(), g);
        self.keys.push(values);
        self.states.push(states);
        g
    }

    /// Takes in another fragment's groups.
    pub(crate) fn merge(&mut self, program: &Program, other: Groups) -> Result<(), EvalError> {
        let mut key = Vec::new();
        for (values, states) in other.keys.into_iter().zip(other.states) {
            key.clear();
            values.iter().for_each(|v| v.key_into(&mut key));
            let g = self.group(program, &key, || values);
            for (mine, theirs) in self.states[g].iter_mut().zip(states) {
                let before = mine.heap_bytes();
                mine.merge(theirs)?;
                self.bytes += mine.heap_bytes().saturating_sub(before);
            }
        }
        Ok(())
    }
}

impl Program {
    /// Takes one row in: whether it passed the filter.
    pub(crate) fn add_row(
        &self,
        row: Row<'_>,
        groups: &mut Groups,
        key: &mut Vec<u8>,
    ) -> Result<bool, EvalError> {
        if let Some(filter) = &self.filter
            && filter.test(row)? != Some(true)
        {
            return Ok(false);
        }
        key.clear();
        for &c in &self.group_by {
            eval::column(row.layout, row.fixed, row.var, c).key_into(key);
        }
        let g = groups.group(self, key, || {
            (self.group_by.iter())
                .map(|&c| eval::column(row.layout, row.fixed, row.var, c).to_owned())
                .collect()
        });
        for (a, state) in self.aggregates.iter().zip(&mut groups.states[g]) {
            match &a.arg {
                None => state.add(&Scalar::Int(1))?,
                Some(e) => {
                    let v = e.eval(row)?;
                    if !v.is_null() {
                        state.add(&v)?;
                    }
                }
            }
        }
        Ok(true)
    }

    /// The one group of a query without GROUP BY, made even if no row
    /// passes (COUNT(*) of nothing is 0).
    pub(crate) fn ensure_single_group(&self, groups: &mut Groups) {
        if self.group_by.is_empty() && groups.len() == 0 {
            groups.group(self, &[], Vec::new);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distinct_counts_merge_as_a_union_and_account_new_values_only() {
        let a = Aggregate {
            func: Func::CountDistinct,
            arg: None,
            ty: Ty::Int,
        };
        let fragment = |values: &[i128]| {
            let mut state = State::new(&a);
            for v in values {
                state.add(&Scalar::Int(*v)).unwrap();
            }
            state
        };
        let mut one = fragment(&[1, 2, 2, 3]);
        assert_eq!(one.value(), Scalar::Int(3));
        let bytes = one.heap_bytes();
        assert!(bytes > 0);
        one.merge(fragment(&[3, 2])).unwrap();
        assert_eq!(one.value(), Scalar::Int(3));
        assert_eq!(
            one.heap_bytes(),
            bytes,
            "values seen already cost nothing more"
        );
        one.merge(fragment(&[4, 5])).unwrap();
        assert_eq!(one.value(), Scalar::Int(5));
        assert!(one.heap_bytes() > bytes);
        // Text and numbers are told apart by value, as GROUP BY tells them.
        let mut text = State::new(&a);
        for t in ["a", "b", "a"] {
            text.add(&Scalar::Text(t.as_bytes().into())).unwrap();
        }
        assert_eq!(text.value(), Scalar::Int(2));
        assert!(one.merge(State::Count(1)).is_err());
    }
}
