//! A recording's exchanges as the steps of a user's flow: only what the person did with
//! the application (its origin; static assets and other hosts left out, and listed),
//! a redirect's hops folded into the step that met them (`follow = true`), the think
//! time the recording shows between steps, and each request taken apart into the places
//! a value can be sent back in (path segments, query, form fields, JSON, headers).

use super::read::Exchange;

/// One step of the flow, before correlation fills in its placeholders.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub name: String,
    pub page: Option<String>,
    pub method: String,
    /// Path segments (decoded) and query pairs (decoded), rendered back by the writer.
    pub segments: Vec<String>,
    pub query: Vec<(String, String)>,
    pub headers: Vec<(String, String)>,
    pub body: Body,
    /// Redirect hops folded into this step.
    pub hops: usize,
    /// The exchange of the step's request, and the one whose response is its reply
    /// (the last hop's).
    pub request: usize,
    pub reply: usize,
    /// The recorded pause after this step's reply before the next step, ms.
    pub think_ms: Option<f64>,
}

impl Step {
    pub fn follow(&self) -> bool {
        self.hops > 0
    }
}

/// A request's body, as a flow writes it.
#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    None,
    /// `application/x-www-form-urlencoded`: fields, decoded.
    Form(Vec<(String, String)>),
    Json(serde_json::Value),
    Raw {
        mime: String,
        text: String,
    },
}

/// What was left out of the flow, by reason.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LeftOut {
    pub assets: Vec<String>,
    pub other_hosts: Vec<String>,
    /// Requests no HTTP client can send as recorded (a method that is not a token).
    pub unsendable: Vec<String>,
}

/// Whether the engine can send `method` (the check a flow's `method` meets).
fn sendable_method(method: &str) -> bool {
    hyper::Method::from_bytes(method.to_uppercase().as_bytes()).is_ok()
}

/// Whether the engine can send a header `name: value` (the checks a flow's `headers`
/// meet).
fn sendable_header(name: &str, value: &str) -> bool {
    hyper::header::HeaderName::from_bytes(name.as_bytes()).is_ok()
        && hyper::header::HeaderValue::from_bytes(value.as_bytes()).is_ok()
}

/// The application's origin (`http://127.0.0.1:8000`): `host` when given (a host or
/// host:port), else the origin of the first page the person opened (an HTML reply),
/// else the most frequent.
pub fn origin(x: &[Exchange], host: Option<&str>) -> Option<String> {
    let origins: Vec<String> = x.iter().filter_map(|e| origin_of(&e.url)).collect();
    if let Some(h) = host {
        return origins
            .iter()
            .find(|o| {
                let authority = o.split("://").nth(1).unwrap_or("");
                let host = match authority.strip_prefix('[') {
                    Some(v6) => v6.split(']').next().unwrap_or(""),
                    None => authority.split(':').next().unwrap_or(""),
                };
                let h = h.to_ascii_lowercase();
                authority == h || host == h || host == h.trim_matches(['[', ']'])
            })
            .cloned();
    }
    x.iter()
        .find(|e| e.response_mime.starts_with("text/html"))
        .and_then(|e| origin_of(&e.url))
        .or_else(|| {
            let mut counts: std::collections::BTreeMap<&String, usize> = Default::default();
            for o in &origins {
                *counts.entry(o).or_default() += 1;
            }
            counts
                .into_iter()
                .max_by_key(|(_, n)| *n)
                .map(|(o, _)| o.clone())
        })
}

/// `scheme://authority` of an absolute URL.
pub fn origin_of(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next()?;
    // A user and password in the URL are the recording's secret, not its origin.
    let authority = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    Some(format!(
        "{}://{}",
        scheme.to_ascii_lowercase(),
        authority.to_ascii_lowercase()
    ))
}

/// The path and query of an absolute URL (`/a?b=1`), without its fragment.
fn target_of(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let target = rest.find('/').map_or("/", |i| &rest[i..]);
    target.split('#').next().unwrap_or("/").to_string()
}

const ASSET_EXTENSIONS: &[&str] = &[
    "css", "js", "mjs", "map", "png", "jpg", "jpeg", "gif", "svg", "ico", "webp", "avif", "woff",
    "woff2", "ttf", "otf", "eot", "mp4", "webm", "mp3",
];

/// A static asset: by its path's extension or its reply's media type.
fn is_asset(e: &Exchange) -> bool {
    let path = target_of(&e.url);
    let path = path.split('?').next().unwrap_or("");
    let ext = path.rsplit_once('.').map(|(_, x)| x.to_ascii_lowercase());
    let mime = e.response_mime.to_ascii_lowercase();
    ext.is_some_and(|x| ASSET_EXTENSIONS.contains(&x.as_str()))
        || ["image/", "font/", "text/css", "audio/", "video/"]
            .iter()
            .any(|m| mime.starts_with(m))
        || mime.contains("javascript")
}

/// The exchanges kept (indices), and what was left out.
pub fn keep(x: &[Exchange], origin: &str) -> (Vec<usize>, LeftOut) {
    let mut left = LeftOut::default();
    let mut kept = Vec::new();
    for (i, e) in x.iter().enumerate() {
        if origin_of(&e.url).as_deref() != Some(origin) {
            left.other_hosts.push(format!("{} {}", e.method, e.url));
        } else if is_asset(e) {
            left.assets
                .push(format!("{} {}", e.method, target_of(&e.url)));
        } else if !sendable_method(&e.method) {
            left.unsendable.push(format!(
                "{:?} {} (the method is not an HTTP token)",
                e.method,
                target_of(&e.url)
            ));
        } else if e.status == 0 || e.method.eq_ignore_ascii_case("OPTIONS") {
            // A request the browser aborted or its CORS preflight: not the person's.
            left.assets.push(format!(
                "{} {} (no reply or a preflight)",
                e.method,
                target_of(&e.url)
            ));
        } else {
            kept.push(i);
        }
    }
    (kept, left)
}

/// Where a redirect's `Location` leads, as a path and query (within the origin), or
/// None when it leaves it.
fn location_target(e: &Exchange, origin: &str) -> Option<String> {
    let loc = e.response_header("location")?;
    if loc.starts_with('/') && !loc.starts_with("//") {
        return Some(loc.split('#').next().unwrap_or(loc).to_string());
    }
    (origin_of(loc).as_deref() == Some(origin)).then(|| target_of(loc))
}

/// The kept exchanges as steps: each redirect (3xx whose Location the next kept request
/// fetched with GET) folded into the step that met it.
pub fn steps(x: &[Exchange], kept: &[usize], origin: &str) -> Vec<Step> {
    let mut steps: Vec<Step> = Vec::new();
    let mut i = 0;
    while i < kept.len() {
        let start = i;
        let first = &x[kept[i]];
        let mut reply = kept[i];
        let mut hops = 0;
        while (300..400).contains(&x[reply].status) && i + 1 < kept.len() {
            let next = &x[kept[i + 1]];
            match location_target(&x[reply], origin) {
                Some(t) if next.method == "GET" && target_of(&next.url) == t => {
                    reply = kept[i + 1];
                    hops += 1;
                    i += 1;
                }
                _ => break,
            }
        }
        steps.push(step(first, (kept[start], reply), hops));
        i += 1;
    }
    // Think time: from a step's last reply to the next step's start.
    for k in 0..steps.len().saturating_sub(1) {
        let done = x[steps[k].reply].start_ms + x[steps[k].reply].time_ms;
        let next = x[steps[k + 1].request].start_ms;
        let gap = next - done;
        steps[k].think_ms = (gap >= 50.0).then_some(gap);
    }
    name_steps(&mut steps);
    steps
}

/// Headers a flow keeps: what says what the body is or what is wanted back, who the
/// user is, and the application's own (`X-…`); the browser's others (cookies: the jar;
/// encodings, agents, caches, fetch metadata) are left to the client.
fn kept_header(name: &str, value: &str) -> bool {
    let n = name.to_ascii_lowercase();
    // Accept says what comes back (a page for a browser, JSON for a script: Django REST
    // framework answers the same URL with either); only `*/*` says nothing.
    (n == "accept" && value.trim() != "*/*")
        || matches!(n.as_str(), "authorization" | "content-type")
        || (n.starts_with("x-") && !n.starts_with("x-forwarded") && n != "x-real-ip")
}

fn step(first: &Exchange, (request, reply): (usize, usize), hops: usize) -> Step {
    let target = target_of(&first.url);
    let (path, query) = target.split_once('?').unwrap_or((&target, ""));
    let segments = path.split('/').skip(1).map(|s| decode(s, false)).collect();
    let query = pairs(query);
    let body = match &first.request_body {
        None => Body::None,
        Some((mime, text)) if text.is_empty() && mime.is_empty() => Body::None,
        Some((mime, text)) => {
            let m = mime.to_ascii_lowercase();
            if m.starts_with("application/x-www-form-urlencoded") {
                Body::Form(pairs(text))
            } else if m.contains("json") {
                serde_json::from_str(text).map_or_else(
                    |_| Body::Raw {
                        mime: mime.clone(),
                        text: text.clone(),
                    },
                    Body::Json,
                )
            } else {
                Body::Raw {
                    mime: mime.clone(),
                    text: text.clone(),
                }
            }
        }
    };
    let mut seen = std::collections::HashSet::new();
    let headers = first
        .request_headers
        .iter()
        .filter(|(n, v)| !n.starts_with(':') && kept_header(n, v))
        // What a client can send (a token for a name, no CR, LF or NUL in a value); the
        // first of a name (a flow's headers are a table).
        .filter(|(n, v)| sendable_header(n, v))
        .filter(|(n, _)| seen.insert(n.to_ascii_lowercase()))
        // A form or JSON body sets its own Content-Type.
        .filter(|(n, _)| {
            !(n.eq_ignore_ascii_case("content-type")
                && matches!(body, Body::Form(_) | Body::Json(_)))
        })
        .cloned()
        .collect();
    Step {
        name: String::new(),
        page: first.page.clone(),
        method: first.method.to_ascii_uppercase(),
        segments,
        query,
        headers,
        body,
        hops,
        request,
        reply,
        think_ms: None,
    }
}

/// `a=1&b=x%20y` as decoded pairs (`+` is a space in a query and a form).
pub fn pairs(s: &str) -> Vec<(String, String)> {
    s.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (decode(k, true), decode(v, true))
        })
        .collect()
}

/// Percent-decoding (and `+` as a space where `plus`); a malformed escape is kept.
pub fn decode(s: &str, plus: bool) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' if i + 2 < b.len() => {
                let hex = |c: u8| (c as char).to_digit(16);
                match (hex(b[i + 1]), hex(b[i + 2])) {
                    (Some(h), Some(l)) => {
                        out.push((h * 16 + l) as u8);
                        i += 3;
                        continue;
                    }
                    _ => out.push(b'%'),
                }
            }
            b'+' if plus => out.push(b' '),
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Names from method and path (`get_admin_login`), unique in the flow.
fn name_steps(steps: &mut [Step]) {
    let mut seen = std::collections::BTreeMap::<String, usize>::new();
    for s in steps.iter_mut() {
        let words: Vec<String> = s
            .segments
            .iter()
            .filter(|w| !w.is_empty() && !w.chars().any(|c| c.is_ascii_digit()))
            .map(|w| {
                w.chars()
                    .map(|c| {
                        if c.is_ascii_alphanumeric() {
                            c.to_ascii_lowercase()
                        } else {
                            '_'
                        }
                    })
                    .collect::<String>()
            })
            .take(3)
            .collect();
        let mut base = format!("{}_{}", s.method.to_ascii_lowercase(), words.join("_"));
        if words.is_empty() {
            base.push_str("root");
        }
        let n = seen.entry(base.clone()).or_default();
        *n += 1;
        s.name = if *n == 1 { base } else { format!("{base}_{n}") };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ex(method: &str, url: &str, status: u16, mime: &str, at: f64) -> Exchange {
        Exchange {
            method: method.into(),
            url: url.into(),
            request_headers: vec![
                ("User-Agent".into(), "Chrome".into()),
                ("X-CSRFToken".into(), "t".into()),
                ("Cookie".into(), "a=1".into()),
                ("Accept".into(), "text/html".into()),
            ],
            request_body: None,
            status,
            response_headers: Vec::new(),
            response_mime: mime.into(),
            response_body: String::new(),
            start_ms: at,
            time_ms: 10.0,
            page: None,
        }
    }

    #[test]
    fn assets_and_other_hosts_are_left_out_and_redirects_are_folded() {
        let mut login = ex(
            "POST",
            "http://127.0.0.1:8000/admin/login/?next=/admin/",
            302,
            "text/html",
            1000.0,
        );
        login
            .response_headers
            .push(("Location".into(), "/admin/".into()));
        login.request_body = Some((
            "application/x-www-form-urlencoded".into(),
            "user=a+b&next=%2Fadmin%2F".into(),
        ));
        let x = vec![
            ex(
                "GET",
                "http://127.0.0.1:8000/admin/login/?next=/admin/",
                200,
                "text/html",
                0.0,
            ),
            ex(
                "GET",
                "http://127.0.0.1:8000/static/admin/css/base.css",
                200,
                "text/css",
                20.0,
            ),
            ex(
                "GET",
                "https://fonts.example.com/x.woff2",
                200,
                "font/woff2",
                30.0,
            ),
            login,
            ex(
                "GET",
                "http://127.0.0.1:8000/admin/",
                200,
                "text/html",
                1015.0,
            ),
            ex(
                "GET",
                "http://127.0.0.1:8000/admin/auth/group/7/change/",
                200,
                "text/html",
                3000.0,
            ),
        ];
        let o = origin(&x, None).unwrap();
        assert_eq!(o, "http://127.0.0.1:8000");
        let (kept, left) = keep(&x, &o);
        assert_eq!(kept, vec![0, 3, 4, 5]);
        assert_eq!(left.assets, vec!["GET /static/admin/css/base.css"]);
        assert_eq!(
            left.other_hosts,
            vec!["GET https://fonts.example.com/x.woff2"]
        );
        let s = steps(&x, &kept, &o);
        assert_eq!(s.len(), 3);
        assert_eq!(
            (s[1].method.as_str(), s[1].hops, s[1].reply),
            ("POST", 1, 4)
        );
        assert_eq!(
            s[1].body,
            Body::Form(vec![
                ("user".into(), "a b".into()),
                ("next".into(), "/admin/".into())
            ])
        );
        // The browser's headers are left to the client; the application's, and what
        // the page asked back (a page), are kept.
        assert_eq!(
            s[0].headers,
            vec![
                ("X-CSRFToken".to_string(), "t".to_string()),
                ("Accept".to_string(), "text/html".to_string())
            ]
        );
        assert_eq!(
            s[0].query,
            vec![("next".to_string(), "/admin/".to_string())]
        );
        // The pause the person took after the page came (1000 − 10 ms).
        assert_eq!(s[0].think_ms, Some(990.0));
        assert_eq!(s[1].think_ms, Some(3000.0 - 1025.0));
        let names: Vec<&str> = s.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "get_admin_login",
                "post_admin_login",
                "get_admin_auth_group"
            ]
        );
    }

    #[test]
    fn percent_decoding_keeps_a_malformed_escape() {
        assert_eq!(decode("a%2Fb+c", true), "a/b c");
        assert_eq!(decode("a+c%", false), "a+c%");
        assert_eq!(decode("%zz%4", true), "%zz%4");
    }
}
