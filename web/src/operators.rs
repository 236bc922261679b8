//! What platform admins see: every tenant, a tenant's quotas (and its
//! databases'), suspension and audit trail, the data nodes and their
//! charts, the audit log.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use maud::{Markup, html};
use reqwest::Method;
use serde_json::{Value, json};
use shoal_wire::api::{AuditLog, DataNodeList, DatabaseList, TenantList, UsagePoint, UsageSeries};

use crate::Console;
use crate::chart::{self, Limit, Line, Range, chart};
use crate::format;
use crate::http::{Operator, Posted, Visitor, done_or, field, url_segment};
use crate::layout::{bar, html_response, problem};

pub(crate) async fn tenant(
    State(console): State<Arc<Console>>,
    Operator(visitor): Operator,
    Path(tenant): Path<String>,
    axum::extract::Query(query): axum::extract::Query<HashMap<String, String>>,
) -> Response {
    let Some(range) = Range::asked(&query) else {
        return Range::refused();
    };
    tenant_page(&console, &visitor, &tenant, None, range).await
}

pub(crate) async fn set_tenant_quota(
    State(console): State<Arc<Console>>,
    Path(tenant): Path<String>,
    posted: Posted,
) -> Response {
    save_quota(&console, posted, &tenant, None).await
}

pub(crate) async fn set_database_quota(
    State(console): State<Arc<Console>>,
    Path((tenant, db)): Path<(String, String)>,
    posted: Posted,
) -> Response {
    save_quota(&console, posted, &tenant, Some(&db)).await
}

/// Saves a tenant's quota (`db` none) or one of its databases'.
async fn save_quota(console: &Console, posted: Posted, tenant: &str, db: Option<&str>) -> Response {
    let Posted { visitor, form } = posted;
    let which = db.unwrap_or("tenant");
    let quota = match quota_of(&form) {
        Ok(quota) => quota,
        Err(e) => {
            return tenant_page(console, &visitor, tenant, Some((which, &e)), Range::DEFAULT).await;
        }
    };
    let tenant_at = url_segment(tenant);
    let path = match db {
        Some(db) => format!(
            "/admin/tenants/{tenant_at}/databases/{}/quota",
            url_segment(db)
        ),
        None => format!("/admin/tenants/{tenant_at}/quota"),
    };
    let answer = visitor.api(console, Method::PUT, &path, Some(quota)).await;
    if answer.status != StatusCode::OK {
        let refused = answer.message();
        return tenant_page(
            console,
            &visitor,
            tenant,
            Some((which, &refused)),
            Range::DEFAULT,
        )
        .await;
    }
    Redirect::to(&format!("/admin/tenants/{tenant_at}")).into_response()
}

pub(crate) async fn set_status(
    State(console): State<Arc<Console>>,
    Path((tenant, action)): Path<(String, String)>,
    Posted { visitor, .. }: Posted,
) -> Response {
    if action != "suspend" && action != "resume" {
        return problem(StatusCode::NOT_FOUND, "Not found", "no such page");
    }
    let tenant_at = url_segment(&tenant);
    let path = format!("/admin/tenants/{tenant_at}/{action}");
    let answer = visitor.api(&console, Method::POST, &path, None).await;
    let back = format!("/admin/tenants/{tenant_at}");
    done_or(answer, StatusCode::NO_CONTENT, &back, "Not changed")
}

pub(crate) async fn datanodes(
    State(console): State<Arc<Console>>,
    Operator(visitor): Operator,
) -> Response {
    let nodes = match visitor
        .read::<DataNodeList>(&console, "/admin/datanodes")
        .await
    {
        Ok(nodes) => nodes.datanodes,
        Err(page) => return page,
    };
    // Every node's DataMemory in use over the last hour, on one chart.
    let (from, to) = Range::DEFAULT.until_now();
    let mut lines = Vec::new();
    for n in &nodes {
        let points = node_series(&console, &visitor, n.node_id.0, Range::DEFAULT).await;
        lines.push(Line {
            name: format!("node {}", n.node_id),
            points: (points.iter())
                .map(|p| (p.at, p.memory_bytes as f64))
                .collect(),
        });
    }
    let memory = chart(
        "DataMemory in use, the last hour",
        chart::Unit::Bytes,
        &lines,
        from,
        to,
    );
    html_response(
        StatusCode::OK,
        visitor.page(
            "Data nodes",
            html! {
                h1 { "Data nodes" }
                div.scroll { table {
                    thead { tr { th { "Node" } th { "Group" } th { "Status" } th { "DataMemory" } th { "Last seen" } th { "REST" } } }
                    tbody {
                        @for n in &nodes {
                            tr {
                                td { a href=(format!("/admin/datanodes/{}", n.node_id)) { "node " (n.node_id) } }
                                td { @match n.node_group { Some(g) => (g), None => "none" } }
                                td { span class=(format!("status {}", n.status)) { (n.status) } }
                                td { (bar(u64::try_from(n.used_bytes).unwrap_or(0), u64::try_from(n.data_memory_bytes).ok())) }
                                td { (format::when(Some(n.last_seen))) }
                                td { code { (n.rest_url) } }
                            }
                        }
                    }
                } }
                (memory)
            },
        ),
    )
}

/// A node's metered series over `range`: its DataMemory in use and what it
/// admitted for every database on it.
async fn node_series(
    console: &Console,
    visitor: &Visitor,
    node: u32,
    range: Range,
) -> Vec<UsagePoint> {
    let (from, to) = range.until_now();
    let path = format!(
        "/usage?node={node}&resolution={}&from={from}&to={to}",
        range.resolution()
    );
    (visitor.read::<UsageSeries>(console, &path).await).map_or_else(|_| Vec::new(), |u| u.points)
}

/// `/admin/datanodes/{id}`: one data node over a range — its DataMemory in
/// use against its size, read and write units per second, throttled and
/// refused requests.
pub(crate) async fn datanode(
    State(console): State<Arc<Console>>,
    Operator(visitor): Operator,
    Path(id): Path<String>,
    axum::extract::Query(query): axum::extract::Query<HashMap<String, String>>,
) -> Response {
    let Some(range) = Range::asked(&query) else {
        return Range::refused();
    };
    let nodes = match visitor
        .read::<DataNodeList>(&console, "/admin/datanodes")
        .await
    {
        Ok(nodes) => nodes.datanodes,
        Err(page) => return page,
    };
    let Some(node) = nodes.iter().find(|n| n.node_id.to_string() == id) else {
        return problem(StatusCode::NOT_FOUND, "Not found", "no such data node");
    };
    let points = node_series(&console, &visitor, node.node_id.0, range).await;
    let size = u64::try_from(node.data_memory_bytes).unwrap_or(0);
    let charts = crate::chart::usage(&points, Limit::DataMemory(size), range.until_now(), &[]);
    let title = format!("Data node {}", node.node_id);
    html_response(
        StatusCode::OK,
        visitor.page(
            &title,
            html! {
                h1 { (title) }
                p { "Group " @match node.node_group { Some(g) => (g), None => "none" } " · " span class=(format!("status {}", node.status)) { (node.status) } " · last heard from " (format::when(Some(node.last_seen))) }
                dl.key {
                    dt { "REST" } dd { code { (node.rest_url) } }
                    dt { "Redis" } dd { code { (node.resp_addr) } }
                    dt { "DataMemory" } dd { (bar(u64::try_from(node.used_bytes).unwrap_or(0), Some(size))) }
                }
                (range.choice(&format!("/admin/datanodes/{}", node.node_id)))
                (charts)
                p { a href="/admin/datanodes" { "All data nodes" } }
            },
        ),
    )
}

/// `/admin/audit`: the latest changes on the platform.
pub(crate) async fn audit(
    State(console): State<Arc<Console>>,
    Operator(visitor): Operator,
) -> Response {
    let audit = match visitor
        .read::<AuditLog>(&console, "/admin/audit?limit=200")
        .await
    {
        Ok(audit) => audit,
        Err(page) => return page,
    };
    let content = html! { h1 { "Audit log" } (crate::activity::audit_table(&audit)) };
    html_response(StatusCode::OK, visitor.page("Audit log", content))
}

/// `/` for a platform admin: every tenant, sorted by the column asked for.
pub(crate) async fn tenants_page(
    console: &Console,
    visitor: &Visitor,
    sort: Option<&str>,
) -> Response {
    let mut rows = match visitor.read::<TenantList>(console, "/admin/tenants").await {
        Ok(list) => list.tenants,
        Err(page) => return page,
    };
    // Sorted by the column asked for: the largest first, names A to Z.
    use std::cmp::Reverse;
    match sort.unwrap_or("name") {
        "memory" => rows.sort_by_key(|t| Reverse(t.usage.in_memory_bytes)),
        "databases" => rows.sort_by_key(|t| Reverse(t.usage.databases)),
        "keys" => rows.sort_by_key(|t| Reverse(t.usage.api_keys)),
        "status" => rows.sort_by(|a, b| a.status.cmp(&b.status)),
        _ => rows.sort_by(|a, b| a.name.cmp(&b.name)),
    }
    html_response(
        StatusCode::OK,
        visitor.page(
            "Tenants",
            html! {
                h1 { "Tenants" }
                table {
                    thead { tr {
                        @for (key, label) in [("name", "Tenant"), ("status", "Status"), ("memory", "Memory"), ("databases", "Databases"), ("keys", "Keys")] {
                            th aria-sort=[(sort.unwrap_or("name") == key).then_some("descending")] {
                                a href=(format!("/?sort={key}")) { (label) }
                            }
                        }
                    } }
                    tbody {
                        @for t in &rows {
                            tr {
                                td { a href=(format!("/admin/tenants/{}", url_segment(t.id.as_str()))) { (t.name) } }
                                td { (t.status) }
                                td { (bar(t.usage.in_memory_bytes, t.quota.in_memory_bytes)) }
                                td { (t.usage.databases) }
                                td { (t.usage.api_keys) }
                            }
                        }
                    }
                }
            },
        ),
    )
}

/// How a quota field is written.
#[derive(Clone, Copy)]
enum Unit {
    /// `512 MiB`, `2 GB`.
    Bytes,
    /// `10k`, `2.5M`.
    Count,
}

const QUOTA_FIELDS: [(&str, &str, Unit); 10] = [
    (
        "in_memory_bytes",
        "Memory (e.g. 512 MiB, 2 GiB)",
        Unit::Bytes,
    ),
    ("on_disk_bytes", "Disk (e.g. 10 GiB)", Unit::Bytes),
    (
        "read_units_per_sec",
        "Read units per second (e.g. 10k)",
        Unit::Count,
    ),
    (
        "write_units_per_sec",
        "Write units per second (e.g. 2k)",
        Unit::Count,
    ),
    ("burst_seconds", "Burst (seconds)", Unit::Count),
    ("max_transaction_ops", "Operations per request", Unit::Count),
    (
        "max_parallel_transactions",
        "Requests in flight",
        Unit::Count,
    ),
    ("max_databases", "Databases", Unit::Count),
    ("max_tables", "Tables", Unit::Count),
    ("max_api_keys", "API keys", Unit::Count),
];

/// A quota's value as its field shows it: exact, in people's units.
fn shown(unit: Unit, n: u64) -> String {
    match unit {
        Unit::Bytes => format::bytes_exact(n),
        Unit::Count => format::count_exact(n),
    }
}

fn quota_form(action: &str, csrf: &str, quota: &Value, error: Option<&str>) -> Markup {
    html! {
        form.card.quota method="post" action=(action) {
            input type="hidden" name="csrf" value=(csrf);
            @for (name, label, unit) in QUOTA_FIELDS {
                label for=(name) { (label) }
                input id=(name) name=(name) placeholder="unlimited"
                    value=(quota[name].as_u64().map(|n| shown(unit, n)).unwrap_or_default());
            }
            @if let Some(error) = error { p.error role="alert" { (error) } }
            button type="submit" { "Save quota" }
        }
    }
}

/// The quota a form describes, as the API takes it (exact numbers); empty
/// fields are unlimited. Nothing is rounded: a value that is not a whole
/// number of its unit is refused.
fn quota_of(form: &HashMap<String, String>) -> Result<Value, String> {
    let mut quota = serde_json::Map::new();
    for (name, label, unit) in QUOTA_FIELDS {
        let raw = field(form, name);
        let raw = raw.trim();
        let value = if raw.is_empty() {
            Value::Null
        } else {
            let parsed = match unit {
                Unit::Bytes => format::parse_bytes(raw),
                Unit::Count => format::parse_count(raw),
            };
            json!(parsed.map_err(|why| format!("{name}: {label}: {why}"))?)
        };
        quota.insert(name.to_owned(), value);
    }
    Ok(Value::Object(quota))
}

/// A tenant: its status, its quota and its databases', and its audit trail;
/// `error` says which form was refused and why.
async fn tenant_page(
    console: &Console,
    visitor: &Visitor,
    tenant: &str,
    error: Option<(&str, &str)>,
    range: Range,
) -> Response {
    let tenants = match visitor.read::<TenantList>(console, "/admin/tenants").await {
        Ok(list) => list.tenants,
        Err(page) => return page,
    };
    let Some(t) = tenants.into_iter().find(|t| t.id.as_str() == tenant) else {
        return problem(StatusCode::NOT_FOUND, "Not found", "no such tenant");
    };
    let active = t.status == "active";
    // Each database's quota, to fill its form.
    let quotas = (visitor)
        .get(
            console,
            &format!("/admin/tenants/{}/quotas", url_segment(tenant)),
        )
        .await;
    // The tenant's usage over the range asked for.
    let (from, to) = range.until_now();
    let usage_path = format!(
        "/usage?tenant={}&resolution={}&from={from}&to={to}",
        url_segment(tenant),
        range.resolution()
    );
    let usage = (visitor.read::<UsageSeries>(console, &usage_path).await)
        .map_or_else(|_| Vec::new(), |u| u.points);
    let charts = crate::chart::usage(
        &usage,
        Limit::Quota(t.quota.in_memory_bytes),
        (from, to),
        &[],
    );
    let quota = serde_json::to_value(t.quota).unwrap_or_default();
    let dbs = match visitor.read::<DatabaseList>(console, "/databases").await {
        Ok(dbs) => dbs.databases,
        Err(page) => return page,
    };
    let audit_path = format!("/admin/audit?tenant={}&limit=50", url_segment(tenant));
    let audit = match visitor.read::<AuditLog>(console, &audit_path).await {
        Ok(audit) => audit,
        Err(page) => return page,
    };
    let csrf = &visitor.csrf;
    let status = if error.is_some() {
        StatusCode::BAD_REQUEST
    } else {
        StatusCode::OK
    };
    let error_for = |what: &str| error.filter(|(w, _)| *w == what).map(|(_, e)| e);
    html_response(
        status,
        visitor.page(
            &format!("Tenant {}", t.name),
            html! {
                h1 { "Tenant " (t.name) }
                p { "Status: " strong { (t.status) } " · memory "
                    (bar(t.usage.in_memory_bytes, t.quota.in_memory_bytes)) }
                form method="post" action=(format!("/admin/tenants/{}/{}", url_segment(tenant), if active { "suspend" } else { "resume" })) {
                    input type="hidden" name="csrf" value=(csrf);
                    button.danger type="submit" { @if active { "Suspend" } @else { "Resume" } }
                }
                h2 { "Usage" }
                (range.choice(&format!("/admin/tenants/{}", url_segment(tenant))))
                (charts)
                h2 { "Tenant quota" }
                (quota_form(&format!("/admin/tenants/{}/quota", url_segment(tenant)), csrf, &quota, error_for("tenant")))
                @for db in dbs.iter().filter(|d| d.tenant_id.as_str() == tenant) {
                    @let name = db.name.as_str();
                    h2 { "Database " (name) }
                    @let db_quota = (quotas["databases"].as_array().into_iter().flatten()).find(|d| d["name"] == name).map_or(Value::Null, |d| d["quota"].clone());
                    (quota_form(&format!("/admin/tenants/{}/databases/{}/quota", url_segment(tenant), url_segment(name)), csrf, &db_quota, error_for(name)))
                }
                h2 { "Audit trail" }
                (crate::activity::audit_table(&audit))
            },
        ),
    )
}
