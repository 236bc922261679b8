//! `shoal demo --data-nodes N`: every data node a child `shoal datanode`
//! process, watched by an angel that starts it again when it dies, as NDB's
//! angel process does for its data node.
//!
//! Each node keeps its ports across restarts, so the addresses the control
//! plane and the other nodes know stay right. A port given as 0 is chosen
//! by the node itself when it first binds it (never picked beforehand and
//! left free, for another socket of the machine to take before the node
//! binds it), and the angel keeps the one its listening line names.
//! A node that dies of itself within `QUICK_DEATH` of being started
//! `GIVE_UP_AFTER` times in a row is not started again: something is wrong
//! that a restart does not mend. A node killed from outside (SIGKILL: an
//! operator, a test, the kernel's out-of-memory killer) did not fail of
//! itself, and is always started again, however often.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::Notify;

/// How long the angel waits before it starts a dead node again.
const RESTART_AFTER: Duration = Duration::from_secs(1);
/// A node that dies sooner than this after its start died starting.
const QUICK_DEATH: Duration = Duration::from_secs(10);
/// Deaths while starting, in a row, after which the angel gives up.
const GIVE_UP_AFTER: u32 = 3;
/// How long a node has to stop after SIGTERM before it is killed.
const STOP_WITHIN: Duration = Duration::from_secs(15);

/// The flags that give a node its ports, each with the words that name
/// the port in the line the node prints when it listens (`print_node`).
pub(crate) const PORT_FLAGS: [(&str, &str); 5] = [
    ("--internal-port", "internal API http://"),
    ("--rest-port", "REST http://"),
    ("--resp-port", "RESP "),
    ("--mysql-port", "MySQL "),
    ("--peer-port", "peer "),
];

/// How to start one data node.
#[derive(Debug, Clone)]
pub(crate) struct NodeSpec {
    pub node_id: u32,
    /// Every argument but the ports.
    pub args: Vec<String>,
    /// The port for each of `PORT_FLAGS`; 0 until the node has chosen it.
    pub ports: [u16; PORT_FLAGS.len()],
    /// Given through the environment, never the command line (which every
    /// user of the machine can read).
    pub cluster_secret: String,
}

/// The data nodes the angel watches.
#[derive(Debug)]
pub(crate) struct Angel {
    nodes: Vec<Arc<Watched>>,
    stopping: Arc<AtomicBool>,
    stop: Arc<Notify>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    /// Moved on each time a node has been started again.
    restarted: tokio::sync::watch::Sender<u64>,
}

#[derive(Debug)]
struct Watched {
    node_id: u32,
    /// The running process's id; 0 while none runs.
    pid: AtomicU32,
}

impl Angel {
    /// Starts every node, one after another, each once it says it listens;
    /// then watches them.
    pub(crate) async fn start(specs: Vec<NodeSpec>) -> anyhow::Result<Angel> {
        let exe = std::env::current_exe().context("finding the shoal binary")?;
        let stopping = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(Notify::new());
        let mut angel = Angel {
            nodes: Vec::new(),
            stopping: Arc::clone(&stopping),
            stop: Arc::clone(&stop),
            tasks: Vec::new(),
            restarted: tokio::sync::watch::Sender::new(0),
        };
        for mut spec in specs {
            let watched = Arc::new(Watched {
                node_id: spec.node_id,
                pid: AtomicU32::new(0),
            });
            let child = spawn(&exe, &mut spec, &watched).await?;
            angel.nodes.push(Arc::clone(&watched));
            angel.tasks.push(tokio::spawn(watch(
                exe.clone(),
                spec,
                watched,
                child,
                Arc::clone(&stopping),
                Arc::clone(&stop),
                angel.restarted.clone(),
            )));
        }
        Ok(angel)
    }

    /// Each node's id and the id of its process now (0 while restarting).
    pub(crate) fn pids(&self) -> Vec<(u32, u32)> {
        (self.nodes.iter())
            .map(|n| (n.node_id, n.pid.load(Ordering::Acquire)))
            .collect()
    }

    /// Wakes each time a node has been started again.
    pub(crate) fn restarts(&self) -> tokio::sync::watch::Receiver<u64> {
        self.restarted.subscribe()
    }

    /// Stops every node (SIGTERM, then SIGKILL after `STOP_WITHIN`) and
    /// waits until each has exited.
    pub(crate) async fn stop(self) {
        self.stopping.store(true, Ordering::Release);
        self.stop.notify_waiters();
        for task in self.tasks {
            let _ = task.await;
        }
    }
}

/// Starts node `spec` and waits until it says it listens (its line is
/// printed, as every line it prints, prefixed with its node id); a port it
/// chose is kept in `spec` for its restarts.
async fn spawn(exe: &PathBuf, spec: &mut NodeSpec, watched: &Watched) -> anyhow::Result<Child> {
    let mut command = Command::new(exe);
    // SAFETY: prctl(2) only, between fork and exec: a node whose demo dies
    // (even of SIGKILL) is sent SIGTERM, so no node outlives its demo.
    #[cfg(target_os = "linux")]
    unsafe {
        command.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            Ok(())
        });
    }
    let mut child = command
        .arg("datanode")
        .args(&spec.args)
        .args(
            PORT_FLAGS
                .iter()
                .zip(spec.ports)
                .flat_map(|((flag, _), port)| [flag.to_string(), port.to_string()]),
        )
        .env("SHOAL_CLUSTER_SECRET", &spec.cluster_secret)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        // Its own process group: a Ctrl-C at the terminal reaches the demo,
        // which stops its nodes, and not the nodes, which the angel would
        // take for dead.
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting data node {}", spec.node_id))?;
    watched
        .pid
        .store(child.id().unwrap_or(0), Ordering::Release);
    let stdout = child.stdout.take().context("the node's stdout")?;
    let mut lines = BufReader::new(stdout).lines();
    let node = spec.node_id;
    loop {
        match lines.next_line().await {
            Ok(Some(line)) => {
                println!("node {node}: {line}");
                if line.contains(" listening: ") {
                    for ((flag, named), port) in PORT_FLAGS.iter().zip(&mut spec.ports) {
                        if *port == 0 {
                            *port = port_named(&line, named).with_context(|| {
                                format!("data node {node} listens, but its line names no {flag}")
                            })?;
                        }
                    }
                    break;
                }
            }
            _ => {
                let status = child.wait().await.ok();
                anyhow::bail!("data node {node} exited before it listened ({status:?})");
            }
        }
    }
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            println!("node {node}: {line}");
        }
    });
    Ok(child)
}

/// Waits on node `spec`'s process and starts it again whenever it dies,
/// until the angel stops.
async fn watch(
    exe: PathBuf,
    mut spec: NodeSpec,
    watched: Arc<Watched>,
    mut child: Child,
    stopping: Arc<AtomicBool>,
    stop: Arc<Notify>,
    restarted: tokio::sync::watch::Sender<u64>,
) {
    let node = spec.node_id;
    let mut quick_deaths = 0;
    loop {
        let started = Instant::now();
        let stopped = stop.notified();
        tokio::pin!(stopped);
        stopped.as_mut().enable();
        if stopping.load(Ordering::Acquire) {
            terminate(&mut child, node).await;
            break;
        }
        let status = tokio::select! {
            status = child.wait() => status,
            () = &mut stopped => {
                terminate(&mut child, node).await;
                break;
            }
        };
        watched.pid.store(0, Ordering::Release);
        println!("angel: data node {node} exited ({status:?}); starting it again in 1 s");
        quick_deaths = if killed(&status) {
            quick_deaths
        } else if started.elapsed() < QUICK_DEATH {
            quick_deaths + 1
        } else {
            0
        };
        if quick_deaths >= GIVE_UP_AFTER {
            println!(
                "angel: data node {node} died {quick_deaths} times while starting; not starting it again"
            );
            return;
        }
        tokio::select! {
            () = tokio::time::sleep(RESTART_AFTER) => {}
            () = &mut stopped => break,
        }
        loop {
            match spawn(&exe, &mut spec, &watched).await {
                Ok(started) => {
                    child = started;
                    restarted.send_modify(|n| *n += 1);
                    break;
                }
                Err(e) => {
                    println!("angel: {e:#}");
                    quick_deaths += 1;
                    if quick_deaths >= GIVE_UP_AFTER || stopping.load(Ordering::Acquire) {
                        return;
                    }
                    tokio::time::sleep(RESTART_AFTER).await;
                }
            }
        }
    }
    watched.pid.store(0, Ordering::Release);
}

/// Whether the process was killed from outside (SIGKILL), not failed of
/// itself.
fn killed(status: &std::io::Result<std::process::ExitStatus>) -> bool {
    use std::os::unix::process::ExitStatusExt;
    status
        .as_ref()
        .is_ok_and(|s| s.signal() == Some(libc::SIGKILL))
}

/// SIGTERM, then SIGKILL if the node has not stopped within `STOP_WITHIN`.
async fn terminate(child: &mut Child, node: u32) {
    if let Some(pid) = child.id() {
        // SAFETY: kill(2) on the process this angel started and has not
        // yet reaped (its id cannot have been reused).
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGTERM) };
    }
    if tokio::time::timeout(STOP_WITHIN, child.wait())
        .await
        .is_err()
    {
        println!("angel: data node {node} did not stop within 15 s; killing it");
        let _ = child.kill().await;
    }
}

/// The port of the address after `named` in a node's listening line.
fn port_named(line: &str, named: &str) -> Option<u16> {
    let (_, after) = line.split_once(named)?;
    let address = after.split_whitespace().next()?;
    let port = address.rsplit_once(':')?.1.parse().ok()?;
    (port != 0).then_some(port)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listening_line_names_every_port() {
        let line = "data node 2 listening: internal API http://127.0.0.1:43241 REST http://127.0.0.1:36351 \
                    RESP 127.0.0.1:46531 MySQL [::1]:43873 peer 127.0.0.1:45463 (DataMemory 64 MiB, 1 LDM threads)";
        let ports: Vec<_> = PORT_FLAGS
            .iter()
            .map(|(_, named)| port_named(line, named))
            .collect();
        assert_eq!(
            ports,
            [
                Some(43241),
                Some(36351),
                Some(46531),
                Some(43873),
                Some(45463)
            ]
        );
        assert_eq!(
            port_named(
                "data node 2 listening: REST http://127.0.0.1:0",
                "REST http://"
            ),
            None
        );
        assert_eq!(
            port_named(
                "data node 2 listening: REST http://127.0.0.1",
                "REST http://"
            ),
            None
        );
        assert_eq!(
            port_named("data node 2 listening: RESP 127.0.0.1:1", "MySQL "),
            None
        );
    }
}
