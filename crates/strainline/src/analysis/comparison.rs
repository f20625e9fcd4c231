//! The version verdict: for every metric of every case both versions ran, is the
//! candidate worse, better, or neither — and how sure are we. A metric is *regressed*
//! only when the change is statistically significant (Mann–Whitney U over the
//! repetitions, Benjamini–Hochberg adjusted over all metrics compared at once) **and**
//! beyond the metric's tolerance band (the IoT seed's rule: up to 120% of the
//! resources, down to 80% of the throughput is fine). Too few repetitions to ever reach
//! significance is said plainly: inconclusive.

use std::collections::BTreeMap;

use serde::Serialize;

use super::stats::median;
use super::twosample::{benjamini_hochberg, bootstrap_ratio_ci, mann_whitney, mann_whitney_floor};

/// The default tolerance: 20% either way (IoT seed: 101–120% of resources and 80–99% of
/// throughput are ok).
pub const DEFAULT_BAND: f64 = 0.20;
/// Significance level for the adjusted p-value.
pub const DEFAULT_ALPHA: f64 = 0.05;
/// Bootstrap resamples for the ratio's interval.
const RESAMPLES: usize = 2000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Regressed,
    Improved,
    Unchanged,
    Inconclusive,
    /// A metric without a better direction: shown, not judged.
    Info,
}

impl Verdict {
    pub fn word(self) -> &'static str {
        match self {
            Verdict::Regressed => "REGRESSED",
            Verdict::Improved => "improved",
            Verdict::Unchanged => "unchanged",
            Verdict::Inconclusive => "inconclusive",
            Verdict::Info => "-",
        }
    }
}

/// One side of a metric: its values over the repetitions.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Side {
    pub n: usize,
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub values: Vec<f64>,
}

impl Side {
    fn of(values: &[f64]) -> Side {
        Side {
            n: values.len(),
            median: median(values).unwrap_or(f64::NAN),
            min: values.iter().copied().fold(f64::INFINITY, f64::min),
            max: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            values: values.to_vec(),
        }
    }
}

/// The values of one metric of one case, for both versions.
#[derive(Debug, Clone)]
pub struct Pair {
    pub case: String,
    pub metric: String,
    pub unit: String,
    /// `lower`, `higher` or `none`.
    pub direction: String,
    pub baseline: Vec<f64>,
    pub candidate: Vec<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    pub case: String,
    pub metric: String,
    pub unit: String,
    pub direction: String,
    pub baseline: Side,
    pub candidate: Side,
    /// Candidate median as a share of the baseline median (1.5 = 150% of previous).
    pub ratio: Option<f64>,
    /// 95% bootstrap interval of that ratio.
    pub ratio_ci: Option<(f64, f64)>,
    /// Mann–Whitney two-sided p, and adjusted for the number of metrics compared.
    pub p: Option<f64>,
    pub p_adjusted: Option<f64>,
    /// The tolerance band used (0.2 = ±20%); none for an extreme without a band of its
    /// own (shown, not judged).
    pub band: Option<f64>,
    pub verdict: Verdict,
    /// Why, in words.
    pub why: String,
}

/// How to judge.
#[derive(Debug, Clone)]
pub struct Policy {
    pub alpha: f64,
    pub default_band: f64,
    /// Per-metric bands, by metric name.
    pub bands: BTreeMap<String, f64>,
}

impl Default for Policy {
    fn default() -> Policy {
        Policy {
            alpha: DEFAULT_ALPHA,
            default_band: DEFAULT_BAND,
            bands: BTreeMap::new(),
        }
    }
}

/// The default band of latency percentiles. Latency on a machine shared with the load
/// generator moves between runs more than resources do: A/A runs of the testbed on this
/// 2-core VM gave p90 at 121% and p99 at 131% of themselves, significantly, because the
/// repetitions of one run share the machine's state of the moment.
pub const LATENCY_BAND: f64 = 0.5;

/// Metrics decided by one or a few samples (a maximum, a 99.9th percentile of a short
/// run): A/A runs gave `latency_max` at 233% of itself. Shown, not judged, unless a band
/// is set for them by name. The catalogue says which ([`crate::metrics::is_extreme`]).
pub use crate::metrics::is_extreme;

/// Latency percentiles (from the intended send or the actual one) get the wider
/// [`LATENCY_BAND`].
fn is_latency(metric: &str) -> bool {
    metric.starts_with("latency_") || metric.starts_with("service_")
}

impl Policy {
    /// The metric's own band if set; else none for extremes, the latency band (or the
    /// default, if wider) for latency percentiles, the default for everything else.
    pub fn band(&self, metric: &str) -> Option<f64> {
        match self.bands.get(metric) {
            Some(b) => Some(*b),
            None if is_extreme(metric) => None,
            None if is_latency(metric) => Some(LATENCY_BAND.max(self.default_band)),
            None => Some(self.default_band),
        }
    }
}

/// Judges every pair. The family for the multiple-testing adjustment is every pair
/// that has a direction and enough data to be tested.
pub fn judge(pairs: &[Pair], policy: &Policy) -> Vec<Row> {
    let mut rows: Vec<Row> = pairs
        .iter()
        .map(|p| {
            let (b, c) = (Side::of(&p.baseline), Side::of(&p.candidate));
            let ratio = if b.median != 0.0 && b.median.is_finite() {
                Some(c.median / b.median)
            } else if c.median == b.median {
                Some(1.0)
            } else {
                None
            };
            let ratio_ci = bootstrap_ratio_ci(&p.baseline, &p.candidate, 0.95, RESAMPLES);
            let identical = b.min == b.max && c.min == c.max && b.min == c.min;
            let test = if identical {
                Some(1.0)
            } else {
                mann_whitney(&p.baseline, &p.candidate).map(|m| m.p)
            };
            Row {
                case: p.case.clone(),
                metric: p.metric.clone(),
                unit: p.unit.clone(),
                direction: p.direction.clone(),
                baseline: b,
                candidate: c,
                ratio,
                ratio_ci,
                p: test,
                p_adjusted: None,
                band: policy.band(&p.metric),
                verdict: Verdict::Info,
                why: String::new(),
            }
        })
        .collect();
    let tested: Vec<usize> = (0..rows.len())
        .filter(|&i| rows[i].direction != "none" && rows[i].p.is_some())
        .collect();
    let adjusted = benjamini_hochberg(
        &tested
            .iter()
            .map(|&i| rows[i].p.unwrap())
            .collect::<Vec<_>>(),
    );
    for (k, &i) in tested.iter().enumerate() {
        rows[i].p_adjusted = Some(adjusted[k]);
    }
    for r in &mut rows {
        (r.verdict, r.why) = decide(r, policy.alpha);
    }
    rows
}

fn decide(r: &Row, alpha: f64) -> (Verdict, String) {
    if r.direction == "none" {
        return (
            Verdict::Info,
            "no better direction: shown, not judged".into(),
        );
    }
    let Some(band) = r.band else {
        return (
            Verdict::Info,
            "an extreme set by a few requests: shown, not judged (give it a band with --band to judge it)".into(),
        );
    };
    let (nb, nc) = (r.baseline.n, r.candidate.n);
    let identical = r.baseline.min == r.baseline.max
        && r.candidate.min == r.candidate.max
        && r.baseline.min == r.candidate.min;
    if identical {
        return (Verdict::Unchanged, "identical values".into());
    }
    let floor = mann_whitney_floor(nb, nc);
    if nb < 2 || nc < 2 || floor > alpha {
        return (
            Verdict::Inconclusive,
            format!(
                "too few repetitions to decide: with {nb} and {nc} the smallest possible p is {floor:.3} (need < {alpha}); use repeat ≥ 5 or compare labels with several runs"
            ),
        );
    }
    let lower_better = r.direction == "lower";
    // Worse/better beyond the band; a change from zero counts as beyond any band.
    let (worse, better) = match r.ratio {
        Some(x) if lower_better => (x > 1.0 + band, x < 1.0 - band),
        Some(x) => (x < 1.0 - band, x > 1.0 + band),
        None => {
            let up = r.candidate.median > r.baseline.median;
            (up == lower_better, up != lower_better)
        }
    };
    let p = r.p_adjusted.unwrap_or(1.0);
    let significant = p < alpha;
    let limit = if lower_better {
        format!("{:.0}%", 100.0 * (1.0 + band))
    } else {
        format!("{:.0}%", 100.0 * (1.0 - band))
    };
    match (significant, worse, better) {
        (true, true, _) => (
            Verdict::Regressed,
            format!(
                "significant (adjusted p {}) and beyond the band ({} {limit})",
                p_text(p),
                if lower_better { ">" } else { "<" }
            ),
        ),
        (true, _, true) => (
            Verdict::Improved,
            format!("significant (adjusted p {}) and beyond the band", p_text(p)),
        ),
        (true, false, false) => (
            Verdict::Unchanged,
            format!("a significant change within the ±{:.0}% band", 100.0 * band),
        ),
        (false, true, _) | (false, _, true) => (
            Verdict::Inconclusive,
            format!(
                "beyond the band but not significant (adjusted p {}): more repetitions would tell",
                p_text(p)
            ),
        ),
        (false, false, false) => (
            Verdict::Unchanged,
            format!("within the ±{:.0}% band, not significant", 100.0 * band),
        ),
    }
}

/// A p-value for people: 0.0079, <0.0001.
pub fn p_text(p: f64) -> String {
    if p < 1e-4 {
        "<0.0001".into()
    } else {
        format!("{p:.4}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(metric: &str, direction: &str, b: &[f64], c: &[f64]) -> Pair {
        Pair {
            case: "bench".into(),
            metric: metric.into(),
            unit: "ms".into(),
            direction: direction.into(),
            baseline: b.to_vec(),
            candidate: c.to_vec(),
        }
    }

    #[test]
    fn a_significant_change_beyond_the_band_is_a_regression() {
        let b = [1.00, 1.02, 0.99, 1.01, 1.03, 0.98];
        let c: Vec<f64> = b.iter().map(|v| v * 1.5).collect();
        let rows = judge(&[pair("cpu_per_op", "lower", &b, &c)], &Policy::default());
        assert_eq!(rows[0].verdict, Verdict::Regressed, "{}", rows[0].why);
        assert!((rows[0].ratio.unwrap() - 1.5).abs() < 0.01);
        let (lo, hi) = rows[0].ratio_ci.unwrap();
        assert!(lo <= 1.5 && 1.5 <= hi);
        // The same change on a higher-is-better metric is an improvement.
        let rows = judge(&[pair("throughput", "higher", &b, &c)], &Policy::default());
        assert_eq!(rows[0].verdict, Verdict::Improved);
    }

    #[test]
    fn a_significant_change_within_the_band_is_not_a_regression() {
        let b = [1.00, 1.02, 0.99, 1.01, 1.03, 0.98];
        let c: Vec<f64> = b.iter().map(|v| v * 1.1).collect();
        let rows = judge(&[pair("cpu_per_op", "lower", &b, &c)], &Policy::default());
        assert_eq!(rows[0].verdict, Verdict::Unchanged, "{}", rows[0].why);
        // A narrower band for this metric makes it one.
        let mut policy = Policy::default();
        policy.bands.insert("cpu_per_op".into(), 0.05);
        let rows = judge(&[pair("cpu_per_op", "lower", &b, &c)], &policy);
        assert_eq!(rows[0].verdict, Verdict::Regressed, "{}", rows[0].why);
    }

    #[test]
    fn a_large_but_noisy_change_is_inconclusive() {
        let b = [1.0, 3.0, 1.1, 2.9, 1.2];
        let c = [1.6, 3.5, 1.5, 3.6, 1.7];
        let rows = judge(&[pair("target_cpu", "lower", &b, &c)], &Policy::default());
        assert_eq!(rows[0].verdict, Verdict::Inconclusive, "{}", rows[0].why);
    }

    #[test]
    fn three_repetitions_can_never_decide_and_say_so() {
        let rows = judge(
            &[pair(
                "cpu_per_op",
                "lower",
                &[1.0, 1.01, 0.99],
                &[2.0, 2.01, 1.99],
            )],
            &Policy::default(),
        );
        assert_eq!(rows[0].verdict, Verdict::Inconclusive);
        assert!(
            rows[0].why.contains("too few repetitions"),
            "{}",
            rows[0].why
        );
    }

    #[test]
    fn many_metrics_are_adjusted_together() {
        // One metric at the exact floor for 5 vs 5 (p = 0.0079) among 20 unchanged ones:
        // BH gives it 20 × 0.0079 = 0.16, not significant.
        let b = [1.0, 1.01, 1.02, 1.03, 1.04];
        let c = [2.0, 2.01, 2.02, 2.03, 2.04];
        let mut pairs = vec![pair("cpu_per_op", "lower", &b, &c)];
        for i in 0..19 {
            pairs.push(pair(
                &format!("m{i}"),
                "lower",
                &b,
                &[1.0, 1.04, 1.01, 1.03, 1.02],
            ));
        }
        let rows = judge(&pairs, &Policy::default());
        assert_eq!(rows[0].verdict, Verdict::Inconclusive, "{}", rows[0].why);
        assert!((rows[0].p_adjusted.unwrap() - 20.0 * 2.0 / 252.0).abs() < 1e-9);
    }

    #[test]
    fn extremes_are_shown_not_judged_and_latency_has_a_wider_band_unless_set() {
        let b = [2.6, 2.5, 2.7, 2.6, 2.4, 2.5];
        let times = |k: f64| -> Vec<f64> { b.iter().map(|v| v * k).collect() };
        let rows = judge(
            &[pair("latency_max", "lower", &b, &times(2.3))],
            &Policy::default(),
        );
        assert_eq!(rows[0].verdict, Verdict::Info, "{}", rows[0].why);
        assert_eq!(rows[0].band, None);
        let rows = judge(
            &[pair("latency_p90", "lower", &b, &times(1.3))],
            &Policy::default(),
        );
        assert_eq!(rows[0].verdict, Verdict::Unchanged, "{}", rows[0].why);
        let rows = judge(
            &[pair("latency_p90", "lower", &b, &times(1.6))],
            &Policy::default(),
        );
        assert_eq!(rows[0].verdict, Verdict::Regressed, "{}", rows[0].why);
        let mut policy = Policy::default();
        policy.bands.insert("latency_max".into(), 0.2);
        policy.bands.insert("latency_p90".into(), 0.2);
        let rows = judge(
            &[
                pair("latency_max", "lower", &b, &times(1.43)),
                pair("latency_p90", "lower", &b, &times(1.3)),
            ],
            &policy,
        );
        assert_eq!(rows[0].verdict, Verdict::Regressed);
        assert_eq!(rows[1].verdict, Verdict::Regressed);
    }

    #[test]
    fn a_metric_without_direction_is_shown_not_judged() {
        let rows = judge(
            &[pair("custom", "none", &[1.0; 5], &[9.0; 5])],
            &Policy::default(),
        );
        assert_eq!(rows[0].verdict, Verdict::Info);
    }
}
