//! `strainline report RUN`: reads a stored run once and writes the formats asked for
//! through their exporters (`report::export`); `strainline run --report DIR` writes every
//! format for the run it just made. `report SUITE --versions L1,L2,…` and `--by-host` lay
//! out the suite's runs side by side (`report::tables`).

use std::path::{Path, PathBuf};

use crate::exit;
use crate::report::export::{self, Exporter};
use crate::report::run as data;
use crate::report::tables;
use crate::store::{Location, Store, StoreError};
use crate::Error;
use clap::Args;

#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  strainline report 12 --html report.html\n  \
                  strainline report v0.8.0 --junit junit.xml --markdown summary.md --csv csv/\n  \
                  strainline run suite.toml --report reports/     # all of them, at the end of a run\n  \
                  strainline report my-service --versions v0.6.0,v0.7.0,v0.8.0 --markdown versions.md\n  \
                  strainline report my-service --by-host --label v0.8.0 --csv hosts.csv"
)]
pub struct ReportArgs {
    /// The run: its id (12 or #12), label (the newest run with it), `latest`, or
    /// `latest~N` / `LABEL~N` (N runs before the newest); with --versions, the suite.
    pub run: String,
    /// A table of the suite's versions, oldest first: per host, case and key metric,
    /// each label's value (its newest finished run) and its % of the previous one.
    /// Printed, or written with --markdown / --csv (a file).
    #[arg(long, value_name = "L1,L2,…", value_delimiter = ',')]
    pub versions: Vec<String>,
    /// A table of the suite on each host it ran on: per case and key metric, each host's
    /// value (its newest finished run; with --label, of that label), the hosts' cores and
    /// memory in the heads. Printed, or written with --markdown / --csv.
    #[arg(long, conflicts_with = "versions")]
    pub by_host: bool,
    /// With --by-host: only runs with this label (e.g. the version measured everywhere).
    #[arg(long, requires = "by_host")]
    pub label: Option<String>,
    /// With --versions or --by-host: the metrics to show (default: throughput,
    /// latency_p99, error_rate, ceiling, peak_rss, cpu_per_op, and a soak's
    /// capacity_ideal_clients and capacity_safe_clients by host, where a case has them).
    #[arg(long, value_name = "M1,M2,…", value_delimiter = ',')]
    pub metrics: Vec<String>,
    /// One self-contained HTML file: verdict, metrics, gates and SVG charts per case.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Markdown for a pull request comment or a CI step summary.
    #[arg(long, value_name = "FILE")]
    pub markdown: Option<PathBuf>,
    /// JUnit XML: one test case per case and per gate.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// CSV files (metrics, time series, ramp steps, latency percentiles) into DIR.
    #[arg(long, value_name = "DIR")]
    pub csv: Option<PathBuf>,
    /// The run, its cases, metrics and summaries as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

impl ReportArgs {
    /// The formats asked for, by their exporters' names (`report::export`), with where.
    pub fn asked(&self) -> Vec<(&'static str, &PathBuf)> {
        [
            ("html", &self.html),
            ("markdown", &self.markdown),
            ("junit", &self.junit),
            ("csv", &self.csv),
            ("json", &self.json),
        ]
        .into_iter()
        .filter_map(|(name, path)| Some((name, path.as_ref()?)))
        .collect()
    }
}

/// Writes run `key` in each of `asked`'s formats; returns the files written.
fn write(
    store: &Store,
    key: &str,
    asked: &[(&dyn Exporter, PathBuf)],
) -> crate::error::Result<Vec<String>> {
    let mut r = data::load(store, key).map_err(|e| match e {
        StoreError::NoSuchRun(_) => crate::Error::usage(e.to_string()),
        e => e.into(),
    })?;
    let mut written = Vec::new();
    for (exporter, path) in asked {
        for f in export::write_shared(*exporter, store, &mut r, path)? {
            written.push(f.display().to_string());
        }
    }
    Ok(written)
}

/// Writes the reports `args` asks for; returns the files written.
pub fn write_reports(store: &Store, args: &ReportArgs) -> crate::error::Result<Vec<String>> {
    let asked: Vec<(&dyn Exporter, PathBuf)> = args
        .asked()
        .into_iter()
        .map(|(name, path)| {
            let e = export::named(name).expect("every report flag has its exporter");
            (e, path.clone())
        })
        .collect();
    write(store, &args.run, &asked)
}

/// `report SUITE --versions L1,L2,…` or `--by-host`: the table, printed or written as
/// Markdown and CSV.
fn table(location: &Location, args: &ReportArgs) -> crate::error::Result<i32> {
    let which = if args.by_host {
        "--by-host"
    } else {
        "--versions"
    };
    if args.html.is_some() || args.junit.is_some() || args.json.is_some() {
        return Err(Error::usage(format!(
            "{which} writes its table to the terminal, --markdown FILE or --csv FILE"
        )));
    }
    let store = Store::open(location).map_err(|e| crate::Error::usage(e.to_string()))?;
    let metrics = (!args.metrics.is_empty()).then_some(&args.metrics[..]);
    let table = if args.by_host {
        tables::by_host(&store, &args.run, args.label.as_deref(), metrics)?
    } else {
        tables::versions(&store, &args.run, &args.versions, metrics)?
    };
    if table.rows.is_empty() {
        return Err(Error::usage(format!(
            "{which}: the runs of '{}' have none of the metrics asked for",
            args.run
        )));
    }
    let files = [(&args.markdown, table.markdown()), (&args.csv, table.csv())];
    if files.iter().all(|(p, _)| p.is_none()) {
        print!("{}", table.terminal());
    }
    for (path, text) in files {
        if let Some(path) = path {
            std::fs::write(path, text).map_err(|e| crate::error::writing(path, e))?;
            crate::os::file::share(path).map_err(|e| crate::error::writing(path, e))?;
            eprintln!("wrote {}", path.display());
        }
    }
    Ok(exit::PASSED)
}

pub fn run(location: &Location, args: ReportArgs) -> crate::error::Result<i32> {
    if !args.versions.is_empty() || args.by_host {
        return table(location, &args);
    }
    if !args.metrics.is_empty() {
        return Err(Error::usage(
            "--metrics chooses the rows of --versions or --by-host",
        ));
    }
    if args.asked().is_empty() {
        return Err(Error::usage(format!(
            "say which reports to write: {}",
            export::flags().replace(", --json", " or --json")
        )));
    }
    let store = Store::open(location).map_err(|e| crate::Error::usage(e.to_string()))?;
    for f in write_reports(&store, &args)? {
        eprintln!("wrote {f}");
    }
    Ok(exit::PASSED)
}

/// Every format, into one directory, for `strainline run --report DIR`.
pub fn all_into(store: &Store, run_id: i64, dir: &Path) -> crate::error::Result<Vec<String>> {
    let asked: Vec<(&dyn Exporter, PathBuf)> = export::EXPORTERS
        .iter()
        .map(|e| (*e, dir.join(e.in_dir())))
        .collect();
    write(store, &run_id.to_string(), &asked)
}
