//! A load run's own results: latency percentiles, the summary of a run (what it sent,
//! what came back, how fast, the generator's evidence) and the named metrics it yields.
//! Computed here, by the engine that measured them; `report::load` only formats them.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::Serialize;

use super::recorder::{counters, Tally};
use super::verdict::{Validity, Verdict};
use super::Outcome;
use crate::store::Metric;

/// Latency percentiles, microseconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize)]
#[serde(default)]
pub struct Percentiles {
    pub p50: u64,
    pub p90: u64,
    /// Every peer's default percentile (k6, Gatling, Locust); 0 in runs stored before it.
    #[serde(default)]
    pub p95: u64,
    pub p99: u64,
    pub p999: u64,
    pub max: u64,
    pub mean: f64,
    /// The percentiles asked for beyond the five above (`--percentiles`, a gate's
    /// `latency_p75`), by their names (`p75`, `p99.5`), beside them in JSON.
    #[serde(flatten)]
    pub more: BTreeMap<String, u64>,
}

impl Percentiles {
    /// The latency at percentile `q` (95, 99.9), if it was kept.
    pub fn at(&self, q: f64) -> Option<u64> {
        let fixed = [
            (50.0, self.p50),
            (90.0, self.p90),
            (95.0, self.p95),
            (99.0, self.p99),
            (99.9, self.p999),
        ];
        fixed
            .iter()
            .find(|(f, _)| *f == q)
            .map(|(_, v)| *v)
            .or_else(|| {
                self.more
                    .get(&format!("p{}", crate::metrics::percentile_label(q)))
                    .copied()
            })
    }
}

/// A bucket of a latency histogram: how many took at most `le_us` (and more than the
/// bucket before).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Bucket {
    pub le_us: u64,
    pub count: u64,
}

/// `h` in `n` buckets, log-spaced from its least value to its most (as oha's histogram,
/// whose linear buckets put a long tail's every reply but one in the first): every
/// recorded value in exactly one.
pub fn buckets(h: &Histogram<u64>, n: usize) -> Vec<Bucket> {
    if h.is_empty() || n == 0 {
        return Vec::new();
    }
    let (lo, hi) = (h.min().max(1) as f64, h.max().max(1) as f64);
    let mut out: Vec<Bucket> = (1..=n)
        .map(|i| Bucket {
            le_us: if i == n {
                h.max()
            } else {
                (lo * (hi / lo).powf(i as f64 / n as f64)).round() as u64
            },
            count: 0,
        })
        .collect();
    out.dedup_by_key(|b| b.le_us);
    for v in h.iter_recorded() {
        let value = h.median_equivalent(v.value_iterated_to()).min(h.max());
        let at = out.partition_point(|b| b.le_us < value).min(out.len() - 1);
        out[at].count += v.count_at_value();
    }
    out
}

/// `h`'s five usual percentiles, its maximum and mean, and those of `asked` that are not
/// among the five.
pub fn percentiles_with(h: &Histogram<u64>, asked: &[f64]) -> Percentiles {
    if h.is_empty() {
        return Percentiles::default();
    }
    let mut p = Percentiles {
        p50: h.value_at_quantile(0.5),
        p90: h.value_at_quantile(0.9),
        p95: h.value_at_quantile(0.95),
        p99: h.value_at_quantile(0.99),
        p999: h.value_at_quantile(0.999),
        max: h.max(),
        mean: h.mean(),
        more: BTreeMap::new(),
    };
    for &q in asked {
        let name = format!("p{}", crate::metrics::percentile_label(q));
        if p.at(q).is_none() {
            p.more
                .insert(name, h.value_at_quantile(crate::metrics::quantile(q)));
        }
    }
    p
}

pub fn percentiles(h: &Histogram<u64>) -> Percentiles {
    percentiles_with(h, &[])
}

/// The figures of a load run, as serialized in JSON and stored.
#[derive(Debug, Clone, Serialize)]
pub struct LoadSummary {
    pub url: String,
    /// `open`, `closed` or `scenario`.
    pub model: String,
    /// What was asked, in words (e.g. "1000 req/s constant for 10s, 2 threads").
    pub description: String,
    /// The seed of its random choices (arrivals, bodies, a scenario's picks and
    /// `{{random N}}`): `--seed` with it replays them. None in a suite's cases.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    pub status: Validity,
    pub reasons: Vec<String>,
    pub interrupted: bool,
    pub elapsed_seconds: f64,
    pub threads: usize,
    pub offered_rate: Option<f64>,
    pub achieved_rate: f64,
    pub sent: u64,
    pub completed: u64,
    pub ok: u64,
    pub errors: u64,
    pub error_rate: f64,
    pub by_status: std::collections::BTreeMap<String, u64>,
    pub by_error: std::collections::BTreeMap<String, u64>,
    pub bytes_received: u64,
    /// Messages the replies brought, where replies are streams of them (gRPC), or that
    /// the server pushed besides the replies (WebSocket with a reply field).
    #[serde(skip_serializing_if = "is_zero")]
    pub messages_received: u64,
    /// HTTP/1.1 responses whose body came 30 ms or more after their head.
    #[serde(skip_serializing_if = "is_zero")]
    pub late_tails: u64,
    /// The percentiles its summary shows (`--percentiles`; absent: the default five).
    #[serde(skip_serializing_if = "is_default_percentiles")]
    pub percentiles: Vec<f64>,
    /// The percentiles kept beyond the usual ones (shown and gated): each is a metric,
    /// for the run and each step, group and tag.
    #[serde(skip)]
    pub kept: Vec<f64>,
    /// From the intended send time (open model); equal to service time in the closed model.
    pub latency_us: Percentiles,
    /// From the actual send.
    pub service_time_us: Percentiles,
    /// `latency_us` as a histogram: ten buckets, log-spaced from the fastest reply to
    /// the slowest (absent without replies).
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub latency_histogram: Vec<Bucket>,
    /// How late the generator woke for scheduled sends (open model).
    pub schedule_lag_us: Percentiles,
    pub connections_opened: u64,
    pub cap_hits: u64,
    /// Requests still unanswered when the run was cut at its end or interrupted.
    #[serde(default)]
    pub unfinished: u64,
    /// Requests whose intended time came but that were never sent (the open model):
    /// still waiting for a connection when the run was cut. With `unfinished`, counted
    /// in `error_rate` and, censored at the cut, in `latency_us`.
    #[serde(default)]
    pub unsent: u64,
    /// Redirect hops steps followed (`follow = true`): not sends of their own.
    #[serde(skip_serializing_if = "is_zero", default)]
    pub hops: u64,
    /// Seconds the script's hooks held the worker threads, and their calls (absent
    /// without a script).
    #[serde(skip_serializing_if = "is_zero_f64", default)]
    pub hook_seconds: f64,
    #[serde(skip_serializing_if = "is_zero", default)]
    pub hook_calls: u64,
    /// Requests the schedule made due (open model): sent + unfinished + unsent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scheduled: Option<u64>,
    /// CPU seconds of each worker thread.
    pub generator_thread_cpu_seconds: Vec<f64>,
    /// Seconds the worker threads (here, not on agents) were runnable but waited for a
    /// CPU, all together; absent when none was measured.
    #[serde(skip_serializing_if = "is_zero_f64")]
    pub generator_run_queue_seconds: f64,
    /// Per scenario step.
    pub steps: Vec<StepSummary>,
    /// Per group of steps (`group = "checkout"`), and per tag (`page=admin`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<GroupSummary>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<TagSummary>,
    /// A scenario's own metrics (`[metrics]`), in name order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub custom_metrics: Vec<crate::load::custom::CustomSummary>,
    /// Per agent, when agents generated the load (absent otherwise).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub agents: Vec<AgentSummary>,
    /// What MQTT subscribers received (absent without subscribers).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deliveries: Option<Deliveries>,
}

/// MQTT subscribers' figures. Every subscriber that subscribed is expected to receive
/// every acknowledged publish (`ok`; at QoS 0 every publish written): what did not
/// arrive by the end of the drain is lost.
#[derive(Debug, Clone, Serialize)]
pub struct Deliveries {
    /// Subscribers asked for, and those that subscribed.
    pub subscribers: u64,
    pub subscribed: u64,
    /// Of `subscribed`, those that subscribed after the clock started: what was
    /// published before they did counts as lost.
    pub subscribed_late: u64,
    /// ok publishes × subscribed.
    pub expected: u64,
    /// Every delivery to every subscriber, duplicates included.
    pub delivered: u64,
    /// Deliveries of a message the subscriber already had.
    pub duplicates: u64,
    /// Deliveries that could not be checked for a duplicate (a stamp older than its
    /// publisher's window of 4,096, or from more publishers than tracked): counted as
    /// distinct. A broker that forges or replays stamps shows here.
    #[serde(skip_serializing_if = "is_zero")]
    pub unverified: u64,
    /// expected − the distinct deliveries (never below 0).
    pub lost: u64,
    /// lost / expected.
    pub loss_rate: f64,
    /// From the publisher's intended send time to the delivery, µs.
    pub latency_us: Percentiles,
}

impl LoadSummary {
    /// The run's requests in one accounting: sent, ok, failed, unanswered, hops.
    pub fn accounting(&self) -> crate::load::accounting::Accounting {
        crate::load::accounting::Accounting {
            sent: self.sent,
            completed: self.completed,
            ok: self.ok,
            failed: self.errors,
            unfinished: self.unfinished,
            unsent: self.unsent,
            hops: self.hops,
        }
    }

    /// The failures that were the script's own, not the target's answers: requests its
    /// `request(r)` failed (never sent) and replies its `response(r)` failed, each by a
    /// Lua error or its time or memory limit.
    pub fn script_failures(&self) -> u64 {
        let replies: u64 = self
            .steps
            .iter()
            .filter_map(|st| st.flow.get("script_errors"))
            .sum();
        self.by_error.get("script").copied().unwrap_or(0) + replies
    }
}

impl Deliveries {
    /// Deliveries less duplicates: the messages that reached a subscriber, once each.
    pub fn distinct(&self) -> u64 {
        self.delivered.saturating_sub(self.duplicates)
    }
}

fn is_default_percentiles(p: &[f64]) -> bool {
    p == crate::metrics::DEFAULT_PERCENTILES
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn is_zero_f64(x: &f64) -> bool {
    *x == 0.0
}

fn deliveries(o: &Outcome) -> Option<Deliveries> {
    let t = &o.total;
    (o.subscribers > 0).then(|| {
        let (delivered, duplicates) = (
            t.counter(counters::DELIVERED),
            t.counter(counters::DUPLICATES),
        );
        let expected = t.ok * t.counter(counters::SUBSCRIBED);
        let lost = expected.saturating_sub(delivered.saturating_sub(duplicates));
        Deliveries {
            subscribers: o.subscribers,
            subscribed: t.counter(counters::SUBSCRIBED),
            subscribed_late: t.counter(counters::SUBSCRIBED_LATE),
            expected,
            delivered,
            duplicates,
            unverified: t.counter(counters::UNVERIFIED),
            lost,
            loss_rate: if expected > 0 {
                lost as f64 / expected as f64
            } else {
                0.0
            },
            latency_us: percentiles(&t.delivery),
        }
    })
}

/// One agent's figures: its share of the run, its own verdict on its generator, and its
/// histograms (HdrHistogram V2, base64) — the merged figures are those of their sum.
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize)]
#[serde(default)]
pub struct AgentSummary {
    pub name: String,
    pub address: String,
    /// Its slice of the schedule: index of `of`.
    pub slice: usize,
    pub of: usize,
    pub sent: u64,
    pub completed: u64,
    pub ok: u64,
    pub errors: u64,
    pub achieved_rate: f64,
    pub latency_us: Percentiles,
    pub schedule_lag_us: Percentiles,
    pub generator_thread_cpu_seconds: Vec<f64>,
    /// Its clock minus the coordinator's, and the round trip that measured it, µs.
    pub clock_offset_us: f64,
    pub clock_rtt_us: f64,
    /// `None` when it was lost before it reported.
    pub status: Option<Validity>,
    pub reasons: Vec<String>,
    pub lost: Option<String>,
    pub latency_histogram: String,
    pub service_histogram: String,
}

fn agent_summary(a: &crate::load::AgentPart) -> AgentSummary {
    let t = &a.total;
    AgentSummary {
        name: a.name.clone(),
        address: a.address.clone(),
        slice: a.slice.index,
        of: a.slice.of,
        sent: t.sent,
        completed: t.completed,
        ok: t.ok,
        errors: t.errors(),
        achieved_rate: if a.elapsed > 0.0 {
            t.completed as f64 / a.elapsed
        } else {
            0.0
        },
        latency_us: percentiles(&t.corrected),
        schedule_lag_us: percentiles(&t.lag),
        generator_thread_cpu_seconds: a.thread_cpu.clone(),
        clock_offset_us: a.clock_offset_us,
        clock_rtt_us: a.clock_rtt_us,
        status: a.status,
        reasons: a.reasons.clone(),
        lost: a.lost.clone(),
        latency_histogram: crate::load::recorder::hdr::encode(&t.corrected),
        service_histogram: crate::load::recorder::hdr::encode(&t.service),
    }
}

/// One scenario step's figures.
#[derive(Debug, Clone, Serialize)]
pub struct StepSummary {
    pub name: String,
    pub sent: u64,
    pub ok: u64,
    pub errors: u64,
    pub latency_us: Percentiles,
    /// Its named checks: how many replies passed and failed each.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<CheckSummary>,
    /// Its replies that failed one check or more, each once.
    #[serde(skip_serializing_if = "is_zero")]
    pub checks_failed: u64,
    /// What its flow counters say: `restarts`, `retries`, `stopped`,
    /// `redirects_not_followed`, each variable it could not extract
    /// (`extract.NAME.missing`) and each request not sent for what a field could not
    /// carry (`invalid.FIELD.BY`: `invalid.path.{{id}}`), and values its metrics could
    /// not take (`metric.NAME.not_a_value`) or that the script fed to none declared
    /// (`metric.undeclared`).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub flow: BTreeMap<String, u64>,
    /// Why replies whose status passed failed: `check:NAME`, `extract:NAME`.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub causes: BTreeMap<String, u64>,
}

/// The figures of the steps of a group or a tag, together: their sends, and their
/// latencies in one histogram.
#[derive(Debug, Clone, Serialize)]
pub struct Together {
    /// Its steps, by name.
    pub steps: Vec<String>,
    pub sent: u64,
    pub ok: u64,
    pub errors: u64,
    pub latency_us: Percentiles,
}

impl Together {
    fn of(members: &[usize], o: &Outcome, names: &[String], asked: &[f64]) -> Together {
        let mut t = Tally::default();
        for &i in members {
            if let Some(st) = o.steps.get(i) {
                t.merge(st);
            }
        }
        Together {
            steps: members
                .iter()
                .filter_map(|&i| names.get(i).cloned())
                .collect(),
            sent: t.sent,
            ok: t.ok,
            errors: t.errors(),
            latency_us: percentiles_with(&t.corrected, asked),
        }
    }

    pub fn error_rate(&self) -> f64 {
        failed_share(self.errors, self.sent)
    }
}

/// Failed sends over sends (0 without any): a step's, a group's or a tag's error rate.
fn failed_share(errors: u64, sent: u64) -> f64 {
    match sent {
        0 => 0.0,
        n => errors as f64 / n as f64,
    }
}

/// A group's figures: its steps' together, and how long clients took to run them in a
/// row (k6's `group_duration`).
#[derive(Debug, Clone, Serialize)]
pub struct GroupSummary {
    pub name: String,
    #[serde(flatten)]
    pub steps: Together,
    /// Times a client ran every step of the group in a row (in its `once` steps, a
    /// session or a loop; never from a weighted mix, whose steps are picked one by one),
    /// and of them those whose every step succeeded.
    pub runs: u64,
    pub runs_ok: u64,
    /// From its first step's intended time to its last step's reply, think times
    /// between them included: absent when it never ran in a row.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_us: Option<Percentiles>,
}

/// A tag's figures: every step that carries it, together.
#[derive(Debug, Clone, Serialize)]
pub struct TagSummary {
    /// `page=admin`.
    pub tag: String,
    #[serde(flatten)]
    pub steps: Together,
}

/// A named check of a step.
#[derive(Debug, Clone, Serialize)]
pub struct CheckSummary {
    pub name: String,
    pub passed: u64,
    pub failed: u64,
}

impl CheckSummary {
    pub fn pass_rate(&self) -> f64 {
        let all = self.passed + self.failed;
        if all == 0 {
            0.0
        } else {
            self.passed as f64 / all as f64
        }
    }
}

/// A step's checks from its tally's named counters (`check.NAME.passed`/`.failed`).
fn checks_of(t: &Tally) -> Vec<CheckSummary> {
    let mut out: Vec<CheckSummary> = Vec::new();
    for (k, v) in &t.named {
        let Some(rest) = k.strip_prefix("check.") else {
            continue;
        };
        let (name, passed) = match (rest.strip_suffix(".passed"), rest.strip_suffix(".failed")) {
            (Some(n), _) => (n, true),
            (_, Some(n)) => (n, false),
            _ => continue,
        };
        let i = match out.iter().position(|c| c.name == name) {
            Some(i) => i,
            None => {
                out.push(CheckSummary {
                    name: name.to_string(),
                    passed: 0,
                    failed: 0,
                });
                out.len() - 1
            }
        };
        if passed {
            out[i].passed += v;
        } else {
            out[i].failed += v;
        }
    }
    out
}

/// A step's flow counters, as `flow.restarts` → `restarts`; `extract.id.missing` and
/// `invalid.path.{{id}}` kept.
fn flow_of(t: &Tally) -> BTreeMap<String, u64> {
    t.named
        .iter()
        .filter_map(|(k, v)| {
            k.strip_prefix("flow.")
                .map(str::to_string)
                .or_else(|| {
                    ["extract.", "invalid.", "metric."]
                        .iter()
                        .any(|p| k.starts_with(p))
                        .then(|| k.clone())
                })
                .map(|k| (k, *v))
        })
        .collect()
}

pub fn summarize(
    url: &str,
    model: &str,
    description: &str,
    o: &Outcome,
    v: &Verdict,
    (step_names, labels): (&[String], &crate::load::scenario::Labels),
    (shown, asked): (&[f64], &[f64]),
) -> LoadSummary {
    let t: &Tally = &o.total;
    LoadSummary {
        kept: asked.to_vec(),
        custom_metrics: labels
            .metrics
            .iter()
            .enumerate()
            .map(|(k, (name, kind))| {
                let never = crate::load::custom::Custom::default();
                let c = o.custom.get(k).unwrap_or(&never);
                crate::load::custom::summary(name, *kind, c, o.elapsed, asked)
            })
            .collect(),
        groups: labels
            .groups
            .iter()
            .enumerate()
            .map(|(g, (name, members))| {
                // Its runs in a row are kept after the steps (`Recorder::group`).
                let runs = o.steps.get(step_names.len() + g).filter(|r| r.sent > 0);
                GroupSummary {
                    name: name.clone(),
                    steps: Together::of(members, o, step_names, asked),
                    runs: runs.map_or(0, |r| r.sent),
                    runs_ok: runs.map_or(0, |r| r.ok),
                    duration_us: runs.map(|r| percentiles_with(&r.corrected, asked)),
                }
            })
            .collect(),
        tags: labels
            .tags
            .iter()
            .map(|(tag, members)| TagSummary {
                tag: tag.clone(),
                steps: Together::of(members, o, step_names, asked),
            })
            .collect(),
        percentiles: shown.to_vec(),
        seed: None,
        url: url.to_string(),
        model: model.to_string(),
        description: description.to_string(),
        status: v.status,
        reasons: v.reasons.clone(),
        interrupted: o.interrupted,
        elapsed_seconds: o.elapsed,
        threads: o.threads,
        offered_rate: v.offered_rate,
        achieved_rate: v.achieved_rate,
        sent: t.sent,
        completed: t.completed,
        ok: t.ok,
        errors: t.errors(),
        error_rate: t.error_rate(),
        by_status: t
            .by_status
            .iter()
            .map(|(k, v)| (o.statuses.label(*k), *v))
            .collect(),
        by_error: t
            .by_error
            .iter()
            .map(|(k, v)| (k.name().to_string(), *v))
            .collect(),
        bytes_received: t.bytes_received,
        messages_received: t.counter(counters::MESSAGES),
        late_tails: t.counter(counters::LATE_TAILS),
        latency_us: percentiles_with(&t.corrected, asked),
        service_time_us: percentiles_with(&t.service, asked),
        latency_histogram: buckets(&t.corrected, 10),
        schedule_lag_us: percentiles(&t.lag),
        connections_opened: t.connections_opened,
        cap_hits: t.cap_hits,
        unfinished: t.unfinished,
        unsent: t.unsent,
        hops: t.counter(counters::HOPS),
        hook_seconds: t.counter(counters::HOOK_US) as f64 / 1e6,
        hook_calls: t.counter(counters::HOOK_CALLS),
        // Only a schedule makes requests due.
        scheduled: o.scheduled.map(|_| t.scheduled()),
        // On agents: every agent's threads (each judged its own).
        generator_thread_cpu_seconds: if o.agents.is_empty() {
            o.thread_cpu.clone()
        } else {
            o.agents.iter().flat_map(|a| a.thread_cpu.clone()).collect()
        },
        generator_run_queue_seconds: o.thread_queue.iter().sum::<f64>() + 0.0,
        agents: o.agents.iter().map(agent_summary).collect(),
        deliveries: deliveries(o),
        steps: step_names
            .iter()
            .enumerate()
            .map(|(i, name)| {
                let t = o.steps.get(i).cloned().unwrap_or_default();
                StepSummary {
                    name: name.clone(),
                    sent: t.sent,
                    ok: t.ok,
                    errors: t.errors(),
                    latency_us: percentiles_with(&t.corrected, asked),
                    checks: checks_of(&t),
                    checks_failed: t.counter(counters::CHECKS_FAILED),
                    flow: flow_of(&t),
                    causes: t
                        .named
                        .iter()
                        .filter_map(|(k, v)| Some((k.strip_prefix("cause.")?.to_string(), *v)))
                        .collect(),
                }
            })
            .collect(),
    }
}

/// The figures of a load run as named metrics.
impl LoadSummary {
    /// What the failed requests were, most frequent first: each error kind
    /// (`refused`, `timeout`…) and each HTTP status of 400 and above (`status 500`).
    pub fn failure_causes(&self) -> Vec<(String, u64)> {
        let mut causes: Vec<(String, u64)> = self
            .by_error
            .iter()
            .map(|(k, v)| (k.clone(), *v))
            .chain(
                self.by_status
                    .iter()
                    .filter(|(k, _)| k.parse::<u16>().is_ok_and(|c| c >= 400))
                    .map(|(k, v)| (format!("status {k}"), *v)),
            )
            // A reply whose status passed but a check or an extraction failed.
            .chain(
                self.steps
                    .iter()
                    .flat_map(|st| st.causes.iter().map(|(k, v)| (k.clone(), *v))),
            )
            .collect();
        causes.sort_by_key(|c| std::cmp::Reverse(c.1));
        causes
    }
}

/// Causes as a phrase: `status 500 157, timeout 3`.
pub fn causes_text(causes: &[(String, u64)]) -> String {
    causes
        .iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The steps whose replies were timed (a step that never had one has no latency).
fn st_timed(steps: &[StepSummary]) -> impl Iterator<Item = &StepSummary> {
    steps.iter().filter(|st| st.latency_us.max > 0)
}

/// `{name}_pNN` for each of `usual` (50, 95 …) and each percentile `kept` of `p`, each
/// once, where a reply was timed (none is not 0 ms: a gate on it is "not measured").
fn percentile_metrics(
    v: &mut Vec<Metric>,
    name: &str,
    p: &Percentiles,
    usual: &[f64],
    kept: &[f64],
) {
    if p.max == 0 {
        return;
    }
    // The usual 99.9th is `_p999`, as it always was; asked for, it is `_p99.9` too.
    let usual = usual.iter().map(|&q| match q {
        99.9 => (q, "999".to_string()),
        _ => (q, crate::metrics::percentile_label(q)),
    });
    let asked = kept
        .iter()
        .map(|&q| (q, crate::metrics::percentile_label(q)));
    let mut done: Vec<String> = Vec::new();
    for (q, label) in usual.chain(asked) {
        let metric = format!("{name}_p{label}");
        if let (false, Some(us)) = (done.contains(&metric), p.at(q)) {
            v.push(Metric::of(&metric, us as f64 / 1000.0));
            done.push(metric);
        }
    }
}

/// A group's or a tag's metrics under `prefix`: its latency where a reply was timed,
/// its error rate.
fn together(v: &mut Vec<Metric>, prefix: &str, t: &Together, kept: &[f64]) {
    percentile_metrics(
        v,
        &format!("{prefix}.latency"),
        &t.latency_us,
        &[95.0, 99.0],
        kept,
    );
    v.push(Metric::of(&format!("{prefix}.error_rate"), t.error_rate()));
}

pub fn metrics(s: &LoadSummary) -> Vec<crate::store::Metric> {
    let ms = |us: u64| us as f64 / 1000.0;
    let mut v = vec![Metric::of("throughput", s.achieved_rate)];
    // Latencies only where a reply was timed: none is not 0 ms (a gate on it is "not
    // measured", never held).
    let kept = &s.kept;
    percentile_metrics(
        &mut v,
        "latency",
        &s.latency_us,
        &crate::metrics::DEFAULT_PERCENTILES,
        kept,
    );
    if s.latency_us.max > 0 {
        v.push(Metric::of("latency_max", ms(s.latency_us.max)));
    }
    if s.service_time_us.max > 0 {
        v.extend([
            Metric::of("service_p50", ms(s.service_time_us.p50)),
            Metric::of("service_p99", ms(s.service_time_us.p99)),
        ]);
    }
    v.extend([
        Metric::of("error_rate", s.error_rate),
        Metric::of("sent", s.sent as f64),
        Metric::of("completed", s.completed as f64),
        Metric::of(
            "generator_cpu_seconds",
            s.generator_thread_cpu_seconds.iter().sum(),
        ),
    ]);
    if let Some(off) = s.offered_rate {
        v.push(Metric::of("offered_rate", off));
        v.push(Metric::of("schedule_lag_p99", ms(s.schedule_lag_us.p99)));
    }
    if let Some(d) = &s.deliveries {
        v.push(Metric::of("delivery_loss", d.loss_rate));
        v.push(Metric::of("delivery_p99", ms(d.latency_us.p99)));
    }
    let checks: Vec<&CheckSummary> = s.steps.iter().flat_map(|st| &st.checks).collect();
    if !checks.is_empty() {
        // Replies that failed a check, each once however many of its checks failed.
        v.push(Metric::of(
            "checks_failed",
            s.steps.iter().map(|st| st.checks_failed).sum::<u64>() as f64,
        ));
        // A check named in several steps is one figure over all of them.
        let mut by_name: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
        for c in &checks {
            let e = by_name.entry(&c.name).or_default();
            e.0 += c.passed;
            e.1 += c.failed;
        }
        for (name, (passed, failed)) in by_name {
            let all = (passed + failed).max(1) as f64;
            v.push(Metric::of(
                &format!("check.{name}.pass_rate"),
                passed as f64 / all,
            ));
        }
    }
    for st in st_timed(&s.steps) {
        let name = format!("step.{}.latency", st.name);
        percentile_metrics(&mut v, &name, &st.latency_us, &[95.0, 99.0], kept);
    }
    for g in &s.groups {
        if let Some(d) = &g.duration_us {
            let name = format!("group.{}.duration", g.name);
            percentile_metrics(&mut v, &name, d, &[50.0, 95.0, 99.0], kept);
        }
        together(&mut v, &format!("group.{}", g.name), &g.steps, kept);
    }
    for t in &s.tags {
        together(&mut v, &format!("tag.{}", t.tag), &t.steps, kept);
    }
    for c in &s.custom_metrics {
        v.extend(crate::load::custom::metrics(c));
    }
    for st in &s.steps {
        let rate = failed_share(st.errors, st.sent);
        v.push(Metric::of(&format!("step.{}.error_rate", st.name), rate));
    }
    if s.steps
        .iter()
        .any(|st| !st.flow.is_empty() || !st.checks.is_empty())
    {
        let restarts = s
            .steps
            .iter()
            .filter_map(|st| st.flow.get("restarts"))
            .sum::<u64>();
        v.push(Metric::of("flow_restarts", restarts as f64));
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Known truth: 90 replies at 100 µs and 10 at 10 ms land in the first and last of
    /// the log-spaced buckets (100 µs … 10 ms, a factor 1.58 each), every one counted.
    #[test]
    fn a_histogram_puts_each_reply_in_one_log_spaced_bucket() {
        let mut h = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap();
        h.record_n(100, 90).unwrap();
        h.record_n(10_000, 10).unwrap();
        let b = buckets(&h, 10);
        assert_eq!(b.len(), 10);
        assert_eq!(b.iter().map(|b| b.count).sum::<u64>(), 100);
        assert_eq!((b[0].count, b[9].count), (90, 10));
        assert_eq!((b[0].le_us, b[1].le_us, b[9].le_us), (159, 251, h.max()));
        assert!(b[9].le_us >= 10_000);
        h.reset();
        assert!(buckets(&h, 10).is_empty());
        h.record_n(42, 5).unwrap();
        let one = buckets(&h, 10);
        assert_eq!(one.iter().map(|b| b.count).sum::<u64>(), 5, "{one:?}");
    }
}
