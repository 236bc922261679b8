//! A data node started with `--control-plane` reports itself there: at
//! start and every few seconds after, with where it listens and how much
//! memory it has and uses. The control plane places databases by it, and
//! brings a node that restarted (a new boot id) up to date.

use std::time::Duration;

use shoal_wire::internal::{Heartbeat, KeyUse, NodeId, route};
use tokio::sync::watch;

use crate::internal_api::ClusterSecret;
use crate::node::Engine;

/// How often the node reports itself.
pub(crate) const EVERY: Duration = Duration::from_secs(5);
/// Most keys one report names as used (the most recently used).
pub(crate) const MAX_KEYS_REPORTED: usize = 10_000;

/// Where the control plane is, and the host the node tells it to reach it at.
#[derive(Debug, Clone)]
pub struct ControlPlaneLink {
    /// `http://host:port` of the control plane.
    pub url: String,
    /// The host (name or address) others reach this node at.
    pub advertise_host: String,
}

/// What the node tells the control plane it is.
#[derive(Debug, Clone)]
pub(crate) struct Identity {
    pub node_id: NodeId,
    pub internal_port: u16,
    pub rest_port: u16,
    pub resp_port: u16,
    pub mysql_port: u16,
    pub peer_port: u16,
}

/// Reports the node every `EVERY` until `stopped`. A control plane that
/// cannot be reached is logged once, and once more when it is back.
pub(crate) async fn heartbeats(
    link: ControlPlaneLink,
    me: Identity,
    engine: Engine,
    secret: ClusterSecret,
    mut stopped: watch::Receiver<bool>,
) {
    let http = match reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(2))
        .timeout(Duration::from_secs(10))
        .pool_idle_timeout(shoal_listen::CLIENT_POOL_IDLE)
        .build()
    {
        Ok(http) => http,
        Err(e) => {
            tracing::error!(error = %e, "cannot make an HTTP client to reach the control plane");
            return;
        }
    };
    let mut boot = [0u8; 8];
    getrandom::fill(&mut boot).expect("the OS random source works");
    let boot_id: String = boot.iter().map(|b| format!("{b:02x}")).collect();
    // An IPv6 address goes in brackets in a URL.
    let host = match &link.advertise_host {
        h if h.contains(':') && !h.starts_with('[') => format!("[{h}]"),
        h => h.clone(),
    };
    let url = format!("{}{}", link.url.trim_end_matches('/'), route::HEARTBEAT);
    let mut reachable = None;
    // Keys used since this many seconds since the epoch are reported.
    let mut reported_to = 0;
    loop {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let used: Vec<_> = engine
            .api_keys()
            .used_since(reported_to, MAX_KEYS_REPORTED)
            .into_iter()
            .map(|(prefix, at)| KeyUse { prefix, at })
            .collect();
        let pool = engine.data_memory();
        let beat = Heartbeat {
            node_id: me.node_id,
            internal_url: format!("http://{host}:{}", me.internal_port),
            rest_url: format!("http://{host}:{}", me.rest_port),
            resp_addr: format!("{host}:{}", me.resp_port),
            peer_addr: format!("{host}:{}", me.peer_port),
            mysql_addr: format!("{host}:{}", me.mysql_port),
            data_memory_bytes: pool.total_bytes(),
            used_bytes: pool.used_bytes(),
            boot_id: boot_id.clone(),
            keys_used: used,
        };
        let sent = http
            .post(&url)
            .bearer_auth(secret.expose())
            .json(&beat)
            .send()
            .await
            .map_err(|e| e.to_string())
            .and_then(|r| match r.status() {
                s if s.is_success() => Ok(()),
                reqwest::StatusCode::UNAUTHORIZED => Err(
                    "it refused this node's cluster secret: give the control plane and every data node the same --cluster-secret (or SHOAL_CLUSTER_SECRET)".to_owned(),
                ),
                s => Err(format!("it answered {s}")),
            });
        if sent.is_ok() {
            // A key used in the second of this report is reported again
            // next time: nothing between is missed.
            reported_to = now;
        }
        match (&sent, reachable) {
            (Ok(()), Some(true)) | (Err(_), Some(false)) => {}
            (Ok(()), _) => {
                tracing::info!(control_plane = %link.url, "reporting to the control plane");
                reachable = Some(true);
            }
            (Err(e), _) => {
                tracing::warn!(control_plane = %link.url, error = %e, "the control plane cannot be reached; the node goes on with what it has");
                reachable = Some(false);
            }
        }
        tokio::select! {
            () = tokio::time::sleep(EVERY) => {}
            _ = stopped.wait_for(|s| *s) => return,
        }
    }
}
