//! Logging in, signing up and logging out. The API sets the session
//! cookies; the console passes them on.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use maud::{Markup, html};
use reqwest::Method;
use serde_json::json;

use crate::Console;
use crate::http::{Fields, api, csrf_ok, error_field, field, refused, session, signed_in};
use crate::layout::{html_response, page};

fn login_page(email: &str, error: Option<&str>) -> Markup {
    page(
        "Log in",
        None,
        html! {
            h1 { "Log in" }
            form.card method="post" action="/login" {
                label for="email" { "Email" }
                input #email type="email" name="email" value=(email) required autofocus;
                label for="password" { "Password" }
                input #password type="password" name="password" required;
                @if let Some(error) = error { p.error role="alert" { (error) } }
                button type="submit" { "Log in" }
            }
            p { "No account? " a href="/signup" { "Sign up" } }
        },
    )
}

pub(crate) async fn login_form() -> Markup {
    login_page("", None)
}

pub(crate) async fn login(State(console): State<Arc<Console>>, Fields(form): Fields) -> Response {
    let body = json!({"email": field(&form, "email"), "password": field(&form, "password")});
    let answer = api(&console, Method::POST, "/auth/login", None, Some(body)).await;
    if answer.status == StatusCode::OK {
        return signed_in(answer.cookies, "/");
    }
    let shown = match answer.status {
        StatusCode::TOO_MANY_REQUESTS | StatusCode::FORBIDDEN => answer.message(),
        _ => "Wrong email or password.".to_owned(),
    };
    let again = login_page(&field(&form, "email"), Some(&shown));
    html_response(answer.status, again)
}

fn signup_page(values: &HashMap<String, String>, error: Option<&str>) -> Markup {
    let at = error.map(error_field).unwrap_or("");
    let note = |name: &str| -> Markup {
        html! { @if at == name { p.error role="alert" { (error.unwrap_or("")) } } }
    };
    page(
        "Sign up",
        None,
        html! {
            h1 { "Sign up" }
            form.card method="post" action="/signup" {
                label for="tenant_name" { "Organisation" }
                input #tenant_name name="tenant_name" value=(field(values, "tenant_name")) required
                    pattern="[a-z][a-z0-9_-]{0,39}" title="lower-case letters, digits, - and _; starting with a letter";
                (note("tenant_name"))
                label for="email" { "Email" }
                input #email type="email" name="email" value=(field(values, "email")) required;
                (note("email"))
                label for="password" { "Password" }
                input #password type="password" name="password" minlength="8" required;
                (note("password"))
                @if !matches!(at, "tenant_name" | "email" | "password") {
                    @if let Some(error) = error { p.error role="alert" { (error) } }
                }
                button type="submit" { "Create account" }
            }
            p { "Have an account? " a href="/login" { "Log in" } }
        },
    )
}

pub(crate) async fn signup_form() -> Markup {
    signup_page(&HashMap::new(), None)
}

pub(crate) async fn signup(State(console): State<Arc<Console>>, Fields(form): Fields) -> Response {
    let body = json!({
        "email": field(&form, "email"),
        "password": field(&form, "password"),
        "tenant_name": field(&form, "tenant_name"),
    });
    let answer = api(&console, Method::POST, "/auth/signup", None, Some(body)).await;
    if answer.status == StatusCode::CREATED {
        return signed_in(answer.cookies, "/");
    }
    let error = match answer.body["error"]["code"].as_str() {
        Some("EMAIL_TAKEN") => format!("email: {}", answer.message()),
        Some("TENANT_NAME_TAKEN") => format!("tenant_name: {}", answer.message()),
        _ => answer.message(),
    };
    html_response(answer.status, signup_page(&form, Some(&error)))
}

pub(crate) async fn logout(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
    Fields(form): Fields,
) -> Response {
    let Some((token, csrf)) = session(&headers) else {
        return Redirect::to("/login").into_response();
    };
    if !csrf_ok(&form, &csrf) {
        return refused();
    }
    let answer = api(&console, Method::POST, "/auth/logout", Some(&token), None).await;
    signed_in(answer.cookies, "/login")
}
