//! MQTT subscribers beside the publishers: each connects, subscribes to the filter at
//! the run's QoS before the clock starts, and then counts every delivery — its latency
//! from the publisher's intended send time (the [`Stamp`] every publish then carries),
//! and whether this subscriber had that message already (a duplicate). Loss is what is
//! missing at the end: every subscriber is expected to receive every acknowledged
//! publish (`summary`). After the publishers stop, subscribers keep reading until no
//! delivery came for [`QUIET`], at most the run's timeout.

use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::wire::{In, Out};
use super::{handshake, open, unix_nanos, Conn, Stamp, Target};
use crate::load::client::{Companions, CompanionsAsk};
use crate::load::local::{join, single_threaded};
use crate::load::recorder::{Delivered as Check, ErrorKind, Recorder};

/// How long subscribers wait without a delivery, once the publishers stopped.
pub const QUIET: Duration = Duration::from_millis(500);

/// Connects subscriber `index` and subscribes it to the target's filter.
pub async fn subscribe(t: &Target, index: u64) -> Result<Conn, ErrorKind> {
    let mut conn = open(t, index).await?;
    handshake(&mut conn, t, format!("{}-sub-{index}", super::client_id(0))).await?;
    let pkid = conn.next_pkid();
    conn.send(Out::Subscribe {
        pkid,
        filter: &t.filter,
        qos: t.qos,
    })
    .await?;
    let granted = conn
        .answer(|p| match p {
            In::SubAck { pkid: id, ok } if *id == pkid => Some(*ok),
            _ => None,
        })
        .await?;
    if granted {
        Ok(conn)
    } else {
        Err(ErrorKind::Protocol)
    }
}

/// The sequence numbers within which a subscriber tells a duplicate, per publisher:
/// the newest [`WINDOW`] (a publisher's messages come in order, but for what the broker
/// reorders). 512 bytes a publisher.
pub const WINDOW: u64 = 4096;

/// The memory all of a run's subscribers spend on telling duplicates at most; each
/// tracks `SEEN_BUDGET / subscribers / 512 B` publishers (64 at least). Nothing a
/// broker sends sizes it: a forged stamp (sequence 2⁴⁰, a new publisher each message)
/// slides a window or finds the table full, and is counted as unverified.
pub const SEEN_BUDGET: usize = 16 << 20;

/// One publisher's window: a ring of bits for the sequence numbers `base..base+WINDOW`.
struct Window {
    base: u64,
    bits: Box<[u64; (WINDOW / 64) as usize]>,
}

/// The messages one subscriber has had, by publisher, in bounded memory.
pub struct Seen {
    publishers: HashMap<u64, Window>,
    cap: usize,
}

impl Seen {
    /// A table of `cap` publishers at most.
    pub fn new(cap: usize) -> Seen {
        Seen {
            publishers: HashMap::new(),
            cap: cap.max(1),
        }
    }

    /// The table of one of `subscribers`, within [`SEEN_BUDGET`] for them all.
    pub fn for_one_of(subscribers: usize) -> Seen {
        let per = SEEN_BUDGET / subscribers.max(1) / (WINDOW as usize / 8);
        Seen::new(per.max(64))
    }

    /// Notes a message from `client` numbered `seq`.
    pub fn check(&mut self, client: u64, seq: u64) -> Check {
        if !self.publishers.contains_key(&client) && self.publishers.len() >= self.cap {
            return Check::Unverified;
        }
        let w = self.publishers.entry(client).or_insert_with(|| Window {
            base: seq.saturating_sub(WINDOW - 1),
            bits: Box::new([0; (WINDOW / 64) as usize]),
        });
        if seq < w.base {
            return Check::Unverified;
        }
        if seq - w.base >= WINDOW {
            // Slide: the positions of the numbers that leave are those of the ones
            // that come.
            let base = seq - (WINDOW - 1);
            for old in w.base..base.min(w.base + WINDOW) {
                let p = old % WINDOW;
                w.bits[(p / 64) as usize] &= !(1 << (p % 64));
            }
            w.base = base;
        }
        let p = seq % WINDOW;
        let (word, bit) = ((p / 64) as usize, p % 64);
        let new = w.bits[word] & (1 << bit) == 0;
        w.bits[word] |= 1 << bit;
        if new {
            Check::First
        } else {
            Check::Duplicate
        }
    }
}

/// Answers a packet from the broker as its QoS asks; a stamped delivery's stamp.
/// `Ok(None)`: a packet that is not a delivery, or a message without a stamp.
async fn answer(conn: &mut Conn, packet: In) -> Result<Option<Stamp>, ErrorKind> {
    match packet {
        In::Publish {
            qos, pkid, payload, ..
        } => {
            match qos {
                1 => conn.send(Out::PubAck(pkid)).await?,
                2 => conn.send(Out::PubRec(pkid)).await?,
                _ => {}
            }
            Ok(Stamp::read(&payload))
        }
        In::PubRel { pkid } => {
            conn.send(Out::PubComp(pkid)).await?;
            Ok(None)
        }
        _ => Ok(None),
    }
}

/// What the subscribers are told by the run.
pub struct Control {
    /// The publishers stopped (set once every worker is done).
    pub publishers_done: Arc<AtomicBool>,
    pub cancel: Arc<AtomicBool>,
    /// The run's timeout: the longest the subscribers drain.
    pub timeout: Duration,
    /// When the clock starts: a subscriber subscribed after it may have missed what was
    /// published before, which then counts as lost — the summary says how many were late.
    pub start: Instant,
}

impl Control {
    /// Whether a subscriber stops now: the run was cancelled, or the publishers stopped
    /// `timeout` ago (`done_at`: when this subscriber first saw them stopped).
    fn stopping(&self, done_at: &mut Option<Instant>) -> bool {
        if self.cancel.load(Ordering::Relaxed) {
            return true;
        }
        self.publishers_done.load(Ordering::Relaxed)
            && done_at.get_or_insert_with(Instant::now).elapsed() >= self.timeout
    }
}

/// Awaits `fut` unless the subscriber stops first (None): every wait of a subscriber
/// on its broker goes through here, so a broker that stops reading (a write that never
/// completes) or never answers cannot hold the run past its drain or a Ctrl-C.
async fn unless_stopped<F: std::future::Future>(
    control: &Control,
    done_at: &mut Option<Instant>,
    fut: F,
) -> Option<F::Output> {
    const TICK: Duration = Duration::from_millis(50);
    tokio::pin!(fut);
    loop {
        match tokio::time::timeout(TICK, &mut fut).await {
            Ok(v) => return Some(v),
            Err(_) if control.stopping(done_at) => return None,
            Err(_) => {}
        }
    }
}

/// One subscriber's life: subscribed (counted), then deliveries until the drain ends.
/// A subscriber that cannot subscribe is an error of its kind, and is not counted.
pub async fn run(
    t: Rc<Target>,
    index: u64,
    subscribers: usize,
    rec: Arc<Mutex<Recorder>>,
    control: Arc<Control>,
) {
    let mut done_at: Option<Instant> = None;
    let mut conn = match unless_stopped(&control, &mut done_at, subscribe(&t, index)).await {
        None => return,
        Some(Ok(c)) => c,
        Some(Err(kind)) => {
            rec.lock().unwrap().error(None, kind);
            return;
        }
    };
    rec.lock()
        .unwrap()
        .subscribed(Instant::now() > control.start);
    let mut seen = Seen::for_one_of(subscribers);
    let mut last = Instant::now();
    // A subscriber only reads: with a keep-alive it must ping, or the broker drops it
    // after 1.5 × the keep-alive.
    let ping_every = (t.keep_alive > 0).then(|| Duration::from_secs(u64::from(t.keep_alive)) / 2);
    let mut pinged = Instant::now();
    const TICK: Duration = Duration::from_millis(50);
    loop {
        if control.stopping(&mut done_at) {
            return;
        }
        if let Some(since) = done_at {
            if since.elapsed() >= QUIET && last.elapsed() >= QUIET {
                return;
            }
        }
        if ping_every.is_some_and(|every| pinged.elapsed() >= every) {
            let sent = unless_stopped(&control, &mut done_at, conn.send(Out::PingReq)).await;
            if !matches!(sent, Some(Ok(()))) {
                return;
            }
            pinged = Instant::now();
        }
        // The read is timed out (it is cancel-safe); an answer is written whole unless
        // the subscriber stops, and the connection is then dropped.
        let packet = match tokio::time::timeout(TICK, conn.packet()).await {
            Err(_) => continue,
            Ok(Err(_)) => return,
            Ok(Ok(p)) => p,
        };
        match unless_stopped(&control, &mut done_at, answer(&mut conn, packet)).await {
            None | Some(Err(_)) => return,
            Some(Ok(None)) => {}
            Some(Ok(Some(stamp))) => {
                let now = unix_nanos(Instant::now());
                let latency = Duration::from_nanos(now.saturating_sub(stamp.intended_ns));
                let check = seen.check(stamp.client, stamp.seq);
                rec.lock().unwrap().delivery(latency, check);
                last = Instant::now();
            }
        }
    }
}

/// Starts a generator's subscribers (`ask.mine`) on a thread of their own: they
/// subscribe at once (before the clock starts) and record into `ask.rec` until told
/// the publishers are done and their deliveries drained.
pub fn start(t: &Target, ask: CompanionsAsk) -> Companions {
    let units_done = Arc::new(AtomicBool::new(false));
    let control = Arc::new(Control {
        publishers_done: units_done.clone(),
        cancel: ask.cancel,
        timeout: ask.timeout,
        start: ask.start,
    });
    let (t, rec) = (t.clone(), ask.rec);
    let thread = std::thread::Builder::new()
        .name("subscribers".into())
        .spawn(move || {
            let (rt, local) = single_threaded();
            let t = Rc::new(t);
            local.block_on(&rt, async move {
                let tasks: Vec<_> = ask
                    .mine
                    .into_iter()
                    .map(|i| {
                        let all = t.subscribers as usize;
                        tokio::task::spawn_local(run(
                            t.clone(),
                            i,
                            all,
                            rec.clone(),
                            control.clone(),
                        ))
                    })
                    .collect();
                join(tasks).await;
            });
        })
        .expect("a subscribers thread");
    Companions { thread, units_done }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_seen_twice_is_a_duplicate_per_publisher() {
        let mut s = Seen::new(8);
        assert_eq!(s.check(1, 0), Check::First);
        assert_eq!(s.check(1, 200), Check::First);
        assert_eq!(s.check(2, 0), Check::First);
        assert_eq!(s.check(1, 0), Check::Duplicate);
        assert_eq!(s.check(1, 200), Check::Duplicate);
        assert_eq!(s.check(1, 199), Check::First);
    }

    #[test]
    fn forged_stamps_slide_a_window_or_find_the_table_full_and_are_not_trusted() {
        let mut s = Seen::new(2);
        for seq in 0..10_000 {
            assert_eq!(s.check(1, seq), Check::First);
        }
        // Within the window: duplicates; before it: unverified.
        assert_eq!(s.check(1, 9_999 - (WINDOW - 1)), Check::Duplicate);
        assert_eq!(s.check(1, 9_999 - WINDOW), Check::Unverified);
        // Sequence 2⁴⁰ costs no memory: the window slides and what it left is cleared.
        assert_eq!(s.check(1, 1 << 40), Check::First);
        assert_eq!(s.check(1, (1 << 40) - 1), Check::First);
        assert_eq!(s.check(1, 1 << 40), Check::Duplicate);
        assert_eq!(s.check(1, 9_999), Check::Unverified);
        // A new publisher id each message: the table holds two, the rest unverified.
        assert_eq!(s.check(2, 5), Check::First);
        for id in 3..1000 {
            assert_eq!(s.check(id, 0), Check::Unverified);
        }
        assert_eq!(s.publishers.len(), 2);
    }

    #[test]
    fn the_tables_of_a_runs_subscribers_stay_within_the_budget() {
        for subscribers in [1usize, 10, 1000, 1_000_000] {
            let cap = Seen::for_one_of(subscribers).cap;
            let bytes = cap * subscribers * (WINDOW as usize / 8);
            assert!(bytes <= SEEN_BUDGET || cap == 64, "{subscribers}: {bytes}");
        }
    }
}
