//! Access-log lines into requests. Reads nginx/Apache Common and Combined Log Format
//! (with or without a trailing response time: `$request_time` in seconds or `%D` in
//! microseconds) and JSON lines with configurable field names; gzip is recognized by its
//! magic bytes. The format is detected from the first lines; a malformed line later is
//! counted and kept as an example, never fatal — production logs have them.

use crate::error::Category;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

/// One logged request.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// When the request arrived, seconds since the Unix epoch: the logged time less the
    /// response time when the log has one (nginx and Apache log when a request ends).
    pub time: f64,
    pub method: String,
    /// The path without its query string.
    pub path: String,
    pub query: Option<String>,
    pub status: u16,
    /// Response body bytes (`-` is 0).
    pub bytes: u64,
    /// Response time, seconds.
    pub duration: Option<f64>,
    /// The client: its address, or the field chosen with `client=`.
    pub client: String,
}

impl Entry {
    /// A request logged at `logged` (when it ended) that took `duration`: it arrived
    /// that much earlier — except that a log time of one-second resolution (`whole`)
    /// is truncated, and taking a sub-second response time from it would move the
    /// request into the previous second, so only whole seconds of it are taken then.
    #[allow(clippy::too_many_arguments)]
    fn new(
        logged: f64,
        whole: bool,
        duration: Option<f64>,
        method: String,
        target: &str,
        status: u16,
        bytes: u64,
        client: String,
    ) -> Entry {
        let taken = duration.unwrap_or(0.0);
        let taken = if whole { taken.round() } else { taken };
        let (path, query) = split_query(target);
        Entry {
            time: logged - taken,
            method,
            path,
            query,
            status,
            bytes,
            duration,
            client,
        }
    }
}

/// The formats tried, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Format {
    /// `host ident user [time] "request" status bytes "referer" "agent" [time-taken]`.
    Combined,
    /// `host ident user [time] "request" status bytes [time-taken]`.
    Common,
    /// One JSON object per line.
    Json(JsonFields),
}

impl Format {
    pub fn name(&self) -> &'static str {
        match self {
            Format::Combined => "Combined Log Format",
            Format::Common => "Common Log Format",
            Format::Json(_) => "JSON lines",
        }
    }
}

/// Which JSON keys hold what. Each has defaults tried in order; `--json-fields
/// time=ts,path=uri` puts the user's key first.
#[derive(Debug, Clone, PartialEq)]
pub struct JsonFields {
    pub time: Vec<String>,
    pub method: Vec<String>,
    pub path: Vec<String>,
    /// A whole request line (`GET /x HTTP/1.1`), when method and path are not apart.
    pub request: Vec<String>,
    pub status: Vec<String>,
    pub bytes: Vec<String>,
    /// Seconds, unless the key ends in `_ms` (milliseconds) or `_us` (microseconds).
    pub duration: Vec<String>,
    pub client: Vec<String>,
}

fn keys(k: &[&str]) -> Vec<String> {
    k.iter().map(|s| s.to_string()).collect()
}

impl Default for JsonFields {
    fn default() -> JsonFields {
        JsonFields {
            time: keys(&[
                "time",
                "timestamp",
                "@timestamp",
                "ts",
                "msec",
                "time_iso8601",
            ]),
            method: keys(&["method", "request_method", "verb"]),
            path: keys(&["path", "uri", "request_uri", "url"]),
            request: keys(&["request"]),
            status: keys(&["status", "status_code", "code"]),
            bytes: keys(&[
                "bytes",
                "body_bytes_sent",
                "bytes_sent",
                "size",
                "response_size",
            ]),
            duration: keys(&[
                "request_time",
                "duration",
                "response_time",
                "elapsed",
                "duration_ms",
                "latency_ms",
                "duration_us",
            ]),
            client: keys(&["client", "remote_addr", "ip", "client_ip", "remote_ip"]),
        }
    }
}

impl JsonFields {
    /// Applies `name=key,...` (names: time, method, path, request, status, bytes,
    /// duration, client).
    pub fn with(mut self, spec: &str) -> crate::error::Result<JsonFields> {
        for pair in spec.split(',').filter(|p| !p.trim().is_empty()) {
            let (name, key) = pair
                .split_once('=')
                .ok_or_else(|| {
                    format!("--json-fields: '{pair}' is not NAME=KEY (e.g. time=ts,path=uri)")
                })
                .usage()?;
            let list = match name.trim() {
                "time" => &mut self.time,
                "method" => &mut self.method,
                "path" => &mut self.path,
                "request" => &mut self.request,
                "status" => &mut self.status,
                "bytes" => &mut self.bytes,
                "duration" => &mut self.duration,
                "client" => &mut self.client,
                other => {
                    return Err(crate::Error::usage(format!(
                        "--json-fields: unknown name '{other}' (known: time, method, path, \
                         request, status, bytes, duration, client)"
                    )))
                }
            };
            list.insert(0, key.trim().to_string());
        }
        Ok(self)
    }
}

/// Parses one line in a format; `Err` says what is wrong with it.
pub fn parse_line(line: &str, format: &Format) -> crate::error::Result<Entry> {
    match format {
        Format::Combined => clf(line, true),
        Format::Common => clf(line, false),
        Format::Json(f) => json(line, f),
    }
}

/// Common and Combined: `host ident user [time] "request" status bytes …`.
fn clf(line: &str, combined: bool) -> crate::error::Result<Entry> {
    let mut rest = line.trim_end();
    let word = |rest: &mut &str| -> Option<String> {
        let r = rest.trim_start();
        let end = r.find(' ').unwrap_or(r.len());
        let w = r[..end].to_string();
        *rest = &r[end..];
        (!w.is_empty()).then_some(w)
    };
    let client = word(&mut rest).ok_or("empty line").usage()?;
    word(&mut rest).ok_or("no ident field").usage()?;
    word(&mut rest).ok_or("no user field").usage()?;
    let r = rest.trim_start();
    let r = r.strip_prefix('[').ok_or("no [time] field").usage()?;
    let end = r
        .find(']')
        .ok_or("the [time] field is not closed")
        .usage()?;
    let logged = clf_time(&r[..end])?;
    let whole = !r[..end].contains('.');
    let (request, r) = quoted(r[end + 1..].trim_start())
        .ok_or("no quoted request")
        .usage()?;
    let mut rest = r;
    let status = word(&mut rest)
        .and_then(|s| s.parse::<u16>().ok())
        .filter(|s| (100..600).contains(s))
        .ok_or("no HTTP status after the request")
        .usage()?;
    let bytes = word(&mut rest).ok_or("no size field").usage()?;
    let bytes = if bytes == "-" {
        0
    } else {
        bytes
            .parse()
            .map_err(|_| format!("size '{bytes}' is not a number"))
            .usage()?
    };
    let mut r = rest.trim_start();
    if combined {
        let (_referer, r2) = quoted(r)
            .ok_or("no quoted referer (not Combined)")
            .usage()?;
        let (_agent, r3) = quoted(r2.trim_start())
            .ok_or("no quoted user agent")
            .usage()?;
        r = r3.trim_start();
    } else if r.starts_with('"') {
        return Err(crate::Error::usage(
            "quoted fields after the size (Combined, not Common)",
        ));
    }
    // An optional response time: seconds with a point (nginx `$request_time`),
    // microseconds without (Apache `%D`).
    let duration = match r.split_whitespace().next() {
        None => None,
        Some(t) if t.contains('.') => Some(
            t.parse::<f64>()
                .map_err(|_| format!("response time '{t}' is not a number"))
                .usage()?,
        ),
        Some(t) => match t.parse::<u64>() {
            Ok(us) => Some(us as f64 / 1e6),
            Err(_) if t == "-" => None,
            Err(_) => {
                return Err(crate::Error::usage(format!(
                    "unexpected '{t}' after the last field"
                )))
            }
        },
    };
    let (method, target) = request_line(&request)?;
    Ok(Entry::new(
        logged, whole, duration, method, &target, status, bytes, client,
    ))
}

/// A `"…"` field with `\"` escapes; the text and what follows it.
fn quoted(s: &str) -> Option<(String, &str)> {
    let s = s.strip_prefix('"')?;
    let mut out = String::new();
    let mut chars = s.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => {
                if let Some((_, n)) = chars.next() {
                    out.push(n);
                }
            }
            '"' => return Some((out, &s[i + 1..])),
            c => out.push(c),
        }
    }
    None
}

/// `GET /path?q HTTP/1.1` into its method and target.
fn request_line(r: &str) -> crate::error::Result<(String, String)> {
    let mut parts = r.split(' ');
    let method = parts.next().unwrap_or("");
    let target = parts
        .next()
        .ok_or_else(|| format!("request '{r}' has no path"))
        .usage()?;
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_uppercase()) {
        return Err(crate::Error::usage(format!(
            "request '{r}' does not start with a method"
        )));
    }
    // An absolute URI (a proxy's log) keeps its path only.
    let target = match target.find("://") {
        Some(i) => {
            let after = &target[i + 3..];
            &after[after.find('/').unwrap_or(after.len())..]
        }
        None => target,
    };
    if !target.starts_with('/') && target != "*" {
        return Err(crate::Error::usage(format!(
            "request target '{target}' is not a path"
        )));
    }
    Ok((method.to_string(), target.to_string()))
}

fn split_query(target: &str) -> (String, Option<String>) {
    match target.split_once('?') {
        Some((p, q)) => (p.to_string(), Some(q.to_string())),
        None => (target.to_string(), None),
    }
}

/// `10/Oct/2000:13:55:36 -0700` (optionally with fractional seconds) into epoch seconds.
pub fn clf_time(s: &str) -> crate::error::Result<f64> {
    let bad = || format!("time '{s}' is not like 10/Oct/2000:13:55:36 -0700");
    let (stamp, zone) = s.split_once(' ').ok_or_else(bad).usage()?;
    let mut it = stamp.splitn(4, [':', '/']);
    let day: i64 = it
        .next()
        .and_then(|d| d.parse().ok())
        .ok_or_else(bad)
        .usage()?;
    let month = it.next().ok_or_else(bad).usage()?;
    let month = MONTHS
        .iter()
        .position(|m| m.eq_ignore_ascii_case(month))
        .ok_or_else(bad)
        .usage()? as i64
        + 1;
    let year: i64 = it
        .next()
        .and_then(|y| y.parse().ok())
        .ok_or_else(bad)
        .usage()?;
    let clock = it.next().ok_or_else(bad).usage()?;
    let secs = clock_seconds(clock).ok_or_else(bad).usage()?;
    let offset = zone_offset(zone).ok_or_else(bad).usage()?;
    Ok(days_from_civil(year, month, day) as f64 * 86_400.0 + secs - offset)
}

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// `13:55:36` or `13:55:36.123` into seconds of the day.
fn clock_seconds(c: &str) -> Option<f64> {
    let mut p = c.splitn(3, ':');
    let h: f64 = p.next()?.parse().ok()?;
    let m: f64 = p.next()?.parse().ok()?;
    let s: f64 = p.next()?.parse().ok()?;
    (h < 24.0 && m < 60.0 && s < 61.0).then_some(h * 3600.0 + m * 60.0 + s)
}

/// `-0700`, `+02:00` or `Z` into seconds east of UTC.
fn zone_offset(z: &str) -> Option<f64> {
    if z == "Z" || z.is_empty() {
        return Some(0.0);
    }
    let sign = match z.as_bytes()[0] {
        b'+' => 1.0,
        b'-' => -1.0,
        _ => return None,
    };
    let digits: String = z[1..].chars().filter(|c| *c != ':').collect();
    if digits.len() != 4 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let h: f64 = digits[..2].parse().ok()?;
    let m: f64 = digits[2..].parse().ok()?;
    Some(sign * (h * 3600.0 + m * 60.0))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// RFC 3339 / ISO 8601 (`2026-11-22T10:00:00.123+01:00`) into epoch seconds.
fn iso_time(s: &str) -> Option<f64> {
    let (date, rest) = s.split_at_checked(10)?;
    let mut d = date.split('-');
    let y: i64 = d.next()?.parse().ok()?;
    let m: i64 = d.next()?.parse().ok()?;
    let day: i64 = d.next()?.parse().ok()?;
    let rest = rest.strip_prefix(['T', ' '])?;
    let zone_at = rest
        .find(['Z', '+'])
        .or_else(|| rest.rfind('-'))
        .unwrap_or(rest.len());
    let secs = clock_seconds(&rest[..zone_at])?;
    let offset = zone_offset(&rest[zone_at..])?;
    (1..=12).contains(&m).then_some(())?;
    Some(days_from_civil(y, m, day) as f64 * 86_400.0 + secs - offset)
}

fn json(line: &str, f: &JsonFields) -> crate::error::Result<Entry> {
    let v: serde_json::Value =
        serde_json::from_str(line).usage_with(|e| format!("not a JSON object: {e}"))?;
    let obj = v.as_object().ok_or("not a JSON object").usage()?;
    fn first<'a>(
        obj: &'a serde_json::Map<String, serde_json::Value>,
        names: &'a [String],
    ) -> Option<(&'a String, &'a serde_json::Value)> {
        names.iter().find_map(|n| obj.get(n).map(|v| (n, v)))
    }
    let first = |names| first(obj, names);
    let (_, t) = first(&f.time)
        .ok_or_else(|| format!("no time field (tried {})", f.time.join(", ")))
        .usage()?;
    // Whether the time has one-second resolution (an integer of seconds, a text
    // without a fraction): then only whole seconds of a response time are taken off.
    let whole = match t {
        serde_json::Value::Number(n) => n.is_i64() && n.as_f64().unwrap_or(0.0) <= 1e11,
        serde_json::Value::String(s) => !s.contains('.'),
        _ => false,
    };
    let time = match t {
        // Epoch seconds, or milliseconds when it is that large (JavaScript's Date.now()).
        serde_json::Value::Number(n) => {
            let x = n.as_f64().unwrap_or(0.0);
            if x > 1e11 {
                x / 1e3
            } else {
                x
            }
        }
        serde_json::Value::String(s) => match s.parse::<f64>() {
            Ok(x) => x,
            Err(_) => iso_time(s)
                .or_else(|| clf_time(s).ok())
                .ok_or_else(|| format!("time '{s}' is neither epoch seconds, ISO 8601 nor CLF"))
                .usage()?,
        },
        other => {
            return Err(crate::Error::usage(format!(
                "time {other} is not a number or a string"
            )))
        }
    };
    let text = |v: &serde_json::Value| match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let number = |v: &serde_json::Value| -> Option<f64> {
        match v {
            serde_json::Value::Number(n) => n.as_f64(),
            serde_json::Value::String(s) => s.parse().ok(),
            _ => None,
        }
    };
    let (method, target) = match (first(&f.method), first(&f.path)) {
        (Some((_, m)), Some((_, p))) => (text(m), text(p)),
        _ => {
            let (_, r) = first(&f.request)
                .ok_or_else(|| {
                    format!(
                        "no method and path fields (tried {} and {}) nor a request line ({})",
                        f.method.join(", "),
                        f.path.join(", "),
                        f.request.join(", ")
                    )
                })
                .usage()?;
            request_line(&text(r))?
        }
    };
    let target = request_line(&format!("{method} {target}"))?.1;
    let status = first(&f.status)
        .and_then(|(_, v)| number(v))
        .map(|s| s as u16)
        .filter(|s| (100..600).contains(s))
        .ok_or_else(|| format!("no HTTP status (tried {})", f.status.join(", ")))
        .usage()?;
    let bytes = first(&f.bytes).and_then(|(_, v)| number(v)).unwrap_or(0.0) as u64;
    let duration = first(&f.duration).and_then(|(k, v)| {
        let x = number(v)?;
        Some(if k.ends_with("_ms") {
            x / 1e3
        } else if k.ends_with("_us") {
            x / 1e6
        } else {
            x
        })
    });
    let client = first(&f.client).map(|(_, v)| text(v)).unwrap_or_default();
    Ok(Entry::new(
        time, whole, duration, method, &target, status, bytes, client,
    ))
}

/// The format of the first lines, which are then handled in order.
fn settle(
    pending: &mut Vec<(u64, Option<String>)>,
    fields: &JsonFields,
    name: &str,
    bad: &mut (u64, Vec<Malformed>),
    handle: &mut impl FnMut(u64, Option<&str>, &Format, &mut (u64, Vec<Malformed>)),
) -> crate::error::Result<Format> {
    let first: Vec<&str> = pending.iter().filter_map(|(_, l)| l.as_deref()).collect();
    let f = detect(&first, fields, name)?;
    for (no, l) in pending.drain(..) {
        handle(no, l.as_deref(), &f, bad);
    }
    Ok(f)
}

/// Lines a format must read among the first ones to be chosen.
const DETECT_LINES: usize = 50;

/// The format most of the first lines parse as; `Err` names every format tried and
/// shows the first line.
pub fn detect(first: &[&str], fields: &JsonFields, file: &str) -> crate::error::Result<Format> {
    let candidates = [
        Format::Combined,
        Format::Common,
        Format::Json(fields.clone()),
    ];
    let lines: Vec<&str> = first
        .iter()
        .copied()
        .filter(|l| !l.trim().is_empty())
        .collect();
    if lines.is_empty() {
        return Err(crate::Error::usage(format!(
            "{file}: empty, no access-log lines"
        )));
    }
    let best = candidates
        .iter()
        .map(|f| (f, lines.iter().filter(|l| parse_line(l, f).is_ok()).count()))
        .max_by_key(|(_, n)| *n)
        .expect("candidates");
    if best.1 * 2 > lines.len() {
        return Ok(best.0.clone());
    }
    let shown: String = lines[0].chars().take(120).collect();
    let why = candidates
        .iter()
        .map(|f| {
            format!(
                "{}: {}",
                f.name(),
                parse_line(lines[0], f)
                    .err()
                    .map(|e| e.to_string())
                    .unwrap_or_default()
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    Err(crate::Error::usage(format!(
        "{file} is not an access log strainline reads: fewer than half of its first {} lines \
         parse as nginx/Apache Combined Log Format, Common Log Format (each with an optional \
         trailing response time) or JSON lines. Line 1 is `{shown}` ({why}). For JSON with \
         other key names, map them with --json-fields time=KEY,path=KEY,…",
        lines.len()
    )))
}

/// Opens a log, plain or gzip (by its magic bytes), as lines of bytes.
pub fn open(path: &Path) -> std::io::Result<Box<dyn BufRead>> {
    let mut file = std::fs::File::open(path)?;
    let mut magic = [0u8; 2];
    let n = file.read(&mut magic)?;
    let head = std::io::Cursor::new(magic[..n].to_vec());
    let chained = head.chain(file);
    Ok(if n == 2 && magic == [0x1f, 0x8b] {
        Box::new(BufReader::with_capacity(
            1 << 16,
            flate2::read::MultiGzDecoder::new(chained),
        ))
    } else {
        Box::new(BufReader::with_capacity(1 << 16, chained))
    })
}

/// A line that did not parse: where, why, and its start.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Malformed {
    pub file: String,
    pub line: u64,
    pub reason: String,
    pub text: String,
}

/// How many malformed lines are kept as examples.
pub const EXAMPLES: usize = 5;

/// The longest line read, bytes: an access log's lines are a few hundred bytes (nginx
/// refuses request headers beyond 8 KiB by default); a longer one is malformed, and its
/// rest is skipped unread into memory, so a file without newlines (a binary, a corrupt
/// log) is read in bounded memory.
pub const MAX_LINE: usize = 64 * 1024;

/// Reads one line into `buf` (without its newline), keeping at most `max` bytes and
/// skipping the rest. Returns the bytes consumed (0 at the end) and whether it was cut.
fn read_line_bounded(
    r: &mut dyn BufRead,
    buf: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<(usize, bool)> {
    let (mut consumed, mut cut) = (0, false);
    loop {
        let chunk = match r.fill_buf() {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if chunk.is_empty() {
            return Ok((consumed, cut));
        }
        let (take, done) = match memchr::memchr(b'\n', chunk) {
            Some(i) => (i + 1, true),
            None => (chunk.len(), false),
        };
        let room = max.saturating_sub(buf.len());
        let line_part = &chunk[..if done { take - 1 } else { take }];
        buf.extend_from_slice(&line_part[..line_part.len().min(room)]);
        cut |= line_part.len() > room;
        r.consume(take);
        consumed += take;
        if done {
            return Ok((consumed, cut));
        }
    }
}

/// Reads every line of `path`, calling `each` with the parsed requests; malformed lines
/// (bad syntax, invalid UTF-8, binary) go to `bad` (counted; the first few kept).
pub fn read(
    path: &Path,
    fields: &JsonFields,
    bad: &mut (u64, Vec<Malformed>),
    mut each: impl FnMut(Entry),
) -> crate::error::Result<(Format, u64)> {
    read_while(path, fields, bad, |e| {
        each(e);
        true
    })
}

/// [`read`], stopping once `each` returns false (a replay whose run has ended).
pub fn read_while(
    path: &Path,
    fields: &JsonFields,
    bad: &mut (u64, Vec<Malformed>),
    mut each: impl FnMut(Entry) -> bool,
) -> crate::error::Result<(Format, u64)> {
    let stop = std::cell::Cell::new(false);
    let name = path.display().to_string();
    let mut r = open(path).usage_with(|e| format!("{name}: {e}"))?;
    let mut buf = Vec::new();
    let mut lines = 0u64;
    let mut format: Option<Format> = None;
    // The first lines, kept until the format is known (`None`: not UTF-8).
    let mut pending: Vec<(u64, Option<String>)> = Vec::new();
    let mut text_lines = 0;
    let mut handle =
        |no: u64, line: Option<&str>, format: &Format, bad: &mut (u64, Vec<Malformed>)| {
            let outcome = match line {
                Some(l) if l.trim().is_empty() => return,
                Some(l) => parse_line(l, format),
                None => Err(crate::Error::usage("not UTF-8 text (binary?)")),
            };
            match outcome {
                Ok(e) => {
                    if !stop.get() && !each(e) {
                        stop.set(true);
                    }
                }
                Err(reason) => {
                    bad.0 += 1;
                    if bad.1.len() < EXAMPLES {
                        bad.1.push(Malformed {
                            file: name.clone(),
                            line: no,
                            reason: reason.to_string(),
                            text: line
                                .map(|l| l.chars().take(80).collect())
                                .unwrap_or_default(),
                        });
                    }
                }
            }
        };
    loop {
        if stop.get() {
            break;
        }
        buf.clear();
        let (n, cut) = read_line_bounded(&mut *r, &mut buf, MAX_LINE)
            .usage_with(|e| format!("{name}: line {}: {e}", lines + 1))?;
        if n == 0 {
            break;
        }
        lines += 1;
        if cut {
            bad.0 += 1;
            if bad.1.len() < EXAMPLES {
                bad.1.push(Malformed {
                    file: name.clone(),
                    line: lines,
                    reason: format!(
                        "longer than {} KiB: not an access log line",
                        MAX_LINE / 1024
                    ),
                    text: String::from_utf8_lossy(&buf[..buf.len().min(80)]).into_owned(),
                });
            }
            continue;
        }
        while buf.last().is_some_and(|b| *b == b'\r') {
            buf.pop();
        }
        let line = std::str::from_utf8(&buf).ok();
        match &format {
            Some(f) => handle(lines, line, f, bad),
            None => {
                if line.is_some_and(|l| !l.trim().is_empty()) {
                    text_lines += 1;
                }
                pending.push((lines, line.map(str::to_string)));
                if text_lines >= DETECT_LINES {
                    format = Some(settle(&mut pending, fields, &name, bad, &mut handle)?);
                }
            }
        }
    }
    let f = match format {
        Some(f) => f,
        // Nothing but over-long lines: not a log (a binary without newlines, say).
        None if text_lines == 0 && !bad.1.is_empty() => {
            let first = &bad.1[0];
            return Err(crate::Error::usage(format!(
                "{name} is not an access log strainline reads: line {} is {}",
                first.line, first.reason
            )));
        }
        None => settle(&mut pending, fields, &name, bad, &mut handle)?,
    };
    Ok((f, lines))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn combined_with_nginx_request_time_is_read_as_the_arrival() {
        let l = r#"10.0.0.7 - - [22/Nov/2026:10:00:01 +0100] "POST /push/dev-1234?x=1 HTTP/1.1" 201 512 "-" "curl/8.0" 0.250"#;
        let e = parse_line(l, &Format::Combined).unwrap();
        // 2026-11-22T09:00:01Z = 1795338001; arrival 0.25 s before the log time.
        // A whole-second log time: a response time under half a second is not taken off.
        assert_eq!(e.time, 1_795_338_001.0);
        assert_eq!(e.method, "POST");
        assert_eq!(e.path, "/push/dev-1234");
        assert_eq!(e.query.as_deref(), Some("x=1"));
        assert_eq!((e.status, e.bytes, e.duration), (201, 512, Some(0.25)));
        assert_eq!(e.client, "10.0.0.7");
        // Common is not Combined, and the reverse.
        assert!(parse_line(l, &Format::Common).is_err());
        let c = r#"::1 - bob [10/Oct/2000:13:55:36 -0700] "GET /a.gif HTTP/1.0" 200 - 2500"#;
        let e = parse_line(c, &Format::Common).unwrap();
        assert_eq!(e.duration, Some(0.0025)); // Apache %D: microseconds
        assert_eq!(e.bytes, 0);
        assert!(parse_line(c, &Format::Combined).is_err());
        // The Apache documentation's example time: 971211336 s.
        assert_eq!(
            clf_time("10/Oct/2000:13:55:36 -0700").unwrap(),
            971_211_336.0
        );
    }

    #[test]
    fn json_lines_with_default_and_mapped_fields() {
        let f = JsonFields::default();
        let e = parse_line(
            r#"{"time":"2026-11-22T09:00:01.500Z","request":"GET /u/42 HTTP/1.1","status":"200","body_bytes_sent":10,"request_time":0.5,"remote_addr":"1.2.3.4"}"#,
            &Format::Json(f.clone()),
        )
        .unwrap();
        assert!((e.time - 1_795_338_001.0).abs() < 1e-6);
        assert_eq!(
            (e.method.as_str(), e.path.as_str(), e.status),
            ("GET", "/u/42", 200)
        );
        let f = f.with("time=at,path=route,duration=took_ms").unwrap();
        let e = parse_line(
            r#"{"at":1795338001000,"method":"PUT","route":"/x","code":204,"took_ms":12}"#,
            &Format::Json(f),
        )
        .unwrap();
        assert!((e.time - (1_795_338_001.0 - 0.012)).abs() < 1e-6);
        assert_eq!((e.status, e.duration), (204, Some(0.012)));
        assert!(JsonFields::default().with("when=x").is_err());
    }

    #[test]
    fn a_file_that_is_not_a_log_is_refused_naming_the_formats() {
        let lines = ["[package]", "name = \"x\""];
        let e = detect(&lines, &JsonFields::default(), "Cargo.toml")
            .unwrap_err()
            .to_string();
        for f in [
            "Combined Log Format",
            "Common Log Format",
            "JSON lines",
            "Cargo.toml",
        ] {
            assert!(e.contains(f), "{e}");
        }
    }
}
