//! The statistics strainline's verdicts rest on, each checked in its tests against
//! values worked out from the published definitions: medians, the Theil–Sen slope
//! (Sen 1968), the Mann–Kendall trend test (Kendall 1975) with the Hamed & Rao (1998)
//! correction for autocorrelation, and a least-squares line.

/// The median; `None` for no data.
pub fn median(v: &[f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    Some(if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    })
}

/// Theil–Sen slope: the median of the slopes between all pairs of points. Robust to
/// outliers (up to 29% of the points) where least squares is not.
pub fn theil_sen(x: &[f64], y: &[f64]) -> Option<f64> {
    let mut slopes = Vec::with_capacity(x.len() * x.len().saturating_sub(1) / 2);
    for i in 0..x.len() {
        for j in i + 1..x.len() {
            let dx = x[j] - x[i];
            if dx != 0.0 {
                slopes.push((y[j] - y[i]) / dx);
            }
        }
    }
    median(&slopes)
}

/// Ordinary least squares: `(slope, intercept)`.
pub fn least_squares(x: &[f64], y: &[f64]) -> Option<(f64, f64)> {
    let n = x.len() as f64;
    if x.len() < 2 {
        return None;
    }
    let (mx, my) = (x.iter().sum::<f64>() / n, y.iter().sum::<f64>() / n);
    let sxx: f64 = x.iter().map(|a| (a - mx).powi(2)).sum();
    if sxx == 0.0 {
        return None;
    }
    let sxy: f64 = x.iter().zip(y).map(|(a, b)| (a - mx) * (b - my)).sum();
    let slope = sxy / sxx;
    Some((slope, my - slope * mx))
}

/// The standard normal cumulative distribution (Abramowitz & Stegun 26.2.17, error < 7.5e-8).
pub fn normal_cdf(z: f64) -> f64 {
    let t = 1.0 / (1.0 + 0.231_641_9 * z.abs());
    let poly = t
        * (0.319_381_530
            + t * (-0.356_563_782
                + t * (1.781_477_937 + t * (-1.821_255_978 + t * 1.330_274_429))));
    let tail = (-z * z / 2.0).exp() / (2.0 * std::f64::consts::PI).sqrt() * poly;
    if z >= 0.0 {
        1.0 - tail
    } else {
        tail
    }
}

/// The result of a Mann–Kendall test.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MannKendall {
    /// Kendall's S: concordant minus discordant pairs.
    pub s: f64,
    /// Var(S), corrected for ties and (optionally) autocorrelation.
    pub var_s: f64,
    pub z: f64,
    /// Two-sided p-value.
    pub p: f64,
}

pub(crate) fn ranks(v: &[f64]) -> Vec<f64> {
    let mut idx: Vec<usize> = (0..v.len()).collect();
    idx.sort_by(|&a, &b| v[a].total_cmp(&v[b]));
    let mut r = vec![0.0; v.len()];
    let mut i = 0;
    while i < idx.len() {
        let mut j = i;
        while j + 1 < idx.len() && v[idx[j + 1]] == v[idx[i]] {
            j += 1;
        }
        let avg = (i + j) as f64 / 2.0 + 1.0;
        for k in i..=j {
            r[idx[k]] = avg;
        }
        i = j + 1;
    }
    r
}

/// The Mann–Kendall test for a monotonic trend in `y` (in time order). With
/// `autocorrelation`, Var(S) is inflated by the Hamed & Rao factor computed from the
/// significant autocorrelations of the ranks of the Sen-detrended series, so that a
/// smooth but trendless wander is not taken for a trend.
pub fn mann_kendall(y: &[f64], autocorrelation: bool) -> Option<MannKendall> {
    let n = y.len();
    if n < 4 {
        return None;
    }
    let mut s = 0.0;
    for i in 0..n {
        for j in i + 1..n {
            s += (y[j] - y[i]).signum() * f64::from(y[j] != y[i]);
        }
    }
    let nf = n as f64;
    // Ties: Σ t(t−1)(2t+5) over groups of equal values.
    let mut sorted = y.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mut ties = 0.0;
    let mut i = 0;
    while i < n {
        let mut j = i;
        while j + 1 < n && sorted[j + 1] == sorted[i] {
            j += 1;
        }
        let t = (j - i + 1) as f64;
        ties += t * (t - 1.0) * (2.0 * t + 5.0);
        i = j + 1;
    }
    let mut var_s = (nf * (nf - 1.0) * (2.0 * nf + 5.0) - ties) / 18.0;
    if autocorrelation {
        let x: Vec<f64> = (0..n).map(|i| i as f64).collect();
        let slope = theil_sen(&x, y).unwrap_or(0.0);
        let detrended: Vec<f64> = y
            .iter()
            .enumerate()
            .map(|(i, v)| v - slope * i as f64)
            .collect();
        let r = ranks(&detrended);
        let mean = r.iter().sum::<f64>() / nf;
        let denom: f64 = r.iter().map(|v| (v - mean).powi(2)).sum();
        if denom > 0.0 {
            let bound = 1.96 / nf.sqrt();
            let mut sum = 0.0;
            for k in 1..n - 2 {
                let rho: f64 = (0..n - k)
                    .map(|i| (r[i] - mean) * (r[i + k] - mean))
                    .sum::<f64>()
                    / denom;
                if rho.abs() > bound {
                    let m = (n - k) as f64;
                    sum += m * (m - 1.0) * (m - 2.0) * rho;
                }
            }
            let factor = 1.0 + 2.0 / (nf * (nf - 1.0) * (nf - 2.0)) * sum;
            var_s *= factor.max(1.0);
        }
    }
    let z = if s > 0.0 {
        (s - 1.0) / var_s.sqrt()
    } else if s < 0.0 {
        (s + 1.0) / var_s.sqrt()
    } else {
        0.0
    };
    let p = 2.0 * (1.0 - normal_cdf(z.abs()));
    Some(MannKendall { s, var_s, z, p })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn theil_sen_ignores_an_outlier() {
        // Pairwise slopes of (1,1) (2,2) (3,3) (4,4) (5,100): six of ten are 1, so the
        // median is 1; least squares is dragged to Sxy/Sxx = 200/10 = 20.
        let x = [1.0, 2.0, 3.0, 4.0, 5.0];
        let y = [1.0, 2.0, 3.0, 4.0, 100.0];
        assert_eq!(theil_sen(&x, &y), Some(1.0));
        let (ls, _) = least_squares(&x, &y).unwrap();
        assert!((ls - 20.0).abs() < 1e-9, "{ls}");
    }

    #[test]
    fn normal_cdf_matches_tables() {
        // Φ(1.96) = 0.97500, Φ(−1) = 0.15866, Φ(0) = 0.5.
        assert!((normal_cdf(1.96) - 0.975_002).abs() < 1e-6);
        assert!((normal_cdf(-1.0) - 0.158_655).abs() < 1e-6);
        assert!((normal_cdf(0.0) - 0.5).abs() < 1e-7);
    }

    #[test]
    fn mann_kendall_textbook_values() {
        // 1..5 strictly increasing: S = 10, Var(S) = 5·4·15/18 = 16.667,
        // Z = (10 − 1)/√16.667 = 2.2045, two-sided p = 0.0275.
        let mk = mann_kendall(&[1.0, 2.0, 3.0, 4.0, 5.0], false).unwrap();
        assert_eq!(mk.s, 10.0);
        assert!((mk.var_s - 16.6667).abs() < 1e-3);
        assert!((mk.z - 2.2045).abs() < 1e-3, "{}", mk.z);
        assert!((mk.p - 0.0275).abs() < 1e-3, "{}", mk.p);
        // Ties: [1, 2, 2, 3]: S = 5 (one tied pair adds 0), Var = (4·3·13 − 2·1·9)/18 = 7.667.
        let mk = mann_kendall(&[1.0, 2.0, 2.0, 3.0], false).unwrap();
        assert_eq!(mk.s, 5.0);
        assert!((mk.var_s - 7.6667).abs() < 1e-3);
    }

    #[test]
    fn autocorrelation_widens_the_variance_of_a_wandering_series() {
        // A slow sine wave without trend: strongly autocorrelated, no monotonic trend.
        let y: Vec<f64> = (0..60).map(|i| (i as f64 / 9.0).sin()).collect();
        let plain = mann_kendall(&y, false).unwrap();
        let corrected = mann_kendall(&y, true).unwrap();
        assert!(corrected.var_s > plain.var_s);
        assert!(corrected.p >= plain.p);
    }
}
