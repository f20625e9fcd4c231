//! What each worker measures, in bounded memory: HDR histograms of latency (from the
//! intended send time and from the actual send), of the schedule's lag, and counters by
//! status and error kind — never one record per request. A worker records into its
//! current interval only; the aggregator swaps the interval out once a second, builds
//! the per-second series from it and adds it to the run's total.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Highest latency a histogram holds, microseconds (one hour); longer values are clamped.
const MAX_US: u64 = 3_600_000_000;

/// Why a request failed without an HTTP status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The connection was refused (nothing listening).
    Refused,
    /// The connection was reset or closed mid-request.
    Reset,
    /// No response within the timeout.
    Timeout,
    /// The TLS handshake failed.
    Tls,
    /// Connecting failed for a local reason (no ports, no file descriptors): the
    /// generator's fault, not the target's.
    LocalResources,
    /// Connecting failed otherwise (unreachable, …).
    Connect,
    /// The response was not valid HTTP.
    Protocol,
}

impl ErrorKind {
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::Refused => "refused",
            ErrorKind::Reset => "reset",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Tls => "tls",
            ErrorKind::LocalResources => "local_resources",
            ErrorKind::Connect => "connect",
            ErrorKind::Protocol => "protocol",
        }
    }
}

pub fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_US, 3).expect("valid histogram bounds")
}

/// Counters and histograms for a span of time.
#[derive(Debug, Clone)]
pub struct Tally {
    /// Latency from the intended send time to the end of the response, µs.
    pub corrected: Histogram<u64>,
    /// Latency from the actual send to the end of the response, µs.
    pub service: Histogram<u64>,
    /// How late the generator woke for a scheduled send, µs (open model).
    pub lag: Histogram<u64>,
    pub sent: u64,
    /// Responses received (any status).
    pub completed: u64,
    /// Responses with a status below 400.
    pub ok: u64,
    pub by_status: BTreeMap<u16, u64>,
    pub by_error: BTreeMap<ErrorKind, u64>,
    pub bytes_received: u64,
    /// Scheduled sends that found every connection busy with the pool at its cap.
    pub cap_hits: u64,
    pub connections_opened: u64,
}

impl Default for Tally {
    fn default() -> Tally {
        Tally {
            corrected: histogram(),
            service: histogram(),
            lag: histogram(),
            sent: 0,
            completed: 0,
            ok: 0,
            by_status: BTreeMap::new(),
            by_error: BTreeMap::new(),
            bytes_received: 0,
            cap_hits: 0,
            connections_opened: 0,
        }
    }
}

impl Tally {
    pub fn errors(&self) -> u64 {
        self.by_error.values().sum::<u64>() + self.completed - self.ok
    }

    /// Adds another tally into this one.
    pub fn merge(&mut self, o: &Tally) {
        let _ = self.corrected.add(&o.corrected);
        let _ = self.service.add(&o.service);
        let _ = self.lag.add(&o.lag);
        self.sent += o.sent;
        self.completed += o.completed;
        self.ok += o.ok;
        for (k, v) in &o.by_status {
            *self.by_status.entry(*k).or_default() += v;
        }
        for (k, v) in &o.by_error {
            *self.by_error.entry(*k).or_default() += v;
        }
        self.bytes_received += o.bytes_received;
        self.cap_hits += o.cap_hits;
        self.connections_opened += o.connections_opened;
    }
}

/// A worker's recorder: the current interval.
#[derive(Debug, Default)]
pub struct Recorder {
    pub interval: Tally,
}

fn us(d: std::time::Duration) -> u64 {
    (d.as_micros() as u64).clamp(1, MAX_US)
}

impl Recorder {
    fn with(&mut self, f: impl Fn(&mut Tally)) {
        f(&mut self.interval);
    }

    pub fn sent(&mut self) {
        self.with(|t| t.sent += 1);
    }

    pub fn response(
        &mut self,
        status: u16,
        bytes: u64,
        corrected: std::time::Duration,
        service: std::time::Duration,
    ) {
        let (c, s) = (us(corrected), us(service));
        self.with(|t| {
            t.completed += 1;
            if status < 400 {
                t.ok += 1;
            }
            *t.by_status.entry(status).or_default() += 1;
            t.bytes_received += bytes;
            t.corrected.saturating_record(c);
            t.service.saturating_record(s);
        });
    }

    pub fn error(&mut self, kind: ErrorKind) {
        self.with(|t| *t.by_error.entry(kind).or_default() += 1);
    }

    pub fn lag(&mut self, lag: std::time::Duration) {
        let l = us(lag);
        self.with(|t| t.lag.saturating_record(l));
    }

    pub fn cap_hit(&mut self) {
        self.with(|t| t.cap_hits += 1);
    }

    pub fn connection_opened(&mut self) {
        self.with(|t| t.connections_opened += 1);
    }

    /// Hands over the current interval and starts a new one.
    pub fn take_interval(&mut self) -> Tally {
        std::mem::take(&mut self.interval)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn records_into_the_interval_and_merges() {
        let mut r = Recorder::default();
        r.sent();
        r.response(200, 10, Duration::from_millis(5), Duration::from_millis(1));
        r.sent();
        r.response(503, 0, Duration::from_millis(7), Duration::from_millis(7));
        r.error(ErrorKind::Reset);
        let i = r.take_interval();
        assert_eq!((i.sent, i.completed, i.ok, i.errors()), (2, 2, 1, 2));
        assert_eq!(r.interval.sent, 0);
        let mut m = Tally::default();
        m.merge(&i);
        m.merge(&i);
        assert_eq!(m.completed, 4);
        assert_eq!(m.by_status[&503], 2);
        assert_eq!(m.by_error[&ErrorKind::Reset], 2);
        // 3 significant digits: 5 ms is held within 0.1%.
        let p = m.corrected.value_at_quantile(0.25) as f64;
        assert!((p - 5000.0).abs() <= 5.0, "{p}");
    }
}
