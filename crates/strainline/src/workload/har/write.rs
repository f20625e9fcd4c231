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
        let swap = |t: &mut String| *t = replace_whole(t, value, with);
        // A query's or a form's field sends its value percent-encoded (a base64 token's
        // `+` is not a space).
        let url = format!("{}|url}}}}", with.trim_end_matches('}'));
        let swap_url = |t: &mut String| *t = replace_whole(t, value, &url);
        match place {
            Place::Segment(i) => swap(&mut s.segments[*i]),
            Place::Query(i) => swap_url(&mut s.query[*i].1),
            Place::Form(i) => {
                if let Body::Form(f) = &mut s.body {
                    swap_url(&mut f[*i].1);
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
        // A raw body after the reply that gave it sends it too, anywhere in its text.
        let after = c.sources.first().map_or(steps.len(), |(j, _)| j + 1);
        for s in steps.iter_mut().skip(after) {
            if let Body::Raw { text, .. } = &mut s.body {
                if c.value.len() >= 8 {
                    *text = replace_whole(text, &c.value, &with);
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

/// A `{{` the recording sent, as a template sends it as text (never read as a
/// placeholder): `%7B%7B` where [`encode`] writes it (a path, a query, a form).
const BRACES: &str = "{{'{{'}}";

/// Every `{{` the recording holds written as [`BRACES`], before placeholders go in (and
/// before correlation: a value holding one is sent as recorded, never correlated).
pub fn escape(steps: &mut [Step]) {
    fn esc(t: &mut String) {
        if t.contains("{{") {
            *t = t.replace("{{", BRACES);
        }
    }
    fn esc_json(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::String(t) => esc(t),
            serde_json::Value::Array(a) => a.iter_mut().for_each(esc_json),
            serde_json::Value::Object(o) => {
                let fields = std::mem::take(o);
                for (mut k, mut x) in fields {
                    esc(&mut k);
                    esc_json(&mut x);
                    o.insert(k, x);
                }
            }
            _ => {}
        }
    }
    for s in steps {
        s.segments.iter_mut().for_each(esc);
        for (k, v) in s.query.iter_mut().chain(s.headers.iter_mut()) {
            esc(k);
            esc(v);
        }
        match &mut s.body {
            Body::Form(f) => {
                for (k, v) in f.iter_mut() {
                    esc(k);
                    esc(v);
                }
            }
            Body::Json(j) => esc_json(j),
            Body::Raw { text, .. } => esc(text),
            Body::None => {}
        }
    }
}

/// A JSON body as text, its bare placeholders unquoted (a recorded text cannot hold
/// one: its `{{` are [`BRACES`]).
fn json_text(j: &serde_json::Value) -> String {
    let text = j.to_string();
    let marked = format!(
        "\"{}{{{{",
        serde_json::to_string(BARE)
            .unwrap_or_default()
            .trim_matches('"')
    );
    let mut out = String::with_capacity(text.len());
    let mut rest = text.as_str();
    while let Some(at) = rest.find(&marked) {
        let name_at = at + marked.len();
        let after = &rest[name_at..];
        let end = after.find("}}\"").filter(|&e| {
            after[..e]
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_')
        });
        match end {
            Some(e) => {
                out.push_str(&rest[..at]);
                out.push_str("{{");
                out.push_str(&after[..e + 2]);
                rest = &after[e + 3..];
            }
            None => {
                out.push_str(&rest[..name_at]);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// `t` with each whole occurrence of `value` (not inside a longer word: `a` in `Bearer
/// a`, not in `Bearer`) replaced by `with`.
fn replace_whole(t: &str, value: &str, with: &str) -> String {
    if t == value {
        return with.to_string();
    }
    let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    let mut out = String::with_capacity(t.len());
    let mut last = 0;
    for (i, _) in t.match_indices(value) {
        if i < last {
            continue;
        }
        let before = t[..i].chars().next_back();
        let after = t[i + value.len()..].chars().next();
        let edge_in = value
            .chars()
            .next()
            .is_some_and(|c| c.is_alphanumeric() || c == '_');
        let edge_out = value
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '_');
        if (edge_in && word(before)) || (edge_out && word(after)) {
            continue;
        }
        out.push_str(&t[last..i]);
        out.push_str(with);
        last = i + value.len();
    }
    out.push_str(&t[last..]);
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
        if let Some(after) = rest.strip_prefix(BRACES) {
            out.push_str("%7B%7B");
            rest = after;
            continue;
        }
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
        // The title, or its longest part holding no value of this user's ("Welcome,
        // alice" differs per user; "… | Django site admin" only looks like the
        // username `admin`): a failed form's page ("Add group") is told from the page
        // it led to ("Select group to change").
        if let Some(t) = title.filter(|t| !t.is_empty() && t.len() <= 200) {
            let mut parts_of: Vec<&str> = vec![t.as_str()];
            for v in own.iter().filter(|v| !v.is_empty()) {
                parts_of = parts_of.iter().flat_map(|p| p.split(*v)).collect();
            }
            let best = parts_of
                .iter()
                .map(|p| p.trim())
                .max_by_key(|p| p.len())
                .unwrap_or("");
            if best.len() >= 8 {
                parts.push(format!("body_contains = {}", quote(best)));
            }
        }
    } else if e.response_mime.contains("json") {
        if let Ok(serde_json::Value::Object(o)) = serde_json::from_str(&e.response_body) {
            if let Some(p) = o
                .keys()
                .next()
                .and_then(|k| json_path(&[Key::Name(k.clone())]))
            {
                parts.push(format!("json_exists = [{}]", quote(&p)));
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
        let login = ["user", "pass", "login", "email", "mail"]
            .iter()
            .any(|w| var.to_ascii_lowercase().contains(w));
        lines.push(format!(
            "{} typed by the person as {var}, sent as typed by {}: feed it ({{{{csv.{var}}}}}){}",
            shorten(v),
            steps[uses[0].step].name,
            if login {
                ", one account per user"
            } else {
                " or make it unique (\"g-{{uuid}}\")"
            }
        ));
    }
    lines
        .into_iter()
        .map(|l| crate::units::one_line(&l).into_owned())
        .collect()
}

fn shorten(v: &str) -> String {
    let v = v.replace(BRACES, "{{");
    let v = crate::units::one_line(&v);
    if v.chars().count() > 24 {
        format!("\"{}…\"", v.chars().take(20).collect::<String>())
    } else {
        format!("{v:?}")
    }
}

/// How the flow plays: its users, and whether they take the recorded pauses (a
/// verification plays it once, as one user, without them).
#[derive(Debug, Clone, Copy)]
pub struct Play {
    pub clients: u32,
    pub think: bool,
}

/// A step's headers (its body's `Content-Type` among them) and body, as the flow
/// writes them.
fn request(t: &mut String, s: &Step) {
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
}

/// The flow file.
pub fn flow(
    source: &str,
    origin: &str,
    steps: &[Step],
    x: &[Exchange],
    found: &Found,
    left: &LeftOut,
    play: Play,
) -> String {
    let mut t = String::new();
    // Comments hold the recording's text: one line each, whatever it holds.
    let (source, origin) = (
        crate::units::one_line(source),
        crate::units::one_line(origin),
    );
    let _ = writeln!(
        t,
        "# A user's flow made by `strainline workload flow {source}`: {} steps to {origin}.\n\
         # Run it: strainline load {origin} --scenario THIS.toml -z 10s --gate 'checks_failed = 0'",
        steps.len()
    );
    if !left.assets.is_empty() || !left.other_hosts.is_empty() || !left.unsendable.is_empty() {
        let _ = writeln!(
            t,
            "# Left out: {} static assets, {} requests to other hosts, {} not sendable (listed by the command).",
            left.assets.len(),
            left.other_hosts.len(),
            left.unsendable.len()
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
        "\n# Users at once, each running the recorded flow with its own values.\nclients = {}",
        play.clients
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
        request(&mut t, s);
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
        if let Some(ms) = s.think_ms.filter(|_| play.think) {
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
    fn a_page_s_check_keeps_the_part_of_its_title_no_user_value_is_in() {
        let page = |title: &str| Exchange {
            method: "POST".into(),
            url: "http://127.0.0.1/".into(),
            request_headers: Vec::new(),
            request_body: None,
            status: 200,
            response_headers: Vec::new(),
            response_mime: "text/html".into(),
            response_body: format!("<html><title>{title}</title></html>"),
            start_ms: 0.0,
            time_ms: 1.0,
            page: None,
        };
        // "admin" is the typed username: the title stays checked without it.
        assert_eq!(
            check(
                &page("Select group to change | Django site admin"),
                &["admin"]
            ),
            r#"check.recorded = { status = 200, body_contains = "Select group to change | Django site" }"#
        );
        // What every user sees stays; too little left is no check.
        assert_eq!(
            check(&page("Welcome, alice"), &["alice"]),
            r#"check.recorded = { status = 200, body_contains = "Welcome," }"#
        );
        assert_eq!(
            check(&page("alice: home"), &["alice"]),
            "check.recorded = { status = 200 }"
        );
    }

    #[test]
    fn a_value_is_replaced_where_it_stands_whole_not_inside_a_word() {
        assert_eq!(replace_whole("Bearer a", "a", "{{t}}"), "Bearer {{t}}");
        assert_eq!(replace_whole("Bear", "Bear", "{{t}}"), "{{t}}");
        assert_eq!(replace_whole("Bearer x", "Bear", "{{t}}"), "Bearer x");
        assert_eq!(
            replace_whole("id=ab12&x=ab12c&y=+ab12", "ab12", "{{i}}"),
            "id={{i}}&x=ab12c&y=+{{i}}"
        );
        assert_eq!(replace_whole("k3Jd9xQ2", "k3Jd9xQ2", "{{c}}"), "{{c}}");
    }

    #[test]
    fn a_placeholder_is_never_encoded_and_a_value_always_is() {
        assert_eq!(encode("g {{name}}/x", false), "g%20{{name}}%2Fx");
        assert_eq!(encode("/admin/?a", true), "/admin/?a");
        assert_eq!(encode("a&b=c#d", true), "a%26b%3Dc%23d");
        // A placeholder for a number is sent bare; one for a string stays quoted; a
        // recorded text that looks like the mark stays text.
        let j = serde_json::json!({
            "n": format!("{BARE}{{{{id}}}}"),
            "s": "{{token}}",
            "t": "x\"y",
            "u": format!("{BARE}x}}}}"),
            "v": format!("{BARE}{BRACES}client}}}}"),
            "z": null
        });
        assert_eq!(
            json_text(&j),
            r#"{"n":{{id}},"s":"{{token}}","t":"x\"y","u":"\u0001x}}","v":"\u0001{{'{{'}}client}}","z":null}"#
        );
    }
}
