//! A metric's history: each case's value over the stored runs, in order (the median of
//! a run's repetitions), with the change points in it
//! ([`crate::analysis::changepoint`]) — where the series shifted, between which runs,
//! by how much, and how sure. `strainline history` prints one series; `serve` draws
//! every judged metric of a suite.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;

use serde::Serialize;

use crate::analysis::changepoint::{change_points, detectable, ChangePoint, Params};
use crate::analysis::comparison::p_text;
use crate::analysis::stats::median;
use crate::metrics::Direction;
use crate::store::{RunFilter, RunRow, Store};
use crate::units::format_value;

/// Which runs and metrics a history covers.
#[derive(Debug, Clone)]
pub struct Query {
    /// One metric, or every metric with a better direction (`None`).
    pub metric: Option<String>,
    pub case: Option<String>,
    pub suite: Option<String>,
    /// With `last`: only runs of this kind outside any suite (`import`, `load`, …).
    pub suiteless_kind: Option<String>,
    pub label: Option<String>,
    pub since: Option<String>,
    /// Only the newest N runs (a page), or all of them.
    pub last: Option<usize>,
    pub params: Params,
}

#[derive(Debug, Clone, Serialize)]
pub struct Point {
    pub run: i64,
    pub label: Option<String>,
    pub started_at: String,
    pub git_commit: Option<String>,
    /// Median over the run's repetitions of the case.
    pub value: f64,
    pub repetitions: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct Shift {
    /// The first run after the change, and the last before it.
    pub run_after: i64,
    pub run_before: i64,
    #[serde(flatten)]
    pub point: ChangePoint,
    pub change_percent: f64,
    /// Runs in the level before it and after it (to the neighbouring change points).
    pub runs_before: usize,
    pub runs_after: usize,
}

impl Shift {
    /// What a reader must be told when one side is a single run: the method cannot
    /// tell one run from a new level (the runs before it were tight enough to make it
    /// significant).
    pub fn caveat(&self) -> Option<&'static str> {
        match (self.runs_before, self.runs_after) {
            (_, 1) => Some("one run after it: an outlier or a new level, the next runs will tell"),
            (1, _) => Some("one run before it: that run may be an outlier"),
            _ => None,
        }
    }
}

/// One case's metric over runs.
#[derive(Debug, Clone, Serialize)]
pub struct Series {
    pub case: String,
    pub metric: String,
    pub unit: String,
    pub direction: Direction,
    pub points: Vec<Point>,
    pub change_points: Vec<Shift>,
    /// The smallest shift the change-point method would find in this series, with 80%
    /// probability, given its noise and length (0.1 = 10%; `None` under four runs).
    pub detectable: Option<f64>,
}

/// The document `history --json` writes: one series.
#[derive(Debug, Serialize)]
pub struct History {
    pub schema: &'static str,
    pub case: String,
    pub metric: String,
    pub unit: String,
    pub parameters: Parameters,
    pub points: Vec<Point>,
    pub change_points: Vec<Shift>,
    /// The smallest shift the method would find in this series (0.1 = 10%).
    pub detectable: Option<f64>,
}

/// How change points were found, for documents.
#[derive(Debug, Clone, Serialize)]
pub struct Parameters {
    pub method: &'static str,
    pub window: usize,
    pub max_p: f64,
    pub min_magnitude: f64,
}

pub fn parameters(p: &Params) -> Parameters {
    Parameters {
        method: "e-divisive means, Student's t-test (as Apache Otava)",
        window: p.window,
        max_p: p.max_p,
        min_magnitude: p.min_magnitude,
    }
}

/// The runs a query covers, oldest first.
pub fn runs(store: &Store, q: &Query) -> crate::error::Result<Vec<RunRow>> {
    Ok(match q.last {
        Some(n) => {
            let filter = RunFilter {
                suite: q.suite.clone(),
                label: q.label.clone(),
                since: q.since.clone(),
                kind: q.suiteless_kind.clone(),
                without_suite: q.suiteless_kind.is_some(),
                ..RunFilter::default()
            };
            let mut runs = store.runs_page(&filter, n, 0)?;
            runs.reverse();
            runs
        }
        None => store
            .runs_in_order(q.label.as_deref(), q.since.as_deref())?
            .into_iter()
            .filter(|r| q.suite.is_none() || r.suite == q.suite)
            .collect(),
    })
}

/// Every (case, metric) series the query covers, by case then metric, with their change
/// points; and the runs, oldest first. One query reads the metrics of all the runs.
pub fn series(store: &Store, q: &Query) -> crate::error::Result<(Vec<RunRow>, Vec<Series>)> {
    let runs = runs(store, q)?;
    let (Some(first), Some(last)) = (runs.first(), runs.last()) else {
        return Ok((runs, Vec::new()));
    };
    let index: HashMap<i64, usize> = runs.iter().enumerate().map(|(i, r)| (r.id, i)).collect();
    // (case, metric) → unit, direction, per run: the repetitions' values.
    type Values = (String, Direction, BTreeMap<usize, Vec<f64>>);
    let mut by: BTreeMap<(String, String), Values> = BTreeMap::new();
    for v in store.metric_values(first.id, last.id, q.metric.as_deref())? {
        let Some(&at) = index.get(&v.run) else {
            continue;
        };
        if q.case.as_ref().is_some_and(|c| *c != v.case)
            || q.metric.is_none() && v.direction == Direction::None
        {
            continue;
        }
        let e = by
            .entry((v.case, v.metric))
            .or_insert_with(|| (v.unit, v.direction, BTreeMap::new()));
        e.2.entry(at).or_default().push(v.value);
    }
    let out = by
        .into_iter()
        .map(|((case, metric), (unit, direction, values))| {
            let points: Vec<Point> = values
                .into_iter()
                .map(|(at, v)| {
                    let run = &runs[at];
                    Point {
                        run: run.id,
                        label: run.label.clone(),
                        started_at: run.started_at.clone(),
                        git_commit: run.git_commit.clone(),
                        value: median(&v).unwrap_or(f64::NAN),
                        repetitions: v.len(),
                    }
                })
                .collect();
            let values: Vec<f64> = points.iter().map(|p| p.value).collect();
            let cps = change_points(&values, q.params);
            let detectable = detectable(&values, &cps, q.params);
            Series {
                case,
                metric,
                unit,
                direction,
                change_points: shifts(&points, cps),
                points,
                detectable,
            }
        })
        .collect();
    Ok((runs, out))
}

/// The change points of a series, named by the runs on each side.
fn shifts(points: &[Point], cps: Vec<ChangePoint>) -> Vec<Shift> {
    let bounds: Vec<usize> = std::iter::once(0)
        .chain(cps.iter().map(|c| c.index))
        .chain(std::iter::once(points.len()))
        .collect();
    cps.into_iter()
        .enumerate()
        .map(|(i, cp)| Shift {
            run_after: points[cp.index].run,
            run_before: points[cp.index - 1].run,
            change_percent: 100.0 * cp.change(),
            runs_before: bounds[i + 1] - bounds[i],
            runs_after: bounds[i + 2] - bounds[i + 1],
            point: cp,
        })
        .collect()
}

/// One metric's history (`strainline history`): the one case that has it, or the one
/// asked for.
pub fn one(store: &Store, q: &Query) -> crate::error::Result<History> {
    let metric = q.metric.clone().unwrap_or_default();
    let (_, all) = series(
        store,
        &Query {
            case: None,
            ..q.clone()
        },
    )?;
    let cases: Vec<&str> = all.iter().map(|s| s.case.as_str()).collect();
    if all.is_empty() {
        return Err(crate::Error::usage(format!(
            "no stored run has the metric '{metric}' (see `strainline show RUN` for the metrics a run has)"
        )));
    }
    let chosen: Vec<&Series> = all
        .iter()
        .filter(|s| q.case.as_ref().is_none_or(|c| *c == s.case))
        .collect();
    let s = match chosen.as_slice() {
        [s] => *s,
        [] => {
            return Err(crate::Error::usage(format!(
                "no run has '{metric}' for case '{}'; cases with it: {}",
                q.case.as_deref().unwrap_or_default(),
                cases.join(", ")
            )))
        }
        _ => {
            return Err(crate::Error::usage(format!(
                "several cases have the metric '{metric}': {}; choose one with --case",
                cases.join(", ")
            )))
        }
    };
    Ok(History {
        schema: "strainline.history.v1",
        case: s.case.clone(),
        metric,
        unit: s.unit.clone(),
        parameters: parameters(&q.params),
        points: s.points.clone(),
        change_points: s.change_points.clone(),
        detectable: s.detectable,
    })
}

pub fn write_text(out: &mut dyn Write, h: &History) -> std::io::Result<()> {
    writeln!(
        out,
        "{} of {} over {} run(s); change points: E-Divisive means + t-test, window {}, p < {}",
        h.metric,
        h.case,
        h.points.len(),
        h.parameters.window,
        h.parameters.max_p
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
                "  ---- change point: {} (p {}){} ----",
                crate::units::signed_percent(s.change_percent),
                p_text(s.point.p),
                s.caveat().map(|c| format!("; {c}")).unwrap_or_default()
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
    if let Some(d) = h.detectable {
        writeln!(
            out,
            "smallest shift this history can show: ±{:.1}% (found 80% of the time in the middle of its newest {} runs, from its noise within its levels)",
            100.0 * d,
            h.points.len().min(h.parameters.window)
        )?;
    }
    for s in &h.change_points {
        writeln!(
            out,
            "\nchange point between run #{} and run #{}: mean {} → {} ({}), sd {} → {}, p {}{}",
            s.run_before,
            s.run_after,
            format_value(s.point.mean_before, &h.unit),
            format_value(s.point.mean_after, &h.unit),
            crate::units::signed_percent(s.change_percent),
            format_value(s.point.stddev_before, &h.unit),
            format_value(s.point.stddev_after, &h.unit),
            p_text(s.point.p),
            s.caveat().map(|c| format!(" ({c})")).unwrap_or_default()
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn points(values: &[f64]) -> Vec<Point> {
        values
            .iter()
            .enumerate()
            .map(|(i, &value)| Point {
                run: i as i64 + 1,
                label: None,
                started_at: String::new(),
                git_commit: None,
                value,
                repetitions: 1,
            })
            .collect()
    }

    /// The CI series of 2026-11-25 (cpu_per_op, ms): six v1 runs, six v2 runs, and one
    /// last v2 run 19% above the six before it. Both changes are found; the last has one
    /// run after it, and says so.
    #[test]
    fn a_change_with_one_run_on_a_side_says_so() {
        let v1 = [1.31, 1.52, 1.36, 1.47, 1.33, 1.41];
        let v2 = [1.93, 1.95, 1.96, 1.94, 1.93, 1.955];
        let mut all: Vec<f64> = v1.iter().chain(v2.iter()).copied().collect();
        all.push(2.313);
        let found = shifts(&points(&all), change_points(&all, Params::default()));
        assert_eq!(found.len(), 2, "{found:#?}");
        assert_eq!(
            (
                found[0].run_after,
                found[0].runs_before,
                found[0].runs_after
            ),
            (7, 6, 6)
        );
        assert_eq!(found[0].caveat(), None);
        assert_eq!(
            (
                found[1].run_after,
                found[1].runs_before,
                found[1].runs_after
            ),
            (13, 6, 1)
        );
        assert!(found[1].caveat().unwrap().starts_with("one run after it"));
        // The other way round: a first run alone before a tight level.
        let mut all = vec![2.313];
        all.extend(v2);
        let found = shifts(&points(&all), change_points(&all, Params::default()));
        assert_eq!(found.len(), 1, "{found:#?}");
        assert_eq!((found[0].runs_before, found[0].runs_after), (1, 6));
        assert!(found[0].caveat().unwrap().starts_with("one run before it"));
    }
}
