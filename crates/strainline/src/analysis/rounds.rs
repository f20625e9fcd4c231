//! The rounds verdict (the job-server seed's leak test): memory retained per operation
//! (Theil–Sen over the rounds, with a Mann–Kendall trend test) and throughput falling
//! over the rounds. A pure function of the round records.

use super::stats::{mann_kendall, median, theil_sen};

/// A retained-memory trend this significant counts (one-sided, growing).
pub const TREND_ALPHA: f64 = 0.05;
/// Growth is projected over this many times the operations measured.
pub const PROJECTION: f64 = 10.0;
/// Throughput falling by more than this share over the rounds is a degradation.
pub const DEGRADATION: f64 = 0.2;

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Verdict {
    /// Bytes retained per operation (Theil–Sen slope of RSS over operations done).
    pub retained_per_op: f64,
    /// RSS after the last round less before the first, bytes.
    pub retained_total: f64,
    /// The trend test's p-value (1 when it could not run).
    pub trend_p: f64,
    pub leaking: bool,
    /// Median throughput of the rounds, ops/s.
    pub throughput: f64,
    /// Share of throughput lost over the rounds (negative: it rose).
    pub drop: f64,
    pub degrading: bool,
}

/// `ops[i]` operations done and `rss[i]` bytes resident after round i; `tput[i]` its
/// throughput; `base` the RSS before the first round.
pub fn judge(ops: &[f64], rss: &[f64], tput: &[f64], base: f64, leak_budget: f64) -> Verdict {
    let slope = theil_sen(ops, rss).unwrap_or(0.0);
    let mk = mann_kendall(rss, false);
    let projected = slope * ops.last().copied().unwrap_or(0.0) * PROJECTION;
    let significant = mk.is_some_and(|m| m.p < TREND_ALPHA && m.s > 0.0);
    let med = median(tput).unwrap_or(0.0);
    let rounds_x: Vec<f64> = (0..tput.len()).map(|i| i as f64).collect();
    let tslope = theil_sen(&rounds_x, tput).unwrap_or(0.0);
    let tmk = mann_kendall(tput, false);
    let drop = if med > 0.0 {
        -tslope * tput.len() as f64 / med
    } else {
        0.0
    };
    Verdict {
        retained_per_op: slope,
        retained_total: rss.last().copied().unwrap_or(base) - base,
        trend_p: mk.map_or(1.0, |m| m.p),
        leaking: significant && projected > leak_budget,
        throughput: med,
        drop,
        degrading: drop > DEGRADATION && tmk.is_some_and(|m| m.p < TREND_ALPHA && m.s < 0.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_steady_leak_is_found_and_a_flat_series_is_not() {
        let ops: Vec<f64> = (1..=8).map(|i| (i * 1000) as f64).collect();
        let base = 10e6;
        // 4 KiB per operation, plus a little noise.
        let rss: Vec<f64> = ops
            .iter()
            .enumerate()
            .map(|(i, o)| base + 4096.0 * o + if i % 2 == 0 { 3000.0 } else { -3000.0 })
            .collect();
        let tput = vec![500.0; 8];
        let v = judge(&ops, &rss, &tput, base, 10.0 * 1048576.0);
        assert!(v.leaking, "{v:?}");
        assert!((v.retained_per_op - 4096.0).abs() < 10.0, "{v:?}");
        assert!(!v.degrading);
        let flat: Vec<f64> = (0..8)
            .map(|i| base + if i % 2 == 0 { 1e4 } else { -1e4 })
            .collect();
        assert!(!judge(&ops, &flat, &tput, base, 10.0 * 1048576.0).leaking);
    }

    #[test]
    fn throughput_halving_over_the_rounds_is_a_degradation() {
        let ops: Vec<f64> = (1..=8).map(|i| i as f64).collect();
        let rss = vec![1e6; 8];
        let tput: Vec<f64> = (0..8).map(|i| 1000.0 - 70.0 * i as f64).collect();
        let v = judge(&ops, &rss, &tput, 1e6, 1e7);
        assert!(v.degrading && v.drop > 0.5, "{v:?}");
    }
}
