//! The open model: sends at their intended times, whatever the target does, from a
//! pool of connections per worker that grows while sends wait and shrinks when its
//! connections idle.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use super::super::client::Conn;
use super::super::recorder::ErrorKind;
use super::super::replay::Requests;
use super::super::request::{Outgoing, Rendered};
use super::super::schedule::Share;
use super::{
    exchange, fresh_connect, goodbye, thread_cpu_seconds, warm_connect, Ctx, PoolLoad, Slot, Timing,
};

/// A send waiting for a connection: its intended time, its position (or sequence
/// number), when it was queued, and its request when the schedule handed one over (a
/// streamed log's line).
pub(super) struct Waiting {
    pub(super) at: Instant,
    pub(super) id: u64,
    queued: Instant,
    request: Option<Box<Rendered>>,
}

/// The open model's connections of one worker. Sends wait in `queue` for a connection;
/// the pool grows when sends are still waiting after every connection has had its turn,
/// and shrinks when connections stayed idle for a whole second (see [`open`]).
pub(super) struct Pool {
    /// Sends waiting.
    pub(super) queue: RefCell<VecDeque<Waiting>>,
    notify: Notify,
    /// Connection tasks waiting for a send.
    idle: Cell<usize>,
    /// Connection tasks alive, and those still opening their connection.
    tasks: Cell<usize>,
    opening: Cell<usize>,
    /// Idle connections asked to close.
    close: Cell<usize>,
    done: Cell<bool>,
    /// The most requests it may have in flight: connections × streams.
    cap: usize,
    /// The target's service time: recent (a moving average over the last ~16
    /// responses) and the lowest mean of a window of [`SATURATION_WINDOW`] (≥ 20
    /// responses) so far — what it answers in when it has headroom.
    service: Cell<f64>,
    floor: Cell<f64>,
    /// The window being summed for `floor`: seconds and responses.
    window: Cell<(f64, u32)>,
    /// What each schedule position sends, when not the template.
    pub(super) requests: Option<Arc<Requests>>,
    /// Requests in flight on one connection at most (HTTP/2 streams; 1 otherwise).
    streams: usize,
    /// The pool's multiplexed connections, each with the tasks riding it.
    carried: RefCell<Vec<(Conn, Rc<Cell<usize>>)>>,
    /// Multiplexed connections being opened: the streams they still have spare, and
    /// what the tasks waiting to ride them wait on.
    opening_carriers: RefCell<Vec<Rc<Opening>>>,
}

/// A multiplexed connection being opened: its streams not yet promised to a task, and
/// what the tasks promised one wait on.
type Opening = (Cell<usize>, Notify);

impl Pool {
    /// A pool of at most `cap` connections, each carrying up to `streams` requests at
    /// once (a task per request in flight).
    fn new(cap: usize, streams: usize, requests: Option<Arc<Requests>>) -> Pool {
        let streams = streams.max(1);
        Pool {
            streams,
            carried: RefCell::new(Vec::new()),
            opening_carriers: RefCell::new(Vec::new()),
            queue: RefCell::new(VecDeque::new()),
            notify: Notify::new(),
            idle: Cell::new(0),
            tasks: Cell::new(0),
            opening: Cell::new(0),
            close: Cell::new(0),
            done: Cell::new(false),
            cap: cap * streams,
            service: Cell::new(0.0),
            floor: Cell::new(0.0),
            window: Cell::new((0.0, 0)),
            requests,
        }
    }

    /// A task's place on a multiplexed connection of the pool that has room for one
    /// more stream, if there is one.
    fn ride(&self, slot: &Slot) -> Option<(Conn, Rc<Cell<usize>>)> {
        if self.streams < 2 {
            return None;
        }
        let mut carried = self.carried.borrow_mut();
        carried.retain(|(c, riders)| riders.get() > 0 && !c.is_closed());
        let (c, riders) = carried.iter().find(|(_, r)| r.get() < self.streams)?;
        let conn = c.share()?;
        riders.set(riders.get() + 1);
        slot.fd.set(Some(conn.fd()));
        Some((conn, riders.clone()))
    }

    /// Waits for a multiplexed connection being opened with a stream spare, if there is
    /// one, and rides it: the pool grows by several tasks at once, and without this each
    /// would open a connection of its own.
    async fn ride_when_open(&self, slot: &Slot) -> Option<(Conn, Rc<Cell<usize>>)> {
        let opening = (self.opening_carriers.borrow().iter())
            .find(|o| o.0.get() > 0)
            .cloned()?;
        opening.0.set(opening.0.get() - 1);
        opening.1.notified().await;
        self.ride(slot)
    }

    /// A new connection offered to the tasks that come after (HTTP/2 with streams).
    fn carry(&self, conn: &Option<Conn>) -> Option<Rc<Cell<usize>>> {
        let shared = conn.as_ref().filter(|_| self.streams > 1)?.share()?;
        let riders = Rc::new(Cell::new(1));
        self.carried.borrow_mut().push((shared, riders.clone()));
        Some(riders)
    }

    /// Notes the service time of one response.
    fn served(&self, seconds: f64) {
        let s = self.service.get();
        self.service.set(if s == 0.0 {
            seconds
        } else {
            s + (seconds - s) / 16.0
        });
        let (sum, n) = self.window.get();
        self.window.set((sum + seconds, n + 1));
    }

    /// Closes a window: its mean lowers the floor when it has enough responses.
    fn window_ends(&self) {
        let (sum, n) = self.window.get();
        if n >= 20 {
            let mean = sum / f64::from(n);
            if self.floor.get() == 0.0 || mean < self.floor.get() {
                self.floor.set(mean);
            }
            self.window.set((0.0, 0));
        }
    }

    /// The target answers less than twice as slowly as it does with headroom, as far
    /// as this run has seen one: beyond that it queues what it is sent (Little's law),
    /// and more connections would only move the queue from this generator into the
    /// target, costing both sides more per request. Until a floor is known (20
    /// responses) the pool keeps its initial size: a target's first answers on fresh
    /// connections are its slowest, and growing on them spiralled to the cap.
    fn target_has_headroom(&self) -> bool {
        self.floor.get() > 0.0 && self.service.get() < QUEUED * self.floor.get()
    }
}

/// How much slower than its floor the target answers before the pool stops growing.
const QUEUED: f64 = 2.0;

/// New connections the pool opens at once, at most: a target that stopped accepting
/// (its listen queue full) gets a few SYNs, not one per waiting send.
const OPEN_AT_ONCE: usize = 8;
/// The pool grows only while the generator is on time: a batch whose oldest send is
/// later than this (its timer wakes within ~50 µs when it keeps up) is the generator's
/// own backlog, which more connections would slow down further.
const ON_TIME: Duration = Duration::from_micros(250);

/// The pool grows only for a send that has waited this long, and by at most
/// [`OPEN_AT_ONCE`] connections in this time: a stall of a few milliseconds (the
/// hypervisor, a collection in the target) is served by the connections there are.
const GROW_AFTER: Duration = Duration::from_millis(1);

/// The open model's timer tick: the worker wakes at most once per tick. A wake-up costs
/// ~10–45 µs of CPU on a VM, more than the send it serves; wrk2 ticks every millisecond.
const TICK: Duration = Duration::from_micros(100);

/// How often the worker looks at its own busy share.
const SATURATION_WINDOW: Duration = Duration::from_millis(100);

async fn open_loop(ctx: Rc<Ctx>, pool: Rc<Pool>, warm: bool) {
    let slot = ctx.slot();
    let (mut conn, riders) = match pool.ride(&slot) {
        Some((c, riders)) => {
            if !warm {
                pool.opening.set(pool.opening.get() - 1);
            }
            (Some(c), Some(riders))
        }
        None => match pool.ride_when_open(&slot).await {
            Some((c, riders)) => {
                if !warm {
                    pool.opening.set(pool.opening.get() - 1);
                }
                (Some(c), Some(riders))
            }
            None => {
                let opening = Rc::new((Cell::new(pool.streams - 1), Notify::new()));
                if pool.streams > 1 {
                    pool.opening_carriers.borrow_mut().push(opening.clone());
                }
                let c = if warm {
                    warm_connect(&ctx, &slot).await
                } else {
                    // Opened at once, not at its first send: the send that made the
                    // pool grow is taken by whichever connection is free first.
                    let c = fresh_connect(&ctx, &slot).await;
                    pool.opening.set(pool.opening.get() - 1);
                    c
                };
                let riders = pool.carry(&c);
                (pool.opening_carriers.borrow_mut()).retain(|o| !Rc::ptr_eq(o, &opening));
                opening.1.notify_waiters();
                (c, riders)
            }
        },
    };
    loop {
        let job = loop {
            if let Some(j) = pool.queue.borrow_mut().pop_front() {
                break Some(j);
            }
            if pool.done.get() {
                break None;
            }
            if pool.close.get() > 0 {
                pool.close.set(pool.close.get() - 1);
                break None;
            }
            pool.idle.set(pool.idle.get() + 1);
            pool.notify.notified().await;
            pool.idle.set(pool.idle.get() - 1);
        };
        let Some(Waiting {
            at,
            id: seq,
            request,
            ..
        }) = job
        else {
            break;
        };
        // How many of the cap's connections were busy as it went: the target's service
        // time at light and at full concurrency tells whose limit the cap was (verdict).
        let busy = (pool.tasks.get()).saturating_sub(pool.idle.get() + pool.opening.get());
        let load = if busy >= pool.cap {
            Some(PoolLoad::Full)
        } else if 2 * busy <= pool.cap {
            Some(PoolLoad::Light)
        } else {
            None
        };
        let drawn = match request {
            Some(r) => Some((std::borrow::Cow::Owned(*r), None)),
            None => match pool.requests.as_ref().map(|r| r.at(seq, &ctx.client)) {
                Some((Err(unsent), step)) => {
                    let mut rec = ctx.rec.lock().unwrap();
                    rec.sent(step);
                    rec.error(step, ErrorKind::InvalidRequest);
                    rec.count(step, &unsent.key());
                    continue;
                }
                Some((Ok(r), step)) => Some((r, step)),
                None => None,
            },
        };
        let (out, step) = match &drawn {
            Some((r, step)) => (Outgoing::Rendered(r.as_ref()), *step),
            None => (Outgoing::Workload(seq), None),
        };
        let sent_at = Instant::now();
        exchange(
            &ctx,
            &slot,
            &mut conn,
            out,
            step,
            Timing {
                intended: at,
                sent_at,
                load,
            },
            None,
        )
        .await;
        pool.served(sent_at.elapsed().as_secs_f64());
    }
    pool.tasks.set(pool.tasks.get() - 1);
    if let Some(r) = riders {
        r.set(r.get() - 1);
    }
    ctx.forget(&slot);
    goodbye(&ctx, conn).await;
}

/// The open model on one worker: sends at their intended times into the pool's queue.
///
/// After each batch of due sends the connections get their turn (`yield_now` lets the
/// runtime poll the sockets first); only sends still waiting then make the pool grow,
/// when the oldest has waited [`GROW_AFTER`], by at most [`OPEN_AT_ONCE`] connections
/// per [`GROW_AFTER`], and only while the
/// generator is on time ([`ON_TIME`]) and its thread was not busy 90% of the last
/// [`SATURATION_WINDOW`], and only while the target answers about as fast as it does
/// with headroom ([`Pool::target_has_headroom`]): then the waiting sends are the pool's
/// doing, and a connection more is a send more in flight.
/// A late generator (a hiccup, the hypervisor, its own limit) dispatches its backlog
/// in one batch; before this rule every late send found each connection still holding
/// a response it had not read yet, the pool grew to its cap and stayed there, costing
/// the generator more per request until the run degraded itself. Once a second,
/// connections that stayed idle all that second (the lowest idle count seen, less one)
/// are closed, down to the initial size.
pub(super) async fn open(
    ctx: Rc<Ctx>,
    mut share: Share,
    cap: usize,
    streams: usize,
    rate_per_worker: f64,
    requests: Option<Arc<Requests>>,
) {
    let by_position = requests.is_some();
    let pool = Rc::new(Pool::new(cap, streams, requests));
    *ctx.pool.borrow_mut() = Some(pool.clone());
    // Enough connections for ~2 ms of latency at this rate.
    let initial = ((rate_per_worker * 0.002).ceil() as usize).clamp(1, cap);
    let mut handles: Vec<_> = (0..initial)
        .map(|_| tokio::task::spawn_local(open_loop(ctx.clone(), pool.clone(), true)))
        .collect();
    pool.tasks.set(initial);
    let timer = super::super::timer::PreciseTimer::new().ok();
    let mut due = Due {
        next: share.next(),
        share,
        seq: 0,
        by_position,
        lags: Vec::new(),
    };
    let mut low_idle = usize::MAX;
    let mut shrink_at = ctx.start + Duration::from_secs(1);
    // This thread's busy share over the last window: a generator at its own limit does
    // not grow the pool (waiting sends are then its backlog, not the target's).
    let mut window = (Instant::now(), thread_cpu_seconds());
    let mut saturated = false;
    let mut grown_at = ctx.start;
    let mut woke = ctx.start;
    while let Some(t) = due.next {
        // One wake-up per TICK at most: above 10,000 sends a second per worker, sends
        // due within the same tick go out together (their lateness, < TICK, is counted
        // in the schedule lag and in the corrected latency).
        let at = (ctx.start + Duration::from_secs_f64(t)).max(woke + TICK);
        match &timer {
            Some(tm) => tm.sleep_until(at).await,
            None => tokio::time::sleep_until(at.into()).await,
        }
        woke = Instant::now();
        if ctx.cancel.load(Ordering::Relaxed) {
            break;
        }
        // Every send due by now goes in one batch.
        let now = Instant::now();
        let first_lag = now.saturating_duration_since(at);
        let batch = due.queue(&ctx, &pool, now);
        // More sends than idle connections: the connections' turn first (those whose
        // responses arrived take sends), then what still waits is counted.
        if pool.queue.borrow().len() > pool.idle.get() {
            tokio::task::yield_now().await;
        }
        let waiting = pool.queue.borrow().len();
        let spare = pool.idle.get() + pool.opening.get();
        if now >= window.0 + SATURATION_WINDOW {
            let cpu = thread_cpu_seconds();
            saturated = (cpu - window.1) / (now - window.0).as_secs_f64()
                >= super::super::verdict::CPU_BOUND;
            window = (now, cpu);
            pool.window_ends();
        }
        // How long the oldest send has waited for a connection (not since its intended
        // time: a late generator's backlog has waited for the generator, not the pool).
        let oldest = pool
            .queue
            .borrow()
            .front()
            .map(|j| Instant::now().saturating_duration_since(j.queued));
        let short = waiting.saturating_sub(spare);
        if short > 0
            && first_lag <= ON_TIME
            && !saturated
            && oldest.is_some_and(|w| w >= GROW_AFTER)
            && now >= grown_at + GROW_AFTER
        {
            grown_at = now;
            grow(&ctx, &pool, &mut handles, short, batch);
        }
        if first_lag <= ON_TIME {
            low_idle = low_idle.min(pool.idle.get());
        }
        if now >= shrink_at {
            shrink(&pool, low_idle, initial);
            low_idle = usize::MAX;
            shrink_at = now + Duration::from_secs(1);
        }
    }
    pool.done.set(true);
    pool.notify.notify_waiters();
    handles.retain(|h| !h.is_finished());
    for h in handles {
        let _ = h.await;
    }
}

/// The open model's schedule on one worker: the next send's time (seconds from the
/// start), and what each send is.
struct Due {
    share: Share,
    next: Option<f64>,
    /// Sends so far: a send's number when requests are not drawn by position.
    seq: u64,
    by_position: bool,
    /// The batch's schedule lags, kept to record them under one lock.
    lags: Vec<Duration>,
}

impl Due {
    /// Queues every send due by `now` into the pool, its lag recorded; returns how many.
    fn queue(&mut self, ctx: &Ctx, pool: &Pool, now: Instant) -> usize {
        let mut batch = 0usize;
        while let Some(t) = self.next {
            let at = ctx.start + Duration::from_secs_f64(t);
            if at > now {
                break;
            }
            self.lags.push(now.saturating_duration_since(at));
            // A replayed or drawn request is the one at this position of the schedule.
            let id = if self.by_position {
                self.share.position()
            } else {
                self.seq
            };
            let request = self.share.take_request().and_then(|(m, p)| {
                pool.requests
                    .as_ref()
                    .and_then(|r| r.streamed(&m, &p))
                    .map(Box::new)
            });
            pool.queue.borrow_mut().push_back(Waiting {
                at,
                id,
                queued: now,
                request,
            });
            pool.notify.notify_last();
            self.seq += 1;
            batch += 1;
            self.next = self.share.next();
        }
        let mut rec = ctx.rec.lock().unwrap();
        for lag in self.lags.drain(..) {
            rec.lag(lag);
        }
        batch
    }
}

/// The pool grows for `short` sends still waiting, of a `batch` just queued: by at
/// most [`OPEN_AT_ONCE`] connections opening and up to its cap, while the target has
/// headroom; a target without is counted as holding the sends back, and a pool at its
/// cap as the cap hit.
fn grow(
    ctx: &Rc<Ctx>,
    pool: &Rc<Pool>,
    handles: &mut Vec<tokio::task::JoinHandle<()>>,
    short: usize,
    batch: usize,
) {
    if pool.floor.get() == 0.0 {
        // No floor yet: the pool keeps its starting size, and says nothing of the
        // target.
    } else if !pool.target_has_headroom() {
        ctx.rec.lock().unwrap().held(short.min(batch) as u64);
    } else {
        pool.close.set(0);
        let room = OPEN_AT_ONCE.saturating_sub(pool.opening.get());
        let grow = short
            .min(room)
            .min(pool.cap.saturating_sub(pool.tasks.get()));
        for _ in 0..grow {
            pool.tasks.set(pool.tasks.get() + 1);
            pool.opening.set(pool.opening.get() + 1);
            handles.push(tokio::task::spawn_local(open_loop(
                ctx.clone(),
                pool.clone(),
                false,
            )));
        }
        if pool.tasks.get() >= pool.cap {
            let mut rec = ctx.rec.lock().unwrap();
            for _ in 0..short.min(batch) {
                rec.cap_hit();
            }
        }
    }
}

/// Asks the connections that stayed idle all the last second (`low_idle`, the lowest
/// idle count seen, less one) to close, down to the `initial` size.
fn shrink(pool: &Pool, low_idle: usize, initial: usize) {
    let excess = low_idle
        .saturating_sub(1)
        .min(pool.tasks.get().saturating_sub(initial));
    if excess > 0 {
        pool.close.set(pool.close.get() + excess);
        for _ in 0..excess {
            pool.notify.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool() -> Pool {
        Pool::new(10, 1, None)
    }

    #[test]
    fn the_pool_grows_only_while_the_target_answers_under_twice_its_floor() {
        let p = pool();
        // No floor before a window of 20 responses: the pool keeps its size.
        for _ in 0..19 {
            p.served(0.000_1);
        }
        p.window_ends();
        assert!(!p.target_has_headroom());
        p.served(0.000_1);
        p.window_ends();
        assert!((p.floor.get() - 0.000_1).abs() < 1e-12);
        assert!(p.target_has_headroom());
        // A target at a steady 0.19 ms (under twice its floor) still takes connections.
        for _ in 0..100 {
            p.served(0.000_19);
        }
        assert!(p.target_has_headroom());
        // Queued: ~2 ms responses make the recent average cross twice the floor.
        for _ in 0..8 {
            p.served(0.002);
        }
        assert!(!p.target_has_headroom());
        // A slower window does not raise the floor; recovering ends the brake.
        p.window_ends();
        assert!((p.floor.get() - 0.000_1).abs() < 1e-12);
        for _ in 0..100 {
            p.served(0.000_1);
        }
        assert!(p.target_has_headroom());
    }
}
