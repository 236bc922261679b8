//! The control plane's API as the command-line tools use it: log in, call,
//! turn an error answer into an error that says what the API said.

use anyhow::{Context, bail};
use reqwest::Method;
use serde_json::Value;

pub(crate) struct Client {
    http: reqwest::Client,
    base: String,
    token: String,
}

impl Client {
    /// Logs in at the control plane `url` (`http://host:port`).
    pub(crate) async fn login(url: &str, email: &str, password: &str) -> anyhow::Result<Client> {
        let base = format!("{}/api/v1", url.trim_end_matches('/'));
        let http = reqwest::Client::new();
        let login = http
            .post(format!("{base}/auth/login"))
            .json(&serde_json::json!({"email": email, "password": password}))
            .send()
            .await
            .with_context(|| format!("reaching {base}"))?;
        let session = answer(login).await.context("logging in")?;
        Ok(Client {
            http,
            base,
            token: session["token"].as_str().unwrap_or_default().to_owned(),
        })
    }

    /// Signs up a new tenant and its owner at the control plane `url`.
    pub(crate) async fn signup(
        url: &str,
        email: &str,
        password: &str,
        tenant: &str,
    ) -> anyhow::Result<(Client, Value)> {
        let base = format!("{}/api/v1", url.trim_end_matches('/'));
        let http = reqwest::Client::new();
        let signup = http
            .post(format!("{base}/auth/signup"))
            .json(&serde_json::json!({"email": email, "password": password, "tenant_name": tenant}))
            .send()
            .await
            .with_context(|| format!("reaching {base}"))?;
        let me = answer(signup).await.context("signing up")?;
        let token = me["token"].as_str().unwrap_or_default().to_owned();
        Ok((Client { http, base, token }, me))
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
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(&self.token);
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

/// The next line of stdin, without its line end.
pub(crate) fn read_line(
    lines: &mut impl Iterator<Item = std::io::Result<String>>,
    what: &str,
) -> anyhow::Result<String> {
    match lines.next() {
        Some(line) => Ok(line.with_context(|| format!("reading {what} from stdin"))?),
        None => bail!("no {what}: set it in the environment or give it on stdin"),
    }
}
