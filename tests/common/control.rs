//! Driving the control plane's API from tests, on SQLite and PostgreSQL.

use reqwest::header::{HeaderMap, SET_COOKIE};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use super::{PgDatabase, Shoal};

#[derive(Debug, Clone, Copy)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// A control plane on a fresh store, and the database to drop after.
pub struct Control {
    pub shoal: Shoal,
    pub _pg: Option<PgDatabase>,
    pub http: reqwest::Client,
}

/// How a request is authenticated.
#[derive(Debug, Clone, Copy)]
pub enum Auth<'a> {
    None,
    Bearer(&'a str),
    /// The session cookie, and the CSRF header if given.
    Cookie(&'a str, Option<&'a str>),
}

/// A logged-in session as login answers it.
#[derive(Debug, Clone)]
pub struct Session {
    pub token: String,
    pub csrf: String,
    pub cookies: Vec<String>,
    pub user: Value,
}

/// The cluster secret the tests' control planes and data nodes share.
pub const CLUSTER_SECRET: &str = "a-cluster-secret-of-at-least-32-characters";

/// Longest a test waits for a cluster to converge: a guard against a
/// hang, not a timing a test relies on.
pub const GUARD: std::time::Duration = std::time::Duration::from_secs(90);

/// Polls `check` until it answers `Some`.
pub async fn eventually<T, F: Future<Output = Option<T>>>(
    what: &str,
    mut check: impl FnMut() -> F,
) -> T {
    let started = std::time::Instant::now();
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(started.elapsed() < GUARD, "never happened: {what}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// A table `orders (id BIGINT, note VARCHAR(200))` as the API takes it.
pub fn orders() -> Value {
    json!({
        "name": "orders",
        "columns": [
            {"name": "id", "type": "BIGINT", "nullable": false},
            {"name": "note", "type": "VARCHAR(200)", "nullable": true}
        ],
        "primary_key": ["id"]
    })
}

/// `POST /0.1.0/<path>` on `node`'s REST data API with `key`.
pub async fn data_call(node: &Shoal, key: &str, path: &str, body: Value) -> (StatusCode, Value) {
    let r = reqwest::Client::new()
        .post(format!("{}/0.1.0/{path}", node.rest_url))
        .header("X-API-KEY", key)
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = r.status();
    (status, r.json().await.unwrap_or(Value::Null))
}

impl Control {
    /// A small data node on `dir`, reporting to this control plane (which
    /// must have been started with `--cluster-secret CLUSTER_SECRET`), with
    /// `envs` set.
    pub fn data_node(&self, dir: &std::path::Path, envs: &[(&str, &str)]) -> Shoal {
        self.data_node_with(dir, &[], envs)
    }

    /// `data_node`, with more flags.
    pub fn data_node_with(
        &self,
        dir: &std::path::Path,
        flags: &[&str],
        envs: &[(&str, &str)],
    ) -> Shoal {
        let mut args = vec![
            "datanode",
            "--control-plane",
            &self.shoal.control_url,
            "--cluster-secret",
            CLUSTER_SECRET,
            "--data-memory",
            "64M",
            "--ldm-threads",
            "1",
        ];
        args.extend_from_slice(flags);
        Shoal::start_in_env(&args, envs, dir)
    }

    pub fn start(backend: Backend) -> Control {
        Control::start_with(backend, &[])
    }

    /// Starts it with `extra` arguments.
    pub fn start_with(backend: Backend, extra: &[&str]) -> Control {
        Control::start_env(backend, extra, &[])
    }

    /// Starts it with `extra` arguments and `envs` set.
    pub fn start_env(backend: Backend, extra: &[&str], envs: &[(&str, &str)]) -> Control {
        let pg = match backend {
            Backend::Sqlite => None,
            Backend::Postgres => Some(PgDatabase::create()),
        };
        let shoal = Shoal::control_plane(pg.as_ref().map(|db| db.url.as_str()), extra, envs);
        Control {
            shoal,
            _pg: pg,
            http: reqwest::Client::new(),
        }
    }

    pub async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        auth: Auth<'_>,
    ) -> (StatusCode, HeaderMap, Value) {
        let url = format!("{}/api/v1{path}", self.shoal.control_url);
        let mut req = self.http.request(method, url);
        if let Some(body) = body {
            req = req.json(body);
        }
        req = match auth {
            Auth::None => req,
            Auth::Bearer(token) => req.bearer_auth(token),
            Auth::Cookie(token, csrf) => {
                let req = req.header("cookie", format!("shoal_session={token}"));
                match csrf {
                    Some(csrf) => req.header("x-csrf-token", csrf),
                    None => req,
                }
            }
        };
        let response = req.send().await.unwrap();
        let status = response.status();
        let headers = response.headers().clone();
        let text = response.text().await.unwrap();
        let body = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON: {text:?}"))
        };
        (status, headers, body)
    }

    pub async fn post(&self, path: &str, body: &Value) -> (StatusCode, Value) {
        let (status, _, body) = self.call(Method::POST, path, Some(body), Auth::None).await;
        (status, body)
    }

    pub async fn signup(&self, email: &str, tenant: &str) -> Session {
        let body = json!({"email": email, "password": "a long password", "tenant_name": tenant});
        let (status, headers, body) = self
            .call(Method::POST, "/auth/signup", Some(&body), Auth::None)
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        session(&headers, body)
    }

    pub async fn login(&self, email: &str, password: &str) -> (StatusCode, HeaderMap, Value) {
        let body = json!({"email": email, "password": password});
        self.call(Method::POST, "/auth/login", Some(&body), Auth::None)
            .await
    }
}

pub fn session(headers: &HeaderMap, body: Value) -> Session {
    Session {
        token: body["token"].as_str().unwrap().to_owned(),
        csrf: body["csrf_token"].as_str().unwrap().to_owned(),
        cookies: headers
            .get_all(SET_COOKIE)
            .iter()
            .map(|v| v.to_str().unwrap().to_owned())
            .collect(),
        user: body["user"].clone(),
    }
}

pub fn code(body: &Value) -> &str {
    body["error"]["code"]
        .as_str()
        .unwrap_or_else(|| panic!("no error code in {body}"))
}

/// Runs each named test on SQLite and on PostgreSQL.
#[macro_export]
macro_rules! on_both_stores {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test]
            async fn sqlite() {
                super::$name(super::Backend::Sqlite).await
            }
            #[tokio::test]
            async fn postgres() {
                super::$name(super::Backend::Postgres).await
            }
        }
    )*};
}
