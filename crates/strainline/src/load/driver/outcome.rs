//! What a run produced: its totals, its steps' and its seconds, and the per-second
//! series the report draws from them.

use super::super::recorder::Tally;
use super::Slice;

/// One second of the run.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Second {
    /// End of the interval, seconds since start.
    pub t: f64,
    pub sent: u64,
    pub completed: u64,
    pub ok: u64,
    pub errors: u64,
    /// Corrected latency (from the intended send time), microseconds.
    pub p50_us: u64,
    pub p99_us: u64,
    pub max_us: u64,
    /// The most clients running at once in it (a scenario's clients, sessions, closed
    /// connections; 0 for the open model's sends).
    #[serde(default)]
    pub users: u64,
    /// Its failures by cause (a transport error's name, or `status N`), the non-zero ones.
    #[serde(default)]
    pub causes: Vec<(String, u64)>,
    /// Its corrected latencies, as the store keeps a histogram (HDR V2 + deflate): the
    /// timeline's percentiles, merged exactly across agents, since every agent's second
    /// came as its histogram.
    #[serde(skip)]
    pub latency: Vec<u8>,
    /// Each scenario step's (or group's) part of it, those that had any.
    #[serde(skip)]
    pub steps: Vec<StepOf>,
}

/// A scenario step's part of a second.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StepOf {
    /// Its index (as in the scenario's steps, then its groups).
    pub index: usize,
    pub sent: u64,
    pub completed: u64,
    /// Transport errors and failed answers.
    pub failed: u64,
    /// Its corrected latencies as the store keeps a histogram.
    pub latency: Vec<u8>,
}

/// What a run produced.
pub struct Outcome {
    pub total: Tally,
    /// Per scenario step (index as in the scenario), for the whole run; then its
    /// groups' runs in a row.
    pub steps: Vec<Tally>,
    /// A scenario's own metrics' values, by their place in `[metrics]`.
    pub custom: Vec<crate::load::custom::Custom>,
    pub seconds: Vec<Second>,
    /// Wall time from start until the last response (or timeout), seconds.
    pub elapsed: f64,
    /// Requests the schedule offered (open model), and over how long.
    pub scheduled: Option<(u64, f64)>,
    /// CPU seconds each worker thread used.
    pub thread_cpu: Vec<f64>,
    /// Seconds each worker thread was runnable but waited for a CPU (the scheduler's
    /// run queue; empty on agents and where schedstat is not there).
    pub thread_queue: Vec<f64>,
    /// Connections asked for (closed model) and how many could be opened at the start.
    pub connections_asked: usize,
    pub connections_ready: usize,
    pub threads: usize,
    /// What the statuses are: HTTP statuses, exit codes, replies.
    pub statuses: super::super::client::Statuses,
    /// MQTT subscribers asked for (the whole run's): each should receive every publish.
    pub subscribers: u64,
    pub interrupted: bool,
    /// CPU seconds the hypervisor took from the machine during the run.
    pub stolen_seconds: f64,
    /// CPU seconds the machine's CPUs were idle during the run (what was left free).
    pub idle_seconds: f64,
    /// Each agent's part when agents generated the load (then `thread_cpu` is empty:
    /// each agent judged its own generator).
    pub agents: Vec<AgentPart>,
}

impl Outcome {
    /// The run's seconds as the series the store keeps for a case: responses, errors
    /// and p99 (µs) per second, at each second's end; requests sent a second, the
    /// clients running, and errors a second by cause (`errors_per_second/CAUSE`, at
    /// the seconds it failed only).
    pub fn per_second(&self) -> Vec<(String, Vec<(f64, f64)>)> {
        per_second(&self.seconds)
    }

    /// The run's seconds as the store keeps them, on a clock `shift` seconds after the
    /// run's own (a ramp's later steps on its first step's clock): the series of
    /// [`Outcome::per_second`] and the histograms of [`Outcome::latency_seconds`]. The
    /// one way a run's seconds are stored, by a suite's case and by `load` alike.
    pub fn stored_seconds(&self, shift: f64) -> StoredSeconds {
        StoredSeconds {
            series: (self.per_second().into_iter())
                .map(|(n, p)| (n, p.into_iter().map(|(t, v)| (t + shift, v)).collect()))
                .collect(),
            histograms: (self.latency_seconds().into_iter())
                .map(|(n, (a, b), d)| (n, (a + shift, b + shift), d.to_vec()))
                .collect(),
        }
    }

    /// Each kept second's latency histogram as the store keeps one, named
    /// [`SECOND_LATENCY`] (the run's) or [`step_latency`] (a step's), with its interval
    /// (start, end): the timeline's percentiles.
    pub fn latency_seconds(&self) -> Vec<(String, (f64, f64), &[u8])> {
        let mut out = Vec::new();
        for k in kept(&self.seconds) {
            let span = (k.second.t - k.length, k.second.t);
            if !k.second.latency.is_empty() {
                out.push((SECOND_LATENCY.to_string(), span, &k.second.latency[..]));
            }
            for s in k.second.steps.iter().filter(|s| !s.latency.is_empty()) {
                out.push((step_latency(s.index), span, &s.latency[..]));
            }
        }
        out
    }
}

/// A run's seconds as the store keeps them: named series, and named histograms (HDR V2
/// + deflate) with their intervals.
pub struct StoredSeconds {
    pub series: Vec<(String, Vec<(f64, f64)>)>,
    pub histograms: Vec<(String, (f64, f64), Vec<u8>)>,
}

/// The shortest last interval kept in the per-second series: a run cut 0.1 s into a
/// second says too little of it.
const LEAST_PARTIAL: f64 = 0.5;

/// A second kept for the series, with its length (the last one may be partial).
struct Kept<'a> {
    second: &'a Second,
    length: f64,
}

/// The seconds the series keep: every whole one, and a last partial one of at least
/// [`LEAST_PARTIAL`] (or when it is the run's only one).
fn kept(seconds: &[Second]) -> Vec<Kept<'_>> {
    let mut kept = Vec::with_capacity(seconds.len());
    let mut start = 0.0;
    for s in seconds {
        let length = s.t - start;
        start = s.t;
        // A run of one short interval (one request) keeps it: it is all there is.
        if s.partial() && length < LEAST_PARTIAL && !kept.is_empty() {
            continue;
        }
        kept.push(Kept {
            second: s,
            length: length.max(1e-9),
        });
    }
    kept
}

/// Responses and errors a second (the last, partial interval's counts divided by its
/// length, so that a run ending 0.5 s into a second does not read as a halving of its
/// rate; dropped under [`LEAST_PARTIAL`]), each interval's p99, sends a second, the
/// clients running (when any ran) and errors a second by cause.
fn per_second(seconds: &[Second]) -> Vec<(String, Vec<(f64, f64)>)> {
    let kept = kept(seconds);
    let of = |f: &dyn Fn(&Second, f64) -> f64| -> Vec<(f64, f64)> {
        kept.iter()
            .map(|k| (k.second.t, f(k.second, k.length)))
            .collect()
    };
    let mut out = vec![
        (
            series::COMPLETED.into(),
            of(&|s, len| s.completed as f64 / len),
        ),
        (series::ERRORS.into(), of(&|s, len| s.errors as f64 / len)),
        (series::P99.into(), of(&|s, _| s.p99_us as f64)),
        (series::SENT.into(), of(&|s, len| s.sent as f64 / len)),
    ];
    if kept.iter().any(|k| k.second.users > 0) {
        out.push((series::USERS.into(), of(&|s, _| s.users as f64)));
    }
    let mut by_cause: std::collections::BTreeMap<&str, Vec<(f64, f64)>> = Default::default();
    for k in &kept {
        for (cause, n) in &k.second.causes {
            by_cause
                .entry(cause)
                .or_default()
                .push((k.second.t, *n as f64 / k.length));
        }
    }
    out.extend(
        by_cause
            .into_iter()
            .map(|(cause, points)| (format!("{CAUSE_PREFIX}{cause}"), points)),
    );
    // Each step's responses and failures a second, at the seconds it had any.
    let mut by_step: std::collections::BTreeMap<String, Vec<(f64, f64)>> = Default::default();
    for k in &kept {
        for st in &k.second.steps {
            for (what, n) in [("responses", st.completed), ("errors", st.failed)] {
                by_step
                    .entry(format!("{STEP_PREFIX}{}/{what}_per_second", st.index))
                    .or_default()
                    .push((k.second.t, n as f64 / k.length));
            }
        }
    }
    out.extend(by_step);
    out
}

/// The names of a run's per-second series in the store, written by [`per_second`] and
/// read by these names by the timeline and the report's charts.
pub mod series {
    pub const SENT: &str = "sent_per_second";
    pub const COMPLETED: &str = "completed_per_second";
    pub const ERRORS: &str = "errors_per_second";
    pub const P99: &str = "p99_us";
    pub const USERS: &str = "users";
}

/// The start of the name of a step's series (`step/3/responses_per_second`).
pub const STEP_PREFIX: &str = "step/";

/// The name of a step's seconds' latency histograms in the store.
pub fn step_latency(index: usize) -> String {
    format!("{SECOND_LATENCY}/{STEP_PREFIX}{index}")
}

/// The series whose one point (0, t) says where the load's second 0 is on the target's
/// samples' clock.
pub const LOAD_START: &str = "load_start";

/// The name of each second's latency histogram in the store.
pub const SECOND_LATENCY: &str = "latency_us/second";

/// The name of a series of errors a second of one cause, before the cause.
pub const CAUSE_PREFIX: &str = "errors_per_second/";

/// A tally's failures by cause, the non-zero ones: transport errors by name, then
/// answers that were not ok by status.
fn causes(iv: &Tally) -> Vec<(String, u64)> {
    let mut out: Vec<(String, u64)> = iv
        .by_error
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(k, n)| (k.name().to_string(), *n))
        .collect();
    let failed = iv.completed.saturating_sub(iv.ok);
    let failing = || iv.by_status.iter().filter(|(s, _)| **s >= 400);
    if failing().map(|(_, n)| n).sum::<u64>() == failed {
        out.extend(failing().map(|(s, n)| (format!("status {s}"), *n)));
    } else if failed > 0 {
        // A check failed an answer, or accepted a status of 400 or above: no status
        // tells which answers failed.
        out.push(("failed answer".into(), failed));
    }
    out
}

/// One agent's part of a run generated by several.
#[derive(Debug, Clone, serde::Serialize)]
pub struct AgentPart {
    /// The name the agent gave, and where it was reached.
    pub name: String,
    pub address: String,
    pub slice: Slice,
    /// Its clock minus the coordinator's, and the round trip that measured it, µs.
    pub clock_offset_us: f64,
    pub clock_rtt_us: f64,
    /// Everything it measured (until it was lost, if it was).
    pub total: Tally,
    pub elapsed: f64,
    /// CPU seconds each of its worker threads used.
    pub thread_cpu: Vec<f64>,
    /// Its verdict on its own generator (`None` when it was lost before reporting).
    pub status: Option<super::super::verdict::Validity>,
    pub reasons: Vec<String>,
    /// Why and when it stopped answering.
    pub lost: Option<String>,
}

impl Second {
    /// The run's last interval, cut at its end: it ends at the elapsed time, every other
    /// at a whole second from the start (`progress` gets it too, for totals).
    pub fn partial(&self) -> bool {
        self.t.fract() != 0.0
    }

    /// The second ending at `t` whose tally is `iv`.
    pub fn of(t: f64, iv: &Tally) -> Second {
        let q = |p: f64| {
            if iv.corrected.is_empty() {
                0
            } else {
                iv.corrected.value_at_quantile(p)
            }
        };
        Second {
            t,
            sent: iv.sent,
            completed: iv.completed,
            ok: iv.ok,
            errors: iv.errors(),
            p50_us: q(0.5),
            p99_us: q(0.99),
            max_us: iv.corrected.max(),
            users: iv.active,
            causes: causes(iv),
            latency: crate::load::recorder::hdr::stored(&iv.corrected).unwrap_or_default(),
            steps: iv
                .step_seconds
                .iter()
                .enumerate()
                .filter(|(_, s)| s.sent + s.completed + s.errors > 0)
                .map(|(index, s)| StepOf {
                    index,
                    sent: s.sent,
                    completed: s.completed,
                    failed: s.failed(),
                    latency: if s.latency.is_empty() {
                        Vec::new()
                    } else {
                        crate::load::recorder::hdr::stored(&s.latency).unwrap_or_default()
                    },
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run of 2.5 s at 100 req/s: its last half second's 50 responses are 100 a
    /// second, not a drop to 50; a last interval of 0.2 s is left out.
    /// A second's causes add up to its errors: transport errors by name, failed answers
    /// by status when the statuses tell them, else as failed answers (a check failed a
    /// 200, or accepted a 404).
    #[test]
    fn a_second_s_causes_add_up_to_its_errors() {
        use crate::load::recorder::ErrorKind;
        let mut iv = Tally::default();
        iv.by_error.insert(ErrorKind::Timeout, 2);
        iv.by_status.insert(200, 5);
        iv.by_status.insert(503, 3);
        (iv.completed, iv.ok) = (8, 5);
        let s = Second::of(1.0, &iv);
        assert_eq!(
            s.causes,
            [("timeout".to_string(), 2), ("status 503".to_string(), 3)]
        );
        assert_eq!(s.causes.iter().map(|c| c.1).sum::<u64>(), s.errors);
        // A check that failed two 200s: no status says which.
        iv.ok = 3;
        let s = Second::of(1.0, &iv);
        assert_eq!(s.causes[1], ("failed answer".to_string(), 5));
        assert_eq!(s.causes.iter().map(|c| c.1).sum::<u64>(), s.errors);
        // An agent's tally with more ok than answers: nothing underflows.
        iv.ok = 9;
        assert_eq!(Second::of(1.0, &iv).causes.len(), 1);
    }

    #[test]
    fn a_partial_last_second_is_a_rate_not_a_drop() {
        let second = |t: f64, completed: u64| Second {
            t,
            sent: completed,
            completed,
            ok: completed,
            errors: 0,
            p50_us: 100,
            p99_us: 200,
            max_us: 300,
            ..Second::default()
        };
        let run = [second(1.0, 100), second(2.0, 100), second(2.5, 50)];
        let series = per_second(&run);
        assert_eq!(series[0].0, "completed_per_second");
        assert_eq!(series[0].1, [(1.0, 100.0), (2.0, 100.0), (2.5, 100.0)]);
        let cut = [second(1.0, 100), second(1.2, 20)];
        assert_eq!(per_second(&cut)[0].1, [(1.0, 100.0)]);
        assert_eq!(per_second(&cut)[2].1, [(1.0, 200.0)]);
    }
}
