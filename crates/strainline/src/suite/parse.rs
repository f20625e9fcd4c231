//! From the suite file as written ([`super::raw`]) to the checked model, section by
//! section — `[target]`, `[logs]`, `[[watch]]`, each `[[test]]` (common keys, then its
//! kind's own spec), `[compare]` — every mistake refused as `FILE:LINE:COLUMN: what is
//! wrong` with the fix. A key that belongs to another kind is refused too: a `rate` on a
//! ramp would otherwise be silently ignored.

use crate::error::Category;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use toml::Spanned;

use crate::limits;

use super::gate;
use super::raw::{RawCompare, RawLogs, RawSuite, RawTarget, RawTest, RawWatch};
use super::{
    kind_metrics, log_class_metric, Attach, Bench, CompareSpec, Crash, Harness, Kind, LogSpec,
    Ramp, Ready, Rounds, Scale, Soak, Spec, Suite, TargetSpec, Test, WatchBy, WatchSpec, Workload,
};
use crate::metrics::Unit;
use crate::units::parse_duration;

type Result<T> = crate::error::Result<T>;

/// The keys of a load kind's workload.
const WORKLOAD_KEYS: &[&str] = &[
    "url",
    "scenario",
    "method",
    "body",
    "headers",
    "command",
    "connections",
    "threads",
    "timeout",
    "setup",
    "http2",
    "streams",
    "cacert",
    "insecure",
    "reply_field",
];

/// The keys a kind takes beyond the common ones (and, for load kinds, the workload's).
fn own_keys(kind: Kind) -> &'static [&'static str] {
    match kind {
        Kind::Bench => &["rate", "duration"],
        Kind::Ramp => &[
            "start",
            "step",
            "step_duration",
            "max_steps",
            "slo_p99",
            "max_error_rate",
        ],
        Kind::Soak => &[
            "rate",
            "duration",
            "leak_budget",
            "horizon",
            "clients",
            "client_period",
            "ram",
        ],
        Kind::Rounds => &["rounds", "ops", "quiesce_url", "settle", "leak_budget"],
        Kind::Crash => &[
            "command",
            "iterations",
            "kill_after",
            "kill_at_log",
            "verify",
        ],
        Kind::Scale => &["command", "sizes"],
        Kind::Harness => &["command"],
    }
}

/// Every number a test gives, against its range ([`limits`]): refused at its line.
fn ranges(doc: &Doc, header: usize, t: &RawTest) -> Result<()> {
    let check = |v: Option<f64>, limit: limits::Limit| -> Result<()> {
        match v.map(|v| limit.check(v)) {
            Some(Err(e)) => Err(doc.at(
                doc.key_offset(header, limit.key),
                format!("test '{}': {e}", t.name),
            )),
            _ => Ok(()),
        }
    };
    check(t.rate, limits::RATE)?;
    check(t.start, limits::RAMP_START)?;
    check(t.step, limits::RAMP_STEP)?;
    check(t.connections.map(|v| v as f64), limits::CONNECTIONS)?;
    check(t.threads.map(|v| v as f64), limits::THREADS)?;
    check(t.streams.map(|v| v as f64), limits::STREAMS)?;
    check(t.max_steps.map(f64::from), limits::MAX_STEPS)?;
    check(t.clients.map(|v| v as f64), limits::CLIENTS)?;
    check(t.rounds.map(f64::from), limits::ROUNDS)?;
    check(t.ops.map(|v| v as f64), limits::OPS)?;
    check(t.iterations.map(f64::from), limits::ITERATIONS)?;
    check(t.repeat.map(f64::from), limits::REPEAT)?;
    for &size in &t.sizes {
        check(Some(size as f64), limits::SIZE)?;
    }
    let distinct: std::collections::BTreeSet<u64> = t.sizes.iter().copied().collect();
    if !t.sizes.is_empty() && distinct.len() < 2 {
        return Err(doc.at(
            doc.key_offset(header, "sizes"),
            format!(
                "test '{}': sizes need at least two different values to fit how cost grows",
                t.name
            ),
        ));
    }
    // An argv must name a program: `[]` or `[""]` would run nothing (or panic).
    for (key, argv) in [("verify", &t.verify), ("command", &t.command)] {
        if argv
            .as_ref()
            .is_some_and(|a| a.first().is_none_or(|p| p.trim().is_empty()))
        {
            return Err(doc.at(
                doc.key_offset(header, key),
                format!(
                    "test '{}': {key} names no program: give its argv, e.g. [\"./check\", \"data/\"]",
                    t.name
                ),
            ));
        }
    }
    // The cases a test expands to, bounded before any is made (10⁸ cases allocated
    // until the machine ran out).
    let cases = t.matrix.values().map(|vs| vs.len() as f64).product::<f64>()
        * f64::from(t.repeat.unwrap_or(1));
    if cases > limits::MAX_CASES {
        return Err(doc.at(
            doc.key_offset(header, if t.repeat.is_some() { "repeat" } else { "matrix" }),
            format!(
                "test '{}': {cases:.0} cases (the matrix's combinations × repeat), more than {}: split the test or give fewer values",
                t.name,
                limits::MAX_CASES
            ),
        ));
    }
    if let Some((k, _)) = t.matrix.iter().find(|(_, vs)| vs.is_empty()) {
        return Err(doc.at(
            doc.key_offset(header, "matrix"),
            format!(
                "test '{}': matrix key '{k}' has no values (give at least one)",
                t.name
            ),
        ));
    }
    // A workload's URL may be a WebSocket's; the quiesce request is HTTP.
    for (key, url, schemes) in [
        ("url", &t.url, load_schemes()),
        (
            "quiesce_url",
            &t.quiesce_url,
            HTTP_SCHEMES.iter().map(|s| s.to_string()).collect(),
        ),
    ] {
        if let Some(url) = url {
            url_shape(url, &schemes).map_err(|e| {
                doc.at(
                    doc.key_offset(header, key),
                    format!(
                        "test '{}': {key} '{}': {e}",
                        t.name,
                        crate::units::one_line(url)
                    ),
                )
            })?;
        }
    }
    if let Some(m) = &t.method {
        method_shape(m).map_err(|e| {
            doc.at(
                doc.key_offset(header, "method"),
                format!(
                    "test '{}': {}",
                    t.name,
                    crate::units::one_line(&e.to_string())
                ),
            )
        })?;
    }
    Ok(())
}

/// A URL whose protocol's query options name files (gRPC's `proto=FILE`), with those
/// files relative to the suite file, as a scenario's is; any other URL as written.
fn beside_the_suite(suite: &Path, url: &str) -> String {
    let options = crate::load::proto::by_url(url).map_or(&[][..], |p| p.file_options());
    let Some((head, query)) = url.split_once('?').filter(|_| !options.is_empty()) else {
        return url.to_string();
    };
    let dir = suite.parent().unwrap_or(Path::new("."));
    let query: Vec<String> = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((k, f))
                if options.contains(&k) && !Path::new(f).is_absolute() && !f.is_empty() =>
            {
                format!("{k}={}", dir.join(f).display())
            }
            _ => pair.to_string(),
        })
        .collect();
    format!("{head}?{}", query.join("&"))
}

/// The files a URL's query names for its protocol ([`beside_the_suite`]'s), as given.
fn files_named(url: &str) -> Vec<(&'static str, String)> {
    let options = crate::load::proto::by_url(url).map_or(&[][..], |p| p.file_options());
    let query = url.split_once('?').map_or("", |(_, q)| q);
    query
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .filter_map(|(k, f)| Some((*options.iter().find(|o| **o == k)?, f.to_string())))
        .filter(|(_, f)| !f.is_empty())
        .collect()
}

/// The schemes of an HTTP request (a probe, a quiesce request).
const HTTP_SCHEMES: &[&str] = &["http://", "https://"];
/// The schemes a workload's URL may have: HTTP's and the protocol registry's.
fn load_schemes() -> Vec<String> {
    ["http://", "https://"]
        .into_iter()
        .map(String::from)
        .chain(crate::load::proto::prefixes())
        .collect()
}

/// Whether a URL (placeholders allowed) with one of `schemes` is one the load engine
/// can send to.
fn url_shape<S: AsRef<str>>(url: &str, schemes: &[S]) -> crate::error::Result<()> {
    let rest = schemes
        .iter()
        .find_map(|s| url.strip_prefix(s.as_ref()))
        .ok_or_else(|| {
            crate::Error::usage(format!(
                "give a URL that starts with {}",
                schemes
                    .iter()
                    .map(AsRef::as_ref)
                    .collect::<Vec<&str>>()
                    .join(" or ")
            ))
        })?;
    if let Some(c) = url.chars().find(|c| c.is_whitespace() || c.is_control()) {
        return Err(crate::Error::usage(format!(
            "it holds {}: write a space as %20",
            if c == ' ' {
                "a space".to_string()
            } else {
                format!("the character {:?}", c)
            }
        )));
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let hostport = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let (host, port) = if let Some(v6) = hostport.strip_prefix('[') {
        let (inside, after) = v6
            .split_once(']')
            .ok_or("its IPv6 address has no closing ] (write e.g. http://[::1]:{{port}}/)")
            .usage()?;
        if inside.is_empty() {
            return Err(crate::Error::usage("its IPv6 address is empty"));
        }
        match after {
            "" => (inside, None),
            p => (
                inside,
                Some(
                    p.strip_prefix(':')
                        .ok_or("after its ] comes no :PORT")
                        .usage()?,
                ),
            ),
        }
    } else {
        match hostport.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (hostport, None),
        }
    };
    if host.is_empty() {
        return Err(crate::Error::usage(
            "it names no host (write e.g. http://127.0.0.1:{{port}}/)",
        ));
    }
    if let Some(p) = port.filter(|p| !p.contains("{{")) {
        if !p.parse::<u16>().is_ok_and(|p| p > 0) {
            return Err(crate::Error::usage(format!(
                "'{p}' is not a port (1-65535)"
            )));
        }
    }
    Ok(())
}

/// An HTTP method: one token (RFC 9110), e.g. GET or POST — as the client will parse it.
fn method_shape(m: &str) -> crate::error::Result<()> {
    if hyper::Method::from_bytes(m.as_bytes()).is_err() {
        return Err(crate::Error::usage(format!(
            "method {:?} is not one HTTP method (write e.g. GET or POST)",
            m
        )));
    }
    Ok(())
}

/// The text being parsed, for located messages and scaled durations.
struct Doc<'a> {
    path: &'a Path,
    text: &'a str,
    time_scale: f64,
}

impl Doc<'_> {
    fn at(&self, offset: usize, msg: impl std::fmt::Display) -> crate::Error {
        crate::Error::usage(crate::located::message(
            self.path,
            self.text,
            offset,
            &msg.to_string(),
        ))
    }

    /// A duration as written, within its range; `scaled` ones are then multiplied by
    /// `--time-scale`.
    fn dur(&self, s: &Spanned<String>, key: &'static str, scaled: bool) -> Result<Duration> {
        let limit = match key {
            "interval" => limits::INTERVAL,
            "timeout" => limits::TIMEOUT,
            "settle" | "ready_timeout" | "stop_grace" => limits::PAUSE,
            _ => limits::DURATION,
        };
        let d = parse_duration(s.get_ref())
            .map_err(|e| format!("{key}: {e}"))
            .and_then(|d| {
                limit.named(key).duration(d).map_err(|_| {
                    format!(
                        "{key} = \"{}\": out of range, give a duration from {:?} to {:?}",
                        s.get_ref(),
                        Duration::from_secs_f64(limit.min),
                        Duration::from_secs_f64(limit.max)
                    )
                })
            })
            .map_err(|e| self.at(s.span().start, e))?;
        Ok(if scaled {
            d.mul_f64(self.time_scale)
        } else {
            d
        })
    }

    fn opt_dur(
        &self,
        s: &Option<Spanned<String>>,
        key: &'static str,
        default: Duration,
        scaled: bool,
    ) -> Result<Duration> {
        match s {
            Some(s) => self.dur(s, key, scaled),
            None if scaled => Ok(default.mul_f64(self.time_scale)),
            None => Ok(default),
        }
    }

    fn regex(&self, s: &Spanned<String>, key: &str) -> Result<regex_lite::Regex> {
        regex_lite::Regex::new(s.get_ref()).map_err(|e| {
            self.at(
                s.span().start,
                format!("{key}: not a regular expression: {e}"),
            )
        })
    }

    /// Where `key = …` is written in the table whose header is at `header` (the lines
    /// up to the next header), else the header itself.
    fn key_offset(&self, header: usize, key: &str) -> usize {
        let mut offset = header;
        for (i, line) in self.text[header..].split_inclusive('\n').enumerate() {
            let trimmed = line.trim_start();
            if i > 0 && trimmed.starts_with('[') {
                break;
            }
            if trimmed
                .strip_prefix(key)
                .is_some_and(|rest| rest.trim_start().starts_with('='))
            {
                return offset + (line.len() - trimmed.len());
            }
            offset += line.len();
        }
        header
    }
}

/// Parses `1024B`, `17MiB`, `2GiB` into bytes (a bare number is not a size).
fn bytes(s: &str) -> Option<f64> {
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let n: f64 = s[..split].parse().ok()?;
    let scale = match s[split..].trim() {
        "B" => 1.0,
        "KiB" | "KB" | "K" => 1024.0,
        "MiB" | "MB" | "M" => 1048576.0,
        "GiB" | "GB" | "G" => 1073741824.0,
        _ => return None,
    };
    Some(n * scale)
}

fn signal(s: &str) -> Option<i32> {
    Some(match s.trim_start_matches("SIG") {
        "TERM" => libc::SIGTERM,
        "INT" => libc::SIGINT,
        "HUP" => libc::SIGHUP,
        "QUIT" => libc::SIGQUIT,
        "KILL" => libc::SIGKILL,
        "USR1" => libc::SIGUSR1,
        "USR2" => libc::SIGUSR2,
        _ => return None,
    })
}

/// serde's "unknown field `x`, expected one of …" (every kind's keys) said for the one
/// `[[test]]` it is in: the keys of that test's kind alone, and the nearest of them.
fn unknown_test_key(text: &str, at: usize, message: &str) -> Option<String> {
    if !message.contains("expected one of `name`, `kind`") {
        return None; // not a [[test]]'s own table (a setup request's, say)
    }
    let key = message.strip_prefix("unknown field `")?.split_once('`')?.0;
    // The test is the nth `[[test]]` header before the key, unless another table
    // (`[target]`, `[[watch]]`) came between them.
    let (mut offset, mut tests, mut in_test) = (0, 0, false);
    for line in text.split_inclusive('\n') {
        if offset > at {
            break;
        }
        let header = line.split('#').next().unwrap_or("").trim();
        if header == "[[test]]" {
            (tests, in_test) = (tests + 1, true);
        } else if header.starts_with('[') {
            in_test &= header.starts_with("[test.") || header.starts_with("[[test.");
        }
        offset += line.len();
    }
    let index = in_test.then(|| tests - 1);
    let table = text.parse::<toml::Table>().ok()?;
    let test = table.get("test")?.as_array()?.get(index?)?.as_table()?;
    let kind = Kind::parse_test(test.get("kind")?.as_str()?)?;
    let mut keys: Vec<&str> = super::raw::COMMON_KEYS.to_vec();
    if kind.has_target() {
        keys.extend(WORKLOAD_KEYS);
    }
    keys.extend(own_keys(kind));
    let name = test.get("name").and_then(|n| n.as_str()).unwrap_or("?");
    let nearest = keys
        .iter()
        .map(|k| (edits(k, key), *k))
        .filter(|(d, _)| *d <= 2)
        .min()
        .map(|(_, k)| format!(" — did you mean `{k}`?"))
        .unwrap_or_default();
    Some(format!(
        "test '{}': unknown key `{key}`{nearest} (a {} test takes: {})",
        crate::units::printable(name),
        kind.name(),
        keys.join(", ")
    ))
}

/// The edits (insert, delete, replace) that turn `a` into `b`.
fn edits(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let here = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb))
                .min(row[j] + 1)
                .min(here + 1);
            prev = here;
        }
    }
    row[b.len()]
}

/// Reads and checks a suite's text; `time_scale` multiplies every test duration.
pub fn parse(text: &str, path: &Path, time_scale: f64) -> Result<Suite> {
    let doc = Doc {
        path,
        text,
        time_scale,
    };
    let raw: RawSuite = toml::from_str(text).map_err(|e| {
        let at = e.span().map_or(0, |s| s.start);
        let message = e.message().trim();
        doc.at(
            at,
            unknown_test_key(text, at, message).unwrap_or_else(|| message.to_string()),
        )
    })?;
    let target = raw.target.as_ref().map(|t| target(&doc, t)).transpose()?;
    let logs = raw
        .logs
        .as_ref()
        .map(|l| logs(&doc, l))
        .transpose()?
        .unwrap_or_default();
    let watches = raw
        .watch
        .iter()
        .map(|w| watch(&doc, w))
        .collect::<Result<Vec<_>>>()?;
    // Metrics the suite adds to every kind with a target: its watches and log classes.
    let suite_metrics: Vec<(String, Unit)> = watches
        .iter()
        .flat_map(|w| {
            [
                (format!("watch_{}_peak_rss", w.name), Unit::Bytes),
                (format!("watch_{}_cpu", w.name), Unit::Cores),
            ]
        })
        .chain(
            logs.classes
                .iter()
                .map(|(n, _)| (log_class_metric(n), Unit::Count)),
        )
        .collect();
    let keys = super::raw::test_keys(text);
    let tests = raw
        .test
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let keys = keys.get(i).map_or(&[][..], |k| k.as_slice());
            test(&doc, t, keys, target.is_some(), &suite_metrics)
        })
        .collect::<Result<Vec<_>>>()?;
    if tests.is_empty() {
        return Err(doc.at(0, "the suite has no [[test]]"));
    }
    if let Some(url) = target.as_ref().and_then(|t| t.unwatched.as_ref()) {
        unwatched_fits(&doc, &raw.test, &tests, url)?;
    }
    let compare = raw
        .compare
        .as_ref()
        .map(|c| compare(&doc, c))
        .transpose()?
        .unwrap_or_default();
    let (name, vars) = raw
        .suite
        .map_or((None, BTreeMap::new()), |s| (s.name, s.vars));
    let name = name.unwrap_or_else(|| default_name(path));
    Ok(Suite {
        name,
        vars,
        path: path.to_path_buf(),
        target,
        logs,
        watches,
        tests,
        compare,
    })
}

/// `[target]`: what to start (or attach to), how to tell it is ready, how to stop it.
fn target(doc: &Doc, t: &RawTarget) -> Result<TargetSpec> {
    let ways = [
        t.command.is_some(),
        t.attach_pid_file.is_some(),
        t.attach_port.is_some(),
        t.url.is_some(),
    ];
    if ways.iter().filter(|&&w| w).count() != 1 {
        return Err(doc.at(
            0,
            "[target] needs exactly one of command = [...] (start it), attach_pid_file = \"...\" or attach_port = N (watch a running one), or url = \"...\" (a service only reached, not watched)",
        ));
    }
    if let Some(u) = &t.url {
        url_shape(u.get_ref(), HTTP_SCHEMES)
            .map_err(|e| doc.at(u.span().start, format!("target.url '{}': {e}", u.get_ref())))?;
        if t.host.is_some() || t.build.is_some() || t.ready.is_some() {
            return Err(doc.at(
                u.span().start,
                "[target] url = \"...\" is a service strainline only reaches: no build, ready or host with it (its readiness is the URL answering; to watch it, attach on its host: attach_port with host = \"AGENT\")",
            ));
        }
    }
    if let (Some(h), true) = (&t.host, t.command.is_some()) {
        return Err(doc.at(
            h.span().start,
            "[target] host = \"...\" watches a process on that agent's machine, which strainline does not start: use attach_pid_file = \"...\" or attach_port = N there (and run with --agents naming that agent)",
        ));
    }
    if let Some(c) = t.command.as_ref().filter(|c| c.get_ref().is_empty()) {
        return Err(doc.at(
            c.span().start,
            "target.command is empty: give the argv, e.g. [\"./server\", \"--port\", \"{{port}}\"]",
        ));
    }
    let ready = match &t.ready {
        None => Ready::Delay(Duration::from_millis(500)),
        Some(r) => {
            let v = r.get_ref();
            if v.starts_with("http://") || v.starts_with("https://") {
                url_shape(v, HTTP_SCHEMES)
                    .map_err(|e| doc.at(r.span().start, format!("ready '{v}': {e}")))?;
                Ready::Http(v.clone())
            } else if let Some(a) = v.strip_prefix("tcp://") {
                // The same host[:port] rules as a URL's.
                url_shape(&format!("http://{a}/"), HTTP_SCHEMES)
                    .and_then(|()| {
                        if a.ends_with(']') || !a.contains(':') {
                            Err(crate::Error::usage(
                                "it names no port (write e.g. tcp://127.0.0.1:{{port}})",
                            ))
                        } else {
                            Ok(())
                        }
                    })
                    .map_err(|e| doc.at(r.span().start, format!("ready '{v}': {e}")))?;
                Ready::Tcp(a.to_string())
            } else if let Some(re) = v.strip_prefix("log:") {
                regex_lite::Regex::new(re)
                    .map_err(|e| doc.at(r.span().start, format!("ready: bad regex: {e}")))?;
                Ready::Log(re.to_string())
            } else if let Some(d) = v.strip_prefix("delay:") {
                Ready::Delay(
                    parse_duration(d).map_err(|e| doc.at(r.span().start, format!("ready: {e}")))?,
                )
            } else {
                return Err(doc.at(
                    r.span().start,
                    format!("ready: '{v}' (expected http://…, tcp://HOST:PORT, log:REGEX or delay:DURATION)"),
                ));
            }
        }
    };
    let stop_signal = match &t.stop_signal {
        Some(s) => signal(s.get_ref()).ok_or_else(|| {
            doc.at(
                s.span().start,
                format!(
                    "stop_signal: '{}' (expected TERM, INT, HUP, QUIT, KILL, USR1 or USR2)",
                    s.get_ref()
                ),
            )
        })?,
        None => libc::SIGTERM,
    };
    Ok(TargetSpec {
        build: t.build.clone(),
        command: t
            .command
            .as_ref()
            .map(|c| c.get_ref().clone())
            .unwrap_or_default(),
        attach: match (&t.attach_pid_file, t.attach_port) {
            (Some(f), _) => Some(Attach::PidFile(PathBuf::from(f))),
            (None, Some(port)) => Some(Attach::Port(port)),
            (None, None) => None,
        },
        unwatched: t.url.as_ref().map(|u| u.get_ref().clone()),
        host: t.host.as_ref().map(|h| h.get_ref().clone()),
        shell: t.shell,
        env: t.env.clone(),
        cwd: t.cwd.as_ref().map(PathBuf::from),
        ready,
        ready_timeout: doc.opt_dur(
            &t.ready_timeout,
            "ready_timeout",
            Duration::from_secs(10),
            false,
        )?,
        stop_signal,
        stop_grace: doc.opt_dur(&t.stop_grace, "stop_grace", Duration::from_secs(5), false)?,
    })
}

/// `[logs]`: regexes counted in the target's output.
fn logs(doc: &Doc, l: &RawLogs) -> Result<LogSpec> {
    let mut logs = LogSpec::default();
    for e in &l.errors {
        logs.errors.push(doc.regex(e, "logs.errors")?);
    }
    for w in &l.warnings {
        logs.warnings.push(doc.regex(w, "logs.warnings")?);
    }
    for (name, r) in &l.classes {
        logs.classes
            .push((name.clone(), doc.regex(r, "logs.classes")?));
    }
    Ok(logs)
}

/// A `[[watch]]`: a process beside the target, found by pid file, name or command line.
fn watch(doc: &Doc, w: &Spanned<RawWatch>) -> Result<WatchSpec> {
    let pos = w.span().start;
    let w = w.get_ref();
    let by = match (&w.pid_file, &w.process, &w.cmdline) {
        (Some(p), None, None) => WatchBy::PidFile(PathBuf::from(p)),
        (None, Some(n), None) => WatchBy::Name(n.clone()),
        (None, None, Some(c)) => WatchBy::Cmdline(doc.regex(c, "watch.cmdline")?),
        _ => {
            return Err(doc.at(
                pos,
                format!(
                    "watch '{}': give exactly one of pid_file, process or cmdline",
                    w.name
                ),
            ))
        }
    };
    if !w
        .name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        return Err(doc.at(
            pos,
            format!(
                "watch '{}': a name of letters, digits and _ (it names metrics)",
                w.name
            ),
        ));
    }
    Ok(WatchSpec {
        name: w.name.clone(),
        by,
    })
}

/// A target that is only a URL gives no CPU, memory or thread figures: the kinds whose
/// verdicts read them, and gates on them, are refused at their line.
fn unwatched_fits(doc: &Doc, raw: &[Spanned<RawTest>], tests: &[Test], url: &str) -> Result<()> {
    for (r, t) in raw.iter().zip(tests) {
        if matches!(t.kind, Kind::Ramp | Kind::Soak | Kind::Rounds) {
            return Err(doc.at(
                r.get_ref().kind.span().start,
                format!(
                    "test '{}': kind = \"{}\" needs a target strainline starts or watches (its verdict reads the target's CPU, memory or threads), and [target] url = \"{url}\" is only reached: use kind = \"bench\", or watch it by an agent on its host (attach_port with host = \"AGENT\")",
                    t.name,
                    t.kind.name()
                ),
            ));
        }
        for (g, raw_gate) in t.gates.iter().zip(&r.get_ref().gates) {
            let from_load = crate::metrics::lookup(&g.metric)
                .is_some_and(|d| d.made_by(crate::metrics::Source::Load));
            if !from_load {
                return Err(doc.at(
                    raw_gate.span().start + 1,
                    format!(
                        "gate: '{}' is a figure of the target's processes, and [target] url = \"{url}\" is not watched",
                        g.metric
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// A `[[test]]`: its common keys, its gates, then its kind's own spec.
fn test(
    doc: &Doc,
    spanned: &Spanned<RawTest>,
    written: &[String],
    has_target: bool,
    suite_metrics: &[(String, Unit)],
) -> Result<Test> {
    let span = spanned.span();
    let t = spanned.get_ref();
    let kind = Kind::parse_test(t.kind.get_ref()).ok_or_else(|| {
        let kinds: Vec<&str> = Kind::TESTS.iter().map(|k| k.name()).collect();
        doc.at(
            t.kind.span().start,
            format!(
                "kind: '{}' (expected one of: {})",
                t.kind.get_ref(),
                kinds.join(", ")
            ),
        )
    })?;
    let allowed: Vec<&str> = if kind.has_target() {
        WORKLOAD_KEYS
            .iter()
            .chain(own_keys(kind))
            .copied()
            .collect()
    } else {
        own_keys(kind).to_vec()
    };
    if let Some(key) = written
        .iter()
        .map(String::as_str)
        .find(|k| !allowed.contains(k))
    {
        let owners: Vec<&str> = Kind::TESTS
            .into_iter()
            .filter(|k| {
                own_keys(*k).contains(&key) || (k.has_target() && WORKLOAD_KEYS.contains(&key))
            })
            .map(|k| k.name())
            .collect();
        return Err(doc.at(
            doc.key_offset(span.start, key),
            format!(
                "test '{}': '{key}' is not a key of a {} test (it is one of {}); a {} test takes: {}",
                t.name,
                kind.name(),
                owners.join(", "),
                kind.name(),
                allowed.join(", ")
            ),
        ));
    }
    ranges(doc, span.start, t)?;
    let mut metrics = kind_metrics(kind);
    if kind.has_target() {
        metrics.extend(suite_metrics.iter().map(|(n, u)| (n.as_str(), *u)));
    }
    let mut gates = Vec::new();
    let mut harness_gates = Vec::new();
    for g in &t.gates {
        match gate::parse(g.get_ref(), &metrics) {
            Ok(parsed) => gates.push(parsed),
            Err((_, msg)) if kind == Kind::Harness && msg.starts_with("unknown metric") => {
                harness_gates.push(g.get_ref().clone())
            }
            Err((off, msg)) => return Err(doc.at(g.span().start + 1 + off, format!("gate: {msg}"))),
        }
    }
    let needs = |present: bool, what: &str| -> Result<()> {
        if present {
            Ok(())
        } else {
            Err(doc.at(
                span.start,
                format!("test '{}' ({}) needs {what}", t.name, kind.name()),
            ))
        }
    };
    // What a run would refuse of the URL's options and the reply field, `check`
    // refuses at their line (MQTT's qos, keep_alive, subscribers; an empty field).
    if let Some((url, p)) = t
        .url
        .as_deref()
        .and_then(|u| Some((u, crate::load::proto::by_url(u)?)))
    {
        p.check(url)
            .map_err(|e| doc.at(doc.key_offset(span.start, "url"), e))?;
    }
    if let Some(url) = t.url.as_deref() {
        for (what, f) in files_named(&beside_the_suite(doc.path, url)) {
            crate::os::file::check(Path::new(&f), what, crate::os::file::MAX_INPUT)
                .map_err(|e| doc.at(doc.key_offset(span.start, "url"), e))?;
        }
    }
    if let Some(f) = &t.reply_field {
        crate::load::proto::field_path(f).map_err(|e| {
            let msg = e.to_string().replacen("--reply-field", "reply_field =", 1);
            doc.at(doc.key_offset(span.start, "reply_field"), msg)
        })?;
    }
    let expect_failure = match &t.expect {
        None => false,
        Some(e) if e.get_ref() == "failed" => true,
        Some(e) if e.get_ref() == "passed" => false,
        Some(e) => {
            return Err(doc.at(
                e.span().start,
                format!("expect: '{}': give \"failed\" (the test shows a defect being caught: its failure passes the suite) or \"passed\" (the default)", e.get_ref()),
            ))
        }
    };
    let spec = spec(doc, kind, t, has_target, &needs)?;
    Ok(Test {
        name: t.name.clone(),
        kind,
        repeat: t.repeat.unwrap_or(1).max(1),
        matrix: t
            .matrix
            .iter()
            .map(|(k, vs)| {
                (
                    k.clone(),
                    vs.iter()
                        .map(|v| match v {
                            toml::Value::String(s) => s.clone(),
                            other => other.to_string(),
                        })
                        .collect(),
                )
            })
            .collect(),
        gates,
        harness_gates,
        expect_failure,
        interval: doc.opt_dur(&t.interval, "interval", Duration::from_millis(250), false)?,
        profile: t.profile,
        spec,
    })
}

/// A suite's name without `[suite] name`: its file's stem, or — for a file named after
/// the tool (`strainline.toml`, what `init` writes) or `suite.toml` — its directory's
/// name, the project it tests (so that reports do not all read "strainline").
pub fn default_name(path: &Path) -> String {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    if !matches!(stem.as_str(), "strainline" | "suite") {
        return stem;
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::canonicalize(dir)
        .ok()
        .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()))
        .filter(|n| !n.is_empty())
        .unwrap_or(stem)
}

/// The workload of a load kind: a URL (or scenario) or a command.
fn workload(
    doc: &Doc,
    kind: Kind,
    t: &RawTest,
    has_target: bool,
    needs: &dyn Fn(bool, &str) -> Result<()>,
) -> Result<Workload> {
    // A bench of a command workload may address a service strainline did not start.
    let bench_without_target = kind == Kind::Bench && t.command.is_some();
    needs(
        t.url.is_some() || t.command.is_some(),
        "url = \"http://127.0.0.1:{{port}}/…\" (or, for a command workload, command = [\"…\"])",
    )?;
    needs(
        t.url.is_none() || t.command.is_none(),
        "either url or command (a command workload), not both",
    )?;
    if !bench_without_target {
        needs(has_target, "a [target] to start")?;
    }
    if t.reply_field.is_some() {
        if let Some(schemes) =
            crate::load::proto::taken_elsewhere(t.url.as_deref().unwrap_or(""), "reply_field")
        {
            needs(
                false,
                &format!("a {schemes} url for reply_field (it matches a WebSocket's replies to its messages)"),
            )?;
        }
    }
    let tls = t
        .url
        .as_deref()
        .is_some_and(|u| u.starts_with("https://") || crate::load::proto::is_tls(u));
    needs(
        !tls || t.cacert.is_some() || t.insecure == Some(true),
        "cacert = \"FILE\" (the server's certificate or its CA, PEM, beside the suite) or insecure = true for a TLS url",
    )?;
    let pipelines = t.url.as_deref().is_some_and(crate::load::proto::pipelines);
    needs(
        t.streams.is_none_or(|m| m < 2) || t.http2 == Some(true) || pipelines,
        "http2 = true for streams (requests in flight on one connection are HTTP/2's, gRPC's or a pipelining protocol's such as Redis)",
    )?;
    Ok(Workload {
        url: t.url.as_deref().map(|u| beside_the_suite(doc.path, u)),
        scenario: match &t.scenario {
            Some(sc) => {
                let p = doc
                    .path
                    .parent()
                    .unwrap_or(Path::new("."))
                    .join(sc.get_ref());
                crate::load::scenario::load(&p)
                    .map_err(|e| doc.at(sc.span().start, format!("scenario: {e}")))?;
                Some(p)
            }
            None => None,
        },
        // A body makes an HTTP request a POST; a WebSocket message or an MQTT publish
        // has no method (GET opens the WebSocket).
        method: t.method.clone().unwrap_or_else(|| {
            let http = t.url.as_deref().is_none_or(|u| u.starts_with("http"));
            if t.body.is_some() && http {
                "POST".into()
            } else {
                "GET".into()
            }
        }),
        body: t.body.clone(),
        headers: t.headers.clone(),
        command: t.command.clone(),
        connections: t.connections,
        threads: t.threads,
        timeout: doc.opt_dur(&t.timeout, "timeout", Duration::from_secs(10), false)?,
        setup: t.setup.clone(),
        http2: t.http2.unwrap_or(false),
        streams: t.streams.unwrap_or(1),
        cacert_pem: match &t.cacert {
            Some(f) => {
                let p = doc
                    .path
                    .parent()
                    .unwrap_or(Path::new("."))
                    .join(f.get_ref());
                Some(crate::os::file::read(&p, "cacert").map_err(|e| doc.at(f.span().start, e))?)
            }
            None => None,
        },
        insecure: t.insecure.unwrap_or(false),
        reply_field: t.reply_field.clone(),
    })
}

/// A share as written (`"1%"`), from 0% to `at_most`: a bare number is refused with the fix.
fn share(doc: &Doc, v: &Spanned<toml::Value>, key: &str, at_most: f64) -> Result<f64> {
    let parsed = match v.get_ref() {
        toml::Value::String(s) => crate::units::parse_fraction(s),
        toml::Value::Float(f) => crate::units::parse_fraction(&f.to_string())
            .map_err(|e| crate::Error::usage(format!("{e}, in quotes: \"{f}%\""))),
        toml::Value::Integer(i) => crate::units::parse_fraction(&i.to_string())
            .map_err(|e| crate::Error::usage(format!("{e}, in quotes: \"{i}%\""))),
        other => Err(crate::Error::usage(format!(
            "{other} is not a percentage: write it as \"1%\""
        ))),
    };
    match parsed {
        Ok(f) if f <= at_most => Ok(f),
        Ok(_) => Err(doc.at(
            v.span().start,
            format!(
                "{key}: out of range, give a share from 0% to {}%",
                at_most * 100.0
            ),
        )),
        Err(e) => Err(doc.at(v.span().start, format!("{key}: {e}"))),
    }
}

/// A size in bytes as written (`17MiB`), within its range.
fn size(doc: &Doc, b: &Spanned<String>, limit: limits::Limit, example: &str) -> Result<f64> {
    let v = b.get_ref();
    let n = bytes(v).ok_or_else(|| {
        let bare = v.trim().parse::<f64>().is_ok();
        doc.at(
            b.span().start,
            if bare {
                format!(
                    "{}: '{v}' has no unit: {v} what? write \"{v}MiB\", \"{v}KiB\" or \"{v}B\"",
                    limit.key
                )
            } else {
                format!("{}: '{v}' is not a size (e.g. {example})", limit.key)
            },
        )
    })?;
    limit.check(n).map_err(|_| {
        doc.at(
            b.span().start,
            format!(
                "{} = \"{v}\": out of range, give a size from {} to {}",
                limit.key,
                crate::units::Bytes(limit.min as u64),
                crate::units::Bytes(limit.max as u64)
            ),
        )
    })
}

fn leak_budget(doc: &Doc, t: &RawTest) -> Result<f64> {
    match &t.leak_budget {
        Some(b) => size(doc, b, limits::LEAK_BUDGET, "10MiB"),
        None => Ok(10.0 * 1048576.0),
    }
}

/// The kind's own spec, with its defaults.
fn spec(
    doc: &Doc,
    kind: Kind,
    t: &RawTest,
    has_target: bool,
    needs: &dyn Fn(bool, &str) -> Result<()>,
) -> Result<Spec> {
    let duration = || doc.opt_dur(&t.duration, "duration", Duration::from_secs(10), true);
    let command = || t.command.clone().unwrap_or_default();
    Ok(match kind {
        Kind::Bench => Spec::Bench(Bench {
            workload: workload(doc, kind, t, has_target, needs)?,
            rate: t.rate,
            duration: duration()?,
        }),
        Kind::Ramp => Spec::Ramp(Ramp {
            workload: workload(doc, kind, t, has_target, needs)?,
            start: t.start.unwrap_or(100.0),
            step: t.step.unwrap_or(100.0),
            step_duration: doc.opt_dur(
                &t.step_duration,
                "step_duration",
                Duration::from_secs(5),
                true,
            )?,
            max_steps: t.max_steps.unwrap_or(50),
            slo_p99: t
                .slo_p99
                .as_ref()
                .map(|s| doc.dur(s, "slo_p99", false))
                .transpose()?,
            max_error_rate: t
                .max_error_rate
                .as_ref()
                .map(|v| share(doc, v, "max_error_rate", 1.0))
                .transpose()?
                .unwrap_or(0.01),
        }),
        Kind::Soak => Spec::Soak(Soak {
            workload: workload(doc, kind, t, has_target, needs)?,
            rate: t.rate.unwrap_or(100.0),
            duration: duration()?,
            leak_budget: leak_budget(doc, t)?,
            horizon: doc.opt_dur(&t.horizon, "horizon", Duration::from_secs(24 * 3600), false)?,
            clients: t.clients,
            client_period: t
                .client_period
                .as_ref()
                .map(|s| doc.dur(s, "client_period", false))
                .transpose()?,
            ram: match &t.ram {
                Some(b) => Some(size(doc, b, limits::RAM, "4GiB")?),
                None => None,
            },
        }),
        Kind::Rounds => Spec::Rounds(Rounds {
            workload: workload(doc, kind, t, has_target, needs)?,
            rounds: t.rounds.unwrap_or(10),
            ops: t.ops.unwrap_or(1000),
            quiesce_url: t.quiesce_url.clone(),
            settle: doc.opt_dur(&t.settle, "settle", Duration::from_millis(500), true)?,
            leak_budget: leak_budget(doc, t)?,
        }),
        Kind::Crash => {
            needs(t.command.is_some(), "command = [\"…\"] (the work to kill)")?;
            needs(
                t.verify.is_some(),
                "verify = [\"…\"] (the check after each kill)",
            )?;
            let kill_after = match &t.kill_after {
                Some(k) => {
                    let v = k.get_ref();
                    let (a, b) = v.split_once("..").unwrap_or((v, v));
                    let at = |e: String| doc.at(k.span().start, e);
                    let p = |s: &str| {
                        parse_duration(s)
                            .map_err(|e| format!("kill_after: {e} (write e.g. 100ms..2s)"))
                            .and_then(|d| {
                                limits::PAUSE.duration(d).map_err(|_| {
                                    format!(
                                        "kill_after = \"{v}\": out of range, give durations from 0s to {:?} (e.g. 100ms..2s)",
                                        Duration::from_secs_f64(limits::LONGEST)
                                    )
                                })
                            })
                            .map_err(at)
                    };
                    let (lo, hi) = (p(a)?, p(b)?);
                    if lo > hi {
                        return Err(at(format!(
                            "kill_after = \"{v}\": the range is reversed: write the earlier time first ({b}..{a})"
                        )));
                    }
                    (lo.mul_f64(doc.time_scale), hi.mul_f64(doc.time_scale))
                }
                None => (
                    Duration::from_millis(100).mul_f64(doc.time_scale),
                    Duration::from_secs(1).mul_f64(doc.time_scale),
                ),
            };
            Spec::Crash(Crash {
                command: command(),
                iterations: t.iterations.unwrap_or(10),
                kill_after,
                kill_at_log: t
                    .kill_at_log
                    .as_ref()
                    .map(|r| doc.regex(r, "kill_at_log"))
                    .transpose()?,
                verify: t.verify.clone().unwrap_or_default(),
            })
        }
        Kind::Scale => {
            needs(t.command.is_some(), "command = [\"…\", \"{{size}}\"]")?;
            needs(
                t.sizes.len() >= 3,
                "sizes = [N1, N2, N3, …] (at least three)",
            )?;
            Spec::Scale(Scale {
                command: command(),
                sizes: t.sizes.clone(),
            })
        }
        Kind::Harness => {
            needs(
                t.command.is_some(),
                "command = [\"…\"] (the harness binary)",
            )?;
            Spec::Harness(Harness { command: command() })
        }
    })
}

/// `[compare]`: the significance level and tolerance bands for `strainline compare`.
fn compare(doc: &Doc, c: &RawCompare) -> Result<CompareSpec> {
    let mut compare = CompareSpec::default();
    if let Some(a) = &c.alpha {
        if !(*a.get_ref() > 0.0 && *a.get_ref() < 1.0) {
            return Err(doc.at(a.span().start, "alpha: must be between 0 and 1 (e.g. 0.05)"));
        }
        compare.alpha = Some(*a.get_ref());
    }
    compare.band = c
        .band
        .as_ref()
        .map(|b| share(doc, b, "band", 10.0))
        .transpose()?;
    let mut bands = BTreeMap::new();
    for (metric, v) in &c.bands {
        bands.insert(
            metric.clone(),
            share(doc, v, &format!("bands.{metric}"), 10.0)?,
        );
    }
    compare.bands = bands;
    Ok(compare)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_grpc_url_s_proto_is_found_beside_the_suite() {
        use super::beside_the_suite;
        let suite = std::path::Path::new("/srv/perf/suite.toml");
        assert_eq!(
            beside_the_suite(suite, "grpc://h:1/a.B/C?proto=api/x.proto"),
            "grpc://h:1/a.B/C?proto=/srv/perf/api/x.proto"
        );
        assert_eq!(
            beside_the_suite(suite, "grpc://h:1/a.B/C?proto=/abs/x.proto"),
            "grpc://h:1/a.B/C?proto=/abs/x.proto"
        );
        // Other URLs are as written, even with a query that looks alike.
        assert_eq!(
            beside_the_suite(suite, "http://h:1/x?proto=y"),
            "http://h:1/x?proto=y"
        );
    }

    use super::*;

    /// The backticked names on the line of docs/suites.md that starts with `lead`,
    /// after the heading `heading` (or anywhere, when `heading` is empty).
    fn documented(text: &str, heading: &str, lead: &str) -> Vec<String> {
        let from = if heading.is_empty() {
            0
        } else {
            text.find(heading)
                .unwrap_or_else(|| panic!("docs/suites.md has no '{heading}'"))
        };
        let line = text[from..]
            .lines()
            .find(|l| l.starts_with(lead))
            .unwrap_or_else(|| panic!("no '{lead}' line after '{heading}' in docs/suites.md"));
        line.split('`')
            .skip(1)
            .step_by(2)
            .map(String::from)
            .collect()
    }

    #[test]
    fn the_docs_list_every_kinds_keys_as_the_parser_takes_them() {
        let text = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/suites.md"),
        )
        .unwrap();
        assert_eq!(
            documented(&text, "", "Workload keys"),
            WORKLOAD_KEYS,
            "docs/suites.md's workload keys differ from WORKLOAD_KEYS"
        );
        for kind in Kind::TESTS {
            let heading = format!("### {} — ", kind.name());
            assert_eq!(
                documented(&text, &heading, "Keys of its own"),
                own_keys(kind),
                "docs/suites.md's keys of {} differ from the parser's",
                kind.name()
            );
        }
    }
}
