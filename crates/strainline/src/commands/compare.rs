//! `strainline compare BASELINE CANDIDATE`: judges both versions' stored runs
//! ([`crate::report::judged`]) and reports ([`crate::report::compare`]).

use std::io::Write;

use crate::commands::flags::{parse_band, parse_probability};
use crate::error::Category;
use crate::exit;
use crate::report::compare as report;
use crate::report::judged::{compare, Ask};
use crate::store::{case_key, Location, RunRow, Store};
use clap::Args;
use std::path::PathBuf;

#[derive(Debug, Args)]
#[command(
    after_help = "BASELINE and CANDIDATE are run ids (12 or #12) or labels; a label stands for \
                  every run with that label, their repetitions pooled. `latest` is the newest \
                  run, `latest~1` the one before it, `LABEL~N` the N-th before the newest with \
                  that label.\n\n\
                  Examples:\n  strainline compare latest~1 latest\n  \
                  strainline compare v0.7.0 v0.8.0\n  \
                  strainline compare 12 15 --band latency_p99=50% --markdown compare.md\n  \
                  strainline compare --baseline main latest --markdown comment.md\n\n\
                  Exit codes: 0 no regression · 1 a metric regressed · 2 nothing to compare, or usage."
)]
pub struct CompareArgs {
    /// BASELINE CANDIDATE (run ids or labels); with --baseline, only CANDIDATE
    /// (default: latest).
    #[arg(value_name = "RUN", num_args = 0..=2)]
    pub versions: Vec<String>,
    /// Compare with the newest run of this label (e.g. main) in the candidate's suite,
    /// or else with the newest run of the git merge-base of this branch and HEAD.
    #[arg(long, value_name = "LABEL-or-BRANCH")]
    pub baseline: Option<String>,
    /// Tolerance band for a metric (repeatable): METRIC=PCT, or default=PCT for all.
    /// Regressed needs the change beyond it. Overrides the suite's `[compare]` bands.
    #[arg(long = "band", value_name = "METRIC=PCT", value_parser = parse_band)]
    pub bands: Vec<(String, f64)>,
    /// Significance level for the Benjamini–Hochberg adjusted p-value.
    #[arg(long, value_name = "P", value_parser = parse_probability)]
    pub alpha: Option<f64>,
    /// Compare runs made on different hosts (the report says so at the top).
    #[arg(long)]
    pub allow_env_mismatch: bool,
    /// Compare runs measured differently — another --time-scale, duration, rate,
    /// connection count, matrix or strainline version (the report starts with it).
    #[arg(long)]
    pub allow_shape_mismatch: bool,
    /// Write the comparison as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write the comparison as Markdown (a pull request comment, a CI step summary).
    #[arg(long, value_name = "FILE")]
    pub markdown: Option<PathBuf>,
    /// Write the comparison as a self-contained HTML page with its bars.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
}

pub fn run(location: &Location, args: CompareArgs) -> crate::error::Result<i32> {
    let store = Store::open(location).usage()?;
    let (baseline_key, candidate) = match (&args.baseline, args.versions.as_slice()) {
        (None, [b, c]) => (b.clone(), c.clone()),
        (Some(_), []) => (String::new(), "latest".to_string()),
        (Some(_), [c]) => (String::new(), c.clone()),
        (None, _) => return Err(crate::Error::usage("compare: give BASELINE and CANDIDATE (run ids or labels), or --baseline LABEL [CANDIDATE]")),
        (Some(_), _) => return Err(crate::Error::usage("compare: with --baseline, give only the CANDIDATE")),
    };
    let judged = compare(
        &store,
        &Ask {
            baseline_key,
            baseline: args.baseline.clone(),
            candidate,
            bands: args.bands.clone(),
            alpha: args.alpha,
            allow_env_mismatch: args.allow_env_mismatch,
            allow_shape_mismatch: args.allow_shape_mismatch,
        },
    )?;
    let mut comparison = judged.comparison;
    if let Some(path) = &args.html {
        comparison.flame_diff =
            flame_difference(&store, &judged.baseline, &judged.candidate, path)?;
    }
    let mut out = crate::units::Printable(std::io::stdout().lock());
    super::quiet_pipe(report::write_table(&mut out, &comparison).and_then(|()| out.flush()))?;
    if let Some(path) = &args.json {
        write_file(path, &report::to_json(&comparison))?;
    }
    if let Some(path) = &args.markdown {
        write_file(path, &report::to_markdown(&comparison))?;
    }
    if let Some(path) = &args.html {
        let overlays = crate::report::timeline::overlays(&store, &comparison);
        write_file(
            path,
            &crate::report::html::comparison_over_time(&comparison, &overlays),
        )?;
    }
    Ok(if comparison.verdict == "regressed" {
        exit::FAILED
    } else {
        exit::PASSED
    })
}

/// The folded CPU stacks of the first case of `runs` that has them: `(case key, stacks)`.
fn stacks(
    store: &Store,
    runs: &[RunRow],
    key: Option<&str>,
) -> crate::error::Result<Option<(String, String)>> {
    for run in runs {
        for case in store.cases(run.id)? {
            let k = case_key(&case.name, &case.test_kind).to_string();
            if key.is_some_and(|want| want != k) {
                continue;
            }
            if let Some(data) = store.artifact(case.id, "cpu_stacks.folded")? {
                return Ok(Some((k, String::from_utf8_lossy(&data).into_owned())));
            }
        }
    }
    Ok(None)
}

/// A differential flame graph beside the HTML, when both versions were profiled.
fn flame_difference(
    store: &Store,
    base: &[RunRow],
    cand: &[RunRow],
    html: &std::path::Path,
) -> crate::error::Result<Option<String>> {
    let Some((key, after)) = stacks(store, cand, None)? else {
        return Ok(None);
    };
    let Some((_, before)) = stacks(store, base, Some(&key))? else {
        return Ok(None);
    };
    let name = format!(
        "{}-flame-diff.svg",
        html.file_stem().unwrap_or_default().to_string_lossy()
    );
    let svg = html
        .parent()
        .unwrap_or(std::path::Path::new("."))
        .join(&name);
    crate::monitor::profile::draw_difference(
        &before,
        &after,
        &format!("CPU of {key}: candidate against baseline"),
        &svg,
    )?;
    Ok(Some(name))
}

fn write_file(path: &std::path::Path, text: &str) -> crate::error::Result<()> {
    std::fs::write(path, text).map_err(|e| crate::error::writing(path, e))
}
