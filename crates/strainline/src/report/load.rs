//! The load run's summary block and its JSON document (schema `strainline.load.v1`).

use std::io::{self, Write};

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::load::recorder::Tally;
use crate::load::verdict::Verdict;
use crate::load::{Outcome, Second};

pub const JSON_SCHEMA: &str = "strainline.load.v1";

/// Latency percentiles, microseconds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Percentiles {
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub p999: u64,
    pub max: u64,
    pub mean: f64,
}

pub fn percentiles(h: &Histogram<u64>) -> Percentiles {
    if h.is_empty() {
        return Percentiles {
            p50: 0,
            p90: 0,
            p99: 0,
            p999: 0,
            max: 0,
            mean: 0.0,
        };
    }
    Percentiles {
        p50: h.value_at_quantile(0.5),
        p90: h.value_at_quantile(0.9),
        p99: h.value_at_quantile(0.99),
        p999: h.value_at_quantile(0.999),
        max: h.max(),
        mean: h.mean(),
    }
}

/// Formats microseconds for people: `850µs`, `12.3ms`, `1.20s`.
pub fn us(v: u64) -> String {
    crate::units::format_duration(std::time::Duration::from_micros(v))
}

/// The figures of a load run, as serialized in JSON and stored.
#[derive(Debug, Clone, Serialize)]
pub struct LoadSummary {
    pub url: String,
    /// `open` or `closed`.
    pub model: String,
    /// What was asked, in words (e.g. "1000 req/s constant for 10s, 2 threads").
    pub description: String,
    pub status: String,
    pub reasons: Vec<String>,
    pub interrupted: bool,
    pub elapsed_seconds: f64,
    pub threads: usize,
    pub offered_rate: Option<f64>,
    pub achieved_rate: f64,
    pub sent: u64,
    pub completed: u64,
    pub ok: u64,
    pub errors: u64,
    pub error_rate: f64,
    pub by_status: std::collections::BTreeMap<String, u64>,
    pub by_error: std::collections::BTreeMap<String, u64>,
    pub bytes_received: u64,
    /// From the intended send time (open model); equal to service time in the closed model.
    pub latency_us: Percentiles,
    /// From the actual send.
    pub service_time_us: Percentiles,
    /// How late the generator woke for scheduled sends (open model).
    pub schedule_lag_us: Percentiles,
    pub connections_opened: u64,
    pub cap_hits: u64,
    /// CPU seconds of each worker thread.
    pub generator_thread_cpu_seconds: Vec<f64>,
    /// Per scenario step.
    pub steps: Vec<StepSummary>,
}

/// One scenario step's figures.
#[derive(Debug, Clone, Serialize)]
pub struct StepSummary {
    pub name: String,
    pub sent: u64,
    pub ok: u64,
    pub errors: u64,
    pub latency_us: Percentiles,
}

pub fn summarize(
    url: &str,
    model: &str,
    description: &str,
    o: &Outcome,
    v: &Verdict,
    step_names: &[String],
) -> LoadSummary {
    let t: &Tally = &o.total;
    let attempts = t.completed + t.by_error.values().sum::<u64>();
    LoadSummary {
        url: url.to_string(),
        model: model.to_string(),
        description: description.to_string(),
        status: v.status.to_string(),
        reasons: v.reasons.clone(),
        interrupted: o.interrupted,
        elapsed_seconds: o.elapsed,
        threads: o.threads,
        offered_rate: v.offered_rate,
        achieved_rate: v.achieved_rate,
        sent: t.sent,
        completed: t.completed,
        ok: t.ok,
        errors: t.errors(),
        error_rate: if attempts > 0 {
            t.errors() as f64 / attempts as f64
        } else {
            0.0
        },
        by_status: t
            .by_status
            .iter()
            .map(|(k, v)| {
                (
                    if o.exit_codes {
                        format!("exit {k}")
                    } else {
                        k.to_string()
                    },
                    *v,
                )
            })
            .collect(),
        by_error: t
            .by_error
            .iter()
            .map(|(k, v)| (k.name().to_string(), *v))
            .collect(),
        bytes_received: t.bytes_received,
        latency_us: percentiles(&t.corrected),
        service_time_us: percentiles(&t.service),
        schedule_lag_us: percentiles(&t.lag),
        connections_opened: t.connections_opened,
        cap_hits: t.cap_hits,
        generator_thread_cpu_seconds: o.thread_cpu.clone(),
        steps: step_names
            .iter()
            .enumerate()
            .map(|(i, name)| {
                let t = o.steps.get(i).cloned().unwrap_or_default();
                StepSummary {
                    name: name.clone(),
                    sent: t.sent,
                    ok: t.ok,
                    errors: t.errors(),
                    latency_us: percentiles(&t.corrected),
                }
            })
            .collect(),
    }
}

fn pline(out: &mut dyn Write, name: &str, p: &Percentiles) -> io::Result<()> {
    writeln!(
        out,
        "  {name:<14}p50 {}  p90 {}  p99 {}  p99.9 {}  max {}",
        us(p.p50),
        us(p.p90),
        us(p.p99),
        us(p.p999),
        us(p.max)
    )
}

pub fn write_summary(out: &mut dyn Write, s: &LoadSummary, run_id: Option<i64>) -> io::Result<()> {
    let rule = "=".repeat(72);
    writeln!(out, "{rule}")?;
    let id = run_id.map(|i| format!("  (run #{i})")).unwrap_or_default();
    writeln!(out, "Load: {}{id}", s.url)?;
    writeln!(out, "  {}", s.description)?;
    writeln!(out, "{rule}")?;
    writeln!(
        out,
        "  {:<14}{} sent, {} completed ({} ok), {} errors ({:.3}%)",
        "Requests",
        s.sent,
        s.completed,
        s.ok,
        s.errors,
        100.0 * s.error_rate
    )?;
    match s.offered_rate {
        Some(off) => writeln!(
            out,
            "  {:<14}{:.1} req/s achieved of {:.1} offered ({:.1}%) over {:.2}s",
            "Throughput",
            s.achieved_rate,
            off,
            100.0 * s.achieved_rate / off,
            s.elapsed_seconds
        )?,
        None => writeln!(
            out,
            "  {:<14}{:.1} req/s over {:.2}s",
            "Throughput", s.achieved_rate, s.elapsed_seconds
        )?,
    }
    if s.model != "closed" {
        writeln!(
            out,
            "  Latency, from the intended send time (coordinated-omission corrected):"
        )?;
        pline(out, "", &s.latency_us)?;
        writeln!(out, "  Service time, from the actual send:")?;
        pline(out, "", &s.service_time_us)?;
    } else {
        writeln!(out, "  Latency (closed model: from the actual send):")?;
        pline(out, "", &s.latency_us)?;
    }
    if !s.steps.is_empty() {
        writeln!(
            out,
            "  {:<14}{:>9} {:>9} {:>7} {:>9} {:>9}",
            "Steps", "sent", "ok", "errors", "p50", "p99"
        )?;
        for st in &s.steps {
            writeln!(
                out,
                "    {:<12}{:>9} {:>9} {:>7} {:>9} {:>9}",
                st.name,
                st.sent,
                st.ok,
                st.errors,
                us(st.latency_us.p50),
                us(st.latency_us.p99)
            )?;
        }
    }
    let statuses: Vec<String> = s
        .by_status
        .iter()
        .map(|(k, v)| format!("{k}: {v}"))
        .collect();
    writeln!(
        out,
        "  {:<14}{}",
        "Status",
        if statuses.is_empty() {
            "-".into()
        } else {
            statuses.join("  ")
        }
    )?;
    if !s.by_error.is_empty() {
        let errors: Vec<String> = s
            .by_error
            .iter()
            .map(|(k, v)| format!("{k}: {v}"))
            .collect();
        writeln!(out, "  {:<14}{}", "Errors", errors.join("  "))?;
    }
    let cpu: f64 = s.generator_thread_cpu_seconds.iter().sum();
    let busiest = s
        .generator_thread_cpu_seconds
        .iter()
        .fold(0.0f64, |a, b| a.max(*b));
    writeln!(
        out,
        "  {:<14}{} thread{}, CPU {:.2} s ({:.0}% of the busiest thread), {} connections opened{}",
        "Generator",
        s.threads,
        if s.threads == 1 { "" } else { "s" },
        cpu,
        if s.elapsed_seconds > 0.0 {
            100.0 * busiest / s.elapsed_seconds
        } else {
            0.0
        },
        s.connections_opened,
        if s.model != "closed" {
            format!(", schedule lag p99 {}", us(s.schedule_lag_us.p99))
        } else {
            String::new()
        }
    )?;
    let verdict = match s.status.as_str() {
        "valid" => "VALID: the target, not the generator, set the pace",
        "invalid" => "INVALID: the generator, not the target, was the limit",
        _ => "FAILED",
    };
    writeln!(out, "  {:<14}{verdict}", "Verdict")?;
    for r in &s.reasons {
        writeln!(out, "    - {r}")?;
    }
    if s.interrupted {
        writeln!(
            out,
            "  Interrupted: what was measured until then is shown and saved."
        )?;
    }
    writeln!(out, "{rule}")
}

#[derive(Serialize)]
struct Document<'a> {
    schema: &'static str,
    run_id: Option<i64>,
    strainline_version: &'static str,
    summary: &'a LoadSummary,
    seconds: &'a [Second],
}

pub fn to_json(s: &LoadSummary, seconds: &[Second], run_id: Option<i64>) -> String {
    serde_json::to_string_pretty(&Document {
        schema: JSON_SCHEMA,
        run_id,
        strainline_version: env!("CARGO_PKG_VERSION"),
        summary: s,
        seconds,
    })
    .expect("serializable")
}

/// The figures of a load run as named metrics.
pub fn metrics(s: &LoadSummary) -> Vec<crate::store::Metric> {
    let m = crate::store::Metric::new;
    let ms = |us: u64| us as f64 / 1000.0;
    let mut v = vec![
        m("throughput", s.achieved_rate, "req/s", "higher"),
        m("latency_p50", ms(s.latency_us.p50), "ms", "lower"),
        m("latency_p90", ms(s.latency_us.p90), "ms", "lower"),
        m("latency_p99", ms(s.latency_us.p99), "ms", "lower"),
        m("latency_p999", ms(s.latency_us.p999), "ms", "lower"),
        m("latency_max", ms(s.latency_us.max), "ms", "lower"),
        m("service_p50", ms(s.service_time_us.p50), "ms", "lower"),
        m("service_p99", ms(s.service_time_us.p99), "ms", "lower"),
        m("error_rate", s.error_rate, "ratio", "lower"),
        m("sent", s.sent as f64, "count", "none"),
        m("completed", s.completed as f64, "count", "none"),
        m(
            "generator_cpu_seconds",
            s.generator_thread_cpu_seconds.iter().sum(),
            "s",
            "lower",
        ),
    ];
    if let Some(off) = s.offered_rate {
        v.push(m("offered_rate", off, "req/s", "none"));
        v.push(m(
            "schedule_lag_p99",
            ms(s.schedule_lag_us.p99),
            "ms",
            "lower",
        ));
    }
    v
}
