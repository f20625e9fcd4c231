//! The HTML report of a comparison: its alarms and verdict, the bars of candidate as %
//! of baseline with each band shaded, and a row per case and metric.

use maud::{html, Markup, PreEscaped};

use super::{beside, page};
use crate::analysis::comparison::Row;
use crate::analysis::comparison::Verdict;
use crate::report::compare::{ci, header_lines, is_alarm, pct, seen, summary_line, Comparison};
use crate::report::svg::text_width;
use crate::units::format_value;

/// A coordinate to a tenth, as the charts write them.
fn tenth(v: f64) -> String {
    format!("{v:.1}")
}

/// Bars of candidate as % of baseline, with the tolerance band shaded.
fn comparison_bars(c: &Comparison) -> Markup {
    let rows: Vec<&Row> = (c.rows.iter())
        .filter(|r| r.ratio.is_some_and(f64::is_finite) && r.band.is_some())
        .collect();
    let (w, row_h, left) = (CHART_W, 22.0, 260.0);
    let h = 60.0 + row_h * rows.len() as f64;
    let max = (rows.iter().filter_map(|r| r.ratio))
        .fold(2.0f64, f64::max)
        .min(5.0);
    let x = |ratio: f64| left + (ratio.min(max) / max) * (w - left - 20.0);
    html! {
        svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox={ "0 0 " (w) " " (h) }
            width=(w) height=(h) role="img" aria-label="candidate as % of baseline" {
            title { "candidate as % of baseline" }
            text class="chart-title" x=(w / 2.0) y="18" text-anchor="middle" {
                "Candidate as % of baseline (band shaded)"
            }
            @for (i, r) in rows.iter().enumerate() {
                (bar(r, 30.0 + row_h * i as f64, row_h, left, &x))
            }
            line x1=(tenth(x(1.0))) x2=(tenth(x(1.0))) y1="26" y2=(tenth(h - 24.0)) stroke="#333" {}
            text class="axis-label" x=(tenth((left + w) / 2.0)) y=(tenth(h - 6.0))
                text-anchor="middle" { "candidate as % of baseline (100% = unchanged)" }
        }
    }
}

/// One row's bar at `y`: its label, the band shaded, the ratio in its verdict's colour.
fn bar(r: &Row, y: f64, row_h: f64, left: f64, x: &dyn Fn(f64) -> f64) -> Markup {
    let ratio = r.ratio.unwrap_or(1.0);
    let band = r.band.unwrap_or(0.0);
    let (lo, hi) = (1.0 - band, 1.0 + band);
    let color = match r.verdict {
        Verdict::Regressed => "#d62728",
        Verdict::Improved => "#2ca02c",
        Verdict::Inconclusive => "#ff7f0e",
        _ => "#1f77b4",
    };
    let percent = crate::units::percent_of(ratio);
    let name = format!("{} {}", r.case, r.metric);
    let label = shortened(&name, left - 10.0);
    // The value after the bar's end, or inside it (white, against its end) where it
    // would pass the chart's right edge.
    let end = x(ratio);
    let inside = end + 4.0 + text_width(&percent, TICK_PX) > CHART_W;
    html! {
        g {
            @if label != name { title { (name) } }
            text class="tick" x=(left - 6.0) y=(tenth(y + 14.0)) text-anchor="end" { (label) }
        }
        rect x=(tenth(x(lo))) y=(tenth(y)) width=(tenth(x(hi) - x(lo))) height=(row_h - 4.0)
            fill="#eee" {}
        rect x=(left) y=(tenth(y + 4.0)) width=(tenth((x(ratio) - left).max(1.0)))
            height=(row_h - 12.0) fill=(color) { title { (percent) } }
        @if inside {
            text class="tick" x=(tenth(end - 4.0)) y=(tenth(y + 14.0)) text-anchor="end"
                style="fill:#fff" { (percent) }
        } @else {
            text class="tick" x=(tenth(end + 4.0)) y=(tenth(y + 14.0)) { (percent) }
        }
    }
}

/// The HTML report of a comparison.
///
/// Under its table, the two versions over time case by case (`overlays`: `(case,
/// drawing)` from [`crate::report::timeline::overlays`]; none drawn when empty).
pub fn comparison_over_time(c: &Comparison, overlays: &[(String, String)]) -> String {
    let title = format!(
        "strainline compare {} → {}",
        c.baseline.key, c.candidate.key
    );
    let regressed = c.count(Verdict::Regressed);
    let line = summary_line(c);
    let (head, rest) = line.split_once(": ").unwrap_or((&line, ""));
    let flame_diff = c.flame_diff.as_deref().and_then(beside);
    let body = html! {
        h1 { (title) }
        @for (what, m) in [
            ("ENVIRONMENT MISMATCH", &c.environment_mismatch),
            ("SHAPE MISMATCH", &c.shape_mismatch),
            ("CONDITIONS DIFFERED", &c.conditions),
        ] {
            @if let Some(m) = m {
                p class="verdict invalid" { strong { (what) } ": " (m) }
            }
        }
        p class={ "verdict " (if regressed > 0 { "regressed" } else { "ok" }) } {
            strong { (head) } ": " (rest)
        }
        @for line in header_lines(c).iter().filter(|l| !is_alarm(l)) {
            p class="note" { (line) }
        }
        @for n in &c.notes {
            p class="note" { "note: " (n) }
        }
        (comparison_bars(c))
        @if let Some(f) = flame_diff {
            p {
                "Differential CPU flame graph (candidate against baseline; red: more CPU, blue: less): "
                a href=(f) { (f) }
            }
        }
        table {
            tr {
                @for h in ["case", "metric", "baseline", "candidate", "% of previous", "95% CI", "p (adj)", "seen", "verdict"] {
                    th { (h) }
                }
            }
            @for r in &c.rows { (row(r)) }
        }
        @if !overlays.is_empty() {
            h2 { "Over time: baseline (grey, dashed) and candidate" }
            p class="note" {
                "Each version's newest run, each from its own load's start. Hover for a second's figures; drag to zoom on time, double-click for the whole run."
            }
            @for (case, drawing) in overlays {
                h3 { (case) }
                (PreEscaped(drawing))
            }
        }
    };
    page(&title, body)
}

/// A metric's row: both medians, the ratio and its interval, p, what was seen, the
/// verdict and why; a regressed or undecided row is marked.
fn row(r: &Row) -> Markup {
    let class = match r.verdict {
        Verdict::Regressed => "regressed",
        Verdict::Inconclusive => "inconclusive",
        _ if r.blind() => "inconclusive",
        _ => "",
    };
    let ratio = pct(r);
    let ci = ci(r);
    let p = (r.p_adjusted).map_or("-".into(), crate::analysis::comparison::p_text);
    html! {
        tr class=(class) {
            td { (r.case) }
            td { (r.metric) }
            td { (format_value(r.baseline.median, &r.unit)) }
            td { (format_value(r.candidate.median, &r.unit)) }
            td { (ratio) }
            td { (ci) }
            td { (p) }
            td { (seen(r)) }
            td { (r.verdict.word()) " — " (r.why) }
        }
    }
}

/// The chart's width in its own units.
const CHART_W: f64 = 720.0;

/// The font size of a tick, in px (`.tick` in style.css).
const TICK_PX: f64 = 11.0;

/// `s`, or as much of it as fits in `px` at a tick's size with an ellipsis at its end.
fn shortened(s: &str, px: f64) -> String {
    if text_width(s, TICK_PX) <= px {
        return s.to_string();
    }
    let mut out: String = s.chars().collect();
    while !out.is_empty() && text_width(&format!("{out}…"), TICK_PX) > px {
        out.pop();
    }
    format!("{}…", out.trim_end())
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_long_name_is_cut_to_fit_with_an_ellipsis() {
        let long = "push every notification through the front door of the device registry p99";
        let cut = super::shortened(long, 250.0);
        assert!(cut.ends_with('…') && cut.len() < long.len(), "{cut}");
        assert!(super::text_width(&cut, super::TICK_PX) <= 250.0);
        assert_eq!(super::shortened("peak p99", 250.0), "peak p99");
    }
}
