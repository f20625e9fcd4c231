//! The pages and their JSON: each route reads what it shows in one short use of a
//! store connection, then renders HTML (every stored text escaped, every link built
//! from ids or percent-encoded values) or, under `/api/v1/` or with `Accept:
//! application/json`, the same figures as a versioned document.

use std::fmt::Write;

use super::charts;
use super::docs;
use super::http::{encode, query, Request, Response};
use super::Shared;
use crate::report::judged::{compare, Ask};
use crate::report::svg::escape;
use crate::store::{RunFilter, RunRow, Status, Store};

/// Runs on a page of the runs list.
const PAGE: usize = 50;

/// The live page's script: polls the run's seconds and draws them.
const LIVE_JS: &str = include_str!("live.js");

/// A page in the server's frame: its navigation, the reports' style.
pub fn layout(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
<title>{}</title><style>{}</style></head><body>\n{}\n<main>{body}</main>\n</body></html>\n",
        escape(title),
        crate::report::html::STYLE,
        nav()
    )
}

fn nav() -> &'static str {
    "<header><nav><a class=\"brand\" href=\"/runs\">strainline</a><a href=\"/runs\">Runs</a><a href=\"/history\">History</a><a href=\"/compare\">Compare</a><a href=\"/live\">Live</a></nav></header>"
}

/// Answers a request.
pub fn route(req: &Request, shared: &Shared) -> Response {
    let (path, json) = match req.path.strip_prefix("/api/v1") {
        Some(rest) => (if rest.is_empty() { "/" } else { rest }, true),
        None => (req.path.as_str(), req.accept_json),
    };
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let result = match segments.as_slice() {
        [""] if json => Ok(Response::json(200, &api_index(&shared.base))),
        [""] => Ok(Response::redirect("/runs".into())),
        ["runs"] => shared.with_store(|s| runs(s, req, json)),
        ["runs", id] => match id.parse::<i64>() {
            Ok(id) => shared.with_store(|s| run(s, id, json)),
            Err(_) => Ok(not_found(
                json,
                &format!("no run '{id}': runs are numbered"),
            )),
        },
        ["compare"] => shared.with_store(|s| comparison(s, req, json)),
        ["history"] => shared.with_store(|s| charts::history(s, req, json)),
        ["live"] => shared.with_store(|s| live_list(s, json)),
        ["live", id] => match id.parse::<i64>() {
            Ok(id) => shared.with_store(|s| live(s, id, req, json)),
            Err(_) => Ok(not_found(
                json,
                &format!("no run '{id}': runs are numbered"),
            )),
        },
        ["static", "live.js"] => Ok(Response {
            status: 200,
            content_type: "text/javascript; charset=utf-8",
            body: LIVE_JS.as_bytes().to_vec(),
            headers: Vec::new(),
        }),
        _ => Ok(not_found(json, "no such page")),
    };
    match result {
        Ok(r) => r,
        Err(crate::Error::Usage(why)) => not_found(json, why.text()),
        Err(e) => {
            tracing::warn!("serve {}: {e}", req.path);
            let why = e.to_string();
            if json {
                Response::json(500, &docs::Failure { error: &why })
            } else {
                Response::html(
                    500,
                    layout("Error", &format!("<h1>Error</h1><p>{}</p>", escape(&why))),
                )
            }
        }
    }
}

/// The endpoints, under the base path `serve` answers at.
fn api_index(base: &str) -> docs::Index {
    docs::Index {
        schema: "strainline.serve.v1",
        strainline_version: env!("CARGO_PKG_VERSION"),
        endpoints: ENDPOINTS
            .iter()
            .map(|path| format!("{base}{}", &path[1..]))
            .collect(),
    }
}

const ENDPOINTS: [&str; 6] = [
    "/api/v1/runs?suite=&label=&kind=&status=&host=&since=&until=&page=",
    "/api/v1/runs/ID",
    "/api/v1/compare?baseline=RUN-or-LABEL&candidate=RUN-or-LABEL",
    "/api/v1/history?suite=&case=&metric=&last=",
    "/api/v1/live",
    "/api/v1/live/ID?after=SECONDS",
];

fn not_found(json: bool, why: &str) -> Response {
    if json {
        Response::json(404, &docs::Failure { error: why })
    } else {
        Response::html(
            404,
            layout(
                "Not found",
                &format!("<h1>Not found</h1><p>{}</p>", escape(why)),
            ),
        )
    }
}

/// Seconds from `a` to `b` (RFC 3339), when both are readable.
fn seconds_between(a: &str, b: Option<&str>) -> Option<f64> {
    let a: jiff::Timestamp = a.parse().ok()?;
    let b: jiff::Timestamp = b?.parse().ok()?;
    Some(b.duration_since(a).as_secs_f64())
}

fn duration_text(s: Option<f64>) -> String {
    match s {
        None => "-".into(),
        Some(s) if s < 60.0 => format!("{s:.1} s"),
        Some(s) if s < 3600.0 => format!("{:.0} min {:02.0} s", (s / 60.0).floor(), s % 60.0),
        Some(s) => format!(
            "{:.0} h {:02.0} min",
            (s / 3600.0).floor(),
            (s % 3600.0) / 60.0
        ),
    }
}

fn filter_of(req: &Request) -> RunFilter {
    let p = |k: &str| req.param(k).map(String::from);
    RunFilter {
        suite: p("suite"),
        label: p("label"),
        kind: p("kind"),
        status: p("status"),
        host: p("host"),
        since: p("since"),
        until: p("until"),
        without_suite: false,
    }
}

/// The runs list: newest first, filtered, a page at a time.
fn runs(store: &Store, req: &Request, json: bool) -> crate::error::Result<Response> {
    let filter = filter_of(req);
    let page: usize = req
        .param("page")
        .and_then(|p| p.parse().ok())
        .unwrap_or(1)
        .clamp(1, 100_000);
    let mut rows = store.runs_page(&filter, PAGE + 1, (page - 1) * PAGE)?;
    let more = rows.len() > PAGE;
    rows.truncate(PAGE);
    let ids: Vec<i64> = rows.iter().map(|r| r.id).collect();
    let reasons = store.first_reasons(&ids)?;
    if json {
        let runs = rows
            .iter()
            .map(|r| docs::Listed {
                run: r,
                reason: reasons.get(&r.id),
                duration_seconds: seconds_between(&r.started_at, r.ended_at.as_deref()),
            })
            .collect();
        return Ok(Response::json(
            200,
            &docs::Runs {
                schema: "strainline.serve.runs.v1",
                filter: &filter,
                page,
                more,
                runs,
            },
        ));
    }
    let suites = store.suites()?;
    let mut b = String::from("<h1>Runs</h1>");
    b.push_str(&filter_form(&filter, &suites));
    b.push_str("<table class=\"runs\"><tr><th>Run</th><th>Started (UTC)</th><th>Suite</th><th>Label</th><th>Kind</th><th>Verdict</th><th>Gates</th><th>Why</th><th>Commit</th><th>Duration</th></tr>");
    for r in &rows {
        let _ = write!(
            b,
            "<tr class=\"run\" data-run=\"{}\"><td><a href=\"/runs/{}\">#{}</a></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"verdict {}\">{}</td><td class=\"gates\">{}</td><td class=\"why\">{}</td><td>{}</td><td>{}</td></tr>",
            r.id,
            r.id,
            r.id,
            escape(r.started_at.get(..19).unwrap_or(&r.started_at)),
            r.suite
                .as_deref()
                .map(|s| format!(
                    "<a href=\"/history{}\">{}</a>",
                    query(&[("suite", Some(s))]),
                    escape(s)
                ))
                .unwrap_or_default(),
            escape(r.label.as_deref().unwrap_or("")),
            escape(&r.kind),
            css_class(&r.status),
            if r.status == Status::Running {
                format!("<a href=\"/live/{}\">running</a>", r.id)
            } else {
                escape(r.status.name())
            },
            escape(&r.gates.shown()),
            escape(reasons.get(&r.id).map_or("", |s| s.as_str())),
            escape(&r.commit_shown(10)),
            duration_text(seconds_between(&r.started_at, r.ended_at.as_deref())),
        );
    }
    b.push_str("</table>");
    if rows.is_empty() {
        b.push_str("<p class=\"note\">No runs match.</p>");
    }
    let link = |page: usize| {
        let f = &filter;
        let n = page.to_string();
        query(&[
            ("suite", f.suite.as_deref()),
            ("label", f.label.as_deref()),
            ("kind", f.kind.as_deref()),
            ("status", f.status.as_deref()),
            ("host", f.host.as_deref()),
            ("since", f.since.as_deref()),
            ("until", f.until.as_deref()),
            ("page", Some(n.as_str())),
        ])
    };
    b.push_str("<p class=\"pager\">");
    if page > 1 {
        let _ = write!(
            b,
            "<a rel=\"prev\" href=\"/runs{}\">← newer</a>",
            link(page - 1)
        );
    }
    let _ = write!(b, "<span>page {page}</span>");
    if more {
        let _ = write!(
            b,
            "<a rel=\"next\" href=\"/runs{}\">older →</a>",
            link(page + 1)
        );
    }
    b.push_str("</p>");
    Ok(Response::html(200, layout("strainline runs", &b)))
}

/// A status as a CSS class: only the words the report's style knows.
fn css_class(status: &Status) -> &'static str {
    match status {
        Status::Passed => "passed",
        Status::Completed | Status::Valid => "completed",
        Status::Failed => "failed",
        Status::Crashed => "crashed",
        Status::Invalid => "invalid",
        Status::Interrupted => "interrupted",
        Status::Abandoned => "abandoned",
        Status::Running | Status::Other(_) => "other",
    }
}

fn filter_form(f: &RunFilter, suites: &[(String, i64)]) -> String {
    let mut s = String::from("<form class=\"filters\" method=\"get\" action=\"/runs\">");
    let _ = write!(
        s,
        "<label>Suite<select name=\"suite\"><option value=\"\">any</option>"
    );
    for (name, n) in suites {
        let _ = write!(
            s,
            "<option value=\"{}\"{}>{} ({n})</option>",
            escape(name),
            if f.suite.as_deref() == Some(name) {
                " selected"
            } else {
                ""
            },
            escape(name)
        );
    }
    s.push_str("</select></label>");
    let text = |s: &mut String, name: &str, shown: &str, v: &Option<String>, hint: &str| {
        let _ = write!(
            s,
            "<label>{shown}<input name=\"{name}\" value=\"{}\" placeholder=\"{hint}\" size=\"12\"></label>",
            escape(v.as_deref().unwrap_or(""))
        );
    };
    text(&mut s, "label", "Label", &f.label, "");
    let choose = |s: &mut String, name: &str, shown: &str, v: &Option<String>, options: &[&str]| {
        let _ = write!(
            s,
            "<label>{shown}<select name=\"{name}\"><option value=\"\">any</option>"
        );
        for o in options {
            let _ = write!(
                s,
                "<option{}>{o}</option>",
                if v.as_deref() == Some(*o) {
                    " selected"
                } else {
                    ""
                }
            );
        }
        s.push_str("</select></label>");
    };
    choose(
        &mut s,
        "kind",
        "Kind",
        &f.kind,
        &["suite", "load", "monitor", "import"],
    );
    choose(
        &mut s,
        "status",
        "Verdict",
        &f.status,
        &[
            "passed",
            "failed",
            "invalid",
            "crashed",
            "interrupted",
            "completed",
            "valid",
            "running",
        ],
    );
    text(&mut s, "host", "Host", &f.host, "hostname");
    text(&mut s, "since", "Since", &f.since, "2026-11-01");
    text(&mut s, "until", "Until", &f.until, "2026-12-01");
    s.push_str("<button type=\"submit\">Filter</button></form>");
    s
}

/// The run before and after `r` in its suite (or among runs without one).
fn neighbours(
    store: &Store,
    r: &RunRow,
) -> crate::error::Result<(Vec<RunRow>, Option<i64>, Option<i64>)> {
    let same = RunFilter {
        suite: r.suite.clone(),
        kind: Some(r.kind.clone()),
        ..RunFilter::default()
    };
    // The suite's newest 200 runs, for the picker and the neighbours alike.
    let around = store.runs_page(&same, 200, 0)?;
    let prev = around.iter().find(|x| x.id < r.id).map(|x| x.id);
    let next = around.iter().rev().find(|x| x.id > r.id).map(|x| x.id);
    Ok((around, prev, next))
}

/// A run: its HTML report (the one `report --html` writes) under a bar with its
/// neighbours and a "compare with…" picker.
fn run(store: &Store, id: i64, json: bool) -> crate::error::Result<Response> {
    let row = store.find_run(&id.to_string())?;
    let (around, prev, next) = neighbours(store, &row)?;
    if json {
        let cases = store.cases(id)?;
        return Ok(Response::json(
            200,
            &docs::Run {
                schema: "strainline.serve.run.v1",
                run: &row,
                cases: &cases,
                previous: prev,
                next,
            },
        ));
    }
    let data = crate::report::run::load(store, &id.to_string())?;
    let report = crate::report::html::run_report(&data);
    let mut bar = String::from(nav());
    bar.push_str("<p class=\"pager\">");
    if let Some(p) = prev {
        let _ = write!(bar, "<a rel=\"prev\" href=\"/runs/{p}\">← run #{p}</a>");
    }
    if let Some(n) = next {
        let _ = write!(bar, "<a rel=\"next\" href=\"/runs/{n}\">run #{n} →</a>");
    }
    bar.push_str("</p>");
    let others: Vec<&RunRow> = around.iter().filter(|x| x.id != id).take(100).collect();
    if !others.is_empty() {
        let _ = write!(
            bar,
            "<form class=\"filters\" method=\"get\" action=\"/compare\"><input type=\"hidden\" name=\"candidate\" value=\"{id}\"><label>Compare with<select name=\"baseline\">"
        );
        for o in others {
            let _ = write!(
                bar,
                "<option value=\"{}\"{}>#{} {} {}</option>",
                o.id,
                if Some(o.id) == prev { " selected" } else { "" },
                o.id,
                escape(o.label.as_deref().unwrap_or("")),
                escape(o.started_at.get(..16).unwrap_or(&o.started_at))
            );
        }
        bar.push_str("</select></label><button type=\"submit\">Compare</button></form>");
    }
    Ok(Response::html(200, inject(&report, &bar)))
}

/// `bar` at the top of a report's body.
fn inject(report: &str, bar: &str) -> String {
    match report.find("<body>") {
        Some(at) => {
            let at = at + "<body>".len();
            format!("{}{bar}{}", &report[..at], &report[at..])
        }
        None => report.to_string(),
    }
}

/// A comparison of two runs or labels, judged as `strainline compare` judges them.
fn comparison(store: &Store, req: &Request, json: bool) -> crate::error::Result<Response> {
    let (Some(baseline), Some(candidate)) = (req.param("baseline"), req.param("candidate")) else {
        if json {
            return Ok(Response::json(
                400,
                &docs::Failure {
                    error: "give baseline=RUN-or-LABEL and candidate=RUN-or-LABEL",
                },
            ));
        }
        let body = "<h1>Compare</h1><p>Two runs by id (<code>12</code>), label (<code>v0.7.0</code>) or <code>latest</code>, <code>LABEL~1</code>: every repetition of a label is one version.</p>\
<form class=\"filters\" method=\"get\" action=\"/compare\"><label>Baseline<input name=\"baseline\" placeholder=\"v0.7.0\"></label><label>Candidate<input name=\"candidate\" placeholder=\"latest\"></label><button type=\"submit\">Compare</button></form>";
        return Ok(Response::html(200, layout("Compare", body)));
    };
    let judged = compare(
        store,
        &Ask {
            baseline_key: baseline.to_string(),
            baseline: None,
            candidate: candidate.to_string(),
            bands: Vec::new(),
            alpha: None,
            allow_env_mismatch: req.param("allow_env_mismatch").is_some(),
            allow_shape_mismatch: req.param("allow_shape_mismatch").is_some(),
        },
    )?;
    let c = &judged.comparison;
    if json {
        let doc: serde_json::Value =
            serde_json::from_str(&crate::report::compare::to_json(c)).unwrap_or_default();
        return Ok(Response::json(200, &doc));
    }
    let permalink = format!(
        "/compare{}",
        query(&[("baseline", Some(baseline)), ("candidate", Some(candidate))])
    );
    let bar = format!(
        "{}<p>Permalink: <a class=\"permalink\" href=\"{}\">{}</a> · runs {} against {}</p>",
        nav(),
        escape(&permalink),
        escape(&permalink),
        run_links(&judged.baseline),
        run_links(&judged.candidate)
    );
    Ok(Response::html(
        200,
        inject(&crate::report::html::comparison_report(c), &bar),
    ))
}

fn run_links(runs: &[RunRow]) -> String {
    runs.iter()
        .map(|r| format!("<a href=\"/runs/{}\">#{}</a>", r.id, r.id))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Runs in progress (those the store says are `running`, whose strainline lives).
fn live_list(store: &Store, json: bool) -> crate::error::Result<Response> {
    let running: Vec<RunRow> = store
        .runs_page(
            &RunFilter {
                status: Some("running".into()),
                ..RunFilter::default()
            },
            PAGE,
            0,
        )?
        .into_iter()
        .filter(|r| r.status == Status::Running)
        .collect();
    if json {
        return Ok(Response::json(
            200,
            &docs::Live {
                schema: "strainline.serve.live.v1",
                running: &running,
            },
        ));
    }
    let mut b = String::from("<h1>Runs in progress</h1>");
    if running.is_empty() {
        b.push_str("<p class=\"note\">Nothing is running. A <code>run</code>, <code>load</code> or <code>monitor</code> writing to this store shows here while it runs.</p>");
    }
    b.push_str("<ul class=\"live-runs\">");
    for r in &running {
        let _ = write!(
            b,
            "<li><a href=\"/live/{}\">#{} {}</a> {} since {}</li>",
            r.id,
            r.id,
            escape(r.suite.as_deref().unwrap_or(&r.kind)),
            escape(r.label.as_deref().unwrap_or("")),
            escape(r.started_at.get(..19).unwrap_or(&r.started_at))
        );
    }
    b.push_str("</ul>");
    Ok(Response::html(200, layout("Live", &b)))
}

/// A run's seconds as it writes them: the page polls `/api/v1/live/ID?after=T`.
fn live(store: &Store, id: i64, req: &Request, json: bool) -> crate::error::Result<Response> {
    let row = store.find_run(&id.to_string())?;
    if json {
        let after: f64 = req
            .param("after")
            .and_then(|a| a.parse().ok())
            .filter(|a: &f64| a.is_finite())
            .unwrap_or(-1.0);
        let seconds = store.live_seconds(id, after, 3600)?;
        return Ok(Response::json(
            200,
            &docs::LiveRun {
                schema: "strainline.serve.live-run.v1",
                run: id,
                status: &row.status,
                seconds: &seconds,
            },
        ));
    }
    let b = format!(
        "<h1>Run #{id} <span class=\"note\">{}</span></h1>\
<p>Status: <b id=\"status\" class=\"verdict\">{}</b> · case <b id=\"case\"></b> · <a href=\"/runs/{id}\">the run's report</a></p>\
<div class=\"figures\"><div>offered<b id=\"offered\">-</b>req/s</div><div>achieved<b id=\"achieved\">-</b>req/s</div><div>p99<b id=\"p99\">-</b>ms</div><div>errors<b id=\"errors\">-</b>/s</div><div>target RSS<b id=\"rss\">-</b>MiB</div><div>target CPU<b id=\"cpu\">-</b>cores</div><div>seconds<b id=\"seen\">0</b></div></div>\
<svg id=\"rate\" class=\"chart\" viewBox=\"0 0 720 220\" width=\"720\" height=\"220\"></svg>\
<svg id=\"memory\" class=\"chart\" viewBox=\"0 0 720 220\" width=\"720\" height=\"220\"></svg>\
<div id=\"live\" data-run=\"{id}\" data-api=\"/api/v1/\"></div><script src=\"/static/live.js\"></script>",
        escape(row.label.as_deref().or(row.suite.as_deref()).unwrap_or(&row.kind)),
        escape(row.status.name())
    );
    Ok(Response::html(200, layout(&format!("Live: run #{id}"), &b)))
}

/// The permalink of a history page: `scope` is `("suite", S)` or `("kind", K)`.
pub fn history_link(scope: (&str, &str), case: Option<&str>, metric: Option<&str>) -> String {
    format!(
        "/history{}",
        query(&[(scope.0, Some(scope.1)), ("case", case), ("metric", metric)])
    )
}

/// A run's page.
pub fn run_link(id: i64) -> String {
    format!("/runs/{}", encode(&id.to_string()))
}
