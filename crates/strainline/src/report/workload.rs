//! The HTML report of a workload's characterization: the arrival rate over time with
//! its mean and p99, the index of dispersion by window size beside a Poisson process's
//! 1, the request mix as bars, and one line per `--by` window.

use std::fmt::Write;

use super::html::page;
use super::svg::{escape, render, Chart, Line, Mark, COLORS};
use crate::workload::profile::Profile;
use crate::workload::Characterization;

pub fn characterization_report(c: &Characterization) -> String {
    let title = format!("strainline workload: {}", c.files.join(", "));
    let mut s = format!("<h1>{}</h1>", escape(&title));
    let _ = write!(
        s,
        "<p>{} lines, {} requests ({}), {} malformed.</p>",
        c.lines,
        c.requests,
        escape(&c.formats.join(", ")),
        c.malformed
    );
    for m in &c.malformed_examples {
        let _ = write!(
            s,
            "<p class=\"note\">{}:{}: {} — <code>{}</code></p>",
            escape(&m.file),
            m.line,
            escape(&m.reason),
            escape(&m.text)
        );
    }
    profile(&mut s, &c.all);
    if !c.windows.is_empty() {
        s.push_str("<h2>Windows</h2><table><tr><th>window</th><th>requests</th><th>mean req/s</th><th>p99 req/s</th><th>index of dispersion (1 s)</th><th>busiest route</th></tr>");
        for w in &c.windows {
            let d1 = w
                .rate
                .dispersion
                .first()
                .map_or("-".into(), |d| format!("{:.2}", d.index));
            let top = w.mix.first().map_or("-".into(), |r| {
                format!("{} {} ({:.1}%)", r.method, r.route, r.share)
            });
            let _ = write!(
                s,
                "<tr><td>{}</td><td>{}</td><td>{:.1}</td><td>{:.0}</td><td>{}</td><td>{}</td></tr>",
                escape(&w.window),
                w.requests,
                w.rate.mean,
                w.rate.per_second.p99,
                d1,
                escape(&top)
            );
        }
        s.push_str("</table>");
    }
    page(&title, &s)
}

fn profile(s: &mut String, p: &Profile) {
    let r = &p.rate;
    let _ = write!(
        s,
        "<h2>Arrival rate</h2><p>Mean {:.1} req/s; per second p50 {:.0}, p99 {:.0}, max {:.0}. Arrivals {}.</p>",
        r.mean,
        r.per_second.p50,
        r.per_second.p99,
        r.per_second.max,
        if r.poisson {
            "look Poisson (random, independent)"
        } else {
            "are not Poisson"
        }
    );
    let step = r.series_step_seconds.max(1) as f64;
    let points: Vec<(f64, f64)> = r
        .series
        .iter()
        .enumerate()
        .map(|(i, &n)| (i as f64 * step, f64::from(n) / step))
        .collect();
    s.push_str(&render(&Chart {
        title: "Requests per second over the span".into(),
        x_label: "seconds from the first arrival".into(),
        y_label: "req/s".into(),
        lines: vec![Line::new(
            if step > 1.0 {
                "req/s (mean of each step)"
            } else {
                "req/s"
            },
            points,
            COLORS[0],
        )],
        horizontal: vec![
            Mark {
                at: r.mean,
                label: format!("mean {:.1}", r.mean),
                color: COLORS[2],
            },
            Mark {
                at: r.per_second.p99,
                label: format!("p99 {:.0}", r.per_second.p99),
                color: COLORS[1],
            },
        ],
        y_from_zero: true,
        ..Chart::default()
    }));
    let indexes: Vec<String> = r
        .dispersion
        .iter()
        .map(|d| format!("{} s: {:.2}", d.window_seconds, d.index))
        .collect();
    if !indexes.is_empty() {
        let _ = write!(
            s,
            "<p>Index of dispersion (variance over mean of the arrivals per window; 1 is Poisson, 0 a constant rate) — {}.</p>",
            indexes.join(", ")
        );
    }
    // A curve needs two window sizes (a span of 50 s or more).
    if r.dispersion.len() >= 2 {
        let points: Vec<(f64, f64)> = r
            .dispersion
            .iter()
            .map(|d| (d.window_seconds as f64, d.index))
            .collect();
        s.push_str(&render(&Chart {
            title: "Index of dispersion by window size (1 = Poisson)".into(),
            x_label: "window, seconds".into(),
            y_label: "variance / mean of arrivals".into(),
            lines: vec![Line::new("index of dispersion", points, COLORS[3]).dots()],
            horizontal: vec![Mark {
                at: 1.0,
                label: "Poisson".into(),
                color: COLORS[2],
            }],
            y_from_zero: true,
            ..Chart::default()
        }));
    }
    s.push_str("<h2>Request mix</h2>");
    s.push_str(&mix_bars(p));
    s.push_str("<table><tr><th>method</th><th>route</th><th>requests</th><th>share</th><th>size p50</th><th>size p99</th><th>time p50</th><th>time p99</th><th>examples</th></tr>");
    for rs in &p.mix {
        let t = |f: fn(&crate::workload::profile::Spread) -> f64| {
            rs.time_ms
                .as_ref()
                .map_or("-".into(), |x| crate::units::format_value(f(x), "ms"))
        };
        let _ = write!(
            s,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{:.1}%</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&rs.method),
            escape(&rs.route),
            rs.requests,
            rs.share,
            escape(&crate::units::format_value(rs.bytes.p50, "bytes")),
            escape(&crate::units::format_value(rs.bytes.p99, "bytes")),
            escape(&t(|x| x.p50)),
            escape(&t(|x| x.p99)),
            escape(&rs.examples.join(" "))
        );
    }
    s.push_str("</table>");
    let status: Vec<String> = p
        .status
        .iter()
        .map(|(code, n, share)| format!("{code}: {n} ({share:.1}%)"))
        .collect();
    let _ = write!(s, "<p>Status: {}</p>", escape(&status.join(", ")));
}

/// The 15 busiest routes as horizontal bars of their share.
fn mix_bars(p: &Profile) -> String {
    let rows: Vec<_> = p.mix.iter().take(15).collect();
    let (w, row_h, left) = (720.0, 22.0, 300.0);
    let h = 40.0 + row_h * rows.len() as f64;
    let max = rows.iter().map(|r| r.share).fold(1.0f64, f64::max);
    let mut s = format!(
        r#"<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} {h}" width="{w}" height="{h}" role="img" aria-label="request mix"><title>request mix</title><text class="chart-title" x="{}" y="18" text-anchor="middle">Share of requests by route</text>"#,
        w / 2.0
    );
    for (i, r) in rows.iter().enumerate() {
        let y = 30.0 + row_h * i as f64;
        let bar = (r.share / max) * (w - left - 70.0);
        let _ = write!(
            s,
            r#"<text class="tick" x="{}" y="{}" text-anchor="end">{}</text><rect x="{left}" y="{}" width="{bar:.1}" height="{}" fill="{}"/><text class="tick" x="{:.1}" y="{}">{:.1}%</text>"#,
            left - 6.0,
            y + 14.0,
            escape(&format!("{} {}", r.method, r.route)),
            y + 3.0,
            row_h - 6.0,
            COLORS[0],
            left + bar + 4.0,
            y + 14.0,
            r.share
        );
    }
    s.push_str("</svg>");
    s
}
