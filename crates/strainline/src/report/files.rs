//! The run in the formats other tools read: JUnit XML (one test case per case and per
//! gate, for CI test views), Markdown (a pull request comment or a CI step summary) and
//! CSV (time series and per-step tables for other plotting tools).

use std::fmt::Write;
use std::path::{Path, PathBuf};

use super::csv_text::text;
use super::run::{CaseData, RunData};
use super::svg::escape;
use crate::kinds::details::RampDetails;
use crate::store::Status;

fn seconds(c: &CaseData) -> f64 {
    c.detail("/target/duration_seconds")
        .or_else(|| c.detail("/duration_seconds"))
        .and_then(|v| v.as_f64())
        .unwrap_or(0.0)
}

/// JUnit XML: a `<testsuite>` per run, a `<testcase>` per case (failed when the case
/// failed, crashed or was invalid) and one per gate (failed when the gate did not hold).
pub fn junit(r: &RunData) -> String {
    let suite = r.run.suite.clone().unwrap_or_else(|| r.run.kind.clone());
    let mut cases = String::new();
    let (mut tests, mut failures, mut errors) = (0, 0, 0);
    for c in &r.cases {
        tests += 1;
        let class = escape(&format!("{suite}.{}", c.row.test_kind));
        let _ = write!(
            cases,
            "    <testcase classname=\"{class}\" name=\"{}\" time=\"{:.3}\">",
            escape(&c.row.name),
            seconds(c)
        );
        let why = c.reasons().join("; ");
        match &c.row.status {
            s if s.good() => {}
            Status::Failed => {
                failures += 1;
                let _ = write!(
                    cases,
                    "\n      <failure message=\"{}\" type=\"failed\">{}</failure>\n    ",
                    escape(&why),
                    escape(&why)
                );
            }
            other => {
                errors += 1;
                let _ = write!(
                    cases,
                    "\n      <error message=\"{}\" type=\"{}\">{}</error>\n    ",
                    escape(&why),
                    escape(other.name()),
                    escape(&why)
                );
            }
        }
        cases.push_str("</testcase>\n");
        for g in c.gates() {
            let (gate, passed, detail) = (&g.gate, g.passed, &g.detail);
            tests += 1;
            let _ = write!(
                cases,
                "    <testcase classname=\"{class}.gates\" name=\"{} :: {}\" time=\"0\">",
                escape(&c.row.name),
                escape(gate)
            );
            if !passed {
                failures += 1;
                let _ = write!(
                    cases,
                    "\n      <failure message=\"gate failed: {}\" type=\"gate\">{}</failure>\n    ",
                    escape(detail),
                    escape(detail)
                );
            }
            cases.push_str("</testcase>\n");
        }
    }
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"strainline\" tests=\"{tests}\" failures=\"{failures}\" errors=\"{errors}\">\n  <testsuite name=\"{}\" tests=\"{tests}\" failures=\"{failures}\" errors=\"{errors}\" timestamp=\"{}\">\n{cases}  </testsuite>\n</testsuites>\n",
        escape(&suite),
        escape(r.run.started_at.get(..19).unwrap_or(&r.run.started_at))
    )
}

/// Escapes text for a Markdown table cell (and keeps HTML out of renderers).
/// A name or message as Markdown text: table pipes, link and image brackets, emphasis
/// and code marks escaped, HTML tags and control characters neutralised, one line.
pub fn md(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in crate::units::printable(s).chars() {
        match c {
            '\\' | '|' | '[' | ']' | '!' | '`' | '*' => {
                out.push('\\');
                out.push(c);
            }
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '\n' | '\r' | '\t' => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// The Markdown report of a run.
pub fn markdown(r: &RunData) -> String {
    let (verdict, why) = r.verdict();
    let mut s = format!("## {} — {}\n\n", md(&r.title()), md(&verdict));
    for w in &why {
        let _ = writeln!(s, "- {}", md(w));
    }
    if !why.is_empty() {
        s.push('\n');
    }
    let (heads, rows) = r.summary_table();
    let heads: Vec<String> = heads.iter().map(|h| md(h)).collect();
    let _ = writeln!(s, "| {} |", heads.join(" | "));
    let _ = writeln!(s, "|{}", "---|".repeat(heads.len()));
    for row in rows {
        let cells: Vec<String> = row.iter().map(|x| md(x)).collect();
        let _ = writeln!(s, "| {} |", cells.join(" | "));
    }
    for c in &r.cases {
        let name = md(&c.row.name);
        let tables = [
            ("Gates", &super::run::GATE_COLUMNS[..], c.gate_rows()),
            (
                "Load agents",
                &super::run::AGENT_COLUMNS[..],
                c.agent_rows(),
            ),
            ("Steps", &super::run::STEP_COLUMNS[..], c.step_rows()),
            ("Checks", &super::run::CHECK_COLUMNS[..], c.check_rows()),
            (
                "Latency histogram",
                &super::run::HISTOGRAM_COLUMNS[..],
                c.histogram_rows(),
            ),
        ];
        for (title, heads, rows) in tables.iter().filter(|t| !t.2.is_empty()) {
            let _ = writeln!(s, "\n**{title} of {name}**\n");
            let _ = writeln!(s, "| {} |", heads.join(" | "));
            let _ = writeln!(s, "|{}", "---|".repeat(heads.len()));
            for row in rows {
                let cells: Vec<String> = row.iter().map(|x| md(x)).collect();
                let _ = writeln!(s, "| {} |", cells.join(" | "));
            }
        }
    }
    let failed: Vec<(String, String)> = r
        .cases
        .iter()
        .flat_map(|c| {
            c.gates()
                .iter()
                .filter(|g| !g.passed)
                .map(move |g| (c.row.name.clone(), g.detail.clone()))
        })
        .collect();
    if !failed.is_empty() {
        s.push_str("\n**Failed gates**\n\n");
        for (case, detail) in failed {
            let _ = writeln!(s, "- {}: {}", md(&case), md(&detail));
        }
    }
    s
}

/// A file-name-safe form of a case name, at most 60 characters (a file name may not
/// exceed 255 bytes; the case's number keeps shortened names apart).
fn slug(s: &str) -> String {
    s.chars()
        .take(60)
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// A load case over time as the timeline draws it: a row a second (or bucket), and
/// each step's seconds in long form (`None` without steps).
fn timeline_csv(tl: &crate::report::timeline::Timeline) -> (String, Option<String>) {
    let mut run = String::from(
        "t,users,sent,responses,errors,min_ms,p50_ms,p75_ms,p90_ms,p95_ms,p99_ms,max_ms,causes\n",
    );
    // A second's errors by cause, in one text cell: `timeout 3; status 503 1`.
    let causes_at = |t: f64| -> String {
        (tl.causes.iter())
            .filter_map(|(c, p)| {
                let v = p.iter().find(|(x, _)| (x - t).abs() < 1e-6)?.1;
                Some(format!("{c} {}", super::csv_text::number(v)))
            })
            .collect::<Vec<_>>()
            .join("; ")
    };
    let n = |v: f64| -> String { super::csv_text::number(v) };
    for p in &tl.seconds {
        let _ = writeln!(
            run,
            "{},{},{},{},{},{},{},{},{},{},{},{},{}",
            n(p.t),
            p.users.map(n).unwrap_or_default(),
            n(p.sent),
            n(p.responses),
            n(p.errors),
            p.min.map(n).unwrap_or_default(),
            p.p50.map(n).unwrap_or_default(),
            p.p75.map(n).unwrap_or_default(),
            p.p90.map(n).unwrap_or_default(),
            p.p95.map(n).unwrap_or_default(),
            p.p99.map(n).unwrap_or_default(),
            p.max.map(n).unwrap_or_default(),
            text(&causes_at(p.t))
        );
    }
    if tl.steps.is_empty() {
        return (run, None);
    }
    let mut steps = String::from("step,t,responses,errors,p50_ms,p95_ms,p99_ms\n");
    for (name, points) in &tl.steps {
        for p in points {
            let _ = writeln!(
                steps,
                "{},{},{},{},{},{},{}",
                text(name),
                n(p.t),
                n(p.responses),
                n(p.errors),
                p.p50.map(n).unwrap_or_default(),
                p.p95.map(n).unwrap_or_default(),
                p.p99.map(n).unwrap_or_default()
            );
        }
    }
    (run, Some(steps))
}

/// A ramp's thread states in long form — `offered,group,threads,state,thread_s_per_s`,
/// a row per step, thread group and state it spent time in — for a spreadsheet's pivot;
/// `None` when no step has them. Group names are the target's: text cells.
fn thread_states_csv(ramp: &RampDetails) -> Option<String> {
    use crate::measure::threads::State;
    let mut t = String::from("offered,group,threads,state,thread_s_per_s\n");
    let mut any = false;
    for st in &ramp.steps {
        let Some(b) = &st.figures.threads else {
            continue;
        };
        for g in &b.groups {
            for state in State::ALL {
                let v = g.states.get(state);
                if v > 0.0 {
                    any = true;
                    let _ = writeln!(
                        t,
                        "{},{},{},{},{v:.6}",
                        serde_json::Value::from(st.figures.offered),
                        text(&g.name),
                        g.threads,
                        text(state.label())
                    );
                }
            }
        }
    }
    any.then_some(t)
}

/// Writes the CSV files of a run into `dir`: `metrics.csv` (every case's metrics),
/// `gates.csv` (every case's gates with the measured value, when it had any), and
/// per case `NN-CASE-samples.csv` (the resource timeline), `NN-CASE-SERIES.csv` (each
/// named series, e.g. a ramp's offered vs achieved), `NN-CASE-steps.csv` (a ramp's
/// steps) and `NN-CASE-thread-states.csv` (its steps' thread states, one row per step,
/// group and state). Returns the files written.
pub fn csv(r: &RunData, dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut written = Vec::new();
    let mut put = |name: String, text: String| -> std::io::Result<()> {
        let p = dir.join(name);
        std::fs::write(&p, text)?;
        written.push(p);
        Ok(())
    };
    let mut metrics = String::from("case,kind,status,metric,value,unit,better\n");
    for c in &r.cases {
        for m in &c.row.metrics {
            let _ = writeln!(
                metrics,
                "{},{},{},{},{},{},{}",
                text(&c.row.name),
                text(&c.row.test_kind),
                text(c.row.status.name()),
                text(&m.name),
                m.value,
                text(&m.unit),
                text(m.direction.name())
            );
        }
    }
    put("metrics.csv".into(), metrics)?;
    if r.cases.iter().any(|c| !c.gates().is_empty()) {
        let mut gates = String::from("case,gate,metric,measured,unit,passed,detail\n");
        for c in &r.cases {
            for g in c.gates() {
                let _ = writeln!(
                    gates,
                    "{},{},{},{},{},{},{}",
                    text(&c.row.name),
                    text(&g.gate),
                    text(&g.metric),
                    g.measured.map(super::csv_text::number).unwrap_or_default(),
                    text(&g.unit),
                    g.passed,
                    text(&g.detail)
                );
            }
        }
        put("gates.csv".into(), gates)?;
    }
    for (i, c) in r.cases.iter().enumerate() {
        let stem = format!("{:02}-{}", i + 1, slug(&c.row.name));
        if !c.samples.is_empty() {
            let mut t = crate::report::monitor::csv_header(false);
            t.push('\n');
            for s in &c.samples {
                t.push_str(&crate::report::monitor::csv_row(s, None));
                t.push('\n');
            }
            put(format!("{stem}-samples.csv"), t)?;
        }
        for (name, pts) in &c.series {
            // A load's seconds are the timeline's file, not a file a series.
            if c.timeline.is_some() && crate::report::timeline::takes(name) {
                continue;
            }
            let mut t = String::from("x,value\n");
            for (x, y) in pts {
                let _ = writeln!(t, "{x},{y}");
            }
            put(format!("{stem}-{}.csv", slug(name)), t)?;
        }
        let ramp: RampDetails = c.details();
        if !ramp.steps.is_empty() {
            // Every figure a step's limiting factor is named from (docs/suites.md).
            let mut t = String::from(
                "offered,achieved,p99_ms,error_rate,target_cpu,busiest_thread,busiest_demand,\
                 run_queue,listen_overflows,syn_drops,syn_cookies,retransmits,stolen,generator,ok\n",
            );
            // Numbers as JSON writes them (100.0, not 100), as the file always had.
            let n = serde_json::Value::from;
            for st in &ramp.steps {
                let f = &st.figures;
                let _ = writeln!(
                    t,
                    "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
                    n(f.offered),
                    n(f.achieved),
                    n(f.p99_ms),
                    n(f.error_rate),
                    n(f.target_cpu),
                    n(f.busiest_thread),
                    n(f.busiest_demand),
                    n(f.run_queue),
                    f.listen_overflows,
                    f.syn_drops,
                    f.syn_cookies,
                    f.retransmits,
                    n(f.stolen),
                    text(&st.generator),
                    st.ok
                );
            }
            put(format!("{stem}-steps.csv"), t)?;
            if let Some(t) = thread_states_csv(&ramp) {
                put(format!("{stem}-thread-states.csv"), t)?;
            }
        }
        if !c.latency.is_empty() {
            let mut t = String::from("percentile,latency_ms\n");
            for (p, v) in &c.latency {
                let _ = writeln!(t, "{p},{v}");
            }
            put(format!("{stem}-latency.csv"), t)?;
        }
        if let Some(tl) = &c.timeline {
            let (run, steps) = timeline_csv(tl);
            put(format!("{stem}-timeline.csv"), run)?;
            if let Some(steps) = steps {
                put(format!("{stem}-steps-timeline.csv"), steps)?;
            }
        }
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    //! Snapshot tests: a fixed run rendered as Markdown and CSV must match the files in
    //! `tests/snapshots/`. After an intended change, regenerate them with
    //! `UPDATE_SNAPSHOTS=1 cargo test -p strainline --lib snapshot` and review the diff.
    use super::*;
    use crate::measure::Sample;
    use crate::report::run::CaseData;
    use crate::store::{CaseRow, GateResult, Metric, RunRow};

    fn sample(t: f64, mib: u64) -> Sample {
        Sample {
            t,
            rss_bytes: mib << 20,
            cpu_cores: 0.5,
            threads: 4,
            fds: 9,
            read_bytes: 0,
            write_bytes: 4096,
            ctx_switches: 10,
            processes: 1,
            top: Vec::new(),
        }
    }

    fn fixture() -> RunData {
        let run = RunRow {
            id: 7,
            kind: "suite".into(),
            label: Some("v0.8.0 <b>|beta</b>".into()),
            command: "run suite.toml".into(),
            started_at: "2026-11-21T10:00:00.000Z".into(),
            ended_at: Some("2026-11-21T10:01:00.000Z".into()),
            status: Status::Failed,
            exit_code: Some(1),
            git_commit: Some("abc123".into()),
            git_dirty: Some(false),
            host: "ci-1".into(),
            fingerprint: "cpu|2c|24GiB".into(),
            strainline_version: "0.1.0".into(),
            suite: Some("iot".into()),
            scenario: None,
            gates: crate::store::GateTally {
                total: 2,
                failed: 1,
            },
        };
        let m = |n: &str, v: f64, u: &str, d: &str| {
            Metric::new(n, v, u, crate::metrics::Direction::parse(d))
        };
        let bench = CaseRow {
            id: 1,
            run_id: 7,
            name: "push".into(),
            params: None,
            repetition: 0,
            samples_stored: 2,
            test_kind: "bench".into(),
            status: Status::Failed,
            started_at: String::new(),
            ended_at: None,
            summary: Some(serde_json::json!({
                "reasons": ["gate failed: latency_p99 < 2ms (measured 2.5, needs < 2)"],
                "gates": [
                    {"gate": "latency_p99 < 2ms", "passed": false, "detail": "latency_p99 < 2ms (measured 2.5, needs < 2)"},
                    {"gate": "error_rate < 1%", "passed": true, "detail": "error_rate < 1% (measured 0, needs < 0.01)"}
                ],
                "target": {"duration_seconds": 10.5}
            })),
            metrics: vec![
                m("cpu_per_op", 1.5, "ms", "lower"),
                m("latency_p99", 2.5, "ms", "lower"),
                m("peak_rss", 12.0 * 1048576.0, "bytes", "lower"),
                m("throughput", 200.0, "req/s", "higher"),
            ],
            gates: vec![
                GateResult {
                    gate: "latency_p99 < 2ms".into(),
                    metric: "latency_p99".into(),
                    measured: Some(2.5),
                    unit: "ms".into(),
                    passed: false,
                    detail: "latency_p99 < 2ms (measured 2.5, needs < 2)".into(),
                },
                GateResult {
                    gate: "error_rate < 1%".into(),
                    metric: "error_rate".into(),
                    measured: Some(0.0),
                    unit: "ratio".into(),
                    passed: true,
                    detail: "error_rate < 1% (measured 0, needs < 0.01)".into(),
                },
            ],
        };
        let ramp = CaseRow {
            id: 2,
            name: "peak".into(),
            test_kind: "ramp".into(),
            status: Status::Passed,
            summary: Some(serde_json::json!({
                "reasons": [],
                "details": {"steps": [
                    {"offered": 100.0, "achieved": 99.5, "p99_ms": 1.2, "error_rate": 0.0, "target_cpu": 0.1, "busiest_thread": 0.1, "generator": "valid", "ok": true},
                    {"offered": 200.0, "achieved": 150.0, "p99_ms": 80.0, "error_rate": 0.0, "target_cpu": 1.0, "busiest_thread": 0.88, "busiest_demand": 1.0, "run_queue": 0.24, "listen_overflows": 3, "syn_drops": 1, "syn_cookies": 0, "retransmits": 2, "stolen": 0.01, "generator": "valid", "ok": false}
                ], "ceiling": 100.0, "knee": 100.0}
            })),
            metrics: vec![m("ceiling", 100.0, "req/s", "higher")],
            gates: Vec::new(),
            ..bench.clone()
        };
        RunData {
            run,
            cases: vec![
                CaseData {
                    row: bench,
                    samples: vec![sample(0.0, 10), sample(0.25, 12)],
                    series: Vec::new(),
                    latency: vec![(50.0, 1.0), (99.0, 2.5), (100.0, 4.0)],
                    histogram: Vec::new(),
                    flamegraph_link: None,
                    timeline: None,
                },
                CaseData {
                    row: ramp,
                    samples: Vec::new(),
                    series: vec![(
                        "offered_vs_achieved".into(),
                        vec![(100.0, 99.5), (200.0, 150.0)],
                    )],
                    latency: Vec::new(),
                    histogram: Vec::new(),
                    flamegraph_link: None,
                    timeline: None,
                },
            ],
        }
    }

    fn check(name: &str, actual: &str) {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/snapshots")
            .join(name);
        if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, actual).unwrap();
        }
        let expected = std::fs::read_to_string(&path).unwrap_or_else(|_| {
            panic!("{} is missing: run with UPDATE_SNAPSHOTS=1", path.display())
        });
        assert_eq!(actual, expected, "{name} differs from its snapshot");
    }

    /// Three repetitions of a case: their sections one after the other, then one chart
    /// per metric with a line per repetition, where each drew its own three charts.
    #[test]
    fn repetitions_share_one_chart_per_metric() {
        let mut r = fixture();
        let one = r.cases.remove(0);
        let single = super::super::html::run_report(&RunData {
            run: r.run.clone(),
            cases: vec![clone_case(&one)],
        })
        .matches("<svg")
        .count();
        r.cases = (0..3)
            .map(|i| {
                let mut c = clone_case(&one);
                c.row.name = format!("push#{}", i + 1);
                c.row.repetition = i;
                c
            })
            .collect();
        let html = super::super::html::run_report(&r);
        assert_eq!(single, 3, "RSS and CPU, threads and FDs, latency");
        assert_eq!(
            html.matches("<svg").count(),
            5,
            "RSS, CPU, threads, FDs, latency"
        );
        assert!(html.contains("tree RSS — 3 repetitions"));
        assert!(html.contains("push — its 3 repetitions"));
        for rep in ["#1", "#2", "#3"] {
            assert!(html.contains(&format!(">{rep}<")), "a line named {rep}");
        }
    }

    fn clone_case(c: &CaseData) -> CaseData {
        CaseData {
            row: c.row.clone(),
            samples: c.samples.clone(),
            series: c.series.clone(),
            latency: c.latency.clone(),
            histogram: c.histogram.clone(),
            flamegraph_link: None,
            timeline: None,
        }
    }

    #[test]
    fn snapshot_markdown() {
        let text = markdown(&fixture());
        // The summary of cases: a column per key figure, not all in one cell; the
        // title is the suite's, not the tool's.
        assert!(text.starts_with("## iot run #7"), "{text}");
        assert!(
            text.contains("| case | kind | verdict | throughput | p99 |"),
            "{text}"
        );
        assert!(text.contains("&lt;b&gt;\\|beta&lt;/b&gt;"), "{text}");
        check("report.md", &text);
    }

    /// A ramp that never broke has a ceiling that is only a floor, worded as the
    /// terminal words it in Markdown and HTML alike.
    #[test]
    fn a_ceiling_the_ramp_never_reached_reads_as_a_floor_everywhere() {
        let mut r = fixture();
        let summary = r.cases[1].row.summary.as_mut().unwrap();
        summary["details"]["end"] = serde_json::json!("held");
        let md = markdown(&r);
        assert!(md.contains("| ≥ 100 req/s (never broke) |"), "{md}");
        let html = super::super::html::run_report(&r);
        assert!(
            html.contains("<td>≥ 100 req/s (never broke)</td>"),
            "{html}"
        );
        summary_end(&mut r, "broke");
        assert!(markdown(&r).contains("| 100 req/s |"), "{}", markdown(&r));
    }

    fn summary_end(r: &mut RunData, end: &str) {
        r.cases[1].row.summary.as_mut().unwrap()["details"]["end"] = serde_json::json!(end);
    }

    /// Every stored text is escaped once, by the template: a case named `<b>&"x` reads
    /// as itself in its heading and in the summary, never as markup nor as `&amp;lt;`;
    /// a label's control characters are made U+FFFD.
    #[test]
    fn a_hostile_name_is_escaped_once_in_the_html() {
        let mut r = fixture();
        r.cases[0].row.name = "<b>&\"x".into();
        r.run.label = Some("v1\u{1b}[2J<i>".into());
        let html = super::super::html::run_report(&r);
        let name = "&lt;b&gt;&amp;&quot;x";
        assert_eq!(html.matches(&format!("<h2>{name} <small>")).count(), 1);
        assert_eq!(html.matches(&format!("<td>{name}</td>")).count(), 1);
        // The run's reasons name it too: three places, each escaped once.
        assert_eq!(html.matches(name).count(), 3, "{html}");
        assert!(!html.contains("<b>") && !html.contains("<i>"), "{html}");
        for twice in ["&amp;lt;", "&amp;amp;", "&amp;quot;"] {
            assert!(!html.contains(twice), "escaped twice: {twice}");
        }
        assert!(!html.contains('\u{1b}') && html.contains("v1\u{fffd}[2J&lt;i&gt;"));
        // One self-contained page: the policy, the one stylesheet inline.
        assert!(html.starts_with("<!DOCTYPE html>\n<html lang=\"en\">"));
        let policy = format!("content=\"{}\"", super::super::html::policy());
        assert!(html.contains(&policy));
        assert!(html.contains(super::super::html::STYLE));
    }

    /// A latency histogram's table is the stylesheet's `histogram`: its bars start at
    /// the left of their cells.
    #[test]
    fn a_histogram_s_bars_read_left_to_right() {
        use crate::load::summary::Bucket;
        let mut r = fixture();
        r.cases[0].histogram = vec![
            Bucket {
                le_us: 1000,
                count: 90,
            },
            Bucket {
                le_us: 2000,
                count: 1,
            },
        ];
        let html = super::super::html::run_report(&r);
        assert!(
            html.contains("<table class=\"histogram\"><tr><th>latency ≤</th>"),
            "{html}"
        );
        assert!(html.contains("<td>■</td></tr></table>"), "{html}");
        assert!(super::super::html::STYLE.contains("table.histogram td:last-child{text-align:left"));
    }

    /// A step's groups become rows (a hostile name quoted as CSV quotes); states a
    /// group spent no time in are left out; a ramp without thread states has no file.
    #[test]
    fn a_ramps_thread_states_are_written_long_form() {
        let ramp: RampDetails = serde_json::from_value(serde_json::json!({"steps": [
            {"offered": 100.0, "achieved": 100.0, "generator": "valid", "ok": true,
             "threads": {"seconds": 1.5, "groups": [
                {"name": "pool", "threads": 2, "on_cpu": 0.25, "lock": 1.5, "all_busy": 0.1},
                {"name": "a\"b,c", "threads": 1, "idle": 1.0}
             ]}},
            {"offered": 200.0, "achieved": 150.0, "generator": "valid", "ok": false}
        ]}))
        .unwrap();
        let text = thread_states_csv(&ramp).unwrap();
        assert_eq!(
            text,
            "offered,group,threads,state,thread_s_per_s\n\
             100.0,pool,2,on CPU,0.250000\n\
             100.0,pool,2,lock,1.500000\n\
             100.0,\"a\"\"b,c\",1,idle,1.000000\n"
        );
        assert_eq!(thread_states_csv(&RampDetails::default()), None);
    }

    #[test]
    fn snapshot_csv() {
        let dir = tempfile::tempdir().unwrap();
        let files = csv(&fixture(), dir.path()).unwrap();
        let names: Vec<String> = files
            .iter()
            .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            [
                "metrics.csv",
                "gates.csv",
                "01-push-samples.csv",
                "01-push-latency.csv",
                "02-peak-offered_vs_achieved.csv",
                "02-peak-steps.csv"
            ]
        );
        for f in files {
            let name = f.file_name().unwrap().to_string_lossy().into_owned();
            check(
                &format!("csv/{name}"),
                &std::fs::read_to_string(&f).unwrap(),
            );
        }
    }

    #[test]
    fn junit_counts_cases_and_gates() {
        let x = junit(&fixture());
        assert!(
            x.contains(r#"<testsuites name="strainline" tests="4" failures="2" errors="0">"#),
            "{x}"
        );
        assert!(x.contains("push :: latency_p99 &lt; 2ms"), "{x}");
        assert!(x.contains(r#"time="10.500""#), "{x}");
    }
}
