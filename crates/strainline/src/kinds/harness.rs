//! The `harness` kind: the user's benchmark binary under the monitor, with the metrics
//! it prints (`key=value` tokens and flat JSON objects).

use crate::metrics::Direction;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::lines::Line;
use super::process::argv;
use super::{CaseCtx, CaseResult, Status};
use crate::os::signals;
use crate::store::Metric;
use crate::suite;
use crate::sut::lifecycle::{spawn_watched, tail};

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

pub(super) fn run(ctx: &CaseCtx, t: &suite::Harness) -> crate::error::Result<CaseResult> {
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
    r.table.push(Line::Harness {
        argv: a.clone(),
        exit: exit.describe(),
        wall_s: wall,
        peak_rss: summary.peak_rss.bytes,
        rss_source: summary.peak_rss.source.describe().to_string(),
        cpu_cores: summary.cpu.avg_cores,
        parsed: r.metrics.len() - 4,
    });
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
