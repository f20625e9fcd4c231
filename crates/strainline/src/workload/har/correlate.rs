//! Finding the correlations of a recorded flow by themselves: every value a reply gave
//! (a JSON field, a hidden input, a header, a cookie, a token in the page) that a later
//! request sent back (a path segment, a query or form field, a JSON field, a header)
//! becomes an extraction at each reply that gave it — the narrowest rule that takes
//! exactly that value from the recorded reply — and a placeholder wherever it was sent.
//! Values no reply gave are the client's own (a UUID, a timestamp: generators) or the
//! person's (a form or JSON field: sent as typed, and named for the author to feed or
//! make unique). Short values (`1`, `en`) are
//! correlated only from a JSON id field, unambiguous; what was left as recorded is said.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::read::Exchange;
use super::steps::{Body, Step};

/// How a value is taken from a reply, as a flow's `extract.NAME = { … }` says it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Rule {
    Json(String),
    Regex(String),
    Header(String),
    Cookie(String),
}

impl Rule {
    /// For the report: `json $.token`, `regex …`, `header Location`.
    pub fn describe(&self) -> String {
        match self {
            Rule::Json(p) => format!("json {p}"),
            Rule::Regex(r) => format!("regex {r}"),
            Rule::Header(h) => format!("header {h}"),
            Rule::Cookie(c) => format!("cookie {c}"),
        }
    }
}

/// Where in a step's request a value was sent.
#[derive(Debug, Clone, PartialEq)]
pub enum Place {
    Segment(usize),
    Query(usize),
    Form(usize),
    Json(Vec<Key>),
    Header(usize),
}

/// One step of a JSON path.
#[derive(Debug, Clone, PartialEq)]
pub enum Key {
    Name(String),
    Index(usize),
}

/// A value sent back: at which step, where.
#[derive(Debug, Clone, PartialEq)]
pub struct Use {
    pub step: usize,
    pub place: Place,
}

/// A value correlated: its variable, the replies (steps) that gave it with their rules,
/// and where it was sent back.
#[derive(Debug, Clone, PartialEq)]
pub struct Correlation {
    pub var: String,
    pub value: String,
    pub sources: Vec<(usize, Rule)>,
    pub uses: Vec<Use>,
}

/// What correlation found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Found {
    pub correlations: Vec<Correlation>,
    /// Values the client made: (use, the recorded value, the generator).
    pub generated: Vec<(Use, String, &'static str)>,
    /// Values the person typed: variable, recorded value, uses.
    pub typed: Vec<(String, String, Vec<Use>)>,
    /// Values left as recorded, with why.
    pub left: Vec<String>,
}

/// A value long and mixed enough to be a token, not a word of the page.
fn token_like(v: &str) -> bool {
    (v.len() >= 8
        && v.chars().any(|c| c.is_ascii_digit())
        && v.chars().any(|c| c.is_ascii_alphabetic()))
        || (v.len() >= 20 && !v.contains(' '))
}

/// Values below this length are correlated only from an unambiguous JSON id field.
const SHORT: usize = 4;

/// Every value a step's request sends, with its place.
pub fn values(s: &Step) -> Vec<(Place, String)> {
    let mut out = Vec::new();
    for (i, seg) in s.segments.iter().enumerate() {
        if !seg.is_empty() {
            out.push((Place::Segment(i), seg.clone()));
        }
    }
    for (i, (_, v)) in s.query.iter().enumerate() {
        out.push((Place::Query(i), v.clone()));
    }
    match &s.body {
        Body::Form(f) => {
            for (i, (_, v)) in f.iter().enumerate() {
                out.push((Place::Form(i), v.clone()));
            }
        }
        Body::Json(j) => leaves(j, &mut Vec::new(), &mut |path, v| {
            out.push((Place::Json(path.to_vec()), v.to_string()));
        }),
        _ => {}
    }
    for (i, (n, v)) in s.headers.iter().enumerate() {
        let v = if n.eq_ignore_ascii_case("authorization") {
            v.split_once(' ').map_or(v.as_str(), |(_, t)| t.trim())
        } else {
            v.as_str()
        };
        out.push((Place::Header(i), v.to_string()));
    }
    out.retain(|(_, v)| !v.is_empty());
    out
}

/// Calls `f` with each string or number leaf of a JSON value and its path.
fn leaves(v: &serde_json::Value, path: &mut Vec<Key>, f: &mut dyn FnMut(&[Key], &str)) {
    match v {
        serde_json::Value::String(s) => f(path, s),
        serde_json::Value::Number(n) => f(path, &n.to_string()),
        serde_json::Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                path.push(Key::Index(i));
                leaves(x, path, f);
                path.pop();
            }
        }
        serde_json::Value::Object(o) => {
            for (k, x) in o {
                path.push(Key::Name(k.clone()));
                leaves(x, path, f);
                path.pop();
            }
        }
        _ => {}
    }
}

/// A JSON path as a flow writes it: `$.token`, `$.items[0].id`, `$['a key']`; None
/// when a name holds what a path cannot quote (`'`, `[`, `]`, `\\`).
pub fn json_path(path: &[Key]) -> Option<String> {
    let mut s = String::from("$");
    for k in path {
        match k {
            Key::Index(i) => s.push_str(&format!("[{i}]")),
            Key::Name(n)
                if !n.is_empty()
                    && n.chars()
                        .next()
                        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                    && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') =>
            {
                s.push('.');
                s.push_str(n);
            }
            Key::Name(n) if n.contains(['\'', '[', ']', '\\']) => return None,
            Key::Name(n) => s.push_str(&format!("['{n}']")),
        }
    }
    Some(s)
}

fn id_key(path: &[Key]) -> bool {
    matches!(path.last(), Some(Key::Name(k)) if {
        let k = k.to_ascii_lowercase();
        k == "id" || k == "pk" || k.ends_with("_id") || k.ends_with("id") && k.len() <= 8 || k == "uuid"
    })
}

/// A reply read once: its JSON leaves by value (two paths at most: a short value is
/// taken only from one), what its inputs offered (`value="Save"`), and every text a
/// value could be taken as — a leaf, a header's or a cookie's value, an attribute's, a
/// run of token characters — so that a value is looked for only where it stands.
pub struct Reply<'a> {
    pub e: &'a Exchange,
    leaves: HashMap<String, Vec<Vec<Key>>>,
    offered: HashSet<String>,
    texts: HashSet<String>,
}

impl<'a> Reply<'a> {
    pub fn new(e: &'a Exchange) -> Reply<'a> {
        let mut leaves_by: HashMap<String, Vec<Vec<Key>>> = HashMap::new();
        let body = e.response_body.trim_start();
        if body.starts_with('{') || body.starts_with('[') || e.response_mime.contains("json") {
            if let Ok(doc) = serde_json::from_str::<serde_json::Value>(&e.response_body) {
                leaves(&doc, &mut Vec::new(), &mut |path, leaf| {
                    let paths = leaves_by.entry(leaf.to_string()).or_default();
                    if paths.len() < 2 {
                        paths.push(path.to_vec());
                    }
                });
            }
        }
        let mut texts: HashSet<String> = leaves_by.keys().cloned().collect();
        for (n, hv) in &e.response_headers {
            texts.insert(hv.clone());
            if n.eq_ignore_ascii_case("set-cookie") {
                let pair = hv.split(';').next().unwrap_or("");
                if let Some((_, value)) = pair.split_once('=') {
                    texts.insert(value.trim().to_string());
                }
            }
        }
        let mut offered = HashSet::new();
        let b = &e.response_body;
        for (i, _) in b.match_indices("=") {
            let before = b[..i].trim_end();
            let after = b[i + 1..].trim_start();
            let Some(q) = after.chars().next().filter(|c| *c == '"' || *c == '\'') else {
                continue;
            };
            let Some(end) = after[1..].find(q) else {
                continue;
            };
            let text = &after[1..1 + end];
            if before.ends_with("value") {
                offered.insert(text.to_string());
            }
            texts.insert(text.to_string());
        }
        for class in [
            (|c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-') as fn(char) -> bool,
            |c: char| c.is_ascii_alphanumeric() || "+/=_.-".contains(c),
        ] {
            for run in b.split(|c: char| !class(c)) {
                if run.len() >= SHORT {
                    texts.insert(run.to_string());
                    // `tok=AbC+dE/f=`: what follows a `key=` too (base64 keeps its
                    // trailing `=`).
                    for (i, _) in run.match_indices('=') {
                        let rest = &run[i + 1..];
                        if rest.len() >= SHORT && !rest.starts_with('=') {
                            texts.insert(rest.to_string());
                        }
                    }
                }
            }
        }
        Reply {
            e,
            leaves: leaves_by,
            offered,
            texts,
        }
    }
}

/// The rule that takes `v` from reply `r`, if it gave it.
pub fn find(r: &Reply, v: &str) -> Option<Rule> {
    let e = r.e;
    let equal: &[Vec<Key>] = r.leaves.get(v).map_or(&[], |p| p.as_slice());
    if !r.leaves.is_empty() && v.len() < SHORT {
        // `7` is everywhere; one id field holding it is a place.
        if let [only] = equal {
            if id_key(only) {
                if let Some(p) = json_path(only) {
                    return Some(Rule::Json(p));
                }
            }
        }
        return None;
    }
    if let Some(p) = equal.first().and_then(|first| json_path(first)) {
        return Some(Rule::Json(p));
    }
    if v.len() < SHORT {
        return None;
    }
    for (n, hv) in &e.response_headers {
        if n.eq_ignore_ascii_case("set-cookie") {
            let pair = hv.split(';').next().unwrap_or("");
            if let Some((name, value)) = pair.split_once('=') {
                if value.trim() == v && token_like(v) {
                    return Some(Rule::Cookie(name.trim().to_string()));
                }
            }
        } else if hv == v && token_like(v) {
            return Some(Rule::Header(n.clone()));
        }
    }
    let body = &e.response_body;
    let at = body.find(v)?;
    // A hidden input holding it anywhere in the page (its first occurrences may be a
    // link's), else the token where it first stands.
    body.match_indices(v)
        .take(64)
        .find_map(|(i, _)| input_rule(body, v, i))
        .or_else(|| token_like(v).then(|| context_rule(body, v, at)).flatten())
}

/// Whether a page offered `v` as an input's or a button's own value (`value="Save"`):
/// sent back as it stands, not typed by the person.
fn offered(r: &Reply, v: &str) -> bool {
    r.offered.contains(v)
}

/// The first capture of `pattern` over `body`.
fn captures(pattern: &str, body: &str) -> Option<String> {
    let re = regex::Regex::new(pattern).ok()?;
    re.captures(body)?.get(1).map(|m| m.as_str().to_string())
}

/// A value of an `<input>` (a hidden CSRF field): a regex anchored on the input's name,
/// in the attribute order of the page, taking exactly the value at its first match.
fn input_rule(body: &str, v: &str, at: usize) -> Option<Rule> {
    let open = body[..at].rfind('<')?;
    let close = at + body[at..].find('>')?;
    let tag = &body[open..=close];
    if !tag.get(..6)?.eq_ignore_ascii_case("<input") && !tag.starts_with("<meta") {
        return None;
    }
    let attr = regex::Regex::new(r#"(name|content|value)\s*=\s*(["'])([^"']*)["']"#).ok()?;
    let mut name = None;
    let mut value_first = false;
    for c in attr.captures_iter(tag) {
        match (&c[1], &c[3]) {
            ("name", n) => {
                name = Some((n.to_string(), c[2].to_string()));
            }
            ("value" | "content", x) if x == v => value_first = name.is_none(),
            _ => {}
        }
    }
    let (name, q) = name?;
    // A hidden field carries what the server handed out; a visible one's value (a
    // button's "Save") is a label unless it is a token.
    let hidden = regex::Regex::new(r#"(?i)type\s*=\s*["']?hidden"#).ok()?;
    if !hidden.is_match(tag) && !token_like(v) {
        return None;
    }
    let kind = if tag.starts_with("<meta") {
        "content"
    } else {
        "value"
    };
    let n = regex::escape(&name);
    let pattern = if value_first {
        format!(r#"{kind}={q}([^{q}]*){q}[^>]*?name={q}{n}{q}"#)
    } else {
        format!(r#"name={q}{n}{q}[^>]*?{kind}={q}([^{q}]*){q}"#)
    };
    (captures(&pattern, body).as_deref() == Some(v)).then_some(Rule::Regex(pattern))
}

/// A token in a page's text: the shortest text before it (8, 16, 32 characters, on one
/// line) that, with the token's characters after it, takes exactly the token first.
fn context_rule(body: &str, v: &str, at: usize) -> Option<Rule> {
    let class = if v
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        "[A-Za-z0-9_-]+"
    } else if v
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "+/=_-.".contains(c))
    {
        "[A-Za-z0-9+/=_.-]+"
    } else {
        return None;
    };
    for want in [8, 16, 32] {
        let mut start = at.saturating_sub(want);
        while !body.is_char_boundary(start) {
            start += 1;
        }
        let before = &body[start..at];
        let before = before.rsplit('\n').next().unwrap_or(before);
        if before.is_empty() {
            continue;
        }
        let pattern = format!("{}({class})", regex::escape(before));
        if captures(&pattern, body).as_deref() == Some(v) {
            return Some(Rule::Regex(pattern));
        }
    }
    None
}

fn is_uuid(v: &str) -> bool {
    let b = v.as_bytes();
    b.len() == 36
        && b.iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            _ => c.is_ascii_hexdigit(),
        })
}

fn is_epoch_ms(v: &str) -> bool {
    v.len() == 13
        && v.bytes().all(|c| c.is_ascii_digit())
        && v.parse::<u64>()
            .is_ok_and(|n| (1_400_000_000_000..2_500_000_000_000).contains(&n))
}

/// A variable's name from where a value was first sent: its field, its header, or the
/// path segment before it (`things_id`).
fn name_for(s: &Step, place: &Place) -> String {
    let raw = match place {
        Place::Query(i) => s.query[*i].0.clone(),
        Place::Form(i) => match &s.body {
            Body::Form(f) => f[*i].0.clone(),
            _ => "value".into(),
        },
        Place::Json(p) => p
            .iter()
            .rev()
            .find_map(|k| match k {
                Key::Name(n) => Some(n.clone()),
                Key::Index(_) => None,
            })
            .unwrap_or_else(|| "value".into()),
        Place::Header(i) => {
            let n = s.headers[*i].0.to_ascii_lowercase();
            if n == "authorization" {
                "token".into()
            } else {
                n.trim_start_matches("x-").to_string()
            }
        }
        Place::Segment(i) => match i.checked_sub(1).and_then(|k| s.segments.get(k)) {
            Some(prev) if !prev.is_empty() => format!("{}_id", prev.trim_end_matches('s')),
            _ => "id".into(),
        },
    };
    let mut name: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect();
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        name.insert_str(0, "v_");
    }
    name
}

/// Names a flow gives itself (placeholders a variable must not shadow).
const RESERVED: &[&str] = &[
    "client",
    "seq",
    "random",
    "csv",
    "env",
    "uuid",
    "run",
    "session",
    "iteration",
    "now_ms",
    "port",
    "dir",
];

/// Names given so far, and for each name the next suffix to try (`name_2`, `name_3`…),
/// so that thousands of fields of one name are named in linear time.
#[derive(Default)]
struct Names {
    taken: std::collections::BTreeSet<String>,
    next: HashMap<String, usize>,
}

fn unique(name: String, names: &mut Names) -> String {
    let mut n = name.clone();
    let mut k = names.next.get(&name).copied().unwrap_or(2);
    while names.taken.contains(&n) || RESERVED.contains(&n.as_str()) {
        n = format!("{name}_{k}");
        k += 1;
    }
    names.next.insert(name, k);
    names.taken.insert(n.clone());
    n
}

/// Correlates the steps of a flow, each step's reply being `x[step.reply]`.
pub fn correlate(steps: &[Step], x: &[Exchange]) -> Found {
    // Every value sent, in order, grouped by value.
    let mut by_value: BTreeMap<String, Vec<Use>> = BTreeMap::new();
    let mut order: Vec<String> = Vec::new();
    for (i, s) in steps.iter().enumerate() {
        for (place, v) in values(s) {
            let uses = by_value.entry(v.clone()).or_default();
            if uses.is_empty() {
                order.push(v.clone());
            }
            uses.push(Use { step: i, place });
        }
    }
    // Each reply read once, and for each value sent the replies it stands in: a value
    // is looked for only there (a recording of thousands of steps stays linear).
    let replies: Vec<Reply> = steps.iter().map(|s| Reply::new(&x[s.reply])).collect();
    let mut gave: HashMap<&str, Vec<usize>> = HashMap::new();
    for (j, r) in replies.iter().enumerate() {
        for t in &r.texts {
            if let Some((v, _)) = by_value.get_key_value(t) {
                gave.entry(v.as_str()).or_default().push(j);
            }
        }
    }
    let mut found = Found::default();
    let mut taken = Names::default();
    for v in order {
        let uses = by_value.get(&v).cloned().unwrap_or_default();
        let (first, last) = (uses[0].step, uses[uses.len() - 1].step);
        let sources: Vec<(usize, Rule)> = gave
            .get(v.as_str())
            .into_iter()
            .flatten()
            .filter(|j| **j < last)
            .filter_map(|&j| find(&replies[j], &v).map(|r| (j, r)))
            .collect();
        let s = &steps[first];
        if sources.first().is_some_and(|(j, _)| *j < first) {
            let var = unique(name_for(s, &uses[0].place), &mut taken);
            found.correlations.push(Correlation {
                var,
                value: v,
                sources,
                uses,
            });
        } else if is_uuid(&v) && uses.len() == 1 {
            found.generated.push((uses[0].clone(), v, "{{uuid}}"));
        } else if is_epoch_ms(&v) {
            for u in uses {
                found.generated.push((u, v.clone(), "{{now_ms}}"));
            }
        } else if let Some(at) = uses.iter().position(|u| {
            matches!(u.place, Place::Form(_) | Place::Json(_))
                && !(0..u.step).any(|j| offered(&replies[j], &v))
        }) {
            // What the person typed into a form or a JSON field; the same text in a
            // path (`admin` the user, `/admin/` the path) stays as it is there.
            let typed: Vec<Use> = uses
                .iter()
                .filter(|u| matches!(u.place, Place::Form(_) | Place::Json(_)))
                .cloned()
                .collect();
            let var = unique(name_for(&steps[uses[at].step], &uses[at].place), &mut taken);
            found.typed.push((var, v, typed));
        } else if token_like(&v) && !matches!(uses[0].place, Place::Header(_)) {
            found.left.push(format!(
                "{v:?} sent by {} was found in no earlier reply: kept as recorded",
                steps[first].name
            ));
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(mime: &str, body: &str) -> Exchange {
        Exchange {
            method: "GET".into(),
            url: "http://127.0.0.1/".into(),
            request_headers: Vec::new(),
            request_body: None,
            status: 200,
            response_headers: Vec::new(),
            response_mime: mime.into(),
            response_body: body.into(),
            start_ms: 0.0,
            time_ms: 1.0,
            page: None,
        }
    }

    #[test]
    fn a_hidden_input_is_taken_by_its_name_in_the_page_s_attribute_order() {
        let token = "k3Jd9xQ2mN8vB1zY";
        let page = format!(
            r#"<form><input type="hidden" name="other" value="x1y2z3w4v5u6"><input type="hidden" name="csrfmiddlewaretoken" value="{token}"></form>"#
        );
        let r = find(&Reply::new(&reply("text/html", &page)), token).unwrap();
        assert_eq!(
            r,
            Rule::Regex(r#"name="csrfmiddlewaretoken"[^>]*?value="([^"]*)""#.into())
        );
        let swapped = format!(r#"<input value='{token}' name='csrf'>"#);
        let Rule::Regex(p) = find(&Reply::new(&reply("text/html", &swapped)), token).unwrap()
        else {
            panic!()
        };
        assert_eq!(captures(&p, &swapped).as_deref(), Some(token));
    }

    #[test]
    fn json_fields_ids_and_tokens_are_found_where_they_are_unambiguous() {
        let body = r#"{"token": "9944b09199c62bcf9418ad846dd0e4bbdfc6ee4b", "things": [{"id": 7, "n": 7}], "user": {"id": 12}}"#;
        let e = reply("application/json", body);
        assert_eq!(
            find(&Reply::new(&e), "9944b09199c62bcf9418ad846dd0e4bbdfc6ee4b"),
            Some(Rule::Json("$.token".into()))
        );
        // 12 is one id field: found; 7 is in two fields: not a place.
        assert_eq!(
            find(&Reply::new(&e), "12"),
            Some(Rule::Json("$.user.id".into()))
        );
        assert_eq!(find(&Reply::new(&e), "7"), None);
        assert_eq!(
            json_path(&[Key::Name("a key".into()), Key::Index(2)]).as_deref(),
            Some("$['a key'][2]")
        );
        // A name a path cannot quote: no JSON rule (the flow would misread it).
        for name in ["a]b", "[0]", "a'b", "a\\b"] {
            assert_eq!(json_path(&[Key::Name(name.into())]), None, "{name}");
        }
    }

    #[test]
    fn a_token_in_text_is_taken_by_the_shortest_context_that_takes_it_first() {
        let body = "var a = 'zz'; window.session = \"s3ss10nT0k3nABCDEF\"; var b = 1;";
        let Rule::Regex(p) =
            find(&Reply::new(&reply("text/html", body)), "s3ss10nT0k3nABCDEF").unwrap()
        else {
            panic!()
        };
        assert_eq!(captures(&p, body).as_deref(), Some("s3ss10nT0k3nABCDEF"));
        // A word of the page is not a token.
        assert_eq!(
            find(
                &Reply::new(&reply("text/html", "<a href='/admin/'>admin</a>")),
                "admin"
            ),
            None
        );
    }

    #[test]
    fn generators_and_typed_values_are_told_from_correlations() {
        use super::super::steps::Body;
        let step = |name: &str, segments: &[&str], body: Body, reply: usize| Step {
            name: name.into(),
            page: None,
            method: "POST".into(),
            segments: segments.iter().map(|s| s.to_string()).collect(),
            query: Vec::new(),
            headers: Vec::new(),
            body,
            hops: 0,
            request: reply,
            reply,
            think_ms: None,
        };
        let x = vec![
            reply("application/json", r#"{"id": 41}"#),
            reply("application/json", r#"{"ok": true}"#),
        ];
        let steps = vec![
            step(
                "create",
                &["things"],
                Body::Json(
                    serde_json::json!({"name": "lamp", "ref": "0b8c0b1e-3a8f-4a55-9a53-2f7a1bb8f1de", "at": 1764326400000u64}),
                ),
                0,
            ),
            step("get", &["things", "41"], Body::None, 1),
        ];
        let f = correlate(&steps, &x);
        assert_eq!(f.correlations.len(), 1);
        let c = &f.correlations[0];
        assert_eq!((c.var.as_str(), c.value.as_str()), ("thing_id", "41"));
        assert_eq!(c.sources, vec![(0, Rule::Json("$.id".into()))]);
        assert_eq!(
            c.uses,
            vec![Use {
                step: 1,
                place: Place::Segment(1)
            }]
        );
        let gens: Vec<&str> = f.generated.iter().map(|g| g.2).collect();
        assert_eq!(gens, ["{{now_ms}}", "{{uuid}}"]);
        assert_eq!(f.typed.len(), 1);
        assert_eq!(
            (f.typed[0].0.as_str(), f.typed[0].1.as_str()),
            ("name", "lamp")
        );
    }
}
