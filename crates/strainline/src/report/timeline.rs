//! A load case over time, on one clock: the clients running, requests sent, responses
//! and errors a second, latency percentiles of each second (from its stored HDR
//! histogram: min, p50, p75, p90, p95, p99, max) and the target's CPU, memory and
//! threads beneath, with a spike's or a soak's phases shaded. Read from the store, then
//! drawn as one SVG of stacked panels that reads without script (Markdown, mail), its
//! figures embedded as JSON, and a small script of our own (`timeline.js`, allowed by
//! its hash) that reads a second's values on hover and zooms on time.

use hdrhistogram::serialization::Deserializer;
use hdrhistogram::Histogram;

use super::svg::{escape, ticks};
use crate::measure::Sample;
use crate::store::StoredHistogram;

/// One second of the load: its figures at its end (`t`, seconds from the load's start).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Point {
    pub t: f64,
    /// Requests sent, responses and errors, a second.
    pub sent: f64,
    pub responses: f64,
    pub errors: f64,
    /// Clients running at its end (none for the open model's sends).
    pub users: Option<f64>,
    /// Corrected latency (from the intended send time) of the second's responses, ms.
    pub min: f64,
    pub p50: f64,
    pub p75: f64,
    pub p90: f64,
    pub p95: f64,
    pub p99: f64,
    pub max: f64,
}

/// The target's figures at a sample, on the load's clock.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Target {
    pub t: f64,
    pub cpu: f64,
    pub rss_mib: f64,
    pub threads: f64,
}

/// A load case over time.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Timeline {
    pub seconds: Vec<Point>,
    /// Errors a second by cause: (cause, points), the seconds it failed only.
    pub causes: Vec<(String, Vec<(f64, f64)>)>,
    pub target: Vec<Target>,
    /// Phases shaded: (name, start, end) on the load's clock.
    pub phases: Vec<(String, f64, f64)>,
    /// Each scenario step's own seconds (responses, errors, percentiles), by name.
    pub steps: Vec<(String, Vec<Point>)>,
}

/// The series a timeline takes from a case's stored ones (other charts leave them).
pub fn takes(series: &str) -> bool {
    matches!(
        series,
        "completed_per_second" | "errors_per_second" | "p99_us" | "sent_per_second" | "users"
    ) || series == crate::load::LOAD_START
        || series.starts_with(crate::load::CAUSE_PREFIX)
        || series.starts_with(crate::load::STEP_PREFIX)
}

impl Timeline {
    /// A case's timeline from its stored series, its seconds' histograms, the target's
    /// samples, its phases (`[name, t]` on the samples' clock) and its steps' names (by
    /// index); `None` when the case kept no seconds' histograms (not a load case, or
    /// stored before they were kept).
    pub fn read(
        series: &[(String, Vec<(f64, f64)>)],
        histograms: &[StoredHistogram],
        samples: &[Sample],
        phases: &[(String, f64)],
        step_names: &[String],
    ) -> Option<Timeline> {
        let named = |n: &str| series.iter().find(|(s, _)| s == n).map(|(_, p)| &p[..]);
        let at = |n: &str, t: f64| {
            named(n)?
                .iter()
                .find(|(x, _)| (x - t).abs() < 1e-6)
                .map(|p| p.1)
        };
        let mut seconds = Vec::new();
        for h in histograms {
            if h.name != crate::load::SECOND_LATENCY
                || h.encoding != crate::load::recorder::hdr::STORED
            {
                continue;
            }
            let Ok(hist) = Deserializer::new().deserialize::<u64, _>(&mut h.data.as_slice()) else {
                continue;
            };
            let t = h.span.1;
            seconds.push(point(t, &hist, &at));
        }
        if seconds.is_empty() {
            return None;
        }
        seconds.sort_by(|a, b| a.t.total_cmp(&b.t));
        let start = named(crate::load::LOAD_START)
            .and_then(|p| p.first())
            .map_or(0.0, |p| p.1);
        let end = seconds.last().map_or(0.0, |p| p.t);
        let target = samples
            .iter()
            .map(|s| Target {
                t: s.t - start,
                cpu: s.cpu_cores,
                rss_mib: s.rss_bytes as f64 / 1_048_576.0,
                threads: s.threads as f64,
            })
            .zip(samples)
            .filter(|(s, raw)| s.t >= 0.0 && s.t <= end && raw.processes > 0)
            .map(|(s, _)| s)
            .collect();
        let causes = series
            .iter()
            .filter_map(|(n, p)| Some((n.strip_prefix(crate::load::CAUSE_PREFIX)?, p)))
            .map(|(c, p)| (c.to_string(), p.clone()))
            .collect();
        Some(Timeline {
            seconds,
            causes,
            target,
            phases: spans(phases, start, end),
            steps: steps(series, histograms, step_names),
        })
    }

    /// The second, if any, when `key` (a [`Point`] field: "p95") first reached `at`.
    pub fn first_reaching(&self, key: &str, at: f64) -> Option<&Point> {
        self.seconds
            .iter()
            .find(|p| value(p, key).is_some_and(|v| v >= at))
    }
}

/// Each step's seconds: its histograms' percentiles, its series' responses and errors
/// (a second it had none of is 0).
fn steps(
    series: &[(String, Vec<(f64, f64)>)],
    histograms: &[StoredHistogram],
    names: &[String],
) -> Vec<(String, Vec<Point>)> {
    let mut by_index: std::collections::BTreeMap<usize, Vec<Point>> = Default::default();
    for h in histograms {
        let Some(index) = h
            .name
            .strip_prefix(crate::load::SECOND_LATENCY)
            .and_then(|r| r.strip_prefix('/'))
            .and_then(|r| r.strip_prefix(crate::load::STEP_PREFIX))
            .and_then(|i| i.parse::<usize>().ok())
        else {
            continue;
        };
        let Ok(hist) = Deserializer::new().deserialize::<u64, _>(&mut h.data.as_slice()) else {
            continue;
        };
        let of = |what: &str, t: f64| {
            let name = format!("{}{index}/{what}_per_second", crate::load::STEP_PREFIX);
            series
                .iter()
                .find(|(n, _)| *n == name)
                .and_then(|(_, p)| p.iter().find(|(x, _)| (x - t).abs() < 1e-6))
                .map(|p| p.1)
        };
        let t = h.span.1;
        let mut p = point(t, &hist, &|_, _| None);
        p.responses = of("responses", t).unwrap_or(0.0);
        p.errors = of("errors", t).unwrap_or(0.0);
        by_index.entry(index).or_default().push(p);
    }
    by_index
        .into_iter()
        .map(|(i, mut points)| {
            points.sort_by(|a, b| a.t.total_cmp(&b.t));
            let name = names
                .get(i)
                .filter(|n| !n.is_empty())
                .cloned()
                .unwrap_or_else(|| format!("step {}", i + 1));
            (name, points)
        })
        .collect()
}

/// A field of a point by its name.
fn value(p: &Point, key: &str) -> Option<f64> {
    Some(match key {
        "sent" => p.sent,
        "responses" => p.responses,
        "errors" => p.errors,
        "users" => p.users?,
        "min" => p.min,
        "p50" => p.p50,
        "p75" => p.p75,
        "p90" => p.p90,
        "p95" => p.p95,
        "p99" => p.p99,
        "max" => p.max,
        _ => return None,
    })
}

/// The second ending at `t`: its percentiles from `hist`, its counts from the series.
fn point(t: f64, hist: &Histogram<u64>, at: &dyn Fn(&str, f64) -> Option<f64>) -> Point {
    let ms = |q: f64| {
        if hist.is_empty() {
            0.0
        } else {
            hist.value_at_quantile(q) as f64 / 1000.0
        }
    };
    Point {
        t,
        sent: at("sent_per_second", t).unwrap_or(0.0),
        responses: at("completed_per_second", t).unwrap_or(0.0),
        errors: at("errors_per_second", t).unwrap_or(0.0),
        users: at("users", t),
        min: if hist.is_empty() {
            0.0
        } else {
            hist.min() as f64 / 1000.0
        },
        p50: ms(0.5),
        p75: ms(0.75),
        p90: ms(0.9),
        p95: ms(0.95),
        p99: ms(0.99),
        max: if hist.is_empty() {
            0.0
        } else {
            hist.max() as f64 / 1000.0
        },
    }
}

/// Phases `[name, t]` (samples' clock, each until the next) as spans on the load's
/// clock within `[0, end]`; the last ("end") closes the one before it.
fn spans(phases: &[(String, f64)], start: f64, end: f64) -> Vec<(String, f64, f64)> {
    if phases.len() <= 2 {
        // One phase over the whole load says nothing a shade would.
        return Vec::new();
    }
    phases
        .windows(2)
        .map(|w| {
            (
                w[0].0.clone(),
                (w[0].1 - start).clamp(0.0, end),
                (w[1].1 - start).clamp(0.0, end),
            )
        })
        .filter(|(_, a, b)| b > a)
        .collect()
}

/// One panel of the drawing: a title with its unit, and lines (key, label, colour).
struct Panel {
    title: &'static str,
    lines: Vec<(&'static str, &'static str, &'static str)>,
    /// The panel's points by line key.
    values: Vec<Vec<(f64, f64)>>,
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

fn panels(tl: &Timeline) -> Vec<Panel> {
    let of = |key: &str| -> Vec<(f64, f64)> {
        tl.seconds
            .iter()
            .filter_map(|p| Some((p.t, value(p, key)?)))
            .collect()
    };
    let mut out = Vec::new();
    if tl.seconds.iter().any(|p| p.users.is_some()) {
        out.push(Panel {
            title: "Users (clients running)",
            lines: vec![("users", "users", "#555")],
            values: vec![of("users")],
        });
    }
    // A step's seconds keep no sends: its throughput is its responses and errors.
    let sent = tl.seconds.iter().any(|p| p.sent > 0.0);
    let mut throughput = Panel {
        title: "Throughput (req/s)",
        lines: vec![
            ("responses", "responses", "#2ca02c"),
            ("errors", "errors", "#d62728"),
        ],
        values: vec![of("responses"), of("errors")],
    };
    if sent {
        throughput.lines.insert(0, ("sent", "sent", "#1f77b4"));
        throughput.values.insert(0, of("sent"));
    }
    out.push(throughput);
    out.push(Panel {
        title: "Latency of each second (ms)",
        lines: vec![
            ("p50", "p50", "#2ca02c"),
            ("p95", "p95", "#ff7f0e"),
            ("p99", "p99", "#d62728"),
        ],
        values: vec![of("p50"), of("p95"), of("p99")],
    });
    if !tl.target.is_empty() {
        let t = |f: fn(&Target) -> f64| tl.target.iter().map(|s| (s.t, f(s))).collect();
        out.push(Panel {
            title: "Target CPU (cores)",
            lines: vec![("cpu", "CPU", "#9467bd")],
            values: vec![t(|s| s.cpu)],
        });
        out.push(Panel {
            title: "Target memory (MiB RSS) and threads",
            lines: vec![
                ("rss_mib", "RSS", "#8c564b"),
                ("threads", "threads", "#17becf"),
            ],
            values: vec![t(|s| s.rss_mib), t(|s| s.threads)],
        });
    }
    out
}

/// Each panel's scale for the script: its top, its height and its y range.
#[derive(serde::Serialize)]
struct Scale {
    top: f64,
    height: f64,
    max: f64,
    keys: Vec<&'static str>,
    /// Lines drawn on their own scale in this panel (threads beside RSS): key → max.
    own: Vec<(&'static str, f64)>,
}

/// The timeline drawn: the SVG (readable without script), then its figures as JSON for
/// the script and for anyone reading the page's data. `id` tells timelines apart.
pub fn render(tl: &Timeline, id: &str) -> String {
    let panels = panels(tl);
    let end = tl.seconds.last().map_or(1.0, |p| p.t).max(1.0);
    let height = panels.len() as f64 * (PANEL + HEAD) + BOTTOM;
    let x = |t: f64| LEFT + t / end * (WIDTH - LEFT - RIGHT);
    let mut s = format!(
        "<div class=\"timeline\" id=\"{id}\"><svg class=\"chart timeline-chart\" viewBox=\"0 0 {WIDTH} {height}\" \
         role=\"img\" aria-label=\"The load over time\" data-left=\"{LEFT}\" data-right=\"{RIGHT}\" data-end=\"{end}\">"
    );
    shade(&mut s, tl, &x, height);
    let mut scales = Vec::new();
    for (i, p) in panels.iter().enumerate() {
        let top = i as f64 * (PANEL + HEAD) + HEAD;
        scales.push(panel(&mut s, p, top, &x));
    }
    x_axis(&mut s, end, height - BOTTOM, &x);
    s.push_str("</svg>");
    let data = serde_json::json!({
        "end": end,
        "seconds": tl.seconds,
        "causes": tl.causes,
        "target": tl.target,
        "phases": tl.phases,
        "scales": scales,
    });
    // `</` cannot end the script element early: JSON escapes it as `<\/`.
    let json = data.to_string().replace("</", "<\\/");
    s.push_str(&format!(
        "<script type=\"application/json\" class=\"timeline-data\">{json}</script></div>"
    ));
    s
}

/// Each step's own timeline (its responses, errors and percentiles a second), under
/// its name, as Gatling's request tab draws one per request: `(name, drawing)`.
pub fn render_steps(tl: &Timeline, id: &str) -> Vec<(String, String)> {
    tl.steps
        .iter()
        .enumerate()
        .map(|(i, (name, points))| {
            let one = Timeline {
                seconds: points.clone(),
                phases: tl.phases.clone(),
                ..Timeline::default()
            };
            (name.clone(), render(&one, &format!("{id}-step-{i}")))
        })
        .collect()
}

/// The phases as shaded bands behind every panel, each named where its name fits.
fn shade(s: &mut String, tl: &Timeline, x: &dyn Fn(f64) -> f64, height: f64) {
    for (i, (name, a, b)) in tl.phases.iter().enumerate() {
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

/// One panel: title and legend on its head row, y ticks, its lines.
fn panel(s: &mut String, p: &Panel, top: f64, x: &dyn Fn(f64) -> f64) -> Scale {
    let own_scale = |k: &str| k == "threads";
    let max_of = |v: &[(f64, f64)]| v.iter().map(|p| p.1).fold(0.0f64, f64::max);
    let shared_max = p
        .lines
        .iter()
        .zip(&p.values)
        .filter(|(l, _)| !own_scale(l.0))
        .map(|(_, v)| max_of(v))
        .fold(0.0f64, f64::max);
    let ys = y_ticks(shared_max);
    let max = ys.last().copied().unwrap_or(1.0).max(1e-9);
    let step = ys.get(1).copied().unwrap_or(max);
    let y = |v: f64, m: f64| top + PANEL - v / m * PANEL;
    s.push_str(&format!(
        "<text class=\"chart-title\" x=\"{LEFT}\" y=\"{:.1}\">{}</text>",
        top - 10.0,
        escape(p.title)
    ));
    // The legend after the title, each entry as wide as its text.
    let mut lx = LEFT + p.title.chars().count() as f64 * 8.4 + 24.0;
    for (key, label, color) in &p.lines {
        let label = if own_scale(key) {
            format!("{label} (own scale)")
        } else {
            label.to_string()
        };
        s.push_str(&format!(
            "<rect x=\"{lx:.1}\" y=\"{:.1}\" width=\"14\" height=\"3\" fill=\"{color}\"/>\
             <text class=\"tick\" x=\"{:.1}\" y=\"{:.1}\">{}</text>",
            top - 15.0,
            lx + 18.0,
            top - 10.0,
            escape(&label)
        ));
        lx += 18.0 + label.chars().count() as f64 * CHAR + 16.0;
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
    let mut own = Vec::new();
    for ((key, _, color), values) in p.lines.iter().zip(&p.values) {
        let m = if own_scale(key) {
            let m = y_ticks(max_of(values).max(1.0))
                .last()
                .copied()
                .unwrap_or(1.0);
            own.push((*key, m));
            m
        } else {
            max
        };
        let pts: Vec<String> = values
            .iter()
            .map(|(t, v)| format!("{:.1},{:.1}", x(*t), y(*v, m)))
            .collect();
        s.push_str(&format!(
            "<polyline data-key=\"{key}\" fill=\"none\" stroke=\"{color}\" stroke-width=\"1.6\" points=\"{}\"/>",
            pts.join(" ")
        ));
    }
    Scale {
        top,
        height: PANEL,
        max,
        keys: p.lines.iter().map(|l| l.0).collect(),
        own,
    }
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

    fn stored(t: f64, values_us: &[u64]) -> StoredHistogram {
        let mut h = crate::load::recorder::histogram();
        for v in values_us {
            h.record(*v).unwrap();
        }
        StoredHistogram {
            name: crate::load::SECOND_LATENCY.into(),
            span: (t - 1.0, t),
            encoding: crate::load::recorder::hdr::STORED.into(),
            data: crate::load::recorder::hdr::stored(&h).unwrap(),
        }
    }

    /// Seconds read back from their histograms and series: percentiles exact to the
    /// histogram's precision, counts from the series, the users' step and the p95's
    /// rise found where they are.
    #[test]
    fn a_timeline_reads_each_second_from_its_histogram_and_series() {
        let mut hists = Vec::new();
        let mut users = Vec::new();
        let mut sent = Vec::new();
        for t in 1..=10 {
            let slow = if t >= 6 { 400_000 } else { 10_000 };
            let values: Vec<u64> = (1..=100)
                .map(|i| if i > 90 { slow } else { 5_000 })
                .collect();
            hists.push(stored(t as f64, &values));
            users.push((t as f64, if t >= 4 { 10.0 } else { 5.0 }));
            sent.push((t as f64, 100.0));
        }
        let series = vec![
            ("users".to_string(), users),
            ("sent_per_second".to_string(), sent),
            (crate::load::LOAD_START.to_string(), vec![(0.0, 2.0)]),
            ("errors_per_second/timeout".to_string(), vec![(7.0, 3.0)]),
        ];
        let phases = [
            ("before".to_string(), 2.0),
            ("spike".to_string(), 5.0),
            ("end".to_string(), 7.0),
        ];
        let tl = Timeline::read(&series, &hists, &[], &phases, &[]).unwrap();
        assert_eq!(tl.seconds.len(), 10);
        assert!(
            (tl.seconds[0].p50 - 5.0).abs() < 0.01,
            "{:?}",
            tl.seconds[0]
        );
        assert!(
            (tl.seconds[0].p95 - 10.0).abs() < 0.01,
            "{:?}",
            tl.seconds[0]
        );
        assert!(
            (tl.seconds[6].p95 - 400.0).abs() < 0.5,
            "{:?}",
            tl.seconds[6]
        );
        let crossed = tl.first_reaching("p95", 300.0).unwrap();
        assert_eq!((crossed.t, crossed.users), (6.0, Some(10.0)));
        assert_eq!(tl.first_reaching("users", 10.0).unwrap().t, 4.0);
        assert_eq!(tl.seconds[3].sent, 100.0);
        assert_eq!(tl.causes, [("timeout".to_string(), vec![(7.0, 3.0)])]);
        assert_eq!(
            tl.phases,
            [
                ("before".to_string(), 0.0, 3.0),
                ("spike".to_string(), 3.0, 5.0)
            ]
        );
        let page = render(&tl, "t1");
        assert!(page.contains("\"p95\":400"), "the data holds each second");
        assert!(page.contains("data-key=\"users\""));
    }

    #[test]
    fn ticks_cover_every_value_and_read_with_the_decimals_their_step_needs() {
        assert_eq!(y_ticks(50.2), [0.0, 20.0, 40.0, 60.0]);
        assert_eq!(y_ticks(0.0), [0.0, 0.5, 1.0]);
        assert!(*y_ticks(0.012).last().unwrap() >= 0.012);
        assert_eq!(number(0.005, 0.005), "0.005");
        assert_eq!(number(40.0, 20.0), "40");
        assert_eq!(number(2.5, 2.5), "2.5");
        assert_eq!(number(0.5, 0.25), "0.50");
    }

    #[test]
    fn a_case_without_seconds_has_no_timeline_and_a_script_cannot_end_the_data() {
        assert!(Timeline::read(&[], &[], &[], &[], &[]).is_none());
        let tl = Timeline {
            seconds: vec![Point {
                t: 1.0,
                ..Point::default()
            }],
            phases: vec![("</script><b>".into(), 0.0, 1.0)],
            ..Timeline::default()
        };
        let page = render(&tl, "t");
        assert!(!page.contains("</script><b>"));
        assert_eq!(page.matches("</script>").count(), 1);
        assert!(script_source().starts_with("'sha256-"));
    }
}
