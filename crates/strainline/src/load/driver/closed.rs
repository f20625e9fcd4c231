//! The closed model: each connection (or HTTP/2 stream) sends its next request when
//! the last one's reply came, after the think time.

use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::super::client::Conn;
use super::super::local::join;
use super::super::request::Outgoing;
use super::{exchange, goodbye, warm_connect, Ctx, Slot, Timing};

/// One connection of the closed model: opened before the clock starts, then `streams`
/// request loops on it (HTTP/2 streams; one for any other protocol). A stream whose
/// request fails opens a connection of its own, as a single connection does.
pub(super) async fn closed_connection(ctx: Rc<Ctx>, think: Duration, worker: u64, streams: usize) {
    let slot = ctx.slot();
    let conn = warm_connect(&ctx, &slot).await;
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
