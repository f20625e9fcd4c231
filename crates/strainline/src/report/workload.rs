//! The HTML report of a workload's characterization: the arrival rate over time with
//! its mean and p99, the index of dispersion by window size beside a Poisson process's
//! 1, the request mix as bars, and one line per `--by` window.

use maud::{html, Markup, PreEscaped};

use super::html::page;
use super::svg::{render, Chart, Line, Mark, COLORS};
use crate::units::rate;
use crate::workload::profile::{Profile, RouteStats};
use crate::workload::Characterization;

/// The HTML report of a characterization: its counts and malformed lines, the whole
/// workload's profile, then a row per window.
pub fn characterization_report(c: &Characterization) -> String {
    let title = format!("strainline workload: {}", c.files.join(", "));
    let body = html! {
        h1 { (title) }
        p {
            (c.lines) " lines, " (c.requests) " requests (" (c.formats.join(", ")) "), "
            (c.malformed) " malformed."
        }
        @for m in &c.malformed_examples {
            p class="note" { (m.file) ":" (m.line) ": " (m.reason) " — " code { (m.text) } }
        }
        (profile(&c.all))
        @if !c.windows.is_empty() {
            h2 { "Windows" }
            table {
                tr {
                    th { "window" } th { "requests" } th { "mean rate" } th { "p99 of each second" }
                    th { "index of dispersion (1 s)" } th { "busiest route" }
                }
                @for w in &c.windows { (window(w)) }
            }
        }
    };
    page(&title, body)
}

/// A window's row: its requests, mean and p99 rate, dispersion over 1 s, busiest route.
fn window(w: &Profile) -> Markup {
    let d1 = (w.rate.dispersion.first()).map_or("-".into(), |d| format!("{:.2}", d.index));
    let top = w.mix.first().map_or("-".into(), |r| {
        format!("{} {} ({:.1}%)", r.method, r.route, r.share)
    });
    html! {
        tr {
            td { (w.window) }
            td { (w.requests) }
            td { (rate(w.rate.mean)) }
            td { (rate(w.rate.per_second.p99)) }
            td { (d1) }
            td { (top) }
        }
    }
}

/// A profile: the arrival rate and its chart, the dispersion and its curve, the request
/// mix as bars and as a table, the status codes.
fn profile(p: &Profile) -> Markup {
    let r = &p.rate;
    let arrivals = if r.poisson {
        "look Poisson (random, independent)"
    } else {
        "are not Poisson"
    };
    let indexes: Vec<String> = (r.dispersion.iter())
        .map(|d| format!("{} s: {:.2}", d.window_seconds, d.index))
        .collect();
    let status: Vec<String> = (p.status.iter())
        .map(|(code, n, share)| format!("{code}: {n} ({share:.1}%)"))
        .collect();
    html! {
        h2 { "Arrival rate" }
        p {
            (format!(
                "Mean {}; per second p50 {}, p99 {}, max {}. Arrivals {arrivals}.",
                rate(r.mean), rate(r.per_second.p50), rate(r.per_second.p99), rate(r.per_second.max)
            ))
        }
        (PreEscaped(render(&rate_chart(p))))
        @if !indexes.is_empty() {
            p {
                "Index of dispersion (variance over mean of the arrivals per window; 1 is \
                 Poisson, 0 a constant rate) — " (indexes.join(", ")) "."
            }
        }
        @if let Some(chart) = dispersion_chart(p) {
            (PreEscaped(render(&chart)))
        }
        h2 { "Request mix" }
        (mix_bars(p))
        table {
            tr {
                @for h in ["method", "route", "requests", "share", "size p50", "size p99", "time p50", "time p99", "examples"] {
                    th { (h) }
                }
            }
            @for rs in &p.mix { (route(rs)) }
        }
        p { "Status: " (status.join(", ")) }
    }
}

/// Requests per second over the span, with the mean and p99 marked.
fn rate_chart(p: &Profile) -> Chart {
    let r = &p.rate;
    let step = r.series_step_seconds.max(1) as f64;
    let points: Vec<(f64, f64)> = (r.series.iter().enumerate())
        .map(|(i, &n)| (i as f64 * step, f64::from(n) / step))
        .collect();
    Chart {
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
                label: format!("mean {}", rate(r.mean)),
                color: COLORS[2],
            },
            Mark {
                at: r.per_second.p99,
                label: format!("p99 {}", rate(r.per_second.p99)),
                color: COLORS[1],
            },
        ],
        y_from_zero: true,
        ..Chart::default()
    }
}

/// The index of dispersion by window size beside Poisson's 1: a curve needs two window
/// sizes (a span of 50 s or more).
fn dispersion_chart(p: &Profile) -> Option<Chart> {
    let r = &p.rate;
    if r.dispersion.len() < 2 {
        return None;
    }
    let points: Vec<(f64, f64)> = (r.dispersion.iter())
        .map(|d| (d.window_seconds as f64, d.index))
        .collect();
    Some(Chart {
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
    })
}

/// A route's row: method, route, requests, share, sizes, times, examples.
fn route(rs: &RouteStats) -> Markup {
    let t = |f: fn(&crate::workload::profile::Spread) -> f64| {
        (rs.time_ms.as_ref()).map_or("-".into(), |x| crate::units::format_value(f(x), "ms"))
    };
    html! {
        tr {
            td { (rs.method) }
            td { (rs.route) }
            td { (rs.requests) }
            td { (format!("{:.1}%", rs.share)) }
            td { (crate::units::format_value(rs.bytes.p50, "bytes")) }
            td { (crate::units::format_value(rs.bytes.p99, "bytes")) }
            td { (t(|x| x.p50)) }
            td { (t(|x| x.p99)) }
            td { (rs.examples.join(" ")) }
        }
    }
}

/// The 15 busiest routes as horizontal bars of their share.
fn mix_bars(p: &Profile) -> Markup {
    let rows: Vec<&RouteStats> = p.mix.iter().take(15).collect();
    let (w, row_h, left) = (720.0, 22.0, 300.0);
    let h = 40.0 + row_h * rows.len() as f64;
    let max = rows.iter().map(|r| r.share).fold(1.0f64, f64::max);
    html! {
        svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox={ "0 0 " (w) " " (h) }
            width=(w) height=(h) role="img" aria-label="request mix" {
            title { "request mix" }
            text class="chart-title" x=(w / 2.0) y="18" text-anchor="middle" {
                "Share of requests by route"
            }
            @for (i, r) in rows.iter().enumerate() {
                @let y = 30.0 + row_h * i as f64;
                @let bar = (r.share / max) * (w - left - 70.0);
                text class="tick" x=(left - 6.0) y=(y + 14.0) text-anchor="end" {
                    (r.method) " " (r.route)
                }
                rect x=(left) y=(y + 3.0) width=(format!("{bar:.1}")) height=(row_h - 6.0)
                    fill=(COLORS[0]) {}
                text class="tick" x=(format!("{:.1}", left + bar + 4.0)) y=(y + 14.0) {
                    (format!("{:.1}%", r.share))
                }
            }
        }
    }
}
