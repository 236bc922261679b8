//! `shoal bench --start`: a throwaway cluster in this process — the control
//! plane and one data node on free ports, in a temporary directory — with
//! tenants, databases, the `usertable` and API keys made through the control
//! plane's API, as a user would make them.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use reqwest::Method;
use serde_json::{Value, json};
use shoal_control_plane::ControlPlane;
use shoal_datanode::ClusterSecret;
use shoal_datanode::ControlPlaneLink;
use shoal_datanode::Durability;
use shoal_datanode::Limits;
use shoal_datanode::{DataNode, DataNodeConfig};

use super::client::usertable_schema;
use crate::client::Client;

const ADMIN_EMAIL: &str = "bench-admin@shoal.local";

pub(crate) struct Cluster {
    control: ControlPlane,
    node: DataNode,
    dir: PathBuf,
    admin: Client,
    pub(crate) rest_url: String,
    pub(crate) resp_addr: String,
    pub(crate) mysql_addr: String,
}

/// A tenant made for the benchmark: its database (holding `usertable`) and
/// a read-write key for it.
pub(crate) struct Tenant {
    id: String,
    pub(crate) database: String,
    pub(crate) key: String,
}

/// No limits: a benchmark measures the server, not a plan.
fn unlimited() -> Value {
    json!({
        "in_memory_bytes": null, "read_units_per_sec": null, "write_units_per_sec": null,
        "max_transaction_ops": null, "max_parallel_transactions": null,
    })
}

impl Cluster {
    pub(crate) async fn start(durability: Durability, data_memory: u64) -> anyhow::Result<Cluster> {
        let dir = std::env::temp_dir().join(format!(
            "shoal-bench-{}-{}",
            std::process::id(),
            shoal_control_plane::auth::random_hex(4)
        ));
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let secret = ClusterSecret::generate().context("making a cluster secret")?;
        let password = shoal_control_plane::auth::random_hex(12);
        let listen = std::net::IpAddr::from([127, 0, 0, 1]);
        let control = ControlPlane::start(shoal_control_plane::Config {
            store_url: shoal_control_plane::store::default_url(&dir),
            listen: (listen, 0).into(),
            secure_cookies: false,
            // Every client of a benchmark is one address.
            connections: shoal_listen::Caps {
                max_connections: 4096,
                max_per_address: 4096,
            },
            head_timeout: shoal_listen::HEAD_TIMEOUT,
            cluster_secret: secret.clone(),
            bootstrap_admin: Some((ADMIN_EMAIL.to_owned(), password.clone())),
            plan_quota: shoal_control_plane::quotas::default_plan(),
            metering_interval: Duration::from_secs(10),
            retention: shoal_metering::Retention::default(),
            replicas: 1,
        })
        .await?;
        let url = format!("http://{}", control.addr);
        let node = DataNode::start(DataNodeConfig {
            node_id: shoal_datanode::NodeId(1),
            data_memory,
            ldm_threads: shoal_datanode::default_ldm_threads(),
            lock_wait_timeout: Duration::from_millis(1200),
            spin: shoal_datanode::DEFAULT_SPIN,
            transaction_inactive_timeout: Duration::from_secs(10),
            data_dir: dir.join("node"),
            durability,
            checkpoint_every: Duration::from_secs(300),
            checkpoint_redo_bytes: 256 << 20,
            listen,
            internal_port: 0,
            rest_port: 0,
            resp_port: 0,
            mysql_port: 0,
            peer_port: 0,
            // Every client of a benchmark is one address.
            api_limits: Limits {
                max_per_address: 4096,
                ..Limits::default()
            },
            cluster_secret: Some(secret),
            control_plane: Some(ControlPlaneLink {
                url: url.clone(),
                advertise_host: listen.to_string(),
            }),
        })
        .await?;
        let admin = Client::login(&url, ADMIN_EMAIL, &password).await?;
        Ok(Cluster {
            rest_url: format!("http://{}", node.rest_addr()),
            resp_addr: node.resp_addr().to_string(),
            mysql_addr: node.mysql_addr().to_string(),
            control,
            node,
            dir,
            admin,
        })
    }

    /// Signs up tenant `name` with database `name`, the `usertable` and a
    /// key; neither the tenant nor its database has limits (`set_quota`).
    pub(crate) async fn tenant(&self, name: &str) -> anyhow::Result<Tenant> {
        self.tenant_with(name, &[usertable_schema()]).await
    }

    /// `tenant`, with `tables` instead of the `usertable`.
    pub(crate) async fn tenant_with(&self, name: &str, tables: &[Value]) -> anyhow::Result<Tenant> {
        let url = format!("http://{}", self.control.addr);
        let email = format!("{name}@bench.shoal.local");
        let password = shoal_control_plane::auth::random_hex(12);
        let mut tenant = Client::new(&url);
        let signup = json!({"email": email, "password": password, "tenant_name": name});
        let me = tenant
            .call(Method::POST, "/auth/signup", Some(signup))
            .await
            .context("signing up")?;
        tenant.use_session(&me);
        let tenant_id = me["user"]["tenant"]["id"]
            .as_str()
            .context("the new tenant's id")?;
        let path = format!("/admin/tenants/{tenant_id}/quota");
        self.admin
            .call(Method::PUT, &path, Some(unlimited()))
            .await?;
        tenant.create_database(name).await?;
        let path = format!("/databases/{name}/tables");
        for table in tables {
            tenant
                .call(Method::POST, &path, Some(table.clone()))
                .await?;
        }
        let grant = json!({"name": "bench", "grants": [{"database": name, "role": "read_write"}]});
        let made = tenant.call(Method::POST, "/api-keys", Some(grant)).await?;
        let tenant = Tenant {
            id: tenant_id.to_owned(),
            database: name.to_owned(),
            key: made["key"].as_str().context("the new key")?.to_owned(),
        };
        self.set_quota(&tenant, unlimited()).await?;
        Ok(tenant)
    }

    /// Sets the quota of the tenant's database.
    pub(crate) async fn set_quota(&self, tenant: &Tenant, quota: Value) -> anyhow::Result<()> {
        let path = format!(
            "/admin/tenants/{}/databases/{}/quota",
            tenant.id, tenant.database
        );
        self.admin.call(Method::PUT, &path, Some(quota)).await?;
        Ok(())
    }

    pub(crate) async fn stop(self) -> anyhow::Result<()> {
        let node = self.node.shutdown().await.context("stopping the data node");
        let control = self
            .control
            .stop()
            .await
            .context("stopping the control plane");
        let _ = std::fs::remove_dir_all(&self.dir);
        node.and(control)
    }
}
