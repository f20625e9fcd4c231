//! One `[[step]]` checked: its request (path or observed paths, method, headers, body),
//! when it runs, its think time, its extractions and checks, its recovery, and the
//! loops that group steps.

use std::sync::Arc;
use std::time::Duration;

use hyper::header::HeaderName;
use hyper::Method;
use toml::Spanned;

use crate::load::flow::{Check, Extract, JsonPath, Keep, OnFailure, Source, Want};
use crate::load::template::{Encode, Text};
use crate::units::parse_duration;

use super::raw::{RawCheck, RawScenario, RawStep};
use super::{Loop, Step, Think, When, UNTIL_TIMES};

/// What checking a step needs to know of the whole scenario.
pub(super) struct Whole<'a> {
    /// Its steps are drawn by weight at `[arrivals]` times: no clients.
    pub(super) drawn: bool,
    /// `[sessions]`: each session runs every step once, in order.
    pub(super) sessions: bool,
    /// It has a `once` step (what `restart` goes back to).
    pub(super) once_anywhere: bool,
    /// The variables its steps extract.
    pub(super) vars: &'a [String],
    /// Its script reads every reply (`response(r)`): every step keeps it.
    pub(super) reads_replies: bool,
}

/// One `[[step]]`, checked: `i` its position. Each key is checked in file order, each
/// with its own error at its position.
pub(super) fn step(
    i: usize,
    spanned: &Spanned<RawStep>,
    whole: &Whole,
    template: &dyn Fn(&Spanned<String>) -> crate::error::Result<Text>,
    duration: &dyn Fn(&Spanned<String>, &str) -> crate::error::Result<Duration>,
    at: &dyn Fn(usize, String) -> crate::Error,
) -> crate::error::Result<Step> {
    let Whole {
        drawn,
        once_anywhere,
        vars,
        ..
    } = *whole;
    let (st, here) = (spanned.get_ref(), spanned.span().start);
    let name = st.name.clone().unwrap_or_else(|| format!("step {}", i + 1));
    let (pos, observed) = paths(st, &name, here, at)?;
    let when = step_when(st, &name, pos, whole, duration, at)?;
    if let (true, Some(t)) = (drawn, &st.think) {
        return Err(at(
            t.span().start,
            "think: with [arrivals] requests come at the arrival times; there is no client to pause".into(),
        ));
    }
    let method = method(st, at)?;
    if drawn {
        unjudged(st, &name, at)?;
    }
    let set = set_order(st, &name, vars, template, at)?;
    let extract = extracts(st, vars, at)?;
    let checks = checks(st, template, at)?;
    let on_failure = on_failure(st, &name, duration, at)?;
    if on_failure == OnFailure::Restart && !once_anywhere {
        return Err(at(
            st.on_failure.as_ref().map_or(here, |o| o.span().start),
            format!("step '{name}': on_failure = \"restart\" starts the client's flow again from its first once step, and this scenario has none: add one (e.g. a login or a registration) or use \"retry\""),
        ));
    }
    let follow = st.follow.unwrap_or(false);
    let keep = keep(&extract, &checks, follow, whole.reads_replies);
    let mut headers = headers(st, template, at)?;
    let (body, content_type) = body(st, &name, template, at)?;
    let built = content_type.map(|_| if st.form.is_some() { "form" } else { "json" });
    if let Some(ct) = content_type {
        if !headers
            .iter()
            .any(|(k, _)| *k == hyper::header::CONTENT_TYPE)
        {
            headers.push((hyper::header::CONTENT_TYPE, Text::literal(ct.as_bytes())));
        }
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
        body,
        built,
        words: None,
        extract,
        set,
        checks,
        on_failure,
        follow,
        keep,
        repeat: None,
        group: None,
        tags: Vec::new(),
    })
}

/// When a step runs: once, in order, with `[sessions]` (which refuse every and
/// weight); by its weight with `[arrivals]` (which refuse once and every); else as its
/// keys say. `pos` is the step's request's position.
fn step_when(
    st: &RawStep,
    name: &str,
    pos: usize,
    whole: &Whole,
    duration: &dyn Fn(&Spanned<String>, &str) -> crate::error::Result<Duration>,
    at: &dyn Fn(usize, String) -> crate::Error,
) -> crate::error::Result<When> {
    let when = if whole.sessions {
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
        when(st, name, pos, whole.drawn, duration, at)?
    };
    if whole.drawn && !matches!(when, When::Weight(_)) {
        return Err(at(
            pos,
            format!("step '{name}': with [arrivals] every step is drawn by its weight; once and every are for clients"),
        ));
    }
    Ok(when)
}

/// A step's HTTP method: as given, else POST with a body and GET without.
fn method(
    st: &RawStep,
    at: &dyn Fn(usize, String) -> crate::Error,
) -> crate::error::Result<Method> {
    Ok(match &st.method {
        Some(m) => Method::from_bytes(m.get_ref().to_uppercase().as_bytes()).map_err(|_| {
            at(
                m.span().start,
                format!("method: '{}' is not an HTTP method", m.get_ref()),
            )
        })?,
        None if st.body.is_some() || st.form.is_some() || st.json.is_some() => Method::POST,
        None => Method::GET,
    })
}

/// A step drawn at `[arrivals]` times is sent by the schedule alone: no client judges
/// its reply, reacts to it or holds its values, so extract, check, on_failure and set
/// are refused (in that order).
fn unjudged(
    st: &RawStep,
    name: &str,
    at: &dyn Fn(usize, String) -> crate::Error,
) -> crate::error::Result<()> {
    if let Some((_, e)) = st.extract.iter().next() {
        return Err(at(
            e.span().start,
            format!("step '{name}': extract: with [arrivals] each request is on its own; a flow that carries values needs clients = N"),
        ));
    }
    let judged = [
        (
            st.check.values().next().map(|c| c.span().start),
            "check",
            "a check's failure",
        ),
        (
            st.on_failure.as_ref().map(|o| o.span().start),
            "on_failure",
            "a failure",
        ),
    ];
    if let Some((p, key, what)) = judged.into_iter().find_map(|(p, k, w)| Some((p?, k, w))) {
        return Err(at(
            p,
            format!("step '{name}': {key}: with [arrivals] each request is on its own and no client is there to act on {what}; checks and recovery need clients = N or [sessions]"),
        ));
    }
    if let Some(v) = st.set.values().next() {
        return Err(at(
            v.span().start,
            format!("step '{name}': set: with [arrivals] each request is on its own, without a flow to hold variables; write the placeholder itself where it is used"),
        ));
    }
    Ok(())
}

/// What of a reply a step keeps: all of it for an extraction or a check that reads
/// the body, or a script that reads every reply; its head for the others and to
/// follow a redirect; else nothing.
fn keep(extract: &[Extract], checks: &[Check], follow: bool, reads_replies: bool) -> Keep {
    let by = |needs_body: bool| if needs_body { Keep::All } else { Keep::Head };
    extract
        .iter()
        .map(|e| by(e.source.needs_body()))
        .chain(checks.iter().map(|c| by(c.needs_body())))
        .chain(follow.then_some(Keep::Head))
        .chain(reads_replies.then_some(Keep::All))
        .max()
        .unwrap_or(Keep::Nothing)
}

/// A step's header fields, checked: names that are header names, none that frames
/// the body (strainline does).
fn headers(
    st: &RawStep,
    template: &dyn Fn(&Spanned<String>) -> crate::error::Result<Text>,
    at: &dyn Fn(usize, String) -> crate::Error,
) -> crate::error::Result<Vec<(HeaderName, Text)>> {
    let mut headers = Vec::new();
    for (k, v) in &st.headers {
        let name = HeaderName::from_bytes(k.as_bytes()).map_err(|_| {
            at(
                v.span().start,
                format!("headers: '{k}' is not a header name"),
            )
        })?;
        if crate::load::request::frames_body(&name) {
            return Err(at(
                v.span().start,
                format!("headers: '{k}': strainline frames the body itself (Content-Length from the body's length); remove it"),
            ));
        }
        headers.push((name, template(v)?));
    }
    Ok(headers)
}

/// The steps' `loop`s, checked and resolved once every step is known: `from` names
/// this step or an earlier one of the same flow sequence (clients' `once` steps, or a
/// session's steps), and two groups are nested or apart, never crossed.
pub(super) fn loops(
    raw: &RawScenario,
    steps: &mut [Step],
    sessions: bool,
    template: &Template,
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
            Some(c) => Some(Arc::new(check_of(
                "until",
                c,
                l.span().start,
                template,
                &|m| wrong(format!("until: {m}")),
            )?)),
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

/// `think = "2s"`, a range drawn uniformly for each pause (`"1s..3s"`), or an
/// exponential pause with a mean (`"exponential 2s"`).
pub(super) fn think(
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
pub(super) fn extracts(
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
                let re = crate::load::flow::user_regex(r)
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
            metric: None,
            name: name.clone(),
            var: vars.iter().position(|v| v == name).expect("collected"),
            source,
        });
    }
    Ok(out)
}

/// A step's body — `body` as written, or built from a `form` or `json` table — and the
/// Content-Type a built one sets when the step gives none.
fn body(
    st: &RawStep,
    name: &str,
    template: &Template,
    at: &dyn Fn(usize, String) -> crate::Error,
) -> crate::error::Result<(Option<Text>, Option<&'static str>)> {
    let given = [
        st.body.as_ref().map(|b| ("body", b.span().start)),
        st.form.as_ref().map(|f| ("form", f.span().start)),
        st.json.as_ref().map(|j| ("json", j.span().start)),
    ];
    let given: Vec<_> = given.into_iter().flatten().collect();
    if let [(a, _), (b, pos), ..] = given.as_slice() {
        return Err(at(
            *pos,
            format!("step '{name}': give one of body, form and json, not {a} and {b}"),
        ));
    }
    if let Some(b) = &st.body {
        return Ok((Some(template(b)?), None));
    }
    if let Some(form) = &st.form {
        let mut parts = Vec::new();
        for (i, (field, value)) in form.get_ref().iter().enumerate() {
            if i > 0 {
                parts.push(Text::literal(b"&"));
            }
            parts.push(Text::literal(field.as_bytes()).encoded(Encode::Form));
            parts.push(Text::literal(b"="));
            parts.push(template(value)?.encoded(Encode::Form));
        }
        let text = capped(Text::concat(parts), "form", name, form.span().start, at)?;
        return Ok((Some(text), Some("application/x-www-form-urlencoded")));
    }
    let Some(json) = &st.json else {
        return Ok((None, None));
    };
    let pos = json.span().start;
    let mut parts = Vec::new();
    json_body(json.get_ref(), &mut parts, &|t: &str| {
        template(&Spanned::new(pos..pos, t.to_string()))
    })
    .map_err(|e| match e {
        JsonError::At(e) => e,
        JsonError::NotJson(what) => at(pos, format!("step '{name}': json: {what}")),
    })?;
    let text = capped(Text::concat(parts), "json", name, pos, at)?;
    Ok((Some(text), Some("application/json")))
}

/// A body built from fields within the largest body's bound: each field's
/// `{{random N}}` is bounded alone, their sum here.
fn capped(
    text: Text,
    what: &str,
    name: &str,
    pos: usize,
    at: &dyn Fn(usize, String) -> crate::Error,
) -> crate::error::Result<Text> {
    let random = text.random_bytes();
    if random > crate::load::template::MAX_RENDERED {
        return Err(at(
            pos,
            format!(
                "step '{name}': {what}: its fields' random bytes would reach {random}, more than {} (64 MiB, the largest body): give smaller {{{{random N}}}}",
                crate::load::template::MAX_RENDERED
            ),
        ));
    }
    Ok(text)
}

/// Why a `json = {…}` table is not a body: a placeholder's error (placed already), or a
/// value JSON has no form for.
enum JsonError {
    At(crate::Error),
    NotJson(String),
}

/// A TOML value as a JSON body's text: its strings templates, escaped as they render.
fn json_body(
    v: &toml::Value,
    out: &mut Vec<Text>,
    template: &dyn Fn(&str) -> crate::error::Result<Text>,
) -> Result<(), JsonError> {
    let lit = |s: &str| Text::literal(s.as_bytes());
    match v {
        toml::Value::String(s) => {
            out.push(lit("\""));
            out.push(template(s).map_err(JsonError::At)?.encoded(Encode::Json));
            out.push(lit("\""));
        }
        toml::Value::Integer(n) => out.push(lit(&n.to_string())),
        toml::Value::Float(f) if !f.is_finite() => {
            return Err(JsonError::NotJson(format!(
            "{f} is not a JSON number (JSON has no nan or inf): give a number, or the text \"{f}\""
        )))
        }
        toml::Value::Float(f) => out.push(lit(&serde_json::Value::from(*f).to_string())),
        toml::Value::Boolean(b) => out.push(lit(if *b { "true" } else { "false" })),
        toml::Value::Datetime(d) => out.push(lit(&format!("\"{d}\""))),
        toml::Value::Array(items) => {
            out.push(lit("["));
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(lit(","));
                }
                json_body(item, out, template)?;
            }
            out.push(lit("]"));
        }
        toml::Value::Table(t) => {
            out.push(lit("{"));
            for (i, (k, item)) in t.iter().enumerate() {
                if i > 0 {
                    out.push(lit(","));
                }
                out.push(lit(&format!("{}:", serde_json::Value::from(k.as_str()))));
                json_body(item, out, template)?;
            }
            out.push(lit("}"));
        }
    }
    Ok(())
}

/// A step's `set`, each value made after those of the step it reads (whatever their
/// names' order); a value that reads itself, or values that read each other, refused:
/// each send would make it from its last (a value doubling at every send).
fn set_order(
    st: &RawStep,
    name: &str,
    vars: &[String],
    template: &Template,
    at: &dyn Fn(usize, String) -> crate::Error,
) -> crate::error::Result<Vec<(usize, Text)>> {
    let mut left = Vec::new();
    for (n, v) in &st.set {
        if !super::parse::is_name(n) {
            return Err(at(
                v.span().start,
                format!("step '{name}': set.{n}: {}", super::parse::NAME_RULE),
            ));
        }
        let var = vars.iter().position(|x| x == n).expect("collected");
        left.push((var, template(v)?, v.span().start));
    }
    let mut out: Vec<(usize, Text)> = Vec::new();
    while !left.is_empty() {
        let ready = left.iter().position(|(_, t, _)| {
            t.reads()
                .iter()
                .all(|r| !left.iter().any(|(v, _, _)| v == r))
        });
        let Some(i) = ready else {
            let pos = left[0].2;
            let names: Vec<String> = left
                .iter()
                .map(|(v, _, _)| format!("set.{}", vars[*v]))
                .collect();
            let what = match names.as_slice() {
                [one] => format!("{one}: its value reads itself"),
                many => format!("{}: their values read each other", many.join(", ")),
            };
            return Err(at(
                pos,
                format!("step '{name}': {what}, so each send would make them from the last (give a [vars] default and set another name from it)"),
            ));
        };
        let (var, t, _) = left.remove(i);
        out.push((var, t));
    }
    Ok(out)
}

/// A step's named checks, checked.
pub(super) fn checks(
    st: &RawStep,
    template: &Template,
    at: &dyn Fn(usize, String) -> crate::Error,
) -> crate::error::Result<Vec<Check>> {
    let mut out = Vec::new();
    for (name, c) in &st.check {
        let (pos, c) = (c.span().start, c.get_ref());
        out.push(check_of(name, c, pos, template, &|m| {
            at(pos, format!("check.{name}: {m}"))
        })?);
    }
    Ok(out)
}

/// How a scenario's strings become templates, an error placed where the placeholder is.
pub(super) type Template<'a> = dyn Fn(&Spanned<String>) -> crate::error::Result<Text> + 'a;

/// A check's (or a loop's `until`) keys, checked; `bad` says where, `pos` is where the
/// check starts (a JSON value's placeholder error is placed there: TOML gives no
/// position inside a value). Its texts are templates, as a request's are.
pub(super) fn check_of(
    name: &str,
    c: &RawCheck,
    pos: usize,
    template: &Template,
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
            body_contains: c.body_contains.as_ref().map(template).transpose()?,
            body_matches: c
                .body_matches
                .as_ref()
                .map(|r| {
                    crate::load::flow::user_regex(r)
                        .map_err(|e| bad(format!("body_matches '{r}': {e}")).because(e))
                })
                .transpose()?,
            json: c
                .json
                .iter()
                .map(|(p, v)| {
                    let want = match v {
                        // A string with a placeholder is rendered at each reply.
                        toml::Value::String(t) if t.contains("{{") => {
                            Want::Text(template(&Spanned::new(pos..pos, t.clone()))?)
                        }
                        v => Want::Is(
                            serde_json::to_value(v).map_err(|e| bad(e.to_string()).because(e))?,
                        ),
                    };
                    Ok((path(p)?, want))
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
                .map(|l| parse_duration(l).map_err(|e| bad(format!("latency: {e}")).because(e)))
                .transpose()?,
            keys: Default::default(),
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
pub(super) fn on_failure(
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

/// A step's path (a template) or paths (observed ones to pick from): where it is in the
/// file, and the observed paths.
pub(super) fn paths(
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
                if !crate::load::replay::sendable(p.get_ref()) {
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
pub(super) fn when(
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
