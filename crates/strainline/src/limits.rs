//! The allowed range of every number a user gives strainline, in one place: the
//! command line and the suite parser check the same limits and say the same thing
//! (`rate = 0: out of range, give a number from 0.001 to 10000000 req/s`). A value
//! outside its range is refused before anything runs — zero, negative, NaN and infinite
//! values included — instead of panicking a worker, busy-spinning a core or passing a
//! test that measured nothing. The caps are far above what one machine can use; docs/
//! suites.md lists them.

use std::time::Duration;

/// A closed range of a number, with the unit it is in.
#[derive(Debug, Clone, Copy)]
pub struct Limit {
    pub key: &'static str,
    pub min: f64,
    pub max: f64,
    pub unit: &'static str,
}

const fn limit(key: &'static str, min: f64, max: f64, unit: &'static str) -> Limit {
    Limit {
        key,
        min,
        max,
        unit,
    }
}

pub const RATE: Limit = limit("rate", 0.001, 10_000_000.0, "req/s");
pub const RAMP_START: Limit = limit("start", 0.001, 10_000_000.0, "req/s");
pub const RAMP_STEP: Limit = limit("step", 0.001, 10_000_000.0, "req/s");
pub const CONNECTIONS: Limit = limit("connections", 1.0, 100_000.0, "connections");
pub const STREAMS: Limit = limit("streams", 1.0, 1000.0, "streams per connection");
pub const THREADS: Limit = limit("threads", 1.0, 256.0, "threads");
pub const REQUESTS: Limit = limit("requests", 1.0, 1e12, "requests");
pub const BODY_BYTES: Limit = limit("body_bytes", 0.0, 64.0 * 1048576.0, "bytes");
pub const MAX_STEPS: Limit = limit("max_steps", 1.0, 10_000.0, "steps");
pub const CLIENTS: Limit = limit("clients", 1.0, 1_000_000.0, "clients");
pub const ROUNDS: Limit = limit("rounds", 2.0, 100_000.0, "rounds");
pub const OPS: Limit = limit("ops", 1.0, 1e9, "operations per round");
pub const ITERATIONS: Limit = limit("iterations", 1.0, 100_000.0, "iterations");
pub const SIZE: Limit = limit("sizes", 1.0, 1e15, "units");
pub const REPEAT: Limit = limit("repeat", 1.0, 1000.0, "repetitions");
/// Steps of one scenario: each keeps its own latency histograms in every worker (100,000
/// steps took 3.8 GB); `workload scenario` writes at most 2,001 (its routes and "other").
pub const SCENARIO_STEPS: usize = 2048;

/// The most metrics of its own (`[metrics]`) a scenario declares.
pub const SCENARIO_METRICS: usize = 64;
/// How far a scenario's `[arrivals] scale` multiplies its counts or rate.
pub const SCALE: Limit = limit(
    "scale",
    0.0001,
    10_000.0,
    "(a factor: 2.0 is twice the rate)",
);
pub const TIME_SCALE: Limit = limit("time_scale", 0.0001, 1000.0, "(a factor)");
pub const PID: Limit = limit("pid", 1.0, i32::MAX as f64, "(a process id)");
pub const TOP: Limit = limit("top", 1.0, 1000.0, "processes");
/// A machine's memory, and a leak's budget, bytes (1 MiB to 64 TiB; a budget may be 0).
pub const RAM: Limit = limit("ram", 1048576.0, 70368744177664.0, "bytes");
pub const LEAK_BUDGET: Limit = limit("leak_budget", 0.0, 70368744177664.0, "bytes");
/// The most cases one test may expand to (its matrix's combinations × repeat).
pub const MAX_CASES: f64 = 10_000.0;

/// The longest duration anything may be given: 30 days.
pub const LONGEST: f64 = 30.0 * 86400.0;
pub const DURATION: Limit = limit("duration", 0.001, LONGEST, "s");
/// Sampling faster than a millisecond measures the sampler.
pub const INTERVAL: Limit = limit("interval", 0.001, 3600.0, "s");
pub const TIMEOUT: Limit = limit("timeout", 0.001, 3600.0, "s");
/// A scenario step's period: one client sending more often than once a millisecond is
/// a loop, not a device (`every = "1ns"` ran unthrottled).
pub const PERIOD: Limit = limit("every", 0.001, LONGEST, "s");
/// Durations that may be zero (a settle time, a think time).
pub const PAUSE: Limit = limit("pause", 0.0, LONGEST, "s");

impl Limit {
    /// `v`, if it is within the range; else what to write instead.
    pub fn check(&self, v: f64) -> crate::error::Result<f64> {
        if v.is_finite() && v >= self.min && v <= self.max {
            return Ok(v);
        }
        Err(crate::Error::usage(format!(
            "{} = {}: out of range, give a number from {} to {} {}",
            self.key,
            Self::show(v),
            Self::show(self.min),
            Self::show(self.max),
            self.unit
        )))
    }

    /// The same range under another key (a flag's name, a suite key).
    pub fn named(self, key: &'static str) -> Limit {
        Limit { key, ..self }
    }

    /// A duration, in seconds against the range.
    pub fn duration(&self, d: Duration) -> crate::error::Result<Duration> {
        self.check(d.as_secs_f64()).map(|_| d)
    }

    fn show(x: f64) -> String {
        if x.is_finite() && x.abs() >= 1e16 {
            format!("{x:e}")
        } else if x >= 1e6 && x.fract() == 0.0 {
            format!("{x:.0}")
        } else {
            format!("{x}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_negative_nan_and_infinite_values_are_refused_with_the_range() {
        for bad in [0.0, -5.0, f64::NAN, f64::INFINITY, 1e12] {
            let e = RATE.check(bad).unwrap_err().to_string();
            assert!(e.contains("from 0.001 to 10000000 req/s"), "{bad}: {e}");
        }
        assert_eq!(RATE.check(1000.0).ok(), Some(1000.0));
        assert!(INTERVAL.duration(Duration::ZERO).is_err());
        assert!(PAUSE.duration(Duration::ZERO).is_ok());
        assert!(ROUNDS.check(1.0).is_err());
    }
}
