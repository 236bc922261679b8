//! A tenant's own activity: the audit entries of their tenant — who
//! created, dropped or changed what, and when (a platform operator's
//! changes, such as a quota, shown as the operators'). Each API key's last
//! use is on the keys page.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use maud::{Markup, html};
use serde_json::Value;
use shoal_wire::api::AuditLog;

use crate::Console;
use crate::format;
use crate::http::Visitor;
use crate::layout::html_response;

/// `/activity`: the latest 200 changes of the visitor's tenant.
pub(crate) async fn activity(State(console): State<Arc<Console>>, visitor: Visitor) -> Response {
    let audit = match visitor.read::<AuditLog>(&console, "/audit?limit=200").await {
        Ok(audit) => audit,
        Err(page) => return page,
    };
    let content = html! {
        h1 { "Activity" }
        p { "The latest 200 changes to your databases, tables, keys, members and quotas, newest first." }
        @if audit.entries.is_empty() { p { "Nothing yet." } } @else { (audit_table(&audit)) }
    };
    html_response(StatusCode::OK, visitor.page("Activity", content))
}

/// Audit entries: when, who, what, before and after.
pub(crate) fn audit_table(audit: &AuditLog) -> Markup {
    let state = |s: &Option<Value>| {
        s.as_ref()
            .map_or_else(|| "null".to_owned(), Value::to_string)
    };
    html! {
        table.audit {
            thead { tr { th { "When" } th { "Who" } th { "What" } th { "Before" } th { "After" } } }
            tbody {
                @for e in &audit.entries {
                    tr {
                        td { (format::when(Some(e.at))) }
                        td { (e.actor.email) }
                        td { (e.action) " " (e.target) }
                        td { code { (state(&e.before)) } }
                        td { code { (state(&e.after)) } }
                    }
                }
            }
        }
    }
}
