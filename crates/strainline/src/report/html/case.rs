//! A case's section of the run report: its heading and verdict, its reasons, its
//! tables (gates, metrics, agents, steps, checks, latency histogram), its charts and its
//! flame graph.

use std::fmt::Write;

use super::table;
use crate::report::run::CaseData;
use crate::report::svg::{escape, render};

pub(super) fn case_section(s: &mut String, c: &CaseData, charts: bool) {
    let status = &c.row.status;
    let _ = write!(
        s,
        "<h2>{} <small>({})</small></h2><p class=\"verdict {}\">{}</p>",
        escape(&c.row.name),
        escape(&c.row.test_kind),
        escape(status.name()),
        escape(&status.name().to_uppercase())
    );
    let reasons = c.reasons();
    if !reasons.is_empty() {
        s.push_str("<ul>");
        for r in reasons {
            let _ = write!(s, "<li>{}</li>", escape(&r));
        }
        s.push_str("</ul>");
    }
    table(s, &crate::report::run::GATE_COLUMNS, &c.gate_rows());
    if !c.row.metrics.is_empty() {
        s.push_str("<table><tr><th>metric</th><th>value</th><th>better</th><th>source</th></tr>");
        for m in &c.row.metrics {
            let _ = write!(
                s,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                escape(&m.name),
                escape(&c.shown(m)),
                escape(m.direction.name()),
                escape(m.source.as_deref().unwrap_or(""))
            );
        }
        s.push_str("</table>");
    }
    table(s, &crate::report::run::AGENT_COLUMNS, &c.agent_rows());
    table(s, &crate::report::run::STEP_COLUMNS, &c.step_rows());
    table(s, &crate::report::run::CHECK_COLUMNS, &c.check_rows());
    let histogram = c.histogram_rows();
    if !histogram.is_empty() {
        s.push_str("<p>Latency histogram, from intended send times (log-spaced buckets):</p>");
        table(s, &crate::report::run::HISTOGRAM_COLUMNS, &histogram);
    }
    if let Some(table) = c.detail("/table").and_then(|t| t.as_array()) {
        if !table.is_empty() {
            s.push_str("<pre>");
            for l in table.iter().filter_map(|l| l.as_str()) {
                let _ = writeln!(s, "{}", escape(l));
            }
            s.push_str("</pre>");
        }
    }
    if charts {
        for chart in super::case_charts(c) {
            s.push_str(&render(&chart));
        }
    }
    if let Some(fg) = c.detail("/flamegraph") {
        let linked = c.flamegraph_link.as_deref().and_then(super::beside);
        match (linked, fg["file"].as_str(), fg["why_not"].as_str()) {
            (Some(f), _, _) => {
                let _ = write!(
                    s,
                    "<p>CPU flame graph of the target: <a href=\"{}\">{}</a></p>",
                    escape(f),
                    escape(f)
                );
            }
            // Where the run wrote it, as text: a stored row is never a link.
            (None, Some(f), _) => {
                let _ = write!(
                    s,
                    "<p class=\"note\">The run wrote its flame graph to {} (its stacks are not in the store).</p>",
                    escape(&crate::units::one_line(f))
                );
            }
            (None, None, Some(why)) => {
                let _ = write!(s, "<p class=\"note\">No flame graph: {}</p>", escape(why));
            }
            _ => {}
        }
    }
}

