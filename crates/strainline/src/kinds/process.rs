//! The process kinds: `crash` (kill the work with SIGKILL at a random or chosen point,
//! then run a verify command; K iterations — the object store's crash harness,
//! generalised), `scale` (the same work at growing sizes; the fitted growth exponent
//! tells linear from superlinear) and `harness` (the user's benchmark binary under the
//! monitor, with the metrics it prints).

use crate::metrics::Direction;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::details::{CrashDetails, CrashIteration, ScaleDetails};
use super::{CaseCtx, CaseResult, Status};
use crate::analysis::growth;
use crate::os::unit::{Ended, Unit};
use crate::os::{process, signals};
use crate::store::Metric;
use crate::suite::{self, substitute, ProcessTest};
use crate::sut::lifecycle::{spawn_watched, tail};

fn argv(cmd: &[String], vars: &BTreeMap<String, String>) -> Vec<String> {
    cmd.iter().map(|a| substitute(a, vars)).collect()
}

/// Starts `argv` in `unit` with output to `log`.
fn spawn(unit: &Unit, argv: &[String], log: &std::path::Path) -> crate::error::Result<u32> {
    Ok(unit.spawn(&mut unit.logged(argv, log)?)?.id())
}

/// Waits for `pid` (a child, the root of `unit`) to end; its exit and CPU seconds
/// (its own and its reaped children's). Interrupted: the unit is stopped, and an error.
fn wait(unit: &Unit, pid: u32) -> crate::error::Result<(crate::measure::ExitInfo, f64)> {
    loop {
        if let Some((_, r)) = process::reap_these(&[pid]).pop() {
            return Ok((
                crate::measure::ExitInfo {
                    code: r.exit,
                    signal: r.signal,
                },
                r.cpu_seconds,
            ));
        }
        if signals::interrupted() {
            unit.end();
            process::reap_these(&[pid]);
            return Err(crate::Error::Interrupted);
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Sleeps until `deadline` or `done` is true; false when interrupted.
fn pause_until(deadline: Instant, mut done: impl FnMut() -> bool) -> bool {
    while Instant::now() < deadline && !done() {
        if signals::interrupted() {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    true
}

pub fn run_process(ctx: &CaseCtx, test: ProcessTest) -> crate::error::Result<CaseResult> {
    match test {
        ProcessTest::Crash(spec) => crash(ctx, spec),
        ProcessTest::Scale(spec) => scale(ctx, spec),
        ProcessTest::Harness(spec) => harness(ctx, spec),
    }
}

fn crash(ctx: &CaseCtx, t: &suite::Crash) -> crate::error::Result<CaseResult> {
    let mut r = CaseResult::new();
    let (lo, hi) = t.kill_after;
    let mut rng = crate::rng::Rng::new(0x2545_F491_4F6C_DD1D ^ ctx.case.repetition as u64);
    let (mut survived, mut failed) = (0u32, 0u32);
    let mut rows = Vec::new();
    for i in 0..t.iterations {
        let dir = ctx.dir.join(format!("iteration-{i}"));
        std::fs::create_dir_all(&dir)?;
        let mut vars = ctx.vars.clone();
        vars.insert("dir".into(), dir.display().to_string());
        vars.insert("iteration".into(), i.to_string());
        let log = dir.join("work.log");
        let unit = Unit::new(true);
        let pid = spawn(&unit, &argv(&t.command, &vars), &log)?;
        let delay = lo + (hi.saturating_sub(lo)).mul_f64(rng.unit());
        let started = Instant::now();
        let point = match &t.kill_at_log {
            Some(re) => {
                let seen = || {
                    std::fs::read_to_string(&log)
                        .map(|s| re.is_match(&s))
                        .unwrap_or(false)
                };
                if !pause_until(started + hi, seen) {
                    unit.end();
                    return Err(crate::Error::Interrupted);
                }
                format!(
                    "at the log marker /{}/ ({:.0} ms)",
                    re.as_str(),
                    started.elapsed().as_secs_f64() * 1000.0
                )
            }
            None => {
                if !pause_until(started + delay, || false) {
                    unit.end();
                    return Err(crate::Error::Interrupted);
                }
                format!("after {:.0} ms", delay.as_secs_f64() * 1000.0)
            }
        };
        // The whole tree goes, and is gone, before verify looks at what it left.
        unit.kill();
        let (exit, _) = wait(&unit, pid)?;
        unit.end();
        drop(unit);
        let verify_log = dir.join("verify.log");
        let verify = Unit::new(true);
        let status = match verify.run(&mut verify.logged(&argv(&t.verify, &vars), &verify_log)?)? {
            Ended::Exited(status) => status,
            Ended::Interrupted => return Err(crate::Error::Interrupted),
        };
        let out = std::fs::read(&verify_log).unwrap_or_default();
        let said = String::from_utf8_lossy(&out).trim().to_string();
        let ok = status.success();
        if ok {
            survived += 1;
        } else {
            failed += 1;
            if failed == 1 {
                r.reasons.push(format!(
                    "iteration {i}: killed {point}; verify said: {said}"
                ));
            }
        }
        r.table.push(format!(
            "iteration {i:>3}: killed {point} ({}); verify: {} — {}",
            exit.describe(),
            if ok { "survived" } else { "FAILED" },
            said.lines().last().unwrap_or("")
        ));
        rows.push(CrashIteration {
            iteration: i,
            kill: point,
            survived: ok,
            verify: said,
        });
    }
    r.metrics
        .push(Metric::of("failed_iterations", failed as f64));
    r.metrics
        .push(Metric::of("survived_iterations", survived as f64));
    r.table.push(format!(
        "{survived} of {} iterations survived",
        t.iterations
    ));
    if failed > 0 {
        r.status = Status::Failed;
        r.reasons.insert(
            0,
            format!(
                "{failed} of {} iterations failed verification",
                t.iterations
            ),
        );
    }
    r.details = serde_json::to_value(CrashDetails { iterations: rows })?;
    Ok(r)
}

/// Runs of each size in a `scale` test: the spread of their costs gives the exponent's
/// interval. Sizes are run in rounds (every size once, then again) so that a drift of
/// the machine touches all sizes alike.
const RUNS_PER_SIZE: usize = 3;

fn scale(ctx: &CaseCtx, t: &suite::Scale) -> crate::error::Result<CaseResult> {
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

/// `key=value` tokens (numbers) and flat JSON objects in a harness's output.
pub fn parse_metrics(text: &str) -> Vec<(String, f64)> {
    let mut out = Vec::new();
    for line in text.lines() {
        let l = line.trim();
        if l.starts_with('{') {
            if let Ok(serde_json::Value::Object(m)) = serde_json::from_str::<serde_json::Value>(l) {
                out.extend(m.into_iter().filter_map(|(k, v)| Some((k, v.as_f64()?))));
            }
            continue;
        }
        for tok in l.split_whitespace() {
            if let Some((k, v)) = tok.split_once('=') {
                if let Ok(n) = v.trim_end_matches([',', ';']).parse::<f64>() {
                    if !k.is_empty()
                        && k.chars()
                            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
                    {
                        out.push((k.to_string(), n));
                    }
                }
            }
        }
    }
    out
}

fn harness(ctx: &CaseCtx, t: &suite::Harness) -> crate::error::Result<CaseResult> {
    let mut r = CaseResult::new();
    let log = ctx.dir.join("harness.log");
    let a = argv(&t.command, &ctx.vars);
    let running = spawn_watched(
        &a,
        &BTreeMap::new(),
        None,
        &log,
        ctx.test.interval,
        Some(ctx.sample_sink()),
        ctx.observer.clone(),
    )?;
    let started = Instant::now();
    while running.exited().is_none() {
        if signals::interrupted() {
            running.kill();
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let wall = started.elapsed().as_secs_f64();
    let exit = running.exited().expect("checked");
    let (summary, _) = running.stop(libc::SIGTERM, Duration::from_secs(1));
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    for (k, v) in parse_metrics(&text) {
        r.metrics.retain(|m| m.name != k);
        r.metrics
            .push(Metric::new(&k, v, "", Direction::None).from("harness output"));
    }
    r.metrics.push(
        Metric::of("peak_rss", summary.peak_rss.bytes as f64)
            .from(summary.peak_rss.source.describe()),
    );
    r.metrics.push(Metric::of("cpu_avg", summary.cpu.avg_cores));
    r.metrics.push(Metric::of("duration", wall));
    r.metrics
        .push(Metric::of("exit_code", exit.shell_status() as f64));
    r.table.push(format!(
        "harness {}: {}, {:.2}s, peak RSS {} ({}), CPU {:.1}% of a core; {} metric(s) parsed",
        a.join(" "),
        exit.describe(),
        wall,
        crate::units::Bytes(summary.peak_rss.bytes),
        summary.peak_rss.source.describe(),
        100.0 * summary.cpu.avg_cores,
        r.metrics.len() - 4
    ));
    if exit.shell_status() != 0 {
        r.fail(
            Status::Failed,
            format!(
                "the harness ended with {}:\n{}",
                exit.describe(),
                tail(&log, 10)
            ),
        );
    }
    r.target = Some(summary);
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_key_value_and_json_lines() {
        let m = parse_metrics(
            "stream_1gb backend=file bytes=1073741824 write_seconds=13.882 write_mib_per_s=73.76\n\
             {\"ops_per_sec\": 3500, \"name\": \"stress\"}\nnoise: x=y\n",
        );
        assert!(m.contains(&("bytes".into(), 1073741824.0)));
        assert!(m.contains(&("write_mib_per_s".into(), 73.76)));
        assert!(m.contains(&("ops_per_sec".into(), 3500.0)));
        assert!(!m
            .iter()
            .any(|(k, _)| k == "backend" || k == "x" || k == "name"));
    }
}
