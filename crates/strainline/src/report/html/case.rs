//! A case's section of the run report: its heading and verdict, its reasons, its
//! tables (gates, metrics, agents, steps, checks, latency histogram), its charts and its
//! flame graph.

use maud::{html, Markup, PreEscaped};

use super::{figures, table, table_of};
use crate::report::run::{
    CaseData, AGENT_COLUMNS, CHECK_COLUMNS, GATE_COLUMNS, HISTOGRAM_COLUMNS, STEP_COLUMNS,
};

/// A case's section, top to bottom; its charts only when `charts` (a case alone: a
/// case's repetitions draw theirs together, after the last one).
pub(super) fn section(c: &CaseData, charts: bool) -> Markup {
    html! {
        (heading(c))
        @if charts {
            (timeline_block(c))
        }
        (tables(c))
        @if charts {
            (case_charts_block(c))
        }
        (flame_graph(c))
    }
}

/// A load case over time, under its verdict, when it kept its seconds: the timeline,
/// then each step's own when it has more than one.
fn timeline_block(c: &CaseData) -> Markup {
    let Some(tl) = &c.timeline else {
        return html! {};
    };
    let id = format!("timeline-{}", c.row.id);
    let steps = crate::report::timeline::render_steps(tl, &id);
    html! {
        h3 { "Over time" }
        p class="note" {
            "Users are the most clients running at once in each second (each generator thread's most, added up)"
            @if tl.bucket > 1 { "; each point stands for " (tl.bucket) " s, its histograms merged" }
            ". Hover for a second's figures; drag to zoom on time, double-click for the whole run."
        }
        (PreEscaped(crate::report::timeline::render(tl, &id)))
        @if steps.len() > 1 {
            h3 { "Each step over time" }
            @if tl.steps.len() > steps.len() {
                p class="note" {
                    "The " (steps.len()) " steps that answered most, of " (tl.steps.len())
                    "; every step's seconds are in the CSV (" code { "--csv" } ")."
                }
            }
            @for (name, drawing) in &steps {
                h4 { (name) }
                (PreEscaped(drawing))
            }
        }
    }
}

/// The case's name and kind, its verdict, and the reasons for it.
fn heading(c: &CaseData) -> Markup {
    let status = c.row.status.name();
    let reasons = c.reasons();
    html! {
        h2 { (c.row.name) " " small { "(" (c.row.test_kind) ")" } }
        p class={ "verdict " (status) } { (status.to_uppercase()) }
        @if !reasons.is_empty() {
            ul { @for r in &reasons { li { (r) } } }
        }
    }
}

/// The case's tables, each only where it has rows: gates, metrics, agents, steps,
/// checks, the latency histogram (its bars read left to right), and a kind's own table
/// as text.
fn tables(c: &CaseData) -> Markup {
    let metrics: Vec<Vec<String>> = (c.row.metrics.iter())
        .map(|m| {
            vec![
                m.name.clone(),
                c.shown(m),
                m.direction.name().to_string(),
                m.source.clone().unwrap_or_default(),
            ]
        })
        .collect();
    let histogram = c.histogram_rows();
    let text = (c.detail("/table").and_then(|t| t.as_array())).filter(|t| !t.is_empty());
    html! {
        (table(&GATE_COLUMNS, &c.gate_rows()))
        (table(&["metric", "value", "better", "source"], &metrics))
        (table(&AGENT_COLUMNS, &c.agent_rows()))
        (table(&STEP_COLUMNS, &c.step_rows()))
        (table(&CHECK_COLUMNS, &c.check_rows()))
        @if !histogram.is_empty() {
            p { "Latency histogram, from intended send times (log-spaced buckets):" }
            (table_of(Some("histogram"), &HISTOGRAM_COLUMNS, &histogram))
        }
        @if let Some(lines) = text {
            pre { @for l in lines.iter().filter_map(|l| l.as_str()) { (l) "\n" } }
        }
    }
}

/// Where a case's section gets its charts: every chart of
/// [`case_charts`](super::case_charts), in reading order. A figure drawn for each case
/// belongs here, in this one place.
fn case_charts_block(c: &CaseData) -> Markup {
    figures(&super::case_charts(c))
}

/// The CPU flame graph: a link to the file written beside the report, else where the
/// run wrote it (as text: a stored row is never a link), else why there is none.
fn flame_graph(c: &CaseData) -> Markup {
    let Some(fg) = c.detail("/flamegraph") else {
        return html! {};
    };
    let linked = c.flamegraph_link.as_deref().and_then(super::beside);
    html! {
        @match (linked, fg["file"].as_str(), fg["why_not"].as_str()) {
            (Some(f), _, _) => {
                p { "CPU flame graph of the target: " a href=(f) { (f) } }
            }
            (None, Some(f), _) => {
                p class="note" {
                    "The run wrote its flame graph to " (crate::units::one_line(f))
                    " (its stacks are not in the store)."
                }
            }
            (None, None, Some(why)) => {
                p class="note" { "No flame graph: " (why) }
            }
            _ => {}
        }
    }
}
