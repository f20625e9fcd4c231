//! The `scale` kind: the same work at growing sizes; the fitted growth exponent tells
//! linear from superlinear.

use std::time::Instant;

use super::details::ScaleDetails;
use super::process::{argv, spawn, wait};
use super::{CaseCtx, CaseResult, Status};
use crate::analysis::growth;
use crate::os::unit::Unit;
use crate::store::Metric;
use crate::suite;
use crate::sut::lifecycle::tail;

/// Runs of each size in a `scale` test: the spread of their costs gives the exponent's
/// interval. Sizes are run in rounds (every size once, then again) so that a drift of
/// the machine touches all sizes alike.
const RUNS_PER_SIZE: usize = 3;

pub(super) fn scale(ctx: &CaseCtx, t: &suite::Scale) -> crate::error::Result<CaseResult> {
    let mut r = CaseResult::new();
    // (wall, cpu) of each run, by size.
    let mut measured: Vec<Vec<(f64, f64)>> = vec![Vec::new(); t.sizes.len()];
    for round in 0..RUNS_PER_SIZE {
        for (i, &size) in t.sizes.iter().enumerate() {
            let mut vars = ctx.vars.clone();
            vars.insert("size".into(), size.to_string());
            let log = ctx.dir.join(format!("size-{size}-{}.log", round + 1));
            let started = Instant::now();
            let unit = Unit::new(true);
            let pid = spawn(&unit, &argv(&t.command, &vars), &log)?;
            let (exit, cpu) = wait(&unit, pid)?;
            drop(unit);
            let wall = started.elapsed().as_secs_f64();
            if exit.code != Some(0) {
                r.fail(
                    Status::Failed,
                    format!(
                        "size {size}: the command ended with {}:\n{}",
                        exit.describe(),
                        tail(&log, 10)
                    ),
                );
                return Ok(r);
            }
            measured[i].push((wall, cpu));
        }
    }
    // CPU time is what the work costs; wall time for work that mostly waits (its CPU
    // under half its wall time at the largest size). One measure for every size.
    let last = &measured[measured.len() - 1];
    let (wall_sum, cpu_sum) = last
        .iter()
        .fold((0.0, 0.0), |(w, c), &(wa, cp)| (w + wa, c + cp));
    let by_cpu = cpu_sum >= 0.5 * wall_sum;
    let costs: Vec<Vec<f64>> = measured
        .iter()
        .map(|runs| {
            runs.iter()
                .map(|&(w, c)| if by_cpu { c } else { w })
                .collect()
        })
        .collect();
    r.table.push(format!(
        "{:>12} {:>12} {:>12} {:>14}   ({} runs a size, median; cost = {} time)",
        "size",
        "wall s",
        "CPU s",
        "cost µs / unit",
        RUNS_PER_SIZE,
        if by_cpu { "CPU" } else { "wall" }
    ));
    for (i, &size) in t.sizes.iter().enumerate() {
        let med = |f: fn(&(f64, f64)) -> f64| {
            let v: Vec<f64> = measured[i].iter().map(f).collect();
            crate::analysis::stats::median(&v).unwrap_or(0.0)
        };
        let (wall, cpu) = (med(|m| m.0), med(|m| m.1));
        let cost = if by_cpu { cpu } else { wall };
        r.table.push(format!(
            "{size:>12} {wall:>12.3} {cpu:>12.3} {:>14.3}",
            1e6 * cost / size as f64
        ));
    }
    let Some(g) = growth::growth(&t.sizes, &costs) else {
        r.fail(
            Status::Invalid,
            "the costs could not be fitted (no size's cost grew)".into(),
        );
        return Ok(r);
    };
    let limit = growth::SUPERLINEAR_ABOVE;
    r.metrics.push(Metric::of("exponent", g.exponent));
    let line = format!(
        "cost = {:.1} ms fixed + growth as size^{:.2} [{:.2}–{:.2}]: {}",
        g.fixed * 1e3,
        g.exponent,
        g.low,
        g.high,
        match g.verdict {
            growth::Verdict::Linear =>
                format!("linear (or better): the interval is at or under {limit}"),
            growth::Verdict::Superlinear => format!("superlinear: the interval is above {limit}"),
            growth::Verdict::Inconclusive => format!("inconclusive: the interval spans {limit}"),
        }
    );
    r.table.push(line.clone());
    match g.verdict {
        growth::Verdict::Linear => r.metrics.push(Metric::of("superlinear", 0.0)),
        growth::Verdict::Superlinear => {
            r.metrics.push(Metric::of("superlinear", 1.0));
            r.fail(Status::Failed, format!("cost grows superlinearly: {line}"));
        }
        growth::Verdict::Inconclusive => {
            // Undecided: no `superlinear` figure to gate on, and not a pass.
            let hint = g.deciding_size.map_or(String::new(), |n| {
                format!(
                    "; sizes where the work outweighs the fixed cost and its noise \
                     (from about {}, and a few times beyond) would decide it",
                    crate::units::format_number(n.round())
                )
            });
            r.fail(
                Status::Invalid,
                format!("the sizes cannot tell linear from superlinear: {line}{hint}"),
            );
        }
    }
    r.details = serde_json::to_value(ScaleDetails {
        sizes: t.sizes.clone(),
        exponent: g.exponent,
        exponent_low: g.low,
        exponent_high: g.high,
        fixed_seconds: g.fixed,
        verdict: g.verdict.name().to_string(),
        by_cpu,
        runs: costs,
    })?;
    Ok(r)
}
