//! When to send. The open model turns a rate shape (constant or ramp) and an arrival
//! process (evenly spaced or Poisson) into intended send times; every latency of the
//! open model is measured from these times, not from when the request actually left,
//! so a stalled target cannot hide its stall (no coordinated omission). Each worker
//! thread gets its own share of the schedule, with no shared state.

use std::time::Duration;

/// Offered load over the run.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Rate {
    /// Requests per second, constant.
    Constant(f64),
    /// From `from` to `to` requests per second, linearly over `over`.
    Ramp { from: f64, to: f64, over: Duration },
}

impl Rate {
    /// Requests per second at `t` seconds.
    pub fn at(&self, t: f64) -> f64 {
        match *self {
            Rate::Constant(r) => r,
            Rate::Ramp { from, to, over } => {
                let d = over.as_secs_f64();
                from + (to - from) * (t / d).clamp(0.0, 1.0)
            }
        }
    }

    /// Requests expected by `t` seconds: the integral of the rate.
    pub fn count_by(&self, t: f64) -> f64 {
        match *self {
            Rate::Constant(r) => r * t,
            Rate::Ramp { from, to, over } => {
                let d = over.as_secs_f64();
                let tt = t.min(d);
                let ramp = from * tt + (to - from) * tt * tt / (2.0 * d);
                ramp + to * (t - tt).max(0.0)
            }
        }
    }

    /// The time by which `n` requests are expected: the inverse of [`Rate::count_by`].
    pub fn time_of(&self, n: f64) -> f64 {
        match *self {
            Rate::Constant(r) => n / r,
            Rate::Ramp { from, to, over } => {
                let d = over.as_secs_f64();
                let k = (to - from) / d;
                let in_ramp = self.count_by(d);
                if n > in_ramp {
                    return d + (n - in_ramp) / to;
                }
                if k.abs() < 1e-12 {
                    return n / from;
                }
                // from·t + k·t²/2 = n  →  t = (−from + √(from² + 2kn)) / k
                (-from + (from * from + 2.0 * k * n).max(0.0).sqrt()) / k
            }
        }
    }
}

/// How arrivals are spread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Arrivals {
    /// Evenly spaced, like wrk2.
    Uniform,
    /// A Poisson process (exponential gaps), seeded for reproducibility.
    Poisson { seed: u64 },
}

/// One worker's share of an open-model schedule: an iterator of intended send times
/// (seconds from the start). Worker `w` of `n` takes the sends whose position in the one
/// global schedule is ≡ w (mod n) — evenly spaced or Poisson alike — so the shares of
/// every thread on every agent together are exactly the schedule one thread would send,
/// whatever the thread count or the number of machines.
pub struct Share {
    rate: Rate,
    arrivals: Arrivals,
    worker: u64,
    workers: u64,
    k: u64,
    /// Position in the global stream of the next Poisson arrival drawn.
    drawn: u64,
    /// Cumulative unit-rate arrival count (Poisson).
    cum: f64,
    rng: u64,
    /// Stop at this many sends (this worker's part of `-n`).
    quota: Option<u64>,
    /// Stop at this time, seconds.
    until: Option<f64>,
    /// A replayed log's intended times (the global schedule, sorted), instead of a rate.
    times: Option<std::sync::Arc<Vec<f64>>>,
    /// The global position of the send last returned.
    last: u64,
}

impl Share {
    pub fn new(
        rate: Rate,
        arrivals: Arrivals,
        worker: usize,
        workers: usize,
        total: Option<u64>,
        until: Option<Duration>,
    ) -> Share {
        let (w, n) = (worker as u64, workers.max(1) as u64);
        let quota = total.map(|t| t / n + u64::from(w < t % n));
        let seed = match arrivals {
            Arrivals::Poisson { seed } => seed,
            Arrivals::Uniform => 0,
        };
        Share {
            rate,
            arrivals,
            worker: w,
            workers: n,
            k: 0,
            drawn: 0,
            cum: 0.0,
            // One stream for everyone: each worker draws it all and keeps its positions.
            rng: splitmix(seed),
            quota,
            until: until.map(|d| d.as_secs_f64()),
            times: None,
            last: 0,
        }
    }

    /// A share of explicit times (a replayed log's): worker `w` of `n` takes positions
    /// ≡ w (mod n), like every other schedule.
    pub fn explicit(
        times: std::sync::Arc<Vec<f64>>,
        worker: usize,
        workers: usize,
        total: Option<u64>,
        until: Option<Duration>,
    ) -> Share {
        let mut s = Share::new(
            Rate::Constant(1.0),
            Arrivals::Uniform,
            worker,
            workers,
            total,
            until,
        );
        s.times = Some(times);
        s
    }

    /// The global position of the send last returned (a replayed request's index).
    pub fn position(&self) -> u64 {
        self.last
    }

    fn uniform01(&mut self) -> f64 {
        self.rng = splitmix(self.rng);
        // (0, 1]: never 0, so ln() is finite.
        ((self.rng >> 11) as f64 + 1.0) / (1u64 << 53) as f64
    }
}

/// splitmix64: a fast, well-mixed step of a seeded stream (also a hash finalizer).
pub fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Iterator for Share {
    type Item = f64;

    fn next(&mut self) -> Option<f64> {
        if self.quota.is_some_and(|q| self.k >= q) {
            return None;
        }
        if let Some(times) = &self.times {
            let n = self.worker + self.k * self.workers;
            let t = *times.get(n as usize)?;
            if self.until.is_some_and(|u| t >= u) {
                return None;
            }
            self.k += 1;
            self.last = n;
            return Some(t);
        }
        // The position of this send in the global count of requests.
        let n = match self.arrivals {
            Arrivals::Uniform => (self.worker + self.k * self.workers) as f64,
            Arrivals::Poisson { .. } => loop {
                // The global stream's next gap; this worker's arrivals are every
                // `workers`-th (a draw costs ~10 ns: cheap next to a send).
                self.cum += -self.uniform01().ln();
                self.drawn += 1;
                if (self.drawn - 1) % self.workers == self.worker {
                    break self.cum;
                }
            },
        };
        let t = self.rate.time_of(n);
        if self.until.is_some_and(|u| t >= u) {
            return None;
        }
        self.k += 1;
        self.last = n as u64;
        Some(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constant_rate_is_evenly_spaced_across_workers() {
        let rate = Rate::Constant(1000.0);
        let mut all: Vec<f64> = (0..4)
            .flat_map(|w| {
                Share::new(
                    rate,
                    Arrivals::Uniform,
                    w,
                    4,
                    None,
                    Some(Duration::from_secs(1)),
                )
            })
            .collect();
        all.sort_by(f64::total_cmp);
        assert_eq!(all.len(), 1000);
        for (i, t) in all.iter().enumerate() {
            assert!((t - i as f64 / 1000.0).abs() < 1e-12);
        }
    }

    #[test]
    fn explicit_times_are_split_by_position_and_cut_at_the_end() {
        let times = std::sync::Arc::new(vec![0.0, 0.1, 0.15, 0.7, 1.2, 2.5]);
        let mut got: Vec<(f64, u64)> = (0..2)
            .flat_map(|w| {
                let mut s =
                    Share::explicit(times.clone(), w, 2, None, Some(Duration::from_secs(2)));
                std::iter::from_fn(move || s.next().map(|t| (t, s.position()))).collect::<Vec<_>>()
            })
            .collect();
        got.sort_by(|a, b| a.0.total_cmp(&b.0));
        assert_eq!(got, [(0.0, 0), (0.1, 1), (0.15, 2), (0.7, 3), (1.2, 4)]);
    }

    #[test]
    fn a_count_is_split_exactly() {
        let rate = Rate::Constant(100.0);
        let n: usize = (0..3)
            .map(|w| Share::new(rate, Arrivals::Uniform, w, 3, Some(1000), None).count())
            .sum();
        assert_eq!(n, 1000);
    }

    #[test]
    fn a_ramp_offers_its_integral() {
        // 100 → 300 req/s over 10 s: 2,000 requests, the second half busier.
        let rate = Rate::Ramp {
            from: 100.0,
            to: 300.0,
            over: Duration::from_secs(10),
        };
        let times: Vec<f64> = Share::new(
            rate,
            Arrivals::Uniform,
            0,
            1,
            None,
            Some(Duration::from_secs(10)),
        )
        .collect();
        assert_eq!(times.len(), 2000);
        let first_half = times.iter().filter(|t| **t < 5.0).count();
        // ∫0..5 (100 + 20t) dt = 750
        assert_eq!(first_half, 750);
        assert!((rate.time_of(rate.count_by(7.3)) - 7.3).abs() < 1e-9);
    }

    #[test]
    fn poisson_arrivals_have_the_right_rate_and_spread() {
        let rate = Rate::Constant(1000.0);
        let times: Vec<f64> = (0..2)
            .flat_map(|w| {
                Share::new(
                    rate,
                    Arrivals::Poisson { seed: 7 },
                    w,
                    2,
                    None,
                    Some(Duration::from_secs(20)),
                )
            })
            .collect();
        // 20,000 expected; a Poisson count has sd √20000 ≈ 141.
        assert!(
            (times.len() as f64 - 20_000.0).abs() < 5.0 * 141.0,
            "{}",
            times.len()
        );
        // The two shares are exactly the schedule one worker sends alone…
        let mut union = times.clone();
        union.sort_by(f64::total_cmp);
        let one: Vec<f64> = Share::new(
            rate,
            Arrivals::Poisson { seed: 7 },
            0,
            1,
            None,
            Some(Duration::from_secs(20)),
        )
        .collect();
        assert_eq!(union, one);
        // …whose gaps are exponential with mean 1 ms: their coefficient of variation is
        // 1 (an evenly spaced stream would give 0).
        let gaps: Vec<f64> = one.windows(2).map(|w| w[1] - w[0]).collect();
        let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
        let var = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64;
        assert!((mean - 0.001).abs() < 0.00005, "{mean}");
        assert!((var.sqrt() / mean - 1.0).abs() < 0.05);
    }
}
