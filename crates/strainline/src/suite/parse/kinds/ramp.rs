//! `ramp`'s keys: offered load from `start` by `step` every `step_duration`, until the
//! SLO or the error rate breaks, or `max_steps`.

use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::super::super::Workload;
use super::super::Result;
use super::{share, At};
use crate::limits;

#[derive(Deserialize, schemars::JsonSchema)]
#[schemars(rename = "RampKeys")]
pub(super) struct Keys {
    start: Option<f64>,
    step: Option<f64>,
    #[schemars(with = "Option<String>")]
    step_duration: Option<Spanned<String>>,
    max_steps: Option<u32>,
    #[schemars(with = "Option<String>")]
    slo_p99: Option<Spanned<String>>,
    #[schemars(with = "Option<serde_json::Value>")]
    max_error_rate: Option<Spanned<toml::Value>>,
}

pub(super) fn spec(at: &At, k: Keys, workload: Workload) -> Result<Ramp> {
    at.range(k.start, limits::RAMP_START)?;
    at.range(k.step, limits::RAMP_STEP)?;
    at.range(k.max_steps.map(f64::from), limits::MAX_STEPS)?;
    let doc = at.doc;
    Ok(Ramp {
        workload,
        start: k.start.unwrap_or(100.0),
        step: k.step.unwrap_or(100.0),
        step_duration: doc.opt_dur(
            &k.step_duration,
            "step_duration",
            Duration::from_secs(5),
            true,
        )?,
        max_steps: k.max_steps.unwrap_or(50),
        slo_p99: k
            .slo_p99
            .as_ref()
            .map(|s| doc.dur(s, "slo_p99", false))
            .transpose()?,
        max_error_rate: k
            .max_error_rate
            .as_ref()
            .map(|v| share(doc, v, "max_error_rate", 1.0))
            .transpose()?
            .unwrap_or(0.01),
    })
}

/// `ramp`: offered load from `start` by `step` every `step_duration` until it breaks.
#[derive(Debug, Clone)]
pub struct Ramp {
    pub workload: Workload,
    pub start: f64,
    pub step: f64,
    pub step_duration: Duration,
    pub max_steps: u32,
    pub slo_p99: Option<Duration>,
    pub max_error_rate: f64,
}

impl crate::suite::Own for Ramp {}

/// A test of this kind with its least keys, for tests of every kind.
#[cfg(test)]
pub const EXAMPLE: &str = "url = \"http://127.0.0.1:{{port}}/\"";
