//! Was the run limited by the target or by strainline itself? A run whose generator was
//! the limit is INVALID — its figures describe strainline, not the target — and the
//! verdict says why, with the evidence. Never just a warning.

use super::driver::Outcome;

pub use crate::analysis::bounds::{ACHIEVED_BOUND, LAG_BOUND_US, SATURATED as CPU_BOUND};

/// The share of scheduled sends that may find the pool at its cap before the run is
/// INVALID.
pub const POOL_CAP_BOUND: f64 = 0.01;

/// The share of the machine's CPU time the hypervisor may take before a run says so.
pub const STOLEN_BOUND: f64 = 0.01;

/// The fewest sends late beyond the lag bound that count as evidence.
pub const LATE_SENDS_MIN: u64 = 5;

/// Whose pace a run measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Validity {
    /// The target, not the generator, set the pace.
    Valid,
    /// The generator was the limit: the figures describe strainline.
    Invalid,
    /// Nothing succeeded.
    Failed,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Verdict {
    pub status: Validity,
    /// Why, with figures.
    pub reasons: Vec<String>,
    /// Requests per second the schedule offered (open model).
    pub offered_rate: Option<f64>,
    /// Responses per second received.
    pub achieved_rate: f64,
}

/// Each worker thread's busy share of the run (CPU seconds / wall seconds).
fn thread_shares(o: &Outcome) -> impl Iterator<Item = f64> + '_ {
    o.thread_cpu
        .iter()
        .map(|c| if o.elapsed > 0.0 { c / o.elapsed } else { 0.0 })
}

/// Was one of the generator's own worker threads busy nearly all of the run?
pub fn at_capacity(o: &Outcome) -> bool {
    thread_shares(o).any(|share| share >= CPU_BOUND)
}

/// The share of the machine's CPU time the hypervisor took during a run (0 to 1).
pub fn stolen_share(o: &Outcome) -> f64 {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    if o.elapsed > 0.0 {
        o.stolen_seconds / (o.elapsed * cores)
    } else {
        0.0
    }
}

pub fn judge(o: &Outcome) -> Verdict {
    let t = &o.total;
    let achieved_rate = if o.elapsed > 0.0 {
        t.completed as f64 / o.elapsed
    } else {
        0.0
    };
    let offered_rate = o
        .scheduled
        .filter(|s| s.1 > 0.0)
        .map(|(n, span)| n as f64 / span);
    let mut evidence = Vec::new();
    let mut notes = Vec::new();
    let lag_at = |q: f64| {
        if t.lag.is_empty() {
            0
        } else {
            t.lag.value_at_quantile(q)
        }
    };
    let (lag_p90, lag_p99) = (lag_at(0.90), lag_at(0.99));
    // Late sends invalidate a run when lateness is the generator's pattern: one send in
    // ten late beyond the bound (p90), and at least LATE_SENDS_MIN of them. A tail of
    // late sends alone (p99) is a burst — a hypervisor taking the CPU, a 30 ms hiccup at
    // 40 req/s delaying two sends — which the corrected latency already includes: a note.
    let late = t.lag.len() - t.lag.count_between(0, LAG_BOUND_US);
    let line = format!(
        "the generator sent late: schedule lag p90 {:.1} ms, p99 {:.1} ms (bound {:.1} ms)",
        lag_p90 as f64 / 1e3,
        lag_p99 as f64 / 1e3,
        LAG_BOUND_US as f64 / 1e3
    );
    // The hypervisor taking the machine's CPU makes every process late, the generator
    // included: that lateness is the machine's (and said so below), not the generator's.
    let stolen = stolen_share(o) > STOLEN_BOUND;
    if lag_p90 > LAG_BOUND_US && late >= LATE_SENDS_MIN && !stolen {
        evidence.push(line);
    } else if lag_p99 > LAG_BOUND_US {
        notes.push(line);
    }
    // A VM whose hypervisor took CPU during the run: the figures include its delays.
    if stolen {
        notes.push(format!(
            "the hypervisor took {:.2} s of CPU from this machine during the run ({:.1}% of its CPU time): latency and lateness include its delays",
            o.stolen_seconds,
            100.0 * stolen_share(o)
        ));
    }
    // A few sends that found the pool full on a hiccup do not change the result; more
    // than 1% of them do.
    if t.cap_hits > 0 {
        let line = format!(
            "the connection pool was at its cap for {} of {} scheduled sends (raise -c, or \
             `connections` in a suite)",
            t.cap_hits,
            t.sent.max(t.cap_hits)
        );
        if t.cap_hits as f64 > POOL_CAP_BOUND * t.sent.max(t.cap_hits) as f64 {
            evidence.push(line);
        } else {
            notes.push(line);
        }
    }
    if o.connections_asked > 0 && o.connections_ready < o.connections_asked {
        evidence.push(format!(
            "only {} of {} connections were open when the clock started: the target \
             did not accept the rest in time (a full listen queue drops a handshake, which the \
             kernel retries after 1 s)",
            o.connections_ready, o.connections_asked
        ));
    }
    if let Some(n) = t.by_error.get(&super::recorder::ErrorKind::LocalResources) {
        evidence.push(format!(
            "{n} connections failed for lack of local resources (ports, file descriptors)"
        ));
    }
    for (i, share) in thread_shares(o).enumerate() {
        if share >= CPU_BOUND {
            evidence.push(format!(
                "worker thread {i} was busy {:.0}% of the run (bound {:.0}%): add --threads",
                100.0 * share,
                100.0 * CPU_BOUND
            ));
        }
    }
    if t.ok == 0 {
        let mut why: Vec<String> = t
            .by_error
            .iter()
            .map(|(k, v)| format!("{} {v}", k.name()))
            .collect();
        let what = if o.exit_codes { "exit" } else { "HTTP" };
        why.extend(t.by_status.iter().map(|(s, v)| format!("{what} {s} {v}")));
        return Verdict {
            status: Validity::Failed,
            reasons: vec![format!(
                "no request succeeded ({})",
                if why.is_empty() {
                    "nothing was sent".into()
                } else {
                    why.join(", ")
                }
            )],
            offered_rate,
            achieved_rate,
        };
    }
    let short = offered_rate.is_some_and(|off| achieved_rate < ACHIEVED_BOUND * off);
    // One rule for every model, kind and ramp step: any evidence that the generator was
    // at its limit makes the run INVALID, whether or not the rate fell short (a
    // generator at 99% of a core has no headroom left to measure with).
    let invalid = !evidence.is_empty();
    let mut reasons = Vec::new();
    if let (true, Some(off)) = (short, offered_rate) {
        reasons.push(format!(
            "achieved {achieved_rate:.1} req/s of {off:.1} offered ({:.1}%)",
            100.0 * achieved_rate / off
        ));
    }
    reasons.extend(evidence);
    // Evidence that did not change the result, worth knowing.
    reasons.extend(notes.into_iter().map(|e| format!("note: {e}")));
    Verdict {
        status: if invalid {
            Validity::Invalid
        } else {
            Validity::Valid
        },
        reasons,
        offered_rate,
        achieved_rate,
    }
}
