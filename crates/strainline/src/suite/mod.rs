//! The suite file: a TOML description of the target, the tests and their gates, checked
//! before anything runs — unknown keys, wrong types, bad durations and gates on metrics
//! a test does not produce are refused as `FILE:LINE:COLUMN: what is wrong` — and
//! expanded into concrete cases (matrix × repetitions).

pub mod abort;
#[cfg(test)]
mod fuzz;
pub mod gate;
mod parse;
mod raw;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::metrics::Unit;
use gate::Gate;
pub use parse::{default_name, parse};
pub use raw::schema;

pub use crate::metrics::Kind;
pub use crate::placeholders::substitute;
pub use crate::sut::spec::{Attach, Ready, TargetSpec};

/// The metrics a case of `kind` produces, by name and unit: what its gates may name.
/// Patterns of the catalogue (`watch_*_cpu`, `log_*`) are filled in by the suite; a
/// scenario's own (`check.*.pass_rate`, `step.*.latency_p99`) stay patterns, named by
/// its file.
pub fn kind_metrics(kind: Kind) -> Vec<(&'static str, Unit)> {
    let mut m: Vec<(&str, Unit)> = crate::metrics::of_kind(kind)
        .filter(|d| {
            !d.name.contains('*')
                || ["check.", "step.", "group.", "tag.", "metric.", "latency_p"]
                    .iter()
                    .any(|p| d.name.starts_with(p))
        })
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
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
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

/// A `[[test]]`: the keys every kind shares, and its kind's own spec. Every duration is
/// parsed (and scaled by `--time-scale`).
#[derive(Debug, Clone)]
pub struct Test {
    pub name: String,
    pub kind: Kind,
    pub repeat: u32,
    pub matrix: Vec<(String, Vec<String>)>,
    pub gates: Vec<Gate>,
    /// Gates naming metrics a harness prints, checked after it ran.
    pub harness_gates: Vec<String>,
    /// `expect = "failed"`: the case demonstrates a defect being caught; its failure
    /// is the suite's pass ("caught, as expected"), and its pass a failure.
    pub expect_failure: bool,
    /// The monitor's sampling interval.
    pub interval: Duration,
    /// Record the target's CPU stacks with `perf` during the case: a flame graph.
    pub profile: bool,
    pub spec: Spec,
}

/// What a kind's spec tells the rest of the suite beyond its family; each kind's spec
/// (in its keys' module, `parse/kinds/KIND.rs`) says it.
pub trait Own {
    /// The command a process kind runs.
    fn command(&self) -> Option<&[String]> {
        None
    }

    /// Its texts that take placeholders beside its workload's and its command (a crash
    /// test's `verify`), each with what it is, for a message.
    fn texts(&self) -> Vec<(&'static str, &str)> {
        Vec::new()
    }
}

/// `Spec` (what a test of each kind does: its kind's typed settings), the family enums
/// `LoadTest` and `ProcessTest`, each a whole match, from the table of kinds
/// (`crate::kind`); each kind's spec type is its keys' module's.
macro_rules! specs {
    (
        load: [$($lv:ident $lm:ident { $($lk:ident: $lx:expr),* $(,)? }),* $(,)?],
        process: [$($pv:ident $pm:ident { $($pk:ident: $px:expr),* $(,)? }),* $(,)?] $(,)?
    ) => {
        $(pub use parse::kinds::$lm::$lv;)*
        $(pub use parse::kinds::$pm::$pv;)*

        /// What a test of each kind does.
        #[derive(Debug, Clone)]
        pub enum Spec {
            $($lv($lv),)*
            $($pv($pv),)*
        }

        /// A test that drives load at a target (`kinds::run_http`).
        #[derive(Debug, Clone, Copy)]
        pub enum LoadTest<'a> {
            $($lv(&'a $lv),)*
        }

        /// A test that runs a command of its own (`kinds::run_process`).
        #[derive(Debug, Clone, Copy)]
        pub enum ProcessTest<'a> {
            $($pv(&'a $pv),)*
        }

        impl Spec {
            pub fn family(&self) -> Family<'_> {
                match self {
                    $(Spec::$lv(s) => Family::Load(LoadTest::$lv(s), &s.workload),)*
                    $(Spec::$pv(s) => Family::Process(ProcessTest::$pv(s)),)*
                }
            }

            /// What its kind says of it to the rest of the suite.
            pub fn own(&self) -> &dyn Own {
                match self {
                    $(Spec::$lv(s) => s,)*
                    $(Spec::$pv(s) => s,)*
                }
            }
        }
    };
}
crate::kind::table!(specs);

/// The two families of kinds, run by different code: each match over one is whole.
#[derive(Debug, Clone, Copy)]
pub enum Family<'a> {
    Load(LoadTest<'a>, &'a Workload),
    Process(ProcessTest<'a>),
}

/// The load a bench, ramp, soak or rounds test drives: HTTP requests (a URL or a
/// scenario) or a command as the unit of work.
#[derive(Debug, Clone)]
pub struct Workload {
    pub url: Option<String>,
    /// A scenario file (relative to the suite), run against `url`'s host.
    pub scenario: Option<PathBuf>,
    pub method: String,
    pub body: Option<String>,
    pub headers: BTreeMap<String, String>,
    /// A command workload: each unit of work runs this argv.
    pub command: Option<Vec<String>>,
    /// Closed model: the connections; open model: the most the pool may open.
    pub connections: Option<usize>,
    pub threads: Option<usize>,
    /// Per request or command unit.
    pub timeout: Duration,
    /// Requests sent once the target is ready, before the test measures.
    pub setup: Vec<SetupRequest>,
    /// HTTP/2 (prior knowledge on http://, ALPN on https://), and its requests in flight
    /// per connection.
    pub http2: bool,
    pub streams: usize,
    /// TLS: the certificate (PEM, read from beside the suite) to trust, or any.
    pub cacert_pem: Option<Vec<u8>>,
    /// A client certificate and its key (PEM), for mutual TLS.
    pub client_cert: Option<(Vec<u8>, crate::load::spec::Secret)>,
    pub insecure: bool,
    /// WebSocket: the JSON field a reply shares with its message.
    pub reply_field: Option<String>,
}

impl Test {
    /// The load a load kind drives (none for crash, scale and harness).
    pub fn workload(&self) -> Option<&Workload> {
        match self.spec.family() {
            Family::Load(_, w) => Some(w),
            Family::Process(_) => None,
        }
    }

    /// The command a process kind runs, or a command workload.
    pub fn command(&self) -> Option<&[String]> {
        self.spec
            .own()
            .command()
            .or_else(|| self.workload().and_then(|w| w.command.as_deref()))
    }
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
    /// `[suite] vars`: placeholder defaults, below `--var` and the matrix.
    pub vars: BTreeMap<String, String>,
}

/// Tolerance bands and significance level for comparisons of this suite's runs.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CompareSpec {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alpha: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub band: Option<f64>,
    #[serde(default)]
    pub bands: BTreeMap<String, f64>,
}

impl CompareSpec {
    /// The policy these settings make, with the command line's `--band METRIC=X`
    /// (`default=X` for every metric) and `--alpha` over them.
    pub fn policy(
        &self,
        bands: &[(String, f64)],
        alpha: Option<f64>,
    ) -> crate::analysis::comparison::Policy {
        let mut policy = crate::analysis::comparison::Policy::default();
        policy.alpha = alpha.or(self.alpha).unwrap_or(policy.alpha);
        policy.default_band = self.band.unwrap_or(policy.default_band);
        policy.bands.extend(self.bands.clone());
        for (metric, band) in bands {
            if metric == "default" {
                policy.default_band = *band;
            } else {
                policy.bands.insert(metric.clone(), *band);
            }
        }
        policy
    }
}

/// One concrete case: a test with its matrix values and repetition.
#[derive(Debug, Clone)]
pub struct Case {
    pub test: usize,
    pub name: String,
    pub vars: BTreeMap<String, String>,
    pub repetition: u32,
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
pub fn load(path: &Path, time_scale: f64) -> crate::error::Result<Suite> {
    let text = crate::os::file::read_text(path, "suite")?;
    parse(&text, path, time_scale)
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
        let Spec::Bench(b) = &s.tests[0].spec else {
            panic!("a bench")
        };
        assert_eq!(b.duration, Duration::from_millis(20));
    }

    /// The error for SUITE with `from` replaced by `to`.
    fn refused(from: &str, to: &str) -> String {
        parse(&SUITE.replace(from, to), Path::new("s.toml"), 1.0)
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn mistakes_are_located() {
        let e = refused("repeat = 2", "repaet = 2");
        assert!(
            e.starts_with("s.toml:9:1: test 'bench': unknown key `repaet` — did you mean `repeat`? (a bench test takes: name, kind, repeat,"),
            "{e}"
        );
        // Only the kind's keys: a bench takes no ramp's nor crash's.
        assert!(e.ends_with(", rate, duration)"), "{e}");
        assert!(
            !e.contains("kill_after") && !e.contains("step_duration"),
            "{e}"
        );
        let e = refused("\"2s\"", "\"2 fortnights\"");
        assert!(
            e.starts_with("s.toml:13:12: duration: '2 fortnights' is not a duration"),
            "{e}"
        );
        let e = refused("latency_p99 <", "p99 <");
        assert!(
            e.starts_with("s.toml:14:11: gate: unknown metric 'p99'"),
            "{e}"
        );
        let e = refused("kind = \"bench\"", "kind = \"benchmark\"");
        assert!(e.contains("s.toml:8:8: kind: 'benchmark'"), "{e}");
    }

    #[test]
    fn a_target_on_an_agents_host_is_attached_to_never_started() {
        let e = refused("[target]\n", "[target]\nhost = \"a1\"\n");
        assert!(
            e.starts_with(
                "s.toml:3:8: [target] host = \"...\" watches a process on that agent's machine"
            ),
            "{e}"
        );
        let s = parse(
            &SUITE.replace(
                "command = [\"strainline-testbed\", \"serve\", \"--listen\", \"127.0.0.1:{{port}}\", \"--workers\", \"{{workers}}\"]",
                "host = \"a1\"\nattach_pid_file = \"/run/iot.pid\"",
            ),
            Path::new("s.toml"),
            1.0,
        )
        .unwrap();
        let t = s.target.unwrap();
        assert_eq!(t.host.as_deref(), Some("a1"));
        assert_eq!(
            t.attach,
            Some(crate::sut::spec::Attach::PidFile("/run/iot.pid".into()))
        );
    }

    #[test]
    fn a_key_of_another_kind_is_refused_where_it_is_written() {
        let e = refused("rate = 200", "rate = 200\nslo_p99 = \"5ms\"");
        assert!(
            e.starts_with("s.toml:13:1: test 'bench': 'slo_p99' is not a key of a bench test (it is one of ramp); a bench test takes: url,"),
            "{e}"
        );
    }

    /// Every metric the catalogue says a kind stores may be gated on; an unknown one is
    /// refused with the list of valid ones.
    #[test]
    fn a_gate_may_name_every_metric_its_kind_stores() {
        for &kind in Kind::TESTS {
            let keys = parse::kinds::example(kind);
            let head = format!(
                "[target]\ncommand = [\"t\"]\n[logs.classes]\nslow = \"slow\"\n[[watch]]\nname = \"db\"\nprocess = \"postgres\"\n[[test]]\nname = \"t\"\nkind = \"{}\"\n{keys}\n",
                kind.name()
            );
            let mut named = 0;
            for d in crate::metrics::of_kind(kind) {
                let metric = d
                    .name
                    .replace("watch_*", "watch_db")
                    .replace("log_*", "log_slow")
                    .replace("check.*", "check.logged_in")
                    .replace("step.*", "step.login")
                    .replace("group.*", "group.checkout")
                    .replace("tag.*", "tag.page=admin")
                    .replace("metric.*", "metric.items")
                    .replace(".p*", ".p97.5")
                    .replace("_p*", "_p97.5");
                let value = match d.unit {
                    Unit::Finding => "none",
                    Unit::Ms => "1ms",
                    Unit::Seconds => "1s",
                    Unit::Bytes | Unit::MiB => "1MiB",
                    Unit::Ratio | Unit::PercentOfCore => "1%",
                    _ => "1",
                };
                let text = format!("{head}gates = [\"{metric} < {value}\"]\n");
                let text = if d.unit == Unit::Finding {
                    text.replace(" < none", " = none")
                } else {
                    text
                };
                let s = parse(&text, Path::new("g.toml"), 1.0)
                    .unwrap_or_else(|e| panic!("{} gate on {metric}: {e}", kind.name()));
                assert_eq!(s.tests[0].gates[0].metric, metric);
                named += 1;
            }
            assert!(named > 0, "{} stores no metric", kind.name());
            if !kind.traits().printed_gates {
                let e = parse(
                    &format!("{head}gates = [\"no_such_metric < 1\"]\n"),
                    Path::new("g.toml"),
                    1.0,
                )
                .unwrap_err()
                .to_string();
                assert!(
                    e.contains("unknown metric 'no_such_metric' (this test kind produces: "),
                    "{e}"
                );
            }
        }
    }

    #[test]
    fn every_example_suite_is_valid() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
        let mut n = 0;
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            if e.path().extension().is_some_and(|x| x == "toml") {
                let text = std::fs::read_to_string(e.path()).unwrap();
                if text.contains("[[test]]") {
                    load(&e.path(), 1.0).unwrap_or_else(|err| panic!("{err}"));
                    n += 1;
                }
            }
        }
        assert!(n >= 5, "{n} example suites");
    }
}
