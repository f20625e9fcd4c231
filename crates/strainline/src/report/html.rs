//! The HTML report: one self-contained file — inline CSS and SVG, no scripts, no fonts
//! or images fetched (a Content-Security-Policy forbids both) — with the verdict and its
//! reasons at the top, then per case its metrics, gates and charts. Every string that
//! comes from a user, a target or a log is escaped.

use std::fmt::Write;

use super::compare::Comparison;
use super::run::{CaseData, RunData};
use super::svg::{escape, render, Chart, Line, Mark, COLORS};
use crate::analysis::comparison::Verdict;
use crate::kinds::details::{RampDetails, SoakDetails};
use crate::units::format_value;

/// The one stylesheet, the report's and `serve`'s pages'.
pub const STYLE: &str = include_str!("style.css");

pub(super) fn page(title: &str, body: &str) -> String {
    // The timeline's script, the one script a report may run (allowed by its hash).
    let script = if body.contains(TIMELINE) {
        format!("<script>{}</script>", super::timeline::SCRIPT)
    } else {
        String::new()
    };
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:; script-src {}\">\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
<title>{}</title><style>{STYLE}</style></head><body>\n{body}\n{script}</body></html>\n",
        super::timeline::script_source(),
        escape(title)
    )
}

/// What marks a timeline in a page's body.
const TIMELINE: &str = "<div class=\"timeline\"";

/// A load case over time, under its verdict: the timeline, when it kept its seconds.
fn timeline_block(s: &mut String, c: &CaseData) {
    if let Some(tl) = &c.timeline {
        s.push_str("<h3>Over time</h3><p class=\"note\">Hover for a second's figures; drag to zoom on time, double-click for the whole run.</p>");
        let id = format!("timeline-{}", c.row.id);
        s.push_str(&super::timeline::render(tl, &id));
        let steps = super::timeline::render_steps(tl, &id);
        if steps.len() > 1 {
            s.push_str("<h3>Each step over time</h3>");
            for (name, drawing) in steps {
                let _ = write!(s, "<h4>{}</h4>{drawing}", escape(&name));
            }
        }
    }
}

fn mib(b: f64) -> f64 {
    b / 1_048_576.0
}

/// Resource timelines: RSS and CPU, then threads and FDs, with the exact peak marked.
fn resource_charts(c: &CaseData, out: &mut Vec<Chart>) {
    if c.samples.len() < 2 {
        return;
    }
    let pts = |f: &dyn Fn(&crate::measure::Sample) -> f64| -> Vec<(f64, f64)> {
        c.samples.iter().map(|s| (s.t, f(s))).collect()
    };
    let peak = c
        .detail("/target/peak_rss")
        .or_else(|| c.detail("/peak_rss"))
        .and_then(|p| {
            Some((
                p["bytes"].as_f64()?,
                p["source"].as_str().unwrap_or("").to_string(),
            ))
        });
    let mut horizontal = Vec::new();
    if let Some((bytes, source)) = peak {
        horizontal.push(Mark {
            at: mib(bytes),
            label: format!("exact peak {:.1} MiB ({source})", mib(bytes)),
            color: "#d62728",
        });
    }
    let mut vertical: Vec<Mark> = c
        .detail("/phases")
        .and_then(|p| p.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|p| {
                    Some(Mark {
                        at: p[1].as_f64()?,
                        label: p[0].as_str()?.to_string(),
                        color: "#555",
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    vertical.truncate(12);
    out.push(Chart {
        title: "Memory and CPU of the process tree".into(),
        x_label: "time since start (s)".into(),
        y_label: "RSS (MiB)".into(),
        y2_label: Some("CPU (cores)".into()),
        lines: vec![
            Line::new("tree RSS", pts(&|s| mib(s.rss_bytes as f64)), COLORS[0]),
            Line::new("CPU", pts(&|s| s.cpu_cores), COLORS[2]).right(),
        ],
        horizontal,
        vertical: vertical.clone(),
        y_from_zero: true,
        ..Chart::default()
    });
    out.push(Chart {
        title: "Threads and open file descriptors".into(),
        x_label: "time since start (s)".into(),
        y_label: "threads (count)".into(),
        y2_label: Some("open FDs (count)".into()),
        lines: vec![
            Line::new("threads", pts(&|s| s.threads as f64), COLORS[3]),
            Line::new("open FDs", pts(&|s| s.fds as f64), COLORS[4]).right(),
        ],
        vertical,
        y_from_zero: true,
        ..Chart::default()
    });
}

/// The stress–strain curve of a ramp: completed against offered, with the ideal line,
/// the ceiling and the knee, and p99 on a second axis.
fn ramp_chart(c: &CaseData, out: &mut Vec<Chart>) {
    let (Some(achieved), Some(p99)) = (
        c.series("offered_vs_achieved"),
        c.series("offered_vs_p99_ms"),
    ) else {
        return;
    };
    let ideal: Vec<(f64, f64)> = achieved.iter().map(|p| (p.0, p.0)).collect();
    let mut vertical = Vec::new();
    let d: RampDetails = c.details();
    for (key, v, color) in [
        ("ceiling", d.ceiling, "#d62728"),
        ("knee", d.knee, "#ff7f0e"),
    ] {
        if v > 0.0 {
            vertical.push(Mark {
                at: v,
                label: format!("{key} {v:.0} req/s"),
                color,
            });
        }
    }
    out.push(Chart {
        title: "Stress–strain: completed vs offered load".into(),
        x_label: "offered load (req/s)".into(),
        y_label: "completed (req/s)".into(),
        y2_label: Some("p99 latency (ms)".into()),
        lines: vec![
            Line::new("completed", achieved.to_vec(), COLORS[0]).dots(),
            Line::new("offered (ideal)", ideal, "#999").dashed(),
            Line::new("p99", p99.to_vec(), COLORS[1]).right().dots(),
        ],
        vertical,
        y_from_zero: true,
        ..Chart::default()
    });
}

/// A colour per thread state, in [`State::ALL`]'s order.
const STATE_COLORS: [&str; 11] = [
    "#2ca02c", "#98df8a", "#d62728", "#c7c7c7", "#aec7e8", "#1f77b4", "#8c564b", "#e377c2",
    "#ff7f0e", "#9467bd", "#7f7f7f",
];

/// Where the target's threads spent each step of a ramp: thread-seconds per second in
/// each state (its busiest groups together), stacked, against the offered load — the
/// figure the step's limiting factor is read from.
fn thread_state_chart(c: &CaseData, out: &mut Vec<Chart>) {
    use crate::measure::threads::State;
    let d: RampDetails = c.details();
    let steps: Vec<(f64, crate::measure::threads::States)> = (d.steps.iter())
        .filter_map(|s| Some((s.figures.offered, s.figures.threads.as_ref()?.total())))
        .collect();
    if steps.len() < 2 {
        return;
    }
    let most = steps.iter().map(|(_, s)| s.total()).fold(0.0, f64::max);
    let mut sum = vec![0.0; steps.len()];
    let mut lines = Vec::new();
    for (state, color) in State::ALL.iter().zip(STATE_COLORS) {
        // A state no step spent 0.5% of its thread time in is left out of the legend.
        if steps.iter().all(|(_, s)| s.get(*state) <= 0.005 * most) {
            continue;
        }
        for (k, (_, s)) in steps.iter().enumerate() {
            sum[k] += s.get(*state);
        }
        let points = steps.iter().zip(&sum).map(|((x, _), y)| (*x, *y)).collect();
        lines.push(Line::new(state.label(), points, color));
    }
    out.push(Chart {
        title: "Thread states per step (the busiest groups)".into(),
        x_label: "offered load (req/s)".into(),
        y_label: "thread-seconds per second".into(),
        lines,
        y_from_zero: true,
        stacked: true,
        ..Chart::default()
    });
}

fn latency_chart(c: &CaseData, out: &mut Vec<Chart>) {
    if c.latency.is_empty() {
        return;
    }
    out.push(Chart {
        title: "Latency distribution (from intended send times)".into(),
        x_label: "percentile".into(),
        y_label: "latency (ms)".into(),
        lines: vec![Line::new("latency", c.latency.clone(), COLORS[0]).dots()],
        percentile_x: true,
        y_from_zero: true,
        ..Chart::default()
    });
}

/// The soak's RSS series after warm-up with the fitted Theil–Sen slope.
fn leak_chart(c: &CaseData, out: &mut Vec<Chart>) {
    let d: SoakDetails = c.details();
    let Some(fit) = d.leak_fits.get("memory") else {
        return;
    };
    let (slope, warm) = (fit.slope, fit.warmup_until);
    let judged: Vec<(f64, f64)> = c
        .samples
        .iter()
        .filter(|s| s.t >= warm)
        .map(|s| (s.t, s.rss_bytes as f64))
        .collect();
    if judged.len() < 2 {
        return;
    }
    // Theil–Sen intercept: the median of y − slope·x.
    let residual: Vec<f64> = judged.iter().map(|p| p.1 - slope * p.0).collect();
    let b = crate::analysis::stats::median(&residual).unwrap_or(0.0);
    let (t0, t1) = (judged[0].0, judged[judged.len() - 1].0);
    let verdict = fit.reason.as_str();
    out.push(Chart {
        title: format!(
            "Leak check: RSS after warm-up, fitted slope {:.1} KiB/s",
            slope / 1024.0
        ),
        x_label: "time since start (s)".into(),
        y_label: "RSS (MiB)".into(),
        lines: vec![
            Line::new(
                "RSS",
                judged.iter().map(|p| (p.0, mib(p.1))).collect(),
                COLORS[0],
            ),
            Line::new(
                &format!("Theil–Sen fit: {verdict}"),
                vec![(t0, mib(b + slope * t0)), (t1, mib(b + slope * t1))],
                COLORS[1],
            )
            .dashed(),
        ],
        vertical: vec![Mark {
            at: warm,
            label: "warm-up end".into(),
            color: "#555",
        }],
        ..Chart::default()
    });
}

/// Any other series the case stored (the load engine's per-second figures, rounds…).
fn other_series(c: &CaseData, out: &mut Vec<Chart>) {
    for (name, pts) in &c.series {
        if name.starts_with("offered_vs_")
            || pts.len() < 2
            || (c.timeline.is_some() && super::timeline::takes(name))
        {
            continue;
        }
        let (title, x_label, y_label) = match name.as_str() {
            "completed_per_second" => ("Responses a second", "time (s)", "completed (req/s)"),
            "errors_per_second" => ("Errors a second", "time (s)", "errors (per s)"),
            "p99_us" => (
                "p99 latency, second by second (µs)",
                "time (s)",
                "p99 latency (µs)",
            ),
            _ => ("", "x", "value"),
        };
        out.push(Chart {
            title: match title {
                "" => name.replace('_', " "),
                t => t.to_string(),
            },
            x_label: x_label.into(),
            y_label: y_label.into(),
            lines: vec![Line::new(name, pts.clone(), COLORS[5])],
            y_from_zero: true,
            ..Chart::default()
        });
    }
}

/// Every chart of a case, in reading order.
pub fn case_charts(c: &CaseData) -> Vec<Chart> {
    let mut charts = Vec::new();
    ramp_chart(c, &mut charts);
    thread_state_chart(c, &mut charts);
    latency_chart(c, &mut charts);
    leak_chart(c, &mut charts);
    resource_charts(c, &mut charts);
    other_series(c, &mut charts);
    charts
}

/// The charts of a case's repetitions, one chart per metric with each repetition a
/// line (`#1`, `#2`, …), where each repetition drew its own set: five repetitions of a
/// bench read as six charts, not thirty. A stacked chart (a ramp's thread states) stays
/// one per repetition; a dashed line (an ideal, a fit) is each repetition's own.
fn repetition_charts(group: &[&CaseData]) -> Vec<Chart> {
    let per: Vec<Vec<Chart>> = group.iter().map(|c| case_charts(c)).collect();
    let mut out = Vec::new();
    for chart in &per[0] {
        if chart.stacked {
            out.extend(per.iter().flat_map(|charts| {
                charts
                    .iter()
                    .filter(|c| c.stacked && c.y_label == chart.y_label)
                    .cloned()
            }));
            continue;
        }
        for line in chart.lines.iter().filter(|l| !l.dashed) {
            let lines: Vec<Line> = per
                .iter()
                .zip(group)
                .enumerate()
                .filter_map(|(r, (charts, c))| {
                    let same = charts
                        .iter()
                        .find(|x| x.x_label == chart.x_label && x.y_label == chart.y_label)?;
                    let l = same.lines.iter().find(|x| x.name == line.name)?;
                    let mut mine = Line::new(
                        &format!("#{}", c.row.repetition + 1),
                        l.points.clone(),
                        COLORS[r % COLORS.len()],
                    );
                    mine.dots = l.dots;
                    Some(mine)
                })
                .collect();
            let y_label = match line.axis {
                super::svg::Axis::Right => chart.y2_label.clone().unwrap_or_default(),
                super::svg::Axis::Left => chart.y_label.clone(),
            };
            out.push(Chart {
                title: format!("{} — {} repetitions", line.name, lines.len()),
                x_label: chart.x_label.clone(),
                y_label,
                lines,
                percentile_x: chart.percentile_x,
                y_from_zero: chart.y_from_zero,
                ..Chart::default()
            });
        }
    }
    out
}

fn case_section(s: &mut String, c: &CaseData, charts: bool) {
    let status = &c.row.status;
    let _ = write!(
        s,
        "<h2>{} <small>({})</small></h2><p class=\"verdict {}\">{}</p>",
        escape(&c.row.name),
        escape(&c.row.test_kind),
        escape(status.name()),
        escape(&status.name().to_uppercase())
    );
    let reasons = c.reasons();
    if !reasons.is_empty() {
        s.push_str("<ul>");
        for r in reasons {
            let _ = write!(s, "<li>{}</li>", escape(&r));
        }
        s.push_str("</ul>");
    }
    if charts {
        timeline_block(s, c);
    }
    table(s, &super::run::GATE_COLUMNS, &c.gate_rows());
    if !c.row.metrics.is_empty() {
        s.push_str("<table><tr><th>metric</th><th>value</th><th>better</th><th>source</th></tr>");
        for m in &c.row.metrics {
            let _ = write!(
                s,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                escape(&m.name),
                escape(&c.shown(m)),
                escape(m.direction.name()),
                escape(m.source.as_deref().unwrap_or(""))
            );
        }
        s.push_str("</table>");
    }
    table(s, &super::run::AGENT_COLUMNS, &c.agent_rows());
    table(s, &super::run::STEP_COLUMNS, &c.step_rows());
    table(s, &super::run::CHECK_COLUMNS, &c.check_rows());
    let histogram = c.histogram_rows();
    if !histogram.is_empty() {
        s.push_str("<p>Latency histogram, from intended send times (log-spaced buckets):</p>");
        table(s, &super::run::HISTOGRAM_COLUMNS, &histogram);
    }
    if let Some(table) = c.detail("/table").and_then(|t| t.as_array()) {
        if !table.is_empty() {
            s.push_str("<pre>");
            for l in table.iter().filter_map(|l| l.as_str()) {
                let _ = writeln!(s, "{}", escape(l));
            }
            s.push_str("</pre>");
        }
    }
    if charts {
        for chart in case_charts(c) {
            s.push_str(&render(&chart));
        }
    }
    if let Some(fg) = c.detail("/flamegraph") {
        let linked = c.flamegraph_link.as_deref().and_then(beside);
        match (linked, fg["file"].as_str(), fg["why_not"].as_str()) {
            (Some(f), _, _) => {
                let _ = write!(
                    s,
                    "<p>CPU flame graph of the target: <a href=\"{}\">{}</a></p>",
                    escape(f),
                    escape(f)
                );
            }
            // Where the run wrote it, as text: a stored row is never a link.
            (None, Some(f), _) => {
                let _ = write!(
                    s,
                    "<p class=\"note\">The run wrote its flame graph to {} (its stacks are not in the store).</p>",
                    escape(&crate::units::one_line(f))
                );
            }
            (None, None, Some(why)) => {
                let _ = write!(s, "<p class=\"note\">No flame graph: {}</p>", escape(why));
            }
            _ => {}
        }
    }
}

/// A table of `rows` under `heads`, escaped; nothing without rows.
fn table(s: &mut String, heads: &[&str], rows: &[Vec<String>]) {
    if rows.is_empty() {
        return;
    }
    s.push_str("<table><tr>");
    for h in heads {
        let _ = write!(s, "<th>{}</th>", escape(h));
    }
    s.push_str("</tr>");
    for row in rows {
        s.push_str("<tr>");
        for cell in row {
            let _ = write!(s, "<td>{}</td>", escape(cell));
        }
        s.push_str("</tr>");
    }
    s.push_str("</table>");
}

/// `name` if it is a file strainline wrote beside the report — a plain relative name of
/// letters, digits, `.`, `-` and `_` — else `None`: a report links to nothing else (no
/// scheme such as `javascript:`, no absolute path, no `..`).
pub fn beside(name: &str) -> Option<&str> {
    let plain = !name.is_empty()
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'));
    plain.then_some(name)
}

/// The HTML report of a run.
pub fn run_report(r: &RunData) -> String {
    let (verdict, why) = r.verdict();
    let title = r.title();
    let mut s = String::new();
    let _ = write!(
        s,
        "<h1>{}</h1><p class=\"verdict {}\"><strong>{}</strong>",
        escape(&title),
        escape(r.run.status.name()),
        escape(&verdict)
    );
    if !why.is_empty() {
        s.push_str("</p><ul>");
        for w in &why {
            let _ = write!(s, "<li>{}</li>", escape(w));
        }
        s.push_str("</ul>");
    } else {
        s.push_str("</p>");
    }
    s.push_str("<table class=\"meta\">");
    let rows = [
        ("suite", r.run.suite.clone().unwrap_or_default()),
        ("command", r.run.command.clone()),
        ("label", r.run.label.clone().unwrap_or_default()),
        ("started", r.run.started_at.clone()),
        ("ended", r.run.ended_at.clone().unwrap_or_default()),
        ("host", format!("{} [{}]", r.run.host, r.run.fingerprint)),
        (
            "git",
            r.run
                .git_commit
                .clone()
                .map(|c| {
                    format!(
                        "{c}{}",
                        if r.run.git_dirty == Some(true) {
                            " (dirty)"
                        } else {
                            ""
                        }
                    )
                })
                .unwrap_or_default(),
        ),
        ("strainline", r.run.strainline_version.clone()),
    ];
    for (k, v) in rows.iter().filter(|r| !r.1.is_empty()) {
        let _ = write!(s, "<tr><td>{k}</td><td>{}</td></tr>", escape(v));
    }
    s.push_str("</table>");
    // Every case at a glance, before each one's section.
    let (heads, rows) = r.summary_table();
    s.push_str("<h2 id=\"summary\">Cases</h2>");
    let heads: Vec<&str> = heads.iter().map(String::as_str).collect();
    table(&mut s, &heads, &rows);
    // A case's repetitions one after the other, then their charts together.
    let mut i = 0;
    while i < r.cases.len() {
        let key = |c: &CaseData| crate::store::case_key(&c.row.name, &c.row.test_kind).to_string();
        let first = key(&r.cases[i]);
        let group: Vec<&CaseData> = r.cases[i..]
            .iter()
            .take_while(|c| key(c) == first)
            .collect();
        let repeated = group.len() > 1;
        for c in &group {
            case_section(&mut s, c, !repeated);
        }
        if repeated {
            let _ = write!(
                s,
                "<h3>{} — its {} repetitions</h3>",
                escape(&first),
                group.len()
            );
            for chart in repetition_charts(&group) {
                s.push_str(&render(&chart));
            }
        }
        i += group.len();
    }
    page(&title, &s)
}

/// Bars of candidate as % of baseline, with the tolerance band shaded.
fn comparison_bars(c: &Comparison) -> String {
    let rows: Vec<_> = c
        .rows
        .iter()
        .filter(|r| r.ratio.is_some() && r.band.is_some())
        .collect();
    let (w, row_h, left) = (720.0, 22.0, 260.0);
    let h = 60.0 + row_h * rows.len() as f64;
    let max = rows
        .iter()
        .filter_map(|r| r.ratio)
        .fold(2.0f64, f64::max)
        .min(5.0);
    let x = |ratio: f64| left + (ratio.min(max) / max) * (w - left - 20.0);
    let mut s = format!(
        r#"<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} {h}" width="{w}" height="{h}" role="img" aria-label="candidate as % of baseline"><title>candidate as % of baseline</title><text class="chart-title" x="{}" y="18" text-anchor="middle">Candidate as % of baseline (band shaded)</text>"#,
        w / 2.0
    );
    for (i, r) in rows.iter().enumerate() {
        let y = 30.0 + row_h * i as f64;
        let ratio = r.ratio.unwrap_or(1.0);
        let band = r.band.unwrap_or(0.0);
        let (lo, hi) = (1.0 - band, 1.0 + band);
        let color = match r.verdict {
            Verdict::Regressed => "#d62728",
            Verdict::Improved => "#2ca02c",
            Verdict::Inconclusive => "#ff7f0e",
            _ => "#1f77b4",
        };
        let _ = write!(
            s,
            r##"<text class="tick" x="{}" y="{:.1}" text-anchor="end">{}</text><rect x="{:.1}" y="{y:.1}" width="{:.1}" height="{}" fill="#eee"/><rect x="{left}" y="{:.1}" width="{:.1}" height="{}" fill="{color}"><title>{:.1}%</title></rect><text class="tick" x="{:.1}" y="{:.1}">{:.1}%</text>"##,
            left - 6.0,
            y + 14.0,
            escape(&format!("{} {}", r.case, r.metric)),
            x(lo),
            x(hi) - x(lo),
            row_h - 4.0,
            y + 4.0,
            (x(ratio) - left).max(1.0),
            row_h - 12.0,
            100.0 * ratio,
            x(ratio) + 4.0,
            y + 14.0,
            100.0 * ratio
        );
    }
    let _ = write!(
        s,
        r##"<line x1="{:.1}" x2="{:.1}" y1="26" y2="{:.1}" stroke="#333"/><text class="axis-label" x="{:.1}" y="{:.1}" text-anchor="middle">candidate as % of baseline (100% = unchanged)</text></svg>"##,
        x(1.0),
        x(1.0),
        h - 24.0,
        (left + w) / 2.0,
        h - 6.0
    );
    s
}

/// The HTML report of a comparison.
pub fn comparison_report(c: &Comparison) -> String {
    let title = format!(
        "strainline compare {} → {}",
        c.baseline.key, c.candidate.key
    );
    let mut s = format!("<h1>{}</h1>", escape(&title));
    if let Some(m) = &c.environment_mismatch {
        let _ = write!(
            s,
            "<p class=\"verdict invalid\"><strong>ENVIRONMENT MISMATCH</strong>: {}</p>",
            escape(m)
        );
    }
    for (what, m) in [
        ("SHAPE MISMATCH", &c.shape_mismatch),
        ("CONDITIONS DIFFERED", &c.conditions),
    ] {
        if let Some(m) = m {
            let _ = write!(
                s,
                "<p class=\"verdict invalid\"><strong>{what}</strong>: {}</p>",
                escape(m)
            );
        }
    }
    let regressed = c.count(Verdict::Regressed);
    let line = super::compare::summary_line(c);
    let (head, rest) = line.split_once(": ").unwrap_or((&line, ""));
    let _ = write!(
        s,
        "<p class=\"verdict {}\"><strong>{}</strong>: {}</p>",
        if regressed > 0 { "regressed" } else { "ok" },
        escape(head),
        escape(rest)
    );
    for line in super::compare::header_lines(c)
        .iter()
        .filter(|l| !super::compare::is_alarm(l))
    {
        let _ = write!(s, "<p class=\"note\">{}</p>", escape(line));
    }
    for n in &c.notes {
        let _ = write!(s, "<p class=\"note\">note: {}</p>", escape(n));
    }
    s.push_str(&comparison_bars(c));
    if let Some(f) = c.flame_diff.as_deref().and_then(beside) {
        let _ = write!(
            s,
            "<p>Differential CPU flame graph (candidate against baseline; red: more CPU, blue: less): <a href=\"{}\">{}</a></p>",
            escape(f),
            escape(f)
        );
    }
    s.push_str("<table><tr><th>case</th><th>metric</th><th>baseline</th><th>candidate</th><th>% of previous</th><th>95% CI</th><th>p (adj)</th><th>seen</th><th>verdict</th></tr>");
    for r in &c.rows {
        let _ = write!(
            s,
            "<tr class=\"{}\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            match r.verdict {
                Verdict::Regressed => "regressed",
                Verdict::Inconclusive => "inconclusive",
                _ if r.blind() => "inconclusive",
                _ => "",
            },
            escape(&r.case),
            escape(&r.metric),
            escape(&format_value(r.baseline.median, &r.unit)),
            escape(&format_value(r.candidate.median, &r.unit)),
            r.ratio.map_or("new".into(), |x| format!("{:.1}%", 100.0 * x)),
            r.ratio_ci
                .map_or("-".into(), |(a, b)| format!("{:.0}–{:.0}%", 100.0 * a, 100.0 * b)),
            r.p_adjusted.map_or("-".into(), crate::analysis::comparison::p_text),
            escape(&super::compare::seen(r)),
            escape(&format!("{} — {}", r.verdict.word(), r.why))
        );
    }
    s.push_str("</table>");
    page(&title, &s)
}
