//! `strainline report RUN`: reads a stored run once and writes the formats asked for
//! through their exporters (`report::export`); `strainline run --report DIR` writes every
//! format for the run it just made. `report SUITE --versions L1,L2,…` and `--by-host` lay
//! out the suite's runs side by side (`report::tables`).

use std::path::{Path, PathBuf};

use crate::error::Category;
use crate::exit;
use crate::report::export::{self, Exporter};
use crate::report::run as data;
use crate::report::tables;
use crate::store::{Location, Store};
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
    // The formats to write: a `--NAME PATH` flag per exporter.
    #[command(flatten)]
    pub formats: Formats,
}

/// The report formats asked for, each an exporter of [`export::EXPORTERS`] with where to
/// write it. Every row of that table is a `--NAME PATH` flag here, its value name and
/// help the row's: a format is named in one place.
#[derive(Clone, Default)]
pub struct Formats(Vec<(&'static dyn Exporter, PathBuf)>);

impl Formats {
    /// These formats and `exporter`'s at `path`.
    pub fn with(mut self, exporter: &'static dyn Exporter, path: PathBuf) -> Formats {
        self.0.push((exporter, path));
        self
    }

    /// The formats asked for, in the table's order, with where.
    pub fn asked(&self) -> &[(&'static dyn Exporter, PathBuf)] {
        &self.0
    }

    /// Where `exporter`'s format is to be written, if it was asked for.
    pub fn path(&self, exporter: &dyn Exporter) -> Option<&PathBuf> {
        self.0
            .iter()
            .find(|(e, _)| e.name() == exporter.name())
            .map(|(_, p)| p)
    }
}

impl std::fmt::Debug for Formats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map()
            .entries(self.0.iter().map(|(e, p)| (e.name(), p)))
            .finish()
    }
}

impl clap::FromArgMatches for Formats {
    fn from_arg_matches(m: &clap::ArgMatches) -> Result<Formats, clap::Error> {
        let mut formats = Formats::default();
        formats.update_from_arg_matches(m)?;
        Ok(formats)
    }

    fn update_from_arg_matches(&mut self, m: &clap::ArgMatches) -> Result<(), clap::Error> {
        for e in export::EXPORTERS {
            if let Some(path) = m.get_one::<PathBuf>(e.name()) {
                self.0.retain(|(x, _)| x.name() != e.name());
                self.0.push((*e, path.clone()));
            }
        }
        Ok(())
    }
}

impl clap::Args for Formats {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        export::EXPORTERS.iter().fold(cmd, |cmd, e| {
            cmd.arg(
                clap::Arg::new(e.name())
                    .long(e.name())
                    .value_name(e.takes())
                    .help(e.help())
                    .action(clap::ArgAction::Set)
                    .value_parser(clap::value_parser!(PathBuf)),
            )
        })
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Formats::augment_args(cmd)
    }
}

/// Writes run `key` in each of `asked`'s formats; returns the files written.
fn write(
    store: &Store,
    key: &str,
    asked: &[(&dyn Exporter, PathBuf)],
) -> crate::error::Result<Vec<String>> {
    // A run not in the store is the user's to fix (exit 2), as `From<StoreError>` says.
    let mut r = data::load(store, key)?;
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
    write(store, &args.run, args.formats.asked())
}

/// `report SUITE --versions L1,L2,…` or `--by-host`: the table, printed or written as
/// Markdown and CSV.
fn table(location: &Location, args: &ReportArgs) -> crate::error::Result<i32> {
    let which = if args.by_host {
        "--by-host"
    } else {
        "--versions"
    };
    let markdown = args.formats.path(&export::Markdown);
    let csv = args.formats.path(&export::Csv);
    let tabled = [export::Markdown.name(), export::Csv.name()];
    if (args.formats.asked().iter()).any(|(e, _)| !tabled.contains(&e.name())) {
        return Err(Error::usage(format!(
            "{which} writes its table to the terminal, --markdown FILE or --csv FILE"
        )));
    }
    let store = Store::open(location).usage()?;
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
    let files = [(markdown, table.markdown()), (csv, table.csv())];
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
    if args.formats.asked().is_empty() {
        return Err(Error::usage(format!(
            "say which reports to write: {}",
            export::flags().replace(", --json", " or --json")
        )));
    }
    let store = Store::open(location).usage()?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, Parser};

    /// `strainline report`'s flags alone.
    #[derive(Parser)]
    struct Report {
        #[command(flatten)]
        args: ReportArgs,
    }

    #[test]
    fn every_exporter_is_a_flag_and_every_flag_is_asked() {
        let cmd = Report::command();
        for e in export::EXPORTERS {
            let arg = cmd
                .get_arguments()
                .find(|a| a.get_long() == Some(e.name()))
                .unwrap_or_else(|| panic!("no --{}", e.name()));
            let takes: Vec<&str> = arg
                .get_value_names()
                .unwrap()
                .iter()
                .map(|v| v.as_str())
                .collect();
            assert_eq!(takes, [e.takes()]);
            assert_eq!(arg.get_help().unwrap().to_string(), e.help());
        }
        let mut argv = vec!["report".to_string(), "12".into()];
        let mut all = Vec::new();
        for e in export::EXPORTERS {
            let path = Path::new("out").join(e.in_dir());
            argv.extend([format!("--{}", e.name()), path.display().to_string()]);
            all.push((e.name(), path));
        }
        let formats = Report::try_parse_from(&argv).unwrap().args.formats;
        let asked: Vec<_> = (formats.asked().iter())
            .map(|(e, p)| (e.name(), p.clone()))
            .collect();
        assert_eq!(asked, all);
        assert_eq!(
            formats.path(&export::Csv),
            Some(&Path::new("out").join("csv"))
        );
        let none = Report::try_parse_from(["report", "12"])
            .unwrap()
            .args
            .formats;
        assert!(none.asked().is_empty() && none.path(&export::Html).is_none());
    }
}
