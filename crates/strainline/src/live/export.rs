//! Live figures for Prometheus and OpenTelemetry: `--metrics-listen ADDR` serves them in
//! the Prometheus text format at `/metrics`, `--otlp URL` pushes them over OTLP/HTTP
//! (JSON) every few seconds and at the end. Fed by the same calls as the terminal view
//! (a second of load, a sample of the target); a 48-hour soak is watched in Grafana.

use crate::error::Category;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::measure::Sample;

static ON: AtomicBool = AtomicBool::new(false);

/// Upper bounds of the latency histogram's buckets, seconds (Prometheus' `le`).
pub const BUCKETS: [f64; 16] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0,
];

/// The figures, cumulative since the start (counters) or the latest (gauges).
#[derive(Debug, Default, Clone)]
pub struct Figures {
    pub sent: u64,
    pub by_status: BTreeMap<u16, u64>,
    pub by_error: BTreeMap<String, u64>,
    /// Responses per bucket (not cumulative), the last one past the largest bound.
    pub latency_buckets: [u64; BUCKETS.len() + 1],
    pub latency_sum_seconds: f64,
    pub latency_count: u64,
    pub offered_rate: Option<f64>,
    pub achieved_rate: f64,
    pub lag_p99_seconds: f64,
    pub target: Option<Sample>,
    /// The target's thread states so far (thread-seconds by group and state).
    pub threads: Option<crate::measure::threads::Tally>,
    /// The suite case (or monitored command) running now.
    pub case: Option<String>,
}

fn figures() -> &'static Mutex<Figures> {
    static F: OnceLock<Mutex<Figures>> = OnceLock::new();
    F.get_or_init(|| Mutex::new(Figures::default()))
}

/// Whether figures are being exported (the feeders skip their work otherwise).
pub fn on() -> bool {
    ON.load(Ordering::Relaxed)
}

/// A second of load ended.
pub fn second(interval: &crate::observe::LoadSecond) {
    if !on() {
        return;
    }
    let mut f = figures().lock().unwrap();
    f.sent += interval.sent;
    for (s, n) in interval.by_status {
        *f.by_status.entry(*s).or_default() += n;
    }
    for (k, n) in &interval.by_error {
        *f.by_error.entry(k.to_string()).or_default() += n;
    }
    for v in interval.corrected.iter_recorded() {
        let secs = v.value_iterated_to() as f64 / 1e6;
        let n = v.count_at_value();
        let i = BUCKETS
            .iter()
            .position(|&b| secs <= b)
            .unwrap_or(BUCKETS.len());
        f.latency_buckets[i] += n;
        f.latency_sum_seconds += secs * n as f64;
        f.latency_count += n;
    }
    f.offered_rate = interval.offered;
    f.achieved_rate = interval.completed as f64;
    f.lag_p99_seconds = interval.lag.value_at_quantile(0.99) as f64 / 1e6;
}

/// A case starts: the figures that follow are its (the counters keep adding up over the
/// run; the `strainline_case_info` series says which case each stretch of them is).
pub fn case(name: &str) {
    if on() {
        figures().lock().unwrap().case = Some(name.to_string());
    }
}

/// A label value in the text format: backslash, double quote and newline escaped.
fn label_value(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// A sample of the target's tree.
pub fn sample(s: &Sample) {
    if on() {
        let mut s = s.clone();
        s.top.clear();
        figures().lock().unwrap().target = Some(s);
    }
}

/// A reading of the target's thread states.
pub fn threads(t: &crate::measure::threads::Tally) {
    if on() {
        figures().lock().unwrap().threads = Some(t.clone());
    }
}

/// Thread groups exported at most (the busiest by thread-seconds): a target that names
/// every thread differently does not make a series per thread.
const THREAD_GROUPS: usize = 20;

/// `(group, state, thread-seconds)` of the busiest groups, states with any time.
fn thread_seconds(t: &crate::measure::threads::Tally) -> Vec<(&str, &'static str, f64)> {
    let mut groups: Vec<_> = t.groups.iter().collect();
    groups.sort_by(|a, b| b.1.states.total().total_cmp(&a.1.states.total()));
    groups
        .into_iter()
        .take(THREAD_GROUPS)
        .flat_map(|(name, g)| {
            crate::measure::threads::State::ALL
                .into_iter()
                .filter(|st| g.states.get(*st) > 0.0)
                .map(move |st| (name.as_str(), st.key(), g.states.get(st)))
        })
        .collect()
}

/// The figures in the Prometheus text exposition format (0.0.4).
pub fn prometheus(f: &Figures, generator_cpu: f64) -> String {
    let mut o = String::new();
    head(
        &mut o,
        "strainline_requests_sent_total",
        "counter",
        "Requests sent.",
    );
    let _ = writeln!(o, "strainline_requests_sent_total {}", f.sent);
    head(
        &mut o,
        "strainline_requests_total",
        "counter",
        "Responses by HTTP status (a command's exit code).",
    );
    for (s, n) in &f.by_status {
        let _ = writeln!(o, "strainline_requests_total{{status=\"{s}\"}} {n}");
    }
    head(
        &mut o,
        "strainline_errors_total",
        "counter",
        "Requests that got no response, by kind.",
    );
    for (k, n) in &f.by_error {
        let _ = writeln!(o, "strainline_errors_total{{kind=\"{k}\"}} {n}");
    }
    head(
        &mut o,
        "strainline_latency_seconds",
        "histogram",
        "Latency from the intended send time (coordinated-omission corrected).",
    );
    let mut cum = 0;
    for (i, b) in BUCKETS.iter().enumerate() {
        cum += f.latency_buckets[i];
        let _ = writeln!(o, "strainline_latency_seconds_bucket{{le=\"{b}\"}} {cum}");
    }
    cum += f.latency_buckets[BUCKETS.len()];
    let _ = writeln!(o, "strainline_latency_seconds_bucket{{le=\"+Inf\"}} {cum}");
    let _ = writeln!(
        o,
        "strainline_latency_seconds_sum {}",
        f.latency_sum_seconds
    );
    let _ = writeln!(o, "strainline_latency_seconds_count {}", f.latency_count);
    if let Some(r) = f.offered_rate {
        head(
            &mut o,
            "strainline_offered_rate",
            "gauge",
            "Requests per second the schedule offered in the last second.",
        );
        let _ = writeln!(o, "strainline_offered_rate {r}");
    }
    head(
        &mut o,
        "strainline_achieved_rate",
        "gauge",
        "Responses in the last second.",
    );
    let _ = writeln!(o, "strainline_achieved_rate {}", f.achieved_rate);
    head(
        &mut o,
        "strainline_schedule_lag_p99_seconds",
        "gauge",
        "How late the generator sent, p99 of the last second (open model).",
    );
    let _ = writeln!(
        o,
        "strainline_schedule_lag_p99_seconds {}",
        f.lag_p99_seconds
    );
    head(
        &mut o,
        "strainline_generator_cpu_seconds_total",
        "counter",
        "CPU strainline itself used.",
    );
    let _ = writeln!(o, "strainline_generator_cpu_seconds_total {generator_cpu}");
    if let Some(case) = &f.case {
        head(
            &mut o,
            "strainline_case_info",
            "gauge",
            "The suite case (or monitored command) running now: always 1, named by its label.",
        );
        let _ = writeln!(
            o,
            "strainline_case_info{{case=\"{}\"}} 1",
            label_value(case)
        );
    }
    target(&mut o, f);
    o
}

/// A metric's `# HELP` and `# TYPE` lines.
fn head(o: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

/// The target's figures, when it is watched: its tree's gauges and its threads'
/// seconds by state.
fn target(o: &mut String, f: &Figures) {
    if let Some(t) = &f.target {
        for (name, help, v) in [
            (
                "strainline_target_rss_bytes",
                "Resident memory of the target's process tree.",
                t.rss_bytes as f64,
            ),
            (
                "strainline_target_cpu_cores",
                "CPU of the target's tree, cores.",
                t.cpu_cores,
            ),
            (
                "strainline_target_threads",
                "Threads of the target's tree.",
                t.threads as f64,
            ),
            (
                "strainline_target_fds",
                "Open file descriptors of the target's tree.",
                t.fds as f64,
            ),
            (
                "strainline_target_processes",
                "Live processes in the target's tree.",
                f64::from(t.processes),
            ),
        ] {
            head(o, name, "gauge", help);
            let _ = writeln!(o, "{name} {v}");
        }
    }
    if let Some(t) = &f.threads {
        head(
            o,
            "strainline_target_thread_seconds_total",
            "counter",
            "Thread-seconds the target's threads spent in each state (on_cpu, run_queue, lock, socket, storage, sleep, …), by thread name; rate() is threads in that state.",
        );
        for (group, state, v) in thread_seconds(t) {
            let _ = writeln!(
                o,
                "strainline_target_thread_seconds_total{{group=\"{}\",state=\"{state}\"}} {v}",
                label_value(group)
            );
        }
    }
}

/// The figures as an OTLP/HTTP JSON `ExportMetricsServiceRequest`.
pub fn otlp(f: &Figures, generator_cpu: f64, start_ns: u64) -> serde_json::Value {
    use serde_json::json;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos() as u64;
    let point = |v: f64, attrs: serde_json::Value| json!({"startTimeUnixNano": start_ns.to_string(), "timeUnixNano": now.to_string(), "asDouble": v, "attributes": attrs});
    let attr = |k: &str, v: String| json!([{"key": k, "value": {"stringValue": v}}]);
    let sum = |name: &str, unit: &str, points: Vec<serde_json::Value>| json!({"name": name, "unit": unit, "sum": {"aggregationTemporality": 2, "isMonotonic": true, "dataPoints": points}});
    let gauge = |name: &str, unit: &str, v: f64| json!({"name": name, "unit": unit, "gauge": {"dataPoints": [point(v, json!([]))]}});
    let mut metrics = vec![
        sum(
            "strainline_requests_sent",
            "{request}",
            vec![point(f.sent as f64, json!([]))],
        ),
        sum(
            "strainline_requests",
            "{request}",
            f.by_status
                .iter()
                .map(|(s, n)| point(*n as f64, attr("status", s.to_string())))
                .collect(),
        ),
        sum(
            "strainline_errors",
            "{request}",
            f.by_error
                .iter()
                .map(|(k, n)| point(*n as f64, attr("kind", k.clone())))
                .collect(),
        ),
        json!({"name": "strainline_latency", "unit": "s", "histogram": {"aggregationTemporality": 2, "dataPoints": [{
            "startTimeUnixNano": start_ns.to_string(), "timeUnixNano": now.to_string(),
            "count": f.latency_count.to_string(), "sum": f.latency_sum_seconds,
            "bucketCounts": f.latency_buckets.iter().map(u64::to_string).collect::<Vec<_>>(),
            "explicitBounds": BUCKETS.to_vec(), "attributes": []}]}}),
        gauge("strainline_achieved_rate", "{request}/s", f.achieved_rate),
        gauge("strainline_schedule_lag_p99", "s", f.lag_p99_seconds),
        sum(
            "strainline_generator_cpu",
            "s",
            vec![point(generator_cpu, json!([]))],
        ),
    ];
    if let Some(r) = f.offered_rate {
        metrics.push(gauge("strainline_offered_rate", "{request}/s", r));
    }
    if let Some(case) = &f.case {
        metrics.push(json!({"name": "strainline_case_info", "gauge": {"dataPoints": [point(1.0, attr("case", case.clone()))]}}));
    }
    if let Some(t) = &f.target {
        metrics.push(gauge("strainline_target_rss", "By", t.rss_bytes as f64));
        metrics.push(gauge("strainline_target_cpu", "{core}", t.cpu_cores));
        metrics.push(gauge(
            "strainline_target_threads",
            "{thread}",
            t.threads as f64,
        ));
        metrics.push(gauge("strainline_target_fds", "{fd}", t.fds as f64));
    }
    if let Some(t) = &f.threads {
        metrics.push(sum(
            "strainline_target_thread_seconds",
            "s",
            thread_seconds(t)
                .into_iter()
                .map(|(group, state, v)| {
                    let mut a = attr("group", group.to_string());
                    a.as_array_mut()
                        .unwrap()
                        .push(json!({"key": "state", "value": {"stringValue": state}}));
                    point(v, a)
                })
                .collect(),
        ));
    }
    json!({"resourceMetrics": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "strainline"}}]},
        "scopeMetrics": [{"scope": {"name": "strainline", "version": env!("CARGO_PKG_VERSION")}, "metrics": metrics}]
    }]})
}

/// Where the figures go.
#[derive(Debug, Clone, Default)]
pub struct Targets {
    pub listen: Option<String>,
    pub otlp: Option<String>,
}

/// The running exporters; dropping it sends a last OTLP push and stops them.
pub struct Export {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
    otlp: Option<String>,
    start_ns: u64,
}

/// An OTLP receiver's `http://HOST:PORT/PATH` URL (the path `/v1/metrics` when none
/// is given), checked.
fn http_url(url: &str) -> crate::error::Result<String> {
    use std::net::ToSocketAddrs;
    let rest = url.strip_prefix("http://").ok_or_else(|| {
        format!("--otlp '{url}': give an http:// URL of an OTLP/HTTP receiver, e.g. http://127.0.0.1:4318/v1/metrics (https is not supported: use a local collector)")
    }).usage()?;
    let (host, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/v1/metrics"),
    };
    host.to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| format!("--otlp '{url}': cannot resolve '{host}' (HOST:PORT)"))
        .usage()?;
    Ok(format!("http://{host}{path}"))
}

/// One OTLP/HTTP JSON push; an error when the receiver did not take it.
fn push(to: &str, body: &str) -> std::io::Result<()> {
    let status = crate::sut::probe::send(
        "POST",
        to,
        &[("content-type", "application/json")],
        body.as_bytes(),
        Duration::from_secs(2),
    );
    match status {
        Some(s) if s < 300 => Ok(()),
        Some(s) => Err(std::io::Error::other(format!("the receiver answered {s}"))),
        None => Err(std::io::Error::other("no answer")),
    }
}

/// Starts what `targets` asks for; `None` when it asks for nothing.
pub fn start(targets: &Targets) -> crate::error::Result<Option<Export>> {
    if targets.listen.is_none() && targets.otlp.is_none() {
        return Ok(None);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    let start_ns = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos() as u64;
    if let Some(addr) = &targets.listen {
        let listener = TcpListener::bind(addr).usage_with(|e| {
            format!("--metrics-listen {addr}: {e} (give a free HOST:PORT, e.g. 127.0.0.1:9464)")
        })?;
        listener.set_nonblocking(true).environment()?;
        let stop = stop.clone();
        threads.push(std::thread::spawn(move || serve(listener, &stop)));
    }
    let receiver = targets.otlp.as_deref().map(http_url).transpose()?;
    if let Some(to) = receiver.clone() {
        let stop = stop.clone();
        threads.push(std::thread::spawn(move || {
            let mut last = std::time::Instant::now();
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(100));
                if last.elapsed() >= Duration::from_secs(5) {
                    last = std::time::Instant::now();
                    let f = figures().lock().unwrap().clone();
                    let _ = push(
                        &to,
                        &otlp(&f, crate::os::process::own_cpu_seconds(), start_ns).to_string(),
                    );
                }
            }
        }));
    }
    *figures().lock().unwrap() = Figures::default();
    ON.store(true, Ordering::SeqCst);
    Ok(Some(Export {
        stop,
        threads,
        otlp: receiver,
        start_ns,
    }))
}

/// Scrapes answered at once, at most; one more is closed at once.
const MAX_SCRAPES: usize = 64;

/// How long a scraper has to send its request, and to take the answer.
const SCRAPE_TIMEOUT: Duration = Duration::from_secs(2);

/// Accepts scrapes until the run ends, each on its own thread: a slow or silent client
/// holds only its own thread (for at most two [`SCRAPE_TIMEOUT`]s), never the next
/// scrape nor the run's end.
fn serve(listener: TcpListener, stop: &AtomicBool) {
    let busy = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((s, _)) => {
                if busy.fetch_add(1, Ordering::SeqCst) >= MAX_SCRAPES {
                    busy.fetch_sub(1, Ordering::SeqCst);
                    continue;
                }
                let mine = busy.clone();
                let spawned = std::thread::Builder::new()
                    .name("metrics-scrape".into())
                    .spawn(move || {
                        answer(s);
                        mine.fetch_sub(1, Ordering::SeqCst);
                    });
                if spawned.is_err() {
                    // The thread never ran: its slot is free again.
                    busy.fetch_sub(1, Ordering::SeqCst);
                }
            }
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// One scrape: the request within [`SCRAPE_TIMEOUT`] (read as `serve` reads one),
/// then the figures.
fn answer(mut s: TcpStream) {
    let _ = s.set_write_timeout(Some(SCRAPE_TIMEOUT));
    let path = match crate::serve::http::read(&mut s, SCRAPE_TIMEOUT) {
        Ok(req) => req.path,
        Err(crate::serve::http::Bad::Gone) => return,
        Err(crate::serve::http::Bad::Malformed(_)) => "/".to_string(),
    };
    let (status, body) = if path == "/metrics" {
        let f = figures().lock().unwrap().clone();
        (
            "200 OK",
            prometheus(&f, crate::os::process::own_cpu_seconds()),
        )
    } else {
        ("404 Not Found", "strainline serves /metrics\n".to_string())
    };
    let _ = write!(
        s,
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}

impl Drop for Export {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        // The last figures, whole: a push receiver sees the run's totals.
        if let Some(to) = &self.otlp {
            let f = figures().lock().unwrap().clone();
            if let Err(e) = push(
                to,
                &otlp(&f, crate::os::process::own_cpu_seconds(), self.start_ns).to_string(),
            ) {
                tracing::warn!("note: the last OTLP push to {to} failed: {e}");
            }
        }
        ON.store(false, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_series_the_grafana_dashboard_queries_is_exported() {
        let dashboard: serde_json::Value =
            serde_json::from_str(include_str!("../../../../docs/grafana-dashboard.json")).unwrap();
        let mut threads = crate::measure::threads::Tally::default();
        let mut states = crate::measure::threads::States::default();
        states.add(crate::measure::threads::State::Lock, 1.0);
        threads.groups.insert(
            "worker".into(),
            crate::measure::threads::Group {
                threads: 1,
                states,
                all_busy: 0.0,
            },
        );
        let mut f = Figures {
            offered_rate: Some(1.0),
            target: Some(Sample::default()),
            threads: Some(threads),
            case: Some("case".into()),
            ..Figures::default()
        };
        f.by_status.insert(200, 1);
        f.by_error.insert("timeout".into(), 1);
        let text = prometheus(&f, 0.0);
        let mut checked = 0;
        for panel in dashboard["panels"].as_array().unwrap() {
            for t in panel["targets"].as_array().unwrap() {
                let expr = t["expr"].as_str().unwrap();
                for name in expr
                    .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .filter(|w| w.starts_with("strainline_"))
                {
                    assert!(
                        text.contains(&format!("{name}{{")) || text.contains(&format!("{name} ")),
                        "{name} (in {expr}) is not exported"
                    );
                    checked += 1;
                }
            }
        }
        assert!(checked >= 12, "{checked}");
    }

    #[test]
    fn the_text_format_has_cumulative_buckets_and_every_series() {
        let mut f = Figures {
            sent: 10,
            latency_count: 9,
            latency_sum_seconds: 0.03,
            offered_rate: Some(10.0),
            ..Figures::default()
        };
        f.by_status.insert(200, 9);
        f.by_error.insert("timeout".into(), 1);
        f.latency_buckets[3] = 4; // ≤ 1 ms
        f.latency_buckets[6] = 5; // ≤ 10 ms
        let text = prometheus(&f, 1.5);
        for line in [
            "strainline_requests_total{status=\"200\"} 9",
            "strainline_errors_total{kind=\"timeout\"} 1",
            "strainline_latency_seconds_bucket{le=\"0.0005\"} 0",
            "strainline_latency_seconds_bucket{le=\"0.001\"} 4",
            "strainline_latency_seconds_bucket{le=\"0.01\"} 9",
            "strainline_latency_seconds_bucket{le=\"+Inf\"} 9",
            "strainline_latency_seconds_count 9",
            "strainline_offered_rate 10",
            "strainline_generator_cpu_seconds_total 1.5",
            "# TYPE strainline_latency_seconds histogram",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} not in\n{text}");
        }
        // No target watched: no target series.
        assert!(!text.contains("strainline_target_rss_bytes"));
        let doc = otlp(&f, 1.5, 1);
        let metrics = doc["resourceMetrics"][0]["scopeMetrics"][0]["metrics"]
            .as_array()
            .unwrap();
        let requests = metrics
            .iter()
            .find(|m| m["name"] == "strainline_requests")
            .unwrap();
        assert_eq!(requests["sum"]["dataPoints"][0]["asDouble"], 9.0);
        assert_eq!(requests["sum"]["aggregationTemporality"], 2);
    }

    #[test]
    fn thread_states_are_counters_by_group_and_state_with_hostile_names_escaped() {
        use crate::measure::threads::{Group, State, States, Tally};
        let mut t = Tally {
            seconds: 10.0,
            ..Tally::default()
        };
        let mut states = States::default();
        states.add(State::Lock, 61.5);
        states.add(State::OnCpu, 4.25);
        t.groups.insert(
            "worker\"}\n evil".into(),
            Group {
                threads: 8,
                states,
                all_busy: 0.0,
            },
        );
        for i in 0..30 {
            let mut s = States::default();
            s.add(State::Idle, f64::from(i));
            t.groups.insert(
                format!("pool-{i}"),
                Group {
                    threads: 1,
                    states: s,
                    all_busy: 0.0,
                },
            );
        }
        let f = Figures {
            threads: Some(t),
            ..Figures::default()
        };
        let text = prometheus(&f, 0.0);
        assert!(text.contains("# TYPE strainline_target_thread_seconds_total counter"));
        assert!(
            text.lines().any(|l| l
                == r#"strainline_target_thread_seconds_total{group="worker\"}\n evil",state="lock"} 61.5"#),
            "{text}"
        );
        assert!(text.contains(r#"group="worker\"}\n evil",state="on_cpu"} 4.25"#));
        // States without time are left out; at most 20 groups, the busiest.
        assert!(!text.contains(r#"evil",state="idle""#));
        let groups: std::collections::BTreeSet<&str> = text
            .lines()
            .filter(|l| l.starts_with("strainline_target_thread_seconds_total{"))
            .map(|l| l.split(",state=").next().unwrap())
            .collect();
        assert_eq!(groups.len(), 20, "{groups:?}");
        assert!(
            !text.contains("group=\"pool-10\""),
            "an idle group kept over busier ones"
        );
        let doc = otlp(&f, 0.0, 1);
        let m = doc["resourceMetrics"][0]["scopeMetrics"][0]["metrics"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["name"] == "strainline_target_thread_seconds")
            .unwrap()
            .clone();
        let lock = m["sum"]["dataPoints"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["attributes"][1]["value"]["stringValue"] == "lock")
            .unwrap();
        assert_eq!(lock["asDouble"], 61.5);
        assert_eq!(
            lock["attributes"][0]["value"]["stringValue"],
            "worker\"}\n evil"
        );
    }

    #[test]
    fn the_running_case_is_a_label_escaped_for_the_text_format() {
        let f = Figures {
            case: Some("push \"hot\" path\\x\nnext".into()),
            ..Figures::default()
        };
        let text = prometheus(&f, 0.0);
        assert!(
            text.lines()
                .any(|l| l == r#"strainline_case_info{case="push \"hot\" path\\x\nnext"} 1"#),
            "{text}"
        );
        let doc = otlp(&f, 0.0, 1);
        let info = doc["resourceMetrics"][0]["scopeMetrics"][0]["metrics"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["name"] == "strainline_case_info")
            .unwrap();
        let attr = &info["gauge"]["dataPoints"][0]["attributes"][0];
        assert_eq!(attr["key"], "case");
        assert_eq!(attr["value"]["stringValue"], "push \"hot\" path\\x\nnext");
    }
}
