//! Two-sample statistics for version comparisons: is the candidate's metric different
//! from the baseline's, how much, and how sure are we. The Mann–Whitney U test (exact
//! distribution when there are no ties and the samples are small, normal approximation
//! with tie and continuity corrections otherwise — as SciPy's `mannwhitneyu`), Student's
//! t-test (used by change-point detection, as Apache Otava does), a bootstrap confidence
//! interval for the ratio of medians, and the Benjamini–Hochberg adjustment for testing
//! many metrics at once. Checked in tests against SciPy's and R's published examples.

use super::stats::{median, normal_cdf, ranks};

/// Samples at most this large (product of sizes) without ties get the exact test.
const EXACT_LIMIT: usize = 400;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MannWhitney {
    /// U of the first sample: the number of (x, y) pairs with x > y (ties count ½).
    pub u1: f64,
    /// Two-sided p-value.
    pub p: f64,
    /// Whether `p` comes from the exact distribution of U.
    pub exact: bool,
}

/// The number of ways to get each U for samples of sizes `n1`, `n2`: the coefficients of
/// the Gaussian binomial, built one element at a time.
fn u_counts(n1: usize, n2: usize) -> Vec<f64> {
    // f[i][j][u]: arrangements of i x's and j y's with U = u. Recurrence on the largest
    // element: it is an x (adds j to U) or a y (adds nothing).
    let max = n1 * n2;
    let mut prev: Vec<Vec<f64>> = vec![vec![0.0; max + 1]; n2 + 1];
    for row in prev.iter_mut() {
        row[0] = 1.0; // i = 0 x's: one arrangement, U = 0
    }
    for _i in 1..=n1 {
        let mut cur: Vec<Vec<f64>> = vec![vec![0.0; max + 1]; n2 + 1];
        cur[0][0] = 1.0; // j = 0 y's
        for j in 1..=n2 {
            for u in 0..=max {
                let as_x = if u >= j { prev[j][u - j] } else { 0.0 };
                let as_y = cur[j - 1][u];
                cur[j][u] = as_x + as_y;
            }
        }
        prev = cur;
    }
    prev.swap_remove(n2)
}

/// Mann–Whitney U test of `x` against `y`, two-sided. `None` when either sample is empty.
pub fn mann_whitney(x: &[f64], y: &[f64]) -> Option<MannWhitney> {
    let (n1, n2) = (x.len(), y.len());
    if n1 == 0 || n2 == 0 {
        return None;
    }
    let all: Vec<f64> = x.iter().chain(y).copied().collect();
    let r = ranks(&all);
    let r1: f64 = r[..n1].iter().sum();
    let u1 = r1 - (n1 * (n1 + 1)) as f64 / 2.0;
    let nn = (n1 * n2) as f64;
    let u = u1.max(nn - u1);
    // Tie groups, for the exactness check and the variance correction.
    let mut sorted = all.clone();
    sorted.sort_by(f64::total_cmp);
    let mut tie_term = 0.0;
    let mut i = 0;
    while i < sorted.len() {
        let mut j = i;
        while j + 1 < sorted.len() && sorted[j + 1] == sorted[i] {
            j += 1;
        }
        let t = (j - i + 1) as f64;
        tie_term += t * t * t - t;
        i = j + 1;
    }
    if tie_term == 0.0 && n1 * n2 <= EXACT_LIMIT {
        let counts = u_counts(n1, n2);
        let total: f64 = counts.iter().sum();
        let upper: f64 = counts[u.round() as usize..].iter().sum();
        return Some(MannWhitney {
            u1,
            p: (2.0 * upper / total).min(1.0),
            exact: true,
        });
    }
    let n = (n1 + n2) as f64;
    let sigma = (nn / 12.0 * ((n + 1.0) - tie_term / (n * (n - 1.0)))).sqrt();
    let p = if sigma == 0.0 {
        1.0
    } else {
        let z = (u - nn / 2.0 - 0.5) / sigma;
        (2.0 * (1.0 - normal_cdf(z))).clamp(0.0, 1.0)
    };
    Some(MannWhitney {
        u1,
        p,
        exact: false,
    })
}

/// The smallest two-sided p-value the Mann–Whitney test can give for these sample
/// sizes (complete separation): below the significance level, or no verdict is
/// possible at all.
pub fn mann_whitney_floor(n1: usize, n2: usize) -> f64 {
    // 2 / C(n1 + n2, n1)
    let mut c = 1.0;
    for k in 0..n1.min(n2) {
        c = c * (n1 + n2 - k) as f64 / (k + 1) as f64;
    }
    (2.0 / c).min(1.0)
}

/// ln Γ(x), Lanczos approximation (g = 7, n = 9), relative error < 1e-15.
fn ln_gamma(x: f64) -> f64 {
    const G: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        let pi = std::f64::consts::PI;
        return (pi / (pi * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut a = G[0];
    let t = x + 7.5;
    for (i, g) in G.iter().enumerate().skip(1) {
        a += g / (x + i as f64);
    }
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

/// The regularized incomplete beta function I_x(a, b), by its continued fraction
/// (modified Lentz), using the symmetry I_x(a,b) = 1 − I_{1−x}(b,a) where it converges
/// faster.
pub fn incomplete_beta(x: f64, a: f64, b: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let front =
        (ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln()).exp();
    if x > (a + 1.0) / (a + b + 2.0) {
        return 1.0 - incomplete_beta(1.0 - x, b, a);
    }
    const TINY: f64 = 1e-300;
    let mut c = 1.0;
    let mut d = 1.0 - (a + b) * x / (a + 1.0);
    if d.abs() < TINY {
        d = TINY;
    }
    d = 1.0 / d;
    let mut f = d;
    for m in 1..300 {
        let m = m as f64;
        // Even step.
        let num = m * (b - m) * x / ((a + 2.0 * m - 1.0) * (a + 2.0 * m));
        d = 1.0 + num * d;
        d = if d.abs() < TINY { 1.0 / TINY } else { 1.0 / d };
        c = 1.0 + num / c;
        if c.abs() < TINY {
            c = TINY;
        }
        f *= d * c;
        // Odd step.
        let num = -(a + m) * (a + b + m) * x / ((a + 2.0 * m) * (a + 2.0 * m + 1.0));
        d = 1.0 + num * d;
        d = if d.abs() < TINY { 1.0 / TINY } else { 1.0 / d };
        c = 1.0 + num / c;
        if c.abs() < TINY {
            c = TINY;
        }
        let delta = d * c;
        f *= delta;
        if (delta - 1.0).abs() < 1e-15 {
            break;
        }
    }
    front * f / a
}

/// Two-sided p-value of Student's t with `df` degrees of freedom.
pub fn t_two_sided(t: f64, df: f64) -> f64 {
    if !t.is_finite() {
        return 0.0;
    }
    incomplete_beta(df / (df + t * t), df / 2.0, 0.5)
}

/// The power at which a comparison states the smallest change it could see.
pub const POWER: f64 = 0.8;

/// The quantile of Student's t with `df` degrees of freedom that a two-sided test
/// exceeds with probability `p` (bisection on the exact distribution).
pub fn t_critical(df: f64, p: f64) -> f64 {
    let (mut lo, mut hi) = (0.0f64, 1e3f64);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if t_two_sided(mid, df) > p {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

/// The one-sided quantile for the stated power: P(T ≤ q) = [`POWER`].
pub fn power_quantile(df: f64) -> f64 {
    t_critical(df, 2.0 * (1.0 - POWER))
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TTest {
    pub t: f64,
    pub df: f64,
    pub p: f64,
}

fn mean_var(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let m = v.iter().sum::<f64>() / n;
    let var = if v.len() > 1 {
        v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1.0)
    } else {
        0.0
    };
    (m, var)
}

/// Student's two-sample t-test with pooled variance, two-sided. `None` without at
/// least three points in all (no degrees of freedom).
pub fn student_t(x: &[f64], y: &[f64]) -> Option<TTest> {
    let (n1, n2) = (x.len() as f64, y.len() as f64);
    if x.is_empty() || y.is_empty() || x.len() + y.len() < 3 {
        return None;
    }
    let ((m1, v1), (m2, v2)) = (mean_var(x), mean_var(y));
    let df = n1 + n2 - 2.0;
    let pooled = ((n1 - 1.0) * v1 + (n2 - 1.0) * v2) / df;
    let se = (pooled * (1.0 / n1 + 1.0 / n2)).sqrt();
    let t = if se == 0.0 {
        if m1 == m2 {
            0.0
        } else {
            f64::INFINITY.copysign(m1 - m2)
        }
    } else {
        (m1 - m2) / se
    };
    Some(TTest {
        t,
        df,
        p: t_two_sided(t, df),
    })
}

/// Welch's t-test (unequal variances), two-sided. Checked against R; `compare` uses
/// Mann–Whitney and the bootstrap today, so only the tests call it.
#[cfg(test)]
pub fn welch_t(x: &[f64], y: &[f64]) -> Option<TTest> {
    let (n1, n2) = (x.len() as f64, y.len() as f64);
    if x.len() < 2 || y.len() < 2 {
        return None;
    }
    let ((m1, v1), (m2, v2)) = (mean_var(x), mean_var(y));
    let (a, b) = (v1 / n1, v2 / n2);
    if a + b == 0.0 {
        return student_t(x, y);
    }
    let t = (m1 - m2) / (a + b).sqrt();
    let df = (a + b).powi(2) / (a * a / (n1 - 1.0) + b * b / (n2 - 1.0));
    Some(TTest {
        t,
        df,
        p: t_two_sided(t, df),
    })
}

/// A small deterministic generator (xorshift64*): the same data gives the same
/// interval on every machine and every run.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) as usize % n
    }
}

/// Percentile bootstrap confidence interval (`level`, e.g. 0.95) for the ratio
/// median(y) / median(x), from `resamples` resamples of both samples.
pub fn bootstrap_ratio_ci(
    x: &[f64],
    y: &[f64],
    level: f64,
    resamples: usize,
) -> Option<(f64, f64)> {
    if x.is_empty() || y.is_empty() {
        return None;
    }
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut ratios = Vec::with_capacity(resamples);
    let (mut bx, mut by) = (vec![0.0; x.len()], vec![0.0; y.len()]);
    for _ in 0..resamples {
        for v in bx.iter_mut() {
            *v = x[rng.below(x.len())];
        }
        for v in by.iter_mut() {
            *v = y[rng.below(y.len())];
        }
        let (mx, my) = (median(&bx)?, median(&by)?);
        if mx != 0.0 {
            ratios.push(my / mx);
        }
    }
    if ratios.is_empty() {
        return None;
    }
    ratios.sort_by(f64::total_cmp);
    let tail = (1.0 - level) / 2.0;
    let at =
        |q: f64| ratios[((q * (ratios.len() - 1) as f64).round() as usize).min(ratios.len() - 1)];
    Some((at(tail), at(1.0 - tail)))
}

/// Benjamini–Hochberg adjusted p-values (false discovery rate), in the input's order.
pub fn benjamini_hochberg(p: &[f64]) -> Vec<f64> {
    let m = p.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&a, &b| p[a].total_cmp(&p[b]));
    let mut adjusted = vec![0.0; m];
    let mut running = 1.0f64;
    for (rank, &i) in order.iter().enumerate().rev() {
        running = running.min(p[i] * m as f64 / (rank + 1) as f64);
        adjusted[i] = running.min(1.0);
    }
    adjusted
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    fn mann_whitney_matches_scipys_example() {
        // SciPy's `mannwhitneyu` documentation (ages of male and female employees):
        // U1 = 17; exact two-sided p = 0.1111111111111111; asymptotic (with continuity
        // correction) p = 0.11134688653314041.
        let males = [19.0, 22.0, 16.0, 29.0, 24.0];
        let females = [20.0, 11.0, 17.0, 12.0];
        let r = mann_whitney(&males, &females).unwrap();
        assert_eq!(r.u1, 17.0);
        assert!(r.exact);
        assert!(close(r.p, 0.111_111_111_111_111_1, 1e-12), "{}", r.p);
        // The normal approximation SciPy reports for the same data.
        let n = 9.0;
        let sigma = (20.0f64 / 12.0 * (n + 1.0)).sqrt();
        let z = (17.0 - 10.0 - 0.5) / sigma;
        let p_asym = 2.0 * (1.0 - normal_cdf(z));
        assert!(close(p_asym, 0.111_346_886_533_140_41, 1e-6), "{p_asym}");
    }

    #[test]
    fn mann_whitney_with_ties_uses_the_corrected_normal_approximation() {
        // Worked from the definition: ranks 1, 3, 3, 5.5, 7 for x give U1 = 4.5; the
        // tie groups {2,2,2}, {3,3}, {6,6} give sigma^2 = 25/12 * (11 - 36/90) = 22.083;
        // z = (20.5 - 12.5 - 0.5) / 4.6993 = 1.5960; p = 2 * (1 - Phi(z)) = 0.11049.
        let r = mann_whitney(&[1.0, 2.0, 2.0, 3.0, 4.0], &[2.0, 3.0, 5.0, 6.0, 6.0]).unwrap();
        assert!(!r.exact);
        assert_eq!(r.u1, 4.5);
        assert!(close(r.p, 0.11049, 1e-4), "{}", r.p);
    }

    #[test]
    fn mann_whitney_exact_counts_are_a_distribution() {
        // For n1 = n2 = 3 there are C(6,3) = 20 arrangements, U symmetric around 4.5.
        let c = u_counts(3, 3);
        assert_eq!(c, vec![1.0, 1.0, 2.0, 3.0, 3.0, 3.0, 3.0, 2.0, 1.0, 1.0]);
        // Complete separation of 5 vs 5: p = 2/252.
        let r = mann_whitney(&[1.0, 2.0, 3.0, 4.0, 5.0], &[6.0, 7.0, 8.0, 9.0, 10.0]).unwrap();
        assert!(close(r.p, 2.0 / 252.0, 1e-12));
        assert!(close(mann_whitney_floor(5, 5), 2.0 / 252.0, 1e-12));
        assert!(close(mann_whitney_floor(3, 3), 0.1, 1e-12));
    }

    #[test]
    fn student_and_welch_match_rs_sleep_example() {
        // R: t.test(extra ~ group, data = sleep, var.equal = TRUE):
        //   t = -1.8608, df = 18, p-value = 0.07919
        // R: t.test(extra ~ group, data = sleep):
        //   t = -1.8608, df = 17.776, p-value = 0.07939
        let g1 = [0.7, -1.6, -0.2, -1.2, -0.1, 3.4, 3.7, 0.8, 0.0, 2.0];
        let g2 = [1.9, 0.8, 1.1, 0.1, -0.1, 4.4, 5.5, 1.6, 4.6, 3.4];
        let s = student_t(&g1, &g2).unwrap();
        assert!(close(s.t, -1.8608, 1e-4), "{}", s.t);
        assert_eq!(s.df, 18.0);
        assert!(close(s.p, 0.07919, 1e-5), "{}", s.p);
        let w = welch_t(&g1, &g2).unwrap();
        assert!(close(w.df, 17.776, 1e-3), "{}", w.df);
        assert!(close(w.p, 0.07939, 1e-5), "{}", w.p);
    }

    #[test]
    fn student_quantiles_match_tables() {
        // SciPy: scipy.stats.t.ppf(0.975, [4, 9, 29]) = 2.776445, 2.262157, 2.045230.
        for (df, q) in [(4.0, 2.776445), (9.0, 2.262157), (29.0, 2.045230)] {
            assert!((t_critical(df, 0.05) - q).abs() < 1e-5, "df {df}");
        }
        // One-sided 80%: scipy.stats.t.ppf(0.8, 9) = 0.883404.
        assert!((power_quantile(9.0) - 0.883404).abs() < 1e-5);
    }

    #[test]
    fn incomplete_beta_matches_closed_forms() {
        // I_x(1, 1) = x; I_x(a, 1) = x^a; I_0.5(a, a) = 0.5.
        assert!(close(incomplete_beta(0.3, 1.0, 1.0), 0.3, 1e-12));
        assert!(close(incomplete_beta(0.6, 3.0, 1.0), 0.216, 1e-12));
        assert!(close(incomplete_beta(0.5, 7.5, 7.5), 0.5, 1e-12));
        // t = 2.228 with 10 df is the two-sided 5% critical value.
        assert!(close(t_two_sided(2.228_138_85, 10.0), 0.05, 1e-6));
    }

    #[test]
    fn benjamini_hochberg_matches_r_p_adjust() {
        // R: p.adjust(c(0.01, 0.04, 0.03, 0.005), "BH") = 0.02 0.04 0.04 0.02
        let a = benjamini_hochberg(&[0.01, 0.04, 0.03, 0.005]);
        for (x, want) in a.iter().zip([0.02, 0.04, 0.04, 0.02]) {
            assert!(close(*x, want, 1e-12), "{a:?}");
        }
    }

    #[test]
    fn bootstrap_interval_covers_the_true_ratio_and_is_deterministic() {
        let x: Vec<f64> = (0..12).map(|i| 100.0 + (i % 5) as f64).collect();
        let y: Vec<f64> = x.iter().map(|v| v * 1.5).collect();
        let (lo, hi) = bootstrap_ratio_ci(&x, &y, 0.95, 2000).unwrap();
        assert!(lo <= 1.5 && 1.5 <= hi, "{lo}..{hi}");
        assert!(lo > 1.4 && hi < 1.6, "{lo}..{hi}");
        assert_eq!(bootstrap_ratio_ci(&x, &y, 0.95, 2000), Some((lo, hi)));
    }
}
