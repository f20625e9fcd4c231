//! `crash`'s keys: a `command` killed `iterations` times (after a time within
//! `kill_after`, or at a log line matching `kill_at_log`), `verify` run after each kill.

use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::super::doc::Doc;
use super::super::Result;
use super::At;
use crate::limits;
use crate::units::parse_duration;

#[derive(Deserialize, schemars::JsonSchema)]
#[schemars(rename = "CrashKeys")]
pub(super) struct Keys {
    command: Option<Vec<String>>,
    iterations: Option<u32>,
    #[schemars(with = "Option<String>")]
    kill_after: Option<Spanned<String>>,
    #[schemars(with = "Option<String>")]
    kill_at_log: Option<Spanned<String>>,
    verify: Option<Vec<String>>,
}

pub(super) fn spec(at: &At, k: Keys) -> Result<Crash> {
    at.range(k.iterations.map(f64::from), limits::ITERATIONS)?;
    at.argv("verify", &k.verify)?;
    at.argv("command", &k.command)?;
    at.needs(k.command.is_some(), "command = [\"…\"] (the work to kill)")?;
    at.needs(
        k.verify.is_some(),
        "verify = [\"…\"] (the check after each kill)",
    )?;
    let doc = at.doc;
    Ok(Crash {
        command: k.command.unwrap_or_default(),
        iterations: k.iterations.unwrap_or(10),
        kill_after: kill_after(doc, &k.kill_after)?,
        kill_at_log: k
            .kill_at_log
            .as_ref()
            .map(|r| doc.regex(r, "kill_at_log"))
            .transpose()?,
        verify: k.verify.unwrap_or_default(),
    })
}

/// `kill_after = "100ms..2s"` (or one time), scaled by `--time-scale`.
fn kill_after(doc: &Doc, k: &Option<Spanned<String>>) -> Result<(Duration, Duration)> {
    let Some(k) = k else {
        return Ok((
            Duration::from_millis(100).mul_f64(doc.time_scale),
            Duration::from_secs(1).mul_f64(doc.time_scale),
        ));
    };
    let v = k.get_ref();
    let (a, b) = v.split_once("..").unwrap_or((v, v));
    let at = |e: String| doc.at(k.span().start, e);
    let p = |s: &str| {
        parse_duration(s)
            .map_err(|e| format!("kill_after: {e} (write e.g. 100ms..2s)"))
            .and_then(|d| {
                limits::PAUSE.duration(d).map_err(|_| {
                    format!(
                        "kill_after = \"{v}\": out of range, give durations from 0s to {:?} (e.g. 100ms..2s)",
                        Duration::from_secs_f64(limits::LONGEST)
                    )
                })
            })
            .map_err(at)
    };
    let (lo, hi) = (p(a)?, p(b)?);
    if lo > hi {
        return Err(at(format!(
            "kill_after = \"{v}\": the range is reversed: write the earlier time first ({b}..{a})"
        )));
    }
    Ok((lo.mul_f64(doc.time_scale), hi.mul_f64(doc.time_scale)))
}

/// `crash`: run work, kill it, verify; repeat.
#[derive(Debug, Clone)]
pub struct Crash {
    pub command: Vec<String>,
    pub iterations: u32,
    /// The kill comes at a random point in this window…
    pub kill_after: (Duration, Duration),
    /// …or when the work prints a line matching this.
    pub kill_at_log: Option<regex_lite::Regex>,
    pub verify: Vec<String>,
}

impl crate::suite::Own for Crash {
    fn command(&self) -> Option<&[String]> {
        Some(&self.command)
    }

    fn texts(&self) -> Vec<(&'static str, &str)> {
        self.verify.iter().map(|a| ("a test's verify", a.as_str())).collect()
    }
}

/// A test of this kind with its least keys, for tests of every kind.
#[cfg(test)]
pub const EXAMPLE: &str = "command = [\"w\"]\nverify = [\"v\"]";
