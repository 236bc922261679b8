//! ndbinfo: virtual tables computed on read from the engine's live state.
//!
//! The views are derived from `ndb$table_memory_usage` as RonDB defines them:
//! the maximum per `(table_id, fragment_num)` over replicas, summed per table
//! or per database. A database without tables has no rows, as in RonDB.

use std::collections::BTreeMap;

use shoal_wire::ndbinfo::{self, Cell, NdbinfoTable, Rows};

use super::{Engine, FragmentUsage};
use crate::ldm::NodeFailed;

/// The memory type of the DataMemory row of `memoryusage`, as RonDB names it.
pub(crate) const DATA_MEMORY: &str = "Data memory";

/// The rows of one ndbinfo table, computed now.
pub(crate) async fn rows(engine: &Engine, table: NdbinfoTable) -> Result<Rows, NodeFailed> {
    let mut rows = Rows::new(table);
    rows.rows = match table.name {
        name if name == ndbinfo::TABLE_MAP.name => engine
            .tables()
            .iter()
            .map(|t| {
                vec![
                    t.id.0.into(),
                    t.database.name.as_str().into(),
                    t.name().as_str().into(),
                ]
            })
            .collect(),
        name if name == ndbinfo::MEMORY_USAGE.name => {
            let pool = engine.data_memory();
            vec![vec![
                engine.node_id().into(),
                DATA_MEMORY.into(),
                pool.used_bytes().into(),
                pool.total_bytes().into(),
                pool.used_pages().into(),
                pool.total_pages().into(),
            ]]
        }
        name if name == ndbinfo::TABLE_MEMORY_USAGE_RAW.name => engine
            .memory_usage()
            .await?
            .iter()
            .map(|f| {
                vec![
                    f.table_id.0.into(),
                    u32::from(f.fragment).into(),
                    // One node group until replication arrives.
                    0u32.into(),
                    f.in_memory_bytes.into(),
                    f.free_in_memory_bytes.into(),
                    0u64.into(),
                    0u64.into(),
                ]
            })
            .collect(),
        name if name == ndbinfo::TABLE_MEMORY_USAGE.name => {
            summed(&engine.memory_usage().await?, |f| {
                vec![f.database.clone().into(), f.table.clone().into()]
            })
        }
        name if name == ndbinfo::DATABASE_QUOTA_USAGE.name => engine
            .databases()
            .iter()
            .map(|db| {
                let quota = db.quota();
                let c = &db.governance.counters;
                let get = crate::tc::counter;
                vec![
                    db.name.as_str().into(),
                    db.memory_bytes().into(),
                    quota.in_memory_bytes.into(),
                    get(&c.read_units).into(),
                    get(&c.write_units).into(),
                    quota.read_units_per_sec.into(),
                    quota.write_units_per_sec.into(),
                    get(&c.throttled_reads).into(),
                    get(&c.throttled_writes).into(),
                    get(&c.quota_rejections).into(),
                ]
            })
            .collect(),
        name if name == ndbinfo::DATABASE_MEMORY_USAGE.name => {
            summed(&engine.memory_usage().await?, |f| {
                vec![f.database.clone().into()]
            })
        }
        _ => Vec::new(),
    };
    Ok(rows)
}

/// The memory columns per fragment, maximum over replicas (one today), summed
/// per group; groups in order.
fn summed(
    fragments: &[FragmentUsage],
    group: impl Fn(&FragmentUsage) -> Vec<Cell>,
) -> Vec<Vec<Cell>> {
    let mut per_fragment: BTreeMap<(u32, u16), &FragmentUsage> = BTreeMap::new();
    for f in fragments {
        let slot = per_fragment.entry((f.table_id.0, f.fragment)).or_insert(f);
        if f.in_memory_bytes > slot.in_memory_bytes {
            *slot = f;
        }
    }
    let mut sums: BTreeMap<Vec<Cell>, [u64; 4]> = BTreeMap::new();
    for f in per_fragment.values() {
        let sum = sums.entry(group(f)).or_default();
        sum[0] += f.in_memory_bytes;
        sum[1] += f.free_in_memory_bytes;
    }
    sums.into_iter()
        .map(|(mut key, sum)| {
            key.extend(sum.map(Cell::from));
            key
        })
        .collect()
}
