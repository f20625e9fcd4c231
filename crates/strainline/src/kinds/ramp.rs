//! The `ramp` kind: offered load in steps until it breaks — the stress–strain curve,
//! its ceiling, knee and limiting factor (judged by [`crate::analysis::ramp`]).

use super::details::{Of, RampDetails};
use super::lines::{self, Line};
use super::load::{
    busiest, cpu_seconds_of, drive, findings, keep_seconds, states_since, thread_states,
    thread_ticks,
};
use super::{CaseCtx, CaseResult, Status};
use crate::analysis::ramp;
use crate::load::verdict::{self, Validity};
use crate::store::Metric;
use crate::suite;
use crate::sut::lifecycle::Running;

/// Steps a ramp measures again because the hypervisor took CPU while they broke.
const STEP_REPEATS: u32 = 3;

/// A ramp: offered load in steps until one breaks. Each step is measured here; whether
/// it held, and what the ramp concludes, is [`crate::analysis::ramp`]'s to say.
pub(super) fn run(
    ctx: &CaseCtx,
    t: &suite::Ramp,
    _: &suite::Workload,
    running: Option<&Running>,
    r: &mut CaseResult,
) -> crate::error::Result<()> {
    let running = super::load::watched(running);
    let limits = ramp::Limits {
        max_error_rate: t.max_error_rate,
        slo_p99: t.slo_p99,
        cores: crate::host::cores() as f64,
        step_seconds: t.step_duration.as_secs_f64(),
    };
    let mut steps: Vec<ramp::Step> = Vec::new();
    r.table.push(Line::Ramp(lines::Ramp::Head));
    let (mut repeats, mut k) = (0, 0);
    while k < t.max_steps {
        let rate = t.start + t.step * k as f64;
        let step = measure_step(ctx, t, running, rate, &limits, r)?;
        let f = &step.figures;
        ctx.observer.step(f.offered, f.achieved, f.p99_ms, step.ok);
        r.table.push(Line::Ramp(lines::Ramp::Step {
            figures: f.clone(),
            broke: if step.ok {
                Vec::new()
            } else {
                step.why.clone()
            },
        }));
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
            r.table
                .push(Line::Ramp(lines::Ramp::Repeated { rate, stolen }));
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
    ctx.handed.put(&super::CEILING, c.ceiling);
    r.metrics.push(Metric::of("knee", c.knee));
    r.metrics
        .push(Metric::of("max_throughput", c.max_throughput));
    let ceiling = format!("ceiling {}", c.end.ceiling(c.ceiling));
    r.table.push(Line::Ramp(lines::Ramp::Ceiling {
        ceiling: ceiling.clone(),
        knee: c.knee,
        max_throughput: c.max_throughput,
    }));
    r.table.push(Line::Ramp(lines::Ramp::LimitingFactor {
        words: c.limiting_factor.clone(),
    }));
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
    r.details.of = Some(Of::Ramp(RampDetails {
        steps,
        ceiling: c.ceiling,
        end: Some(c.end),
        knee: c.knee,
        limiting_factor: c.limiting_factor.clone(),
    }));
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
    // Each step a phase, the last closed by the ramp's end (its timeline shades them).
    if r.phases.last().is_some_and(|p| p.0 == "end") {
        r.phases.pop();
    }
    r.phases.push((format!("{rate:.0}/s"), run.window.0));
    r.phases.push(("end".into(), run.window.1));
    keep_seconds(r, &run);
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
                // Free cores are this machine's: not read for a target elsewhere.
                idle_cores: running
                    .host
                    .is_none()
                    .then(|| run.outcome.idle_seconds / run.outcome.elapsed.max(1e-9)),
                threads: states_since(running, states_before),
            },
            generator_invalid: (run.verdict.status == Validity::Invalid)
                .then(|| run.verdict.reasons.join("; ")),
            generator_at_capacity: verdict::at_capacity(&run.outcome),
        },
        limits,
    ))
}
