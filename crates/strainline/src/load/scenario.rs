//! Scenarios: N virtual clients, each running steps — `once` (e.g. register), `every`
//! PERIOD (e.g. push data every 200 s), or a weighted mix with think times — with
//! templated paths, headers and bodies. This is the IoT seed's device emulator, built
//! in. Or, with `[arrivals]`, no clients: requests at an open-model rate (a constant, or
//! so many in each second — what `workload scenario` writes from an access log), each
//! one a step drawn by weight. Or, with `[sessions]`, sessions arriving at an open-model
//! rate, each running every step once in order (Gatling's users a second). The file is
//! TOML; mistakes are reported as `FILE:LINE:COLUMN: what is wrong`.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hyper::header::{HeaderName, HeaderValue};
use hyper::Method;
use serde::Deserialize;
use toml::Spanned;

use super::feed::{Data, Format, Order, Row};
use super::flow::{Check, Extract, JsonPath, Keep, OnFailure, Source};
use super::request::Rendered;
use super::template::{RandomPool, Text, Vars};
use crate::units::parse_duration;

/// When a step runs.
#[derive(Debug, Clone, PartialEq)]
pub enum When {
    /// Once per client, first, in file order.
    Once,
    /// Periodically, at intended times; latency counts from the intended time.
    Every(Duration),
    /// Part of a closed-loop mix, chosen in proportion to its weight.
    Weight(u32),
}

/// A pause after a step: fixed (`"2s"`), drawn uniformly from a range (`"1s..3s"`),
/// exponential with a mean (`"exponential 2s"`: the gaps of Poisson arrivals), or a
/// pace (`pace = "10s"`: the step starts at most once per pace, as Locust's
/// `constant_pacing`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Think {
    Uniform { least: Duration, most: Duration },
    Exponential { mean: Duration },
    Pace(Duration),
}

impl Default for Think {
    fn default() -> Think {
        Think::Uniform {
            least: Duration::ZERO,
            most: Duration::ZERO,
        }
    }
}

impl Think {
    pub fn is_zero(&self) -> bool {
        match *self {
            Think::Uniform { most, .. } => most.is_zero(),
            Think::Exponential { mean } => mean.is_zero(),
            Think::Pace(p) => p.is_zero(),
        }
    }

    /// How long after `now` the client goes on, for a step that `started`, drawn from
    /// the client's stream.
    pub fn draw(&self, rng: &mut crate::rng::Rng, started: Instant, now: Instant) -> Duration {
        match *self {
            Think::Uniform { least, most } if most <= least => least,
            Think::Uniform { least, most } => least + (most - least).mul_f64(rng.unit()),
            // Capped at 20 means: a draw of a day would stall a client for the run.
            Think::Exponential { mean } => mean.mul_f64((-rng.unit_open0().ln()).min(20.0)),
            Think::Pace(p) => (started + p).saturating_duration_since(now),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Step {
    pub name: String,
    pub when: When,
    /// Pause after the step.
    pub think: Think,
    pub method: Method,
    pub path: Text,
    /// `paths`: literal paths, one picked at random for each request (instead of `path`).
    pub observed: Vec<String>,
    pub headers: Vec<(HeaderName, Text)>,
    pub body: Option<Text>,
    /// Values taken from its reply into the client's variables.
    pub extract: Vec<Extract>,
    /// Named checks of its reply; with one naming `status`, those statuses replace the
    /// default (below 400) as what succeeds.
    pub checks: Vec<Check>,
    pub on_failure: OnFailure,
    /// Follows redirects (301, 302, 303, 307, 308) within the target, as a browser
    /// does, at most [`MAX_REDIRECTS`]; its checks and extractions read the last reply.
    pub follow: bool,
    /// What of its reply the protocol keeps (for the jar, extractions and checks).
    pub keep: Keep,
    /// `loop = { from = "STEP", times = N }`: after this step, the flow goes back to
    /// `from` until the group ran `times` times (or, with `until`, until this step's
    /// reply meets the condition).
    pub repeat: Option<Loop>,
}

/// A loop over a group of a flow's steps: from step `from` to the step that has it.
#[derive(Debug, Clone)]
pub struct Loop {
    pub from: usize,
    /// How many times the group runs in all (a range is drawn each time the loop
    /// starts, from the client's stream); with `until`, the most.
    pub least: u32,
    pub most: u32,
    /// `until = { json = { "$.status" = "done" } }`: the loop ends as soon as the
    /// step's reply meets this condition (a check's keys; not counted as a check).
    pub until: Option<Arc<Check>>,
}

/// The most times a loop with `until` and no `times` runs its group.
pub const UNTIL_TIMES: u32 = 100;

impl Loop {
    /// Times the group runs this time.
    pub fn draw(&self, rng: &mut crate::rng::Rng) -> u32 {
        self.least + rng.below(u64::from(self.most - self.least) + 1) as u32
    }
}

/// The most redirects a step follows before it fails (`redirects`), as browsers do.
pub const MAX_REDIRECTS: usize = 10;

impl Step {
    /// Whether its checks say which statuses succeed (instead of "below 400").
    pub fn checks_status(&self) -> bool {
        self.checks.iter().any(|c| !c.status.is_empty())
    }

    /// Whether it reads its reply's head: a header or cookie extracted, a header
    /// checked, a redirect followed (a protocol whose replies are bodies alone cannot).
    pub fn reads_head(&self) -> bool {
        use super::flow::Source;
        self.follow
            || self
                .extract
                .iter()
                .any(|e| matches!(e.source, Source::Header(_) | Source::Cookie(_)))
            || self.checks.iter().any(|c| !c.headers.is_empty())
    }
}

/// Open-model arrivals of a scenario without clients.
#[derive(Debug, Clone, PartialEq)]
pub enum Arrive {
    /// So many requests in each second (already scaled), the list repeated.
    PerSecond(Vec<u32>),
    /// A constant rate, evenly spaced or Poisson.
    Rate { rate: f64, poisson: bool },
    /// `[sessions] stages`: the rate a line from 0 through these (seconds, rate)
    /// points.
    Staged {
        points: Vec<(f64, f64)>,
        poisson: bool,
    },
}

impl Arrive {
    /// Requests per second on average.
    pub fn mean(&self) -> f64 {
        match self {
            Arrive::PerSecond(c) => {
                c.iter().map(|&x| f64::from(x)).sum::<f64>() / c.len().max(1) as f64
            }
            Arrive::Rate { rate, .. } => *rate,
            Arrive::Staged { points, .. } => {
                let end = points.last().map_or(0.0, |p| p.0);
                crate::load::schedule::Rate::Staged(points.clone()).count_by(end) / end.max(1e-9)
            }
        }
    }
}

/// A checked scenario.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// Virtual clients (0 with `arrivals`); with `stages`, the most at once.
    pub clients: u64,
    /// `stages`: how many clients are active over time, a line from 0 through each
    /// stage's count at its end (client i is active while the line is above i).
    pub stages: Vec<Stage>,
    /// `[arrivals]`: requests at these times, each a step drawn by weight.
    pub arrivals: Option<Arrive>,
    /// `[sessions]`: sessions arriving at this rate (the open model), each running every
    /// step once, in order, on a connection of its own, then leaving.
    pub sessions: Option<Arrive>,
    /// Clients start evenly spread over this.
    pub ramp_up: Duration,
    /// Its `csv` or `jsonl` file's rows, handed to clients as `csv_order` says.
    pub data: Option<Data>,
    pub seed: u64,
    pub steps: Vec<Step>,
    /// Random bytes for `{{random N}}`, made once from the seed.
    pub random: RandomPool,
    /// The variables its steps extract (`{{NAME}}`), in file order.
    pub vars: Vec<String>,
    /// Each client keeps its cookies (on unless `cookies = false`).
    pub cookies: bool,
    /// `script = "FILE"`: its `request(r)` and `response(r)` hooks.
    pub script: Option<std::sync::Arc<super::script::Script>>,
}

/// One stage of `stages`: the clients active go (linearly) to `to` over `over`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stage {
    pub to: u64,
    pub over: Duration,
}

/// When the line of `stages` (from 0 clients at 0 s) first crosses `level` going up
/// (`rising`) or down, at or after `after`.
fn crossing(stages: &[Stage], level: f64, rising: bool, after: Duration) -> Option<Duration> {
    let (mut t, mut from) = (Duration::ZERO, 0.0f64);
    for st in stages {
        let to = st.to as f64;
        let crosses = if rising {
            from < level && level < to
        } else {
            to < level && level < from
        };
        if crosses {
            let at = t + st.over.mul_f64((level - from) / (to - from));
            if at >= after {
                return Some(at);
            }
        }
        t += st.over;
        from = to;
    }
    None
}

impl Scenario {
    /// When client `i` starts, after the common start.
    pub fn start_offset(&self, i: u64) -> Duration {
        if let Some(all) = self.staged() {
            // Client i is active while the line is above i + ½.
            return crossing(&self.stages, i as f64 + 0.5, true, Duration::ZERO).unwrap_or(all);
        }
        self.ramp_up.mul_f64(i as f64 / self.clients.max(1) as f64)
    }

    /// When client `i` stops, after the common start, if its stages end it: when the
    /// line falls to `i` clients after its start.
    pub fn end_offset(&self, i: u64) -> Option<Duration> {
        if self.stages.is_empty() {
            return None;
        }
        crossing(&self.stages, i as f64 + 0.5, false, self.start_offset(i))
    }

    /// How long the stages last (the run's natural length), if it has them.
    pub fn staged(&self) -> Option<Duration> {
        (!self.stages.is_empty()).then(|| self.stages.iter().map(|s| s.over).sum())
    }

    /// Where client `i`'s first occurrence of a step with this period falls, after its
    /// `once` steps: clients are spread evenly over the period so that they do not all
    /// push at the same instant.
    pub fn phase(&self, i: u64, period: Duration) -> Duration {
        period.mul_f64((i as f64 * 0.618_033_988_749) % 1.0)
    }

    /// The row client `client` takes as it starts its flow: `Some(None)` without a data
    /// file, `None` when `unique` rows ran out and the client stops.
    pub fn take_row(&self, client: u64, rng: &mut crate::rng::Rng) -> Option<Option<Row>> {
        match &self.data {
            None => Some(None),
            Some(d) => d.take(client, rng).map(Some),
        }
    }

    /// Step `i`'s request for `client`'s `seq`-th send; `pick` chooses among observed
    /// paths; `values` are the client's flow variables, `row` its data row (`None`: row
    /// `client` mod rows).
    pub fn request(
        &self,
        i: usize,
        client: u64,
        seq: u64,
        pick: u64,
        values: &[Option<String>],
        row: Option<&[String]>,
    ) -> Rendered {
        let st = &self.steps[i];
        let own;
        let vars = Vars {
            client,
            seq,
            row: match row {
                Some(r) => Some(r),
                None => {
                    own = self.data.as_ref().and_then(|d| d.row(client));
                    own.as_deref()
                }
            },
            random: &self.random,
            values,
        };
        let mut body = Vec::new();
        if let Some(b) = &st.body {
            b.render(&vars, &mut body);
        }
        Rendered {
            method: st.method.clone(),
            path: match st.observed.len() {
                0 => st.path.render_string(&vars),
                n => st.observed[(pick % n as u64) as usize].clone(),
            },
            headers: st
                .headers
                .iter()
                .filter_map(|(k, t)| {
                    Some((
                        k.clone(),
                        HeaderValue::from_str(&t.render_string(&vars)).ok()?,
                    ))
                })
                .collect(),
            body: bytes::Bytes::from(body),
            keep: st.keep.max(if self.cookies {
                Keep::Cookies
            } else {
                Keep::Nothing
            }),
        }
    }

    /// The first variable step `i` uses that `values` lacks (the step cannot be sent).
    pub fn missing(&self, i: usize, values: &[Option<String>]) -> Option<&str> {
        let st = &self.steps[i];
        std::iter::once(&st.path)
            .chain(st.headers.iter().map(|(_, t)| t))
            .chain(st.body.iter())
            .find_map(|t| t.missing(values))
            .map(|v| self.vars[v].as_str())
    }

    /// Requests the scenario offers within `d` — each client's `once` steps and its
    /// periodic ones — for the achieved-versus-offered check; `None` when it has a
    /// closed mix, whose pace is the target's.
    pub fn scheduled(&self, d: Duration) -> Option<u64> {
        if self.steps.iter().any(|s| matches!(s.when, When::Weight(_))) {
            return None;
        }
        let mut n = 0u64;
        let once = self.steps.iter().filter(|s| s.when == When::Once).count() as u64;
        for i in 0..self.clients {
            let start = self.start_offset(i);
            let d = self.end_offset(i).map_or(d, |e| e.min(d));
            if start < d {
                n += once;
            }
            for s in &self.steps {
                if let When::Every(p) = s.when {
                    let first = start + self.phase(i, p);
                    if first < d {
                        n += 1 + ((d - first).as_secs_f64() / p.as_secs_f64()).ceil() as u64 - 1;
                    }
                }
            }
        }
        Some(n)
    }
}

/// A strainline scenario file: virtual clients (or sessions, or arrivals) and the steps
/// they run, with their extractions, checks and recovery (docs/load.md, "Scenarios").
#[derive(Deserialize, schemars::JsonSchema)]
#[schemars(title = "strainline scenario")]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Scenario")]
struct RawScenario {
    #[schemars(with = "Option<i64>")]
    clients: Option<Spanned<i64>>,
    #[schemars(with = "Option<String>")]
    ramp_up: Option<Spanned<String>>,
    #[schemars(with = "Option<Vec<RawStage>>")]
    stages: Option<Spanned<Vec<RawStage>>>,
    #[schemars(with = "Option<String>")]
    csv: Option<Spanned<String>>,
    #[schemars(with = "Option<String>")]
    jsonl: Option<Spanned<String>>,
    seed: Option<u64>,
    cookies: Option<bool>,
    #[schemars(with = "Option<String>")]
    script: Option<Spanned<String>>,
    /// Variables a script sets (`r.vars.NAME`), usable as `{{NAME}}`.
    #[serde(default)]
    vars: Vec<String>,
    #[schemars(with = "Option<String>")]
    csv_order: Option<Spanned<String>>,
    #[schemars(with = "Option<String>")]
    csv_exhausted: Option<Spanned<String>>,
    #[schemars(with = "Option<RawArrivals>")]
    arrivals: Option<Spanned<RawArrivals>>,
    #[schemars(with = "Option<RawSessions>")]
    sessions: Option<Spanned<RawSessions>>,
    #[schemars(with = "Vec<RawStep>")]
    step: Vec<Spanned<RawStep>>,
}

/// `[sessions]`: `rate = N` new sessions a second, or `stages` of such rates;
/// `poisson = true` for Poisson arrivals.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Sessions")]
struct RawSessions {
    #[schemars(with = "Option<f64>")]
    rate: Option<Spanned<f64>>,
    #[schemars(with = "Option<Vec<RawStage>>")]
    stages: Option<Spanned<Vec<RawStage>>>,
    poisson: Option<bool>,
}

/// `{ to = 200, over = "30s" }` or `{ hold = "2m" }`.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Stage")]
struct RawStage {
    to: Option<f64>,
    over: Option<String>,
    hold: Option<String>,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Arrivals")]
struct RawArrivals {
    #[schemars(with = "Option<Vec<i64>>")]
    per_second: Option<Spanned<Vec<Spanned<i64>>>>,
    #[schemars(with = "Option<f64>")]
    rate: Option<Spanned<f64>>,
    poisson: Option<bool>,
    #[schemars(with = "Option<f64>")]
    scale: Option<Spanned<f64>>,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Step")]
struct RawStep {
    name: Option<String>,
    #[schemars(with = "Option<bool>")]
    once: Option<Spanned<bool>>,
    #[schemars(with = "Option<String>")]
    every: Option<Spanned<String>>,
    #[schemars(with = "Option<i64>")]
    weight: Option<Spanned<i64>>,
    #[schemars(with = "Option<String>")]
    think: Option<Spanned<String>>,
    #[schemars(with = "Option<String>")]
    pace: Option<Spanned<String>>,
    #[schemars(with = "Option<String>")]
    method: Option<Spanned<String>>,
    #[schemars(with = "Option<String>")]
    path: Option<Spanned<String>>,
    #[schemars(with = "Option<Vec<String>>")]
    paths: Option<Spanned<Vec<Spanned<String>>>>,
    #[serde(default)]
    #[schemars(with = "BTreeMap<String, String>")]
    headers: BTreeMap<String, Spanned<String>>,
    #[schemars(with = "Option<String>")]
    body: Option<Spanned<String>>,
    #[serde(default)]
    #[schemars(with = "BTreeMap<String, RawExtract>")]
    extract: BTreeMap<String, Spanned<RawExtract>>,
    #[serde(default)]
    #[schemars(with = "BTreeMap<String, RawCheck>")]
    check: BTreeMap<String, Spanned<RawCheck>>,
    #[schemars(with = "Option<serde_json::Value>")]
    on_failure: Option<Spanned<toml::Value>>,
    follow: Option<bool>,
    #[serde(rename = "loop")]
    #[schemars(with = "Option<RawLoop>")]
    repeat: Option<Spanned<RawLoop>>,
}

/// `loop = { from = "add", times = 3 }` (or `times = "1..5"`, or `until = {…}`).
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Loop")]
struct RawLoop {
    from: String,
    #[schemars(with = "Option<serde_json::Value>")]
    times: Option<toml::Value>,
    until: Option<RawCheck>,
}

/// `extract.NAME = { json = "$.token" }` (or `regex`, `header`, `cookie`).
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Extract")]
struct RawExtract {
    json: Option<String>,
    regex: Option<String>,
    header: Option<String>,
    cookie: Option<String>,
}

/// `check.NAME = { status = [200], body_contains = "…", … }`.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Check")]
struct RawCheck {
    #[schemars(with = "Option<serde_json::Value>")]
    status: Option<toml::Value>,
    body_contains: Option<String>,
    body_matches: Option<String>,
    #[serde(default)]
    #[schemars(with = "BTreeMap<String, serde_json::Value>")]
    json: BTreeMap<String, toml::Value>,
    #[serde(default)]
    json_exists: Vec<String>,
    #[serde(default)]
    headers: Vec<String>,
    latency: Option<String>,
}

/// The JSON Schema of a scenario file, from the very types that read it.
pub fn schema() -> serde_json::Value {
    serde_json::to_value(schemars::schema_for!(RawScenario)).expect("a schema is JSON")
}

/// Reads and checks a scenario file.
pub fn load(path: &Path) -> crate::error::Result<Scenario> {
    let text = crate::os::file::read_text(path, "scenario")?;
    parse(&text, path)
}

pub fn parse(text: &str, path: &Path) -> crate::error::Result<Scenario> {
    let at = |offset: usize, msg: String| {
        crate::Error::usage(crate::located::message(path, text, offset, &msg))
    };
    let raw: RawScenario = toml::from_str(text).map_err(|e: toml::de::Error| {
        let offset = e.span().map_or(0, |s| s.start);
        at(offset, e.message().trim().to_string())
    })?;
    let duration = |s: &Spanned<String>, key: &str| {
        parse_duration(s.get_ref()).map_err(|e| at(s.span().start, format!("{key}: {e}")))
    };
    let seed = raw.seed.unwrap_or(1);
    let Senders {
        clients,
        stages,
        arrivals,
        sessions,
    } = senders(&raw, seed, &at)?;
    let ramp_up = raw
        .ramp_up
        .as_ref()
        .map(|r| duration(r, "ramp_up"))
        .transpose()?
        .unwrap_or_default();
    let data = data(&raw, path, &at)?;
    let columns = data.as_ref().map(|d| d.columns.clone()).unwrap_or_default();
    let script = match &raw.script {
        None => None,
        Some(_) if arrivals.is_some() => {
            return Err(at(
                raw.script.as_ref().map_or(0, |s| s.span().start),
                "script: with [arrivals] each request is on its own; hooks run in clients' flows (clients = N)".into(),
            ))
        }
        Some(f) => {
            let file = path.parent().unwrap_or(Path::new(".")).join(f.get_ref());
            Some(std::sync::Arc::new(
                super::script::Script::load(&file).map_err(|e| at(f.span().start, e.to_string()))?,
            ))
        }
    };
    if let (false, Some(v)) = (script.is_some(), raw.vars.first()) {
        return Err(at(
            0,
            format!("vars: '{v}' is set by a script's hooks, and there is no script = \"FILE\""),
        ));
    }
    let vars: Vec<String> = {
        let mut v: Vec<String> = raw.vars.clone();
        for st in &raw.step {
            for name in st.get_ref().extract.keys() {
                if !v.contains(name) {
                    v.push(name.clone());
                }
            }
        }
        v
    };
    let template = |s: &Spanned<String>| {
        // The span covers the quotes; the template starts one byte in.
        Text::parse_with(s.get_ref(), &columns, &vars)
            .map_err(|(off, msg)| at(s.span().start + 1 + off, msg))
    };
    if raw.step.is_empty() {
        return Err(at(0, "a scenario needs at least one [[step]]".into()));
    }
    if let Some(extra) = raw.step.get(crate::limits::SCENARIO_STEPS) {
        return Err(at(
            extra.span().start,
            format!(
                "{} steps: a scenario has at most {} (each keeps its own latency figures in every worker); group requests into fewer steps, with paths = [...] for many URLs",
                raw.step.len(),
                crate::limits::SCENARIO_STEPS
            ),
        ));
    }
    // A session's steps are each once: `restart` goes back to its first.
    let once_anywhere = sessions.is_some()
        || raw
            .step
            .iter()
            .any(|s| s.get_ref().once.as_ref().is_some_and(|o| *o.get_ref()));
    let whole = Whole {
        drawn: arrivals.is_some(),
        sessions: sessions.is_some(),
        once_anywhere,
        vars: &vars,
        reads_replies: script.as_ref().is_some_and(|s| s.has_response),
    };
    let mut steps = Vec::new();
    for (i, spanned) in raw.step.iter().enumerate() {
        steps.push(step(i, spanned, &whole, &template, &duration, &at)?);
    }
    let first_loop = raw.step.iter().find_map(|s| s.get_ref().repeat.as_ref());
    if let (Some(_), Some(l)) = (&arrivals, first_loop) {
        return Err(at(
            l.span().start,
            "loop: with [arrivals] each request is on its own; loops are for clients' and sessions' flows".into(),
        ));
    }
    loops(&raw, &mut steps, sessions.is_some(), &at)?;
    Ok(Scenario {
        clients,
        stages,
        arrivals,
        sessions,
        ramp_up,
        data,
        seed,
        steps,
        random: RandomPool::new(seed),
        vars,
        cookies: raw.cookies.unwrap_or(true),
        script,
    })
}

/// Who sends, as a scenario says it: clients (or their stages), sessions or arrivals.
struct Senders {
    clients: u64,
    stages: Vec<Stage>,
    arrivals: Option<Arrive>,
    sessions: Option<Arrive>,
}

/// Checks who sends: `clients` (or `stages`), `[sessions]` or `[arrivals]`, one of them.
fn senders(
    raw: &RawScenario,
    seed: u64,
    at: &dyn Fn(usize, String) -> crate::Error,
) -> crate::error::Result<Senders> {
    let arrivals = raw
        .arrivals
        .as_ref()
        .map(|a| arrivals(a, seed, at))
        .transpose()?;
    let sessions = match &raw.sessions {
        Some(s) if arrivals.is_some() => {
            return Err(at(
                s.span().start,
                "[sessions]: with [arrivals] each request is on its own; keep one of the two"
                    .into(),
            ))
        }
        Some(s) => Some(session_rate(s, at)?),
        None => None,
    };
    let stages = match &raw.stages {
        Some(st) => stages(st, raw, arrivals.is_some() || sessions.is_some(), at)?,
        None => Vec::new(),
    };
    let clients = match (&raw.clients, &arrivals) {
        (Some(c), None) if sessions.is_some() => {
            return Err(at(
                c.span().start,
                "clients: with [sessions] new sessions arrive at its rate, each on its own; remove clients".into(),
            ))
        }
        (None, None) if sessions.is_some() => 0,
        (None, None) if !stages.is_empty() => stages.iter().map(|s| s.to).max().unwrap_or(0),
        (Some(c), None) => crate::limits::CLIENTS
            .check(*c.get_ref() as f64)
            .map_err(|e| at(c.span().start, e.to_string()))? as u64,
        (None, None) => {
            return Err(at(
                0,
                "say who sends: clients = N (virtual clients), a [sessions] table (sessions arriving at a rate, each running the steps once) or an [arrivals] table (requests at a rate)".into(),
            ))
        }
        (Some(c), Some(_)) => {
            return Err(at(
                c.span().start,
                "clients: with [arrivals] the requests come at the arrival times, not from clients; remove clients".into(),
            ))
        }
        (None, Some(_)) => 0,
    };
    Ok(Senders {
        clients,
        stages,
        arrivals,
        sessions,
    })
}

/// `[sessions]`: a rate, or stages of rates.
fn session_rate(
    s: &Spanned<RawSessions>,
    at: &dyn Fn(usize, String) -> crate::Error,
) -> crate::error::Result<Arrive> {
    let poisson = s.get_ref().poisson.unwrap_or(false);
    match (&s.get_ref().rate, &s.get_ref().stages) {
        (Some(r), None) => Ok(Arrive::Rate {
            rate: crate::limits::RATE
                .named("[sessions] rate")
                .check(*r.get_ref())
                .map_err(|e| at(r.span().start, e.to_string()))?,
            poisson,
        }),
        (None, Some(st)) => {
            let rate = |r: f64| match r {
                0.0 => Ok(0.0),
                r => crate::limits::RATE.named("rate").check(r),
            };
            let mut t = Duration::ZERO;
            let points = line(st, "[sessions] stages", "rate", &rate, at)?
                .into_iter()
                .map(|(to, over)| {
                    t += over;
                    (t.as_secs_f64(), to)
                })
                .collect();
            Ok(Arrive::Staged { points, poisson })
        }
        _ => Err(at(
            s.span().start,
            "[sessions]: give rate = N (sessions a second) or stages = [{ to = N, over = \"30s\" }, { hold = \"1m\" }, …]".into(),
        )),
    }
}

/// What checking a step needs to know of the whole scenario.
struct Whole<'a> {
    /// Its steps are drawn by weight at `[arrivals]` times: no clients.
    drawn: bool,
    /// `[sessions]`: each session runs every step once, in order.
    sessions: bool,
    /// It has a `once` step (what `restart` goes back to).
    once_anywhere: bool,
    /// The variables its steps extract.
    vars: &'a [String],
    /// Its script reads every reply (`response(r)`): every step keeps it.
    reads_replies: bool,
}

/// One `[[step]]`, checked: `i` its position.
/// Long because each key of a step is checked here in file order, each with its own
/// error at its position.
fn step(
    i: usize,
    spanned: &Spanned<RawStep>,
    whole: &Whole,
    template: &dyn Fn(&Spanned<String>) -> crate::error::Result<Text>,
    duration: &dyn Fn(&Spanned<String>, &str) -> crate::error::Result<Duration>,
    at: &dyn Fn(usize, String) -> crate::Error,
) -> crate::error::Result<Step> {
    let Whole {
        drawn,
        sessions,
        once_anywhere,
        vars,
        ..
    } = *whole;
    let (st, here) = (spanned.get_ref(), spanned.span().start);
    let name = st.name.clone().unwrap_or_else(|| format!("step {}", i + 1));
    let (pos, observed) = paths(st, &name, here, at)?;
    let when = if sessions {
        if let Some(key) = [
            (&st.every.as_ref().map(|e| e.span().start), "every"),
            (&st.weight.as_ref().map(|w| w.span().start), "weight"),
        ]
        .into_iter()
        .find_map(|(p, k)| p.map(|p| (p, k)))
        {
            return Err(at(
                key.0,
                format!("step '{name}': {}: with [sessions] each session runs every step once, in file order; every and weight are for clients", key.1),
            ));
        }
        When::Once
    } else {
        when(st, &name, pos, drawn, duration, at)?
    };
    if drawn && !matches!(when, When::Weight(_)) {
        return Err(at(
            pos,
            format!("step '{name}': with [arrivals] every step is drawn by its weight; once and every are for clients"),
        ));
    }
    if let (true, Some(t)) = (drawn, &st.think) {
        return Err(at(
            t.span().start,
            "think: with [arrivals] requests come at the arrival times; there is no client to pause".into(),
        ));
    }
    let method = match &st.method {
        Some(m) => Method::from_bytes(m.get_ref().to_uppercase().as_bytes()).map_err(|_| {
            at(
                m.span().start,
                format!("method: '{}' is not an HTTP method", m.get_ref()),
            )
        })?,
        None if st.body.is_some() => Method::POST,
        None => Method::GET,
    };
    if let (true, Some((_, e))) = (drawn, st.extract.iter().next()) {
        return Err(at(
            e.span().start,
            format!("step '{name}': extract: with [arrivals] each request is on its own; a flow that carries values needs clients = N"),
        ));
    }
    let extract = extracts(st, vars, at)?;
    let checks = checks(st, at)?;
    let on_failure = on_failure(st, &name, duration, at)?;
    if on_failure == OnFailure::Restart && !once_anywhere {
        return Err(at(
            st.on_failure.as_ref().map_or(here, |o| o.span().start),
            format!("step '{name}': on_failure = \"restart\" starts the client's flow again from its first once step, and this scenario has none: add one (e.g. a login or a registration) or use \"retry\""),
        ));
    }
    let follow = st.follow.unwrap_or(false);
    let keep = extract
        .iter()
        .map(|e| {
            if e.source.needs_body() {
                Keep::All
            } else {
                Keep::Head
            }
        })
        .chain(checks.iter().map(|c| {
            if c.needs_body() {
                Keep::All
            } else {
                Keep::Head
            }
        }))
        .chain(follow.then_some(Keep::Head))
        .chain(whole.reads_replies.then_some(Keep::All))
        .max()
        .unwrap_or(Keep::Nothing);
    let mut headers = Vec::new();
    for (k, v) in &st.headers {
        let name = HeaderName::from_bytes(k.as_bytes()).map_err(|_| {
            at(
                v.span().start,
                format!("headers: '{k}' is not a header name"),
            )
        })?;
        headers.push((name, template(v)?));
    }
    let think = match (&st.think, &st.pace) {
            (Some(t), None) => think(t, duration, at)?,
            (None, Some(p)) => Think::Pace(duration(p, "pace")?),
            (None, None) => Think::default(),
            (Some(_), Some(p)) => {
                return Err(at(p.span().start, format!("step '{name}': give think (a pause after the step) or pace (the step at most once per pace), not both")))
            }
        };
    Ok(Step {
        name,
        when,
        think,
        method,
        path: match &st.path {
            Some(p) => template(p)?,
            None => Text::parse("", &[]).expect("empty"),
        },
        observed,
        headers,
        body: st.body.as_ref().map(template).transpose()?,
        extract,
        checks,
        on_failure,
        follow,
        keep,
        repeat: None,
    })
}

/// The steps' `loop`s, checked and resolved once every step is known: `from` names
/// this step or an earlier one of the same flow sequence (clients' `once` steps, or a
/// session's steps), and two groups are nested or apart, never crossed.
fn loops(
    raw: &RawScenario,
    steps: &mut [Step],
    sessions: bool,
    at: &dyn Fn(usize, String) -> crate::Error,
) -> crate::error::Result<()> {
    let mut groups: Vec<(usize, usize)> = Vec::new();
    for (i, spanned) in raw.step.iter().enumerate() {
        let Some(l) = &spanned.get_ref().repeat else {
            continue;
        };
        let (pos, name) = (l.span().start, steps[i].name.clone());
        let wrong = |msg: String| at(pos, format!("step '{name}': loop: {msg}"));
        if !sessions && steps[i].when != When::Once {
            return Err(wrong("a loop goes over a flow's steps in order: give it to a once step (with [sessions], to any step); a weighted or periodic step repeats already".into()));
        }
        let from = steps[..=i]
            .iter()
            .position(|s| s.name == l.get_ref().from)
            .ok_or_else(|| {
                wrong(format!(
                    "from = '{}': give the name of this step or an earlier one",
                    l.get_ref().from
                ))
            })?;
        if !sessions && steps[from].when != When::Once {
            return Err(wrong(format!(
                "from = '{}': a once step, as this one is",
                steps[from].name
            )));
        }
        let bad_times = || {
            wrong(
                "times: give a count (times = 3) or a range (times = \"1..5\"), at least 1".into(),
            )
        };
        let until = match &l.get_ref().until {
            Some(c) => Some(Arc::new(check_of("until", c, &|m| {
                wrong(format!("until: {m}"))
            })?)),
            None => None,
        };
        let (least, most) = match &l.get_ref().times {
            None if until.is_some() => (UNTIL_TIMES, UNTIL_TIMES),
            None => {
                return Err(wrong(
                    "give times = N (how many times its steps run) or until = { … } (a condition on this step's reply that ends it)".into(),
                ))
            }
            Some(toml::Value::Integer(n)) if *n >= 1 && *n <= i64::from(u32::MAX) => {
                (*n as u32, *n as u32)
            }
            Some(toml::Value::String(r)) => {
                let (a, b) = r.split_once("..").ok_or_else(bad_times)?;
                let a: u32 = a.trim().parse().map_err(|_| bad_times())?;
                let b: u32 = b.trim().parse().map_err(|_| bad_times())?;
                if a < 1 || b < a {
                    return Err(bad_times());
                }
                (a, b)
            }
            _ => return Err(bad_times()),
        };
        if let Some(&(a, b)) = groups
            .iter()
            .find(|&&(a, b)| (a < from && from <= b) || (from < a && a <= i && i < b))
        {
            return Err(wrong(format!(
                "its steps ('{}' to '{name}') cross another loop's ('{}' to '{}'): loops must be nested or apart",
                steps[from].name, steps[a].name, steps[b].name
            )));
        }
        groups.push((from, i));
        if let Some(c) = &until {
            let needs = if c.needs_body() {
                Keep::All
            } else {
                Keep::Head
            };
            steps[i].keep = steps[i].keep.max(needs);
        }
        steps[i].repeat = Some(Loop {
            from,
            least,
            most,
            until,
        });
    }
    Ok(())
}

/// `stages = [{ to = 200, over = "30s" }, { hold = "2m" }, { to = 0, over = "10s" }]`,
/// checked: instead of `clients` and `ramp_up`, for clients only.
fn stages(
    st: &Spanned<Vec<RawStage>>,
    raw: &RawScenario,
    arrivals: bool,
    at: &dyn Fn(usize, String) -> crate::Error,
) -> crate::error::Result<Vec<Stage>> {
    let pos = st.span().start;
    if arrivals || raw.clients.is_some() || raw.ramp_up.is_some() {
        return Err(at(pos, "stages: they say how many clients are active over time, instead of clients, ramp_up, [sessions] and [arrivals]; keep one".into()));
    }
    let clients = |n: f64| match n {
        0.0 => Ok(0.0),
        n if n.fract() != 0.0 => Err(crate::Error::usage(format!(
            "{n} is not a whole number of clients"
        ))),
        n => crate::limits::CLIENTS.check(n),
    };
    let line = line(st, "stages", "client", &clients, at)?;
    Ok(line
        .into_iter()
        .map(|(to, over)| Stage {
            to: to as u64,
            over,
        })
        .collect())
}

/// A line of stages, `{ to = N, over = "30s" }` or `{ hold = "2m" }` each, from 0:
/// (level at the stage's end, its length); `level` checks a `to`, `what` names it.
fn line(
    st: &Spanned<Vec<RawStage>>,
    key: &str,
    what: &str,
    level: &dyn Fn(f64) -> crate::error::Result<f64>,
    at: &dyn Fn(usize, String) -> crate::Error,
) -> crate::error::Result<Vec<(f64, Duration)>> {
    let pos = st.span().start;
    let mut out = Vec::new();
    let mut now = 0.0;
    for s in st.get_ref() {
        let dur =
            |d: &str, k: &str| parse_duration(d).map_err(|e| at(pos, format!("{key}: {k}: {e}")));
        let stage = match (s.to, &s.over, &s.hold) {
            (Some(to), Some(over), None) => (
                level(to).map_err(|e| at(pos, format!("{key}: to: {e}")))?,
                dur(over, "over")?,
            ),
            (None, None, Some(hold)) => (now, dur(hold, "hold")?),
            _ => {
                return Err(at(
                    pos,
                    format!("{key}: each is {{ to = N, over = \"30s\" }} or {{ hold = \"2m\" }}"),
                ))
            }
        };
        now = stage.0;
        out.push(stage);
    }
    if out.iter().all(|s| s.0 == 0.0) {
        return Err(at(pos, format!("{key}: no stage has a {what}; give e.g. [{{ to = 10, over = \"10s\" }}, {{ hold = \"1m\" }}]")));
    }
    Ok(out)
}

/// `csv_order` and `csv_exhausted`, checked.
fn order(
    raw: &RawScenario,
    at: &dyn Fn(usize, String) -> crate::Error,
) -> crate::error::Result<Order> {
    let wrap = match &raw.csv_exhausted {
        None => None,
        Some(e) => match e.get_ref().as_str() {
            "stop" => Some(false),
            "wrap" => Some(true),
            other => return Err(at(e.span().start, format!("csv_exhausted: '{other}': give \"stop\" (the client stops when the rows ran out) or \"wrap\""))),
        },
    };
    let order = match &raw.csv_order {
        None => Order::Client,
        Some(o) => match o.get_ref().as_str() {
            "client" => Order::Client,
            "sequential" => Order::Sequential,
            "random" => Order::Random,
            "unique" => Order::Unique { wrap: wrap.unwrap_or(false) },
            other => return Err(at(o.span().start, format!("csv_order: '{other}': give \"client\" (client i takes row i mod rows), \"sequential\", \"random\" or \"unique\""))),
        },
    };
    if let (Some(e), false) = (&raw.csv_exhausted, matches!(order, Order::Unique { .. })) {
        return Err(at(
            e.span().start,
            "csv_exhausted: only rows handed out once (csv_order = \"unique\") run out".into(),
        ));
    }
    if let (Some(o), None, None) = (&raw.csv_order, &raw.csv, &raw.jsonl) {
        return Err(at(
            o.span().start,
            "csv_order: there is no data file to take rows from (csv = \"FILE\" or jsonl = \"FILE\")".into(),
        ));
    }
    Ok(order)
}

/// `think = "2s"`, a range drawn uniformly for each pause (`"1s..3s"`), or an
/// exponential pause with a mean (`"exponential 2s"`).
fn think(
    t: &Spanned<String>,
    duration: &dyn Fn(&Spanned<String>, &str) -> crate::error::Result<Duration>,
    at: &dyn Fn(usize, String) -> crate::Error,
) -> crate::error::Result<Think> {
    if let Some(mean) = t.get_ref().strip_prefix("exponential ") {
        let mean =
            parse_duration(mean.trim()).map_err(|e| at(t.span().start, format!("think: {e}")))?;
        return Ok(Think::Exponential { mean });
    }
    match t.get_ref().split_once("..") {
        None => {
            let d = duration(t, "think")?;
            Ok(Think::Uniform { least: d, most: d })
        }
        Some((a, b)) => {
            let one = |s: &str| {
                parse_duration(s.trim()).map_err(|e| at(t.span().start, format!("think: {e}")))
            };
            let (least, most) = (one(a)?, one(b)?);
            if most < least {
                return Err(at(
                    t.span().start,
                    format!("think = \"{}\": the range runs from the shorter pause to the longer, e.g. \"1s..3s\"", t.get_ref()),
                ));
            }
            Ok(Think::Uniform { least, most })
        }
    }
}

/// A step's `extract` table, checked: one source per variable, a JSON path or a regex
/// that parses (a regex with at most one capture group).
fn extracts(
    st: &RawStep,
    vars: &[String],
    at: &dyn Fn(usize, String) -> crate::Error,
) -> crate::error::Result<Vec<Extract>> {
    let mut out = Vec::new();
    for (name, e) in &st.extract {
        let (pos, e) = (e.span().start, e.get_ref());
        let source = match (&e.json, &e.regex, &e.header, &e.cookie) {
            (Some(p), None, None, None) => Source::Json(
                JsonPath::parse(p).map_err(|(_, m)| at(pos, format!("extract.{name}: {m}")))?,
            ),
            (None, Some(r), None, None) => {
                let re = regex_lite::Regex::new(r)
                    .map_err(|err| at(pos, format!("extract.{name}: regex '{r}': {err}")))?;
                if re.captures_len() > 2 {
                    return Err(at(pos, format!("extract.{name}: regex '{r}' has {} capture groups; give one (the value) or none (the whole match)", re.captures_len() - 1)));
                }
                Source::Regex(re)
            }
            (None, None, Some(h), None) => Source::Header(h.to_ascii_lowercase()),
            (None, None, None, Some(c)) => Source::Cookie(c.clone()),
            _ => {
                return Err(at(
                    pos,
                    format!("extract.{name}: give one of json = \"$.path\", regex = \"…(…)…\", header = \"Name\" or cookie = \"name\""),
                ))
            }
        };
        out.push(Extract {
            name: name.clone(),
            var: vars.iter().position(|v| v == name).expect("collected"),
            source,
        });
    }
    Ok(out)
}

/// A step's named checks, checked.
fn checks(
    st: &RawStep,
    at: &dyn Fn(usize, String) -> crate::Error,
) -> crate::error::Result<Vec<Check>> {
    let mut out = Vec::new();
    for (name, c) in &st.check {
        let (pos, c) = (c.span().start, c.get_ref());
        out.push(check_of(name, c, &|m| {
            at(pos, format!("check.{name}: {m}"))
        })?);
    }
    Ok(out)
}

/// A check's (or a loop's `until`) keys, checked; `bad` says where.
fn check_of(
    name: &str,
    c: &RawCheck,
    bad: &dyn Fn(String) -> crate::Error,
) -> crate::error::Result<Check> {
    {
        let status = match &c.status {
            None => Vec::new(),
            Some(toml::Value::Integer(n)) => vec![*n],
            Some(toml::Value::Array(a)) => a
                .iter()
                .map(|v| {
                    v.as_integer().ok_or_else(|| {
                        bad("status: give a status or a list of them, e.g. [200, 302]".into())
                    })
                })
                .collect::<crate::error::Result<_>>()?,
            Some(_) => {
                return Err(bad(
                    "status: give a status or a list of them, e.g. [200, 302]".into(),
                ))
            }
        };
        let status = status
            .into_iter()
            .map(|n| {
                u16::try_from(n).ok().filter(|n| *n < 1000).ok_or_else(|| {
                    bad(format!(
                        "status {n} is not a status (HTTP's 100 to 999, gRPC's 0 to 16)"
                    ))
                })
            })
            .collect::<crate::error::Result<Vec<u16>>>()?;
        let path = |p: &str| JsonPath::parse(p).map_err(|(_, m)| bad(m));
        let check = Check {
            name: name.to_string(),
            status,
            body_contains: c.body_contains.clone(),
            body_matches: c
                .body_matches
                .as_ref()
                .map(|r| {
                    regex_lite::Regex::new(r).map_err(|e| bad(format!("body_matches '{r}': {e}")))
                })
                .transpose()?,
            json: c
                .json
                .iter()
                .map(|(p, v)| {
                    Ok((
                        path(p)?,
                        serde_json::to_value(v).map_err(|e| bad(e.to_string()))?,
                    ))
                })
                .collect::<crate::error::Result<_>>()?,
            json_exists: c
                .json_exists
                .iter()
                .map(|p| path(p))
                .collect::<crate::error::Result<_>>()?,
            headers: c.headers.iter().map(|h| h.to_ascii_lowercase()).collect(),
            latency: c
                .latency
                .as_ref()
                .map(|l| parse_duration(l).map_err(|e| bad(format!("latency: {e}"))))
                .transpose()?,
        };
        if check.status.is_empty()
            && !check.needs_body()
            && check.headers.is_empty()
            && check.latency.is_none()
        {
            return Err(bad("it checks nothing: give status, body_contains, body_matches, json, json_exists, headers or latency".into()));
        }
        Ok(check)
    }
}

/// `on_failure = "continue" | "stop" | "restart"`, or `{ retry = N, backoff = "100ms" }`.
fn on_failure(
    st: &RawStep,
    name: &str,
    duration: &dyn Fn(&Spanned<String>, &str) -> crate::error::Result<Duration>,
    at: &dyn Fn(usize, String) -> crate::Error,
) -> crate::error::Result<OnFailure> {
    let Some(v) = &st.on_failure else {
        return Ok(OnFailure::Continue);
    };
    let pos = v.span().start;
    let wrong = || {
        at(
            pos,
            format!("step '{name}': on_failure is \"continue\", \"stop\", \"restart\" or {{ retry = N, backoff = \"100ms\" }}"),
        )
    };
    match v.get_ref() {
        toml::Value::String(s) => match s.as_str() {
            "continue" => Ok(OnFailure::Continue),
            "stop" => Ok(OnFailure::Stop),
            "restart" => Ok(OnFailure::Restart),
            _ => Err(wrong()),
        },
        toml::Value::Table(t) => {
            if t.keys().any(|k| k != "retry" && k != "backoff") {
                return Err(wrong());
            }
            let times = t
                .get("retry")
                .and_then(toml::Value::as_integer)
                .filter(|n| (1..=100).contains(n))
                .ok_or_else(|| {
                    at(
                        pos,
                        format!(
                            "step '{name}': on_failure.retry: how many more times, from 1 to 100"
                        ),
                    )
                })?;
            let backoff = match t.get("backoff") {
                None => Duration::ZERO,
                Some(toml::Value::String(b)) => {
                    duration(&Spanned::new(pos..pos, b.clone()), "on_failure.backoff")?
                }
                Some(_) => return Err(wrong()),
            };
            Ok(OnFailure::Retry {
                times: times as u32,
                backoff,
            })
        }
        _ => Err(wrong()),
    }
}

/// The data file a scenario names (beside it: `csv` or `jsonl`, not both), read or
/// indexed and checked.
fn data(
    raw: &RawScenario,
    path: &Path,
    at: &dyn Fn(usize, String) -> crate::Error,
) -> crate::error::Result<Option<Data>> {
    let (name, format) = match (&raw.csv, &raw.jsonl) {
        (None, None) => return Ok(None),
        (Some(_), Some(j)) => {
            return Err(at(
                j.span().start,
                "jsonl: the scenario has a csv file already: give one data file".into(),
            ))
        }
        (Some(c), None) => (c, Format::Csv),
        (None, Some(j)) => (j, Format::Jsonl),
    };
    let file = path.parent().unwrap_or(Path::new(".")).join(name.get_ref());
    let order = order(raw, at)?;
    Data::load(&file, format, order)
        .map(Some)
        .map_err(|e| at(name.span().start, e.to_string()))
}

/// A step's path (a template) or paths (observed ones to pick from): where it is in the
/// file, and the observed paths.
fn paths(
    st: &RawStep,
    name: &str,
    here: usize,
    at: &dyn Fn(usize, String) -> crate::Error,
) -> crate::error::Result<(usize, Vec<String>)> {
    Ok(match (&st.path, &st.paths) {
        (Some(p), None) => {
            if !p.get_ref().starts_with('/') {
                return Err(at(
                    p.span().start,
                    format!("path: '{}' must start with /", p.get_ref()),
                ));
            }
            (p.span().start, Vec::new())
        }
        (None, Some(list)) if !list.get_ref().is_empty() => {
            for p in list.get_ref() {
                if !super::replay::sendable(p.get_ref()) {
                    return Err(at(
                        p.span().start,
                        format!(
                            "paths: '{}' must start with / and hold no space or control character",
                            crate::units::printable(p.get_ref())
                        ),
                    ));
                }
            }
            let v = list.get_ref().iter().map(|p| p.get_ref().clone()).collect();
            (list.span().start, v)
        }
        (None, Some(list)) => {
            return Err(at(
                list.span().start,
                "paths: give at least one path".into(),
            ))
        }
        (None, None) => {
            return Err(at(
                here,
                format!("step '{name}': give a path (a template) or paths (a list to pick from)"),
            ))
        }
        (Some(p), Some(_)) => {
            return Err(at(
                p.span().start,
                format!("step '{name}': give either path or paths, not both"),
            ))
        }
    })
}

/// When a step runs: once, every period, or by weight (`drawn`: with arrivals, every
/// step is drawn by weight, 1 unless said).
fn when(
    st: &RawStep,
    name: &str,
    pos: usize,
    drawn: bool,
    duration: &dyn Fn(&Spanned<String>, &str) -> crate::error::Result<Duration>,
    at: &dyn Fn(usize, String) -> crate::Error,
) -> crate::error::Result<When> {
    let once = st.once.as_ref().is_some_and(|o| *o.get_ref());
    Ok(match (once, &st.every, &st.weight) {
        (true, None, None) => When::Once,
        (false, Some(e), None) => {
            let p = duration(e, "every")?;
            crate::limits::PERIOD.check(p.as_secs_f64()).map_err(|_| {
                at(
                    e.span().start,
                    format!(
                        "every = \"{}\": out of range, give a period from 1ms to 30 days",
                        e.get_ref()
                    ),
                )
            })?;
            When::Every(p)
        }
        (false, None, Some(w)) if (1..=i64::from(u32::MAX)).contains(w.get_ref()) => {
            When::Weight(*w.get_ref() as u32)
        }
        (false, None, Some(w)) => {
            return Err(at(
                w.span().start,
                "weight must be from 1 to 4294967295".into(),
            ))
        }
        // With arrivals every step is drawn by weight: 1 unless said.
        (false, None, None) if drawn => When::Weight(1),
        (false, None, None) => {
            let msg = format!(
                "step '{name}': say when it runs: once = true, every = \"200s\" or weight = 1"
            );
            return Err(at(pos, msg));
        }
        _ => {
            return Err(at(
                pos,
                format!("step '{name}': give only one of once, every and weight"),
            ))
        }
    })
}

/// Checks `[arrivals]`: `per_second = [...]` or `rate = N` (with `poisson`), times
/// `scale` (counts rounded at random, seeded, so a fraction is kept on average).
fn arrivals(
    a: &Spanned<RawArrivals>,
    seed: u64,
    at: &dyn Fn(usize, String) -> crate::Error,
) -> crate::error::Result<Arrive> {
    let start = a.span().start;
    let a = a.get_ref();
    let scale = match &a.scale {
        Some(s) => crate::limits::SCALE
            .check(*s.get_ref())
            .map_err(|e| at(s.span().start, e.to_string()))?,
        None => 1.0,
    };
    match (&a.per_second, &a.rate) {
        (Some(list), None) => {
            if a.poisson.is_some() {
                return Err(at(
                    list.span().start,
                    "poisson: the per-second counts already say how many come in each second (uniformly within it); poisson goes with rate".into(),
                ));
            }
            let mut z = crate::rng::Rng::new(crate::rng::mix(seed));
            let mut counts = Vec::with_capacity(list.get_ref().len());
            for c in list.get_ref() {
                if !(0..=10_000_000).contains(c.get_ref()) {
                    return Err(at(
                        c.span().start,
                        "per_second: a count must be from 0 to 10000000".into(),
                    ));
                }
                let x = *c.get_ref() as f64 * scale;
                if x > crate::limits::RATE.max {
                    return Err(at(
                        c.span().start,
                        format!(
                            "per_second: {} × scale {scale} = {x:.0} requests in one second, more than {}: give a smaller scale",
                            c.get_ref(),
                            crate::limits::RATE.max
                        ),
                    ));
                }
                let u = z.unit();
                counts.push((x.floor() + f64::from(u < x.fract())) as u32);
            }
            if counts.iter().all(|&c| c == 0) {
                return Err(at(
                    list.span().start,
                    "per_second: the counts send nothing; give at least one request".into(),
                ));
            }
            Ok(Arrive::PerSecond(counts))
        }
        (None, Some(r)) => {
            let rate = crate::limits::RATE
                .check(*r.get_ref())
                .and_then(|r| crate::limits::RATE.named("rate × scale").check(r * scale))
                .map_err(|e| at(r.span().start, e.to_string()))?;
            Ok(Arrive::Rate {
                rate,
                poisson: a.poisson.unwrap_or(false),
            })
        }
        _ => Err(at(
            start,
            "[arrivals]: give either per_second = [counts…] or rate = N".into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stages_start_and_stop_each_client_where_the_line_crosses_it() {
        let text = "stages = [{ to = 4, over = \"4s\" }, { hold = \"2s\" }, { to = 0, over = \"4s\" }]\n[[step]]\nweight = 1\npath = \"/\"\n";
        let sc = parse(text, Path::new("s.toml")).unwrap();
        assert_eq!(sc.clients, 4);
        assert_eq!(sc.staged(), Some(Duration::from_secs(10)));
        let ms = |d: Duration| d.as_millis();
        // Client i is active while the line is above i + 1/2.
        assert_eq!(ms(sc.start_offset(0)), 500);
        assert_eq!(ms(sc.start_offset(3)), 3500);
        assert_eq!(sc.end_offset(0).map(ms), Some(9500));
        assert_eq!(sc.end_offset(3).map(ms), Some(6500));
        let e = parse(&format!("clients = 3\n{text}"), Path::new("s.toml")).unwrap_err();
        assert!(
            e.to_string()
                .contains("instead of clients, ramp_up, [sessions] and [arrivals]"),
            "{e}"
        );
    }

    const IOT: &str = r#"
clients = 100
ramp_up = "10s"

[[step]]
name = "register"
once = true
path = "/register"
headers = { "content-type" = "application/json" }
body = '{"id": "dev-{{client}}"}'

[[step]]
name = "push"
every = "200s"
path = "/push/dev-{{client}}"
body = "{{random 512}}"
"#;

    #[test]
    fn reads_the_iot_emulator() {
        let s = parse(IOT, Path::new("iot.toml")).unwrap();
        assert_eq!(s.clients, 100);
        assert_eq!(s.steps.len(), 2);
        assert_eq!(s.steps[0].when, When::Once);
        assert_eq!(s.steps[0].method, Method::POST);
        assert_eq!(s.steps[1].when, When::Every(Duration::from_secs(200)));
        // 100 registrations, then 100 clients pushing every 200 s offer 0.5 push/s:
        // ~300 pushes in 600 s (less the ramp-up and phases).
        let n = s.scheduled(Duration::from_secs(600)).unwrap();
        assert!((390..=400).contains(&n), "{n}");
    }

    #[test]
    fn mistakes_point_at_file_line_and_column() {
        let bad_key = IOT.replace("ramp_up", "rampup");
        let e = parse(&bad_key, Path::new("iot.toml"))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("iot.toml:3:1: unknown field `rampup`"), "{e}");
        let bad_duration = IOT.replace("\"200s\"", "\"200 parsecs\"");
        let e = parse(&bad_duration, Path::new("iot.toml"))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("iot.toml:14:9: every: '200 parsecs' is not a duration"),
            "{e}"
        );
        let bad_placeholder = IOT.replace("dev-{{client}}\"", "dev-{{clint}}\"");
        let e = parse(&bad_placeholder, Path::new("iot.toml"))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("iot.toml:10:21: unknown placeholder '{{clint}}'"),
            "{e}"
        );
        let no_when = IOT.replace("once = true\n", "");
        let e = parse(&no_when, Path::new("iot.toml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("say when it runs"), "{e}");
    }

    #[test]
    fn loops_name_an_earlier_step_of_the_sequence_and_draw_their_times() {
        let flow = |tail: &str| {
            format!("clients = 1\n[[step]]\nname = \"a\"\nonce = true\npath = \"/\"\n[[step]]\nname = \"b\"\n{tail}\npath = \"/\"\n")
        };
        let sc = parse(
            &flow("once = true\nloop = { from = \"a\", times = \"2..4\" }"),
            Path::new("f.toml"),
        )
        .unwrap();
        let l = sc.steps[1].repeat.clone().unwrap();
        assert_eq!((l.from, l.least, l.most), (0, 2, 4));
        assert!(l.until.is_none() && sc.steps[1].keep == Keep::Nothing);
        // `until` ends the loop on a condition of the step's reply, at most 100 times
        // unless told: the step keeps the body its condition reads.
        let polled = parse(
            &flow("once = true\nloop = { from = \"a\", until = { json = { \"$.status\" = \"done\" } } }"),
            Path::new("f.toml"),
        )
        .unwrap();
        let u = polled.steps[1].repeat.clone().unwrap();
        assert_eq!((u.least, u.most), (UNTIL_TIMES, UNTIL_TIMES));
        assert_eq!(u.until.unwrap().json.len(), 1);
        assert_eq!(polled.steps[1].keep, Keep::All);
        let mut rng = crate::rng::Rng::new(3);
        let drawn: std::collections::BTreeSet<u32> = (0..200).map(|_| l.draw(&mut rng)).collect();
        assert_eq!(drawn.into_iter().collect::<Vec<_>>(), [2, 3, 4]);
        for (tail, why) in [
            (
                "once = true\nloop = { from = \"c\", times = 2 }",
                "from = 'c': give the name of this step or an earlier one",
            ),
            (
                "once = true\nloop = { from = \"a\", times = 0 }",
                "times: give a count",
            ),
            (
                "once = true\nloop = { from = \"a\", times = \"3..1\" }",
                "times: give a count",
            ),
            (
                "weight = 1\nloop = { from = \"a\", times = 2 }",
                "give it to a once step",
            ),
            ("once = true\nloop = { from = \"a\" }", "give times = N"),
            (
                "once = true\nloop = { from = \"a\", until = { json = { \"$.[\" = 1 } } }",
                "loop: until:",
            ),
            (
                "once = true\nloop = { from = \"a\", until = {} }",
                "until: it checks nothing",
            ),
        ] {
            let e = parse(&flow(tail), Path::new("f.toml"))
                .unwrap_err()
                .to_string();
            assert!(e.contains(why) && e.starts_with("f.toml:9:"), "{e}");
        }
        let open = format!("{OPEN}loop = {{ from = \"x\", times = 2 }}\n");
        let e = parse(&open, Path::new("o.toml")).unwrap_err().to_string();
        assert!(e.contains("loop: with [arrivals]"), "{e}");
    }

    const OPEN: &str = r#"
[arrivals]
per_second = [3, 0, 5]
scale = 1.5

[[step]]
weight = 3
paths = ["/items/1?full=1", "/items/2"]

[[step]]
weight = 1
method = "POST"
path = "/push/{{seq}}"
"#;

    #[test]
    fn open_arrivals_draw_steps_by_weight_and_are_checked() {
        let s = parse(OPEN, Path::new("w.toml")).unwrap();
        assert_eq!(s.clients, 0);
        // 4.5 and 7.5 are rounded at random, seeded: to 4 or 5, and 7 or 8.
        match &s.arrivals {
            Some(Arrive::PerSecond(c)) => {
                assert!(matches!(c[..], [4 | 5, 0, 7 | 8]), "{c:?}");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(s.steps[0].observed, ["/items/1?full=1", "/items/2"]);
        let draw = super::super::replay::Draw::new(std::sync::Arc::new(s));
        let requests = super::super::replay::Requests::Drawn(draw);
        let mut posts = 0;
        for n in 0..4000 {
            let (r, step) = requests.at(n);
            assert_eq!(step, Some(if r.method == Method::POST { 1 } else { 0 }));
            if r.method == Method::POST {
                assert_eq!(r.path, format!("/push/{n}"));
                posts += 1;
            } else {
                assert!(r.path.starts_with("/items/"), "{}", r.path);
            }
            // The same position draws the same request on every thread and agent.
            assert_eq!(requests.at(n).0.path, r.path);
        }
        // One in four, within 4 standard deviations (σ ≈ 27).
        assert!((posts as i64 - 1000).abs() < 110, "{posts}");
        for (from, to, why) in [
            (
                "[arrivals]",
                "clients = 3\n[arrivals]",
                "with [arrivals] the requests come",
            ),
            (
                "weight = 1\n",
                "once = true\n",
                "every step is drawn by its weight",
            ),
            ("[3, 0, 5]", "[0, 0]", "the counts send nothing"),
            ("[3, 0, 5]", "[3, -1]", "a count must be from 0"),
            ("scale = 1.5", "scale = 0.0", "scale = 0: out of range"),
            (
                "per_second = [3, 0, 5]",
                "rate = 10.0\nper_second = [1]",
                "either per_second",
            ),
            (
                "\"/items/2\"",
                "\"/items/2 HTTP/1.1\\r\\nHost: x\"",
                "no space or control",
            ),
            ("path = \"/push/{{seq}}\"", "", "give a path"),
        ] {
            let e = parse(&OPEN.replacen(from, to, 1), Path::new("w.toml"))
                .unwrap_err()
                .to_string();
            assert!(
                e.contains(why) && e.starts_with("w.toml:"),
                "{from} → {to}: {e}"
            );
        }
        let e = parse("[[step]]\nweight = 1\npath = \"/\"\n", Path::new("w.toml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("say who sends"), "{e}");
    }
}
