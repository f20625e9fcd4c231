//! The `rounds` kind: N rounds of M operations with the memory retained after each —
//! the job-server seed's leak test.

use super::details::{Of, RoundsDetails};
use super::lines::{self, Line};
use super::load::{drive, judge_generator, samples};
use super::{CaseCtx, CaseResult, Status};
use crate::analysis::rounds;
use crate::load::verdict::Validity;
use crate::store::Metric;
use crate::suite::{self, substitute};
use crate::sut::lifecycle::Running;
use crate::sut::probe;

pub(super) fn run(
    ctx: &CaseCtx,
    t: &suite::Rounds,
    _: &suite::Workload,
    running: Option<&Running>,
    r: &mut CaseResult,
) -> crate::error::Result<()> {
    let running = super::load::watched(running);
    let settle = |running: Option<&Running>| -> f64 {
        if let Some(q) = &t.quiesce_url {
            let _ = probe::request("GET", &substitute(q, &ctx.vars), "");
        }
        std::thread::sleep(t.settle + 2 * ctx.test.interval);
        samples(running).last().map_or(0.0, |s| s.rss_bytes as f64)
    };
    let base = settle(Some(running));
    r.table.push(Line::Rounds(lines::Rounds::Head));
    r.table
        .push(Line::Rounds(lines::Rounds::Base { rss: base }));
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
        r.table.push(Line::Rounds(lines::Rounds::Round {
            round: k + 1,
            ops: done,
            rss: m,
            retained: m - base,
            rate: run.summary.achieved_rate,
        }));
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
    r.table.push(Line::Rounds(lines::Rounds::End {
        retained_per_op: v.retained_per_op,
        retained_total: v.retained_total,
        trend_p: v.trend_p,
        throughput: v.throughput,
        drop: v.drop,
    }));
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
    r.details.of = Some(Of::Rounds(RoundsDetails {
        ops,
        rss,
        throughput: tput,
        base_rss: base,
    }));
    Ok(())
}
