//! A load run with a progress line on a terminal (seconds, req/s, p99, errors): a soak
//! of hours shows it is alive; its observer (the live view, the exporter) is told of
//! every second. Interrupts (Ctrl-C, SIGTERM) end the run early.

use std::io::{IsTerminal, Write};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use super::recorder::Tally;
use super::{run, Outcome, Plan, Second};
use crate::observe::{LoadSecond, Observer};
use crate::units::format_micros;

/// Runs a plan, with the progress line on stderr when it is a terminal and `progress`
/// is asked for; `prefix` says what runs (a suite's case); `observer` is told of every
/// second. A signal received by strainline stops the run; what was measured until
/// then is kept.
pub fn run_live(plan: &Plan, progress: bool, prefix: &str, observer: &dyn Observer) -> Outcome {
    live_with(plan, progress, prefix, observer, |stop, on_second| {
        run(plan, Arc::new(AtomicBool::new(false)), stop, on_second)
    })
}

/// [`run_live`] with another engine (the agents' coordinator): `engine` gets the stop
/// predicate (a signal received) and the per-second callback that draws.
pub fn live_with<T>(
    plan: &Plan,
    progress: bool,
    prefix: &str,
    observer: &dyn Observer,
    engine: impl FnOnce(&dyn Fn() -> bool, &mut dyn FnMut(&Second, &Tally)) -> T,
) -> T {
    // The live view, when it draws, replaces the line.
    let live = progress && !observer.draws() && std::io::stderr().is_terminal();
    let rate = match &plan.model {
        super::Model::Open { rate, .. } => Some(rate.clone()),
        _ => None,
    };
    observer.load_starting(prefix.trim(), rate.as_ref().map(|r| r.at(0.0)));
    let mut on_second = |s: &Second, iv: &Tally| {
        observer.second(&LoadSecond {
            partial: s.partial(),
            offered: rate.as_ref().map(|r| r.at(s.t)),
            sent: iv.sent,
            completed: iv.completed,
            errors: s.errors,
            p50_us: s.p50_us,
            p99_us: s.p99_us,
            by_status: &iv.by_status,
            by_error: iv.by_error.iter().map(|(k, n)| (k.name(), *n)).collect(),
            corrected: &iv.corrected,
            lag: &iv.lag,
        });
        if s.partial() {
            return;
        }
        if live {
            let mut e = std::io::stderr().lock();
            let _ = write!(
                e,
                "\r\x1b[2K  {prefix}{:>5.0}s  {:>9.1} req/s  p99 {:>9}  errors {}",
                s.t,
                s.completed as f64,
                format_micros(s.p99_us),
                s.errors
            );
            let _ = e.flush();
        }
    };
    let out = engine(&crate::os::signals::interrupted, &mut on_second);
    if live {
        eprint!("\r\x1b[2K");
    }
    out
}
