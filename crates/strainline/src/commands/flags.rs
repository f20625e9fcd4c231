//! Flags and value parsers several commands share: durations, pids, `NAME=VALUE`
//! variables, tolerance bands, probabilities, and the live figures' exports. A value is
//! checked here, so that bad input is refused before any work starts.

use clap::Args;

use crate::error::Category;
use crate::limits;
use std::time::Duration;

pub(crate) fn parse_duration(s: &str) -> crate::error::Result<Duration> {
    let d = crate::units::parse_duration(s).usage()?;
    if d.is_zero() {
        return Err(crate::Error::usage(format!(
            "'{s}' is zero; give a positive duration such as 10ms"
        )));
    }
    limits::DURATION
        .duration(d)
        .map_err(|_| crate::Error::usage(format!("'{s}': give a duration from 1ms to 30 days")))
}

/// A number within `limit` (see `limits`), as the type the flag takes.
pub(crate) fn in_range<T: std::str::FromStr>(
    s: &str,
    limit: limits::Limit,
) -> crate::error::Result<T> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| crate::Error::usage(format!("'{s}' is not a number")))?;
    limit.check(v)?;
    s.trim()
        .parse::<T>()
        .map_err(|_| crate::Error::usage(format!("'{s}': give a whole number")))
}

/// A pid the kernel could have given (above 0 and within `pid_t`): never one that
/// `kill` would read as "every process".
pub(crate) fn parse_pid(s: &str) -> crate::error::Result<u32> {
    in_range(s, limits::PID.named("--pid"))
}

pub(crate) fn parse_var(s: &str) -> crate::error::Result<(String, String)> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.to_string())),
        _ => Err(crate::Error::usage(format!(
            "'{s}' is not NAME=VALUE (e.g. --var profile=v2)"
        ))),
    }
}

/// A tolerance band: `METRIC=PCT`, e.g. `latency_p99=30%`, or `default=10%`.
pub(crate) fn parse_band(s: &str) -> crate::error::Result<(String, f64)> {
    let (metric, pct) = s
        .split_once('=')
        .ok_or_else(|| format!("'{s}' is not METRIC=PERCENT (e.g. latency_p99=30%)"))
        .usage()?;
    Ok((
        metric.trim().to_string(),
        crate::units::parse_fraction(pct)?,
    ))
}

pub(crate) fn parse_probability(s: &str) -> crate::error::Result<f64> {
    match s.parse::<f64>() {
        Ok(p) if p > 0.0 && p < 1.0 => Ok(p),
        _ => Err(crate::Error::usage(format!(
            "'{s}' is not a probability between 0 and 1 (e.g. 0.05)"
        ))),
    }
}

/// Live figures for Prometheus and OpenTelemetry (load, run, monitor).
#[derive(Debug, Args, Default, Clone)]
pub struct ExportArgs {
    /// Serve the live figures at http://ADDR/metrics in the Prometheus text format
    /// (requests by status, latency histogram, offered and achieved rate, the target's
    /// RSS, CPU, threads and FDs, the generator's CPU and lag), e.g. 127.0.0.1:9464.
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<String>,
    /// Push the same figures over OTLP/HTTP (JSON) every 5 s and at the end, e.g.
    /// http://127.0.0.1:4318/v1/metrics.
    #[arg(long, value_name = "URL")]
    pub otlp: Option<String>,
}

impl ExportArgs {
    pub fn targets(&self) -> crate::live::export::Targets {
        crate::live::export::Targets {
            listen: self.metrics_listen.clone(),
            otlp: self.otlp.clone(),
        }
    }
}
