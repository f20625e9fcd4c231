//! A scenario's own metrics (`[metrics] cart_items = "trend"`), k6's custom metrics:
//! a **counter** adds what it is fed, a **trend** keeps its distribution, a **rate** the
//! share of its values that are true, a **gauge** its last value and its extremes. Fed
//! by an extraction (`extract.items = { json = "$.count", metric = "cart_items" }`) or by
//! the script (`strainline.metric("cart_items", n)`), kept per worker over the whole run
//! and merged exactly across threads and agents: values in thousandths, their count and
//! sum as integers, a trend's distribution in an HDR histogram (3 significant digits).

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::recorder::hdr;

/// What a metric keeps of its values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Counter,
    Trend,
    Rate,
    Gauge,
}

impl Kind {
    pub const NAMES: &'static str = "counter, trend, rate or gauge";

    pub fn parse(s: &str) -> Option<Kind> {
        match s {
            "counter" => Some(Kind::Counter),
            "trend" => Some(Kind::Trend),
            "rate" => Some(Kind::Rate),
            "gauge" => Some(Kind::Gauge),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Trend => "trend",
            Kind::Rate => "rate",
            Kind::Gauge => "gauge",
        }
    }

    /// Its value from a text an extraction took: a number (a counter's, trend's or
    /// gauge's, from 0 to [`MOST`]); for a rate, `true` or a number but 0 is true,
    /// `false` and 0 false. None: not a value of this metric.
    pub fn value_of(self, text: &str) -> Option<f64> {
        let t = text.trim();
        if self == Kind::Rate {
            return match t {
                "true" => Some(1.0),
                "false" => Some(0.0),
                _ => t
                    .parse::<f64>()
                    .ok()
                    .filter(|v| v.is_finite())
                    .map(|v| f64::from(v != 0.0)),
            };
        }
        t.parse::<f64>().ok().filter(|v| fits(*v))
    }
}

/// The largest value a metric takes: a trillion (its thousandths fit a `u64`; their sum is
/// kept in a `u128`, which no run can overflow).
pub const MOST: f64 = 1e12;

/// Whether `v` is a value a counter, trend or gauge takes: from 0 to [`MOST`].
pub fn fits(v: f64) -> bool {
    v.is_finite() && (0.0..=MOST).contains(&v)
}

/// One metric's values over a run (in one worker, or merged).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Custom {
    /// Values fed.
    pub count: u64,
    /// Their sum, in thousandths.
    pub sum: u128,
    /// Of them, the true ones (a rate's).
    pub trues: u64,
    /// The least and the most, in thousandths.
    pub min: Option<u64>,
    pub max: Option<u64>,
    /// The last value fed (a gauge's), in thousandths, and when (Unix µs).
    pub last: Option<(u64, u64)>,
    /// Every value, in thousandths: a trend's alone (the other kinds keep none), grown
    /// as its values need (a histogram of them all would be ~340 KB a metric a worker).
    #[serde(with = "trend_values", default)]
    pub values: Option<Histogram<u64>>,
}

/// A trend's histogram, grown on demand from the least it can be.
fn trend_histogram() -> Histogram<u64> {
    Histogram::new(3).expect("3 significant digits")
}

/// A trend's values as the HDR encoding (none for the other kinds).
mod trend_values {
    use hdrhistogram::Histogram;

    pub fn serialize<S: serde::Serializer>(
        h: &Option<Histogram<u64>>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match h {
            Some(h) => super::hdr::serialize(h, s),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: serde::Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Histogram<u64>>, D::Error> {
        let text: Option<String> = serde::Deserialize::deserialize(d)?;
        text.map(|t| super::hdr::decode(&t).map_err(serde::de::Error::custom))
            .transpose()
    }
}

impl Custom {
    /// Feeds `v` (checked by [`fits`], or 0/1 for a rate) at `at` (Unix µs).
    pub fn add(&mut self, kind: Kind, v: f64, at: u64) {
        let milli = (v * 1000.0).round() as u64;
        self.count += 1;
        self.sum += u128::from(milli);
        self.trues += u64::from(v != 0.0);
        self.min = Some(self.min.map_or(milli, |m| m.min(milli)));
        self.max = Some(self.max.map_or(milli, |m| m.max(milli)));
        if self.last.is_none_or(|(t, _)| at >= t) {
            self.last = Some((at, milli));
        }
        if kind == Kind::Trend {
            let h = self.values.get_or_insert_with(trend_histogram);
            let _ = h.record(milli);
        }
    }

    pub fn merge(&mut self, o: &Custom) {
        self.count += o.count;
        self.sum += o.sum;
        self.trues += o.trues;
        self.min = match (self.min, o.min) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.max = self.max.max(o.max);
        if let Some((t, v)) = o.last {
            if self.last.is_none_or(|(mine, _)| t > mine) {
                self.last = Some((t, v));
            }
        }
        match (&mut self.values, &o.values) {
            (Some(mine), Some(theirs)) => {
                let _ = mine.add(theirs);
            }
            (mine @ None, Some(theirs)) => *mine = Some(theirs.clone()),
            _ => {}
        }
    }
}

/// Merges `from` into `into`, metric by metric.
pub fn merge_all(into: &mut Vec<Custom>, from: &[Custom]) {
    if into.len() < from.len() {
        into.resize_with(from.len(), Custom::default);
    }
    for (a, b) in into.iter_mut().zip(from) {
        a.merge(b);
    }
}

/// A metric's figures in a summary: those of its kind.
#[derive(Debug, Clone, Serialize)]
pub struct CustomSummary {
    pub name: String,
    pub kind: Kind,
    /// Values fed.
    pub count: u64,
    /// Their sum (a counter's total), and per second of the run (a counter's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_second: Option<f64>,
    /// The share of true values (a rate's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    /// A trend's mean, exact (its sum over its count).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean: Option<f64>,
    /// A trend's and a gauge's least and most values, exact.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max: Option<f64>,
    /// A gauge's last value.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last: Option<f64>,
    /// A trend's percentiles (`p50` … and those asked for), to 3 significant digits.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub percentiles: BTreeMap<String, f64>,
}

/// `x` to 3 significant digits: what an HDR histogram of 3 keeps. Scaled by whole powers
/// of ten, multiplied or divided, so that 1e12 stays 1e12 (not 999999999999.9999).
fn significant(x: f64) -> f64 {
    if x == 0.0 {
        return 0.0;
    }
    let e = x.abs().log10().floor() as i32 - 2;
    let p = 10f64.powi(e.abs());
    match e >= 0 {
        true => (x / p).round() * p,
        false => (x * p).round() / p,
    }
}

/// The percentiles a trend always shows.
pub const TREND_PERCENTILES: [f64; 4] = [50.0, 90.0, 95.0, 99.0];

/// The summary of metric `name` of `kind` from `c`, over a run of `elapsed` seconds,
/// with the percentiles `asked` beyond a trend's usual.
pub fn summary(name: &str, kind: Kind, c: &Custom, elapsed: f64, asked: &[f64]) -> CustomSummary {
    let units = |milli: u64| milli as f64 / 1000.0;
    let total = c.sum as f64 / 1000.0;
    let some = c.count > 0;
    let mut s = CustomSummary {
        name: name.to_string(),
        kind,
        count: c.count,
        total: None,
        per_second: None,
        rate: None,
        mean: None,
        min: None,
        max: None,
        last: None,
        percentiles: BTreeMap::new(),
    };
    match kind {
        Kind::Counter => {
            s.total = Some(total);
            s.per_second = (elapsed > 0.0).then(|| total / elapsed);
        }
        Kind::Rate => s.rate = some.then(|| c.trues as f64 / c.count as f64),
        Kind::Gauge => {
            s.last = c.last.map(|l| units(l.1));
            (s.min, s.max) = (c.min.map(units), c.max.map(units));
        }
        Kind::Trend if some => {
            s.mean = Some(total / c.count as f64);
            (s.min, s.max) = (c.min.map(units), c.max.map(units));
            let empty;
            let values = match &c.values {
                Some(h) => h,
                None => {
                    empty = trend_histogram();
                    &empty
                }
            };
            for &q in TREND_PERCENTILES.iter().chain(asked) {
                let at = values.value_at_quantile(crate::metrics::quantile(q));
                let v = significant(units(values.median_equivalent(at)));
                s.percentiles
                    .insert(format!("p{}", crate::metrics::percentile_label(q)), v);
            }
        }
        Kind::Trend => {}
    }
    s
}

/// Its metrics for the store and gates: `metric.NAME.total` …, each only when measured.
pub fn metrics(s: &CustomSummary) -> Vec<crate::store::Metric> {
    use crate::store::Metric;
    let name = |f: &str| format!("metric.{}.{f}", s.name);
    let mut v = vec![Metric::of(&name("count"), s.count as f64)];
    let figures = [
        ("total", s.total),
        ("per_second", s.per_second),
        ("rate", s.rate),
        ("mean", s.mean),
        ("min", s.min),
        ("max", s.max),
        ("last", s.last),
    ];
    for (f, value) in figures {
        if let Some(x) = value {
            v.push(Metric::of(&name(f), x));
        }
    }
    for (p, x) in &s.percentiles {
        v.push(Metric::of(&name(p), *x));
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Known truth: the values 0..=299 (the testbed's device numbers) fed to each kind,
    /// split over two workers and merged.
    #[test]
    fn each_kind_keeps_what_it_says_exactly_across_workers() {
        let (mut a, mut b) = (Custom::default(), Custom::default());
        for n in 0..300u64 {
            let w = if n % 2 == 0 { &mut a } else { &mut b };
            w.add(Kind::Trend, n as f64, n);
        }
        a.merge(&b);
        let t = summary("ids", Kind::Trend, &a, 2.0, &[75.0]);
        assert_eq!(t.count, 300);
        assert_eq!(t.mean, Some(149.5));
        assert_eq!((t.min, t.max), (Some(0.0), Some(299.0)));
        // The smallest value with 95% of the values at or below it: 284 (285 of 300).
        assert_eq!(t.percentiles["p95"], 284.0);
        assert_eq!(t.percentiles["p50"], 149.0);
        assert_eq!(t.percentiles["p75"], 224.0);
        let mut c = Custom::default();
        for n in 0..300u64 {
            c.add(Kind::Counter, n as f64, n);
        }
        let s = summary("ids", Kind::Counter, &c, 2.0, &[]);
        assert_eq!((s.total, s.per_second), (Some(44_850.0), Some(22_425.0)));
        let mut r = Custom::default();
        for text in ["true", "false", "1", "0", "true"] {
            r.add(Kind::Rate, Kind::Rate.value_of(text).unwrap(), 0);
        }
        assert_eq!(summary("ok", Kind::Rate, &r, 1.0, &[]).rate, Some(0.6));
        let (mut g1, mut g2) = (Custom::default(), Custom::default());
        g1.add(Kind::Gauge, 7.5, 10);
        g2.add(Kind::Gauge, 3.0, 20);
        g2.add(Kind::Gauge, 9.0, 5);
        g1.merge(&g2);
        let g = summary("q", Kind::Gauge, &g1, 1.0, &[]);
        assert_eq!((g.last, g.min, g.max), (Some(3.0), Some(3.0), Some(9.0)));
        // What an extraction's text is worth.
        assert_eq!(Kind::Trend.value_of(" 12.5 "), Some(12.5));
        for bad in ["-1", "nan", "inf", "1e13", "x", ""] {
            assert_eq!(Kind::Trend.value_of(bad), None, "{bad}");
        }
        assert_eq!(Kind::Rate.value_of("maybe"), None);
    }

    /// The hostile review's: a trillion fed 20,000 times sums exactly (it saturated at
    /// 18,447 trillion), a mean never below the least value; 1..=1000's p99.9 is 999
    /// (99.9 / 100 is 0.9990000000000001, a rank too far); a trillion reads as such.
    #[test]
    fn large_values_sum_exactly_and_percentiles_take_their_rank() {
        let mut c = Custom::default();
        for _ in 0..20_000 {
            c.add(Kind::Trend, MOST, 0);
        }
        let s = summary("t", Kind::Trend, &c, 1.0, &[]);
        assert_eq!(s.mean, Some(MOST));
        assert_eq!(s.percentiles["p99"], MOST);
        let mut k = Custom::default();
        for n in 1..=1000u64 {
            k.add(Kind::Trend, n as f64, 0);
        }
        let s = summary("t", Kind::Trend, &k, 1.0, &[99.9]);
        assert_eq!(s.percentiles["p99.9"], 999.0);
        // Only a trend keeps a histogram: a counter's memory is its integers.
        let mut n = Custom::default();
        n.add(Kind::Counter, 1.0, 0);
        assert!(n.values.is_none());
        let back: Custom = serde_json::from_str(&serde_json::to_string(&k).unwrap()).unwrap();
        assert_eq!(back.values.unwrap().len(), 1000);
        let none: Custom = serde_json::from_str(&serde_json::to_string(&n).unwrap()).unwrap();
        assert!(none.values.is_none() && none.sum == 1000);
    }

    #[test]
    fn fractions_keep_three_significant_digits() {
        let mut c = Custom::default();
        for v in [0.25, 1.5, 12.345, 1234.5] {
            c.add(Kind::Trend, v, 0);
        }
        let s = summary("t", Kind::Trend, &c, 1.0, &[]);
        assert_eq!(
            s.mean,
            Some((250 + 1500 + 12345 + 1_234_500) as f64 / 4000.0)
        );
        assert_eq!(s.percentiles["p50"], 1.5);
        assert_eq!(s.percentiles["p99"], 1230.0);
        assert_eq!(s.max, Some(1234.5));
    }
}
