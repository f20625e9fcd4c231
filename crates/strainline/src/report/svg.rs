//! Charts drawn by strainline as inline SVG: lines on one or two y axes, vertical
//! markers (a ceiling, a knee, a warm-up end), horizontal reference lines (an exact
//! peak), a legend, and labelled axes with units on every chart. No scripts, no fonts
//! fetched: a report opens anywhere, offline. Every text is escaped. Texts are measured
//! with a conservative width per character, so that none overlaps another or leaves
//! its chart: markers' labels are placed apart, a legend wraps (the chart grows), a long
//! title takes two lines.

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
    /// The x axis counts (runs): its ticks are whole numbers, never a run 1.5.
    pub counted_x: bool,
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
    if t.windows(2).all(|w| w[1] - w[0] >= 1.0) && t.iter().all(|v| v.fract() == 0.0) {
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
    let entries = legend_layout(chart);
    // The chart grows by the legend's rows after its first.
    let h = entries
        .iter()
        .map(LegendEntry::last_baseline)
        .fold(H - 8.0, f64::max)
        + 8.0;
    let _ = write!(
        s,
        r#"<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {h}" width="{W}" height="{h}" role="img" aria-label="{}">"#,
        escape(&chart.title)
    );
    let _ = write!(s, "<title>{}</title>", escape(&chart.title));
    title(&mut s, &chart.title);
    grid(&mut s, chart, &frame);
    axis_labels(&mut s, chart);
    markers(&mut s, chart, &frame);
    bands(&mut s, chart, &frame);
    series(&mut s, chart, &frame);
    legend(&mut s, &entries);
    s.push_str("</svg>");
    s
}

/// The title's font size (px, bold: style.css's `.chart-title`) and the width it may take.
const TITLE_PX: f64 = 14.0;
const TITLE_WIDTH: f64 = W - 20.0;

/// The width of a title's text: bold is about 15% wider than [`text_width`].
fn title_width(text: &str) -> f64 {
    1.15 * text_width(text, TITLE_PX)
}

/// The lines of a chart's title: one when it fits the chart's width, else two cut at a
/// space, the second ending in "…" when even two do not hold it (the whole title stays
/// the chart's `<title>` and label).
fn title_lines(title: &str) -> Vec<String> {
    if title_width(title) <= TITLE_WIDTH {
        return vec![title.to_string()];
    }
    let words: Vec<&str> = title.split(' ').collect();
    // The longest first line that fits, at a space (or the first word alone).
    let cut = (1..words.len())
        .rev()
        .find(|&n| title_width(&words[..n].join(" ")) <= TITLE_WIDTH)
        .unwrap_or(1);
    [words[..cut].join(" "), words[cut..].join(" ")]
        .into_iter()
        .filter(|l| !l.is_empty())
        .map(|l| fit_title(&l))
        .collect()
}

/// `line` as it is when it fits a title's width, else cut to fit and ended by "…".
fn fit_title(line: &str) -> String {
    if title_width(line) <= TITLE_WIDTH {
        return line.to_string();
    }
    let mut cut = line.to_string();
    while !cut.is_empty() && title_width(&format!("{cut}…")) > TITLE_WIDTH {
        cut.pop();
    }
    format!("{}…", cut.trim_end())
}

/// The title, centred above the plot: one line at y 20, or two at 17 and 33.
fn title(s: &mut String, title: &str) {
    let lines = title_lines(title);
    let ys: &[f64] = if lines.len() == 1 {
        &[20.0]
    } else {
        &[17.0, 33.0]
    };
    for (line, y) in lines.iter().zip(ys) {
        let _ = write!(
            s,
            r#"<text class="chart-title" x="{}" y="{y}" text-anchor="middle">{}</text>"#,
            W / 2.0,
            escape(line)
        );
    }
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
    } else if chart.counted_x {
        labelled(count_ticks(x.lo, x.hi, 8))
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

/// The font sizes (px) of the texts drawn inside a chart (style.css: `svg.chart`).
const LABEL_PX: f64 = 12.0;
/// The height of a line of 12 px text, and how far its box reaches above and below the
/// baseline (DejaVu Sans: ascent 0.93 em, descent 0.24 em).
const LINE: f64 = 14.0;
const ASCENT: f64 = 11.5;
const DESCENT: f64 = 3.0;

/// A conservative width, in px, of `text` drawn at `font_px`: each character counted at
/// about the widest advance of its class in DejaVu Sans (Debian's default sans-serif, a
/// wide one), so that a label measured to fit does fit in the fonts a browser picks.
pub fn text_width(text: &str, font_px: f64) -> f64 {
    let em: f64 = text
        .chars()
        .map(|c| match c {
            'i' | 'j' | 'l' | 'I' | 'J' | '\'' | '|' | '.' | ',' | ':' | ';' | '!' | ' ' => 0.34,
            'f' | 't' | 'r' | '(' | ')' | '[' | ']' | '{' | '}' | '/' | '\\' | '-' | '"' => 0.42,
            'm' | 'w' | 'M' | 'W' | '%' | '@' | '—' | '…' => 1.0,
            '+' | '=' | '<' | '>' | '~' | '→' | '←' | '−' | '±' | '×' | '÷' | '≤' | '≥' => {
                0.84
            }
            c if c.is_uppercase() => 0.8,
            c if c.is_ascii() => 0.65,
            // Other scripts, symbols, emoji: as wide as a W.
            c if (c as u32) >= 0x2e80 => 1.0,
            _ => 0.7,
        })
        .sum();
    em * font_px
}

/// A text's box in the chart's coordinates: left, top, right, bottom.
#[derive(Debug, Clone, Copy, PartialEq)]
struct TextBox {
    x0: f64,
    y0: f64,
    x1: f64,
    y1: f64,
}

impl TextBox {
    /// The box of `text` drawn at (`x`, baseline `y`) anchored `start` or `end`.
    fn of(text: &str, x: f64, y: f64, end: bool) -> TextBox {
        let w = text_width(text, LABEL_PX);
        let x0 = if end { x - w } else { x };
        TextBox {
            x0,
            y0: y - ASCENT,
            x1: x0 + w,
            y1: y + DESCENT,
        }
    }
    /// Whether the two boxes come closer than 2 px.
    fn hits(&self, o: &TextBox) -> bool {
        const GAP: f64 = 2.0;
        self.x0 < o.x1 + GAP && o.x0 < self.x1 + GAP && self.y0 < o.y1 + GAP && o.y0 < self.y1 + GAP
    }
    /// Whether the box lies inside the plot area.
    fn in_plot(&self) -> bool {
        self.x0 >= LEFT && self.x1 <= W - RIGHT && self.y0 >= TOP && self.y1 <= H - BOTTOM
    }
}

/// Where a marker's label goes: its baseline's start (or end, when `end`).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Placed {
    x: f64,
    y: f64,
    end: bool,
}

/// Places the labels of the vertical markers (at plotted x `xs`), then of the
/// horizontal ones (at plotted y `ys`), so that no two collide. A vertical marker's
/// label sits at the top of the plot beside its line (right of it, or left when it
/// would leave the plot), on the first row down where it meets no label already
/// placed: markers close together stack. A horizontal marker's label sits above its
/// line at the plot's left, else below it, else at the plot's right above then below,
/// the first of these inside the plot that meets no label; else lower rows above the
/// line at the left.
fn place_marker_labels(vertical: &[(f64, &str)], horizontal: &[(f64, &str)]) -> Vec<Placed> {
    let mut boxes: Vec<TextBox> = Vec::new();
    let mut out = Vec::new();
    let free = |b: &TextBox, boxes: &[TextBox]| !boxes.iter().any(|o| o.hits(b));
    for &(px, label) in vertical {
        let end = px + 3.0 + text_width(label, LABEL_PX) > W - RIGHT
            && px - 3.0 - text_width(label, LABEL_PX) >= LEFT;
        let x = if end { px - 3.0 } else { px + 3.0 };
        let mut y = TOP + 12.0;
        while !free(&TextBox::of(label, x, y, end), &boxes) && y < H - BOTTOM - LINE {
            y += LINE;
        }
        boxes.push(TextBox::of(label, x, y, end));
        out.push(Placed { x, y, end });
    }
    for &(py, label) in horizontal {
        let (left, right) = (LEFT + 4.0, W - RIGHT - 4.0);
        let (above, below) = (py - 4.0, py + 4.0 + ASCENT);
        let tries = [
            (left, above, false),
            (left, below, false),
            (right, above, true),
            (right, below, true),
        ];
        let at = tries
            .iter()
            .map(|&(x, y, end)| Placed { x, y, end })
            .find(|p| {
                let b = TextBox::of(label, p.x, p.y, p.end);
                b.in_plot() && free(&b, &boxes)
            })
            .unwrap_or_else(|| {
                // Rows down from the top of the plot, at the left: the first free one.
                let mut y = TOP + 12.0;
                while !free(&TextBox::of(label, left, y, false), &boxes) && y < H - BOTTOM - LINE {
                    y += LINE;
                }
                Placed {
                    x: left,
                    y,
                    end: false,
                }
            });
        boxes.push(TextBox::of(label, at.x, at.y, at.end));
        out.push(at);
    }
    out
}

/// The vertical and horizontal markers, their labels placed apart
/// ([`place_marker_labels`]).
fn markers(s: &mut String, chart: &Chart, Frame { x, y, .. }: &Frame) {
    let vertical: Vec<(f64, &str)> = chart
        .vertical
        .iter()
        .map(|m| (x.map(xt(chart, m.at)), m.label.as_str()))
        .collect();
    let horizontal: Vec<(f64, &str)> = chart
        .horizontal
        .iter()
        .map(|m| (y.map(m.at), m.label.as_str()))
        .collect();
    let placed = place_marker_labels(&vertical, &horizontal);
    let anchor = |p: &Placed| if p.end { r#" text-anchor="end""# } else { "" };
    for ((m, (px, _)), p) in chart.vertical.iter().zip(&vertical).zip(&placed) {
        let _ = write!(
            s,
            r#"<line class="marker" x1="{px:.1}" x2="{px:.1}" y1="{TOP}" y2="{}" stroke="{}" stroke-dasharray="4 3"/><text class="marker-label" x="{:.1}" y="{:.1}"{} fill="{}">{}</text>"#,
            H - BOTTOM,
            m.color,
            p.x,
            p.y,
            anchor(p),
            m.color,
            escape(&m.label)
        );
    }
    let placed = &placed[vertical.len()..];
    for ((m, (py, _)), p) in chart.horizontal.iter().zip(&horizontal).zip(placed) {
        let _ = write!(
            s,
            r#"<line class="marker" x1="{LEFT}" x2="{}" y1="{py:.1}" y2="{py:.1}" stroke="{}" stroke-dasharray="6 3"/><text class="marker-label" x="{:.1}" y="{:.1}"{} fill="{}">{}</text>"#,
            W - RIGHT,
            m.color,
            p.x,
            p.y,
            anchor(p),
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

/// A legend entry: its line's colour and dash, its swatch's left, the baseline of its
/// text's first line, and the text's lines.
#[derive(Debug, Clone, PartialEq)]
struct LegendEntry {
    color: &'static str,
    dashed: bool,
    x: f64,
    y: f64,
    lines: Vec<String>,
}

impl LegendEntry {
    /// The baseline of the entry's last line of text.
    fn last_baseline(&self) -> f64 {
        self.y + (self.lines.len().max(1) - 1) as f64 * (LINE + 2.0)
    }
}

/// The legend's entries under the plot, left to right from the plot's left edge: an
/// entry that would pass the chart's right edge starts a new row; a text longer than a
/// whole row is wrapped at its spaces onto lines of its own. The first row's baseline
/// is at `H - 8`; each row is `LINE` + 2 px below the one before (the chart grows).
fn legend_layout(chart: &Chart) -> Vec<LegendEntry> {
    const SWATCH: f64 = 22.0;
    const SPACING: f64 = 16.0;
    let right_edge = W - 8.0;
    let row = LINE + 2.0;
    let (mut x, mut y) = (LEFT, H - 8.0);
    let mut out = Vec::new();
    for l in &chart.lines {
        let text = format!(
            "{}{}",
            l.name,
            if l.axis == Axis::Right && chart.y2_label.is_some() {
                " (right axis)"
            } else {
                ""
            }
        );
        let lines = wrap(&text, right_edge - LEFT - SWATCH);
        let w = SWATCH
            + lines
                .iter()
                .map(|t| text_width(t, LABEL_PX))
                .fold(0.0, f64::max);
        if x > LEFT && x + w > right_edge {
            // The next row, below the tallest entry of this one.
            x = LEFT;
            y = out.iter().map(LegendEntry::last_baseline).fold(y, f64::max) + row;
        }
        out.push(LegendEntry {
            color: l.color,
            dashed: l.dashed,
            x,
            y,
            lines,
        });
        x += w + SPACING;
    }
    out
}

/// `text` cut at its spaces into lines no wider than `width` px (a word longer than
/// that stays whole on a line of its own).
fn wrap(text: &str, width: f64) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in text.split(' ') {
        let candidate = if line.is_empty() {
            word.to_string()
        } else {
            format!("{line} {word}")
        };
        if !line.is_empty() && text_width(&candidate, LABEL_PX) > width {
            lines.push(std::mem::replace(&mut line, word.to_string()));
        } else {
            line = candidate;
        }
    }
    lines.push(line);
    lines
}

/// The legend, one entry per line, under the plot ([`legend_layout`]).
fn legend(s: &mut String, entries: &[LegendEntry]) {
    for e in entries {
        let _ = write!(
            s,
            r#"<g class="legend"><line x1="{}" x2="{}" y1="{}" y2="{}" stroke="{}" stroke-width="3"{}/><text x="{}" y="{}">"#,
            e.x,
            e.x + 18.0,
            e.y - 4.0,
            e.y - 4.0,
            e.color,
            if e.dashed {
                r#" stroke-dasharray="5 4""#
            } else {
                ""
            },
            e.x + 22.0,
            e.y,
        );
        match e.lines.as_slice() {
            [one] => s.push_str(&escape(one)),
            lines => {
                for (i, t) in lines.iter().enumerate() {
                    let _ = write!(
                        s,
                        r#"<tspan x="{}" dy="{}">{}</tspan>"#,
                        e.x + 22.0,
                        if i == 0 { 0.0 } else { LINE + 2.0 },
                        escape(t)
                    );
                }
            }
        }
        s.push_str("</text></g>");
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
        assert_eq!(count_ticks(1.0, 3.0, 8), vec![1.0, 2.0, 3.0]);
        assert_eq!(count_ticks(4.5, 4.5, 8), Vec::<f64>::new());
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

    /// The boxes of placed labels, for the tests.
    fn boxes(labels: &[&str], placed: &[Placed]) -> Vec<TextBox> {
        labels
            .iter()
            .zip(placed)
            .map(|(l, p)| TextBox::of(l, p.x, p.y, p.end))
            .collect()
    }

    fn apart(boxes: &[TextBox]) -> bool {
        boxes
            .iter()
            .enumerate()
            .all(|(i, a)| boxes[i + 1..].iter().all(|b| !a.hits(b)))
    }

    #[test]
    fn text_is_measured_wide_enough() {
        // DejaVu Sans draws "ceiling 400 req/s" 12 px high about 100 px wide, "W" 11.9 px.
        assert!(text_width("ceiling 400 req/s", 12.0) >= 100.0);
        assert!(text_width("W", 12.0) >= 11.9);
        assert!(text_width("MMMM", 12.0) > text_width("iiii", 12.0) * 2.0);
        assert_eq!(text_width("", 12.0), 0.0);
        // Twice the size, twice the width.
        assert_eq!(text_width("p99", 24.0), 2.0 * text_width("p99", 12.0));
    }

    #[test]
    fn marker_labels_at_the_same_place_stack_instead_of_overlapping() {
        // A ramp whose knee is its ceiling: both at 400 req/s.
        let labels = ["ceiling 400 req/s", "knee 400 req/s"];
        let placed = place_marker_labels(&[(360.0, labels[0]), (360.0, labels[1])], &[]);
        assert_eq!(placed[0].x, placed[1].x);
        assert!(placed[1].y > placed[0].y, "{placed:?}");
        assert!(apart(&boxes(&labels, &placed)));
        // A marker far apart keeps the first row.
        let placed = place_marker_labels(&[(100.0, labels[0]), (500.0, labels[1])], &[]);
        assert_eq!(placed[0].y, placed[1].y);
    }

    #[test]
    fn a_marker_label_near_the_right_edge_is_drawn_left_of_its_line() {
        let label = "warm-up end";
        let placed = place_marker_labels(&[(W - RIGHT - 5.0, label)], &[]);
        assert!(placed[0].end && placed[0].x < W - RIGHT - 5.0);
        assert!(TextBox::of(label, placed[0].x, placed[0].y, true).in_plot());
    }

    #[test]
    fn horizontal_marker_labels_avoid_each_other_and_the_vertical_ones() {
        // A tolerance band 10 px high: one label above, the other below or aside.
        let labels = ["tolerance +20%", "tolerance −20%"];
        let placed = place_marker_labels(&[], &[(150.0, labels[0]), (160.0, labels[1])]);
        assert!(apart(&boxes(&labels, &placed)), "{placed:?}");
        // A peak near the top under the phases' labels ("soak", "load").
        let labels = ["soak", "load", "exact peak 6.7 MiB (ru_maxrss)"];
        let placed = place_marker_labels(
            &[(LEFT + 10.0, labels[0]), (LEFT + 60.0, labels[1])],
            &[(TOP + 10.0, labels[2])],
        );
        let b = boxes(&labels, &placed);
        assert!(apart(&b), "{placed:?}");
        assert!(b[2].in_plot());
    }

    #[test]
    fn a_legend_that_does_not_fit_wraps_and_the_chart_grows() {
        let line = |name: &str| Line::new(name, vec![(0.0, 1.0), (1.0, 2.0)], COLORS[0]);
        let long = "Theil–Sen fit: no significant growth (Mann–Kendall p = 1.000) (budget 10.0 MiB over 24h00m)";
        let chart = Chart {
            title: "Leak check".into(),
            x_label: "time (s)".into(),
            y_label: "RSS (MiB)".into(),
            lines: vec![line("RSS"), line(long)],
            ..Chart::default()
        };
        let entries = legend_layout(&chart);
        // The long entry starts a row of its own; every line fits in the chart.
        assert_eq!(entries[1].x, LEFT);
        assert!(entries[1].y > entries[0].y);
        for e in &entries {
            for t in &e.lines {
                assert!(e.x + 22.0 + text_width(t, LABEL_PX) <= W - 8.0, "{t}");
            }
        }
        assert_eq!(entries[1].lines.join(" "), long);
        let svg = render(&chart);
        let grown = entries[1].last_baseline() + 8.0;
        assert!(grown > H);
        assert!(
            svg.contains(&format!(r#"viewBox="0 0 {W} {grown}""#)),
            "{svg}"
        );
        // An entry longer than a row is cut into lines at its spaces.
        let words = vec!["word"; 60].join(" ");
        let wrapped = wrap(&words, 300.0);
        assert!(wrapped.len() > 1);
        assert!(wrapped.iter().all(|l| text_width(l, LABEL_PX) <= 300.0));
        assert_eq!(wrapped.join(" "), words);
        // A legend that fits keeps the chart's height.
        let short = Chart {
            lines: vec![line("a"), line("b")],
            ..Chart::default()
        };
        assert!(render(&short).contains(&format!(r#"height="{H}""#)));
    }

    #[test]
    fn a_title_too_long_for_the_chart_takes_two_lines_and_at_most_two() {
        assert_eq!(title_lines("Responses a second"), ["Responses a second"]);
        let long = "latency_p99 — push<script>alert(4)</script>[crash=1000000, cost=250, leak=4096, connections=8]";
        let lines = title_lines(long);
        assert_eq!(lines.len(), 2);
        assert_eq!(lines.join(" "), long);
        assert!(lines.iter().all(|l| title_width(l) <= TITLE_WIDTH));
        let endless = vec!["word"; 200].join(" ");
        let lines = title_lines(&endless);
        assert_eq!(lines.len(), 2);
        assert!(lines[1].ends_with('…'));
        assert!(lines.iter().all(|l| title_width(l) <= TITLE_WIDTH));
        // One word longer than the chart: a line of its own, cut.
        let word = "x".repeat(200);
        let lines = title_lines(&format!("a {word}"));
        assert_eq!(lines[0], "a");
        assert!(title_width(&lines[1]) <= TITLE_WIDTH && lines[1].ends_with('…'));
        let lines = title_lines(&word);
        assert!(lines.len() == 1 && title_width(&lines[0]) <= TITLE_WIDTH);
        // The whole title stays the chart's label.
        let svg = render(&Chart {
            title: endless.clone(),
            ..Chart::default()
        });
        assert!(svg.contains(&format!("<title>{endless}</title>")));
        assert_eq!(svg.matches("class=\"chart-title\"").count(), 2);
    }
}
