//! `soak`'s keys: a constant `rate` for long, a leak budget over a horizon, clients
//! that come and go, the RAM its capacity figure is for.

use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::super::super::Workload;
use super::super::Result;
use super::{leak_budget, size, At};
use crate::limits;

#[derive(Deserialize, schemars::JsonSchema)]
#[schemars(rename = "SoakKeys")]
pub(super) struct Keys {
    rate: Option<f64>,
    #[schemars(with = "Option<String>")]
    duration: Option<Spanned<String>>,
    #[schemars(with = "Option<String>")]
    leak_budget: Option<Spanned<String>>,
    #[schemars(with = "Option<String>")]
    horizon: Option<Spanned<String>>,
    clients: Option<u64>,
    #[schemars(with = "Option<String>")]
    client_period: Option<Spanned<String>>,
    #[schemars(with = "Option<String>")]
    ram: Option<Spanned<String>>,
}

pub(super) fn spec(at: &At, k: Keys, workload: Workload) -> Result<Soak> {
    at.range(k.rate, limits::RATE)?;
    at.range(k.clients.map(|v| v as f64), limits::CLIENTS)?;
    let doc = at.doc;
    Ok(Soak {
        workload,
        rate: k.rate.unwrap_or(100.0),
        duration: doc.opt_dur(&k.duration, "duration", Duration::from_secs(10), true)?,
        leak_budget: leak_budget(doc, &k.leak_budget)?,
        horizon: doc.opt_dur(&k.horizon, "horizon", Duration::from_secs(24 * 3600), false)?,
        clients: k.clients,
        client_period: k
            .client_period
            .as_ref()
            .map(|s| doc.dur(s, "client_period", false))
            .transpose()?,
        ram: match &k.ram {
            Some(b) => Some(size(doc, b, limits::RAM, "4GiB")?),
            None => None,
        },
    })
}

/// `soak`: constant load for long; leaks, errors, capacity.
#[derive(Debug, Clone)]
pub struct Soak {
    pub workload: Workload,
    pub rate: f64,
    pub duration: Duration,
    /// Bytes a leak may grow by over the horizon.
    pub leak_budget: f64,
    pub horizon: Duration,
    pub clients: Option<u64>,
    pub client_period: Option<Duration>,
    /// Usable RAM for the capacity figure, bytes (default: what the host has available).
    pub ram: Option<f64>,
}

impl crate::suite::Own for Soak {}

/// A test of this kind with its least keys, for tests of every kind.
#[cfg(test)]
pub const EXAMPLE: &str = "url = \"http://127.0.0.1:{{port}}/\"";
