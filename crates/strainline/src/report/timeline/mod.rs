//! A load case over time, on one clock: the clients running, requests sent, responses
//! and errors a second, latency percentiles of each second (from its stored HDR
//! histogram: min, p50, p75, p90, p95, p99, max) and the target's CPU, memory and
//! threads beneath, with a ramp's steps and a spike's phases shaded; each scenario step
//! its own. Read from the store (in buckets of merged histograms past 900 seconds), then
//! drawn as one SVG of stacked panels that reads without script (a mail, a CI artifact), its
//! figures embedded as JSON, and a small script of our own (`timeline.js`, allowed by
//! its hash) that reads a second's values on hover and zooms on time (`draw`). Two runs'
//! timelines overlaid, baseline against candidate, are drawn the same way.

mod draw;

pub use draw::{render, render_overlay, render_steps, script_source, SCRIPT};

use hdrhistogram::Histogram;

use crate::load::series;
use crate::measure::Sample;
use crate::store::StoredHistogram;

/// One second of the load: its figures at its end (`t`, seconds from the load's start).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Point {
    pub t: f64,
    /// Requests sent, responses and errors, a second.
    pub sent: f64,
    pub responses: f64,
    pub errors: f64,
    /// The most clients running at once in it (each thread's most, added up: an upper
    /// bound when clients come and go within the second; none for the open model's
    /// sends).
    pub users: Option<f64>,
    /// Corrected latency (from the intended send time) of the second's responses, ms;
    /// none in a second nothing was answered (a gap, never 0 ms).
    pub min: Option<f64>,
    pub p50: Option<f64>,
    pub p75: Option<f64>,
    pub p90: Option<f64>,
    pub p95: Option<f64>,
    pub p99: Option<f64>,
    pub max: Option<f64>,
}

/// The target's figures at a sample, on the load's clock.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Target {
    pub t: f64,
    pub cpu: f64,
    pub rss_mib: f64,
    pub threads: f64,
}

/// A load case over time.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Timeline {
    pub seconds: Vec<Point>,
    /// Errors a second by cause: (cause, points) in the timeline's buckets, those it
    /// failed in only.
    pub causes: Vec<(String, Vec<(f64, f64)>)>,
    pub target: Vec<Target>,
    /// Phases shaded: (name, start, end) on the load's clock.
    pub phases: Vec<(String, f64, f64)>,
    /// Each scenario step's own seconds (responses, errors, percentiles), by name.
    pub steps: Vec<(String, Vec<Point>)>,
    /// Seconds a point stands for: 1, or more for a run longer than [`MOST_POINTS`]
    /// seconds, whose seconds are merged (their histograms exactly) in buckets.
    pub bucket: u64,
}

/// The most points a timeline keeps: a day's soak is drawn (and embedded) in buckets of
/// 96 s, not 86,400 points.
pub const MOST_POINTS: usize = 900;

/// The series a timeline takes from a case's stored ones (other charts leave them).
pub fn takes(series: &str) -> bool {
    matches!(
        series,
        series::COMPLETED | series::ERRORS | series::P99 | series::SENT | series::USERS
    ) || series == crate::load::LOAD_START
        || series.starts_with(crate::load::CAUSE_PREFIX)
        || series.starts_with(crate::load::STEP_PREFIX)
}

/// A stored series by the time of each point (to the millisecond): each second's
/// figure found at once, not by a scan (a day's soak has 86,400 of them).
struct ByTime(std::collections::HashMap<i64, f64>);

impl ByTime {
    fn of(points: Option<&[(f64, f64)]>) -> ByTime {
        ByTime(
            points
                .unwrap_or_default()
                .iter()
                .map(|(t, v)| (ms(*t), *v))
                .collect(),
        )
    }

    fn at(&self, t: f64) -> Option<f64> {
        self.0.get(&ms(t)).copied()
    }
}

fn ms(t: f64) -> i64 {
    (t * 1000.0).round() as i64
}

/// A second as read: its end, its histogram, and its figures a second (sent, responses,
/// errors) and users.
struct Raw {
    t: f64,
    hist: Histogram<u64>,
    rates: [f64; 3],
    users: Option<f64>,
}

/// Seconds in buckets of `bucket` (1: as they are): each bucket's histogram merged
/// exactly, its rates averaged, its users the most of its seconds'.
fn bucketed(mut raw: Vec<Raw>, bucket: usize) -> Vec<Point> {
    raw.sort_by(|a, b| a.t.total_cmp(&b.t));
    raw.chunks_mut(bucket.max(1))
        .map(|chunk| {
            let n = chunk.len() as f64;
            let (first, rest) = chunk.split_first_mut().expect("chunks are not empty");
            let mut rates = first.rates;
            for r in rest.iter() {
                let _ = first.hist.add(&r.hist);
                for (sum, v) in rates.iter_mut().zip(r.rates) {
                    *sum += v;
                }
            }
            let t = rest.last().unwrap_or(first).t;
            let users = (std::iter::once(&*first).chain(rest.iter()))
                .filter_map(|r| r.users)
                .reduce(f64::max);
            let mut p = point(t, &first.hist);
            [p.sent, p.responses, p.errors] = rates.map(|v| v / n);
            p.users = users;
            p
        })
        .collect()
}

/// A series of the seconds it had (the others are 0) in the timeline's buckets of the
/// run's `clock`: each bucket's mean a second, at its end, where it is not 0.
fn in_buckets(points: &[(f64, f64)], clock: &[f64], bucket: usize) -> Vec<(f64, f64)> {
    let by = ByTime::of(Some(points));
    (clock.chunks(bucket.max(1)))
        .map(|c| {
            let sum: f64 = c.iter().filter_map(|t| by.at(*t)).sum();
            (
                *c.last().expect("chunks are not empty"),
                sum / c.len() as f64,
            )
        })
        .filter(|(_, v)| *v > 0.0)
        .collect()
}

/// How many seconds a point of a timeline of `n` seconds stands for.
fn bucket_for(n: usize) -> usize {
    n.div_ceil(MOST_POINTS).max(1)
}

fn decode(h: &StoredHistogram) -> Option<Histogram<u64>> {
    if h.encoding != crate::load::recorder::hdr::STORED {
        return None;
    }
    crate::load::recorder::hdr::from_stored(&h.data)
}

impl Timeline {
    /// A case's timeline from its stored series, its seconds' histograms, the target's
    /// samples, its phases (`[name, t]` on the samples' clock) and its steps' names (by
    /// index); `None` when the case kept no seconds' histograms (not a load case, or
    /// stored before they were kept).
    pub fn read(
        series: &[(String, Vec<(f64, f64)>)],
        histograms: &[StoredHistogram],
        samples: &[Sample],
        phases: &[(String, f64)],
        step_names: &[String],
    ) -> Option<Timeline> {
        let named = |n: &str| series.iter().find(|(s, _)| s == n).map(|(_, p)| &p[..]);
        let [sent, responses, errors, users] = [
            series::SENT,
            series::COMPLETED,
            series::ERRORS,
            series::USERS,
        ]
        .map(|n| ByTime::of(named(n)));
        let raw: Vec<Raw> = (histograms.iter())
            .filter(|h| h.name == crate::load::SECOND_LATENCY)
            .filter_map(|h| {
                let t = h.span.1;
                Some(Raw {
                    t,
                    hist: decode(h)?,
                    rates: [&sent, &responses, &errors].map(|s| s.at(t).unwrap_or(0.0)),
                    users: users.at(t),
                })
            })
            .collect();
        if raw.is_empty() {
            return None;
        }
        // A long run's steps were kept per span of seconds: a point stands for whole
        // spans, so that no point's mean holds one span more than its neighbour's.
        let span = step_span(histograms);
        let bucket = bucket_for(raw.len()).next_multiple_of(span);
        let mut clock: Vec<f64> = raw.iter().map(|r| r.t).collect();
        clock.sort_by(f64::total_cmp);
        let seconds = bucketed(raw, bucket);
        let start = named(crate::load::LOAD_START)
            .and_then(|p| p.first())
            .map_or(0.0, |p| p.1);
        let end = seconds.last().map_or(0.0, |p| p.t);
        let every = samples.len().div_ceil(MOST_POINTS).max(1);
        let target = (samples.iter())
            .filter(|s| s.processes > 0)
            .map(|s| Target {
                t: s.t - start,
                cpu: s.cpu_cores,
                rss_mib: s.rss_bytes as f64 / 1_048_576.0,
                threads: s.threads as f64,
            })
            .filter(|s| s.t >= 0.0 && s.t <= end)
            .step_by(every)
            .collect();
        let causes = (series.iter())
            .filter_map(|(n, p)| Some((n.strip_prefix(crate::load::CAUSE_PREFIX)?, p)))
            .map(|(c, p)| (c.to_string(), in_buckets(p, &clock, bucket)))
            .collect();
        Some(Timeline {
            seconds,
            causes,
            target,
            phases: spans(phases, start, end),
            steps: steps(series, histograms, step_names, &clock, bucket, span),
            bucket: bucket as u64,
        })
    }

    /// The second, if any, when `key` (a [`Point`] field: "p95") first reached `at`.
    pub fn first_reaching(&self, key: &str, at: f64) -> Option<&Point> {
        self.seconds
            .iter()
            .find(|p| value(p, key).is_some_and(|v| v >= at))
    }
}

/// The widest span of seconds a step's histogram covers (1: its steps were kept per
/// second; see [`crate::load::StepSpans`]); a last, partial interval (of no whole
/// length) does not count. Its length, not its end: a later run's seconds are stored
/// on its case's first run's clock (a ramp's steps), ending off whole seconds.
fn step_span(histograms: &[StoredHistogram]) -> usize {
    (histograms.iter())
        .filter(|h| {
            (h.name.strip_prefix(crate::load::SECOND_LATENCY)).is_some_and(|r| r.starts_with('/'))
        })
        .map(|h| h.span.1 - h.span.0)
        .filter(|length| (length - length.round()).abs() < 1e-6)
        .map(|length| length.round().max(1.0) as usize)
        .max()
        .unwrap_or(1)
}

/// A step's rates on the run's clock: each point's rate is its span's (its
/// histograms' interval: `starts` by its end; else the `span` seconds before it), so
/// every second of the span has it — not the second it ends at alone, or a point's
/// mean would hold a fifth of its rate at spans of 5 s.
fn spread(
    points: &[(f64, f64)],
    clock: &[f64],
    span: usize,
    starts: &std::collections::HashMap<i64, f64>,
) -> ByTime {
    if span <= 1 {
        return ByTime::of(Some(points));
    }
    let mut by = ByTime(Default::default());
    for &(t, v) in points {
        let from =
            (starts.get(&ms(t)).copied()).unwrap_or(((t / span as f64).ceil() - 1.0) * span as f64);
        let first = clock.partition_point(|c| *c <= from);
        for c in clock[first..].iter().take_while(|c| **c <= t) {
            by.0.insert(ms(*c), v);
        }
    }
    by
}

/// Each step's seconds on the run's clock (`clock`: the run's seconds), in its buckets:
/// its histograms' percentiles, its series' responses and errors — a second it had none
/// of is 0 a second, with no latency (a gap, not a line drawn across it).
fn steps(
    series: &[(String, Vec<(f64, f64)>)],
    histograms: &[StoredHistogram],
    names: &[String],
    clock: &[f64],
    bucket: usize,
    span: usize,
) -> Vec<(String, Vec<Point>)> {
    let index_of = |rest: &str| -> Option<usize> {
        rest.strip_prefix(crate::load::STEP_PREFIX)?
            .split('/')
            .next()?
            .parse()
            .ok()
    };
    let mut hists: std::collections::HashMap<(usize, i64), Histogram<u64>> = Default::default();
    // Where the spans ending at each time began (every step's spans end together).
    let mut starts: std::collections::HashMap<i64, f64> = Default::default();
    let mut indices = std::collections::BTreeSet::new();
    for h in histograms {
        let Some(i) = (h.name.strip_prefix(crate::load::SECOND_LATENCY))
            .and_then(|r| r.strip_prefix('/'))
            .and_then(index_of)
        else {
            continue;
        };
        if let Some(hist) = decode(h) {
            indices.insert(i);
            hists.insert((i, ms(h.span.1)), hist);
            starts.insert(ms(h.span.1), h.span.0);
        }
    }
    let mut rates: std::collections::HashMap<(usize, &str), ByTime> = Default::default();
    for (name, points) in series {
        let Some(i) = index_of(name) else { continue };
        for what in ["responses", "errors"] {
            if name.ends_with(&format!("/{what}_per_second")) {
                indices.insert(i);
                rates.insert((i, what), spread(points, clock, span, &starts));
            }
        }
    }
    let rate = |i: usize, what: &str, t: f64| rates.get(&(i, what)).and_then(|r| r.at(t));
    indices
        .into_iter()
        .map(|i| {
            let raw = (clock.iter())
                .map(|&t| Raw {
                    t,
                    hist: (hists.remove(&(i, ms(t))))
                        .unwrap_or_else(|| Histogram::new(2).expect("valid precision")),
                    rates: [
                        0.0,
                        rate(i, "responses", t).unwrap_or(0.0),
                        rate(i, "errors", t).unwrap_or(0.0),
                    ],
                    users: None,
                })
                .collect();
            let name = (names.get(i).filter(|n| !n.is_empty()).cloned())
                .unwrap_or_else(|| format!("step {}", i + 1));
            (name, bucketed(raw, bucket))
        })
        .collect()
}

/// Baseline against candidate over time: for each case both versions' newest runs have
/// a timeline of, `(case, drawing)` — the two loads overlaid, each from its own start.
/// None for a comparison within one run (a paired session's sides share it).
pub fn overlays(
    store: &crate::store::Store,
    c: &crate::report::compare::Comparison,
) -> Vec<(String, String)> {
    let (Some(b), Some(k)) = (c.baseline.runs.last(), c.candidate.runs.last()) else {
        return Vec::new();
    };
    if b == k {
        return Vec::new();
    }
    let read = |id: &i64| crate::report::run::load(store, &id.to_string()).ok();
    let (Some(base), Some(cand)) = (read(b), read(k)) else {
        return Vec::new();
    };
    let key = |c: &crate::report::run::CaseData| {
        crate::store::case_key(&c.row.name, &c.row.test_kind).to_string()
    };
    let mut out: Vec<(String, String)> = Vec::new();
    for bc in &base.cases {
        let name = key(bc);
        if out.iter().any(|(n, _)| *n == name) {
            continue;
        }
        let Some(kc) = cand.cases.iter().find(|c| key(c) == name) else {
            continue;
        };
        if let (Some(bt), Some(kt)) = (&bc.timeline, &kc.timeline) {
            let id = format!("overlay-{}-{}", bc.row.id, kc.row.id);
            out.push((name, render_overlay(bt, kt, &id)));
        }
    }
    out
}

/// A field of a point by its name.
fn value(p: &Point, key: &str) -> Option<f64> {
    Some(match key {
        "sent" => p.sent,
        "responses" => p.responses,
        "errors" => p.errors,
        "users" => p.users?,
        "min" => p.min?,
        "p50" => p.p50?,
        "p75" => p.p75?,
        "p90" => p.p90?,
        "p95" => p.p95?,
        "p99" => p.p99?,
        "max" => p.max?,
        _ => return None,
    })
}

/// The second (or bucket) ending at `t`: its percentiles from `hist`, in ms (none when
/// it holds nothing).
fn point(t: f64, hist: &Histogram<u64>) -> Point {
    let some = !hist.is_empty();
    let ms = |v: u64| some.then_some(v as f64 / 1000.0);
    let q = |q: f64| ms(hist.value_at_quantile(q));
    Point {
        t,
        min: ms(hist.min()),
        p50: q(0.5),
        p75: q(0.75),
        p90: q(0.9),
        p95: q(0.95),
        p99: q(0.99),
        max: ms(hist.max()),
        ..Point::default()
    }
}

/// Phases `[name, t]` (samples' clock, each until the next) as spans on the load's
/// clock within `[0, end]`; the last ("end") closes the one before it.
fn spans(phases: &[(String, f64)], start: f64, end: f64) -> Vec<(String, f64, f64)> {
    if phases.len() <= 2 {
        // One phase over the whole load says nothing a shade would.
        return Vec::new();
    }
    phases
        .windows(2)
        .map(|w| {
            (
                w[0].0.clone(),
                (w[0].1 - start).clamp(0.0, end),
                (w[1].1 - start).clamp(0.0, end),
            )
        })
        .filter(|(_, a, b)| b > a)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A second of two steps: the first answered 10 times in 1 ms, the second 3 times
    /// in 2 ms.
    fn two_steps() -> crate::load::recorder::Tally {
        let mut iv = crate::load::recorder::Tally::default();
        iv.step_seconds.resize_with(2, Default::default);
        for (st, (n, us)) in iv.step_seconds.iter_mut().zip([(10, 1000), (3, 2000)]) {
            (st.sent, st.completed, st.ok) = (n, n, n);
            st.latency.record_n(us, n).unwrap();
        }
        (iv.sent, iv.completed, iv.ok) = (13, 13, 13);
        iv.corrected.record_n(1000, 13).unwrap();
        iv
    }

    /// A three-hour run's steps, kept per 5 s span, drawn in points of whole spans:
    /// every point reads each step's true rate (points of 12 s, the bucket three hours
    /// would take alone, held two or three spans' answers: 8.3 or 12.5 a second for 10).
    #[test]
    fn a_long_run_s_step_timeline_stands_each_point_for_whole_spans() {
        let mut spans = crate::load::StepSpans::new(Some(std::time::Duration::from_secs(10_800)));
        assert_eq!(spans.width(), 5);
        let mut seconds = Vec::new();
        // The run's last second was never closed: its last interval is 1.4 s long.
        for t in 1..=10_799 {
            spans.push(&mut seconds, t as f64, &two_steps());
        }
        spans.push(&mut seconds, 10_800.4, &two_steps());
        spans.end(&mut seconds);
        let histograms: Vec<StoredHistogram> = (crate::load::latency_seconds(&seconds).into_iter())
            .map(|(name, span, d)| StoredHistogram {
                name,
                span,
                encoding: crate::load::recorder::hdr::STORED.into(),
                data: d.to_vec(),
            })
            .collect();
        let tl = Timeline::read(
            &crate::load::per_second(&seconds),
            &histograms,
            &[],
            &[],
            &["a".into(), "b".into()],
        )
        .unwrap();
        assert_eq!(tl.bucket, 15);
        for ((name, points), (each, ms)) in tl.steps.iter().zip([(10.0, 1.0), (3.0, 2.0)]) {
            assert_eq!(points.len(), 720, "{name}");
            let (last, points) = points.split_last().unwrap();
            // The last point's three spans: two of 5 s, and the last (10,795 to
            // 10,800.4 s) with five intervals' answers, its rate spread over its seconds.
            assert!(
                (last.responses - (2.0 * each + 5.0 * each / 5.4) / 3.0).abs() < 1e-9,
                "{name}: {last:?}"
            );
            for p in points {
                assert!((p.responses - each).abs() < 1e-9, "{name}: {p:?}");
                assert!(
                    p.p50.is_some_and(|v| (v - ms).abs() < 0.02),
                    "{name}: {p:?}"
                );
            }
        }
    }

    /// A two-hour run's steps (spans of 2 s) stored on another run's clock, 12.345 s
    /// later (a ramp's later step on its first one's): its spans end off whole seconds,
    /// and are spans still — each point reads the step's rate, not half of it.
    #[test]
    fn a_long_run_s_spans_on_a_shifted_clock_are_spans_still() {
        let mut spans = crate::load::StepSpans::new(Some(std::time::Duration::from_secs(7200)));
        assert_eq!(spans.width(), 2);
        let mut seconds = Vec::new();
        for t in 1..=7200 {
            spans.push(&mut seconds, t as f64, &two_steps());
        }
        spans.end(&mut seconds);
        let shift = 12.345;
        let histograms: Vec<StoredHistogram> = (crate::load::latency_seconds(&seconds).into_iter())
            .map(|(name, (a, b), d)| StoredHistogram {
                name,
                span: (a + shift, b + shift),
                encoding: crate::load::recorder::hdr::STORED.into(),
                data: d.to_vec(),
            })
            .collect();
        let series: Vec<(String, Vec<(f64, f64)>)> = (crate::load::per_second(&seconds)
            .into_iter())
        .map(|(n, p)| (n, p.into_iter().map(|(t, v)| (t + shift, v)).collect()))
        .collect();
        let tl = Timeline::read(&series, &histograms, &[], &[], &["a".into(), "b".into()]).unwrap();
        assert_eq!(tl.bucket % 2, 0, "a point of whole spans");
        for ((name, points), each) in tl.steps.iter().zip([10.0, 3.0]) {
            for p in points {
                assert!((p.responses - each).abs() < 1e-9, "{name}: {p:?}");
            }
        }
    }

    fn stored(t: f64, values_us: &[u64]) -> StoredHistogram {
        let mut h = crate::load::recorder::histogram();
        for v in values_us {
            h.record(*v).unwrap();
        }
        StoredHistogram {
            name: crate::load::SECOND_LATENCY.into(),
            span: (t - 1.0, t),
            encoding: crate::load::recorder::hdr::STORED.into(),
            data: crate::load::recorder::hdr::stored(&h).unwrap(),
        }
    }

    /// Seconds read back from their histograms and series: percentiles exact to the
    /// histogram's precision, counts from the series, the users' step and the p95's
    /// rise found where they are.
    #[test]
    fn a_timeline_reads_each_second_from_its_histogram_and_series() {
        let mut hists = Vec::new();
        let mut users = Vec::new();
        let mut sent = Vec::new();
        for t in 1..=10 {
            let slow = if t >= 6 { 400_000 } else { 10_000 };
            let values: Vec<u64> = (1..=100)
                .map(|i| if i > 90 { slow } else { 5_000 })
                .collect();
            hists.push(stored(t as f64, &values));
            users.push((t as f64, if t >= 4 { 10.0 } else { 5.0 }));
            sent.push((t as f64, 100.0));
        }
        let series = vec![
            ("users".to_string(), users),
            ("sent_per_second".to_string(), sent),
            (crate::load::LOAD_START.to_string(), vec![(0.0, 2.0)]),
            ("errors_per_second/timeout".to_string(), vec![(7.0, 3.0)]),
        ];
        let phases = [
            ("before".to_string(), 2.0),
            ("spike".to_string(), 5.0),
            ("end".to_string(), 7.0),
        ];
        let tl = Timeline::read(&series, &hists, &[], &phases, &[]).unwrap();
        assert_eq!(tl.seconds.len(), 10);
        assert!(
            (tl.seconds[0].p50.unwrap() - 5.0).abs() < 0.01,
            "{:?}",
            tl.seconds[0]
        );
        assert!(
            (tl.seconds[0].p95.unwrap() - 10.0).abs() < 0.01,
            "{:?}",
            tl.seconds[0]
        );
        assert!(
            (tl.seconds[6].p95.unwrap() - 400.0).abs() < 0.5,
            "{:?}",
            tl.seconds[6]
        );
        let crossed = tl.first_reaching("p95", 300.0).unwrap();
        assert_eq!((crossed.t, crossed.users), (6.0, Some(10.0)));
        assert_eq!(tl.first_reaching("users", 10.0).unwrap().t, 4.0);
        assert_eq!(tl.seconds[3].sent, 100.0);
        assert_eq!(tl.causes, [("timeout".to_string(), vec![(7.0, 3.0)])]);
        assert_eq!(
            tl.phases,
            [
                ("before".to_string(), 0.0, 3.0),
                ("spike".to_string(), 3.0, 5.0)
            ]
        );
        let page = render(&tl, "t1");
        assert!(page.contains("\"p95\":400"), "the data holds each second");
        assert!(page.contains("data-key=\"users\""));
    }

    #[test]
    fn a_case_without_seconds_has_no_timeline_and_a_script_cannot_end_the_data() {
        assert!(Timeline::read(&[], &[], &[], &[], &[]).is_none());
        let tl = Timeline {
            seconds: vec![Point {
                t: 1.0,
                ..Point::default()
            }],
            phases: vec![("</script><b>".into(), 0.0, 1.0)],
            ..Timeline::default()
        };
        let page = render(&tl, "t");
        assert!(!page.contains("</script><b>"));
        assert_eq!(page.matches("</script>").count(), 1);
        assert!(script_source().starts_with("'sha256-"));
    }
}
