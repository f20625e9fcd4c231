//! The rows the store writes and reads: a run as it starts, a status, a metric, a gate's
//! outcome, a run and a case as listed, a stored histogram.

use std::path::Path;

use serde::Serialize;

use crate::host::{GitState, Host};
use crate::metrics::Direction;

/// What is known about a run when it starts.
pub struct NewRun<'a> {
    pub kind: &'a str,
    pub label: Option<&'a str>,
    pub suite: Option<&'a str>,
    pub command: &'a str,
    pub cwd: &'a Path,
    pub git: Option<&'a GitState>,
    pub host: &'a Host,
}

/// How a run or a case ended, or that it has not. The store holds it as its word
/// (`passed`), and every JSON document says that word; the word is read back into the
/// same variant, so the code compares variants, never text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// Started, not ended (or ended by a crash of strainline: see `Abandoned`).
    Running,
    /// A suite's case or run whose every verdict and gate held.
    Passed,
    /// A verdict or a gate did not hold.
    Failed,
    /// Generator-bound, or not measured: its figures describe strainline.
    Invalid,
    /// The target died under it.
    Crashed,
    /// Ctrl-C or SIGTERM ended it; the cases before were kept.
    Interrupted,
    /// A `monitor` run or a `[[watch]]`: it ran to its end, with no verdict to give.
    Completed,
    /// A `load` run without gates whose generator kept its pace.
    Valid,
    /// Stored as `running` by a strainline that is no longer alive.
    Abandoned,
    /// A word this version does not know (a store written by a later one).
    Other(String),
}

impl Status {
    const WORDS: [(Status, &'static str); 9] = [
        (Status::Running, "running"),
        (Status::Passed, "passed"),
        (Status::Failed, "failed"),
        (Status::Invalid, "invalid"),
        (Status::Crashed, "crashed"),
        (Status::Interrupted, "interrupted"),
        (Status::Completed, "completed"),
        (Status::Valid, "valid"),
        (Status::Abandoned, "abandoned"),
    ];

    /// Its word, as stored and shown.
    pub fn name(&self) -> &str {
        match self {
            Status::Other(w) => w,
            known => {
                Status::WORDS
                    .iter()
                    .find(|(s, _)| s == known)
                    .expect("every known status has a word")
                    .1
            }
        }
    }

    /// The status a stored word names.
    pub fn read(word: &str) -> Status {
        Status::WORDS
            .iter()
            .find(|(_, w)| *w == word)
            .map(|(s, _)| s.clone())
            .unwrap_or_else(|| Status::Other(word.to_string()))
    }

    /// Those whose figures describe the target: an `invalid` case was generator-bound
    /// (its figures describe strainline), a `crashed` one did not finish.
    pub const USABLE: [Status; 3] = [Status::Passed, Status::Failed, Status::Completed];
    /// Those that ended with nothing against them: passed, (a monitor, a watch) ran to
    /// their end with nothing to judge, or (a `load` run without a failed gate) measured
    /// the target at the pace asked.
    pub const GOOD: [Status; 3] = [Status::Passed, Status::Completed, Status::Valid];

    /// Whether its figures describe the target ([`Status::USABLE`]).
    pub fn usable(&self) -> bool {
        Status::USABLE.contains(self)
    }

    /// Whether it ended with nothing against it ([`Status::GOOD`]).
    pub fn good(&self) -> bool {
        Status::GOOD.contains(self)
    }

    /// A set of statuses as SQL's list of their words (`'passed', 'completed'`).
    pub(super) fn sql(set: &[Status]) -> String {
        let words: Vec<String> = set.iter().map(|s| format!("'{}'", s.name())).collect();
        words.join(", ")
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for Status {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

/// A metric: a named figure with its unit and which way is better.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Metric {
    pub name: String,
    pub value: f64,
    pub unit: String,
    /// Which way is better (stored as `lower`, `higher` or `none`).
    pub direction: Direction,
    pub source: Option<String>,
}

impl Metric {
    /// A metric outside the catalogue (an import's, a harness's own).
    pub fn new(name: &str, value: f64, unit: &str, direction: Direction) -> Metric {
        Metric {
            name: name.into(),
            value,
            unit: unit.into(),
            direction,
            source: None,
        }
    }

    /// A metric of the catalogue ([`crate::metrics`]): its unit and direction from there.
    /// A name the catalogue lacks is a bug in strainline, caught by the tests.
    pub fn of(name: &str, value: f64) -> Metric {
        let d = crate::metrics::lookup(name);
        debug_assert!(d.is_some(), "metric '{name}' is not in the catalogue");
        Metric {
            name: name.into(),
            value,
            unit: d.map_or("", |d| d.unit.symbol()).into(),
            direction: d.map_or(Direction::None, |d| d.direction),
            source: None,
        }
    }

    /// Says where the figure came from.
    pub fn from(mut self, source: &str) -> Metric {
        self.source = Some(source.into());
        self
    }
}

/// A gate a case was judged by: as written, the value it measured, and whether it held.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct GateResult {
    /// As written (`error_rate < 5%`).
    pub gate: String,
    #[serde(default)]
    pub metric: String,
    /// In the metric's unit; `None` when the run did not measure it.
    #[serde(default)]
    pub measured: Option<f64>,
    /// The metric's unit (as [`Metric::unit`]).
    #[serde(default)]
    pub unit: String,
    pub passed: bool,
    /// The gate with the measured value, in words.
    pub detail: String,
}

impl GateResult {
    /// The measured value in its unit, or `not measured`.
    pub fn measured_shown(&self) -> String {
        self.measured.map_or_else(
            || "not measured".to_string(),
            |v| crate::units::format_value(v, &self.unit),
        )
    }

    /// `passed` or `FAILED`.
    pub fn verdict_word(&self) -> &'static str {
        if self.passed {
            "passed"
        } else {
            "FAILED"
        }
    }
}

/// How many of a run's gates there were and how many failed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct GateTally {
    pub total: i64,
    pub failed: i64,
}

impl GateTally {
    /// `1 of 2 failed`, `2 passed`, or empty without gates.
    pub fn shown(&self) -> String {
        match (self.total, self.failed) {
            (0, _) => String::new(),
            (t, 0) => format!("{t} passed"),
            (t, f) => format!("{f} of {t} failed"),
        }
    }
}

/// One row of `strainline runs`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunRow {
    pub id: i64,
    pub kind: String,
    pub label: Option<String>,
    pub command: String,
    pub started_at: String,
    pub ended_at: Option<String>,
    pub status: Status,
    pub exit_code: Option<i64>,
    pub git_commit: Option<String>,
    pub git_dirty: Option<bool>,
    pub host: String,
    pub fingerprint: String,
    pub strainline_version: String,
    pub suite: Option<String>,
    /// The scenario a `load` ran (its file's stem); not in `runs --json`, whose keys
    /// stay as they were (serve's runs list gives it as `name`).
    #[serde(skip)]
    pub scenario: Option<String>,
    /// Its cases' gates: how many, how many failed.
    pub gates: GateTally,
}

impl RunRow {
    /// The commit in `n` characters, `+` when the tree was dirty; empty without git.
    pub fn commit_shown(&self, n: usize) -> String {
        self.git_commit
            .as_deref()
            .map(|c| {
                format!(
                    "{}{}",
                    &c[..c.len().min(n)],
                    if self.git_dirty == Some(true) {
                        "+"
                    } else {
                        ""
                    }
                )
            })
            .unwrap_or_default()
    }

    /// What the run ran, by name: its scenario's or its suite's name, else its command
    /// (`load http://127.0.0.1:8765`, a monitored command).
    pub fn name(&self) -> &str {
        self.scenario
            .as_deref()
            .or(self.suite.as_deref())
            .unwrap_or(&self.command)
    }
}

/// A case with its metrics and stored summary.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CaseRow {
    pub id: i64,
    pub run_id: i64,
    pub name: String,
    /// The matrix parameters, as stored.
    pub params: Option<serde_json::Value>,
    /// Which repetition of the case this is (0-based).
    pub repetition: i64,
    /// How many resource samples the store holds for the case.
    pub samples_stored: i64,
    pub test_kind: String,
    pub status: Status,
    pub started_at: String,
    pub ended_at: Option<String>,
    pub summary: Option<serde_json::Value>,
    pub metrics: Vec<Metric>,
    /// The gates it was judged by, in the order given.
    pub gates: Vec<GateResult>,
}

/// A serialized histogram covering `span` seconds of a case.
pub struct StoredHistogram {
    pub name: String,
    /// Stored for readers of the database; the reports do not use it yet.
    #[allow(dead_code)]
    pub span: (f64, f64),
    pub encoding: String,
    pub data: Vec<u8>,
}

#[cfg(test)]
mod tests {
    use super::Status;

    #[test]
    fn a_status_reads_back_as_its_word() {
        for (s, w) in Status::WORDS {
            assert_eq!(s.name(), w);
            assert_eq!(Status::read(w), s);
            assert_eq!(serde_json::to_string(&s).unwrap(), format!("\"{w}\""));
        }
        let later = Status::read("paused");
        assert_eq!(later, Status::Other("paused".into()));
        assert_eq!(later.to_string(), "paused");
        assert!(!later.usable() && !later.good());
        assert_eq!(Status::sql(&Status::GOOD), "'passed', 'completed', 'valid'");
    }
}
