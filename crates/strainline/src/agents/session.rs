//! One load session, from a planned spec to its judged figures: driven from this
//! machine, or spread over connected agents and merged, then judged (whose pace it
//! measured) and summarised. `strainline load` and the suites' load kinds (each bench
//! case, each ramp step) run load through this one function; what they do around it
//! (the store, the target's window, the gates) is theirs.

use super::coordinator::Ready;
use crate::load::summary::{summarize, LoadSummary};
use crate::load::verdict::{self, Verdict};
use crate::load::{self, LoadSpec, Outcome, Planned};
use crate::observe::Observer;

/// What a session measured, judged and summarised.
pub struct Session {
    pub outcome: Outcome,
    pub verdict: Verdict,
    pub summary: LoadSummary,
}

/// Runs `planned` (from `spec`) here, or on `agents` when given (their clocks already
/// checked, `planned.on_agents` already applied); `progress` draws the progress line on
/// a terminal, `prefix` says what runs, `observer` is told of every second. An agent
/// that refuses the plan is an error before any load is sent.
pub fn drive(
    spec: &LoadSpec,
    planned: &Planned,
    agents: Option<Ready>,
    (progress, prefix): (bool, &str),
    observer: &dyn Observer,
) -> crate::error::Result<Session> {
    let plan = &planned.plan;
    let outcome = match agents {
        None => load::run_live(plan, progress, prefix, observer),
        Some(ready) => load::live_with(plan, progress, prefix, observer, |stop, on_second| {
            ready.run(spec, plan, stop, on_second)
        })?,
    };
    let verdict = verdict::judge(&outcome);
    let (shown, kept) = spec.percentiles.lists();
    let summary = summarize(
        &spec.what(),
        spec.model_name(),
        &planned.description,
        &outcome,
        &verdict,
        (&planned.step_names, &planned.labels),
        (&shown, &kept),
    );
    Ok(Session {
        outcome,
        verdict,
        summary,
    })
}
