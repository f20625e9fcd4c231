//! Scenarios: N virtual clients, each running steps — `once` (e.g. register), `every`
//! PERIOD (e.g. push data every 200 s), or a weighted mix with think times — with
//! templated paths, headers and bodies. This is the IoT seed's device emulator, built
//! in. Or, with `[arrivals]`, no clients: requests at an open-model rate (a constant, or
//! so many in each second — what `workload scenario` writes from an access log), each
//! one a step drawn by weight. Or, with `[sessions]`, sessions arriving at an open-model
//! rate, each running every step once in order (Gatling's users a second). The file is
//! TOML; mistakes are reported as `FILE:LINE:COLUMN: what is wrong`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use hyper::header::{HeaderName, HeaderValue};
use hyper::Method;

use super::feed::{Data, NoRow, Row};
use super::flow::{Check, Extract, Keep, OnFailure, MAX_VALUE};
use super::request::Rendered;
use super::template::{Culprit, RandomPool, Text, Vars};

mod labels;
mod parse;
mod raw;
mod step;

pub use labels::Labels;
pub use parse::{load, load_seeded, parse};
pub use raw::schema;

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
    /// What built its body from fields: `form` or `json` (none: `body` as written).
    pub built: Option<&'static str>,
    /// Its body's words, for a protocol whose body is a command of words (Redis,
    /// [`Scenario::split_bodies`]): each rendered alone and quoted, so a value stays one
    /// word.
    pub words: Option<Vec<Text>>,
    /// Values taken from its reply into the client's variables.
    pub extract: Vec<Extract>,
    /// `set.NAME = "…"`: variables rendered, in name order, before its request.
    pub set: Vec<(usize, Text)>,
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
    /// `group = "NAME"`: its index in [`Scenario::groups`].
    pub group: Option<usize>,
    /// `tags = { page = "admin" }`, in name order.
    pub tags: Vec<(String, String)>,
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
    /// The flow's variables (`{{NAME}}`): `[vars]`, then those steps set or extract, in
    /// file order.
    pub vars: Vec<String>,
    /// `[vars]` values (by variable), rendered as each client's flow starts.
    pub defaults: Vec<(usize, Text)>,
    /// Each client keeps its cookies (on unless `cookies = false`).
    pub cookies: bool,
    /// `script = "FILE"`: its `request(r)` and `response(r)` hooks.
    pub script: Option<std::sync::Arc<super::script::Script>>,
    /// Its steps' groups, in file order (a group's steps follow one another).
    pub groups: Vec<String>,
    /// `[metrics]`: its own metrics, in name order, and their kinds.
    pub metrics: Vec<(String, super::custom::Kind)>,
}

/// Why a step's rendered request was not sent: the field that cannot carry what was
/// put in it (`path`, `header NAME`, `topic`) and what put it there — a placeholder
/// (`{{id}}`, `{{csv.name}}`), `text` (the step's own), `script` (its `request(r)`)
/// or `location` (a redirect's). Counted as `invalid.FIELD.BY` on the step.
#[derive(Debug, Clone, PartialEq)]
pub struct Unsent {
    pub field: String,
    pub by: String,
}

impl Unsent {
    /// The step's counter for it.
    pub fn key(&self) -> String {
        format!("invalid.{}.{}", self.field, self.by)
    }
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
    /// Its steps' bodies are commands of words (Redis): each step keeps its body's words
    /// apart, so that a placeholder's value — a server's, holding a space or a quote —
    /// stays one word instead of adding words to the command.
    /// The first step whose body is built from fields (`form`, `json`): a protocol whose
    /// body is a command of words cannot send it.
    pub fn built_body(&self) -> Option<(&str, &'static str)> {
        self.steps
            .iter()
            .find_map(|st| st.built.map(|b| (st.name.as_str(), b)))
    }

    pub fn split_bodies(&mut self) {
        for st in &mut self.steps {
            st.words = st.body.as_ref().map(Text::words);
        }
    }

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

    /// The row client `client` takes as it starts its flow: `Ok(None)` without a data
    /// file; an error when there is none to take and the client stops.
    pub fn take_row(&self, client: u64, rng: &mut crate::rng::Rng) -> Result<Option<Row>, NoRow> {
        match &self.data {
            None => Ok(None),
            Some(d) => d.take(client, rng).map(Some),
        }
    }

    /// Step `i`'s request for `client`'s `seq`-th send; `pick` chooses among observed
    /// paths; `values` are the client's flow variables, `row` its data row (`None`: row
    /// `client` mod rows). A header whose rendered value no header field may carry (a
    /// CR, LF or NUL from a value) makes it [`Unsent`].
    pub fn request(
        &self,
        i: usize,
        client: u64,
        seq: u64,
        pick: u64,
        values: &[Option<String>],
        row: Option<&[String]>,
    ) -> Result<Rendered, Unsent> {
        let st = &self.steps[i];
        let mut own = None;
        let vars = self.vars(client, seq, values, row, &mut own);
        let mut body = Vec::new();
        match (&st.words, &st.body) {
            (Some(words), _) => {
                let mut word = Vec::new();
                for w in words {
                    word.clear();
                    w.render(&vars, &mut word);
                    if !body.is_empty() {
                        body.push(b' ');
                    }
                    super::template::quote_word(&word, &mut body);
                }
            }
            (None, Some(b)) => b.render(&vars, &mut body),
            (None, None) => {}
        }
        let mut headers = Vec::with_capacity(st.headers.len());
        for (k, t) in &st.headers {
            let mut value = Vec::new();
            t.render(&vars, &mut value);
            match HeaderValue::from_bytes(&value) {
                Ok(v) => headers.push((k.clone(), v)),
                Err(_) => {
                    let bad = |b: u8| (b < b' ' && b != b'\t') || b == 0x7f;
                    return Err(Unsent {
                        field: format!("header {k}"),
                        by: self.culprit(t.culprit(&vars, bad)),
                    });
                }
            }
        }
        Ok(Rendered {
            method: st.method.clone(),
            path: match st.observed.len() {
                0 => st.path.render_string(&vars),
                n => st.observed[(pick % n as u64) as usize].clone(),
            },
            headers,
            body: bytes::Bytes::from(body),
            keep: st.keep.max(if self.cookies {
                Keep::Cookies
            } else {
                Keep::Nothing
            }),
        })
    }

    /// Why step `i`'s request, rendered for `client` with `values` and `row`, cannot
    /// go on the wire (`unfit`): the field, and what put the byte there — the
    /// placeholder of its path that holds it, its own text, or the script when only a
    /// script can have.
    pub fn unsent(
        &self,
        i: usize,
        client: u64,
        values: &[Option<String>],
        row: Option<&[String]>,
        unfit: crate::load::proto::Unfit,
    ) -> Unsent {
        let by = match unfit.bad {
            None => "script".to_string(),
            Some(bad) => {
                let mut own = None;
                let vars = self.vars(client, 0, values, row, &mut own);
                self.culprit(self.steps[i].path.culprit(&vars, bad))
            }
        };
        Unsent {
            field: unfit.field.to_string(),
            by,
        }
    }

    /// What `client`'s `seq`-th request is rendered with: `row`, or (`None`) row
    /// `client` mod rows of the data file, held in `own`.
    pub(crate) fn vars<'a>(
        &'a self,
        client: u64,
        seq: u64,
        values: &'a [Option<String>],
        row: Option<&'a [String]>,
        own: &'a mut Option<Row>,
    ) -> Vars<'a> {
        let row = self.row_of(client, row, own);
        Vars {
            client,
            seq,
            row,
            random: &self.random,
            values,
        }
    }

    /// `client`'s data row: `row`, or (`None`) row `client` mod rows, held in `own` (a
    /// large file's is read from disk: look it up once for all a call renders).
    fn row_of<'a>(
        &'a self,
        client: u64,
        row: Option<&'a [String]>,
        own: &'a mut Option<Row>,
    ) -> Option<&'a [String]> {
        match row {
            Some(r) => Some(r),
            None => {
                *own = self.data.as_ref().and_then(|d| d.row(client));
                own.as_deref()
            }
        }
    }

    /// `--var NAME=VALUE`: a `[vars]` value given from outside, as text (not a template).
    pub fn set_default(&mut self, name: &str, value: &str) -> crate::error::Result<()> {
        let declared: Vec<&str> = self
            .defaults
            .iter()
            .map(|(v, _)| self.vars[*v].as_str())
            .collect();
        let Some(at) = declared.iter().position(|n| *n == name) else {
            return Err(crate::Error::usage(match declared.as_slice() {
                [] => format!("--var {name}: the scenario has no [vars] (declare it there with its default: [vars] {name} = \"…\")"),
                d => format!("--var {name}: the scenario's [vars] are {} (declare it there with its default)", d.join(", ")),
            }));
        };
        self.defaults[at].1 = Text::quoted(value);
        Ok(())
    }

    /// Gives `values` what a client's flow starts with: its `[vars]`, rendered for
    /// `client` with its data row. A value over [`MAX_VALUE`] (64 KiB, as an extracted
    /// one) is none: the steps that use it are not sent (`extract`), as no client may
    /// hold a megabyte a variable.
    pub fn start_values(&self, client: u64, values: &mut [Option<String>], row: Option<&[String]>) {
        if self.defaults.is_empty() {
            return;
        }
        let mut own = None;
        let v = self.vars(client, 0, &[], row, &mut own);
        for (var, t) in &self.defaults {
            values[*var] = Some(t.render_string(&v)).filter(|v| v.len() <= MAX_VALUE);
        }
    }

    /// Step `i`'s `set`, rendered in order into `values` (each sees those before it).
    pub fn set_values(
        &self,
        i: usize,
        client: u64,
        seq: u64,
        values: &mut [Option<String>],
        row: Option<&[String]>,
    ) {
        let set = &self.steps[i].set;
        if set.is_empty() {
            return;
        }
        let mut own = None;
        let row = self.row_of(client, row, &mut own);
        for (var, t) in set {
            // From a variable not extracted yet: none, so the step that uses it is
            // counted as missing it, never sent with a hole.
            if t.missing(values).is_some() {
                values[*var] = None;
                continue;
            }
            let v = Vars {
                client,
                seq,
                row,
                random: &self.random,
                values,
            };
            let value = t.render_string(&v);
            values[*var] = Some(value).filter(|v| v.len() <= MAX_VALUE);
        }
    }

    /// A culprit's name: `{{NAME}}`, `{{csv.COLUMN}}`, or `text` (the step's own).
    fn culprit(&self, c: Option<Culprit>) -> String {
        match c {
            Some(Culprit::Var(v)) => format!("{{{{{}}}}}", self.vars[v]),
            Some(Culprit::Csv(c)) => match self.data.as_ref().and_then(|d| d.columns.get(c)) {
                Some(col) => format!("{{{{csv.{col}}}}}"),
                None => "a data file's value".to_string(),
            },
            Some(Culprit::Literal) | None => "text".to_string(),
        }
    }

    /// Whether every step is a `once` step and none loops back: each client runs them
    /// once and is done.
    pub fn once_only(&self) -> bool {
        self.sessions.is_none()
            && self
                .steps
                .iter()
                .all(|s| s.when == When::Once && s.repeat.is_none())
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
    /// closed mix, whose pace is the target's, or no periodic step: `once` steps alone
    /// set no rate (each client's go as fast as the target answers, then it is done).
    pub fn scheduled(&self, d: Duration) -> Option<u64> {
        if self.steps.iter().any(|s| matches!(s.when, When::Weight(_)))
            || !self.steps.iter().any(|s| matches!(s.when, When::Every(_)))
        {
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

#[cfg(test)]
mod tests {
    use std::path::Path;

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

    #[test]
    fn vars_set_and_templated_checks_render_per_client_and_say_where_they_are_wrong() {
        std::env::set_var("STRAINLINE_TEST_REGION", "eu-1");
        let text = r#"clients = 2
[vars]
prefix = "run-{{env.STRAINLINE_TEST_REGION}}"
who = "c{{client}}"

[[step]]
name = "add"
weight = 1
method = "POST"
path = "/add"
set.group = "{{prefix}}-{{who}}-{{seq}}"
body = "name={{group|url}}"
check.listed = { body_contains = "{{group}}", json = { "$.name" = "{{group}}", "$.n" = 1 } }
"#;
        let mut sc = parse(text, Path::new("g.toml")).unwrap();
        assert_eq!(sc.vars, ["prefix", "who", "group"]);
        let mut values = vec![None; 3];
        sc.start_values(1, &mut values, None);
        assert_eq!(values[0].as_deref(), Some("run-eu-1"));
        assert_eq!(values[1].as_deref(), Some("c1"));
        sc.set_values(0, 1, 7, &mut values, None);
        assert_eq!(values[2].as_deref(), Some("run-eu-1-c1-7"));
        let r = sc.request(0, 1, 7, 0, &values, None).unwrap();
        assert_eq!(&r.body[..], b"name=run-eu-1-c1-7");
        // --var gives a [vars] value as text, placeholders and all; another name is refused.
        sc.set_default("prefix", "{{x}} y").unwrap();
        sc.start_values(1, &mut values, None);
        assert_eq!(values[0].as_deref(), Some("{{x}} y"));
        let e = sc.set_default("prefx", "x").unwrap_err().to_string();
        assert_eq!(e, "--var prefx: the scenario's [vars] are prefix, who (declare it there with its default)");
        // Where a placeholder is wrong: in a check, in [vars], an unset variable.
        for (bad, wanted) in [
            (
                text.replace("body_contains = \"{{group}}\"", "body_contains = \"{{grup}}\""),
                "g.toml:13:35: unknown placeholder '{{grup}}'",
            ),
            (
                text.replace("c{{client}}", "c{{group}}"),
                "g.toml:4:9: vars.who: unknown placeholder '{{group}}'",
            ),
            (
                text.replace("TEST_REGION", "TEST_NOWHERE"),
                "g.toml:3:15: vars.prefix: {{env.STRAINLINE_TEST_NOWHERE}}: the environment has no STRAINLINE_TEST_NOWHERE",
            ),
        ] {
            let e = parse(&bad, Path::new("g.toml")).unwrap_err().to_string();
            assert!(e.starts_with(wanted), "{e}");
        }
        // A step's set is made in the order its values read each other, whatever their
        // names; a value that reads itself is refused (it would grow at every send).
        let order = "clients = 1\n[[step]]\nweight = 1\npath = \"/o/{{aa}}\"\nset.zz = \"{{uuid}}\"\nset.aa = \"{{zz}}-{{client}}\"\n";
        let sc = parse(order, Path::new("o.toml")).unwrap();
        let mut values = vec![None; 2];
        sc.set_values(0, 0, 0, &mut values, None);
        assert_eq!(sc.vars, ["aa", "zz"]);
        let (aa, zz) = (values[0].clone().unwrap(), values[1].clone().unwrap());
        assert_eq!(aa, format!("{zz}-0"));
        for (bad, says) in [
            (
                order.replace("{{zz}}-", "{{aa}}-"),
                "o.toml:6:10: step 'step 1': set.aa: its value reads itself",
            ),
            (
                order.replace("{{uuid}}", "{{aa}}"),
                "set.aa, set.zz: their values read each other",
            ),
            (
                order.replace("set.aa", "set.client"),
                "set.client: a variable's name is",
            ),
            (
                "clients = 1\n[vars]\n\"a b\" = \"x\"\n[[step]]\npath = \"/\"\n".to_string(),
                "vars.a b: a variable's name is",
            ),
        ] {
            let e = parse(&bad, Path::new("o.toml")).unwrap_err().to_string();
            assert!(e.contains(says), "{e}");
        }
        // A value over 64 KiB is none: the step that uses it is not sent.
        let big =
            "clients = 1\n[[step]]\nweight = 1\npath = \"/{{b}}\"\nset.b = \"{{random 70000}}\"\n";
        let sc = parse(big, Path::new("b.toml")).unwrap();
        let mut values = vec![None];
        sc.set_values(0, 0, 0, &mut values, None);
        assert_eq!(values[0], None);
        assert_eq!(sc.missing(0, &values), Some("b"));
    }

    #[test]
    fn form_and_json_bodies_are_built_from_fields_each_value_encoded_as_it_renders() {
        let text = r#"clients = 1
[[step]]
name = "login"
once = true
path = "/login"
extract.id = { json = "$.id" }
form = { username = "a&b c", "pass word" = "{{id}}", next = "/x?y={{id|url}}" }

[[step]]
name = "post"
weight = 1
path = "/items"
headers = { Content-Type = "application/vnd.api+json" }
json = { name = "{{id}}", n = 3, ok = true, tags = ["t\"1", "{{client}}"], deep = { v = "line\n{{id}}" } }
"#;
        let sc = parse(text, Path::new("b.toml")).unwrap();
        let values = [Some("x&\"y\n\u{1}".to_string())];
        let login = sc.request(0, 4, 0, 0, &values, None).unwrap();
        assert_eq!(login.method, Method::POST);
        assert_eq!(
            std::str::from_utf8(&login.body).unwrap(),
            // Fields in name order (as TOML reads a table); a value already |url-encoded
            // is not encoded twice.
            "next=%2Fx%3Fy%3Dx%26%22y%0A%01&pass%20word=x%26%22y%0A%01&username=a%26b%20c"
        );
        let ct = |r: &Rendered| {
            r.headers
                .iter()
                .filter(|(k, _)| *k == hyper::header::CONTENT_TYPE)
                .map(|(_, v)| v.to_str().unwrap().to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(ct(&login), ["application/x-www-form-urlencoded"]);
        let post = sc.request(1, 4, 0, 0, &values, None).unwrap();
        let body: serde_json::Value = serde_json::from_slice(&post.body).unwrap();
        assert_eq!(
            body,
            serde_json::json!({"name": "x&\"y\n\u{1}", "n": 3, "ok": true, "tags": ["t\"1", "4"], "deep": {"v": "line\nx&\"y\n\u{1}"}})
        );
        // A Content-Type the step gives is kept, not doubled.
        assert_eq!(ct(&post), ["application/vnd.api+json"]);
        let e = parse(
            &text.replace("form = {", "body = \"x\"\nform = {"),
            Path::new("b.toml"),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("give one of body, form and json, not body and form"),
            "{e}"
        );
        // JSON has no nan; fields' random bytes count together against the largest body.
        for (bad, says) in [
            ("json = { a = nan }", "json: NaN is not a JSON number"),
            (
                "json = { a = \"{{random 40000000}}\", b = [\"{{random 40000000}}\"] }",
                "json: its fields' random bytes would reach 80000000",
            ),
            (
                "form = { a = \"{{random 40000000}}\", b = \"{{random 40000000}}\" }",
                "form: its fields' random bytes would reach",
            ),
        ] {
            let t =
                format!("clients = 1\n[[step]]\nname = \"p\"\nonce = true\npath = \"/\"\n{bad}\n");
            let e = parse(&t, Path::new("b.toml")).unwrap_err().to_string();
            assert!(e.contains(says), "{e}");
        }
        assert_eq!(sc.built_body(), Some(("login", "form")));
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
        for name in ["Transfer-Encoding", "content-length"] {
            let framing = format!(
                "clients = 1\n[[step]]\nonce = true\npath = \"/x\"\nheaders = {{ {name} = \"5\" }}\n"
            );
            let e = parse(&framing, Path::new("iot.toml"))
                .unwrap_err()
                .to_string();
            assert!(e.contains("strainline frames the body itself"), "{e}");
        }
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
        let client = crate::load::client::Client::Command(Vec::new());
        for n in 0..4000 {
            let (r, step) = requests.at(n, &client);
            let r = r.unwrap();
            assert_eq!(step, Some(if r.method == Method::POST { 1 } else { 0 }));
            if r.method == Method::POST {
                assert_eq!(r.path, format!("/push/{n}"));
                posts += 1;
            } else {
                assert!(r.path.starts_with("/items/"), "{}", r.path);
            }
            // The same position draws the same request on every thread and agent.
            assert_eq!(requests.at(n, &client).0.unwrap().path, r.path);
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
