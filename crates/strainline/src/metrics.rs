//! The one table of metrics: every figure strainline stores has a row here with its
//! unit, which way is better, which kinds of case produce it, and whether it is an
//! extreme (set by a handful of requests: shown by `compare`, not judged, unless a band
//! names it). Gates, the metrics stored, compare, the spread table and the reports all
//! read this table, so a unit cannot go missing and a gate cannot refuse a metric that
//! is stored.

use serde::Serialize;

pub use crate::kind::Kind;

/// What produced a case, for the catalogue: a test kind or the `load` / `monitor`
/// commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Source {
    Test(Kind),
    /// `strainline load`.
    Load,
    /// `strainline monitor`.
    Monitor,
}

impl From<Kind> for Source {
    fn from(k: Kind) -> Source {
        Source::Test(k)
    }
}

/// As its name (`bench`, `load`): how the catalogue reads as JSON.
impl Serialize for Source {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl Source {
    pub fn name(self) -> &'static str {
        match self {
            Source::Test(k) => k.name(),
            Source::Load => "load",
            Source::Monitor => "monitor",
        }
    }
}

/// A metric's unit: how it is stored, written in gates and printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Unit {
    /// Milliseconds; gates may say `us`, `ms`, `s`.
    Ms,
    /// Seconds; gates may say `us`, `ms`, `s`, `m`, `h`.
    Seconds,
    /// Bytes; gates may say `B`, `KiB`, `MiB`, `GiB` (KB/MB/GB as binary too).
    Bytes,
    /// Mebibytes (a per-client memory figure).
    MiB,
    /// A ratio 0..1; gates say `0.1%` (a bare number is refused: 0.1 of what?).
    Ratio,
    /// A yes/no finding: `none` (0) or `detected` (1).
    Finding,
    ReqPerSec,
    Cores,
    Count,
    Clients,
    /// Percent of one core.
    PercentOfCore,
    /// A plain number without a unit (an exponent, an exit code).
    Plain,
}

impl Unit {
    /// The unit as stored and printed (`format_value` reads it).
    pub fn symbol(self) -> &'static str {
        match self {
            Unit::Ms => "ms",
            Unit::Seconds => "s",
            Unit::Bytes => "bytes",
            Unit::MiB => "MiB",
            Unit::Ratio => "ratio",
            Unit::Finding => "finding",
            Unit::ReqPerSec => "req/s",
            Unit::Cores => "cores",
            Unit::Count => "count",
            Unit::Clients => "clients",
            Unit::PercentOfCore => "% of core",
            Unit::Plain => "",
        }
    }
}

/// Which way is better.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    Lower,
    Higher,
    /// Context, not judged (what was sent, the offered rate).
    None,
}

impl Direction {
    pub fn name(self) -> &'static str {
        match self {
            Direction::Lower => "lower",
            Direction::Higher => "higher",
            Direction::None => "none",
        }
    }

    /// A stored name back; anything else (a store written by hand) is not judged.
    pub fn parse(name: &str) -> Direction {
        match name {
            "lower" => Direction::Lower,
            "higher" => Direction::Higher,
            _ => Direction::None,
        }
    }
}

impl std::fmt::Display for Direction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One row of the catalogue.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Def {
    /// The name; `*` stands for a name from the suite (`watch_*_cpu`, `log_*`).
    pub name: &'static str,
    pub unit: Unit,
    pub direction: Direction,
    /// What stores it: the test kinds whose cases do, `load`, `monitor`.
    pub kinds: &'static [Source],
    /// Set by a few requests (max, p99.9): compare shows it, judges it only when banded.
    pub extreme: bool,
    /// A figure of the target's processes: measured only where strainline watches it
    /// (a `[target] url` alone gives none).
    pub target: bool,
    pub about: &'static str,
}

use Direction::{Higher, Lower};
const BENCH: Source = Source::Test(Kind::Bench);
const RAMP: Source = Source::Test(Kind::Ramp);
const SOAK: Source = Source::Test(Kind::Soak);
const ROUNDS: Source = Source::Test(Kind::Rounds);
const CRASH: Source = Source::Test(Kind::Crash);
const SCALE: Source = Source::Test(Kind::Scale);
const HARNESS: Source = Source::Test(Kind::Harness);
const SPIKE: Source = Source::Test(Kind::Spike);
const LOAD: Source = Source::Load;
const MONITOR: Source = Source::Monitor;

const LOADED: &[Source] = &[BENCH, SOAK, SPIKE, LOAD];
const TARGET: &[Source] = &[BENCH, RAMP, SOAK, ROUNDS, SPIKE, HARNESS, MONITOR];
const WATCHED: &[Source] = &[BENCH, RAMP, SOAK, ROUNDS, SPIKE];

const fn def(
    name: &'static str,
    unit: Unit,
    direction: Direction,
    kinds: &'static [Source],
    about: &'static str,
) -> Def {
    Def {
        name,
        unit,
        direction,
        kinds,
        extreme: false,
        target: false,
        about,
    }
}

/// A row that is a figure of the target's processes.
const fn of_target(d: Def) -> Def {
    Def { target: true, ..d }
}

const fn extreme(name: &'static str, about: &'static str) -> Def {
    Def {
        name,
        unit: Unit::Ms,
        direction: Lower,
        kinds: LOADED,
        extreme: true,
        target: false,
        about,
    }
}

/// Every metric strainline stores.
pub const METRICS: &[Def] = &[
    // The load engine's figures.
    def(
        "throughput",
        Unit::ReqPerSec,
        Higher,
        &[BENCH, SOAK, ROUNDS, LOAD],
        "completed requests (or operations) per second",
    ),
    def(
        "latency_p50",
        Unit::Ms,
        Lower,
        LOADED,
        "median latency from the intended send time",
    ),
    def(
        "latency_p90",
        Unit::Ms,
        Lower,
        LOADED,
        "90th percentile latency from the intended send time",
    ),
    def(
        "latency_p95",
        Unit::Ms,
        Lower,
        LOADED,
        "95th percentile latency from the intended send time (every peer's default)",
    ),
    def(
        "latency_p99",
        Unit::Ms,
        Lower,
        LOADED,
        "99th percentile latency from the intended send time",
    ),
    extreme(
        "latency_p999",
        "99.9th percentile latency from the intended send time",
    ),
    def(
        "latency_p*",
        Unit::Ms,
        Lower,
        LOADED,
        "any percentile latency from the intended send time (`latency_p75`, `latency_p99.5`): stored when `--percentiles` or a gate asks for it",
    ),
    extreme(
        "latency_max",
        "the slowest request, from its intended send time",
    ),
    def(
        "service_p50",
        Unit::Ms,
        Lower,
        LOADED,
        "median service time, from the actual send",
    ),
    def(
        "service_p99",
        Unit::Ms,
        Lower,
        LOADED,
        "99th percentile service time, from the actual send",
    ),
    def(
        "checks_failed",
        Unit::Count,
        Lower,
        LOADED,
        "replies that failed a scenario step's check (the script hook's verdict among them), each once however many of its checks failed",
    ),
    def(
        "check.*.pass_rate",
        Unit::Ratio,
        Higher,
        LOADED,
        "the share of a named check's replies that passed it",
    ),
    def(
        "step.*.latency_p95",
        Unit::Ms,
        Lower,
        LOADED,
        "a scenario step's 95th percentile latency, from its intended send time",
    ),
    def(
        "step.*.latency_p99",
        Unit::Ms,
        Lower,
        LOADED,
        "a scenario step's 99th percentile latency, from its intended send time",
    ),
    def(
        "step.*.latency_p*",
        Unit::Ms,
        Lower,
        LOADED,
        "a scenario step's latency at any percentile (`step.login.latency_p75`): stored when `--percentiles` or a gate asks for it",
    ),
    def(
        "group.*.duration_p50",
        Unit::Ms,
        Lower,
        LOADED,
        "the median time a client took to run a group's steps in a row (`group = \"NAME\"`: from its first step's intended time to its last step's reply)",
    ),
    def(
        "group.*.duration_p95",
        Unit::Ms,
        Lower,
        LOADED,
        "the 95th percentile of a group's time in a row (k6's `group_duration`)",
    ),
    def(
        "group.*.duration_p99",
        Unit::Ms,
        Lower,
        LOADED,
        "the 99th percentile of a group's time in a row",
    ),
    def(
        "group.*.duration_p*",
        Unit::Ms,
        Lower,
        LOADED,
        "a group's time in a row at any percentile: stored when `--percentiles` or a gate asks for it",
    ),
    def(
        "group.*.latency_p95",
        Unit::Ms,
        Lower,
        LOADED,
        "the 95th percentile latency of a group's steps' requests together",
    ),
    def(
        "group.*.latency_p99",
        Unit::Ms,
        Lower,
        LOADED,
        "the 99th percentile latency of a group's steps' requests together",
    ),
    def(
        "group.*.latency_p*",
        Unit::Ms,
        Lower,
        LOADED,
        "a group's steps' latency at any percentile: stored when `--percentiles` or a gate asks for it",
    ),
    def(
        "group.*.error_rate",
        Unit::Ratio,
        Lower,
        LOADED,
        "a group's steps' failed sends over their sends",
    ),
    def(
        "tag.*.latency_p95",
        Unit::Ms,
        Lower,
        LOADED,
        "the 95th percentile latency of every step with a tag (`tag.page=admin.latency_p95`)",
    ),
    def(
        "tag.*.latency_p99",
        Unit::Ms,
        Lower,
        LOADED,
        "the 99th percentile latency of every step with a tag",
    ),
    def(
        "tag.*.latency_p*",
        Unit::Ms,
        Lower,
        LOADED,
        "a tag's steps' latency at any percentile: stored when `--percentiles` or a gate asks for it",
    ),
    def(
        "tag.*.error_rate",
        Unit::Ratio,
        Lower,
        LOADED,
        "the failed sends of every step with a tag over their sends",
    ),
    custom("metric.*.count", Unit::Count, "how many values a scenario's own metric (`[metrics]`) was fed"),
    custom("metric.*.total", Unit::Plain, "a counter's sum of what it was fed"),
    custom("metric.*.per_second", Unit::Plain, "a counter's sum per second of the run"),
    custom("metric.*.rate", Unit::Ratio, "a rate's share of true values"),
    custom("metric.*.mean", Unit::Plain, "a trend's mean, exact"),
    custom("metric.*.min", Unit::Plain, "a trend's or a gauge's least value, exact"),
    custom("metric.*.max", Unit::Plain, "a trend's or a gauge's most value, exact"),
    custom("metric.*.last", Unit::Plain, "a gauge's last value"),
    custom("metric.*.p*", Unit::Plain, "a trend's percentile, to 3 significant digits (p50, p90, p95, p99, and any a gate or `--percentiles` asks for)"),
    def(
        "step.*.error_rate",
        Unit::Ratio,
        Lower,
        LOADED,
        "a scenario step's failed sends over its sends",
    ),
    def(
        "flow_restarts",
        Unit::Count,
        Lower,
        LOADED,
        "scenario clients that started their flow again (on_failure = \"restart\")",
    ),
    def(
        "error_rate",
        Unit::Ratio,
        Lower,
        LOADED,
        "failed requests, and requests due but unanswered (cut in flight or never sent), over every request that was due",
    ),
    def(
        "delivery_loss",
        Unit::Ratio,
        Lower,
        LOADED,
        "MQTT: the share of deliveries that never reached a subscriber (every subscriber expects every acknowledged publish)",
    ),
    def(
        "delivery_p99",
        Unit::Ms,
        Lower,
        LOADED,
        "MQTT: 99th percentile of publish-to-subscriber latency, from the publisher's intended send time",
    ),
    def(
        "sent",
        Unit::Count,
        Direction::None,
        &[LOAD],
        "requests sent",
    ),
    def(
        "completed",
        Unit::Count,
        Direction::None,
        &[LOAD],
        "responses received",
    ),
    def(
        "offered_rate",
        Unit::ReqPerSec,
        Direction::None,
        &[LOAD],
        "what the open model's schedule offered",
    ),
    def(
        "generator_cpu_seconds",
        Unit::Seconds,
        Lower,
        &[LOAD],
        "CPU the generator's worker threads used",
    ),
    def(
        "schedule_lag_p99",
        Unit::Ms,
        Lower,
        &[LOAD],
        "how late the generator woke for scheduled sends (p99)",
    ),
    // The target, a case's system under test.
    of_target(def(
        "peak_rss",
        Unit::Bytes,
        Lower,
        TARGET,
        "the tree's peak resident memory (see its source)",
    )),
    of_target(def(
        "target_cpu",
        Unit::Cores,
        Lower,
        &[BENCH, SOAK],
        "the target tree's average CPU during the load",
    )),
    of_target(def(
        "cpu_per_op",
        Unit::Ms,
        Lower,
        &[BENCH],
        "target CPU time per completed request",
    )),
    of_target(def(
        "log_errors",
        Unit::Count,
        Lower,
        WATCHED,
        "target log lines matching [logs] errors",
    )),
    of_target(def(
        "log_warnings",
        Unit::Count,
        Lower,
        WATCHED,
        "target log lines matching [logs] warnings",
    )),
    of_target(def(
        "log_*",
        Unit::Count,
        Lower,
        WATCHED,
        "target log lines of a [logs.classes] class",
    )),
    of_target(def(
        "watch_*_peak_rss",
        Unit::Bytes,
        Lower,
        WATCHED,
        "peak memory of a [[watch]] process",
    )),
    of_target(def(
        "watch_*_cpu",
        Unit::Cores,
        Lower,
        WATCHED,
        "average CPU of a [[watch]] process",
    )),
    // spike
    def(
        "recovery_time",
        Unit::Seconds,
        Lower,
        &[SPIKE],
        "from the spike's end until 3 seconds in a row had their p99 and error rate back within the band of the before-spike ones (not stored when it did not recover)",
    ),
    def(
        "spike_p99",
        Unit::Ms,
        Lower,
        &[SPIKE],
        "the p99 of the requests from the spike's start until the recovery (or the end), from their seconds' histograms merged",
    ),
    def(
        "spike_error_rate",
        Unit::Ratio,
        Lower,
        &[SPIKE],
        "the requests that failed from the spike's start until the recovery (or the end), of those that ended (replies and failures to connect or hear)",
    ),
    def(
        "before_p99",
        Unit::Ms,
        Lower,
        &[SPIKE],
        "the p99 before the spike: the median of its seconds' after the first",
    ),
    of_target(def(
        "rss_left",
        Unit::Bytes,
        Lower,
        &[SPIKE],
        "the target's memory at the end (its last 3 seconds) minus before the spike: what the spike left behind",
    )),
    // ramp
    def(
        "ceiling",
        Unit::ReqPerSec,
        Higher,
        &[RAMP],
        "highest offered rate that met the SLO and kept up",
    ),
    def(
        "knee",
        Unit::ReqPerSec,
        Higher,
        &[RAMP],
        "last rate before latency began its climb",
    ),
    def(
        "max_throughput",
        Unit::ReqPerSec,
        Higher,
        &[RAMP],
        "most completed per second in any step",
    ),
    // soak and rounds
    def(
        "leak",
        Unit::Finding,
        Lower,
        &[SOAK, ROUNDS],
        "a significant, sustained memory growth over budget",
    ),
    def(
        "fd_leak",
        Unit::Finding,
        Lower,
        &[SOAK],
        "a sustained growth of open file descriptors",
    ),
    def(
        "thread_leak",
        Unit::Finding,
        Lower,
        &[SOAK],
        "a sustained growth of threads",
    ),
    def(
        "retained_per_op",
        Unit::Bytes,
        Lower,
        &[SOAK, ROUNDS],
        "memory kept per request or operation",
    ),
    def(
        "rss_growth",
        Unit::Bytes,
        Lower,
        &[SOAK],
        "RSS at the end of the soak less at its start",
    ),
    def(
        "retained_total",
        Unit::Bytes,
        Lower,
        &[ROUNDS],
        "RSS after the last round less before the first",
    ),
    def(
        "degradation",
        Unit::Finding,
        Lower,
        &[ROUNDS],
        "throughput falling over the rounds",
    ),
    def(
        "mib_per_client",
        Unit::MiB,
        Lower,
        &[SOAK],
        "memory growth per client",
    ),
    def(
        "capacity_ideal_clients",
        Unit::Clients,
        Higher,
        &[SOAK],
        "ceiling × client period",
    ),
    def(
        "capacity_safe_clients",
        Unit::Clients,
        Higher,
        &[SOAK],
        "80% of the ideal",
    ),
    def(
        "capacity_ram_clients",
        Unit::Clients,
        Higher,
        &[SOAK],
        "usable RAM / memory per client",
    ),
    // crash, scale, harness
    def(
        "failed_iterations",
        Unit::Count,
        Lower,
        &[CRASH],
        "kills after which verify failed",
    ),
    def(
        "survived_iterations",
        Unit::Count,
        Higher,
        &[CRASH],
        "kills after which verify passed",
    ),
    def(
        "exponent",
        Unit::Plain,
        Lower,
        &[SCALE],
        "cost growth exponent (log–log fit)",
    ),
    def(
        "superlinear",
        Unit::Finding,
        Lower,
        &[SCALE],
        "exponent above 1.3",
    ),
    def(
        "cpu_avg",
        Unit::Cores,
        Lower,
        &[HARNESS, MONITOR],
        "average CPU of the tree",
    ),
    def(
        "duration",
        Unit::Seconds,
        Lower,
        &[HARNESS, MONITOR],
        "wall time",
    ),
    def(
        "exit_code",
        Unit::Plain,
        Lower,
        &[HARNESS],
        "the harness's exit status",
    ),
    // strainline monitor
    def(
        "peak_tree_rss_sampled",
        Unit::Bytes,
        Lower,
        &[MONITOR],
        "largest sampled sum of the tree's RSS",
    ),
    def(
        "cgroup_memory_peak",
        Unit::Bytes,
        Lower,
        &[MONITOR],
        "the cgroup's own memory high-water mark",
    ),
    Def {
        name: "cpu_max",
        unit: Unit::Cores,
        direction: Lower,
        kinds: &[MONITOR],
        extreme: true,
        target: true,
        about: "highest CPU of the tree in one tick",
    },
    def(
        "cpu_seconds",
        Unit::Seconds,
        Lower,
        &[MONITOR],
        "CPU time of the whole tree",
    ),
    def(
        "max_threads",
        Unit::Count,
        Lower,
        &[MONITOR],
        "most threads at once",
    ),
    def(
        "max_fds",
        Unit::Count,
        Lower,
        &[MONITOR],
        "most open file descriptors at once",
    ),
    def(
        "max_processes",
        Unit::Count,
        Direction::None,
        &[MONITOR],
        "most processes at once",
    ),
    def(
        "read_bytes",
        Unit::Bytes,
        Lower,
        &[MONITOR],
        "storage reads the kernel counted",
    ),
    def(
        "write_bytes",
        Unit::Bytes,
        Lower,
        &[MONITOR],
        "storage writes the kernel counted",
    ),
    def(
        "ctx_switches",
        Unit::Count,
        Lower,
        &[MONITOR],
        "context switches of the tree",
    ),
    def(
        "monitor_overhead",
        Unit::PercentOfCore,
        Lower,
        &[MONITOR],
        "strainline's own sampling cost",
    ),
];

/// A row of a scenario's own metric's figure, `metric.*.FIGURE`: in the unit it was fed,
/// which way is better unknown (compare shows it, never judges it).
const fn custom(name: &'static str, unit: Unit, about: &'static str) -> Def {
    Def {
        name,
        unit,
        direction: Direction::None,
        kinds: LOADED,
        extreme: false,
        target: false,
        about,
    }
}

/// Does `name` fit `pattern`? Each `*` stands for one or more characters, and a `*`
/// after `_p` or `.p` at the end for a percentile's number (`latency_p*`: `latency_p75`,
/// `latency_p99.5`; `metric.*.p*`: `metric.items.p95`).
pub fn fits(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == name,
        Some((pre, post)) => {
            let Some(rest) = name.strip_prefix(pre) else {
                return false;
            };
            if post.is_empty() {
                let numbered = pre.ends_with("_p") || pre.ends_with(".p");
                return !rest.is_empty() && (!numbered || percentile(rest).is_some());
            }
            // The star takes as little as it can, then as much as the rest needs.
            rest.char_indices()
                .skip(1)
                .any(|(at, _)| fits(post, &rest[at..]))
        }
    }
}

/// The percentiles a load summary shows unless `--percentiles` says otherwise (p95 is
/// every peer's default).
pub const DEFAULT_PERCENTILES: [f64; 5] = [50.0, 90.0, 95.0, 99.0, 99.9];

/// A percentile from its number as a metric names it (`95`, `99.9`, `97.25`): above 0,
/// below 100, written as [`percentile_label`] writes it (no `095`, no `99.90`), so that
/// one percentile has one name.
pub fn percentile(text: &str) -> Option<f64> {
    let q: f64 = text.parse().ok()?;
    let ok = text.bytes().all(|b| b.is_ascii_digit() || b == b'.')
        && q > 0.0
        && q < 100.0
        && percentile_label(q) == text;
    ok.then_some(q)
}

/// Percentile `q` (99.9) as the quantile an HDR histogram reads (0.999), the double
/// nearest to it: `99.9 / 100.0` is 0.9990000000000001, which takes a rank too many.
pub fn quantile(q: f64) -> f64 {
    // Whole numbers divided once: exact to nine decimals of a percent.
    (q * 1e9).round() / 1e11
}

/// A percentile's number as metrics name it: 95 → `95`, 99.9 → `99.9`.
pub fn percentile_label(q: f64) -> String {
    format!("{q}")
}

/// The percentile a metric's name asks for (`latency_p75`, `step.login.latency_p97.5`,
/// `group.checkout.duration_p90`).
pub fn asked_percentile(metric: &str) -> Option<f64> {
    let at = metric.rfind("_p").max(metric.rfind(".p"))?;
    percentile(&metric[at + 2..])
}

/// The catalogue row of a metric (exact names win over patterns).
pub fn lookup(name: &str) -> Option<&'static Def> {
    METRICS
        .iter()
        .find(|d| d.name == name)
        .or_else(|| METRICS.iter().find(|d| fits(d.name, name)))
}

impl Def {
    /// Is it stored by cases of this kind (or by `load` / `monitor`)?
    pub fn made_by(&self, by: impl Into<Source>) -> bool {
        self.kinds.contains(&by.into())
    }
}

/// The metrics a kind produces, patterns included.
pub fn of_kind(kind: Kind) -> impl Iterator<Item = &'static Def> {
    METRICS.iter().filter(move |d| d.made_by(kind))
}

/// Is this metric an extreme (shown, not judged, by default)? A metric the catalogue
/// does not know (a harness's own) is one when its name says so (`_max`, `_p999`).
pub fn is_extreme(name: &str) -> bool {
    match lookup(name) {
        Some(d) => d.extreme,
        None => name.ends_with("_max") || name.ends_with("_p999"),
    }
}

/// The catalogue as a Markdown table (docs/metrics.md is this, checked by a test).
#[cfg(test)]
fn markdown() -> String {
    let mut out = String::from(
        "| metric | unit | better | stored by | compare | what it is |\n|---|---|---|---|---|---|\n",
    );
    for d in METRICS {
        let kinds: Vec<&str> = d.kinds.iter().map(|k| k.name()).collect();
        out.push_str(&format!(
            "| `{}` | {} | {} | {} | {} | {} |\n",
            d.name,
            match d.unit.symbol() {
                "" => "—",
                s => s,
            },
            d.direction.name(),
            kinds.join(", "),
            if d.extreme {
                "shown, judged only when banded"
            } else if d.direction == Direction::None {
                "shown"
            } else {
                "judged"
            },
            d.about
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docs_list_the_catalogue_as_it_is() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/metrics.md");
        let doc = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            doc.contains(&markdown()),
            "docs/metrics.md is out of date: replace its table with metrics::markdown()'s:\n{}",
            markdown()
        );
    }

    #[test]
    fn names_are_unique_and_patterns_resolve() {
        for (i, a) in METRICS.iter().enumerate() {
            assert!(
                METRICS[i + 1..].iter().all(|b| b.name != a.name),
                "{} twice",
                a.name
            );
            assert!(!a.kinds.is_empty(), "{} has no producer", a.name);
        }
        assert_eq!(lookup("log_errors").unwrap().name, "log_errors");
        assert_eq!(lookup("log_profile_collision").unwrap().name, "log_*");
        assert_eq!(lookup("watch_db_cpu").unwrap().unit, Unit::Cores);
        assert_eq!(
            lookup("watch_db_peak_rss").unwrap().name,
            "watch_*_peak_rss"
        );
        assert!(lookup("watch__cpu").is_none() && lookup("p99").is_none());
    }

    #[test]
    fn any_percentile_has_one_name_and_nothing_else_fits_it() {
        assert_eq!(lookup("latency_p95").unwrap().name, "latency_p95");
        assert_eq!(lookup("latency_p75").unwrap().name, "latency_p*");
        assert_eq!(lookup("latency_p99.5").unwrap().name, "latency_p*");
        assert_eq!(
            lookup("step.log.in.latency_p97.25").unwrap().name,
            "step.*.latency_p*"
        );
        assert_eq!(
            lookup("step.login.latency_p95").unwrap().name,
            "step.*.latency_p95"
        );
        for bad in [
            "latency_p",
            "latency_p0",
            "latency_p100",
            "latency_p075",
            "latency_p99.90",
            "latency_pmax",
            "latency_p-5",
            "latency_p1e1",
            "step..latency_p75",
            "step.x.latency_p",
        ] {
            assert!(lookup(bad).is_none(), "{bad}");
        }
        assert_eq!(asked_percentile("step.a.latency_p99.9"), Some(99.9));
        assert_eq!(asked_percentile("latency_p50"), Some(50.0));
        assert_eq!(asked_percentile("error_rate"), None);
        assert_eq!(quantile(99.9), 0.999);
        assert_eq!(quantile(95.0), 0.95);
        assert!(quantile(99.9999) < 1.0 && quantile(99.9999) > 0.99999);
        assert!(fits("watch_*_peak_rss", "watch_a_b_peak_rss"));
        assert!(!fits("watch_*_peak_rss", "watch__peak_rss"));
    }

    #[test]
    fn extremes_are_the_max_and_p999() {
        assert!(is_extreme("latency_max") && is_extreme("latency_p999"));
        assert!(!is_extreme("latency_p99") && !is_extreme("throughput"));
    }
}
