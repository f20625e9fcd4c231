//! `strainline workload characterize|compare|scenario`: access logs in, a profile, a
//! comparison (terminal, and JSON with a schema) or a scenario file out.

use std::io::Write as _;
use std::path::Path;

use crate::cli::{LogArgs, WorkloadCommand};
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
        for l in &made.found {
            let _ = writeln!(err, "  {l}");
        }
    }
    for l in &made.left_as_recorded {
        let _ = writeln!(err, "  left: {l}");
    }
    let left = &made.left_out;
    for (what, list) in [
        ("static assets", &left.assets),
        ("other hosts", &left.other_hosts),
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
    Ok(exit::PASSED)
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
