//! When to send. The open model turns a rate shape (constant or ramp) and an arrival
//! process (evenly spaced or Poisson) into intended send times; every latency of the
//! open model is measured from these times, not from when the request actually left,
//! so a stalled target cannot hide its stall (no coordinated omission). Each worker
//! thread gets its own share of the schedule, with no shared state.

use std::sync::Arc;
use std::time::Duration;

/// Offered load over the run.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Rate {
    /// Requests per second, constant.
    Constant(f64),
    /// From `from` to `to` requests per second, linearly over `over`.
    Ramp { from: f64, to: f64, over: Duration },
    /// A line from 0 through these (seconds, rate) points, straight between them, the
    /// last rate held after (stages: `[{to = 50, over = "30s"}, {hold = "1m"}]`).
    Staged(Vec<(f64, f64)>),
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
            Rate::Staged(ref points) => {
                let (mut t0, mut r0) = (0.0, 0.0);
                for &(t1, r1) in points {
                    if t <= t1 {
                        return if t1 > t0 {
                            r0 + (r1 - r0) * (t - t0) / (t1 - t0)
                        } else {
                            r1
                        };
                    }
                    (t0, r0) = (t1, r1);
                }
                r0
            }
        }
    }

    /// The highest rate it reaches.
    pub fn peak(&self) -> f64 {
        match *self {
            Rate::Constant(r) => r,
            Rate::Ramp { from, to, .. } => from.max(to),
            Rate::Staged(ref points) => points.iter().map(|p| p.1).fold(0.0, f64::max),
        }
    }

    /// The stages' line as (start, end, rate at start, rate at end) segments, from 0.
    fn segments(points: &[(f64, f64)]) -> impl Iterator<Item = (f64, f64, f64, f64)> + '_ {
        let starts = std::iter::once((0.0, 0.0)).chain(points.iter().copied());
        starts
            .zip(points)
            .map(|((t0, r0), &(t1, r1))| (t0, t1, r0, r1))
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
            Rate::Staged(ref points) => {
                let mut n = 0.0;
                for (t0, t1, r0, _) in Rate::segments(points) {
                    if t <= t0 {
                        return n;
                    }
                    let u = t.min(t1);
                    n += (r0 + self.at(u)) / 2.0 * (u - t0);
                }
                let (end, last) = points.last().copied().unwrap_or_default();
                n + last * (t - end).max(0.0)
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
            Rate::Staged(ref points) => {
                let mut left = n;
                for (t0, t1, r0, r1) in Rate::segments(points) {
                    let here = (r0 + r1) / 2.0 * (t1 - t0);
                    if left <= here && here > 0.0 {
                        return t0 + within(r0, (r1 - r0) / (t1 - t0), left);
                    }
                    left -= here;
                }
                match points.last() {
                    Some(&(end, last)) if last > 0.0 => end + left / last,
                    // The line ended at 0: no more sends.
                    _ => f64::INFINITY,
                }
            }
        }
    }
}

/// When, from a segment's start at rate `r0` rising by `k` a second, `n` sends are due.
fn within(r0: f64, k: f64, n: f64) -> f64 {
    if k.abs() < 1e-12 {
        return n / r0;
    }
    // r0·t + k·t²/2 = n  →  t = (−r0 + √(r0² + 2kn)) / k
    (-r0 + (r0 * r0 + 2.0 * k * n).max(0.0).sqrt()) / k
}

/// How arrivals are spread.
#[derive(Debug, Clone, PartialEq)]
pub enum Arrivals {
    /// Evenly spaced, like wrk2.
    Uniform,
    /// A Poisson process (exponential gaps), seeded for reproducibility.
    Poisson { seed: u64 },
    /// Listed times, sorted (a replayed log's); the rate is not used.
    Listed(Arc<Vec<f64>>),
    /// A replayed log read as the run goes (each worker reads it for itself).
    Streamed(super::replay::Stream),
    /// So many sends in each second, in order, the list repeated when the run outlasts
    /// it; each second's sends at seeded uniformly random instants within it (a
    /// workload scenario's: the log's rate with its variance at every window ≥ 1 s).
    PerSecond { counts: Arc<Vec<u32>>, seed: u64 },
}

impl Arrivals {
    /// Sends scheduled before `t` seconds at `rate`.
    pub fn count_by(&self, rate: &Rate, t: f64) -> f64 {
        match self {
            Arrivals::Uniform | Arrivals::Poisson { .. } => rate.count_by(t),
            Arrivals::Listed(times) => times.iter().take_while(|&&x| x < t).count() as f64,
            // A streamed log's times are not held: its mean rate up to its end.
            Arrivals::Streamed(st) => st.count as f64 * (t / st.last.max(1e-9)).clamp(0.0, 1.0),
            Arrivals::PerSecond { counts, .. } => {
                let whole = t.max(0.0).floor() as usize;
                let pass: u64 = counts.iter().map(|&c| u64::from(c)).sum();
                let (passes, rest) = (whole / counts.len(), whole % counts.len());
                let done: u64 = counts[..rest].iter().map(|&c| u64::from(c)).sum();
                let part = f64::from(counts[rest % counts.len()]) * t.fract();
                (passes as u64 * pass + done) as f64 + part
            }
        }
    }

    /// The time by which `n` sends are scheduled (the inverse of `count_by`).
    pub fn time_of(&self, rate: &Rate, n: f64) -> f64 {
        match self {
            Arrivals::Listed(times) => times
                .get((n as usize).saturating_sub(1))
                .or(times.last())
                .copied()
                .unwrap_or(0.0),
            Arrivals::Streamed(st) => st.last * (n / st.count.max(1) as f64).min(1.0),
            Arrivals::PerSecond { counts, .. } => {
                let pass: f64 = counts.iter().map(|&c| f64::from(c)).sum();
                let passes = (n / pass).floor();
                let mut left = n - passes * pass;
                let mut t = passes * counts.len() as f64;
                for &c in counts.iter() {
                    let c = f64::from(c);
                    if left <= c {
                        return t + if c > 0.0 { left / c } else { 0.0 };
                    }
                    left -= c;
                    t += 1.0;
                }
                t
            }
            _ => rate.time_of(n),
        }
    }
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
    rng: Rng,
    /// Stop at this many sends (this worker's part of `-n`).
    quota: Option<u64>,
    /// Stop at this time, seconds.
    until: Option<f64>,
    /// The global position of the send last returned.
    last: u64,
    /// Per-second arrivals: the second being sent, the position of its first send,
    /// and its instants (made when this worker first has a send in it).
    second: u64,
    second_start: u64,
    instants: Vec<f64>,
    /// A streamed log: this worker's reader of it, the global position of its next
    /// line, and the request of the send last returned.
    lines: Option<Box<dyn Iterator<Item = super::replay::Line> + Send>>,
    next_line: u64,
    request: Option<(String, String)>,
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
            _ => 0,
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
            rng: Rng::new(mix(seed)),
            quota,
            until: until.map(|d| d.as_secs_f64()),
            last: 0,
            second: 0,
            second_start: 0,
            instants: Vec::new(),
            lines: None,
            next_line: 0,
            request: None,
        }
    }

    /// The method and target of the send last returned, for a streamed log.
    pub fn take_request(&mut self) -> Option<(String, String)> {
        self.request.take()
    }

    /// A streamed log's offset of line `position`, its request kept for
    /// [`Share::take_request`]; the lines before it are other workers'.
    fn streamed(&mut self, st: &super::replay::Stream, position: u64) -> Option<f64> {
        let lines = self.lines.get_or_insert_with(|| (st.open)());
        loop {
            let (t, method, target) = lines.next()?;
            let at = self.next_line;
            self.next_line += 1;
            if at == position {
                self.request = Some((method, target));
                return Some(t);
            }
        }
    }

    /// The global position of the send last returned (which request a replay sends).
    pub fn position(&self) -> u64 {
        self.last
    }

    /// (0, 1]: never 0, so ln() is finite.
    fn uniform01(&mut self) -> f64 {
        self.rng.unit_open0()
    }
}

impl Share {
    /// The instant of send `position` of a per-second schedule: the seconds before it
    /// are skipped by their counts; its own second's instants are drawn (seeded by the
    /// second, so every worker draws the same ones) and sorted.
    fn within_second(&mut self, counts: &[u32], seed: u64, position: u64) -> f64 {
        let count = |s: u64| u64::from(counts[(s % counts.len() as u64) as usize]);
        while position >= self.second_start + count(self.second) {
            self.second_start += count(self.second);
            self.second += 1;
            self.instants.clear();
        }
        if self.instants.is_empty() {
            let mut z = Rng::new(mix(seed ^ mix(self.second)));
            self.instants = (0..count(self.second)).map(|_| z.unit()).collect();
            self.instants.sort_by(f64::total_cmp);
        }
        self.second as f64 + self.instants[(position - self.second_start) as usize]
    }
}

use crate::rng::{mix, Rng};

impl Iterator for Share {
    type Item = f64;

    fn next(&mut self) -> Option<f64> {
        if self.quota.is_some_and(|q| self.k >= q) {
            return None;
        }
        let position = self.worker + self.k * self.workers;
        let t = match &self.arrivals {
            Arrivals::Listed(times) => Some(*times.get(position as usize)?),
            Arrivals::PerSecond { counts, seed } => {
                let (counts, seed) = (counts.clone(), *seed);
                Some(self.within_second(&counts, seed, position))
            }
            Arrivals::Streamed(st) => {
                let st = st.clone();
                Some(self.streamed(&st, position)?)
            }
            _ => None,
        };
        if let Some(t) = t {
            if self.until.is_some_and(|u| t >= u) {
                return None;
            }
            self.k += 1;
            self.last = position;
            return Some(t);
        }
        // The position of this send in the global count of requests.
        let n = match self.arrivals {
            Arrivals::Uniform => position as f64,
            Arrivals::Poisson { .. } => loop {
                // The global stream's next gap; this worker's arrivals are every
                // `workers`-th (a draw costs ~10 ns: cheap next to a send).
                self.cum += -self.uniform01().ln();
                self.drawn += 1;
                if (self.drawn - 1) % self.workers == self.worker {
                    break self.cum;
                }
            },
            Arrivals::Listed(_) | Arrivals::PerSecond { .. } | Arrivals::Streamed(_) => {
                unreachable!("timed above")
            }
        };
        let t = self.rate.time_of(n);
        if !t.is_finite() || self.until.is_some_and(|u| t >= u) {
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

    /// Stages up to 20/s over 1 s, held 1 s, down to 0 over 1 s: 10 + 20 + 10 sends,
    /// and none after the line reaches 0; `time_of` inverts `count_by` everywhere.
    #[test]
    fn staged_rates_follow_their_line_and_end_at_zero() {
        let rate = Rate::Staged(vec![(1.0, 20.0), (2.0, 20.0), (3.0, 0.0)]);
        assert_eq!(
            (rate.at(0.5), rate.at(1.5), rate.at(2.75)),
            (10.0, 20.0, 5.0)
        );
        assert_eq!(rate.peak(), 20.0);
        for (t, n) in [
            (1.0, 10.0),
            (2.0, 30.0),
            (3.0, 40.0),
            (9.0, 40.0),
            (0.5, 2.5),
        ] {
            assert!(
                (rate.count_by(t) - n).abs() < 1e-9,
                "{t}: {}",
                rate.count_by(t)
            );
        }
        for n in [0.0, 1.0, 2.5, 9.99, 10.0, 17.0, 30.0, 35.0, 39.9] {
            let t = rate.time_of(n);
            assert!((rate.count_by(t) - n).abs() < 1e-6, "{n}: t {t}");
        }
        assert!(rate.time_of(40.5).is_infinite());
        let sends: Vec<f64> = (0..2)
            .flat_map(|w| {
                let until = Some(Duration::from_secs(3));
                Share::new(rate.clone(), Arrivals::Uniform, w, 2, None, until)
            })
            .collect();
        assert_eq!(sends.len(), 40, "{sends:?}");
        assert!(sends.iter().all(|&t| t < 3.0));
    }

    #[test]
    fn constant_rate_is_evenly_spaced_across_workers() {
        let rate = Rate::Constant(1000.0);
        let mut all: Vec<f64> = (0..4)
            .flat_map(|w| {
                Share::new(
                    rate.clone(),
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
                let mut s = Share::new(
                    Rate::Constant(1.0),
                    Arrivals::Listed(times.clone()),
                    w,
                    2,
                    None,
                    Some(Duration::from_secs(2)),
                );
                std::iter::from_fn(move || s.next().map(|t| (t, s.position()))).collect::<Vec<_>>()
            })
            .collect();
        got.sort_by(|a, b| a.0.total_cmp(&b.0));
        assert_eq!(got, [(0.0, 0), (0.1, 1), (0.15, 2), (0.7, 3), (1.2, 4)]);
    }

    #[test]
    fn per_second_counts_are_kept_in_every_second_and_repeated() {
        let counts = Arc::new(vec![3, 0, 7, 1]);
        let arrivals = Arrivals::PerSecond {
            counts: counts.clone(),
            seed: 5,
        };
        let until = Some(Duration::from_secs(10));
        let rate = Rate::Constant(2.75);
        let mut all: Vec<(f64, u64)> = (0..3)
            .flat_map(|w| {
                let mut s = Share::new(rate.clone(), arrivals.clone(), w, 3, None, until);
                std::iter::from_fn(move || s.next().map(|t| (t, s.position()))).collect::<Vec<_>>()
            })
            .collect();
        all.sort_by(|a, b| a.0.total_cmp(&b.0));
        // Ten seconds: two and a half passes of the list.
        let per_second: Vec<usize> = (0..10)
            .map(|s| all.iter().filter(|(t, _)| t.floor() as usize == s).count())
            .collect();
        assert_eq!(per_second, [3, 0, 7, 1, 3, 0, 7, 1, 3, 0]);
        // In time order the positions are the global schedule's, each once…
        assert!(all.iter().enumerate().all(|(i, (_, p))| *p == i as u64));
        // …and one worker alone sends the same instants; a pass's repeat draws new ones.
        let one: Vec<f64> = Share::new(rate.clone(), arrivals.clone(), 0, 1, None, until).collect();
        assert_eq!(one, all.iter().map(|x| x.0).collect::<Vec<_>>());
        assert_ne!(one[0].fract(), one[11].fract());
        assert_eq!(arrivals.count_by(&rate, 10.0), 25.0);
        assert_eq!(arrivals.count_by(&rate, 2.5), 6.5);
        assert_eq!(arrivals.time_of(&rate, 6.5), 2.5);
    }

    #[test]
    fn a_count_is_split_exactly() {
        let rate = Rate::Constant(100.0);
        let n: usize = (0..3)
            .map(|w| Share::new(rate.clone(), Arrivals::Uniform, w, 3, Some(1000), None).count())
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
            rate.clone(),
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
                    rate.clone(),
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
            rate.clone(),
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
