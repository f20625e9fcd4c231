//! The version verdict: for every metric of every case both versions ran, is the
//! candidate worse, better, or neither — and how sure are we. A metric is *regressed*
//! only when the change is statistically significant (Mann–Whitney U over the
//! repetitions, Benjamini–Hochberg adjusted over all metrics compared at once) **and**
//! beyond the metric's tolerance band (the IoT seed's rule: up to 120% of the
//! resources, down to 80% of the throughput is fine). Too few repetitions to ever reach
//! significance is said plainly: inconclusive. Versions measured in pairs (a paired
//! session: [`super::paired`]) are judged on the pairs' ratios instead, and every row
//! says the smallest change its data could have seen.

use std::collections::BTreeMap;

use crate::metrics::Direction;
use serde::Serialize;

use super::paired::{self, Looks, PairedTest};
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
    pub direction: Direction,
    pub baseline: Vec<f64>,
    pub candidate: Vec<f64>,
    /// `baseline[i]` and `candidate[i]` were measured together (adjacent in time).
    pub paired: bool,
}

/// How a row was tested.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// Two independent sets of repetitions: Mann–Whitney U, bootstrap interval.
    MannWhitney,
    /// Pairs measured together: Wilcoxon's signed-rank test of the log-ratios with the
    /// Hodges–Lehmann estimate, a confidence sequence over the session's looks.
    SignedRank,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    pub case: String,
    pub metric: String,
    pub unit: String,
    pub direction: Direction,
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
    pub method: Method,
    /// The relative change this comparison would have flagged with 80% probability
    /// (0.031 = ±3.1%), before the adjustment for the number of metrics.
    pub detectable: Option<f64>,
    /// Paired rows: the spread of one pair's log-ratio that the interval implies (for
    /// normal noise about their standard deviation; 0.02 ≈ ±2%), the machine's noise as
    /// this comparison saw it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pair_noise: Option<f64>,
    /// Paired rows not yet decided: about how many pairs in all would decide.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pairs_to_decide: Option<usize>,
}

impl Row {
    /// An `unchanged` that could not have seen a change its band asks about (the
    /// smallest change it would see is wider than the band): said wherever it is shown.
    pub fn blind(&self) -> bool {
        self.verdict == Verdict::Unchanged
            && matches!((self.detectable, self.band), (Some(d), Some(b)) if d.is_finite() && d > b)
    }
}

/// How to judge.
#[derive(Debug, Clone)]
pub struct Policy {
    pub alpha: f64,
    pub default_band: f64,
    /// Per-metric bands, by metric name.
    pub bands: BTreeMap<String, f64>,
    /// Paired data looked at by a session after every pair: the looks planned (the
    /// interval then holds over all of them). `None`: looked at once.
    pub looks: Option<Looks>,
}

impl Default for Policy {
    fn default() -> Policy {
        Policy {
            alpha: DEFAULT_ALPHA,
            default_band: DEFAULT_BAND,
            bands: BTreeMap::new(),
            looks: None,
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
    let mut rows: Vec<Row> = pairs.iter().map(|p| row(p, policy)).collect();
    // Identical values are no test (nothing could have differed): they do not widen
    // the family.
    let tested: Vec<usize> = (0..rows.len())
        .filter(|&i| {
            rows[i].direction != Direction::None && rows[i].p.is_some() && !identical(&rows[i])
        })
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

/// One metric's figures before the verdict: paired when the data are pairs that can be
/// compared as ratios, else two independent samples.
fn row(p: &Pair, policy: &Policy) -> Row {
    let tested = p
        .paired
        .then(|| paired::paired(&p.baseline, &p.candidate, policy.looks, policy.alpha))
        .flatten();
    let band = policy.band(&p.metric);
    let mut r = Row {
        case: p.case.clone(),
        metric: p.metric.clone(),
        unit: p.unit.clone(),
        direction: p.direction,
        ratio: None,
        ratio_ci: None,
        p: None,
        p_adjusted: None,
        band,
        verdict: Verdict::Info,
        why: String::new(),
        method: Method::MannWhitney,
        detectable: None,
        pair_noise: None,
        pairs_to_decide: None,
        baseline: Side::of(&p.baseline),
        candidate: Side::of(&p.candidate),
    };
    let same = identical(&r);
    match tested {
        Some(t) => paired_figures(&mut r, &t, band, same),
        None => {
            r.ratio = if r.baseline.median != 0.0 && r.baseline.median.is_finite() {
                Some(r.candidate.median / r.baseline.median)
            } else if r.candidate.median == r.baseline.median {
                Some(1.0)
            } else {
                None
            };
            r.ratio_ci = bootstrap_ratio_ci(&p.baseline, &p.candidate, 0.95, RESAMPLES);
            r.p = if same {
                Some(1.0)
            } else {
                mann_whitney(&p.baseline, &p.candidate).map(|m| m.p)
            };
            r.detectable = if same {
                Some(0.0)
            } else {
                paired::detectable_unpaired(&p.baseline, &p.candidate, policy.alpha)
            };
        }
    }
    r
}

fn paired_figures(r: &mut Row, t: &PairedTest, band: Option<f64>, identical: bool) {
    r.method = Method::SignedRank;
    r.ratio = Some(t.ratio);
    r.ratio_ci = Some(t.ci);
    r.p = Some(if identical { 1.0 } else { t.p });
    r.detectable = Some(t.detectable);
    r.pair_noise = Some(t.spread_log);
    r.pairs_to_decide = band
        .filter(|&b| !identical && !paired::decided(t.ci, b))
        .and_then(|b| paired::pairs_to_decide(t, b));
}

fn identical(r: &Row) -> bool {
    r.baseline.min == r.baseline.max
        && r.candidate.min == r.candidate.max
        && r.baseline.min == r.candidate.min
}

/// Whether a row's verdict is settled for a paired session: shown-only metrics,
/// identical values and metrics that cannot be compared as ratios (a zero on a side:
/// more pairs would not decide them) always are; a paired row when its interval lies
/// entirely inside the band or entirely beyond it.
pub fn settled(r: &Row) -> bool {
    match (r.direction, r.band, r.ratio_ci) {
        (Direction::None, _, _) | (_, None, _) => true,
        _ if identical(r) || r.method != Method::SignedRank => true,
        (_, Some(band), Some(ci)) => paired::decided(ci, band),
        _ => false,
    }
}

fn decide(r: &Row, alpha: f64) -> (Verdict, String) {
    if r.direction == Direction::None {
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
    if identical(r) {
        return (Verdict::Unchanged, "identical values".into());
    }
    let floor = match r.method {
        Method::MannWhitney => mann_whitney_floor(nb, nc),
        Method::SignedRank => 0.0,
    };
    if nb < 2 || nc < 2 || floor > alpha {
        return (
            Verdict::Inconclusive,
            format!(
                "too few repetitions to decide: with {nb} and {nc} the smallest possible p is {floor:.3} (need < {alpha}); use repeat ≥ 5 or compare labels with several runs"
            ),
        );
    }
    let lower_better = r.direction == Direction::Lower;
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
                "beyond the band but not significant (adjusted p {}): {}",
                p_text(p),
                match r.pairs_to_decide {
                    Some(n) => format!("about {n} pairs in all would likely decide it"),
                    None => "more repetitions would tell".into(),
                }
            ),
        ),
        (false, false, false) => (
            Verdict::Unchanged,
            format!(
                "within the ±{:.0}% band, not significant{}",
                100.0 * band,
                seen(r, band)
            ),
        ),
    }
}

/// What an `unchanged` could have seen: "; this comparison would have seen a change of
/// ±3.1% or more", and when that is wider than the band, that the noise hid the band.
fn seen(r: &Row, band: f64) -> String {
    let Some(d) = r.detectable.filter(|d| d.is_finite()) else {
        return String::new();
    };
    let mut s = format!(
        "; this comparison would have seen a change of ±{} or more",
        percent(d)
    );
    if d > band {
        s.push_str(&format!(
            " — wider than the ±{:.0}% band: the noise could hide a change the band asks about; {}",
            100.0 * band,
            match (r.method, r.pairs_to_decide) {
                (Method::SignedRank, Some(n)) => format!("about {n} pairs in all would decide it"),
                (Method::SignedRank, None) => "more pairs would tell".into(),
                (Method::MannWhitney, _) => {
                    "measure both versions in one paired session (`strainline run SUITE --baseline … --candidate …`)".into()
                }
            }
        ));
    }
    s
}

/// A relative change for people: 3.1%, 0.42%, 25%.
pub fn percent(x: f64) -> String {
    let p = 100.0 * x;
    if p >= 10.0 {
        format!("{p:.0}%")
    } else if p >= 1.0 {
        format!("{p:.1}%")
    } else {
        format!("{p:.2}%")
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
            direction: Direction::parse(direction),
            baseline: b.to_vec(),
            candidate: c.to_vec(),
            paired: false,
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

    #[test]
    fn pairs_see_a_small_change_that_the_machine_hides_between_runs() {
        // The machine's speed moves ±10% from pair to pair; within a pair the candidate
        // costs 5% more, ±0.5%. Unpaired, the 5% is lost in the noise; paired, it is
        // a regression beyond a 3% band.
        let machine = [1.0, 1.12, 0.91, 1.05, 0.95, 1.09, 0.88, 1.02, 0.97, 1.1];
        let within = [
            1.05, 1.046, 1.054, 1.051, 1.048, 1.053, 1.047, 1.05, 1.052, 1.049,
        ];
        let b: Vec<f64> = machine.to_vec();
        let c: Vec<f64> = machine.iter().zip(within).map(|(m, w)| m * w).collect();
        let mut policy = Policy::default();
        policy.bands.insert("cpu_per_op".into(), 0.03);
        let mut p = pair("cpu_per_op", "lower", &b, &c);
        let rows = judge(std::slice::from_ref(&p), &policy);
        assert_ne!(rows[0].verdict, Verdict::Regressed, "{}", rows[0].why);
        assert_eq!(rows[0].method, Method::MannWhitney);
        assert!(rows[0].detectable.unwrap() > 0.05);
        // Rows that cannot be paired do not hold a session open.
        assert!(settled(&rows[0]));
        p.paired = true;
        let rows = judge(&[p], &policy);
        assert_eq!(rows[0].method, Method::SignedRank);
        assert_eq!(rows[0].verdict, Verdict::Regressed, "{}", rows[0].why);
        let (lo, hi) = rows[0].ratio_ci.unwrap();
        assert!(lo > 1.04 && hi < 1.06, "{lo}–{hi}");
        assert!(rows[0].detectable.unwrap() < 0.01);
        assert!(settled(&rows[0]));
    }

    #[test]
    fn an_unchanged_verdict_says_what_it_could_have_seen() {
        let b = [1.0, 1.2, 0.9, 1.1, 0.95, 1.05];
        let c = [1.02, 1.15, 0.93, 1.08, 0.97, 1.1];
        let mut policy = Policy::default();
        policy.bands.insert("cpu_per_op".into(), 0.03);
        let rows = judge(&[pair("cpu_per_op", "lower", &b, &c)], &policy);
        assert_eq!(rows[0].verdict, Verdict::Unchanged, "{}", rows[0].why);
        assert!(
            rows[0].why.contains("would have seen a change of ±")
                && rows[0].why.contains("wider than the ±3% band"),
            "{}",
            rows[0].why
        );
        assert!(rows[0].blind());
        // Within the band's reach: not blind.
        let mut wide = Policy::default();
        wide.bands.insert("cpu_per_op".into(), 0.5);
        let rows = judge(&[pair("cpu_per_op", "lower", &b, &c_values())], &wide);
        assert!(!rows[0].blind(), "{}", rows[0].why);
    }

    fn c_values() -> [f64; 6] {
        [1.02, 1.15, 0.93, 1.08, 0.97, 1.1]
    }
}
