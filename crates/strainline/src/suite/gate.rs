//! Gates: `p99 < 200ms`, `error_rate < 0.1%`, `peak_rss < 17MiB`, `leak = none`. A gate
//! names a metric, a comparison and a value with a unit; the value is converted to the
//! metric's own unit before comparing. A gate on a metric the test kind does not produce
//! is a configuration error, never a silent pass.

use crate::error::Category;
use crate::store::GateResult;
use serde::Serialize;

pub use crate::metrics::Unit;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Op {
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
}

impl Op {
    fn symbol(self) -> &'static str {
        match self {
            Op::Lt => "<",
            Op::Le => "<=",
            Op::Gt => ">",
            Op::Ge => ">=",
            Op::Eq => "=",
            Op::Ne => "!=",
        }
    }
}

/// A parsed gate.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Gate {
    pub text: String,
    pub metric: String,
    pub op: Op,
    /// The threshold in the metric's unit.
    pub value: f64,
    /// The metric's unit, to print the measured value and the threshold in.
    pub unit: Unit,
}

/// Parses `metric OP value` against the metrics the kind produces (`name`, unit).
/// An error's offset is a byte offset into `text` as given.
pub fn parse(text: &str, metrics: &[(&str, Unit)]) -> Result<Gate, (usize, String)> {
    let lead = text.len() - text.trim_start().len();
    parse_trimmed(text.trim(), metrics).map_err(|(at, e)| (lead + at, e))
}

fn parse_trimmed(t: &str, metrics: &[(&str, Unit)]) -> Result<Gate, (usize, String)> {
    // A tag's metric holds its own `=` (`tag.page=admin.latency_p95`, `tag.z=-x.…`):
    // the first `=` of `tag.NAME=`, before any `.` or space, is the tag's; the
    // operator comes after it.
    let from = t
        .strip_prefix("tag.")
        .and_then(|rest| {
            let at = rest.find(['<', '>', '=', '!', ' ', '.'])?;
            rest[at..].starts_with('=').then_some(4 + at + 1)
        })
        .unwrap_or(0);
    let op_at = t[from..]
        .find(['<', '>', '=', '!'])
        .map(|at| from + at)
        .ok_or((
            0,
            format!("'{t}' is not a gate: write METRIC < VALUE, e.g. latency_p99 < 200ms"),
        ))?;
    let metric = t[..op_at].trim().to_string();
    let rest = &t[op_at..];
    let (op, len) = [
        ("<=", Op::Le),
        (">=", Op::Ge),
        ("!=", Op::Ne),
        ("==", Op::Eq),
        ("<", Op::Lt),
        (">", Op::Gt),
        ("=", Op::Eq),
    ]
    .into_iter()
    .find(|(s, _)| rest.starts_with(s))
    .map(|(s, o)| (o, s.len()))
    .ok_or((op_at, "expected one of < <= > >= = !=".to_string()))?;
    let unit = metrics
        .iter()
        .find(|(n, _)| *n == metric)
        .or_else(|| {
            metrics
                .iter()
                .find(|(n, _)| n.contains('*') && crate::metrics::fits(n, &metric))
        })
        .map(|(_, u)| *u)
        .ok_or_else(|| {
            let names: Vec<&str> = metrics.iter().map(|(n, _)| *n).collect();
            (
                0,
                format!(
                    "unknown metric '{metric}' (this test kind produces: {})",
                    names.join(", ")
                ),
            )
        })?;
    let raw = rest[len..].trim();
    let value_at = op_at + len + (rest[len..].len() - rest[len..].trim_start().len());
    let value = value(raw, unit).map_err(|e| (value_at, e.to_string()))?;
    Ok(Gate {
        text: t.to_string(),
        metric,
        op,
        value,
        unit,
    })
}

fn value(raw: &str, unit: Unit) -> crate::error::Result<f64> {
    if unit == Unit::Finding {
        return match raw {
            "none" | "no" | "false" => Ok(0.0),
            "detected" | "yes" | "true" => Ok(1.0),
            _ => Err(crate::Error::usage(format!(
                "'{raw}': expected none or detected"
            ))),
        };
    }
    let split = raw
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == 'e' || c == '+'))
        .unwrap_or(raw.len());
    let (num, suffix) = raw.split_at(split);
    let n: f64 = num
        .parse()
        .map_err(|_| format!("'{raw}' is not a number with a unit (e.g. 200ms, 17MiB, 0.1%)"))
        .usage()?;
    let suffix = suffix.trim();
    let scale = match (unit, suffix) {
        // Zero is zero in every unit.
        (_, "") if n == 0.0 => 1.0,
        (Unit::Ms | Unit::Seconds, "") => {
            return Err(crate::Error::usage(format!(
                "'{raw}' has no unit: {raw} what? write {raw}ms or {raw}s (a time)"
            )))
        }
        (Unit::Bytes | Unit::MiB, "") => {
            return Err(crate::Error::usage(format!(
                "'{raw}' has no unit: {raw} what? write {raw}MiB, {raw}KiB or {raw}B (a size)"
            )))
        }
        (Unit::Ratio, "") => {
            return Err(crate::Error::usage(format!(
                "{} (a share)",
                crate::units::share_without_unit(raw, n)
            )))
        }
        (Unit::PercentOfCore, "") => {
            return Err(crate::Error::usage(format!(
                "'{raw}' has no unit: {raw} what? write {raw}% (of one core)"
            )))
        }
        (_, "") => 1.0,
        (Unit::Ms, "us" | "µs") => 1e-3,
        (Unit::Ms, "ms") => 1.0,
        (Unit::Ms, "s") => 1e3,
        (Unit::Seconds, "us" | "µs") => 1e-6,
        (Unit::Seconds, "ms") => 1e-3,
        (Unit::Seconds, "s") => 1.0,
        (Unit::Seconds, "m") => 60.0,
        (Unit::Seconds, "h") => 3600.0,
        (Unit::Bytes, "B") => 1.0,
        (Unit::Bytes, "KiB" | "KB" | "K") => 1024.0,
        (Unit::Bytes, "MiB" | "MB" | "M") => 1024.0 * 1024.0,
        (Unit::Bytes, "GiB" | "GB" | "G") => 1024.0 * 1024.0 * 1024.0,
        (Unit::Ratio, "%") => 0.01,
        (Unit::PercentOfCore | Unit::Plain, "%") => 1.0,
        (Unit::ReqPerSec, "req/s" | "/s") => 1.0,
        (Unit::Cores, "cores" | "core") => 1.0,
        (Unit::MiB, "MiB") => 1.0,
        (Unit::Clients, "clients") => 1.0,
        _ => {
            return Err(crate::Error::usage(format!(
                "'{suffix}' is not a unit for this metric (value '{raw}')"
            )))
        }
    };
    let v = n * scale;
    // What the metric can be: a ratio is 0 to 1, a time, rate or size is not negative,
    // and nothing is beyond 10¹⁵ of its unit (a gate at 5e300 ms judges nothing).
    let (lo, hi) = match unit {
        Unit::Ratio => (0.0, 1.0),
        Unit::Plain | Unit::Bytes => (-1e15, 1e15),
        _ => (0.0, 1e15),
    };
    if !v.is_finite() || v < lo || v > hi {
        return Err(crate::Error::usage(format!(
            "'{raw}' is out of range for this metric: give a value from {} to {} {}",
            if unit == Unit::Ratio {
                "0%".to_string()
            } else {
                crate::units::format_number(lo)
            },
            if unit == Unit::Ratio {
                "100%".to_string()
            } else {
                crate::units::format_number(hi)
            },
            if unit == Unit::Ratio {
                ""
            } else {
                unit.symbol()
            }
        )));
    }
    Ok(v)
}

impl Gate {
    pub fn holds(&self, v: f64) -> bool {
        match self.op {
            Op::Lt => v < self.value,
            Op::Le => v <= self.value,
            Op::Gt => v > self.value,
            Op::Ge => v >= self.value,
            Op::Eq => (v - self.value).abs() < 1e-12,
            Op::Ne => (v - self.value).abs() >= 1e-12,
        }
    }

    /// The gate's outcome on what a run measured (`None`: it did not measure the metric,
    /// and the gate does not hold): what the store keeps and every report shows.
    pub fn judge(&self, measured: Option<f64>) -> GateResult {
        let measured = measured.filter(|v| !v.is_nan());
        let (passed, detail) = match measured {
            Some(v) => (self.holds(v), self.describe(v)),
            None => (false, format!("{}: not measured in this run", self.text)),
        };
        GateResult {
            gate: self.text.clone(),
            metric: self.metric.clone(),
            measured,
            unit: self.unit.symbol().to_string(),
            passed,
            detail,
        }
    }

    /// The gate in words with the measured value, both in the metric's unit, for
    /// reports: `latency_p99 < 50ms (measured 62.9 ms, needs < 50.0 ms)`.
    pub fn describe(&self, v: f64) -> String {
        let unit = self.unit.symbol();
        format!(
            "{} (measured {}, needs {} {})",
            self.text,
            crate::units::format_value(v, unit),
            self.op.symbol(),
            crate::units::format_value(self.value, unit)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const M: &[(&str, Unit)] = &[
        ("latency_p99", Unit::Ms),
        ("error_rate", Unit::Ratio),
        ("peak_rss", Unit::Bytes),
        ("leak", Unit::Finding),
        ("cpu_per_op", Unit::Ms),
    ];

    #[test]
    fn converts_units_to_the_metric_unit() {
        let g = parse("latency_p99 < 0.2s", M).unwrap();
        assert_eq!((g.op, g.value), (Op::Lt, 200.0));
        assert_eq!(parse("error_rate < 0.1%", M).unwrap().value, 0.001);
        assert_eq!(
            parse("peak_rss <= 17MiB", M).unwrap().value,
            17.0 * 1048576.0
        );
        let g = parse("leak = none", M).unwrap();
        assert!(g.holds(0.0) && !g.holds(1.0));
        assert!(parse("cpu_per_op < 2ms", M).unwrap().holds(1.5));
    }

    #[test]
    fn a_number_without_its_unit_is_refused_with_the_fix() {
        for (gate, fix) in [
            ("latency_p99 < 200", "write 200ms or 200s"),
            ("peak_rss < 17", "write 17MiB, 17KiB or 17B"),
            ("error_rate < 1", "write 1%"),
            (
                "error_rate < 0.001",
                "write 0.001% (or 0.1% if 0.001 was a fraction)",
            ),
        ] {
            let e = parse(gate, M).unwrap_err();
            assert!(
                e.1.contains("has no unit") && e.1.contains(fix),
                "{gate}: {}",
                e.1
            );
        }
        // Zero is zero in any unit.
        assert_eq!(parse("error_rate <= 0", M).unwrap().value, 0.0);
    }

    #[test]
    fn unknown_metrics_and_units_are_errors() {
        let e = parse("p99 < 200ms", M).unwrap_err();
        assert!(
            e.1.contains("unknown metric 'p99' (this test kind produces: latency_p99"),
            "{}",
            e.1
        );
        let e = parse("peak_rss < 17 parsecs", M).unwrap_err();
        assert_eq!(e.0, 11);
        assert!(e.1.contains("not a unit"), "{}", e.1);
        assert!(parse("latency_p99 ~ 3", M).is_err());
    }

    #[test]
    fn a_tags_own_equals_sign_is_part_of_its_metric() {
        let m: &[(&str, Unit)] = &[
            ("tag.*.latency_p95", Unit::Ms),
            ("tag.*.error_rate", Unit::Ratio),
        ];
        for (text, metric, op) in [
            (
                "tag.page=admin.latency_p95 < 300ms",
                "tag.page=admin.latency_p95",
                Op::Lt,
            ),
            (
                "tag.page=admin.latency_p95<=300ms",
                "tag.page=admin.latency_p95",
                Op::Le,
            ),
            (
                "tag.page=admin.error_rate = 0%",
                "tag.page=admin.error_rate",
                Op::Eq,
            ),
            (
                "tag.page=admin.error_rate==0%",
                "tag.page=admin.error_rate",
                Op::Eq,
            ),
            ("tag.z=-x.latency_p95 < 1s", "tag.z=-x.latency_p95", Op::Lt),
            ("tag.k=:/_.error_rate<=1%", "tag.k=:/_.error_rate", Op::Le),
        ] {
            let g = parse(text, m).unwrap_or_else(|e| panic!("{text}: {e:?}"));
            assert_eq!((g.metric.as_str(), g.op), (metric, op), "{text}");
        }
        assert!(parse("tag.page = 3", m).is_err());
    }
}
