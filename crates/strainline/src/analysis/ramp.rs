//! The ramp's verdict, as pure functions of its step records: whether each step held
//! (the SLO, the error budget, achieved ≥ 95% of offered, and whose pace it measured),
//! then the ceiling, the knee, the most throughput and the limiting factor in words.
//! The `ramp` kind measures the steps; everything it concludes is decided here.

use crate::units::{latency_ms, rate, share};
use serde::Serialize;

use super::bounds::{ACHIEVED_BOUND, SATURATED, STOLEN_BOUND};
use crate::measure::threads::Breakdown;

/// The figures of one step, as measured and as stored.
#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize)]
#[serde(default)]
pub struct Figures {
    /// Requests per second offered and completed.
    pub offered: f64,
    pub achieved: f64,
    /// Corrected p99 latency, milliseconds.
    pub p99_ms: f64,
    /// Failed requests over those the step made due, not counting the requests still in
    /// flight when the step was cut (`unfinished`): they belong to no step's verdict.
    pub error_rate: f64,
    /// Requests still unanswered when the step's time was up: counted apart.
    #[serde(default)]
    pub unfinished: u64,
    /// What the step's failures were, most frequent first (`status 500 12, timeout 3`).
    #[serde(default)]
    pub error_causes: String,
    /// The target tree's average CPU, cores.
    pub target_cpu: f64,
    /// The target's busiest thread's share of the step (1.0 = on a CPU all the time).
    pub busiest_thread: f64,
    /// The largest share of the step one of the target's threads wanted a CPU: on one,
    /// or waiting in a run queue for one (1.0 = it was never off CPU for anything else).
    #[serde(default)]
    pub busiest_demand: f64,
    /// Connections the kernel found the listen queue full for during the step
    /// (`ListenOverflows`, for the whole network namespace).
    #[serde(default)]
    pub listen_overflows: u64,
    /// Connection attempts dropped at a listening socket whose accept queue was not
    /// full (`ListenDrops` beyond `ListenOverflows`: a full SYN queue without cookies).
    #[serde(default)]
    pub syn_drops: u64,
    /// SYNs the kernel answered with a cookie because a SYN queue was full.
    #[serde(default)]
    pub syn_cookies: u64,
    /// How many of the target's threads were waiting for a CPU, on average over the
    /// step (their run-queue time from `schedstat`, per second).
    #[serde(default)]
    pub run_queue: f64,
    /// TCP segments the kernel retransmitted during the step (`RetransSegs`, for the
    /// whole network namespace).
    #[serde(default)]
    pub retransmits: u64,
    /// The share of the machine's CPU the hypervisor took during the step (steal).
    #[serde(default)]
    pub stolen: f64,
    /// Cores of the machine left idle during the step, on average (`idle` and `iowait`
    /// of `/proc/stat`); none when the target runs on another machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_cores: Option<f64>,
    /// What the target's threads did during the step (none when its processes are
    /// not on this machine).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<Breakdown>,
}

/// What the step's threads did, for a sentence: the breakdown, or why there is none.
fn thread_summary(s: &Figures) -> String {
    s.threads.as_ref().map_or_else(
        || "its thread states were not read (the target runs on another machine)".into(),
        |b| format!("its threads: {}", super::threads::summary(b)),
    )
}

/// The CPU the target could not get is named as the limit when its threads waited for a
/// CPU at least this share of the time they ran (run-queue time against CPU time)…
pub const RUN_QUEUE_SHARE: f64 = 0.5;
/// …and at least this many thread-seconds per second (not a rounding of idle threads).
pub const RUN_QUEUE_MIN: f64 = 0.25;

/// Whether the target was short of CPU it wanted: its threads queued for a CPU.
fn cpu_contended(s: &Figures) -> bool {
    s.run_queue >= RUN_QUEUE_MIN && s.run_queue >= RUN_QUEUE_SHARE * s.target_cpu
}

/// What one step measured.
#[derive(Debug, Clone, PartialEq)]
pub struct StepRecord {
    pub figures: Figures,
    /// The load engine found evidence that the generator was the limit (its reasons).
    pub generator_invalid: Option<String>,
    /// One of the generator's own threads was busy nearly all of the step.
    pub generator_at_capacity: bool,
}

/// The ramp's limits.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    pub max_error_rate: f64,
    /// The p99 SLO.
    pub slo_p99: Option<std::time::Duration>,
    /// Cores of the machine the target runs on.
    pub cores: f64,
    /// How long each step lasts, seconds.
    pub step_seconds: f64,
}

/// Packet loss is named the limit when the kernel retransmitted at least this share of
/// a step's requests: a lost segment waits for a retransmission (a tail-loss probe or a
/// timeout of 200 ms at least), so for losses to move the p99, at least 1% of the
/// requests must have waited for one.
pub const RETRANSMIT_SHARE: f64 = 0.01;

/// Whether the step's retransmissions can explain its tail: enough of them for 1% of
/// its requests.
/// Not when the listen queue or the SYN queue overflowed: the clients' SYNs they dropped
/// are among the retransmissions, and they are the cause named.
fn lossy(s: &Figures, limits: &Limits) -> bool {
    let requests = s.achieved.max(s.offered) * limits.step_seconds;
    let handshakes = s.listen_overflows + s.syn_drops + s.syn_cookies > 0;
    !handshakes && s.retransmits > 0 && s.retransmits as f64 >= RETRANSMIT_SHARE * requests
}

/// A step with its verdict, as stored in the case's details.
#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize)]
#[serde(default)]
pub struct Step {
    #[serde(flatten)]
    pub figures: Figures,
    /// `invalid` when the generator, not the target, was the limit of this step.
    pub generator: String,
    pub ok: bool,
    /// Why the step broke, in words (empty when it held).
    #[serde(skip)]
    pub why: Vec<String>,
    #[serde(skip)]
    pub target_saturated: bool,
}

impl Step {
    pub fn generator_bound(&self) -> bool {
        self.generator == "invalid"
    }
}

fn ms(d: std::time::Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Judges one step.
pub fn judge_step(record: &StepRecord, limits: &Limits) -> Step {
    let r = &record.figures;
    let target_saturated =
        r.busiest_thread >= SATURATED || r.target_cpu >= SATURATED * limits.cores;
    // On a shared machine a saturated target takes the CPU the generator needs, so the
    // generator wakes late. That lateness is a consequence, not the limit, unless the
    // generator's own threads were at capacity too.
    let generator_bound =
        record.generator_invalid.is_some() && (!target_saturated || record.generator_at_capacity);
    let mut why = Vec::new();
    if let Some(reasons) = &record.generator_invalid {
        why.push(if generator_bound {
            format!("generator-bound ({reasons})")
        } else {
            format!("target CPU saturated (generator late as a consequence: {reasons})")
        });
    }
    if r.achieved < ACHIEVED_BOUND * r.offered {
        why.push(format!(
            "achieved {} of {}",
            rate(r.achieved),
            rate(r.offered)
        ));
    }
    if r.error_rate > limits.max_error_rate {
        why.push(format!(
            "errors {}{}",
            share(r.error_rate),
            if r.error_causes.is_empty() {
                String::new()
            } else {
                format!(" ({})", r.error_causes)
            }
        ));
    }
    if let Some(slo) = limits.slo_p99 {
        if r.p99_ms > ms(slo) {
            why.push(format!(
                "p99 {} over the SLO of {}",
                latency_ms(r.p99_ms),
                latency_ms(ms(slo))
            ));
        }
    }
    if !why.is_empty() && r.listen_overflows > 0 {
        why.push(format!(
            "listen queue overflowed {} times",
            r.listen_overflows
        ));
    }
    if !why.is_empty() && r.syn_drops > 0 {
        why.push(format!("{} SYNs dropped", r.syn_drops));
    }
    if !why.is_empty() && r.syn_cookies > 0 {
        why.push(format!("{} SYN cookies sent", r.syn_cookies));
    }
    if !why.is_empty() && r.retransmits > 0 {
        why.push(format!("{} TCP segments retransmitted", r.retransmits));
    }
    Step {
        figures: r.clone(),
        generator: if generator_bound { "invalid" } else { "valid" }.into(),
        ok: why.is_empty(),
        why,
        target_saturated,
    }
}

/// What limited a step that broke, in a performance engineer's words.
pub fn limiting_factor(step: &Step, limits: &Limits) -> String {
    let s = &step.figures;
    if step.generator_bound() {
        "the generator, not the target (see its evidence)".into()
    } else if lossy(s, limits) {
        // Before the machine's steal: retransmissions for 1% of the requests are what a
        // p99 shows, whatever the hypervisor took.
        format!(
            "packet loss: the kernel retransmitted {} TCP segments during the step ({:.1}% of its requests; RetransSegs) — each lost segment waits for a retransmission, 200 ms at least after a timeout, which is the tail the step shows (p99 {}, errors {}); look at the network path: a lossy link, a full queue on a NIC or switch, a firewall dropping",
            s.retransmits,
            100.0 * s.retransmits as f64 / (s.achieved.max(s.offered) * limits.step_seconds),
            latency_ms(s.p99_ms),
            share(s.error_rate)
        )
    } else {
        let own = target_limit(step).or_else(|| serialized(s, limits.cores));
        if s.stolen > STOLEN_BOUND {
            stolen_factor(s, own)
        } else {
            own.unwrap_or_else(|| nothing_stands_out(s, limits))
        }
    }
}

/// What the target's own evidence names as its limit: its CPU, a run queue, a kernel
/// counter, a wait in its threads; None when nothing stands out.
fn target_limit(step: &Step) -> Option<String> {
    let s = &step.figures;
    Some(if step.target_saturated && s.busiest_thread < SATURATED {
        format!(
            "target CPU saturated: the tree used {:.2} cores, the machine's CPUs nearly all (no one thread of it over {:.0}% of the step)",
            s.target_cpu,
            100.0 * s.busiest_thread
        )
    } else if step.target_saturated {
        format!(
            "target CPU saturated: its busiest thread was on a CPU {:.0}% of the step ({:.2} cores for the tree)",
            100.0 * s.busiest_thread,
            s.target_cpu
        )
    } else if cpu_contended(s) {
        format!(
            "CPU contention: the target's threads waited for a CPU {:.2} thread-seconds per second of the step (run queue, from schedstat) while the tree used {:.2} cores — other processes on its CPUs (the generator, another service) took the time it needed",
            s.run_queue, s.target_cpu
        )
    } else if s.busiest_demand >= SATURATED {
        // Less than a whole core for its busiest thread, but only because the thread
        // queued for a CPU it shared now and then: it never waited for anything else.
        format!(
            "target CPU saturated: its busiest thread wanted a CPU {:.0}% of the step — on one {:.0}%, waiting in a run queue for the rest (schedstat; {:.2} cores for the tree)",
            100.0 * s.busiest_demand.min(1.0),
            100.0 * s.busiest_thread,
            s.target_cpu
        )
    } else if let Some(held) = held_acceptor(s) {
        held
    } else if s.listen_overflows > 0 {
        format!(
            "listen queue overflowed: the kernel counted {} connections that found the target's accept queue full (ListenOverflows) while it used {:.2} cores — it accepts too slowly or its listen backlog is too small, and clients wait for the 1 s SYN retransmit",
            s.listen_overflows, s.target_cpu
        )
    } else if s.syn_drops > 0 {
        format!(
            "SYNs dropped: the kernel dropped {} connection attempts at a listening socket whose accept queue was not full (ListenDrops beyond ListenOverflows) while the target used {:.2} cores — its SYN queue was full (net.ipv4.tcp_max_syn_backlog, SYN cookies off) or the kernel was short of memory, and clients wait for the 1 s SYN retransmit",
            s.syn_drops, s.target_cpu
        )
    } else if s.syn_cookies > 0 {
        format!(
            "SYN queue full: the kernel answered {} SYNs with cookies (SyncookiesSent) while the target used {:.2} cores — connections are opened faster than they complete their handshake; raise net.ipv4.tcp_max_syn_backlog and the listen backlog, or reuse connections",
            s.syn_cookies, s.target_cpu
        )
    } else {
        return s.threads.as_ref().and_then(super::threads::limit);
    })
}

/// A tree whose CPU stopped within this much above a whole number of cores is held
/// there: what a thread does outside the lock (system calls, the kernel's network work
/// charged to it) adds to the held core; below, 90% of it.
pub const SERIAL_OVER: f64 = 0.25;
/// No thread of such a tree wanted a CPU (on one, or queued for one) this share of the
/// step: none of them is the limit on its own.
pub const SERIAL_THREAD: f64 = 0.75;
/// A core is free when at least this much of the machine's CPU was idle in the step.
pub const FREE_CORES: f64 = 0.5;

/// A process-wide lock the thread states could not show: the tree's CPU stopped at a
/// whole number of cores below the machine's, with a core of it idle, no thread that
/// wanted a CPU most of the step, the tree not short of CPU, and no one thread doing half
/// the work — its threads take turns. CPython's interpreter lock serving a thread per
/// request is this: each thread lives for one request, ended before it can be read.
fn serialized(s: &Figures, cores: f64) -> Option<String> {
    let idle = s.idle_cores?;
    let held = s.target_cpu.round().max(1.0);
    let whole = s.target_cpu >= SATURATED * held && s.target_cpu <= held + SERIAL_OVER;
    let spread = s.busiest_demand < SERIAL_THREAD && s.busiest_thread <= 0.5 * s.target_cpu;
    (whole && held < cores && idle >= FREE_CORES && spread && !cpu_contended(s))
        .then(|| {
            format!(
                "a process-wide lock: the target's CPU stopped at {:.2} cores — {held:.0} core's worth — while {idle:.2} of the machine's {cores:.0} cores were idle and no thread of it wanted a CPU more than {:.0}% of the step: its threads take turns, one at a time (an interpreter lock such as CPython's, or a global mutex); {}",
                s.target_cpu,
                100.0 * s.busiest_demand,
                match &s.threads {
                    Some(b) => format!(
                        "the threads read did not show the wait ({}): threads that live for one request end before they are read",
                        super::threads::summary(b)
                    ),
                    None => "its thread states were not read".into(),
                }
            )
        })
}

/// The threads' own wait as the cause when the accept queue overflowed because of it:
/// threads held in fsync, a lock, a full pool or a downstream cannot accept, so the
/// overflow is the symptom and the wait the limit. A target that sleeps between accepts
/// (timers) is named by its queue, as a slow acceptor.
fn held_acceptor(s: &Figures) -> Option<String> {
    if s.listen_overflows == 0 {
        return None;
    }
    let (wait, words) = s.threads.as_ref().and_then(super::threads::cause)?;
    (wait != crate::measure::threads::State::Sleep).then(|| {
        format!(
            "{words}; so it accepted too slowly: the kernel counted {} connections that found its accept queue full (ListenOverflows), and clients waited for the 1 s SYN retransmit",
            s.listen_overflows
        )
    })
}

/// A step that broke while the hypervisor took more than [`STOLEN_BOUND`] of the
/// machine's CPU, even when measured again. The target's own evidence still names the
/// kind of limit (its CPU, its lock: steal lowers the number, not the cause); with none,
/// the machine is what stands out.
fn stolen_factor(s: &Figures, own: Option<String>) -> String {
    match own {
        Some(own) => format!(
            "{own}; the hypervisor took {:.1}% of the machine's CPU during the step (steal, even after the step was measured again): the limit is the target's, its ceiling lower than on a quiet machine",
            100.0 * s.stolen
        ),
        None => format!(
            "the machine: the hypervisor took {:.1}% of its CPU during the step (steal, even after the step was measured again) — the target's CPU was {:.2} cores, busiest thread {:.0}%, and nothing of its own stands out; this ceiling is its neighbours' as much as the target's: repeat on a quiet machine",
            100.0 * s.stolen,
            s.target_cpu,
            100.0 * s.busiest_thread
        ),
    }
}

/// A step that broke with no cause in the target's evidence: what broke it (its errors,
/// its p99, its throughput) is a symptom, not a cause.
fn nothing_stands_out(s: &Figures, limits: &Limits) -> String {
    let symptom = if s.error_rate > limits.max_error_rate {
        format!(
            "errors {}{}",
            share(s.error_rate),
            if s.error_causes.is_empty() {
                String::new()
            } else {
                format!(" ({})", s.error_causes)
            }
        )
    } else if limits.slo_p99.is_some_and(|slo| s.p99_ms > ms(slo)) {
        format!("p99 {} over the SLO", latency_ms(s.p99_ms))
    } else {
        format!("achieved {} of {}", rate(s.achieved), rate(s.offered))
    };
    format!(
        "nothing stands out: the step broke on {symptom} while the target used {:.2} cores (busiest thread {:.0}%), no kernel counter moved and no wait dominated its working threads (a wait is named from {:.2} thread-s/s and more than they ran; a pool when all its threads were busy {:.0}% of the step); {}",
        s.target_cpu,
        100.0 * s.busiest_thread,
        super::threads::WAIT_MIN,
        100.0 * super::threads::POOL_FULL,
        thread_summary(s)
    )
}

/// How a ramp ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum End {
    /// Every step held: the ceiling is at least the last step's rate.
    Held,
    /// A step broke on the target's side: the ceiling is the last step that held.
    Broke,
    /// The very first step broke: the target could not take the starting rate.
    FirstStepBroke,
    /// The generator, not the target, was the limit of the step that ended the ramp:
    /// the ceiling is only a floor (INVALID).
    GeneratorBound,
}

impl End {
    /// A ceiling of `v` req/s as every report words it: a floor when the ramp never
    /// reached the target's limit.
    pub fn ceiling(self, v: f64) -> String {
        match self {
            End::GeneratorBound => format!("≥ {} (generator-bound)", rate(v)),
            End::Held => format!("≥ {} (never broke)", rate(v)),
            End::Broke | End::FirstStepBroke => rate(v),
        }
    }
}

/// What the ramp concludes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Conclusion {
    pub end: End,
    /// The highest offered rate of a step that held, req/s (0 if none did).
    pub ceiling: f64,
    /// Where latency starts its climb: the last step, before any failure, whose p99 is
    /// within twice the lowest p99 of the ramp.
    pub knee: f64,
    /// The most completed per second in any step.
    pub max_throughput: f64,
    pub limiting_factor: String,
}

/// The ramp's conclusion from its judged steps (in order; the ramp stops at the first
/// that broke).
pub fn conclude(steps: &[Step], limits: &Limits) -> Conclusion {
    let ceiling = steps
        .iter()
        .filter(|s| s.ok)
        .map(|s| s.figures.offered)
        .fold(0.0, f64::max);
    let max_throughput = steps.iter().map(|s| s.figures.achieved).fold(0.0, f64::max);
    let floor = steps
        .iter()
        .map(|s| s.figures.p99_ms)
        .fold(f64::INFINITY, f64::min);
    let knee = steps
        .iter()
        .take_while(|s| s.ok)
        .filter(|s| s.figures.p99_ms <= 2.0 * floor)
        .map(|s| s.figures.offered)
        .fold(0.0, f64::max);
    let broke = steps.iter().position(|s| !s.ok);
    let end = match broke {
        None => End::Held,
        Some(i) if steps[i].generator_bound() => End::GeneratorBound,
        Some(0) => End::FirstStepBroke,
        Some(_) => End::Broke,
    };
    let limiting_factor = match (end, broke) {
        (End::GeneratorBound, Some(i)) => format!(
            "the generator, not the target, at {}: the ceiling is at least {} (see the step's evidence)",
            rate(steps[i].figures.offered),
            rate(ceiling)
        ),
        (End::FirstStepBroke, Some(i)) => format!(
            "the target could not take the starting rate of {}: {}",
            rate(steps[i].figures.offered),
            limiting_factor(&steps[i], limits)
        ),
        (_, Some(i)) => limiting_factor(&steps[i], limits),
        (_, None) => "none found: the ramp reached its last step without breaking (raise max_steps or step to find the ceiling)".into(),
    };
    Conclusion {
        end,
        ceiling,
        knee,
        max_throughput,
        limiting_factor,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Limits = Limits {
        max_error_rate: 0.01,
        slo_p99: Some(std::time::Duration::from_millis(100)),
        cores: 2.0,
        step_seconds: 10.0,
    };

    fn rec(offered: f64, achieved: f64, p99_ms: f64) -> StepRecord {
        StepRecord {
            figures: Figures {
                offered,
                achieved,
                p99_ms,
                error_rate: 0.0,
                unfinished: 0,
                error_causes: String::new(),
                target_cpu: 0.3,
                busiest_thread: 0.3,
                busiest_demand: 0.3,
                listen_overflows: 0,
                syn_drops: 0,
                syn_cookies: 0,
                run_queue: 0.0,
                retransmits: 0,
                stolen: 0.0,
                idle_cores: None,
                threads: None,
            },
            generator_invalid: None,
            generator_at_capacity: false,
        }
    }

    fn run(records: &[StepRecord]) -> (Vec<Step>, Conclusion) {
        let steps: Vec<Step> = records.iter().map(|r| judge_step(r, &LIMITS)).collect();
        let c = conclude(&steps, &LIMITS);
        (steps, c)
    }

    #[test]
    fn the_ceiling_is_the_last_step_that_held_and_the_knee_where_latency_climbs() {
        let (steps, c) = run(&[
            rec(100.0, 100.0, 1.0),
            rec(200.0, 199.0, 1.5),
            rec(300.0, 298.0, 5.0),
            rec(400.0, 310.0, 900.0),
        ]);
        assert_eq!(
            steps.iter().map(|s| s.ok).collect::<Vec<_>>(),
            [true, true, true, false]
        );
        assert_eq!((c.ceiling, c.knee, c.max_throughput), (300.0, 200.0, 310.0));
        assert_eq!(
            steps[3].why,
            [
                "achieved 310 req/s of 400 req/s",
                "p99 900 ms over the SLO of 100 ms"
            ]
        );
        assert!(
            c.limiting_factor
                .starts_with("nothing stands out: the step broke on p99 900 ms over the SLO")
                && c.limiting_factor.contains("thread states were not read"),
            "{}",
            c.limiting_factor
        );
    }

    #[test]
    fn a_ramp_that_never_broke_says_so() {
        let (_, c) = run(&[rec(100.0, 100.0, 1.0), rec(200.0, 200.0, 1.0)]);
        assert_eq!(c.ceiling, 200.0);
        assert_eq!(c.end, End::Held);
        assert!(c
            .limiting_factor
            .starts_with("none found: the ramp reached its last step without breaking"));
    }

    #[test]
    fn a_first_step_already_broken_has_no_ceiling() {
        let mut r = rec(100.0, 40.0, 5.0);
        r.figures.error_rate = 0.5;
        r.figures.error_causes = "refused 500".into();
        let (steps, c) = run(&[r]);
        assert!(!steps[0].ok);
        assert_eq!((c.ceiling, c.knee), (0.0, 0.0));
        assert_eq!(c.end, End::FirstStepBroke);
        // Errors are what broke the step, not what limited it: named as the symptom,
        // with what they were, never as the factor.
        assert!(
            c.limiting_factor.starts_with(
                "the target could not take the starting rate of 100 req/s: nothing stands out: the step broke on errors 50.00% (refused 500)"
            ),
            "{}",
            c.limiting_factor
        );
    }

    #[test]
    fn a_step_broken_by_errors_names_the_lock_its_threads_waited_on() {
        // The CPython ramp: a step broken by errors whose threads mostly waited on a
        // futex is limited by the lock, as a step broken by its p99 is.
        let mut r = rec(2700.0, 2650.0, 20.0);
        r.figures.error_rate = 0.03;
        r.figures.error_causes = "reset 81".into();
        let mut states = crate::measure::threads::States::default();
        states.add(crate::measure::threads::State::Lock, 6.0);
        states.add(crate::measure::threads::State::OnCpu, 0.9);
        r.figures.threads = Some(Breakdown {
            seconds: 4.0,
            groups: vec![crate::measure::threads::GroupRates {
                name: "python3".into(),
                threads: 60,
                states,
                all_busy: 0.0,
            }],
        });
        let (_, c) = run(&[rec(2400.0, 2400.0, 5.0), r]);
        assert!(
            c.limiting_factor.starts_with("a lock"),
            "{}",
            c.limiting_factor
        );
    }

    #[test]
    fn a_generator_late_while_the_target_had_headroom_is_generator_bound() {
        let mut r = rec(1000.0, 700.0, 3.0);
        r.generator_invalid = Some("schedule lag p99 9 ms".into());
        let (steps, c) = run(&[rec(500.0, 500.0, 1.0), r]);
        assert!(steps[1].generator_bound());
        assert_eq!(c.ceiling, 500.0);
        assert_eq!(c.end, End::GeneratorBound);
        assert_eq!(
            c.limiting_factor,
            "the generator, not the target, at 1000 req/s: the ceiling is at least 500 req/s (see the step's evidence)"
        );
    }

    #[test]
    fn a_saturated_target_makes_a_lateness_its_consequence_unless_the_generator_was_busy() {
        let mut r = rec(1000.0, 700.0, 3.0);
        r.generator_invalid = Some("schedule lag p99 9 ms".into());
        r.figures.busiest_thread = 0.97;
        let (steps, c) = run(&[rec(500.0, 500.0, 1.0), r.clone()]);
        assert!(!steps[1].generator_bound() && steps[1].target_saturated);
        assert!(steps[1].why[0].starts_with("target CPU saturated (generator late"));
        assert_eq!(c.end, End::Broke);
        assert!(c
            .limiting_factor
            .starts_with("target CPU saturated: its busiest thread was on a CPU 97%"));
        r.generator_at_capacity = true;
        let (steps, _) = run(&[r]);
        assert!(steps[0].generator_bound());
    }

    #[test]
    fn a_listen_queue_that_overflowed_is_named_with_the_kernels_count() {
        let mut r = rec(1600.0, 1200.0, 1000.0);
        r.figures.listen_overflows = 412;
        let (steps, c) = run(&[rec(800.0, 800.0, 2.0), r]);
        assert!(steps[1]
            .why
            .contains(&"listen queue overflowed 412 times".to_string()));
        assert!(
            c.limiting_factor
                .starts_with("listen queue overflowed: the kernel counted 412 connections"),
            "{}",
            c.limiting_factor
        );
    }

    #[test]
    fn threads_held_in_fsync_are_the_cause_of_the_overflow_they_make() {
        // The tokio server whose four workers block in fdatasync: they cannot accept, so
        // the queue overflows; storage is the limit, the overflow its consequence. A
        // target asleep between accepts is still named by its queue.
        let mut r = rec(80.0, 23.0, 2700.0);
        r.figures.listen_overflows = 15;
        let held = |state| {
            let mut states = crate::measure::threads::States::default();
            states.add(state, 3.5);
            states.add(crate::measure::threads::State::OnCpu, 0.02);
            Some(Breakdown {
                seconds: 10.0,
                groups: vec![crate::measure::threads::GroupRates {
                    name: "tokio-rt-worker".into(),
                    threads: 4,
                    states,
                    all_busy: 0.0,
                }],
            })
        };
        r.figures.threads = held(crate::measure::threads::State::Storage);
        let (_, c) = run(&[rec(20.0, 20.0, 10.0), r.clone()]);
        assert!(
            c.limiting_factor.starts_with(
                "storage I/O: the target's 4 `tokio-rt-worker` threads spent 3.50 thread-s/s"
            ) && c
                .limiting_factor
                .contains("so it accepted too slowly: the kernel counted 15 connections"),
            "{}",
            c.limiting_factor
        );
        r.figures.threads = held(crate::measure::threads::State::Sleep);
        let (_, c) = run(&[rec(20.0, 20.0, 10.0), r]);
        assert!(
            c.limiting_factor
                .starts_with("listen queue overflowed: the kernel counted 15"),
            "{}",
            c.limiting_factor
        );
    }

    #[test]
    fn syns_dropped_or_answered_with_cookies_are_named_after_an_overflow() {
        let mut r = rec(1600.0, 1200.0, 1000.0);
        r.figures.syn_drops = 57;
        r.figures.syn_cookies = 9;
        let (steps, c) = run(&[rec(800.0, 800.0, 2.0), r.clone()]);
        assert!(steps[1].why.contains(&"57 SYNs dropped".to_string()));
        assert!(steps[1].why.contains(&"9 SYN cookies sent".to_string()));
        assert!(
            c.limiting_factor
                .starts_with("SYNs dropped: the kernel dropped 57 connection attempts"),
            "{}",
            c.limiting_factor
        );
        r.figures.syn_drops = 0;
        let (_, c) = run(&[rec(800.0, 800.0, 2.0), r.clone()]);
        assert!(c
            .limiting_factor
            .starts_with("SYN queue full: the kernel answered 9 SYNs"));
        r.figures.listen_overflows = 3;
        let (_, c) = run(&[rec(800.0, 800.0, 2.0), r]);
        assert!(c.limiting_factor.starts_with("listen queue overflowed"));
    }

    #[test]
    fn retransmissions_for_one_request_in_a_hundred_are_named_packet_loss() {
        // 1,000 req/s for 10 s: 100 retransmits are 1% of the requests, enough to make
        // the p99; 99 are not, and the latency itself is named.
        let mut r = rec(1000.0, 1000.0, 250.0);
        r.figures.retransmits = 100;
        let (steps, c) = run(&[rec(500.0, 500.0, 2.0), r.clone()]);
        assert!(!steps[1].ok);
        assert!(
            c.limiting_factor.starts_with(
                "packet loss: the kernel retransmitted 100 TCP segments during the step (1.0% of its requests"
            ),
            "{}",
            c.limiting_factor
        );
        // A listen queue that overflowed explains them (its dropped SYNs are resent).
        let mut q = r.clone();
        q.figures.listen_overflows = 40;
        let (_, c) = run(&[rec(500.0, 500.0, 2.0), q]);
        assert!(
            c.limiting_factor.starts_with("listen queue overflowed"),
            "{}",
            c.limiting_factor
        );
        r.figures.retransmits = 99;
        let (_, c) = run(&[rec(500.0, 500.0, 2.0), r]);
        assert!(
            c.limiting_factor
                .starts_with("nothing stands out: the step broke on p99 250 ms"),
            "{}",
            c.limiting_factor
        );
    }

    #[test]
    fn threads_waiting_for_a_cpu_are_named_before_what_follows_from_it() {
        let mut r = rec(1600.0, 1200.0, 1000.0);
        r.figures.run_queue = 0.8;
        r.figures.listen_overflows = 12;
        r.figures.retransmits = 30;
        let (steps, c) = run(&[rec(800.0, 800.0, 2.0), r]);
        assert!(steps[1]
            .why
            .contains(&"30 TCP segments retransmitted".to_string()));
        assert!(
            c.limiting_factor.starts_with(
                "CPU contention: the target's threads waited for a CPU 0.80 thread-seconds"
            ),
            "{}",
            c.limiting_factor
        );
    }

    #[test]
    fn a_thread_that_ran_or_queued_for_a_cpu_all_step_is_a_saturated_cpu() {
        // nginx's one gzip worker on a CPU it shared now and then (a CI run): on a CPU
        // 88% of the step, queued for one the rest; too little queueing for contention.
        let mut r = rec(1000.0, 992.1, 288.0);
        r.figures.target_cpu = 0.88;
        r.figures.busiest_thread = 0.88;
        r.figures.busiest_demand = 1.02;
        r.figures.run_queue = 0.24;
        let (_, c) = run(&[rec(500.0, 496.2, 2.4), r.clone()]);
        assert_eq!(
            c.limiting_factor,
            "target CPU saturated: its busiest thread wanted a CPU 100% of the step — on one 88%, waiting in a run queue for the rest (schedstat; 0.88 cores for the tree)"
        );
        // The same thread wanting a CPU 80% of the step had room to go faster.
        r.figures.busiest_demand = 0.80;
        let (_, c) = run(&[rec(500.0, 496.2, 2.4), r.clone()]);
        assert!(
            c.limiting_factor.starts_with("nothing stands out"),
            "{}",
            c.limiting_factor
        );
        // Half its time queued behind another process is contention, named as such.
        r.figures.busiest_thread = 0.5;
        r.figures.target_cpu = 0.5;
        r.figures.run_queue = 0.5;
        r.figures.busiest_demand = 1.0;
        let (_, c) = run(&[rec(500.0, 496.2, 2.4), r]);
        assert!(
            c.limiting_factor.starts_with("CPU contention"),
            "{}",
            c.limiting_factor
        );
    }

    #[test]
    fn a_step_broken_while_the_hypervisor_took_the_cpu_names_the_machine() {
        let mut r = rec(1600.0, 1200.0, 1000.0);
        r.figures.stolen = 0.25;
        let (_, c) = run(&[rec(800.0, 800.0, 2.0), r]);
        assert!(
            c.limiting_factor
                .starts_with("the machine: the hypervisor took 25.0% of its CPU"),
            "{}",
            c.limiting_factor
        );
        // A target whose own evidence names its limit keeps it: steal lowers the
        // ceiling, the cause is still the target's (CPython's lock on a VM that steals
        // 10-20% under any network load).
        let mut r = rec(1600.0, 1200.0, 1000.0);
        r.figures.stolen = 0.18;
        r.figures.busiest_thread = 0.97;
        r.figures.target_cpu = 0.97;
        let (_, c) = run(&[rec(800.0, 800.0, 2.0), r]);
        assert!(
            c.limiting_factor
                .starts_with("target CPU saturated: its busiest thread was on a CPU 97%")
                && c.limiting_factor
                    .contains("; the hypervisor took 18.0% of the machine's CPU during the step")
                && c.limiting_factor.contains("the limit is the target's"),
            "{}",
            c.limiting_factor
        );
    }

    #[test]
    fn throughput_that_stops_following_without_cpu_is_named_from_the_threads_or_not_at_all() {
        let (_, c) = run(&[rec(100.0, 100.0, 1.0), rec(200.0, 160.0, 2.0)]);
        assert_eq!(c.end, End::Broke);
        assert!(
            c.limiting_factor.starts_with(
                "nothing stands out: the step broke on achieved 160 req/s of 200 req/s while the target used 0.30 cores"
            ),
            "{}",
            c.limiting_factor
        );
        // …and says at what figures a wait or a pool would have been named.
        assert!(
            c.limiting_factor.contains(
                "a wait is named from 0.25 thread-s/s and more than they ran; a pool when all its threads were busy 90% of the step"
            ),
            "{}",
            c.limiting_factor
        );
        // The same step whose working threads waited on a shared futex: a lock.
        let mut r = rec(200.0, 160.0, 2.0);
        let mut states = crate::measure::threads::States::default();
        states.add(crate::measure::threads::State::Lock, 6.0);
        states.add(crate::measure::threads::State::OnCpu, 0.3);
        r.figures.threads = Some(Breakdown {
            seconds: 10.0,
            groups: vec![crate::measure::threads::GroupRates {
                name: "worker".into(),
                threads: 8,
                states,
                all_busy: 0.0,
            }],
        });
        let (_, c) = run(&[rec(100.0, 100.0, 1.0), r]);
        assert!(
            c.limiting_factor
                .starts_with("a lock: the target's 8 `worker` threads spent 6.00 thread-s/s"),
            "{}",
            c.limiting_factor
        );
    }

    #[test]
    fn a_tree_held_at_one_core_with_a_core_idle_and_no_busy_thread_is_a_process_wide_lock() {
        // CPython serving a thread per request (a ramp on this VM): 1.06 cores for the
        // tree, its accept thread 21% (46% wanting a CPU), 0.67 cores of the machine idle.
        let gil = || {
            let mut r = rec(2200.0, 1997.3, 211.3);
            r.figures.target_cpu = 1.06;
            r.figures.busiest_thread = 0.21;
            r.figures.busiest_demand = 0.46;
            r.figures.run_queue = 0.30;
            r.figures.idle_cores = Some(0.67);
            r
        };
        let (_, c) = run(&[rec(1900.0, 1886.0, 5.0), gil()]);
        assert!(
            c.limiting_factor.starts_with(
                "a process-wide lock: the target's CPU stopped at 1.06 cores — 1 core's worth — while 0.67 of the machine's 2 cores were idle and no thread of it wanted a CPU more than 46% of the step"
            ),
            "{}",
            c.limiting_factor
        );
        // Each condition is needed: the machine full (the generator took the other
        // core), the tree not at a whole core, one thread doing most of the work, a
        // thread wanting a CPU most of the step, the tree short of CPU, the machine's
        // idle time not read (a target on another machine).
        type Change = Box<dyn Fn(&mut Figures)>;
        let mut changes: Vec<(&str, Change)> = vec![
            ("no idle core", Box::new(|f| f.idle_cores = Some(0.3))),
            ("between cores", Box::new(|f| f.target_cpu = 1.4)),
            ("below a core", Box::new(|f| f.target_cpu = 0.8)),
            ("one thread's work", Box::new(|f| f.busiest_thread = 0.6)),
            (
                "a thread wanting a CPU",
                Box::new(|f| f.busiest_demand = 0.8),
            ),
            ("short of CPU", Box::new(|f| f.run_queue = 0.6)),
            ("not read", Box::new(|f| f.idle_cores = None)),
        ];
        for (what, change) in changes.drain(..) {
            let mut r = gil();
            change(&mut r.figures);
            let (_, c) = run(&[rec(1900.0, 1886.0, 5.0), r]);
            assert!(
                !c.limiting_factor.contains("process-wide lock"),
                "{what}: {}",
                c.limiting_factor
            );
        }
    }

    #[test]
    fn a_tree_using_the_machine_with_no_busy_thread_is_the_machine_s_cpu() {
        // A lock-free thread per connection: 1.83 cores of 2, each thread a few percent.
        let mut r = rec(12000.0, 11305.0, 101.0);
        r.figures.target_cpu = 1.83;
        r.figures.busiest_thread = 0.03;
        let (_, c) = run(&[rec(11000.0, 10845.0, 7.0), r]);
        assert!(
            c.limiting_factor.starts_with(
                "target CPU saturated: the tree used 1.83 cores, the machine's CPUs nearly all (no one thread of it over 3% of the step)"
            ),
            "{}",
            c.limiting_factor
        );
    }
}
