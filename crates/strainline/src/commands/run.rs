//! `strainline run SUITE`: every case of the suite in order — start the target (build
//! first if asked), apply the workload of the test's kind, stop the target, judge (the
//! kind's own verdict, then the gates), store the case at once, print it — and finish
//! with the suite's verdict as the exit code. Ctrl-C stops the target and keeps the
//! completed cases.

use std::io::Write;

use crate::cli::RunArgs;
use crate::exit;
use crate::host::{git_state, Host};
use crate::kinds::{self, CaseCtx, CaseResult, Status};
use crate::os::signals;
use crate::store::{Location, Metric, NewRun, Store};
use crate::suite::{self, Kind};
use crate::sut::lifecycle;
use crate::Failure;

fn usage(msg: impl Into<String>) -> anyhow::Error {
    Failure::new(exit::USAGE, msg).into()
}

/// A `{{NAME}}` in the target or a workload that neither the matrix nor a `--var`
/// sets would reach the target literally: refused before anything starts.
fn check_placeholders(suite: &suite::Suite, args: &RunArgs) -> anyhow::Result<()> {
    let mut known: std::collections::BTreeSet<String> =
        ["port", "dir", "client", "seq", "size", "iteration"]
            .map(String::from)
            .into();
    known.extend(args.vars.iter().map(|v| v.0.clone()));
    for t in &suite.tests {
        known.extend(t.matrix.iter().map(|m| m.0.clone()));
    }
    let mut texts: Vec<(&str, &str)> = Vec::new();
    if let Some(target) = &suite.target {
        texts.extend(
            target
                .command
                .iter()
                .map(|a| ("the target's command", a.as_str())),
        );
        texts.extend(
            target
                .build
                .iter()
                .flatten()
                .map(|a| ("the target's build", a.as_str())),
        );
    }
    for t in &suite.tests {
        texts.extend(t.url.as_deref().map(|u| ("a test's url", u)));
    }
    for (what, text) in texts {
        let mut rest = text;
        while let Some(i) = rest.find("{{") {
            let Some(j) = rest[i..].find("}}") else { break };
            let name = rest[i + 2..i + j].trim();
            if !known.contains(name) && !name.starts_with("random") && !name.starts_with("csv") {
                return Err(usage(format!(
                    "{}: {what} uses {{{{{name}}}}}, which no matrix value or --var sets: add --var {name}=VALUE",
                    args.suite.display()
                )));
            }
            rest = &rest[i + j + 2..];
        }
    }
    Ok(())
}

pub fn run(store_location: &Location, args: RunArgs) -> anyhow::Result<i32> {
    if !(args.time_scale > 0.0 && args.time_scale.is_finite()) {
        return Err(usage(format!(
            "--time-scale {}: give a positive factor, e.g. 0.01",
            args.time_scale
        )));
    }
    let suite = suite::load(&args.suite, args.time_scale).map_err(usage)?;
    check_placeholders(&suite, &args)?;
    let store = Store::open(store_location).map_err(|e| usage(e.to_string()))?;
    let host = Host::current();
    let cwd = std::env::current_dir()?;
    let git = git_state(&cwd);
    let run_id = store.begin_run(&NewRun {
        kind: "suite",
        label: args.label.as_deref(),
        suite: Some(&suite.name),
        command: &format!("run {}", args.suite.display()),
        cwd: &cwd,
        git: git.as_ref(),
        host: &host,
    })?;
    store.set_run_settings(run_id, &serde_json::json!({ "compare": suite.compare }))?;
    signals::install();
    let work = store_location.work_dir().join(format!("run-{run_id}"));
    std::fs::create_dir_all(&work)?;
    let cases: Vec<suite::Case> = suite
        .cases()
        .into_iter()
        .filter(|c| {
            args.only
                .as_ref()
                .is_none_or(|o| suite.tests[c.test].name == *o)
        })
        .collect();
    if cases.is_empty() {
        return Err(usage(format!(
            "no test named '{}' in {}",
            args.only.unwrap_or_default(),
            args.suite.display()
        )));
    }
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "Suite {} — {} case(s), run #{run_id}, logs in {}",
        suite.name,
        cases.len(),
        work.display()
    )?;
    let mut worst = Status::Passed;
    // Metrics of every case, by test and matrix values, for the spread across repetitions.
    let mut groups: std::collections::BTreeMap<String, Vec<Vec<Metric>>> = Default::default();
    let mut done = 0;
    let mut last_ceiling = None;
    for (i, case) in cases.iter().enumerate() {
        if signals::interrupted() {
            break;
        }
        let test = &suite.tests[case.test];
        let dir = work.join(format!("case-{:03}", i + 1));
        std::fs::create_dir_all(&dir)?;
        let mut vars = case.vars.clone();
        for (k, v) in &args.vars {
            vars.entry(k.clone()).or_insert_with(|| v.clone());
        }
        vars.insert("port".into(), lifecycle::free_port().to_string());
        vars.insert("dir".into(), dir.display().to_string());
        writeln!(
            out,
            "\n[{}/{}] {} ({})",
            i + 1,
            cases.len(),
            case.name,
            test.kind.name()
        )?;
        out.flush()?;
        let params = serde_json::to_string(&case.vars)?;
        let case_id = store.begin_case(
            run_id,
            &case.name,
            test.kind.name(),
            Some(&params),
            case.repetition,
        )?;
        let ctx = CaseCtx {
            suite: &suite,
            test,
            case,
            vars,
            dir: dir.clone(),
            last_ceiling,
            store: store_location.clone(),
            profile: test.profile || args.profile,
            case_id,
        };
        let mut result = match run_case(&ctx) {
            Ok(r) => r,
            Err(e) => {
                // The target could not be built, started or made ready: the case could
                // not measure anything (invalid); any other error fails it.
                let mut r = CaseResult::new();
                let status = if e.downcast_ref::<lifecycle::TargetError>().is_some() {
                    Status::Invalid
                } else {
                    Status::Failed
                };
                r.fail(status, format!("{e:#}"));
                r
            }
        };
        if matches!(result.status, Status::Passed | Status::Failed) && !result.metrics.is_empty() {
            if let Err(e) = kinds::apply_gates(test, &mut result) {
                store.finish_run(
                    run_id,
                    "failed",
                    Some(exit::USAGE),
                    std::slice::from_ref(&e),
                )?;
                return Err(usage(format!("{}: {e}", args.suite.display())));
            }
        }
        if test.kind == Kind::Ramp {
            last_ceiling = result.metric("ceiling").or(last_ceiling);
        }
        if signals::interrupted() && result.status == Status::Passed && result.metrics.is_empty() {
            break;
        }
        worst = worst.max(result.status);
        done += 1;
        let group = case
            .name
            .rsplit_once('#')
            .map_or(case.name.clone(), |(g, _)| g.to_string());
        groups
            .entry(group)
            .or_default()
            .push(result.metrics.clone());
        print_case(&mut out, &result)?;
        for (name, points) in &result.series {
            store.append_series(case_id, name, points)?;
        }
        if let Some(folded) = &result.folded {
            store.put_artifact(case_id, "cpu_stacks.folded", folded.as_bytes())?;
        }
        for (name, data) in &result.histograms {
            store.put_histogram(case_id, name, (0.0, 0.0), "hdr-v2-deflate", data)?;
        }
        let processes = result
            .target
            .as_ref()
            .map(|t| t.processes.clone())
            .unwrap_or_default();
        store.finish_case(
            case_id,
            result.status.name(),
            &result.metrics,
            &processes,
            &result,
        )?;
    }
    print_spread(&mut out, &groups)?;
    let interrupted = signals::interrupted();
    let code = if interrupted {
        exit::INTERRUPTED
    } else {
        match worst {
            Status::Passed => exit::PASSED,
            Status::Invalid => exit::INVALID,
            Status::Failed => exit::FAILED,
            Status::Crashed => exit::CRASHED,
        }
    };
    let status = if interrupted {
        "interrupted"
    } else {
        worst.name()
    };
    store.finish_run(run_id, status, Some(code), &[])?;
    writeln!(
        out,
        "\nSuite {}: {} — {done} of {} case(s) run; stored as run #{run_id}{}",
        suite.name,
        status.to_uppercase(),
        cases.len(),
        if interrupted {
            " (interrupted: the completed cases are saved)"
        } else {
            ""
        }
    )?;
    if let Some(dir) = &args.report {
        let files = super::report::all_into(&store, run_id, dir)?;
        writeln!(out, "Reports: {} files in {}", files.len(), dir.display())?;
    }
    Ok(code)
}

/// One case: start what it needs, run its kind, stop, and gather the target's figures.
fn run_case(ctx: &CaseCtx) -> anyhow::Result<CaseResult> {
    let t = ctx.test;
    if matches!(t.kind, Kind::Crash | Kind::Scale | Kind::Harness) {
        return kinds::run_process(ctx);
    }
    let Some(spec) = ctx.suite.target.as_ref() else {
        // A command workload with nothing to start (checked when the suite was read).
        let watches = kinds::watch::Watches::start(&ctx.suite.watches, t.interval);
        let mut r = kinds::run_http(ctx, None)?;
        watches.finish(&mut r);
        return Ok(r);
    };
    let log = ctx.dir.join("target.log");
    lifecycle::build(spec, &ctx.vars, &ctx.dir.join("build.log"))?;
    let running = lifecycle::start(spec, &ctx.vars, &log, t.interval, Some(ctx.sample_sink()))?;
    let profiler = ctx
        .profile
        .then(|| crate::monitor::profile::start(running.pid, &ctx.dir));
    let watches = kinds::watch::Watches::start(&ctx.suite.watches, t.interval);
    let outcome = kinds::run_http(ctx, Some(&running));
    let flame = profiler.map(|p| match p {
        Ok(p) => p.finish(
            &format!("CPU of the target during {}", ctx.case.name),
            &ctx.dir.join("flamegraph.svg"),
        ),
        Err(why) => (crate::monitor::profile::FlameInfo::missing(why), None),
    });
    let crashed = running.exited();
    let (summary, _) = running.stop(spec.stop_signal, spec.stop_grace);
    let mut r = outcome?;
    watches.finish(&mut r);
    if let Some((info, folded)) = flame {
        if let Some(why) = &info.why_not {
            r.table.push(format!("no flame graph: {why}"));
        } else if let Some(f) = &info.file {
            r.table.push(format!("flame graph: {f}"));
        }
        r.flamegraph = Some(info);
        r.folded = folded;
    }
    if let Some(exit) = crashed {
        r.fail(
            Status::Crashed,
            format!(
                "the target exited during the case ({}); its last lines:\n{}",
                exit.describe(),
                lifecycle::tail(&log, 15)
            ),
        );
    }
    r.metrics.push(
        Metric::of("peak_rss", summary.peak_rss.bytes as f64)
            .from(summary.peak_rss.source.describe()),
    );
    kinds::analyse_log(ctx.suite, &log, &mut r);
    r.table.push(format!(
        "target: peak RSS {} ({}), CPU {:.2} s, {} process(es)",
        crate::units::Bytes(summary.peak_rss.bytes),
        summary.peak_rss.source.describe(),
        summary.cpu.total_seconds,
        summary.processes_seen
    ));
    r.target = Some(summary);
    Ok(r)
}

/// For tests repeated more than once: each metric's median, range and coefficient of
/// variation across the repetitions — how far a single run can be trusted.
fn print_spread(
    out: &mut dyn Write,
    groups: &std::collections::BTreeMap<String, Vec<Vec<Metric>>>,
) -> std::io::Result<()> {
    for (name, runs) in groups.iter().filter(|(_, r)| r.len() > 1) {
        writeln!(out, "\nSpread across {} repetitions of {name}:", runs.len())?;
        writeln!(
            out,
            "    {:<22} {:>14} {:>14} {:>14} {:>8}",
            "metric", "median", "min", "max", "CV"
        )?;
        let mut names: Vec<&str> = runs[0].iter().map(|m| m.name.as_str()).collect();
        names.sort_unstable();
        for n in names {
            let v: Vec<f64> = runs
                .iter()
                .filter_map(|ms| ms.iter().find(|m| m.name == n).map(|m| m.value))
                .collect();
            if v.len() < 2 {
                continue;
            }
            let mean = v.iter().sum::<f64>() / v.len() as f64;
            let sd =
                (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (v.len() - 1) as f64).sqrt();
            let cv = if mean != 0.0 {
                format!("{:.1}%", 100.0 * sd / mean.abs())
            } else {
                "-".into()
            };
            let (lo, hi) = v
                .iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| {
                    (a.min(*x), b.max(*x))
                });
            let med = crate::analysis::stats::median(&v).unwrap_or(f64::NAN);
            writeln!(out, "    {n:<22} {med:>14.4} {lo:>14.4} {hi:>14.4} {cv:>8}")?;
        }
    }
    Ok(())
}

fn print_case(out: &mut dyn Write, r: &CaseResult) -> std::io::Result<()> {
    for line in &r.table {
        writeln!(out, "    {line}")?;
    }
    writeln!(out, "  → {}", r.status.name().to_uppercase())?;
    for reason in &r.reasons {
        writeln!(out, "    - {reason}")?;
    }
    Ok(())
}
