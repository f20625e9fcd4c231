//! What the load kinds (`bench`, `ramp`, `soak`, `rounds`) share: a run of the load
//! engine for a case ([`drive`]), the target's CPU and thread states around it, the
//! generator's verdict, the figures every load case stores, and a case's set-up
//! requests ([`set_up`]). The dispatch to each kind is `kinds/mod.rs`'s.

use std::collections::HashMap;
use std::time::Duration;

use super::lines::Line;
use super::{CaseCtx, CaseResult, Status};
use crate::load::schedule::Rate;
use crate::load::summary::LoadSummary;
use crate::load::verdict::{self, Validity};
use crate::load::{self, BodySpec, ClientOptions, LoadSpec, Offer, Outcome, Work};
use crate::measure::Sample;
use crate::monitor::procfs::kernel_units;
use crate::suite::{substitute, Workload};
use crate::sut::lifecycle::Running;
use crate::sut::probe;

/// One run of the load engine for this case.
pub(super) struct Run {
    pub outcome: Outcome,
    pub verdict: verdict::Verdict,
    pub summary: LoadSummary,
    /// When it started and ended, on the watcher's clock (seconds).
    pub window: (f64, f64),
}

/// The test's workload as a load spec; `rate` None is the closed model.
pub(super) fn load_spec(
    ctx: &CaseCtx,
    rate: Option<Rate>,
    connections: Option<usize>,
    duration: Option<Duration>,
    count: Option<u64>,
) -> LoadSpec {
    let w = ctx.test.workload().expect("a load kind has a workload");
    let work = match (&w.command, &w.url) {
        (Some(argv), _) => Work::Command(argv.iter().map(|a| substitute(a, &ctx.vars)).collect()),
        (None, url) => Work::Http {
            url: substitute(url.as_deref().unwrap_or_default(), &ctx.vars),
            method: w.method.clone(),
            headers: w
                .headers
                .iter()
                .map(|(k, v)| (k.clone(), substitute(v, &ctx.vars)))
                .collect(),
            body: w.body.as_ref().map_or(BodySpec::Empty, |b| {
                BodySpec::Bytes(substitute(b, &ctx.vars).into_bytes())
            }),
        },
    };
    let offer = match (&w.scenario, rate) {
        (Some(path), _) => Offer::Scenario(path.clone()),
        (None, Some(rate)) => Offer::Open {
            rate,
            poisson: None,
            pool_cap: connections,
        },
        (None, None) => Offer::Closed {
            connections,
            think: Duration::ZERO,
        },
    };
    LoadSpec {
        work,
        offer,
        threads: w.threads,
        duration,
        count,
        timeout: w.timeout,
        client: ClientOptions {
            http2: w.http2,
            streams: w.streams,
            cacert_pem: w.cacert_pem.clone(),
            client_cert: w.client_cert.clone(),
            insecure: w.insecure,
            reply_field: w.reply_field.clone(),
            ..ClientOptions::from_env()
        },
        vars: Vec::new(),
        seed: None,
        // What its gates read beyond the usual five (`latency_p75`) is kept.
        percentiles: crate::load::spec::Percentiles {
            shown: Vec::new(),
            gated: ctx
                .test
                .gates
                .iter()
                .filter_map(|g| crate::metrics::asked_percentile(&g.metric))
                .collect(),
        },
    }
}

/// One run of the load engine: open at a constant `rate`, closed without one.
pub(super) fn drive(
    ctx: &CaseCtx,
    running: Option<&Running>,
    rate: Option<f64>,
    connections: Option<usize>,
    duration: Option<Duration>,
    count: Option<u64>,
) -> crate::error::Result<Run> {
    let rate = rate.map(Rate::Constant);
    drive_at(ctx, running, rate, connections, duration, count)
}

/// One run of the load engine: open at `rate` (any shape: stages, a jump), closed
/// without one.
pub(super) fn drive_at(
    ctx: &CaseCtx,
    running: Option<&Running>,
    rate: Option<Rate>,
    connections: Option<usize>,
    duration: Option<Duration>,
    count: Option<u64>,
) -> crate::error::Result<Run> {
    let spec = load_spec(ctx, rate, connections, duration, count);
    let mut planned = load::plan(&spec)?;
    if let Some(duet) = ctx.duet {
        // Both versions' loads start on the same second of the clock (the engine starts
        // on a whole second): the other side must be ready too.
        duet.together
            .meet(duet.side, std::time::Duration::from_secs(120));
    }
    // Each run (a ramp's step) is one session of every agent.
    let agents = match ctx.agents {
        Some(fleet) => {
            fleet.check(&spec)?;
            let ready = crate::agents::coordinator::connect(fleet)?;
            planned.on_agents(ready.count());
            Some(ready)
        }
        None => None,
    };
    // A live line on a terminal: a soak of hours shows it is alive.
    let prefix = format!("{} ", ctx.case.name);
    let crate::agents::session::Session {
        outcome,
        verdict: v,
        summary,
    } = crate::agents::session::drive(&spec, &planned, agents, (true, &prefix), &*ctx.observer)?;
    // The measured window: the load engine's own clock starts after its warm-up.
    let t1 = running.map_or(outcome.elapsed, |r| {
        r.watcher.started.elapsed().as_secs_f64()
    });
    let t0 = t1 - outcome.elapsed;
    if !summary.agents.is_empty() {
        *ctx.agent_parts.borrow_mut() = summary.agents.clone();
    }
    Ok(Run {
        outcome,
        verdict: v,
        summary,
        window: (t0, t1),
    })
}

pub(super) fn samples(running: Option<&Running>) -> Vec<Sample> {
    running.map_or_else(Vec::new, |r| {
        r.watcher.shared.lock().unwrap().samples.clone()
    })
}

/// The target tree's average CPU (cores) over a window of the watcher's clock.
pub(super) fn cpu_in(samples: &[Sample], (a, b): (f64, f64)) -> f64 {
    let v: Vec<f64> = samples
        .iter()
        .filter(|s| s.t > a && s.t <= b)
        .map(|s| s.cpu_cores)
        .collect();
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

/// The target tree's CPU seconds during a run of the load engine: from the scheduler's
/// clocks read just before and just after it (nanoseconds; the cgroup's microseconds),
/// else — a process came or went between the readings, or the target is on another
/// machine — from the monitor's samples over the run's window (clock ticks).
pub(super) fn cpu_seconds_of(
    running: Option<&Running>,
    before: Option<&crate::sut::lifecycle::CpuReading>,
    run: &Run,
) -> f64 {
    let exact = running
        .zip(before)
        .and_then(|(r, b)| b.until(&r.cpu_now()?));
    exact.unwrap_or_else(|| cpu_in(&samples(running), run.window) * (run.window.1 - run.window.0))
}

/// Each thread of the target's tree: its CPU ticks and its run-queue wait (ns, from
/// `schedstat`; 0 where the kernel keeps none).
pub(super) fn thread_ticks(running: &Running) -> HashMap<u32, (u64, u64)> {
    let mut out = HashMap::new();
    // Thread ids are unique across the machine: one map for the whole tree (a worker
    // forked by a master, as nginx does, is where the CPU goes).
    for pid in running.pids() {
        let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        for e in dir.flatten() {
            let Some(tid) = e.file_name().to_str().and_then(|s| s.parse().ok()) else {
                continue;
            };
            if let Some(st) = std::fs::read_to_string(e.path().join("stat"))
                .ok()
                .and_then(|t| crate::monitor::procfs::parse_stat(&t))
            {
                let waited = std::fs::read_to_string(e.path().join("schedstat"))
                    .ok()
                    .and_then(|t| Some(crate::os::process::schedstat(&t)?[1]))
                    .unwrap_or(0);
                out.insert(tid, (st.cpu_ticks, waited));
            }
        }
    }
    out
}

/// Keeps the run's latency histogram (from intended send times) for the store and the
/// report's percentile curve, and its timeline ([`keep_seconds`]).
pub(super) fn keep_latency(r: &mut CaseResult, run: &Run) {
    keep_seconds(r, run);
    if let Some(encoded) = crate::load::recorder::hdr::stored(&run.outcome.total.corrected) {
        r.histograms
            .push(("latency_us".into(), (0.0, 0.0), encoded));
    }
}

/// Keeps a run's timeline: its figures and latency histogram of each second, and where
/// its second 0 is on the target's samples' clock. A case of several runs (a ramp's
/// steps) keeps them on the first one's clock: each run's seconds shifted by how long
/// after the first it started.
pub(super) fn keep_seconds(r: &mut CaseResult, run: &Run) {
    let first = (r.series.iter())
        .find(|(n, _)| n == crate::load::LOAD_START)
        .and_then(|(_, p)| p.first())
        .map(|p| p.1);
    let shift = first.map_or(0.0, |f| run.window.0 - f);
    if first.is_none() {
        r.series
            .push((crate::load::LOAD_START.into(), vec![(0.0, run.window.0)]));
    }
    let kept = run.outcome.stored_seconds(shift);
    r.series.extend(kept.series);
    r.histograms.extend(kept.histograms);
}

/// Over `seconds`: the busiest thread's share on a CPU (1.0 = all the time), the largest
/// share one thread was on a CPU or queued for one, and how many threads waited for a
/// CPU on average (run-queue time per second).
pub(super) fn busiest(
    before: &HashMap<u32, (u64, u64)>,
    after: &HashMap<u32, (u64, u64)>,
    seconds: f64,
) -> (f64, f64, f64) {
    let hz = kernel_units().clock_ticks as f64;
    let (mut top, mut demand, mut queued_all) = (0.0f64, 0.0f64, 0.0f64);
    for (tid, (ticks, wait)) in after {
        let (t0, w0) = before.get(tid).copied().unwrap_or((0, 0));
        let on_cpu = ticks.saturating_sub(t0) as f64 / hz / seconds;
        let queued = wait.saturating_sub(w0) as f64 / 1e9 / seconds;
        top = top.max(on_cpu);
        demand = demand.max(on_cpu + queued);
        queued_all += queued;
    }
    (top, demand, queued_all)
}

pub(super) fn load_metrics(ctx: &CaseCtx, r: &mut CaseResult, s: &LoadSummary) {
    // The target's figures; the generator's own (its CPU, its schedule lag) judge the
    // run's validity, not the target.
    let kind = ctx.test.kind;
    r.metrics.extend(
        load::summary::metrics(s)
            .into_iter()
            .filter(|m| crate::metrics::lookup(&m.name).is_some_and(|d| d.made_by(kind))),
    );
    r.table.push(Line::Load {
        description: s.description.clone(),
        achieved_rate: s.achieved_rate,
        p50_us: s.latency_us.p50,
        p99_us: s.latency_us.p99,
        error_rate: s.error_rate,
    });
    let checks: Vec<_> = s.steps.iter().flat_map(|st| &st.checks).cloned().collect();
    if !checks.is_empty() {
        r.table.push(Line::Checks { checks });
    }
    // A scenario's steps and checks, for the reports' tables.
    if !s.steps.is_empty() {
        r.details.scenario_steps = Some(s.steps.clone());
    }
    if let Some(d) = &s.deliveries {
        r.table.push(Line::Deliveries {
            deliveries: d.clone(),
        });
    }
}

/// What a run found about the target, named once per case however many runs the case
/// drives: its accept queue, when it kept connections from opening; the delayed-ACK
/// signature.
pub(super) fn findings(r: &mut CaseResult, run: &Run) {
    for (name, line) in [
        (
            "the target's accept queue",
            verdict::accept_queue(&run.outcome),
        ),
        ("Nagle's algorithm", verdict::delayed_ack(&run.outcome)),
    ] {
        // Each finding once a case: the words it begins with name it.
        let Some(line) = line else { continue };
        debug_assert!(line.starts_with(name), "{line}");
        let told = |l: &Line| matches!(l, Line::Finding { words } if words.starts_with(name));
        if !r.table.iter().any(told) {
            r.table.push(Line::Finding { words: line });
        }
    }
}

/// Whether the generator was the limit of a run (INVALID) or nothing succeeded
/// (FAILED), and what the run found about the target.
pub(super) fn judge_generator(r: &mut CaseResult, run: &Run) {
    findings(r, run);
    if run.verdict.status == Validity::Invalid {
        r.fail(
            Status::Invalid,
            format!("generator-bound: {}", run.verdict.reasons.join("; ")),
        );
    }
    if run.verdict.status == Validity::Failed {
        r.fail(Status::Failed, run.verdict.reasons.join("; "));
    }
}

/// Sends a case's set-up requests (`setup = [...]`) before its kind measures; a
/// refused one ends the case.
pub(super) fn set_up(ctx: &CaseCtx, w: &Workload) -> crate::error::Result<()> {
    for req in w.setup.iter().filter(|_| w.url.is_some()) {
        let base = substitute(w.url.as_deref().unwrap_or_default(), &ctx.vars);
        // Its server over HTTP (a WebSocket's too), as its protocol says.
        let origin = crate::load::proto::setup_origin(&base);
        let url = format!("{origin}{}", substitute(&req.path, &ctx.vars));
        match probe::request(&req.method, &url, &substitute(&req.body, &ctx.vars)) {
            Some(s) if s < 400 => {}
            other => {
                return Err(crate::Error::exit(
                    crate::exit::FAILED,
                    format!("set-up request {} {url} failed: {other:?}", req.method),
                ))
            }
        }
    }
    Ok(())
}

/// The target of a kind whose row says it is watched (`kind::Traits::watched`): the
/// suite refuses such a test without one.
pub(super) fn watched(running: Option<&Running>) -> &Running {
    running.expect("checked by the suite: a watched kind has a target")
}

/// Thread groups a step keeps (the busiest).
pub(super) const STEP_GROUPS: usize = 8;

/// The target's thread states so far, from its watcher (none when its processes are on
/// another machine).
pub(super) fn thread_states(running: &Running) -> Option<crate::monitor::threads::Tally> {
    if running.host.is_some() {
        return None;
    }
    Some(running.watcher.shared.lock().unwrap().threads.clone())
}

/// The target's thread states since `before`: a step's busiest groups.
pub(super) fn states_since(
    running: &Running,
    before: Option<crate::monitor::threads::Tally>,
) -> Option<crate::measure::threads::Breakdown> {
    let (a, b) = before.zip(thread_states(running))?;
    Some(b.since(&a).top(STEP_GROUPS))
}

/// The target's thread states over a bench or a soak: a line of the case's table with
/// the breakdown, the limit they name when the load was a closed model (as fast as the
/// target answers, so something limited it), and the breakdown in the case's details
/// (`threads`), for the reports.
pub(super) fn keep_thread_states(
    r: &mut CaseResult,
    b: Option<crate::measure::threads::Breakdown>,
    closed: bool,
) {
    let Some(b) = b.filter(|b| b.seconds > 0.0 && !b.groups.is_empty()) else {
        return;
    };
    r.table.push(Line::ThreadStates { closed });
    r.details.threads = Some(b);
}
