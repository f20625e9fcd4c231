//! The history pages: the suites; a suite's judged metrics as small multiples, case by
//! case; one case's metric in full with its points. Each series is the one
//! `strainline history` prints (the median of a run's repetitions, change points by
//! E-Divisive means), over the newest runs only (`last`, 100 by default): a page over
//! a history of 10,000 runs reads a hundred of them.

use std::fmt::Write;

use super::docs;
use super::http::{query, Request, Response};
use super::pages::{history_link, layout, run_link};
use crate::analysis::changepoint::Params;
use crate::analysis::comparison::Policy;
use crate::report::history::{parameters, series, Query, Series};
use crate::report::svg::{escape, render, Chart, Line, Mark, COLORS};
use crate::store::{RunRow, Store};
use crate::units::format_value;

/// Runs a history page covers unless told otherwise, and at most.
const LAST: usize = 100;
const MOST: usize = 2000;

pub fn history(store: &Store, req: &Request, json: bool) -> crate::error::Result<Response> {
    // A suite's runs, or the runs of one kind outside any suite (imports, loads,
    // monitors: each kind is a series of its own).
    let (scope, suite, kind) = match (req.param("suite"), req.param("kind")) {
        (Some(s), _) => (("suite", s), Some(s), None),
        (None, Some(k)) => (("kind", k), None, Some(k)),
        (None, None) => return suites(store, json),
    };
    let title = match kind {
        Some(k) => format!("{k} runs outside a suite"),
        None => scope.1.to_string(),
    };
    let last = req
        .param("last")
        .and_then(|n| n.parse().ok())
        .unwrap_or(LAST)
        .clamp(3, MOST);
    let q = Query {
        metric: req.param("metric").map(String::from),
        case: req.param("case").map(String::from),
        suite: suite.map(String::from),
        suiteless_kind: kind.map(String::from),
        label: None,
        since: None,
        last: Some(last),
        params: Params::default(),
    };
    let (runs, all) = series(store, &q)?;
    let policy = tolerance(store, &runs)?;
    if json {
        let series = all
            .iter()
            .map(|s| docs::Banded {
                series: s,
                tolerance: policy.band(&s.metric),
            })
            .collect();
        return Ok(Response::json(
            200,
            &docs::History {
                schema: "strainline.serve.history.v1",
                suite,
                kind,
                runs: runs.len(),
                parameters: parameters(&q.params),
                series,
            },
        ));
    }
    let mut b = format!(
        "<h1>History of {}</h1><p class=\"note\">The newest {} run(s); each point is a run (the median of its repetitions) and links to it. Change points: E-Divisive means with a t-test (as Apache Otava), p &lt; {}; the dashed grey lines are the comparison's tolerance band around the level since the last change.</p>",
        escape(&title),
        runs.len(),
        q.params.max_p
    );
    let _ = write!(
        b,
        "<form class=\"filters\" method=\"get\" action=\"/history\"><input type=\"hidden\" name=\"{}\" value=\"{}\"><label>Runs<input name=\"last\" value=\"{last}\" size=\"5\"></label><button type=\"submit\">Show</button></form>",
        scope.0,
        escape(scope.1)
    );
    if all.is_empty() {
        b.push_str("<p class=\"note\">No judged metric in these runs.</p>");
    }
    let one = q.metric.is_some() && q.case.is_some();
    let mut case_now: Option<&str> = None;
    for s in &all {
        if case_now != Some(s.case.as_str()) {
            if case_now.is_some() {
                b.push_str("</div>");
            }
            let _ = write!(b, "<h2>{}</h2><div class=\"grid\">", escape(&s.case));
            case_now = Some(&s.case);
        }
        let _ = write!(
            b,
            "<div class=\"series\" data-case=\"{}\" data-metric=\"{}\" data-change-points=\"{}\">",
            escape(&s.case),
            escape(&s.metric),
            s.change_points.len()
        );
        b.push_str(&render(&chart(s, policy.band(&s.metric), &runs)));
        if let Some(d) = s.detectable {
            let _ = write!(
                b,
                "<p class=\"detectable\">Smallest shift this history can show: ±{:.1}% (its noise over its newest runs)</p>",
                100.0 * d
            );
        }
        if !one {
            let _ = write!(
                b,
                "<p><a href=\"{}\">{} in full</a></p>",
                escape(&history_link(scope, Some(&s.case), Some(&s.metric))),
                escape(&s.metric)
            );
        }
        for c in &s.change_points {
            let _ = write!(
                b,
                "<p class=\"change-point\">Change point at run <a href=\"{}\">#{}</a> (after #{}): {} → {} ({:+.1}%, p {}{}); {} → {} · <a href=\"/compare{}\">compare</a></p>",
                run_link(c.run_after),
                c.run_after,
                c.run_before,
                escape(&format_value(c.point.mean_before, &s.unit)),
                escape(&format_value(c.point.mean_after, &s.unit)),
                c.change_percent,
                crate::analysis::comparison::p_text(c.point.p),
                c.caveat().map(|c| format!("; {c}")).unwrap_or_default(),
                escape(&commit_of(&runs, c.run_before)),
                escape(&commit_of(&runs, c.run_after)),
                query(&[
                    ("baseline", Some(&c.run_before.to_string())),
                    ("candidate", Some(&c.run_after.to_string()))
                ])
            );
        }
        b.push_str("</div>");
        if one {
            points_table(&mut b, s);
        }
    }
    if case_now.is_some() {
        b.push_str("</div>");
    }
    Ok(Response::html(
        200,
        layout(&format!("History of {title}"), &b),
    ))
}

/// A run as a change point names it: its commit, else its label, else its number.
fn commit_of(runs: &[RunRow], id: i64) -> String {
    let run = runs.iter().find(|r| r.id == id);
    match (
        run.and_then(|r| r.git_commit.as_deref()),
        run.and_then(|r| r.label.as_deref()),
    ) {
        (Some(c), _) => c[..c.len().min(10)].to_string(),
        (None, Some(l)) => l.to_string(),
        (None, None) => format!("#{id}"),
    }
}

/// The comparison's policy of the suite's newest run (its `[compare]` settings).
fn tolerance(store: &Store, runs: &[RunRow]) -> crate::error::Result<Policy> {
    let spec: crate::suite::CompareSpec = match runs.last() {
        Some(r) => store
            .run_settings(r.id)?
            .and_then(|s| serde_json::from_value(s["compare"].clone()).ok())
            .unwrap_or_default(),
        None => Default::default(),
    };
    Ok(spec.policy(&[], None))
}

fn chart(s: &Series, band: Option<f64>, runs: &[RunRow]) -> Chart {
    let points: Vec<(f64, f64)> = s.points.iter().map(|p| (p.run as f64, p.value)).collect();
    let links = s
        .points
        .iter()
        .map(|p| {
            (
                run_link(p.run),
                format!(
                    "run #{}{}: {}",
                    p.run,
                    p.label
                        .as_deref()
                        .map(|l| format!(" ({l})"))
                        .unwrap_or_default(),
                    format_value(p.value, &s.unit)
                ),
            )
        })
        .collect();
    let mut chart = Chart {
        title: format!("{} — {}", s.metric, s.case),
        x_label: "run".into(),
        y_label: if s.unit.is_empty() {
            s.metric.clone()
        } else {
            format!("{} ({})", s.metric, s.unit)
        },
        lines: vec![Line::new(&s.metric, points, COLORS[0]).linked(links)],
        ..Chart::default()
    };
    for c in &s.change_points {
        chart.vertical.push(Mark {
            at: (c.run_before + c.run_after) as f64 / 2.0,
            label: format!(
                "{:+.1}% {}→{}",
                c.change_percent,
                short(&commit_of(runs, c.run_before)),
                short(&commit_of(runs, c.run_after))
            ),
            color: COLORS[1],
        });
    }
    // The band around the level since the last change point.
    if let Some(band) = band {
        let from = s.change_points.last().map_or(0, |c| c.point.index);
        let level: Vec<f64> = s.points[from..].iter().map(|p| p.value).collect();
        if let Some(m) = crate::analysis::stats::median(&level) {
            for (at, sign) in [(m * (1.0 + band), "+"), (m * (1.0 - band), "−")] {
                chart.horizontal.push(Mark {
                    at,
                    label: format!("tolerance {sign}{:.0}%", band * 100.0),
                    color: "#999",
                });
            }
        }
    }
    chart
}

/// At most 7 characters (a short commit, a label's start).
fn short(s: &str) -> String {
    s.chars().take(7).collect()
}

fn points_table(b: &mut String, s: &Series) {
    b.push_str("<table class=\"points\"><tr><th>Run</th><th>Label</th><th>Started</th><th>Commit</th><th>Value</th><th>Repetitions</th></tr>");
    for p in s.points.iter().rev() {
        let _ = write!(
            b,
            "<tr><td><a href=\"{}\">#{}</a></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            run_link(p.run),
            p.run,
            escape(p.label.as_deref().unwrap_or("")),
            escape(p.started_at.get(..19).unwrap_or(&p.started_at)),
            escape(p.git_commit.as_deref().map_or("", |c| &c[..c.len().min(10)])),
            escape(&format_value(p.value, &s.unit)),
            p.repetitions
        );
    }
    b.push_str("</table>");
}

fn suites(store: &Store, json: bool) -> crate::error::Result<Response> {
    let suites = store.suites()?;
    let kinds = store.suiteless_kinds()?;
    if json {
        return Ok(Response::json(
            200,
            &docs::Suites {
                schema: "strainline.serve.suites.v1",
                suites: suites
                    .iter()
                    .map(|(s, n)| docs::SuiteRuns {
                        suite: s.clone(),
                        runs: *n,
                    })
                    .collect(),
                outside_suites: kinds
                    .iter()
                    .map(|(k, n)| docs::KindRuns {
                        kind: k.clone(),
                        runs: *n,
                    })
                    .collect(),
            },
        ));
    }
    let mut b = String::from("<h1>History</h1><p class=\"note\">Each suite's judged metrics over its runs, with change points.</p><ul class=\"suites\">");
    for (s, n) in &suites {
        let _ = write!(
            b,
            "<li><a href=\"{}\">{}</a> — {n} run(s)</li>",
            escape(&history_link(("suite", s), None, None)),
            escape(s)
        );
    }
    for (k, n) in &kinds {
        let _ = write!(
            b,
            "<li><a href=\"{}\">{} runs outside a suite</a> — {n} run(s)</li>",
            escape(&history_link(("kind", k), None, None)),
            escape(k)
        );
    }
    b.push_str("</ul>");
    if suites.is_empty() && kinds.is_empty() {
        b.push_str(
            "<p class=\"note\">No suite has run yet (<code>strainline run SUITE</code>).</p>",
        );
    }
    Ok(Response::html(200, layout("History", &b)))
}
