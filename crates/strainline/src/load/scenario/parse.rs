//! A scenario file checked into a [`Scenario`]: who sends (clients and their stages,
//! sessions, arrivals), its data file and its orders, then each step (`step.rs`).

use std::path::Path;
use std::time::Duration;

use toml::Spanned;

use crate::load::feed::{Data, Format, Order};
use crate::load::template::{RandomPool, Text};
use crate::units::parse_duration;

use super::raw::{RawArrivals, RawScenario, RawSessions, RawStage};
use super::step::{loops, step, Whole};
use super::{Arrive, Scenario, Stage};

/// Reads and checks a scenario file.
pub fn load(path: &Path) -> crate::error::Result<Scenario> {
    load_seeded(path, None)
}

/// [`load`] for a `load` run with its seed: given, it wins over the file's `seed`;
/// drawn, the file's wins over it; none (a suite), the file's or 1.
pub fn load_seeded(
    path: &Path,
    run: Option<crate::load::spec::RunSeed>,
) -> crate::error::Result<Scenario> {
    let text = crate::os::file::read_text(path, "scenario")?;
    parse_seeded(&text, path, run)
}

pub fn parse(text: &str, path: &Path) -> crate::error::Result<Scenario> {
    parse_seeded(text, path, None)
}

fn parse_seeded(
    text: &str,
    path: &Path,
    run: Option<crate::load::spec::RunSeed>,
) -> crate::error::Result<Scenario> {
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
    let seed = match (run, raw.seed) {
        (Some(r), _) if r.given => r.value,
        (_, Some(own)) => own,
        (Some(r), None) => r.value,
        (None, None) => 1,
    };
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
                crate::load::script::Script::load(&file).map_err(|e| placed(&at, f.span().start, e))?,
            ))
        }
    };
    if let (false, super::raw::RawVars::Names(names)) = (script.is_some(), &raw.vars) {
        if let Some(v) = names.first() {
            return Err(at(
                0,
                format!("vars: '{v}' is set by a script's hooks, and there is no script = \"FILE\" (to give a variable a value, write a table: [vars] {v} = \"…\")"),
            ));
        }
    }
    let vars: Vec<String> = {
        let mut v: Vec<String> = raw.vars.names();
        for st in &raw.step {
            let st = st.get_ref();
            for name in st.set.keys().chain(st.extract.keys()) {
                if !v.contains(name) {
                    v.push(name.clone());
                }
            }
        }
        v
    };
    let template = |s: &Spanned<String>| {
        // The span starts at the opening quote; the offset is in the decoded text.
        Text::parse_with(s.get_ref(), &columns, &vars).map_err(|(off, msg)| {
            at(
                crate::located::string_offset(text, s.span().start, off),
                msg,
            )
        })
    };
    let defaults = defaults(&raw, &vars, &columns, arrivals.is_some(), text, &at)?;
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
    loops(&raw, &mut steps, sessions.is_some(), &template, &at)?;
    let groups = super::labels::labels(&raw, &mut steps, &at)?;
    let metrics = super::labels::metrics(&raw, &mut steps, &at)?;
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
        defaults,
        cookies: raw.cookies.unwrap_or(true),
        script,
        groups,
        metrics,
    })
}

/// What a `[vars]` or `set` name may be.
pub(super) const NAME_RULE: &str = "a variable's name is letters, digits, '_' and '-', starting with a letter or '_', and not one of client, seq, uuid, now_ms, random, env, csv, row (the tool's own placeholders)";

/// Whether `name` can be a variable set by `[vars]` or `set` (see [`NAME_RULE`]).
pub(super) fn is_name(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        && !matches!(
            name,
            "client" | "seq" | "uuid" | "now_ms" | "random" | "env" | "csv" | "row"
        )
}

/// `[vars]` values, as templates by variable: rendered as a client's flow starts, from
/// what it has then (its number, its data row, the environment, generators), not from
/// other variables.
fn defaults(
    raw: &RawScenario,
    vars: &[String],
    columns: &[String],
    drawn: bool,
    text: &str,
    at: &dyn Fn(usize, String) -> crate::Error,
) -> crate::error::Result<Vec<(usize, Text)>> {
    let super::raw::RawVars::Values(values) = &raw.vars else {
        return Ok(Vec::new());
    };
    if let (true, Some((_, v))) = (drawn, values.iter().next()) {
        return Err(at(
            v.span().start,
            "vars: with [arrivals] each request is on its own, without a flow to hold variables; write the placeholder itself where it is used".into(),
        ));
    }
    let mut out = Vec::new();
    for (name, v) in values {
        if !is_name(name) {
            return Err(at(v.span().start, format!("vars.{name}: {NAME_RULE}")));
        }
        let t = Text::parse_with(v.get_ref(), columns, &[]).map_err(|(off, msg)| {
            at(
                crate::located::string_offset(text, v.span().start, off),
                if msg.starts_with("unknown placeholder") {
                    format!("vars.{name}: {msg}; a [vars] value is made as a client's flow starts, from its number, data row, the environment or a generator, not from other variables (a step's set.NAME may use them)")
                } else {
                    format!("vars.{name}: {msg}")
                },
            )
        })?;
        let var = vars.iter().position(|n| n == name).expect("declared");
        out.push((var, t));
    }
    Ok(out)
}

/// Who sends, as a scenario says it: clients (or their stages), sessions or arrivals.
pub(super) struct Senders {
    pub(super) clients: u64,
    pub(super) stages: Vec<Stage>,
    pub(super) arrivals: Option<Arrive>,
    pub(super) sessions: Option<Arrive>,
}

/// Checks who sends: `clients` (or `stages`), `[sessions]` or `[arrivals]`, one of them.
pub(super) fn senders(
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
            .map_err(|e| placed(&at, c.span().start, e))? as u64,
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
pub(super) fn session_rate(
    s: &Spanned<RawSessions>,
    at: &dyn Fn(usize, String) -> crate::Error,
) -> crate::error::Result<Arrive> {
    let poisson = s.get_ref().poisson.unwrap_or(false);
    match (&s.get_ref().rate, &s.get_ref().stages) {
        (Some(r), None) => Ok(Arrive::Rate {
            rate: crate::limits::RATE
                .named("[sessions] rate")
                .check(*r.get_ref())
                .map_err(|e| placed(&at, r.span().start, e))?,
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

/// `stages = [{ to = 200, over = "30s" }, { hold = "2m" }, { to = 0, over = "10s" }]`,
/// checked: instead of `clients` and `ramp_up`, for clients only.
pub(super) fn stages(
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
pub(super) fn line(
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
pub(super) fn order(
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

/// The data file a scenario names (beside it: `csv` or `jsonl`, not both), read or
/// indexed and checked.
pub(super) fn data(
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
        .map_err(|e| placed(&at, name.span().start, e))
}

/// Checks `[arrivals]`: `per_second = [...]` or `rate = N` (with `poisson`), times
/// `scale` (counts rounded at random, seeded, so a fraction is kept on average).
pub(super) fn arrivals(
    a: &Spanned<RawArrivals>,
    seed: u64,
    at: &dyn Fn(usize, String) -> crate::Error,
) -> crate::error::Result<Arrive> {
    let start = a.span().start;
    let a = a.get_ref();
    let scale = match &a.scale {
        Some(s) => crate::limits::SCALE
            .check(*s.get_ref())
            .map_err(|e| placed(&at, s.span().start, e))?,
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
                .map_err(|e| placed(&at, r.span().start, e))?;
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

/// `e`, one of ours, placed at its line by `at`: its category and cause kept.
fn placed(
    at: &dyn Fn(usize, String) -> crate::Error,
    offset: usize,
    e: crate::Error,
) -> crate::Error {
    let words = at(offset, e.to_string()).to_string();
    e.reword(|_| words)
}
