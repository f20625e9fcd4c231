//! The rows the store writes and reads: a run as it starts, a metric, a run and a case
//! as listed, a stored histogram.

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

/// One row of `strainline runs`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunRow {
    pub id: i64,
    pub kind: String,
    pub label: Option<String>,
    pub command: String,
    pub started_at: String,
    pub ended_at: Option<String>,
    pub status: String,
    pub exit_code: Option<i64>,
    pub git_commit: Option<String>,
    pub git_dirty: Option<bool>,
    pub host: String,
    pub fingerprint: String,
    pub strainline_version: String,
    pub suite: Option<String>,
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
    pub status: String,
    pub started_at: String,
    pub ended_at: Option<String>,
    pub summary: Option<serde_json::Value>,
    pub metrics: Vec<Metric>,
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
