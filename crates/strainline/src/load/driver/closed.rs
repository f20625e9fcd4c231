//! The closed model: each connection (or HTTP/2 stream) sends its next request when
//! the last one's reply came, after the think time. Over a protocol that
//! [batches](super::super::proto::Protocol::batches) (Redis), with no think time, one
//! task per connection keeps its `--streams` units in flight ([`batches`]): the units
//! it adds go in one write, the replies that came are read at once, each unit timed
//! from its own start and recorded on its own.

use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::super::client::Conn;
use super::super::local::join;
use super::super::recorder::ErrorKind;
use super::super::request::Outgoing;
use super::{connect_within, exchange, goodbye, warm_connect, Ctx, Slot, Timing};

/// One connection of the closed model: opened before the clock starts, then `streams`
/// request loops on it (HTTP/2 streams; one for any other protocol). A stream whose
/// request fails opens a connection of its own, as a single connection does.
pub(super) async fn closed_connection(ctx: Rc<Ctx>, think: Duration, worker: u64, streams: usize) {
    let slot = ctx.slot();
    let conn = warm_connect(&ctx, &slot).await;
    if think.is_zero() && ctx.client.batches() {
        let mut slots = vec![slot];
        slots.extend((1..streams).map(|_| ctx.slot()));
        return batches(ctx, worker * streams as u64, slots, conn).await;
    }
    let others: Vec<_> = (1..streams as u64)
        .map(|k| {
            let shared = conn.as_ref().and_then(Conn::share);
            let s = ctx.slot();
            s.fd.set(shared.as_ref().map(Conn::fd));
            let id = worker * streams as u64 + k;
            tokio::task::spawn_local(closed_loop(ctx.clone(), think, id, s, shared))
        })
        .collect();
    closed_loop(ctx, think, worker * streams as u64, slot, conn).await;
    join(others).await;
}

async fn closed_loop(
    ctx: Rc<Ctx>,
    think: Duration,
    worker: u64,
    slot: Rc<Slot>,
    mut conn: Option<Conn>,
) {
    tokio::time::sleep_until(ctx.start.into()).await;
    let _running = ctx.running();
    let mut seq = worker << 40;
    loop {
        let now = Instant::now();
        if ctx.cancel.load(Ordering::Relaxed) || ctx.deadline.is_some_and(|d| now >= d) {
            break;
        }
        if let Some(t) = &ctx.tickets {
            if t.fetch_sub(1, Ordering::Relaxed) <= 0 {
                break;
            }
        }
        // Closed model: the request is sent when it is meant to be.
        let out = Outgoing::Workload(seq);
        let ok = exchange(
            &ctx,
            &slot,
            &mut conn,
            out,
            None,
            Timing {
                intended: now,
                sent_at: now,
                load: None,
            },
            None,
        )
        .await;
        seq += 1;
        if !ok && conn.is_none() {
            // Do not spin on a refusing target.
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        if !think.is_zero() {
            tokio::time::sleep(think).await;
        }
    }
    goodbye(&ctx, conn).await;
}

/// One connection's units as batches: a unit for each of `slots` in flight (each slot
/// its own unit's deadline and intended time, for the watchdog and the cut); every
/// turn writes the units added since the last and reads the replies that came, and each
/// slot whose reply came gets its next unit at once. Each unit's latency is from its
/// own start to the read that brought its reply. When the connection fails, its units
/// in flight fail with it (the first with the connection's error, the others as
/// `reset`, any past its timeout as `timeout`) and the next units open it again.
async fn batches(ctx: Rc<Ctx>, worker: u64, slots: Vec<Rc<Slot>>, mut conn: Option<Conn>) {
    tokio::time::sleep_until(ctx.start.into()).await;
    // Each slot is a client of the gauge, as a stream of its own is.
    let _running: Vec<_> = slots.iter().map(|_| ctx.running()).collect();
    for s in &slots {
        s.fd.set(conn.as_ref().map(Conn::fd));
    }
    let mut seq = worker << 40;
    let mut free: Vec<usize> = (0..slots.len()).rev().collect();
    // The units in flight, oldest first: their slots and starts.
    let mut flight: VecDeque<(usize, Instant)> = VecDeque::with_capacity(slots.len());
    let mut replies = Vec::with_capacity(slots.len());
    let mut stopped = false;
    loop {
        let now = Instant::now();
        stopped =
            stopped || ctx.cancel.load(Ordering::Relaxed) || ctx.deadline.is_some_and(|d| now >= d);
        while let (false, Some(&i)) = (stopped, free.last()) {
            if let Some(t) = &ctx.tickets {
                if t.fetch_sub(1, Ordering::Relaxed) <= 0 {
                    stopped = true;
                    break;
                }
            }
            let slot = &slots[i];
            slot.expired.set(false);
            slot.deadline.set(Some(now + ctx.timeout));
            slot.intended.set(Some((now, None)));
            if conn.as_ref().is_none_or(|c| c.is_closed()) {
                match connect_within(&ctx, slot).await {
                    Ok(c) => {
                        for s in &slots {
                            s.fd.set(Some(c.fd()));
                        }
                        conn = Some(c);
                    }
                    Err(kind) => {
                        slot.deadline.set(None);
                        slot.intended.set(None);
                        {
                            let mut rec = ctx.rec.lock().unwrap();
                            rec.sent(None);
                            rec.error(None, kind);
                        }
                        // Do not spin on a refusing target.
                        tokio::time::sleep(Duration::from_millis(1)).await;
                        break;
                    }
                }
            }
            let batch = conn.as_mut().and_then(Conn::batch);
            batch
                .expect("a protocol that batches gives its connections as batches")
                .queue(seq);
            seq += 1;
            free.pop();
            flight.push_back((i, now));
        }
        if flight.is_empty() {
            if stopped {
                break;
            }
            continue;
        }
        let batch = conn
            .as_mut()
            .and_then(Conn::batch)
            .expect("units in flight");
        replies.clear();
        let turned = batch.turn(&mut replies).await;
        let done = Instant::now();
        // One lock per turn: each unit counted with its outcome.
        let mut rec = ctx.rec.lock().unwrap();
        for reply in replies.drain(..) {
            let (i, start) = flight.pop_front().expect("a reply is a unit's in flight");
            slots[i].deadline.set(None);
            slots[i].intended.set(None);
            free.push(i);
            rec.sent(None);
            rec.response(
                None,
                reply.status,
                reply.ok,
                reply.bytes,
                done - start,
                done - start,
            );
            if reply.messages > 0 {
                rec.messages(reply.messages);
            }
            if reply.late_tail {
                rec.late_tail();
            }
        }
        if let Err(kind) = turned {
            for (k, (i, _)) in flight.drain(..).enumerate() {
                let slot = &slots[i];
                let kind = match (slot.expired.get(), k) {
                    (true, _) => ErrorKind::Timeout,
                    (false, 0) => kind,
                    (false, _) => ErrorKind::Reset,
                };
                slot.deadline.set(None);
                slot.intended.set(None);
                free.push(i);
                rec.sent(None);
                rec.error(None, kind);
            }
            for s in &slots {
                s.fd.set(None);
            }
            conn = None;
        }
    }
    goodbye(&ctx, conn).await;
}
