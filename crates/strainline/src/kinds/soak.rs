//! The `soak` kind: constant load for long — leaks of memory, FDs and threads, and
//! capacity (the memory a client costs, the clients the RAM allows).

use std::time::Duration;

use super::details::{Of, SoakDetails};
use super::lines::{self, Line};
use super::load::{
    cpu_in, drive, judge_generator, keep_latency, keep_thread_states, load_metrics, samples,
    states_since, thread_states,
};
use super::{d, CaseCtx, CaseResult, Status};
use crate::analysis::capacity;
use crate::analysis::leak::{self, Policy};
use crate::measure::Sample;
use crate::store::Metric;
use crate::suite;
use crate::sut::lifecycle::Running;

pub(super) fn run(
    ctx: &CaseCtx,
    t: &suite::Soak,
    _: &suite::Workload,
    running: Option<&Running>,
    r: &mut CaseResult,
) -> crate::error::Result<()> {
    let running = super::load::watched(running);
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
        r.table.push(Line::Soak(lines::Soak::Fit {
            name: name.into(),
            words: l.reason.clone(),
            warmup_s: (l.warmup_points > 0).then_some(l.warmup_until - run.window.0),
            points: l.points,
        }));
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
    leaks(r, [&mem, &fds, &threads]);
    let slope = mem.as_ref().map_or(0.0, |l| l.slope);
    let per_op = if run.summary.achieved_rate > 0.0 {
        slope / run.summary.achieved_rate
    } else {
        0.0
    };
    let growth = rss.last().copied().unwrap_or(0.0) - rss.first().copied().unwrap_or(0.0);
    r.metrics.push(Metric::of("retained_per_op", per_op));
    r.metrics.push(Metric::of("rss_growth", growth));
    r.table
        .push(Line::Soak(lines::Soak::Retained { per_op, growth }));
    if let (Some(clients), Some(period)) = (t.clients, t.client_period) {
        let ceiling = ctx.handed.get(&super::CEILING);
        let basis = ceiling.unwrap_or(run.summary.achieved_rate);
        // Memory bounds the clients only when it grew as a trend: a few pages of noise
        // between the first and last sample would read as a trillion clients.
        let trend = mem
            .as_ref()
            .is_some_and(|l| l.p_value < 0.01 && l.slope > 0.0);
        capacity_figures(
            r,
            t,
            if trend { growth } else { 0.0 },
            (clients, period),
            (basis, ceiling.is_some()),
        );
    }
    r.details.of = Some(Of::Soak(SoakDetails { leak_fits: fits }));
    keep_thread_states(r, states, false);
    Ok(())
}

/// The leak findings of the memory, file descriptor and thread fits: their metrics
/// (1 for a leak), and the case failed for each leak.
fn leaks(r: &mut CaseResult, [mem, fds, threads]: [&Option<leak::Leak>; 3]) {
    let finding = |l: &Option<leak::Leak>| f64::from(l.as_ref().is_some_and(|l| l.leak));
    r.metrics.push(Metric::of("leak", finding(mem)));
    r.metrics.push(Metric::of("fd_leak", finding(fds)));
    r.metrics.push(Metric::of("thread_leak", finding(threads)));
    for (name, l) in ["memory", "file descriptors", "threads"]
        .into_iter()
        .zip([mem, fds, threads])
    {
        if let Some(l) = l.as_ref().filter(|l| l.leak) {
            r.fail(Status::Failed, format!("{name} leak: {}", l.reason));
            // Growth by design reads as a leak until the suite says how much is meant.
            if name == "memory" {
                r.table.push(Line::Soak(lines::Soak::GrowthHint));
            }
        }
    }
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
    let ram = t.ram.unwrap_or_else(mem_available);
    let c = capacity::capacity(growth, clients, period, basis, ram);
    r.metrics
        .push(Metric::of("mib_per_client", c.bytes_per_client / 1048576.0));
    r.metrics
        .push(Metric::of("capacity_ideal_clients", c.ideal));
    r.metrics.push(Metric::of("capacity_safe_clients", c.safe));
    // No bound from memory is no figure (the line says "none"), never a number.
    if let Some(bound) = c.ram_bound {
        r.metrics.push(Metric::of("capacity_ram_clients", bound));
    }
    r.table.push(Line::Soak(lines::Soak::Capacity {
        capacity: c,
        period,
        basis,
        from_ceiling,
        ram,
    }));
}

/// A leak figure as it reads: bytes for memory, counts of what is counted for the rest
/// (`3 descriptors`; `rate`: a slope, `0.02 threads/s` once `/s` follows).
fn leak_figure(name: &str, v: f64, rate: bool) -> String {
    let what = if name == "fds" { "descriptors" } else { name };
    if name == "memory" {
        let b = crate::units::Bytes(v.abs() as u64).to_string();
        if v < 0.0 {
            format!("-{b}")
        } else {
            b
        }
    } else if rate {
        format!("{:.2} {what}", v + 0.0)
    } else {
        format!("{:.0} {what}", v + 0.0)
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
