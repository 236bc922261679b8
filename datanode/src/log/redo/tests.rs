use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::*;
use crate::log::io_mem::{Faults, MemStorage};

fn dir() -> PathBuf {
    PathBuf::from("/node/redo")
}

fn open(fs: &MemStorage, end: Lsn, mode: Durability) -> Arc<RedoLog> {
    RedoLog::open_with(Arc::new(fs.clone()), dir(), end, mode, 1024).unwrap()
}

fn read_all(fs: &MemStorage, from: Lsn) -> (Vec<(Lsn, Vec<u8>)>, LogEnd) {
    let mut records = Vec::new();
    let end = replay(fs, &dir(), from, |lsn, payload| {
        records.push((lsn, payload.to_vec()))
    })
    .unwrap();
    (records, end)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A runtime whose thread syncs for its own tasks, as an LDM worker's does.
fn adopting_runtime(log: &Arc<RedoLog>) -> tokio::runtime::Runtime {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .on_thread_park(RedoLog::before_park)
        .build()
        .unwrap();
    rt.block_on(async { log.adopt_thread() });
    rt
}

/// A task that commits `payload` and waits for it to be durable.
fn spawn_commit(
    log: &Arc<RedoLog>,
    payload: &'static [u8],
) -> tokio::task::JoinHandle<Result<(), LogFailed>> {
    let log = Arc::clone(log);
    tokio::spawn(async move {
        let lsn = log.append(payload).unwrap();
        log.wait_durable(lsn).await
    })
}

/// Waits on a thread of its own for the log to be durable to `lsn`.
fn wait_elsewhere(log: &Arc<RedoLog>, lsn: Lsn) -> std::thread::JoinHandle<Result<(), LogFailed>> {
    let log = Arc::clone(log);
    std::thread::spawn(move || runtime().block_on(log.wait_durable(lsn)))
}

#[test]
fn records_come_back_in_order_across_segments() {
    let fs = MemStorage::default();
    let log = open(&fs, 0, Durability::Sync);
    let rt = runtime();
    let mut ends = Vec::new();
    for i in 0..100u32 {
        let payload = vec![i as u8; (i % 50) as usize * 10];
        ends.push(log.append(&payload).unwrap());
    }
    rt.block_on(log.wait_durable(*ends.last().unwrap()))
        .unwrap();
    log.close().unwrap();
    assert!(fs.list(&dir()).unwrap().len() > 3, "1 KiB segments");
    let (records, end) = read_all(&fs, 0);
    assert_eq!(records.len(), 100);
    assert_eq!(
        end,
        LogEnd {
            end: *ends.last().unwrap(),
            torn: None
        }
    );
    let mut at = 0;
    for (i, (lsn, payload)) in records.iter().enumerate() {
        assert_eq!(*lsn, at);
        assert_eq!(payload, &vec![i as u8; (i % 50) * 10]);
        at = ends[i];
    }
    // Replay from a later record starts there.
    let (later, _) = read_all(&fs, ends[49]);
    assert_eq!(later.len(), 50);
    // Old segments go once a checkpoint covers them; the rest still replays.
    let removed = remove_before(&fs, &dir(), ends[79]).unwrap();
    assert!(removed > 0);
    assert_eq!(read_all(&fs, ends[79]).0.len(), 20);
    assert!(matches!(
        replay(&fs, &dir(), 0, |_, _| {}),
        Err(RedoError::Missing { needed: 0, .. })
    ));
}

#[test]
fn many_commits_share_one_sync() {
    let fs = MemStorage::default();
    let log = RedoLog::open_with(
        Arc::new(fs.clone()),
        dir(),
        0,
        Durability::Sync,
        SEGMENT_BYTES,
    )
    .unwrap();
    let rt = runtime();
    fs.set_faults(Faults {
        hold_syncs: true,
        ..Faults::default()
    });
    let first = log.append(b"first").unwrap();
    let waiting = wait_elsewhere(&log, first);
    fs.wait_for_held_sync();
    // While the writer syncs the first record, 99 more gather.
    let mut last = 0;
    for _ in 0..99 {
        last = log.append(b"more").unwrap();
    }
    fs.release_syncs();
    waiting.join().unwrap().unwrap();
    rt.block_on(log.wait_durable(last)).unwrap();
    assert_eq!(
        fs.syncs(),
        2,
        "one sync for the first record, one for the 99 that waited"
    );
    log.close().unwrap();
}

#[test]
fn a_thread_that_adopts_the_log_syncs_once_for_all_its_waiting_tasks() {
    let fs = MemStorage::default();
    let log = open(&fs, 0, Durability::Sync);
    let rt = adopting_runtime(&log);
    rt.block_on(async {
        assert!(local::adopted(&log));
        let waits: Vec<_> = (0..20).map(|_| spawn_commit(&log, b"commit")).collect();
        for wait in waits {
            wait.await.unwrap().unwrap();
        }
    });
    assert_eq!(
        fs.syncs(),
        1,
        "the thread synced once, when all 20 tasks were waiting"
    );
    rt.block_on(async {
        // Three commits wait on this thread for a sync that fails.
        fs.set_faults(Faults {
            fail_sync: true,
            ..Faults::default()
        });
        let doomed: Vec<_> = (0..3).map(|_| spawn_commit(&log, b"doomed")).collect();
        for wait in doomed {
            let err = wait.await.unwrap().unwrap_err();
            assert!(err.to_string().contains("injected fsync failure"), "{err}");
        }
    });
    assert!(log.close().is_err());
}

#[test]
fn a_thread_that_finds_another_syncing_is_woken_to_sync_for_itself() {
    let fs = MemStorage::default();
    let log = open(&fs, 0, Durability::Sync);
    fs.set_faults(Faults {
        hold_syncs: true,
        ..Faults::default()
    });
    // Thread A syncs for its commit, and the sync is held.
    let first = {
        let log = Arc::clone(&log);
        std::thread::spawn(move || {
            let rt = adopting_runtime(&log);
            rt.block_on(async {
                let lsn = log.append(b"first").unwrap();
                log.wait_durable(lsn).await
            })
        })
    };
    fs.wait_for_held_sync();
    // Thread B's commit comes after A took what was buffered: A's sync
    // does not cover it, and B cannot sync while A does.
    let (registered, seen) = std::sync::mpsc::channel();
    let second = {
        let log = Arc::clone(&log);
        std::thread::spawn(move || {
            let rt = adopting_runtime(&log);
            rt.block_on(async {
                let lsn = log.append(b"second").unwrap();
                let mut wait = std::pin::pin!(log.wait_durable(lsn));
                let pending = std::future::poll_fn(|cx| {
                    Poll::Ready(std::future::Future::poll(wait.as_mut(), cx).is_pending())
                })
                .await;
                assert!(pending, "A's sync does not cover it");
                registered.send(()).unwrap();
                wait.await
            })
        })
    };
    seen.recv().unwrap();
    fs.release_syncs();
    first.join().unwrap().unwrap();
    second.join().unwrap().unwrap();
    assert_eq!(fs.syncs(), 2);
    log.close().unwrap();
}

#[test]
fn a_thread_too_busy_to_go_idle_has_its_commits_synced_by_the_writer() {
    let fs = MemStorage::default();
    let log = open(&fs, 0, Durability::Sync);
    let rt = adopting_runtime(&log);
    rt.block_on(async {
        let waiting = spawn_commit(&log, b"commit");
        // Always another task to run: the thread never parks, so never
        // syncs for itself.
        while !waiting.is_finished() {
            tokio::task::yield_now().await;
        }
        waiting.await.unwrap().unwrap();
    });
    log.close().unwrap();
}

#[test]
fn a_torn_tail_is_dropped_and_the_log_goes_on_from_before_it() {
    let fs = MemStorage::default();
    let rt = runtime();
    let log = open(&fs, 0, Durability::Sync);
    let acked = log.append(b"acknowledged").unwrap();
    rt.block_on(log.wait_durable(acked)).unwrap();
    fs.set_faults(Faults {
        hold_syncs: true,
        ..Faults::default()
    });
    let unsynced = log.append(b"written but never synced").unwrap();
    let waiting = wait_elsewhere(&log, unsynced);
    fs.wait_for_held_sync();
    // The power goes: 10 bytes of the second record made it, the last garbled.
    fs.crash(10);
    fs.release_syncs();
    drop(waiting);
    let (records, end) = read_all(&fs, 0);
    assert_eq!(records, vec![(0, b"acknowledged".to_vec())]);
    assert_eq!(end.end, acked);
    let (path, offset) = end.torn.clone().expect("a torn tail");
    assert_eq!(offset, acked);
    // Recovery cuts the tail off and appends after it.
    fs.truncate(&path, offset).unwrap();
    let log = open(&fs, end.end, Durability::Sync);
    let next = log.append(b"after restart").unwrap();
    rt.block_on(log.wait_durable(next)).unwrap();
    log.close().unwrap();
    let (records, end) = read_all(&fs, 0);
    assert_eq!(records.len(), 2);
    assert_eq!(records[1], (acked, b"after restart".to_vec()));
    assert_eq!(end.torn, None);
}

#[test]
fn corruption_before_the_tail_names_the_file_and_offset() {
    let fs = MemStorage::default();
    let rt = runtime();
    let log = open(&fs, 0, Durability::Sync);
    let ends: Vec<Lsn> = (0..5)
        .map(|_| log.append(b"a record of some length").unwrap())
        .collect();
    rt.block_on(log.wait_durable(ends[4])).unwrap();
    log.close().unwrap();
    let segment: PathBuf = dir().join(segment_name(0));
    fs.corrupt(&segment, ends[1] as usize + HEADER + 3);
    match replay(&fs, &dir(), 0, |_, _| {}) {
        Err(RedoError::Corrupt {
            path,
            offset,
            problem,
        }) => {
            assert_eq!((path, offset), (segment.clone(), ends[1]));
            assert!(problem.contains("checksum"), "{problem}");
        }
        other => panic!("{other:?}"),
    }
    let message = replay(&fs, &dir(), 0, |_, _| {}).unwrap_err().to_string();
    assert!(
        message.contains(&format!("{} offset {}", segment.display(), ends[1])),
        "{message}"
    );
}

#[test]
fn a_failed_sync_fails_the_commits_waiting_for_it_and_every_later_one() {
    let fs = MemStorage::default();
    let rt = runtime();
    let log = open(&fs, 0, Durability::Sync);
    let acked = log.append(b"before").unwrap();
    rt.block_on(log.wait_durable(acked)).unwrap();
    fs.set_faults(Faults {
        fail_sync: true,
        ..Faults::default()
    });
    let doomed = log.append(b"during").unwrap();
    let err = rt.block_on(log.wait_durable(doomed)).unwrap_err();
    assert!(err.to_string().contains("injected fsync failure"), "{err}");
    assert!(
        log.append(b"after").is_err(),
        "a failed log accepts nothing more"
    );
    assert!(
        rt.block_on(log.wait_durable(acked)).is_ok(),
        "what was durable stays durable"
    );
    assert!(log.close().is_err());
    fs.crash(0);
    let (records, _) = read_all(&fs, 0);
    assert_eq!(records, vec![(0, b"before".to_vec())]);
}

#[test]
fn a_full_disk_fails_the_log_and_the_short_write_is_a_torn_tail() {
    let fs = MemStorage::default();
    let rt = runtime();
    let log = open(&fs, 0, Durability::Sync);
    let acked = log.append(b"fits").unwrap();
    rt.block_on(log.wait_durable(acked)).unwrap();
    fs.set_faults(Faults {
        space_left: Some(7),
        ..Faults::default()
    });
    let doomed = log.append(b"does not fit on the disk").unwrap();
    let err = rt.block_on(log.wait_durable(doomed)).unwrap_err();
    assert!(err.to_string().contains("no space left on device"), "{err}");
    fs.set_faults(Faults::default());
    fs.crash(0);
    let (records, end) = read_all(&fs, 0);
    assert_eq!(records, vec![(0, b"fits".to_vec())]);
    assert_eq!(end.end, acked);
}

#[test]
fn interval_mode_acknowledges_at_once_and_syncs_on_close() {
    let fs = MemStorage::default();
    let rt = runtime();
    let log = open(&fs, 0, Durability::Interval(Duration::from_secs(3600)));
    let end = log.append(b"quick").unwrap();
    rt.block_on(log.wait_durable(end)).unwrap();
    log.close().unwrap();
    fs.crash(0);
    assert_eq!(read_all(&fs, 0).0.len(), 1, "close synced it");
}

#[test]
fn durability_modes_parse() {
    assert_eq!("sync".parse::<Durability>(), Ok(Durability::Sync));
    assert_eq!(
        "interval:100".parse::<Durability>(),
        Ok(Durability::Interval(Duration::from_millis(100)))
    );
    for bad in [
        "",
        "Sync",
        "interval",
        "interval:",
        "interval:0",
        "interval:60001",
        "interval:-5",
        "async",
    ] {
        assert!(bad.parse::<Durability>().is_err(), "{bad}");
    }
}

#[test]
fn a_gap_between_segments_is_an_error() {
    let fs = MemStorage::default();
    let rt = runtime();
    let log = open(&fs, 0, Durability::Sync);
    let ends: Vec<Lsn> = (0..200).map(|_| log.append(&[7; 40]).unwrap()).collect();
    rt.block_on(log.wait_durable(ends[199])).unwrap();
    log.close().unwrap();
    let segments = fs.list(&dir()).unwrap();
    fs.remove(&segments[2]).unwrap();
    assert!(matches!(
        replay(&fs, &dir(), 0, |_, _| {}),
        Err(RedoError::Gap { .. })
    ));
    let _ = Path::new("/");
}

#[test]
fn segments_are_allocated_whole_and_their_zero_tails_are_not_records() {
    let fs = MemStorage::default();
    let rt = runtime();
    let log = open(&fs, 0, Durability::Sync);
    let end = log.append(b"one record").unwrap();
    rt.block_on(log.wait_durable(end)).unwrap();
    log.close().unwrap();
    let segment = dir().join(segment_name(0));
    assert_eq!(fs.len(&segment), 1024, "allocated at its full size");
    let (records, log_end) = read_all(&fs, 0);
    assert_eq!(records, vec![(0, b"one record".to_vec())]);
    assert_eq!(log_end, LogEnd { end, torn: None });
    // Reopened, the log writes on from its end, over the zeros.
    let log = open(&fs, end, Durability::Sync);
    let next = log.append(b"two").unwrap();
    rt.block_on(log.wait_durable(next)).unwrap();
    log.close().unwrap();
    assert_eq!(read_all(&fs, 0).0.len(), 2);
    assert_eq!(fs.len(&segment), 1024);
}

/// A segment of `records` (payloads, each at the offset the one before ends
/// at), with the `hole`-th left as zeros — as when later unsynced writes
/// reach the disk before an earlier one — in `size` bytes.
fn segment_with_hole(start: Lsn, records: &[&[u8]], hole: usize, size: usize) -> Vec<u8> {
    let mut bytes = Vec::new();
    for (i, payload) in records.iter().enumerate() {
        let at = bytes.len();
        encode(start + at as u64, payload, &mut bytes);
        if i == hole {
            bytes[at..].fill(0);
        }
    }
    bytes.resize(size, 0);
    bytes
}

#[test]
fn a_hole_in_the_last_segment_ends_the_log_and_one_earlier_is_corruption() {
    let fs = MemStorage::default();
    let first = dir().join(segment_name(0));
    fs.write_atomic(
        &first,
        &segment_with_hole(0, &[b"kept", b"lost", b"after"], 1, 1024),
    )
    .unwrap();
    let (records, end) = read_all(&fs, 0);
    assert_eq!(records, vec![(0, b"kept".to_vec())]);
    let hole_at = (HEADER + 4) as u64;
    assert_eq!(end.end, hole_at);
    assert_eq!(
        end.torn,
        Some((first.clone(), hole_at)),
        "cut off on recovery"
    );

    // The same segment followed by another: its records were all synced
    // before the next segment began, so a hole in it is lost data.
    let second_start = 1024;
    fs.write_atomic(
        &dir().join(segment_name(second_start)),
        &segment_with_hole(second_start, &[b"next"], usize::MAX, 1024),
    )
    .unwrap();
    match replay(&fs, &dir(), 0, |_, _| {}) {
        Err(RedoError::Corrupt { path, offset, .. }) => {
            assert_eq!((path, offset), (first, hole_at));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_real_file_system_keeps_the_log_in_allocated_segments() {
    let data = tempfile::tempdir().unwrap();
    let fs: Arc<dyn Storage> = Arc::new(crate::log::io::FileSystem);
    let dir = data.path().join("redo");
    let rt = runtime();
    let log = RedoLog::open_with(Arc::clone(&fs), dir.clone(), 0, Durability::Sync, 4096).unwrap();
    let ends: Vec<Lsn> = (0..100u8).map(|i| log.append(&[i; 100]).unwrap()).collect();
    rt.block_on(log.wait_durable(ends[99])).unwrap();
    log.close().unwrap();
    let segments = fs.list(&dir).unwrap();
    assert!(segments.len() > 2);
    for segment in &segments {
        assert!(std::fs::metadata(segment).unwrap().len() >= 4096);
    }
    let mut seen = Vec::new();
    let end = replay(&*fs, &dir, 0, |lsn, payload| seen.push((lsn, payload[0]))).unwrap();
    assert_eq!(
        end,
        LogEnd {
            end: ends[99],
            torn: None
        }
    );
    assert_eq!(seen.len(), 100);
    assert!(seen.iter().enumerate().all(|(i, (_, b))| *b == i as u8));
}
