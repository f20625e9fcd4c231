//! A profile written as a scenario that reproduces it (`workload scenario`): the mix as
//! weighted steps sending the observed requests, and the arrivals as the log's own
//! per-second counts — the rate with its variance, not only its mean (Pamela's finding:
//! a simulator that "applies an average production workload but doesn't account for
//! variance"). The file is ordinary scenario TOML (`load --scenario`, suites).

use std::fmt::Write;

use super::profile::Profile;

/// How the arrivals are written.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shape {
    /// Multiplies the rate (2.0: twice production).
    pub scale: f64,
    /// The mean rate, evenly spaced: the variance removed (what most load tests send).
    pub constant: bool,
}

/// Counts per line of the `per_second` list.
const PER_LINE: usize = 20;

/// The scenario file for `profile`, read from `source`.
pub fn write(profile: &Profile, source: &str, shape: Shape) -> crate::error::Result<String> {
    let rate = &profile.rate;
    let counts = &rate.per_second_counts;
    if !shape.constant && counts.iter().all(|&c| c == 0) {
        return Err(crate::Error::usage(format!(
            "{source}: no request to write a scenario from"
        )));
    }
    let mut out = String::new();
    let w = &mut out;
    let _ = writeln!(
        w,
        "# Made by `strainline workload scenario` from {} ({}): {} requests,",
        crate::units::printable(source),
        crate::units::printable(&profile.window),
        profile.requests
    );
    let dispersion = rate
        .dispersion
        .iter()
        .map(|d| format!("{:.2} ({} s)", d.index, d.window_seconds))
        .collect::<Vec<_>>()
        .join(", ");
    let _ = writeln!(
        w,
        "# mean {}, per-second p99 {}, index of dispersion {}{}.",
        crate::units::rate(rate.mean),
        crate::units::rate(rate.per_second.p99),
        if dispersion.is_empty() {
            "-".into()
        } else {
            dispersion
        },
        if rate.poisson { ": looks Poisson" } else { "" }
    );
    let _ = writeln!(
        w,
        "#\n#   strainline load http://127.0.0.1:8080 --scenario THIS_FILE\n#"
    );
    if shape.constant {
        let _ = writeln!(
            w,
            "# The variance is removed: the mean rate, evenly spaced (--constant). Runs 10 s\n# unless -z says otherwise."
        );
    } else {
        let _ = writeln!(
            w,
            "# Runs as long as the list ({} s) unless -z says otherwise; a longer run starts\n# it again.",
            counts.len()
        );
    }
    let _ = writeln!(
        w,
        "# Access logs hold no bodies: POST, PUT and PATCH steps send none unless you add\n# one (e.g. body = \"{{{{random 512}}}}\")."
    );
    let _ = writeln!(w, "seed = 1\n\n[arrivals]");
    if shape.scale != 1.0 {
        let _ = writeln!(w, "scale = {:?}", shape.scale);
    } else {
        let _ = writeln!(w, "scale = 1.0   # 2.0: twice the rate");
    }
    if shape.constant {
        let _ = writeln!(w, "rate = {:.3}", rate.mean);
    } else {
        let _ = writeln!(
            w,
            "# Requests in each second of the log, in order (the first and last as logged, partial\n# seconds); each second's are sent at random instants within it.\nper_second = ["
        );
        for line in counts.chunks(PER_LINE) {
            let nums: Vec<String> = line.iter().map(u32::to_string).collect();
            let _ = writeln!(w, "  {},", nums.join(", "));
        }
        let _ = writeln!(w, "]");
    }
    // Weights are request counts; a log beyond 4 billion requests on one route is
    // scaled down to fit.
    let most = profile.mix.iter().map(|r| r.requests).max().unwrap_or(1);
    let divide = most.div_ceil(u64::from(u32::MAX)).max(1);
    let mut left_out = Vec::new();
    for r in &profile.mix {
        let paths: Vec<&String> = r
            .sample
            .iter()
            .filter(|p| crate::load::replay::sendable(p))
            .collect();
        let method_ok = hyper::Method::from_bytes(r.method.as_bytes()).is_ok() && r.method != "*";
        let weight = r.requests / divide;
        if paths.is_empty() || weight == 0 {
            left_out.push(format!("{} {}", r.method, r.route));
            continue;
        }
        let mut distinct = paths.clone();
        distinct.sort();
        distinct.dedup();
        let list: Vec<&String> = if distinct.len() == 1 { distinct } else { paths };
        let _ = writeln!(
            w,
            "\n[[step]]\nname = {}   # {:.2}% of the requests; response p50 {} B",
            quote(&format!("{} {}", r.method, r.route)),
            r.share,
            r.bytes.p50
        );
        let _ = writeln!(w, "weight = {weight}");
        if method_ok {
            let _ = writeln!(w, "method = {}", quote(&r.method));
        } else {
            // The other routes' methods vary: each is sent as GET.
            let _ = writeln!(w, "method = \"GET\"");
        }
        // A uniform sample: a path appears as often as it was requested.
        let _ = writeln!(w, "paths = [");
        let mut line = String::new();
        for p in list {
            let q = quote(p);
            if !line.is_empty() && line.len() + q.len() > 86 {
                let _ = writeln!(w, " {line}");
                line.clear();
            }
            let _ = write!(line, " {q},");
        }
        if !line.is_empty() {
            let _ = writeln!(w, " {line}");
        }
        let _ = writeln!(w, "]");
    }
    if !left_out.is_empty() {
        let _ = writeln!(
            w,
            "\n# Left out (no request that can be sent as it was logged): {}",
            left_out
                .iter()
                .map(|s| crate::units::printable(s))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    Ok(out)
}

/// A TOML basic string.
pub(crate) fn quote(s: &str) -> String {
    let mut q = String::with_capacity(s.len() + 2);
    q.push('"');
    for c in s.chars() {
        match c {
            '"' => q.push_str("\\\""),
            '\\' => q.push_str("\\\\"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                let _ = write!(q, "\\u{:04X}", c as u32);
            }
            c => q.push(c),
        }
    }
    q.push('"');
    q
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::scenario::{self, Arrive, When};
    use crate::workload::parse::Entry;
    use crate::workload::profile::Builder;
    use crate::workload::route::Routes;
    use std::path::Path;

    fn profile() -> Profile {
        let routes = Routes::default();
        let mut b = Builder::new("all");
        let mut add = |t: f64, path: &str, query: Option<&str>, method: &str| {
            let e = Entry {
                time: t,
                method: method.into(),
                path: path.into(),
                query: query.map(String::from),
                status: 200,
                bytes: 100,
                duration: None,
                client: String::new(),
            };
            b.add(&e, &routes.route(&e.path));
        };
        // Ten seconds: 3, 5, 3, 5, … requests; two thirds to /items/N?full=1.
        let mut n = 0;
        for s in 0..10 {
            for k in 0..(if s % 2 == 0 { 3 } else { 5 }) {
                let t = 1_700_000_000.0 + s as f64 + k as f64 * 0.1 + 0.05;
                if n % 3 == 2 {
                    add(t, "/say \"hi\"\\", None, "POST");
                } else {
                    add(t, &format!("/items/{}", 100 + n % 7), Some("full=1"), "GET");
                }
                n += 1;
            }
        }
        b.finish()
    }

    #[test]
    fn the_scenario_reads_back_with_the_logs_counts_and_mix() {
        let p = profile();
        let text = write(
            &p,
            "access.log",
            Shape {
                scale: 1.0,
                constant: false,
            },
        )
        .unwrap();
        let sc = scenario::parse(&text, Path::new("scenario.toml")).unwrap();
        // Every second, in order (the partial first and last as logged).
        assert_eq!(
            sc.arrivals,
            Some(Arrive::PerSecond(vec![3, 5, 3, 5, 3, 5, 3, 5, 3, 5]))
        );
        assert_eq!(sc.steps.len(), 1, "{text}");
        assert_eq!(sc.steps[0].when, When::Weight(p.mix[0].requests as u32));
        assert!(sc.steps[0]
            .observed
            .iter()
            .all(|x| x.starts_with("/items/1") && x.ends_with("?full=1")));
        // The path with a space cannot be sent as logged: left out, and said so.
        assert!(
            text.contains("# Left out") && text.contains("POST /say"),
            "{text}"
        );
        let c = write(
            &p,
            "access.log",
            Shape {
                scale: 2.0,
                constant: true,
            },
        )
        .unwrap();
        let sc = scenario::parse(&c, Path::new("scenario.toml")).unwrap();
        assert_eq!(
            sc.arrivals,
            Some(Arrive::Rate {
                rate: 2.0 * (p.rate.mean * 1000.0).round() / 1000.0,
                poisson: false
            })
        );
    }

    #[test]
    fn quotes_are_toml() {
        let q = quote("a\"b\\c\u{1}");
        let v: toml::Value = toml::from_str(&format!("x = {q}")).unwrap();
        assert_eq!(v["x"].as_str(), Some("a\"b\\c\u{1}"));
    }
}
