//! The HTTP kinds: `bench` (a fixed load, repeated), `ramp` (offered load in steps until
//! it breaks: the stress–strain curve, its ceiling, knee and limiting factor), `soak`
//! (constant load for long: leaks of memory, FDs and threads; capacity) and `rounds`
//! (N rounds of M operations with the memory retained after each — the job-server
//! seed's leak test).

use std::collections::HashMap;
use std::time::Duration;

use super::{d, CaseCtx, CaseResult, Status};
use crate::analysis::leak::{self, Policy};
use crate::analysis::{capacity, ramp, rounds};
use crate::load::schedule::Rate;
use crate::load::summary::LoadSummary;
use crate::load::verdict::{self, Validity};
use crate::load::{self, BodySpec, ClientOptions, LoadSpec, Offer, Outcome, Work};
use crate::measure::Sample;
use crate::monitor::procfs::kernel_units;
use crate::store::Metric;
use crate::suite::{self, substitute, LoadTest, Workload};
use crate::sut::lifecycle::Running;
use crate::sut::probe;

/// One run of the load engine for this case.
struct Run {
    outcome: Outcome,
    verdict: verdict::Verdict,
    summary: LoadSummary,
    /// When it started and ended, on the watcher's clock (seconds).
    window: (f64, f64),
}

/// The test's workload as a load spec; `rate` None is the closed model.
fn load_spec(
    ctx: &CaseCtx,
    rate: Option<f64>,
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
        (None, Some(r)) => Offer::Open {
            rate: Rate::Constant(r),
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
            insecure: w.insecure,
            reply_field: w.reply_field.clone(),
            ..ClientOptions::from_env()
        },
    }
}

fn drive(
    ctx: &CaseCtx,
    running: Option<&Running>,
    rate: Option<f64>,
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

fn samples(running: Option<&Running>) -> Vec<Sample> {
    running.map_or_else(Vec::new, |r| {
        r.watcher.shared.lock().unwrap().samples.clone()
    })
}

/// The target tree's average CPU (cores) over a window of the watcher's clock.
fn cpu_in(samples: &[Sample], (a, b): (f64, f64)) -> f64 {
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
fn cpu_seconds_of(
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
fn thread_ticks(running: &Running) -> HashMap<u32, (u64, u64)> {
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
/// report's percentile curve, and its figures of each second.
fn keep_latency(r: &mut CaseResult, run: &Run) {
    r.series.extend(run.outcome.per_second());
    if let Some(encoded) = crate::load::recorder::hdr::stored(&run.outcome.total.corrected) {
        r.histograms.push(("latency_us".into(), encoded));
    }
}

/// Over `seconds`: the busiest thread's share on a CPU (1.0 = all the time), the largest
/// share one thread was on a CPU or queued for one, and how many threads waited for a
/// CPU on average (run-queue time per second).
fn busiest(
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

fn load_metrics(ctx: &CaseCtx, r: &mut CaseResult, s: &LoadSummary) {
    let ms = |us: u64| us as f64 / 1000.0;
    // The target's figures; the generator's own (its CPU, its schedule lag) judge the
    // run's validity, not the target.
    let kind = ctx.test.kind;
    r.metrics.extend(
        load::summary::metrics(s)
            .into_iter()
            .filter(|m| crate::metrics::lookup(&m.name).is_some_and(|d| d.made_by(kind))),
    );
    r.table.push(format!(
        "load: {} — {:.1} req/s, p50 {:.2} ms, p99 {:.2} ms, errors {:.3}%",
        s.description,
        s.achieved_rate,
        ms(s.latency_us.p50),
        ms(s.latency_us.p99),
        100.0 * s.error_rate
    ));
    if let Some(d) = &s.deliveries {
        r.table.push(format!(
            "deliveries: {} of {} expected to {} subscriber(s), {} lost ({:.3}%), {} duplicate(s){}, end to end p50 {:.2} ms, p99 {:.2} ms",
            d.distinct(),
            d.expected,
            d.subscribed,
            d.lost,
            100.0 * d.loss_rate,
            d.duplicates,
            if d.unverified > 0 {
                format!(", {} not checked for a duplicate (unverified stamps)", d.unverified)
            } else {
                String::new()
            },
            ms(d.latency_us.p50),
            ms(d.latency_us.p99)
        ));
    }
}

/// What a run found about the target, named once per case however many runs the case
/// drives: its accept queue, when it kept connections from opening; the delayed-ACK
/// signature.
fn findings(r: &mut CaseResult, run: &Run) {
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
        if !r.table.iter().any(|l| l.starts_with(name)) {
            r.table.push(line);
        }
    }
}

/// Whether the generator was the limit of a run (INVALID) or nothing succeeded
/// (FAILED), and what the run found about the target.
fn judge_generator(r: &mut CaseResult, run: &Run) {
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

/// Runs a load kind; `running` is the target, if the suite has one (a command workload
/// may run without).
pub fn run_http(
    ctx: &CaseCtx,
    test: LoadTest,
    w: &Workload,
    running: Option<&Running>,
) -> crate::error::Result<CaseResult> {
    for req in w.setup.iter().filter(|_| w.url.is_some()) {
        let base = substitute(w.url.as_deref().unwrap_or_default(), &ctx.vars);
        let origin: String = base.splitn(4, '/').take(3).collect::<Vec<_>>().join("/");
        // A WebSocket's set-up requests go to the same server over HTTP.
        let origin = match origin.strip_prefix("ws") {
            Some(rest) if rest.starts_with("://") || rest.starts_with("s://") => {
                format!("http{rest}")
            }
            _ => origin,
        };
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
    let mut r = CaseResult::new();
    match test {
        LoadTest::Bench(b) => {
            let conns = if b.rate.is_some() {
                w.connections
            } else {
                Some(w.connections.unwrap_or(10))
            };
            let before = running.and_then(Running::cpu_now);
            let states = running.and_then(thread_states);
            let run = drive(ctx, running, b.rate, conns, Some(b.duration), None)?;
            let states = running.and_then(|t| states_since(t, states));
            let cpu_s = cpu_seconds_of(running, before.as_ref(), &run);
            load_metrics(ctx, &mut r, &run.summary);
            keep_latency(&mut r, &run);
            r.phases.push(("load".into(), run.window.0));
            r.phases.push(("end".into(), run.window.1));
            // A target's CPU only where one is watched: with none (a URL only, a
            // command workload) there is no figure, not a zero.
            if running.is_some() {
                let cpu = if run.outcome.elapsed > 0.0 {
                    cpu_s / run.outcome.elapsed
                } else {
                    0.0
                };
                r.metrics.push(Metric::of("target_cpu", cpu));
                let per_op = if run.outcome.total.completed > 0 {
                    1000.0 * cpu_s / run.outcome.total.completed as f64
                } else {
                    0.0
                };
                r.metrics.push(Metric::of("cpu_per_op", per_op));
                r.table.push(format!(
                    "target: {cpu:.2} cores, {per_op:.3} ms of CPU per request"
                ));
            }
            judge_generator(&mut r, &run);
            keep_thread_states(&mut r, states, b.rate.is_none());
        }
        LoadTest::Ramp(spec) => ramp(
            ctx,
            spec,
            running.expect("checked: ramp has a target"),
            &mut r,
        )?,
        LoadTest::Soak(spec) => soak(
            ctx,
            spec,
            running.expect("checked: soak has a target"),
            &mut r,
        )?,
        LoadTest::Rounds(spec) => rounds(
            ctx,
            spec,
            running.expect("checked: rounds has a target"),
            &mut r,
        )?,
    }
    Ok(r)
}

/// Thread groups a step keeps (the busiest).
const STEP_GROUPS: usize = 8;

/// The target's thread states so far, from its watcher (none when its processes are on
/// another machine).
fn thread_states(running: &Running) -> Option<crate::monitor::threads::Tally> {
    if running.host.is_some() {
        return None;
    }
    Some(running.watcher.shared.lock().unwrap().threads.clone())
}

/// The target's thread states since `before`: a step's busiest groups.
fn states_since(
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
fn keep_thread_states(
    r: &mut CaseResult,
    b: Option<crate::measure::threads::Breakdown>,
    closed: bool,
) {
    let Some(b) = b.filter(|b| b.seconds > 0.0 && !b.groups.is_empty()) else {
        return;
    };
    r.table.push(format!(
        "thread states: {}",
        crate::analysis::threads::summary(&b)
    ));
    if closed {
        if let Some(limit) = crate::analysis::threads::limit(&b) {
            r.table
                .push(format!("limiting factor (thread states): {limit}"));
        }
    }
    let v = serde_json::to_value(&b).unwrap_or_default();
    match &mut r.details {
        serde_json::Value::Object(m) => {
            m.insert("threads".into(), v);
        }
        d => *d = serde_json::json!({ "threads": v }),
    }
}

/// Steps a ramp measures again because the hypervisor took CPU while they broke.
const STEP_REPEATS: u32 = 3;

/// A ramp: offered load in steps until one breaks. Each step is measured here; whether
/// it held, and what the ramp concludes, is [`crate::analysis::ramp`]'s to say.
fn ramp(
    ctx: &CaseCtx,
    t: &suite::Ramp,
    running: &Running,
    r: &mut CaseResult,
) -> crate::error::Result<()> {
    let limits = ramp::Limits {
        max_error_rate: t.max_error_rate,
        slo_p99: t.slo_p99,
        cores: crate::host::cores() as f64,
        step_seconds: t.step_duration.as_secs_f64(),
    };
    let mut steps: Vec<ramp::Step> = Vec::new();
    r.table.push(format!(
        "{:>10} {:>10} {:>9} {:>8} {:>8} {:>8}  verdict",
        "offered", "achieved", "p99", "errors", "cpu", "thread"
    ));
    let (mut repeats, mut k) = (0, 0);
    while k < t.max_steps {
        let rate = t.start + t.step * k as f64;
        let step = measure_step(ctx, t, running, rate, &limits, r)?;
        let f = &step.figures;
        ctx.observer.step(f.offered, f.achieved, f.p99_ms, step.ok);
        r.table.push(format!(
            "{:>10.0} {:>10.1} {:>7.1}ms {:>7.2}% {:>8.2} {:>7.0}%  {}",
            f.offered,
            f.achieved,
            f.p99_ms,
            100.0 * f.error_rate,
            f.target_cpu,
            100.0 * f.busiest_thread,
            if step.ok {
                "ok".into()
            } else {
                step.why.join(", ")
            }
        ));
        let broke = !step.ok;
        // A step that broke while the hypervisor took the machine's CPU measured the
        // machine's neighbours: it is measured again, at most STEP_REPEATS times a ramp.
        let stolen = step.figures.stolen;
        if broke
            && stolen > verdict::STOLEN_BOUND
            && repeats < STEP_REPEATS
            && running.exited().is_none()
        {
            repeats += 1;
            r.table.push(format!(
                "{:>10.0} repeated: the hypervisor took {:.1}% of the machine's CPU during the step",
                rate,
                100.0 * stolen
            ));
            continue;
        }
        steps.push(step);
        if running.exited().is_some() || broke {
            break;
        }
        k += 1;
    }
    let c = ramp::conclude(&steps, &limits);
    r.metrics.push(Metric::of("ceiling", c.ceiling));
    r.metrics.push(Metric::of("knee", c.knee));
    r.metrics
        .push(Metric::of("max_throughput", c.max_throughput));
    let ceiling = format!("ceiling {}", c.end.ceiling(c.ceiling));
    r.table.push(format!(
        "{ceiling}, knee {:.0} req/s, max throughput {:.1} req/s",
        c.knee, c.max_throughput
    ));
    r.table
        .push(format!("limiting factor: {}", c.limiting_factor));
    match c.end {
        // The ceiling is only a floor: the figures describe strainline.
        ramp::End::GeneratorBound => r.fail(
            Status::Invalid,
            format!(
                "the ramp ended generator-bound: {ceiling}; give the generator more threads or cores"
            ),
        ),
        ramp::End::FirstStepBroke => r.fail(Status::Failed, c.limiting_factor.clone()),
        ramp::End::Held | ramp::End::Broke => {}
    }
    r.series.push((
        "offered_vs_achieved".into(),
        steps
            .iter()
            .map(|s| (s.figures.offered, s.figures.achieved))
            .collect(),
    ));
    r.series.push((
        "offered_vs_p99_ms".into(),
        steps
            .iter()
            .map(|s| (s.figures.offered, s.figures.p99_ms))
            .collect(),
    ));
    r.details = serde_json::to_value(super::details::RampDetails {
        steps,
        ceiling: c.ceiling,
        end: Some(c.end),
        knee: c.knee,
        limiting_factor: c.limiting_factor.clone(),
    })?;
    Ok(())
}

/// Drives one step of a ramp at `rate` and judges it from what it measured: the load's
/// figures, and the target's CPU, threads and the kernel's TCP counters over the step.
fn measure_step(
    ctx: &CaseCtx,
    t: &suite::Ramp,
    running: &Running,
    rate: f64,
    limits: &ramp::Limits,
    r: &mut CaseResult,
) -> crate::error::Result<ramp::Step> {
    let (before, states_before) = (thread_ticks(running), thread_states(running));
    let cpu_before = running.cpu_now();
    let tcp_before = crate::monitor::net::tcp_counters(&running.pids());
    let run = drive(
        ctx,
        Some(running),
        Some(rate),
        t.workload.connections,
        Some(t.step_duration),
        None,
    )?;
    r.phases.push((format!("{rate:.0}/s"), run.window.0));
    findings(r, &run);
    // The ticks before include the engine's idle warm-up: divide by the measured window.
    let (busy, demand, run_queue) = busiest(&before, &thread_ticks(running), run.outcome.elapsed);
    let tcp = crate::monitor::net::tcp_counters(&running.pids()).since(&tcp_before);
    let s = &run.summary;
    // Requests in flight when the step's time was up are not its failures: the next
    // step's load would have met the same target, and a keep-alive client always has
    // some in flight. They are counted apart.
    let failed_before_cut = s.errors + s.unsent;
    let due_before_cut = s.completed + s.by_error.values().sum::<u64>() + s.unsent;
    let mut causes = s.failure_causes();
    if s.unsent > 0 {
        causes.push(("never sent".to_string(), s.unsent));
    }
    Ok(ramp::judge_step(
        &ramp::StepRecord {
            figures: ramp::Figures {
                offered: rate,
                achieved: s.achieved_rate,
                p99_ms: s.latency_us.p99 as f64 / 1000.0,
                error_rate: if due_before_cut > 0 {
                    failed_before_cut as f64 / due_before_cut as f64
                } else {
                    0.0
                },
                unfinished: s.unfinished,
                error_causes: crate::load::summary::causes_text(&causes),
                target_cpu: cpu_seconds_of(Some(running), cpu_before.as_ref(), &run)
                    / run.outcome.elapsed.max(1e-9),
                busiest_thread: busy,
                busiest_demand: demand,
                listen_overflows: tcp.listen_overflows,
                syn_drops: tcp.syn_drops(),
                syn_cookies: tcp.syn_cookies,
                run_queue,
                retransmits: tcp.retransmitted_segments,
                stolen: verdict::stolen_share(&run.outcome),
                threads: states_since(running, states_before),
            },
            generator_invalid: (run.verdict.status == Validity::Invalid)
                .then(|| run.verdict.reasons.join("; ")),
            generator_at_capacity: verdict::at_capacity(&run.outcome),
        },
        limits,
    ))
}

fn soak(
    ctx: &CaseCtx,
    t: &suite::Soak,
    running: &Running,
    r: &mut CaseResult,
) -> crate::error::Result<()> {
    let rate = t.rate;
    let states = thread_states(running);
    let run = drive(
        ctx,
        Some(running),
        Some(rate),
        t.workload.connections,
        Some(t.duration),
        None,
    )?;
    let states = states_since(running, states);
    load_metrics(ctx, r, &run.summary);
    keep_latency(r, &run);
    r.phases.push(("soak".into(), run.window.0));
    r.phases.push(("end".into(), run.window.1));
    judge_generator(r, &run);
    let all = samples(Some(running));
    let window: Vec<&Sample> = all
        .iter()
        .filter(|s| s.t >= run.window.0 && s.t <= run.window.1)
        .collect();
    let x: Vec<f64> = window.iter().map(|s| s.t).collect();
    let cpu = cpu_in(&all, run.window);
    r.metrics.push(Metric::of("target_cpu", cpu));
    let horizon = t.horizon.as_secs_f64();
    let mut fits = std::collections::BTreeMap::new();
    let judge = |name: &str,
                 y: Vec<f64>,
                 budget: f64,
                 r: &mut CaseResult,
                 fits: &mut std::collections::BTreeMap<String, leak::Leak>|
     -> Option<leak::Leak> {
        let mut l = leak::detect(
            &x,
            &y,
            Policy {
                alpha: 0.01,
                horizon,
                budget,
            },
        )?;
        // A projection only for a growth that is a trend (extrapolating noise over a
        // day reads as a finding).
        let fmt = |v: f64, rate: bool| leak_figure(name, v, rate);
        let trend = l.p_value < 0.01 && l.slope > 0.0;
        l.reason = if trend {
            format!(
                "{}: {}/s, {} over {} (budget {})",
                l.reason,
                fmt(l.slope, true),
                fmt(l.projected, false),
                d(t.horizon),
                fmt(budget, false)
            )
        } else {
            format!(
                "{} (budget {} over {})",
                l.reason,
                fmt(budget, false),
                d(t.horizon)
            )
        };
        fits.insert(name.into(), l.clone());
        let warm = if l.warmup_points > 0 {
            format!("warm-up of {:.1}s dropped", l.warmup_until - run.window.0)
        } else {
            "no warm-up found".into()
        };
        r.table.push(format!(
            "{name}: {} ({warm}, {} points)",
            l.reason, l.points
        ));
        Some(l)
    };
    let rss: Vec<f64> = window.iter().map(|s| s.rss_bytes as f64).collect();
    let mem = judge("memory", rss.clone(), t.leak_budget, r, &mut fits);
    let fds = judge(
        "fds",
        window.iter().map(|s| s.fds as f64).collect(),
        100.0,
        r,
        &mut fits,
    );
    let threads = judge(
        "threads",
        window.iter().map(|s| s.threads as f64).collect(),
        100.0,
        r,
        &mut fits,
    );
    let finding = |l: &Option<leak::Leak>| f64::from(l.as_ref().is_some_and(|l| l.leak));
    r.metrics.push(Metric::of("leak", finding(&mem)));
    r.metrics.push(Metric::of("fd_leak", finding(&fds)));
    r.metrics.push(Metric::of("thread_leak", finding(&threads)));
    for (name, l) in [
        ("memory", &mem),
        ("file descriptors", &fds),
        ("threads", &threads),
    ] {
        if let Some(l) = l.as_ref().filter(|l| l.leak) {
            r.fail(Status::Failed, format!("{name} leak: {}", l.reason));
            // Growth by design reads as a leak until the suite says how much is meant.
            if name == "memory" {
                r.table.push(
                    "    if this target is meant to grow (a store filling with new keys, a cache \
                     warming), set leak_budget to the growth its workload should cause over \
                     the horizon, or gate on retained_per_op instead"
                        .into(),
                );
            }
        }
    }
    let slope = mem.as_ref().map_or(0.0, |l| l.slope);
    let per_op = if run.summary.achieved_rate > 0.0 {
        slope / run.summary.achieved_rate
    } else {
        0.0
    };
    let growth = rss.last().copied().unwrap_or(0.0) - rss.first().copied().unwrap_or(0.0);
    r.metrics.push(Metric::of("retained_per_op", per_op));
    r.metrics.push(Metric::of("rss_growth", growth));
    r.table.push(format!(
        "retained {:.2} KiB per request; RSS grew {:.1} MiB over the soak",
        per_op / 1024.0,
        growth / 1048576.0
    ));
    if let (Some(clients), Some(period)) = (t.clients, t.client_period) {
        let basis = ctx.last_ceiling.unwrap_or(run.summary.achieved_rate);
        capacity_figures(
            r,
            t,
            growth,
            (clients, period),
            (basis, ctx.last_ceiling.is_some()),
        );
    }
    r.details = serde_json::to_value(super::details::SoakDetails { leak_fits: fits })?;
    keep_thread_states(r, states, false);
    Ok(())
}

/// Capacity, the IoT seed's way: the memory a client costs (the soak's growth over its
/// clients), and how many clients the ceiling (or, without a ramp before, the soak's
/// throughput: a lower bound) and the RAM allow.
fn capacity_figures(
    r: &mut CaseResult,
    t: &suite::Soak,
    growth: f64,
    (clients, period): (u64, Duration),
    (basis, from_ceiling): (f64, bool),
) {
    let n = |v: f64| crate::units::format_number(v.floor());
    let ram = t.ram.unwrap_or_else(mem_available);
    let c = capacity::capacity(growth, clients, period, basis, ram);
    r.metrics
        .push(Metric::of("mib_per_client", c.bytes_per_client / 1048576.0));
    r.metrics
        .push(Metric::of("capacity_ideal_clients", c.ideal));
    r.metrics.push(Metric::of("capacity_safe_clients", c.safe));
    // No bound from memory is stored as a trillion clients, never as infinity.
    r.metrics.push(Metric::of(
        "capacity_ram_clients",
        c.ram_bound.unwrap_or(1e12).min(1e12),
    ));
    r.table.push(format!(
        "capacity: {} per client; ideal {} clients at one request per {} ({} {basis:.1} req/s), safe (80%) {}, RAM bound {} ({} usable): {} clients",
        crate::units::Bytes(c.bytes_per_client as u64),
        n(c.ideal),
        d(period),
        if from_ceiling { "ceiling" } else { "throughput, a lower bound:" },
        n(c.safe),
        c.ram_bound.map_or("none (memory did not grow)".into(), |b| format!("{} clients", n(b))),
        crate::units::Bytes(ram as u64),
        n(c.clients())
    ));
}

/// A leak figure as it reads: bytes for memory, counts for the rest (`rate`: a slope).
fn leak_figure(name: &str, v: f64, rate: bool) -> String {
    if name == "memory" {
        let b = crate::units::Bytes(v.abs() as u64).to_string();
        if v < 0.0 {
            format!("-{b}")
        } else {
            b
        }
    } else if rate {
        format!("{v:.2}")
    } else {
        format!("{v:.0}")
    }
}

fn mem_available() -> f64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("MemAvailable:"))?
                .split_whitespace()
                .nth(1)?
                .parse::<f64>()
                .ok()
        })
        .unwrap_or(0.0)
        * 1024.0
}

fn rounds(
    ctx: &CaseCtx,
    t: &suite::Rounds,
    running: &Running,
    r: &mut CaseResult,
) -> crate::error::Result<()> {
    let settle = |running: Option<&Running>| -> f64 {
        if let Some(q) = &t.quiesce_url {
            let _ = probe::request("GET", &substitute(q, &ctx.vars), "");
        }
        std::thread::sleep(t.settle + 2 * ctx.test.interval);
        samples(running).last().map_or(0.0, |s| s.rss_bytes as f64)
    };
    let base = settle(Some(running));
    r.table.push(format!(
        "{:>6} {:>10} {:>10} {:>12} {:>10}",
        "round", "ops", "RSS MiB", "retained MiB", "ops/s"
    ));
    r.table.push(format!(
        "{:>6} {:>10} {:>10.2} {:>12} {:>10}",
        "base",
        0,
        base / 1048576.0,
        "-",
        "-"
    ));
    let (mut ops, mut rss, mut tput) = (Vec::new(), Vec::new(), Vec::new());
    for k in 0..t.rounds {
        let run = drive(
            ctx,
            Some(running),
            None,
            Some(t.workload.connections.unwrap_or(10)),
            None,
            Some(t.ops),
        )?;
        judge_generator(r, &run);
        if run.verdict.status == Validity::Failed {
            break;
        }
        let m = settle(Some(running));
        let done = (k as u64 + 1) * t.ops;
        ops.push(done as f64);
        rss.push(m);
        tput.push(run.summary.achieved_rate);
        r.table.push(format!(
            "{:>6} {:>10} {:>10.2} {:>+12.2} {:>10.1}",
            k + 1,
            done,
            m / 1048576.0,
            (m - base) / 1048576.0,
            run.summary.achieved_rate
        ));
        if running.exited().is_some() {
            break;
        }
    }
    let v = rounds::judge(&ops, &rss, &tput, base, t.leak_budget);
    r.metrics.push(Metric::of("leak", f64::from(v.leaking)));
    r.metrics
        .push(Metric::of("retained_per_op", v.retained_per_op));
    r.metrics
        .push(Metric::of("retained_total", v.retained_total));
    r.metrics.push(Metric::of("throughput", v.throughput));
    r.metrics
        .push(Metric::of("degradation", f64::from(v.degrading)));
    r.table.push(format!(
        "retained {:.3} KiB per op (Theil–Sen), {:.2} MiB in all; trend p = {:.3}; throughput {:.1} ops/s median, {:+.0}% over the rounds",
        v.retained_per_op / 1024.0,
        v.retained_total / 1048576.0,
        v.trend_p,
        v.throughput,
        -100.0 * v.drop
    ));
    if v.leaking {
        r.fail(
            Status::Failed,
            format!(
                "memory leak: {:.2} KiB retained per operation, growing in every round",
                v.retained_per_op / 1024.0
            ),
        );
    }
    if v.degrading {
        r.fail(
            Status::Failed,
            format!(
                "throughput degraded by {:.0}% over the rounds",
                100.0 * v.drop
            ),
        );
    }
    r.series.push((
        "rss_after_round".into(),
        ops.iter().copied().zip(rss.iter().copied()).collect(),
    ));
    r.details = serde_json::to_value(super::details::RoundsDetails {
        ops,
        rss,
        throughput: tput,
        base_rss: base,
    })?;
    Ok(())
}
