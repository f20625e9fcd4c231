//! `strainline report RUN`: reads a stored run once and writes the formats asked for;
//! `strainline run --report DIR` calls it for the run it just made.

use std::path::Path;

use crate::cli::ReportArgs;
use crate::exit;
use crate::report::{files, html, run as data};
use crate::store::{Location, Store, StoreError};
use crate::Error;

/// A directory the user named for reports: one that cannot be made is theirs to fix.
fn make_dir(dir: &Path) -> crate::error::Result<()> {
    std::fs::create_dir_all(dir)
        .map_err(|e| crate::Error::usage(format!("cannot create {}: {e}", dir.display())))
}

fn write(path: &Path, text: &str) -> crate::error::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        make_dir(dir)?;
    }
    std::fs::write(path, text)
        .map_err(|e| crate::Error::usage(format!("cannot write {}: {e}", path.display())))
}

/// Writes the reports `args` asks for; returns the files written.
pub fn write_reports(store: &Store, args: &ReportArgs) -> crate::error::Result<Vec<String>> {
    let mut r = data::load(store, &args.run).map_err(|e| match e {
        StoreError::NoSuchRun(_) => crate::Error::usage(e.to_string()),
        e => e.into(),
    })?;
    let mut written = Vec::new();
    let mut put = |path: &Path, text: String| -> crate::error::Result<()> {
        write(path, &text)?;
        written.push(path.display().to_string());
        Ok(())
    };
    if let Some(p) = &args.html {
        // Flame graphs travel with the report, drawn beside it from the stacks the store
        // holds: a report never copies a file a stored row names (a shared store's
        // writer could name any file).
        let dir = p.parent().unwrap_or(Path::new("."));
        let stem = p
            .file_stem()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
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
            }
        }
        put(p, html::run_report(&r))?;
    }
    if let Some(p) = &args.markdown {
        put(p, files::markdown(&r))?;
    }
    if let Some(p) = &args.junit {
        put(p, files::junit(&r))?;
    }
    if let Some(p) = &args.json {
        let cases: Vec<_> = r.cases.iter().map(|c| &c.row).collect();
        put(
            p,
            serde_json::to_string_pretty(&serde_json::json!({
                "schema": "strainline.run.v1", "run": r.run, "cases": cases
            }))?,
        )?;
    }
    if let Some(dir) = &args.csv {
        let csv = files::csv(&r, dir).map_err(|e| {
            crate::Error::usage(format!("cannot write into {}: {e}", dir.display()))
        })?;
        for f in csv {
            written.push(f.display().to_string());
        }
    }
    Ok(written)
}

pub fn run(location: &Location, args: ReportArgs) -> crate::error::Result<i32> {
    if args.html.is_none()
        && args.markdown.is_none()
        && args.junit.is_none()
        && args.csv.is_none()
        && args.json.is_none()
    {
        return Err(Error::usage("say which reports to write: --html FILE, --markdown FILE, --junit FILE, --csv DIR or --json FILE",
        ));
    }
    let store = Store::open(location).map_err(|e| crate::Error::usage(e.to_string()))?;
    for f in write_reports(&store, &args)? {
        eprintln!("wrote {f}");
    }
    Ok(exit::PASSED)
}

/// The full set, into one directory, for `strainline run --report DIR`.
pub fn all_into(store: &Store, run_id: i64, dir: &Path) -> crate::error::Result<Vec<String>> {
    write_reports(
        store,
        &ReportArgs {
            run: run_id.to_string(),
            html: Some(dir.join("report.html")),
            markdown: Some(dir.join("summary.md")),
            junit: Some(dir.join("junit.xml")),
            csv: Some(dir.join("csv")),
            json: Some(dir.join("run.json")),
        },
    )
}
