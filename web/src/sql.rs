//! ndbinfo SQL: one SELECT over the ndbinfo tables and views of the
//! visitor's databases, with examples.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use maud::{Markup, html};
use reqwest::Method;
use serde_json::{Value, json};

use crate::Console;
use crate::http::{Asked, Visitor};
use crate::layout::html_response;

pub(crate) async fn sql_form(visitor: Visitor) -> Response {
    html_response(
        StatusCode::OK,
        sql_page(&visitor, EXAMPLES[0].1, None, None),
    )
}

pub(crate) async fn run_sql(State(console): State<Arc<Console>>, posted: Asked) -> Response {
    let sql = posted.field("sql");
    let visitor = &posted.visitor;
    let body = Some(json!({"sql": sql}));
    let answer = visitor
        .api(&console, Method::POST, "/ndbinfo/query", body)
        .await;
    if answer.status == StatusCode::OK {
        return html_response(
            StatusCode::OK,
            sql_page(visitor, &sql, Some(&answer.body), None),
        );
    }
    let again = sql_page(visitor, &sql, None, Some(&answer.message()));
    html_response(answer.status, again)
}

const EXAMPLES: [(&str, &str); 3] = [
    (
        "Memory per table",
        "SELECT * FROM ndbinfo.table_memory_usage ORDER BY in_memory_bytes DESC",
    ),
    (
        "Memory per database",
        "SELECT database_name, in_memory_bytes, free_in_memory_bytes FROM ndbinfo.database_memory_usage",
    ),
    (
        "Use against the quota",
        "SELECT database_name, in_memory_bytes, in_memory_quota, read_units, write_units, throttled_reads + throttled_writes AS throttled FROM ndbinfo.database_quota_usage",
    ),
];

fn sql_page(visitor: &Visitor, sql: &str, answer: Option<&Value>, error: Option<&str>) -> Markup {
    let csrf = &visitor.csrf;
    visitor.page(
        "ndbinfo SQL",
        html! {
            h1 { "ndbinfo SQL" }
            p { "One SELECT over the ndbinfo tables and views of your databases." }
            form.card method="post" action="/sql" {
                input type="hidden" name="csrf" value=(csrf);
                label for="sql" { "Query" }
                textarea #sql name="sql" rows="5" spellcheck="false" { (sql) }
                @if let Some(error) = error { p.error role="alert" { (error) } }
                button type="submit" { "Run" }
            }
            h2 { "Examples" }
            ul {
                @for (title, example) in EXAMPLES {
                    li { (title) ": " code { (example) } }
                }
            }
            @if let Some(answer) = answer {
                h2 { "Result" }
                table #result {
                    thead { tr { @for c in answer["columns"].as_array().into_iter().flatten() { th { (c.as_str().unwrap_or("")) } } } }
                    tbody {
                        @for row in answer["rows"].as_array().into_iter().flatten() {
                            tr { @for cell in row.as_array().into_iter().flatten() {
                                td { @match cell { Value::Null => "NULL", Value::String(s) => (s), other => (other.to_string()) } }
                            } }
                        }
                    }
                }
                p { (answer["rows"].as_array().map_or(0, Vec::len)) " rows" }
            }
        },
    )
}
