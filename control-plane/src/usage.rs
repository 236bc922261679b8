//! Metering: every interval each data node's memory and counters are
//! sampled per database (and memory and units per table) into the store, rolled up
//! per minute and per hour, and kept for as long as the retention says;
//! `GET /usage` answers series from them and `GET /usage/billing` a
//! per-tenant, per-day export. The arithmetic is in `shoal_metering`.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};
use shoal_metering::{
    BillingLine, Counters, DAY_MS, HOUR_MS, Resolution, Usage, billing_csv, day_of, gib_hours,
    growth,
};
use shoal_wire::api::{UsagePoint, UsageSeries};
use shoal_wire::ndbinfo::{self, NdbinfoTable, Record};

use crate::auth::Caller;
use crate::error::ApiError;
use crate::nodes::{self, NodeRow};
use crate::server::{App, Query};
use crate::store::now_ms;
use crate::validate;
use shoal_wire::schema::{DatabaseName, TenantId};

/// Most points one series answer holds.
pub const MAX_POINTS: i64 = 10_000;

/// Samples every `interval` until the process ends.
pub async fn collect_loop(app: Arc<App>, interval: Duration) {
    let mut ticks = tokio::time::interval(interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        if let Err(e) = collect_once(&app, now_ms()).await {
            tracing::warn!(error = %e, "metering: the store failed; the sample is skipped");
        }
    }
}

/// A database's row of a node's `database_quota_usage`.
fn counters_of(row: &Record<'_>) -> Counters {
    let n = |k: &str| row.uint(k).unwrap_or(0);
    Counters {
        read_units: n("read_units"),
        write_units: n("write_units"),
        throttled_reads: n("throttled_reads"),
        throttled_writes: n("throttled_writes"),
        quota_rejections: n("quota_rejections"),
    }
}

/// What one round found of a database (or one of its tables) over the
/// nodes it is on: its memory once (the largest replica), the units each
/// node admitted, together.
#[derive(Debug, Default)]
struct Found {
    memory: u64,
    elapsed: i64,
    grown: Counters,
}

impl Found {
    fn add(&mut self, memory: u64, elapsed: i64, grown: Counters) {
        self.memory = self.memory.max(memory);
        self.elapsed = self.elapsed.max(elapsed);
        self.grown = self.grown.plus(grown);
    }
}

/// One round: samples every node that is up (one that does not answer is
/// skipped, and tried again next round), then rolls up and trims.
pub async fn collect_once(app: &App, now: i64) -> sqlx::Result<()> {
    let interval_ms = app.config.metering_interval.as_millis() as i64;
    let tenants: HashMap<String, String> = sqlx::query_as::<_, (String, String)>(
        "SELECT name, tenant_id FROM databases WHERE status = 'ready'",
    )
    .fetch_all(&app.store.pool)
    .await?
    .into_iter()
    .collect();
    let up: Vec<NodeRow> = nodes::all(app)
        .await?
        .into_iter()
        .filter(|n| n.up(now))
        .collect();
    let mut databases: BTreeMap<&str, Found> = BTreeMap::new();
    let mut tables_found: BTreeMap<(String, String), Found> = BTreeMap::new();
    for node in &up {
        let fetch = |table: NdbinfoTable| app.nodes.ndbinfo(node, table.name);
        let (Ok(quota), Ok(tables), Ok(pool)) = (
            fetch(ndbinfo::DATABASE_QUOTA_USAGE).await,
            fetch(ndbinfo::TABLE_MEMORY_USAGE).await,
            fetch(ndbinfo::MEMORY_USAGE).await,
        ) else {
            tracing::debug!(
                node = %node.node_id,
                "metering: node did not answer; skipped"
            );
            continue;
        };
        // The node's own series: its DataMemory in use, and what it
        // admitted for every database on it.
        let mut on_node = Found::default();
        for row in quota.records() {
            let Some(db) = row.text("database_name") else {
                continue;
            };
            let Some((db, _)) = tenants.get_key_value(db) else {
                continue;
            };
            let now_counters = counters_of(&row);
            let previous: Option<(String, i64, i64, i64, i64, i64, i64)> = sqlx::query_as(
                "SELECT boot_id, at, read_units, write_units, throttled_reads, throttled_writes, \
                 quota_rejections FROM usage_counters WHERE node_id = $1 AND database_name = $2",
            )
            .bind(i64::from(node.node_id))
            .bind(db)
            .fetch_optional(&app.store.pool)
            .await?;
            let before = previous.as_ref().map(|p| {
                let c = Counters {
                    read_units: p.2 as u64,
                    write_units: p.3 as u64,
                    throttled_reads: p.4 as u64,
                    throttled_writes: p.5 as u64,
                    quota_rejections: p.6 as u64,
                };
                (p.0.as_str(), c)
            });
            let grown = growth(before, (node.boot_id.as_str(), now_counters));
            // Memory held since the previous sample — no more than a few
            // intervals' worth, if the control plane was away.
            let elapsed = previous
                .as_ref()
                .map_or(interval_ms, |p| (now - p.1).clamp(0, 3 * interval_ms));
            let memory = row.uint("in_memory_bytes").unwrap_or(0);
            databases
                .entry(db.as_str())
                .or_default()
                .add(memory, elapsed, grown);
            on_node.add(0, elapsed, grown);
            sqlx::query(
                "INSERT INTO usage_counters (node_id, database_name, boot_id, at, read_units, \
                 write_units, throttled_reads, throttled_writes, quota_rejections) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) \
                 ON CONFLICT (node_id, database_name) DO UPDATE SET boot_id = excluded.boot_id, \
                 at = excluded.at, read_units = excluded.read_units, write_units = excluded.write_units, \
                 throttled_reads = excluded.throttled_reads, throttled_writes = excluded.throttled_writes, \
                 quota_rejections = excluded.quota_rejections",
            )
            .bind(i64::from(node.node_id))
            .bind(db)
            .bind(&node.boot_id)
            .bind(now)
            .bind(clamp(now_counters.read_units))
            .bind(clamp(now_counters.write_units))
            .bind(clamp(now_counters.throttled_reads))
            .bind(clamp(now_counters.throttled_writes))
            .bind(clamp(now_counters.quota_rejections))
            .execute(&app.store.pool)
            .await?;
        }
        for row in tables.records() {
            let (Some(db), Some(table)) = (row.text("database_name"), row.text("table_name"))
            else {
                continue;
            };
            if tenants.contains_key(db) {
                let memory = row.uint("in_memory_bytes").unwrap_or(0);
                (tables_found.entry((db.to_owned(), table.to_owned())))
                    .or_default()
                    .add(memory, 0, Counters::default());
            }
        }
        let used = (pool.records())
            .find(|r| r.text("memory_type") == Some(ndbinfo::DATA_MEMORY))
            .and_then(|r| r.uint("used"))
            .unwrap_or(0);
        let elapsed = if on_node.elapsed > 0 {
            on_node.elapsed
        } else {
            interval_ms
        };
        let usage = Usage::sample(used, elapsed, on_node.grown);
        store_sample(
            app,
            Resolution::Raw,
            now,
            "",
            "",
            &node_series(node.node_id.0),
            &usage,
        )
        .await?;
        // Units per table: a node that does not say them is counted
        // without them.
        if let Ok(units) = fetch(ndbinfo::TABLE_USAGE).await {
            for ((db, table), grown) in table_units_grown(app, node, &units).await? {
                if tenants.contains_key(&db) {
                    (tables_found.entry((db, table)))
                        .or_default()
                        .add(0, 0, grown);
                }
            }
        }
    }
    // A database on a node group is sampled once, over its nodes.
    for (db, found) in &databases {
        let usage = Usage::sample(found.memory, found.elapsed, found.grown);
        store_sample(app, Resolution::Raw, now, &tenants[*db], db, "", &usage).await?;
    }
    for ((db, table), found) in &tables_found {
        let elapsed = databases
            .get(db.as_str())
            .map_or(interval_ms, |d| d.elapsed);
        let usage = Usage::sample(found.memory, elapsed, found.grown);
        store_sample(app, Resolution::Raw, now, &tenants[db], db, table, &usage).await?;
    }
    roll_up(app, now).await?;
    trim(app, now).await
}

/// What each table's unit counters on `node` grew by since the last
/// reading (`growth`'s rules), from the node's `table_usage` rows; the
/// readings are kept for next time, and those of tables gone forgotten.
async fn table_units_grown(
    app: &App,
    node: &NodeRow,
    rows: &ndbinfo::Rows,
) -> sqlx::Result<Vec<((String, String), Counters)>> {
    let node_id = i64::from(node.node_id);
    let kept: Vec<(String, String, String, i64, i64)> = sqlx::query_as(
        "SELECT database_name, table_name, boot_id, read_units, write_units \
         FROM table_usage_counters WHERE node_id = $1",
    )
    .bind(node_id)
    .fetch_all(&app.store.pool)
    .await?;
    let mut before: HashMap<(String, String), (String, Counters)> = (kept.into_iter())
        .map(|(db, table, boot, reads, writes)| {
            let c = Counters {
                read_units: reads as u64,
                write_units: writes as u64,
                ..Counters::default()
            };
            ((db, table), (boot, c))
        })
        .collect();
    let mut grown = Vec::new();
    for row in rows.records() {
        let (Some(db), Some(table)) = (row.text("database_name"), row.text("table_name")) else {
            continue;
        };
        let now = Counters {
            read_units: row.uint("read_units").unwrap_or(0),
            write_units: row.uint("write_units").unwrap_or(0),
            ..Counters::default()
        };
        // A table made again is a new table: its counters started anew,
        // as after a restart.
        let made = format!("{}/{}", node.boot_id, row.uint("table_id").unwrap_or(0));
        let key = (db.to_owned(), table.to_owned());
        let previous = before.remove(&key);
        let unchanged = (previous.as_ref()).is_some_and(|(m, c)| *m == made && *c == now);
        let previous = previous.as_ref().map(|(made, c)| (made.as_str(), *c));
        grown.push((key, growth(previous, (made.as_str(), now))));
        // A table nobody used since keeps its reading as it is.
        if unchanged {
            continue;
        }
        sqlx::query(
            "INSERT INTO table_usage_counters (node_id, database_name, table_name, boot_id, \
             read_units, write_units) VALUES ($1, $2, $3, $4, $5, $6) \
             ON CONFLICT (node_id, database_name, table_name) DO UPDATE SET \
             boot_id = excluded.boot_id, read_units = excluded.read_units, \
             write_units = excluded.write_units",
        )
        .bind(node_id)
        .bind(db)
        .bind(table)
        .bind(&made)
        .bind(clamp(now.read_units))
        .bind(clamp(now.write_units))
        .execute(&app.store.pool)
        .await?;
    }
    // Tables the node no longer has.
    for ((db, table), _) in before {
        sqlx::query(
            "DELETE FROM table_usage_counters \
             WHERE node_id = $1 AND database_name = $2 AND table_name = $3",
        )
        .bind(node_id)
        .bind(db)
        .bind(table)
        .execute(&app.store.pool)
        .await?;
    }
    Ok(grown)
}

/// Where a data node's series is kept among the tenants' (in
/// `usage_samples`): under no tenant and no database, its node id in place
/// of a table's name — so rollups and retention treat it as any series, and
/// no tenant's query or bill can reach it.
fn node_series(node_id: u32) -> String {
    node_id.to_string()
}

fn clamp(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

async fn store_sample(
    app: &App,
    resolution: Resolution,
    at: i64,
    tenant: &str,
    db: &str,
    table: &str,
    u: &Usage,
) -> sqlx::Result<()> {
    sqlx::query(
        "INSERT INTO usage_samples (resolution, at, tenant_id, database_name, table_name, \
         memory_bytes, memory_max_bytes, memory_byte_seconds, read_units, write_units, \
         throttled_reads, throttled_writes, quota_rejections, samples) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) \
         ON CONFLICT (resolution, database_name, table_name, at) DO UPDATE SET \
         tenant_id = excluded.tenant_id, memory_bytes = excluded.memory_bytes, \
         memory_max_bytes = excluded.memory_max_bytes, \
         memory_byte_seconds = excluded.memory_byte_seconds, read_units = excluded.read_units, \
         write_units = excluded.write_units, throttled_reads = excluded.throttled_reads, \
         throttled_writes = excluded.throttled_writes, quota_rejections = excluded.quota_rejections, \
         samples = excluded.samples",
    )
    .bind(resolution.as_str())
    .bind(at)
    .bind(tenant)
    .bind(db)
    .bind(table)
    .bind(clamp(u.memory_bytes))
    .bind(clamp(u.memory_max_bytes))
    .bind(clamp(u.memory_byte_seconds))
    .bind(clamp(u.counters.read_units))
    .bind(clamp(u.counters.write_units))
    .bind(clamp(u.counters.throttled_reads))
    .bind(clamp(u.counters.throttled_writes))
    .bind(clamp(u.counters.quota_rejections))
    .bind(clamp(u.samples))
    .execute(&app.store.pool)
    .await
    .map(drop)
}

/// A stored row of a series.
#[derive(Debug, sqlx::FromRow)]
struct SampleRow {
    at: i64,
    tenant_id: String,
    database_name: String,
    table_name: String,
    memory_bytes: i64,
    memory_max_bytes: i64,
    memory_byte_seconds: i64,
    read_units: i64,
    write_units: i64,
    throttled_reads: i64,
    throttled_writes: i64,
    quota_rejections: i64,
    samples: i64,
}

const SAMPLE_COLUMNS: &str = "at, tenant_id, database_name, table_name, memory_bytes, \
    memory_max_bytes, memory_byte_seconds, read_units, write_units, throttled_reads, \
    throttled_writes, quota_rejections, samples";

impl SampleRow {
    fn usage(&self) -> Usage {
        let u = |n: i64| u64::try_from(n).unwrap_or(0);
        Usage {
            memory_bytes: u(self.memory_bytes),
            memory_max_bytes: u(self.memory_max_bytes),
            memory_byte_seconds: u(self.memory_byte_seconds),
            counters: Counters {
                read_units: u(self.read_units),
                write_units: u(self.write_units),
                throttled_reads: u(self.throttled_reads),
                throttled_writes: u(self.throttled_writes),
                quota_rejections: u(self.quota_rejections),
            },
            samples: u(self.samples),
        }
    }
}

async fn rows_between(
    app: &App,
    resolution: Resolution,
    from: i64,
    to: i64,
) -> sqlx::Result<Vec<SampleRow>> {
    sqlx::query_as(&format!(
        "SELECT {SAMPLE_COLUMNS} FROM usage_samples WHERE resolution = $1 AND at >= $2 AND at < $3"
    ))
    .bind(resolution.as_str())
    .bind(from)
    .bind(to)
    .fetch_all(&app.store.pool)
    .await
}

/// Recomputes the minute and hour buckets that `now` and the moment before
/// the last round fall in, from the finer rows they cover: a bucket is a
/// pure function of its finer rows, so doing it again changes nothing.
async fn roll_up(app: &App, now: i64) -> sqlx::Result<()> {
    let interval_ms = app.config.metering_interval.as_millis() as i64;
    for resolution in [Resolution::Minute, Resolution::Hour] {
        let width = resolution.bucket_ms().expect("a rollup has buckets");
        let finer = resolution.finer().expect("a rollup has a finer resolution");
        let mut buckets = vec![resolution.bucket(now)];
        let previous = resolution.bucket(now - interval_ms.max(1) - 1);
        if previous != buckets[0] {
            buckets.push(previous);
        }
        for start in buckets {
            let rows = rows_between(app, finer, start, start + width).await?;
            let mut groups: HashMap<(&str, &str, &str), Vec<Usage>> = HashMap::new();
            for row in &rows {
                groups
                    .entry((&row.tenant_id, &row.database_name, &row.table_name))
                    .or_default()
                    .push(row.usage());
            }
            for ((tenant, db, table), parts) in groups {
                store_sample(
                    app,
                    resolution,
                    start,
                    tenant,
                    db,
                    table,
                    &Usage::rollup(&parts),
                )
                .await?;
            }
        }
    }
    Ok(())
}

/// Drops what the retention no longer keeps.
async fn trim(app: &App, now: i64) -> sqlx::Result<()> {
    let interval_ms = app.config.metering_interval.as_millis() as i64;
    for resolution in Resolution::ALL {
        sqlx::query("DELETE FROM usage_samples WHERE resolution = $1 AND at < $2")
            .bind(resolution.as_str())
            .bind(app.config.retention.cutoff(resolution, now, interval_ms))
            .execute(&app.store.pool)
            .await?;
    }
    Ok(())
}

/// The databases of `tenant` that were throttled in the latest metered
/// interval.
pub async fn throttled_lately(app: &App, tenant: &TenantId) -> sqlx::Result<Vec<String>> {
    sqlx::query_scalar(
        "SELECT s.database_name FROM usage_samples s WHERE s.resolution = 'raw' \
         AND s.tenant_id = $1 AND s.table_name = '' \
         AND s.throttled_reads + s.throttled_writes > 0 AND s.at = \
           (SELECT MAX(at) FROM usage_samples l WHERE l.resolution = 'raw' \
            AND l.table_name = '' AND l.database_name = s.database_name)",
    )
    .bind(tenant)
    .fetch_all(&app.store.pool)
    .await
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct SeriesQuery {
    /// One database of the caller's; without it, the tenant's total.
    database: Option<String>,
    /// One table of that database.
    table: Option<String>,
    /// Platform admins: whose total, without `database`.
    tenant: Option<String>,
    /// Platform admins: one data node's series (its DataMemory in use and
    /// what it admitted), instead of a tenant's.
    node: Option<u32>,
    /// From and to, in ms since the epoch; the last hour by default.
    from: Option<i64>,
    to: Option<i64>,
    /// `raw`, `minute` (the default) or `hour`.
    resolution: Option<String>,
}

fn point(at: i64, u: &Usage) -> UsagePoint {
    UsagePoint {
        at,
        memory_bytes: u.memory_bytes,
        memory_max_bytes: u.memory_max_bytes,
        memory_gib_hours: gib_hours(u.memory_byte_seconds),
        read_units: u.counters.read_units,
        write_units: u.counters.write_units,
        throttled_reads: u.counters.throttled_reads,
        throttled_writes: u.counters.throttled_writes,
        quota_rejections: u.counters.quota_rejections,
    }
}

/// `GET /usage`: a series of the caller's tenant, one of its databases, or
/// one table of it.
#[utoipa::path(get, path = "/usage", tag = "usage", params(SeriesQuery),
    responses((status = 200, description = "{resolution, from, to, database, table, points: [{at, memory_bytes, memory_max_bytes, memory_gib_hours, read_units, write_units, throttled_reads, throttled_writes, quota_rejections}]}", body = Object),
        (status = 400, description = "A bad range, resolution or parameter", body = Object),
        (status = 401, description = "No session, or an invalid or expired one", body = Object),
        (status = 404, description = "No such database or tenant — or another tenant's", body = Object)))]
pub async fn series(
    State(app): State<Arc<App>>,
    caller: Caller,
    Query(q): Query<SeriesQuery>,
) -> Result<Json<Value>, ApiError> {
    let resolution = match q.resolution.as_deref() {
        None => Resolution::Minute,
        Some(r) => Resolution::parse(r)
            .ok_or_else(|| ApiError::invalid("resolution: raw, minute or hour"))?,
    };
    let now = now_ms();
    let to = q.to.unwrap_or(now);
    let from = q.from.unwrap_or(to - HOUR_MS);
    if from >= to {
        return Err(ApiError::invalid("from: must be before to"));
    }
    let step = resolution
        .bucket_ms()
        .unwrap_or(app.config.metering_interval.as_millis() as i64);
    if (to - from) / step.max(1) > MAX_POINTS {
        return Err(ApiError::invalid(format!(
            "the range holds more than {MAX_POINTS} points at {}: narrow it or take a coarser resolution",
            resolution.as_str()
        )));
    }
    // Whose: a database of the caller's, a tenant as a whole, or a node.
    if q.node.is_some() && (q.database.is_some() || q.table.is_some() || q.tenant.is_some()) {
        return Err(ApiError::invalid(
            "node: a node's series takes no database, table or tenant",
        ));
    }
    let (tenant, database) = match (&q.database, q.node) {
        (_, Some(node)) => {
            caller.require_admin()?;
            if !nodes::all(&app).await?.iter().any(|n| n.node_id.0 == node) {
                return Err(ApiError::not_found("data node"));
            }
            (None, None)
        }
        (Some(name), None) => {
            let db = crate::databases::find(&app, &caller, name).await?;
            (Some(db.tenant_id), Some(db.name))
        }
        (None, None) if q.table.is_some() => {
            return Err(ApiError::invalid("table: needs database"));
        }
        (None, None) => match (&q.tenant, caller.is_admin()) {
            (Some(t), true) => (Some(validate::tenant(t)?), None),
            (Some(_), false) => return Err(ApiError::invalid("tenant: platform admins only")),
            (None, _) => (Some(caller.tenant()?.clone()), None),
        },
    };
    if let Some(table) = &q.table
        && !validate::could_name(table)
    {
        return Err(ApiError::not_found("table"));
    }
    let series_name = match q.node {
        Some(node) => node_series(node),
        None => q.table.clone().unwrap_or_default(),
    };
    let rows: Vec<SampleRow> = sqlx::query_as(&format!(
        "SELECT {SAMPLE_COLUMNS} FROM usage_samples WHERE resolution = $1 AND tenant_id = $2 \
         AND ($3 = '' OR database_name = $3) AND table_name = $4 AND at >= $5 AND at < $6 \
         ORDER BY at"
    ))
    .bind(resolution.as_str())
    .bind(tenant.as_ref().map_or("", TenantId::as_str))
    .bind(database.as_ref().map_or("", DatabaseName::as_str))
    .bind(&series_name)
    .bind(resolution.bucket(from))
    .bind(to)
    .fetch_all(&app.store.pool)
    .await?;
    let mut by_time: std::collections::BTreeMap<i64, Vec<Usage>> = Default::default();
    for row in &rows {
        by_time.entry(row.at).or_default().push(row.usage());
    }
    let points = by_time
        .iter()
        .map(|(at, parts)| point(*at, &Usage::combine(parts)))
        .collect();
    let series = UsageSeries {
        resolution: resolution.as_str().to_owned(),
        from,
        to,
        tenant_id: tenant,
        node_id: q.node,
        database,
        table: q.table,
        points,
    };
    Ok(Json(
        serde_json::to_value(series).expect("a series serializes"),
    ))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct BillingQuery {
    /// From and to, in ms since the epoch; the last 30 days by default.
    from: Option<i64>,
    to: Option<i64>,
    /// `json` (the default) or `csv`.
    format: Option<String>,
}

/// `GET /usage/billing`: per tenant (a tenant's user: its own; a platform
/// admin: every one) and UTC day, memory GiB-hours, read and write units,
/// throttled requests.
#[utoipa::path(get, path = "/usage/billing", tag = "usage", params(BillingQuery),
    responses((status = 200, description = "{lines: [{tenant_id, tenant_name, day, memory_gib_hours, read_units, write_units, throttled_requests}]}, or the same as CSV", body = Object),
        (status = 400, description = "A bad range or format", body = Object),
        (status = 401, description = "No session, or an invalid or expired one", body = Object)))]
pub async fn billing(
    State(app): State<Arc<App>>,
    caller: Caller,
    Query(q): Query<BillingQuery>,
) -> Result<Response, ApiError> {
    let csv = match q.format.as_deref() {
        None | Some("json") => false,
        Some("csv") => true,
        Some(_) => return Err(ApiError::invalid("format: json or csv")),
    };
    let to = q.to.unwrap_or_else(now_ms);
    let from = q.from.unwrap_or(to - 30 * DAY_MS);
    if from >= to || to - from > 400 * DAY_MS {
        return Err(ApiError::invalid(
            "from, to: a range of at most 400 days, from before to",
        ));
    }
    let tenant = if caller.is_admin() {
        None
    } else {
        Some(caller.tenant()?.clone())
    };
    let rows: Vec<SampleRow> = sqlx::query_as(&format!(
        "SELECT {SAMPLE_COLUMNS} FROM usage_samples WHERE resolution = 'hour' AND table_name = '' \
         AND ($1 = '' OR tenant_id = $1) AND at >= $2 AND at < $3"
    ))
    .bind(tenant.as_ref().map_or("", TenantId::as_str))
    .bind(Resolution::Hour.bucket(from))
    .bind(to)
    .fetch_all(&app.store.pool)
    .await?;
    let names: HashMap<String, String> =
        sqlx::query_as::<_, (String, String)>("SELECT id, name FROM tenants")
            .fetch_all(&app.store.pool)
            .await?
            .into_iter()
            .collect();
    let mut days: std::collections::BTreeMap<(String, String), Vec<Usage>> = Default::default();
    for row in &rows {
        days.entry((row.tenant_id.clone(), day_of(row.at)))
            .or_default()
            .push(row.usage());
    }
    let lines: Vec<BillingLine> = days
        .into_iter()
        .map(|((tenant_id, day), parts)| {
            let total = Usage::rollup(&parts);
            BillingLine {
                tenant_name: names.get(&tenant_id).cloned().unwrap_or_default(),
                tenant_id,
                day,
                memory_gib_hours: gib_hours(total.memory_byte_seconds),
                read_units: total.counters.read_units,
                write_units: total.counters.write_units,
                throttled_requests: total.counters.throttled_reads
                    + total.counters.throttled_writes,
            }
        })
        .collect();
    if csv {
        let mut response = billing_csv(&lines).into_response();
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/csv; charset=utf-8"),
        );
        return Ok(response);
    }
    Ok((StatusCode::OK, Json(json!({"lines": lines}))).into_response())
}
