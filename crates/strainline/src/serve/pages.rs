//! The pages and their JSON: each route reads what it shows in one short use of a
//! store connection, then renders HTML (every stored text escaped, every link built
//! from ids or percent-encoded values) or, under `/api/v1/` or with `Accept:
//! application/json`, the same figures as a versioned document. Pages are maud
//! templates: every text they are given is escaped unless wrapped as markup.

use maud::{html, Markup, PreEscaped, DOCTYPE};

use super::charts;
use super::docs;
use super::http::{encode, query, Request, Response};
use super::Shared;
use crate::report::judged::{compare, Ask};
use crate::store::{RunFilter, RunRow, Status, Store};

/// Runs on a page of the runs list.
const PAGE: usize = 50;

/// The live page's script: polls the run's seconds and draws them.
const LIVE_JS: &str = include_str!("live.js");

/// A page in the server's frame: its navigation, the reports' style.
pub fn layout(title: &str, body: Markup) -> String {
    let page = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) }
                style { (PreEscaped(crate::report::html::STYLE)) }
            }
            body {
                (nav())
                main { (body) }
            }
        }
    };
    let mut text = page.into_string();
    text.push('\n');
    text
}

fn nav() -> Markup {
    html! {
        header {
            nav {
                a.brand href="/runs" { "strainline" }
                a href="/runs" { "Runs" }
                a href="/history" { "History" }
                a href="/compare" { "Compare" }
                a href="/live" { "Live" }
            }
        }
    }
}

/// A page saying what went wrong: its heading and its one paragraph.
pub fn message(heading: &str, why: Markup) -> String {
    layout(heading, html! { h1 { (heading) } p { (why) } })
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
                Response::html(500, message("Error", html! { (why) }))
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
        Response::html(404, message("Not found", html! { (why) }))
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
                name: r.name(),
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
    let link = |page: usize| {
        let f = &filter;
        let n = page.to_string();
        format!(
            "/runs{}",
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
        )
    };
    let body = html! {
        h1 { "Runs" }
        (filter_form(&filter, &suites))
        table.runs {
            tr {
                th { "Run" } th { "Started (UTC)" } th { "Name" } th { "Label" } th { "Kind" }
                th { "Verdict" } th { "Gates" } th { "Why" } th { "Commit" } th { "Duration" }
            }
            @for r in &rows {
                tr.run data-run=(r.id) {
                    td { a href=(run_link(r.id)) { "#" (r.id) } }
                    td { (r.started_at.get(..19).unwrap_or(&r.started_at)) }
                    td.name { (name_cell(r)) }
                    td { (r.label.as_deref().unwrap_or("")) }
                    td { (r.kind) }
                    td class={ "verdict " (css_class(&r.status)) } {
                        @if r.status == Status::Running {
                            a href={ "/live/" (r.id) } { "running" }
                        } @else {
                            (r.status.name())
                        }
                    }
                    td.gates { (r.gates.shown()) }
                    td.why { (reasons.get(&r.id).map_or("", |s| s.as_str())) }
                    td { (r.commit_shown(10)) }
                    td { (duration_text(seconds_between(&r.started_at, r.ended_at.as_deref()))) }
                }
            }
        }
        @if rows.is_empty() {
            p.note { "No runs match." }
        }
        p.pager {
            @if page > 1 {
                a rel="prev" href=(link(page - 1)) { "← newer" }
            }
            span { "page " (page) }
            @if more {
                a rel="next" href=(link(page + 1)) { "older →" }
            }
        }
    };
    Ok(Response::html(200, layout("strainline runs", body)))
}

/// What a run ran, named: a suite's name links to its history; a scenario's name, or
/// the command of a run without either, is text.
fn name_cell(r: &RunRow) -> Markup {
    html! {
        @match (&r.scenario, &r.suite) {
            (None, Some(suite)) => {
                a href=(format!("/history{}", query(&[("suite", Some(suite))]))) { (suite) }
            }
            _ => { (r.name()) }
        }
    }
}

/// A run in a list or a picker: `#12 checkout v2`, its name and label.
fn run_title(r: &RunRow) -> String {
    match r.label.as_deref() {
        Some(l) => format!("#{} {} {l}", r.id, r.name()),
        None => format!("#{} {}", r.id, r.name()),
    }
}

/// A status as a CSS class: only the words the report's style knows.
pub(super) fn css_class(status: &Status) -> &'static str {
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

fn filter_form(f: &RunFilter, suites: &[(String, i64)]) -> Markup {
    let text = |name: &str, shown: &str, v: &Option<String>, hint: &str| {
        html! {
            label { (shown) input name=(name) value=(v.as_deref().unwrap_or("")) placeholder=(hint) size="12"; }
        }
    };
    let choose = |name: &str, shown: &str, v: &Option<String>, options: &[&str]| {
        html! {
            label {
                (shown)
                select name=(name) {
                    option value="" { "any" }
                    @for o in options {
                        option selected[v.as_deref() == Some(*o)] { (o) }
                    }
                }
            }
        }
    };
    html! {
        form.filters method="get" action="/runs" {
            label {
                "Suite"
                select name="suite" {
                    option value="" { "any" }
                    @for (name, n) in suites {
                        option value=(name) selected[f.suite.as_deref() == Some(name)] { (name) " (" (n) ")" }
                    }
                }
            }
            (text("label", "Label", &f.label, ""))
            (choose("kind", "Kind", &f.kind, &["suite", "load", "monitor", "import"]))
            (choose(
                "status",
                "Verdict",
                &f.status,
                &["passed", "failed", "invalid", "crashed", "interrupted", "completed", "valid", "running"],
            ))
            (text("host", "Host", &f.host, "hostname"))
            (text("since", "Since", &f.since, "2026-11-01"))
            (text("until", "Until", &f.until, "2026-12-01"))
            button type="submit" { "Filter" }
        }
    }
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
    let others: Vec<&RunRow> = around.iter().filter(|x| x.id != id).take(100).collect();
    let bar = html! {
        (nav())
        p.pager {
            @if let Some(p) = prev {
                a rel="prev" href=(run_link(p)) { "← run #" (p) }
            }
            @if let Some(n) = next {
                a rel="next" href=(run_link(n)) { "run #" (n) " →" }
            }
        }
        @if !others.is_empty() {
            form.filters method="get" action="/compare" {
                input type="hidden" name="candidate" value=(id);
                label {
                    "Compare with"
                    select name="baseline" {
                        @for o in &others {
                            option value=(o.id) selected[Some(o.id) == prev] {
                                (run_title(o)) " " (o.started_at.get(..16).unwrap_or(&o.started_at))
                            }
                        }
                    }
                }
                button type="submit" { "Compare" }
            }
        }
    };
    Ok(Response::html(200, inject(&report, &bar.into_string())))
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
        let body = html! {
            h1 { "Compare" }
            p {
                "Two runs by id (" code { "12" } "), label (" code { "v0.7.0" } ") or "
                code { "latest" } ", " code { "LABEL~1" } ": every repetition of a label is one version."
            }
            form.filters method="get" action="/compare" {
                label { "Baseline" input name="baseline" placeholder="v0.7.0"; }
                label { "Candidate" input name="candidate" placeholder="latest"; }
                button type="submit" { "Compare" }
            }
        };
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
    let overlays = crate::report::timeline::overlays(store, c);
    let bar = html! {
        (nav())
        p {
            "Permalink: " a.permalink href=(permalink) { (permalink) }
            " · runs " (run_links(&judged.baseline)) " against " (run_links(&judged.candidate))
        }
    };
    Ok(Response::html(
        200,
        inject(
            &crate::report::html::comparison_over_time(c, &overlays),
            &bar.into_string(),
        ),
    ))
}

fn run_links(runs: &[RunRow]) -> Markup {
    html! {
        @for (i, r) in runs.iter().enumerate() {
            @if i > 0 { " " }
            a href=(run_link(r.id)) { "#" (r.id) }
        }
    }
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
    let body = html! {
        h1 { "Runs in progress" }
        @if running.is_empty() {
            p.note {
                "Nothing is running. A " code { "run" } ", " code { "load" } " or " code { "monitor" }
                " writing to this store shows here while it runs."
            }
        }
        ul.live-runs {
            @for r in &running {
                li {
                    a href={ "/live/" (r.id) } { (run_title(r)) }
                    " since " (r.started_at.get(..19).unwrap_or(&r.started_at))
                }
            }
        }
    };
    Ok(Response::html(200, layout("Live", body)))
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
    let figure = |name: &str, id: &str, start: &str, unit: &str| {
        html! { div { (name) b id=(id) { (start) } (unit) } }
    };
    let body = html! {
        h1 { "Run #" (id) " " span.note { (row.label.as_deref().unwrap_or(row.name())) } }
        p {
            "Status: " b id="status" class="verdict" { (row.status.name()) }
            " · case " b id="case" {}
            " · " a href=(run_link(id)) { "the run's report" }
        }
        div.figures {
            (figure("offered", "offered", "-", "req/s"))
            (figure("achieved", "achieved", "-", "req/s"))
            (figure("p99", "p99", "-", "ms"))
            (figure("errors", "errors", "-", "/s"))
            (figure("target RSS", "rss", "-", "MiB"))
            (figure("target CPU", "cpu", "-", "cores"))
            (figure("seconds", "seen", "0", ""))
        }
        svg id="rate" class="chart" viewBox="0 0 720 220" width="720" height="220" {}
        svg id="memory" class="chart" viewBox="0 0 720 220" width="720" height="220" {}
        div id="live" data-run=(id) data-api="/api/v1/" {}
        script src="/static/live.js" {}
    };
    Ok(Response::html(
        200,
        layout(&format!("Live: run #{id}"), body),
    ))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn row(suite: Option<&str>, scenario: Option<&str>, label: &str) -> RunRow {
        RunRow {
            id: 12,
            kind: "load".into(),
            label: Some(label.into()),
            command: "load http://127.0.0.1:8765/<x>".into(),
            started_at: "2026-11-28T10:00:00Z".into(),
            ended_at: None,
            status: Status::Passed,
            exit_code: Some(0),
            git_commit: None,
            git_dirty: None,
            host: "h".into(),
            fingerprint: "f".into(),
            strainline_version: "0.1.0".into(),
            suite: suite.map(String::from),
            scenario: scenario.map(String::from),
            gates: crate::store::GateTally::default(),
        }
    }

    /// A run is named by its scenario or suite and its label, every text escaped: a
    /// suite's name links to its history (percent-encoded), the others are text.
    #[test]
    fn a_run_s_name_and_label_are_text_in_the_page() {
        let suite = row(Some("web <b>api</b>"), None, "<script>x</script>");
        let cell = name_cell(&suite).into_string();
        assert_eq!(
            cell,
            "<a href=\"/history?suite=web%20%3Cb%3Eapi%3C%2Fb%3E\">web &lt;b&gt;api&lt;/b&gt;</a>"
        );
        assert_eq!(run_title(&suite), "#12 web <b>api</b> <script>x</script>");
        let page = layout("t<", html! { (run_title(&suite)) });
        assert!(page.contains("#12 web &lt;b&gt;api&lt;/b&gt; &lt;script&gt;x&lt;/script&gt;"));
        assert!(page.contains("<title>t&lt;</title>"));
        assert!(!page.contains("<script"));
        let scenario = row(None, Some("checkout"), "v1");
        assert_eq!(name_cell(&scenario).into_string(), "checkout");
        let plain = row(None, None, "v1");
        assert_eq!(
            name_cell(&plain).into_string(),
            "load http://127.0.0.1:8765/&lt;x&gt;"
        );
    }
}
