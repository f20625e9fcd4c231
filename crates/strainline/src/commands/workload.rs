//! `strainline workload characterize|compare|scenario|flow`: access logs in, a profile,
//! a comparison (terminal, and JSON with a schema) or a scenario file out; a browser
//! recording in, a user's flow out (played once against `--target` to verify it).

use std::io::Write as _;
use std::path::Path;

use crate::error::Category;
use crate::exit;
use crate::workload::{self, compare, render, Characterization, Options};
use clap::{Args, Subcommand};
use std::path::PathBuf;

#[derive(Debug, Subcommand)]
pub enum WorkloadCommand {
    /// Read access logs (nginx/Apache Common or Combined, JSON lines; gzip accepted) and
    /// report the request mix by route, the arrival rate and its variance, the status
    /// mix and the clients.
    #[command(after_help = "Examples:\n  \
        strainline workload characterize /var/log/nginx/access.log\n  \
        strainline workload characterize access.log.1.gz access.log --by hour --json profile.json\n  \
        strainline workload characterize app.jsonl --json-fields time=ts,path=uri --route '^/files/(.+)$'")]
    Characterize(CharacterizeArgs),
    /// Compare workload B (e.g. the target's access log during a test) with A (e.g.
    /// production): mix, status, rate, peak rate, dispersion and sizes, each against a
    /// tolerance (exit 0 similar, 1 differs).
    #[command(after_help = "Examples:\n  \
        strainline workload compare production.log test.log\n  \
        strainline workload compare access.log access.log --by hour --a-window '2026-11-22 09' --b-window '2026-11-22 18'\n  \
        strainline workload compare prod.log test.log --tolerance mix=2,rate=5%,dispersion=20%")]
    Compare(WorkloadCompareArgs),
    /// Write a scenario that reproduces a log's workload: its mix as weighted steps
    /// sending the observed requests, its arrivals as the log's own per-second counts
    /// (the rate with its variance). Run it with `strainline load URL --scenario FILE`.
    #[command(after_help = "Examples:\n  \
        strainline workload scenario access.log -o production.toml\n  \
        strainline workload scenario access.log --by hour --window '2026-11-22 18' --scale 2 -o peak-x2.toml\n  \
        strainline workload scenario access.log --constant -o average.toml")]
    Scenario(WorkloadScenarioArgs),
    /// Make a user's flow from a recorded browser session (HAR 1.2: DevTools, mitmproxy's
    /// hardump, Playwright, k6 Studio): the values the server handed out and later
    /// requests sent back (CSRF tokens, ids, bearer tokens) found and correlated by
    /// themselves, static assets and other hosts left out, redirects followed.
    #[command(after_help = "Examples:\n  \
        strainline workload flow session.har -o flow.toml\n  \
        strainline workload flow session.har --host 127.0.0.1:8000 -o flow.toml\n  \
        strainline workload flow session.har --no-correlate -o verbatim.toml")]
    Flow(WorkloadFlowArgs),
}

#[derive(Debug, Args)]
pub struct WorkloadScenarioArgs {
    /// Access logs, read in order as one workload.
    #[arg(required = true, value_name = "LOG")]
    pub logs: Vec<PathBuf>,
    #[command(flatten)]
    pub read: LogArgs,
    /// With --by: the window whose label starts with this (e.g. '2026-11-22 18').
    #[arg(long, value_name = "LABEL", requires = "by")]
    pub window: Option<String>,
    /// Multiply the rate (2 = twice the logged rate).
    #[arg(long, value_name = "X", default_value_t = 1.0)]
    pub scale: f64,
    /// The mean rate evenly spaced: the variance removed (for comparison).
    #[arg(long)]
    pub constant: bool,
    /// Where to write the scenario (default: standard output).
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct WorkloadFlowArgs {
    /// The recording (HAR 1.2).
    #[arg(value_name = "RECORDING.har")]
    pub har: PathBuf,
    /// The application's host (or host:port) in the recording; default: the first page's.
    #[arg(long, value_name = "HOST")]
    pub host: Option<String>,
    /// Send every value as recorded (no correlation): what recorders without it make.
    #[arg(long)]
    pub no_correlate: bool,
    /// Play the flow once, as one user and without its pauses, against the application
    /// at URL (a copy running for tests: it is sent the recorded actions) and print each
    /// step's outcome beside the recorded status; exit 1 when a step diverged.
    #[arg(long, value_name = "URL")]
    pub target: Option<String>,
    /// Where to write the flow (default: standard output).
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// How logs are read: shared by characterize and compare.
#[derive(Debug, Args)]
pub struct LogArgs {
    /// Split into windows aligned to UTC: minute, hour, day, or a duration (15m).
    #[arg(long, value_name = "WINDOW")]
    pub by: Option<String>,
    /// A route template for paths the built-in rules miss: a regular expression whose
    /// capture groups become {NAME} (named groups) or {id}. Repeatable, tried in order.
    #[arg(long = "route", value_name = "REGEX")]
    pub routes: Vec<String>,
    /// JSON lines: which keys hold what, NAME=KEY,… (names: time, method, path, request,
    /// status, bytes, duration, client).
    #[arg(long, value_name = "SPEC")]
    pub json_fields: Option<String>,
}

#[derive(Debug, Args)]
pub struct CharacterizeArgs {
    /// Access logs, read in order as one workload.
    #[arg(required = true, value_name = "LOG")]
    pub logs: Vec<PathBuf>,
    #[command(flatten)]
    pub read: LogArgs,
    /// Write the profile as JSON (schema strainline.workload.v1).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write an HTML report: the rate over time, the dispersion by window size, the mix.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct WorkloadCompareArgs {
    /// The reference workload's log (e.g. production).
    #[arg(value_name = "A")]
    pub a: PathBuf,
    /// The workload compared with it (e.g. the target's log during a test).
    #[arg(value_name = "B")]
    pub b: PathBuf,
    #[command(flatten)]
    pub read: LogArgs,
    /// With --by: compare only A's window whose label starts with this (e.g. '2026-11-22 09').
    #[arg(long, value_name = "LABEL", requires = "by")]
    pub a_window: Option<String>,
    /// With --by: B's window whose label starts with this.
    #[arg(long, value_name = "LABEL", requires = "by")]
    pub b_window: Option<String>,
    /// How much each dimension may differ: mix=POINTS,rate=%,dispersion=%,size=%
    /// (defaults mix=3,rate=10%,dispersion=25%,size=10%).
    #[arg(long, value_name = "SPEC")]
    pub tolerance: Option<String>,
    /// Write the comparison as JSON (schema strainline.workload-compare.v1).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

pub fn run(cmd: WorkloadCommand) -> crate::error::Result<i32> {
    match cmd {
        WorkloadCommand::Characterize(a) => {
            let opts = options(&a.read)?;
            let c = workload::characterize(&a.logs, &opts)?;
            print!("{}", render::characterization(&c));
            if let Some(path) = &a.json {
                write_json(path, &c)?;
            }
            if let Some(path) = &a.html {
                std::fs::write(path, crate::report::workload::characterization_report(&c))
                    .map_err(|e| {
                        crate::Error::usage(format!("--html {}: {e}", path.display())).because(e)
                    })?;
                println!("HTML report: {}", path.display());
            }
            Ok(exit::PASSED)
        }
        WorkloadCommand::Compare(a) => {
            let opts = options(&a.read)?;
            let tol = match &a.tolerance {
                Some(t) => compare::Tolerance::default().with(t)?,
                None => compare::Tolerance::default(),
            };
            let ca = workload::characterize(std::slice::from_ref(&a.a), &opts)?;
            let cb = workload::characterize(std::slice::from_ref(&a.b), &opts)?;
            let (pa, la) = pick(&ca, &a.a, a.a_window.as_deref())?;
            let (pb, lb) = pick(&cb, &a.b, a.b_window.as_deref())?;
            let c = compare::compare(pa, pb, &la, &lb, tol);
            print!("{}", render::comparison(&c));
            if let Some(path) = &a.json {
                write_json(path, &c)?;
            }
            Ok(if c.similar {
                exit::PASSED
            } else {
                exit::FAILED
            })
        }
        WorkloadCommand::Scenario(a) => {
            if !(a.scale.is_finite() && a.scale > 0.0) {
                return Err(crate::Error::usage(format!(
                    "--scale {}: give a positive factor (2 = twice the logged rate)",
                    a.scale
                )));
            }
            let opts = options(&a.read)?;
            let c = workload::characterize(&a.logs, &opts)?;
            let source = a
                .logs
                .iter()
                .map(|l| l.display().to_string())
                .collect::<Vec<_>>()
                .join(", ");
            let (p, _) = pick(&c, &a.logs[0], a.window.as_deref())?;
            let shape = workload::scenario::Shape {
                scale: a.scale,
                constant: a.constant,
            };
            let text = workload::scenario::write(p, &source, shape)?;
            match &a.output {
                Some(path) => {
                    std::fs::write(path, &text).map_err(|e| {
                        crate::Error::usage(format!("-o {}: {e}", path.display())).because(e)
                    })?;
                    eprintln!(
                        "scenario: {} ({} steps, mean {:.1} req/s × {}{}): strainline load URL --scenario {}",
                        path.display(),
                        text.matches("[[step]]").count(),
                        p.rate.mean,
                        a.scale,
                        if a.constant { ", constant" } else { "" },
                        path.display()
                    );
                }
                None => print!("{text}"),
            }
            Ok(exit::PASSED)
        }
        WorkloadCommand::Flow(a) => flow(&a),
    }
}

/// `workload flow`: the flow, then what was found and left out, on stderr.
fn flow(a: &WorkloadFlowArgs) -> crate::error::Result<i32> {
    let made = workload::har::make(
        &a.har,
        &workload::har::Options {
            host: a.host.clone(),
            no_correlate: a.no_correlate,
        },
    )?;
    match &a.output {
        Some(path) => std::fs::write(path, &made.text)
            .map_err(|e| crate::Error::usage(format!("-o {}: {e}", path.display())).because(e))?,
        None => print!("{}", made.text),
    }
    let mut err = std::io::stderr().lock();
    let _ = writeln!(
        err,
        "flow: {} steps to {}{}",
        made.steps,
        made.origin,
        a.output
            .as_ref()
            .map(|p| format!(" in {}", p.display()))
            .unwrap_or_default()
    );
    if a.no_correlate {
        let _ = writeln!(
            err,
            "not correlated (--no-correlate): every value as recorded"
        );
    } else if made.found.is_empty() {
        let _ = writeln!(
            err,
            "correlated: nothing (no reply gave a value a later request sent)"
        );
    } else {
        let _ = writeln!(err, "correlated:");
        for l in made.found.iter().take(SHOWN) {
            let _ = writeln!(err, "  {l}");
        }
        more(&mut err, made.found.len());
    }
    for l in made.left_as_recorded.iter().take(SHOWN) {
        let _ = writeln!(err, "  left: {}", crate::units::one_line(l));
    }
    more(&mut err, made.left_as_recorded.len());
    let left = &made.left_out;
    for (what, list) in [
        ("static assets", &left.assets),
        ("other hosts", &left.other_hosts),
        ("not sendable", &left.unsendable),
    ] {
        if !list.is_empty() {
            let _ = writeln!(err, "left out, {what} ({}):", list.len());
            for l in list.iter().take(20) {
                let _ = writeln!(err, "  {}", crate::units::one_line(l));
            }
            if list.len() > 20 {
                let _ = writeln!(err, "  … and {} more", list.len() - 20);
            }
        }
    }
    match &a.target {
        Some(url) => {
            drop(err);
            verify(&made, url)
        }
        None => Ok(exit::PASSED),
    }
}

/// Lines of a list the terminal shows; the flow file's comments hold them all.
const SHOWN: usize = 200;

fn more(err: &mut impl std::io::Write, n: usize) {
    if n > SHOWN {
        let _ = writeln!(
            err,
            "  … and {} more (all in the flow file's comments)",
            n - SHOWN
        );
    }
}

/// Plays the flow once as one user against `url`, without its pauses, and says each
/// step's outcome beside its recorded status (k6 Studio's validator); the first step
/// that diverged is explained from what the engine counted. Exit 1 when one did.
fn verify(made: &workload::har::Made, url: &str) -> crate::error::Result<i32> {
    use clap::Parser as _;
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(crate::Error::usage(format!(
            "--target {url}: the application's http:// or https:// URL (the flow's steps give the paths)"
        )));
    }
    // Removed when dropped, whatever way the play ends.
    let dir = tempfile::Builder::new()
        .prefix("strainline-verify-")
        .tempdir()
        .map_err(|e| crate::Error::environment(format!("a temporary directory: {e}")).because(e))?;
    let path = dir.path().join("once.toml");
    std::fs::write(&path, &made.once)
        .map_err(|e| crate::Error::usage(format!("{}: {e}", path.display())).because(e))?;
    let steps = made.recorded.len().max(1).to_string();
    let argv = [
        "strainline load",
        url,
        "--scenario",
        path.to_str().unwrap_or_default(),
        "-n",
        &steps,
        "-z",
        "60s",
        "--no-tui",
        "--no-progress",
    ];
    /// `strainline load`'s flags alone.
    #[derive(clap::Parser)]
    #[command(name = "strainline load")]
    struct Load {
        #[command(flatten)]
        args: super::load::LoadArgs,
    }
    let load = Load::try_parse_from(argv).usage_with(|e| format!("--target {url}: {e}"))?;
    let spec = super::load::spec(&load.args)?;
    let planned = crate::load::plan(&spec)?;
    // Ctrl-C or SIGTERM ends the play as it ends a load: what was played is said.
    crate::os::signals::install();
    let session =
        crate::agents::session::drive(&spec, &planned, None, (false, ""), &crate::observe::Quiet);
    drop(dir);
    let session = session?;
    let interrupted = session.outcome.interrupted;
    let summary = session.summary;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "verify: the flow played once as one user against {url}, without its pauses"
    );
    let width = made
        .recorded
        .iter()
        .map(|(n, _)| n.chars().count())
        .max()
        .unwrap_or(4)
        .max(4);
    let _ = writeln!(out, "  {:width$}  recorded  played", "step");
    let mut first: Option<String> = None;
    for (name, status) in &made.recorded {
        let st = summary.steps.iter().find(|s| &s.name == name);
        // What kept it from being sent: a value not extracted, a value its field cannot
        // carry (the engine's flow counters).
        let unsendable: Vec<String> = st
            .iter()
            .flat_map(|st| st.flow.keys())
            .filter(|k| k.starts_with("extract.") || k.starts_with("invalid."))
            .cloned()
            .collect();
        let (played, why) = match st {
            None => (
                "not sent".to_string(),
                Some("the run ended before it".to_string()),
            ),
            Some(st) if st.sent == 0 || (st.ok == 0 && !unsendable.is_empty()) => (
                "not sent".into(),
                Some(if unsendable.is_empty() {
                    "the run ended before it (an earlier step failed, or the 60 s bound)".into()
                } else {
                    format!("it could not be sent: {}", unsendable.join(", "))
                }),
            ),
            Some(st) if st.errors == 0 && st.checks_failed == 0 => ("as recorded".into(), None),
            Some(st) => {
                let causes: Vec<String> = st
                    .causes
                    .iter()
                    .map(|(k, n)| format!("{k} {n}"))
                    .chain(st.flow.iter().map(|(k, n)| format!("{k} {n}")))
                    .collect();
                (
                    "diverged".into(),
                    Some(if causes.is_empty() {
                        format!("its reply was not status {status} as recorded, or none came (what came: the run's statuses and errors, above)")
                    } else {
                        format!(
                            "{} (the reply was not the recorded one: check.recorded holds its status {status} and what its page or JSON held)",
                            causes.join(", ")
                        )
                    }),
                )
            }
        };
        let _ = writeln!(out, "  {name:width$}  {status:>8}  {played}");
        if first.is_none() {
            first = why.map(|w| format!("{name}: {w}"));
        }
    }
    let statuses: Vec<String> = summary
        .by_status
        .iter()
        .map(|(k, n)| format!("{k}: {n}"))
        .chain(summary.by_error.iter().map(|(k, n)| format!("{k}: {n}")))
        .collect();
    let _ = writeln!(
        out,
        "  the run's statuses and errors: {}",
        if statuses.is_empty() {
            "none".into()
        } else {
            statuses.join(", ")
        }
    );
    if interrupted {
        let _ = writeln!(out, "interrupted: the steps above are what was played");
        return Ok(exit::INTERRUPTED);
    }
    Ok(match first {
        None => {
            let _ = writeln!(out, "verified: every step answered as recorded");
            exit::PASSED
        }
        Some(why) => {
            let _ = writeln!(out, "diverged first at {why}");
            exit::FAILED
        }
    })
}

fn options(r: &LogArgs) -> crate::error::Result<Options> {
    let mut fields = workload::parse::JsonFields::default();
    if let Some(spec) = &r.json_fields {
        fields = fields.with(spec)?;
    }
    Ok(Options {
        fields,
        routes: workload::route::Routes::new(&r.routes)?,
        by: r.by.as_deref().map(workload::window_seconds).transpose()?,
    })
}

/// The whole log, or its window whose label starts with `window`.
fn pick<'a>(
    c: &'a Characterization,
    file: &Path,
    window: Option<&str>,
) -> crate::error::Result<(&'a workload::profile::Profile, String)> {
    let name = file.display().to_string();
    match window {
        None => Ok((&c.all, name)),
        Some(w) => c
            .windows
            .iter()
            .find(|p| p.window.starts_with(w))
            .map(|p| (p, format!("{name} [{}]", p.window)))
            .ok_or_else(|| {
                crate::Error::usage(format!(
                    "{name} has no window starting '{w}'; its windows: {}",
                    c.windows
                        .iter()
                        .map(|p| p.window.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            }),
    }
}

fn write_json<T: serde::Serialize>(path: &Path, value: &T) -> crate::error::Result<()> {
    let text = serde_json::to_string_pretty(value)?;
    std::fs::write(path, text + "\n")
        .map_err(|e| crate::Error::usage(format!("--json {}: {e}", path.display())).because(e))?;
    Ok(())
}
