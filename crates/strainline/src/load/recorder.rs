//! What each worker measures, in bounded memory: HDR histograms of latency (from the
//! intended send time and from the actual send), of the schedule's lag, and counters by
//! status and error kind — never one record per request; each scenario step's part of
//! an interval and the clients running. A worker records into its current interval
//! only; the aggregator swaps the interval out once a second, builds the per-second
//! series from it and adds it to the run's total.

use std::collections::BTreeMap;
use std::time::Duration;

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
    /// A value the step needs was never extracted (an earlier step failed to find it):
    /// the step was not sent (a user flow's `{{name}}`).
    Extract,
    /// The scenario's `request(r)` hook failed (a Lua error): the step was not sent.
    Script,
    /// The request the step rendered could not go on the wire as it was — its path or
    /// a header held a byte its protocol cannot carry (CR, LF, NUL, a space …), put
    /// there by a value, a redirect or the script: the step was not sent.
    InvalidRequest,
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
            ErrorKind::Extract => "extract",
            ErrorKind::Script => "script",
            ErrorKind::InvalidRequest => "invalid_request",
        }
    }
}

/// A latency histogram (µs, 3 significant digits) that grows with the values recorded:
/// the recorder clamps them to [`MAX_US`]. One made for the whole hour at once held
/// 23,552 counts (188 KB) from the start, six of them a tally — and a tally a scenario
/// step a worker: a 1,000-step flow took 3.4 GB before a request was sent.
pub fn histogram() -> Histogram<u64> {
    Histogram::new(3).expect("valid histogram precision")
}

/// Counters and histograms for a span of time. Serialized (an agent's interval sent to
/// its coordinator) with each histogram in HdrHistogram's V2 encoding, base64: lossless,
/// so merged figures are those of one histogram of every request.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Tally {
    /// Latency from the intended send time to the end of the response, µs.
    #[serde(with = "hdr")]
    pub corrected: Histogram<u64>,
    /// Latency from the actual send to the end of the response, µs.
    #[serde(with = "hdr")]
    pub service: Histogram<u64>,
    /// The open model's service time (also in `service`) of sends that went while at
    /// most half the pool's cap was busy, and while all of it was, µs: whether the
    /// target answered slower at the pool's full concurrency.
    #[serde(with = "hdr")]
    pub service_light: Histogram<u64>,
    #[serde(with = "hdr")]
    pub service_full: Histogram<u64>,
    /// How late the generator woke for a scheduled send, µs (open model).
    #[serde(with = "hdr")]
    pub lag: Histogram<u64>,
    pub sent: u64,
    /// Responses received (any status).
    pub completed: u64,
    /// Successful responses: HTTP status below 400, or a command's exit 0.
    pub ok: u64,
    #[serde(with = "pairs")]
    pub by_status: BTreeMap<u16, u64>,
    #[serde(with = "pairs")]
    pub by_error: BTreeMap<ErrorKind, u64>,
    pub bytes_received: u64,
    /// Scheduled sends that found every connection busy with the pool at its cap.
    pub cap_hits: u64,
    /// Scheduled sends that found every connection busy while the pool held its size
    /// because the target answered at least twice as slowly as its fastest (it queued).
    #[serde(default)]
    pub held: u64,
    pub connections_opened: u64,
    /// Requests still unanswered when the run was cut at its end (or interrupted):
    /// neither a response nor an error. Their latency is in `corrected`, censored at the
    /// cut (at least the cut less their intended time).
    pub unfinished: u64,
    /// Requests whose intended time came but that were never sent: still waiting for a
    /// connection when the run was cut. In `corrected` like the unfinished ones.
    #[serde(default)]
    pub unsent: u64,
    /// Of `unsent`, those cut while the worker was still opening a connection (none
    /// could be opened in time: the target did not accept them).
    #[serde(default)]
    pub unsent_connecting: u64,
    /// The deliveries' latency to a protocol's subscribers (MQTT's), from the
    /// publisher's intended send time, µs; their counts are named ([`counters`]).
    #[serde(with = "hdr", default = "histogram")]
    pub delivery: Histogram<u64>,
    /// Named counters: a user flow's (`check.NAME.passed` / `.failed`,
    /// `extract.NAME.missing`, `cause.check:NAME` — why a response failed —,
    /// `flow.restarts`, `flow.retries`, `flow.stopped`) and those of what only some
    /// protocols have ([`counters`]). Merged, subtracted and sent by agents as the rest.
    #[serde(default)]
    pub named: BTreeMap<String, u64>,
    /// An interval's: the most clients running at once in it (a gauge, summed across
    /// threads and agents when merged — each thread's clients are its own; a total's,
    /// and a difference's, say nothing).
    #[serde(default)]
    pub active: u64,
    /// An interval's: each scenario step's part of it (index as in `steps`), for the
    /// timeline of each step.
    #[serde(default)]
    pub step_seconds: Vec<StepSecond>,
}

/// A scenario step's (or group's) part of an interval: what its timeline draws.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StepSecond {
    pub sent: u64,
    pub completed: u64,
    pub ok: u64,
    /// Transport errors (the failed answers are `completed - ok`).
    pub errors: u64,
    /// Corrected latency, µs, at 2 significant digits (1%): one a step a second, which
    /// grows as values come (a step never run costs a few hundred bytes, not 26 KB: a
    /// scenario may have 2,048 steps).
    #[serde(with = "hdr")]
    pub latency: Histogram<u64>,
}

impl Default for StepSecond {
    fn default() -> StepSecond {
        StepSecond {
            sent: 0,
            completed: 0,
            ok: 0,
            errors: 0,
            latency: Histogram::new(2).expect("valid histogram precision"),
        }
    }
}

impl StepSecond {
    pub fn merge(&mut self, o: &StepSecond) {
        self.sent += o.sent;
        self.completed += o.completed;
        self.ok += o.ok;
        self.errors += o.errors;
        let _ = self.latency.add(&o.latency);
    }

    fn minus(&mut self, o: &StepSecond) {
        self.sent = self.sent.saturating_sub(o.sent);
        self.completed = self.completed.saturating_sub(o.completed);
        self.ok = self.ok.saturating_sub(o.ok);
        self.errors = self.errors.saturating_sub(o.errors);
        let _ = self.latency.subtract(&o.latency);
    }

    /// All its failures: transport errors and failed answers.
    pub fn failed(&self) -> u64 {
        self.errors + self.completed.saturating_sub(self.ok)
    }
}

/// The keys of the named counters of what only some protocols have.
pub mod counters {
    /// Subscribers (a protocol's companions: MQTT's) that subscribed, and of them those
    /// that subscribed after the clock started.
    pub const SUBSCRIBED: &str = "subscribers.subscribed";
    pub const SUBSCRIBED_LATE: &str = "subscribers.subscribed_late";
    /// Messages delivered to subscribers (each delivery to each subscriber), those a
    /// subscriber had already had, and those whose stamp could not be checked for a
    /// duplicate (older than its publisher's window, or from more publishers than a
    /// subscriber tracks: see `mqtt::subscriber::Seen`).
    pub const DELIVERED: &str = "subscribers.delivered";
    pub const DUPLICATES: &str = "subscribers.duplicates";
    pub const UNVERIFIED: &str = "subscribers.unverified";
    /// Messages the replies brought, where a reply is a stream of them (gRPC).
    pub const MESSAGES: &str = "replies.messages";
    /// HTTP/1.1 responses whose body came at least [`super::LATE_TAIL`] after their
    /// head, in a later read: a response written in two segments, the second held back.
    pub const LATE_TAILS: &str = "http1.late_tails";
    /// Redirect hops a step followed (`follow = true`): counted apart from its sends.
    pub const HOPS: &str = "flow.redirects_followed";
    /// Microseconds the script's hooks held a worker thread, and their calls.
    pub const HOOK_US: &str = "script.hook_us";
    pub const HOOK_CALLS: &str = "script.hook_calls";
    /// Replies of a step that failed at least one of its checks (the script's verdict
    /// among them): each such reply once, however many checks it failed.
    pub const CHECKS_FAILED: &str = "replies.checks_failed";
}

/// How long after its head a response's body must come to be a late tail: less than
/// Linux's 40 ms delayed-ACK minimum, more than a loopback round trip.
pub const LATE_TAIL: std::time::Duration = std::time::Duration::from_millis(30);

/// A histogram as base64 of its V2 encoding (HdrHistogram's interchange format).
pub mod hdr {
    use base64::Engine;
    use hdrhistogram::serialization::{Deserializer, Serializer, V2Serializer};
    use hdrhistogram::Histogram;

    pub fn encode(h: &Histogram<u64>) -> String {
        let mut bytes = Vec::new();
        V2Serializer::new()
            .serialize(h, &mut bytes)
            .expect("a histogram serializes into memory");
        base64::engine::general_purpose::STANDARD.encode(bytes)
    }

    /// How the store keeps a histogram: HdrHistogram's compressed V2 encoding.
    pub const STORED: &str = "hdr-v2-deflate";

    /// `h` in the store's encoding ([`STORED`]).
    pub fn stored(h: &Histogram<u64>) -> Option<Vec<u8>> {
        let mut bytes = Vec::new();
        hdrhistogram::serialization::V2DeflateSerializer::new()
            .serialize(h, &mut bytes)
            .ok()?;
        Some(bytes)
    }

    /// HdrHistogram's V2 encoding, uncompressed: what [`encode`] writes and the wire
    /// carries.
    const V2_COOKIE: u64 = 0x1c84_9313;
    /// Its header's length: cookie, payload length, offset, digits, lowest, highest,
    /// ratio.
    const V2_HEADER: usize = 40;

    /// The most a histogram that came over the wire may say it spans: the uncompressed
    /// V2 encoding, a payload no longer than the bytes that came, and our bounds (1 µs
    /// to 4 × [`super::MAX_US`], at most 3 significant digits: a step's histogram grows
    /// to about twice its largest value). Its header says how much memory decoding it
    /// takes, so a header beyond these is refused before anything is allocated: an
    /// agent cannot make its coordinator allocate many times what it sent.
    fn within_bounds(bytes: &[u8]) -> crate::error::Result<()> {
        let word = |at: usize, n: usize| -> Option<u64> {
            let b = bytes.get(at..at + n)?;
            Some(b.iter().fold(0u64, |acc, x| (acc << 8) | u64::from(*x)))
        };
        let (Some(cookie), Some(payload), Some(digits), Some(lowest), Some(highest)) = (
            word(0, 4),
            word(4, 4),
            word(12, 4),
            word(16, 8),
            word(24, 8),
        ) else {
            return Err(crate::Error::environment(
                "histogram: shorter than its header",
            ));
        };
        let room = (bytes.len() - V2_HEADER.min(bytes.len())) as u64;
        if cookie != V2_COOKIE || payload > room {
            return Err(crate::Error::environment(format!(
                "histogram: not the uncompressed V2 encoding of its {} bytes",
                bytes.len()
            )));
        }
        if digits > 3 || lowest == 0 || highest > 4 * super::MAX_US {
            return Err(crate::Error::environment(format!(
                "histogram: beyond our bounds ({digits} digits, {lowest} to {highest} µs)"
            )));
        }
        Ok(())
    }

    /// A histogram as the store keeps it ([`STORED`]), growing on demand (to be merged
    /// with others of other bounds); `None` when it is not one.
    pub fn from_stored(bytes: &[u8]) -> Option<Histogram<u64>> {
        let mut h: Histogram<u64> = Deserializer::new().deserialize(&mut &bytes[..]).ok()?;
        h.auto(true);
        Some(h)
    }

    pub fn decode(text: &str) -> crate::error::Result<Histogram<u64>> {
        use crate::error::Category;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(text)
            .environment_with(|e| format!("histogram: not base64: {e}"))?;
        within_bounds(&bytes)?;
        let mut h: Histogram<u64> = Deserializer::new()
            .deserialize(&mut &bytes[..])
            .environment_with(|e| format!("histogram: not HdrHistogram V2: {e:?}"))?;
        // Deserialized histograms grow on demand; merges need the same bounds.
        h.auto(true);
        Ok(h)
    }

    pub fn serialize<S: serde::Serializer>(h: &Histogram<u64>, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&encode(h))
    }

    pub fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Histogram<u64>, D::Error> {
        let text: String = serde::Deserialize::deserialize(d)?;
        decode(&text).map_err(serde::de::Error::custom)
    }
}

/// Counts as `[key, count]` pairs: JSON object keys are strings only, and a tagged
/// message cannot read them back as numbers.
mod pairs {
    use std::collections::BTreeMap;

    pub fn serialize<K: serde::Serialize, S: serde::Serializer>(
        m: &BTreeMap<K, u64>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.collect_seq(m.iter())
    }

    pub fn deserialize<'de, K, D>(d: D) -> Result<BTreeMap<K, u64>, D::Error>
    where
        K: serde::Deserialize<'de> + Ord,
        D: serde::Deserializer<'de>,
    {
        let pairs: Vec<(K, u64)> = serde::Deserialize::deserialize(d)?;
        Ok(pairs.into_iter().collect())
    }
}

impl Default for Tally {
    fn default() -> Tally {
        Tally {
            corrected: histogram(),
            service: histogram(),
            service_light: histogram(),
            service_full: histogram(),
            lag: histogram(),
            sent: 0,
            completed: 0,
            ok: 0,
            by_status: BTreeMap::new(),
            by_error: BTreeMap::new(),
            bytes_received: 0,
            cap_hits: 0,
            held: 0,
            connections_opened: 0,
            unfinished: 0,
            unsent: 0,
            unsent_connecting: 0,
            delivery: histogram(),
            named: BTreeMap::new(),
            active: 0,
            step_seconds: Vec::new(),
        }
    }
}

impl Tally {
    /// A named counter's value (0 if it never counted).
    pub fn counter(&self, key: &str) -> u64 {
        self.named.get(key).copied().unwrap_or(0)
    }

    /// Adds `n` to a named counter; its key is allocated once per interval, not per count.
    pub fn add_to(&mut self, key: &str, n: u64) {
        match self.named.get_mut(key) {
            Some(c) => *c += n,
            None if n > 0 => {
                self.named.insert(key.to_string(), n);
            }
            None => {}
        }
    }

    pub fn errors(&self) -> u64 {
        self.by_error.values().sum::<u64>() + self.completed.saturating_sub(self.ok)
    }

    /// This tally without `part` (a part of it): what an agent measured after the last
    /// second it streamed is its total without those seconds.
    pub fn minus(&self, part: &Tally) -> Tally {
        let mut d = self.clone();
        let _ = d.corrected.subtract(&part.corrected);
        let _ = d.service.subtract(&part.service);
        let _ = d.service_light.subtract(&part.service_light);
        let _ = d.service_full.subtract(&part.service_full);
        let _ = d.lag.subtract(&part.lag);
        d.sent = d.sent.saturating_sub(part.sent);
        d.completed = d.completed.saturating_sub(part.completed);
        d.ok = d.ok.saturating_sub(part.ok);
        for (k, v) in &part.by_status {
            if let Some(n) = d.by_status.get_mut(k) {
                *n = n.saturating_sub(*v);
            }
        }
        d.by_status.retain(|_, n| *n > 0);
        for (k, v) in &part.by_error {
            if let Some(n) = d.by_error.get_mut(k) {
                *n = n.saturating_sub(*v);
            }
        }
        d.by_error.retain(|_, n| *n > 0);
        d.bytes_received = d.bytes_received.saturating_sub(part.bytes_received);
        d.cap_hits = d.cap_hits.saturating_sub(part.cap_hits);
        d.held = d.held.saturating_sub(part.held);
        d.connections_opened = d.connections_opened.saturating_sub(part.connections_opened);
        d.unfinished = d.unfinished.saturating_sub(part.unfinished);
        d.unsent = d.unsent.saturating_sub(part.unsent);
        d.unsent_connecting = d.unsent_connecting.saturating_sub(part.unsent_connecting);
        let _ = d.delivery.subtract(&part.delivery);
        d.active = 0;
        for (mine, theirs) in d.step_seconds.iter_mut().zip(&part.step_seconds) {
            mine.minus(theirs);
        }
        for (k, v) in &part.named {
            if let Some(n) = d.named.get_mut(k) {
                *n = n.saturating_sub(*v);
            }
        }
        d.named.retain(|_, n| *n > 0);
        d
    }

    /// Adds another tally into this one.
    pub fn merge(&mut self, o: &Tally) {
        let _ = self.corrected.add(&o.corrected);
        let _ = self.service.add(&o.service);
        let _ = self.service_light.add(&o.service_light);
        let _ = self.service_full.add(&o.service_full);
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
        self.held += o.held;
        self.connections_opened += o.connections_opened;
        self.unfinished += o.unfinished;
        self.unsent += o.unsent;
        self.unsent_connecting += o.unsent_connecting;
        let _ = self.delivery.add(&o.delivery);
        for (k, v) in &o.named {
            self.add_to(k, *v);
        }
        self.active += o.active;
        if self.step_seconds.len() < o.step_seconds.len() {
            self.step_seconds
                .resize_with(o.step_seconds.len(), StepSecond::default);
        }
        for (mine, theirs) in self.step_seconds.iter_mut().zip(&o.step_seconds) {
            mine.merge(theirs);
        }
    }

    /// Step `i`'s part of this interval.
    fn step_second(&mut self, i: usize) -> &mut StepSecond {
        if self.step_seconds.len() <= i {
            self.step_seconds.resize_with(i + 1, StepSecond::default);
        }
        &mut self.step_seconds[i]
    }

    /// Requests that were due and got no answer: cut in flight or never sent.
    pub fn unanswered(&self) -> u64 {
        self.unfinished + self.unsent
    }

    /// Requests the schedule made due: sent (answered or failed), cut, or never sent.
    pub fn scheduled(&self) -> u64 {
        self.sent + self.unanswered()
    }

    /// The share of requests that failed: errors, and the unanswered, of every request
    /// that was due (answered, failed or unanswered).
    pub fn error_rate(&self) -> f64 {
        super::accounting::Accounting::of(self).error_rate()
    }
}

/// A worker's recorder: the current interval, and each scenario step's whole run (its
/// groups' runs after its steps) and its own metrics' values.
#[derive(Debug, Default)]
pub struct Recorder {
    pub interval: Tally,
    /// Clients (a scenario's, sessions, closed connections) running now, and the most
    /// that ran at once since the interval began: what an interval is given when it is
    /// taken (a last interval whose clients stopped before it was taken had them).
    pub active: u64,
    pub active_most: u64,
    pub steps: Vec<Tally>,
    pub custom: Vec<super::custom::Custom>,
}

/// Records `v` (µs) in `h`, which grows to hold it, clamped to [`MAX_US`]. Not
/// `saturating_record`: it clamps to what `h` holds so far, without growing it.
fn put(h: &mut Histogram<u64>, v: u64) {
    let _ = h.record(v.min(MAX_US));
}

fn us(d: Duration) -> u64 {
    (d.as_micros() as u64).clamp(1, MAX_US)
}

impl Tally {
    fn add_response(&mut self, status: u16, ok: bool, bytes: u64, corrected: u64, service: u64) {
        self.completed += 1;
        if ok {
            self.ok += 1;
        }
        *self.by_status.entry(status).or_default() += 1;
        self.bytes_received += bytes;
        put(&mut self.corrected, corrected);
        put(&mut self.service, service);
    }

    fn add_error(&mut self, kind: ErrorKind) {
        *self.by_error.entry(kind).or_default() += 1;
    }
}

impl Recorder {
    fn step(&mut self, step: Option<usize>) -> Option<&mut Tally> {
        let i = step?;
        if self.steps.len() <= i {
            self.steps.resize_with(i + 1, Tally::default);
        }
        Some(&mut self.steps[i])
    }

    /// A client ran a group's steps in a row, taking `took` from the first one's
    /// intended time to the last one's reply; `ok` when each of them succeeded. Kept
    /// with the steps' figures at `at` (the group's place after the steps), never in
    /// the run's.
    pub fn group(&mut self, at: usize, took: Duration, ok: bool) {
        if let Some(t) = self.step(Some(at)) {
            t.sent += 1;
            t.completed += 1;
            t.ok += u64::from(ok);
            put(&mut t.corrected, us(took));
        }
        let s = self.interval.step_second(at);
        s.sent += 1;
        s.completed += 1;
        s.ok += u64::from(ok);
        let _ = s.latency.record(us(took));
    }

    /// Feeds `v` to the scenario's metric `k` (of `kind`).
    pub fn metric(&mut self, k: usize, kind: super::custom::Kind, v: f64) {
        if self.custom.len() <= k {
            self.custom.resize_with(k + 1, Default::default);
        }
        // When, for a gauge's last value (the only kind that reads it).
        let at = match kind {
            super::custom::Kind::Gauge => std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_micros() as u64),
            _ => 0,
        };
        self.custom[k].add(kind, v, at);
    }

    /// A request was sent (of scenario step `step`, if any).
    pub fn sent(&mut self, step: Option<usize>) {
        self.interval.sent += 1;
        if let (Some(t), Some(i)) = (self.step(step), step) {
            t.sent += 1;
            self.interval.step_second(i).sent += 1;
        }
    }

    /// A response (or a command's exit) with its status and whether it counts as ok.
    pub fn response(
        &mut self,
        step: Option<usize>,
        status: u16,
        ok: bool,
        bytes: u64,
        corrected: Duration,
        service: Duration,
    ) {
        let (c, s) = (us(corrected), us(service));
        self.interval.add_response(status, ok, bytes, c, s);
        if let (Some(t), Some(i)) = (self.step(step), step) {
            t.add_response(status, ok, bytes, c, s);
            let second = self.interval.step_second(i);
            second.completed += 1;
            second.ok += u64::from(ok);
            let _ = second.latency.record(c);
        }
    }

    /// One more of a named counter (a user flow's `check.NAME.passed`, `restarts` …),
    /// in the interval and the step.
    pub fn count(&mut self, step: Option<usize>, key: &str) {
        self.interval.add_to(key, 1);
        if let Some(t) = self.step(step) {
            t.add_to(key, 1);
        }
    }

    pub fn error(&mut self, step: Option<usize>, kind: ErrorKind) {
        self.interval.add_error(kind);
        if let (Some(t), Some(i)) = (self.step(step), step) {
            t.add_error(kind);
            self.interval.step_second(i).errors += 1;
        }
    }

    pub fn lag(&mut self, lag: Duration) {
        put(&mut self.interval.lag, us(lag));
    }

    /// The service time of a response (also recorded by [`Recorder::response`]) whose
    /// send went while the open model's pool was fully busy, or at most half busy.
    pub fn pool_response(&mut self, full: bool, service: Duration) {
        let h = if full {
            &mut self.interval.service_full
        } else {
            &mut self.interval.service_light
        };
        put(h, us(service));
    }

    pub fn cap_hit(&mut self) {
        self.interval.cap_hits += 1;
    }

    pub fn held(&mut self, sends: u64) {
        self.interval.held += sends;
    }

    pub fn connection_opened(&mut self) {
        self.interval.connections_opened += 1;
    }

    /// A request (of scenario step `step`) was cut at the run's end `waited` after its
    /// intended time: in flight (`sent`), or never sent — then `connecting` says whether
    /// its worker was still opening a connection. Its latency is censored: at least
    /// `waited`, recorded as that.
    pub fn cut(&mut self, step: Option<usize>, waited: Duration, sent: bool, connecting: bool) {
        let us = us(waited);
        let mark = |t: &mut Tally| {
            if sent {
                t.unfinished += 1;
            } else {
                t.unsent += 1;
                if connecting {
                    t.unsent_connecting += 1;
                }
            }
            put(&mut t.corrected, us);
        };
        mark(&mut self.interval);
        if let Some(t) = self.step(step) {
            mark(t);
        }
    }

    /// A call of the script's hook held the worker thread for `held`.
    pub fn hook(&mut self, held: Duration) {
        self.interval
            .add_to(counters::HOOK_US, held.as_micros() as u64);
        self.interval.add_to(counters::HOOK_CALLS, 1);
    }

    /// A reply brought `n` messages (a gRPC stream).
    pub fn messages(&mut self, n: u64) {
        self.interval.add_to(counters::MESSAGES, n);
    }

    /// A response's body came late after its head ([`LATE_TAIL`]).
    pub fn late_tail(&mut self) {
        self.interval.add_to(counters::LATE_TAILS, 1);
    }

    /// A subscriber subscribed (`late`: after the clock started).
    pub fn subscribed(&mut self, late: bool) {
        self.interval.add_to(counters::SUBSCRIBED, 1);
        self.interval
            .add_to(counters::SUBSCRIBED_LATE, u64::from(late));
    }

    /// A message reached a subscriber `latency` after it was meant to be published;
    /// `check` says whether that subscriber had it already, or could not tell.
    pub fn delivery(&mut self, latency: Duration, check: Delivered) {
        self.interval.add_to(counters::DELIVERED, 1);
        match check {
            Delivered::First => {}
            Delivered::Duplicate => self.interval.add_to(counters::DUPLICATES, 1),
            Delivered::Unverified => self.interval.add_to(counters::UNVERIFIED, 1),
        }
        put(&mut self.interval.delivery, us(latency));
    }

    /// Hands over the current interval and starts `fresh` (made by the caller, outside
    /// the lock: allocating three histograms under it stalled the worker ~0.5 ms a
    /// second, long enough to make an open-model run late).
    pub fn take_interval(&mut self, fresh: Tally) -> Tally {
        let mut taken = std::mem::replace(&mut self.interval, fresh);
        taken.active = self.active_most.max(self.active);
        self.active_most = self.active;
        taken
    }

    /// A client (a scenario's client, a session, a closed connection) began, or ended.
    pub fn client(&mut self, began: bool) {
        if began {
            self.active += 1;
            self.active_most = self.active_most.max(self.active);
        } else {
            self.active = self.active.saturating_sub(1);
        }
    }
}

/// What a subscriber (a protocol's companion) can say of a delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivered {
    /// The first of its message to this subscriber.
    First,
    Duplicate,
    /// Older than its publisher's window, or from a publisher beyond the table: counted
    /// as delivered, not checked.
    Unverified,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A histogram from the wire whose header claims more than our bounds (5 digits,
    /// up to 2⁶²: gigabytes to decode) is refused before it is decoded; ours pass.
    #[test]
    fn a_histogram_beyond_our_bounds_is_refused_unread() {
        let huge = Histogram::<u64>::new_with_bounds(1, 1 << 62, 5).unwrap();
        let err = hdr::decode(&hdr::encode(&huge)).unwrap_err();
        assert!(err.to_string().contains("beyond our bounds"), "{err}");
        assert!(hdr::decode(&hdr::encode(&histogram())).is_ok());
        let mut step = StepSecond::default();
        step.latency.record(MAX_US).unwrap();
        assert!(hdr::decode(&hdr::encode(&step.latency)).is_ok());
        assert!(hdr::decode("AAAA").is_err());
        // A compressed one (its inner header unread), and a payload longer than the bytes.
        let deflated = hdr::stored(&histogram()).unwrap();
        let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
        use base64::Engine;
        assert!(hdr::decode(&b64(&deflated)).is_err());
        let mut long = base64::engine::general_purpose::STANDARD
            .decode(hdr::encode(&histogram()))
            .unwrap();
        long[4..8].copy_from_slice(&u32::MAX.to_be_bytes());
        let err = hdr::decode(&b64(&long)).unwrap_err();
        assert!(err.to_string().contains("not the uncompressed V2"), "{err}");
    }

    /// Each step's part of an interval: its sends, answers, failures and latencies,
    /// merged as intervals are (threads, agents) and taken apart as an agent's tail is.
    #[test]
    fn an_interval_keeps_each_step_s_part() {
        let mut r = Recorder::default();
        r.sent(Some(3));
        let ms = Duration::from_millis;
        r.response(Some(3), 200, true, 10, ms(5), ms(4));
        r.sent(Some(1));
        r.error(Some(1), ErrorKind::Timeout);
        r.sent(None);
        r.response(None, 500, false, 10, ms(9), ms(9));
        let a = r.take_interval(Tally::default());
        assert_eq!(a.step_seconds.len(), 4);
        let s3 = &a.step_seconds[3];
        assert_eq!((s3.sent, s3.completed, s3.ok, s3.failed()), (1, 1, 1, 0));
        let p50 = s3.latency.value_at_quantile(0.5) as f64;
        assert!((p50 - 5000.0).abs() <= 5000.0 * 0.01 + 1.0, "{p50}");
        assert_eq!(a.step_seconds[1].failed(), 1);
        assert_eq!(
            a.step_seconds[0].sent, 0,
            "a request of no step is in no step"
        );
        let mut both = Tally::default();
        both.merge(&a);
        both.merge(&a);
        assert_eq!(both.step_seconds[3].completed, 2);
        assert_eq!(both.step_seconds[3].latency.len(), 2);
        let tail = both.minus(&a);
        assert_eq!(tail.step_seconds[3].completed, 1);
        assert_eq!(tail.step_seconds[3].latency.len(), 1);
    }

    #[test]
    fn records_into_the_interval_and_merges() {
        let mut r = Recorder::default();
        r.sent(None);
        r.response(
            None,
            200,
            true,
            10,
            Duration::from_millis(5),
            Duration::from_millis(1),
        );
        r.sent(Some(1));
        r.response(
            Some(1),
            503,
            false,
            0,
            Duration::from_millis(7),
            Duration::from_millis(7),
        );
        r.error(Some(1), ErrorKind::Reset);
        assert_eq!(
            (r.steps[1].sent, r.steps[1].completed, r.steps[1].errors()),
            (1, 1, 2)
        );
        assert_eq!(r.steps[0].sent, 0);
        let i = r.take_interval(Tally::default());
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

    /// A tally's histograms start small and grow with what they hold: a step's tally
    /// of up to 80 ms holds a fifth of the counts of one sized for an hour; a 30-minute latency is held
    /// within 0.1%, and one past the hour is clamped to it.
    #[test]
    fn histograms_grow_with_their_values_and_clamp_at_the_hour() {
        let counts = |t: &Tally| -> usize {
            [
                &t.corrected,
                &t.service,
                &t.service_light,
                &t.service_full,
                &t.lag,
                &t.delivery,
            ]
            .iter()
            .map(|h| h.distinct_values())
            .sum()
        };
        let hour = Histogram::<u64>::new_with_bounds(1, MAX_US, 3).unwrap();
        let mut r = Recorder::default();
        for ms in [1, 5, 20, 80] {
            r.response(
                Some(3),
                200,
                true,
                0,
                Duration::from_millis(ms),
                Duration::from_millis(ms),
            );
        }
        assert!(
            counts(&r.steps[3]) * 5 < 6 * hour.distinct_values(),
            "{}",
            counts(&r.steps[3])
        );
        r.response(
            None,
            200,
            true,
            0,
            Duration::from_secs(1800),
            Duration::from_secs(1800),
        );
        r.response(
            None,
            200,
            true,
            0,
            Duration::from_secs(7200),
            Duration::from_secs(1),
        );
        let t = r.take_interval(Tally::default());
        let long = t.corrected.value_at_quantile(0.8) as f64;
        assert!((long - 1.8e9).abs() <= 1.8e6, "{long}");
        assert_eq!(t.corrected.max(), t.corrected.highest_equivalent(MAX_US));
    }
}
