//! The HTML report: one self-contained file — inline CSS and SVG, no scripts, no fonts
//! or images fetched (a Content-Security-Policy forbids both) — with the verdict and its
//! reasons at the top, then per case its metrics, gates and charts. Every string that
//! comes from a user, a target or a log is escaped.

mod case;
mod charts;
mod compare;

use std::fmt::Write;

use crate::report::run::{CaseData, RunData};
use super::svg::{escape, render};

pub use charts::case_charts;
pub use compare::comparison_report;

/// The one stylesheet, the report's and `serve`'s pages'.
pub const STYLE: &str = include_str!("../style.css");

pub(super) fn page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
<title>{}</title><style>{STYLE}</style></head><body>\n{body}\n</body></html>\n",
        escape(title)
    )
}
/// A table of `rows` under `heads`, escaped; nothing without rows.
fn table(s: &mut String, heads: &[&str], rows: &[Vec<String>]) {
    if rows.is_empty() {
        return;
    }
    s.push_str("<table><tr>");
    for h in heads {
        let _ = write!(s, "<th>{}</th>", escape(h));
    }
    s.push_str("</tr>");
    for row in rows {
        s.push_str("<tr>");
        for cell in row {
            let _ = write!(s, "<td>{}</td>", escape(cell));
        }
        s.push_str("</tr>");
    }
    s.push_str("</table>");
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
    let mut s = String::new();
    let _ = write!(
        s,
        "<h1>{}</h1><p class=\"verdict {}\"><strong>{}</strong>",
        escape(&title),
        escape(r.run.status.name()),
        escape(&verdict)
    );
    if !why.is_empty() {
        s.push_str("</p><ul>");
        for w in &why {
            let _ = write!(s, "<li>{}</li>", escape(w));
        }
        s.push_str("</ul>");
    } else {
        s.push_str("</p>");
    }
    s.push_str("<table class=\"meta\">");
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
    for (k, v) in rows.iter().filter(|r| !r.1.is_empty()) {
        let _ = write!(s, "<tr><td>{k}</td><td>{}</td></tr>", escape(v));
    }
    s.push_str("</table>");
    // Every case at a glance, before each one's section.
    let (heads, rows) = r.summary_table();
    s.push_str("<h2 id=\"summary\">Cases</h2>");
    let heads: Vec<&str> = heads.iter().map(String::as_str).collect();
    table(&mut s, &heads, &rows);
    // A case's repetitions one after the other, then their charts together.
    let mut i = 0;
    while i < r.cases.len() {
        let key = |c: &CaseData| crate::store::case_key(&c.row.name, &c.row.test_kind).to_string();
        let first = key(&r.cases[i]);
        let group: Vec<&CaseData> = r.cases[i..]
            .iter()
            .take_while(|c| key(c) == first)
            .collect();
        let repeated = group.len() > 1;
        for c in &group {
            case::case_section(&mut s, c, !repeated);
        }
        if repeated {
            let _ = write!(
                s,
                "<h3>{} — its {} repetitions</h3>",
                escape(&first),
                group.len()
            );
            for chart in charts::repetition_charts(&group) {
                s.push_str(&render(&chart));
            }
        }
        i += group.len();
    }
    page(&title, &s)
}

