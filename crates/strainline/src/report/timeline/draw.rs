//! A timeline drawn: stacked panels on one time axis, each a title with its unit, a
//! legend, round y ticks and its lines, phases shaded behind them. The SVG reads without
//! script; the lines' points, the panels' scales and the reader's data go in a JSON
//! element beside it, which `timeline.js` reads to show a second's values on hover and
//! to redraw the lines when zoomed on time.

use super::{value, Point, Target, Timeline};
use std::fmt::Write;

use crate::report::svg::{escape, ticks};

/// A line of a panel: its key in the data, its label, colour, unit and points (a
/// value that is not a number is a gap: a second with nothing to say).
struct Line {
    key: String,
    label: String,
    color: &'static str,
    unit: &'static str,
    dashed: bool,
    /// Drawn on a scale of its own (threads beside MiB), said in its label.
    own_scale: bool,
    /// The target's samples (on their own times), not the load's seconds.
    sampled: bool,
    points: Vec<(f64, f64)>,
}

/// A panel: a title with its unit, and its lines.
struct Panel {
    title: &'static str,
    unit: &'static str,
    lines: Vec<Line>,
}

const WIDTH: f64 = 1000.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 16.0;
const PANEL: f64 = 110.0;
/// Above each panel: its title and legend on one row.
const HEAD: f64 = 38.0;
const BOTTOM: f64 = 36.0;
/// A conservative width of a character of the 12 px labels.
const CHAR: f64 = 7.2;

fn line(
    key: &str,
    label: &str,
    color: &'static str,
    unit: &'static str,
    points: Vec<(f64, f64)>,
) -> Line {
    Line {
        key: key.into(),
        label: label.into(),
        color,
        unit,
        dashed: false,
        own_scale: false,
        sampled: false,
        points,
    }
}

/// A point field's line over `seconds`: a second without it (no latency where nothing
/// was answered) is a gap.
fn of(seconds: &[Point], key: &str) -> Vec<(f64, f64)> {
    (seconds.iter())
        .map(|p| (p.t, value(p, key).unwrap_or(f64::NAN)))
        .collect()
}

/// A target's figure over its samples: a line of samples.
fn sampled(
    key: &str,
    label: &str,
    color: &'static str,
    unit: &'static str,
    target: &[Target],
    f: fn(&Target) -> f64,
) -> Line {
    let mut l = line(
        key,
        label,
        color,
        unit,
        target.iter().map(|s| (s.t, f(s))).collect(),
    );
    l.sampled = true;
    l
}

/// One run's panels: users, throughput, latency, then the target's CPU and memory.
fn panels(tl: &Timeline) -> Vec<Panel> {
    let s = &tl.seconds;
    let mut out = Vec::new();
    if s.iter().any(|p| p.users.is_some()) {
        out.push(Panel {
            title: "Users (clients running)",
            unit: "clients",
            lines: vec![line("users", "users", "#555", "clients", of(s, "users"))],
        });
    }
    // A step's seconds keep no sends: its throughput is its responses and errors.
    let mut throughput = vec![
        line(
            "responses",
            "responses",
            "#2ca02c",
            "req/s",
            of(s, "responses"),
        ),
        line("errors", "errors", "#d62728", "req/s", of(s, "errors")),
    ];
    if s.iter().any(|p| p.sent > 0.0) {
        throughput.insert(0, line("sent", "sent", "#1f77b4", "req/s", of(s, "sent")));
    }
    out.push(Panel {
        title: "Throughput (req/s)",
        unit: "req/s",
        lines: throughput,
    });
    out.push(Panel {
        title: "Latency of each second (ms)",
        unit: "ms",
        lines: vec![
            line("p50", "p50", "#2ca02c", "ms", of(s, "p50")),
            line("p95", "p95", "#ff7f0e", "ms", of(s, "p95")),
            line("p99", "p99", "#d62728", "ms", of(s, "p99")),
        ],
    });
    let t = &tl.target;
    if !t.is_empty() {
        out.push(Panel {
            title: "Target CPU (cores)",
            unit: "cores",
            lines: vec![sampled("cpu", "CPU", "#9467bd", "cores", t, |s| s.cpu)],
        });
        let mut threads = sampled("threads", "threads", "#17becf", "threads", t, |s| s.threads);
        threads.own_scale = true;
        out.push(Panel {
            title: "Target memory (MiB RSS) and threads",
            unit: "MiB",
            lines: vec![
                sampled("rss_mib", "RSS", "#8c564b", "MiB", t, |s| s.rss_mib),
                threads,
            ],
        });
    }
    out
}

/// The timeline drawn: the SVG (readable without script), then its figures as JSON for
/// the script and for anyone reading the page's data (`seconds`, `causes`, `target`,
/// `steps` left out: each step has its own). `id` tells timelines apart.
pub fn render(tl: &Timeline, id: &str) -> String {
    let data = serde_json::json!({
        "seconds": tl.seconds,
        "bucket": tl.bucket,
        "causes": tl.causes,
        "target": tl.target,
    });
    drawing(
        &panels(tl),
        &tl.phases,
        (end_of(&tl.seconds), tl.bucket),
        id,
        data,
    )
}

fn end_of(seconds: &[Point]) -> f64 {
    seconds.last().map_or(1.0, |p| p.t).max(1.0)
}

/// The most steps drawn over time: a scenario may have 2,048, and a page of them would
/// weigh hundreds of megabytes. The rest are in the CSV.
pub const MOST_STEPS: usize = 24;

/// Each step's own timeline (its responses, errors and percentiles a second), under
/// its name, as Gatling's request tab draws one per request: `(name, drawing)`, for
/// the [`MOST_STEPS`] that answered most, in the scenario's order.
pub fn render_steps(tl: &Timeline, id: &str) -> Vec<(String, String)> {
    let answered =
        |points: &[Point]| -> f64 { points.iter().map(|p| p.responses + p.errors).sum() };
    let mut busiest: Vec<usize> = (0..tl.steps.len()).collect();
    busiest.sort_by(|a, b| answered(&tl.steps[*b].1).total_cmp(&answered(&tl.steps[*a].1)));
    busiest.truncate(MOST_STEPS);
    busiest.sort_unstable();
    busiest
        .into_iter()
        .map(|i| {
            let (name, points) = &tl.steps[i];
            let one = Timeline {
                seconds: points.clone(),
                phases: tl.phases.clone(),
                bucket: tl.bucket,
                ..Timeline::default()
            };
            (name.clone(), render(&one, &format!("{id}-step-{i}")))
        })
        .collect()
}

/// Two runs' timelines on one time axis, each from its own load's start: the baseline
/// grey and dashed, the candidate in colour, panel by panel (users, responses, errors,
/// p50, p95, p99, the target's CPU and memory where both have them).
pub fn render_overlay(base: &Timeline, cand: &Timeline, id: &str) -> String {
    let both = |title: &'static str, unit: &'static str, key: &str| {
        let of_run = |t: &Timeline, label: &str, color| match key {
            "cpu" => sampled(label, label, color, unit, &t.target, |s| s.cpu),
            "rss_mib" => sampled(label, label, color, unit, &t.target, |s| s.rss_mib),
            _ => line(label, label, color, unit, of(&t.seconds, key)),
        };
        let mut b = of_run(base, "baseline", "#7f7f7f");
        b.dashed = true;
        Panel {
            title,
            unit,
            lines: vec![b, of_run(cand, "candidate", "#1f77b4")],
        }
    };
    let mut panels = Vec::new();
    let has_users = |t: &Timeline| t.seconds.iter().any(|p| p.users.is_some());
    if has_users(base) && has_users(cand) {
        panels.push(both("Users (clients running)", "clients", "users"));
    }
    panels.push(both("Responses (req/s)", "req/s", "responses"));
    panels.push(both("Errors (req/s)", "req/s", "errors"));
    panels.push(both("p50 latency (ms)", "ms", "p50"));
    panels.push(both("p95 latency (ms)", "ms", "p95"));
    panels.push(both("p99 latency (ms)", "ms", "p99"));
    if !base.target.is_empty() && !cand.target.is_empty() {
        panels.push(both("Target CPU (cores)", "cores", "cpu"));
        panels.push(both("Target memory (MiB RSS)", "MiB", "rss_mib"));
    }
    let end = end_of(&base.seconds).max(end_of(&cand.seconds));
    let data = serde_json::json!({ "baseline": base.seconds, "candidate": cand.seconds });
    drawing(&panels, &[], (end, base.bucket.max(cand.bucket)), id, data)
}

/// Each panel's scale for the script: its top, its height, its y range, and each line's
/// key, label, points and own range (when it has one).
#[derive(serde::Serialize)]
struct Scale<'a> {
    title: &'a str,
    unit: &'a str,
    top: f64,
    height: f64,
    max: f64,
    lines: Vec<ScaleLine<'a>>,
}

#[derive(serde::Serialize)]
struct ScaleLine<'a> {
    key: &'a str,
    label: &'a str,
    unit: &'a str,
    /// The target's samples: not the seconds a hover box is headed by.
    sampled: bool,
    max: f64,
    /// Gaps are `null`.
    points: &'a [(f64, f64)],
}

/// The SVG of `panels` over `[0, end]` s and the JSON beside it: `data` with `end`,
/// `phases` and `panels` (the scales and points the script draws from) added.
fn drawing(
    panels: &[Panel],
    phases: &[(String, f64, f64)],
    (end, bucket): (f64, u64),
    id: &str,
    mut data: serde_json::Value,
) -> String {
    let width = bucket.max(1) as f64;
    let height = panels.len() as f64 * (PANEL + HEAD) + BOTTOM;
    let x = |t: f64| LEFT + t / end * (WIDTH - LEFT - RIGHT);
    let mut s = format!(
        "<div class=\"timeline\" id=\"{}\"><svg class=\"chart timeline-chart\" viewBox=\"0 0 {WIDTH} {height}\" \
         role=\"img\" aria-label=\"The load over time\" data-left=\"{LEFT}\" data-right=\"{RIGHT}\">",
        escape(id)
    );
    shade(&mut s, phases, &x, height);
    let scales: Vec<Scale> = panels
        .iter()
        .enumerate()
        .map(|(i, p)| panel(&mut s, (i, p), i as f64 * (PANEL + HEAD) + HEAD, width, &x))
        .collect();
    x_axis(&mut s, end, height - BOTTOM, &x);
    s.push_str("</svg>");
    data["end"] = end.into();
    data["bucket"] = width.into();
    data["phases"] = serde_json::json!(phases);
    data["panels"] = serde_json::json!(scales);
    // No `<` at all in the element (`</script>`, `<!--`): JSON writes it `\u003c`, which
    // only a string can hold.
    let json = data.to_string().replace('<', "\\u003c");
    s.push_str(&format!(
        "<script type=\"application/json\" class=\"timeline-data\">{json}</script></div>"
    ));
    s
}

/// The phases as shaded bands behind every panel, each named where its name fits.
fn shade(s: &mut String, phases: &[(String, f64, f64)], x: &dyn Fn(f64) -> f64, height: f64) {
    for (i, (name, a, b)) in phases.iter().enumerate() {
        let (xa, xb) = (x(*a), x(*b));
        let fill = if i % 2 == 0 { "#f3f3f3" } else { "#e8eef7" };
        s.push_str(&format!(
            "<rect class=\"phase\" data-a=\"{a}\" data-b=\"{b}\" x=\"{xa:.1}\" y=\"{HEAD}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{fill}\"><title>{}</title></rect>",
            xb - xa,
            height - BOTTOM - HEAD,
            escape(name)
        ));
        if (xb - xa) > name.chars().count() as f64 * CHAR + 8.0 {
            s.push_str(&format!(
                "<text class=\"tick phase-name\" data-a=\"{a}\" x=\"{:.1}\" y=\"{:.1}\">{}</text>",
                xa + 4.0,
                height - BOTTOM - 4.0,
                escape(name)
            ));
        }
    }
}

fn max_of(v: &[(f64, f64)]) -> f64 {
    v.iter()
        .map(|p| p.1)
        .filter(|v| v.is_finite())
        .fold(0.0f64, f64::max)
}

/// One panel: title and legend on its head row (the legend on a row of its own when
/// both do not fit), y ticks, its lines.
fn panel<'a>(
    s: &mut String,
    (i, p): (usize, &'a Panel),
    top: f64,
    width: f64,
    x: &dyn Fn(f64) -> f64,
) -> Scale<'a> {
    let shared = (p.lines.iter())
        .filter(|l| !l.own_scale)
        .map(|l| max_of(&l.points))
        .fold(0.0f64, f64::max);
    let ys = y_ticks(shared);
    let max = ys.last().copied().unwrap_or(1.0).max(1e-9);
    let step = ys.get(1).copied().unwrap_or(max);
    let y = |v: f64, m: f64| top + PANEL - v.clamp(0.0, m) / m * PANEL;
    s.push_str(&format!(
        "<text class=\"chart-title\" x=\"{LEFT}\" y=\"{:.1}\">{}</text>",
        top - 10.0,
        escape(p.title)
    ));
    let labels: Vec<String> = (p.lines.iter())
        .map(|l| match l.own_scale {
            true => format!("{} (own scale)", l.label),
            false => l.label.clone(),
        })
        .collect();
    let legend: f64 = labels
        .iter()
        .map(|l| 34.0 + l.chars().count() as f64 * CHAR)
        .sum();
    let after_title = LEFT + p.title.chars().count() as f64 * 8.4 + 24.0;
    // The legend after the title, or right-aligned when it would not fit there.
    let mut lx = if after_title + legend <= WIDTH - RIGHT {
        after_title
    } else {
        (WIDTH - RIGHT - legend).max(LEFT)
    };
    let ly = if lx < after_title {
        top - 24.0
    } else {
        top - 10.0
    };
    for (l, label) in p.lines.iter().zip(&labels) {
        s.push_str(&format!(
            "<rect x=\"{lx:.1}\" y=\"{:.1}\" width=\"14\" height=\"3\" fill=\"{}\"/>\
             <text class=\"tick\" x=\"{:.1}\" y=\"{ly:.1}\">{}</text>",
            ly - 5.0,
            l.color,
            lx + 18.0,
            escape(label)
        ));
        lx += 34.0 + label.chars().count() as f64 * CHAR;
    }
    for v in &ys {
        let yy = y(*v, max);
        s.push_str(&format!(
            "<line x1=\"{LEFT}\" x2=\"{:.1}\" y1=\"{yy:.1}\" y2=\"{yy:.1}\" stroke=\"#e4e4e4\"/>\
             <text class=\"tick\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            WIDTH - RIGHT,
            LEFT - 6.0,
            yy + 4.0,
            number(*v, step)
        ));
    }
    let mut lines = Vec::new();
    for (j, l) in p.lines.iter().enumerate() {
        let m = match l.own_scale {
            true => y_ticks(max_of(&l.points)).last().copied().unwrap_or(1.0),
            false => max,
        };
        s.push_str(&format!(
            "<path data-line=\"{i}.{j}\" data-key=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.6\"{} d=\"{}\"/>",
            escape(&l.key),
            l.color,
            if l.dashed { " stroke-dasharray=\"5 3\"" } else { "" },
            path(&l.points, width, &|t| x(t), &|v| y(v, m))
        ));
        lines.push(ScaleLine {
            key: &l.key,
            label: &l.label,
            unit: l.unit,
            sampled: l.sampled,
            max: m,
            points: &l.points,
        });
    }
    Scale {
        title: p.title,
        unit: p.unit,
        top,
        height: PANEL,
        max,
        lines,
    }
}

/// A line's path: a move at each gap (a value that is not a number), and a point alone
/// between gaps drawn across the `width` seconds it stands for — or it would not show.
/// `timeline.js` draws the same when zoomed.
fn path(
    points: &[(f64, f64)],
    width: f64,
    x: &dyn Fn(f64) -> f64,
    y: &dyn Fn(f64) -> f64,
) -> String {
    let mut d = String::new();
    let finite = |i: usize| points.get(i).is_some_and(|p| p.1.is_finite());
    for (i, (t, v)) in points.iter().enumerate() {
        if !v.is_finite() {
            continue;
        }
        let after_one = i > 0 && finite(i - 1);
        let alone = !after_one && !finite(i + 1);
        let start = !after_one;
        if alone {
            let _ = write!(d, "M{:.1},{:.1}L", x((t - width).max(0.0)), y(*v));
        } else if start {
            d.push('M');
        } else {
            d.push('L');
        }
        let _ = write!(d, "{:.1},{:.1}", x(*t), y(*v));
    }
    d
}

/// The time axis under the last panel: seconds at round steps.
fn x_axis(s: &mut String, end: f64, at: f64, x: &dyn Fn(f64) -> f64) {
    let step = [
        1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0,
    ]
    .into_iter()
    .find(|st| end / st <= 12.0)
    .unwrap_or((end / 12.0 / 3600.0).ceil() * 3600.0);
    s.push_str(&format!(
        "<g class=\"x-axis\" data-at=\"{at}\"><line x1=\"{LEFT}\" x2=\"{:.1}\" y1=\"{at}\" y2=\"{at}\" stroke=\"#999\"/>",
        WIDTH - RIGHT
    ));
    let mut t = 0.0;
    while t <= end + 1e-9 {
        s.push_str(&format!(
            "<text class=\"tick\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            x(t),
            at + 14.0,
            number(t, step)
        ));
        t += step;
    }
    s.push_str(&format!(
        "<text class=\"axis-label\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">seconds from the load's start</text></g>",
        LEFT + (WIDTH - LEFT - RIGHT) / 2.0,
        at + 30.0
    ));
}

/// Round ticks from 0 to at least `max` (1 when there is nothing): the last one covers
/// every value, so that no line leaves its panel.
fn y_ticks(max: f64) -> Vec<f64> {
    let max = if max > 0.0 && max.is_finite() {
        max
    } else {
        1.0
    };
    let round = ticks(0.0, max, 3);
    let step = match round.get(1) {
        Some(s) if *s > 0.0 => *s,
        _ => max,
    };
    let n = (max / step - 1e-9).ceil().max(1.0) as usize;
    (0..=n).map(|i| i as f64 * step).collect()
}

/// A tick's number with the decimals its step needs (0.005: 3, 2.5: 1, 20: none).
fn number(v: f64, step: f64) -> String {
    let decimals = (0..4)
        .find(|d| {
            let scaled = step * 10f64.powi(*d);
            (scaled - scaled.round()).abs() < 1e-6 * scaled.max(1.0)
        })
        .unwrap_or(4) as usize;
    format!("{v:.decimals$}")
}

/// The script that reads a second on hover and zooms on time (drag; double-click
/// resets), over every timeline of the page.
pub const SCRIPT: &str = include_str!("timeline.js");

/// The Content-Security-Policy source that allows [`SCRIPT`] and nothing else.
pub fn script_source() -> String {
    use base64::Engine;
    let digest = ring::digest::digest(&ring::digest::SHA256, SCRIPT.as_bytes());
    format!(
        "'sha256-{}'",
        base64::engine::general_purpose::STANDARD.encode(digest.as_ref())
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A gap (no latency in a second) breaks a line; a point alone between gaps is drawn
    /// across its second.
    #[test]
    fn a_line_breaks_at_its_gaps_and_a_lone_point_is_drawn_across_its_second() {
        let x = |t: f64| t * 10.0;
        let y = |v: f64| v;
        let d = path(
            &[
                (1.0, 5.0),
                (2.0, 6.0),
                (3.0, f64::NAN),
                (4.0, 7.0),
                (5.0, f64::NAN),
            ],
            1.0,
            &x,
            &y,
        );
        assert_eq!(d, "M10.0,5.0L20.0,6.0M30.0,7.0L40.0,7.0");
        assert_eq!(path(&[(1.0, f64::NAN)], 1.0, &x, &y), "");
    }

    #[test]
    fn ticks_cover_every_value_and_read_with_the_decimals_their_step_needs() {
        assert_eq!(y_ticks(50.2), [0.0, 20.0, 40.0, 60.0]);
        assert_eq!(y_ticks(0.0), [0.0, 0.5, 1.0]);
        assert_eq!(y_ticks(f64::INFINITY), [0.0, 0.5, 1.0]);
        assert!(*y_ticks(0.012).last().unwrap() >= 0.012);
        assert_eq!(number(0.005, 0.005), "0.005");
        assert_eq!(number(40.0, 20.0), "40");
        assert_eq!(number(2.5, 2.5), "2.5");
        assert_eq!(number(0.5, 0.25), "0.50");
    }

    /// Baseline and candidate share each panel, the baseline dashed; the data holds
    /// both runs' seconds.
    #[test]
    fn an_overlay_draws_both_runs_in_every_panel() {
        let run = |p95: f64| Timeline {
            seconds: (1..=5)
                .map(|t| Point {
                    t: t as f64,
                    p95: Some(p95),
                    users: Some(4.0),
                    ..Point::default()
                })
                .collect(),
            ..Timeline::default()
        };
        let page = render_overlay(&run(10.0), &run(20.0), "c");
        assert_eq!(page.matches("data-key=\"baseline\"").count(), 6);
        // Seconds without latency are gaps: p50 was never measured here.
        assert_eq!(page.matches("data-key=\"candidate\"").count(), 6);
        assert!(page.contains("stroke-dasharray"));
        assert!(page.contains("\"p95\":20.0"));
    }
}
