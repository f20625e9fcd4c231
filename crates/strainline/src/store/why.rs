//! Why a run ended as it did, in one line — the *Why* of `serve`'s runs page and of
//! `show`: the reason its status stands for, never a note (evidence that did not change
//! the verdict, as "the generator sent late in a burst").

use std::collections::HashMap;

use super::backend::Value;
use super::{Result, Status, Store};

/// A reason that is a note, not why the run ended as it did.
fn is_note(reason: &str) -> bool {
    reason.starts_with("note: ")
}

/// A stored JSON array of reasons, without its notes.
fn reasons(json: Option<&serde_json::Value>) -> Vec<String> {
    json.and_then(|v| v.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|r| r.as_str())
                .filter(|r| !is_note(r))
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

/// A case that did not pass: what the *Why* of its run can be made of.
struct Bad {
    run: i64,
    name: String,
    status: Status,
    /// The details of its failed gates, in order.
    gates: Vec<String>,
    reasons: Vec<String>,
}

impl Bad {
    /// The case's own why: its first failed gate when it failed, else its first reason,
    /// else its status.
    fn why(&self, one_case_run: bool) -> String {
        let why = match (&self.status, self.gates.first(), self.reasons.first()) {
            (Status::Failed, Some(g), _) => format!("gate failed: {g}"),
            (_, _, Some(r)) => r.clone(),
            (_, Some(g), None) => format!("gate failed: {g}"),
            (s, None, None) => s.name().to_string(),
        };
        if one_case_run {
            why
        } else {
            format!("{}: {why}", self.name)
        }
    }
}

impl Store {
    /// Why each of `runs` ended as it did: its own first reason, else that of its first
    /// case whose status is the run's (the one the run's exit code stands for), else of
    /// its first case that did not pass. A `load` run's one case goes unnamed.
    pub fn first_reasons(&self, runs: &[i64]) -> Result<HashMap<i64, String>> {
        let mut out = HashMap::new();
        if runs.is_empty() {
            return Ok(out);
        }
        let ids: Vec<Value> = runs.iter().map(|&id| Value::Int(id)).collect();
        let list = super::browse::placeholders(1, ids.len());
        let mut status = HashMap::new();
        let mut single = HashMap::new();
        for r in self.query(
            &format!("SELECT id, reasons, status, kind FROM runs WHERE id IN ({list})"),
            &ids,
        )? {
            let own = r.opt_text(1).and_then(|s| serde_json::from_str(&s).ok());
            if let Some(first) = reasons(own.as_ref()).into_iter().next() {
                out.insert(r.int(0), first);
            }
            status.insert(r.int(0), Status::read(&r.text(2)));
            single.insert(r.int(0), r.text(3) == "load");
        }
        let mut bad: Vec<Bad> = Vec::new();
        for r in self.query(
            &format!(
                "SELECT run_id, name, status, summary, id FROM cases
                 WHERE run_id IN ({list}) AND status NOT IN ({good}) ORDER BY id",
                good = Status::sql(&Status::GOOD)
            ),
            &ids,
        )? {
            let summary: Option<serde_json::Value> =
                r.opt_text(3).and_then(|s| serde_json::from_str(&s).ok());
            let gates = self
                .gates(r.int(4), summary.as_ref())?
                .into_iter()
                .filter(|g| !g.passed)
                .map(|g| g.detail)
                .collect();
            bad.push(Bad {
                run: r.int(0),
                name: r.text(1),
                status: Status::read(&r.text(2)),
                gates,
                reasons: reasons(summary.as_ref().and_then(|s| s.get("reasons"))),
            });
        }
        for b in bad.iter().filter(|b| status.get(&b.run) == Some(&b.status)) {
            let one = single.get(&b.run) == Some(&true);
            out.entry(b.run).or_insert_with(|| b.why(one));
        }
        for b in &bad {
            let one = single.get(&b.run) == Some(&true);
            out.entry(b.run).or_insert_with(|| b.why(one));
        }
        Ok(out)
    }
}
