//! Change points in a metric's history: where did this series shift, and how sure are
//! we. Deterministic E-Divisive means with a Student's t-test, the method of Apache
//! Otava (Fleming et al., "Hunter: Using Change Point Detection to Hunt for Performance
//! Regressions", ICPE 2023), reimplemented:
//!
//! 1. *Split*: over sliding windows of `window` points (step `window / 2`), repeatedly
//!    take the split that maximises the energy-distance statistic Q̂ (Matteson & James
//!    2014, exponent 1) within the current segments, and keep it while the t-test of
//!    the two sides gives p ≤ 10 × `max_p` (the "weak" change points).
//! 2. *Merge*: over the whole series, recompute every weak point's t-test between its
//!    neighbours and drop the weakest (highest p) until all have p < `max_p` and a
//!    relative change above `min_magnitude`.
//!
//! No permutations, no randomness: the same history always gives the same points.

use super::twosample::student_t;

/// Otava's defaults.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Params {
    pub window: usize,
    pub max_p: f64,
    pub min_magnitude: f64,
}

impl Default for Params {
    fn default() -> Params {
        Params {
            window: 50,
            max_p: 0.001,
            min_magnitude: 0.0,
        }
    }
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ChangePoint {
    /// The first point after the change.
    pub index: usize,
    pub mean_before: f64,
    pub mean_after: f64,
    pub stddev_before: f64,
    pub stddev_after: f64,
    /// Two-sided p-value of the t-test between the segments on either side.
    pub p: f64,
}

impl ChangePoint {
    /// Relative change from before to after (+0.2 = 20% higher).
    pub fn change(&self) -> f64 {
        if self.mean_before == 0.0 {
            0.0
        } else {
            self.mean_after / self.mean_before - 1.0
        }
    }

    /// The larger of the forward and backward relative changes, as Otava ranks them.
    fn magnitude(&self) -> f64 {
        let back = if self.mean_after == 0.0 {
            0.0
        } else {
            self.mean_before / self.mean_after - 1.0
        };
        self.change().abs().max(back.abs())
    }
}

fn sd(v: &[f64]) -> f64 {
    if v.len() < 2 {
        return 0.0;
    }
    let m = v.iter().sum::<f64>() / v.len() as f64;
    (v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (v.len() - 1) as f64).sqrt()
}

/// The change point at `index` between the segment boundaries `lo` and `hi`.
fn assess(series: &[f64], lo: usize, index: usize, hi: usize) -> ChangePoint {
    let (left, right) = (&series[lo..index], &series[index..hi]);
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    ChangePoint {
        index,
        mean_before: mean(left),
        mean_after: mean(right),
        stddev_before: sd(left),
        stddev_after: sd(right),
        p: student_t(left, right).map_or(1.0, |t| t.p),
    }
}

/// The split of `z[s..e]` with the largest Q̂ over τ (first index of the right part) and
/// κ (its end): `(τ, Q̂)`.
fn best_split(z: &[f64], s: usize, e: usize) -> Option<(usize, f64)> {
    if e < s + 2 {
        return None;
    }
    let mut best: Option<(usize, f64)> = None;
    let mut within_x = 0.0; // Σ_{i<k in X} |Xi − Xk|
    for tau in s + 1..e {
        // X = z[s..tau]: add z[tau-1] to the within sum.
        let xnew = z[tau - 1];
        within_x += z[s..tau - 1].iter().map(|v| (v - xnew).abs()).sum::<f64>();
        let n = (tau - s) as f64;
        let (mut cross, mut within_y) = (0.0, 0.0);
        for kappa in tau + 1..=e {
            let y = z[kappa - 1];
            cross += z[s..tau].iter().map(|v| (v - y).abs()).sum::<f64>();
            within_y += z[tau..kappa - 1].iter().map(|v| (v - y).abs()).sum::<f64>();
            let m = (kappa - tau) as f64;
            let mut q = 2.0 / (m + n) * cross;
            if n > 1.0 {
                q -= 2.0 * m / ((m + n) * (n - 1.0)) * within_x;
            }
            if m > 1.0 {
                q -= 2.0 * n / ((m + n) * (m - 1.0)) * within_y;
            }
            if best.is_none_or(|b| q > b.1) {
                best = Some((tau, q));
            }
        }
    }
    best
}

/// Change points within `z[start..end]` whose t-test passes `max_p`, found top-down.
fn detect_window(z: &[f64], start: usize, end: usize, max_p: f64) -> Vec<usize> {
    let mut points: Vec<usize> = Vec::new();
    loop {
        let mut bounds = vec![start];
        bounds.extend(&points);
        bounds.push(end);
        let candidate = bounds
            .windows(2)
            .filter_map(|w| best_split(z, w[0], w[1]).map(|(tau, q)| (w[0], tau, w[1], q)))
            .filter(|c| !points.contains(&c.1))
            .max_by(|a, b| a.3.total_cmp(&b.3));
        let Some((lo, tau, hi, _)) = candidate else {
            break;
        };
        if assess(z, lo, tau, hi).p <= max_p {
            points.push(tau);
            points.sort_unstable();
        } else {
            break;
        }
    }
    points
}

fn assess_all(z: &[f64], points: &[usize]) -> Vec<ChangePoint> {
    (0..points.len())
        .map(|i| {
            let lo = if i == 0 { 0 } else { points[i - 1] };
            let hi = points.get(i + 1).copied().unwrap_or(z.len());
            assess(z, lo, points[i], hi)
        })
        .collect()
}

/// The change points of `series`, in order.
pub fn change_points(series: &[f64], params: Params) -> Vec<ChangePoint> {
    let window = params.window.max(3);
    let first_pass = if params.max_p < 0.05 {
        params.max_p * 10.0
    } else if params.max_p < 0.5 {
        params.max_p * 2.0
    } else {
        params.max_p
    };
    // Split.
    let mut weak: Vec<usize> = Vec::new();
    let mut start = 0;
    while start < series.len() {
        let end = (start + window).min(series.len());
        let found = detect_window(series, start, end, first_pass);
        let last = found.last().copied().unwrap_or(0);
        for p in found {
            if !weak.contains(&p) {
                weak.push(p);
            }
        }
        start = last.max(start + window / 2);
    }
    weak.sort_unstable();
    // Merge.
    let mut points = weak;
    loop {
        let cps = assess_all(series, &points);
        let Some(weakest) = cps.iter().max_by(|a, b| a.p.total_cmp(&b.p)) else {
            return cps;
        };
        let drop = if weakest.p < params.max_p {
            let least = cps
                .iter()
                .min_by(|a, b| a.magnitude().total_cmp(&b.magnitude()))
                .expect("non-empty");
            if least.magnitude() > params.min_magnitude {
                return cps;
            }
            least.index
        } else {
            weakest.index
        };
        points.retain(|&p| p != drop);
    }
}

/// The smallest shift this method would find, with 80% probability, in the middle of
/// the newest `window` points of `series` (or all of them, when fewer): the t-test's
/// detectable difference between the two halves at `max_p`, given the series' noise —
/// the standard deviation pooled within the levels its change points `cps` separate, so
/// that a real change does not count as noise. Relative to the newest level's mean
/// (0.1 = a shift of 10%), and never below `min_magnitude`. `None` with fewer than
/// four points, or a mean of zero.
///
/// The search for the split makes a real finding slightly harder than one planned
/// t-test; the unit test checks the figure against injected shifts.
pub fn detectable(series: &[f64], cps: &[ChangePoint], params: Params) -> Option<f64> {
    let m = series.len().min(params.window.max(4));
    if m < 4 {
        return None;
    }
    let bounds: Vec<usize> = std::iter::once(0)
        .chain(cps.iter().map(|c| c.index))
        .chain(std::iter::once(series.len()))
        .collect();
    let (mut squares, mut df) = (0.0, 0.0);
    for w in bounds.windows(2) {
        let level = &series[w[0]..w[1]];
        if level.len() >= 2 {
            squares += sd(level).powi(2) * (level.len() - 1) as f64;
            df += (level.len() - 1) as f64;
        }
    }
    let newest = &series[bounds[bounds.len() - 2]..];
    let mean = newest.iter().sum::<f64>() / newest.len() as f64;
    if df == 0.0 || mean == 0.0 {
        return None;
    }
    let sigma = (squares / df).sqrt();
    let (left, right) = ((m / 2) as f64, (m - m / 2) as f64);
    let se = sigma * (1.0 / left + 1.0 / right).sqrt();
    let dof = m as f64 - 2.0;
    let critical = super::twosample::t_critical(dof, params.max_p);
    let shift = (critical + super::twosample::power_quantile(dof)) * se / mean.abs();
    // Nor is a shift below the smallest change reported.
    Some(shift.max(params.min_magnitude))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Standard normal noise from splitmix64 and Box–Muller: the same series on every
    /// run for a seed.
    struct Gauss(u64);

    impl Gauss {
        fn uniform(&mut self) -> f64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^= z >> 31;
            (z >> 11) as f64 / (1u64 << 53) as f64
        }
        fn next(&mut self) -> f64 {
            let (a, b) = (self.uniform().max(1e-12), self.uniform());
            (-2.0 * a.ln()).sqrt() * (2.0 * std::f64::consts::PI * b).cos()
        }
    }

    fn series(seed: u64, n: usize, level: impl Fn(usize) -> f64, sd: f64) -> Vec<f64> {
        let mut g = Gauss(seed);
        (0..n).map(|i| level(i) + sd * g.next()).collect()
    }

    #[test]
    fn the_detectable_shift_is_the_t_tests_at_the_methods_threshold() {
        // 20 runs alternating 95 and 105: sd 5.130 (n - 1 = 19), mean 100, no change
        // point. Halves of 10: se = 5.130 * sqrt(0.2) = 2.2942; Student's t for 18
        // degrees of freedom (tables; scipy.stats.t.ppf): 0.9995 → 3.9216, 0.8 → 0.8620.
        // (3.9216 + 0.8620) * 2.2942 / 100 = 0.10974.
        let z: Vec<f64> = (0..20)
            .map(|i| if i % 2 == 0 { 95.0 } else { 105.0 })
            .collect();
        let cps = change_points(&z, Params::default());
        assert!(cps.is_empty(), "{cps:?}");
        let d = detectable(&z, &cps, Params::default()).unwrap();
        assert!((d - 0.10974).abs() < 2e-4, "{d}");
        // A real change is not noise: the same wobble on two levels gives the same sd,
        // relative to the newest level's mean.
        let two: Vec<f64> = z
            .iter()
            .copied()
            .chain(z.iter().map(|v| v + 100.0))
            .collect();
        let cps = change_points(&two, Params::default());
        assert_eq!(cps.iter().map(|c| c.index).collect::<Vec<_>>(), vec![20]);
        let d = detectable(&two, &cps, Params::default()).unwrap();
        // sd pooled over two levels of 20 (df 38) = 5.130; the newest 40 points split
        // 20/20: se = 5.130 * sqrt(0.1) = 1.6222; t(38): 0.9995 → 3.5657, 0.8 → 0.8510;
        // (3.5657 + 0.8510) * 1.6222 / 200 = 0.035823.
        assert!((d - 0.035823).abs() < 2e-4, "{d}");
        assert_eq!(detectable(&z[..3], &[], Params::default()), None);
    }

    #[test]
    fn a_shift_the_size_of_the_detectable_one_is_found_and_a_third_of_it_is_not() {
        // 20 runs of noise sd 2 around 100, shifted after the tenth. The figure is
        // computed from each series itself; a shift of that size is found at the right
        // place most of the time (140 of 200: 80% is the aim, the search for the split
        // costs some of it), half of it in 14, a third of it in 1.
        let trial = |factor: f64| {
            let mut found = 0;
            for seed in 0..200 {
                let flat = series(seed, 20, |_| 100.0, 2.0);
                let d = detectable(
                    &flat,
                    &change_points(&flat, Params::default()),
                    Params::default(),
                )
                .unwrap();
                let z: Vec<f64> = flat
                    .iter()
                    .enumerate()
                    .map(|(i, v)| if i < 10 { *v } else { v + 100.0 * d * factor })
                    .collect();
                let cps = change_points(&z, Params::default());
                found += cps.iter().any(|c| c.index.abs_diff(10) <= 1) as usize;
            }
            found as f64 / 200.0
        };
        let (full, third) = (trial(1.0), trial(1.0 / 3.0));
        assert!(full >= 0.6, "a shift of the detectable size found {full}");
        assert!(third <= 0.2, "a third of it found {third}");
    }

    #[test]
    fn finds_a_known_shift_at_the_right_place() {
        // 30 runs: mean 100 (sd 2) for 15, then 120. Over 100 noise draws the shift is
        // found at run 15 every time; a spurious extra point is rare (the t-test after
        // choosing the best split is optimistic, as Otava documents).
        let (mut extra, mut changes) = (0, Vec::new());
        for seed in 0..100 {
            let z = series(seed, 30, |i| if i < 15 { 100.0 } else { 120.0 }, 2.0);
            let cps = change_points(&z, Params::default());
            let at15 = cps.iter().find(|c| c.index == 15);
            let cp = at15.unwrap_or_else(|| panic!("seed {seed}: {cps:?}"));
            assert!(cp.p < 0.001);
            changes.push(cp.change());
            extra += cps.len() - 1;
        }
        let typical = crate::analysis::stats::median(&changes).unwrap();
        assert!((typical - 0.2).abs() < 0.01, "{typical}");
        assert!(extra <= 8, "{extra} spurious change points in 100 series");
    }

    #[test]
    fn finds_nothing_in_noise_without_a_shift_most_of_the_time() {
        // Flat Gaussian series of 30: measured 6 of 300 with a spurious point at the
        // default p < 0.001.
        let flagged = (0..300)
            .filter(|&seed| {
                !change_points(&series(seed, 30, |_| 100.0, 2.0), Params::default()).is_empty()
            })
            .count();
        assert!(flagged <= 15, "{flagged} of 300 flat series flagged");
        assert!(change_points(&[5.0; 40], Params::default()).is_empty());
    }

    #[test]
    fn finds_a_regression_and_its_fix_across_windows() {
        // 120 points: 100, then 130 from 40, back to 100 from 90 — longer than a window.
        let z = series(
            7,
            120,
            |i| if (40..90).contains(&i) { 130.0 } else { 100.0 },
            2.0,
        );
        let idx: Vec<usize> = change_points(&z, Params::default())
            .iter()
            .map(|c| c.index)
            .collect();
        assert!(idx.contains(&40) && idx.contains(&90), "{idx:?}");
        assert!(idx.len() <= 3, "{idx:?}");
    }

    #[test]
    fn best_split_is_the_shift_for_a_clean_step() {
        let z = [1.0, 1.0, 1.0, 1.0, 5.0, 5.0, 5.0, 5.0];
        assert_eq!(best_split(&z, 0, z.len()).unwrap().0, 4);
    }
}
