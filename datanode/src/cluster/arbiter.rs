//! The arbitrator of views: the control plane. A node asks it only at a
//! failure (to remove a node it finds dead) or a rejoin.

use std::time::Duration;

use shoal_wire::internal::{View, ViewChange, route};
use shoal_wire::secret::ClusterSecret;

/// How long one question to the arbitrator may take.
const TIMEOUT: Duration = Duration::from_secs(2);

/// The control plane, as the arbitrator of this node's group.
#[derive(Debug, Clone)]
pub(crate) struct Arbiter {
    http: reqwest::Client,
    url: String,
    secret: ClusterSecret,
}

impl Arbiter {
    pub(crate) fn new(url: &str, secret: ClusterSecret) -> Arbiter {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_millis(500))
            .timeout(TIMEOUT)
            .build()
            .expect("an HTTP client without TLS builds");
        Arbiter {
            http,
            url: url.trim_end_matches('/').to_owned(),
            secret,
        }
    }

    /// Group `group`'s view now.
    pub(crate) async fn view(&self, group: u32) -> Result<View, String> {
        let answer = (self.http)
            .get(format!("{}{}", self.url, route::group_view(group)))
            .bearer_auth(self.secret.expose())
            .send()
            .await
            .map_err(|e| e.to_string())?;
        if !answer.status().is_success() {
            return Err(format!("the control plane answered {}", answer.status()));
        }
        answer.json().await.map_err(|e| e.to_string())
    }

    /// Asks for the next view: the view after it and true if granted,
    /// else the view now and false (a view the asking node is not in says
    /// it lost).
    pub(crate) async fn change(
        &self,
        group: u32,
        change: &ViewChange,
    ) -> Result<(View, bool), String> {
        let answer = (self.http)
            .post(format!("{}{}", self.url, route::group_view(group)))
            .bearer_auth(self.secret.expose())
            .json(change)
            .send()
            .await
            .map_err(|e| e.to_string())?;
        let status = answer.status();
        if !(status.is_success() || status == reqwest::StatusCode::CONFLICT) {
            return Err(format!("the control plane answered {status}"));
        }
        let view = answer.json().await.map_err(|e| e.to_string())?;
        Ok((view, status.is_success()))
    }
}
