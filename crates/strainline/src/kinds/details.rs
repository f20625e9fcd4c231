//! A case's stored details, typed: what a kind writes into the store ([`Details`]: its
//! kind's own and what the run adds beside them) and what the reports read back, one
//! Rust type per kind rather than JSON built in one place and picked apart by pointer in
//! another. The JSON is the schema stores already hold (`details.steps`,
//! `details.leak_fits`…); every field has a default, so a store written by an older
//! strainline still reads.

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

/// A case's details as a kind returns them and the store keeps them: its kind's own
/// (`Of`), and what the run adds beside them. Written as one JSON object of all their
/// keys (`details.steps`, `details.threads`…); [`or_null`] writes an empty one as `null`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Details {
    #[serde(flatten)]
    pub of: Option<Of>,
    /// Lines of the target's output in each `[logs]` class.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_classes: Option<BTreeMap<String, u64>>,
    /// The target's thread states over a bench or a soak.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub threads: Option<crate::measure::threads::Breakdown>,
    /// A scenario's steps and checks, for the reports' tables.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scenario_steps: Option<Vec<crate::load::summary::StepSummary>>,
    /// What a test that `expect`s to fail caught.
    #[serde(flatten)]
    pub caught: Option<Caught>,
    /// Each agent's part of the case's last load run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agents: Option<Vec<crate::load::summary::AgentSummary>>,
}

/// A kind's own details.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum Of {
    Ramp(RampDetails),
    Soak(SoakDetails),
    Rounds(RoundsDetails),
    Crash(CrashDetails),
    Scale(ScaleDetails),
}

/// `expect = "failed"` and what was caught: the failure's reasons.
#[derive(Debug, Clone, Serialize)]
pub struct Caught {
    expected: &'static str,
    caught: Vec<String>,
}

impl Caught {
    /// An expected failure, caught for `reasons`.
    pub fn failure(reasons: Vec<String>) -> Caught {
        Caught {
            expected: "failed",
            caught: reasons,
        }
    }
}

impl Details {
    /// Whether it holds nothing (stored as `null`).
    pub fn is_empty(&self) -> bool {
        let Details {
            of,
            log_classes,
            threads,
            scenario_steps,
            caught,
            agents,
        } = self;
        of.is_none()
            && log_classes.is_none()
            && threads.is_none()
            && scenario_steps.is_none()
            && caught.is_none()
            && agents.is_none()
    }
}

/// Writes details, or `null` when they hold nothing (as stores have always had them).
pub fn or_null<S: serde::Serializer>(d: &Details, s: S) -> Result<S::Ok, S::Error> {
    if d.is_empty() {
        s.serialize_none()
    } else {
        d.serialize(s)
    }
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

    /// Details are written as one object of the kind's keys and the run's, as they
    /// were when built as JSON, and read back by the kind's type; none are `null`.
    #[test]
    fn details_are_one_object_and_read_back() {
        let d = Details {
            of: Some(Of::Scale(ScaleDetails {
                sizes: vec![1, 2, 4],
                exponent: 1.02,
                verdict: "linear".into(),
                ..ScaleDetails::default()
            })),
            log_classes: Some(BTreeMap::from([("panic".to_string(), 2)])),
            caught: Some(Caught::failure(vec!["cost grows".into()])),
            ..Details::default()
        };
        // As a case's summary is stored: empty details are `null`.
        let mut r = super::super::CaseResult::new();
        let empty = serde_json::to_value(&r).unwrap();
        assert_eq!(empty["details"], serde_json::Value::Null);
        r.details = d;
        let summary = serde_json::to_value(&r).unwrap();
        let v = &summary["details"];
        assert_eq!(v["sizes"], serde_json::json!([1, 2, 4]));
        assert_eq!(v["log_classes"]["panic"], 2);
        assert_eq!(v["expected"], "failed");
        assert_eq!(v["caught"][0], "cost grows");
        assert!(v.get("threads").is_none() && v.get("agents").is_none());
        let back: ScaleDetails = read(Some(&summary));
        assert_eq!((back.exponent, back.verdict.as_str()), (1.02, "linear"));
    }
}
