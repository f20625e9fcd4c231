//! `strainline history --metric M`: one metric of one case across the stored runs, in
//! order, with the change points in it ([`crate::analysis::changepoint`]) — where the
//! series shifted, between which runs, by how much, and how sure.

use std::collections::BTreeSet;
use std::io::Write;

use serde::Serialize;

use crate::analysis::changepoint::{change_points, ChangePoint, Params};
use crate::analysis::comparison::p_text;
use crate::analysis::stats::median;
use crate::cli::HistoryArgs;
use crate::exit;
use crate::store::{case_key, usable};
use crate::store::{Location, Store};
use crate::units::format_value;

#[derive(Debug, Serialize)]
struct Point {
    run: i64,
    label: Option<String>,
    started_at: String,
    git_commit: Option<String>,
    /// Median over the run's repetitions of the case.
    value: f64,
    repetitions: usize,
}

#[derive(Debug, Serialize)]
struct Shift {
    /// The first run after the change, and the last before it.
    run_after: i64,
    run_before: i64,
    #[serde(flatten)]
    point: ChangePoint,
    change_percent: f64,
}

#[derive(Debug, Serialize)]
struct History {
    schema: &'static str,
    case: String,
    metric: String,
    unit: String,
    parameters: serde_json::Value,
    points: Vec<Point>,
    change_points: Vec<Shift>,
}

pub fn run(location: &Location, args: HistoryArgs) -> crate::error::Result<i32> {
    let store = Store::open(location).map_err(|e| crate::Error::usage(e.to_string()))?;
    let runs = store.runs_in_order(args.label.as_deref(), args.since.as_deref())?;
    let mut points = Vec::new();
    let mut cases_with_metric = BTreeSet::new();
    let mut unit = String::new();
    for run in runs
        .iter()
        .filter(|r| args.suite.is_none() || r.suite == args.suite)
    {
        let mut values = Vec::new();
        for case in store.cases(run.id)? {
            if !usable(&case.status) {
                continue;
            }
            let key = case_key(&case.name, &case.test_kind).to_string();
            let Some(m) = case.metrics.iter().find(|m| m.name == args.metric) else {
                continue;
            };
            cases_with_metric.insert(key.clone());
            if args.case.as_ref().is_none_or(|c| *c == key) {
                values.push((key, m.value));
                unit = m.unit.clone();
            }
        }
        if values.is_empty() {
            continue;
        }
        let keys: BTreeSet<&String> = values.iter().map(|v| &v.0).collect();
        if keys.len() > 1 {
            return Err(crate::Error::usage(format!(
                "several cases have the metric '{}': {}; choose one with --case",
                args.metric,
                keys.into_iter().cloned().collect::<Vec<_>>().join(", ")
            )));
        }
        let v: Vec<f64> = values.iter().map(|v| v.1).collect();
        points.push((
            values[0].0.clone(),
            Point {
                run: run.id,
                label: run.label.clone(),
                started_at: run.started_at.clone(),
                git_commit: run.git_commit.clone(),
                value: median(&v).unwrap_or(f64::NAN),
                repetitions: v.len(),
            },
        ));
    }
    if points.is_empty() {
        return Err(crate::Error::usage(match (&args.case, cases_with_metric.is_empty()) {
            (_, true) => format!(
                "no stored run has the metric '{}' (see `strainline show RUN` for the metrics a run has)",
                args.metric
            ),
            (Some(c), false) => format!(
                "no run has '{}' for case '{c}'; cases with it: {}",
                args.metric,
                cases_with_metric.into_iter().collect::<Vec<_>>().join(", ")
            ),
            (None, false) => unreachable!("points come from the cases with the metric"),
        }));
    }
    let keys: BTreeSet<&String> = points.iter().map(|p| &p.0).collect();
    if keys.len() > 1 {
        return Err(crate::Error::usage(format!(
            "several cases have the metric '{}': {}; choose one with --case",
            args.metric,
            keys.into_iter().cloned().collect::<Vec<_>>().join(", ")
        )));
    }
    let case = points[0].0.clone();
    let points: Vec<Point> = points.into_iter().map(|p| p.1).collect();
    let params = Params {
        window: args.window.max(3),
        max_p: args.max_p,
        min_magnitude: args.min_change,
    };
    let series: Vec<f64> = points.iter().map(|p| p.value).collect();
    let shifts: Vec<Shift> = change_points(&series, params)
        .into_iter()
        .map(|cp| Shift {
            run_after: points[cp.index].run,
            run_before: points[cp.index - 1].run,
            change_percent: 100.0 * cp.change(),
            point: cp,
        })
        .collect();
    let history = History {
        schema: "strainline.history.v1",
        case,
        metric: args.metric.clone(),
        unit,
        parameters: serde_json::json!({
            "method": "e-divisive means, Student's t-test (as Apache Otava)",
            "window": params.window,
            "max_p": params.max_p,
            "min_magnitude": params.min_magnitude,
        }),
        points,
        change_points: shifts,
    };
    let mut out = crate::units::Printable(std::io::stdout().lock());
    super::quiet_pipe(write_history(&mut out, &history))?;
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&history)?)
            .map_err(|e| crate::Error::usage(format!("cannot write {}: {e}", path.display())))?;
    }
    Ok(exit::PASSED)
}

fn write_history(out: &mut dyn Write, h: &History) -> std::io::Result<()> {
    writeln!(
        out,
        "{} of {} over {} run(s); change points: E-Divisive means + t-test, window {}, p < {}",
        h.metric,
        h.case,
        h.points.len(),
        h.parameters["window"],
        h.parameters["max_p"]
    )?;
    writeln!(
        out,
        "{:>7}  {:<20} {:<20} {:>16}",
        "run", "label", "started", "value"
    )?;
    for p in &h.points {
        if let Some(s) = h.change_points.iter().find(|s| s.run_after == p.run) {
            writeln!(
                out,
                "  ---- change point: {:+.1}% (p {}) ----",
                s.change_percent,
                p_text(s.point.p)
            )?;
        }
        writeln!(
            out,
            "{:>7}  {:<20} {:<20} {:>16}",
            format!("#{}", p.run),
            p.label.as_deref().unwrap_or("-"),
            p.started_at.get(..19).unwrap_or(&p.started_at),
            format_value(p.value, &h.unit)
        )?;
    }
    if h.change_points.is_empty() {
        writeln!(out, "\nno change point")?;
    }
    for s in &h.change_points {
        writeln!(
            out,
            "\nchange point between run #{} and run #{}: mean {} → {} ({:+.1}%), sd {} → {}, p {}",
            s.run_before,
            s.run_after,
            format_value(s.point.mean_before, &h.unit),
            format_value(s.point.mean_after, &h.unit),
            s.change_percent,
            format_value(s.point.stddev_before, &h.unit),
            format_value(s.point.stddev_after, &h.unit),
            p_text(s.point.p)
        )?;
    }
    Ok(())
}
