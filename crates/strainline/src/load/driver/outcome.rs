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
    /// The length of the interval it covers, seconds, when that is longer than its
    /// second's: a long run's steps are kept per span of seconds ([`StepSpans`]).
    pub span: Option<f64>,
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
        latency_seconds(&self.seconds)
    }
}

/// [`Outcome::latency_seconds`] of `seconds`.
pub(crate) fn latency_seconds(seconds: &[Second]) -> Vec<(String, (f64, f64), &[u8])> {
    let mut out = Vec::new();
    for k in kept(seconds) {
        let span = (k.second.t - k.length, k.second.t);
        if !k.second.latency.is_empty() {
            out.push((SECOND_LATENCY.to_string(), span, &k.second.latency[..]));
        }
    }
    for ((t, st), length) in step_parts(seconds) {
        if !st.latency.is_empty() {
            out.push((step_latency(st.index), (t - length, t), &st.latency[..]));
        }
    }
    out
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
pub(crate) fn per_second(seconds: &[Second]) -> Vec<(String, Vec<(f64, f64)>)> {
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
    // Each step's responses and failures a second, at the seconds (or the ends of the
    // spans) it had any.
    let mut by_step: std::collections::BTreeMap<String, Vec<(f64, f64)>> = Default::default();
    for ((t, st), length) in step_parts(seconds) {
        for (what, n) in [("responses", st.completed), ("errors", st.failed)] {
            by_step
                .entry(format!("{STEP_PREFIX}{}/{what}_per_second", st.index))
                .or_default()
                .push((t, n as f64 / length));
        }
    }
    out.extend(by_step);
    out
}

/// The steps' parts the store keeps, each at its kept second's end with the length of
/// its interval: the second's own, or its span's ([`StepSpans`]).
fn step_parts(seconds: &[Second]) -> Vec<((f64, &StepOf), f64)> {
    let mut out = Vec::new();
    for k in kept(seconds) {
        for st in &k.second.steps {
            out.push(((k.second.t, st), st.span.unwrap_or(k.length).max(1e-9)));
        }
    }
    out
}

/// Step parts kept per second at most this many times per step over a run: past an
/// hour, a step's part is kept per span of seconds (a 24 h soak of a 10-step flow kept
/// 86,400 histograms per step, ~800 MB in memory and in the store; now 3,600 at most).
pub const MOST_STEP_SPANS: f64 = 3600.0;

/// The steps' parts of a run's seconds over long runs: each second's own up to an hour
/// of run, else merged — histograms added, counts summed — over spans of `width`
/// seconds (2, 5, 10, 15, 30, 60, 120 … s: the least that keeps a run to
/// [`MOST_STEP_SPANS`]), attached to the second each span ends at (a multiple of its
/// width from the start, or the run's last interval).
pub struct StepSpans {
    width: u64,
    open: Vec<crate::load::recorder::StepSecond>,
    since: f64,
}

impl StepSpans {
    /// The spans of a run planned to last `duration` (a run of no set length keeps its
    /// seconds).
    pub fn new(duration: Option<std::time::Duration>) -> StepSpans {
        let need = duration.map_or(1.0, |d| d.as_secs_f64() / MOST_STEP_SPANS);
        let width = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600]
            .into_iter()
            .find(|w| *w as f64 >= need)
            .unwrap_or(3600);
        StepSpans {
            width,
            open: Vec::new(),
            since: 0.0,
        }
    }

    /// The span's width, seconds.
    #[cfg(test)]
    pub fn width(&self) -> u64 {
        self.width
    }

    /// Pushes onto `seconds` the second ending at `t` whose tally is `iv`
    /// ([`Second::of`]), with the steps' parts of the span that ends at `t`, or none at
    /// a second within a span. A run's last interval ends the last span: when it is
    /// too short for the series ([`LEAST_PARTIAL`]), the span ends at the second
    /// before it, which the series keep, and the interval keeps its own parts (left
    /// out with it, as a short last second's always were).
    pub fn push(&mut self, seconds: &mut Vec<Second>, t: f64, iv: &Tally) {
        if self.width == 1 {
            return seconds.push(Second::of(t, iv));
        }
        let before = seconds.last().map_or(0.0, |s| s.t);
        let whole = t.fract() == 0.0;
        if !whole && t - before < LEAST_PARTIAL && !seconds.is_empty() {
            self.close(seconds.last_mut().expect("not empty"), before);
            return seconds.push(Second::of(t, iv));
        }
        let mut s = Second::of_run(t, iv);
        if self.open.len() < iv.step_seconds.len() {
            self.open
                .resize_with(iv.step_seconds.len(), Default::default);
        }
        for (mine, theirs) in self.open.iter_mut().zip(&iv.step_seconds) {
            mine.merge(theirs);
        }
        if !whole || (t as u64).is_multiple_of(self.width) {
            self.close(&mut s, t);
        }
        seconds.push(s);
    }

    /// Ends the run's last span, if still open (its last interval held nothing, or
    /// ended on a whole second), at the last second of `seconds`.
    pub fn end(&mut self, seconds: &mut [Second]) {
        if let Some(s) = seconds.last_mut() {
            let t = s.t;
            self.close(s, t);
        }
    }

    /// Ends the open span at `s`, which ends `t` seconds in.
    fn close(&mut self, s: &mut Second, t: f64) {
        // Empty, it leaves `s` its own parts (a second that closed a span itself).
        let parts = step_of(&self.open, Some(t - self.since));
        if !parts.is_empty() {
            s.steps = parts;
        }
        self.open.clear();
        self.since = t;
    }
}

/// The parts of `steps` that had any, as kept ([`StepOf`]).
fn step_of(steps: &[crate::load::recorder::StepSecond], span: Option<f64>) -> Vec<StepOf> {
    (steps.iter().enumerate())
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
            span,
        })
        .collect()
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

    /// The second ending at `t` whose tally is `iv`, with its steps' parts.
    pub fn of(t: f64, iv: &Tally) -> Second {
        Second {
            steps: step_of(&iv.step_seconds, None),
            ..Second::of_run(t, iv)
        }
    }

    /// The second ending at `t` whose tally is `iv`, without its steps' parts.
    fn of_run(t: f64, iv: &Tally) -> Second {
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
            steps: Vec::new(),
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

    /// A second of two steps: the first answered 10 times (at `us`), the second 3
    /// times with 1 failure.
    fn two_steps(us: u64) -> Tally {
        let mut iv = Tally::default();
        iv.step_seconds.resize_with(2, Default::default);
        let [a, b] = &mut iv.step_seconds[..] else {
            unreachable!()
        };
        (a.sent, a.completed, a.ok) = (10, 10, 10);
        a.latency.record_n(us, 10).unwrap();
        (b.sent, b.completed, b.ok) = (3, 3, 2);
        b.latency.record_n(2 * us, 3).unwrap();
        (iv.sent, iv.completed, iv.ok) = (13, 13, 12);
        iv.corrected.record_n(us, 13).unwrap();
        iv
    }

    /// A run of two hours: its steps' parts are kept per 2 s span (3,600 of them, not
    /// 7,200), every response and latency of each step counted once, each span's rate
    /// its responses over its length. A last interval long enough for the series ends
    /// the last span with its answers; a short one (left out of the series, as on any
    /// run) ends it at the second before, which may be within a span.
    #[test]
    fn a_long_run_keeps_its_steps_per_span_with_every_response_counted() {
        use std::time::Duration;
        assert_eq!(StepSpans::new(None).width, 1);
        assert_eq!(StepSpans::new(Some(Duration::from_secs(3600))).width, 1);
        assert_eq!(StepSpans::new(Some(Duration::from_secs(86_400))).width, 30);
        // (whole seconds, the last interval's end, spans, the last span's length): a
        // last interval kept, one too short to be, and none (it held nothing).
        let runs = [
            (7200, Some(7200.6), 3601, 0.6),
            (7199, Some(7199.3), 3600, 1.0),
            (7199, None, 3600, 1.0),
        ];
        for (whole, end, count, last) in runs {
            let mut spans = StepSpans::new(Some(Duration::from_secs(7200)));
            assert_eq!(spans.width, 2);
            let mut seconds = Vec::new();
            for t in 1..=whole {
                spans.push(&mut seconds, t as f64, &two_steps(1000 + t % 7));
            }
            if let Some(end) = end {
                spans.push(&mut seconds, end, &two_steps(500));
            }
            spans.end(&mut seconds);
            assert!(seconds[0].steps.is_empty() && seconds[1].steps.len() == 2);
            let parts = step_parts(&seconds);
            assert_eq!(parts.iter().filter(|p| p.0 .1.index == 0).count(), count);
            let series = per_second(&seconds);
            let kept_end = if last < 1.0 {
                end.unwrap()
            } else {
                whole as f64
            };
            let answered = (kept_end.ceil()) as u64;
            for (index, each, failed) in [(0, 10.0, 0.0), (1, 3.0, 1.0)] {
                let points = |what: &str| {
                    let name = format!("{STEP_PREFIX}{index}/{what}_per_second");
                    series.iter().find(|(n, _)| *n == name).unwrap().1.clone()
                };
                // Every span's rate is that of its seconds; a last interval's (a
                // second's answers in 0.6 s) over its own length.
                for (what, rate) in [("responses", each), ("errors", failed)] {
                    let p = points(what);
                    let (tail, spans) = p.split_last().unwrap();
                    assert!(spans.iter().all(|(_, v)| (v - rate).abs() < 1e-9), "{what}");
                    assert!((tail.1 - rate / last).abs() < 1e-6, "{what}: {tail:?}");
                    assert_eq!(tail.0, kept_end);
                }
                let hists: Vec<((f64, f64), u64)> = (latency_seconds(&seconds).into_iter())
                    .filter(|(n, ..)| *n == step_latency(index))
                    .map(|(_, span, d)| (span, hdr_len(d)))
                    .collect();
                // Spans tile the run: each starts where the one before it ended.
                assert_eq!(hists.first().unwrap().0 .0, 0.0);
                assert!(hists
                    .windows(2)
                    .all(|w| (w[0].0 .1 - w[1].0 .0).abs() < 1e-9));
                assert_eq!(hists.last().unwrap().0 .1, kept_end);
                // The histograms hold every response of the kept seconds once.
                let counted: u64 = hists.iter().map(|h| h.1).sum();
                assert_eq!(counted, answered * each as u64);
            }
        }
    }

    fn hdr_len(d: &[u8]) -> u64 {
        crate::load::recorder::hdr::from_stored(d).unwrap().len()
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
