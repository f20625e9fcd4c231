//! Was the run limited by the target or by strainline itself? A run whose generator was
//! the limit is INVALID — its figures describe strainline, not the target — and the
//! verdict says why, with the evidence. Never just a warning.

use super::driver::Outcome;
use crate::units::{format_micros, latency_ms, rate, share};

pub use crate::analysis::bounds::{
    ACHIEVED_BOUND, LAG_BOUND_US, SATURATED as CPU_BOUND, STOLEN_BOUND,
};

/// The share of scheduled sends that may find the pool at its cap before the run is
/// INVALID.
pub const POOL_CAP_BOUND: f64 = 0.01;

/// How many times the machine's stolen share of CPU time the share of late sends may be
/// and still be the hypervisor's doing.
pub const STEAL_EXPLAINS: f64 = 3.0;

/// The fewest sends late beyond the lag bound that count as evidence.
pub const LATE_SENDS_MIN: u64 = 5;

/// The share of the worker threads' time the script's hooks may hold them before the
/// run is INVALID: a hook runs on its worker thread and holds every client there, so
/// from half of the time on a reply that comes finds its thread in a hook more often
/// than not — the latency's median is then the hook's wait, not the target's answer.
pub const HOOK_BOUND: f64 = 0.5;

/// The share of the hooks' calls that may fail (a Lua error, its time or memory limit)
/// before the run is INVALID: the figures then measure the script, not the target.
pub const HOOK_ERRORS_BOUND: f64 = 0.01;

/// Whose pace a run measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Validity {
    /// The target, not the generator, set the pace.
    Valid,
    /// The generator was the limit: the figures describe strainline.
    Invalid,
    /// Nothing succeeded.
    Failed,
}

impl Validity {
    /// As stored and printed (`valid`, `invalid`, `failed`).
    pub fn name(self) -> &'static str {
        match self {
            Validity::Valid => "valid",
            Validity::Invalid => "invalid",
            Validity::Failed => "failed",
        }
    }
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
    let cores = crate::host::cores() as f64;
    if o.elapsed > 0.0 {
        o.stolen_seconds / (o.elapsed * cores)
    } else {
        0.0
    }
}

/// How much slower the target must answer at the pool's full concurrency than at half
/// of it or less for the pool's cap to be the target's doing.
pub const QUEUED_FACTOR: f64 = 2.0;

/// The fewest responses on each side of that comparison.
const QUEUED_MIN: u64 = 10;

/// Why the open model's pool reached its cap.
enum CapCause {
    /// The target answered slower with every connection busy: it queued what it was
    /// sent. Service times (µs): its lower quartile at light load, p50 at full.
    Target { light: u64, full: u64 },
    /// It answered as fast with every connection busy as with few: the pool was too
    /// small for the rate at that latency.
    Pool { light: u64, full: u64 },
    /// Too few responses at light or full load to tell.
    Unknown,
}

/// Why the pool's cap was reached. By Little's law a pool whose every connection is busy
/// holds rate × service time = cap requests. A target with headroom answers as fast
/// with all of them busy as with few (a pool too small for its latency: the cap,
/// strainline's setting, was the limit); a saturated target queues them and answers
/// slower in proportion — then the cap is only where its queue showed. Compares the
/// service time of sends that went with every connection busy (p50) against those that
/// went with at most half busy (lower quartile: the target's answer before it queued).
fn cap_cause(t: &super::recorder::Tally) -> CapCause {
    let (l, f) = (&t.service_light, &t.service_full);
    if l.len() < QUEUED_MIN || f.len() < QUEUED_MIN {
        return CapCause::Unknown;
    }
    let (light, full) = (l.value_at_quantile(0.25), f.value_at_quantile(0.5));
    if full as f64 >= QUEUED_FACTOR * light as f64 {
        CapCause::Target { light, full }
    } else {
        CapCause::Pool { light, full }
    }
}

/// Evidence that this machine's generator was the limit, and notes that did not change
/// the result.
fn generator_evidence(o: &Outcome) -> (Vec<String>, Vec<String>) {
    let t = &o.total;
    let mut evidence = Vec::new();
    let mut notes = Vec::new();
    lateness(o, &mut evidence, &mut notes);
    // A VM whose hypervisor took CPU during the run: the figures include its delays.
    if stolen_share(o) > STOLEN_BOUND {
        notes.push(format!(
            "the hypervisor took {:.2} s of CPU from this machine during the run ({:.1}% of its CPU time): latency and lateness include its delays",
            o.stolen_seconds,
            100.0 * stolen_share(o)
        ));
    }
    pool_cap(t, &mut evidence, &mut notes);
    pool_held(t, &mut notes);
    // The kernel completes a handshake whether or not the target accepts: connections
    // still not open are the target's (its accept queue), not the generator's limit.
    if let Some(line) = accept_queue(o) {
        notes.push(line);
    }
    if let Some(line) = delayed_ack(o) {
        notes.push(line);
    }
    hooks(o, &mut evidence, &mut notes);
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
    (evidence, notes)
}

/// The generator's lateness: evidence when late sends are its pattern (p90 beyond the
/// bound, enough of them, more than the hypervisor's stolen CPU explains), a note when
/// they are a burst (p99 alone).
fn lateness(o: &Outcome, evidence: &mut Vec<String>, notes: &mut Vec<String>) {
    let t = &o.total;
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
        "the generator sent late: schedule lag p90 {}, p99 {} (bound {})",
        format_micros(lag_p90),
        format_micros(lag_p99),
        format_micros(LAG_BOUND_US)
    );
    // The hypervisor taking the machine's CPU makes every process late, the generator
    // included: that lateness is the machine's (and said so below), not the generator's —
    // as far as it can explain it: sends late while the machine had its CPU taken for
    // a share s of the time are at most a few times s of all sends (those due in a
    // stolen burst and the catch-up after it). A generator late for more is starved
    // by something else (seen: an agent held to 10% of a CPU, 2% stolen, p90 lag 50 ms).
    let stolen = stolen_share(o) > STOLEN_BOUND;
    let late_share = late as f64 / t.lag.len().max(1) as f64;
    let excused = stolen && late_share <= STEAL_EXPLAINS * stolen_share(o);
    if lag_p90 > LAG_BOUND_US && late >= LATE_SENDS_MIN && !excused {
        evidence.push(line);
    } else if lag_p99 > LAG_BOUND_US {
        // Worded as what it is, so that it cannot read against the VALID above it.
        notes.push(format!(
            "the generator sent late in a burst, not as a pattern: schedule lag p99 {}, p90 {} (bound {} for the p90) — the corrected latency includes the delay; this is not evidence against the run",
            format_micros(lag_p99),
            format_micros(lag_p90),
            format_micros(LAG_BOUND_US)
        ));
    }
}

/// The pool at its cap: evidence when more than [`POOL_CAP_BOUND`] of the sends found
/// it so while the target answered as fast as with few connections busy, a note when
/// fewer did or when the target's slowing down was why (see `cap_cause`).
fn pool_cap(t: &super::recorder::Tally, evidence: &mut Vec<String>, notes: &mut Vec<String>) {
    // A few sends that found the pool full on a hiccup do not change the result; more
    // than 1% of them do — unless the target is why (see `cap_cause`).
    if t.cap_hits == 0 {
        return;
    }
    let share = format!(
        "the connection pool was at its cap for {} of {} scheduled sends",
        t.cap_hits,
        t.sent.max(t.cap_hits)
    );
    let line = match cap_cause(t) {
        CapCause::Target { light, full } => {
            notes.push(format!(
                "{share} because the target slowed down: with every connection busy it \
                 answered in {} (p50), against {} with half of them or fewer \
                 (lower quartile) — it queued what it was sent (Little's law), the target's \
                 limit; the corrected latency includes the wait",
                format_micros(full),
                format_micros(light)
            ));
            None
        }
        CapCause::Pool { light, full } => Some(format!(
            "{share} while the target answered as fast as with few busy ({} p50 \
             against {}): raise -c, or `connections` in a suite",
            format_micros(full),
            format_micros(light)
        )),
        CapCause::Unknown => Some(format!("{share} (raise -c, or `connections` in a suite)")),
    };
    if let Some(line) = line {
        if t.cap_hits as f64 > POOL_CAP_BOUND * t.sent.max(t.cap_hits) as f64 {
            evidence.push(line);
        } else {
            notes.push(line);
        }
    }
}

/// The pool that held its size because the target queued: the target's limit, a note.
fn pool_held(t: &super::recorder::Tally, notes: &mut Vec<String>) {
    // The pool held its size because the target queued: the target's limit, a note.
    if t.held == 0 {
        return;
    }
    let (light, all) = (&t.service_light, &t.service);
    let ms = |h: &hdrhistogram::Histogram<u64>, q: f64| {
        if h.is_empty() {
            0.0
        } else {
            h.value_at_quantile(q) as f64 / 1e3
        }
    };
    let (full, few) = (ms(all, 0.5), ms(light, 0.25));
    // "Slowed down" only where the documented rule (QUEUED_FACTOR) says so over the
    // run: the pool's own growth rule looks at a shorter window.
    let why = if full >= QUEUED_FACTOR * few && few > 0.0 {
        format!(
            "because the target slowed down: it answered in {} (p50), against \
             {} with few connections busy (lower quartile) — it queued what it \
             was sent (Little's law), and more connections would only have moved the \
             queue into it",
            latency_ms(full),
            latency_ms(few)
        )
    } else {
        format!(
            "when the target's latest answers were slower than its fastest; over the run \
             it answered in {} (p50) against {} with few connections \
             busy (lower quartile), under the {QUEUED_FACTOR}× that names a slowdown",
            latency_ms(full),
            latency_ms(few)
        )
    };
    notes.push(format!(
        "the connection pool held its size for {} of {} scheduled sends {why}; the \
         corrected latency includes the wait",
        t.held,
        t.sent.max(t.held),
    ));
}

/// The script's hooks: the time they held the worker threads and the calls that
/// failed, evidence that the generator — its script — set the pace or the failures.
fn hooks(o: &Outcome, evidence: &mut Vec<String>, notes: &mut Vec<String>) {
    use super::recorder::counters;
    let t = &o.total;
    let calls = t.counter(counters::HOOK_CALLS);
    if calls == 0 || o.elapsed <= 0.0 {
        return;
    }
    let held = t.counter(counters::HOOK_US) as f64 / 1e6;
    let of = o.elapsed * o.threads.max(1) as f64;
    let share = held / of;
    let us = crate::units::format_micros;
    let service = if t.service.is_empty() {
        "no reply".to_string()
    } else {
        format!(
            "a service time p50 of {} (the wait for a thread held by a hook included)",
            us(t.service.value_at_quantile(0.5))
        )
    };
    let line = format!(
        "the script's hooks held the worker threads {held:.2} s of their {of:.2} s ({:.0}%, bound {:.0}%): {calls} calls of {} on average, against {service} — a hook holds every client of its thread while it runs, so the generator (its script) set the pace",
        100.0 * share,
        100.0 * HOOK_BOUND,
        us((1e6 * held / calls as f64) as u64)
    );
    if share >= HOOK_BOUND {
        evidence.push(line);
    } else if share >= 0.2 * HOOK_BOUND {
        notes.push(line);
    }
    let failed = t.counter("flow.script_errors")
        + t.by_error
            .get(&super::recorder::ErrorKind::Script)
            .copied()
            .unwrap_or(0);
    if failed > 0 {
        let line = format!(
            "the script's hooks failed {failed} of their {calls} calls (a Lua error, or its time or memory limit; the first is logged): those failures are the script's, not the target's"
        );
        if failed as f64 > HOOK_ERRORS_BOUND * calls as f64 {
            evidence.push(line);
        } else {
            notes.push(line);
        }
    }
}

/// The target's accept queue, when connections the closed model asked for were not
/// open when the clock started.
pub fn accept_queue(o: &Outcome) -> Option<String> {
    (o.connections_asked > 0 && o.connections_ready < o.connections_asked).then(|| {
        format!(
            "the target's accept queue: only {} of {} connections were open when the clock \
             started — the target did not accept the rest in time (a full listen queue drops \
             a handshake, which the kernel retries after 1 s); the run measured those it accepted",
            o.connections_ready, o.connections_asked
        )
    })
}

/// The delayed-ACK signature, when the run's responses show it.
pub fn delayed_ack(o: &Outcome) -> Option<String> {
    let t = &o.total;
    let p50 = if t.service.is_empty() {
        0.0
    } else {
        t.service.value_at_quantile(0.5) as f64 / 1e3
    };
    crate::analysis::signatures::delayed_ack(
        t.counter(super::recorder::counters::LATE_TAILS),
        t.completed,
        p50,
    )
}

/// A run on agents: each agent judged its own generator; one that was the limit, or
/// that was lost, makes the run INVALID by name.
fn agents_evidence(o: &Outcome) -> (Vec<String>, Vec<String>) {
    let (mut evidence, mut notes) = (Vec::new(), Vec::new());
    for a in &o.agents {
        if let Some(lost) = &a.lost {
            evidence.push(format!(
                "agent {} was lost: {lost} — what it measured until then is kept, its share of the schedule after that was never sent",
                a.name
            ));
            continue;
        }
        for r in &a.reasons {
            match r.strip_prefix("note: ") {
                Some(note) => notes.push(format!("agent {}: {note}", a.name)),
                None if a.status == Some(Validity::Invalid) => {
                    evidence.push(format!("agent {}: {r}", a.name))
                }
                None => notes.push(format!("agent {}: {r}", a.name)),
            }
        }
    }
    (evidence, notes)
}

/// Requests that were due and never sent, and why: the open model's promise is that
/// every scheduled request is in the results — sent, failed, or named here (and counted
/// in the error rate, with its latency censored at the run's end).
fn unsent(o: &Outcome) -> Option<String> {
    let t = &o.total;
    if t.unsent == 0 {
        return None;
    }
    let service = if t.service.is_empty() {
        "none answered".to_string()
    } else {
        format!(
            "service time p50 {}",
            format_micros(t.service.value_at_quantile(0.5))
        )
    };
    let why = if 2 * t.unsent_connecting >= t.unsent {
        "no connection could be opened in time — the target did not complete the handshakes \
         (a full listen queue drops them, and the kernel retries after 1 s)"
            .to_string()
    } else {
        format!(
            "every connection{} was waiting on an earlier request ({service}; {} answered in \
             {:.1} s) — the target answered slower than they came due",
            if t.cap_hits > 0 {
                " of the pool, at its cap,"
            } else {
                ""
            },
            t.completed,
            o.elapsed
        )
    };
    Some(format!(
        "{} of {} scheduled requests were never sent: {why}; counted as errors, with a \
         latency of at least the time from their intended send to the run's end",
        t.unsent,
        t.scheduled()
    ))
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
    let (evidence, notes) = if o.agents.is_empty() {
        generator_evidence(o)
    } else {
        agents_evidence(o)
    };
    if t.ok == 0 {
        let mut why: Vec<String> = t
            .by_error
            .iter()
            .map(|(k, v)| format!("{} {v}", k.name()))
            .collect();
        why.extend(
            t.by_status
                .iter()
                .map(|(s, v)| format!("{} {v}", o.statuses.named(*s))),
        );
        let mut reasons = vec![format!(
            "no request succeeded ({})",
            if why.is_empty() {
                "nothing was sent".into()
            } else {
                why.join(", ")
            }
        )];
        // Why nothing was sent, when the generator knows (an agent lost).
        if !o.agents.is_empty() {
            reasons.extend(evidence);
        }
        reasons.extend(unsent(o));
        return Verdict {
            status: Validity::Failed,
            reasons,
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
            "achieved {} of {} offered ({})",
            rate(achieved_rate),
            rate(off),
            share(achieved_rate / off)
        ));
    }
    reasons.extend(evidence);
    reasons.extend(unsent(o));
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::recorder::Tally;
    use std::time::Duration;

    fn tally(light_us: &[u64], full_us: &[u64]) -> Tally {
        let mut t = Tally::default();
        for &v in light_us {
            t.service_light.record(v).unwrap();
        }
        for &v in full_us {
            t.service_full.record(v).unwrap();
        }
        t
    }

    /// A run of 10 s with 1,000 sends, `late` of them 50 ms late, while the hypervisor
    /// took `stolen` of the machine's CPU time.
    fn late_run(late: u64, stolen: f64) -> Outcome {
        let mut total = Tally::default();
        for i in 0..1000 {
            total
                .lag
                .record(if i < late { 50_000 } else { 50 })
                .unwrap();
            total.corrected.record(200).unwrap();
        }
        (total.sent, total.completed, total.ok) = (1000, 1000, 1000);
        Outcome {
            total,
            steps: Vec::new(),
            custom: Vec::new(),
            seconds: Vec::new(),
            elapsed: 10.0,
            scheduled: Some((1000, 10.0)),
            thread_cpu: vec![1.0],
            thread_queue: Vec::new(),
            connections_asked: 0,
            connections_ready: 0,
            threads: 1,
            statuses: crate::load::client::Statuses::Proto(crate::load::client::Named(
                crate::load::proto::by_url("http://h/").unwrap(),
            )),
            subscribers: 0,
            interrupted: false,
            stolen_seconds: stolen * 10.0 * crate::host::cores() as f64,
            idle_seconds: 0.0,
            agents: Vec::new(),
        }
    }

    #[test]
    fn unsent_requests_are_named_with_their_cause_and_fail_the_error_rate() {
        let mut r = crate::load::recorder::Recorder::default();
        for _ in 0..10 {
            r.sent(None);
            r.response(
                None,
                200,
                true,
                0,
                Duration::from_millis(2),
                Duration::from_millis(2),
            );
        }
        r.cut(None, Duration::from_secs(2), true, false);
        for connecting in [true, true, false] {
            r.cut(None, Duration::from_secs(3), false, connecting);
        }
        let mut o = late_run(0, 0.0);
        o.total = r.take_interval(Tally::default());
        assert_eq!((o.total.unfinished, o.total.unsent), (1, 3));
        // 4 of 14 due requests were never answered.
        assert!((o.total.error_rate() - 4.0 / 14.0).abs() < 1e-12);
        // The censored latencies are in the corrected distribution: its max is 3 s.
        assert_eq!(o.total.corrected.len(), 14);
        assert!(o.total.corrected.max() >= 2_999_000);
        let v = judge(&o);
        let line = v.reasons.iter().find(|r| r.contains("never sent")).unwrap();
        assert!(line.starts_with("3 of 14 scheduled requests"), "{line}");
        assert!(line.contains("no connection could be opened"), "{line}");
        // Mostly waiting on busy connections: said so, with the service time.
        o.total.unsent_connecting = 1;
        let v = judge(&o);
        let line = v.reasons.iter().find(|r| r.contains("never sent")).unwrap();
        assert!(
            line.contains("waiting on an earlier request (service time p50 2.00 ms"),
            "{line}"
        );
        // An agent's tally carries them over the wire and through `minus`.
        let wire: Tally = serde_json::from_str(&serde_json::to_string(&o.total).unwrap()).unwrap();
        assert_eq!((wire.unsent, wire.unsent_connecting), (3, 1));
        assert_eq!(o.total.minus(&wire).unanswered(), 0);
    }

    #[test]
    fn steal_excuses_only_the_lateness_it_can_explain() {
        // 2% of the machine taken cannot explain 30% of sends 50 ms late: INVALID.
        let v = judge(&late_run(300, 0.02));
        assert_eq!(v.status, Validity::Invalid, "{:?}", v.reasons);
        assert!(v
            .reasons
            .iter()
            .any(|r| r.starts_with("the generator sent late")));
        // 30% taken can: the lateness is a note, the hypervisor named.
        let v = judge(&late_run(300, 0.30));
        assert_eq!(v.status, Validity::Valid, "{:?}", v.reasons);
        assert!(v
            .reasons
            .iter()
            .any(|r| r.starts_with("note: the generator sent late")));
        assert!(v.reasons.iter().any(|r| r.contains("the hypervisor took")));
        // No steal: late is late.
        assert_eq!(judge(&late_run(300, 0.0)).status, Validity::Invalid);
    }

    /// The note of a run whose pool held its size 40 times, the target answering in
    /// 100 µs with few connections busy and in `service_us` over the run.
    fn held_note(service_us: u64) -> String {
        let mut o = late_run(0, 0.0);
        o.total.held = 40;
        for _ in 0..30 {
            o.total.service_light.record(100).unwrap();
            o.total.service.record(service_us).unwrap();
        }
        let v = judge(&o);
        v.reasons
            .into_iter()
            .find(|r| r.contains("held its size"))
            .unwrap()
    }

    #[test]
    fn no_note_contradicts_the_verdict_above_it() {
        // A tail of late sends (p99 late, p90 on time): VALID, and its note says it is a
        // burst and no evidence, not "the generator sent late" under "the target set the
        // pace".
        let v = judge(&late_run(20, 0.0));
        assert_eq!(v.status, Validity::Valid, "{:?}", v.reasons);
        let note = v.reasons.iter().find(|r| r.contains("sent late")).unwrap();
        assert!(
            note.contains("in a burst, not as a pattern")
                && note.contains("not evidence against the run"),
            "{note}"
        );
        // A pool held while the target answered as fast as with few connections busy:
        // no "because the target slowed down".
        let note = held_note(110);
        assert!(!note.contains("because the target slowed down"), "{note}");
        assert!(
            note.contains("under the 2× that names a slowdown"),
            "{note}"
        );
        // Twice as slow: the target's slowdown, said so.
        let note = held_note(5_000);
        assert!(note.contains("because the target slowed down"), "{note}");
    }

    #[test]
    fn a_full_pool_is_the_targets_doing_only_when_it_answered_slower() {
        // A fixed 20 ms downstream wait: as fast with every connection busy.
        let t = tally(&[20_000; 30], &[20_500; 300]);
        assert!(matches!(cap_cause(&t), CapCause::Pool { .. }));
        // One worker queueing 20 requests of 3.5 ms: ~70 ms at full concurrency.
        let light: Vec<u64> = (1..=30).map(|i| 3_500 * i / 3).collect();
        let t = tally(&light, &[70_000; 300]);
        match cap_cause(&t) {
            CapCause::Target { light, full } => {
                assert!((light as i64 - 8_750).abs() < 1_200, "{light}");
                assert!((full as i64 - 70_000).abs() < 100, "{full}");
            }
            _ => panic!("a queueing target not recognised"),
        }
        // Too few light responses to tell.
        let t = tally(&[3_500; 5], &[70_000; 300]);
        assert!(matches!(cap_cause(&t), CapCause::Unknown));
    }
}
