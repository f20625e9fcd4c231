//! The `spike` kind: a base rate, a jump to `factor` times it, and back — the errors and
//! latency from the spike's start until the target recovered, how long that took, and
//! the memory it left behind. One run of the load engine at a rate with two steps, so
//! that a backlog the spike built is still there when the base rate returns.
//!
//! Recovery: the first second after the spike's end from which 3 seconds in a row are
//! back within the band of the before-spike seconds (after the first): a p99 at most the
//! largest of `1 + band` times their median p99, that median + 1 ms (a p99 of
//! microseconds is not held to its noise) and their worst second's p99 (a target that
//! stalled now and then before is not asked to stop); an error rate, of the requests
//! that ended, at most their rate plus three standard errors of that second's count (at
//! least one point). A second with nothing ended is not back; the run's last interval
//! counts when it is at least half a second. A target that did not keep up with the base
//! rate before the spike has no baseline to recover to: FAILED, saying so.

use super::lines::Line;
use super::load::{drive_at, judge_generator, keep_latency, load_metrics, samples};
use super::{d, CaseCtx, CaseResult, Status};
use crate::load::schedule::Rate;
use crate::load::Second;
use crate::store::Metric;
use crate::suite::{self, Workload};
use crate::sut::lifecycle::Running;
use crate::units::{format_micros, format_number, Bytes};

/// Seconds in a row within the band that make a recovery.
const IN_A_ROW: usize = 3;

/// The least a second's p99 may exceed the before-spike p99 by and still be within the
/// band, µs.
const LEAST_SLACK_US: f64 = 1000.0;

/// The least error rate a second may have above the before-spike rate and still be
/// within (beyond three standard errors of its count).
const ERROR_SLACK: f64 = 0.01;

/// The shortest last interval judged as a second.
const LEAST_PARTIAL: f64 = 0.5;

/// The share of the base rate the target must have served before the spike.
const KEPT_UP: f64 = 0.9;

pub(super) fn run(
    ctx: &CaseCtx,
    t: &suite::Spike,
    w: &Workload,
    running: Option<&Running>,
    r: &mut CaseResult,
) -> crate::error::Result<()> {
    let (b, s, a) = (
        t.before.as_secs_f64(),
        t.during.as_secs_f64(),
        t.after.as_secs_f64(),
    );
    let (base, high) = (t.rate, t.rate * t.factor);
    let rate = Rate::Staged(vec![
        (0.0, base),
        (b, base),
        (b, high),
        (b + s, high),
        (b + s, base),
        (b + s + a, base),
    ]);
    let total = t.before + t.during + t.after;
    let run = drive_at(ctx, running, Some(rate), w.connections, Some(total), None)?;
    load_metrics(ctx, r, &run.summary);
    keep_latency(r, &run);
    let t0 = run.window.0;
    for (phase, at) in [("before", 0.0), ("spike", b), ("after", b + s)] {
        r.phases.push((phase.into(), t0 + at));
    }
    r.phases.push(("end".into(), run.window.1));
    judge_generator(r, &run);
    r.table.push(Line::Said {
        words: format!(
            "spike: {base} req/s for {}, {}× ({high} req/s) for {}, {base} req/s for {}",
            d(t.before),
            format_number(t.factor),
            d(t.during),
            d(t.after),
            base = format_number(base),
            high = format_number(high),
        ),
    });
    if run.outcome.interrupted {
        r.fail(
            Status::Invalid,
            "interrupted before the spike's recovery window ended: its recovery was not judged"
                .into(),
        );
        return Ok(());
    }
    let j = judge(&run.outcome.seconds, (b, s), t.band);
    keep(r, &j, t);
    // A target that exited left nothing behind to measure.
    if running.is_some_and(|x| x.exited().is_none()) {
        left_behind(r, running, run.window, b);
    }
    Ok(())
}

/// What the seconds of a spike say.
#[derive(Debug, Clone, PartialEq)]
struct Judged {
    /// The before-spike p99 (the median of its seconds'), µs, and error rate.
    before_p99_us: f64,
    before_errors: f64,
    /// What the target served before the spike, a second (requests that ended).
    served: f64,
    /// A second is within the band at or under this p99, µs.
    limit_us: f64,
    /// Seconds from the spike's end until the recovery began; `None`: not within.
    recovered: Option<f64>,
    /// From the spike's start to the recovery (or the end): the p99 of its requests
    /// (its seconds' histograms merged; the worst second's where they were not kept),
    /// µs, and the requests that failed of those that ended.
    peak_p99_us: u64,
    errors: u64,
    ended: u64,
    /// The last second outside the band: its p99 (µs; `None`: no reply) and error rate.
    last_out: Option<(Option<u64>, f64)>,
}

/// A second judged: when it began and ended, and what ended in it.
struct Sec<'a> {
    from: f64,
    to: f64,
    s: &'a Second,
}

impl Sec<'_> {
    /// Requests that ended in it: replies and failures to send or hear.
    fn ended(&self) -> u64 {
        self.s.ok + self.s.errors
    }

    fn error_rate(&self) -> f64 {
        if self.ended() == 0 {
            0.0
        } else {
            self.s.errors as f64 / self.ended() as f64
        }
    }
}

/// Judges the seconds of a run whose spike started at `b` and lasted `s` seconds.
fn judge(seconds: &[Second], (b, s): (f64, f64), band: f64) -> Judged {
    let mut from = 0.0;
    let mut all = Vec::with_capacity(seconds.len());
    for x in seconds {
        if x.t - from >= LEAST_PARTIAL {
            all.push(Sec { from, to: x.t, s: x });
        }
        from = x.t;
    }
    let before: Vec<&Sec> = all.iter().filter(|x| x.from >= 1.0 && x.to <= b).collect();
    let mut p99s: Vec<u64> = before.iter().map(|x| x.s.p99_us).collect();
    p99s.sort_unstable();
    // The lower middle: of two seconds, the faster (the first may still be warming).
    let median = p99s.get(p99s.len().saturating_sub(1) / 2).copied().unwrap_or(0) as f64;
    let worst = p99s.last().copied().unwrap_or(0) as f64;
    let (errors, ended, time) = before.iter().fold((0, 0, 0.0), |(e, n, t), x| {
        (e + x.s.errors, n + x.ended(), t + (x.to - x.from))
    });
    let before_errors = if ended == 0 {
        0.0
    } else {
        errors as f64 / ended as f64
    };
    let limit_us = (median * (1.0 + band))
        .max(median + LEAST_SLACK_US)
        .max(worst);
    let within = |x: &Sec| {
        let n = x.ended() as f64;
        let noise = 3.0 * (before_errors * (1.0 - before_errors) / n.max(1.0)).sqrt();
        x.ended() > 0
            && x.s.completed > 0
            && x.s.p99_us as f64 <= limit_us
            && x.error_rate() <= before_errors + noise.max(ERROR_SLACK)
    };
    let after: Vec<&Sec> = all.iter().filter(|x| x.from >= b + s).collect();
    let start = after
        .windows(IN_A_ROW)
        .position(|w| w.iter().all(|x| within(x)));
    let recovered = start.map(|i| (after[i].from - (b + s)).max(0.0));
    // From the spike's start to the recovery (or the end of the run).
    let until = start.map_or(f64::INFINITY, |i| after[i].from);
    let disturbed: Vec<&Sec> = all
        .iter()
        .filter(|x| x.from >= b && x.to <= until)
        .collect();
    Judged {
        before_p99_us: median,
        before_errors,
        served: if time > 0.0 { ended as f64 / time } else { 0.0 },
        limit_us,
        recovered,
        peak_p99_us: p99_of(&disturbed),
        errors: disturbed.iter().map(|x| x.s.errors).sum(),
        ended: disturbed.iter().map(|x| x.ended()).sum(),
        last_out: after
            .iter()
            .rev()
            .find(|x| !within(x))
            .map(|x| ((x.s.completed > 0).then_some(x.s.p99_us), x.error_rate())),
    }
}

/// The p99 of the requests of `seconds`: their histograms merged (exactly; each came
/// as its histogram), or the worst second's p99 where a second kept none.
fn p99_of(seconds: &[&Sec]) -> u64 {
    let worst = seconds.iter().map(|x| x.s.p99_us).max().unwrap_or(0);
    let mut all = crate::load::recorder::histogram();
    for x in seconds {
        let decoded = crate::load::recorder::hdr::from_stored(&x.s.latency);
        match decoded {
            Some(h) if all.add(&h).is_ok() => {}
            _ if x.s.completed == 0 => {}
            _ => return worst,
        }
    }
    if all.is_empty() {
        worst
    } else {
        all.value_at_quantile(0.99)
    }
}

/// The spike's metrics, lines and verdict.
fn keep(r: &mut CaseResult, j: &Judged, t: &suite::Spike) {
    let pct = |x: f64| format!("{:.2}%", 100.0 * x);
    let spike_errors = if j.ended == 0 {
        0.0
    } else {
        j.errors as f64 / j.ended as f64
    };
    // A target that did not keep up with the base rate has no baseline to come back to.
    if j.served < KEPT_UP * t.rate {
        let words = format!(
            "the target did not keep up with the base rate before the spike: it served {} of {} req/s, so there is no baseline to recover to (lower `rate`)",
            format_number(j.served),
            format_number(t.rate)
        );
        r.table.push(Line::Said {
            words: words.clone(),
        });
        r.fail(Status::Failed, words);
        return;
    }
    r.metrics
        .push(Metric::of("before_p99", j.before_p99_us / 1000.0));
    r.metrics
        .push(Metric::of("spike_p99", j.peak_p99_us as f64 / 1000.0));
    r.metrics.push(Metric::of("spike_error_rate", spike_errors));
    r.table.push(Line::Said {
        words: format!(
            "before the spike: p99 {} (the median of its seconds), errors {}; from the spike to {}: p99 {}, errors {} ({} of {} requests)",
            format_micros(j.before_p99_us as u64),
            pct(j.before_errors),
            if j.recovered.is_some() { "the recovery" } else { "the end" },
            format_micros(j.peak_p99_us),
            pct(spike_errors),
            j.errors,
            j.ended
        ),
    });
    let band = format!(
        "{IN_A_ROW} seconds in a row with p99 ≤ {} (the before-spike p99 +{:.0}%, at least +1ms and its worst second) and errors within three standard errors (at least 1 point) of {}",
        format_micros(j.limit_us as u64),
        100.0 * t.band,
        pct(j.before_errors)
    );
    match j.recovered {
        Some(secs) => {
            r.metrics.push(Metric::of("recovery_time", secs));
            r.table.push(Line::Said {
                // Judged by whole seconds: it is known to the second, no finer.
                words: format!(
                    "recovered {secs:.0}s after the spike's end (to the second): {band}"
                ),
            });
        }
        None => {
            let last = j.last_out.map_or(String::new(), |(p99, e)| {
                format!(
                    "; the last second outside it: p99 {}, errors {}",
                    p99.map_or("- (no reply)".into(), format_micros),
                    pct(e)
                )
            });
            let words = format!(
                "recovery: not within {} of the spike's end (no {band}){last}",
                d(t.after)
            );
            r.table.push(Line::Said {
                words: words.clone(),
            });
            r.fail(Status::Failed, words);
        }
    }
}

/// The target's memory after the spike against before it (a watched target's): the
/// mean RSS of the before-spike seconds after the first, and of the run's last 3.
fn left_behind(r: &mut CaseResult, running: Option<&Running>, (t0, t1): (f64, f64), b: f64) {
    let all = samples(running);
    let mean = |lo: f64, hi: f64| {
        let v: Vec<f64> = all
            .iter()
            .filter(|x| x.t > lo && x.t <= hi)
            .map(|x| x.rss_bytes as f64)
            .collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    };
    let (Some(before), Some(after)) = (mean(t0 + 1.0, t0 + b), mean(t1 - 3.0, t1)) else {
        return;
    };
    let left = after - before;
    r.metrics.push(Metric::of("rss_left", left));
    r.table.push(Line::Said {
        words: format!(
            "target memory: {} before the spike, {} at the end ({}{} left behind)",
            Bytes(before as u64),
            Bytes(after as u64),
            if left < 0.0 { "-" } else { "+" },
            Bytes(left.abs() as u64)
        ),
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The spike's p99 is of its requests: a second with 2 slow requests of 100 and a
    /// second of 900 fast ones make a p99 of the fast, not the first second's slow one.
    #[test]
    fn the_spike_s_p99_is_of_its_requests_not_its_worst_second() {
        let second = |t: f64, values: &[(u64, u64)]| {
            let mut h = crate::load::recorder::histogram();
            let mut n = 0;
            for (v, count) in values {
                h.record_n(*v, *count).unwrap();
                n += count;
            }
            Second {
                t,
                completed: n,
                ok: n,
                p99_us: h.value_at_quantile(0.99),
                latency: crate::load::recorder::hdr::stored(&h).unwrap(),
                ..Second::default()
            }
        };
        let a = second(1.0, &[(10_000, 98), (600_000, 2)]);
        let b = second(2.0, &[(10_000, 900)]);
        let secs = [
            Sec { from: 0.0, to: 1.0, s: &a },
            Sec { from: 1.0, to: 2.0, s: &b },
        ];
        let both: Vec<&Sec> = secs.iter().collect();
        assert!(a.p99_us > 590_000);
        assert!((p99_of(&both) as f64 - 10_000.0).abs() < 20.0, "{}", p99_of(&both));
        // Without the histograms (seconds stored before they were kept): the worst.
        let bare = Second { latency: Vec::new(), ..a.clone() };
        let old = [Sec { from: 0.0, to: 1.0, s: &bare }, Sec { from: 1.0, to: 2.0, s: &b }];
        assert_eq!(p99_of(&old.iter().collect::<Vec<_>>()), a.p99_us);
    }

    /// Whole seconds 1..=n from (p99 ms, errors) each, 100 replies a second.
    fn seconds(each: &[(u64, u64)]) -> Vec<Second> {
        each.iter()
            .enumerate()
            .map(|(i, &(p99_ms, errors))| Second {
                t: (i + 1) as f64,
                sent: 100,
                completed: 100,
                ok: 100 - errors,
                errors,
                p50_us: p99_ms * 500,
                p99_us: p99_ms * 1000,
                max_us: p99_ms * 1000,
                ..Second::default()
            })
            .collect()
    }

    #[test]
    fn a_backlog_that_drains_recovers_when_three_seconds_in_a_row_are_back() {
        // 4 s before (10 ms), a 3 s spike, a backlog for 4 s more, then back; one blip.
        let mut each = vec![(50, 0), (10, 0), (11, 0), (10, 0)];
        each.extend([(900, 2), (2000, 5), (3000, 1)]);
        each.extend([(2500, 0), (1500, 0), (12, 0), (600, 0), (14, 0), (10, 0), (11, 0)]);
        let j = judge(&seconds(&each), (4.0, 3.0), 0.5);
        assert_eq!(j.before_p99_us, 10_000.0, "the median of seconds 2–4");
        assert_eq!(j.limit_us, 15_000.0);
        assert_eq!(j.served, 100.0);
        // Seconds 12–14 are the first three in a row: it began at 11 s, 4 s after 7 s.
        assert_eq!(j.recovered, Some(4.0));
        assert_eq!(j.peak_p99_us, 3_000_000);
        assert_eq!((j.errors, j.ended), (8, 700));
        assert_eq!(j.last_out, Some((Some(600_000), 0.0)));
    }

    #[test]
    fn a_target_that_stays_slow_never_recovers_and_errors_count_against_the_band() {
        let each = [(5, 0), (5, 0), (5, 0), (400, 0), (400, 0), (300, 0), (200, 0), (200, 0)];
        let j = judge(&seconds(&each), (3.0, 1.0), 0.5);
        assert_eq!(j.recovered, None);
        assert_eq!(j.limit_us, 7_500.0, "+50% of 5 ms: more than 1 ms");
        assert_eq!(j.last_out, Some((Some(200_000), 0.0)));
        // Fast again, but failing 5% of its replies: not back either.
        let each = [(5, 0), (5, 0), (5, 0), (400, 9), (5, 5), (5, 5), (5, 5), (5, 5)];
        let j = judge(&seconds(&each), (3.0, 1.0), 0.5);
        assert_eq!(j.recovered, None);
        assert_eq!(j.last_out, Some((Some(5_000), 0.05)));
        // A spike it never felt: recovered at once.
        let each = [(5, 0), (5, 0), (5, 0), (5, 0), (5, 0), (5, 0), (5, 0)];
        assert_eq!(judge(&seconds(&each), (3.0, 1.0), 0.5).recovered, Some(0.0));
    }

    #[test]
    fn a_second_with_no_reply_is_not_within_the_band() {
        let mut s = seconds(&[(1, 0); 8]);
        s[4].completed = 0;
        s[4].p99_us = 0;
        let j = judge(&s, (3.0, 1.0), 0.5);
        assert_eq!(j.limit_us, 2_000.0, "at least 1 ms above a 1 ms p99");
        assert_eq!(j.recovered, Some(1.0), "seconds 6–8, not 5, which had no reply");
    }

    #[test]
    fn a_target_as_it_was_before_is_back_however_it_was() {
        // Half its requests failing from the start, 50 a second: 26 of 50 is noise.
        let mut s = seconds(&[(5, 0); 9]);
        for (x, errors) in s.iter_mut().zip([25, 25, 24, 26, 40, 26, 27, 25, 28]) {
            (x.ok, x.errors, x.completed) = (50 - errors, errors, 50);
        }
        let j = judge(&s, (4.0, 1.0), 0.5);
        assert_eq!(j.before_errors, 0.5);
        assert_eq!(j.recovered, Some(0.0));
        // A stall every few seconds before the spike is allowed after it too.
        let each = [(5, 0), (5, 0), (300, 0), (5, 0), (900, 0), (5, 0), (300, 0), (5, 0), (5, 0)];
        let j = judge(&seconds(&each), (4.0, 1.0), 0.5);
        assert_eq!(j.limit_us, 300_000.0, "its worst second before");
        assert_eq!(j.recovered, Some(0.0));
        // The run's last interval counts when it is at least half a second.
        let mut s = seconds(&[(5, 0), (5, 0), (5, 0), (400, 0), (5, 0), (5, 0), (5, 0)]);
        s[6].t = 6.6;
        assert_eq!(judge(&s, (3.0, 1.0), 0.5).recovered, Some(0.0));
        s[6].t = 6.4;
        assert_eq!(judge(&s, (3.0, 1.0), 0.5).recovered, None);
        // Failures to connect end requests too: a dead target's seconds are all errors.
        let mut s = seconds(&[(5, 0); 8]);
        for x in &mut s[4..] {
            (x.ok, x.errors, x.completed, x.p99_us) = (0, 50, 0, 0);
        }
        let j = judge(&s, (3.0, 1.0), 0.5);
        assert_eq!(j.recovered, None);
        assert_eq!(j.last_out, Some((None, 1.0)));
        assert_eq!((j.errors, j.ended), (200, 300));
    }
}
