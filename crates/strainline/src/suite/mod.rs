//! The suite file: a TOML description of the target, the tests and their gates, checked
//! before anything runs — unknown keys, wrong types, bad durations and gates on metrics
//! a test does not produce are refused as `FILE:LINE:COLUMN: what is wrong` — and
//! expanded into concrete cases (matrix × repetitions).

pub mod gate;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use crate::metrics::Unit;
use crate::units::parse_duration;
use gate::Gate;

pub use crate::metrics::Kind;
pub use crate::placeholders::substitute;
pub use crate::sut::spec::{Ready, TargetSpec};

/// The metrics a case of `kind` produces, by name and unit: what its gates may name.
/// Patterns of the catalogue (`watch_*_cpu`, `log_*`) are filled in by the suite.
pub fn kind_metrics(kind: Kind) -> Vec<(&'static str, Unit)> {
    let mut m: Vec<(&str, Unit)> = crate::metrics::of_kind(kind)
        .filter(|d| !d.name.contains('*'))
        .map(|d| (d.name, d.unit))
        .collect();
    m.sort_by_key(|x| x.0);
    m
}

/// Log analysis: regexes counted per case.
#[derive(Debug, Clone, Default)]
pub struct LogSpec {
    pub errors: Vec<regex_lite::Regex>,
    pub warnings: Vec<regex_lite::Regex>,
    pub classes: Vec<(String, regex_lite::Regex)>,
}

/// One request sent after the target is ready, before a test measures.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetupRequest {
    #[serde(default = "default_post")]
    pub method: String,
    pub path: String,
    #[serde(default)]
    pub body: String,
}

fn default_post() -> String {
    "POST".into()
}

/// A `[[test]]`, with every duration already parsed (and scaled by `--time-scale`).
#[derive(Debug, Clone)]
pub struct Test {
    pub name: String,
    pub kind: Kind,
    pub repeat: u32,
    pub matrix: Vec<(String, Vec<String>)>,
    pub gates: Vec<Gate>,
    /// Gates naming metrics a harness prints, checked after it ran.
    pub harness_gates: Vec<String>,
    pub interval: Duration,
    // HTTP workload
    pub url: Option<String>,
    /// A scenario file (relative to the suite), run against `url`'s host.
    pub scenario: Option<PathBuf>,
    pub method: String,
    pub body: Option<String>,
    pub headers: BTreeMap<String, String>,
    pub rate: Option<f64>,
    pub connections: Option<usize>,
    pub duration: Duration,
    pub threads: Option<usize>,
    pub setup: Vec<SetupRequest>,
    // ramp
    pub start: f64,
    pub step: f64,
    pub step_duration: Duration,
    pub max_steps: u32,
    pub slo_p99: Option<Duration>,
    pub max_error_rate: f64,
    // soak
    pub leak_budget: f64,
    pub horizon: Duration,
    pub clients: Option<u64>,
    pub client_period: Option<Duration>,
    pub ram: Option<f64>,
    // rounds
    pub rounds: u32,
    pub ops: u64,
    pub quiesce_url: Option<String>,
    pub settle: Duration,
    // crash, scale, harness
    pub command: Option<Vec<String>>,
    pub iterations: u32,
    pub kill_after: (Duration, Duration),
    pub kill_at_log: Option<regex_lite::Regex>,
    pub verify: Option<Vec<String>>,
    pub sizes: Vec<u64>,
    /// Record the target's CPU stacks with `perf` during the case: a flame graph.
    pub profile: bool,
}

/// How a `[[watch]]` finds its processes.
#[derive(Debug, Clone)]
pub enum WatchBy {
    /// The pid in this file.
    PidFile(PathBuf),
    /// Processes with this executable name (as in `ps -o comm`).
    Name(String),
    /// Processes whose command line matches this regex.
    Cmdline(regex_lite::Regex),
}

/// A further process to monitor beside the target (the database or web server in front
/// of it), reported side by side.
#[derive(Debug, Clone)]
pub struct WatchSpec {
    pub name: String,
    pub by: WatchBy,
}

/// A checked suite.
#[derive(Debug, Clone)]
pub struct Suite {
    pub name: String,
    pub path: PathBuf,
    pub target: Option<TargetSpec>,
    pub logs: LogSpec,
    pub watches: Vec<WatchSpec>,
    pub tests: Vec<Test>,
    /// `[compare]` settings, stored with each run for `strainline compare`.
    pub compare: CompareSpec,
}

/// Tolerance bands and significance level for comparisons of this suite's runs.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct CompareSpec {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alpha: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub band: Option<f64>,
    pub bands: BTreeMap<String, f64>,
}

/// One concrete case: a test with its matrix values and repetition.
#[derive(Debug, Clone)]
pub struct Case {
    pub test: usize,
    pub name: String,
    pub vars: BTreeMap<String, String>,
    pub repetition: u32,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSuite {
    suite: Option<RawMeta>,
    target: Option<RawTarget>,
    logs: Option<RawLogs>,
    #[serde(default)]
    watch: Vec<Spanned<RawWatch>>,
    #[serde(default)]
    test: Vec<Spanned<RawTest>>,
    compare: Option<RawCompare>,
}

/// `[compare]`: how `strainline compare` judges this suite's runs.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCompare {
    alpha: Option<Spanned<f64>>,
    band: Option<Spanned<toml::Value>>,
    #[serde(default)]
    bands: BTreeMap<String, Spanned<toml::Value>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWatch {
    name: String,
    pid_file: Option<String>,
    process: Option<String>,
    cmdline: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMeta {
    name: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTarget {
    build: Option<Vec<String>>,
    command: Option<Spanned<Vec<String>>>,
    attach_pid_file: Option<String>,
    #[serde(default)]
    shell: bool,
    #[serde(default)]
    env: BTreeMap<String, String>,
    cwd: Option<String>,
    ready: Option<Spanned<String>>,
    ready_timeout: Option<Spanned<String>>,
    stop_signal: Option<Spanned<String>>,
    stop_grace: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLogs {
    #[serde(default)]
    errors: Vec<Spanned<String>>,
    #[serde(default)]
    warnings: Vec<Spanned<String>>,
    #[serde(default)]
    classes: BTreeMap<String, Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTest {
    name: String,
    kind: Spanned<String>,
    repeat: Option<u32>,
    #[serde(default)]
    matrix: BTreeMap<String, Vec<toml::Value>>,
    #[serde(default)]
    gates: Vec<Spanned<String>>,
    interval: Option<Spanned<String>>,
    url: Option<String>,
    scenario: Option<Spanned<String>>,
    method: Option<String>,
    body: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    rate: Option<f64>,
    connections: Option<usize>,
    duration: Option<Spanned<String>>,
    threads: Option<usize>,
    #[serde(default)]
    setup: Vec<SetupRequest>,
    start: Option<f64>,
    step: Option<f64>,
    step_duration: Option<Spanned<String>>,
    max_steps: Option<u32>,
    slo_p99: Option<Spanned<String>>,
    max_error_rate: Option<f64>,
    leak_budget: Option<Spanned<String>>,
    horizon: Option<Spanned<String>>,
    clients: Option<u64>,
    client_period: Option<Spanned<String>>,
    ram: Option<Spanned<String>>,
    rounds: Option<u32>,
    ops: Option<u64>,
    quiesce_url: Option<String>,
    settle: Option<Spanned<String>>,
    command: Option<Vec<String>>,
    iterations: Option<u32>,
    kill_after: Option<Spanned<String>>,
    kill_at_log: Option<Spanned<String>>,
    verify: Option<Vec<String>>,
    #[serde(default)]
    sizes: Vec<u64>,
    #[serde(default)]
    profile: bool,
}

/// Parses `1024`, `17MiB`, `2GiB` into bytes.
fn bytes(s: &str) -> Option<f64> {
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let n: f64 = s[..split].parse().ok()?;
    let scale = match s[split..].trim() {
        "" | "B" => 1.0,
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

/// The metric counting a log class: `log_` and the class name in snake case
/// ("profile collision" → `log_profile_collision`).
pub fn log_class_metric(class: &str) -> String {
    let snake: String = class
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect();
    format!("log_{}", snake.trim_matches('_'))
}

/// Reads and checks a suite; `time_scale` multiplies every duration (0.01 runs a 2 h
/// soak in 72 s).
pub fn load(path: &Path, time_scale: f64) -> Result<Suite, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    parse(&text, path, time_scale)
}

pub fn parse(text: &str, path: &Path, time_scale: f64) -> Result<Suite, String> {
    let at = |offset: usize, msg: String| crate::located::message(path, text, offset, &msg);
    let raw: RawSuite = toml::from_str(text).map_err(|e| {
        at(
            e.span().map_or(0, |s| s.start),
            e.message().trim().to_string(),
        )
    })?;
    // Durations are checked as written, then scaled.
    let dur = |s: &Spanned<String>, key: &str, scaled: bool| -> Result<Duration, String> {
        let d =
            parse_duration(s.get_ref()).map_err(|e| at(s.span().start, format!("{key}: {e}")))?;
        Ok(if scaled { d.mul_f64(time_scale) } else { d })
    };
    let opt_dur = |s: &Option<Spanned<String>>,
                   key: &str,
                   default: Duration,
                   scaled: bool|
     -> Result<Duration, String> {
        match s {
            Some(s) => dur(s, key, scaled),
            None => Ok(if scaled {
                default.mul_f64(time_scale)
            } else {
                default
            }),
        }
    };
    let regex = |s: &Spanned<String>, key: &str| {
        regex_lite::Regex::new(s.get_ref()).map_err(|e| {
            at(
                s.span().start,
                format!("{key}: not a regular expression: {e}"),
            )
        })
    };
    let target = match &raw.target {
        Some(t) => {
            match (&t.command, &t.attach_pid_file) {
                (Some(c), None) if c.get_ref().is_empty() => {
                    return Err(at(
                        c.span().start,
                        "target.command is empty: give the argv, e.g. [\"./server\", \"--port\", \"{{port}}\"]".into(),
                    ))
                }
                (Some(_), None) | (None, Some(_)) => {}
                _ => {
                    return Err(at(
                        0,
                        "[target] needs exactly one of command = [...] (start it) or attach_pid_file = \"...\" (watch a running one)"
                            .into(),
                    ))
                }
            }
            let ready = match &t.ready {
                None => Ready::Delay(Duration::from_millis(500)),
                Some(r) => {
                    let v = r.get_ref();
                    if v.starts_with("http://") || v.starts_with("https://") {
                        Ready::Http(v.clone())
                    } else if let Some(a) = v.strip_prefix("tcp://") {
                        Ready::Tcp(a.to_string())
                    } else if let Some(re) = v.strip_prefix("log:") {
                        regex_lite::Regex::new(re)
                            .map_err(|e| at(r.span().start, format!("ready: bad regex: {e}")))?;
                        Ready::Log(re.to_string())
                    } else if let Some(d) = v.strip_prefix("delay:") {
                        Ready::Delay(
                            parse_duration(d)
                                .map_err(|e| at(r.span().start, format!("ready: {e}")))?,
                        )
                    } else {
                        return Err(at(
                            r.span().start,
                            format!("ready: '{v}' (expected http://…, tcp://HOST:PORT, log:REGEX or delay:DURATION)"),
                        ));
                    }
                }
            };
            let stop_signal = match &t.stop_signal {
                Some(s) => signal(s.get_ref()).ok_or_else(|| {
                    at(
                        s.span().start,
                        format!(
                            "stop_signal: '{}' (expected TERM, INT, HUP, QUIT, KILL, USR1 or USR2)",
                            s.get_ref()
                        ),
                    )
                })?,
                None => libc::SIGTERM,
            };
            Some(TargetSpec {
                build: t.build.clone(),
                command: t
                    .command
                    .as_ref()
                    .map(|c| c.get_ref().clone())
                    .unwrap_or_default(),
                attach_pid_file: t.attach_pid_file.as_ref().map(PathBuf::from),
                shell: t.shell,
                env: t.env.clone(),
                cwd: t.cwd.as_ref().map(PathBuf::from),
                ready,
                ready_timeout: opt_dur(
                    &t.ready_timeout,
                    "ready_timeout",
                    Duration::from_secs(10),
                    false,
                )?,
                stop_signal,
                stop_grace: opt_dur(&t.stop_grace, "stop_grace", Duration::from_secs(5), false)?,
            })
        }
        None => None,
    };
    let mut logs = LogSpec::default();
    if let Some(l) = &raw.logs {
        for e in &l.errors {
            logs.errors.push(regex(e, "logs.errors")?);
        }
        for w in &l.warnings {
            logs.warnings.push(regex(w, "logs.warnings")?);
        }
        for (name, r) in &l.classes {
            logs.classes.push((name.clone(), regex(r, "logs.classes")?));
        }
    }
    let mut watches = Vec::new();
    for w in &raw.watch {
        let pos = w.span().start;
        let w = w.get_ref();
        let by = match (&w.pid_file, &w.process, &w.cmdline) {
            (Some(p), None, None) => WatchBy::PidFile(PathBuf::from(p)),
            (None, Some(n), None) => WatchBy::Name(n.clone()),
            (None, None, Some(c)) => WatchBy::Cmdline(regex(c, "watch.cmdline")?),
            _ => {
                return Err(at(
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
            return Err(at(
                pos,
                format!(
                    "watch '{}': a name of letters, digits and _ (it names metrics)",
                    w.name
                ),
            ));
        }
        watches.push(WatchSpec {
            name: w.name.clone(),
            by,
        });
    }
    // Metrics the suite adds to every kind with a target: its watches and log classes.
    let watch_metrics: Vec<(String, Unit)> = watches
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
    let mut tests = Vec::new();
    for t in &raw.test {
        let pos = t.span().start;
        let t = t.get_ref();
        let kind = Kind::parse_test(t.kind.get_ref()).ok_or_else(|| {
            at(
                t.kind.span().start,
                format!("kind: '{}' (expected one of: bench, ramp, soak, rounds, crash, scale, harness)", t.kind.get_ref()),
            )
        })?;
        let mut metrics = kind_metrics(kind);
        if kind.has_target() {
            metrics.extend(watch_metrics.iter().map(|(n, u)| (n.as_str(), *u)));
        }
        let mut gates = Vec::new();
        let mut harness_gates = Vec::new();
        for g in &t.gates {
            match gate::parse(g.get_ref(), &metrics) {
                Ok(parsed) => gates.push(parsed),
                Err((_, msg)) if kind == Kind::Harness && msg.starts_with("unknown metric") => {
                    harness_gates.push(g.get_ref().clone())
                }
                Err((off, msg)) => {
                    return Err(at(g.span().start + 1 + off, format!("gate: {msg}")))
                }
            }
        }
        let needs = |present: bool, what: &str| -> Result<(), String> {
            if present {
                Ok(())
            } else {
                Err(at(
                    pos,
                    format!("test '{}' ({}) needs {what}", t.name, kind.name()),
                ))
            }
        };
        match kind {
            Kind::Bench if t.command.is_some() => {
                needs(
                    t.url.is_none(),
                    "either url or command (a command workload), not both",
                )?;
            }
            Kind::Bench | Kind::Ramp | Kind::Soak | Kind::Rounds => {
                needs(
                    t.url.is_some() || t.command.is_some(),
                    "url = \"http://127.0.0.1:{{port}}/…\" (or, for a command workload, command = [\"…\"])",
                )?;
                needs(
                    t.url.is_none() || t.command.is_none(),
                    "either url or command, not both",
                )?;
                needs(target.is_some(), "a [target] to start")?;
            }
            Kind::Crash => {
                needs(t.command.is_some(), "command = [\"…\"] (the work to kill)")?;
                needs(
                    t.verify.is_some(),
                    "verify = [\"…\"] (the check after each kill)",
                )?;
            }
            Kind::Scale => {
                needs(t.command.is_some(), "command = [\"…\", \"{{size}}\"]")?;
                needs(
                    t.sizes.len() >= 3,
                    "sizes = [N1, N2, N3, …] (at least three)",
                )?;
            }
            Kind::Harness => needs(
                t.command.is_some(),
                "command = [\"…\"] (the harness binary)",
            )?,
            Kind::Load | Kind::Monitor => unreachable!("not a test kind"),
        }
        let kill_after = match &t.kill_after {
            Some(k) => {
                let v = k.get_ref();
                let (a, b) = v.split_once("..").unwrap_or((v, v));
                let p = |s: &str| {
                    parse_duration(s).map_err(|e| {
                        at(
                            k.span().start,
                            format!("kill_after: {e} (write e.g. 100ms..2s)"),
                        )
                    })
                };
                (p(a)?.mul_f64(time_scale), p(b)?.mul_f64(time_scale))
            }
            None => (
                Duration::from_millis(100).mul_f64(time_scale),
                Duration::from_secs(1).mul_f64(time_scale),
            ),
        };
        let leak_budget = match &t.leak_budget {
            Some(b) => bytes(b.get_ref()).ok_or_else(|| {
                at(
                    b.span().start,
                    format!("leak_budget: '{}' (e.g. 10MiB)", b.get_ref()),
                )
            })?,
            None => 10.0 * 1048576.0,
        };
        let ram = match &t.ram {
            Some(b) => Some(bytes(b.get_ref()).ok_or_else(|| {
                at(
                    b.span().start,
                    format!("ram: '{}' (e.g. 4GiB)", b.get_ref()),
                )
            })?),
            None => None,
        };
        tests.push(Test {
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
            interval: opt_dur(&t.interval, "interval", Duration::from_millis(250), false)?,
            url: t.url.clone(),
            scenario: match &t.scenario {
                Some(sc) => {
                    let p = path.parent().unwrap_or(Path::new(".")).join(sc.get_ref());
                    crate::load::scenario::load(&p)
                        .map_err(|e| at(sc.span().start, format!("scenario: {e}")))?;
                    Some(p)
                }
                None => None,
            },
            method: t.method.clone().unwrap_or_else(|| {
                if t.body.is_some() {
                    "POST".into()
                } else {
                    "GET".into()
                }
            }),
            body: t.body.clone(),
            headers: t.headers.clone(),
            rate: t.rate,
            connections: t.connections,
            duration: opt_dur(&t.duration, "duration", Duration::from_secs(10), true)?,
            threads: t.threads,
            setup: t.setup.clone(),
            start: t.start.unwrap_or(100.0),
            step: t.step.unwrap_or(100.0),
            step_duration: opt_dur(
                &t.step_duration,
                "step_duration",
                Duration::from_secs(5),
                true,
            )?,
            max_steps: t.max_steps.unwrap_or(50),
            slo_p99: t
                .slo_p99
                .as_ref()
                .map(|s| dur(s, "slo_p99", false))
                .transpose()?,
            max_error_rate: t.max_error_rate.unwrap_or(0.01),
            leak_budget,
            horizon: opt_dur(&t.horizon, "horizon", Duration::from_secs(24 * 3600), false)?,
            clients: t.clients,
            client_period: t
                .client_period
                .as_ref()
                .map(|s| dur(s, "client_period", false))
                .transpose()?,
            ram,
            rounds: t.rounds.unwrap_or(10),
            ops: t.ops.unwrap_or(1000),
            quiesce_url: t.quiesce_url.clone(),
            settle: opt_dur(&t.settle, "settle", Duration::from_millis(500), true)?,
            command: t.command.clone(),
            iterations: t.iterations.unwrap_or(10),
            kill_after,
            kill_at_log: t
                .kill_at_log
                .as_ref()
                .map(|r| regex(r, "kill_at_log"))
                .transpose()?,
            verify: t.verify.clone(),
            sizes: t.sizes.clone(),
            profile: t.profile,
        });
    }
    if tests.is_empty() {
        return Err(at(0, "the suite has no [[test]]".into()));
    }
    let fraction = |v: &Spanned<toml::Value>, key: &str| -> Result<f64, String> {
        let parsed = match v.get_ref() {
            toml::Value::String(s) => crate::units::parse_fraction(s),
            toml::Value::Float(f) => crate::units::parse_fraction(&f.to_string()),
            toml::Value::Integer(i) => crate::units::parse_fraction(&i.to_string()),
            other => Err(format!(
                "{other} is not a percentage: write it as \"20%\" or 0.2"
            )),
        };
        parsed.map_err(|e| at(v.span().start, format!("{key}: {e}")))
    };
    let mut compare = CompareSpec::default();
    if let Some(c) = &raw.compare {
        if let Some(a) = &c.alpha {
            if !(*a.get_ref() > 0.0 && *a.get_ref() < 1.0) {
                return Err(at(
                    a.span().start,
                    "alpha: must be between 0 and 1 (e.g. 0.05)".into(),
                ));
            }
            compare.alpha = Some(*a.get_ref());
        }
        compare.band = c.band.as_ref().map(|b| fraction(b, "band")).transpose()?;
        for (metric, v) in &c.bands {
            compare
                .bands
                .insert(metric.clone(), fraction(v, &format!("bands.{metric}"))?);
        }
    }
    let name = raw.suite.and_then(|s| s.name).unwrap_or_else(|| {
        path.file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default()
    });
    Ok(Suite {
        name,
        path: path.to_path_buf(),
        target,
        logs,
        watches,
        tests,
        compare,
    })
}

impl Suite {
    /// Every case, in order: each test's matrix (cartesian product) × its repetitions.
    pub fn cases(&self) -> Vec<Case> {
        let mut out = Vec::new();
        for (ti, t) in self.tests.iter().enumerate() {
            let mut combos: Vec<BTreeMap<String, String>> = vec![BTreeMap::new()];
            for (k, vs) in &t.matrix {
                combos = combos
                    .into_iter()
                    .flat_map(|c| {
                        vs.iter().map(move |v| {
                            let mut c = c.clone();
                            c.insert(k.clone(), v.clone());
                            c
                        })
                    })
                    .collect();
            }
            for vars in combos {
                for r in 0..t.repeat {
                    let mut name = t.name.clone();
                    if !vars.is_empty() {
                        let parts: Vec<String> =
                            vars.iter().map(|(k, v)| format!("{k}={v}")).collect();
                        name.push_str(&format!("[{}]", parts.join(",")));
                    }
                    if t.repeat > 1 {
                        name.push_str(&format!("#{}", r + 1));
                    }
                    out.push(Case {
                        test: ti,
                        name,
                        vars: vars.clone(),
                        repetition: r,
                    });
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SUITE: &str = r#"
[target]
command = ["strainline-testbed", "serve", "--listen", "127.0.0.1:{{port}}", "--workers", "{{workers}}"]
ready = "http://127.0.0.1:{{port}}/health"

[[test]]
name = "bench"
kind = "bench"
repeat = 2
matrix = { workers = [1, 2] }
url = "http://127.0.0.1:{{port}}/health"
rate = 200
duration = "2s"
gates = ["latency_p99 < 200ms", "error_rate < 0.1%"]
"#;

    #[test]
    fn expands_the_matrix_and_repetitions() {
        let s = parse(SUITE, Path::new("s.toml"), 1.0).unwrap();
        let names: Vec<String> = s.cases().into_iter().map(|c| c.name).collect();
        assert_eq!(
            names,
            [
                "bench[workers=1]#1",
                "bench[workers=1]#2",
                "bench[workers=2]#1",
                "bench[workers=2]#2"
            ]
        );
        assert_eq!(s.tests[0].gates.len(), 2);
        assert_eq!(
            substitute("--workers {{workers}}", &s.cases()[2].vars),
            "--workers 2"
        );
    }

    #[test]
    fn time_scale_shrinks_durations() {
        let s = parse(SUITE, Path::new("s.toml"), 0.01).unwrap();
        assert_eq!(s.tests[0].duration, Duration::from_millis(20));
    }

    #[test]
    fn mistakes_are_located() {
        let e = parse(
            &SUITE.replace("repeat = 2", "repaet = 2"),
            Path::new("s.toml"),
            1.0,
        )
        .unwrap_err();
        assert!(e.starts_with("s.toml:9:1: unknown field `repaet`"), "{e}");
        let e = parse(
            &SUITE.replace("\"2s\"", "\"2 fortnights\""),
            Path::new("s.toml"),
            1.0,
        )
        .unwrap_err();
        assert!(
            e.starts_with("s.toml:13:12: duration: '2 fortnights' is not a duration"),
            "{e}"
        );
        let e = parse(
            &SUITE.replace("latency_p99 <", "p99 <"),
            Path::new("s.toml"),
            1.0,
        )
        .unwrap_err();
        assert!(
            e.starts_with("s.toml:14:11: gate: unknown metric 'p99'"),
            "{e}"
        );
        let e = parse(
            &SUITE.replace("kind = \"bench\"", "kind = \"benchmark\""),
            Path::new("s.toml"),
            1.0,
        )
        .unwrap_err();
        assert!(e.contains("s.toml:8:8: kind: 'benchmark'"), "{e}");
    }
}
