//! One case of a suite: start what it needs, run its kind, stop, and gather the
//! target's figures (peak memory, log findings, a crash, a flame graph).

use crate::kinds::lines::Line;
use crate::kinds::{self, CaseCtx, CaseResult, Status};
use crate::store::Metric;
use crate::suite::Family;
use crate::sut::lifecycle;

/// A case's result, whatever happened, and whether it ran (the runner then judges its
/// gates, then [`expected`]). One that could not: a target that could not be built,
/// started or made ready (or an interrupt before it was) measured nothing (invalid);
/// any other error fails the case — only a case that ran can have caught its defect.
pub fn outcome(ctx: &CaseCtx) -> (CaseResult, bool) {
    match run(ctx) {
        Ok(r) => (r, true),
        Err(e) => (
            {
                let mut r = CaseResult::new();
                let status = match e {
                    crate::Error::Target(_) | crate::Error::Interrupted => Status::Invalid,
                    _ => Status::Failed,
                };
                r.fail(status, e.to_string());
                r
            },
            false,
        ),
    }
}

/// A case that shows a defect being caught (`expect = "failed"`), its verdict and gates
/// judged (a failed gate is part of what it catches): its failure is what
/// it is there for — it passes, "caught, as expected", the failure's reasons kept —
/// and its pass is a failure (the defect went unseen). An invalid or crashed case stays
/// what it is: nothing was caught.
pub fn expected(expect_failure: bool, mut r: CaseResult) -> CaseResult {
    if !expect_failure {
        return r;
    }
    match r.status {
        Status::Failed => {
            let caught = std::mem::take(&mut r.reasons);
            r.status = Status::Passed;
            r.reasons.push(format!(
                "caught, as expected (expect = \"failed\"): {}",
                caught.join("; ")
            ));
            r.details.caught = Some(crate::kinds::details::Caught::failure(caught));
        }
        Status::Passed => r.fail(
            Status::Failed,
            "expected to fail (expect = \"failed\") but passed: the defect it is there to show was not caught".into(),
        ),
        Status::Invalid | Status::Crashed => {}
    }
    r
}

/// One case: start what it needs, run its kind, stop, and gather the target's figures.
fn run(ctx: &CaseCtx) -> crate::error::Result<CaseResult> {
    let t = ctx.test;
    let (test, workload) = match t.spec.family() {
        Family::Process(p) => return kinds::run_process(ctx, p),
        Family::Load(l, w) => (l, w),
    };
    let Some(spec) = ctx.suite.target.as_ref() else {
        // A command workload with nothing to start (checked when the suite was read).
        let watches = kinds::watch::Watches::start(&ctx.suite.watches, t.interval);
        let mut r = kinds::run_http(ctx, test, workload, None)?;
        watches.finish(&mut r);
        return Ok(r);
    };
    if let Some(url) = &spec.unwatched {
        // Only reached: wait until it answers, load it, and say what was not measured.
        let url = crate::suite::substitute(url, &ctx.vars);
        lifecycle::wait_answering(&url, spec.ready_timeout)?;
        let mut r = kinds::run_http(ctx, test, workload, None)?;
        r.table.push(Line::Unwatched { url: url.clone() });
        return Ok(r);
    }
    let log = ctx.dir.join("target.log");
    lifecycle::build(spec, &ctx.vars, &ctx.dir.join("build.log"))?;
    let remote = |host: &str, how: &crate::sut::spec::Attach, every| match ctx.agents {
        Some(fleet) => crate::agents::watch::remote(fleet, host, how, every),
        None => Err(crate::Error::usage(format!(
            "[target] host = \"{host}\" is an agent's machine: run with --agents naming it"
        ))),
    };
    let running = lifecycle::start(
        spec,
        &ctx.vars,
        &log,
        t.interval,
        Some(ctx.sample_sink()),
        ctx.observer.clone(),
        &remote,
    )?;
    if let Some(cpus) = ctx.duet.and_then(|d| d.cpus.as_ref()) {
        crate::os::process::pin(&running.pids(), cpus);
    }
    // perf profiles this machine's processes only.
    let profiler = ctx.profile.then(|| match &running.host {
        Some(h) => Err(crate::Error::usage(format!(
            "the target runs on agent {h}'s machine"
        ))),
        None => crate::monitor::profile::start(running.pid, &ctx.dir),
    });
    let watches = kinds::watch::Watches::start(&ctx.suite.watches, t.interval);
    let outcome = kinds::run_http(ctx, test, workload, Some(&running));
    let flame = profiler.map(|p| match p {
        Ok(p) => p.finish(
            &format!("CPU of the target during {}", ctx.case.name),
            &ctx.dir.join("flamegraph.svg"),
        ),
        Err(why) => (
            crate::monitor::profile::FlameInfo::missing(why.to_string()),
            None,
        ),
    });
    let crashed = running.exited().map(|_| running.ending());
    let daemons = running.daemonised().then(|| running.daemons());
    let host = running.host.clone();
    let (summary, _) = running.stop(spec.stop_signal, spec.stop_grace);
    let mut r = outcome?;
    watches.finish(&mut r);
    if let Some((info, folded)) = flame {
        if let Some(why) = &info.why_not {
            r.table.push(Line::NoFlameGraph { why: why.clone() });
        } else if let Some(f) = &info.file {
            r.table.push(Line::FlameGraph { file: f.clone() });
        }
        r.flamegraph = Some(info);
        r.folded = folded;
    }
    if let Some(how) = crashed {
        r.fail(
            Status::Crashed,
            format!(
                "the target exited during the case ({how}); its last lines:\n{}",
                lifecycle::tail(&log, 15)
            ),
        );
    }
    if let Some(daemons) = daemons.filter(|d| !d.is_empty()) {
        let named: Vec<String> = daemons
            .iter()
            .map(|(pid, cmd)| format!("pid {pid} `{cmd}`"))
            .collect();
        r.table.push(Line::Daemonised {
            names: named.clone(),
        });
    }
    r.metrics.push(
        Metric::of("peak_rss", summary.peak_rss.bytes as f64)
            .from(summary.peak_rss.source.describe()),
    );
    kinds::analyse_log(ctx.suite, &log, &mut r);
    r.table.push(Line::Target {
        host: host.clone(),
        peak_rss: summary.peak_rss.bytes,
        rss_source: summary.peak_rss.source.describe().to_string(),
        cpu_s: summary.cpu.total_seconds,
        processes: summary.processes_seen,
    });
    r.target = Some(summary);
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ended(status: Status, reason: &str) -> CaseResult {
        let mut r = CaseResult::new();
        if status != Status::Passed {
            r.fail(status, reason.into());
        }
        r
    }

    #[test]
    fn an_expected_failure_passes_its_pass_fails_and_nothing_else_changes() {
        let caught = expected(true, ended(Status::Failed, "gate failed: x"));
        assert_eq!(caught.status, Status::Passed);
        assert_eq!(
            caught.reasons,
            ["caught, as expected (expect = \"failed\"): gate failed: x"]
        );
        let missed = expected(true, ended(Status::Passed, ""));
        assert_eq!(missed.status, Status::Failed);
        assert!(
            missed.reasons[0].starts_with("expected to fail"),
            "{:?}",
            missed.reasons
        );
        for s in [Status::Invalid, Status::Crashed] {
            assert_eq!(expected(true, ended(s, "r")).status, s);
        }
        assert_eq!(
            expected(false, ended(Status::Failed, "r")).status,
            Status::Failed
        );
    }
}
