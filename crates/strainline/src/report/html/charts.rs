//! The charts of a case, as [`Chart`] values for `svg::render`: a ramp's stress–strain
//! curve and thread states, the latency curve, a soak's leak fit, the resource
//! timelines and any other stored series; and one chart per metric across a case's
//! repetitions.

use crate::kinds::details::{RampDetails, SoakDetails};
use crate::load::series;
use crate::report::run::CaseData;
use crate::report::svg::{Chart, Line, Mark, COLORS};

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
            label: format!(
                "exact peak {} ({source})",
                crate::units::Bytes(bytes.max(0.0) as u64)
            ),
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
                label: format!("{key} {}", crate::units::rate(v)),
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
            || (c.timeline.is_some() && crate::report::timeline::takes(name))
        {
            continue;
        }
        let (title, x_label, y_label) = match name.as_str() {
            series::COMPLETED => ("Responses a second", "time (s)", "completed (req/s)"),
            series::ERRORS => ("Errors a second", "time (s)", "errors (per s)"),
            series::P99 => (
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
pub(super) fn repetition_charts(group: &[CaseData]) -> Vec<Chart> {
    let per: Vec<Vec<Chart>> = group.iter().map(case_charts).collect();
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
                crate::report::svg::Axis::Right => chart.y2_label.clone().unwrap_or_default(),
                crate::report::svg::Axis::Left => chart.y_label.clone(),
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
