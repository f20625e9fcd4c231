//! Leak detection for a resource series (RSS, open FDs, threads) sampled over a run.
//! The warm-up (caches filling, pools growing) is found, not assumed: a two-segment fit
//! looks for the point after which growth settles; what follows is judged. The growth
//! is the Theil–Sen slope; it counts as a trend only if the autocorrelation-corrected
//! Mann–Kendall test says so; and it is a leak only if, projected over the horizon, it
//! exceeds the budget — and only if it is sustained: the judged window sets new highs
//! in at least three of its four quarters, the last among them. A flat service with
//! noisy RSS passes; a connection pool that grew in one step passes (one step is not a
//! trend); a slow steady leak fails.

use super::stats::{least_squares, mann_kendall, theil_sen, MannKendall};

/// What is judged a leak.
#[derive(Debug, Clone, Copy)]
pub struct Policy {
    /// Significance level of the trend test.
    pub alpha: f64,
    /// How far to project the growth, in the series' x unit (e.g. seconds, operations).
    pub horizon: f64,
    /// Growth over the horizon that is tolerated, in the series' y unit.
    pub budget: f64,
}

#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct Leak {
    /// x below which points were dropped as warm-up.
    pub warmup_until: f64,
    /// How many points the warm-up was.
    pub warmup_points: usize,
    pub points: usize,
    /// Growth per unit of x (Theil–Sen).
    pub slope: f64,
    /// Growth projected over the horizon.
    pub projected: f64,
    pub p_value: f64,
    pub z: f64,
    pub leak: bool,
    /// The verdict in words.
    pub reason: String,
}

/// Index where growth settles: the breakpoint of the best two-segment fit within the
/// first half, if the first segment grows at least twice as fast as the second and its
/// growth stands well clear of the noise (four standard deviations of the residuals).
fn warmup_end(x: &[f64], y: &[f64]) -> usize {
    let n = x.len();
    if n < 20 {
        return 0;
    }
    let sse = |a: usize, b: usize| -> Option<(f64, f64)> {
        let (m, c) = least_squares(&x[a..b], &y[a..b])?;
        Some((
            m,
            x[a..b]
                .iter()
                .zip(&y[a..b])
                .map(|(xi, yi)| (yi - (m * xi + c)).powi(2))
                .sum(),
        ))
    };
    let Some((_, whole)) = sse(0, n) else {
        return 0;
    };
    let mut best = (whole, 0usize, 0.0, 0.0, 0.0);
    let step = (n / 40).max(1);
    let mut b = (n / 20).max(3);
    while b <= n / 2 {
        if let (Some((m1, e1)), Some((m2, e2))) = (sse(0, b), sse(b, n)) {
            if e1 + e2 < best.0 {
                best = (e1 + e2, b, m1, m2, e2);
            }
        }
        b += step;
    }
    let (_, b, m1, m2, e2) = best;
    if b == 0 {
        return 0;
    }
    let growth = m1 * (x[b - 1] - x[0]);
    let sd = (e2 / (n - b) as f64).sqrt();
    if m1 > 0.0 && m1 > 2.0 * m2.max(0.0) && growth > 4.0 * sd {
        b
    } else {
        0
    }
}

/// Quarters of the judged window that must set a new high for growth to be a trend.
pub const SUSTAINED_QUARTERS: usize = 3;

/// Does the growth go on? Each quarter of the series that rises above every earlier
/// point sets a new high; a trend sets them in at least [`SUSTAINED_QUARTERS`] of the
/// four quarters, the last among them. A pool that grew once, early, sets one.
pub fn sustained(y: &[f64]) -> bool {
    if y.len() < 4 {
        return false;
    }
    let q = |k: usize| &y[k * y.len() / 4..(k + 1) * y.len() / 4];
    let mut high = f64::NEG_INFINITY;
    let mut highs = [false; 4];
    for (k, h) in highs.iter_mut().enumerate() {
        let top = q(k).iter().copied().fold(f64::NEG_INFINITY, f64::max);
        // The first quarter sets a new high only if it rises within itself.
        let first = q(k).first().copied().unwrap_or(top);
        *h = if k == 0 { top > first } else { top > high };
        high = high.max(top);
    }
    highs[3] && highs.iter().filter(|h| **h).count() >= SUSTAINED_QUARTERS
}

/// A p-value for people.
pub fn p_text(p: f64) -> String {
    if p < 1e-6 {
        "Mann–Kendall p < 1e-6".into()
    } else {
        if p < 0.001 {
            format!("Mann–Kendall p = {p:.1e}")
        } else {
            format!("Mann–Kendall p = {p:.3}")
        }
    }
}

/// Judges the series `(x, y)` (x increasing: time or work done).
pub fn detect(x: &[f64], y: &[f64], policy: Policy) -> Option<Leak> {
    if x.len() < 8 || x.len() != y.len() {
        return None;
    }
    let cut = warmup_end(x, y);
    let (mut xs, mut ys) = (&x[cut..], &y[cut..]);
    // Theil–Sen and Mann–Kendall are O(n²): judge at most 400 evenly spaced points.
    let stride = xs.len().div_ceil(400);
    let thinned: (Vec<f64>, Vec<f64>);
    if stride > 1 {
        thinned = (
            xs.iter().step_by(stride).copied().collect(),
            ys.iter().step_by(stride).copied().collect(),
        );
        xs = &thinned.0;
        ys = &thinned.1;
    }
    let slope = theil_sen(xs, ys)?;
    let mk: MannKendall = mann_kendall(ys, true)?;
    let projected = slope * policy.horizon;
    let significant = mk.p < policy.alpha && mk.s > 0.0;
    let steady = sustained(ys);
    let trend = significant && steady;
    let leak = trend && projected > policy.budget;
    let reason = if significant && !steady {
        format!(
            "grew, but not steadily ({}; new highs in fewer than {SUSTAINED_QUARTERS} quarters or none at the end): a step, not a trend",
            p_text(mk.p)
        )
    } else if leak {
        format!(
            "growing ({}), beyond the budget over the horizon",
            p_text(mk.p)
        )
    } else if trend {
        format!(
            "growing ({}) but within the budget over the horizon",
            p_text(mk.p)
        )
    } else {
        format!("no significant growth ({})", p_text(mk.p))
    };
    Some(Leak {
        warmup_until: x[cut],
        warmup_points: cut,
        points: xs.len(),
        slope,
        projected,
        p_value: mk.p,
        z: mk.z,
        leak,
        reason,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn noise(i: usize) -> f64 {
        // Deterministic pseudo-noise in [-1, 1].
        let mut x = (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        x ^= x >> 29;
        (x % 2001) as f64 / 1000.0 - 1.0
    }

    const POLICY: Policy = Policy {
        alpha: 0.01,
        horizon: 3600.0,
        budget: 10.0 * 1024.0 * 1024.0,
    };

    #[test]
    fn a_steady_leak_after_warm_up_is_measured_and_flagged() {
        // 60 s of warm-up growing 1 MiB/s, then 4 KiB/s for 10 minutes, with ±200 KiB noise.
        let x: Vec<f64> = (0..660).map(|i| i as f64).collect();
        let y: Vec<f64> = x
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let base = if *t < 60.0 {
                    t * 1048576.0
                } else {
                    60.0 * 1048576.0 + (t - 60.0) * 4096.0
                };
                base + 200.0 * 1024.0 * noise(i)
            })
            .collect();
        let l = detect(&x, &y, POLICY).unwrap();
        assert!(
            l.warmup_until >= 45.0 && l.warmup_until <= 90.0,
            "{}",
            l.warmup_until
        );
        assert!((l.slope / 4096.0 - 1.0).abs() < 0.1, "{}", l.slope);
        assert!(l.leak, "{}", l.reason);
    }

    #[test]
    fn one_step_is_not_a_trend_but_a_staircase_is() {
        // An FD count: a pool that grew from 11 to 20 early in a soak, then held.
        let x: Vec<f64> = (0..24).map(|i| i as f64 * 0.25).collect();
        let step: Vec<f64> = (0..24).map(|i| if i < 5 { 11.0 } else { 20.0 }).collect();
        let fds = Policy {
            alpha: 0.01,
            horizon: 86400.0,
            budget: 100.0,
        };
        let l = detect(&x, &step, fds).unwrap();
        assert!(!l.leak, "{}", l.reason);
        assert!(!sustained(&step));
        // One descriptor lost every second: new highs all along.
        let leak: Vec<f64> = x.iter().map(|t| 11.0 + t.floor()).collect();
        assert!(sustained(&leak));
        let l = detect(&x, &leak, fds).unwrap();
        assert!(l.leak, "{}", l.reason);
    }

    #[test]
    fn flat_noise_passes() {
        let x: Vec<f64> = (0..600).map(|i| i as f64).collect();
        let y: Vec<f64> = (0..600)
            .map(|i| 50.0 * 1048576.0 + 300.0 * 1024.0 * noise(i))
            .collect();
        let l = detect(&x, &y, POLICY).unwrap();
        assert!(!l.leak, "{}", l.reason);
        assert_eq!(l.warmup_until, 0.0);
    }

    #[test]
    fn a_small_trend_within_budget_passes() {
        // 100 bytes/s is 360 KiB an hour: a trend, but inside a 10 MiB budget.
        let x: Vec<f64> = (0..600).map(|i| i as f64).collect();
        let y: Vec<f64> = x.iter().map(|t| 1e8 + 100.0 * t).collect();
        let l = detect(&x, &y, POLICY).unwrap();
        assert!(
            !l.leak && l.reason.contains("within the budget"),
            "{}",
            l.reason
        );
    }
}
