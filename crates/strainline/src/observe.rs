//! What a run tells whoever watches it as it goes: the terminal's live view, the
//! metrics exporter (Prometheus, OTLP), a test. The engines (load, the monitor's
//! watcher, the kinds, the runner) are handed an [`Observer`] as a value and know only
//! this interface; the commands choose what stands behind it (`live::Feed`). An engine
//! given [`Quiet`] tells no one.

use std::collections::BTreeMap;
use std::sync::Arc;

use hdrhistogram::Histogram;

use crate::measure::Sample;

/// A second of load as it ended.
pub struct LoadSecond<'a> {
    /// The run's last second, cut short: for counters, not for a rate.
    pub partial: bool,
    /// What the schedule offered that second (open model).
    pub offered: Option<f64>,
    pub sent: u64,
    pub completed: u64,
    pub errors: u64,
    pub p50_us: u64,
    pub p99_us: u64,
    pub by_status: &'a BTreeMap<u16, u64>,
    pub by_error: Vec<(&'static str, u64)>,
    /// Corrected latency (from the intended send time), µs.
    pub corrected: &'a Histogram<u64>,
    /// Schedule lag, µs.
    pub lag: &'a Histogram<u64>,
}

/// Told of a run's progress; every method may be left out.
pub trait Observer: Send + Sync {
    /// Whether it draws on the terminal (a progress line would fight it).
    fn draws(&self) -> bool {
        false
    }
    /// A case begins (`of`: its place among the suite's cases).
    fn case(&self, _name: &str, _of: Option<(usize, usize)>) {}
    /// Load begins: what runs, and the open model's rate at its start.
    fn load_starting(&self, _what: &str, _offered: Option<f64>) {}
    /// A second of load ended.
    fn second(&self, _s: &LoadSecond<'_>) {}
    /// A sample of the target's process tree.
    fn sample(&self, _s: &Sample) {}
    /// A new reading of the target's thread states (thread-seconds so far, by group).
    fn threads(&self, _t: &crate::measure::threads::Tally) {}
    /// A ramp's step ended: offered and achieved rate, p99 ms, whether it held.
    fn step(&self, _offered: f64, _achieved: f64, _p99_ms: f64, _held: bool) {}
}

/// Tells no one.
pub struct Quiet;

impl Observer for Quiet {}

/// An observer to hand on (threads, watchers).
pub type Shared = Arc<dyn Observer>;

/// The observer that tells no one, shared.
pub fn quiet() -> Shared {
    Arc::new(Quiet)
}
