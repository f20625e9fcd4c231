//! `bench`'s keys: a fixed load, open at `rate` (closed without one), for `duration`.

use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::super::super::Workload;
use super::super::Result;
use super::At;
use crate::limits;

#[derive(Deserialize, schemars::JsonSchema)]
#[schemars(rename = "BenchKeys")]
pub(super) struct Keys {
    rate: Option<f64>,
    #[schemars(with = "Option<String>")]
    duration: Option<Spanned<String>>,
}

pub(super) fn spec(at: &At, k: Keys, workload: Workload) -> Result<Bench> {
    at.range(k.rate, limits::RATE)?;
    Ok(Bench {
        workload,
        rate: k.rate,
        duration: at
            .doc
            .opt_dur(&k.duration, "duration", Duration::from_secs(10), true)?,
    })
}

/// `bench`: a fixed load (open at `rate`, else closed), repeated.
#[derive(Debug, Clone)]
pub struct Bench {
    pub workload: Workload,
    pub rate: Option<f64>,
    pub duration: Duration,
}

impl crate::suite::Own for Bench {}

/// A test of this kind with its least keys, for tests of every kind.
#[cfg(test)]
pub const EXAMPLE: &str = "url = \"http://127.0.0.1:{{port}}/\"";
