//! The report formats a stored run is written in: one [`Exporter`] per format, one list
//! ([`EXPORTERS`]). `strainline report RUN --FORMAT PATH` and `strainline run --report
//! DIR` both go through it; a new format is a type here and its row in the list, which
//! gives `report`'s flag (name, value, help) and `run --report`'s help.

use std::path::{Path, PathBuf};

use super::run::RunData;
use crate::store::Store;

/// A report format.
pub trait Exporter: Sync {
    /// Its name, as its flag says it (`html` for `--html FILE`).
    fn name(&self) -> &'static str;
    /// Its flag's help (`strainline report --help`), one line without a final period
    /// (as clap shows a doc comment's).
    fn help(&self) -> &'static str;
    /// What the flag takes (`FILE`, or `DIR` for a format of several files).
    fn takes(&self) -> &'static str {
        "FILE"
    }
    /// Its file (or folder) in a report directory (`run --report DIR`).
    fn in_dir(&self) -> &'static str;
    /// Writes the run at `path`; returns the files written. `store` gives what a format
    /// draws beside itself (the HTML's flame graphs).
    fn write(
        &self,
        store: &Store,
        run: &mut RunData,
        path: &Path,
    ) -> crate::error::Result<Vec<PathBuf>>;
}

/// Writes run `r` in `exporter`'s format at `path`, the files (and the folder made for
/// them) readable as the user's umask says: a report is meant to be shared.
pub fn write_shared(
    exporter: &dyn Exporter,
    store: &Store,
    r: &mut RunData,
    path: &Path,
) -> crate::error::Result<Vec<PathBuf>> {
    let files = exporter.write(store, r, path)?;
    for f in &files {
        share(f)?;
    }
    Ok(files)
}

/// Every format, in the order the help and a report directory list them.
pub static EXPORTERS: &[&dyn Exporter] = &[&Html, &Markdown, &Junit, &Csv, &Json];

/// What a report directory holds, for `run --report DIR`'s help: each format's file,
/// the folders last (`report.html, summary.md, junit.xml, run.json and csv/`).
pub fn in_dir_listing() -> String {
    let files = EXPORTERS.iter().filter(|e| e.takes() == "FILE");
    let folders = EXPORTERS.iter().filter(|e| e.takes() != "FILE");
    let all: Vec<String> = files
        .map(|e| e.in_dir().to_string())
        .chain(folders.map(|e| format!("{}/", e.in_dir())))
        .collect();
    match all.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
        None => String::new(),
    }
}

/// The flags of every format, for a message: `--html FILE, --markdown FILE, …`.
pub fn flags() -> String {
    EXPORTERS
        .iter()
        .map(|e| format!("--{} {}", e.name(), e.takes()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A directory the user named for reports: one that cannot be made is theirs to fix.
/// One made here is shared as the reports in it are; an existing one is left as it is.
fn make_dir(dir: &Path) -> crate::error::Result<()> {
    let new = !dir.exists();
    std::fs::create_dir_all(dir).map_err(|e| {
        crate::Error::usage(format!("cannot create {}: {e}", dir.display())).because(e)
    })?;
    if new {
        share(dir)?;
    }
    Ok(())
}

/// `path` readable as the user's umask says ([`crate::os::file::share`]).
fn share(path: &Path) -> crate::error::Result<()> {
    crate::os::file::share(path).map_err(|e| {
        crate::Error::usage(format!("cannot share {}: {e}", path.display())).because(e)
    })
}

/// Writes one file, making its directory.
fn put(path: &Path, text: &str) -> crate::error::Result<Vec<PathBuf>> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        make_dir(dir)?;
    }
    std::fs::write(path, text).map_err(|e| crate::error::writing(path, e))?;
    Ok(vec![path.to_path_buf()])
}

/// The `html` format.
pub struct Html;

impl Exporter for Html {
    fn name(&self) -> &'static str {
        "html"
    }

    fn help(&self) -> &'static str {
        "One self-contained HTML file: verdict, metrics, gates and SVG charts per case"
    }

    fn in_dir(&self) -> &'static str {
        "report.html"
    }

    fn write(
        &self,
        store: &Store,
        r: &mut RunData,
        p: &Path,
    ) -> crate::error::Result<Vec<PathBuf>> {
        // Flame graphs travel with the report, drawn beside it from the stacks the store
        // holds: a report never copies a file a stored row names (a shared store's
        // writer could name any file).
        let dir = p.parent().unwrap_or(Path::new("."));
        let stem = p
            .file_stem()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let mut flames = Vec::new();
        for c in &mut r.cases {
            let Some(folded) = store.artifact(c.row.id, "cpu_stacks.folded")? else {
                continue;
            };
            let name = format!("{stem}-flame-{}.svg", c.row.id);
            make_dir(dir)?;
            let title = format!("CPU of the target during {}", c.row.name);
            let drawn = crate::monitor::profile::draw(
                &String::from_utf8_lossy(&folded),
                &title,
                &dir.join(&name),
            );
            if drawn.is_ok() {
                c.flamegraph_link = Some(name);
                flames.push(dir.join(c.flamegraph_link.as_deref().unwrap_or_default()));
            }
        }
        let mut files = put(p, &super::html::run_report(r))?;
        files.extend(flames);
        Ok(files)
    }
}

/// The `markdown` format.
pub struct Markdown;

impl Exporter for Markdown {
    fn name(&self) -> &'static str {
        "markdown"
    }

    fn help(&self) -> &'static str {
        "Markdown for a pull request comment or a CI step summary"
    }

    fn in_dir(&self) -> &'static str {
        "summary.md"
    }

    fn write(&self, _: &Store, r: &mut RunData, p: &Path) -> crate::error::Result<Vec<PathBuf>> {
        put(p, &super::files::markdown(r))
    }
}

/// The `junit` format.
pub struct Junit;

impl Exporter for Junit {
    fn name(&self) -> &'static str {
        "junit"
    }

    fn help(&self) -> &'static str {
        "JUnit XML: one test case per case and per gate"
    }

    fn in_dir(&self) -> &'static str {
        "junit.xml"
    }

    fn write(&self, _: &Store, r: &mut RunData, p: &Path) -> crate::error::Result<Vec<PathBuf>> {
        put(p, &super::files::junit(r))
    }
}

/// The `csv` format.
pub struct Csv;

impl Exporter for Csv {
    fn name(&self) -> &'static str {
        "csv"
    }

    fn help(&self) -> &'static str {
        "CSV files (metrics, time series, ramp steps, latency percentiles) into DIR"
    }

    fn takes(&self) -> &'static str {
        "DIR"
    }

    fn in_dir(&self) -> &'static str {
        "csv"
    }

    fn write(&self, _: &Store, r: &mut RunData, dir: &Path) -> crate::error::Result<Vec<PathBuf>> {
        make_dir(dir)?;
        super::files::csv(r, dir).map_err(|e| crate::error::writing(dir, e))
    }
}

/// The `json` format.
pub struct Json;

impl Exporter for Json {
    fn name(&self) -> &'static str {
        "json"
    }

    fn help(&self) -> &'static str {
        "The run, its cases, metrics and summaries as JSON"
    }

    fn in_dir(&self) -> &'static str {
        "run.json"
    }

    fn write(&self, _: &Store, r: &mut RunData, p: &Path) -> crate::error::Result<Vec<PathBuf>> {
        let cases: Vec<_> = r.cases.iter().map(|c| &c.row).collect();
        let doc = serde_json::json!({ "schema": "strainline.run.v1", "run": r.run, "why": r.verdict().1, "cases": cases });
        put(p, &serde_json::to_string_pretty(&doc)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_format_has_one_name_and_one_file_in_a_report_directory() {
        let names: Vec<&str> = EXPORTERS.iter().map(|e| e.name()).collect();
        assert_eq!(names, ["html", "markdown", "junit", "csv", "json"]);
        let files: std::collections::BTreeSet<&str> =
            EXPORTERS.iter().map(|e| e.in_dir()).collect();
        assert_eq!(files.len(), EXPORTERS.len());
        assert_eq!(
            flags(),
            "--html FILE, --markdown FILE, --junit FILE, --csv DIR, --json FILE"
        );
        assert_eq!(
            in_dir_listing(),
            "report.html, summary.md, junit.xml, run.json and csv/"
        );
    }
}
