//! `rounds`' keys: `rounds` of `ops` operations, each followed by a quiet `settle` (and
//! a request to `quiesce_url`), within a leak budget.

use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::super::super::Workload;
use super::super::urls::{url_shape, HTTP_SCHEMES};
use super::super::Result;
use super::{leak_budget, At};
use crate::limits;

#[derive(Deserialize, schemars::JsonSchema)]
#[schemars(rename = "RoundsKeys")]
pub(super) struct Keys {
    rounds: Option<u32>,
    ops: Option<u64>,
    quiesce_url: Option<String>,
    #[schemars(with = "Option<String>")]
    settle: Option<Spanned<String>>,
    #[schemars(with = "Option<String>")]
    leak_budget: Option<Spanned<String>>,
}

pub(super) fn spec(at: &At, k: Keys, workload: Workload) -> Result<Rounds> {
    at.range(k.rounds.map(f64::from), limits::ROUNDS)?;
    at.range(k.ops.map(|v| v as f64), limits::OPS)?;
    // The quiesce request is HTTP, whatever the workload speaks.
    if let Some(url) = &k.quiesce_url {
        url_shape(url, HTTP_SCHEMES).map_err(|e| {
            at.refuse(
                "quiesce_url",
                format!("quiesce_url '{}': {e}", crate::units::one_line(url)),
            )
        })?;
    }
    let doc = at.doc;
    Ok(Rounds {
        workload,
        rounds: k.rounds.unwrap_or(10),
        ops: k.ops.unwrap_or(1000),
        quiesce_url: k.quiesce_url,
        settle: doc.opt_dur(&k.settle, "settle", Duration::from_millis(500), true)?,
        leak_budget: leak_budget(doc, &k.leak_budget)?,
    })
}

/// `rounds`: N rounds of M operations, the memory retained after each.
#[derive(Debug, Clone)]
pub struct Rounds {
    pub workload: Workload,
    pub rounds: u32,
    pub ops: u64,
    pub quiesce_url: Option<String>,
    pub settle: Duration,
    pub leak_budget: f64,
}

impl crate::suite::Own for Rounds {
    fn texts(&self) -> Vec<(&'static str, &str)> {
        self.quiesce_url
            .as_deref()
            .map(|u| ("a test's quiesce_url", u))
            .into_iter()
            .collect()
    }
}

/// A test of this kind with its least keys, for tests of every kind.
#[cfg(test)]
pub const EXAMPLE: &str = "url = \"http://127.0.0.1:{{port}}/\"";
