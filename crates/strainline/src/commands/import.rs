//! `strainline import FORMAT FILE...`: another tool's results read ([`crate::import`])
//! and stored as one run, printed as a table of what was stored.

use crate::error::Category;
use crate::exit;
use crate::import::{self, Format};
use crate::store::{Location, Status, Store};
use crate::units::format_value;
use clap::Args;
use std::path::PathBuf;

#[derive(Debug, Args)]
#[command(
    after_help = "FORMAT: auto, hyperfine, criterion, google-benchmark, jmh, go, \
    pytest-benchmark, benchmarkdotnet, junit.\n\n\
    Examples:\n  \
    hyperfine --export-json bench.json './app' && strainline import hyperfine bench.json --label main\n  \
    strainline import criterion target/criterion --label pr-42\n  \
    go test -bench . -count 10 -benchmem > go.txt && strainline import auto go.txt\n  \
    strainline compare main pr-42"
)]
pub struct ImportArgs {
    /// The tool's format, or `auto` to detect it from each file.
    pub format: String,
    /// Result files (a directory for Criterion: its `new/sample.json` files are read).
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Label of the run (e.g. the branch or version), for compare and history.
    #[arg(long)]
    pub label: Option<String>,
    /// The suite the run belongs to (compare --baseline pairs runs of one suite);
    /// default: the format's name.
    #[arg(long)]
    pub suite: Option<String>,
}

pub fn run(location: &Location, args: ImportArgs) -> crate::error::Result<i32> {
    let format = match args.format.as_str() {
        "auto" => None,
        f => Some(Format::parse(f).ok_or_else(|| {
            crate::Error::usage(format!(
                "import: unknown format '{f}' (expected auto, {})",
                Format::ALL.map(Format::name).join(", ")
            ))
        })?),
    };
    let imported = import::read_all(format, &args.files)?;
    let store = Store::open(location).usage()?;
    let formats: Vec<&str> = {
        let mut f: Vec<&str> = imported.files.iter().map(|(_, f)| f.name()).collect();
        f.dedup();
        f
    };
    let suite = args.suite.clone().unwrap_or_else(|| formats.join("+"));
    let command = format!(
        "import {} {}",
        formats.join("+"),
        imported
            .files
            .iter()
            .map(|(p, _)| p.display().to_string())
            .collect::<Vec<_>>()
            .join(" ")
    );
    let run_id = store.begin_run_here("import", args.label.as_deref(), Some(&suite), &command)?;
    let n = imported.files.len();
    println!(
        "Imported {} ({n} file{}) as run #{run_id}{}",
        formats.join(", "),
        if n == 1 { "" } else { "s" },
        args.label
            .as_deref()
            .map(|l| format!(" [{l}]"))
            .unwrap_or_default()
    );
    let width = imported
        .benches
        .iter()
        .map(|b| b.name.chars().count())
        .max()
        .unwrap_or(0)
        .clamp(9, 60);
    println!(
        "  {:<width$}  {:>7}  median of each metric",
        "benchmark", "samples"
    );
    let mut failed = 0;
    for b in &imported.benches {
        for (rep, sample) in b.samples.iter().enumerate() {
            let case = store.begin_case(run_id, &b.name, "import", None, rep as u32)?;
            let summary = serde_json::json!({ "imported": suite, "sample": rep });
            store.finish_case(case, b.status.clone(), sample, &[], &summary)?;
        }
        if b.samples.is_empty() {
            // A failed benchmark that produced no figure is still a case.
            let case = store.begin_case(run_id, &b.name, "import", None, 0)?;
            store.finish_case(case, b.status.clone(), &[], &[], &serde_json::json!({}))?;
        }
        failed += usize::from(b.status != Status::Passed);
        let mut names: Vec<(&str, &str)> = Vec::new();
        for m in b.samples.iter().flatten() {
            if !names.iter().any(|(n, _)| *n == m.name) {
                names.push((&m.name, &m.unit));
            }
        }
        let medians: Vec<String> = names
            .iter()
            .map(|(n, unit)| {
                let xs: Vec<f64> = b
                    .samples
                    .iter()
                    .flatten()
                    .filter(|m| m.name == *n)
                    .map(|m| m.value)
                    .collect();
                let median = crate::analysis::stats::median(&xs).expect("a metric seen once");
                format!("{n} {}", format_value(median, unit))
            })
            .collect();
        println!(
            "  {:<width$}  {:>7}  {}{}",
            crate::units::printable(&b.name),
            b.samples.len(),
            medians.join(", "),
            if b.status == Status::Passed {
                ""
            } else {
                "  FAILED"
            }
        );
    }
    let status = if failed > 0 {
        Status::Failed
    } else {
        Status::Passed
    };
    store.finish_run(run_id, status, Some(0), &[])?;
    println!(
        "  {} benchmarks stored in {}; compare with `strainline compare BASELINE {}`",
        imported.benches.len(),
        store.location(),
        args.label.as_deref().unwrap_or(&format!("{run_id}"))
    );
    Ok(exit::PASSED)
}
