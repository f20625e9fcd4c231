//! `harness`' keys: the `command` of a harness binary whose figures are gated.

use serde::Deserialize;

use super::super::Result;
use super::At;

#[derive(Deserialize, schemars::JsonSchema)]
#[schemars(rename = "HarnessKeys")]
pub(super) struct Keys {
    command: Option<Vec<String>>,
}

pub(super) fn spec(at: &At, k: Keys) -> Result<Harness> {
    at.argv("command", &k.command)?;
    at.needs(
        k.command.is_some(),
        "command = [\"…\"] (the harness binary)",
    )?;
    Ok(Harness {
        command: k.command.unwrap_or_default(),
    })
}

/// `harness`: the user's own benchmark binary, monitored, its printed metrics parsed.
#[derive(Debug, Clone)]
pub struct Harness {
    pub command: Vec<String>,
}

impl crate::suite::Own for Harness {
    fn command(&self) -> Option<&[String]> {
        Some(&self.command)
    }
}

/// A test of this kind with its least keys, for tests of every kind.
#[cfg(test)]
pub const EXAMPLE: &str = "command = [\"h\"]";
