//! Reading a HAR 1.2 file (Chromium's and Firefox's DevTools, mitmproxy's `hardump`,
//! Playwright's `record_har_path`, k6 Studio) into the exchanges a flow is made from:
//! each request with its method, URL, headers and body, each response with its status,
//! headers and body (base64 decoded), its time and page. Bounded in memory: a body is
//! kept to its first [`BODY_CAP`] bytes (the rest is dropped as it is read), so a 50 MB
//! recording costs about what its kept text does. A file that is not HAR is refused
//! with the JSON path where it stopped being one.

use std::io::BufReader;
use std::path::Path;

use serde::{Deserialize, Deserializer};

/// A body's bytes kept for correlation: values a server hands out sit in the first
/// megabyte of a page or a reply.
pub const BODY_CAP: usize = 1 << 20;

/// One request and its response, as recorded.
#[derive(Debug, Clone, PartialEq)]
pub struct Exchange {
    pub method: String,
    pub url: String,
    pub request_headers: Vec<(String, String)>,
    /// The request's body and its media type (`application/x-www-form-urlencoded`, …).
    pub request_body: Option<(String, String)>,
    pub status: u16,
    pub response_headers: Vec<(String, String)>,
    pub response_mime: String,
    pub response_body: String,
    /// Milliseconds since the recording's first request, and how long this one took.
    pub start_ms: f64,
    pub time_ms: f64,
    /// The page (its title) the request belonged to.
    pub page: Option<String>,
}

impl Exchange {
    /// A response header's value (the first of that name, case-insensitive).
    pub fn response_header(&self, name: &str) -> Option<&str> {
        header(&self.response_headers, name)
    }
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// Why a file could not be read as HAR: where, and what.
#[derive(Debug, thiserror::Error)]
#[error("{file}: {why}")]
pub struct NotHar {
    pub file: String,
    pub why: String,
}

/// Reads `path` (a regular file: [`crate::os::file::check`]ed by the caller) into its
/// exchanges, in the order they were started.
pub fn read(path: &Path) -> Result<Vec<Exchange>, NotHar> {
    let refuse = |why: String| NotHar {
        file: path.display().to_string(),
        why: format!("not a HAR 1.2 recording: {why}"),
    };
    let file = std::fs::File::open(path).map_err(|e| NotHar {
        file: path.display().to_string(),
        why: format!("cannot read it: {e}"),
    })?;
    let mut reader = BufReader::with_capacity(1 << 16, file);
    // A byte order mark, as some Windows tools save JSON, is not JSON: skipped.
    {
        use std::io::BufRead;
        let head = reader.fill_buf().map_err(|e| refuse(e.to_string()))?;
        if head.starts_with(b"\xEF\xBB\xBF") {
            reader.consume(3);
        }
    }
    let mut de = serde_json::Deserializer::from_reader(reader);
    let har: Har = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let at = e.path().to_string();
        let inner = e.inner().to_string();
        refuse(if inner.contains("struct Har") {
            format!(
                "at {at}: {inner} (a recording is an object {{\"log\": {{\"entries\": [...]}}}})"
            )
        } else {
            format!("at {at}: {inner}")
        })
    })?;
    de.end()
        .map_err(|e| refuse(format!("after the log: {e}")))?;
    Ok(exchanges(har))
}

/// Parses HAR text.
#[cfg(test)]
pub fn parse(text: &str) -> Result<Vec<Exchange>, NotHar> {
    let mut de = serde_json::Deserializer::from_str(text);
    let har: Har = serde_path_to_error::deserialize(&mut de).map_err(|e| NotHar {
        file: "HAR".into(),
        why: format!("not a HAR 1.2 recording: at {}: {}", e.path(), e.inner()),
    })?;
    Ok(exchanges(har))
}

fn exchanges(har: Har) -> Vec<Exchange> {
    let titles: std::collections::HashMap<String, String> =
        har.log.pages.into_iter().map(|p| (p.id, p.title)).collect();
    let starts: Vec<f64> = har.log.entries.iter().map(|e| millis(&e.started)).collect();
    let first = starts.iter().copied().fold(f64::INFINITY, f64::min);
    let mut out: Vec<Exchange> = har
        .log
        .entries
        .into_iter()
        .zip(starts)
        .map(|(e, start)| {
            let body = e.response.content.decoded();
            Exchange {
                method: e.request.method,
                url: e.request.url,
                request_headers: pairs(e.request.headers),
                request_body: e
                    .request
                    .post_data
                    .and_then(|p| p.text.map(|t| (p.mime, t.0))),
                status: e.response.status.clamp(0, 999) as u16,
                response_headers: pairs(e.response.headers),
                response_mime: e.response.content.mime,
                response_body: body,
                start_ms: if start.is_finite() {
                    start - first
                } else {
                    0.0
                },
                time_ms: e.time.max(0.0),
                page: e.pageref.and_then(|p| titles.get(&p).cloned()),
            }
        })
        .collect();
    out.sort_by(|a, b| a.start_ms.total_cmp(&b.start_ms));
    out
}

fn pairs(Few(h): Few<NameValue>) -> Vec<(String, String)> {
    h.into_iter().map(|h| (h.name, h.value)).collect()
}

/// Milliseconds since the epoch of an ISO 8601 time (`startedDateTime`); NaN if not one.
fn millis(at: &str) -> f64 {
    at.parse::<jiff::Timestamp>()
        .map_or(f64::NAN, |t| t.as_millisecond() as f64)
}

#[derive(Deserialize)]
struct Har {
    log: Log,
}

#[derive(Deserialize)]
struct Log {
    #[serde(default)]
    pages: Vec<Page>,
    entries: Vec<Entry>,
}

#[derive(Deserialize)]
struct Page {
    id: String,
    #[serde(default)]
    title: String,
}

#[derive(Deserialize)]
struct Entry {
    #[serde(default)]
    pageref: Option<String>,
    #[serde(rename = "startedDateTime")]
    started: String,
    #[serde(default)]
    time: f64,
    request: Request,
    response: Response,
}

#[derive(Deserialize)]
struct Request {
    method: String,
    url: String,
    #[serde(default)]
    headers: Few<NameValue>,
    #[serde(rename = "postData", default)]
    post_data: Option<PostData>,
}

#[derive(Deserialize)]
struct PostData {
    #[serde(rename = "mimeType", default)]
    mime: String,
    #[serde(default)]
    text: Option<Capped>,
}

#[derive(Deserialize)]
struct Response {
    status: i64,
    #[serde(default)]
    headers: Few<NameValue>,
    #[serde(default)]
    content: Content,
}

#[derive(Deserialize, Default)]
struct Content {
    #[serde(rename = "mimeType", default)]
    mime: String,
    #[serde(default)]
    text: Option<Capped>,
    #[serde(default)]
    encoding: Option<String>,
}

impl Content {
    /// The body as text: base64 decoded when the recorder encoded it (a binary body
    /// decodes to text with replacement characters; nothing is correlated from it).
    fn decoded(&self) -> String {
        let Some(Capped(text)) = &self.text else {
            return String::new();
        };
        if self.encoding.as_deref() == Some("base64") {
            use base64::Engine;
            let clean: String = text.chars().filter(|c| !c.is_whitespace()).collect();
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(clean.as_bytes())
                .unwrap_or_default();
            String::from_utf8_lossy(&bytes[..bytes.len().min(BODY_CAP)]).into_owned()
        } else {
            text.clone()
        }
    }
}

/// The most headers a request or a response keeps: a browser sends a few dozen; the
/// rest of a list are read past, not kept.
pub const HEADERS_CAP: usize = 256;

/// A list kept to its first [`HEADERS_CAP`] items.
struct Few<T>(Vec<T>);

impl<T> Default for Few<T> {
    fn default() -> Self {
        Few(Vec::new())
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Few<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Items<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> serde::de::Visitor<'de> for Items<T> {
            type Value = Few<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a list")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Few<T>, A::Error> {
                let mut kept = Vec::new();
                while kept.len() < HEADERS_CAP {
                    match seq.next_element::<T>()? {
                        Some(x) => kept.push(x),
                        None => return Ok(Few(kept)),
                    }
                }
                while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                Ok(Few(kept))
            }
        }
        d.deserialize_seq(Items(std::marker::PhantomData))
    }
}

#[derive(Deserialize)]
struct NameValue {
    name: String,
    #[serde(default)]
    value: String,
}

/// A string kept to its first [`BODY_CAP`] bytes (base64: 4/3 of them), cut at a
/// character boundary.
struct Capped(String);

impl<'de> Deserialize<'de> for Capped {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut s = String::deserialize(d)?;
        let cap = BODY_CAP / 3 * 4 + 4;
        if s.len() > cap {
            let mut at = cap;
            while !s.is_char_boundary(at) {
                at -= 1;
            }
            s.truncate(at);
            s.shrink_to_fit();
        }
        Ok(Capped(s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_minimal_har_reads_with_its_pages_and_decoded_bodies() {
        let text = r#"{"log": {"version": "1.2", "creator": {"name": "t", "version": "1"},
          "pages": [{"id": "p1", "title": "Log in", "startedDateTime": "2026-11-28T10:00:00.000Z"}],
          "entries": [
            {"pageref": "p1", "startedDateTime": "2026-11-28T10:00:00.500Z", "time": 12.5,
             "request": {"method": "POST", "url": "http://127.0.0.1:8000/login", "headers": [{"name": "Content-Type", "value": "application/x-www-form-urlencoded"}],
                         "postData": {"mimeType": "application/x-www-form-urlencoded", "text": "a=1&b=2"}},
             "response": {"status": 302, "headers": [{"name": "Location", "value": "/home"}], "content": {"mimeType": "text/html", "text": "aGk=", "encoding": "base64"}}},
            {"startedDateTime": "2026-11-28T10:00:00.000Z", "time": 3,
             "request": {"method": "GET", "url": "http://127.0.0.1:8000/login", "headers": []},
             "response": {"status": 200, "headers": [], "content": {"mimeType": "text/html", "text": "<title>Log in</title>"}}}
          ]}}"#;
        let x = parse(text).unwrap();
        assert_eq!(x.len(), 2);
        // In the order they were started, times from the first.
        assert_eq!((x[0].method.as_str(), x[0].start_ms), ("GET", 0.0));
        assert_eq!((x[1].method.as_str(), x[1].start_ms), ("POST", 500.0));
        assert_eq!(x[1].response_body, "hi");
        assert_eq!(x[1].page.as_deref(), Some("Log in"));
        assert_eq!(x[1].response_header("location"), Some("/home"));
        assert_eq!(
            x[1].request_body,
            Some(("application/x-www-form-urlencoded".into(), "a=1&b=2".into()))
        );
    }

    #[test]
    fn a_file_that_is_not_har_is_refused_at_its_json_path() {
        let e = parse(
            r#"{"log": {"entries": [{"startedDateTime": "x", "request": {"method": "GET"}}]}}"#,
        )
        .unwrap_err();
        assert!(e.why.contains("log.entries[0].request"), "{e}");
        let e = parse(r#"{"log": {"entries": [{"startedDateTime": "x", "request": {"method": "GET", "url": "/"}, "response": {"status": 200, "headers": [], "content": {}}}"#)
            .unwrap_err();
        assert!(e.why.contains("EOF"), "{e}");
    }
}
