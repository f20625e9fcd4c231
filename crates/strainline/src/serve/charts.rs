//! The history pages: the suites; a suite's judged metrics as small multiples, case by
//! case; one case's metric in full with its points. Each series is the one
//! `strainline history` prints (the median of a run's repetitions, change points by
//! E-Divisive means), over the newest runs only (`last`, 100 by default): a page over
//! a history of 10,000 runs reads a hundred of them. Each chart has a legend under it
//! (the series, its change points, the tolerance band); the suites page lists each
//! suite with its newest run's verdict.

use maud::{html, Markup, PreEscaped};

use super::docs;
use super::http::{query, Request, Response};
use super::pages::{css_class, history_link, layout, run_link};
use crate::analysis::changepoint::Params;
use crate::analysis::comparison::Policy;
use crate::report::history::{parameters, series, Query, Series};
use crate::report::svg::{render, Chart, Line, Mark, COLORS};
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
    // The series case by case, in the order they come (a case's metrics together).
    let mut cases: Vec<(&str, Vec<&Series>)> = Vec::new();
    for s in &all {
        match cases.last_mut() {
            Some((case, list)) if *case == s.case.as_str() => list.push(s),
            _ => cases.push((&s.case, vec![s])),
        }
    }
    let one = q.metric.is_some() && q.case.is_some();
    let body = html! {
        h1 { "History of " (title) }
        p.note {
            "The newest " (runs.len()) " run(s); each point is a run (the median of its repetitions) and links to it. Change points: E-Divisive means with a t-test (as Apache Otava), p < "
            (q.params.max_p)
            "; the dashed grey lines are the comparison's tolerance band around the level since the last change."
        }
        form.filters method="get" action="/history" {
            input type="hidden" name=(scope.0) value=(scope.1);
            label { "Runs" input name="last" value=(last) size="5"; }
            button type="submit" { "Show" }
        }
        @if all.is_empty() {
            p.note { "No judged metric in these runs." }
        }
        @for (case, list) in &cases {
            h2 { (case) }
            div.grid {
                @for s in list {
                    (series_block(s, policy.band(&s.metric), &runs, scope, one))
                    @if one {
                        (points_table(s))
                    }
                }
            }
        }
    };
    Ok(Response::html(
        200,
        layout(&format!("History of {title}"), body),
    ))
}

/// One metric of one case: its chart, its legend, its change points in words.
fn series_block(
    s: &Series,
    band: Option<f64>,
    runs: &[RunRow],
    scope: (&str, &str),
    one: bool,
) -> Markup {
    html! {
        div.series data-case=(s.case) data-metric=(s.metric) data-change-points=(s.change_points.len()) {
            // The chart's SVG escapes its own texts.
            (PreEscaped(render(&chart(s, band))))
            (legend(s, band))
            @if let Some(d) = s.detectable {
                p.detectable {
                    "Smallest shift this history can show: ±" (format!("{:.1}", 100.0 * d)) "% (its noise over its newest runs)"
                }
            }
            @if !one {
                p { a href=(history_link(scope, Some(&s.case), Some(&s.metric))) { (s.metric) " in full" } }
            }
            @for c in &s.change_points {
                p.change-point {
                    "Change point at run " a href=(run_link(c.run_after)) { "#" (c.run_after) }
                    " (after #" (c.run_before) "): "
                    (format_value(c.point.mean_before, &s.unit)) " → " (format_value(c.point.mean_after, &s.unit))
                    " (" (crate::units::signed_percent(c.change_percent)) ", p " (crate::analysis::comparison::p_text(c.point.p))
                    (c.caveat().map(|c| format!("; {c}")).unwrap_or_default()) "); "
                    (commit_of(runs, c.run_before)) " → " (commit_of(runs, c.run_after))
                    " · "
                    a href={
                        "/compare"
                        (query(&[
                            ("baseline", Some(&c.run_before.to_string())),
                            ("candidate", Some(&c.run_after.to_string())),
                        ]))
                    } { "compare" }
                }
            }
        }
    }
}

/// What a chart's lines and marks are, under it: the series, its change points, the
/// tolerance band (the chart's own legend names its line only).
fn legend(s: &Series, band: Option<f64>) -> Markup {
    html! {
        ul.legend {
            li { i.line {} (s.metric) ": each run's median, a dot linking to the run" }
            @if !s.change_points.is_empty() {
                li { i.change {} "change point (E-Divisive means), with the size of the shift" }
            }
            @if let Some(b) = band {
                li { i.band {} "tolerance ±" (format!("{:.0}", b * 100.0)) "% around the level since the last change" }
            }
        }
    }
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

fn chart(s: &Series, band: Option<f64>) -> Chart {
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
        counted_x: true,
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
            // The size alone: a label with both commits overlapped its neighbours';
            // the commits are in the words under the chart.
            label: crate::units::signed_percent(c.change_percent),
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

fn points_table(s: &Series) -> Markup {
    html! {
        table.points {
            tr { th { "Run" } th { "Label" } th { "Started" } th { "Commit" } th { "Value" } th { "Repetitions" } }
            @for p in s.points.iter().rev() {
                tr {
                    td { a href=(run_link(p.run)) { "#" (p.run) } }
                    td { (p.label.as_deref().unwrap_or("")) }
                    td { (p.started_at.get(..19).unwrap_or(&p.started_at)) }
                    td { (p.git_commit.as_deref().map_or("", |c| &c[..c.len().min(10)])) }
                    td { (format_value(p.value, &s.unit)) }
                    td { (p.repetitions) }
                }
            }
        }
    }
}

fn suites(store: &Store, json: bool) -> crate::error::Result<Response> {
    let suites = store.suites()?;
    let kinds = store.suiteless_kinds()?;
    let newest = store.newest_of_each()?;
    let latest = |suite: Option<&str>, kind: Option<&str>| {
        newest.iter().find(|r| {
            r.suite.as_deref() == suite && (suite.is_some() || Some(r.kind.as_str()) == kind)
        })
    };
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
                        newest: latest(Some(s), None).map(docs::Newest::of),
                    })
                    .collect(),
                outside_suites: kinds
                    .iter()
                    .map(|(k, n)| docs::KindRuns {
                        kind: k.clone(),
                        runs: *n,
                        newest: latest(None, Some(k)).map(docs::Newest::of),
                    })
                    .collect(),
            },
        ));
    }
    let entry = |link: String, name: Markup, n: i64, last: Option<&RunRow>| {
        html! {
            li {
                a href=(link) { (name) }
                " — " (n) " run(s)"
                @if let Some(r) = last {
                    " · newest " a href=(run_link(r.id)) { "#" (r.id) } " "
                    span class={ "verdict " (css_class(&r.status)) } { (r.status.name()) }
                }
            }
        }
    };
    let body = html! {
        h1 { "History" }
        p.note { "Each suite's judged metrics over its runs, with change points; each with the verdict of its newest run." }
        ul.suites {
            @for (s, n) in &suites {
                (entry(history_link(("suite", s), None, None), html! { (s) }, *n, latest(Some(s), None)))
            }
            @for (k, n) in &kinds {
                (entry(history_link(("kind", k), None, None), html! { (k) " runs outside a suite" }, *n, latest(None, Some(k))))
            }
        }
        @if suites.is_empty() && kinds.is_empty() {
            p.note { "No suite has run yet (" code { "strainline run SUITE" } ")." }
        }
    };
    Ok(Response::html(200, layout("History", body)))
}
