//! `scale`'s keys: a `command` run at each of `sizes` (`{{size}}` in its argv), to fit
//! how its cost grows.

use serde::Deserialize;

use super::super::Result;
use super::At;
use crate::limits;

#[derive(Deserialize, schemars::JsonSchema)]
#[schemars(rename = "ScaleKeys")]
pub(super) struct Keys {
    command: Option<Vec<String>>,
    #[serde(default)]
    sizes: Vec<u64>,
}

pub(super) fn spec(at: &At, k: Keys) -> Result<Scale> {
    at.argv("command", &k.command)?;
    for &size in &k.sizes {
        at.range(Some(size as f64), limits::SIZE)?;
    }
    let distinct: std::collections::BTreeSet<u64> = k.sizes.iter().copied().collect();
    if !k.sizes.is_empty() && distinct.len() < 2 {
        return Err(at.refuse(
            "sizes",
            "sizes need at least two different values to fit how cost grows",
        ));
    }
    at.needs(k.command.is_some(), "command = [\"…\", \"{{size}}\"]")?;
    at.needs(
        k.sizes.len() >= 3,
        "sizes = [N1, N2, N3, …] (at least three)",
    )?;
    Ok(Scale {
        command: k.command.unwrap_or_default(),
        sizes: k.sizes,
    })
}

/// `scale`: the same command at sizes N1..Nk; the cost's growth exponent.
#[derive(Debug, Clone)]
pub struct Scale {
    pub command: Vec<String>,
    pub sizes: Vec<u64>,
}

impl crate::suite::Own for Scale {
    fn command(&self) -> Option<&[String]> {
        Some(&self.command)
    }
}

/// A test of this kind with its least keys, for tests of every kind.
#[cfg(test)]
pub const EXAMPLE: &str = "command = [\"w\"]\nsizes = [1, 2, 3]";
