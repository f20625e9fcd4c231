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
use crate::load::recorder::{ErrorKind, Recorder};

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

/// The messages one subscriber has had, by publisher: a bit per sequence number.
#[derive(Default)]
pub struct Seen(HashMap<u64, Vec<u64>>);

impl Seen {
    /// Notes a message; false if it was seen before.
    pub fn first(&mut self, client: u64, seq: u64) -> bool {
        let bits = self.0.entry(client).or_default();
        let (word, bit) = ((seq / 64) as usize, seq % 64);
        if bits.len() <= word {
            bits.resize(word + 1, 0);
        }
        let new = bits[word] & (1 << bit) == 0;
        bits[word] |= 1 << bit;
        new
    }
}

/// Answers a packet from the broker as its QoS asks; a stamped delivery's stamp.
/// `Ok(None)`: a packet that is not a delivery, or a message without a stamp.
async fn answer(conn: &mut Conn, packet: In) -> Result<Option<Stamp>, ErrorKind> {
    match packet {
        In::Publish { qos, pkid, payload } => {
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
    pub publishers_done: AtomicBool,
    pub cancel: Arc<AtomicBool>,
    /// The run's timeout: the longest the subscribers drain.
    pub timeout: Duration,
    /// When the clock starts: a subscriber subscribed after it may have missed what was
    /// published before, which then counts as lost — the summary says how many were late.
    pub start: Instant,
}

/// One subscriber's life: subscribed (counted), then deliveries until the drain ends.
/// A subscriber that cannot subscribe is an error of its kind, and is not counted.
pub async fn run(t: Rc<Target>, index: u64, rec: Arc<Mutex<Recorder>>, control: Arc<Control>) {
    let mut conn = match subscribe(&t, index).await {
        Ok(c) => c,
        Err(kind) => {
            rec.lock().unwrap().error(None, kind);
            return;
        }
    };
    rec.lock()
        .unwrap()
        .subscribed(Instant::now() > control.start);
    let mut seen = Seen::default();
    let mut last = Instant::now();
    // A subscriber only reads: with a keep-alive it must ping, or the broker drops it
    // after 1.5 × the keep-alive.
    let ping_every = (t.keep_alive > 0).then(|| Duration::from_secs(u64::from(t.keep_alive)) / 2);
    let mut pinged = Instant::now();
    let mut done_at: Option<Instant> = None;
    const TICK: Duration = Duration::from_millis(50);
    loop {
        if control.cancel.load(Ordering::Relaxed) {
            return;
        }
        if control.publishers_done.load(Ordering::Relaxed) {
            let since = *done_at.get_or_insert_with(Instant::now);
            let now = Instant::now();
            if now - last.max(since) >= QUIET || now - since >= control.timeout {
                return;
            }
        }
        if ping_every.is_some_and(|every| pinged.elapsed() >= every) {
            if conn.send(Out::PingReq).await.is_err() {
                return;
            }
            pinged = Instant::now();
        }
        // Only the read is timed out (it is cancel-safe); an answer is always written
        // whole.
        let packet = match tokio::time::timeout(TICK, conn.packet()).await {
            Err(_) => continue,
            Ok(Err(_)) => return,
            Ok(Ok(p)) => p,
        };
        match answer(&mut conn, packet).await {
            Err(_) => return,
            Ok(None) => {}
            Ok(Some(stamp)) => {
                let now = unix_nanos(Instant::now());
                let latency = Duration::from_nanos(now.saturating_sub(stamp.intended_ns));
                let first = seen.first(stamp.client, stamp.seq);
                rec.lock().unwrap().delivery(latency, !first);
                last = Instant::now();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_seen_twice_is_a_duplicate_per_publisher() {
        let mut s = Seen::default();
        assert!(s.first(1, 0));
        assert!(s.first(1, 200));
        assert!(s.first(2, 0));
        assert!(!s.first(1, 0));
        assert!(!s.first(1, 200));
        assert!(s.first(1, 199));
    }
}
