//! Just enough HTTP/1.1 for a page server: one request per connection (`Connection:
//! close`), its head read within a deadline and a size limit, the query decoded, and
//! one answer with the headers every answer carries (a Content-Security-Policy that
//! lets only our own script run, no caching of pages behind a token).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// The request head, at most.
const MAX_HEAD: usize = 16 * 1024;

/// How long a client has to send its request.
pub const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// A request as the pages see it.
#[derive(Debug, Default, Clone)]
pub struct Request {
    pub method: String,
    /// The path, percent-decoded, without the query.
    pub path: String,
    /// The query's pairs, decoded, in order.
    pub query: Vec<(String, String)>,
    pub accept_json: bool,
    pub bearer: Option<String>,
    pub cookie_token: Option<String>,
}

impl Request {
    /// The first value of a query parameter, when it is not empty.
    pub fn param(&self, name: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(k, v)| k == name && !v.trim().is_empty())
            .map(|(_, v)| v.trim())
    }
}

/// Why a request could not be read.
#[derive(Debug, PartialEq)]
pub enum Bad {
    /// Nothing usable arrived in time (or the client left): answer nothing.
    Gone,
    /// A malformed or oversized head: answer 400.
    Malformed(&'static str),
}

/// Reads one request head from `s`, which must arrive `within` (a page server's
/// [`READ_TIMEOUT`], a metrics scrape's own).
pub fn read(s: &mut TcpStream, within: Duration) -> Result<Request, Bad> {
    let _ = s.set_nonblocking(false);
    let _ = s.set_read_timeout(Some(Duration::from_millis(200)));
    let until = Instant::now() + within;
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(req) = parse(&buf)? {
            return Ok(req);
        }
        if buf.len() > MAX_HEAD {
            return Err(Bad::Malformed("request head too large"));
        }
        if Instant::now() > until {
            return Err(Bad::Gone);
        }
        match s.read(&mut chunk) {
            Ok(0) => return Err(Bad::Gone),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return Err(Bad::Gone),
        }
    }
}

/// A whole request head in `buf`, `None` while it is incomplete.
pub fn parse(buf: &[u8]) -> Result<Option<Request>, Bad> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut req = httparse::Request::new(&mut headers);
    let status = req
        .parse(buf)
        .map_err(|_| Bad::Malformed("not an HTTP/1.x request"))?;
    if status.is_partial() {
        return Ok(None);
    }
    let target = req.path.unwrap_or("/");
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let mut out = Request {
        method: req.method.unwrap_or("GET").to_string(),
        path: decode(path, false),
        query: query
            .split('&')
            .filter(|p| !p.is_empty())
            .map(|p| {
                let (k, v) = p.split_once('=').unwrap_or((p, ""));
                (decode(k, true), decode(v, true))
            })
            .collect(),
        ..Request::default()
    };
    for h in req.headers.iter() {
        let value = String::from_utf8_lossy(h.value);
        if h.name.eq_ignore_ascii_case("accept") {
            out.accept_json = value.contains("application/json") && !value.contains("text/html");
        } else if h.name.eq_ignore_ascii_case("authorization") {
            out.bearer = value.strip_prefix("Bearer ").map(|t| t.trim().to_string());
        } else if h.name.eq_ignore_ascii_case("cookie") {
            out.cookie_token = value
                .split(';')
                .filter_map(|c| c.trim().strip_prefix("strainline_token="))
                .map(String::from)
                .next()
                .or(out.cookie_token.take());
        }
    }
    Ok(Some(out))
}

/// Percent-decoding (and `+` as a space in a query); invalid escapes are kept as they
/// came, invalid UTF-8 replaced.
pub fn decode(s: &str, plus: bool) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' if i + 2 < b.len() => {
                match u8::from_str_radix(std::str::from_utf8(&b[i + 1..i + 3]).unwrap_or("zz"), 16)
                {
                    Ok(v) => {
                        out.push(v);
                        i += 3;
                        continue;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            b'+' if plus => out.push(b' '),
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Percent-encoding for a query value or a path segment: everything but unreserved
/// characters.
pub fn encode(s: &str) -> String {
    let mut out = Vec::with_capacity(s.len());
    crate::units::percent_encode(s.as_bytes(), &mut out);
    // Percent-encoded text is ASCII.
    String::from_utf8(out).unwrap_or_default()
}

/// `path` as a path on this server, for a `Location`: each segment percent-encoded and
/// empty ones dropped, so that it starts with one `/` (never `//host`, which a browser
/// would follow off this server) and holds nothing a header could break on.
pub fn local_path(path: &str) -> String {
    let segments: Vec<String> = path
        .split('/')
        .filter(|seg| !seg.is_empty())
        .map(encode)
        .collect();
    format!("/{}", segments.join("/"))
}

/// A query string of the pairs whose value is set: `?a=1&b=x%20y`, or empty; keys and
/// values re-encoded (a key a client sent cannot put a control byte in a header).
pub fn query(pairs: &[(&str, Option<&str>)]) -> String {
    let set: Vec<String> = pairs
        .iter()
        .filter_map(|(k, v)| v.map(|v| format!("{}={}", encode(k), encode(v))))
        .collect();
    if set.is_empty() {
        String::new()
    } else {
        format!("?{}", set.join("&"))
    }
}

/// An answer.
pub struct Response {
    pub status: u16,
    pub content_type: &'static str,
    pub body: Vec<u8>,
    pub headers: Vec<(&'static str, String)>,
}

impl Response {
    pub fn html(status: u16, body: String) -> Response {
        Response {
            status,
            content_type: "text/html; charset=utf-8",
            body: body.into_bytes(),
            headers: Vec::new(),
        }
    }

    /// A document of `/api/v1/` (`serve::docs`), its objects' keys sorted.
    pub fn json(status: u16, doc: &impl serde::Serialize) -> Response {
        Response {
            status,
            content_type: "application/json",
            body: serde_json::to_value(doc)
                .and_then(|v| serde_json::to_vec_pretty(&v))
                .unwrap_or_default(),
            headers: Vec::new(),
        }
    }

    pub fn redirect(to: String) -> Response {
        Response {
            status: 303,
            content_type: "text/plain; charset=utf-8",
            body: Vec::new(),
            headers: vec![("Location", to)],
        }
    }

    pub fn with(mut self, name: &'static str, value: String) -> Response {
        self.headers.push((name, value));
        self
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        303 => "See Other",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        405 => "Method Not Allowed",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "",
    }
}

/// What every answer carries: only our own scripts may run (the live page's, served,
/// and the timeline's, inline, by its hash), nothing is fetched from elsewhere, no page
/// is framed or cached.
fn policy() -> &'static str {
    static POLICY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    POLICY.get_or_init(|| {
        format!(
            "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; script-src 'self' {}; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
            crate::report::timeline::script_source()
        )
    })
}

/// Writes `r` and closes the exchange; `head_only` for HEAD.
pub fn write(s: &mut TcpStream, r: &Response, head_only: bool) -> std::io::Result<()> {
    let _ = s.set_write_timeout(Some(Duration::from_secs(10)));
    let mut head = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\nCache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\nReferrer-Policy: no-referrer\r\nContent-Security-Policy: {}\r\n",
        r.status,
        reason(r.status),
        r.content_type,
        r.body.len(),
        policy()
    );
    for (k, v) in &r.headers {
        // Header values are ours, but never let one end the head.
        let v: String = v.chars().filter(|c| !matches!(c, '\r' | '\n')).collect();
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes())?;
    if !head_only {
        s.write_all(&r.body)?;
    }
    s.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_rebuilt_from_a_clients_keys_holds_no_control_byte() {
        let q = query(&[("a\r\nX-Injected: 1", Some("v\r\n")), ("ok", Some("1"))]);
        assert!(!q.chars().any(char::is_control), "{q:?}");
        assert!(q.ends_with("&ok=1"), "{q}");
    }

    #[test]
    fn a_request_head_is_parsed_and_its_query_decoded() {
        let r = parse(b"GET /history?suite=a%20b&case=x+y&metric=p%3C99&bad=%zz HTTP/1.1\r\nAccept: application/json\r\nCookie: a=1; strainline_token=s3cret\r\nAuthorization: Bearer tok\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(r.path, "/history");
        assert_eq!(r.param("suite"), Some("a b"));
        assert_eq!(r.param("case"), Some("x y"));
        assert_eq!(r.param("metric"), Some("p<99"));
        assert_eq!(r.param("bad"), Some("%zz"));
        assert!(r.accept_json);
        assert_eq!(r.cookie_token.as_deref(), Some("s3cret"));
        assert_eq!(r.bearer.as_deref(), Some("tok"));
        assert!(parse(b"GET / HTTP/1.1\r\nHost: x\r\n").unwrap().is_none());
        assert!(parse(b"\x16\x03\x01garbage\r\n\r\n").is_err());
    }

    #[test]
    fn encoding_round_trips_hostile_text() {
        for s in [
            "<script>alert(1)</script>",
            "a&b=c",
            "javascript:x",
            "é ü %",
            "%",
        ] {
            assert_eq!(decode(&encode(s), true), s);
        }
        assert_eq!(local_path("/runs/5"), "/runs/5");
        assert_eq!(local_path("//evil.example/x"), "/evil.example/x");
        assert_eq!(local_path("/\\evil.example"), "/%5Cevil.example");
        assert_eq!(
            local_path("/a b\r\nSet-Cookie: x"),
            "/a%20b%0D%0ASet-Cookie%3A%20x"
        );
        assert_eq!(local_path(""), "/");
        assert_eq!(decode("%", true), "%");
        assert_eq!(decode("%4", true), "%4");
        assert_eq!(
            query(&[("a", Some("x y")), ("b", None), ("c", Some("&"))]),
            "?a=x%20y&c=%26"
        );
    }
}
