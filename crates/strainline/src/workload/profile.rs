//! A workload's profile from its requests, in one pass and bounded memory (state per
//! route, per second of the span and per client — never per line): the request mix by
//! route, the arrival rate over time with its variance (index of dispersion at several
//! window sizes, and whether arrivals look Poisson), the status mix, and the clients'
//! session shape. The questions are those of the *Systems Performance* seed: does the
//! test load resemble production, and in its variance too, not only its mean?

use std::collections::{BTreeMap, HashMap};

use hdrhistogram::Histogram;

use serde::Serialize;

use super::parse::Entry;
use super::route::Routed;
use crate::rng::{mix, Rng};

/// Window sizes (seconds) at which the dispersion of arrivals is measured.
pub const DISPERSION_WINDOWS: [u64; 3] = [1, 10, 60];
/// Windows needed for a dispersion figure (fewer say too little).
const MIN_WINDOWS: usize = 5;
/// |z| beyond which the counts are not those of a Poisson process (about 3 in 1,000 by
/// chance).
const POISSON_Z: f64 = 3.0;
/// Requests (path and query) kept per route, a uniform sample, for scenarios.
const SAMPLE_KEPT: usize = 256;
/// Routes kept apart; the rest (a scanner's random paths) are summed as one, so that
/// memory stays bounded whatever the log holds.
pub const MAX_ROUTES: usize = 2000;
/// Clients followed at most: beyond, one in two (then four, …) is followed, chosen by
/// a hash of its address, and the distinct count is scaled up (adaptive sampling): a
/// log with millions of addresses is read in bounded memory, and each followed client's
/// requests and gaps are all seen.
const MAX_CLIENTS: usize = 65_536;
/// Where routes beyond [`MAX_ROUTES`] go.
pub const OTHER_ROUTES: &str = "(other routes)";

/// Percentiles of a distribution.
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize, PartialEq)]
pub struct Spread {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
}

/// A distribution: a histogram to two significant digits (1%, a few KiB, growing with
/// the largest value seen) and the exact extremes, so that a constant (every response
/// of a route 800 bytes) reads exactly and no percentile reads beyond what was seen.
#[derive(Clone)]
struct Dist {
    h: Histogram<u64>,
    min: u64,
    max: u64,
}

impl Dist {
    fn new() -> Dist {
        Dist {
            h: Histogram::new(2).expect("two significant digits"),
            min: u64::MAX,
            max: 0,
        }
    }

    fn add(&mut self, v: u64) {
        // Auto-resizing: `record` grows the histogram (`saturating_record` would clamp).
        let _ = self.h.record(v);
        self.min = self.min.min(v);
        self.max = self.max.max(v);
    }

    fn is_empty(&self) -> bool {
        self.h.is_empty()
    }

    fn spread(&self, scale: f64) -> Spread {
        if self.h.is_empty() {
            return Spread::default();
        }
        let q = |x: f64| self.h.value_at_quantile(x).clamp(self.min, self.max) as f64 / scale;
        Spread {
            p50: q(0.5),
            p90: q(0.9),
            p99: q(0.99),
            max: self.max as f64 / scale,
        }
    }
}

/// One route's share of the workload.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct RouteStats {
    pub method: String,
    pub route: String,
    pub requests: u64,
    /// Of all requests, percent.
    pub share: f64,
    /// Response body bytes.
    pub bytes: Spread,
    /// Response time, ms (when the log has it).
    pub time_ms: Option<Spread>,
    /// A few paths seen, for the reader.
    pub examples: Vec<String>,
    /// A uniform sample of its requests' targets as sent (path and query: the route
    /// filled with observed values), for `workload scenario`.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub sample: Vec<String>,
}

/// Arrivals counted in windows of one size.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct Dispersion {
    pub window_seconds: u64,
    pub windows: usize,
    /// Variance over mean of the counts: 1 for a Poisson process, ≫ 1 for bursts, ≈ 0
    /// for a constant rate.
    pub index: f64,
    /// The busiest window over the mean one.
    pub peak_to_mean: f64,
    /// How far the index is from a Poisson process's 1, in standard errors.
    pub z: f64,
}

#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct RateStats {
    /// Requests per second over the span.
    pub mean: f64,
    /// Of the per-second counts.
    pub per_second: Spread,
    pub per_minute_max: f64,
    pub dispersion: Vec<Dispersion>,
    /// Arrivals indistinguishable from a Poisson process (|z| ≤ 3 at every window with
    /// enough of them).
    pub poisson: bool,
    /// Counts per `step_seconds` from `start`, for charts.
    pub series_step_seconds: u64,
    pub series: Vec<u32>,
    /// Requests in each second, the partial first and last included (a scenario sends
    /// them as logged, so that the seconds a profile reads are the log's), for
    /// `workload scenario`; not in the JSON.
    #[serde(skip)]
    pub per_second_counts: Vec<u32>,
}

#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct ClientStats {
    /// Exact when `sampled_one_in` is 1, else an estimate.
    pub distinct: u64,
    /// One client in this many was followed (1: all of them).
    pub sampled_one_in: u64,
    pub requests_per_client: Spread,
    /// Between a client's consecutive requests, ms.
    pub gap_ms: Spread,
}

/// A workload over one span of time.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct Profile {
    /// The window's label (`--by`), or `all`.
    pub window: String,
    pub requests: u64,
    /// First and last arrival, epoch seconds.
    pub start: f64,
    pub end: f64,
    pub span_seconds: f64,
    pub rate: RateStats,
    pub mix: Vec<RouteStats>,
    /// Status code, requests, percent.
    pub status: Vec<(u16, u64, f64)>,
    pub clients: Option<ClientStats>,
    /// The log had response times.
    pub has_times: bool,
}

struct RouteAcc {
    requests: u64,
    bytes: Dist,
    time_us: Dist,
    examples: Vec<String>,
    sample: Vec<String>,
}

/// Accumulates one window's requests.
pub struct Builder {
    label: String,
    routes: HashMap<(String, String), RouteAcc>,
    seconds: HashMap<i64, u32>,
    status: BTreeMap<u16, u64>,
    /// Followed clients by a hash of their address: requests, latest arrival.
    clients: HashMap<u64, (u64, f64)>,
    /// A client is followed when the low `client_level` bits of its hash are 0.
    client_level: u32,
    gaps_us: Dist,
    requests: u64,
    first: f64,
    last: f64,
    /// Some arrival time has a fraction of a second.
    fractional: bool,
    has_times: bool,
    rng: Rng,
}

impl Builder {
    pub fn new(label: impl Into<String>) -> Builder {
        Builder {
            label: label.into(),
            routes: HashMap::new(),
            seconds: HashMap::new(),
            status: BTreeMap::new(),
            clients: HashMap::new(),
            client_level: 0,
            gaps_us: Dist::new(),
            requests: 0,
            first: f64::INFINITY,
            last: f64::NEG_INFINITY,
            fractional: false,
            has_times: false,
            rng: Rng::new(0x5eed),
        }
    }

    /// Adds a request whose route the caller found (once, for every builder it feeds).
    pub fn add(&mut self, e: &Entry, routed: &Routed) {
        self.requests += 1;
        self.first = self.first.min(e.time);
        self.last = self.last.max(e.time);
        self.fractional |= e.time.fract() != 0.0;
        *self.seconds.entry(e.time.floor() as i64).or_default() += 1;
        *self.status.entry(e.status).or_default() += 1;
        let mut key = (e.method.clone(), routed.route.clone());
        if self.routes.len() >= MAX_ROUTES && !self.routes.contains_key(&key) {
            key = ("*".into(), OTHER_ROUTES.into());
        }
        let acc = self.routes.entry(key).or_insert_with(|| RouteAcc {
            requests: 0,
            bytes: Dist::new(),
            time_us: Dist::new(),
            examples: Vec::new(),
            sample: Vec::new(),
        });
        acc.requests += 1;
        acc.bytes.add(e.bytes);
        if let Some(d) = e.duration {
            self.has_times = true;
            acc.time_us.add((d * 1e6).round().max(0.0) as u64);
        }
        if acc.examples.len() < 3 && !acc.examples.contains(&e.path) {
            acc.examples.push(e.path.clone());
        }
        // Reservoir sampling: every request equally likely to be kept.
        let target = || match &e.query {
            Some(q) => format!("{}?{q}", e.path),
            None => e.path.clone(),
        };
        if acc.sample.len() < SAMPLE_KEPT {
            acc.sample.push(target());
        } else {
            let j = self.rng.below(acc.requests) as usize;
            if j < SAMPLE_KEPT {
                acc.sample[j] = target();
            }
        }
        if !e.client.is_empty() {
            let h = hash(&e.client);
            if h & ((1u64 << self.client_level) - 1) != 0 {
                return;
            }
            if self.clients.len() >= MAX_CLIENTS && !self.clients.contains_key(&h) {
                self.client_level += 1;
                let mask = (1u64 << self.client_level) - 1;
                self.clients.retain(|k, _| k & mask == 0);
                if h & mask != 0 {
                    return;
                }
            }
            let c = self.clients.entry(h).or_insert((0, e.time));
            if c.0 > 0 {
                let gap = (e.time - c.1).abs();
                self.gaps_us.add((gap * 1e6) as u64);
            }
            c.0 += 1;
            c.1 = c.1.max(e.time);
        }
    }

    pub fn finish(self) -> Profile {
        let n = self.requests;
        let (lo, hi) = if n == 0 {
            (0, 0)
        } else {
            (self.first.floor() as i64, self.last.floor() as i64)
        };
        let mut counts: Vec<u32> = (lo..=hi)
            .map(|s| self.seconds.get(&s).copied().unwrap_or(0))
            .collect();
        let span = if n < 2 {
            1.0
        } else if self.fractional {
            (self.last - self.first) * n as f64 / (n - 1) as f64
        } else {
            (hi - lo + 1) as f64
        };
        let series = counts.clone();
        let per_second_counts = series.clone();
        // A log starts and ends within a second: its first and last seconds are partial,
        // and would read as a dip in the rate (and as variance that is not there).
        if counts.len() > 4 {
            counts.pop();
            counts.remove(0);
        }
        let mean = if series.len() > 4 {
            counts.iter().map(|&c| f64::from(c)).sum::<f64>() / counts.len() as f64
        } else {
            n as f64 / span
        };
        let dispersion: Vec<Dispersion> = DISPERSION_WINDOWS
            .iter()
            .filter_map(|&w| dispersion(&counts, w as usize))
            .collect();
        let poisson = !dispersion.is_empty() && dispersion.iter().all(|d| d.z.abs() <= POISSON_Z);
        let mut per_second = Dist::new();
        for &c in &counts {
            per_second.add(u64::from(c));
        }
        let per_minute_max = counts
            .chunks(60)
            .filter(|c| c.len() == 60)
            .map(|c| c.iter().map(|&x| f64::from(x)).sum::<f64>() / 60.0)
            .fold(0.0, f64::max);
        let (series_step_seconds, series) = thin(series);
        let mut mix: Vec<RouteStats> = self
            .routes
            .into_iter()
            .map(|((method, route), a)| RouteStats {
                method,
                route,
                requests: a.requests,
                share: 100.0 * a.requests as f64 / n.max(1) as f64,
                bytes: a.bytes.spread(1.0),
                time_ms: (!a.time_us.is_empty()).then(|| a.time_us.spread(1e3)),
                examples: a.examples,
                sample: a.sample,
            })
            .collect();
        mix.sort_by(|a, b| b.requests.cmp(&a.requests).then(a.route.cmp(&b.route)));
        let clients = (!self.clients.is_empty()).then(|| {
            let mut per = Dist::new();
            for (c, _) in self.clients.values() {
                per.add(*c);
            }
            ClientStats {
                distinct: (self.clients.len() as u64) << self.client_level,
                sampled_one_in: 1 << self.client_level,
                requests_per_client: per.spread(1.0),
                gap_ms: self.gaps_us.spread(1e3),
            }
        });
        Profile {
            window: self.label,
            requests: n,
            start: if n == 0 { 0.0 } else { self.first },
            end: if n == 0 { 0.0 } else { self.last },
            span_seconds: span,
            rate: RateStats {
                mean,
                per_second: per_second.spread(1.0),
                per_minute_max,
                dispersion,
                poisson,
                series_step_seconds,
                series,
                per_second_counts,
            },
            mix,
            status: self
                .status
                .iter()
                .map(|(s, c)| (*s, *c, 100.0 * *c as f64 / n.max(1) as f64))
                .collect(),
            clients,
            has_times: self.has_times,
        }
    }
}

/// The index of dispersion of arrivals counted in windows of `w` seconds.
pub fn dispersion(per_second: &[u32], w: usize) -> Option<Dispersion> {
    let sums: Vec<f64> = per_second
        .chunks(w)
        .filter(|c| c.len() == w)
        .map(|c| c.iter().map(|&x| f64::from(x)).sum())
        .collect();
    let k = sums.len();
    if k < MIN_WINDOWS {
        return None;
    }
    let mean = sums.iter().sum::<f64>() / k as f64;
    if mean <= 0.0 {
        return None;
    }
    let var = sums.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (k - 1) as f64;
    let index = var / mean;
    let peak = sums.iter().copied().fold(0.0, f64::max);
    Some(Dispersion {
        window_seconds: w as u64,
        windows: k,
        index,
        peak_to_mean: peak / mean,
        // (k−1)·D is χ² with k−1 degrees of freedom for a Poisson process: mean k−1,
        // variance 2(k−1), so D has standard error √(2/(k−1)).
        z: (index - 1.0) / (2.0 / (k - 1) as f64).sqrt(),
    })
}

/// At most ~2,000 points for a chart: per second, or summed over longer steps.
fn thin(series: Vec<u32>) -> (u64, Vec<u32>) {
    const POINTS: usize = 2000;
    let step = series.len().div_ceil(POINTS).max(1);
    if step == 1 {
        return (1, series);
    }
    (
        step as u64,
        series.chunks(step).map(|c| c.iter().sum()).collect(),
    )
}

/// FNV-1a, then mixed: a stable 64-bit hash of a client's address.
fn hash(s: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    mix(h)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::route::Routes;

    #[test]
    fn clients_beyond_the_limit_are_sampled_and_counted_within_a_few_percent() {
        let routes = Routes::default();
        let mut b = Builder::new("x");
        let n = 300_000u64;
        for i in 0..n {
            for k in 0..2 {
                b.add(
                    &Entry {
                        time: (i / 1000) as f64 + f64::from(k) * 0.5,
                        method: "GET".into(),
                        path: "/".into(),
                        query: None,
                        status: 200,
                        bytes: 1,
                        duration: None,
                        client: format!("10.{}.{}.{}", i >> 16, (i >> 8) & 255, i & 255),
                    },
                    &routes.route("/"),
                );
            }
        }
        assert!(b.clients.len() <= MAX_CLIENTS);
        let c = b.finish().clients.unwrap();
        assert!(c.sampled_one_in >= 4, "{c:?}");
        let err = (c.distinct as f64 - n as f64).abs() / n as f64;
        assert!(err < 0.05, "{} of {n}", c.distinct);
        // Every followed client's two requests were seen.
        assert_eq!(c.requests_per_client.p50, 2.0);
        assert_eq!(c.requests_per_client.max, 2.0);
    }

    #[test]
    fn session_gaps_response_times_and_the_busiest_minute_are_the_logs() {
        let routes = Routes::default();
        let mut b = Builder::new("x");
        // 180 s: 2 clients, each every 2 s (gap 2,000 ms), 10 ms and 30 ms responses;
        // in the second minute a third client adds 60 requests (1 a second more).
        for t in 0..180u32 {
            for (c, ms) in [("a", 10.0), ("b", 30.0)] {
                if t % 2 == 0 {
                    let e = entry(f64::from(t), c, ms);
                    b.add(&e, &routes.route(&e.path));
                }
            }
            if (60..120).contains(&t) {
                let e = entry(f64::from(t), "c", 10.0);
                b.add(&e, &routes.route(&e.path));
            }
        }
        let p = b.finish();
        let c = p.clients.unwrap();
        assert_eq!((c.distinct, c.sampled_one_in), (3, 1));
        assert_eq!(c.requests_per_client.max, 90.0);
        // Gaps: 2 s for a and b (178 of them), 1 s for c (59): p50 2,000 ms.
        assert_eq!(c.gap_ms.p50, 2000.0);
        assert_eq!(c.gap_ms.max, 2000.0);
        // Percentiles to two significant digits (within 1%), the maximum exact.
        let t = p.mix[0].time_ms.as_ref().unwrap();
        assert!((t.p50 - 10.0).abs() <= 0.1, "{t:?}");
        assert!((t.p90 - 30.0).abs() <= 0.3, "{t:?}");
        assert_eq!(t.max, 30.0);
        // Per second: 1 or 2 (even seconds) plus 1 in the second minute: the busiest
        // whole minute averages 2 a second.
        assert!(
            (p.rate.per_minute_max - 2.0).abs() < 0.05,
            "{}",
            p.rate.per_minute_max
        );
        assert!(p.has_times);
    }

    fn entry(time: f64, client: &str, ms: f64) -> Entry {
        Entry {
            time,
            method: "GET".into(),
            path: "/x".into(),
            query: None,
            status: 200,
            bytes: 1,
            duration: Some(ms / 1e3),
            client: client.into(),
        }
    }

    #[test]
    fn dispersion_of_known_counts() {
        // Constant: no variance.
        let d = dispersion(&[10; 50], 1).unwrap();
        assert_eq!(d.index, 0.0);
        assert!(d.z < -POISSON_Z);
        // Alternating 0/20: mean 10, sample variance 100·50/49.
        let alt: Vec<u32> = (0..50).map(|i| if i % 2 == 0 { 0 } else { 20 }).collect();
        let d = dispersion(&alt, 1).unwrap();
        assert!((d.index - 10.0 * 50.0 / 49.0).abs() < 1e-9, "{}", d.index);
        assert_eq!(d.peak_to_mean, 2.0);
        // In windows of 10 s the alternation cancels out.
        assert_eq!(dispersion(&alt, 10).unwrap().index, 0.0);
        assert!(dispersion(&alt, 60).is_none());
    }
}
