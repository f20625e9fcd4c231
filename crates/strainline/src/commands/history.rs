//! `strainline history --metric M`: one metric of one case across the stored runs, with
//! its change points ([`crate::report::history`]).

use crate::analysis::changepoint::Params;
use crate::commands::flags::parse_probability;
use crate::error::Category;
use crate::exit;
use crate::report::history::{one, write_text, Query};
use crate::store::{Location, Store};
use clap::Args;
use std::path::PathBuf;

#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  strainline history --metric cpu_per_op\n  \
                  strainline history --case 'bench[profile=v1]' --metric latency_p99 --since 2026-11-01\n\n\
                  Change points: E-Divisive means with a Student's t-test, as Apache Otava \
                  (window 50, p < 0.001 by default; see docs/compare.md).")]
pub struct HistoryArgs {
    /// The metric to follow (e.g. cpu_per_op, peak_rss, latency_p99).
    #[arg(long)]
    pub metric: String,
    /// The case (its name without the repetition suffix); needed when several cases
    /// have the metric.
    #[arg(long)]
    pub case: Option<String>,
    /// Only runs of this suite (its name).
    #[arg(long)]
    pub suite: Option<String>,
    /// Only runs with this label.
    #[arg(long)]
    pub label: Option<String>,
    /// Only runs started at or after this date or time (2026-11-01, or RFC 3339).
    #[arg(long, value_name = "DATE", value_parser = parse_since)]
    pub since: Option<String>,
    /// Significance level for a change point.
    #[arg(long, value_name = "P", default_value = "0.001", value_parser = parse_probability)]
    pub max_p: f64,
    /// Points per sliding window of the split step.
    #[arg(long, value_name = "N", default_value = "50")]
    pub window: usize,
    /// Smallest change worth reporting, relative (e.g. 1% or 0.01): a significant shift
    /// of 0.2% in a stored metric is real to a t-test and useless to a reader.
    #[arg(long, value_name = "PCT", default_value = "1%", value_parser = parse_min_change)]
    pub min_change: f64,
    /// Write the series and change points as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

/// A date (`2026-11-01`) or an RFC 3339 time (`2026-11-01T08:00:00Z`), as the store
/// compares them.
fn parse_since(s: &str) -> crate::error::Result<String> {
    if crate::clock::is_date_or_time(s) {
        Ok(s.replacen(' ', "T", 1))
    } else {
        Err(crate::Error::usage(format!(
            "'{s}' is not a date: give YYYY-MM-DD (2026-11-01) or an RFC 3339 time (2026-11-01T08:00:00Z)"
        )))
    }
}

fn parse_min_change(s: &str) -> crate::error::Result<f64> {
    crate::units::parse_fraction(s)
}

pub fn run(location: &Location, args: HistoryArgs) -> crate::error::Result<i32> {
    let store = Store::open(location).usage()?;
    let history = one(
        &store,
        &Query {
            metric: Some(args.metric.clone()),
            case: args.case.clone(),
            suite: args.suite.clone(),
            suiteless_kind: None,
            label: args.label.clone(),
            since: args.since.clone(),
            last: None,
            params: Params {
                window: args.window.max(3),
                max_p: args.max_p,
                min_magnitude: args.min_change,
            },
        },
    )?;
    let mut out = crate::units::Printable(std::io::stdout().lock());
    super::quiet_pipe(write_text(&mut out, &history))?;
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&history)?)
            .map_err(|e| crate::error::writing(path, e))?;
    }
    Ok(exit::PASSED)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_takes_real_dates_and_times_only() {
        for ok in [
            "2026-11-01",
            "2024-02-29",
            "2026-11-01T08:00:00Z",
            "2026-11-01 23:59",
            "2026-12-31T23:59:60+01:00",
        ] {
            assert!(parse_since(ok).is_ok(), "{ok}");
        }
        for bad in [
            "2026-02-30",
            "2025-02-29",
            "2026-04-31",
            "2026-13-01",
            "2026-11-01T24:00",
            "2026-11-01T08:60",
            "2026-11-01T08:00:61Z",
            "20261101",
            "2026-11-01T08",
            "yesterday",
        ] {
            assert!(parse_since(bad).is_err(), "{bad}");
        }
    }
}
