//! The `scale` kind: the same work at growing sizes; the fitted growth exponent tells
//! linear from superlinear.

use std::time::Instant;

use super::details::{Of, ScaleDetails};
use super::lines::{self, Line};
use super::process::{argv, spawn, wait};
use super::{CaseCtx, CaseResult, Status};
use crate::analysis::growth;
use crate::os::unit::Unit;
use crate::store::Metric;
use crate::suite;
use crate::sut::lifecycle::tail;

/// Rounds of a `scale` test before its first verdict: the spread of each size's runs gives
/// the exponent's interval. Sizes are run in rounds (every size once, then again) so that
/// a drift of the machine touches all sizes alike.
const FIRST_ROUNDS: usize = 3;

/// Rounds at most: while the interval spans the limit, one more round at a time (the
/// interval is the median fit's, and narrows as runs are added).
const MAX_ROUNDS: usize = 9;

pub(super) fn run(ctx: &CaseCtx, t: &suite::Scale) -> crate::error::Result<CaseResult> {
    let mut r = CaseResult::new();
    // (wall, cpu) of each run, by size.
    let mut measured: Vec<Vec<(f64, f64)>> = vec![Vec::new(); t.sizes.len()];
    for round in 0..MAX_ROUNDS {
        if round >= FIRST_ROUNDS {
            let (_, costs) = costs_of(&measured);
            let decided = growth::growth(&t.sizes, &costs)
                .is_some_and(|g| g.verdict != growth::Verdict::Inconclusive);
            if decided {
                break;
            }
        }
        for (i, &size) in t.sizes.iter().enumerate() {
            match run_once(ctx, t, size, round)? {
                Ok(m) => measured[i].push(m),
                Err(reason) => {
                    r.fail(Status::Failed, reason);
                    return Ok(r);
                }
            }
        }
    }
    let rounds = measured[0].len();
    let (by_cpu, costs) = costs_of(&measured);
    r.table.push(Line::Scale(lines::Scale::Head {
        runs: rounds,
        by_cpu,
    }));
    for (i, &size) in t.sizes.iter().enumerate() {
        let med = |f: fn(&(f64, f64)) -> f64| {
            let v: Vec<f64> = measured[i].iter().map(f).collect();
            crate::analysis::stats::median(&v).unwrap_or(0.0)
        };
        let (wall, cpu) = (med(|m| m.0), med(|m| m.1));
        let cost = if by_cpu { cpu } else { wall };
        r.table.push(Line::Scale(lines::Scale::Size {
            size,
            wall_s: wall,
            cpu_s: cpu,
            us_per_unit: 1e6 * cost / size as f64,
        }));
    }
    let g = growth::growth(&t.sizes, &costs).expect("checked: every size has runs");
    let limit = growth::SUPERLINEAR_ABOVE;
    if g.grew {
        r.metrics.push(Metric::of("exponent", g.exponent));
    }
    let fit = if g.grew {
        format!(
            "cost = {:.1} ms fixed + growth as size^{:.2} [{:.2}–{:.2}]",
            g.fixed * 1e3,
            g.exponent,
            g.low,
            g.high
        )
    } else {
        format!(
            "cost = {:.1} ms, no growth above its noise at these sizes",
            g.fixed * 1e3
        )
    };
    let line = format!(
        "{fit}: {}",
        match g.verdict {
            growth::Verdict::Linear =>
                format!("linear (or better): the interval is at or under {limit}"),
            growth::Verdict::Superlinear => format!("superlinear: the interval is above {limit}"),
            growth::Verdict::Inconclusive if !g.grew => "inconclusive".to_string(),
            growth::Verdict::Inconclusive if g.low <= limit && g.high > limit =>
                format!("inconclusive: the interval spans {limit}"),
            growth::Verdict::Inconclusive => "inconclusive: the growth stands above the \
                 noise at one size only, and any exponent fits one size"
                .to_string(),
        }
    );
    r.table.push(Line::Scale(lines::Scale::Fit {
        words: line.clone(),
    }));
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
    r.details.of = Some(Of::Scale(ScaleDetails {
        sizes: t.sizes.clone(),
        exponent: g.exponent,
        exponent_low: g.low,
        exponent_high: g.high,
        fixed_seconds: g.fixed,
        verdict: g.verdict.name().to_string(),
        by_cpu,
        runs: costs,
    }));
    Ok(r)
}

/// One run of the command at `size`: its `(wall, cpu)` seconds, or why the case failed.
fn run_once(
    ctx: &CaseCtx,
    t: &suite::Scale,
    size: u64,
    round: usize,
) -> crate::error::Result<Result<(f64, f64), String>> {
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
        return Ok(Err(format!(
            "size {size}: the command ended with {}:\n{}",
            exit.describe(),
            tail(&log, 10)
        )));
    }
    Ok(Ok((wall, cpu)))
}

/// The cost of each run, by size: CPU time is what the work costs; wall time for work
/// that mostly waits (its CPU under half its wall time at the largest size). One measure
/// for every size; `true` when CPU.
fn costs_of(measured: &[Vec<(f64, f64)>]) -> (bool, Vec<Vec<f64>>) {
    let last = &measured[measured.len() - 1];
    let (wall_sum, cpu_sum) = last
        .iter()
        .fold((0.0, 0.0), |(w, c), &(wa, cp)| (w + wa, c + cp));
    let by_cpu = cpu_sum >= 0.5 * wall_sum;
    let costs = measured
        .iter()
        .map(|runs| {
            runs.iter()
                .map(|&(w, c)| if by_cpu { c } else { w })
                .collect()
        })
        .collect();
    (by_cpu, costs)
}
