//! A tenant's users: everyone sees who they are; the owner adds members
//! and readers, changes a member's role and removes one (after a
//! confirmation page).

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use maud::html;
use reqwest::Method;
use serde_json::json;
use shoal_wire::api::{MemberList, Role};

use crate::Console;
use crate::format;
use crate::http::{Posted, Visitor, done_or, url_segment};
use crate::layout::{Confirm, confirm, html_response};

/// What each role may do, as the page says it.
const ROLES: [(Role, &str); 2] = [
    (
        Role::Member,
        "member: works with every database, table, row and key",
    ),
    (Role::Reader, "reader: sees everything, changes nothing"),
];

pub(crate) async fn members(State(console): State<Arc<Console>>, visitor: Visitor) -> Response {
    members_page(&console, &visitor, None).await
}

/// `POST /members {email, password, role}` (the owner).
pub(crate) async fn add(State(console): State<Arc<Console>>, posted: Posted) -> Response {
    let body = json!({
        "email": posted.field("email").trim(),
        "password": posted.field("password"),
        "role": posted.field("role"),
    });
    let visitor = &posted.visitor;
    let answer = visitor
        .api(&console, Method::POST, "/members", Some(body))
        .await;
    if answer.status == StatusCode::CREATED {
        return Redirect::to("/members").into_response();
    }
    let refused = (answer.status, answer.message(), posted.field("email"));
    members_page(&console, visitor, Some(refused)).await
}

/// `POST /members/{id}/role {role}` (the owner).
pub(crate) async fn set_role(
    State(console): State<Arc<Console>>,
    Path(id): Path<String>,
    posted: Posted,
) -> Response {
    let path = format!("/members/{}", url_segment(&id));
    let body = json!({"role": posted.field("role")});
    let answer = (posted.visitor)
        .api(&console, Method::PATCH, &path, Some(body))
        .await;
    done_or(answer, StatusCode::OK, "/members", "Role not changed")
}

pub(crate) async fn confirm_remove(visitor: Visitor, Path(id): Path<String>) -> Response {
    confirm(
        &visitor,
        Confirm {
            title: "Remove member",
            question: html! { "Remove user " code { (id) } " from your tenant?" },
            warning: "Their sessions end at once; the keys they made keep working until revoked.",
            action: format!("/members/{}/remove", url_segment(&id)),
            button: "Remove".into(),
            cancel: "/members".into(),
        },
    )
}

pub(crate) async fn remove(
    State(console): State<Arc<Console>>,
    Path(id): Path<String>,
    Posted { visitor, .. }: Posted,
) -> Response {
    let path = format!("/members/{}", url_segment(&id));
    let answer = visitor.api(&console, Method::DELETE, &path, None).await;
    done_or(answer, StatusCode::NO_CONTENT, "/members", "Not removed")
}

/// The tenant's users; for the owner, the forms that change them.
/// `refused` is a new member the API refused: why, and the email typed.
async fn members_page(
    console: &Console,
    visitor: &Visitor,
    refused: Option<(StatusCode, String, String)>,
) -> Response {
    let members = match visitor.read::<MemberList>(console, "/members").await {
        Ok(list) => list.members,
        Err(page) => return page,
    };
    let owner = visitor.user.role == Role::Owner;
    let status = refused.as_ref().map_or(StatusCode::OK, |r| r.0);
    html_response(
        status,
        visitor.page(
            "Members",
            html! {
                h1 { "Members" }
                p { "Everyone who can log in to your tenant. Only its owner adds, changes and removes them." }
                div.scroll {
                    table #members {
                        thead { tr { th { "Email" } th { "Role" } th { "Since" } @if owner { th { span.visually-hidden { "Actions" } } } } }
                        tbody {
                            @for m in &members {
                                tr {
                                    td { (m.email) }
                                    td.role { (m.role.as_str()) }
                                    td { (format::when(Some(m.created_at))) }
                                    @if owner {
                                        td.actions {
                                            @if m.role != Role::Owner {
                                                @let to = if m.role == Role::Reader { Role::Member } else { Role::Reader };
                                                form.inline method="post" action=(format!("/members/{}/role", url_segment(&m.id))) {
                                                    input type="hidden" name="csrf" value=(visitor.csrf);
                                                    input type="hidden" name="role" value=(to.as_str());
                                                    button type="submit" { "Make " (to.as_str()) }
                                                }
                                                " "
                                                a href=(format!("/members/{}/remove", url_segment(&m.id))) { "Remove" }
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
                @if owner {
                    form.card #new-member method="post" action="/members" {
                        input type="hidden" name="csrf" value=(visitor.csrf);
                        h2 { "Add a member" }
                        label for="member_email" { "Email" }
                        input #member_email name="email" type="email" required maxlength="254"
                            value=(refused.as_ref().map_or("", |r| r.2.as_str()));
                        label for="member_password" { "First password" }
                        input #member_password name="password" type="password" required minlength="8" maxlength="256" autocomplete="new-password";
                        label for="member_role" { "Role" }
                        select #member_role name="role" {
                            @for (role, what) in ROLES { option value=(role.as_str()) { (what) } }
                        }
                        @if let Some((_, why, _)) = &refused { p.error role="alert" { (why) } }
                        button type="submit" { "Add" }
                    }
                }
            },
        ),
    )
}
