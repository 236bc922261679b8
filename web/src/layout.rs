//! The frame every page is drawn in, and the pieces pages share: a
//! problem page, a usage bar, a confirmation page, the stylesheet.

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use maud::{DOCTYPE, Markup, html};

use crate::format;
use crate::http::Visitor;

/// A page: the frame around `content`, with the navigation of `who` if a
/// visitor is signed in.
pub(crate) fn page(title: &str, who: Option<&Visitor>, content: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · Shoal" }
                link rel="stylesheet" href="/assets/console.css";
            }
            body {
                header {
                    a.brand href="/" { "Shoal" }
                    @if let Some(visitor) = who {
                        @let user = &visitor.user;
                        nav {
                            @if user.is_admin() { a href="/" { "Tenants" } a href="/admin/datanodes" { "Data nodes" } a href="/admin/audit" { "Audit log" } }
                            @else { a href="/" { "Databases" } a href="/keys" { "API keys" } a href="/activity" { "Activity" } a href="/members" { "Members" } }
                            a href="/sql" { "SQL" }
                            span.who { (user.email) " · " (user.tenant.as_ref().map_or("operator", |t| t.name.as_str())) }
                            form method="post" action="/logout" {
                                input type="hidden" name="csrf" value=(visitor.csrf);
                                button type="submit" { "Log out" }
                            }
                        }
                    }
                }
                main { (content) }
            }
        }
    }
}

pub(crate) fn html_response(status: StatusCode, markup: Markup) -> Response {
    (status, markup).into_response()
}

/// A page saying what went wrong.
pub(crate) fn problem(status: StatusCode, title: &str, detail: &str) -> Response {
    html_response(
        status,
        page(
            title,
            None,
            html! { h1 { (title) } p.error { (detail) } p { a href="/" { "Back to the console" } } },
        ),
    )
}

/// What a confirmation page asks before something that cannot be undone.
pub(crate) struct Confirm<'a> {
    pub(crate) title: &'a str,
    pub(crate) question: Markup,
    pub(crate) warning: &'a str,
    /// Where the form posts.
    pub(crate) action: String,
    pub(crate) button: String,
    /// Where "Cancel" goes.
    pub(crate) cancel: String,
}

/// The page asking `visitor` to confirm.
pub(crate) fn confirm(visitor: &Visitor, c: Confirm<'_>) -> Response {
    html_response(
        StatusCode::OK,
        visitor.page(
            c.title,
            html! {
                h1 { (c.question) }
                p.warning { (c.warning) }
                form method="post" action=(c.action) {
                    input type="hidden" name="csrf" value=(visitor.csrf);
                    button.danger type="submit" { (c.button) }
                    " " a href=(c.cancel) { "Cancel" }
                }
            },
        ),
    )
}

/// How much of a limit is used, as a bar and in words.
pub(crate) fn bar(used: u64, limit: Option<u64>) -> Markup {
    match limit {
        Some(limit) => {
            let pct = format::percent(used, limit);
            let level = if pct >= 100 {
                "full"
            } else if pct >= 80 {
                "high"
            } else {
                "ok"
            };
            html! {
                div.bar title=(format!("{used} of {limit} bytes")) {
                    div class=(format!("fill {level}")) style=(format!("width: {pct}%")) {}
                }
                span.figure { (format::bytes(used)) " of " (format::bytes(limit)) " (" (pct) "%)" }
            }
        }
        None => html! { span.figure { (format::bytes(used)) " (no quota)" } },
    }
}

pub(crate) async fn stylesheet() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/css; charset=utf-8"),
            (header::CACHE_CONTROL, "max-age=3600"),
        ],
        include_str!("console.css"),
    )
}
