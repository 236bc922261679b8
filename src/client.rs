//! The control plane's API as the command-line tools use it: log in, call,
//! turn an error answer into an error that says what the API said.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use reqwest::{Method, StatusCode};
use serde_json::Value;

pub(crate) struct Client {
    http: reqwest::Client,
    base: String,
    /// The session's token, once logged in or signed up.
    token: Option<String>,
}

/// Longest `create_database` waits for a data node to register.
const REGISTER_GUARD: Duration = Duration::from_secs(60);

impl Client {
    /// A client of the control plane at `url` (`http://host:port`), not
    /// logged in.
    pub(crate) fn new(url: &str) -> Client {
        Client {
            http: reqwest::Client::builder()
                .pool_idle_timeout(shoal_listen::CLIENT_POOL_IDLE)
                .build()
                .expect("an HTTP client without TLS builds"),
            base: format!("{}/api/v1", url.trim_end_matches('/')),
            token: None,
        }
    }

    /// Logs in at the control plane `url`.
    pub(crate) async fn login(url: &str, email: &str, password: &str) -> anyhow::Result<Client> {
        let mut client = Client::new(url);
        client.log_in(email, password).await?;
        Ok(client)
    }

    /// Logs in; answers what the login answered (the user and its tenant).
    pub(crate) async fn log_in(&mut self, email: &str, password: &str) -> anyhow::Result<Value> {
        let body = serde_json::json!({"email": email, "password": password});
        let session = self
            .call(Method::POST, "/auth/login", Some(body))
            .await
            .context("logging in")?;
        self.use_session(&session);
        Ok(session)
    }

    /// Calls on with the session a login or sign-up answered.
    pub(crate) fn use_session(&mut self, answer: &Value) {
        self.token = answer["token"].as_str().map(str::to_owned);
    }

    /// Creates database `name`, waiting (a minute at most) while no data
    /// node is up to take it; false when it already exists.
    pub(crate) async fn create_database(&self, name: &str) -> anyhow::Result<bool> {
        let started = Instant::now();
        loop {
            let made = self
                .send(
                    Method::POST,
                    "/databases",
                    Some(serde_json::json!({"name": name})),
                )
                .await?;
            match made.status() {
                StatusCode::CONFLICT => return Ok(false),
                StatusCode::SERVICE_UNAVAILABLE if started.elapsed() < REGISTER_GUARD => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                _ => {
                    answer(made)
                        .await
                        .with_context(|| format!("creating database {name}"))?;
                    return Ok(true);
                }
            }
        }
    }

    pub(crate) async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> anyhow::Result<Value> {
        answer(self.send(method, path, body).await?).await
    }

    /// The answer to a call, whatever its status.
    pub(crate) async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> anyhow::Result<reqwest::Response> {
        let mut request = self.http.request(method, format!("{}{path}", self.base));
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        request
            .send()
            .await
            .with_context(|| format!("reaching {}", self.base))
    }
}

/// The JSON of a successful answer; an error answer as an error with the
/// API's code and message.
pub(crate) async fn answer(response: reqwest::Response) -> anyhow::Result<Value> {
    let status = response.status();
    let body: Value = response.json().await.unwrap_or(Value::Null);
    if status.is_success() {
        return Ok(body);
    }
    match (
        body["error"]["code"].as_str(),
        body["error"]["message"].as_str(),
    ) {
        (Some(code), Some(message)) => bail!("{status} {code}: {message}"),
        _ => bail!("{status}"),
    }
}

/// Where the command-line tools find the control plane.
#[derive(clap::Args)]
pub(crate) struct ControlPlane {
    /// The control plane.
    #[arg(
        long = "control-plane",
        env = "SHOAL_CONTROL_PLANE",
        default_value = "http://127.0.0.1:8080"
    )]
    url: String,
}

impl ControlPlane {
    /// Logs in to it as `email`.
    pub(crate) async fn log_in(&self, email: &str, password: &str) -> anyhow::Result<Client> {
        Client::login(&self.url, email, password).await
    }
}

/// A secret the environment variable `env` holds, or else the next line of
/// stdin.
pub(crate) fn secret(
    env: &str,
    lines: &mut impl Iterator<Item = std::io::Result<String>>,
    what: &str,
) -> anyhow::Result<String> {
    match std::env::var(env) {
        Ok(secret) => Ok(secret),
        Err(_) => read_line(lines, what),
    }
}

/// The next line of stdin, without its line end.
fn read_line(
    lines: &mut impl Iterator<Item = std::io::Result<String>>,
    what: &str,
) -> anyhow::Result<String> {
    match lines.next() {
        Some(line) => Ok(line.with_context(|| format!("reading {what} from stdin"))?),
        None => bail!("no {what}: set it in the environment or give it on stdin"),
    }
}
