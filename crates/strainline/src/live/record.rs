//! A running run's figures, written to the store every second (its `live` table), so
//! that `strainline serve` shows a run in progress that it learns of through the store
//! alone — no port to open, no option to remember. Fed by the same calls as the
//! terminal view; the rows go through a bounded channel to a writer thread with its own
//! connection, so a store that is busy never holds up the load (a row that does not
//! fit is dropped, never waited for).

use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::measure::Sample;
use crate::store::{LiveSecond, Location, Store};

/// Rows waiting for the writer, at most.
const BACKLOG: usize = 600;

struct Writer {
    tx: SyncSender<LiveSecond>,
    start: Instant,
    case: String,
    last_sample: Option<Instant>,
}

fn writer() -> &'static Mutex<Option<Writer>> {
    static W: OnceLock<Mutex<Option<Writer>>> = OnceLock::new();
    W.get_or_init(|| Mutex::new(None))
}

/// Recording while it lives; dropping it writes what is queued and stops.
pub struct Recording {
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Starts writing run `run_id`'s seconds to the store at `location`.
pub fn start(location: &Location, run_id: i64) -> Recording {
    let (tx, rx) = sync_channel(BACKLOG);
    let location = location.clone();
    let thread = std::thread::Builder::new()
        .name("live-record".into())
        .spawn(move || write_all(&location, run_id, &rx))
        .ok();
    *writer().lock().unwrap() = Some(Writer {
        tx,
        start: Instant::now(),
        case: String::new(),
        last_sample: None,
    });
    Recording { thread }
}

fn write_all(location: &Location, run_id: i64, rx: &Receiver<LiveSecond>) {
    let mut store = None;
    while let Ok(row) = rx.recv() {
        if store.is_none() {
            store = Store::open(location).ok();
        }
        if let Some(s) = &store {
            if let Err(e) = s.append_live(run_id, &row) {
                tracing::debug!("live figures not stored: {e}");
            }
        }
    }
}

impl Drop for Recording {
    fn drop(&mut self) {
        // Dropping the sender ends the writer once the queue is written.
        *writer().lock().unwrap() = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn send(make: impl FnOnce(&mut Writer) -> Option<LiveSecond>) {
    let mut w = writer().lock().unwrap();
    if let Some(w) = w.as_mut() {
        if let Some(row) = make(w) {
            let _ = w.tx.try_send(row);
        }
    }
}

pub(super) fn case(name: &str) {
    send(|w| {
        w.case = name.to_string();
        None
    });
}

pub(super) fn second(s: &crate::observe::LoadSecond<'_>) {
    if s.partial {
        return;
    }
    send(|w| {
        Some(LiveSecond {
            t: w.start.elapsed().as_secs_f64(),
            case: w.case.clone(),
            offered: s.offered,
            achieved: Some(s.completed as f64),
            p99_us: Some(s.p99_us as i64),
            errors: Some(s.errors as i64),
            ..LiveSecond::default()
        })
    });
}

pub(super) fn sample(s: &Sample) {
    send(|w| {
        let now = Instant::now();
        if w.last_sample
            .is_some_and(|at| now - at < Duration::from_millis(950))
        {
            return None;
        }
        w.last_sample = Some(now);
        Some(LiveSecond {
            t: w.start.elapsed().as_secs_f64(),
            case: w.case.clone(),
            rss_bytes: Some(s.rss_bytes as i64),
            cpu_cores: Some(s.cpu_cores),
            ..LiveSecond::default()
        })
    });
}
