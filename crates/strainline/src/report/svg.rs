//! Charts drawn by strainline as inline SVG: lines on one or two y axes, vertical
//! markers (a ceiling, a knee, a warm-up end), horizontal reference lines (an exact
//! peak), a legend, and labelled axes with units on every chart. No scripts, no fonts
//! fetched: a report opens anywhere, offline. Every text is escaped.

use std::fmt::Write;

/// Escapes text for HTML, SVG and XML content and attributes.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if (c as u32) < 0x20 && c != '\n' && c != '\t' => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Axis {
    Left,
    Right,
}

#[derive(Debug, Clone)]
pub struct Line {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    pub color: &'static str,
    pub axis: Axis,
    pub dashed: bool,
    /// Draw a dot at each point (few points, e.g. ramp steps).
    pub dots: bool,
    /// With dots: where each point links (a run's page), with its tooltip.
    pub links: Vec<(String, String)>,
}

impl Line {
    pub fn new(name: &str, points: Vec<(f64, f64)>, color: &'static str) -> Line {
        Line {
            name: name.into(),
            points,
            color,
            axis: Axis::Left,
            dashed: false,
            dots: false,
            links: Vec::new(),
        }
    }
    pub fn right(mut self) -> Line {
        self.axis = Axis::Right;
        self
    }
    pub fn dashed(mut self) -> Line {
        self.dashed = true;
        self
    }
    pub fn dots(mut self) -> Line {
        self.dots = true;
        self
    }
    /// Dots that link, one `(href, title)` per point (the caller makes the href safe).
    pub fn linked(mut self, links: Vec<(String, String)>) -> Line {
        self.dots = true;
        self.links = links;
        self
    }
}

/// A vertical line at `x` (or horizontal at `y` on the left axis), labelled.
#[derive(Debug, Clone)]
pub struct Mark {
    pub at: f64,
    pub label: String,
    pub color: &'static str,
}

#[derive(Debug, Clone, Default)]
pub struct Chart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub y2_label: Option<String>,
    pub lines: Vec<Line>,
    pub vertical: Vec<Mark>,
    pub horizontal: Vec<Mark>,
    /// x axis on a log scale of 1/(1−q), for percentile curves: x values are
    /// percentiles in (0, 100).
    pub percentile_x: bool,
    /// Start the y axes at zero (resources, rates) rather than at the data's minimum.
    pub y_from_zero: bool,
    /// The lines are running totals (each one the sum of those before and its own):
    /// the band between a line and the one before it is filled with its colour.
    pub stacked: bool,
}

pub const COLORS: [&str; 6] = [
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf",
];

const W: f64 = 720.0;
const H: f64 = 320.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 70.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 70.0;

/// Round tick steps: 1, 2 or 5 × 10^k, about `n` of them over `[lo, hi]`.
pub fn ticks(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    if hi <= lo || !lo.is_finite() || !hi.is_finite() {
        return vec![lo];
    }
    let raw = (hi - lo) / n.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw / 1.5)
        .unwrap_or(10.0 * mag);
    let first = (lo / step).ceil() as i64;
    let last = (hi / step + 1e-9).floor() as i64;
    // Multiples of the step computed one by one, so 0.6 is 6 × 0.1 and not 0.2 + 0.2 + 0.2.
    let digits = (-step.log10().floor()).max(0.0) as i32;
    let round = |v: f64| {
        let f = 10f64.powi(digits);
        (v * f).round() / f
    };
    (first..=last).map(|k| round(k as f64 * step)).collect()
}

/// Ticks for an axis of counts (its label ends in `(count)`: threads, descriptors):
/// whole numbers only, never a 0.5 thread.
pub fn count_ticks(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    let t = ticks(lo, hi, n);
    if t.windows(2).all(|w| w[1] - w[0] >= 1.0) {
        return t;
    }
    (lo.ceil() as i64..=(hi + 1e-9).floor() as i64)
        .map(|k| k as f64)
        .collect()
}

/// The ticks of an axis labelled `label`.
fn axis_ticks(label: &str, lo: f64, hi: f64, n: usize) -> Vec<f64> {
    if label.ends_with("(count)") {
        count_ticks(lo, hi, n)
    } else {
        ticks(lo, hi, n)
    }
}

/// A tick label: short, no trailing zeros.
pub fn tick_text(v: f64) -> String {
    let a = v.abs();
    if a >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if a >= 100.0 || v == v.trunc() {
        format!("{v:.0}")
    } else if a >= 1.0 {
        format!("{v:.1}")
    } else {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// Ticks with their labels, each label distinct: where the short form would print two
/// ticks alike (1.05 and 1.1 both "1.1"), every label gets the step's decimals, trailing
/// zeros trimmed ("1, 1.05, 1.1, 1.15, 1.2").
pub fn labelled(ticks: Vec<f64>) -> Vec<(f64, String)> {
    let short: Vec<String> = ticks.iter().map(|&t| tick_text(t)).collect();
    if short.windows(2).all(|w| w[0] != w[1]) {
        return ticks.into_iter().zip(short).collect();
    }
    let step = ticks
        .windows(2)
        .map(|w| w[1] - w[0])
        .fold(f64::MAX, f64::min);
    let digits = (-step.log10()).ceil().clamp(0.0, 9.0) as usize;
    ticks
        .into_iter()
        .map(|t| {
            let s = format!("{t:.digits$}");
            let s = if s.contains('.') {
                s.trim_end_matches('0').trim_end_matches('.').to_string()
            } else {
                s
            };
            (t, s)
        })
        .collect()
}

struct Scale {
    lo: f64,
    hi: f64,
    from: f64,
    to: f64,
}

impl Scale {
    fn map(&self, v: f64) -> f64 {
        if self.hi == self.lo {
            return (self.from + self.to) / 2.0;
        }
        self.from + (v - self.lo) / (self.hi - self.lo) * (self.to - self.from)
    }
}

fn range(values: impl Iterator<Item = f64>, from_zero: bool) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in values.filter(|v| v.is_finite()) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    if from_zero {
        lo = lo.min(0.0);
    }
    if hi == lo {
        hi = lo + if lo == 0.0 { 1.0 } else { lo.abs() * 0.1 };
    }
    let pad = (hi - lo) * 0.05;
    (if from_zero && lo >= 0.0 { lo } else { lo - pad }, hi + pad)
}

/// `x` → the plotted x: identity, or −log10(1 − q) for a percentile axis.
fn xt(chart: &Chart, x: f64) -> f64 {
    if chart.percentile_x {
        -(1.0 - (x / 100.0).min(0.999_999)).log10()
    } else {
        x
    }
}

/// Renders the chart as an `<svg class="chart">` element, drawn in order (frame, grid,
/// axes, ticks, series, markers, legend), all from one scale.
pub fn render(chart: &Chart) -> String {
    let mut s = String::new();
    let frame = Frame::of(chart);
    let _ = write!(
        s,
        r#"<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img" aria-label="{}">"#,
        escape(&chart.title)
    );
    let _ = write!(s, "<title>{}</title>", escape(&chart.title));
    let _ = write!(
        s,
        r#"<text class="chart-title" x="{}" y="20" text-anchor="middle">{}</text>"#,
        W / 2.0,
        escape(&chart.title)
    );
    grid(&mut s, chart, &frame);
    axis_labels(&mut s, chart);
    markers(&mut s, chart, &frame);
    bands(&mut s, chart, &frame);
    series(&mut s, chart, &frame);
    legend(&mut s, chart);
    s.push_str("</svg>");
    s
}

/// The chart's scales: x, and y on the left and on the right axis.
struct Frame {
    x: Scale,
    y: Scale,
    y2: Scale,
}

impl Frame {
    fn of(chart: &Chart) -> Frame {
        let xs = chart
            .lines
            .iter()
            .flat_map(|l| l.points.iter().map(|p| xt(chart, p.0)))
            .chain(chart.vertical.iter().map(|m| xt(chart, m.at)));
        let (xlo, xhi) = range(xs, false);
        let left = |a: Axis| {
            chart
                .lines
                .iter()
                .filter(move |l| l.axis == a)
                .flat_map(|l| l.points.iter().map(|p| p.1))
        };
        let (ylo, yhi) = range(
            left(Axis::Left).chain(chart.horizontal.iter().map(|m| m.at)),
            chart.y_from_zero,
        );
        let (y2lo, y2hi) = range(left(Axis::Right), chart.y_from_zero);
        let x = Scale {
            lo: xlo,
            hi: xhi,
            from: LEFT,
            to: W - RIGHT,
        };
        let y = Scale {
            lo: ylo,
            hi: yhi,
            from: H - BOTTOM,
            to: TOP,
        };
        let y2 = Scale {
            lo: y2lo,
            hi: y2hi,
            from: H - BOTTOM,
            to: TOP,
        };
        Frame { x, y, y2 }
    }
}

/// The plot area and its grid, with the ticks of each axis.
fn grid(s: &mut String, chart: &Chart, Frame { x, y, y2 }: &Frame) {
    // Plot area and grid.
    let _ = write!(
        s,
        r##"<rect x="{LEFT}" y="{TOP}" width="{}" height="{}" fill="#fff" stroke="#888"/>"##,
        W - LEFT - RIGHT,
        H - TOP - BOTTOM
    );
    for (t, label) in labelled(axis_ticks(&chart.y_label, y.lo, y.hi, 5)) {
        let py = y.map(t);
        let _ = write!(
            s,
            r##"<line x1="{LEFT}" x2="{}" y1="{py:.1}" y2="{py:.1}" stroke="#e4e4e4"/><text class="tick" x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
            W - RIGHT,
            LEFT - 6.0,
            py + 4.0,
            label
        );
    }
    if chart.y2_label.is_some() {
        let y2_label = chart.y2_label.as_deref().unwrap_or_default();
        for (t, label) in labelled(axis_ticks(y2_label, y2.lo, y2.hi, 5)) {
            let py = y2.map(t);
            let _ = write!(
                s,
                r#"<text class="tick" x="{}" y="{:.1}">{}</text>"#,
                W - RIGHT + 6.0,
                py + 4.0,
                label
            );
        }
    }
    let xticks: Vec<(f64, String)> = if chart.percentile_x {
        [0.0, 90.0, 99.0, 99.9, 99.99, 99.999]
            .iter()
            .map(|p| (xt(chart, *p), format!("{p}%")))
            .filter(|(v, _)| *v >= x.lo && *v <= x.hi)
            .collect()
    } else {
        labelled(ticks(x.lo, x.hi, 8))
    };
    for (t, label) in xticks {
        let px = x.map(t);
        let _ = write!(
            s,
            r##"<line x1="{px:.1}" x2="{px:.1}" y1="{TOP}" y2="{}" stroke="#f0f0f0"/><text class="tick" x="{px:.1}" y="{}" text-anchor="middle">{}</text>"##,
            H - BOTTOM,
            H - BOTTOM + 16.0,
            escape(&label)
        );
    }
}

/// The axes' labels.
fn axis_labels(s: &mut String, chart: &Chart) {
    // Axis labels.
    let _ = write!(
        s,
        r#"<text class="axis-label" x="{}" y="{}" text-anchor="middle">{}</text>"#,
        (LEFT + W - RIGHT) / 2.0,
        H - BOTTOM + 34.0,
        escape(&chart.x_label)
    );
    let _ = write!(
        s,
        r#"<text class="axis-label" transform="translate(16,{}) rotate(-90)" text-anchor="middle">{}</text>"#,
        (TOP + H - BOTTOM) / 2.0,
        escape(&chart.y_label)
    );
    if let Some(l) = &chart.y2_label {
        let _ = write!(
            s,
            r#"<text class="axis-label" transform="translate({},{}) rotate(90)" text-anchor="middle">{}</text>"#,
            W - 14.0,
            (TOP + H - BOTTOM) / 2.0,
            escape(l)
        );
    }
}

/// The vertical and horizontal markers.
fn markers(s: &mut String, chart: &Chart, Frame { x, y, .. }: &Frame) {
    // Markers.
    for m in &chart.vertical {
        let px = x.map(xt(chart, m.at));
        let _ = write!(
            s,
            r#"<line class="marker" x1="{px:.1}" x2="{px:.1}" y1="{TOP}" y2="{}" stroke="{}" stroke-dasharray="4 3"/><text class="marker-label" x="{:.1}" y="{}" fill="{}">{}</text>"#,
            H - BOTTOM,
            m.color,
            px + 3.0,
            TOP + 12.0,
            m.color,
            escape(&m.label)
        );
    }
    for m in &chart.horizontal {
        let py = y.map(m.at);
        let _ = write!(
            s,
            r#"<line class="marker" x1="{LEFT}" x2="{}" y1="{py:.1}" y2="{py:.1}" stroke="{}" stroke-dasharray="6 3"/><text class="marker-label" x="{}" y="{:.1}" fill="{}">{}</text>"#,
            W - RIGHT,
            m.color,
            LEFT + 4.0,
            py - 4.0,
            m.color,
            escape(&m.label)
        );
    }
}

/// The bands of a stacked chart (none otherwise), under the lines: each line's area
/// down to the one before.
fn bands(s: &mut String, chart: &Chart, Frame { x, y, .. }: &Frame) {
    // Bands of a stacked chart, under the lines.
    if chart.stacked {
        let mut below: Vec<(f64, f64)> = Vec::new();
        for l in &chart.lines {
            let floor: Vec<(f64, f64)> = match below.len() {
                0 => l.points.iter().map(|p| (p.0, y.lo.max(0.0))).collect(),
                _ => below.clone(),
            };
            let ring: Vec<String> = (l.points.iter().chain(floor.iter().rev()))
                .filter(|p| p.0.is_finite() && p.1.is_finite())
                .map(|p| format!("{:.1},{:.1}", x.map(xt(chart, p.0)), y.map(p.1)))
                .collect();
            let _ = write!(
                s,
                r#"<polygon class="band" fill="{}" fill-opacity="0.55" stroke="none" points="{}"><title>{}</title></polygon>"#,
                l.color,
                ring.join(" "),
                escape(&l.name)
            );
            below = l.points.clone();
        }
    }
}

/// The lines, with their dots (and their links) when they have some.
fn series(s: &mut String, chart: &Chart, Frame { x, y, y2 }: &Frame) {
    // Lines.
    for l in &chart.lines {
        let sc = if l.axis == Axis::Right { &y2 } else { &y };
        let pts: Vec<String> = l
            .points
            .iter()
            .filter(|p| p.0.is_finite() && p.1.is_finite())
            .map(|p| format!("{:.1},{:.1}", x.map(xt(chart, p.0)), sc.map(p.1)))
            .collect();
        if pts.is_empty() {
            continue;
        }
        let _ = write!(
            s,
            r#"<polyline class="series" fill="none" stroke="{}" stroke-width="1.8"{} points="{}"><title>{}</title></polyline>"#,
            l.color,
            if l.dashed {
                r#" stroke-dasharray="5 4""#
            } else {
                ""
            },
            pts.join(" "),
            escape(&l.name)
        );
        if l.dots {
            for (i, p) in pts.iter().enumerate() {
                let (cx, cy) = p.split_once(',').unwrap_or(("0", "0"));
                match l.links.get(i) {
                    Some((href, title)) => {
                        let _ = write!(
                            s,
                            r#"<a href="{}"><circle class="point" cx="{cx}" cy="{cy}" r="4" fill="{}"><title>{}</title></circle></a>"#,
                            escape(href),
                            l.color,
                            escape(title)
                        );
                    }
                    None => {
                        let _ = write!(
                            s,
                            r#"<circle cx="{cx}" cy="{cy}" r="3" fill="{}"/>"#,
                            l.color
                        );
                    }
                }
            }
        }
    }
}

/// The legend, one entry per line, under the plot.
fn legend(s: &mut String, chart: &Chart) {
    // Legend.
    let mut lx = LEFT;
    for l in &chart.lines {
        let _ = write!(
            s,
            r#"<g class="legend"><line x1="{lx}" x2="{}" y1="{}" y2="{}" stroke="{}" stroke-width="3"{}/><text x="{}" y="{}">{}{}</text></g>"#,
            lx + 18.0,
            H - 12.0,
            H - 12.0,
            l.color,
            if l.dashed {
                r#" stroke-dasharray="5 4""#
            } else {
                ""
            },
            lx + 22.0,
            H - 8.0,
            escape(&l.name),
            if l.axis == Axis::Right && chart.y2_label.is_some() {
                " (right axis)"
            } else {
                ""
            }
        );
        lx += 30.0 + 7.0 * (l.name.chars().count() as f64 + 13.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_cover_the_range() {
        assert_eq!(ticks(0.0, 10.0, 5), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        // Counts: 0 to 2 threads is 0, 1, 2 — not 0, 0.5, 1, 1.5, 2.
        assert_eq!(ticks(0.0, 2.0, 5), vec![0.0, 0.5, 1.0, 1.5, 2.0]);
        assert_eq!(count_ticks(0.0, 2.0, 5), vec![0.0, 1.0, 2.0]);
        assert_eq!(count_ticks(0.0, 40.0, 5), ticks(0.0, 40.0, 5));
        assert_eq!(
            axis_ticks("threads (count)", 0.0, 2.0, 5),
            vec![0.0, 1.0, 2.0]
        );
        assert_eq!(ticks(0.0, 0.9, 4), vec![0.0, 0.2, 0.4, 0.6, 0.8]);
        assert_eq!(tick_text(2500.0), "2500");
        assert_eq!(tick_text(25000.0), "25k");
        assert_eq!(tick_text(0.25), "0.25");
        // The ticks a chart of 1 to 1.2 s had, labelled "1, 1.1, 1.1, 1.1, 1.2".
        let t = ticks(1.0, 1.2, 4);
        let labels: Vec<String> = labelled(t).into_iter().map(|(_, l)| l).collect();
        assert_eq!(labels, ["1", "1.05", "1.1", "1.15", "1.2"]);
        let plain: Vec<String> = labelled(ticks(0.0, 10.0, 5))
            .into_iter()
            .map(|(_, l)| l)
            .collect();
        assert_eq!(plain, ["0", "2", "4", "6", "8", "10"]);
    }

    #[test]
    fn every_text_is_escaped_and_axes_are_labelled() {
        let chart = Chart {
            title: "<script>alert(1)</script>".into(),
            x_label: "time (s)".into(),
            y_label: "RSS (MiB)".into(),
            lines: vec![Line::new("a&b", vec![(0.0, 1.0), (1.0, 2.0)], COLORS[0])],
            ..Chart::default()
        };
        let svg = render(&chart);
        assert!(!svg.contains("<script>"));
        assert!(svg.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(svg.contains("a&amp;b"));
        assert!(
            svg.contains(r#"class="axis-label""#)
                && svg.contains("RSS (MiB)")
                && svg.contains("time (s)")
        );
        assert!(svg.starts_with("<svg class=\"chart\"") && svg.ends_with("</svg>"));
    }
}
