//! An access log as `load --replay` sends it, in memory bounded whatever the log's
//! size: read once to count and check it (every method and path; nothing is kept but
//! counts), then read again by each worker as the run goes, in time order. A log is
//! written when requests end, so arrivals (logged time less the response time) come a
//! little out of order: lines wait in a window of [`REORDER_SECONDS`] (and at most
//! [`REORDER_LINES`] lines and [`REORDER_BYTES`]) to be sent in their order; a line later than that is sent with
//! the one before it. A log with one-second timestamps spreads each
//! second's requests evenly over it, in their logged order.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;

use super::parse::{self, JsonFields, Malformed};
use crate::load::replay::{request_of, Line, ReplayLog, Stream};

/// How far out of order a log's arrivals may be and still be sent in order, seconds.
pub const REORDER_SECONDS: f64 = 60.0;
/// The most lines, and bytes of their requests, held to reorder them.
pub const REORDER_LINES: usize = 100_000;
pub const REORDER_BYTES: usize = 8 << 20;

/// What the first read found: requests, the earliest and latest arrival, whether every
/// time is a whole second, and how many requests share the latest one.
struct Counts {
    n: u64,
    first: f64,
    last: f64,
    whole: bool,
    at_last: u64,
}

/// Opens an access log for `--replay`: counted and
/// checked now, streamed in time order as the run goes.
pub fn open(path: &std::path::Path, speed: f64) -> crate::error::Result<ReplayLog> {
    if !(speed.is_finite() && speed > 0.0) {
        return Err(crate::Error::usage(format!(
            "--speed {speed}: give a positive number (2 = twice as fast)"
        )));
    }
    let (log, bad) = read(path, speed)?;
    if bad.0 > 0 {
        tracing::warn!(
            "note: {}: {} malformed lines not replayed{}",
            path.display(),
            bad.0,
            bad.1
                .first()
                .map(|m| format!(" (first: line {}: {})", m.line, m.reason))
                .unwrap_or_default()
        );
    }
    Ok(log)
}

/// `--replay PATH --speed S`: the log counted and checked, streamed in the run; the
/// malformed lines skipped.
pub fn read(path: &Path, speed: f64) -> crate::error::Result<(ReplayLog, (u64, Vec<Malformed>))> {
    let fields = JsonFields::default();
    let mut bad = (0u64, Vec::new());
    let mut c = Counts {
        n: 0,
        first: f64::INFINITY,
        last: f64::NEG_INFINITY,
        whole: true,
        at_last: 0,
    };
    let mut refused: Option<crate::Error> = None;
    let none = Bytes::new();
    parse::read_while(path, &fields, &mut bad, |e| {
        let target = target(&e);
        if let Err(why) = request_of(&e.method, &target, &[], &none) {
            refused = Some(why.context(format!("{}: request {}", path.display(), c.n + 1)));
            return false;
        }
        c.n += 1;
        c.first = c.first.min(e.time);
        if e.time > c.last {
            (c.last, c.at_last) = (e.time, 1);
        } else if e.time == c.last {
            c.at_last += 1;
        }
        c.whole &= e.time.fract() == 0.0;
        true
    })?;
    if let Some(why) = refused {
        return Err(why);
    }
    if c.n == 0 {
        return Err(crate::Error::usage(format!(
            "{}: no request to replay",
            path.display()
        )));
    }
    // The last request's offset: the latest second, spread, ends at (k-1)/k of it.
    let within = if c.whole {
        (c.at_last - 1) as f64 / c.at_last as f64
    } else {
        0.0
    };
    let last = (c.last - c.first + within) / speed;
    let source = path.display().to_string();
    let (file, t0, whole) = (path.to_path_buf(), c.first, c.whole);
    let stream = Stream {
        open: Arc::new(move || Box::new(ordered(file.clone(), t0, speed, whole))),
        count: c.n,
        last,
    };
    Ok((
        ReplayLog {
            source,
            speed,
            times: Vec::new(),
            requests: Vec::new(),
            stream: Some(stream),
        },
        bad,
    ))
}

fn target(e: &parse::Entry) -> String {
    match &e.query {
        Some(q) => format!("{}?{q}", e.path),
        None => e.path.clone(),
    }
}

/// A line waiting to be sent in order: its arrival, its place in the file, and what.
type Held = Reverse<(Ordered, u64, String, String)>;

/// An arrival time that orders (log times are finite).
#[derive(PartialEq)]
struct Ordered(f64);
impl Eq for Ordered {}
impl PartialOrd for Ordered {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Ordered {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&o.0)
    }
}

/// The log's requests in time order, read by a thread of its own into a bounded
/// channel; the reading stops when the receiver goes (the run ended).
fn ordered(path: PathBuf, t0: f64, speed: f64, whole: bool) -> impl Iterator<Item = Line> + Send {
    let (tx, rx) = std::sync::mpsc::sync_channel::<Line>(1024);
    let _ = std::thread::Builder::new()
        .name("replay-read".into())
        .spawn(move || {
            let mut heap: BinaryHeap<Held> = BinaryHeap::new();
            let (mut latest, mut seq, mut sent_up_to) =
                (f64::NEG_INFINITY, 0u64, f64::NEG_INFINITY);
            // One second's requests of a whole-second log, spread when it is complete.
            let mut second: Vec<(String, String)> = Vec::new();
            let mut second_at = f64::NEG_INFINITY;
            // Offsets from the first arrival (taken before adding the spread: a Unix
            // time holds only ~0.2 µs of fraction).
            let send = |t: f64, within: f64, m: String, p: String| {
                tx.send(((t - t0 + within) / speed, m, p)).is_ok()
            };
            let flush = |second: &mut Vec<(String, String)>, at: f64| -> bool {
                let n = second.len() as f64;
                for (k, (m, p)) in second.drain(..).enumerate() {
                    if !send(at, k as f64 / n, m, p) {
                        return false;
                    }
                }
                true
            };
            let mut emit = |Reverse((Ordered(t), _, m, p)): Held,
                            second: &mut Vec<(String, String)>,
                            second_at: &mut f64|
             -> bool {
                // Later than the window allowed: sent with the one before it.
                let t = t.max(sent_up_to);
                sent_up_to = t;
                if !whole {
                    return send(t, 0.0, m, p);
                }
                if t != *second_at && !flush(second, *second_at) {
                    return false;
                }
                *second_at = t;
                second.push((m, p));
                true
            };
            let mut bad = (0u64, Vec::new());
            let mut held_bytes = 0usize;
            let _ = parse::read_while(&path, &JsonFields::default(), &mut bad, |e| {
                latest = latest.max(e.time);
                let target = target(&e);
                held_bytes += e.method.len() + target.len();
                heap.push(Reverse((Ordered(e.time), seq, e.method, target)));
                seq += 1;
                while heap.len() > REORDER_LINES
                    || held_bytes > REORDER_BYTES
                    || heap
                        .peek()
                        .is_some_and(|Reverse((t, ..))| t.0 < latest - REORDER_SECONDS)
                {
                    let h = heap.pop().expect("peeked");
                    held_bytes -= h.0 .2.len() + h.0 .3.len();
                    if !emit(h, &mut second, &mut second_at) {
                        return false;
                    }
                }
                true
            });
            while let Some(h) = heap.pop() {
                if !emit(h, &mut second, &mut second_at) {
                    return;
                }
            }
            let _ = flush(&mut second, second_at);
        });
    rx.into_iter()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log(lines: &[(&str, &str, u32)]) -> tempfile::NamedTempFile {
        use std::io::Write;
        let mut f = tempfile::NamedTempFile::new().unwrap();
        for (time, path, ms) in lines {
            writeln!(
                f,
                r#"10.0.0.1 - - [22/Nov/2026:10:00:{time} +0000] "GET {path} HTTP/1.1" 200 5 "-" "t" {}"#,
                f64::from(*ms) / 1000.0
            )
            .unwrap();
        }
        f
    }

    #[test]
    fn a_streamed_log_is_the_held_logs_order_spread_and_offsets() {
        // Whole seconds: 01 twice, 02 once, 03 three times — out of file order.
        let f = log(&[
            ("01", "/a", 0),
            ("03", "/d", 0),
            ("01", "/b", 0),
            ("02", "/c", 0),
            ("03", "/e", 0),
            ("03", "/f", 0),
        ]);
        let (l, bad) = read(f.path(), 2.0).unwrap();
        assert_eq!(bad.0, 0);
        let st = l.stream.clone().unwrap();
        assert_eq!(st.count, 6);
        let got: Vec<Line> = (st.open)().collect();
        let want: Vec<(f64, &str)> = vec![
            (0.0, "/a"),
            (0.25, "/b"),
            (0.5, "/c"),
            (1.0, "/d"),
            (1.0 + 1.0 / 6.0, "/e"),
            (1.0 + 2.0 / 6.0, "/f"),
        ];
        assert_eq!(got.len(), want.len());
        for ((t, _, p), (wt, wp)) in got.iter().zip(&want) {
            assert!((t - wt).abs() < 1e-9 && p == wp, "{got:?}");
        }
        // The last offset is the last line's, at speed 2.
        assert!((st.last - (1.0 + 2.0 / 6.0)).abs() < 1e-9, "{}", st.last);
        // Held whole (for agents), the same lines.
        let held = l.held();
        assert_eq!(held.times, got.iter().map(|g| g.0).collect::<Vec<_>>());
    }

    #[test]
    fn a_hostile_line_is_refused_before_the_run_and_a_stopped_reader_stops() {
        let f = log(&[("01", "/a", 0), ("02", "/a%0d", 0)]);
        assert!(read(f.path(), 1.0).is_ok());
        let mut text = std::fs::read_to_string(f.path()).unwrap();
        text.push_str("10.0.0.1 - - [22/Nov/2026:10:00:03 +0000] \"GET /x\u{7f}y HTTP/1.1\" 200 5 \"-\" \"t\" 0\n");
        std::fs::write(f.path(), text).unwrap();
        let e = read(f.path(), 1.0).unwrap_err().to_string();
        assert!(
            e.contains("request 3") && e.contains("not a path that can be sent"),
            "{e}"
        );
        // A reader dropped after one line: the thread ends (the channel is closed).
        let many: Vec<(String, String, u32)> = (0..5000)
            .map(|i| (format!("{:02}", i % 60), format!("/p{i}"), 0))
            .collect();
        let refs: Vec<(&str, &str, u32)> = many
            .iter()
            .map(|(a, b, c)| (a.as_str(), b.as_str(), *c))
            .collect();
        let f = log(&refs);
        let (l, _) = read(f.path(), 1.0).unwrap();
        let mut it = (l.stream.unwrap().open)();
        assert!(it.next().is_some());
        drop(it);
    }
}
