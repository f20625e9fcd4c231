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
use crate::analysis::stats::least_squares;
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

fn scale(ctx: &CaseCtx, t: &suite::Scale) -> crate::error::Result<CaseResult> {
    let mut r = CaseResult::new();
    let (mut xs, mut ys) = (Vec::new(), Vec::new());
    r.table.push(format!(
        "{:>12} {:>12} {:>12} {:>14}",
        "size", "wall s", "CPU s", "CPU µs / unit"
    ));
    for &size in &t.sizes {
        let mut vars = ctx.vars.clone();
        vars.insert("size".into(), size.to_string());
        let log = ctx.dir.join(format!("size-{size}.log"));
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
        // CPU time is what the work costs; wall time for work that mostly waits.
        let cost = if cpu >= 0.02 { cpu } else { wall };
        xs.push((size as f64).ln());
        ys.push(cost.ln());
        r.table.push(format!(
            "{size:>12} {wall:>12.3} {cpu:>12.3} {:>14.3}",
            1e6 * cost / size as f64
        ));
    }
    let (exponent, _) = least_squares(&xs, &ys).unwrap_or((f64::NAN, 0.0));
    let superlinear = exponent > 1.3;
    r.metrics.push(Metric::of("exponent", exponent));
    r.metrics
        .push(Metric::of("superlinear", f64::from(superlinear)));
    r.table.push(format!(
        "cost grows as size^{exponent:.2}: {}",
        if superlinear {
            "superlinear"
        } else {
            "linear (or better)"
        }
    ));
    if superlinear {
        r.fail(
            Status::Failed,
            format!("cost grows superlinearly: exponent {exponent:.2} (> 1.3)"),
        );
    }
    r.details = serde_json::to_value(ScaleDetails {
        sizes: t.sizes.clone(),
        exponent,
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
