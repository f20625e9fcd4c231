//! A scenario's virtual clients, each running its flow on one connection: its `once`
//! steps in order, then its periodic steps at their intended times and its weighted mix
//! in between. A step sends with the client's variables and cookies, takes values from
//! its reply and checks it ([`super::super::flow`]); when it fails, the step's
//! `on_failure` says whether the client goes on, sends it again, starts its flow again
//! from its first `once` step (a device that re-registers), or stops. A `[sessions]`
//! scenario's sessions are such clients too, each running every step once and leaving.

use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hyper::header::{HeaderValue, COOKIE};

use super::{exchange, goodbye, sleep_or_stop, Ctx, Slot, Timing};
use crate::load::client::{Conn, Reply};
use crate::load::flow::{Check, Jar, Kept, OnFailure};
use crate::load::recorder::{counters, ErrorKind, Recorder};
use crate::load::request::Outgoing;
use crate::load::scenario::{Scenario, Step, Unsent, When, MAX_REDIRECTS};
use crate::load::schedule::Share;
use crate::load::script::{self, Caller, Script};
use crate::rng::{mix, Rng};

/// One virtual client of a scenario, from its start to the run's end.
pub(super) async fn scenario_client(ctx: Rc<Ctx>, sc: Arc<Scenario>, client: u64) {
    let slot = ctx.slot();
    let mut conn: Option<Conn> = None;
    tokio::time::sleep_until(ctx.start.into()).await;
    if sleep_or_stop(&ctx, ctx.start + sc.start_offset(client)).await {
        let end = sc.end_offset(client).map(|e| ctx.start + e);
        let _running = ctx.running();
        let mut me = Client::new(&ctx, &sc, client, &slot, &mut conn, end);
        loop {
            if !me.take_row() {
                break;
            }
            if me.flow().await != Then::Restart {
                break;
            }
            me.session.restart();
        }
    }
    goodbye(&ctx, conn).await;
}

/// This thread's share of a `[sessions]` scenario: each arrival of `share` starts a
/// session at its intended time, at most `cap` at once (a session due while `cap` run
/// starts late, and its first step's latency, from the intended time, says so).
pub(super) async fn sessions(ctx: Rc<Ctx>, sc: Arc<Scenario>, mut share: Share, cap: usize) {
    let mut running = tokio::task::JoinSet::new();
    while let Some(t) = share.next() {
        let intended = ctx.start + Duration::from_secs_f64(t);
        if !sleep_or_stop(&ctx, intended).await || out_of_tickets(&ctx) {
            break;
        }
        while running.try_join_next().is_some() {}
        while running.len() >= cap {
            running.join_next().await;
        }
        running.spawn_local(session(ctx.clone(), sc.clone(), share.position(), intended));
    }
    while running.join_next().await.is_some() {}
}

/// Whether `-n`'s requests are all taken.
fn out_of_tickets(ctx: &Ctx) -> bool {
    ctx.tickets
        .as_ref()
        .is_some_and(|t| t.load(Ordering::Relaxed) <= 0)
}

/// One session, `id` its position among all arrivals: every step once, in order, the
/// first due at `intended`, each next one when the last ended (and its think time).
async fn session(ctx: Rc<Ctx>, sc: Arc<Scenario>, id: u64, intended: Instant) {
    let slot = ctx.slot();
    let mut conn: Option<Conn> = None;
    ctx.rec.lock().unwrap().count(Some(0), "flow.sessions");
    let _running = ctx.running();
    {
        let mut me = Client::new(&ctx, &sc, id, &slot, &mut conn, None);
        let mut due = intended;
        loop {
            if !me.take_row() {
                break;
            }
            match me.pass(due).await {
                Then::Restart => {
                    me.session.restart();
                    due = Instant::now();
                }
                Then::Next => {
                    let last = sc.steps.len().saturating_sub(1);
                    ctx.rec.lock().unwrap().count(Some(last), "flow.completed");
                    break;
                }
                Then::End => break,
            }
        }
    }
    goodbye(&ctx, conn).await;
    ctx.forget(&slot);
}

/// A client's variables and cookies.
struct Session {
    values: Vec<Option<String>>,
    /// The step a script's `response(r)` chose to go to next (`r.next`).
    next: Option<String>,
    /// Its row of the data file (taken as its flow starts).
    row: Option<crate::load::feed::Row>,
    jar: Jar,
    cookies: bool,
    /// The target's host (the jar's domain matching) and whether it speaks TLS.
    host: String,
    secure: bool,
    /// The last reply of a step whose loop has `until` met its condition.
    until_met: bool,
}

impl Session {
    fn new(sc: &Scenario, (authority, secure): (String, bool)) -> Session {
        let host = match authority.rsplit_once(':') {
            Some((h, port)) if port.bytes().all(|b| b.is_ascii_digit()) => h,
            _ => &authority,
        };
        Session {
            values: vec![None; sc.vars.len()],
            next: None,
            row: None,
            until_met: false,
            jar: Jar::default(),
            cookies: sc.cookies,
            host: host.trim_matches(['[', ']']).to_string(),
            secure,
        }
    }

    /// A flow started again forgets what it extracted; its cookies stay, as a
    /// browser's would.
    fn restart(&mut self) {
        self.values.iter_mut().for_each(|v| *v = None);
    }
}

/// What a client does after a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Then {
    Next,
    Restart,
    /// Stopped by its step's `on_failure`, or the run is over.
    End,
}

struct Client<'a> {
    ctx: &'a Rc<Ctx>,
    sc: &'a Arc<Scenario>,
    id: u64,
    slot: &'a Rc<Slot>,
    conn: &'a mut Option<Conn>,
    seq: u64,
    /// When its stages end it (`stages`), if they do.
    end: Option<Instant>,
    rng: Rng,
    session: Session,
    /// Whether its last step succeeded (after its retries).
    last_ok: bool,
}

/// A group a client is running the steps of: since when (the first one's intended
/// time), until its last reply, and whether each step succeeded.
struct InGroup {
    group: usize,
    since: Instant,
    until: Instant,
    ok: bool,
}

impl<'a> Client<'a> {
    /// Client `id` of `sc`, its stream seeded by the scenario and its number, ending at
    /// `end` if its stages say.
    fn new(
        ctx: &'a Rc<Ctx>,
        sc: &'a Arc<Scenario>,
        id: u64,
        slot: &'a Rc<Slot>,
        conn: &'a mut Option<Conn>,
        end: Option<Instant>,
    ) -> Client<'a> {
        Client {
            ctx,
            sc,
            id,
            slot,
            conn,
            seq: 0,
            end,
            rng: Rng::new(mix(sc.seed ^ id)),
            session: Session::new(sc, ctx.client.origin()),
            last_ok: true,
        }
    }

    /// Takes a row of the data file for this run of the flow, and gives the flow its
    /// `[vars]`; false when there is none
    /// to take (the client stops; counted, by why, under the first step, where the flow
    /// begins).
    fn take_row(&mut self) -> bool {
        let why = match self.sc.take_row(self.id, &mut self.rng) {
            Ok(row) => {
                self.session.row = row;
                let s = &mut self.session;
                self.sc
                    .start_values(self.id, &mut s.values, s.row.as_deref());
                return true;
            }
            Err(crate::load::feed::NoRow::RanOut) => "flow.exhausted",
            Err(crate::load::feed::NoRow::Unreadable) => "flow.data_unreadable",
        };
        self.ctx.rec.lock().unwrap().count(Some(0), why);
        false
    }

    /// Whether the run is over for this client (cancelled, past its end, or out of
    /// `-n` tickets: taking one when not).
    fn over(&self) -> bool {
        let ctx = self.ctx;
        self.end.is_some_and(|e| Instant::now() >= e)
            || ctx.cancel.load(Ordering::Relaxed)
            || ctx.deadline.is_some_and(|d| Instant::now() >= d)
            || ctx
                .tickets
                .as_ref()
                .is_some_and(|t| t.fetch_sub(1, Ordering::Relaxed) <= 0)
    }

    /// The flow once through: its `once` steps, then its periodic and weighted steps
    /// until the run ends, a step stops the client, or one starts the flow again.
    async fn flow(&mut self) -> Then {
        let sc = self.sc.clone();
        let once: Vec<usize> = (0..sc.steps.len())
            .filter(|&i| sc.steps[i].when == When::Once)
            .collect();
        let then = self.sequence(&once, Instant::now()).await;
        if then != Then::Next {
            return then;
        }
        let t0 = Instant::now();
        let mut periodic: Vec<(usize, Duration, Instant)> = sc
            .steps
            .iter()
            .enumerate()
            .filter_map(|(i, s)| match s.when {
                When::Every(p) => Some((i, p, t0 + sc.phase(self.id, p))),
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
                        self.ctx.rec.lock().unwrap().lag(now - next);
                        (i, now)
                    } else {
                        // Held up by its own previous request: measured from the
                        // intended time, so a slow target cannot hide its slowness.
                        (i, next)
                    }
                }
                _ if total_weight > 0 => {
                    // A script's choice of the next step, if it names one of the mix.
                    let chosen = self.session.next.take().and_then(|n| {
                        mix.iter()
                            .find(|(i, _)| sc.steps[*i].name == n)
                            .map(|m| m.0)
                    });
                    if let Some(i) = chosen {
                        (i, now)
                    } else {
                        let mut pick = self.rng.below(total_weight);
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
                }
                Some((_, next)) => {
                    if !self.sleep(next).await {
                        return Then::End;
                    }
                    just_woke = true;
                    continue;
                }
                None => return Then::End,
            };
            just_woke = false;
            let started = Instant::now();
            let then = self.step(step, intended).await;
            if then != Then::Next || !self.think(step, started).await {
                return then.min_end();
            }
        }
    }

    /// A session's pass: every step once, in order (its loops as they say), the first
    /// due at `due`; `Next` when every step was run.
    async fn pass(&mut self, due: Instant) -> Then {
        let all: Vec<usize> = (0..self.sc.steps.len()).collect();
        self.sequence(&all, due).await
    }

    /// Steps `order` one after the other, the first due at `due`, each next one when
    /// the last ended and its think time passed; a step with a `loop` goes back to its
    /// group's first step until the group ran its times. `Next` when all were run.
    async fn sequence(&mut self, order: &[usize], mut due: Instant) -> Then {
        let sc = self.sc.clone();
        // Each loop's runs so far and its times this time, by the step that ends it.
        let mut laps: Vec<Option<(u32, u32)>> = vec![None; sc.steps.len()];
        let mut k = 0;
        let mut in_group: Option<InGroup> = None;
        while let Some(&i) = order.get(k) {
            let group = sc.steps[i].group;
            if in_group.as_ref().map(|g| g.group) != group {
                in_group = group.map(|group| InGroup {
                    group,
                    since: due,
                    until: due,
                    ok: true,
                });
            }
            let started = Instant::now();
            let then = self.step(i, due).await;
            if let Some(g) = in_group.as_mut() {
                g.until = Instant::now();
                g.ok &= self.last_ok;
            }
            if then != Then::Next {
                // A group left halfway (the run ended, the client stopped or started
                // again) is not a run of it.
                return then.min_end();
            }
            let next = self.lap(i, k, order, &mut laps);
            // A group ends at its last step's reply (its think time is not the group's).
            let group_next = order.get(next).and_then(|&j| sc.steps[j].group);
            if in_group.is_some() && group_next != group {
                self.group_done(in_group.take());
            }
            if !self.think(i, started).await {
                return Then::End;
            }
            due = Instant::now();
            k = next;
        }
        Then::Next
    }

    /// Where `order` goes after its `k`th step, `i`: the next one, or back to the first
    /// of `i`'s loop until the loop ran its times (or its `until` was met).
    fn lap(
        &mut self,
        i: usize,
        k: usize,
        order: &[usize],
        laps: &mut [Option<(u32, u32)>],
    ) -> usize {
        let Some(l) = &self.sc.steps[i].repeat else {
            return k + 1;
        };
        let rng = &mut self.rng;
        let (done, times) = laps[i].get_or_insert_with(|| (0, l.draw(rng)));
        *done += 1;
        let met = std::mem::take(&mut self.session.until_met);
        if *done < *times && !met {
            return order.iter().position(|&j| j == l.from).expect("checked");
        }
        if l.until.is_some() && !met {
            // Polled its most times without the condition: counted, and the flow
            // goes on.
            let mut rec = self.ctx.rec.lock().unwrap();
            rec.count(Some(i), "flow.loops_exhausted");
        }
        laps[i] = None;
        k + 1
    }

    /// A group whose steps the client ran in a row: its duration recorded.
    fn group_done(&self, g: Option<InGroup>) {
        if let Some(g) = g {
            let at = self.sc.steps.len() + g.group;
            let mut rec = self.ctx.rec.lock().unwrap();
            rec.group(at, g.until - g.since, g.ok);
        }
    }

    /// Sleeps until `until` (or the client's end); false when the run or the client
    /// ended meanwhile.
    async fn sleep(&self, until: Instant) -> bool {
        match self.end {
            Some(end) if end <= until => {
                let _ = sleep_or_stop(self.ctx, end).await;
                false
            }
            _ => sleep_or_stop(self.ctx, until).await,
        }
    }

    /// The step's pause after it (it `started` then); false when the run ended
    /// meanwhile.
    async fn think(&mut self, i: usize, started: Instant) -> bool {
        let think = self.sc.steps[i].think;
        let now = Instant::now();
        let pause = think.draw(&mut self.rng, started, now);
        think.is_zero() || self.sleep(now + pause).await
    }

    /// Step `i`, due at `intended`, with its retries; what the client does next.
    async fn step(&mut self, i: usize, mut intended: Instant) -> Then {
        let sc = self.sc.clone();
        let st = &sc.steps[i];
        let mut retried = 0u32;
        loop {
            if self.over() {
                return Then::End;
            }
            self.last_ok = self.send(st, i, intended).await;
            if self.last_ok {
                return Then::Next;
            }
            let count = |key: &str| self.ctx.rec.lock().unwrap().count(Some(i), key);
            match st.on_failure {
                OnFailure::Continue => return Then::Next,
                OnFailure::Stop => {
                    count("flow.stopped");
                    return Then::End;
                }
                OnFailure::Restart => {
                    count("flow.restarts");
                    return Then::Restart;
                }
                OnFailure::Retry { times, backoff } if retried < times => {
                    count("flow.retries");
                    let wait = backoff.saturating_mul(1 << retried.min(16));
                    retried += 1;
                    if !self.sleep(Instant::now() + wait).await {
                        return Then::End;
                    }
                    intended = Instant::now();
                }
                OnFailure::Retry { .. } => return Then::Next,
            }
        }
    }

    /// Step `i` was not sent: its request could not go on the wire (counted as
    /// `invalid_request`, and by field and culprit).
    fn unsent(&self, i: usize, unsent: &Unsent) -> bool {
        let mut rec = self.ctx.rec.lock().unwrap();
        rec.sent(Some(i));
        rec.error(Some(i), ErrorKind::InvalidRequest);
        rec.count(Some(i), &unsent.key());
        false
    }

    /// Sends step `i` once and judges its reply; whether it succeeded. A step whose
    /// variable was never extracted is not sent: it fails with cause `extract`.
    async fn send(&mut self, st: &Step, i: usize, intended: Instant) -> bool {
        let sc = self.sc.clone();
        let s = &mut self.session;
        sc.set_values(i, self.id, self.seq, &mut s.values, s.row.as_deref());
        if let Some(var) = sc.missing(i, &self.session.values) {
            let mut rec = self.ctx.rec.lock().unwrap();
            rec.sent(Some(i));
            rec.error(Some(i), ErrorKind::Extract);
            rec.count(Some(i), &format!("extract.{var}.missing"));
            return false;
        }
        let pick = mix(sc.seed ^ self.id ^ (self.seq << 24));
        let s = &self.session;
        let req = sc.request(i, self.id, self.seq, pick, &s.values, s.row.as_deref());
        self.seq += 1;
        let mut req = match req {
            Ok(r) => r,
            Err(unsent) => return self.unsent(i, &unsent),
        };
        let mut scripted = None;
        if let Some(script) = sc.script.as_ref().filter(|s| s.has_request) {
            scripted = Some(req.path.clone());
            let caller = Caller {
                step: &st.name,
                client: self.id,
                seq: self.seq - 1,
                names: &sc.vars,
                values: &mut self.session.values,
                random: self.rng.unit(),
            };
            let held = Instant::now();
            let said = script::request(script, sc.seed, caller, &mut req);
            let fed = script::take_fed();
            let mut rec = self.ctx.rec.lock().unwrap();
            rec.hook(held.elapsed());
            if said.is_ok() {
                feed_script(&sc, fed, i, &mut rec);
            }
            drop(rec);
            if let Err(why) = said {
                script_failed(&why.0);
                let mut rec = self.ctx.rec.lock().unwrap();
                rec.sent(Some(i));
                rec.error(Some(i), ErrorKind::Script);
                return false;
            }
        }
        let random = self.rng.unit();
        let self_id = self.id;
        // The seq the request was rendered with: its checks render with the same.
        let seq = self.seq - 1;
        for hop in 0.. {
            if let Err(unfit) = self.ctx.client.fit(&mut req) {
                let s = &self.session;
                let mut unsent = sc.unsent(i, self.id, &s.values, s.row.as_deref(), unfit);
                if hop > 0 {
                    unsent.by = "location".to_string();
                } else if scripted.as_ref().is_some_and(|p| *p != req.path) {
                    unsent.by = "script".to_string();
                }
                return self.unsent(i, &unsent);
            }
            let s = &mut self.session;
            if s.cookies {
                req.headers.retain(|(k, _)| *k != COOKIE);
                if let Some(c) = s.jar.header(&s.host, &req.path, s.secure) {
                    // The jar's text itself, not a copy of it.
                    if let Ok(v) = HeaderValue::from_maybe_shared(bytes::Bytes::from(c)) {
                        req.headers.push((COOKIE, v));
                    }
                }
            }
            let path = req.path.as_str();
            let client = &self.ctx.client;
            let follow = st.follow && hop < MAX_REDIRECTS;
            let mut next: Option<(u16, String)> = None;
            let mut judged = |reply: &mut Reply, latency: Duration, rec: &mut Recorder| {
                if follow && matches!(reply.status, 301 | 302 | 303 | 307 | 308) {
                    let to = reply.kept.as_ref().and_then(|k| k.header("location"));
                    let to = to.map(|l| client.redirect(l, path));
                    if to == Some(None) {
                        rec.count(Some(i), "flow.redirects_not_followed");
                    }
                    if let Some(Some(to)) = to {
                        // A hop: its cookies kept, its checks left to the last reply.
                        let kept = reply.kept.take().expect("read above");
                        if s.cookies {
                            for (_, v) in kept.headers.iter().filter(|(k, _)| k == "set-cookie") {
                                s.jar.store(&s.host, path, v);
                            }
                        }
                        next = Some((reply.status, to));
                        return true;
                    }
                }
                if let (Some(until), Some(kept)) = (
                    st.repeat.as_ref().and_then(|l| l.until.as_deref()),
                    reply.kept.as_deref(),
                ) {
                    let mut own = None;
                    let v = sc.vars(self_id, seq, &s.values, s.row.as_deref(), &mut own);
                    s.until_met = until.passes(reply.status, kept, latency, &v);
                }
                let mut failed = judge(&sc, (self_id, seq), st, i, path, s, reply, latency, rec);
                if let Some(script) = sc.script.as_ref().filter(|s| s.has_response) {
                    let held = Instant::now();
                    failed |= hook(script, &sc, st, i, self_id, random, s, reply, latency, rec);
                    rec.hook(held.elapsed());
                }
                // One failed reply, however many of its checks failed.
                if failed {
                    rec.count(Some(i), counters::CHECKS_FAILED);
                }
                false
            };
            let sent_at = Instant::now();
            let ok = exchange(
                self.ctx,
                self.slot,
                self.conn,
                Outgoing::Rendered(&req),
                Some(i),
                Timing {
                    intended,
                    sent_at,
                    load: None,
                },
                Some(&mut judged),
            )
            .await;
            // A hop's latency runs on: the step's is from its intended time to its
            // last reply.
            match next {
                Some((status, to)) if ok => redirect(&mut req, status, to),
                _ => return ok,
            }
        }
        unreachable!("the loop returns")
    }
}

/// The request a redirect asks for: 303 (and 301/302 after a POST, as browsers do) is
/// a GET without a body; 307 and 308 repeat the method and body.
fn redirect(req: &mut crate::load::request::Rendered, status: u16, to: String) {
    use hyper::header::{CONTENT_LENGTH, CONTENT_TYPE};
    use hyper::Method;
    let to_get = status == 303 || (matches!(status, 301 | 302) && req.method == Method::POST);
    if to_get && req.method != Method::HEAD {
        req.method = Method::GET;
        req.body = bytes::Bytes::new();
        req.headers
            .retain(|(k, _)| *k != CONTENT_TYPE && *k != CONTENT_LENGTH);
    }
    req.path = to;
}

impl Then {
    /// A step's "go on" cut short by the end of the run is the end.
    fn min_end(self) -> Then {
        match self {
            Then::Next => Then::End,
            t => t,
        }
    }
}

/// Tells the first failure of a script in the run (each is counted; one is shown).
fn script_failed(why: &str) {
    static TOLD: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if !TOLD.swap(true, Ordering::Relaxed) {
        tracing::warn!("script: {why}");
    }
}

/// The script's `response(r)` on step `i`'s reply (after its checks), counted as the
/// check `script` where it judged: a `true` passes it, a `false` fails it (cause
/// `check:script`, or `check:script:NAME` for `false, "NAME"`), nothing returned is no
/// verdict (no check counted); an error fails the reply as the script's (cause
/// `script`, not a check); `r.next` chooses the client's next step. True when the
/// script's check failed.
#[allow(clippy::too_many_arguments)]
fn hook(
    script: &std::sync::Arc<Script>,
    sc: &Scenario,
    st: &Step,
    i: usize,
    client: u64,
    random: f64,
    s: &mut Session,
    reply: &mut Reply,
    latency: Duration,
    rec: &mut Recorder,
) -> bool {
    let mut empty = Kept::default();
    let kept = reply.kept.as_deref_mut().unwrap_or(&mut empty);
    let caller = Caller {
        step: &st.name,
        client,
        seq: 0,
        names: &sc.vars,
        values: &mut s.values,
        random,
    };
    let said = script::response(script, sc.seed, caller, reply.status, kept, latency);
    let fed = script::take_fed();
    if said.is_ok() {
        feed_script(sc, fed, i, rec);
    }
    let cause = match said {
        // The hook is one check, `script`: its passes and failures, the failure's
        // name (`return false, "signed"`) in its cause.
        Ok(said) => {
            s.next = said.next;
            match said.failed {
                None => {
                    if said.judged {
                        rec.count(Some(i), "check.script.passed");
                    }
                    None
                }
                Some(name) => {
                    rec.count(Some(i), "check.script.failed");
                    Some(match name.as_str() {
                        "script" => "check:script".to_string(),
                        n => format!("check:script:{n}"),
                    })
                }
            }
        }
        Err(why) => {
            script_failed(&why.0);
            rec.count(Some(i), "flow.script_errors");
            Some("script".to_string())
        }
    };
    let checked = cause.as_deref().is_some_and(|c| c.starts_with("check:"));
    if let Some(cause) = cause {
        if reply.ok && reply.status < 400 {
            rec.count(Some(i), &format!("cause.{cause}"));
        }
        reply.ok = false;
    }
    checked
}

/// What a metric is fed: an extraction's text, or the script's number or boolean.
enum Value<'a> {
    Text(&'a str),
    Number(f64),
}

/// Feeds the scenario's metric `k` on step `i`: a value it cannot take (a trend fed
/// `abc`, a negative count) is counted on the step (`metric.NAME.not_a_value`), not fed.
fn feed(sc: &Scenario, k: usize, v: Value, i: usize, rec: &mut Recorder) {
    let (name, kind) = &sc.metrics[k];
    let x = match v {
        Value::Text(t) => kind.value_of(t),
        Value::Number(x) if *kind == crate::load::custom::Kind::Rate => {
            x.is_finite().then_some(f64::from(x != 0.0))
        }
        Value::Number(x) => crate::load::custom::fits(x).then_some(x),
    };
    match x {
        Some(x) => rec.metric(k, *kind, x),
        None => rec.count(Some(i), &format!("metric.{name}.not_a_value")),
    }
}

/// What the script fed metrics in its last call, fed to the scenario's. A name not in
/// `[metrics]` is counted on the step as `metric.undeclared` — one key, whatever the
/// name, so that a script making up names cannot grow the counters — and the first told.
fn feed_script(sc: &Scenario, fed: Vec<(String, f64)>, i: usize, rec: &mut Recorder) {
    for (name, x) in fed {
        match sc.metrics.iter().position(|(n, _)| *n == name) {
            Some(k) => feed(sc, k, Value::Number(x), i, rec),
            None => {
                // Told once, apart from the script's errors (whose first is told too).
                static TOLD: std::sync::atomic::AtomicBool =
                    std::sync::atomic::AtomicBool::new(false);
                if !TOLD.swap(true, Ordering::Relaxed) {
                    tracing::warn!("script: strainline.metric: '{name}' is not declared in the scenario's [metrics]");
                }
                rec.count(Some(i), "metric.undeclared");
            }
        }
    }
}

/// Takes what step `i`'s reply gives the client (its cookies, its extracted values)
/// and checks it: a failed extraction or check fails the reply, counted by its cause
/// (`cause.check:NAME`) unless its status (400 and above) is the cause shown. True when
/// one of its checks failed.
#[allow(clippy::too_many_arguments)]
fn judge(
    sc: &Scenario,
    (client, seq): (u64, u64),
    st: &Step,
    i: usize,
    path: &str,
    s: &mut Session,
    reply: &mut Reply,
    latency: Duration,
    rec: &mut Recorder,
) -> bool {
    let Some(kept) = reply.kept.take() else {
        return false;
    };
    if s.cookies {
        for (_, v) in kept.headers.iter().filter(|(k, _)| k == "set-cookie") {
            s.jar.store(&s.host, path, v);
        }
    }
    if st.checks_status() {
        reply.ok = true; // the checks say which statuses succeed
    }
    let mut cause = None;
    let mut checked = false;
    for e in &st.extract {
        let found = e.source.find(&kept, &s.jar);
        if found.is_none() {
            let why = if kept.cut { "too_large" } else { "missing" };
            rec.count(Some(i), &format!("extract.{}.{why}", e.name));
            cause.get_or_insert_with(|| format!("extract:{}", e.name));
        }
        if let (Some(k), Some(text)) = (e.metric, found.as_deref()) {
            feed(sc, k, Value::Text(text), i, rec);
        }
        s.values[e.var] = found;
    }
    // The checks' texts are rendered with what the client holds now, this reply's
    // extractions included; its data row is looked up only when a text reads it.
    let mut own = None;
    let row = match st.checks.iter().any(Check::templated) {
        true => s.row.as_deref(),
        false => Some(&[][..]),
    };
    let v = sc.vars(client, seq, &s.values, row, &mut own);
    for c in &st.checks {
        if c.passes(reply.status, &kept, latency, &v) {
            rec.count(Some(i), c.key(true));
        } else {
            rec.count(Some(i), c.key(false));
            cause.get_or_insert_with(|| format!("check:{}", c.name));
            checked = true;
        }
    }
    if let Some(cause) = cause {
        // A status of 400 and above is a cause of its own in the summary already.
        if reply.status < 400 {
            rec.count(Some(i), &format!("cause.{cause}"));
        }
        reply.ok = false;
    }
    // Kept for the script's `response(r)`, which reads the same reply.
    reply.kept = Some(kept);
    checked
}
