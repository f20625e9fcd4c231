//! The HTML report: one self-contained file — inline CSS and SVG, no fonts or images
//! fetched, no script but the timeline's own (a Content-Security-Policy forbids the rest
//! and allows that one by its hash) — with the verdict and its reasons at the top, then
//! per case its timeline, metrics, gates and charts. Pages are maud
//! templates: every string that comes from a user, a target or a log is escaped by maud
//! as it is spliced in (the SVG of `svg::render` and of `timeline`, escaped there, goes
//! in as it is), and a control character is made U+FFFD.

mod case;
mod charts;
mod compare;

use maud::{html, Markup, PreEscaped, DOCTYPE};

use super::run::{CaseData, RunData};
use super::svg::{render, Chart};

pub use charts::case_charts;
pub use compare::comparison_over_time;

/// The one stylesheet, the report's and `serve`'s pages'.
pub const STYLE: &str = include_str!("../style.css");

/// A whole page: its title, the Content-Security-Policy (nothing fetched, no script but
/// the timeline's, by its hash),
/// the stylesheet inline, and `body`.
pub(super) fn page(title: &str, body: Markup) -> String {
    // The timeline's script, the one script a report may run (allowed by its hash).
    let script = body.0.contains(TIMELINE);
    let policy = policy();
    let page = html! {
        (DOCTYPE) "\n"
        html lang="en" {
            head {
                meta charset="utf-8";
                meta http-equiv="Content-Security-Policy" content=(policy);
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) }
                style { (PreEscaped(STYLE)) }
            }
            body {
                "\n" (body) "\n"
                @if script {
                    script { (PreEscaped(crate::report::timeline::SCRIPT)) }
                }
            }
        }
        "\n"
    };
    no_controls(page.into_string())
}

/// A report's Content-Security-Policy: nothing fetched, no script but the timeline's,
/// by its hash.
pub fn policy() -> String {
    format!(
        "default-src 'none'; style-src 'unsafe-inline'; img-src data:; script-src {}",
        crate::report::timeline::script_source()
    )
}

/// What marks a timeline in a page's body.
const TIMELINE: &str = "<div class=\"timeline\"";

/// A control character other than a newline or a tab, which a label or a log line may
/// hold (an escape sequence, a bell).
fn is_control(c: char) -> bool {
    (c as u32) < 0x20 && c != '\n' && c != '\t'
}

/// `page` with each control character made U+FFFD, as `svg::escape` makes them in the
/// charts: maud escapes markup, not these. The templates' own text holds none.
fn no_controls(page: String) -> String {
    if !page.chars().any(is_control) {
        return page;
    }
    page.chars()
        .map(|c| if is_control(c) { '\u{fffd}' } else { c })
        .collect()
}

/// A table of `rows` under `heads`; nothing without rows.
fn table(heads: &[&str], rows: &[Vec<String>]) -> Markup {
    table_of(None, heads, rows)
}

/// A table of `rows` under `heads`, of the stylesheet's `class` if any; nothing without
/// rows.
fn table_of(class: Option<&str>, heads: &[&str], rows: &[Vec<String>]) -> Markup {
    html! {
        @if !rows.is_empty() {
            table class=[class] {
                tr { @for h in heads { th { (h) } } }
                @for row in rows {
                    tr { @for cell in row { td { (cell) } } }
                }
            }
        }
    }
}

/// Charts as inline SVG, in their order.
fn figures(charts: &[Chart]) -> Markup {
    html! {
        @for chart in charts { (PreEscaped(render(chart))) }
    }
}

/// `name` if it is a file strainline wrote beside the report — a plain relative name of
/// letters, digits, `.`, `-` and `_` — else `None`: a report links to nothing else (no
/// scheme such as `javascript:`, no absolute path, no `..`).
pub fn beside(name: &str) -> Option<&str> {
    let plain = !name.is_empty()
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'));
    plain.then_some(name)
}

/// The HTML report of a run.
pub fn run_report(r: &RunData) -> String {
    let (verdict, why) = r.verdict();
    let title = r.title();
    let (heads, rows) = r.summary_table();
    let heads: Vec<&str> = heads.iter().map(String::as_str).collect();
    let body = html! {
        h1 { (title) }
        p class={ "verdict " (r.run.status.name()) } { strong { (verdict) } }
        @if !why.is_empty() {
            ul { @for w in &why { li { (w) } } }
        }
        (meta(r))
        // Every case at a glance, before each one's section.
        h2 id="summary" { "Cases" }
        (table(&heads, &rows))
        // A case's repetitions one after the other, then their charts together.
        @for group in r.cases.chunk_by(|a, b| case_key(a) == case_key(b)) {
            @let repeated = group.len() > 1;
            @for c in group {
                (case::section(c, !repeated))
            }
            @if repeated {
                h3 { (case_key(&group[0])) " — its " (group.len()) " repetitions" }
                (figures(&charts::repetition_charts(group)))
            }
        }
    };
    page(&title, body)
}

/// A case's name and kind as the store keys it: what its repetitions share.
fn case_key(c: &CaseData) -> String {
    crate::store::case_key(&c.row.name, &c.row.test_kind).to_string()
}

/// The run's table of facts: suite, command, label, times, host, commit, version; a
/// fact the run lacks has no row.
fn meta(r: &RunData) -> Markup {
    let rows = [
        ("suite", r.run.suite.clone().unwrap_or_default()),
        ("command", r.run.command.clone()),
        ("label", r.run.label.clone().unwrap_or_default()),
        ("started", r.run.started_at.clone()),
        ("ended", r.run.ended_at.clone().unwrap_or_default()),
        ("host", format!("{} [{}]", r.run.host, r.run.fingerprint)),
        (
            "git",
            r.run
                .git_commit
                .clone()
                .map(|c| {
                    format!(
                        "{c}{}",
                        if r.run.git_dirty == Some(true) {
                            " (dirty)"
                        } else {
                            ""
                        }
                    )
                })
                .unwrap_or_default(),
        ),
        ("strainline", r.run.strainline_version.clone()),
    ];
    html! {
        table class="meta" {
            @for (k, v) in rows.iter().filter(|r| !r.1.is_empty()) {
                tr { td { (k) } td { (v) } }
            }
        }
    }
}
