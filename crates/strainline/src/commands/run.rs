//! `strainline run SUITE`: the arguments become [`runner::Options`], the runner runs the
//! suite, its outcome becomes the exit code; `--report DIR` writes every report after.

use crate::commands::flags::{
    in_range, parse_band, parse_duration, parse_probability, parse_var, ExportArgs,
};
use crate::commands::load::AgentsArgs;
use crate::exit;
use crate::limits;
use crate::report::compare::Mode;
use crate::runner;
use crate::runner::paired::{run_paired, Pairing};
use crate::store::{Location, Store};
use clap::Args;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The suite file (TOML).
    pub suite: PathBuf,
    /// Variables the run would get with --var (so their placeholders count as set).
    #[arg(long = "var", value_name = "NAME=VALUE", value_parser = parse_var)]
    pub vars: Vec<(String, String)>,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The suite file (TOML).
    pub suite: PathBuf,
    /// Multiply every duration of the suite (0.01 runs a 2 h soak in 72 s).
    #[arg(long, default_value_t = 1.0, value_parser = parse_time_scale)]
    pub time_scale: f64,
    /// A label for the run in the store (e.g. the version under test).
    #[arg(long)]
    pub label: Option<String>,
    /// Only the test with this name.
    #[arg(long)]
    pub only: Option<String>,
    /// Set a variable for `{{NAME}}` in the target and workloads (repeatable), e.g. the
    /// build under test: --var server=./v0.8.0/server. Not part of case names, so runs
    /// of two versions compare case by case.
    #[arg(long = "var", value_name = "NAME=VALUE", value_parser = parse_var)]
    pub vars: Vec<(String, String)>,
    /// Record the target's CPU stacks with perf during every case (as `profile = true`
    /// on each test) and render flame graphs.
    #[arg(long)]
    pub profile: bool,
    // After the run, write every report into DIR: each format's file, as the exporters'
    // table says.
    #[arg(long, value_name = "DIR", help = format!("After the run, write every report into DIR: {}", crate::report::export::in_dir_listing()))]
    pub report: Option<PathBuf>,
    /// No live view on a terminal: plain output as it happens (as in CI logs).
    #[arg(long)]
    pub no_tui: bool,
    /// Every HTTP test's load from these agents (the target still runs here: its URL
    /// must be one the agents reach).
    #[command(flatten)]
    pub export: ExportArgs,
    #[command(flatten)]
    pub agents: AgentsArgs,
    #[command(flatten)]
    pub pairing: Box<PairingArgs>,
}

/// Two versions in one paired session: `--baseline` and `--candidate` each set the
/// `{{NAME}}` values of one version.
#[derive(Debug, Args)]
#[command(next_help_heading = "Two versions in one session")]
#[command(group = clap::ArgGroup::new("paired").multiple(true).args(["baseline", "candidate", "baseline_ref"]))]
pub struct PairingArgs {
    /// The baseline version's value of a `{{NAME}}` (repeatable), e.g.
    /// --baseline server=./v0.7.0/server. With --candidate: a paired session.
    #[arg(long, value_name = "NAME=VALUE", value_parser = parse_var)]
    pub baseline: Vec<(String, String)>,
    /// The candidate version's value of a `{{NAME}}` (repeatable).
    #[arg(long, value_name = "NAME=VALUE", value_parser = parse_var)]
    pub candidate: Vec<(String, String)>,
    /// The baseline is this git ref (main, HEAD~1, a tag): checked out as a worktree
    /// beside the working tree, its target built and run there, and removed when the
    /// session ends; the candidate is the working tree, uncommitted changes included. A
    /// paired session of the two ("is my change worse than main?").
    #[arg(long, value_name = "REF")]
    pub baseline_ref: Option<String>,
    /// duet: both versions at once, each target on its own CPU (bench tests of a suite
    /// with a [target], 2 CPUs or more); interleaved: pairs adjacent in time, order
    /// drawn per pair (any test); auto: a duet where possible, else interleaved;
    /// sequential: every baseline run, then every candidate run (as separate runs
    /// would: for measuring what pairing gains).
    #[arg(long, default_value = "auto", value_parser = ["auto", "duet", "interleaved", "sequential"], requires = "paired")]
    pub mode: String,
    /// A duet's CPUs: shared (both targets may run on every CPU) or split (each target
    /// pinned to half of them, the halves swapped every pair).
    #[arg(long, default_value = "shared", value_parser = ["shared", "split"], requires = "paired")]
    pub duet_cpus: String,
    /// At most this many pairs per case (sequential: exactly this many of each).
    /// Default 20; with --budget, 200 (a safety bound: the budget ends the session).
    #[arg(long, value_parser = clap::value_parser!(u32).range(3..=crate::analysis::paired::MAX_PAIRS as i64), requires = "paired")]
    pub pairs: Option<u32>,
    /// Pairs before the first look at the verdict.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(3..=crate::analysis::paired::MAX_PAIRS as i64), requires = "paired")]
    pub min_pairs: u32,
    /// Wall time for the whole session, shared by its cases: a case still undecided
    /// when its share is spent stops there (inconclusive, saying how many pairs would
    /// decide).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, requires = "paired")]
    pub budget: Option<Duration>,
    /// Seed of the pairs' order (default: from the clock; printed and stored).
    #[arg(long, requires = "paired")]
    pub seed: Option<u64>,
    /// The baseline run's label (the candidate's is --label, default "candidate").
    #[arg(long, default_value = "baseline", requires = "paired")]
    pub baseline_label: String,
    /// Tolerance band for a metric (repeatable): METRIC=PCT, or default=PCT.
    #[arg(long = "band", value_name = "METRIC=PCT", value_parser = parse_band, requires = "paired")]
    pub bands: Vec<(String, f64)>,
    /// Significance level (default 0.05, or the suite's [compare] alpha).
    #[arg(long, value_name = "P", value_parser = parse_probability, requires = "paired")]
    pub alpha: Option<f64>,
}

impl Default for PairingArgs {
    /// No paired session (what a plain `run` gets).
    fn default() -> PairingArgs {
        PairingArgs {
            baseline: Vec::new(),
            candidate: Vec::new(),
            baseline_ref: None,
            mode: "auto".into(),
            duet_cpus: "shared".into(),
            pairs: None,
            min_pairs: 5,
            budget: None,
            seed: None,
            baseline_label: "baseline".into(),
            bands: Vec::new(),
            alpha: None,
        }
    }
}

fn parse_time_scale(s: &str) -> crate::error::Result<f64> {
    in_range(s, limits::TIME_SCALE.named("--time-scale"))
}

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
