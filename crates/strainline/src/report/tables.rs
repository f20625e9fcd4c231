//! The IoT programme's tables, laid out from stored runs, in the terminal, Markdown and
//! CSV. **Versions** (`strainline report SUITE --versions L1,L2,L3`): "RSS, % of previous,
//! pushes/s, % of previous" over 0.6.0 → 0.7.0 → 0.8.0 — a row per host, case and metric,
//! a column per version (the newest finished run of the suite with that label on that
//! host), each after the first with its share of the previous. **Hosts** (`--by-host`):
//! the same suite on many machines "for comparability and clue for sizing deployments"
//! — a row per case and metric, a column per host (its cores and memory in the head),
//! from each host's newest finished run of the suite (with `--label`, of that label).

use std::collections::BTreeMap;

use crate::store::{RunRow, Store};

/// The key figures a version table shows unless told which (`--metrics`): the host
/// table's without the soak's capacity.
const DEFAULT_METRICS: &[&str] = HOST_METRICS.split_at(6).0;

/// One row: a case's metric (on a host, in the version table) across the columns.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The host, in the version table; empty in the host table.
    pub host: String,
    pub case: String,
    pub metric: String,
    pub unit: String,
    /// Its value in each column's run (the median of a case's repetitions), if that
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

/// Which of the two tables.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Layout {
    /// A column per label, rows per host: each column a share of the previous.
    Versions,
    /// A column per host.
    Hosts,
}

/// A table: its columns (labels, or hosts), the runs it read (column, host, run), its
/// rows.
pub struct Table {
    pub layout: Layout,
    pub suite: String,
    pub columns: Vec<String>,
    pub runs: Vec<(String, String, i64)>,
    pub rows: Vec<Row>,
}

/// The key figures a host table shows unless told which: the version table's, then
/// the capacity a soak estimates (the programme's ideal and safe devices).
const HOST_METRICS: &[&str] = &[
    "throughput",
    "latency_p99",
    "error_rate",
    "ceiling",
    "peak_rss",
    "cpu_per_op",
    "capacity_ideal_clients",
    "capacity_safe_clients",
];

/// Reads the host table of `suite` (its runs with `label`, if given) from `store`: each
/// host's newest finished run.
pub fn by_host(
    store: &Store,
    suite: &str,
    label: Option<&str>,
    metrics: Option<&[String]>,
) -> crate::error::Result<Table> {
    let runs: Vec<RunRow> = store
        .runs_in_order(label, None)?
        .into_iter()
        .filter(|r| r.suite.as_deref() == Some(suite) && r.ended_at.is_some())
        .collect();
    if runs.is_empty() {
        return Err(crate::Error::usage(format!(
            "--by-host: no finished run of suite '{suite}'{} (`strainline runs` lists them)",
            label.map_or(String::new(), |l| format!(" is labelled '{l}'"))
        )));
    }
    // host → its newest run (runs come oldest first).
    let mut newest: BTreeMap<String, RunRow> = BTreeMap::new();
    for r in runs {
        newest.insert(r.host.clone(), r);
    }
    let mut columns = Vec::new();
    let mut read = Vec::new();
    let mut by_column = Vec::new();
    for (host, run) in &newest {
        let shown = match store.run_host(run.id)? {
            Some(h) => format!(
                "{host} ({} cores, {})",
                h.cores,
                crate::units::Bytes(h.memory_bytes.max(0) as u64)
            ),
            None => host.clone(),
        };
        columns.push(shown.clone());
        read.push((shown, host.clone(), run.id));
        by_column.push(Some(run.clone()));
    }
    let rows = rows_of(store, "", &by_column, metrics, HOST_METRICS)?;
    Ok(Table {
        layout: Layout::Hosts,
        suite: suite.to_string(),
        columns,
        runs: read,
        rows,
    })
}

/// Reads the version table of `suite` over `labels` (oldest first) from `store`.
pub fn versions(
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
            .runs_in_order(Some(label), None)?
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
        for (i, run) in runs.iter().enumerate() {
            if let Some(run) = run {
                read.push((labels[i].clone(), host.clone(), run.id));
            }
        }
        rows.extend(rows_of(store, host, runs, metrics, DEFAULT_METRICS)?);
    }
    Ok(Table {
        layout: Layout::Versions,
        suite: suite.to_string(),
        columns: labels.to_vec(),
        runs: read,
        rows,
    })
}

/// The rows of one host's runs, a column each (`None`: no run there): every case's
/// metrics that were asked for (`metrics`, else the key figures `order`), those in
/// `order` first.
fn rows_of(
    store: &Store,
    host: &str,
    runs: &[Option<RunRow>],
    metrics: Option<&[String]>,
    order: &[&str],
) -> crate::error::Result<Vec<Row>> {
    let want = |name: &str| match metrics {
        Some(w) => w.iter().any(|m| m == name),
        None => order.contains(&name),
    };
    let mut cells: BTreeMap<String, Cells> = BTreeMap::new();
    for (i, run) in runs.iter().enumerate() {
        let Some(run) = run else { continue };
        let cases = store.cases(run.id)?;
        for c in cases {
            for m in c.metrics.iter().filter(|m| want(&m.name)) {
                let cell = cells
                    .entry(c.name.clone())
                    .or_default()
                    .entry(m.name.clone())
                    .or_insert_with(|| (m.unit.clone(), vec![Vec::new(); runs.len()]));
                cell.1[i].push(m.value);
            }
        }
    }
    let mut rows = Vec::new();
    for (case, by_metric) in cells {
        let mut names: Vec<&String> = by_metric.keys().collect();
        names.sort_by_key(|n| {
            (
                order.iter().position(|d| d == n).unwrap_or(usize::MAX),
                n.to_string(),
            )
        });
        for name in names {
            let (unit, values) = &by_metric[name];
            rows.push(Row {
                host: host.to_string(),
                case: case.clone(),
                metric: name.clone(),
                unit: unit.clone(),
                values: values.iter().map(|v| median(v)).collect(),
            });
        }
    }
    Ok(rows)
}

/// A case's metrics: each one's unit and its values (a repetition each) by column.
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
    /// Whether each column after the first shows its share of the previous.
    fn shares(&self) -> bool {
        self.layout == Layout::Versions
    }

    /// The heads of the columns before the values.
    fn keys(&self) -> &'static [&'static str] {
        match self.layout {
            Layout::Versions => &["host", "case", "metric"],
            Layout::Hosts => &["case", "metric"],
        }
    }

    fn key_cells(&self, r: &Row) -> Vec<String> {
        match self.layout {
            Layout::Versions => vec![r.host.clone(), r.case.clone(), r.metric.clone()],
            Layout::Hosts => vec![r.case.clone(), r.metric.clone()],
        }
    }

    /// Its heads and cells as people read them: values in their units, and in the
    /// version table each after the first with its share of the previous (`105%`).
    pub fn cells(&self) -> (Vec<String>, Vec<Vec<String>>) {
        let mut heads: Vec<String> = self.keys().iter().map(|k| k.to_string()).collect();
        for (i, c) in self.columns.iter().enumerate() {
            heads.push(c.clone());
            if i > 0 && self.shares() {
                heads.push("% of previous".into());
            }
        }
        let rows = self
            .rows
            .iter()
            .map(|r| {
                let mut cells = self.key_cells(r);
                for (i, v) in r.values.iter().enumerate() {
                    cells.push(v.map_or("—".into(), |v| crate::units::format_value(v, &r.unit)));
                    if i > 0 && self.shares() {
                        cells.push(
                            r.of_previous(i)
                                .map_or("—".into(), crate::units::percent_of),
                        );
                    }
                }
                cells
            })
            .collect();
        (heads, rows)
    }

    /// What the table is, in a sentence.
    fn title(&self) -> String {
        match self.layout {
            Layout::Versions => format!(
                "Versions of {}: {} (the newest finished run of each label, per host)",
                self.suite,
                self.columns.join(" → ")
            ),
            Layout::Hosts => format!(
                "{} by host (each host's newest finished run: {})",
                self.suite,
                self.runs
                    .iter()
                    .map(|(_, h, id)| format!("#{id} on {h}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }

    /// What a cell is not: a verdict. Said under the table wherever it is read by
    /// people (the terminal, Markdown).
    fn caveat(&self) -> &'static str {
        match self.layout {
            Layout::Versions => "Each cell is one run (the median of its repetitions), not a verdict: runs of one version differ by the machine's noise (up to ±15% on a shared VM, docs/compare.md); `strainline compare L1 L2` says which changes are beyond it and how small a change it could have seen.",
            Layout::Hosts => "Each cell is one run (the median of its repetitions) on that host; hosts differ by more than their hardware (their load, their noise): a difference within a run's repeatability is not the host's.",
        }
    }

    /// The table in the terminal, columns aligned.
    pub fn terminal(&self) -> String {
        let (heads, rows) = self.cells();
        // No control character of a label or a host's name reaches the terminal.
        let printable = |r: Vec<String>| -> Vec<String> {
            r.iter()
                .map(|c| crate::units::one_line(c).into_owned())
                .collect()
        };
        let (heads, rows): (Vec<String>, Vec<Vec<String>>) =
            (printable(heads), rows.into_iter().map(printable).collect());
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
        let mut out = format!("{}\n", crate::units::one_line(&self.title()));
        out.push_str(&line(&heads));
        out.push('\n');
        for r in &rows {
            out.push_str(&line(r));
            out.push('\n');
        }
        out.push_str(self.caveat());
        out.push('\n');
        out
    }

    /// The table as Markdown.
    pub fn markdown(&self) -> String {
        use super::files::md;
        let (heads, rows) = self.cells();
        let runs = self
            .runs
            .iter()
            .map(|(c, h, id)| match self.layout {
                Layout::Versions => format!("#{id} ({c} on {h})"),
                Layout::Hosts => format!("#{id} ({h})"),
            })
            .collect::<Vec<_>>()
            .join(", ");
        // Labels, hosts and case names are the users': escaped as every report's are.
        let cells = |r: &[String]| r.iter().map(|c| md(c)).collect::<Vec<_>>().join(" | ");
        let mut out = format!(
            "## {}\n\nRuns {}.\n\n| {} |\n|{}|\n",
            md(&self.title()),
            md(&runs),
            cells(&heads),
            heads.iter().map(|_| "---").collect::<Vec<_>>().join("|")
        );
        for r in rows {
            out.push_str(&format!("| {} |\n", cells(&r)));
        }
        out.push_str(&format!("\n{}\n", self.caveat()));
        out
    }

    /// The table as CSV: raw values (in their stored unit), shares as ratios; a host
    /// column is named by the host alone.
    pub fn csv(&self) -> String {
        let mut heads: Vec<String> = self.keys().iter().map(|k| k.to_string()).collect();
        heads.push("unit".into());
        for (i, (c, h)) in self.column_runs().into_iter().enumerate() {
            heads.push(match self.layout {
                Layout::Versions => c.to_string(),
                Layout::Hosts => h.to_string(),
            });
            if i > 0 && self.shares() {
                heads.push(format!("{c}_of_previous"));
            }
        }
        use super::csv_text::{number, row, text};
        let mut out = String::new();
        row(&mut out, heads.iter().map(|h| text(h)));
        for r in &self.rows {
            let mut cells: Vec<String> = self.key_cells(r).iter().map(|k| text(k)).collect();
            cells.push(text(&r.unit));
            for (i, v) in r.values.iter().enumerate() {
                cells.push(v.map_or(String::new(), number));
                if i > 0 && self.shares() {
                    cells.push(
                        r.of_previous(i)
                            .map_or(String::new(), |s| format!("{s:.6}")),
                    );
                }
            }
            row(&mut out, cells);
        }
        out
    }

    /// Each column's name and host, in order (a version's host is any of its rows').
    fn column_runs(&self) -> Vec<(&str, &str)> {
        match self.layout {
            Layout::Versions => self.columns.iter().map(|c| (c.as_str(), "")).collect(),
            Layout::Hosts => self
                .runs
                .iter()
                .map(|(c, h, _)| (c.as_str(), h.as_str()))
                .collect(),
        }
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

    #[test]
    fn names_are_escaped_and_every_reading_says_a_cell_is_no_verdict() {
        let t = Table {
            layout: Layout::Versions,
            suite: "svc".into(),
            columns: vec!["a|b".into(), "<i>x</i>\u{1b}[2J".into()],
            runs: vec![("a|b".into(), "vm".into(), 1), ("x".into(), "vm".into(), 2)],
            rows: vec![Row {
                host: "vm".into(),
                case: "bench[n=8]".into(),
                metric: "throughput".into(),
                unit: "req/s".into(),
                values: vec![Some(100.0), Some(110.0)],
            }],
        };
        let md = t.markdown();
        assert!(md.contains("| a\\|b |"), "{md}");
        assert!(
            md.contains("&lt;i&gt;x&lt;/i&gt;") && !md.contains('\u{1b}'),
            "{md}"
        );
        assert!(md.contains("bench\\[n=8\\]"), "{md}");
        assert!(
            md.contains("110.0%") && md.contains("not a verdict"),
            "{md}"
        );
        let text = t.terminal();
        assert!(
            !text.contains('\u{1b}') && text.contains("not a verdict"),
            "{text}"
        );
        assert!(!t.csv().contains("verdict"));
    }
}
