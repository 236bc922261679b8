//! The web console: pages, assets and the routes the control plane mounts
//! at `/`.
//!
//! Pages are rendered on the server (maud) from the control plane's own
//! REST API, called with the visitor's session: the console sees exactly
//! what the API lets that user see, and holds no state of its own. Forms
//! carry the session's CSRF token (double submit: it must equal the
//! `shoal_csrf` cookie), and the session cookie is SameSite=Strict.

mod format;
mod manage;
mod pages;

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
        .route("/", get(pages::dashboard))
        .route("/login", get(pages::login_form).post(pages::login))
        .route("/signup", get(pages::signup_form).post(pages::signup))
        .route("/logout", post(pages::logout))
        .route("/databases", post(pages::create_database))
        .route("/databases/{db}", get(pages::database))
        .route("/databases/{db}/tables", post(manage::create_table))
        .route(
            "/databases/{db}/tables/{table}/drop",
            get(manage::confirm_drop_table).post(manage::drop_table),
        )
        .route("/keys", get(manage::keys).post(manage::create_key))
        .route(
            "/keys/{id}/revoke",
            get(manage::confirm_revoke).post(manage::revoke),
        )
        .route("/sql", get(manage::sql_form).post(manage::run_sql))
        .route("/admin/datanodes", get(manage::datanodes))
        .route("/admin/audit", get(manage::audit))
        .route("/admin/tenants/{id}", get(manage::tenant))
        .route("/admin/tenants/{id}/quota", post(manage::set_tenant_quota))
        .route(
            "/admin/tenants/{id}/databases/{db}/quota",
            post(manage::set_database_quota),
        )
        .route("/admin/tenants/{id}/{action}", post(manage::set_status))
        .route("/assets/console.css", get(pages::stylesheet))
        .with_state(console)
}
