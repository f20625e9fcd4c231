//! `strainline workload characterize|compare|scenario|flow`: access logs in, a profile,
//! a comparison (terminal, and JSON with a schema) or a scenario file out; a browser
//! recording in, a user's flow out (played once against `--target` to verify it).

use std::io::Write as _;
use std::path::Path;

use crate::cli::{LogArgs, WorkloadCommand};
use crate::error::Category;
use crate::exit;
use crate::workload::{self, compare, render, Characterization, Options};

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
fn flow(a: &crate::cli::WorkloadFlowArgs) -> crate::error::Result<i32> {
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
        "strainline",
        "load",
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
    let cli =
        crate::cli::Cli::try_parse_from(argv).usage_with(|e| format!("--target {url}: {e}"))?;
    let crate::cli::Command::Load(args) = cli.command else {
        unreachable!("the arguments above are a load");
    };
    let spec = super::load::spec(&args)?;
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
