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
    // Each phase is judged by its seconds: the before-spike figures by those after its
    // first (at least two), the recovery by 3 in a row, the spike by at least one.
    for (key, took, least, why) in [
        ("before", spike.before, 3, "its seconds after the first are the baseline the recovery is judged against"),
        ("during", spike.during, 1, "each second is judged"),
        ("after", spike.after, 3, "a recovery is 3 seconds in a row within the band"),
    ] {
        if took < Duration::from_secs(least) {
            let scaled = if doc.time_scale == 1.0 {
                String::new()
            } else {
                format!(
                    " (with --time-scale {}, it lasts {})",
                    doc.time_scale,
                    crate::units::format_duration(took)
                )
            };
            return Err(at.refuse(
                key,
                format!("{key} must last at least {least}s{scaled}: {why}"),
            ));
        }
    }
    if spike.rate * spike.factor > limits::RATE.max {
        return Err(at.refuse(
            "factor",
            format!(
                "the spike's rate, {} × {}, is beyond the most a run may offer, {} req/s",
                spike.rate,
                spike.factor,
                limits::RATE.max
            ),
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
    /// A second's p99 is back when it is at most the largest of `1 + band` times the
    /// before-spike p99, that p99 + 1 ms and the before-spike seconds' worst
    /// (`kinds/spike.rs`).
    pub band: f64,
}

impl crate::suite::Own for Spike {}

/// A test of this kind with its least keys, for tests of every kind.
#[cfg(test)]
pub const EXAMPLE: &str = "url = \"http://127.0.0.1:{{port}}/\"\nrate = 10";

#[cfg(test)]
mod tests {
    use std::path::Path;

    fn refused(keys: &str, scale: f64) -> String {
        let text = format!(
            "[target]\ncommand = [\"t\"]\n[[test]]\nname = \"s\"\nkind = \"spike\"\n{}\n{keys}\n",
            super::EXAMPLE
        );
        crate::suite::parse(&text, Path::new("s.toml"), scale)
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn phases_too_short_to_judge_and_a_spike_past_the_most_a_run_offers_are_refused() {
        let e = refused("before = \"2s\"", 1.0);
        assert!(e.starts_with("s.toml:8:1: test 's': before must last at least 3s: its seconds after the first"), "{e}");
        let e = refused("before = \"10s\"", 0.1);
        assert!(e.contains("before must last at least 3s (with --time-scale 0.1, it lasts 1.00s)"), "{e}");
        let e = refused("during = \"1ms\"", 1.0);
        assert!(e.contains("during must last at least 1s: each second is judged"), "{e}");
        let e = refused("after = \"2s\"", 1.0);
        assert!(e.contains("after must last at least 3s"), "{e}");
        let text = "[target]\ncommand = [\"t\"]\n[[test]]\nname = \"s\"\nkind = \"spike\"\nurl = \"http://127.0.0.1:{{port}}/\"\nrate = 100000\nfactor = 1000\n";
        let e = crate::suite::parse(text, Path::new("s.toml"), 1.0).unwrap_err().to_string();
        assert!(e.contains("the spike's rate, 100000 × 1000, is beyond the most a run may offer"), "{e}");
        }

    #[test]
    fn a_target_only_reached_may_gate_the_recovery_not_the_memory_left_behind() {
        let text = |gate: &str| {
            format!(
                "[target]\nurl = \"http://127.0.0.1:1/\"\n[[test]]\nname = \"s\"\nkind = \"spike\"\n{}\ngates = [\"{gate}\"]\n",
                super::EXAMPLE
            )
        };
        for ok in ["recovery_time < 5s", "spike_p99 < 1s", "spike_error_rate < 1%", "before_p99 < 5ms"] {
            crate::suite::parse(&text(ok), Path::new("s.toml"), 1.0).unwrap();
        }
        let e = crate::suite::parse(&text("rss_left < 1MiB"), Path::new("s.toml"), 1.0)
            .unwrap_err()
            .to_string();
        assert!(e.contains("'rss_left' is a figure of the target's processes"), "{e}");
    }
}
