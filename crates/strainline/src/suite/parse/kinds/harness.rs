//! `harness`' keys: the `command` of a harness binary whose figures are gated.

use serde::Deserialize;

use super::super::super::Harness;
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
