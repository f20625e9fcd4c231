//! The version table (`strainline report SUITE --versions L1,L2,L3`): the IoT programme's
//! "RSS, % of previous, pushes/s, % of previous" over 0.6.0 → 0.7.0 → 0.8.0, laid out from
//! stored runs. A row per host, case and metric; a column per version (the newest
//! finished run of the suite with that label on that host), each after the first with
//! its value as a share of the previous version's. In the terminal, Markdown and CSV.

use std::collections::BTreeMap;

use crate::store::{RunRow, Store};

/// The key figures a version table shows unless told which (`--metrics`).
const DEFAULT_METRICS: &[&str] = &[
    "throughput",
    "latency_p99",
    "error_rate",
    "ceiling",
    "peak_rss",
    "cpu_per_op",
];

/// One row: a host's case's metric across the versions.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub host: String,
    pub case: String,
    pub metric: String,
    pub unit: String,
    /// Its value in each version's run (the median of a case's repetitions), if that
    /// run has it.
    pub values: Vec<Option<f64>>,
}

impl Row {
    /// Version `i`'s value as a share of version `i - 1`'s, when both are there.
    pub fn of_previous(&self, i: usize) -> Option<f64> {
        let (Some(Some(a)), Some(Some(b))) =
            (self.values.get(i.wrapping_sub(1)), self.values.get(i))
        else {
            return None;
        };
        (*a != 0.0).then(|| b / a)
    }
}

/// The table: the labels, the runs it read (by label, per host), its rows.
pub struct Table {
    pub suite: String,
    pub labels: Vec<String>,
    pub runs: Vec<(String, String, i64)>,
    pub rows: Vec<Row>,
}

/// Reads the table of `suite` over `labels` (oldest first) from `store`.
pub fn load(
    store: &Store,
    suite: &str,
    labels: &[String],
    metrics: Option<&[String]>,
) -> crate::error::Result<Table> {
    if labels.len() < 2 {
        return Err(crate::Error::usage(
            "--versions: give two labels or more, oldest first (e.g. --versions v0.6.0,v0.7.0,v0.8.0)",
        ));
    }
    // host → label index → the newest finished run of the suite with that label there.
    let mut by_host: BTreeMap<String, Vec<Option<RunRow>>> = BTreeMap::new();
    for (i, label) in labels.iter().enumerate() {
        let runs: Vec<RunRow> = store
            .runs_in_order(Some(label), None)
            .map_err(|e| crate::Error::environment(e.to_string()))?
            .into_iter()
            .filter(|r| r.suite.as_deref() == Some(suite) && r.ended_at.is_some())
            .collect();
        if runs.is_empty() {
            return Err(crate::Error::usage(format!(
                "--versions: no finished run of suite '{suite}' is labelled '{label}' (label runs with `strainline run SUITE --label {label}`; `strainline runs` lists them)"
            )));
        }
        for r in runs {
            let slots = by_host
                .entry(r.host.clone())
                .or_insert_with(|| vec![None; labels.len()]);
            slots[i] = Some(r);
        }
    }
    let mut rows = Vec::new();
    let mut read = Vec::new();
    for (host, runs) in &by_host {
        let mut cells: BTreeMap<String, Cells> = BTreeMap::new();
        for (i, run) in runs.iter().enumerate() {
            let Some(run) = run else { continue };
            read.push((host.clone(), labels[i].clone(), run.id));
            let cases = store
                .cases(run.id)
                .map_err(|e| crate::Error::environment(e.to_string()))?;
            for c in cases {
                for m in c.metrics.iter().filter(|m| match metrics {
                    Some(want) => want.contains(&m.name),
                    None => DEFAULT_METRICS.contains(&m.name.as_str()),
                }) {
                    let cell = cells
                        .entry(c.name.clone())
                        .or_default()
                        .entry(m.name.clone())
                        .or_insert_with(|| (m.unit.clone(), vec![Vec::new(); labels.len()]));
                    cell.1[i].push(m.value);
                }
            }
        }
        for (case, by_metric) in cells {
            let mut names: Vec<&String> = by_metric.keys().collect();
            // The key figures in their usual order, then the rest by name.
            names.sort_by_key(|n| {
                (
                    DEFAULT_METRICS
                        .iter()
                        .position(|d| d == n)
                        .unwrap_or(usize::MAX),
                    n.to_string(),
                )
            });
            for name in names {
                let (unit, values) = &by_metric[name];
                rows.push(Row {
                    host: host.clone(),
                    case: case.clone(),
                    metric: name.clone(),
                    unit: unit.clone(),
                    values: values.iter().map(|v| median(v)).collect(),
                });
            }
        }
    }
    Ok(Table {
        suite: suite.to_string(),
        labels: labels.to_vec(),
        runs: read,
        rows,
    })
}

/// A case's metrics: each one's unit and its values (a repetition each) by version.
type Cells = BTreeMap<String, (String, Vec<Vec<f64>>)>;

fn median(v: &[f64]) -> Option<f64> {
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    match v.len() {
        0 => None,
        n if n % 2 == 1 => Some(v[n / 2]),
        n => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
    }
}

impl Table {
    /// Its heads and cells as people read them: values in their units, each after the
    /// first version with its share of the previous (`105%`).
    pub fn cells(&self) -> (Vec<String>, Vec<Vec<String>>) {
        let mut heads: Vec<String> = ["host", "case", "metric"].map(String::from).to_vec();
        for (i, l) in self.labels.iter().enumerate() {
            heads.push(l.clone());
            if i > 0 {
                heads.push("% of previous".into());
            }
        }
        let rows = self
            .rows
            .iter()
            .map(|r| {
                let mut cells = vec![r.host.clone(), r.case.clone(), r.metric.clone()];
                for (i, v) in r.values.iter().enumerate() {
                    cells.push(v.map_or("—".into(), |v| crate::units::format_value(v, &r.unit)));
                    if i > 0 {
                        cells.push(
                            r.of_previous(i)
                                .map_or("—".into(), |s| format!("{:.0}%", 100.0 * s)),
                        );
                    }
                }
                cells
            })
            .collect();
        (heads, rows)
    }

    /// The table in the terminal, columns aligned.
    pub fn terminal(&self) -> String {
        let (heads, rows) = self.cells();
        let mut widths: Vec<usize> = heads.iter().map(|h| h.chars().count()).collect();
        for r in &rows {
            for (w, c) in widths.iter_mut().zip(r) {
                *w = (*w).max(c.chars().count());
            }
        }
        let line = |cells: &[String]| {
            cells
                .iter()
                .zip(&widths)
                .map(|(c, w)| format!("{c:<w$}"))
                .collect::<Vec<_>>()
                .join("  ")
                .trim_end()
                .to_string()
        };
        let mut out = format!(
            "Versions of {}: {} (the newest finished run of each label, per host)\n",
            self.suite,
            self.labels.join(" → ")
        );
        out.push_str(&line(&heads));
        out.push('\n');
        for r in &rows {
            out.push_str(&line(r));
            out.push('\n');
        }
        out
    }

    /// The table as Markdown.
    pub fn markdown(&self) -> String {
        let (heads, rows) = self.cells();
        let mut out = format!(
            "## {} over {}\n\nThe newest finished run of each label, per host; runs {}.\n\n| {} |\n|{}|\n",
            self.suite,
            self.labels.join(" → "),
            self.runs
                .iter()
                .map(|(h, l, id)| format!("#{id} ({l} on {h})"))
                .collect::<Vec<_>>()
                .join(", "),
            heads.join(" | "),
            heads.iter().map(|_| "---").collect::<Vec<_>>().join("|")
        );
        for r in rows {
            out.push_str(&format!("| {} |\n", r.join(" | ")));
        }
        out
    }

    /// The table as CSV: raw values (in their stored unit) and shares as ratios.
    pub fn csv(&self) -> String {
        let mut heads: Vec<String> = ["host", "case", "metric", "unit"]
            .map(String::from)
            .to_vec();
        for (i, l) in self.labels.iter().enumerate() {
            heads.push(l.clone());
            if i > 0 {
                heads.push(format!("{l}_of_previous"));
            }
        }
        let quote = |s: &str| {
            if s.contains([',', '"', '\n']) {
                format!("\"{}\"", s.replace('"', "\"\""))
            } else {
                s.to_string()
            }
        };
        let mut out = heads.iter().map(|h| quote(h)).collect::<Vec<_>>().join(",");
        out.push('\n');
        for r in &self.rows {
            let mut cells = vec![
                quote(&r.host),
                quote(&r.case),
                quote(&r.metric),
                quote(&r.unit),
            ];
            for (i, v) in r.values.iter().enumerate() {
                cells.push(v.map_or(String::new(), |v| v.to_string()));
                if i > 0 {
                    cells.push(
                        r.of_previous(i)
                            .map_or(String::new(), |s| format!("{s:.6}")),
                    );
                }
            }
            out.push_str(&cells.join(","));
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_version_is_a_share_of_the_previous_and_a_missing_one_breaks_the_chain() {
        let r = Row {
            host: "c1".into(),
            case: "bench".into(),
            metric: "throughput".into(),
            unit: "req/s".into(),
            values: vec![Some(100.0), Some(105.0), None, Some(80.0)],
        };
        assert_eq!(r.of_previous(0), None);
        assert!((r.of_previous(1).unwrap() - 1.05).abs() < 1e-12);
        assert_eq!(r.of_previous(2), None);
        assert_eq!(r.of_previous(3), None);
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[1.0, 2.0]), Some(1.5));
        assert_eq!(median(&[]), None);
    }
}
