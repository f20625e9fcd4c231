//! Paired comparisons: the two versions measured side by side in time (interleaved
//! pairs), each pair under the same conditions of the machine, judged by the ratio
//! candidate / baseline *within* each pair. A noisy machine moves both members of a
//! pair together, so the pairs' ratios vary far less than the runs do — that is what
//! lets a 2-core VM see a 5% change.
//!
//! The statistic is Wilcoxon's signed-rank test of the pairs' log-ratios, and the
//! ratio is the Hodges–Lehmann estimate (the median of the Walsh averages) with its
//! interval: robust to the outliers a noisy machine makes (a pair that a neighbour's
//! burst hit lands far off, and would drag a mean), and valid for any symmetric noise.
//! Because a paired session looks at the data after every pair and stops once the
//! verdict is decided, the interval is a **confidence sequence over the planned
//! looks**: a Pocock boundary (one critical value of the standardized statistic for
//! every look) calibrated by simulating the statistic over the same looks for 20,000
//! seeded sequences. Under no change the signs of the log-ratios are independent of
//! their ranks whatever the noise's distribution, so the boundary holds for any
//! symmetric noise: the chance that any look calls a change that is not there is α.
//!
//! Every result also says what it could have seen: the **minimum detectable effect**,
//! the change that this look would flag with 80% probability.

use std::collections::HashMap;
use std::sync::Mutex;

use super::twosample::{power_quantile, t_critical};

/// Sequences simulated to calibrate a boundary.
const SIMULATIONS: usize = 20_000;

/// When a paired session looks at its data: at `first` pairs, then after every
/// `every` more, and at `last`. A comparison of stored pairs looked once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Looks {
    pub first: usize,
    pub last: usize,
    pub every: usize,
}

/// The most pairs a session plans (the boundary's simulation grows with their square;
/// a plan read from a store row beyond it is not trusted).
pub const MAX_PAIRS: usize = 200;

/// How many looks a session plans: each look costs the interval width (the boundary
/// rises with their number: 1.96 for one, 2.41 for 5, about 2.6 for 10), and a session
/// that looks after every one of 80 pairs pays for 76.
pub const LOOKS: usize = 10;

impl Looks {
    /// After every pair from `first` to `last`.
    pub fn every_pair(first: usize, last: usize) -> Looks {
        Looks {
            first,
            last,
            every: 1,
        }
    }

    /// About [`LOOKS`] looks, evenly spaced from `first` to `last`.
    pub fn spread(first: usize, last: usize) -> Looks {
        Looks {
            first,
            last,
            every: (last.saturating_sub(first)).div_ceil(LOOKS - 1).max(1),
        }
    }

    /// One look at `n` pairs (a fixed design).
    pub fn once(n: usize) -> Looks {
        Looks::every_pair(n, n)
    }

    /// Whether the plan looks at `n` pairs.
    pub fn at(&self, n: usize) -> bool {
        n >= self.first
            && n <= self.last
            && ((n - self.first).is_multiple_of(self.every.max(1)) || n == self.last)
    }

    /// The plan as it was carried out when the session ended at `n` pairs (a budget
    /// spent between two looks): its looks before `n`, and `n`.
    pub fn ended_at(&self, n: usize) -> Looks {
        Looks { last: n, ..*self }
    }
}

/// The null distribution of the largest |z| (the standardized signed-rank statistic)
/// over a set of looks: what every critical value and p-value is read from.
struct Boundary {
    /// The largest |z| over the looks of each simulated sequence, ascending.
    max_abs_z: Vec<f64>,
}

/// The signed-rank statistic of `n` non-zero values standardized: (W+ − n(n+1)/4) over
/// its standard deviation, less the tie correction `ties` from its variance; 0 when it
/// has none.
fn standardized(w_plus: f64, n: usize, ties: f64) -> f64 {
    let n = n as f64;
    let var = n * (n + 1.0) * (2.0 * n + 1.0) / 24.0 - ties;
    if var > 0.0 {
        (w_plus - n * (n + 1.0) / 4.0) / var.sqrt()
    } else {
        0.0
    }
}

impl Boundary {
    fn simulate(looks: Looks) -> Boundary {
        let mut rng = Normal::new(
            0x5eed_0fb0_0da7
                ^ (looks.first as u64) << 32
                ^ (looks.last as u64) << 8
                ^ looks.every as u64,
        );
        let mut max_abs_z = Vec::with_capacity(SIMULATIONS);
        // |x| in ascending order with their signs; W+ kept as values arrive (a value
        // inserted below k positives raises each of their ranks by one).
        let mut sorted: Vec<(f64, bool)> = Vec::with_capacity(looks.last);
        for _ in 0..SIMULATIONS {
            sorted.clear();
            let (mut w, mut top) = (0.0f64, 0.0f64);
            for n in 1..=looks.last {
                let x = rng.next();
                let at = sorted.partition_point(|e| e.0 < x.abs());
                w += sorted[at..].iter().filter(|e| e.1).count() as f64;
                if x > 0.0 {
                    w += (at + 1) as f64;
                }
                sorted.insert(at, (x.abs(), x > 0.0));
                if looks.at(n) {
                    top = top.max(standardized(w, n, 0.0).abs());
                }
            }
            max_abs_z.push(top);
        }
        max_abs_z.sort_by(f64::total_cmp);
        Boundary { max_abs_z }
    }

    /// The critical |z| that the largest |z| exceeds with probability at most `alpha`.
    fn critical(&self, alpha: f64) -> f64 {
        let k = (((1.0 - alpha) * self.max_abs_z.len() as f64).ceil() as usize)
            .clamp(1, self.max_abs_z.len());
        // The statistic is discrete: "exceeds" is strictly above this value.
        self.max_abs_z[k - 1] + 1e-9
    }

    /// P(largest |z| ≥ z) under no change.
    fn p(&self, z: f64) -> f64 {
        let below = self.max_abs_z.partition_point(|&x| x < z.abs() - 1e-9);
        ((self.max_abs_z.len() - below) as f64 / self.max_abs_z.len() as f64)
            .max(1.0 / self.max_abs_z.len() as f64)
    }
}

/// Boundaries already simulated, by looks: a session asks after every pair.
fn boundary<T>(looks: Looks, read: impl FnOnce(&Boundary) -> T) -> T {
    static CACHE: Mutex<Option<HashMap<Looks, Boundary>>> = Mutex::new(None);
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    let map = cache.get_or_insert_with(HashMap::new);
    read(
        map.entry(looks)
            .or_insert_with(|| Boundary::simulate(looks)),
    )
}

/// Standard normal deviates from a seeded stream (Box–Muller over splitmix64).
struct Normal {
    rng: crate::rng::Rng,
    spare: Option<f64>,
}

impl Normal {
    fn new(seed: u64) -> Normal {
        Normal {
            rng: crate::rng::Rng::new(seed),
            spare: None,
        }
    }

    fn uniform(&mut self) -> f64 {
        self.rng.unit_open()
    }

    fn next(&mut self) -> f64 {
        if let Some(s) = self.spare.take() {
            return s;
        }
        let (u, v) = (self.uniform(), self.uniform());
        let r = (-2.0 * u.ln()).sqrt();
        let a = 2.0 * std::f64::consts::PI * v;
        self.spare = Some(r * a.sin());
        r * a.cos()
    }
}

/// The comparison of `n` pairs.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct PairedTest {
    pub n: usize,
    /// The Hodges–Lehmann estimate of ln(candidate / baseline): the median of the
    /// pairs' Walsh averages.
    pub estimate_log: f64,
    /// The spread of one pair's log-ratio that the interval implies (its half-width
    /// over the critical value, times √n; for normal noise about the standard
    /// deviation): the machine's noise as this comparison saw it.
    pub spread_log: f64,
    /// exp(estimate): the candidate as a share of the baseline.
    pub ratio: f64,
    /// The interval of that ratio (a confidence sequence over the looks); (0, ∞) when
    /// too few pairs to exclude anything.
    pub ci: (f64, f64),
    /// Two-sided p of "no change", over the looks.
    pub p: f64,
    /// The critical |z| used.
    pub critical: f64,
    /// The relative change this look would flag with 80% probability (0.031 = ±3.1%).
    pub detectable: f64,
}

fn median_sorted(v: &[f64]) -> f64 {
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        0.5 * (v[m - 1] + v[m])
    }
}

/// W+ of `d` with Wilcoxon's treatment of zeros (dropped) and midranks for ties, the
/// number of non-zero values, and the variance's tie correction Σ(t³ − t)/48.
fn signed_rank(d: &[f64]) -> (f64, usize, f64) {
    let mut abs: Vec<(f64, bool)> = d
        .iter()
        .filter(|x| **x != 0.0)
        .map(|x| (x.abs(), *x > 0.0))
        .collect();
    abs.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (mut w, mut ties, mut i) = (0.0, 0.0, 0);
    while i < abs.len() {
        let mut j = i;
        while j + 1 < abs.len() && abs[j + 1].0 == abs[i].0 {
            j += 1;
        }
        let rank = (i + j) as f64 / 2.0 + 1.0;
        w += rank * abs[i..=j].iter().filter(|e| e.1).count() as f64;
        let t = (j - i + 1) as f64;
        ties += (t * t * t - t) / 48.0;
        i = j + 1;
    }
    (w, abs.len(), ties)
}

/// Paired comparison of `baseline[i]` with `candidate[i]`, looked at as `looks` plans
/// (`None`: once, now). `None` when fewer than 3 pairs or a value is not positive
/// (log-ratios need both sides above zero).
pub fn paired(
    baseline: &[f64],
    candidate: &[f64],
    looks: Option<Looks>,
    alpha: f64,
) -> Option<PairedTest> {
    let n = baseline.len().min(candidate.len());
    if n < 3
        || baseline[..n]
            .iter()
            .chain(&candidate[..n])
            .any(|v| !(*v > 0.0 && v.is_finite()))
    {
        return None;
    }
    let d: Vec<f64> = (0..n).map(|i| (candidate[i] / baseline[i]).ln()).collect();
    let looks = looks
        .filter(|l| l.first >= 3 && n >= l.first && l.last <= MAX_PAIRS && l.every >= 1)
        // A planned look keeps the plan's boundary (a session stopped there because
        // the data decided); a budget spent between looks ends the plan at `n`.
        .map(|l| if l.at(n) { l } else { l.ended_at(n) })
        .unwrap_or(Looks::once(n));
    let (w, nonzero, ties) = signed_rank(&d);
    let z = standardized(w, nonzero, ties);
    let (critical, p) = boundary(looks, |b| (b.critical(alpha), b.p(z)));
    // Walsh averages: their median estimates the shift, their order statistics bound it.
    let mut walsh = Vec::with_capacity(n * (n + 1) / 2);
    for i in 0..n {
        for j in i..n {
            walsh.push(0.5 * (d[i] + d[j]));
        }
    }
    walsh.sort_by(f64::total_cmp);
    let m = walsh.len();
    let estimate = median_sorted(&walsh);
    let sd_w = (n as f64 * (n as f64 + 1.0) * (2.0 * n as f64 + 1.0) / 24.0).sqrt();
    // Exclude C Walsh averages on each side: W+ at the bound is critical sd_w from its
    // centre, with a continuity correction.
    let cut = (m as f64 / 2.0 - critical * sd_w - 0.5).floor();
    let (lo, hi) = if cut >= 0.0 {
        let c = (cut as usize).min((m - 1) / 2);
        (walsh[c], walsh[m - 1 - c])
    } else {
        (f64::NEG_INFINITY, f64::INFINITY)
    };
    let spread = if lo.is_finite() && hi > lo {
        (hi - lo) / (2.0 * critical) * (n as f64).sqrt()
    } else {
        // Too few pairs for an interval: the log-ratios' standard deviation.
        let mean = d.iter().sum::<f64>() / n as f64;
        (d.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
    };
    let se = spread / (n as f64).sqrt();
    Some(PairedTest {
        n,
        estimate_log: estimate,
        spread_log: spread,
        ratio: estimate.exp(),
        ci: (lo.exp(), hi.exp()),
        p: if nonzero == 0 { 1.0 } else { p },
        critical,
        detectable: ((critical + z_power()) * se).exp() - 1.0,
    })
}

/// The one-sided normal quantile of the stated power (0.8416 for 80%).
fn z_power() -> f64 {
    0.841_621_233_572_914_3
}

/// The relative change that a Mann–Whitney comparison of two independent samples
/// would flag with 80% probability: the t-test's detectable effect on the logs, with
/// Welch's standard error and degrees of freedom, widened by the rank test's
/// efficiency against t on normal data (3/π). `None` with fewer than 2 values a side
/// or a value not above zero.
pub fn detectable_unpaired(baseline: &[f64], candidate: &[f64], alpha: f64) -> Option<f64> {
    let logs = |v: &[f64]| -> Option<Vec<f64>> {
        (v.len() >= 2 && v.iter().all(|x| *x > 0.0 && x.is_finite()))
            .then(|| v.iter().map(|x| x.ln()).collect())
    };
    let (b, c) = (logs(baseline)?, logs(candidate)?);
    let mv = |v: &[f64]| {
        let m = v.iter().sum::<f64>() / v.len() as f64;
        let var = v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (v.len() - 1) as f64;
        (var, v.len() as f64)
    };
    let ((vb, nb), (vc, nc)) = (mv(&b), mv(&c));
    let (qb, qc) = (vb / nb, vc / nc);
    let se = (qb + qc).sqrt();
    if se == 0.0 {
        return Some(0.0);
    }
    let df = (qb + qc).powi(2) / (qb * qb / (nb - 1.0) + qc * qc / (nc - 1.0));
    let efficiency = (3.0 / std::f64::consts::PI).sqrt();
    Some(((t_critical(df, alpha) + power_quantile(df)) * se / efficiency).exp() - 1.0)
}

/// Whether a paired interval has settled the verdict for a band: entirely inside it
/// (no change beyond the band) or entirely beyond it (a change beyond the band).
pub fn decided(ci: (f64, f64), band: f64) -> bool {
    let (lo, hi) = ci;
    (lo >= 1.0 - band && hi <= 1.0 + band) || lo > 1.0 + band || hi < 1.0 - band
}

/// About how many pairs in all would settle the verdict for `band`, when the spread of
/// the pairs stays as it is: enough for the interval's half-width to fit between the
/// estimate and the nearest edge of the band.
pub fn pairs_to_decide(t: &PairedTest, band: f64) -> Option<usize> {
    let edges = [(1.0 - band).ln(), (1.0 + band).ln()];
    let margin = edges
        .iter()
        .map(|e| (t.estimate_log - e).abs())
        .fold(f64::INFINITY, f64::min);
    if margin <= 0.0 || !margin.is_finite() {
        return None;
    }
    let n = (t.critical * t.spread_log / margin).powi(2).ceil();
    (n.is_finite() && n < 1e7).then_some((n as usize).max(t.n + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signed_rank_test_and_hodges_lehmann_match_scipy() {
        // SciPy: x = [10.1, 9.8, 10.4, 10.0, 9.9, 10.2, 10.3, 9.7]
        //        y = [10.6, 10.1, 10.9, 10.4, 10.5, 10.6, 10.5, 10.3]
        //   scipy.stats.wilcoxon(np.log(y / x)): statistic 0, p = 0.0078125 (2/256, exact);
        //   the median of the Walsh averages: 0.0432406 (ratio 1.044189).
        let x = [10.1, 9.8, 10.4, 10.0, 9.9, 10.2, 10.3, 9.7];
        let y = [10.6, 10.1, 10.9, 10.4, 10.5, 10.6, 10.5, 10.3];
        let t = paired(&x, &y, None, 0.05).unwrap();
        assert!(
            (t.estimate_log - 0.0432406).abs() < 1e-6,
            "{}",
            t.estimate_log
        );
        assert!((t.p - 0.0078125).abs() < 0.0015, "{}", t.p);
        // d = [0.03, -0.012, 0.05, 0.02, 0.04, -0.021, 0.06, 0.01, 0.035, 0.015, 0.045, 0.025]:
        //   scipy.stats.wilcoxon(d): statistic 7, p = 0.0092773 (exact); R's
        //   wilcox.test(d, conf.int = TRUE) interval is the 14th and 65th Walsh averages
        //   (critical value 13 for n = 12): 0.009 to 0.040, estimate 0.02625.
        let d = [
            0.03, -0.012, 0.05, 0.02, 0.04, -0.021, 0.06, 0.01, 0.035, 0.015, 0.045, 0.025,
        ];
        let ones = [1.0; 12];
        let c: Vec<f64> = d.iter().map(|v: &f64| v.exp()).collect();
        let t = paired(&ones, &c, None, 0.05).unwrap();
        assert!((t.p - 0.0092773).abs() < 0.0015, "{}", t.p);
        assert!(
            (t.estimate_log - 0.02625).abs() < 1e-9,
            "{}",
            t.estimate_log
        );
        assert!((t.ci.0.ln() - 0.009).abs() < 1e-9, "{:?}", t.ci);
        assert!((t.ci.1.ln() - 0.040).abs() < 1e-9, "{:?}", t.ci);
    }

    #[test]
    fn one_pair_far_off_does_not_move_the_estimate() {
        // Fourteen pairs at +4–5% and one that a neighbour's burst hit (−30%): the mean
        // of the log-ratios would say +1.8%; the estimate stays near +4.5%, and the
        // test still sees it (SciPy: scipy.stats.wilcoxon(np.log(c)) p = 0.0083618).
        let b = [1.0; 15];
        let c = [
            1.045, 1.04, 1.05, 1.047, 1.043, 0.70, 1.046, 1.044, 1.048, 1.042, 1.041, 1.049,
            1.0455, 1.0435, 1.0465,
        ];
        let t = paired(&b, &c, None, 0.05).unwrap();
        assert!((t.ratio - 1.045).abs() < 0.004, "{}", t.ratio);
        assert!((t.p - 0.0083618).abs() < 0.0015, "{}", t.p);
    }

    #[test]
    fn pocock_constants_match_the_published_values() {
        // With many pairs per look the statistic is nearly normal: Pocock's (1977)
        // constants for equally spaced looks at two-sided α = 0.05 are 2.178 (2 looks)
        // and 2.413 (5).
        for (looks, c) in [(2, 2.178), (5, 2.413)] {
            let plan = Looks {
                first: 60,
                last: 60 * looks,
                every: 60,
            };
            let b = boundary(plan, |b| b.critical(0.05));
            assert!((b - c).abs() < 0.04, "{looks} looks: {b} vs {c}");
        }
        let twenty = boundary(Looks::every_pair(5, 24), |b| b.critical(0.05));
        let once = boundary(Looks::once(24), |b| b.critical(0.05));
        assert!(
            twenty > once + 0.3,
            "looking 20 times costs: {twenty} vs {once}"
        );
    }

    /// Synthetic A/A comparisons looked at after every pair: how often does any look
    /// call a change?
    fn false_alarms(adjusted: bool, seed: u64) -> f64 {
        let looks = Looks::every_pair(5, 24);
        let mut rng = Normal::new(seed);
        let mut alarms = 0;
        for _ in 0..1000 {
            let b: Vec<f64> = (0..looks.last).map(|_| (0.05 * rng.next()).exp()).collect();
            let c: Vec<f64> = (0..looks.last).map(|_| (0.05 * rng.next()).exp()).collect();
            let any = (looks.first..=looks.last).any(|n| {
                let t = paired(&b[..n], &c[..n], adjusted.then_some(looks), 0.05).unwrap();
                t.p < 0.05
            });
            alarms += any as usize;
        }
        alarms as f64 / 1000.0
    }

    #[test]
    fn twenty_looks_keep_the_false_alarm_rate_at_alpha() {
        let rate = false_alarms(true, 7);
        assert!(rate <= 0.06, "sequential false alarms {rate}");
        // Without the boundary, looking 20 times calls far more changes that are not.
        let naive = false_alarms(false, 7);
        eprintln!("20 looks, 1,000 A/A comparisons: false alarms {rate} with the boundary, {naive} without");
        assert!(naive > 0.12, "naive false alarms {naive}");
    }

    /// The effect at which a fixed test flags a change in 80% of synthetic comparisons,
    /// by bisection: the truth the printed detectable change is checked against.
    fn simulated_detectable(test: impl Fn(&[f64], &[f64]) -> bool, sd: f64, n: usize) -> f64 {
        let (mut lo, mut hi) = (0.0f64, 10.0 * sd);
        for _ in 0..14 {
            let effect = 0.5 * (lo + hi);
            let mut rng = Normal::new(11);
            let hits = (0..600)
                .filter(|_| {
                    let b: Vec<f64> = (0..n).map(|_| (sd * rng.next()).exp()).collect();
                    let c: Vec<f64> = (0..n)
                        .map(|_| effect + (sd * rng.next()))
                        .map(f64::exp)
                        .collect();
                    test(&b, &c)
                })
                .count();
            if hits as f64 / 600.0 < super::super::twosample::POWER {
                lo = effect;
            } else {
                hi = effect;
            }
        }
        (0.5 * (lo + hi)).exp() - 1.0
    }

    fn median_printed(print: impl Fn(&[f64], &[f64]) -> f64, sd: f64, n: usize) -> f64 {
        let mut rng = Normal::new(3);
        let mut v: Vec<f64> = (0..301)
            .map(|_| {
                let b: Vec<f64> = (0..n).map(|_| (sd * rng.next()).exp()).collect();
                let c: Vec<f64> = (0..n).map(|_| (sd * rng.next()).exp()).collect();
                print(&b, &c)
            })
            .collect();
        v.sort_by(f64::total_cmp);
        v[150]
    }

    #[test]
    fn the_printed_detectable_change_matches_a_simulation() {
        // Paired, one look at 12 pairs; and a sequential plan's last look.
        for looks in [None, Some(Looks::every_pair(5, 12))] {
            let printed = median_printed(
                |b, c| paired(b, c, looks, 0.05).unwrap().detectable,
                0.03,
                12,
            );
            let truth = simulated_detectable(
                |b, c| {
                    let t = paired(b, c, looks, 0.05).unwrap();
                    t.ci.0 > 1.0 || t.ci.1 < 1.0
                },
                0.03,
                12,
            );
            let off = printed / truth - 1.0;
            eprintln!("paired {looks:?}: printed {printed:.4}, simulated {truth:.4}");
            assert!(
                off.abs() < 0.2,
                "{looks:?}: printed {printed:.4} vs simulated {truth:.4}"
            );
        }
        // Unpaired, Mann–Whitney over 8 and 8 repetitions.
        let printed = median_printed(|b, c| detectable_unpaired(b, c, 0.05).unwrap(), 0.05, 8);
        let truth = simulated_detectable(
            |b, c| super::super::twosample::mann_whitney(b, c).unwrap().p < 0.05,
            0.05,
            8,
        );
        let off = printed / truth - 1.0;
        eprintln!("unpaired: printed {printed:.4}, simulated {truth:.4}");
        assert!(
            off.abs() < 0.2,
            "unpaired: printed {printed:.4} vs simulated {truth:.4}"
        );
    }

    #[test]
    fn decided_means_inside_or_beyond_the_band() {
        assert!(decided((0.99, 1.02), 0.03));
        assert!(decided((1.04, 1.07), 0.03));
        assert!(!decided((1.01, 1.05), 0.03));
        assert!(!decided((0.9, 1.1), 0.03));
        let t = PairedTest {
            n: 6,
            estimate_log: 0.05f64.ln_1p(),
            spread_log: 0.03,
            ratio: 1.05,
            ci: (1.01, 1.09),
            p: 0.01,
            critical: 2.5,
            detectable: 0.04,
        };
        // Margin to the 3% edge ≈ 0.0192 in logs: (2.5 × 0.03 / 0.0192)² ≈ 15.3 → 16.
        assert_eq!(pairs_to_decide(&t, 0.03), Some(16));
    }

    #[test]
    fn a_plan_read_from_a_hostile_store_row_is_not_simulated() {
        // A stored session's looks come from the store: 10¹² pairs would simulate for
        // ever. Beyond MAX_PAIRS the plan is ignored and the pairs are judged once.
        let hostile = Looks {
            first: 3,
            last: 1_000_000_000_000,
            every: 1,
        };
        let b = [1.0, 1.1, 0.9, 1.05, 0.95, 1.02];
        let c = [1.01, 1.12, 0.92, 1.06, 0.96, 1.03];
        let once = paired(&b, &c, None, 0.05).unwrap();
        assert_eq!(paired(&b, &c, Some(hostile), 0.05).unwrap(), once);
        let zero = Looks {
            every: 0,
            ..Looks::once(6)
        };
        assert_eq!(paired(&b, &c, Some(zero), 0.05).unwrap(), once);
    }
}
