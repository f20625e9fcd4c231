//! Everything a report shows about one stored run, read once from the store: the run,
//! each case with its summary, metrics, resource samples, named series and latency
//! percentiles. Every output format (HTML, Markdown, JUnit, CSV) renders this.

use hdrhistogram::Histogram;

use crate::load::summary::AgentSummary;
use crate::measure::Sample;
use crate::store::{CaseRow, RunRow, Store};

/// The columns of [`CaseData::agent_rows`].
pub const AGENT_COLUMNS: [&str; 9] = [
    "agent",
    "slice",
    "sent",
    "achieved",
    "p99",
    "lag p99",
    "CPU",
    "clock offset",
    "its generator",
];

/// The agents of a stored summary — a load run's (`agents`) or a suite case's
/// (`details.agents`) — one row each under [`AGENT_COLUMNS`]: the one rendering of an
/// agent's part for `show`, the case's table and the reports.
pub fn agent_rows(summary: &serde_json::Value) -> Vec<Vec<String>> {
    let stored = summary
        .get("agents")
        .or_else(|| summary.pointer("/details/agents"));
    let agents: Vec<AgentSummary> = stored
        .and_then(|v| serde_json::from_value(v.clone()).ok())
        .unwrap_or_default();
    agents.iter().map(agent_row).collect()
}

/// An agent's row: name, slice, sent, rate, p99, lag p99, CPU, clock offset, state.
pub fn agent_row(a: &AgentSummary) -> Vec<String> {
    let us = crate::units::format_micros;
    let cpu: f64 = a.generator_thread_cpu_seconds.iter().sum();
    vec![
        a.name.clone(),
        format!("{}/{}", a.slice + 1, a.of),
        a.sent.to_string(),
        crate::units::rate(a.achieved_rate),
        us(a.latency_us.p99),
        us(a.schedule_lag_us.p99),
        format!("{:.2} s", cpu + 0.0),
        format!("{:+.0} µs", a.clock_offset_us),
        match (&a.lost, a.status) {
            (Some(why), _) => format!("LOST: {why}"),
            (None, Some(s)) => s.name().to_string(),
            (None, None) => "-".into(),
        },
    ]
}

/// An agent's row as a line: `a1 slice 1/2: 400 sent, 199.8 req/s, p99 …, valid`.
pub fn agent_line(row: &[String]) -> String {
    format!(
        "{} slice {}: {} sent, {}, p99 {}, lag p99 {}, CPU {}, clock {}, {}",
        row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7], row[8]
    )
}

/// The columns of [`step_rows`].
pub const STEP_COLUMNS: [&str; 8] = [
    "step",
    "sent",
    "ok",
    "errors",
    "p50",
    "p95",
    "p99",
    "failure causes",
];

/// The columns of [`check_rows`].
/// The columns of a case's gates.
pub const GATE_COLUMNS: [&str; 4] = ["gate", "measured", "result", "detail"];

pub const CHECK_COLUMNS: [&str; 5] = ["check", "step", "passed", "failed", "pass rate"];

/// A scenario's steps in a stored summary — a load run's (`steps`) or a suite case's
/// (`details.scenario_steps`; a ramp's `details.steps` are its load steps).
fn steps_of(summary: &serde_json::Value) -> &[serde_json::Value] {
    summary
        .get("steps")
        .or_else(|| summary.pointer("/details/scenario_steps"))
        .and_then(|s| s.as_array())
        .map_or(&[], Vec::as_slice)
}

/// A row of a group's or a tag's figures under [`STEP_COLUMNS`]: its name, three
/// counts (sent, ok, errors; a group's runs in a row, all ok, not) and percentiles `p`.
fn together_row(name: String, counts: [u64; 3], p: &serde_json::Value) -> Vec<String> {
    let us = |k: &str| crate::units::format_micros(p[k].as_u64().unwrap_or(0));
    vec![
        name,
        counts[0].to_string(),
        counts[1].to_string(),
        counts[2].to_string(),
        us("p50"),
        us("p95"),
        us("p99"),
        String::new(),
    ]
}

/// The rows of a load run's groups (their steps together, then their time in a row)
/// and tags, after its steps'.
fn label_rows(summary: &serde_json::Value) -> Vec<Vec<String>> {
    let n = |v: &serde_json::Value| v.as_u64().unwrap_or(0);
    let list = |k: &str| summary[k].as_array().map_or(&[][..], Vec::as_slice);
    let mut rows = Vec::new();
    for g in list("groups") {
        let name = g["name"].as_str().unwrap_or_default();
        let counts = [n(&g["sent"]), n(&g["ok"]), n(&g["errors"])];
        rows.push(together_row(
            format!("group {name}"),
            counts,
            &g["latency_us"],
        ));
        if let Some(d) = g.get("duration_us") {
            let (runs, ok) = (n(&g["runs"]), n(&g["runs_ok"]));
            let counts = [runs, ok, runs.saturating_sub(ok)];
            rows.push(together_row(
                format!("group {name}, in a row (runs)"),
                counts,
                d,
            ));
        }
    }
    for t in list("tags") {
        let counts = [n(&t["sent"]), n(&t["ok"]), n(&t["errors"])];
        let tag = t["tag"].as_str().unwrap_or_default();
        rows.push(together_row(format!("tag {tag}"), counts, &t["latency_us"]));
    }
    rows
}

/// One row a step under [`STEP_COLUMNS`]: what it sent, its latency and why it failed;
/// then its groups and tags.
pub fn step_rows(summary: &serde_json::Value) -> Vec<Vec<String>> {
    let n = |v: &serde_json::Value| v.as_u64().unwrap_or(0);
    let mut rows: Vec<Vec<String>> = steps_of(summary)
        .iter()
        .map(|st| {
            let causes: Vec<String> = st["causes"]
                .as_object()
                .map(|m| m.iter().map(|(k, v)| format!("{k} {}", n(v))).collect())
                .unwrap_or_default();
            vec![
                st["name"].as_str().unwrap_or_default().to_string(),
                n(&st["sent"]).to_string(),
                n(&st["ok"]).to_string(),
                n(&st["errors"]).to_string(),
                crate::units::format_micros(n(&st["latency_us"]["p50"])),
                // Runs stored before p95 was kept have none: a dash, not 0.
                st["latency_us"]
                    .get("p95")
                    .map_or("-".into(), |v| crate::units::format_micros(n(v))),
                crate::units::format_micros(n(&st["latency_us"]["p99"])),
                causes.join(", "),
            ]
        })
        .collect();
    rows.extend(label_rows(summary));
    rows
}

/// One row a named check under [`CHECK_COLUMNS`].
pub fn check_rows(summary: &serde_json::Value) -> Vec<Vec<String>> {
    let n = |v: &serde_json::Value| v.as_u64().unwrap_or(0);
    steps_of(summary)
        .iter()
        .flat_map(|st| {
            let step = st["name"].as_str().unwrap_or_default().to_string();
            st["checks"].as_array().into_iter().flatten().map(move |c| {
                let (passed, failed) = (n(&c["passed"]), n(&c["failed"]));
                let rate = if passed + failed == 0 {
                    "-".to_string()
                } else {
                    crate::units::share(passed as f64 / (passed + failed) as f64)
                };
                vec![
                    c["name"].as_str().unwrap_or_default().to_string(),
                    step.clone(),
                    passed.to_string(),
                    failed.to_string(),
                    rate,
                ]
            })
        })
        .collect()
}

pub struct CaseData {
    pub row: CaseRow,
    pub samples: Vec<Sample>,
    pub series: Vec<(String, Vec<(f64, f64)>)>,
    /// Latency percentile curve: (percentile, milliseconds), from the stored histograms.
    pub latency: Vec<(f64, f64)>,
    /// The same latencies in ten log-spaced buckets (as `load`'s summary prints them).
    pub histogram: Vec<crate::load::summary::Bucket>,
    /// Where the HTML links the flame graph (a copy beside the report), when set.
    pub flamegraph_link: Option<String>,
    /// A load case over time, when it kept its seconds.
    pub timeline: Option<super::timeline::Timeline>,
}

impl CaseData {
    /// The case's stored details as a kind's typed details (the default without them).
    pub fn details<T: for<'de> serde::Deserialize<'de> + Default>(&self) -> T {
        crate::kinds::details::read(self.row.summary.as_ref())
    }

    /// A metric's value as people read it: in its unit, and a ramp's ceiling as the
    /// terminal words it (`≥ 500 req/s (never broke)` when the ramp never found it).
    pub fn shown(&self, m: &crate::store::Metric) -> String {
        if m.name == "ceiling" {
            let d: crate::kinds::details::RampDetails = self.details();
            if let Some(end) = d.end {
                return end.ceiling(m.value);
            }
        }
        crate::units::format_value(m.value, &m.unit)
    }

    /// The summary's field at a JSON pointer (`/details/ceiling`), if any.
    pub fn detail(&self, pointer: &str) -> Option<&serde_json::Value> {
        self.row.summary.as_ref()?.pointer(pointer)
    }

    pub fn reasons(&self) -> Vec<String> {
        self.detail("/reasons")
            .and_then(|v| v.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Each gate the case was judged by, with its measured value (as stored).
    pub fn gates(&self) -> &[crate::store::GateResult] {
        &self.row.gates
    }

    /// Its gates, one row each under [`GATE_COLUMNS`].
    pub fn gate_rows(&self) -> Vec<Vec<String>> {
        self.row
            .gates
            .iter()
            .map(|g| {
                vec![
                    g.gate.clone(),
                    g.measured_shown(),
                    g.verdict_word().into(),
                    g.detail.clone(),
                ]
            })
            .collect()
    }

    /// Why the case did not pass: its failed gates, then its reasons that are not already
    /// those; never a note (evidence that did not change its verdict).
    pub fn why(&self) -> Vec<String> {
        let mut why: Vec<String> = self
            .row
            .gates
            .iter()
            .filter(|g| !g.passed)
            .map(|g| format!("gate failed: {}", g.detail))
            .collect();
        for r in self.reasons() {
            if !r.starts_with("note: ") && !why.contains(&r) {
                why.push(r);
            }
        }
        why
    }

    /// The load agents that generated the case's load (a load run's summary, or a suite
    /// case's details), one row each under [`AGENT_COLUMNS`]; empty without agents.
    pub fn agent_rows(&self) -> Vec<Vec<String>> {
        self.row.summary.as_ref().map_or_else(Vec::new, agent_rows)
    }

    /// A scenario's steps (a load run's summary, or a suite case's details), one row
    /// each under [`STEP_COLUMNS`].
    /// Its latency histogram, one row a bucket under [`HISTOGRAM_COLUMNS`].
    pub fn histogram_rows(&self) -> Vec<Vec<String>> {
        histogram_rows(&self.histogram)
    }

    pub fn step_rows(&self) -> Vec<Vec<String>> {
        self.row.summary.as_ref().map_or_else(Vec::new, step_rows)
    }

    /// A scenario's named checks, one row each under [`CHECK_COLUMNS`].
    pub fn check_rows(&self) -> Vec<Vec<String>> {
        self.row.summary.as_ref().map_or_else(Vec::new, check_rows)
    }

    pub fn series(&self, name: &str) -> Option<&[(f64, f64)]> {
        self.series
            .iter()
            .find(|s| s.0 == name)
            .map(|s| s.1.as_slice())
    }
}

pub struct RunData {
    pub run: RunRow,
    pub cases: Vec<CaseData>,
}

/// The key figures of the summary of cases, each a column of its own (shown when any
/// case has it): (metric, column).
const KEY_FIGURES: [(&str, &str); 8] = [
    ("throughput", "throughput"),
    ("latency_p99", "p99"),
    ("error_rate", "errors"),
    ("ceiling", "ceiling"),
    ("peak_rss", "peak RSS"),
    ("cpu_per_op", "CPU per op"),
    ("target_cpu", "target CPU"),
    ("leak", "leak"),
];

impl RunData {
    /// The name that heads its reports: its suite's, else the tool's.
    pub fn title(&self) -> String {
        let who = self
            .run
            .suite
            .as_deref()
            .filter(|s| !s.is_empty())
            .unwrap_or("strainline");
        format!(
            "{who} run #{}{}",
            self.run.id,
            self.run
                .label
                .as_ref()
                .map(|l| format!(" ({l})"))
                .unwrap_or_default()
        )
    }

    /// Every case in one table, for the top of the HTML and Markdown reports: its
    /// kind, verdict, gates held, and each key figure any case has in a column of its
    /// own, in its unit ("—" where a case has none).
    pub fn summary_table(&self) -> (Vec<String>, Vec<Vec<String>>) {
        let shown: Vec<(&str, &str)> = KEY_FIGURES
            .iter()
            .copied()
            .filter(|(m, _)| {
                self.cases
                    .iter()
                    .any(|c| c.row.metrics.iter().any(|x| x.name == *m))
            })
            .collect();
        let any_gates = self.cases.iter().any(|c| !c.gates().is_empty());
        let mut heads: Vec<String> = ["case", "kind", "verdict"].map(String::from).to_vec();
        heads.extend(shown.iter().map(|(_, h)| h.to_string()));
        if any_gates {
            heads.push("gates held".into());
        }
        let rows = self
            .cases
            .iter()
            .map(|c| {
                let mut row = vec![
                    c.row.name.clone(),
                    c.row.test_kind.clone(),
                    c.row.status.name().to_uppercase(),
                ];
                for (m, _) in &shown {
                    row.push(
                        c.row
                            .metrics
                            .iter()
                            .find(|x| x.name == *m)
                            .map_or_else(|| "—".to_string(), |x| c.shown(x)),
                    );
                }
                if any_gates {
                    let g = c.gates();
                    row.push(match g.len() {
                        0 => "—".into(),
                        n => format!("{} of {n}", g.iter().filter(|g| g.passed).count()),
                    });
                }
                row
            })
            .collect();
        (heads, rows)
    }

    /// The run's verdict in one word, and why, for the top of every report.
    pub fn verdict(&self) -> (String, Vec<String>) {
        let mut why = Vec::new();
        for c in &self.cases {
            if !c.row.status.good() {
                let reasons = c.why();
                if reasons.is_empty() {
                    why.push(format!("{}: {}", c.row.name, c.row.status));
                }
                why.extend(reasons.iter().map(|r| format!("{}: {r}", c.row.name)));
            }
        }
        (self.run.status.name().to_uppercase(), why)
    }
}

/// Percentiles of the latency curve.
const PERCENTILES: [f64; 12] = [
    0.0, 50.0, 75.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.95, 99.99, 99.999, 100.0,
];

/// The columns of a case's latency histogram.
pub const HISTOGRAM_COLUMNS: [&str; 4] = ["latency ≤", "requests", "share", ""];

/// A histogram's rows under [`HISTOGRAM_COLUMNS`]: each bucket's bound, count, share and
/// a bar of up to 30 squares (one at least for a bucket that has any).
pub fn histogram_rows(buckets: &[crate::load::summary::Bucket]) -> Vec<Vec<String>> {
    let total: u64 = buckets.iter().map(|b| b.count).sum();
    let most = buckets.iter().map(|b| b.count).max().unwrap_or(0);
    if total == 0 {
        return Vec::new();
    }
    buckets
        .iter()
        .map(|b| {
            let bar = ((b.count as f64 / most as f64) * 30.0).round() as usize;
            let bar = if b.count > 0 { bar.max(1) } else { 0 };
            vec![
                crate::units::format_value(b.le_us as f64 / 1000.0, "ms"),
                b.count.to_string(),
                crate::units::share(b.count as f64 / total as f64),
                "■".repeat(bar),
            ]
        })
        .collect()
}

/// The case's latency: its percentile curve and its histogram, from the stored
/// histograms merged.
fn latency_of(
    histograms: &[crate::store::StoredHistogram],
) -> (Vec<(f64, f64)>, Vec<crate::load::summary::Bucket>) {
    let mut merged: Option<Histogram<u64>> = None;
    for h in histograms {
        if h.name != "latency_us" || h.encoding != crate::load::recorder::hdr::STORED {
            continue;
        }
        let Some(part) = crate::load::recorder::hdr::from_stored(&h.data) else {
            continue;
        };
        match &mut merged {
            Some(m) => {
                let _ = m.add(&part);
            }
            None => merged = Some(part),
        }
    }
    match merged {
        Some(h) if !h.is_empty() => (
            PERCENTILES
                .iter()
                .map(|p| (*p, h.value_at_quantile(p / 100.0) as f64 / 1000.0))
                .collect(),
            crate::load::summary::buckets(&h, 10),
        ),
        _ => (Vec::new(), Vec::new()),
    }
}

/// The names of a scenario's steps and then its groups (each group's runs in a row),
/// by the index their seconds are kept under.
fn timeline_names(summary: &serde_json::Value) -> Vec<String> {
    let name = |v: &serde_json::Value| v["name"].as_str().unwrap_or_default().to_string();
    let groups = summary["groups"].as_array().map_or(&[][..], Vec::as_slice);
    (steps_of(summary).iter().map(name))
        .chain(
            groups
                .iter()
                .map(|g| format!("group {}, in a row", name(g))),
        )
        .collect()
}

/// A case's phases as its summary keeps them (`[name, t]` on the samples' clock).
fn phases_of(summary: Option<&serde_json::Value>) -> Vec<(String, f64)> {
    summary
        .and_then(|s| s.pointer("/phases"))
        .and_then(|p| p.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|p| Some((p[0].as_str()?.to_string(), p[1].as_f64()?)))
                .collect()
        })
        .unwrap_or_default()
}

/// Reads a run (by id or label) and everything its reports show.
pub fn load(store: &Store, key: &str) -> crate::store::Result<RunData> {
    let run = store.find_run(key)?;
    let mut cases = Vec::new();
    for row in store.cases(run.id)? {
        let samples = store.samples(row.id)?;
        let series: Vec<_> = store
            .series_names(row.id)?
            .into_iter()
            .map(|n| {
                let pts = store.series(row.id, &n).unwrap_or_default();
                (n, pts)
            })
            .collect();
        let histograms = store.histograms(row.id).unwrap_or_default();
        let (latency, histogram) = latency_of(&histograms);
        let phases = phases_of(row.summary.as_ref());
        let step_names = row.summary.as_ref().map(timeline_names).unwrap_or_default();
        let timeline =
            super::timeline::Timeline::read(&series, &histograms, &samples, &phases, &step_names);
        cases.push(CaseData {
            row,
            samples,
            series,
            latency,
            histogram,
            flamegraph_link: None,
            timeline,
        });
    }
    Ok(RunData { run, cases })
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_histogram_s_rows_give_each_bucket_its_bound_count_share_and_bar() {
        use crate::load::summary::Bucket;
        let rows = histogram_rows(&[
            Bucket {
                le_us: 1000,
                count: 5,
            },
            Bucket {
                le_us: 2000,
                count: 0,
            },
            Bucket {
                le_us: 4000,
                count: 10,
            },
        ]);
        assert_eq!(rows[0], ["1.00 ms", "5", "33.33%", &"■".repeat(15)]);
        assert_eq!(rows[1], ["2.00 ms", "0", "0.00%", ""]);
        assert_eq!(rows[2], ["4.00 ms", "10", "66.67%", &"■".repeat(30)]);
        assert!(histogram_rows(&[Bucket { le_us: 1, count: 0 }]).is_empty());
    }

    use super::*;

    /// Steps as a load run stores them (`steps`) and as a suite case does
    /// (`details.scenario_steps`): the same rows.
    #[test]
    fn steps_and_checks_read_back_into_rows() {
        let steps = serde_json::json!([{
            "name": "login", "sent": 10, "ok": 8, "errors": 2,
            "latency_us": {"p50": 1500, "p99": 12000},
            "checks": [{"name": "logged_in", "passed": 8, "failed": 2}],
            "causes": {"check:logged_in": 2}
        }, {"name": "browse", "sent": 5, "ok": 5, "errors": 0,
            "latency_us": {"p50": 900, "p99": 2000}}]);
        for stored in [
            serde_json::json!({ "steps": steps }),
            serde_json::json!({ "details": { "scenario_steps": steps } }),
        ] {
            let rows = step_rows(&stored);
            assert_eq!(rows.len(), 2);
            assert_eq!(rows[0][..4], ["login", "10", "8", "2"]);
            // Stored before p95 was kept: a dash.
            assert_eq!(rows[0][5], "-");
            assert_eq!(rows[0][7], "check:logged_in 2");
            assert_eq!(rows[1][7], "");
            assert_eq!(
                check_rows(&stored),
                vec![vec!["logged_in", "login", "8", "2", "80.00%"]]
            );
        }
        assert!(step_rows(&serde_json::json!({})).is_empty());
        // A ramp's steps are not a scenario's.
        assert!(step_rows(&serde_json::json!({"details": {"steps": steps}})).is_empty());
    }

    /// A case's agents as a store written before the rows were typed holds them (every
    /// field the coordinator wrote then; `clock_rtt_us` missing, as in older stores).
    #[test]
    fn stored_agents_read_back_into_rows() {
        let stored = serde_json::json!({"details": {"agents": [{
            "name": "a1", "address": "tls://127.0.0.1:7461", "slice": 0, "of": 2,
            "sent": 400, "completed": 400, "ok": 400, "errors": 0, "achieved_rate": 199.84,
            "latency_us": {"p50": 300, "p90": 500, "p99": 1200, "p999": 2000, "max": 3000, "mean": 350.0},
            "schedule_lag_us": {"p50": 20, "p90": 40, "p99": 90, "p999": 100, "max": 120, "mean": 25.0},
            "generator_thread_cpu_seconds": [0.25, 0.5], "clock_offset_us": -12.4,
            "status": "valid", "reasons": [], "lost": null,
            "latency_histogram": "", "service_histogram": ""
        }, {"name": "a2", "slice": 1, "of": 2, "lost": "connection reset"}]}});
        let rows = agent_rows(&stored);
        assert_eq!(
            agent_line(&rows[0]),
            "a1 slice 1/2: 400 sent, 199.8 req/s, p99 1.20 ms, lag p99 90.0 µs, CPU 0.75 s, clock -12 µs, valid"
        );
        assert!(
            agent_line(&rows[1]).ends_with("LOST: connection reset"),
            "{rows:?}"
        );
    }
}
