//! User flows: what a scenario step takes from its reply into its client's variables
//! ([`Extract`]), what it checks of the reply ([`Check`]), what the client does when the
//! step fails ([`OnFailure`]), and each client's cookies ([`Jar`], RFC 6265). The reply
//! is what the protocol kept of it ([`Kept`]) when the step asked for it: its head and
//! at most [`MAX_KEPT`] bytes of its body.

use std::time::{Duration, SystemTime};

use regex::Regex;
use serde_json::Value;

use super::template::{Text, Vars};

/// The most of a reply's body kept for extraction and checks: 1 MiB. A longer body is
/// read and counted to its end; a check or extraction sees its first 1 MiB.
pub const MAX_KEPT: usize = 1 << 20;

/// The most a user's regex (an extraction's, a `body_matches`, an `until`) may compile
/// to: 4 MiB (Unicode `\w{50}` is 2.4 MiB). It runs over at most the kept [`MAX_KEPT`]
/// with the `regex` crate's lazy DFA: measured on a 1 MiB body, the patterns of the docs
/// and `[a-z]{1000}[a-z]{1000}X` (which made a 5 s run take 21 s with regex-lite) take under
/// 10 ms a search; a pattern whose DFA explodes on a hostile body (`(a|b)*a(a|b){20}X`
/// over random a's and b's) falls back to the NFA and takes 1–4 s a search.
pub const MAX_REGEX: usize = 4 << 20;

/// A user's regex, compiled within [`MAX_REGEX`].
pub fn user_regex(pattern: &str) -> Result<Regex, regex::Error> {
    regex::RegexBuilder::new(pattern)
        .size_limit(MAX_REGEX)
        .build()
}

/// What of a reply a step needs kept.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Keep {
    #[default]
    Nothing,
    /// Its `Set-Cookie` fields alone (the client's jar).
    Cookies,
    /// Every header field.
    Head,
    /// Its header fields and its body.
    All,
}

/// What a reply brought, kept for the step's extractions and checks.
#[derive(Debug, Default, Clone)]
pub struct Kept {
    /// What to keep.
    pub want: Keep,
    /// Its header fields, names lower-case, in order (a name may repeat).
    pub headers: Vec<(String, String)>,
    /// Its body's first [`MAX_KEPT`] bytes.
    pub body: Vec<u8>,
    /// The body was longer than [`MAX_KEPT`] (or its protocol's reply too large to
    /// read as text): what is kept is its beginning, and a value not found in it is
    /// counted as `extract.NAME.too_large`, not missing.
    pub cut: bool,
    /// The body as JSON, parsed once for every extraction and check that reads it.
    parsed: std::cell::OnceCell<Option<Value>>,
}

/// The longest value a variable takes from a reply: 64 KiB. A longer one fails its
/// extraction (`extract:NAME`): a server's megabyte token would otherwise be held by
/// every client and sent back in every request.
pub const MAX_VALUE: usize = 64 << 10;

impl Kept {
    /// Keeps what is asked of a reply.
    pub fn new(want: Keep) -> Kept {
        Kept {
            want,
            ..Kept::default()
        }
    }

    /// Keeps a header field, if asked to.
    pub fn take_header(&mut self, name: &str, value: &[u8]) {
        let wanted = match self.want {
            Keep::Nothing => false,
            Keep::Cookies => name.eq_ignore_ascii_case("set-cookie"),
            Keep::Head | Keep::All => true,
        };
        if wanted {
            self.headers.push((
                name.to_ascii_lowercase(),
                String::from_utf8_lossy(value).into_owned(),
            ));
        }
    }

    /// Appends body bytes, if asked to, up to [`MAX_KEPT`] in all.
    pub fn take_body(&mut self, bytes: &[u8]) {
        if self.want != Keep::All {
            return;
        }
        let room = MAX_KEPT.saturating_sub(self.body.len());
        self.cut |= bytes.len() > room;
        self.body.extend_from_slice(&bytes[..bytes.len().min(room)]);
    }

    /// The first value of header `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn json(&self) -> Option<&Value> {
        self.parsed
            .get_or_init(|| serde_json::from_slice(&self.body).ok())
            .as_ref()
    }
}

/// A JSON path, the dotted subset of RFC 9535 that names one value: `$.token`,
/// `$.items[0].id`, `$['a key'].x`, `$.list[-1]`.
#[derive(Debug, Clone, PartialEq)]
pub struct JsonPath {
    text: String,
    segments: Vec<Segment>,
}

#[derive(Debug, Clone, PartialEq)]
enum Segment {
    Key(String),
    Index(i64),
}

impl JsonPath {
    /// Parses `s`, or says what is wrong (byte offset, message).
    pub fn parse(s: &str) -> Result<JsonPath, (usize, String)> {
        let rest = s.strip_prefix('$').ok_or((
            0,
            format!("'{s}' is not a JSON path: it starts with $ (e.g. $.token, $.items[0].id)"),
        ))?;
        let mut segments = Vec::new();
        let b = rest.as_bytes();
        let mut i = 0;
        while i < b.len() {
            let at = i + 1;
            match b[i] {
                b'.' => {
                    let end = rest[i + 1..]
                        .find(['.', '['])
                        .map_or(rest.len(), |e| i + 1 + e);
                    let key = &rest[i + 1..end];
                    if key.is_empty() || key == "*" || key.starts_with('.') {
                        return Err((at, format!("'{s}': a name after '.' (wildcards and '..' are not supported: a path names one value)")));
                    }
                    segments.push(Segment::Key(key.to_string()));
                    i = end;
                }
                b'[' => {
                    let close = rest[i..]
                        .find(']')
                        .map(|c| i + c)
                        .ok_or((at, format!("'{s}': '[' without ']'")))?;
                    let inner = rest[i + 1..close].trim();
                    let quoted = inner
                        .strip_prefix('\'')
                        .and_then(|x| x.strip_suffix('\''))
                        .or_else(|| inner.strip_prefix('"').and_then(|x| x.strip_suffix('"')));
                    match (quoted, inner.parse::<i64>()) {
                        (Some(k), _) => segments.push(Segment::Key(k.to_string())),
                        (None, Ok(n)) => segments.push(Segment::Index(n)),
                        _ => {
                            return Err((at, format!("'{s}': [{inner}] is neither an index nor a quoted name (filters and wildcards are not supported)")))
                        }
                    }
                    i = close + 1;
                }
                _ => return Err((at, format!("'{s}': expected '.' or '[' at byte {at}"))),
            }
        }
        Ok(JsonPath {
            text: s.to_string(),
            segments,
        })
    }

    /// The value it names in `v`.
    pub fn get<'a>(&self, mut v: &'a Value) -> Option<&'a Value> {
        for s in &self.segments {
            v = match (s, v) {
                (Segment::Key(k), Value::Object(m)) => m.get(k)?,
                (Segment::Index(n), Value::Array(a)) => {
                    let i = if *n < 0 { a.len() as i64 + n } else { *n };
                    a.get(usize::try_from(i).ok()?)?
                }
                _ => return None,
            };
        }
        Some(v)
    }
}

impl std::fmt::Display for JsonPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

/// A JSON value as a variable holds it: a string as itself, anything else as JSON.
fn as_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        v => v.to_string(),
    }
}

/// Where a variable's value comes from in a reply.
#[derive(Debug, Clone)]
pub enum Source {
    /// A value of the JSON body.
    Json(JsonPath),
    /// The first capture group of a regex over the body (the whole match without one).
    Regex(Regex),
    /// A header's value.
    Header(String),
    /// A cookie's value, as the client's jar holds it after the reply.
    Cookie(String),
}

impl Source {
    /// The value in `kept` (and the jar), or `None` (not there, or longer than
    /// [`MAX_VALUE`]): the step then fails (`extract`).
    pub fn find(&self, kept: &Kept, jar: &Jar) -> Option<String> {
        self.found(kept, jar).filter(|v| v.len() <= MAX_VALUE)
    }

    fn found(&self, kept: &Kept, jar: &Jar) -> Option<String> {
        match self {
            Source::Json(p) => p.get(kept.json()?).map(as_text),
            Source::Regex(r) => {
                let text = String::from_utf8_lossy(&kept.body);
                let c = r.captures(&text)?;
                Some(c.get(1).or_else(|| c.get(0))?.as_str().to_string())
            }
            Source::Header(h) => kept.header(h).map(str::to_string),
            Source::Cookie(c) => jar.value(c).map(str::to_string),
        }
    }

    /// Whether it reads the body (the protocol keeps it then).
    pub fn needs_body(&self) -> bool {
        matches!(self, Source::Json(_) | Source::Regex(_))
    }
}

/// One variable a step extracts: its index among the scenario's variables.
#[derive(Debug, Clone)]
pub struct Extract {
    pub name: String,
    pub var: usize,
    pub source: Source,
    /// `metric = "NAME"`: the scenario's metric each value found feeds (its index).
    pub metric: Option<usize>,
}

/// A JSON value a check wants: as written, or a string with placeholders, rendered with
/// the client's variables at each reply.
#[derive(Debug, Clone, PartialEq)]
pub enum Want {
    Is(Value),
    Text(Text),
}

impl Want {
    /// Whether `found` is what it wants. A text is compared with a value as an
    /// extraction takes it (a string as itself, a number or `null` as JSON: `{{n}}`
    /// extracted from `7` is `7`); a text whose variable has no value holds nothing.
    fn holds(&self, found: Option<&Value>, v: &Vars) -> bool {
        match (self, found) {
            (Want::Is(want), Some(got)) => got == want,
            (Want::Text(t), Some(got)) => {
                t.missing(v.values).is_none() && as_text(got).as_bytes() == &*t.rendered(v)
            }
            _ => false,
        }
    }
}

/// A named check of a step's reply: every condition given must hold. Its texts are
/// templates, rendered with the client's variables when the reply is judged.
#[derive(Debug, Clone, Default)]
pub struct Check {
    pub name: String,
    /// The reply's status is one of these (instead of the default: below 400).
    pub status: Vec<u16>,
    pub body_contains: Option<Text>,
    pub body_matches: Option<Regex>,
    /// JSON values that must equal these.
    pub json: Vec<(JsonPath, Want)>,
    /// JSON values that must be there.
    pub json_exists: Vec<JsonPath>,
    /// Headers that must be there.
    pub headers: Vec<String>,
    /// The reply came within this of its intended time.
    pub latency: Option<Duration>,
    /// Its counters' keys, `check.NAME.passed` and `check.NAME.failed`, made on first
    /// use (not at every reply).
    pub keys: std::sync::OnceLock<[String; 2]>,
}

impl Check {
    /// The counter a reply that passed it (or failed it) adds to.
    pub fn key(&self, passed: bool) -> &str {
        let keys = self.keys.get_or_init(|| {
            [
                format!("check.{}.passed", self.name),
                format!("check.{}.failed", self.name),
            ]
        });
        &keys[usize::from(!passed)]
    }

    /// Whether the reply passes it, its texts rendered with `v`.
    pub fn passes(&self, status: u16, kept: &Kept, latency: Duration, v: &Vars) -> bool {
        if !self.status.is_empty() && !self.status.contains(&status) {
            return false;
        }
        if self.latency.is_some_and(|l| latency > l) {
            return false;
        }
        if !self.headers.iter().all(|h| kept.header(h).is_some()) {
            return false;
        }
        let text = String::from_utf8_lossy(&kept.body);
        if self
            .body_contains
            .as_ref()
            // A text whose variable has no value checks nothing it could pass (every
            // body contains the empty text): it fails.
            .is_some_and(|c| {
                c.missing(v.values).is_some()
                    || !text.contains(String::from_utf8_lossy(&c.rendered(v)).as_ref())
            })
        {
            return false;
        }
        if self
            .body_matches
            .as_ref()
            .is_some_and(|r| !r.is_match(&text))
        {
            return false;
        }
        if self.json.is_empty() && self.json_exists.is_empty() {
            return true;
        }
        let Some(json) = kept.json() else {
            return false;
        };
        self.json.iter().all(|(p, want)| want.holds(p.get(json), v))
            && self.json_exists.iter().all(|p| p.get(json).is_some())
    }

    /// Whether a text of it has a placeholder: only then does judging a reply need the
    /// client's variables (and its data row, read from disk for a large file).
    pub fn templated(&self) -> bool {
        self.body_contains
            .as_ref()
            .is_some_and(|t| t.constant().is_none())
            || self.json.iter().any(|(_, w)| matches!(w, Want::Text(_)))
    }

    pub fn needs_body(&self) -> bool {
        self.body_contains.is_some()
            || self.body_matches.is_some()
            || !self.json.is_empty()
            || !self.json_exists.is_empty()
    }
}

/// What a client does when one of its steps fails (an error, a failing status, a
/// failed check or extraction).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum OnFailure {
    /// Goes on with its next step (the default).
    Continue,
    /// Sends the step again, up to `times` more, `backoff` apart (doubling).
    Retry { times: u32, backoff: Duration },
    /// Starts its flow again from its first `once` step (a device that re-registers).
    Restart,
    /// Stops: the client does nothing more in this run.
    Stop,
}

/// One cookie as RFC 6265 §5.3 stores it.
#[derive(Debug, Clone)]
struct Cookie {
    name: String,
    value: String,
    /// The host it was set by (host-only) or the domain it names.
    domain: String,
    host_only: bool,
    path: String,
    expires: Option<SystemTime>,
    secure: bool,
}

/// A virtual client's cookies: set by `Set-Cookie`, sent back in `Cookie` to the hosts
/// and paths they belong to, until they expire (RFC 6265: domain and path matching,
/// `Max-Age` before `Expires`, `Secure` only over TLS).
#[derive(Debug, Clone, Default)]
pub struct Jar {
    cookies: Vec<Cookie>,
}

/// The most cookies one client keeps — RFC 6265 §6.1's minimum per domain, and a client
/// talks to one target; the oldest go first.
pub const MAX_COOKIES: usize = 50;
/// The longest cookie a client keeps, name and value (§6.1's minimum a browser
/// supports); a longer one is ignored, so that a server cannot make each client hold
/// more than 200 KiB of cookies.
pub const MAX_COOKIE: usize = 4096;

impl Jar {
    /// Stores what a `Set-Cookie` header of a reply from `host` to `request_path` says.
    pub fn store(&mut self, host: &str, request_path: &str, set_cookie: &str) {
        let mut parts = set_cookie.split(';');
        let Some((name, value)) = parts.next().and_then(|nv| nv.split_once('=')) else {
            return;
        };
        let (name, value) = (name.trim(), value.trim());
        if name.is_empty() || name.len() + value.len() > MAX_COOKIE {
            return;
        }
        let host = host.to_ascii_lowercase();
        let mut c = Cookie {
            name: name.to_string(),
            value: value.to_string(),
            domain: host.clone(),
            host_only: true,
            path: default_path(request_path),
            expires: None,
            secure: false,
        };
        let mut max_age = None;
        for attr in parts {
            let (k, v) = attr.split_once('=').unwrap_or((attr, ""));
            let (k, v) = (k.trim().to_ascii_lowercase(), v.trim());
            match k.as_str() {
                "domain" if !v.is_empty() => {
                    let d = v.trim_start_matches('.').to_ascii_lowercase();
                    if !domain_matches(&host, &d) {
                        return; // a domain the host does not belong to: ignored (§5.3.6)
                    }
                    c.domain = d;
                    c.host_only = false;
                }
                "path" if v.starts_with('/') => c.path = v.to_string(),
                "max-age" => max_age = max_age_expiry(v).or(max_age),
                "expires" => {
                    if let Ok(t) = httpdate::parse_http_date(v) {
                        c.expires = Some(t.min(latest_expiry()));
                    }
                }
                "secure" => c.secure = true,
                _ => {}
            }
        }
        if max_age.is_some() {
            c.expires = max_age;
        }
        self.cookies
            .retain(|o| !(o.name == c.name && o.domain == c.domain && o.path == c.path));
        if c.expires.is_some_and(|t| t <= SystemTime::now()) {
            return; // an expiry in the past deletes the cookie
        }
        if self.cookies.len() >= MAX_COOKIES {
            self.cookies.remove(0);
        }
        self.cookies.push(c);
    }

    /// The `Cookie` header for a request to `host` and `path` (`secure`: over TLS), if
    /// any cookie belongs there; longer paths first (§5.4).
    pub fn header(&self, host: &str, path: &str, secure: bool) -> Option<String> {
        if self.cookies.is_empty() {
            return None;
        }
        let host = match host.bytes().any(|b| b.is_ascii_uppercase()) {
            true => std::borrow::Cow::Owned(host.to_ascii_lowercase()),
            false => std::borrow::Cow::Borrowed(host),
        };
        let now = SystemTime::now();
        let mut fit = self.cookies.iter().filter(|c| {
            (if c.host_only {
                c.domain == *host
            } else {
                domain_matches(&host, &c.domain)
            }) && path_matches(path, &c.path)
                && (secure || !c.secure)
                && c.expires.is_none_or(|t| t > now)
        });
        let first = fit.next()?;
        let mut out = String::new();
        let mut put = |c: &Cookie| {
            if !out.is_empty() {
                out.push_str("; ");
            }
            out.push_str(&c.name);
            out.push('=');
            out.push_str(&c.value);
        };
        match fit.next() {
            // One cookie (the common case): written as it is, nothing sorted.
            None => put(first),
            Some(second) => {
                let mut all: Vec<&Cookie> = [first, second].into_iter().chain(fit).collect();
                all.sort_by_key(|c| std::cmp::Reverse(c.path.len()));
                all.into_iter().for_each(put);
            }
        }
        Some(out)
    }

    /// A cookie's value by name (the most recently set of that name).
    pub fn value(&self, name: &str) -> Option<&str> {
        self.cookies
            .iter()
            .rev()
            .find(|c| c.name == name)
            .map(|c| c.value.as_str())
    }
}

/// The latest expiry a cookie keeps: now + 400 days, as RFC 6265bis §5.5 caps
/// `Max-Age` and `Expires` (Chrome and Firefox do): a server's `Max-Age` of 2⁶³ − 1 or
/// an `Expires` in the year 99999 means "for the whole run", never an overflow.
fn latest_expiry() -> SystemTime {
    SystemTime::now() + Duration::from_secs(400 * 86_400)
}

/// §5.2.2: a `Max-Age` attribute's expiry — a delta of digits with an optional leading
/// '-' (else the attribute is ignored); zero or negative expires the cookie now; any
/// larger delta, however many digits, is capped at [`latest_expiry`].
fn max_age_expiry(v: &str) -> Option<SystemTime> {
    let digits = v.strip_prefix('-').unwrap_or(v);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if v.starts_with('-') || digits.bytes().all(|b| b == b'0') {
        return Some(SystemTime::UNIX_EPOCH);
    }
    let cap = latest_expiry();
    Some(match digits.parse::<u64>() {
        Ok(s) => SystemTime::now()
            .checked_add(Duration::from_secs(s))
            .map_or(cap, |t| t.min(cap)),
        Err(_) => cap, // more digits than a u64 holds
    })
}

/// §5.1.3: `host` is `domain` or a subdomain of it (never an IP address's suffix).
fn domain_matches(host: &str, domain: &str) -> bool {
    host == domain
        || (host.ends_with(domain)
            && host[..host.len() - domain.len()].ends_with('.')
            && host.parse::<std::net::IpAddr>().is_err())
}

/// §5.1.4: the default path of a request's path (up to, not including, its last '/').
fn default_path(request_path: &str) -> String {
    let p = request_path.split(['?', '#']).next().unwrap_or("");
    match p.rfind('/') {
        Some(0) | None => "/".to_string(),
        Some(i) => p[..i].to_string(),
    }
}

/// §5.1.4: a request path matches a cookie path.
fn path_matches(request_path: &str, cookie_path: &str) -> bool {
    let p = request_path.split(['?', '#']).next().unwrap_or("/");
    p == cookie_path
        || (p.starts_with(cookie_path)
            && (cookie_path.ends_with('/') || p[cookie_path.len()..].starts_with('/')))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept(body: &str, headers: &[(&str, &str)]) -> Kept {
        Kept {
            want: Keep::All,
            headers: headers
                .iter()
                .map(|(k, v)| (k.to_ascii_lowercase(), v.to_string()))
                .collect(),
            body: body.as_bytes().to_vec(),
            ..Kept::default()
        }
    }

    #[test]
    fn a_json_path_names_one_value_as_rfc_9535_s_examples_do() {
        // RFC 9535 §1.5's store, trimmed.
        let v: Value = serde_json::from_str(
            r#"{"store":{"book":[{"author":"Nigel Rees","price":8.95},{"author":"Evelyn Waugh","price":12.99}],"bicycle":{"color":"red"}},"a key":1}"#,
        )
        .unwrap();
        let get = |p: &str| JsonPath::parse(p).unwrap().get(&v).cloned();
        assert_eq!(get("$.store.bicycle.color"), Some(Value::from("red")));
        assert_eq!(
            get("$.store.book[0].author"),
            Some(Value::from("Nigel Rees"))
        );
        assert_eq!(get("$.store.book[-1].price"), Some(Value::from(12.99)));
        assert_eq!(get("$['a key']"), Some(Value::from(1)));
        assert_eq!(get("$.store.book[2]"), None);
        assert_eq!(get("$.store.pen"), None);
        assert!(JsonPath::parse("store.book").is_err());
        assert!(JsonPath::parse("$.store.*").is_err());
        assert!(JsonPath::parse("$..author").is_err());
        assert!(JsonPath::parse("$.book[?(@.price<10)]").is_err());
    }

    #[test]
    fn sources_find_their_value_or_none() {
        let k = kept(
            r#"<input name="csrfmiddlewaretoken" value="abc123"> {"x":1}"#,
            &[("Location", "/admin/")],
        );
        let jar = Jar::default();
        let re =
            Source::Regex(Regex::new(r#"name="csrfmiddlewaretoken" value="([^"]+)""#).unwrap());
        assert_eq!(re.find(&k, &jar).as_deref(), Some("abc123"));
        assert_eq!(
            Source::Header("location".into()).find(&k, &jar).as_deref(),
            Some("/admin/")
        );
        assert_eq!(Source::Header("x-none".into()).find(&k, &jar), None);
        let long = kept(
            &format!("{{\"token\":\"{}\"}}", "t".repeat(MAX_VALUE + 1)),
            &[],
        );
        let token = Source::Json(JsonPath::parse("$.token").unwrap());
        assert_eq!(
            token.find(&long, &jar),
            None,
            "a value over 64 KiB is not taken"
        );
        let j = kept(r#"{"token":"t-1","id":42,"ok":true}"#, &[]);
        let json = |p: &str| Source::Json(JsonPath::parse(p).unwrap()).find(&j, &jar);
        assert_eq!(json("$.token").as_deref(), Some("t-1"));
        assert_eq!(json("$.id").as_deref(), Some("42"));
        assert_eq!(json("$.missing"), None);
        assert_eq!(
            Source::Json(JsonPath::parse("$.x").unwrap()).find(&k, &jar),
            None,
            "not JSON"
        );
    }

    #[test]
    fn a_check_holds_only_when_every_condition_does() {
        let k = kept(r#"{"status":"error","id":7}"#, &[("Set-Cookie", "a=b")]);
        let ms = Duration::from_millis;
        let pool = crate::load::template::RandomPool::new(1);
        let values = [Some("error".to_string()), Some("7".to_string())];
        let v = Vars {
            client: 3,
            seq: 0,
            row: None,
            random: &pool,
            values: &values,
        };
        let names = ["state".to_string(), "id".to_string()];
        let text = |s: &str| Text::parse_with(s, &[], &names).unwrap();
        let mut c = Check {
            name: "ok".into(),
            json: vec![(
                JsonPath::parse("$.status").unwrap(),
                Want::Is(Value::from("ok")),
            )],
            ..Check::default()
        };
        assert!(
            !c.passes(200, &k, ms(5), &v),
            "a 200 carrying status error fails"
        );
        c.json = vec![(
            JsonPath::parse("$.status").unwrap(),
            Want::Is(Value::from("error")),
        )];
        assert!(c.passes(200, &k, ms(5), &v));
        c.json_exists = vec![JsonPath::parse("$.id").unwrap()];
        c.headers = vec!["set-cookie".into()];
        assert!(c.passes(200, &k, ms(5), &v));
        c.status = vec![201];
        assert!(!c.passes(200, &k, ms(5), &v));
        c.status = vec![200, 201];
        c.latency = Some(ms(10));
        assert!(c.passes(200, &k, ms(10), &v) && !c.passes(200, &k, ms(11), &v));
        // Texts with placeholders are the client's values, rendered at the reply.
        c.json = vec![(
            JsonPath::parse("$.status").unwrap(),
            Want::Text(text("{{state}}")),
        )];
        c.body_contains = Some(text(r#""id":{{id}}"#));
        assert!(c.passes(200, &k, ms(1), &v));
        c.body_contains = Some(text(r#""id":{{client}}"#));
        assert!(!c.passes(200, &k, ms(1), &v), "client 3, id 7");
        c.body_contains = None;
        c.json = vec![(
            JsonPath::parse("$.status").unwrap(),
            Want::Text(text("{{id}}")),
        )];
        assert!(!c.passes(200, &k, ms(1), &v));
        c.json = vec![(JsonPath::parse("$.id").unwrap(), Want::Text(text("{{id}}")))];
        assert!(
            c.passes(200, &k, ms(1), &v),
            "the number 7 is {{id}} = 7, as extracted"
        );
        // A variable without a value: the check fails, never passes on an empty text.
        let unset = [Some("error".to_string()), None];
        let u = Vars {
            values: &unset,
            ..v
        };
        assert!(!c.passes(200, &k, ms(1), &u));
        c.json.clear();
        c.body_contains = Some(text("{{id}}"));
        assert!(!c.passes(200, &k, ms(1), &u));
        c.body_contains = Some(text("Site administration"));
        assert!(!c.passes(200, &k, ms(1), &v));
    }

    #[test]
    fn the_jar_follows_rfc_6265_domain_path_expiry_and_secure() {
        let mut jar = Jar::default();
        jar.store("app.example.test", "/login", "sid=1; Path=/; HttpOnly");
        jar.store("app.example.test", "/admin/x", "adm=2");
        jar.store("app.example.test", "/", "wide=3; Domain=.example.test");
        jar.store("app.example.test", "/", "evil=4; Domain=other.test");
        jar.store("app.example.test", "/", "sec=5; Secure");
        jar.store("app.example.test", "/", "gone=6; Max-Age=0");
        jar.store(
            "app.example.test",
            "/",
            "old=7; Expires=Wed, 21 Oct 2015 07:28:00 GMT",
        );
        jar.store(
            "app.example.test",
            "/",
            "later=8; Max-Age=3600; Expires=Wed, 21 Oct 2015 07:28:00 GMT",
        );
        assert_eq!(
            jar.header("app.example.test", "/admin/x/y", false)
                .as_deref(),
            Some("adm=2; sid=1; wide=3; later=8"),
            "longest path first; the default path of /admin/x is /admin; Max-Age wins over Expires"
        );
        assert_eq!(
            jar.header("app.example.test", "/adminx", false).as_deref(),
            Some("sid=1; wide=3; later=8")
        );
        assert_eq!(
            jar.header("www.example.test", "/", false).as_deref(),
            Some("wide=3"),
            "host-only stays home"
        );
        assert!(jar
            .header("app.example.test", "/", true)
            .unwrap()
            .contains("sec=5"));
        assert_eq!(jar.header("other.test", "/", false), None);
        jar.store("app.example.test", "/", "sid=9; Path=/");
        assert_eq!(
            jar.value("sid"),
            Some("9"),
            "a cookie of the same name, domain and path is replaced"
        );
        jar.store("app.example.test", "/", "sid=; Max-Age=0; Path=/");
        assert_eq!(
            jar.value("sid"),
            None,
            "and deleted by an expiry in the past"
        );
        let mut big = Jar::default();
        big.store("h", "/", &format!("huge={}", "x".repeat(MAX_COOKIE)));
        for k in 0..MAX_COOKIES + 10 {
            big.store("h", "/", &format!("c{k}=1"));
        }
        assert_eq!(big.value("huge"), None, "a cookie over 4 KiB is ignored");
        assert_eq!(big.cookies.len(), MAX_COOKIES);
        assert_eq!(big.value("c0"), None, "the oldest went first");
        assert_eq!(big.value(&format!("c{}", MAX_COOKIES + 9)), Some("1"));
        let mut ip = Jar::default();
        ip.store("127.0.0.1", "/", "a=1; Domain=0.0.1");
        assert_eq!(
            ip.header("127.0.0.1", "/", false),
            None,
            "no domain cookies for an IP suffix"
        );
    }

    #[test]
    fn a_server_s_expiry_never_overflows_and_is_capped() {
        let later = SystemTime::now() + Duration::from_secs(399 * 86_400);
        let cap = SystemTime::now() + Duration::from_secs(401 * 86_400);
        for (set, kept) in [
            ("a=1; Max-Age=9223372036854775807", true),
            ("a=1; Max-Age=99999999999999999999999999999", true),
            ("a=1; Max-Age=-9223372036854775808", false),
            ("a=1; Max-Age=-1", false),
            ("a=1; Max-Age=+5", true), // not a delta: ignored, a session cookie
            ("a=1; Expires=Fri, 31 Dec 99999 23:59:59 GMT", true),
            ("a=1; Expires=Thu, 01 Jan 1970 00:00:00 GMT", false),
        ] {
            let mut jar = Jar::default();
            jar.store("h", "/", set);
            assert_eq!(jar.value("a").is_some(), kept, "{set}");
            if let Some(t) = jar.cookies.first().and_then(|c| c.expires) {
                assert!(t < cap, "{set}: capped at 400 days");
                if set.contains("922") || set.contains("9999") {
                    assert!(t > later, "{set}: kept for the run");
                }
            }
        }
    }

    /// A server's bytes are not trusted: mutated `Set-Cookie` fields (the corpus:
    /// tests/fixtures/fuzz/set-cookie.txt) and mutated replies read by every source and
    /// check (replies.txt) never panic.
    #[test]
    fn mutated_cookies_and_replies_never_panic() {
        let cookies: Vec<&str> = include_str!("../../tests/fixtures/fuzz/set-cookie.txt")
            .lines()
            .collect();
        let replies: Vec<&str> = include_str!("../../tests/fixtures/fuzz/replies.txt")
            .lines()
            .collect();
        let sources = [
            Source::Json(JsonPath::parse("$.items[1].id").unwrap()),
            Source::Json(JsonPath::parse("$.deep.a.b[-1]").unwrap()),
            Source::Json(JsonPath::parse("$[4]['5']").unwrap()),
            Source::Regex(user_regex(r#"value="([^"]*)""#).unwrap()),
            Source::Regex(user_regex(r"\d+").unwrap()),
            Source::Header("set-cookie".into()),
            Source::Cookie("sid".into()),
        ];
        let check = Check {
            name: "c".into(),
            body_contains: Some(Text::parse("abc", &[]).unwrap()),
            body_matches: Some(user_regex("[a-z]+[0-9]").unwrap()),
            json: vec![(
                JsonPath::parse("$.token").unwrap(),
                Want::Is(Value::from("abc")),
            )],
            json_exists: vec![JsonPath::parse("$.n").unwrap()],
            headers: vec!["location".into()],
            ..Check::default()
        };
        let mut rng = crate::rng::Rng::new(50);
        let mut mutated = |seed: &str| {
            let mut b = seed.as_bytes().to_vec();
            for _ in 0..1 + rng.index(4) {
                let at = rng.index(b.len() + 1);
                let which = rng.index(3);
                rng.mutate_bytes(&mut b, at, which);
            }
            String::from_utf8_lossy(&b).into_owned()
        };
        let pool = crate::load::template::RandomPool::new(1);
        let v = Vars {
            client: 0,
            seq: 0,
            row: None,
            random: &pool,
            values: &[],
        };
        let mut jar = Jar::default();
        for k in 0..4000 {
            let set = mutated(cookies[k % cookies.len()]);
            jar.store("app.example.test", "/a/b", &set);
            let _ = jar.header("app.example.test", "/a/b/c", k % 2 == 0);
            let body = mutated(replies[k % replies.len()]);
            let kept = kept(&body, &[("Set-Cookie", &set), ("Location", "/x")]);
            for s in &sources {
                let _ = s.find(&kept, &jar);
            }
            let _ = check.passes(200, &kept, Duration::from_millis(1), &v);
        }
        assert!(jar.cookies.len() <= MAX_COOKIES);
    }
}
