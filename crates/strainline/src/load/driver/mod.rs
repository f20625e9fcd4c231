//! The one load driver: a *schedule* (open: intended send times; closed: each connection
//! sends when its last response arrives) × a *stop condition* (duration, count, signal)
//! × a *client* ([`super::client`]: HTTP, WebSocket, MQTT, gRPC or a command). Each
//! worker thread runs its own single-threaded runtime with its share of the
//! connections and of the schedule; the calling thread aggregates their recorders once a
//! second into the per-second series. Here: the plan, a worker's context, one exchange
//! and the run's threads and seconds; a worker thread's life in [`worker`]; the models
//! in [`closed`], [`open`] and [`clients`] (a scenario's virtual clients and sessions);
//! what a run produced in [`outcome`].

mod clients;
mod closed;
mod open;
mod outcome;
mod worker;

use open::{Pool, Waiting};
#[cfg(test)]
pub(crate) use outcome::{latency_seconds, per_second};
pub use outcome::{
    series, AgentPart, Outcome, Second, StepSpans, CAUSE_PREFIX, LOAD_START, SECOND_LATENCY,
    STEP_PREFIX,
};
use worker::{worker, Shared};

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::client::{Client, Companions, CompanionsAsk, Conn, Reply};
use super::recorder::{counters, ErrorKind, Recorder, Tally};
use super::replay::Requests;
use super::request::Outgoing;
use super::scenario::Scenario;
use super::schedule::{Arrivals, Rate};
use crate::os::unit::Unit;

/// How load is offered.
#[derive(Debug, Clone)]
pub enum Model {
    /// N connections, each sending its next request when the last completes.
    Closed { connections: usize, think: Duration },
    /// Requests at intended times, whatever the target does: from a rate, a replayed
    /// log's times or a workload's per-second counts (`rate` is then their mean, for the
    /// pool's size). `requests`: what each position sends, when not the template.
    Open {
        rate: Rate,
        arrivals: Arrivals,
        requests: Option<Arc<Requests>>,
    },
    /// Virtual clients running the steps of a scenario, each on its own connection.
    Scenario(Arc<Scenario>),
    /// Sessions of a scenario arriving at intended times (the open model), each running
    /// every step once, in order, on a connection of its own.
    Sessions {
        sc: Arc<Scenario>,
        rate: Rate,
        arrivals: Arrivals,
    },
}

/// A checked, complete description of a load run.
#[derive(Clone)]
pub struct Plan {
    /// What units of work go to, over which protocol.
    pub client: Client,
    pub model: Model,
    pub threads: usize,
    pub duration: Option<Duration>,
    pub count: Option<u64>,
    /// Per request.
    pub timeout: Duration,
    /// Connections at most, all threads together (open model pool cap).
    pub max_connections: usize,
    /// Closed model over HTTP/2: requests in flight on each connection (1 otherwise).
    pub streams: usize,
    /// The part of the run this generator sends (one agent of several); the whole run
    /// on one machine.
    pub slice: Slice,
}

/// Part `index` of `of` equal parts of a run, split exactly: the open model's sends
/// whose position in the global schedule is ≡ index (mod of), every `of`-th scenario
/// client, and a fair share of connections, counts and the pool's cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Slice {
    pub index: usize,
    pub of: usize,
}

impl Slice {
    pub const WHOLE: Slice = Slice { index: 0, of: 1 };

    /// This part's share of `total` (the first `total % of` parts take one more).
    pub fn share(&self, total: u64) -> u64 {
        let of = self.of.max(1) as u64;
        total / of + u64::from((self.index as u64) < total % of)
    }

    /// This part's indexes among `total` numbered things (every `of`-th, from `index`).
    pub fn indexes(&self, total: u64) -> Vec<u64> {
        (self.index as u64..total).step_by(self.of.max(1)).collect()
    }
}

/// Requests the plan's schedule offers (its slice's share), and over how long (open
/// model and scenarios).
pub fn scheduled(plan: &Plan) -> Option<(u64, f64)> {
    match &plan.model {
        // This slice's clients' share (their schedules are alike).
        Model::Scenario(sc) => plan
            .duration
            .and_then(|d| {
                sc.scheduled(d).map(|n| {
                    let mine = plan.slice.share(sc.clients) as f64 / sc.clients.max(1) as f64;
                    ((n as f64 * mine).round() as u64, d.as_secs_f64())
                })
            })
            .filter(|(n, _)| *n > 0),
        Model::Open { rate, arrivals, .. } => {
            let mut span = match (plan.duration, plan.count) {
                (Some(d), Some(n)) => d.as_secs_f64().min(arrivals.time_of(rate, n as f64)),
                (Some(d), None) => d.as_secs_f64(),
                (None, Some(n)) => arrivals.time_of(rate, n as f64),
                (None, None) => 0.0,
            };
            let n = arrivals.count_by(rate, span).round() as u64;
            // A replay sends nothing after its log's last request.
            match arrivals {
                Arrivals::Listed(times) => span = span.min(times.last().copied().unwrap_or(0.0)),
                Arrivals::Streamed(st) => span = span.min(st.last),
                _ => {}
            }
            // This slice's positions of the global schedule.
            Some((plan.slice.share(plan.count.map_or(n, |c| n.min(c))), span))
        }
        Model::Sessions { sc, rate, arrivals } => {
            let span = plan.duration?.as_secs_f64();
            let sessions = arrivals.count_by(rate, span);
            let n = (sessions * sc.steps.len() as f64).round() as u64;
            Some((plan.slice.share(plan.count.map_or(n, |c| n.min(c))), span))
        }
        Model::Closed { .. } => None,
    }
}

/// A connection's request in flight, watched by the worker's watchdog. Timeouts cost
/// nothing per request this way; a tokio timer per request cost ~4% of the generator's
/// CPU on loopback.
#[derive(Default)]
struct Slot {
    deadline: Cell<Option<Instant>>,
    /// The request in flight: its intended time and scenario step (for the cut).
    intended: Cell<Option<(Instant, Option<usize>)>>,
    /// A connection is being opened on this slot.
    connecting: Cell<bool>,
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
    client: Client,
    slots: Rc<RefCell<Vec<Rc<Slot>>>>,
    rec: Arc<Mutex<Recorder>>,
    /// Where the command workload's units run: one containment unit for the whole run.
    unit: Option<Arc<Unit>>,
    timeout: Duration,
    cancel: Arc<AtomicBool>,
    start: Instant,
    deadline: Option<Instant>,
    tickets: Option<Arc<AtomicI64>>,
    ready: Arc<AtomicI64>,
    /// The open model's pool, whose waiting sends are counted when the run is cut.
    pool: RefCell<Option<Rc<Pool>>>,
}

/// A client running (a scenario's client, a session, a closed connection's loop),
/// counted in the recorder's gauge while this lives.
struct Running<'a>(&'a Ctx);

impl Ctx {
    fn running(&self) -> Running<'_> {
        self.rec.lock().unwrap().client(true);
        Running(self)
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.rec.lock().unwrap().client(false);
    }
}

/// Opens a connection outside any measurement (before the clock starts). One that is
/// not open by then (a handshake waiting for a SYN retransmit) is given up: the
/// connection is opened, with its timeout, at its first request.
async fn warm_connect(ctx: &Ctx, slot: &Slot) -> Option<Conn> {
    if !ctx.client.connects() {
        ctx.ready.fetch_add(1, Ordering::Relaxed);
        return None;
    }
    match tokio::time::timeout_at(ctx.start.into(), ctx.client.connect()).await {
        Ok(Ok(c)) => {
            slot.fd.set(Some(c.fd()));
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
    if !ctx.client.connects() {
        return None;
    }
    let c = connect_within(ctx, slot).await.ok()?;
    slot.fd.set(Some(c.fd()));
    Some(c)
}

/// Opens a connection during the run within the request timeout (a connect that hangs
/// has no I/O task for the watchdog to abort yet: it gets a timer), counted as opened.
async fn connect_within(ctx: &Ctx, slot: &Slot) -> Result<Conn, ErrorKind> {
    slot.connecting.set(true);
    let c = tokio::time::timeout(ctx.timeout, ctx.client.connect()).await;
    slot.connecting.set(false);
    let c = c.map_err(|_| ErrorKind::Timeout)??;
    ctx.rec.lock().unwrap().connection_opened();
    Ok(c)
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

    /// The run is cut (its end's grace is over, or it was interrupted): every request
    /// that was due and is still unanswered — in flight, or waiting in the open model's
    /// queue for a connection — is counted, its latency censored at this moment.
    fn cut(&self) {
        let now = Instant::now();
        let slots = self.slots.borrow();
        let connecting = slots.iter().any(|s| s.connecting.get());
        let mut rec = self.rec.lock().unwrap();
        for s in slots.iter().filter(|s| s.deadline.get().is_some()) {
            if let Some((at, step)) = s.intended.get() {
                rec.cut(step, now.saturating_duration_since(at), true, false);
            }
        }
        if let Some(pool) = self.pool.borrow().as_ref() {
            for Waiting { at, id: seq, .. } in pool.queue.borrow_mut().drain(..) {
                let step = pool.requests.as_ref().and_then(|r| r.step_at(seq));
                rec.cut(step, now.saturating_duration_since(at), false, connecting);
            }
        }
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

/// What a scenario client makes of a reply before it is recorded: its cookies and
/// values, its checks (which may fail it), from its latency and into the recorder.
/// True when the reply is a redirect its step follows: a hop, not the step's reply
/// (counted apart, not as a send; the step's send is its last reply's).
type Judge<'a> = &'a mut dyn FnMut(&mut Reply, Duration, &mut Recorder) -> bool;

/// One unit of work on `conn` (reconnecting if needed), recorded against its intended
/// time (and under its scenario step, if any), judged first by `judge` if given.
async fn exchange(
    ctx: &Ctx,
    slot: &Slot,
    conn: &mut Option<Conn>,
    out: Outgoing<'_>,
    step: Option<usize>,
    at: Timing,
    judge: Option<Judge<'_>>,
) -> bool {
    let Timing {
        intended,
        sent_at,
        load,
    } = at;
    let result = match ctx.client.connects() {
        // A command, or a client connecting to stay: no connection of the driver's.
        false => {
            let r = ctx.client.run(ctx.unit.as_deref(), ctx.timeout).await;
            if r.is_ok() && ctx.client.unit_connects() {
                ctx.rec.lock().unwrap().connection_opened();
            }
            r
        }
        true => {
            slot.expired.set(false);
            slot.deadline.set(Some(sent_at + ctx.timeout));
            slot.intended.set(Some((intended, step)));
            let result = async {
                if conn.as_ref().is_none_or(|c| c.is_closed()) {
                    let c = connect_within(ctx, slot).await?;
                    slot.fd.set(Some(c.fd()));
                    *conn = Some(c);
                }
                let c = conn.as_mut().expect("connected above");
                ctx.client.send(c, out, intended).await
            }
            .await;
            slot.deadline.set(None);
            slot.intended.set(None);
            match result {
                Err(_) if slot.expired.get() => Err(ErrorKind::Timeout),
                r => r,
            }
        }
    };
    let done = Instant::now();
    // One lock per unit: the send is counted with its outcome.
    let mut rec = ctx.rec.lock().unwrap();
    match result {
        Ok(mut reply) => {
            if let Some(judge) = judge {
                if judge(&mut reply, done - intended, &mut rec) {
                    rec.count(step, counters::HOPS);
                    return true;
                }
            }
            rec.sent(step);
            rec.response(
                step,
                reply.status,
                reply.ok,
                reply.bytes,
                done - intended,
                done - sent_at,
            );
            if let Some(load) = load {
                rec.pool_response(load == PoolLoad::Full, done - sent_at);
            }
            if reply.messages > 0 {
                rec.messages(reply.messages);
            }
            if reply.late_tail {
                rec.late_tail();
            }
            reply.ok
        }
        Err(kind) => {
            rec.sent(step);
            rec.error(step, kind);
            slot.fd.set(None);
            *conn = None;
            false
        }
    }
}

/// Ends a connection as its protocol asks (a WebSocket's close frame, MQTT's
/// DISCONNECT) when the run is over, not dropping it as a crash would: a broker treats a
/// client that vanished as lost (and publishes its will).
async fn goodbye(ctx: &Ctx, conn: Option<Conn>) {
    if let Some(c) = conn {
        let _ = tokio::time::timeout(Duration::from_millis(100), ctx.client.goodbye(c)).await;
    }
}

/// Sleeps until `until` (or the end of the run); false if the run is over.
async fn sleep_or_stop(ctx: &Ctx, until: Instant) -> bool {
    let wake = ctx.deadline.map_or(until, |d| d.min(until));
    tokio::time::sleep_until(wake.into()).await;
    !(ctx.cancel.load(Ordering::Relaxed) || ctx.deadline.is_some_and(|d| Instant::now() >= d))
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

/// How long the calling thread has waited in the scheduler's run queue (runnable, no
/// CPU free), seconds: the second field of its `schedstat`, exact in nanoseconds.
fn queue_seconds() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    Some(crate::os::process::schedstat(&text)?[1] as f64 / 1e9)
}

/// CPU time of the calling thread, seconds.
fn thread_cpu_seconds() -> f64 {
    // SAFETY: zeroed rusage is valid; getrusage fills it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Runs a plan to its end, or until `cancel` is set or `stop()` says so (the caller's
/// interrupt: the engine polls it every 20 ms and knows nothing of signals).
/// `progress` is called with each second as it closes; `cancel` stops sending
/// (in-flight requests still finish or time out).
pub fn run(
    plan: &Plan,
    cancel: Arc<AtomicBool>,
    stop: &dyn Fn() -> bool,
    progress: impl FnMut(&Second, &Tally),
) -> Outcome {
    // Connections are opened first; the clock starts for everyone at once.
    let lead = lead(plan, warm_up(plan, Duration::from_millis(200)));
    run_from(plan, Instant::now() + lead, cancel, stop, progress)
}

/// How long the connections of `plan` get to open before its clock starts: `base`, and
/// for a closed model over a protocol with a handshake beyond TCP's (TLS, WebSocket,
/// MQTT) 4 ms more per connection, at most 5 s: Python's `websockets` had 211 of 500
/// open after 200 ms, and 373 after 1.2 s (its listen queue of 100 overflowed and the
/// kernel retries a dropped handshake after 1 s); the run was rightly INVALID, for a
/// start the generator chose.
/// MQTT subscribers count too (they must be subscribed before the first publish).
pub fn warm_up(plan: &Plan, base: Duration) -> Duration {
    let connections = match plan.model {
        Model::Closed { connections, .. } if plan.client.handshakes() => connections as u64,
        _ => 0,
    };
    let opened = plan.slice.share(connections + plan.client.companions());
    (base + Duration::from_millis(4) * opened as u32).min(base.max(Duration::from_secs(5)))
}

/// How long from now the clock of `plan` starts: `at_least`, or for per-second arrivals
/// the next second of the wall clock at least that far away, so that the seconds of the
/// schedule are the seconds of the target's access log (`workload compare` counts those).
pub fn lead(plan: &Plan, at_least: Duration) -> Duration {
    let Model::Open {
        arrivals: Arrivals::PerSecond { .. },
        ..
    } = plan.model
    else {
        return at_least;
    };
    let into = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .subsec_nanos();
    let mut to_next = Duration::from_secs(1) - Duration::from_nanos(u64::from(into));
    while to_next < at_least {
        to_next += Duration::from_secs(1);
    }
    to_next
}

/// [`run`] with the clock starting at `start` (an agent starts when the coordinator
/// said, in its own clock); connections are opened before. Workers start here, the
/// clock starts for all at once, and their recorders are merged each second.
pub fn run_from(
    plan: &Plan,
    start: Instant,
    cancel: Arc<AtomicBool>,
    stop: &dyn Fn() -> bool,
    mut progress: impl FnMut(&Second, &Tally),
) -> Outcome {
    let slice = plan.slice;
    let threads = threads(plan);
    let mut recs: Vec<Arc<Mutex<Recorder>>> = (0..threads)
        .map(|_| Arc::new(Mutex::new(Recorder::default())))
        .collect();
    let companions = companions(plan, start, &cancel, &mut recs);
    let tickets = match (&plan.model, plan.count) {
        (Model::Closed { .. } | Model::Scenario(_), Some(n)) => {
            Some(Arc::new(AtomicI64::new(slice.share(n) as i64)))
        }
        _ => None,
    };
    let stolen_before = crate::host::stolen_seconds();
    let shared = Shared {
        threads,
        cancel: cancel.clone(),
        tickets,
        ready: Arc::new(AtomicI64::new(0)),
        units_done: Arc::new(AtomicU64::new(0)),
        unit: (plan.client.runs_commands()).then(|| Arc::new(Unit::new(true))),
        start,
        deadline: plan.duration.map(|d| start + d),
    };
    let handles: Vec<_> = (0..threads)
        .map(|w| {
            let (plan, shared, rec) = (plan.clone(), shared.clone(), recs[w].clone());
            std::thread::Builder::new()
                .name(format!("load-{w}"))
                .spawn(move || worker(plan, shared, rec, w))
                .expect("a worker thread")
        })
        .collect();

    std::thread::sleep(start.saturating_duration_since(Instant::now()));
    // The machine's idle CPU from the clock's start (not over the connections' warm-up).
    let idle_before = (Instant::now(), crate::host::idle_seconds());
    let connections_ready = shared.ready.load(Ordering::Relaxed) as usize;
    let mut seconds = Seconds {
        recs: &recs,
        spans: outcome::StepSpans::new(plan.duration),
        seconds: Vec::new(),
        total: Tally::default(),
    };
    let mut next = start + Duration::from_secs(1);
    while !handles.iter().all(|h| h.is_finished()) {
        if stop() {
            cancel.store(true, Ordering::Relaxed);
        }
        if Instant::now() >= next {
            seconds.close((next - start).as_secs_f64(), &mut progress);
            next += Duration::from_secs(1);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let (thread_cpu, thread_queue): (Vec<f64>, Vec<Option<f64>>) = handles
        .into_iter()
        .map(|h| h.join().unwrap_or((0.0, None)))
        .unzip();
    let thread_queue: Vec<f64> = thread_queue.into_iter().flatten().collect();
    let idle_cores = (crate::host::idle_seconds() - idle_before.1).max(0.0)
        / idle_before.0.elapsed().as_secs_f64().max(1e-9);
    // The run's length is the publishers': the subscribers' drain is not in it, nor
    // the hold of clients connected to stay (their rate is the one they came at).
    let elapsed = match plan.client.unit_connects() {
        true => shared.units_done.load(Ordering::Relaxed) as f64 / 1e6,
        false => start.elapsed().as_secs_f64(),
    };
    if let Some(c) = companions {
        drain(c, &cancel, stop);
    }
    // Whatever the command units left running (a `setsid` child) ends with the run.
    drop(shared);
    // The last, partial second ([`Second::partial`]), unless it held nothing: the
    // exported live figures end with the run's totals.
    let last = seconds.take();
    if last.sent + last.completed + last.errors() > 0 {
        seconds.spans.push(&mut seconds.seconds, elapsed, &last);
        if let Some(s) = seconds.seconds.last() {
            progress(s, &last);
        }
    }
    let Seconds {
        mut seconds,
        mut spans,
        total,
        ..
    } = seconds;
    spans.end(&mut seconds);
    let (steps, custom) = per_step(&recs);
    Outcome {
        total,
        steps,
        custom,
        seconds,
        elapsed,
        scheduled: scheduled(plan),
        thread_cpu,
        thread_queue,
        connections_asked: match &plan.model {
            Model::Closed { connections, .. } => *connections,
            _ => 0,
        },
        connections_ready,
        threads,
        statuses: plan.client.statuses(),
        subscribers: plan.client.companions(),
        interrupted: cancel.load(Ordering::Relaxed),
        stolen_seconds: (crate::host::stolen_seconds() - stolen_before).max(0.0),
        idle_seconds: idle_cores * elapsed,
        agents: Vec::new(),
    }
}

/// Starts the connections the protocol keeps beside the units (MQTT subscribers), on
/// a thread of their own with a recorder of their own (added to `recs`).
fn companions(
    plan: &Plan,
    start: Instant,
    cancel: &Arc<AtomicBool>,
    recs: &mut Vec<Arc<Mutex<Recorder>>>,
) -> Option<Companions> {
    match plan.client.companions() {
        0 => None,
        n => {
            let rec = Arc::new(Mutex::new(Recorder::default()));
            recs.push(rec.clone());
            plan.client.start_companions(CompanionsAsk {
                mine: plan.slice.indexes(n),
                timeout: plan.timeout,
                start,
                rec,
                cancel: cancel.clone(),
            })
        }
    }
}

/// The worker threads of a plan: as asked, at least one, and no more than its slice's
/// connections (closed model) or clients (scenario).
fn threads(plan: &Plan) -> usize {
    let slice = plan.slice;
    match &plan.model {
        Model::Closed { connections, .. } => plan
            .threads
            .clamp(1, (slice.share(*connections as u64) as usize).max(1)),
        Model::Open { .. } | Model::Sessions { .. } => plan.threads.max(1),
        Model::Scenario(sc) => plan
            .threads
            .clamp(1, slice.share(sc.clients).max(1) as usize),
    }
}

/// The per-second series, from the workers' recorders, and the run's total so far.
struct Seconds<'a> {
    recs: &'a [Arc<Mutex<Recorder>>],
    spans: outcome::StepSpans,
    seconds: Vec<Second>,
    total: Tally,
}

impl Seconds<'_> {
    /// Closes the second ending `t` seconds after the start: every recorder's interval
    /// taken and merged, added to the total and to the series; returns the interval.
    fn snapshot(&mut self, t: f64) -> Tally {
        let iv = self.take();
        self.spans.push(&mut self.seconds, t, &iv);
        iv
    }

    /// Every recorder's interval taken and merged, added to the total.
    fn take(&mut self) -> Tally {
        let mut iv = Tally::default();
        for r in self.recs {
            let fresh = Tally::default();
            let part = r.lock().unwrap().take_interval(fresh);
            iv.merge(&part);
        }
        self.total.merge(&iv);
        iv
    }

    /// Closes the second ending `t` seconds after the start and tells `progress`.
    fn close(&mut self, t: f64, progress: &mut impl FnMut(&Second, &Tally)) {
        let iv = self.snapshot(t);
        if let Some(s) = self.seconds.last() {
            progress(s, &iv);
        }
    }
}

/// Waits for the companions to end once the units are done: the deliveries still on
/// their way are waited for (at most the timeout), and a Ctrl-C meanwhile cancels the
/// drain.
fn drain(c: Companions, cancel: &AtomicBool, stop: &dyn Fn() -> bool) {
    c.units_done.store(true, Ordering::Relaxed);
    while !c.thread.is_finished() {
        if stop() {
            cancel.store(true, Ordering::Relaxed);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = c.thread.join();
}

/// The whole run's figures per scenario step and per custom metric, every recorder's
/// merged.
fn per_step(recs: &[Arc<Mutex<Recorder>>]) -> (Vec<Tally>, Vec<crate::load::custom::Custom>) {
    let mut steps: Vec<Tally> = Vec::new();
    let mut custom = Vec::new();
    for r in recs {
        let r = r.lock().unwrap();
        if steps.len() < r.steps.len() {
            steps.resize_with(r.steps.len(), Tally::default);
        }
        for (i, t) in r.steps.iter().enumerate() {
            steps[i].merge(t);
        }
        crate::load::custom::merge_all(&mut custom, &r.custom);
    }
    (steps, custom)
}
