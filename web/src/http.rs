//! What every handler of the console shares: the visitor's session (the
//! [`Visitor`] and [`Operator`] extractors, which send anyone else to log
//! in), forms with their CSRF token checked ([`Posted`]), and the calls to
//! the control plane's API made as the visitor.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Form;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use maud::Markup;
use reqwest::Method;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use shoal_wire::api::{Me, User};
use subtle::ConstantTimeEq;

use crate::Console;
use crate::layout::{page, problem};

use shoal_wire::api::{CSRF_COOKIE, SESSION_COOKIE, cookie};

/// The visitor's session token and CSRF token, from their cookies.
pub(crate) fn session(headers: &HeaderMap) -> Option<(String, String)> {
    let values = || (headers.get_all(header::COOKIE).iter()).filter_map(|v| v.to_str().ok());
    let token = cookie(values(), SESSION_COOKIE).filter(|t| !t.is_empty())?;
    let csrf = cookie(values(), CSRF_COOKIE).unwrap_or_default();
    Some((token, csrf))
}

/// An answer of the API: its status, its body (`null` when it has none)
/// and the `Set-Cookie` values it carries.
pub(crate) struct Answer {
    pub(crate) status: StatusCode,
    pub(crate) body: Value,
    pub(crate) cookies: Vec<HeaderValue>,
}

impl Answer {
    /// What went wrong, as the API says it.
    pub(crate) fn message(&self) -> String {
        message(&self.body)
    }
}

/// Calls the API as `token` (or anonymously).
pub(crate) async fn api(
    console: &Console,
    method: Method,
    path: &str,
    token: Option<&str>,
    body: Option<Value>,
) -> Answer {
    let mut request = console
        .http
        .request(method, format!("{}{path}", console.api));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    match request.send().await {
        Ok(response) => {
            let status =
                StatusCode::from_u16(response.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
            let cookies = response
                .headers()
                .get_all(reqwest::header::SET_COOKIE)
                .iter()
                .filter_map(|v| HeaderValue::from_bytes(v.as_bytes()).ok())
                .collect();
            let body = response.json().await.unwrap_or(Value::Null);
            Answer {
                status,
                body,
                cookies,
            }
        }
        Err(e) => {
            tracing::error!(error = %e, "the console could not reach the API");
            Answer {
                status: StatusCode::BAD_GATEWAY,
                body: json!({"error": {"message": "the control plane's API did not answer"}}),
                cookies: Vec::new(),
            }
        }
    }
}

pub(crate) fn message(body: &Value) -> String {
    body["error"]["message"]
        .as_str()
        .unwrap_or("something went wrong")
        .to_owned()
}

/// The signed-in visitor: their session, its CSRF token, and who they are
/// (`GET /me`). A handler that takes one sends anyone else to log in, and a
/// suspended tenant's user to a page saying so.
pub(crate) struct Visitor {
    pub(crate) token: String,
    pub(crate) csrf: String,
    pub(crate) user: User,
}

impl FromRequestParts<Arc<Console>> for Visitor {
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut Parts,
        console: &Arc<Console>,
    ) -> Result<Self, Response> {
        Visitor::of(console, &parts.headers).await
    }
}

impl Visitor {
    async fn of(console: &Console, headers: &HeaderMap) -> Result<Visitor, Response> {
        let to_login = || Redirect::to("/login").into_response();
        let (token, csrf) = session(headers).ok_or_else(to_login)?;
        let me = api(console, Method::GET, "/me", Some(&token), None).await;
        match me.status {
            StatusCode::OK => {
                let Me { user } = serde_json::from_value(me.body).map_err(|e| {
                    tracing::error!(error = %e, "the API's /me answer did not read as a user");
                    problem(StatusCode::BAD_GATEWAY, "Something went wrong", "try again")
                })?;
                Ok(Visitor { token, csrf, user })
            }
            StatusCode::FORBIDDEN => Err(problem(me.status, "Suspended", &me.message())),
            _ => Err(to_login()),
        }
    }

    /// Calls the API as the visitor.
    pub(crate) async fn api(
        &self,
        console: &Console,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> Answer {
        api(console, method, path, Some(&self.token), body).await
    }

    /// `GET`s a path of the API as the visitor: its body.
    pub(crate) async fn get(&self, console: &Console, path: &str) -> Value {
        self.api(console, Method::GET, path, None).await.body
    }

    /// `GET`s a path of the API as the visitor, its answer read as `T`; a
    /// refusal or an answer that does not read is a page saying so.
    pub(crate) async fn read<T: DeserializeOwned>(
        &self,
        console: &Console,
        path: &str,
    ) -> Result<T, Response> {
        let answer = self.api(console, Method::GET, path, None).await;
        if answer.status != StatusCode::OK {
            return Err(problem(answer.status, "Not found", &answer.message()));
        }
        serde_json::from_value(answer.body).map_err(|e| {
            tracing::error!(%path, error = %e, "an answer of the API did not read");
            problem(StatusCode::BAD_GATEWAY, "Something went wrong", "try again")
        })
    }

    /// Whether the visitor may change anything: a reader sees no forms
    /// that write (the API would refuse them anyway).
    pub(crate) fn changes(&self) -> bool {
        self.user.role != shoal_wire::api::Role::Reader
    }

    /// A page in the frame a signed-in visitor sees.
    pub(crate) fn page(&self, title: &str, content: Markup) -> Markup {
        page(title, Some(self), content)
    }
}

/// A signed-in platform admin; anyone else is refused with a page.
pub(crate) struct Operator(pub(crate) Visitor);

impl FromRequestParts<Arc<Console>> for Operator {
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut Parts,
        console: &Arc<Console>,
    ) -> Result<Self, Response> {
        let visitor = Visitor::of(console, &parts.headers).await?;
        if !visitor.user.is_admin() {
            return Err(problem(
                StatusCode::FORBIDDEN,
                "Operators only",
                "This page is for platform admins.",
            ));
        }
        Ok(Operator(visitor))
    }
}

/// A posted form's fields; one that cannot be read is answered with a page
/// saying so.
pub(crate) struct Fields(pub(crate) HashMap<String, String>);

impl<S: Send + Sync> FromRequest<S> for Fields {
    type Rejection = Response;

    async fn from_request(request: Request, state: &S) -> Result<Fields, Response> {
        match Form::<HashMap<String, String>>::from_request(request, state).await {
            Ok(Form(fields)) => Ok(Fields(fields)),
            Err(rejection) => Err(problem(
                StatusCode::BAD_REQUEST,
                "That form could not be read",
                &rejection.body_text(),
            )),
        }
    }
}

/// A form that changes something, posted by a signed-in visitor who may
/// change things, its CSRF token checked; anyone else is sent to log in, a
/// form without the token refused, and a reader refused with a page.
pub(crate) struct Posted {
    pub(crate) visitor: Visitor,
    pub(crate) form: HashMap<String, String>,
}

impl FromRequest<Arc<Console>> for Posted {
    type Rejection = Response;

    async fn from_request(request: Request, console: &Arc<Console>) -> Result<Posted, Response> {
        let Asked { visitor, form } = Asked::from_request(request, console).await?;
        if !visitor.changes() {
            return Err(problem(
                StatusCode::FORBIDDEN,
                "Refused",
                "a reader changes nothing: ask the tenant's owner for a member's role.",
            ));
        }
        Ok(Posted { visitor, form })
    }
}

/// A form that only asks (a query), posted by a signed-in visitor, its
/// CSRF token checked.
pub(crate) struct Asked {
    pub(crate) visitor: Visitor,
    pub(crate) form: HashMap<String, String>,
}

impl FromRequest<Arc<Console>> for Asked {
    type Rejection = Response;

    async fn from_request(request: Request, console: &Arc<Console>) -> Result<Asked, Response> {
        let visitor = Visitor::of(console, request.headers()).await?;
        let Fields(form) = Fields::from_request(request, console).await?;
        if !csrf_ok(&form, &visitor.csrf) {
            return Err(refused());
        }
        Ok(Asked { visitor, form })
    }
}

impl Asked {
    pub(crate) fn field(&self, name: &str) -> String {
        field(&self.form, name)
    }
}

impl Posted {
    pub(crate) fn field(&self, name: &str) -> String {
        field(&self.form, name)
    }
}

/// The page that refuses a form without the session's security token.
pub(crate) fn refused() -> Response {
    problem(
        StatusCode::FORBIDDEN,
        "Refused",
        "The form's security token did not match your session: reload the page and try again.",
    )
}

/// The form's CSRF token must be the session's, compared in constant time.
pub(crate) fn csrf_ok(form: &HashMap<String, String>, csrf: &str) -> bool {
    let sent = form.get("csrf").map(String::as_str).unwrap_or("");
    !csrf.is_empty() && bool::from(sent.as_bytes().ct_eq(csrf.as_bytes()))
}

pub(crate) fn field(form: &HashMap<String, String>, name: &str) -> String {
    form.get(name).cloned().unwrap_or_default()
}

/// Which field an API error is about: the start of its message (`email: …`).
pub(crate) fn error_field(message: &str) -> &str {
    message.split(':').next().unwrap_or("").trim()
}

/// Sets the session cookies the API answered with, and goes to `to`.
pub(crate) fn signed_in(cookies: Vec<HeaderValue>, to: &str) -> Response {
    let mut response = Redirect::to(to).into_response();
    for cookie in cookies {
        response.headers_mut().append(header::SET_COOKIE, cookie);
    }
    response
}

/// A path segment, percent-encoded where it must be.
pub(crate) fn url_segment(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Goes to `to` if the API answered `expected`; else a page saying why
/// (titled `failed`).
pub(crate) fn done_or(answer: Answer, expected: StatusCode, to: &str, failed: &str) -> Response {
    if answer.status != expected {
        return problem(answer.status, failed, &answer.message());
    }
    Redirect::to(to).into_response()
}
