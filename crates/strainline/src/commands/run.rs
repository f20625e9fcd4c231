//! `strainline run SUITE`: the arguments become [`runner::Options`], the runner runs the
//! suite, its outcome becomes the exit code; `--report DIR` writes every report after.

use crate::cli::{CheckArgs, RunArgs};
use crate::exit;
use crate::report::compare::Mode;
use crate::runner;
use crate::runner::paired::{run_paired, Pairing};
use crate::store::{Location, Store};

/// `strainline check SUITE`: everything `run` refuses before starting, without running.
/// A scenario file (`[[step]]`s and no `[[test]]`) is checked as `load --scenario`
/// reads it.
pub fn check(args: CheckArgs) -> crate::error::Result<i32> {
    if is_scenario(&args.suite) {
        let sc = crate::load::scenario::load(&args.suite)?;
        println!(
            "{}: valid — a scenario ({}), {}{}; use it with `strainline load URL --scenario FILE` or a test's scenario = \"FILE\"",
            crate::units::printable(&args.suite.display().to_string()),
            match (&sc.arrivals, &sc.sessions) {
                (Some(_), _) => "open model: [arrivals]".to_string(),
                (_, Some(_)) => "open model: [sessions]".to_string(),
                _ => crate::units::count(sc.clients, "client", "clients"),
            },
            crate::units::count(sc.steps.len() as u64, "step", "steps"),
            match &sc.data {
                None => String::new(),
                Some(d) => format!(
                    ", {} of data (read from disk as clients take them)",
                    crate::units::count(d.len(), "row", "rows"),
                ),
            }
        );
        return Ok(exit::PASSED);
    }
    let options = runner::Options {
        suite: args.suite.clone(),
        time_scale: 1.0,
        label: None,
        only: None,
        vars: args.vars,
        profile: false,
        agents: None,
        observer: crate::observe::quiet(),
    };
    let (suite, cases) = runner::prepare(&options)?;
    println!(
        "{}: valid — suite '{}', {}, {}",
        crate::units::printable(&args.suite.display().to_string()),
        crate::units::printable(&suite.name),
        crate::units::count(suite.tests.len() as u64, "test", "tests"),
        crate::units::count(cases.len() as u64, "case", "cases")
    );
    Ok(exit::PASSED)
}

/// Whether the file at `path` is a scenario rather than a suite: it has `[[step]]`s and
/// no `[[test]]` (read as TOML; anything unreadable is left to the suite's errors).
fn is_scenario(path: &std::path::Path) -> bool {
    let Ok(text) = crate::os::file::read_text(path, "suite") else {
        return false;
    };
    toml::from_str::<toml::Table>(&text)
        .is_ok_and(|t| t.contains_key("step") && !t.contains_key("test"))
}

pub fn run(store_location: &Location, args: RunArgs) -> crate::error::Result<i32> {
    let options = runner::Options {
        suite: args.suite.clone(),
        time_scale: args.time_scale,
        label: args.label.clone(),
        only: args.only.clone(),
        vars: args.vars.clone(),
        profile: args.profile,
        agents: super::load::fleet(&args.agents, None)?,
        observer: crate::live::feed(),
    };
    let _export = crate::live::export::start(&args.export.targets())?;
    let p = &args.pairing;
    if !p.baseline.is_empty() || !p.candidate.is_empty() || p.baseline_ref.is_some() {
        return paired(store_location, options, &args);
    }
    let live = crate::live::start(!args.no_tui, &format!("run {}", args.suite.display()));
    let outcome = if live.is_some() {
        // The view draws on the terminal; the plain output is printed when it ends.
        let mut tee = crate::live::Tee::default();
        let outcome = runner::run(store_location, &options, &mut tee);
        drop(live);
        std::io::Write::write_all(&mut std::io::stdout().lock(), &tee.kept)?;
        outcome
    } else {
        runner::run(store_location, &options, &mut std::io::stdout().lock())
    }?;
    let mut out = std::io::stdout().lock();
    if let Some(dir) = &args.report {
        let store = Store::open(store_location)?;
        let files = super::report::all_into(&store, outcome.run_id, dir)?;
        use std::io::Write;
        writeln!(out, "Reports: {} files in {}", files.len(), dir.display())?;
    }
    Ok(outcome.ending.exit_code())
}

/// `run SUITE --baseline … --candidate …` (or `--baseline-ref REF`): a paired session of
/// two versions; exit 1 when a metric regressed, else the suite's own code.
fn paired(
    store_location: &Location,
    options: runner::Options,
    args: &RunArgs,
) -> crate::error::Result<i32> {
    let a = &args.pairing;
    if a.baseline_ref.is_none() && (a.baseline.is_empty() || a.candidate.is_empty()) {
        return Err(crate::Error::usage(
            "a paired session needs both versions: --baseline NAME=VALUE and --candidate NAME=VALUE, or --baseline-ref REF (the working tree against a git ref)",
        ));
    }
    // `--baseline-ref`: the ref checked out beside the working tree, for the session.
    let tree = match &a.baseline_ref {
        Some(rev) => {
            let here = std::env::current_dir()?;
            let wt = crate::runner::worktree::Worktree::add(
                &here,
                rev,
                &store_location.work_dir().join("worktrees"),
            )?;
            println!(
                "baseline: {rev} ({}), checked out in {}; candidate: the working tree",
                &wt.commit[..12.min(wt.commit.len())],
                wt.path.display()
            );
            Some(wt)
        }
        None => None,
    };
    let seed = a.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    });
    let pairing = Pairing {
        baseline: a.baseline.clone(),
        candidate: a.candidate.clone(),
        baseline_label: a.baseline_label.clone(),
        candidate_label: args.label.clone().unwrap_or_else(|| "candidate".into()),
        mode: match a.mode.as_str() {
            "sequential" => Some(Mode::Sequential),
            "duet" => Some(Mode::Duet),
            "interleaved" => Some(Mode::Interleaved),
            _ => None,
        },
        split_cpus: a.duet_cpus == "split",
        min_pairs: a.min_pairs as usize,
        // With a budget, an undecided case goes on until its share of it is spent: the
        // pairs cap is then only a safety bound.
        max_pairs: match (a.pairs, a.budget) {
            (Some(n), _) => n as usize,
            (None, Some(_)) => crate::analysis::paired::MAX_PAIRS,
            (None, None) => 20,
        },
        budget: a.budget,
        seed,
        bands: a.bands.clone(),
        alpha: a.alpha,
        baseline_tree: tree.as_ref().map(|wt| wt.tree()),
    };
    let outcome = run_paired(
        store_location,
        &options,
        &pairing,
        &mut std::io::stdout().lock(),
    )?;
    if let Some(dir) = &args.report {
        let store = Store::open(store_location)?;
        let files = super::report::all_into(&store, outcome.candidate_run, dir)?;
        println!(
            "Reports of the candidate's run: {} files in {}",
            files.len(),
            dir.display()
        );
    }
    let code = outcome.ending.exit_code();
    Ok(exit::combine(
        code,
        if outcome.regressed {
            exit::FAILED
        } else {
            exit::PASSED
        },
    ))
}
