//! The flow file a recording makes: its steps with their extractions, placeholders,
//! proposed checks and think times, the person's typed values named, and what was
//! found said twice — as a table for the terminal and as comments in the file.

use std::fmt::Write as _;

use super::correlate::{json_path, Found, Key, Place, Rule};
use super::read::Exchange;
use super::steps::{Body, LeftOut, Step};
use crate::workload::scenario::quote;

/// How the flow repeats: its whole recording, again and again, until `-z`/`-n` end it.
const REPEAT: u32 = 1_000_000;

/// The steps with their placeholders in: each use of a correlated or generated value
/// replaced by `{{NAME}}` (or the generator) in the place it was sent. What the person
/// typed stays as typed (the flow's comments name it, to feed or make unique).
pub fn apply(steps: &mut [Step], found: &Found) {
    let put = |steps: &mut [Step], step: usize, place: &Place, value: &str, with: &str| {
        let s = &mut steps[step];
        let swap = |t: &mut String| {
            if t == value {
                *t = with.to_string();
            } else {
                *t = t.replace(value, with);
            }
        };
        match place {
            Place::Segment(i) => swap(&mut s.segments[*i]),
            Place::Query(i) => swap(&mut s.query[*i].1),
            Place::Form(i) => {
                if let Body::Form(f) = &mut s.body {
                    swap(&mut f[*i].1);
                }
            }
            Place::Json(path) => {
                if let Body::Json(j) = &mut s.body {
                    if let Some(leaf) = pointer(j, path) {
                        // A number or a boolean is sent bare: marked, unquoted when written.
                        let bare = if leaf.is_string() { "" } else { BARE };
                        *leaf = serde_json::Value::String(format!("{bare}{with}"));
                    }
                }
            }
            Place::Header(i) => swap(&mut s.headers[*i].1),
        }
    };
    for c in &found.correlations {
        let with = format!("{{{{{}}}}}", c.var);
        for u in &c.uses {
            put(steps, u.step, &u.place, &c.value, &with);
        }
        // A raw body sends it too, anywhere in its text.
        for s in steps.iter_mut() {
            if let Body::Raw { text, .. } = &mut s.body {
                if c.value.len() >= 8 {
                    *text = text.replace(&c.value, &with);
                }
            }
        }
    }
    for (u, v, gen) in &found.generated {
        put(steps, u.step, &u.place, v, gen);
    }
}

/// Marks a placeholder that stands for a JSON number or boolean (sent without quotes).
const BARE: &str = "\u{1}";

/// A JSON body as text, its bare placeholders unquoted.
fn json_text(j: &serde_json::Value) -> String {
    let text = j.to_string();
    let marked = format!(
        "\"{}",
        serde_json::to_string(BARE)
            .unwrap_or_default()
            .trim_matches('"')
    );
    let mut out = String::with_capacity(text.len());
    let mut rest = text.as_str();
    while let Some(at) = rest.find(&marked) {
        out.push_str(&rest[..at]);
        let after = &rest[at + marked.len()..];
        match after.find("}}\"") {
            Some(end) => {
                out.push_str(&after[..end + 2]);
                rest = &after[end + 3..];
            }
            None => {
                out.push_str(&rest[at..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

fn pointer<'a>(v: &'a mut serde_json::Value, path: &[Key]) -> Option<&'a mut serde_json::Value> {
    path.iter().try_fold(v, |v, k| match k {
        Key::Name(n) => v.get_mut(n.as_str()),
        Key::Index(i) => v.get_mut(*i),
    })
}

/// Percent-encodes what a path segment or a query value cannot carry, leaving
/// `{{…}}` placeholders as they are.
fn encode(s: &str, query: bool) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while !rest.is_empty() {
        if rest.starts_with("{{") {
            if let Some(end) = rest.find("}}") {
                out.push_str(&rest[..end + 2]);
                rest = &rest[end + 2..];
                continue;
            }
        }
        let c = rest.chars().next().unwrap_or(' ');
        let keep = c.is_ascii_alphanumeric()
            || "-._~!$'()*,;:@".contains(c)
            || (query && "/?".contains(c));
        if keep {
            out.push(c);
        } else {
            let mut b = [0u8; 4];
            for byte in c.encode_utf8(&mut b).bytes() {
                let _ = write!(out, "%{byte:02X}");
            }
        }
        rest = &rest[c.len_utf8()..];
    }
    out
}

fn path_of(s: &Step) -> String {
    let mut p = String::new();
    for seg in &s.segments {
        p.push('/');
        p.push_str(&encode(seg, false));
    }
    if p.is_empty() {
        p.push('/');
    }
    if !s.query.is_empty() {
        let q: Vec<String> = s
            .query
            .iter()
            .map(|(k, v)| format!("{}={}", encode(k, true), encode(v, true)))
            .collect();
        p.push('?');
        p.push_str(&q.join("&"));
    }
    p
}

/// Checks proposed from the recorded reply: its status, and an HTML page's title or a
/// JSON object's first key — unless the title holds a value of this user's.
fn check(e: &Exchange, own: &[&str]) -> String {
    let mut parts = vec![format!("status = {}", e.status)];
    if e.response_mime.contains("html") {
        let title = regex::Regex::new(r"(?is)<title[^>]*>\s*(.*?)\s*</title>")
            .ok()
            .and_then(|re| re.captures(&e.response_body).map(|c| c[1].to_string()));
        if let Some(t) = title.filter(|t| {
            !t.is_empty() && t.len() <= 200 && !own.iter().any(|v| !v.is_empty() && t.contains(v))
        }) {
            parts.push(format!("body_contains = {}", quote(&t)));
        }
    } else if e.response_mime.contains("json") {
        if let Ok(serde_json::Value::Object(o)) = serde_json::from_str(&e.response_body) {
            if let Some(k) = o.keys().next() {
                parts.push(format!(
                    "json_exists = [{}]",
                    quote(&json_path(&[Key::Name(k.clone())]))
                ));
            }
        }
    }
    format!("check.recorded = {{ {} }}", parts.join(", "))
}

fn think(ms: f64) -> String {
    let ms = ms.min(30_000.0);
    format!("\"{:.0}ms..{:.0}ms\"", 0.8 * ms, 1.2 * ms)
}

/// What was found, one line each: value, where it was given, where it was sent, rule.
pub fn table(steps: &[Step], found: &Found) -> Vec<String> {
    let mut lines = Vec::new();
    for c in &found.correlations {
        let given: Vec<String> = c
            .sources
            .iter()
            .map(|(j, r)| format!("{} ({})", steps[*j].name, r.describe()))
            .collect();
        let mut used: Vec<&str> = c.uses.iter().map(|u| steps[u.step].name.as_str()).collect();
        used.dedup();
        lines.push(format!(
            "{{{{{}}}}} = {}: given by {}; sent by {}",
            c.var,
            shorten(&c.value),
            given.join(", "),
            used.join(", ")
        ));
    }
    for (u, v, gen) in &found.generated {
        lines.push(format!(
            "{gen} for {} sent by {} (made by the client: no reply gave it)",
            shorten(v),
            steps[u.step].name
        ));
    }
    for (var, v, uses) in &found.typed {
        lines.push(format!(
            "{} typed by the person as {var}, sent as typed by {}: feed it ({{{{csv.{var}}}}}) or make it unique (\"g-{{{{uuid}}}}\")",
            shorten(v),
            steps[uses[0].step].name
        ));
    }
    lines
}

fn shorten(v: &str) -> String {
    let v = crate::units::one_line(v);
    if v.chars().count() > 24 {
        format!("\"{}…\"", v.chars().take(20).collect::<String>())
    } else {
        format!("{v:?}")
    }
}

/// The flow file.
pub fn flow(
    source: &str,
    origin: &str,
    steps: &[Step],
    x: &[Exchange],
    found: &Found,
    left: &LeftOut,
) -> String {
    let mut t = String::new();
    let _ = writeln!(
        t,
        "# A user's flow made by `strainline workload flow {source}`: {} steps to {origin}.\n\
         # Run it: strainline load {origin} --scenario THIS.toml -z 10s --gate 'checks_failed = 0'",
        steps.len()
    );
    if !left.assets.is_empty() || !left.other_hosts.is_empty() {
        let _ = writeln!(
            t,
            "# Left out: {} static assets, {} requests to other hosts (listed by the command).",
            left.assets.len(),
            left.other_hosts.len()
        );
    }
    let lines = table(steps, found);
    if !lines.is_empty() {
        let _ = writeln!(
            t,
            "#\n# Correlated (each value taken from the reply that gave it):"
        );
        for l in &lines {
            let _ = writeln!(t, "#   {l}");
        }
    }
    for l in &found.left {
        let _ = writeln!(t, "#   left: {l}");
    }
    let _ = writeln!(
        t,
        "\n# Users at once, each running the recorded flow with its own values.\nclients = 5"
    );
    let own: Vec<&str> = found
        .correlations
        .iter()
        .map(|c| c.value.as_str())
        .chain(found.typed.iter().map(|t| t.1.as_str()))
        .collect();
    let mut extracts: Vec<Vec<(String, Rule)>> = vec![Vec::new(); steps.len()];
    for c in &found.correlations {
        for (j, r) in &c.sources {
            if !extracts[*j].iter().any(|(v, _)| *v == c.var) {
                extracts[*j].push((c.var.clone(), r.clone()));
            }
        }
    }
    // Pages as comments when the recording had several (a recorder's one tab is one
    // page, titled by its last title: no help).
    let pages: std::collections::BTreeSet<&str> =
        steps.iter().filter_map(|s| s.page.as_deref()).collect();
    let mut page: Option<&str> = None;
    for (i, s) in steps.iter().enumerate() {
        if pages.len() > 1 && s.page.is_some() && s.page.as_deref() != page {
            page = s.page.as_deref();
            let _ = writeln!(
                t,
                "\n# page: {}",
                crate::units::one_line(page.unwrap_or(""))
            );
        }
        let _ = writeln!(t, "\n[[step]]\nname = {}\nonce = true", quote(&s.name));
        let _ = writeln!(
            t,
            "method = {}\npath = {}",
            quote(&s.method),
            quote(&path_of(s))
        );
        if s.follow() {
            let _ = writeln!(t, "follow = true");
        }
        let mut headers = s.headers.clone();
        let typed = |h: &[(String, String)]| {
            h.iter()
                .any(|(n, _)| n.eq_ignore_ascii_case("content-type"))
        };
        match &s.body {
            Body::Raw { mime, .. } if !mime.is_empty() && !typed(&headers) => {
                headers.push(("Content-Type".into(), mime.clone()));
            }
            Body::Json(_) if !typed(&headers) => {
                headers.push(("Content-Type".into(), "application/json".into()));
            }
            Body::Form(_) if !typed(&headers) => {
                headers.push((
                    "Content-Type".into(),
                    "application/x-www-form-urlencoded".into(),
                ));
            }
            _ => {}
        }
        if !headers.is_empty() {
            let h: Vec<String> = headers
                .iter()
                .map(|(n, v)| format!("{} = {}", quote(n), quote(v)))
                .collect();
            let _ = writeln!(t, "headers = {{ {} }}", h.join(", "));
        }
        match &s.body {
            Body::None => {}
            Body::Form(f) => {
                let fields: Vec<String> = f
                    .iter()
                    .map(|(k, v)| format!("{}={}", encode(k, true), encode(v, true)))
                    .collect();
                let _ = writeln!(t, "body = {}", quote(&fields.join("&")));
            }
            Body::Json(j) => {
                let _ = writeln!(t, "body = {}", quote(&json_text(j)));
            }
            Body::Raw { text, .. } => {
                let _ = writeln!(t, "body = {}", quote(text));
            }
        }
        for (var, r) in &extracts[i] {
            let (k, v) = match r {
                Rule::Json(p) => ("json", p),
                Rule::Regex(p) => ("regex", p),
                Rule::Header(h) => ("header", h),
                Rule::Cookie(c) => ("cookie", c),
            };
            let _ = writeln!(t, "extract.{var} = {{ {k} = {} }}", quote(v));
        }
        let _ = writeln!(t, "{}", check(&x[s.reply], &own));
        if let Some(ms) = s.think_ms {
            let _ = writeln!(t, "think = {}", think(ms));
        }
        if i + 1 == steps.len() && steps.len() > 1 {
            let _ = writeln!(
                t,
                "# The whole recording again, until -z or -n ends the run.\nloop = {{ from = {}, times = {REPEAT} }}",
                quote(&steps[0].name)
            );
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_placeholder_is_never_encoded_and_a_value_always_is() {
        assert_eq!(encode("g {{name}}/x", false), "g%20{{name}}%2Fx");
        assert_eq!(encode("/admin/?a", true), "/admin/?a");
        assert_eq!(encode("a&b=c#d", true), "a%26b%3Dc%23d");
        // A placeholder for a number is sent bare; one for a string stays quoted.
        let j = serde_json::json!({
            "n": format!("{BARE}{{{{id}}}}"),
            "s": "{{token}}",
            "t": "x\"y",
            "z": null
        });
        assert_eq!(
            json_text(&j),
            r#"{"n":{{id}},"s":"{{token}}","t":"x\"y","z":null}"#
        );
    }
}
