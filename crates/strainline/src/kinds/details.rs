//! A case's stored details, typed: what a kind writes into the store and what the
//! reports read back, as one Rust type per kind rather than JSON built in one place and
//! picked apart by pointer in another. The JSON is the schema stores already hold
//! (`details.steps`, `details.leak_fits`…); every field has a default, so a store written
//! by an older strainline still reads.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::analysis::{leak, ramp};

/// A ramp's steps and its conclusion.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RampDetails {
    pub steps: Vec<ramp::Step>,
    /// The highest offered rate of a step that held, req/s.
    pub ceiling: f64,
    pub end: Option<ramp::End>,
    pub knee: f64,
    pub limiting_factor: String,
}

/// A soak's leak fits, by what was fitted (`memory`, `fds`, `threads`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct SoakDetails {
    pub leak_fits: BTreeMap<String, leak::Leak>,
}

/// A rounds test's rounds: operations done, RSS after each settle, throughput.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RoundsDetails {
    pub ops: Vec<f64>,
    pub rss: Vec<f64>,
    pub throughput: Vec<f64>,
    /// RSS after the settle before the first round, bytes.
    pub base_rss: f64,
}

/// A crash test's iterations.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CrashDetails {
    pub iterations: Vec<CrashIteration>,
}

/// One kill and what the verify command said of it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CrashIteration {
    pub iteration: u32,
    /// Where it was killed, in words.
    pub kill: String,
    pub survived: bool,
    /// The verify command's output.
    pub verify: String,
}

/// A scale test's sizes and the growth exponent fitted to them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ScaleDetails {
    pub sizes: Vec<u64>,
    /// The fitted k of `cost = a + b·sizeᵏ`, and its 5th–95th percentile interval.
    pub exponent: f64,
    pub exponent_low: f64,
    pub exponent_high: f64,
    /// The fitted fixed cost `a`, seconds.
    pub fixed_seconds: f64,
    /// linear, superlinear or inconclusive.
    pub verdict: String,
    /// Whether the cost is CPU time (else wall time).
    pub by_cpu: bool,
    /// Each run's cost (seconds), by size.
    pub runs: Vec<Vec<f64>>,
}

/// The details of a stored case summary (its `details`), as `T`; the default when it
/// has none of `T`'s fields.
pub fn read<T: for<'de> Deserialize<'de> + Default>(summary: Option<&serde_json::Value>) -> T {
    summary
        .and_then(|s| s.get("details"))
        .and_then(|d| T::deserialize(d).ok())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Details as a store written before they were typed holds them.
    #[test]
    fn details_stored_by_an_older_release_read_back() {
        let stored = serde_json::json!({"details": {
            "steps": [{"offered": 100.0, "achieved": 99.5, "p99_ms": 2.5, "error_rate": 0.0,
                       "target_cpu": 0.4, "busiest_thread": 0.3, "generator": "valid", "ok": true}],
            "ceiling": 100.0, "end": "held", "knee": 100.0, "limiting_factor": "none",
            "log_classes": {"panic": 0},
            "leak_fits": {"memory": {"warmup_until": 3.0, "warmup_points": 3, "points": 40,
                "slope": 8192.0, "projected": 1.0e9, "p_value": 0.0001, "z": 5.1, "leak": true,
                "reason": "memory grows"}}
        }});
        let r: RampDetails = read(Some(&stored));
        assert_eq!(r.steps[0].figures.achieved, 99.5);
        assert_eq!(
            r.steps[0].figures.listen_overflows, 0,
            "a field added later defaults"
        );
        assert_eq!(r.end, Some(ramp::End::Held));
        assert_eq!(r.ceiling, 100.0);
        let s: SoakDetails = read(Some(&stored));
        assert_eq!(s.leak_fits["memory"].slope, 8192.0);
        assert!(s.leak_fits["memory"].leak);
        let none: RampDetails = read(None);
        assert!(none.steps.is_empty());
    }
}
