//! The HTML report of a comparison: its alarms and verdict, the bars of candidate as %
//! of baseline with each band shaded, and a row per case and metric.

use std::fmt::Write;

use super::{beside, page};
use crate::analysis::comparison::Verdict;
use crate::report::compare::Comparison;
use crate::report::svg::escape;
use crate::units::format_value;

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
    let line = crate::report::compare::summary_line(c);
    let (head, rest) = line.split_once(": ").unwrap_or((&line, ""));
    let _ = write!(
        s,
        "<p class=\"verdict {}\"><strong>{}</strong>: {}</p>",
        if regressed > 0 { "regressed" } else { "ok" },
        escape(head),
        escape(rest)
    );
    for line in crate::report::compare::header_lines(c)
        .iter()
        .filter(|l| !crate::report::compare::is_alarm(l))
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
            escape(&crate::report::compare::seen(r)),
            escape(&format!("{} — {}", r.verdict.word(), r.why))
        );
    }
    s.push_str("</table>");
    page(&title, &s)
}
