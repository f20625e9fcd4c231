//! The test kinds: what a case does with its target and workload, and what it measures.
//! Each kind is one module, named by its row in the table of kinds (`crate::kind`), that
//! names no other kind: the load kinds drive the load engine at a started target through
//! what [`load`] shares, the process kinds run the user's own commands through what
//! [`process`] shares; what one hands another goes through a [`Channel`]. Each returns a [`CaseResult`]: its
//! metrics, its verdict and the reasons, and tables for the report.

pub mod details;
pub mod lines;
mod load;
mod process;
pub mod watch;

use crate::error::Category;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

use crate::measure::{MonitorSummary, Sample};
use crate::store::Metric;
use crate::suite::{Case, Suite, Test};
use lines::Line;

use crate::suite::{LoadTest, ProcessTest, Workload};
use crate::sut::lifecycle::Running;

/// Each kind's module (`kinds/NAME.rs`: its run and its verdict) and the dispatch to
/// it, from the table of kinds (`crate::kind`): a load kind's `run(ctx, spec, workload,
/// target, result)`, a process kind's `run(ctx, spec)`.
macro_rules! runs_of_kinds {
    (
        load: [$($lv:ident $lm:ident { $($lk:ident: $lx:expr),* $(,)? }),* $(,)?],
        process: [$($pv:ident $pm:ident { $($pk:ident: $px:expr),* $(,)? }),* $(,)?] $(,)?
    ) => {
        $(mod $lm;)*
        $(mod $pm;)*

        /// Runs a load kind after its set-up requests; `running` is the target, if the
        /// suite has one (a command workload may run without).
        pub fn run_http(
            ctx: &CaseCtx,
            test: LoadTest,
            w: &Workload,
            running: Option<&Running>,
        ) -> crate::error::Result<CaseResult> {
            load::set_up(ctx, w)?;
            let mut r = CaseResult::new();
            match test {
                $(LoadTest::$lv(spec) => $lm::run(ctx, spec, w, running, &mut r)?,)*
            }
            Ok(r)
        }

        /// Runs a process kind: the user's own commands, under the monitor.
        pub fn run_process(ctx: &CaseCtx, test: ProcessTest) -> crate::error::Result<CaseResult> {
            match test {
                $(ProcessTest::$pv(spec) => $pm::run(ctx, spec),)*
            }
        }
    };
}
crate::kind::table!(runs_of_kinds);

/// A figure one kind hands a later case of the run (a ramp's ceiling, which a soak's
/// capacity reads), declared here so that both name it and neither names the other.
pub struct Channel<T> {
    pub name: &'static str,
    _of: std::marker::PhantomData<fn() -> T>,
}

impl<T> Channel<T> {
    const fn new(name: &'static str) -> Channel<T> {
        Channel {
            name,
            _of: std::marker::PhantomData,
        }
    }
}

/// The ceiling the last ramp of the run measured (req/s).
pub const CEILING: Channel<f64> = Channel::new("ceiling");

/// What the run's cases have handed on so far, by channel; kept by the runner across
/// the cases of one run (each side of a paired run has its own).
#[derive(Debug, Default)]
pub struct Handed {
    values: std::sync::Mutex<BTreeMap<&'static str, Box<dyn std::any::Any + Send>>>,
}

impl Handed {
    /// Hands on `value` on `channel`, in place of what was there.
    pub fn put<T: Send + 'static>(&self, channel: &Channel<T>, value: T) {
        self.values
            .lock()
            .unwrap()
            .insert(channel.name, Box::new(value));
    }

    /// What was last handed on `channel`.
    pub fn get<T: Clone + 'static>(&self, channel: &Channel<T>) -> Option<T> {
        let values = self.values.lock().unwrap();
        values.get(channel.name)?.downcast_ref::<T>().cloned()
    }
}

/// How a case ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Passed,
    /// The generator, not the target, was the limit.
    Invalid,
    /// A gate or the kind's own verdict failed.
    Failed,
    /// The target exited unexpectedly.
    Crashed,
}

impl Status {
    /// Its exit code (README, "Exit codes").
    pub fn exit_code(self) -> i32 {
        use crate::error::exit;
        match self {
            Status::Passed => exit::PASSED,
            Status::Invalid => exit::INVALID,
            Status::Failed => exit::FAILED,
            Status::Crashed => exit::CRASHED,
        }
    }

    /// The one of two that wins, by [`crate::error::exit::combine`] of their codes.
    pub fn worse(self, other: Status) -> Status {
        if crate::error::exit::combine(self.exit_code(), other.exit_code()) == self.exit_code() {
            self
        } else {
            other
        }
    }

    /// As the store holds it (and names it: its word, `passed`).
    pub fn stored(self) -> crate::store::Status {
        use crate::store::Status as S;
        match self {
            Status::Passed => S::Passed,
            Status::Invalid => S::Invalid,
            Status::Failed => S::Failed,
            Status::Crashed => S::Crashed,
        }
    }
}

/// What a case produced.
#[derive(Debug, Clone, Serialize)]
pub struct CaseResult {
    pub status: Status,
    pub reasons: Vec<String>,
    pub metrics: Vec<Metric>,
    /// What it found beside its metrics, for the terminal (a ramp's steps, a rounds
    /// table…), worded by `report::case`.
    pub table: Vec<lines::Line>,
    /// The target's resource summary, when a target ran.
    pub target: Option<MonitorSummary>,
    /// Named series for the store (e.g. the stress–strain curve).
    #[serde(skip)]
    pub series: Vec<(String, Vec<(f64, f64)>)>,
    /// Kind-specific details for the stored summary (steps, rounds, leak fits…).
    #[serde(serialize_with = "details::or_null")]
    pub details: details::Details,
    /// Each gate and whether it held (for JUnit and the reports).
    pub gates: Vec<GateResult>,
    /// Test phases on the target's clock (seconds), for the reports' timelines.
    pub phases: Vec<(String, f64)>,
    /// The CPU flame graph of the target, or why there is none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flamegraph: Option<crate::monitor::profile::FlameInfo>,
    /// Folded stacks of the profile, for the store (differential flame graphs).
    #[serde(skip)]
    pub folded: Option<String>,
    /// Serialized HDR histograms (V2 + deflate) for the store, by name, each with its
    /// interval (seconds from the load's start; (0, 0) for a whole run's).
    #[serde(skip)]
    pub histograms: Vec<(String, (f64, f64), Vec<u8>)>,
}

pub use crate::store::GateResult;

impl CaseResult {
    /// Records a gate's outcome; a failed gate fails the case.
    fn gate(&mut self, g: GateResult) {
        if g.passed {
            self.table.push(Line::GateOk {
                detail: g.detail.clone(),
            });
        } else {
            self.fail(Status::Failed, format!("gate failed: {}", g.detail));
        }
        self.gates.push(g);
    }

    pub fn new() -> CaseResult {
        CaseResult {
            status: Status::Passed,
            reasons: Vec::new(),
            metrics: Vec::new(),
            table: Vec::new(),
            target: None,
            series: Vec::new(),
            details: details::Details::default(),
            gates: Vec::new(),
            phases: Vec::new(),
            flamegraph: None,
            folded: None,
            histograms: Vec::new(),
        }
    }

    /// Marks the case with at least `s` and a reason.
    pub fn fail(&mut self, s: Status, reason: String) {
        self.status = self.status.worse(s);
        self.reasons.push(reason);
    }

    pub fn metric(&self, name: &str) -> Option<f64> {
        self.metrics
            .iter()
            .find(|m| m.name == name)
            .map(|m| m.value)
    }
}

impl Default for CaseResult {
    fn default() -> Self {
        CaseResult::new()
    }
}

/// What a case gets to work with.
pub struct CaseCtx<'a> {
    pub suite: &'a Suite,
    pub test: &'a Test,
    pub case: &'a Case,
    /// Matrix values plus `port` and `dir`.
    pub vars: BTreeMap<String, String>,
    /// A directory of the case's own (logs, files).
    pub dir: PathBuf,
    /// What earlier cases of the run handed on ([`Channel`]s: a ramp's ceiling).
    pub handed: &'a Handed,
    /// Where the case is stored, so that its samples can be written as they come.
    pub store: crate::store::Location,
    /// Record the target's CPU stacks during the case (a flame graph).
    pub profile: bool,
    pub case_id: i64,
    /// The HTTP load comes from these agents (`run --agents`).
    pub agents: Option<&'a crate::agents::Fleet>,
    /// The agents' parts of the case's last load run (kept in its stored details).
    pub agent_parts: std::cell::RefCell<Vec<crate::load::summary::AgentSummary>>,
    /// Run at the same time as the other version's case (a duet): its target pinned to
    /// its own CPUs, its load started together with the other's.
    pub duet: Option<&'a Duet>,
    /// Told of the case's progress (the live view, the exporter).
    pub observer: crate::observe::Shared,
}

/// One side of a duet: two versions' cases run at once, so that whatever the machine
/// does during the window falls on both.
#[derive(Debug)]
pub struct Duet {
    /// The CPUs this side's target is pinned to; `None`: it shares every CPU.
    pub cpus: Option<Vec<usize>>,
    /// Which side this is (0 baseline, 1 candidate).
    pub side: usize,
    /// Where both sides meet before their loads start.
    pub together: std::sync::Arc<Rendezvous>,
}

/// A one-shot meeting point of two sides that tolerates a side that never comes (its
/// target failed to start): each side arrives once, and waiting ends when both have
/// arrived or after a timeout.
#[derive(Debug, Default)]
pub struct Rendezvous {
    arrived: std::sync::Mutex<[bool; 2]>,
    all: std::sync::Condvar,
}

impl Rendezvous {
    /// Marks `side` as arrived (again is harmless) and wakes the other.
    pub fn arrive(&self, side: usize) {
        let mut a = self.arrived.lock().unwrap_or_else(|e| e.into_inner());
        a[side.min(1)] = true;
        self.all.notify_all();
    }

    /// Arrives and waits for the other side, at most `timeout` (a side that never
    /// comes measured nothing: its half of the pair is left out).
    pub fn meet(&self, side: usize, timeout: std::time::Duration) {
        self.arrive(side);
        let a = self.arrived.lock().unwrap_or_else(|e| e.into_inner());
        let _ = self.all.wait_timeout_while(a, timeout, |a| !(a[0] && a[1]));
    }
}

impl CaseCtx<'_> {
    /// A sink that writes the target's samples to this case in the store as the run
    /// goes (its own connection, from the watcher's thread), so a crash of strainline
    /// at hour 3 keeps hours 1–3.
    pub fn sample_sink(&self) -> crate::monitor::watch::Sink {
        let (location, case) = (self.store.clone(), self.case_id);
        let mut store: Option<crate::store::Store> = None;
        Box::new(move |samples: &[Sample]| {
            if store.is_none() {
                store = crate::store::Store::open(&location).ok();
            }
            if let Some(s) = &store {
                let _ = s.append_samples(case, samples);
            }
        })
    }
}

/// Counts of the log analysis.
pub fn analyse_log(suite: &Suite, log: &std::path::Path, r: &mut CaseResult) {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let count = |res: &[regex_lite::Regex]| {
        text.lines()
            .filter(|l| res.iter().any(|re| re.is_match(l)))
            .count()
    };
    let errors = count(&suite.logs.errors);
    let warnings = count(&suite.logs.warnings);
    r.metrics.push(Metric::of("log_errors", errors as f64));
    r.metrics.push(Metric::of("log_warnings", warnings as f64));
    let mut classes = std::collections::BTreeMap::new();
    for (name, re) in &suite.logs.classes {
        let n = text.lines().filter(|l| re.is_match(l)).count();
        classes.insert(name.clone(), n as u64);
        r.metrics.push(Metric::new(
            &crate::suite::log_class_metric(name),
            n as f64,
            crate::metrics::Unit::Count.symbol(),
            crate::metrics::Direction::Lower,
        ));
        if n > 0 {
            r.table.push(Line::LogClass {
                name: name.clone(),
                lines: n as u64,
            });
        }
    }
    if !r.details.is_empty() || !classes.is_empty() {
        r.details.log_classes = Some(classes);
    }
}

/// Applies the test's gates to the result; a gate on a metric the case did not produce
/// is reported as a configuration error (`Err`).
pub fn apply_gates(test: &Test, r: &mut CaseResult) -> crate::error::Result<()> {
    for g in &test.gates {
        match r.metric(&g.metric) {
            // Undecided (a scale test that could not tell left its metric out and said
            // why): the gate is not held, and the case stays INVALID, not FAILED.
            None if r.status == Status::Invalid => {
                let detail = format!("{}: undecided (the case could not measure it)", g.text);
                r.table.push(Line::GateUndecided {
                    detail: detail.clone(),
                });
                r.fail(Status::Invalid, format!("gate undecided: {detail}"));
                r.gates.push(GateResult {
                    detail,
                    ..g.judge(None)
                });
            }
            // The kind makes it (check refused any other), this case did not measure it
            // (a latency without a reply, a check never judged): not held, FAILED, and
            // the suite goes on.
            Some(v) => r.gate(g.judge(Some(v))),
            None => r.gate(g.judge(None)),
        }
    }
    for text in &test.harness_gates {
        let names: Vec<(String, crate::suite::gate::Unit)> = r
            .metrics
            .iter()
            .map(|m| (m.name.clone(), crate::suite::gate::Unit::Plain))
            .collect();
        let refs: Vec<(&str, crate::suite::gate::Unit)> =
            names.iter().map(|(n, u)| (n.as_str(), *u)).collect();
        let g = crate::suite::gate::parse(text, &refs)
            .map_err(|(_, e)| format!("gate '{text}': {e} (the harness did not print it)"))
            .usage()?;
        let judged = g.judge(r.metric(&g.metric));
        r.gate(judged);
    }
    Ok(())
}

/// A short form of a duration for tables.
pub fn d(x: Duration) -> String {
    crate::units::format_duration(x)
}

#[cfg(test)]
mod tests {
    use super::Status;

    /// A case's summary says its status as the store's row does: one word each.
    #[test]
    fn a_case_s_status_is_written_as_the_store_s_word() {
        for s in [
            Status::Passed,
            Status::Invalid,
            Status::Failed,
            Status::Crashed,
        ] {
            let word = serde_json::to_value(s).unwrap();
            assert_eq!(word, s.stored().name(), "{s:?}");
        }
    }
}
