//! ndbinfo: virtual tables computed on read from the engine's live state.
//!
//! The raw tables come from the catalog, the pool and the workers; the views
//! are made as their one definition (`shoal_wire::ndbinfo::MemoryView`) says,
//! the same the control plane's SQL engine defines them by: the largest
//! figure of each `(table_id, fragment_num)` over its replicas, summed per
//! group. A database without tables has no rows, as in RonDB.

use std::collections::BTreeMap;

use shoal_wire::ndbinfo::{self, Cell, MEMORY_FIGURES, MemoryView, NdbinfoTable, Rows};

use super::{Engine, FragmentUsage};
use crate::ldm::NodeFailed;
use crate::types::TableId;

/// The rows of one ndbinfo table, computed now, on a node of node group
/// `node_group` (0 for a node in none).
pub(crate) async fn rows(
    engine: &Engine,
    table: NdbinfoTable,
    node_group: u32,
) -> Result<Rows, NodeFailed> {
    let mut rows = Rows::new(table);
    if let Some(view) = table.view {
        rows.rows = summed(&engine.memory_usage().await?, view);
        return Ok(rows);
    }
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
                engine.node_id().0.into(),
                ndbinfo::DATA_MEMORY.into(),
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
                    node_group.into(),
                    f.in_memory_bytes.into(),
                    f.free_in_memory_bytes.into(),
                    0u64.into(),
                    0u64.into(),
                    engine.node_id().0.into(),
                ]
            })
            .collect(),
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
        name if name == ndbinfo::TABLE_USAGE.name => engine
            .tables()
            .iter()
            .map(|t| {
                let get = crate::tc::counter;
                vec![
                    t.database.name.as_str().into(),
                    t.name().as_str().into(),
                    t.id.0.into(),
                    get(&t.units.read_units).into(),
                    get(&t.units.write_units).into(),
                    engine.node_id().0.into(),
                ]
            })
            .collect(),
        _ => Vec::new(),
    };
    Ok(rows)
}

/// A memory view of the fragments: each fragment's largest figures over
/// its replicas (one today), summed per group; groups in order.
fn summed(fragments: &[FragmentUsage], view: MemoryView) -> Vec<Vec<Cell>> {
    let mut per_fragment: BTreeMap<(TableId, u16), &FragmentUsage> = BTreeMap::new();
    for f in fragments {
        let slot = per_fragment.entry((f.table_id, f.fragment)).or_insert(f);
        if f.in_memory_bytes > slot.in_memory_bytes {
            *slot = f;
        }
    }
    let mut sums: BTreeMap<Vec<Cell>, [u64; MEMORY_FIGURES.len()]> = BTreeMap::new();
    for f in per_fragment.values() {
        let group = view.group_by.iter().map(|c| table_map_cell(f, c)).collect();
        let sum = sums.entry(group).or_default();
        for (sum, figure) in sum.iter_mut().zip(MEMORY_FIGURES) {
            *sum += memory_figure(f, figure);
        }
    }
    sums.into_iter()
        .map(|(mut key, sum)| {
            key.extend(sum.map(Cell::from));
            key
        })
        .collect()
}

/// A fragment's cell of an `ndb$table_map` column.
fn table_map_cell(f: &FragmentUsage, column: &str) -> Cell {
    match column {
        "table_id" => f.table_id.0.into(),
        "database_name" => f.database.clone().into(),
        "table_name" => f.table.clone().into(),
        other => unreachable!("ndb$table_map has no column {other}"),
    }
}

/// A fragment's figure of an `ndb$table_memory_usage` column (nothing is on
/// disk yet).
fn memory_figure(f: &FragmentUsage, column: &str) -> u64 {
    match column {
        "in_memory_bytes" => f.in_memory_bytes,
        "free_in_memory_bytes" => f.free_in_memory_bytes,
        _ => 0,
    }
}
