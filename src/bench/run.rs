//! Running clients: each on its own connection, back to back or on a
//! schedule, recording into its own statistics, with a progress line per
//! group of clients every few seconds.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::client::{Conn, Outcome, Target};
use super::report::{self, Recorder};
use super::workload::{FIELDS, Op, OpGen, Plan, Records};

/// How often a progress line is printed.
const PROGRESS_EVERY: Duration = Duration::from_secs(3);

/// Clients that run together on one database.
#[derive(Clone)]
pub(super) struct Group {
    pub(super) label: String,
    pub(super) target: Target,
    pub(super) plan: Plan,
    pub(super) threads: usize,
    /// Operations a second of all the group's clients together.
    pub(super) rate: Option<f64>,
    pub(super) seed: u64,
    /// The records there are (inserts add to them).
    pub(super) records: Arc<Records>,
}

/// What a client has measured since the reporter last took it.
type Window = Arc<Mutex<Recorder>>;

/// Takes what the clients `windows` measured since last taken, together.
fn take(windows: &[Window]) -> Recorder {
    let mut taken = Recorder::default();
    for w in windows {
        taken.add(&std::mem::take(
            &mut *w.lock().unwrap_or_else(|e| e.into_inner()),
        ));
    }
    taken
}

/// Runs every group's clients at once for `time` seconds, printing a
/// progress line per group every few seconds; answers each group's totals.
pub(super) async fn run_groups(
    groups: &[Group],
    time: u64,
) -> anyhow::Result<(Vec<Recorder>, Duration)> {
    let started = Instant::now();
    let deadline = started + Duration::from_secs(time);
    let mut clients = tokio::task::JoinSet::new();
    let mut windows: Vec<Vec<Window>> = Vec::new();
    for group in groups {
        let mut mine = Vec::new();
        let due = group.rate.map(|rate| pace(rate, started, deadline));
        for index in 0..group.threads {
            let w = Window::default();
            mine.push(Arc::clone(&w));
            clients.spawn(client(group.clone(), index, due.clone(), w, deadline));
        }
        windows.push(mine);
    }
    // Each group's figures so far: the windows taken for progress lines.
    let mut totals: Vec<Recorder> = groups.iter().map(|_| Recorder::default()).collect();
    let mut last = started;
    let mut ended = Ok(());
    loop {
        // The next progress line, if it comes before the end; after that,
        // only the clients' ends are awaited.
        let next = last + PROGRESS_EVERY;
        let tick = async move {
            if next < deadline {
                tokio::time::sleep_until(next.into()).await;
            } else {
                std::future::pending::<()>().await;
            }
        };
        tokio::select! {
            () = tick => {}
            done = clients.join_next() => match done {
                None => break,
                Some(Ok(Ok(()))) => continue,
                Some(Ok(Err(e))) => { ended = Err(e); clients.abort_all(); continue }
                Some(Err(e)) if e.is_cancelled() => continue,
                Some(Err(e)) => { ended = Err(anyhow::anyhow!("a client panicked: {e}")); clients.abort_all(); continue }
            },
        }
        let now = Instant::now();
        for ((group, mine), total) in groups.iter().zip(&windows).zip(&mut totals) {
            let window = take(mine);
            total.add(&window);
            let line = report::progress_line(now - started, group.threads, &window, now - last);
            if group.label.is_empty() {
                println!("{line}");
            } else {
                println!("{line} ({})", group.label);
            }
        }
        last = now;
    }
    ended?;
    let elapsed = started
        .elapsed()
        .min(Duration::from_secs(time))
        .max(Duration::from_millis(1));
    for (mine, total) in windows.iter().zip(&mut totals) {
        total.add(&take(mine));
    }
    Ok((totals, elapsed))
}

/// When each operation of a group at a fixed rate is due, from `started`
/// to `deadline`: handed out by a thread of its own, whose sleeps are
/// precise to microseconds (the runtime's timers are to milliseconds). Its
/// schedule never slips: when every client is busy, the operations due
/// wait in the queue, and their latency counts from when they were due.
type Schedule = Arc<tokio::sync::Mutex<tokio::sync::mpsc::Receiver<Instant>>>;

fn pace(rate: f64, started: Instant, deadline: Instant) -> Schedule {
    let (due, schedule) = tokio::sync::mpsc::channel(1024);
    let every = Duration::from_secs_f64(1.0 / rate);
    std::thread::Builder::new()
        .name("bench-pacer".into())
        .spawn(move || {
            let mut next = started;
            while next < deadline {
                let now = Instant::now();
                if next > now {
                    std::thread::sleep(next - now);
                }
                if due.blocking_send(next).is_err() {
                    return;
                }
                next += every;
            }
        })
        .expect("a pacer thread");
    Arc::new(tokio::sync::Mutex::new(schedule))
}

/// One client: operations until the deadline, on its own connection; as
/// the schedule says they are due, if there is one, else back to back.
async fn client(
    group: Group,
    index: usize,
    schedule: Option<Schedule>,
    window: Window,
    deadline: Instant,
) -> anyhow::Result<()> {
    // Clients are spread over the target's addresses.
    let mut at = index;
    let mut conn = reopen(&group.target, &mut at, deadline).await?;
    let seed = group
        .seed
        .wrapping_mul(0x9E37_79B9)
        .wrapping_add(index as u64);
    let mut ops = OpGen::new(group.plan.clone(), group.records.count(), seed);
    let mut value = String::new();
    loop {
        let due = match &schedule {
            Some(schedule) => match schedule.lock().await.recv().await {
                Some(due) => due,
                None => break,
            },
            None => Instant::now(),
        };
        if due >= deadline {
            break;
        }
        let op = ops.next(group.records.count().max(1));
        let kind = op.kind();
        let (rows, outcome) = match execute(&mut conn, &mut ops, &op, &group, &mut value).await {
            Ok(done) => done,
            Err(e) => {
                // The connection broke: count it, and go on with a new one
                // to the next address (the same, when there is one).
                at += 1;
                conn = reopen(&group.target, &mut at, deadline).await?;
                (1, Outcome::Failed(format!("connection: {e:#}")))
            }
        };
        let latency = due.elapsed();
        (window.lock().unwrap_or_else(|e| e.into_inner())).record(kind, rows, latency, &outcome);
    }
    Ok(())
}

/// A connection to address `at`, or the ones after it in turn while none
/// answers, until `deadline`.
async fn reopen(target: &Target, at: &mut usize, deadline: Instant) -> anyhow::Result<Conn> {
    loop {
        match Conn::open(target, *at).await {
            Ok(conn) => return Ok(conn),
            Err(e) if Instant::now() >= deadline => return Err(e),
            Err(_) => {
                *at += 1;
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        }
    }
}

/// Runs one operation: the rows it touched and how it ended.
async fn execute(
    conn: &mut Conn,
    ops: &mut OpGen,
    op: &Op,
    group: &Group,
    value: &mut String,
) -> anyhow::Result<(usize, Outcome)> {
    Ok(match op {
        Op::Read { key } => (1, conn.read(*key).await?),
        Op::Lookup { keys } => (keys.len(), conn.lookup(keys).await?),
        Op::Scan { key, len } => match conn.scan(*key, *len).await? {
            Outcome::Done { found } => (found, Outcome::Done { found }),
            refused => (0, refused),
        },
        Op::Update { key, field } => {
            ops.value(value);
            (
                1,
                conn.write(*key, &[(*field, value.as_str())], false).await?,
            )
        }
        Op::ReadModifyWrite { key, field } => match conn.read(*key).await? {
            Outcome::Done { .. } => {
                ops.value(value);
                (
                    1,
                    conn.write(*key, &[(*field, value.as_str())], false).await?,
                )
            }
            refused => (1, refused),
        },
        Op::Insert => {
            let key = group.records.claim();
            let values: Vec<String> = (0..FIELDS)
                .map(|_| {
                    ops.value(value);
                    value.clone()
                })
                .collect();
            let fields: Vec<(usize, &str)> =
                values.iter().map(String::as_str).enumerate().collect();
            let outcome = conn.write(key, &fields, true).await;
            group.records.answered(key);
            (1, outcome?)
        }
    })
}
