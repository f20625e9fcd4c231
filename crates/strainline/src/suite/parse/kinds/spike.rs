//! `spike`'s keys: a base `rate` for `before`, `factor` times it for `during`, the base
//! again for `after` (the longest a recovery may take), recovered when each second's p99
//! is back within `band` of the before-spike p99.

use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::super::super::Workload;
use super::super::Result;
use super::{share, At};
use crate::limits::{self, Limit};

/// How many times the base rate the spike may offer.
const FACTOR: Limit = Limit {
    key: "factor",
    min: 1.01,
    max: 1000.0,
    unit: "times the base rate",
};

#[derive(Deserialize, schemars::JsonSchema)]
#[schemars(rename = "SpikeKeys")]
pub(super) struct Keys {
    rate: Option<f64>,
    factor: Option<f64>,
    #[schemars(with = "Option<String>")]
    before: Option<Spanned<String>>,
    #[schemars(with = "Option<String>")]
    during: Option<Spanned<String>>,
    #[schemars(with = "Option<String>")]
    after: Option<Spanned<String>>,
    #[schemars(with = "Option<serde_json::Value>")]
    band: Option<Spanned<toml::Value>>,
}

pub(super) fn spec(at: &At, k: Keys, workload: Workload) -> Result<Spike> {
    at.needs(
        k.rate.is_some(),
        "rate = N (the base rate, req/s, that the spike multiplies)",
    )?;
    at.needs(
        workload.scenario.is_none(),
        "a url (a spike offers requests at a rate; a scenario's clients set their own pace)",
    )?;
    at.range(k.rate, limits::RATE)?;
    at.range(k.factor, FACTOR)?;
    let doc = at.doc;
    let spike = Spike {
        workload,
        rate: k.rate.unwrap_or_default(),
        factor: k.factor.unwrap_or(5.0),
        before: doc.opt_dur(&k.before, "before", Duration::from_secs(10), true)?,
        during: doc.opt_dur(&k.during, "during", Duration::from_secs(10), true)?,
        after: doc.opt_dur(&k.after, "after", Duration::from_secs(30), true)?,
        band: k
            .band
            .as_ref()
            .map(|v| share(doc, v, "band", 10.0))
            .transpose()?
            .unwrap_or(0.5),
    };
    // The before-spike figures are read from its whole seconds after the first.
    if spike.before < Duration::from_secs(2) {
        return Err(at.refuse(
            "before",
            "the base load before the spike must last at least 2s (its seconds are the baseline the recovery is judged against)",
        ));
    }
    if spike.after < Duration::from_secs(3) {
        return Err(at.refuse(
            "after",
            "the base load after the spike must last at least 3s (a recovery is 3 seconds in a row within the band)",
        ));
    }
    Ok(spike)
}

/// `spike`: a base rate, a jump to `factor` times it for a while, and back; how long the
/// target takes to recover.
#[derive(Debug, Clone)]
pub struct Spike {
    pub workload: Workload,
    /// The base rate, req/s.
    pub rate: f64,
    pub factor: f64,
    pub before: Duration,
    pub during: Duration,
    /// The base rate after the spike: the longest a recovery may take.
    pub after: Duration,
    /// A second's p99 is back when it is at most `1 + band` times the before-spike p99.
    pub band: f64,
}

impl crate::suite::Own for Spike {}

/// A test of this kind with its least keys, for tests of every kind.
#[cfg(test)]
pub const EXAMPLE: &str = "url = \"http://127.0.0.1:{{port}}/\"\nrate = 10";
