//! Gates decided while the load still runs (`load --gate … --abort-on-fail`): an
//! [`Observer`] that stands in front of the run's own, counts each second, and stops the
//! run (as the live view's `q` does) once a gate on `error_rate` or a latency percentile
//! is *decided*, not merely failing so far.
//!
//! Decided means no rest of the run could make it pass: with the number of requests the
//! schedule will make due known (`-n`, or an open model's rate × duration), `error_rate <
//! 1%` is decided failed when the errors so far reach 1% of that number, and `latency_p99
//! < 300ms` when more than 1% of it has already taken longer. Without a known number (a
//! closed model run for a duration) the rule is k6's: the gate fails on everything so
//! far, after at least a second and 20 requests.

use std::sync::Mutex;

use hdrhistogram::Histogram;

use super::gate::{Gate, Op};
use crate::observe::{LoadSecond, Observer, Shared};

/// The share of requests at or above a percentile metric's value (`latency_p99` → 1%,
/// `latency_p97.5` → 2.5%).
fn tail_share(metric: &str) -> Option<f64> {
    let q = match metric {
        "latency_p999" => 99.9,
        _ => crate::metrics::percentile(metric.strip_prefix("latency_p")?)?,
    };
    Some(1.0 - crate::metrics::quantile(q))
}

/// Whether the gate can be decided during a run at all.
pub fn decidable(g: &Gate) -> bool {
    matches!(g.op, Op::Lt | Op::Le) && (g.metric == "error_rate" || tail_share(&g.metric).is_some())
}

struct Counts {
    seconds: u64,
    due: u64,
    errors: u64,
    latency_us: Histogram<u64>,
    decided: Option<String>,
}

/// Watches the run's seconds for gates decided failed; tells `inner` everything.
pub struct Abort {
    inner: Shared,
    gates: Vec<Gate>,
    /// Requests the schedule will make due in all, when known.
    planned: Option<u64>,
    counts: Mutex<Counts>,
}

impl Abort {
    pub fn new(inner: Shared, gates: &[Gate], planned: Option<u64>) -> Abort {
        Abort {
            inner,
            gates: gates.iter().filter(|g| decidable(g)).cloned().collect(),
            planned,
            counts: Mutex::new(Counts {
                seconds: 0,
                due: 0,
                errors: 0,
                latency_us: Histogram::new(3).expect("3 significant figures"),
                decided: None,
            }),
        }
    }

    /// Why the run was stopped, if a gate was decided failed.
    pub fn decided(&self) -> Option<String> {
        self.counts.lock().ok()?.decided.clone()
    }
}

/// Why `g` has failed for good with what `c` counted, or `None`.
fn decide(g: &Gate, c: &Counts, planned: Option<u64>) -> Option<String> {
    let bad = if g.metric == "error_rate" {
        c.errors
    } else {
        let us = (g.value * 1000.0).max(0.0) as u64;
        let at_most = c.latency_us.count_between(0, us);
        c.latency_us.len() - at_most
    };
    let share = if g.metric == "error_rate" {
        g.value
    } else {
        tail_share(&g.metric)?
    };
    let what = if g.metric == "error_rate" {
        "requests failed"
    } else {
        "requests took longer"
    };
    let over = |bad: u64, of: u64| {
        let f = bad as f64 / of as f64;
        match g.op {
            Op::Lt if g.metric == "error_rate" => f >= share,
            Op::Le if g.metric == "error_rate" => f > share,
            _ => f > share,
        }
    };
    match planned {
        Some(total) if total > 0 => over(bad, total).then(|| {
            format!(
                "gate {} decided failed after {} s: {bad} {what} already, more than {} of the {total} requests the run will make due",
                g.text,
                c.seconds,
                crate::units::format_number(share * 100.0) + "%"
            )
        }),
        _ => (c.seconds >= 1 && c.due >= 20 && over(bad, c.due)).then(|| {
            format!(
                "gate {} failed on everything so far after {} s: {bad} of {} {what}",
                g.text, c.seconds, c.due
            )
        }),
    }
}

impl Observer for Abort {
    fn draws(&self) -> bool {
        self.inner.draws()
    }
    fn case(&self, name: &str, of: Option<(usize, usize)>) {
        self.inner.case(name, of)
    }
    fn load_starting(&self, what: &str, offered: Option<f64>) {
        self.inner.load_starting(what, offered)
    }
    fn second(&self, s: &LoadSecond<'_>) {
        self.inner.second(s);
        let Ok(mut c) = self.counts.lock() else {
            return;
        };
        if c.decided.is_some() {
            return;
        }
        c.seconds += 1;
        c.due += s.completed + s.by_error.iter().map(|(_, n)| n).sum::<u64>();
        c.errors += s.errors;
        let _ = c.latency_us.add(s.corrected);
        if let Some(why) = self.gates.iter().find_map(|g| decide(g, &c, self.planned)) {
            c.decided = Some(why);
            crate::os::signals::interrupt();
        }
    }
    fn sample(&self, s: &crate::measure::Sample) {
        self.inner.sample(s)
    }
    fn threads(&self, t: &crate::measure::threads::Tally) {
        self.inner.threads(t)
    }
    fn step(&self, offered: f64, achieved: f64, p99_ms: f64, held: bool) {
        self.inner.step(offered, achieved, p99_ms, held)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::suite::gate::{parse, Unit};

    const M: &[(&str, Unit)] = &[
        ("error_rate", Unit::Ratio),
        ("latency_p99", Unit::Ms),
        ("throughput", Unit::ReqPerSec),
    ];

    fn counts(seconds: u64, due: u64, errors: u64, slow: u64) -> Counts {
        let mut h = Histogram::new(3).unwrap();
        h.record_n(1_000, due - slow).unwrap();
        if slow > 0 {
            h.record_n(500_000, slow).unwrap();
        }
        Counts {
            seconds,
            due,
            errors,
            latency_us: h,
            decided: None,
        }
    }

    #[test]
    fn an_error_rate_is_decided_once_the_errors_reach_the_share_of_the_planned_total() {
        let g = parse("error_rate < 1%", M).unwrap();
        // 1,000 due in all: 9 errors can still pass, 10 cannot.
        assert!(decide(&g, &counts(1, 100, 9, 0), Some(1000)).is_none());
        let why = decide(&g, &counts(1, 100, 10, 0), Some(1000)).unwrap();
        assert!(why.contains("10 requests failed already"), "{why}");
        // Unknown total: everything so far, after a second and 20 requests.
        assert!(decide(&g, &counts(0, 100, 50, 0), None).is_none());
        assert!(decide(&g, &counts(1, 10, 5, 0), None).is_none());
        assert!(decide(&g, &counts(1, 100, 50, 0), None).is_some());
    }

    #[test]
    fn a_latency_percentile_is_decided_when_its_tail_is_already_too_long() {
        let g = parse("latency_p99 < 300ms", M).unwrap();
        assert!(decide(&g, &counts(2, 200, 0, 10), Some(1000)).is_none());
        assert!(decide(&g, &counts(2, 200, 0, 11), Some(1000)).is_some());
    }

    #[test]
    fn only_ceilings_on_errors_and_latency_are_decidable() {
        assert!(decidable(&parse("error_rate < 1%", M).unwrap()));
        assert!(decidable(&parse("latency_p99 <= 300ms", M).unwrap()));
        assert!(!decidable(&parse("throughput > 100", M).unwrap()));
        assert!(!decidable(&parse("error_rate > 1%", M).unwrap()));
    }
}
