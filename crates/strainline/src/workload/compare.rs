//! How far workload B (a test's load, seen in the target's own access log) is from A
//! (production): one distance per dimension — the request mix, the status mix, the mean
//! and peak rate, the variance of arrivals, the response sizes — each against a
//! tolerance, and a verdict naming the dimensions that differ. This is the check the
//! *Systems Performance* seed did by hand: the simulator applied the average production
//! workload but not its variance.
//!
//! Response times and clients are shown, not judged: they are the target's answer and
//! the generator's connection policy, not the workload.

use crate::error::Category;
use serde::Serialize;

use super::profile::Profile;

/// How much each dimension may differ, B against A.
#[derive(Debug, Clone, Copy, Serialize, serde::Deserialize)]
pub struct Tolerance {
    /// Percentage points of any route's (or status code's) share.
    pub mix_points: f64,
    /// Relative, of the mean rate and of the per-second rate's p99.
    pub rate: f64,
    /// Relative, of the index of dispersion of arrivals per second.
    pub dispersion: f64,
    /// Relative, of a route's median response size (routes with ≥ 1% in both).
    pub size: f64,
}

impl Default for Tolerance {
    fn default() -> Tolerance {
        Tolerance {
            mix_points: 3.0,
            rate: 0.10,
            dispersion: 0.25,
            size: 0.10,
        }
    }
}

impl Tolerance {
    /// Applies `mix=2,rate=5%,dispersion=20%,size=10%`.
    pub fn with(mut self, spec: &str) -> crate::error::Result<Tolerance> {
        for pair in spec.split(',').filter(|p| !p.trim().is_empty()) {
            let (k, v) = pair
                .split_once('=')
                .ok_or_else(|| {
                    format!("--tolerance: '{pair}' is not NAME=VALUE (e.g. mix=2,rate=5%)")
                })
                .usage()?;
            let frac =
                || crate::units::parse_fraction(v).map_err(|e| format!("--tolerance {k}: {e}"));
            match k.trim() {
                "mix" => {
                    self.mix_points = v
                        .trim()
                        .trim_end_matches("points")
                        .trim()
                        .parse()
                        .map_err(|_| {
                            format!("--tolerance mix: '{v}' is not a number of percentage points")
                        })
                        .usage()?
                }
                "rate" => self.rate = frac().usage()?,
                "dispersion" => self.dispersion = frac().usage()?,
                "size" => self.size = frac().usage()?,
                other => {
                    return Err(crate::Error::usage(format!(
                    "--tolerance: unknown dimension '{other}' (known: mix, rate, dispersion, size)"
                )))
                }
            }
        }
        Ok(self)
    }
}

/// One dimension's distance.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct Dimension {
    pub name: String,
    /// What was compared, in words, with both values.
    pub detail: String,
    /// Percentage points for the mixes, relative (0.05 = 5%) otherwise.
    pub distance: f64,
    pub tolerance: f64,
    pub differs: bool,
}

/// A route's share in both.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct RouteShare {
    pub method: String,
    pub route: String,
    pub a: f64,
    pub b: f64,
}

#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct Comparison {
    pub schema: String,
    pub a: String,
    pub b: String,
    pub tolerance: Tolerance,
    pub dimensions: Vec<Dimension>,
    pub routes: Vec<RouteShare>,
    /// Shown, not judged (response time p50/p99, distinct clients).
    pub shown: Vec<String>,
    pub similar: bool,
}

pub const SCHEMA: &str = "strainline.workload-compare.v1";

fn relative(a: f64, b: f64) -> f64 {
    if a == 0.0 && b == 0.0 {
        0.0
    } else if a == 0.0 {
        f64::INFINITY
    } else {
        (b - a).abs() / a.abs()
    }
}

fn dim(name: &str, detail: String, distance: f64, tolerance: f64) -> Dimension {
    Dimension {
        name: name.into(),
        detail,
        distance,
        tolerance,
        differs: distance > tolerance,
    }
}

/// How bursty the two logs are, per second (with the longer windows shown), judged
/// only beyond twice the indexes' combined standard error.
fn dispersion(a: &Profile, b: &Profile, tol: &Tolerance) -> Option<Dimension> {
    let d1 = |p: &Profile| {
        p.rate
            .dispersion
            .iter()
            .find(|d| d.window_seconds == 1)
            .cloned()
    };
    let (Some(xa), Some(xb)) = (d1(a), d1(b)) else {
        return None;
    };
    let (da, db) = (xa.index, xb.index);
    let longer: Vec<String> = [10u64, 60]
        .iter()
        .filter_map(|&w| {
            let f = |p: &Profile| {
                p.rate
                    .dispersion
                    .iter()
                    .find(|d| d.window_seconds == w)
                    .map(|d| d.index)
            };
            Some(format!("{w} s: {:.2} → {:.2}", f(a)?, f(b)?))
        })
        .collect();
    let more = if longer.is_empty() {
        String::new()
    } else {
        format!("; {}", longer.join(", "))
    };
    // An index from k windows has a standard error of about D·√(2/(k−1)): a short
    // log's index is noisy, and a difference within twice the combined error is
    // chance, not a different workload.
    let se = |d: f64, k: usize| d.max(0.0) * (2.0 / (k.max(2) - 1) as f64).sqrt();
    let noise = 2.0 * (se(da, xa.windows).powi(2) + se(db, xb.windows).powi(2)).sqrt();
    let chance = (db - da).abs() <= noise;
    let mut d = dim(
        "dispersion",
        format!(
            "index of dispersion per second {da:.2} → {db:.2} ({:+.1}%; 1 is Poisson, 0 a constant rate){more}{}",
            100.0 * (db - da) / da.max(1e-9),
            if chance && relative(da, db) > tol.dispersion {
                format!("; within chance for {} and {} seconds (±{noise:.2}): not judged different", xa.windows, xb.windows)
            } else {
                String::new()
            }
        ),
        relative(da, db),
        tol.dispersion,
    );
    d.differs &= !chance;
    Some(d)
}

/// The largest difference of a route's median response size (routes of 1% or more).
fn sizes(a: &Profile, b: &Profile, tol: &Tolerance) -> Option<Dimension> {
    let mut sizes: Vec<(String, f64, f64)> = Vec::new();
    for ra in a.mix.iter().filter(|r| r.share >= 1.0) {
        if let Some(rb) = b
            .mix
            .iter()
            .find(|r| r.method == ra.method && r.route == ra.route && r.share >= 1.0)
        {
            sizes.push((
                format!("{} {}", ra.method, ra.route),
                ra.bytes.p50,
                rb.bytes.p50,
            ));
        }
    }
    let w = sizes
        .iter()
        .max_by(|x, y| relative(x.1, x.2).total_cmp(&relative(y.1, y.2)))?;
    Some(dim(
        "sizes",
        format!(
            "largest difference of a median response size: {} {:.0} → {:.0} bytes",
            w.0, w.1, w.2
        ),
        relative(w.1, w.2),
        tol.size,
    ))
}

/// What is shown but not judged: the target's response time, distinct clients.
fn shown(a: &Profile, b: &Profile) -> Vec<String> {
    let mut shown = Vec::new();
    let times = |p: &Profile| -> Option<(f64, f64)> {
        if !p.has_times {
            return None;
        }
        // The busiest route's response time stands for the target's.
        let r = p.mix.first()?;
        let t = r.time_ms.as_ref()?;
        Some((t.p50, t.p99))
    };
    if let (Some(ta), Some(tb)) = (times(a), times(b)) {
        shown.push(format!(
            "response time of {} {}: p50 {:.2} → {:.2} ms, p99 {:.2} → {:.2} ms (the target's answer, not the workload: not judged)",
            a.mix[0].method, a.mix[0].route, ta.0, tb.0, ta.1, tb.1
        ));
    }
    if let (Some(ca), Some(cb)) = (&a.clients, &b.clients) {
        shown.push(format!(
            "distinct clients {} → {} (a generator's connections are not production's users: not judged)",
            ca.distinct, cb.distinct
        ));
    }
    shown
}

pub fn compare(a: &Profile, b: &Profile, la: &str, lb: &str, tol: Tolerance) -> Comparison {
    let mut routes: Vec<RouteShare> = a
        .mix
        .iter()
        .map(|r| RouteShare {
            method: r.method.clone(),
            route: r.route.clone(),
            a: r.share,
            b: 0.0,
        })
        .collect();
    for r in &b.mix {
        match routes
            .iter_mut()
            .find(|x| x.method == r.method && x.route == r.route)
        {
            Some(x) => x.b = r.share,
            None => routes.push(RouteShare {
                method: r.method.clone(),
                route: r.route.clone(),
                a: 0.0,
                b: r.share,
            }),
        }
    }
    let mut dims = Vec::new();
    let worst = routes
        .iter()
        .max_by(|x, y| (x.b - x.a).abs().total_cmp(&(y.b - y.a).abs()));
    if let Some(w) = worst {
        dims.push(dim(
            "mix",
            format!(
                "largest difference: {} {} {:.1}% → {:.1}% ({:+.1} points)",
                w.method,
                w.route,
                w.a,
                w.b,
                w.b - w.a
            ),
            (w.b - w.a).abs(),
            tol.mix_points,
        ));
    }
    let mut codes: Vec<u16> = a.status.iter().chain(&b.status).map(|s| s.0).collect();
    codes.sort_unstable();
    codes.dedup();
    let share = |p: &Profile, c: u16| p.status.iter().find(|s| s.0 == c).map_or(0.0, |s| s.2);
    if let Some(&c) = codes.iter().max_by(|&&x, &&y| {
        (share(b, x) - share(a, x))
            .abs()
            .total_cmp(&(share(b, y) - share(a, y)).abs())
    }) {
        let (sa, sb) = (share(a, c), share(b, c));
        dims.push(dim(
            "status",
            format!(
                "largest difference: {c} {sa:.1}% → {sb:.1}% ({:+.1} points)",
                sb - sa
            ),
            (sb - sa).abs(),
            tol.mix_points,
        ));
    }
    let (ra, rb) = (a.rate.mean, b.rate.mean);
    dims.push(dim(
        "rate",
        format!(
            "mean {ra:.1} → {rb:.1} req/s ({:+.1}%)",
            100.0 * (rb - ra) / ra.max(1e-9)
        ),
        relative(ra, rb),
        tol.rate,
    ));
    let (pa, pb) = (a.rate.per_second.p99, b.rate.per_second.p99);
    dims.push(dim(
        "peak rate",
        format!(
            "p99 of the per-second rate {pa:.0} → {pb:.0} req/s ({:+.1}%)",
            100.0 * (pb - pa) / pa.max(1e-9)
        ),
        relative(pa, pb),
        tol.rate,
    ));
    dims.extend(dispersion(a, b, &tol));
    dims.extend(sizes(a, b, &tol));
    let shown = shown(a, b);
    routes.sort_by(|x, y| (y.a + y.b).total_cmp(&(x.a + x.b)));
    let similar = dims.iter().all(|d| !d.differs);
    Comparison {
        schema: SCHEMA.into(),
        a: la.into(),
        b: lb.into(),
        tolerance: tol,
        dimensions: dims,
        routes,
        shown,
        similar,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::parse::Entry;
    use crate::workload::profile::Builder;
    use crate::workload::route::Routes;

    fn profile(per_second: &[u32], health_every: u32) -> Profile {
        profile_sized(per_second, health_every, 100)
    }

    fn profile_sized(per_second: &[u32], health_every: u32, bytes: u64) -> Profile {
        let mut b = Builder::new("x");
        let routes = Routes::default();
        let mut i = 0;
        for (s, &n) in per_second.iter().enumerate() {
            for _ in 0..n {
                i += 1;
                let path = if i % health_every == 0 {
                    "/health".to_string()
                } else {
                    format!("/item/{i}")
                };
                let e = Entry {
                    time: s as f64,
                    method: "GET".into(),
                    path,
                    query: None,
                    status: 200,
                    bytes,
                    duration: None,
                    client: String::new(),
                };
                b.add(&e, &routes.route(&e.path));
            }
        }
        b.finish()
    }

    #[test]
    fn a_constant_rate_differs_from_a_varying_one_in_its_variance_not_its_mean() {
        // Same mean (100/s), same mix: one alternates 80/120, the other is constant.
        let varying: Vec<u32> = (0..100)
            .map(|i| if i % 2 == 0 { 80 } else { 120 })
            .collect();
        let a = profile(&varying, 10);
        let b = profile(&[100; 100], 10);
        let c = compare(&a, &b, "prod", "test", Tolerance::default());
        let get = |n: &str| c.dimensions.iter().find(|d| d.name == n).unwrap();
        assert!(get("dispersion").differs, "{:?}", c.dimensions);
        assert!(get("peak rate").differs);
        assert!(!get("rate").differs);
        assert!(!get("mix").differs);
        assert!(!c.similar);
        // Against itself: similar, every distance 0.
        let same = compare(&a, &a, "a", "a", Tolerance::default());
        assert!(same.similar);
        assert!(same.dimensions.iter().all(|d| d.distance == 0.0));
        // A mix of 10% /health against 20%: 10 points on /health.
        let m = compare(&a, &profile(&varying, 5), "a", "b", Tolerance::default());
        let mix = m.dimensions.iter().find(|d| d.name == "mix").unwrap();
        assert!((mix.distance - 10.0).abs() < 1e-9, "{mix:?}");
        assert!(mix.differs);
        // Responses 20% larger: sizes differ (tolerance 10%), nothing else does.
        let big = compare(
            &a,
            &profile_sized(&varying, 10, 120),
            "a",
            "b",
            Tolerance::default(),
        );
        let sizes = big.dimensions.iter().find(|d| d.name == "sizes").unwrap();
        assert!(
            (sizes.distance - 0.2).abs() < 1e-9 && sizes.differs,
            "{sizes:?}"
        );
        assert!(big.dimensions.iter().filter(|d| d.differs).count() == 1);
    }

    #[test]
    fn tolerances_parse_with_clear_errors() {
        let t = Tolerance::default()
            .with("mix=2,rate=5%,dispersion=20%")
            .unwrap();
        assert_eq!((t.mix_points, t.rate, t.dispersion), (2.0, 0.05, 0.2));
        assert!(Tolerance::default()
            .with("speed=2")
            .unwrap_err()
            .to_string()
            .contains("known: mix"));
        assert!(Tolerance::default().with("rate=fast").is_err());
    }
}
