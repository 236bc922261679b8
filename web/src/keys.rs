//! API keys: the list with each key's grants and last use, a new key
//! (its secret shown once), and revoking one after a confirmation page.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use maud::html;
use reqwest::Method;
use serde_json::json;
use shoal_wire::api::{ApiKeyList, DatabaseList, NewApiKey};

use crate::Console;
use crate::format;
use crate::http::{Posted, Visitor, done_or, url_segment};
use crate::layout::{Confirm, confirm, html_response};

pub(crate) async fn keys(State(console): State<Arc<Console>>, visitor: Visitor) -> Response {
    keys_page(&console, &visitor, None, None).await
}

pub(crate) async fn create_key(State(console): State<Arc<Console>>, posted: Posted) -> Response {
    let body = json!({
        "name": posted.field("name"),
        "grants": [{"database": posted.field("database"), "role": posted.field("role")}],
    });
    let visitor = &posted.visitor;
    let answer = visitor
        .api(&console, Method::POST, "/api-keys", Some(body))
        .await;
    if answer.status == StatusCode::CREATED {
        match serde_json::from_value::<NewApiKey>(answer.body) {
            Ok(made) => return keys_page(&console, visitor, Some(&made), None).await,
            Err(e) => tracing::error!(error = %e, "a new key's answer did not read"),
        }
        return keys_page(
            &console,
            visitor,
            None,
            Some("the key was made but its answer did not read: revoke it and make another"),
        )
        .await;
    }
    keys_page(&console, visitor, None, Some(&answer.message())).await
}

pub(crate) async fn confirm_revoke(visitor: Visitor, Path(id): Path<String>) -> Response {
    confirm(
        &visitor,
        Confirm {
            title: "Revoke key",
            question: html! { "Revoke key " code { (id) } "?" },
            warning: "Applications using it are refused from their next request. This cannot be undone.",
            action: format!("/keys/{}/revoke", url_segment(&id)),
            button: "Revoke".into(),
            cancel: "/keys".into(),
        },
    )
}

pub(crate) async fn revoke(
    State(console): State<Arc<Console>>,
    Path(id): Path<String>,
    Posted { visitor, .. }: Posted,
) -> Response {
    let path = format!("/api-keys/{}", url_segment(&id));
    let answer = visitor.api(&console, Method::DELETE, &path, None).await;
    done_or(answer, StatusCode::NO_CONTENT, "/keys", "Not revoked")
}

/// The visitor's keys and the form for a new one; `made` is a key just
/// made, shown this once.
async fn keys_page(
    console: &Console,
    visitor: &Visitor,
    made: Option<&NewApiKey>,
    error: Option<&str>,
) -> Response {
    let (keys, dbs) = match (
        visitor.read::<ApiKeyList>(console, "/api-keys").await,
        visitor.read::<DatabaseList>(console, "/databases").await,
    ) {
        (Ok(keys), Ok(dbs)) => (keys.keys, dbs.databases),
        (Err(page), _) | (_, Err(page)) => return page,
    };
    let csrf = &visitor.csrf;
    let status = if error.is_some() {
        StatusCode::BAD_REQUEST
    } else if made.is_some() {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    html_response(
        status,
        visitor.page(
            "API keys",
            html! {
                h1 { "API keys" }
                @if let Some(made) = made {
                    section.secret role="status" {
                        h2 { "Your new key" }
                        p.warning { "Copy it now: it is shown only this once, and Shoal keeps only a hash of it." }
                        code #new-key { (made.key) }
                        " " button type="button" #copy-key { "Copy" }
                        script { (maud::PreEscaped("document.getElementById('copy-key').addEventListener('click',function(){navigator.clipboard.writeText(document.getElementById('new-key').textContent);this.textContent='Copied';});")) }
                    }
                }
                table {
                    thead { tr { th { "Name" } th { "Key" } th { "Grants" } th { "Created" } th { "Last used" } th { "" } } }
                    tbody {
                        @for k in &keys {
                            tr {
                                td { (k.name) }
                                td { code { (k.id) ".…" } }
                                td { @for g in &k.grants { (g.database) " (" (g.role.as_str()) ") " } }
                                td { (format::when(Some(k.created_at))) }
                                td { (format::when(k.last_used_at)) }
                                td {
                                    @match k.revoked_at {
                                        None if visitor.changes() => a href=(format!("/keys/{}/revoke", url_segment(&k.id))) { "Revoke" },
                                        None => "in use",
                                        Some(at) => { "revoked " (format::when(Some(at))) },
                                    }
                                }
                            }
                        }
                    }
                }
                @if visitor.changes() { form.card method="post" action="/keys" {
                    input type="hidden" name="csrf" value=(csrf);
                    h2 { "New key" }
                    label for="key_name" { "Name" }
                    input #key_name name="name" required maxlength="64" placeholder="checkout service";
                    label for="key_database" { "Database" }
                    select #key_database name="database" required {
                        @for db in &dbs {
                            option value=(db.name) { (db.name) }
                        }
                    }
                    label for="key_role" { "Role" }
                    select #key_role name="role" { option value="read_write" { "read and write" } option value="read" { "read only" } }
                    @if let Some(error) = error { p.error role="alert" { (error) } }
                    button type="submit" { "Create key" }
                } }
            },
        ),
    )
}
