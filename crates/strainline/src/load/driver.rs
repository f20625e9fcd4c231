//! The one load driver: a *schedule* (open: intended send times; closed: each connection
//! sends when its last response arrives) × a *stop condition* (duration, count, signal)
//! × a *client* (HTTP). Each worker thread runs its own single-threaded runtime with its
//! share of the connections and of the schedule; the calling thread aggregates their
//! recorders once a second into the per-second series.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use super::http::{self, Conn, Target, Template};
use super::recorder::{ErrorKind, Recorder, Tally};
use super::scenario::{Scenario, When};
use super::schedule::{Arrivals, Rate, Share};
use super::template::Vars;
use crate::os::unit::Unit;

/// How load is offered.
#[derive(Debug, Clone)]
pub enum Model {
    /// N connections, each sending its next request when the last completes.
    Closed { connections: usize, think: Duration },
    /// Requests at intended times, whatever the target does.
    Open { rate: Rate, arrivals: Arrivals },
    /// Virtual clients running the steps of a scenario, each on its own connection.
    Scenario(Arc<Scenario>),
}

/// A checked, complete description of a load run.
#[derive(Clone)]
pub struct Plan {
    /// Where HTTP requests go (unused by a command workload).
    pub target: Target,
    pub template: Template,
    /// A command workload: each unit of work runs this argv; success is exit 0.
    pub command: Option<Vec<String>>,
    pub model: Model,
    pub threads: usize,
    pub duration: Option<Duration>,
    pub count: Option<u64>,
    /// Per request.
    pub timeout: Duration,
    /// Connections at most, all threads together (open model pool cap).
    pub max_connections: usize,
}

/// One second of the run.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Second {
    /// End of the interval, seconds since start.
    pub t: f64,
    pub sent: u64,
    pub completed: u64,
    pub ok: u64,
    pub errors: u64,
    /// Corrected latency (from the intended send time), microseconds.
    pub p50_us: u64,
    pub p99_us: u64,
    pub max_us: u64,
}

/// What a run produced.
pub struct Outcome {
    pub total: Tally,
    /// Per scenario step (index as in the scenario), for the whole run.
    pub steps: Vec<Tally>,
    pub seconds: Vec<Second>,
    /// Wall time from start until the last response (or timeout), seconds.
    pub elapsed: f64,
    /// Requests the schedule offered (open model), and over how long.
    pub scheduled: Option<(u64, f64)>,
    /// CPU seconds each worker thread used.
    pub thread_cpu: Vec<f64>,
    /// Connections asked for (closed model) and how many could be opened at the start.
    pub connections_asked: usize,
    pub connections_ready: usize,
    pub threads: usize,
    /// The statuses are commands' exit codes, not HTTP statuses.
    pub exit_codes: bool,
    pub interrupted: bool,
    /// CPU seconds the hypervisor took from the machine during the run.
    pub stolen_seconds: f64,
}

/// A connection's request in flight, watched by the worker's watchdog. Timeouts cost
/// nothing per request this way; a tokio timer per request cost ~4% of the generator's
/// CPU on loopback.
#[derive(Default)]
struct Slot {
    deadline: Cell<Option<Instant>>,
    /// The socket of the connection in use, shut down when the request overruns.
    fd: Cell<Option<std::os::fd::RawFd>>,
    expired: Cell<bool>,
}

/// Expires requests that overran their timeout by shutting their connection's socket
/// down, checking every `TICK`: a timeout fires within `TICK` of its deadline.
async fn watchdog(slots: Rc<RefCell<Vec<Rc<Slot>>>>) {
    const TICK: Duration = Duration::from_millis(20);
    loop {
        tokio::time::sleep(TICK).await;
        let now = Instant::now();
        for s in slots.borrow().iter() {
            if s.deadline.get().is_some_and(|d| now >= d) {
                s.deadline.set(None);
                s.expired.set(true);
                if let Some(fd) = s.fd.get() {
                    // SAFETY: the slot holds the descriptor only while its connection
                    // is open; shutdown does not close it.
                    unsafe { libc::shutdown(fd, libc::SHUT_RDWR) };
                }
            }
        }
    }
}

struct Ctx {
    /// The command workload's argv, instead of HTTP.
    command: Option<Vec<String>>,
    slots: Rc<RefCell<Vec<Rc<Slot>>>>,
    target: Target,
    template: Template,
    /// HTTP/1.1 requests as bytes, made once.
    prepared: Vec<bytes::Bytes>,
    rec: Arc<Mutex<Recorder>>,
    /// Where the command workload's units run: one containment unit for the whole run.
    unit: Option<Arc<Unit>>,
    timeout: Duration,
    cancel: Arc<AtomicBool>,
    start: Instant,
    deadline: Option<Instant>,
    tickets: Option<Arc<AtomicI64>>,
    ready: Arc<AtomicI64>,
}

/// Opens a connection outside any measurement (before the clock starts). One that is
/// not open by then (a handshake waiting for a SYN retransmit) is given up: the
/// connection is opened, with its timeout, at its first request.
async fn warm_connect(ctx: &Ctx, slot: &Slot) -> Option<Conn> {
    if ctx.command.is_some() {
        ctx.ready.fetch_add(1, Ordering::Relaxed);
        return None;
    }
    match tokio::time::timeout_at(ctx.start.into(), http::connect(&ctx.target)).await {
        Ok(Ok(c)) => {
            slot.fd.set(Some(c.fd));
            ctx.rec.lock().unwrap().connection_opened();
            ctx.ready.fetch_add(1, Ordering::Relaxed);
            Some(c)
        }
        _ => None,
    }
}

/// Opens a connection for a pool that grows during the run (with the request timeout).
/// One that fails is opened again, and its error counted, at the next request.
async fn fresh_connect(ctx: &Ctx, slot: &Slot) -> Option<Conn> {
    if ctx.command.is_some() {
        return None;
    }
    match tokio::time::timeout(ctx.timeout, http::connect(&ctx.target)).await {
        Ok(Ok(c)) => {
            slot.fd.set(Some(c.fd));
            ctx.rec.lock().unwrap().connection_opened();
            Some(c)
        }
        _ => None,
    }
}

impl Ctx {
    fn slot(&self) -> Rc<Slot> {
        let s = Rc::new(Slot::default());
        self.slots.borrow_mut().push(s.clone());
        s
    }

    /// The watchdog stops looking at a connection that closed for good.
    fn forget(&self, slot: &Rc<Slot>) {
        self.slots.borrow_mut().retain(|s| !Rc::ptr_eq(s, slot));
    }
}

/// How busy the open model's pool was when a send went.
#[derive(Clone, Copy, PartialEq, Eq)]
enum PoolLoad {
    /// At most half of the connections it may open were busy.
    Light,
    /// Every connection it may open was busy.
    Full,
}

/// When a request was meant to go and when it went.
#[derive(Clone, Copy)]
struct Timing {
    intended: Instant,
    sent_at: Instant,
    /// How busy the open model's pool was when it went (`None` elsewhere).
    load: Option<PoolLoad>,
}

/// One request on `conn` (reconnecting if needed), recorded against its intended time
/// (and under its scenario step, if any).
async fn exchange(
    ctx: &Ctx,
    slot: &Slot,
    conn: &mut Option<Conn>,
    out: http::Outgoing<'_>,
    step: Option<usize>,
    at: Timing,
) -> bool {
    let Timing {
        intended,
        sent_at,
        load,
    } = at;
    if let Some(argv) = &ctx.command {
        return run_command(ctx, argv, step, at).await;
    }
    slot.expired.set(false);
    slot.deadline.set(Some(sent_at + ctx.timeout));
    let result = async {
        if conn.as_ref().is_none_or(|c| c.is_closed()) {
            // A connect that hangs has no I/O task to abort yet: it gets a timer.
            let c = tokio::time::timeout(ctx.timeout, http::connect(&ctx.target))
                .await
                .map_err(|_| ErrorKind::Timeout)??;
            slot.fd.set(Some(c.fd));
            *conn = Some(c);
            ctx.rec.lock().unwrap().connection_opened();
        }
        http::send(conn.as_mut().expect("connected above"), &ctx.target, out).await
    }
    .await;
    slot.deadline.set(None);
    let result = match result {
        Err(_) if slot.expired.get() => Err(ErrorKind::Timeout),
        r => r,
    };
    let done = Instant::now();
    // One lock per request: the send is counted with its outcome.
    let mut rec = ctx.rec.lock().unwrap();
    rec.sent(step);
    match result {
        Ok((status, bytes)) => {
            rec.response(
                step,
                status,
                status < 400,
                bytes,
                done - intended,
                done - sent_at,
            );
            if let Some(load) = load {
                rec.pool_response(load == PoolLoad::Full, done - sent_at);
            }
            true
        }
        Err(kind) => {
            rec.error(step, kind);
            slot.fd.set(None);
            *conn = None;
            false
        }
    }
}

/// The command workload's unit of work: run `argv` to its end. Its exit code is its
/// "status" (128 + N for a signal); success is exit 0.
async fn run_command(ctx: &Ctx, argv: &[String], step: Option<usize>, at: Timing) -> bool {
    let unit = ctx.unit.as_ref().expect("a command workload has its unit");
    let mut cmd = unit.command(argv);
    cmd.stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let child = tokio::process::Command::from(cmd)
        .kill_on_drop(true)
        .spawn();
    let result = match child {
        Err(e) => Err(match e.kind() {
            std::io::ErrorKind::NotFound | std::io::ErrorKind::PermissionDenied => {
                ErrorKind::Connect
            }
            _ => ErrorKind::LocalResources,
        }),
        Ok(mut c) => {
            let pid = c.id().unwrap_or(0);
            unit.started(pid);
            let r = match tokio::time::timeout(ctx.timeout, c.wait()).await {
                Ok(Ok(status)) => {
                    use std::os::unix::process::ExitStatusExt;
                    Ok(status
                        .code()
                        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
                        as u16)
                }
                Ok(Err(_)) => Err(ErrorKind::LocalResources),
                Err(_) => Err(ErrorKind::Timeout),
            };
            // The unit of work is over, and so is whatever it started in its group.
            unit.finished(pid);
            r
        }
    };
    let done = Instant::now();
    let mut rec = ctx.rec.lock().unwrap();
    rec.sent(step);
    match result {
        Ok(code) => {
            rec.response(
                step,
                code,
                code == 0,
                0,
                done - at.intended,
                done - at.sent_at,
            );
            code == 0
        }
        Err(kind) => {
            rec.error(step, kind);
            false
        }
    }
}

async fn closed_loop(ctx: Rc<Ctx>, think: Duration, worker: u64) {
    let slot = ctx.slot();
    let mut conn = warm_connect(&ctx, &slot).await;
    tokio::time::sleep_until(ctx.start.into()).await;
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
        let out = http::Outgoing::Template(&ctx.template, &ctx.prepared, seq);
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
}

/// Sleeps until `until` (or the end of the run); false if the run is over.
async fn sleep_or_stop(ctx: &Ctx, until: Instant) -> bool {
    let wake = ctx.deadline.map_or(until, |d| d.min(until));
    tokio::time::sleep_until(wake.into()).await;
    !(ctx.cancel.load(Ordering::Relaxed) || ctx.deadline.is_some_and(|d| Instant::now() >= d))
}

/// One virtual client of a scenario: its `once` steps in order, then its periodic steps
/// at their intended times and its weighted mix in between, on one connection.
/// Long because a client's life is one sequence (once, then every/mix until the end)
/// whose timing state would only be scattered by splitting it.
async fn scenario_client(ctx: Rc<Ctx>, sc: Arc<Scenario>, client: u64) {
    let slot = ctx.slot();
    let mut conn: Option<Conn> = None;
    tokio::time::sleep_until(ctx.start.into()).await;
    if !sleep_or_stop(&ctx, ctx.start + sc.start_offset(client)).await {
        return;
    }
    let mut seq = 0u64;
    let mut rng = (sc.seed ^ client.wrapping_mul(0x9E37_79B9_7F4A_7C15)) | 1;
    let run = |i: usize, seq: u64| {
        let st = &sc.steps[i];
        let vars = Vars {
            client,
            seq,
            row: sc.row(client),
            random: &sc.random,
        };
        let mut body = Vec::new();
        if let Some(b) = &st.body {
            b.render(&vars, &mut body);
        }
        http::Rendered {
            method: st.method.clone(),
            path: st.path.render_string(&vars),
            headers: st
                .headers
                .iter()
                .filter_map(|(k, t)| {
                    Some((
                        k.clone(),
                        hyper::header::HeaderValue::from_str(&t.render_string(&vars)).ok()?,
                    ))
                })
                .collect(),
            body: bytes::Bytes::from(body),
        }
    };
    let over = |ctx: &Ctx| {
        ctx.cancel.load(Ordering::Relaxed)
            || ctx.deadline.is_some_and(|d| Instant::now() >= d)
            || ctx
                .tickets
                .as_ref()
                .is_some_and(|t| t.fetch_sub(1, Ordering::Relaxed) <= 0)
    };
    for (i, st) in sc
        .steps
        .iter()
        .enumerate()
        .filter(|(_, s)| s.when == When::Once)
    {
        if over(&ctx) {
            return;
        }
        let now = Instant::now();
        let req = run(i, seq);
        seq += 1;
        exchange(
            &ctx,
            &slot,
            &mut conn,
            http::Outgoing::Rendered(&req),
            Some(i),
            Timing {
                intended: now,
                sent_at: now,
                load: None,
            },
        )
        .await;
        if !st.think.is_zero() && !sleep_or_stop(&ctx, Instant::now() + st.think).await {
            return;
        }
    }
    let t0 = Instant::now();
    let mut periodic: Vec<(usize, Duration, Instant)> = sc
        .steps
        .iter()
        .enumerate()
        .filter_map(|(i, s)| match s.when {
            When::Every(p) => Some((i, p, t0 + sc.phase(client, p))),
            _ => None,
        })
        .collect();
    let mix: Vec<(usize, u32)> = sc
        .steps
        .iter()
        .enumerate()
        .filter_map(|(i, s)| match s.when {
            When::Weight(w) => Some((i, w)),
            _ => None,
        })
        .collect();
    let total_weight: u64 = mix.iter().map(|m| m.1 as u64).sum();
    let mut just_woke = false;
    loop {
        let now = Instant::now();
        let due = periodic
            .iter()
            .enumerate()
            .min_by_key(|(_, p)| p.2)
            .map(|(k, p)| (k, p.2));
        let (step, intended) = match due {
            Some((k, next)) if next <= now => {
                let (i, period, _) = periodic[k];
                periodic[k].2 = next + period;
                if just_woke {
                    // The client was idle and its timer woke it: the lateness is the
                    // generator's (recorded as lag), not the target's.
                    ctx.rec.lock().unwrap().lag(now - next);
                    (i, now)
                } else {
                    // Held up by its own previous request: measured from the intended
                    // time, so a slow target cannot hide its slowness.
                    (i, next)
                }
            }
            _ if total_weight > 0 => {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                let mut pick = rng % total_weight;
                let i = mix
                    .iter()
                    .find(|(_, w)| {
                        let hit = pick < *w as u64;
                        pick = pick.saturating_sub(*w as u64);
                        hit
                    })
                    .map_or(mix[0].0, |m| m.0);
                (i, now)
            }
            Some((_, next)) => {
                if !sleep_or_stop(&ctx, next).await {
                    return;
                }
                just_woke = true;
                continue;
            }
            None => return,
        };
        just_woke = false;
        if over(&ctx) {
            return;
        }
        let req = run(step, seq);
        seq += 1;
        let sent_at = Instant::now();
        exchange(
            &ctx,
            &slot,
            &mut conn,
            http::Outgoing::Rendered(&req),
            Some(step),
            Timing {
                intended,
                sent_at,
                load: None,
            },
        )
        .await;
        let think = sc.steps[step].think;
        if !think.is_zero() && !sleep_or_stop(&ctx, Instant::now() + think).await {
            return;
        }
    }
}

/// The open model's connections of one worker. Sends wait in `queue` for a connection;
/// the pool grows when sends are still waiting after every connection has had its turn,
/// and shrinks when connections stayed idle for a whole second (see [`open`]).
struct Pool {
    /// Sends waiting: intended time, sequence number, when they were queued.
    queue: RefCell<VecDeque<(Instant, u64, Instant)>>,
    notify: Notify,
    /// Connection tasks waiting for a send.
    idle: Cell<usize>,
    /// Connection tasks alive, and those still opening their connection.
    tasks: Cell<usize>,
    opening: Cell<usize>,
    /// Idle connections asked to close.
    close: Cell<usize>,
    done: Cell<bool>,
    /// The most connections it may open.
    cap: usize,
}

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
    let mut conn = if warm {
        warm_connect(&ctx, &slot).await
    } else {
        // Opened at once, not at its first send: the send that made the pool grow is
        // taken by whichever connection is free first.
        let c = fresh_connect(&ctx, &slot).await;
        pool.opening.set(pool.opening.get() - 1);
        c
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
        let Some((at, seq, _)) = job else {
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
        let out = http::Outgoing::Template(&ctx.template, &ctx.prepared, seq);
        exchange(
            &ctx,
            &slot,
            &mut conn,
            out,
            None,
            Timing {
                intended: at,
                sent_at: Instant::now(),
                load,
            },
        )
        .await;
    }
    pool.tasks.set(pool.tasks.get() - 1);
    ctx.forget(&slot);
}

/// The open model on one worker: sends at their intended times into the pool's queue.
///
/// After each batch of due sends the connections get their turn (`yield_now` lets the
/// runtime poll the sockets first); only sends still waiting then make the pool grow,
/// when the oldest has waited [`GROW_AFTER`], by at most [`OPEN_AT_ONCE`] connections
/// per [`GROW_AFTER`], and only while the
/// generator is on time ([`ON_TIME`]) and its thread was not busy 90% of the last
/// [`SATURATION_WINDOW`]: then the waiting sends are the target's doing.
/// A late generator (a hiccup, the hypervisor, its own limit) dispatches its backlog
/// in one batch; before this rule every late send found each connection still holding
/// a response it had not read yet, the pool grew to its cap and stayed there, costing
/// the generator more per request until the run degraded itself. Once a second,
/// connections that stayed idle all that second (the lowest idle count seen, less one)
/// are closed, down to the initial size.
async fn open(ctx: Rc<Ctx>, mut share: Share, cap: usize, rate_per_worker: f64) {
    let pool = Rc::new(Pool {
        queue: RefCell::new(VecDeque::new()),
        notify: Notify::new(),
        idle: Cell::new(0),
        tasks: Cell::new(0),
        opening: Cell::new(0),
        close: Cell::new(0),
        done: Cell::new(false),
        cap,
    });
    // Enough connections for ~2 ms of latency at this rate.
    let initial = ((rate_per_worker * 0.002).ceil() as usize).clamp(1, cap);
    let mut handles: Vec<_> = (0..initial)
        .map(|_| tokio::task::spawn_local(open_loop(ctx.clone(), pool.clone(), true)))
        .collect();
    pool.tasks.set(initial);
    let timer = super::timer::PreciseTimer::new().ok();
    let mut seq = 0u64;
    let mut next = share.next();
    let mut lags = Vec::new();
    let mut low_idle = usize::MAX;
    let mut shrink_at = ctx.start + Duration::from_secs(1);
    // This thread's busy share over the last window: a generator at its own limit does
    // not grow the pool (waiting sends are then its backlog, not the target's).
    let mut window = (Instant::now(), thread_cpu_seconds());
    let mut saturated = false;
    let mut grown_at = ctx.start;
    let mut woke = ctx.start;
    while let Some(t) = next {
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
        let mut batch = 0usize;
        let first_lag = now.saturating_duration_since(at);
        while let Some(t) = next {
            let at = ctx.start + Duration::from_secs_f64(t);
            if at > now {
                break;
            }
            lags.push(now.saturating_duration_since(at));
            pool.queue.borrow_mut().push_back((at, seq, now));
            pool.notify.notify_last();
            seq += 1;
            batch += 1;
            next = share.next();
        }
        {
            let mut rec = ctx.rec.lock().unwrap();
            for lag in lags.drain(..) {
                rec.lag(lag);
            }
        }
        // More sends than idle connections: the connections' turn first (those whose
        // responses arrived take sends), then what still waits is counted.
        if pool.queue.borrow().len() > pool.idle.get() {
            tokio::task::yield_now().await;
        }
        let waiting = pool.queue.borrow().len();
        let spare = pool.idle.get() + pool.opening.get();
        if now >= window.0 + SATURATION_WINDOW {
            let cpu = thread_cpu_seconds();
            saturated =
                (cpu - window.1) / (now - window.0).as_secs_f64() >= super::verdict::CPU_BOUND;
            window = (now, cpu);
        }
        // How long the oldest send has waited for a connection (not since its intended
        // time: a late generator's backlog has waited for the generator, not the pool).
        let oldest = pool
            .queue
            .borrow()
            .front()
            .map(|j| Instant::now().saturating_duration_since(j.2));
        if waiting > spare
            && first_lag <= ON_TIME
            && !saturated
            && oldest.is_some_and(|w| w >= GROW_AFTER)
            && now >= grown_at + GROW_AFTER
        {
            grown_at = now;
            let short = waiting - spare;
            pool.close.set(0);
            let room = OPEN_AT_ONCE.saturating_sub(pool.opening.get());
            let grow = short.min(room).min(cap - pool.tasks.get());
            for _ in 0..grow {
                pool.tasks.set(pool.tasks.get() + 1);
                pool.opening.set(pool.opening.get() + 1);
                handles.push(tokio::task::spawn_local(open_loop(
                    ctx.clone(),
                    pool.clone(),
                    false,
                )));
            }
            if pool.tasks.get() >= cap {
                let mut rec = ctx.rec.lock().unwrap();
                for _ in 0..short.min(batch) {
                    rec.cap_hit();
                }
            }
        }
        if first_lag <= ON_TIME {
            low_idle = low_idle.min(pool.idle.get());
        }
        if now >= shrink_at {
            let excess = low_idle
                .saturating_sub(1)
                .min(pool.tasks.get().saturating_sub(initial));
            if excess > 0 {
                pool.close.set(pool.close.get() + excess);
                for _ in 0..excess {
                    pool.notify.notify_one();
                }
            }
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

/// Waits for every task (each waits for the common start itself).
async fn join(tasks: Vec<tokio::task::JoinHandle<()>>) {
    for t in tasks {
        let _ = t.await;
    }
}

/// How long requests still in flight at the run's end may take before they are cut.
const END_GRACE: Duration = Duration::from_millis(500);

/// Resolves when the worker must stop whatever it is waiting for: at once when the
/// run is cancelled, else [`END_GRACE`] (or the timeout, if shorter) after its end. A
/// connection whose handshake or response never comes cannot hold a run past it.
async fn hard_stop(ctx: Rc<Ctx>) {
    let grace = END_GRACE.min(ctx.timeout);
    loop {
        let now = Instant::now();
        if ctx.cancel.load(Ordering::Relaxed) || ctx.deadline.is_some_and(|d| now >= d + grace) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// CPU time of the calling thread, seconds.
fn thread_cpu_seconds() -> f64 {
    // SAFETY: zeroed rusage is valid; getrusage fills it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Runs the plan. `progress` is called with each second as it closes; `cancel` stops
/// sending (in-flight requests still finish or time out).
/// Runs a plan to its end, or until `cancel` is set or `stop()` says so (the caller's
/// interrupt: the engine polls it every 20 ms and knows nothing of signals).
/// Long because it is the one place where workers start, the clock starts for all at
/// once, and their recorders are merged each second; each phase reads the one before.
pub fn run(
    plan: &Plan,
    cancel: Arc<AtomicBool>,
    stop: &dyn Fn() -> bool,
    mut progress: impl FnMut(&Second, &Tally),
) -> Outcome {
    let threads = match &plan.model {
        Model::Closed { connections, .. } => plan.threads.clamp(1, (*connections).max(1)),
        Model::Open { .. } => plan.threads.max(1),
        Model::Scenario(sc) => plan.threads.clamp(1, sc.clients.max(1) as usize),
    };
    let per_thread =
        move |total: usize, w: usize| total / threads + usize::from(w < total % threads);
    let recs: Vec<Arc<Mutex<Recorder>>> = (0..threads)
        .map(|_| Arc::new(Mutex::new(Recorder::default())))
        .collect();
    let tickets = match (&plan.model, plan.count) {
        (Model::Closed { .. } | Model::Scenario(_), Some(n)) => {
            Some(Arc::new(AtomicI64::new(n as i64)))
        }
        _ => None,
    };
    let ready = Arc::new(AtomicI64::new(0));
    let stolen_before = crate::host::stolen_seconds();
    let unit = plan.command.as_ref().map(|_| Arc::new(Unit::new(true)));
    // Connections are opened first; the clock starts for everyone at once.
    let warmup = Duration::from_millis(200);
    let start = Instant::now() + warmup;
    let deadline = plan.duration.map(|d| start + d);
    let handles: Vec<_> = (0..threads)
        .map(|w| {
            let plan = plan.clone();
            let rec = recs[w].clone();
            let cancel = cancel.clone();
            let tickets = tickets.clone();
            let ready = ready.clone();
            let unit = unit.clone();
            std::thread::Builder::new()
                .name(format!("load-{w}"))
                .spawn(move || {
                    let rt = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .expect("a tokio runtime");
                    let local = tokio::task::LocalSet::new();
                    let slots = Rc::new(RefCell::new(Vec::new()));
                    let ctx = Rc::new(Ctx {
                        command: plan.command.clone(),
                        slots: slots.clone(),
                        prepared: plan.template.prepare_h1(&plan.target),
                        target: plan.target.clone(),
                        template: plan.template.clone(),
                        rec,
                        unit,
                        timeout: plan.timeout,
                        cancel,
                        start,
                        deadline,
                        tickets,
                        ready,
                    });
                    local.block_on(&rt, async move {
                        let dog = tokio::task::spawn_local(watchdog(slots.clone()));
                        let stopper = ctx.clone();
                        let work = async move { match plan.model.clone() {
                            Model::Scenario(sc) => {
                                let tasks: Vec<_> = (w as u64..sc.clients)
                                    .step_by(threads)
                                    .map(|c| {
                                        tokio::task::spawn_local(scenario_client(
                                            ctx.clone(),
                                            sc.clone(),
                                            c,
                                        ))
                                    })
                                    .collect();
                                join(tasks).await;
                            }
                            Model::Closed { connections, think } => {
                                let n = per_thread(connections, w);
                                let tasks: Vec<_> = (0..n)
                                    .map(|i| {
                                        let worker = (w * 1_000_000 + i) as u64;
                                        tokio::task::spawn_local(closed_loop(
                                            ctx.clone(),
                                            think,
                                            worker,
                                        ))
                                    })
                                    .collect();
                                join(tasks).await;
                            }
                            Model::Open { rate, arrivals } => {
                                let share = Share::new(
                                    rate,
                                    arrivals,
                                    w,
                                    threads,
                                    plan.count,
                                    plan.duration,
                                );
                                let cap = per_thread(plan.max_connections.max(threads), w).max(1);
                                let per_worker =
                                    rate.at(0.0).max(rate.at(f64::MAX)) / threads as f64;
                                open(ctx, share, cap, per_worker).await;
                            }
                        } };
                        tokio::select! {
                            _ = work => {}
                            _ = hard_stop(stopper.clone()) => {
                                // Cut: what is still unanswered is counted, not waited for.
                                let n = slots.borrow().iter().filter(|s| s.deadline.get().is_some()).count();
                                stopper.rec.lock().unwrap().unfinished(n as u64);
                            }
                        }
                        dog.abort();
                    });
                    thread_cpu_seconds()
                })
                .expect("a worker thread")
        })
        .collect();

    std::thread::sleep(start.saturating_duration_since(Instant::now()));
    let connections_ready = ready.load(Ordering::Relaxed) as usize;
    let mut seconds = Vec::new();
    let mut next = start + Duration::from_secs(1);
    let mut total = Tally::default();
    let mut snapshot = |seconds: &mut Vec<Second>, t: f64| -> Tally {
        let mut iv = Tally::default();
        for r in &recs {
            let fresh = Tally::default();
            let part = r.lock().unwrap().take_interval(fresh);
            iv.merge(&part);
        }
        total.merge(&iv);
        let q = |p: f64| {
            if iv.corrected.is_empty() {
                0
            } else {
                iv.corrected.value_at_quantile(p)
            }
        };
        seconds.push(Second {
            t,
            sent: iv.sent,
            completed: iv.completed,
            ok: iv.ok,
            errors: iv.errors(),
            p50_us: q(0.5),
            p99_us: q(0.99),
            max_us: iv.corrected.max(),
        });
        iv
    };
    loop {
        let all_done = handles.iter().all(|h| h.is_finished());
        if all_done {
            break;
        }
        if stop() {
            cancel.store(true, Ordering::Relaxed);
        }
        if Instant::now() >= next {
            let iv = snapshot(&mut seconds, (next - start).as_secs_f64());
            if let Some(s) = seconds.last() {
                progress(s, &iv);
            }
            next += Duration::from_secs(1);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let thread_cpu: Vec<f64> = handles
        .into_iter()
        .map(|h| h.join().unwrap_or(0.0))
        .collect();
    // Whatever the command units left running (a `setsid` child) ends with the run.
    drop(unit);
    let elapsed = start.elapsed().as_secs_f64();
    let last = snapshot(&mut seconds, elapsed);
    if last.sent == 0 && last.completed == 0 && last.errors() == 0 {
        seconds.pop();
    }
    let mut steps: Vec<Tally> = Vec::new();
    for r in &recs {
        let r = r.lock().unwrap();
        if steps.len() < r.steps.len() {
            steps.resize_with(r.steps.len(), Tally::default);
        }
        for (i, t) in r.steps.iter().enumerate() {
            steps[i].merge(t);
        }
    }
    let scheduled = match &plan.model {
        Model::Scenario(sc) => plan
            .duration
            .and_then(|d| sc.scheduled(d).map(|n| (n, d.as_secs_f64())))
            .filter(|(n, _)| *n > 0),
        Model::Open { rate, .. } => {
            let span = match (plan.duration, plan.count) {
                (Some(d), Some(n)) => d.as_secs_f64().min(rate.time_of(n as f64)),
                (Some(d), None) => d.as_secs_f64(),
                (None, Some(n)) => rate.time_of(n as f64),
                (None, None) => 0.0,
            };
            Some((rate.count_by(span).round() as u64, span))
        }
        Model::Closed { .. } => None,
    };
    Outcome {
        total,
        steps,
        seconds,
        elapsed,
        scheduled,
        thread_cpu,
        connections_asked: match &plan.model {
            Model::Closed { connections, .. } => *connections,
            _ => 0,
        },
        connections_ready,
        threads,
        exit_codes: plan.command.is_some(),
        interrupted: cancel.load(Ordering::Relaxed),
        stolen_seconds: (crate::host::stolen_seconds() - stolen_before).max(0.0),
    }
}
