//! The `shoal` binary: parses arguments and starts what they ask for.

mod admin;
mod angel;
mod bench;
mod client;
mod demo;
mod files;
mod size;
mod sql;
mod telemetry;

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use shoal_datanode::ClusterSecret;
use shoal_datanode::ControlPlaneLink;
use shoal_datanode::Durability;
use shoal_datanode::Limits;
use shoal_datanode::{DataNode, DataNodeConfig};

use crate::size::{ByteSize, Span};

/// Least redo growth that may trigger a checkpoint.
const MIN_CHECKPOINT_REDO: u64 = 1 << 20;

#[derive(Parser)]
#[command(
    name = "shoal",
    version,
    about = "Shoal: a multi-tenant, in-memory database platform"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Start the control plane and a data node with a demo tenant, database, table, rows and
    /// API key, and print how to reach them.
    Demo(DemoArgs),
    /// Start one data node.
    Datanode(NodeArgs),
    /// Start the control plane: tenants, users, databases, API keys and quotas.
    ControlPlane(ControlPlaneArgs),
    /// Operator commands against a running control plane: tenants, quotas, admins.
    Admin(admin::AdminArgs),
    /// Run an ndbinfo query (one SELECT) through the control plane.
    Sql(sql::SqlArgs),
    /// Benchmarks: keylookup, ycsb and multitenant, over REST or the Redis protocol.
    Bench(bench::BenchArgs),
}

#[derive(Args)]
struct DemoArgs {
    #[command(flatten)]
    node: NodeArgs,
    /// Data nodes to run: 1 runs it in this process; more run each as a
    /// child `shoal datanode` process (in <data-dir>/node-<id>), started
    /// again when it dies. Ports given are node 1's; node i's are 10·(i−1)
    /// higher (port 0: any free one, kept across restarts).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=16))]
    data_nodes: u32,
    /// Data nodes per node group; every database has a replica on each
    /// node of its group (--data-nodes must be a multiple of it).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=3))]
    replicas: u32,
    /// Port of the control plane's API (0: any free port).
    #[arg(long, default_value_t = 8080)]
    control_port: u16,
    #[command(flatten)]
    connections: ControlConnections,
    #[command(flatten)]
    metering: MeteringArgs,
}

#[derive(Args)]
struct ControlPlaneArgs {
    /// Directory for the control plane's files (its SQLite store by default).
    #[arg(long, default_value = "shoal-data")]
    data_dir: PathBuf,
    /// The store: `sqlite://<file>` or `postgres://user:password@host/db`
    /// [default: a SQLite file in --data-dir].
    #[arg(long, env = "SHOAL_DATABASE_URL", hide_env_values = true)]
    database_url: Option<String>,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    listen: IpAddr,
    /// Port of the REST API and the console (0: any free port).
    #[arg(long, default_value_t = 8080)]
    control_port: u16,
    /// Mark session cookies `Secure` (when clients reach the control plane over HTTPS).
    #[arg(long)]
    secure_cookies: bool,
    #[command(flatten)]
    connections: ControlConnections,
    /// The cluster secret data nodes present; by default read from (or
    /// created in) <data-dir>/cluster-secret.
    #[arg(long, env = "SHOAL_CLUSTER_SECRET", hide_env_values = true)]
    cluster_secret: Option<String>,
    /// A platform admin to make at start if there is no such account; its
    /// password is taken from SHOAL_ADMIN_PASSWORD.
    #[arg(long, env = "SHOAL_ADMIN_EMAIL")]
    admin_email: Option<String>,
    /// The quota every new tenant starts with, as a JSON quota object
    /// [default: the built-in plan, see docs/control-plane.md].
    #[arg(long, env = "SHOAL_PLAN_QUOTA")]
    plan_quota: Option<String>,
    /// Data nodes per node group: each keeps a replica of every fragment of
    /// the group's databases (1, 2 or 3).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=3))]
    replicas: u8,
    #[command(flatten)]
    metering: MeteringArgs,
}

/// How many connections the control plane's API and console hold.
#[derive(Args)]
struct ControlConnections {
    /// Most connections the control plane holds.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    control_max_connections: u64,
    /// Most connections the control plane holds from one client address.
    #[arg(long, default_value_t = shoal_listen::MAX_PER_ADDRESS as u64, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    control_max_connections_per_address: u64,
    /// Seconds a client has to send the control plane a whole request head
    /// (also between requests on a kept-alive connection); at least 6, as
    /// Shoal's own clients keep idle connections 5 s.
    #[arg(long = "control-request-head-timeout", default_value_t = shoal_listen::HEAD_TIMEOUT.as_secs(), value_parser = clap::value_parser!(u64).range(6..=3_600))]
    control_head_timeout_secs: u64,
}

impl ControlConnections {
    fn caps(&self) -> shoal_listen::Caps {
        shoal_listen::Caps {
            max_connections: self.control_max_connections as usize,
            max_per_address: self.control_max_connections_per_address as usize,
        }
    }

    fn head_timeout(&self) -> Duration {
        Duration::from_secs(self.control_head_timeout_secs)
    }
}

#[derive(Args)]
struct MeteringArgs {
    /// How often usage is sampled from the data nodes, e.g. 10s.
    #[arg(long, default_value = "10s")]
    metering_interval: Span,
    /// How long raw samples are kept.
    #[arg(long, default_value = "24h")]
    keep_raw: Span,
    /// How long per-minute rollups are kept.
    #[arg(long, default_value = "7d")]
    keep_minutes: Span,
    /// How long per-hour rollups are kept.
    #[arg(long, default_value = "90d")]
    keep_hours: Span,
}

impl MeteringArgs {
    fn retention(&self) -> shoal_metering::Retention {
        let ms = |s: &Span| s.0.as_millis() as i64;
        shoal_metering::Retention {
            raw_ms: ms(&self.keep_raw),
            minute_ms: ms(&self.keep_minutes),
            hour_ms: ms(&self.keep_hours),
        }
    }
}

impl ControlPlaneArgs {
    fn config(&self) -> anyhow::Result<shoal_control_plane::Config> {
        files::private_dir(&self.data_dir)?;
        let store_url = match &self.database_url {
            Some(url) => url.clone(),
            None => shoal_control_plane::store::default_url(&self.data_dir),
        };
        let cluster_secret = match &self.cluster_secret {
            Some(s) => ClusterSecret::new(s)
                .map_err(anyhow::Error::msg)
                .context("--cluster-secret")?,
            None => {
                let path = self.data_dir.join("cluster-secret");
                ClusterSecret::load_or_create(&path)
                    .map_err(anyhow::Error::msg)
                    .with_context(|| format!("the cluster secret in {}", path.display()))?
            }
        };
        let bootstrap_admin = match &self.admin_email {
            None => None,
            Some(email) => {
                let password = std::env::var("SHOAL_ADMIN_PASSWORD").map_err(|_| {
                    anyhow::anyhow!(
                        "--admin-email needs the admin's password in SHOAL_ADMIN_PASSWORD"
                    )
                })?;
                Some((email.clone(), password))
            }
        };
        let plan_quota = match &self.plan_quota {
            None => shoal_control_plane::quotas::default_plan(),
            Some(json) => {
                let quota: shoal_quota::Quota =
                    serde_json::from_str(json).context("--plan-quota is not a quota object")?;
                quota
                    .validate()
                    .map_err(anyhow::Error::msg)
                    .context("--plan-quota")?;
                quota
            }
        };
        Ok(shoal_control_plane::Config {
            store_url,
            listen: (self.listen, self.control_port).into(),
            secure_cookies: self.secure_cookies,
            connections: self.connections.caps(),
            head_timeout: self.connections.head_timeout(),
            cluster_secret,
            bootstrap_admin,
            plan_quota,
            metering_interval: self.metering.metering_interval.0,
            retention: self.metering.retention(),
            replicas: self.replicas,
        })
    }
}

#[derive(Args)]
struct NodeArgs {
    /// This data node's id in the cluster.
    #[arg(long, default_value_t = 1)]
    node_id: u32,
    /// DataMemory: the memory for all rows and indexes, e.g. 256M or 4G.
    #[arg(long, default_value = "512M")]
    data_memory: ByteSize,
    /// LDM worker threads [default: half the cores, rounded up].
    #[arg(long)]
    ldm_threads: Option<usize>,
    /// Longest a write waits for a row another transaction holds, in milliseconds.
    #[arg(long = "lock-wait-timeout", default_value_t = 1200, value_parser = clap::value_parser!(u64).range(1..=600_000))]
    lock_wait_timeout_ms: u64,
    /// How long an LDM worker thread polls for its next request before it
    /// sleeps, in microseconds, when its requests come that close together
    /// (RonDB's SchedulerSpinTimer); 0: never. For a node with cores of its
    /// own, e.g. 50.
    #[arg(long = "spin-us", default_value_t = shoal_datanode::DEFAULT_SPIN.as_micros() as u64, value_parser = clap::value_parser!(u64).range(0..=shoal_datanode::MAX_SPIN.as_micros() as u64))]
    spin_us: u64,
    /// Longest a SQL transaction that holds rows waits for its client's next
    /// statement before it is rolled back, in milliseconds.
    #[arg(long = "transaction-inactive-timeout", default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    transaction_inactive_timeout_ms: u64,
    /// Directory for this node's files: its redo log, checkpoints and catalog.
    #[arg(long, default_value = "shoal-data")]
    data_dir: PathBuf,
    /// When a commit is acknowledged: `sync` (once its redo is on disk) or
    /// `interval:<ms>` (at once; a crash can lose the last interval's commits).
    #[arg(long, default_value = "sync")]
    durability: Durability,
    /// Take a checkpoint this many seconds after the last one...
    #[arg(long = "checkpoint-every", default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    checkpoint_every_secs: u64,
    /// ...or once the redo log has grown this much since it, e.g. 256M.
    #[arg(long, default_value = "256M")]
    checkpoint_redo: ByteSize,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    listen: IpAddr,
    /// Port of the internal API; 0 picks a free one.
    #[arg(long, default_value_t = 4407)]
    internal_port: u16,
    /// Port of the REST data API; 0 picks a free one.
    #[arg(long, default_value_t = 4406)]
    rest_port: u16,
    /// Port of the Redis protocol; 0 picks a free one.
    #[arg(long, default_value_t = 6380)]
    resp_port: u16,
    /// Port of SQL over the MySQL protocol; 0 picks a free one.
    #[arg(long, default_value_t = 3306)]
    mysql_port: u16,
    /// Port of the node-to-node transport (replication within a node
    /// group); 0 picks a free one.
    #[arg(long, default_value_t = 4408)]
    peer_port: u16,
    /// Most connections each data API front end (REST, RESP, MySQL) holds.
    #[arg(long, default_value_t = 4096, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    max_connections: u64,
    /// Most connections each front end (REST, RESP, internal API) holds from one client address.
    #[arg(long, default_value_t = shoal_listen::MAX_PER_ADDRESS as u64, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    max_connections_per_address: u64,
    /// A data API connection idle this many seconds is closed.
    #[arg(long = "idle-timeout", default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    idle_timeout_secs: u64,
    /// Seconds a client has to send a whole request head (HTTP, also between
    /// requests on a kept-alive connection) or to authenticate (RESP).
    #[arg(long = "request-head-timeout", default_value_t = shoal_listen::HEAD_TIMEOUT.as_secs(), value_parser = clap::value_parser!(u64).range(1..=3_600))]
    head_timeout_secs: u64,
    /// Largest REST request body or RESP command, and so the largest value, e.g. 64M (at most 512M).
    #[arg(long, default_value = "64M")]
    max_request_size: ByteSize,
    /// The cluster secret; by default read from (or created in) <data-dir>/cluster-secret.
    #[arg(long, env = "SHOAL_CLUSTER_SECRET", hide_env_values = true)]
    cluster_secret: Option<String>,
    /// The control plane to register with and report to, e.g. http://10.0.0.5:8080.
    #[arg(long)]
    control_plane: Option<String>,
    /// The host the control plane and clients reach this node at
    /// [default: the --listen address].
    #[arg(long)]
    advertise_host: Option<String>,
}

impl NodeArgs {
    /// Threads of the runtime the front ends and the node's own work run
    /// on: the cores the LDM workers leave, one at least. More would only
    /// take turns on the same cores, and a task handed between them costs
    /// a wake-up: on 2 cores, one runtime thread beside the LDM worker
    /// spends 5–20% less CPU per sysbench transaction than two
    /// (docs/benchmarks.md).
    fn runtime_threads(&self) -> usize {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let ldm = self
            .ldm_threads
            .unwrap_or_else(shoal_datanode::default_ldm_threads);
        cores.saturating_sub(ldm).max(1)
    }

    fn config(&self) -> anyhow::Result<DataNodeConfig> {
        let cluster_secret = match &self.cluster_secret {
            Some(s) => Some(
                ClusterSecret::new(s)
                    .map_err(anyhow::Error::msg)
                    .context("--cluster-secret")?,
            ),
            None => None,
        };
        anyhow::ensure!(
            (1 << 10..=512 << 20).contains(&self.max_request_size.0),
            "--max-request-size must be between 1K and 512M"
        );
        anyhow::ensure!(
            self.checkpoint_redo.0 >= MIN_CHECKPOINT_REDO,
            "--checkpoint-redo must be at least {}",
            ByteSize(MIN_CHECKPOINT_REDO)
        );
        let control_plane = match &self.control_plane {
            None => None,
            Some(url) => {
                anyhow::ensure!(
                    url.starts_with("http://") && url.len() > "http://".len(),
                    "--control-plane must be an http://host:port URL"
                );
                let advertise_host = match &self.advertise_host {
                    Some(host) => host.clone(),
                    None if self.listen.is_unspecified() => anyhow::bail!(
                        "--listen {} is every address: say which one others reach this node at with --advertise-host",
                        self.listen
                    ),
                    None => self.listen.to_string(),
                };
                Some(ControlPlaneLink {
                    url: url.clone(),
                    advertise_host,
                })
            }
        };
        Ok(DataNodeConfig {
            node_id: shoal_datanode::NodeId(self.node_id),
            data_memory: self.data_memory.0,
            ldm_threads: self
                .ldm_threads
                .unwrap_or_else(shoal_datanode::default_ldm_threads),
            lock_wait_timeout: Duration::from_millis(self.lock_wait_timeout_ms),
            spin: Duration::from_micros(self.spin_us),
            transaction_inactive_timeout: Duration::from_millis(
                self.transaction_inactive_timeout_ms,
            ),
            data_dir: self.data_dir.clone(),
            durability: self.durability,
            checkpoint_every: Duration::from_secs(self.checkpoint_every_secs),
            checkpoint_redo_bytes: self.checkpoint_redo.0,
            listen: self.listen,
            internal_port: self.internal_port,
            rest_port: self.rest_port,
            resp_port: self.resp_port,
            mysql_port: self.mysql_port,
            peer_port: self.peer_port,
            api_limits: Limits {
                max_connections: self.max_connections as usize,
                max_per_address: self.max_connections_per_address as usize,
                idle_timeout: Duration::from_secs(self.idle_timeout_secs),
                head_timeout: Duration::from_secs(self.head_timeout_secs),
                max_request_bytes: self.max_request_size.0 as usize,
            },
            cluster_secret,
            control_plane,
        })
    }
}

/// mimalloc: the data node allocates and frees many small buffers per
/// request (rows, cells, packets); measured against glibc's malloc in
/// docs/benchmarks.md.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    if let Command::Datanode(args) = &cli.command {
        runtime.worker_threads(args.runtime_threads());
    }
    runtime
        .enable_all()
        .thread_stack_size(shoal_datanode::THREAD_STACK)
        .build()?
        .block_on(run(cli))
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    files::private_umask();
    // A descriptor per connection: as many as the process may have. (A
    // failure leaves the limit as it was; the servers' caps still hold.)
    let open_files = shoal_listen::raise_open_files_limit();
    let service = match &cli.command {
        Command::Demo(_) => "shoal-demo",
        Command::Datanode(_) => "shoal-datanode",
        Command::ControlPlane(_) => "shoal-control-plane",
        Command::Admin(_) | Command::Sql(_) | Command::Bench(_) => "shoal-cli",
    };
    // A benchmark's own output is its report; what its throwaway cluster
    // logs matters only when something is wrong.
    let level = match &cli.command {
        Command::Bench(_) => "warn",
        _ => "info",
    };
    let telemetry = telemetry::init(service, level)?;
    match open_files {
        Ok(limit) => tracing::debug!(limit, "open files"),
        Err(e) => tracing::warn!(error = %e, "could not raise the open-files limit"),
    }
    let result = match &cli.command {
        Command::Demo(args) => demo(args, &telemetry).await,
        Command::Datanode(args) => datanode(args, &telemetry).await,
        Command::ControlPlane(args) => control_plane(args).await,
        Command::Admin(args) => admin::run(args).await,
        Command::Sql(args) => sql::run(args).await,
        Command::Bench(args) => bench::run(args).await,
    };
    telemetry.shutdown();
    result
}

async fn datanode(args: &NodeArgs, telemetry: &telemetry::Telemetry) -> anyhow::Result<()> {
    let config = args.config()?;
    files::private_dir(&config.data_dir)?;
    let stop = stop_signal()?;
    let node = DataNode::start(config.clone()).await?;
    print_node(&node, &config);
    let metrics = telemetry::export_node_metrics(telemetry, node.engine());
    stop.await;
    drop(metrics);
    node.tc().observe_latency(None);
    println!("stopping");
    node.shutdown().await.context("stopping the data node")?;
    Ok(())
}

fn print_node(node: &DataNode, config: &DataNodeConfig) {
    println!(
        "data node {} listening: internal API http://{} REST http://{} RESP {} MySQL {} peer {} (DataMemory {}, {} LDM threads)",
        config.node_id,
        node.internal_addr(),
        node.rest_addr(),
        node.resp_addr(),
        node.mysql_addr(),
        node.peer_addr(),
        ByteSize(node.engine().data_memory().total_bytes()),
        node.engine().ldm_threads(),
    );
}

/// `shoal demo`: the control plane and a data node reporting to it, in
/// this process, on one data directory, and the demo made through the API.
async fn demo(args: &DemoArgs, telemetry: &telemetry::Telemetry) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.data_nodes.is_multiple_of(args.replicas),
        "--data-nodes ({}) must be a multiple of --replicas ({}): nodes form groups of --replicas",
        args.data_nodes,
        args.replicas
    );
    let dir = &args.node.data_dir;
    files::private_dir(dir)?;
    let mut config = args.node.config()?;
    let secret = match config.cluster_secret.clone() {
        Some(secret) => secret,
        None => {
            let path = dir.join(shoal_datanode::SECRET_FILE);
            ClusterSecret::load_or_create(&path)
                .map_err(anyhow::Error::msg)
                .with_context(|| format!("the cluster secret in {}", path.display()))?
        }
    };
    let before = demo::earlier(dir);
    // An earlier run's store without its demo.json: the passwords are lost.
    let lost = before.is_null() && dir.join(shoal_control_plane::store::SQLITE_FILE).exists();
    let admin_password = before["admin"]["password"]
        .as_str()
        .map_or_else(|| shoal_control_plane::auth::random_hex(10), str::to_owned);
    let control = shoal_control_plane::ControlPlane::start(shoal_control_plane::Config {
        store_url: shoal_control_plane::store::default_url(dir),
        listen: (args.node.listen, args.control_port).into(),
        secure_cookies: false,
        connections: args.connections.caps(),
        head_timeout: args.connections.head_timeout(),
        cluster_secret: secret.clone(),
        bootstrap_admin: Some((demo::ADMIN_EMAIL.to_owned(), admin_password.clone())),
        plan_quota: shoal_control_plane::quotas::default_plan(),
        metering_interval: args.metering.metering_interval.0,
        retention: args.metering.retention(),
        replicas: args.replicas as u8,
    })
    .await?;
    println!(
        "control plane listening: http://{} (store: SQLite)",
        control.addr
    );
    let before = if lost {
        demo::set_logins_anew(&control, dir, &admin_password).await?
    } else {
        before
    };
    if args.data_nodes > 1 {
        let stop = stop_signal()?;
        let specs = demo_nodes(args, &control, &secret)?;
        let angel = angel::Angel::start(specs).await?;
        let nodes = demo::Nodes::Children(&angel);
        let seeded = demo::run(&control, nodes, dir, &admin_password, before).await;
        if seeded.is_ok() {
            // demo.json follows the nodes the angel starts again.
            let mut restarts = angel.restarts();
            tokio::pin!(stop);
            loop {
                tokio::select! {
                    () = &mut stop => break,
                    Ok(()) = restarts.changed() => {
                        if let Err(e) = demo::note_pids(dir, &angel.pids()) {
                            println!("demo: {e:#}");
                        }
                    }
                }
            }
            println!("stopping");
        }
        angel.stop().await;
        control.stop().await.context("stopping the control plane")?;
        return seeded;
    }
    config.cluster_secret = Some(secret);
    config.control_plane = Some(ControlPlaneLink {
        url: format!("http://{}", control.addr),
        advertise_host: (args.node.advertise_host.clone())
            .unwrap_or_else(|| args.node.listen.to_string()),
    });
    let stop = stop_signal()?;
    let node = DataNode::start(config.clone()).await?;
    print_node(&node, &config);
    let metrics = telemetry::export_node_metrics(telemetry, node.engine());
    let seeded = demo::run(
        &control,
        demo::Nodes::InProcess(&node),
        dir,
        &admin_password,
        before,
    )
    .await;
    if seeded.is_ok() {
        stop.await;
        println!("stopping");
    }
    drop(metrics);
    node.tc().observe_latency(None);
    let stopped = node.shutdown().await.context("stopping the data node");
    control.stop().await.context("stopping the control plane")?;
    seeded.and(stopped)
}

/// How to start each data node of a demo cluster: node i in
/// `<data-dir>/node-<i>`, on node 1's ports plus 10·(i−1) (or free ports,
/// chosen now, for port 0).
fn demo_nodes(
    args: &DemoArgs,
    control: &shoal_control_plane::ControlPlane,
    secret: &ClusterSecret,
) -> anyhow::Result<Vec<angel::NodeSpec>> {
    let node = &args.node;
    let bases = [
        node.internal_port,
        node.rest_port,
        node.resp_port,
        node.mysql_port,
        node.peer_port,
    ];
    (1..=args.data_nodes)
        .map(|i| {
            let data_dir = node.data_dir.join(format!("node-{i}"));
            let mut argv = vec![
                "--node-id".to_owned(),
                i.to_string(),
                "--data-dir".to_owned(),
                data_dir.display().to_string(),
                "--listen".to_owned(),
                node.listen.to_string(),
                "--data-memory".to_owned(),
                node.data_memory.0.to_string(),
                "--durability".to_owned(),
                node.durability.to_string(),
                "--control-plane".to_owned(),
                format!("http://{}", control.addr),
            ];
            // Port 0: each node chooses its own when it first binds.
            let mut ports = [0; angel::PORT_FLAGS.len()];
            for (port, base) in ports.iter_mut().zip(bases) {
                if base != 0 {
                    let given = u32::from(base) + 10 * (i - 1);
                    *port = u16::try_from(given).ok().with_context(|| {
                        format!("data node {i} would listen on port {given}, past 65535")
                    })?;
                }
            }
            if let Some(host) = &node.advertise_host {
                argv.extend(["--advertise-host".to_owned(), host.clone()]);
            }
            Ok(angel::NodeSpec {
                node_id: i,
                args: argv,
                ports,
                cluster_secret: secret.expose().to_owned(),
            })
        })
        .collect()
}

async fn control_plane(args: &ControlPlaneArgs) -> anyhow::Result<()> {
    let stop = stop_signal()?;
    let control = shoal_control_plane::ControlPlane::start(args.config()?).await?;
    println!(
        "control plane listening: http://{} (store: {})",
        control.addr,
        match control.app.store.backend() {
            shoal_control_plane::store::Backend::Sqlite => "SQLite",
            shoal_control_plane::store::Backend::Postgres => "PostgreSQL",
        }
    );
    stop.await;
    println!("stopping");
    control.stop().await.context("stopping the control plane")?;
    Ok(())
}

/// Takes Ctrl-C and SIGTERM from now on, instead of dying of them: the
/// future ends at the first. Taken before the node says it listens, so that
/// a stop sent as soon as it does is a clean stop.
fn stop_signal() -> anyhow::Result<impl std::future::Future<Output = ()>> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate())?;
        let mut interrupt = signal(SignalKind::interrupt())?;
        Ok(async move {
            tokio::select! {
                _ = term.recv() => {}
                _ = interrupt.recv() => {}
            }
        })
    }
    #[cfg(not(unix))]
    Ok(async {
        let _ = tokio::signal::ctrl_c().await;
    })
}
