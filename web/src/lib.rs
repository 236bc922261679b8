//! The web console: pages, assets and the routes the control plane mounts
//! at `/`.
//!
//! Pages are rendered on the server (maud) from the control plane's own
//! REST API, called with the visitor's session: the console sees exactly
//! what the API lets that user see, and holds no state of its own. Forms
//! carry the session's CSRF token (double submit: it must equal the
//! `shoal_csrf` cookie), and the session cookie is SameSite=Strict.

//!
//! - `http`: the handler skeleton: the visitor's session (`Visitor`,
//!   `Operator`), checked forms (`Posted`), calls to the API.
//! - `layout`: the page frame, problem and confirmation pages, usage bars.
//! - `auth`, `databases`, `rows`, `connect`, `keys`, `activity`, `sql`,
//!   `operators`: the pages, by area (`rows`: a table's data; `connect`: how to reach a
//!   database, with a key).
//! - `format`: numbers and times as people read them; `chart`: usage
//!   over time as SVG charts with axes, units and their values.

mod activity;
mod auth;
mod chart;
mod connect;
mod databases;
mod format;
mod http;
mod keys;
mod layout;
mod members;
mod operators;
mod rows;
mod sql;

use std::sync::Arc;

use axum::Router;
use axum::routing::{get, post};

/// How the console reaches the API.
#[derive(Debug)]
pub struct Console {
    /// `http://host:port/api/v1` of this control plane.
    pub api: String,
    pub http: reqwest::Client,
    /// Mark the cookies it sets `Secure`.
    pub secure_cookies: bool,
}

impl Console {
    pub fn new(api: String, secure_cookies: bool) -> Console {
        Console {
            api,
            http: reqwest::Client::builder()
                .pool_idle_timeout(shoal_listen::CLIENT_POOL_IDLE)
                .build()
                .expect("an HTTP client without TLS builds"),
            secure_cookies,
        }
    }
}

/// The console's routes.
pub fn router(console: Arc<Console>) -> Router {
    Router::new()
        .route("/", get(databases::dashboard))
        .route("/login", get(auth::login_form).post(auth::login))
        .route("/signup", get(auth::signup_form).post(auth::signup))
        .route("/logout", post(auth::logout))
        .route("/databases", post(databases::create_database))
        .route("/databases/{db}", get(databases::database))
        .route(
            "/databases/{db}/connect",
            get(connect::connect).post(connect::create_key),
        )
        .route("/databases/{db}/tables", post(databases::create_table))
        .route("/databases/{db}/tables/{table}", get(rows::table))
        .route("/databases/{db}/tables/{table}/rows", post(rows::insert))
        .route(
            "/databases/{db}/tables/{table}/row",
            get(rows::row).post(rows::update),
        )
        .route(
            "/databases/{db}/tables/{table}/row/delete",
            get(rows::confirm_delete).post(rows::delete),
        )
        .route(
            "/databases/{db}/tables/{table}/drop",
            get(databases::confirm_drop_table).post(databases::drop_table),
        )
        .route("/keys", get(keys::keys).post(keys::create_key))
        .route(
            "/keys/{id}/revoke",
            get(keys::confirm_revoke).post(keys::revoke),
        )
        .route("/members", get(members::members).post(members::add))
        .route("/members/{id}/role", post(members::set_role))
        .route(
            "/members/{id}/remove",
            get(members::confirm_remove).post(members::remove),
        )
        .route("/sql", get(sql::sql_form).post(sql::run_sql))
        .route("/activity", get(activity::activity))
        .route("/admin/datanodes", get(operators::datanodes))
        .route("/admin/datanodes/{id}", get(operators::datanode))
        .route("/admin/audit", get(operators::audit))
        .route("/admin/tenants/{id}", get(operators::tenant))
        .route(
            "/admin/tenants/{id}/quota",
            post(operators::set_tenant_quota),
        )
        .route(
            "/admin/tenants/{id}/databases/{db}/quota",
            post(operators::set_database_quota),
        )
        .route("/admin/tenants/{id}/{action}", post(operators::set_status))
        .route("/assets/console.css", get(layout::stylesheet))
        .with_state(console)
}
