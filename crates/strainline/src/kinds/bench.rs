//! The `bench` kind: a fixed load, repeated by the runner; with a target, the CPU it
//! spends per request and its thread states.

use super::lines::Line;
use super::load::{
    cpu_seconds_of, drive, judge_generator, keep_latency, keep_thread_states, load_metrics,
    states_since, thread_states,
};
use super::{CaseCtx, CaseResult};
use crate::store::Metric;
use crate::suite::{self, Workload};
use crate::sut::lifecycle::Running;

/// A bench: a fixed load (an open-model rate, or a closed model on its connections)
/// for a fixed time; with a target, its CPU per request and thread states.
pub(super) fn run(
    ctx: &CaseCtx,
    b: &suite::Bench,
    w: &Workload,
    running: Option<&Running>,
    r: &mut CaseResult,
) -> crate::error::Result<()> {
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
    load_metrics(ctx, r, &run.summary);
    keep_latency(r, &run);
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
        r.table.push(Line::TargetCost {
            cores: cpu,
            ms_per_op: per_op,
        });
    }
    judge_generator(r, &run);
    keep_thread_states(r, states, b.rate.is_none());
    Ok(())
}
