//! The terminal's view of a characterization and of a comparison.

use std::fmt::Write;

use super::compare::Comparison;
use super::profile::Profile;
use super::Characterization;
use crate::units::{format_number, printable, rate};

/// Routes listed in the terminal (all of them are in `--json`).
const ROUTES_SHOWN: usize = 15;

pub fn characterization(c: &Characterization) -> String {
    let mut o = String::new();
    let rule = "=".repeat(72);
    let _ = writeln!(o, "{rule}");
    let _ = writeln!(o, "Workload: {}", printable(&c.files.join(", ")));
    let mut formats = c.formats.clone();
    formats.dedup();
    let _ = writeln!(
        o,
        "  {} lines, {} requests ({}), {} malformed",
        format_number(c.lines as f64),
        format_number(c.requests as f64),
        formats.join(", "),
        format_number(c.malformed as f64)
    );
    for m in &c.malformed_examples {
        let _ = writeln!(
            o,
            "    {}:{}: {} — `{}`",
            printable(&m.file),
            m.line,
            m.reason,
            printable(&m.text)
        );
    }
    if c.malformed > c.malformed_examples.len() as u64 {
        let _ = writeln!(
            o,
            "    … and {} more",
            c.malformed - c.malformed_examples.len() as u64
        );
    }
    let _ = writeln!(o, "{rule}");
    profile(&mut o, &c.all);
    for w in &c.windows {
        let _ = writeln!(o, "{}", "-".repeat(72));
        let _ = writeln!(o, "Window {}", w.window);
        profile(&mut o, w);
    }
    let _ = writeln!(o, "{rule}");
    o
}

fn profile(o: &mut String, p: &Profile) {
    let r = &p.rate;
    let _ = writeln!(
        o,
        "  Span          {} over {}",
        format_number(p.requests as f64) + " requests",
        crate::units::format_duration(std::time::Duration::from_secs_f64(p.span_seconds.max(0.0)))
    );
    let _ = writeln!(
        o,
        "  Rate          mean {}; per second p50 {}, p99 {}, max {}{}",
        rate(r.mean),
        rate(r.per_second.p50),
        rate(r.per_second.p99),
        rate(r.per_second.max),
        if r.per_minute_max > 0.0 {
            format!("; busiest minute {}", rate(r.per_minute_max))
        } else {
            String::new()
        }
    );
    if r.dispersion.is_empty() {
        let _ = writeln!(
            o,
            "  Variance      too short a span to measure (5 seconds at least)"
        );
    } else {
        let parts: Vec<String> = r
            .dispersion
            .iter()
            .map(|d| {
                format!(
                    "{} s {:.2} (peak/mean {:.2})",
                    d.window_seconds, d.index, d.peak_to_mean
                )
            })
            .collect();
        let _ = writeln!(
            o,
            "  Dispersion    index of dispersion (variance/mean of arrivals per window): {}",
            parts.join(", ")
        );
        let _ = writeln!(
            o,
            "  Arrivals      {}",
            if r.poisson {
                "look Poisson (index ≈ 1 at every window size): random, independent arrivals"
                    .to_string()
            } else {
                let d1 = &r.dispersion[0];
                if d1.index < 1.0 {
                    format!("more regular than Poisson (index {:.2} < 1): paced, like a constant-rate generator", d1.index)
                } else {
                    let worst = r
                        .dispersion
                        .iter()
                        .max_by(|a, b| a.index.total_cmp(&b.index))
                        .expect("non-empty");
                    format!(
                        "bursty, not Poisson: index {:.2} at {} s windows — a test at the mean rate misses its peaks",
                        worst.index, worst.window_seconds
                    )
                }
            }
        );
    }
    let status: Vec<String> = p
        .status
        .iter()
        .map(|(s, n, share)| format!("{s}: {} ({share:.1}%)", format_number(*n as f64)))
        .collect();
    let _ = writeln!(o, "  Status        {}", status.join(", "));
    if let Some(c) = &p.clients {
        let _ = writeln!(
            o,
            "  Clients       {} distinct{}; requests per client p50 {:.0}, p90 {:.0}, max {:.0}; gap between a client's requests p50 {}, p90 {}",
            format_number(c.distinct as f64),
            if c.sampled_one_in > 1 {
                format!(" (estimated: one client in {} followed)", c.sampled_one_in)
            } else {
                String::new()
            },
            c.requests_per_client.p50,
            c.requests_per_client.p90,
            c.requests_per_client.max,
            ms(c.gap_ms.p50),
            ms(c.gap_ms.p90)
        );
    }
    let _ = writeln!(o, "  Mix");
    let _ = writeln!(
        o,
        "    {:<7} {:<34} {:>9} {:>7} {:>10} {:>10}{}",
        "method",
        "route",
        "requests",
        "share",
        "size p50",
        "size p99",
        if p.has_times {
            "    time p50    time p99"
        } else {
            ""
        }
    );
    for rs in p.mix.iter().take(ROUTES_SHOWN) {
        let times = match &rs.time_ms {
            Some(t) => format!(" {:>11} {:>11}", ms(t.p50), ms(t.p99)),
            None if p.has_times => format!(" {:>11} {:>11}", "-", "-"),
            None => String::new(),
        };
        let _ = writeln!(
            o,
            "    {:<7} {:<34} {:>9} {:>6.1}% {:>10} {:>10}{}",
            printable(&rs.method),
            printable(&rs.route),
            format_number(rs.requests as f64),
            rs.share,
            bytes(rs.bytes.p50),
            bytes(rs.bytes.p99),
            times
        );
    }
    if p.mix.len() > ROUTES_SHOWN {
        let rest: f64 = p.mix[ROUTES_SHOWN..].iter().map(|r| r.share).sum();
        let _ = writeln!(
            o,
            "    … {} more routes ({rest:.1}% of requests; all in --json)",
            p.mix.len() - ROUTES_SHOWN
        );
    }
}

fn ms(v: f64) -> String {
    crate::units::format_value(v, "ms")
}

fn bytes(v: f64) -> String {
    crate::units::format_value(v, "bytes")
}

pub fn comparison(c: &Comparison) -> String {
    let mut o = String::new();
    let rule = "=".repeat(72);
    let _ = writeln!(o, "{rule}");
    let _ = writeln!(
        o,
        "Workload comparison: A {}  →  B {}",
        printable(&c.a),
        printable(&c.b)
    );
    let _ = writeln!(o, "{rule}");
    for d in &c.dimensions {
        let (dist, tol) = if d.name == "mix" || d.name == "status" {
            (
                format!("{:.1} points", d.distance),
                format!("{:.1} points", d.tolerance),
            )
        } else {
            (
                format!("{:.1}%", 100.0 * d.distance),
                format!("{:.0}%", 100.0 * d.tolerance),
            )
        };
        let _ = writeln!(
            o,
            "  {:<11} {:<8} {} (tolerance {tol}): {}",
            d.name,
            if d.differs { "DIFFERS" } else { "similar" },
            dist,
            d.detail
        );
    }
    for s in &c.shown {
        let _ = writeln!(o, "  {s}");
    }
    let _ = writeln!(o, "  Routes (share of requests, A → B)");
    for r in c.routes.iter().take(ROUTES_SHOWN) {
        let _ = writeln!(
            o,
            "    {:<7} {:<34} {:>6.1}% → {:>5.1}%  ({:+.1})",
            printable(&r.method),
            printable(&r.route),
            r.a,
            r.b,
            r.b - r.a
        );
    }
    let differing: Vec<&str> = c
        .dimensions
        .iter()
        .filter(|d| d.differs)
        .map(|d| d.name.as_str())
        .collect();
    let _ = writeln!(
        o,
        "  Verdict     {}",
        if differing.is_empty() {
            "SIMILAR: B resembles A in every judged dimension".to_string()
        } else {
            format!("DIFFERS in {}", differing.join(", "))
        }
    );
    let _ = writeln!(o, "{rule}");
    o
}
