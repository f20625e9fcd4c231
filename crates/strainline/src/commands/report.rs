//! `strainline report RUN`: reads a stored run once and writes the formats asked for
//! through their exporters (`report::export`); `strainline run --report DIR` writes every
//! format for the run it just made. `report SUITE --versions L1,L2,…` and `--by-host` lay
//! out the suite's runs side by side (`report::tables`).

use std::path::{Path, PathBuf};

use crate::cli::ReportArgs;
use crate::error::Category;
use crate::exit;
use crate::report::export::{self, Exporter};
use crate::report::run as data;
use crate::report::tables;
use crate::store::{Location, Store};
use crate::Error;

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
