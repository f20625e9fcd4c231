//! For tests repeated more than once: each metric's median, range and coefficient of
//! variation across the repetitions — how far a single run can be trusted — with the
//! metric's unit.

use std::io::Write;

use crate::store::Metric;
use crate::units::format_value;

/// For tests repeated more than once: each metric's median, range and coefficient of
/// variation across the repetitions — how far a single run can be trusted.
pub fn print(
    out: &mut dyn Write,
    groups: &std::collections::BTreeMap<String, Vec<Vec<Metric>>>,
) -> std::io::Result<()> {
    for (name, runs) in groups.iter().filter(|(_, r)| r.len() > 1) {
        writeln!(out, "\nSpread across {} repetitions of {name}:", runs.len())?;
        writeln!(
            out,
            "    {:<22} {:>14} {:>14} {:>14} {:>8}",
            "metric", "median", "min", "max", "CV"
        )?;
        let mut names: Vec<(&str, &str)> = runs[0]
            .iter()
            .map(|m| (m.name.as_str(), m.unit.as_str()))
            .collect();
        names.sort_unstable();
        for (n, unit) in names {
            let v: Vec<f64> = runs
                .iter()
                .filter_map(|ms| ms.iter().find(|m| m.name == n).map(|m| m.value))
                .collect();
            if v.len() < 2 {
                continue;
            }
            let mean = v.iter().sum::<f64>() / v.len() as f64;
            let sd =
                (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (v.len() - 1) as f64).sqrt();
            let cv = if mean != 0.0 {
                format!("{:.1}%", 100.0 * sd / mean.abs())
            } else {
                "-".into()
            };
            let (lo, hi) = v
                .iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| {
                    (a.min(*x), b.max(*x))
                });
            let med = crate::analysis::stats::median(&v).unwrap_or(f64::NAN);
            let f = |v: f64| format_value(v, unit);
            writeln!(
                out,
                "    {n:<22} {:>14} {:>14} {:>14} {cv:>8}",
                f(med),
                f(lo),
                f(hi)
            )?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_median_range_and_cv_with_units() {
        // peak_rss 6, 7, 8 MiB: median 7 MiB, CV = sd/mean = 1/7 = 14.3%.
        let runs: Vec<Vec<Metric>> = [6.0, 7.0, 8.0]
            .iter()
            .map(|mib| {
                vec![
                    Metric::of("peak_rss", mib * 1048576.0),
                    Metric::of("latency_p99", mib / 2.0),
                    Metric::of("capacity_ram_clients", 1e12),
                ]
            })
            .collect();
        let groups = [("push".to_string(), runs)].into_iter().collect();
        let mut out = Vec::new();
        print(&mut out, &groups).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains("Spread across 3 repetitions of push:"),
            "{text}"
        );
        let row = |name: &str| {
            text.lines()
                .find(|l| l.trim_start().starts_with(name))
                .unwrap_or_else(|| panic!("no {name} row in\n{text}"))
                .split_whitespace()
                .skip(1)
                .collect::<Vec<_>>()
                .join(" ")
        };
        assert_eq!(row("peak_rss"), "7.0 MiB 6.0 MiB 8.0 MiB 14.3%");
        assert_eq!(row("latency_p99"), "3.50 ms 3.00 ms 4.00 ms 14.3%");
        assert!(!text.contains("inf") && !text.contains("NaN"), "{text}");
    }
}
