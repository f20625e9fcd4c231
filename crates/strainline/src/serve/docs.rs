//! The JSON documents of `/api/v1/`, typed: each a struct whose fields are its keys,
//! named by its `schema` (docs/serve.md lists them). [`super::http::Response::json`]
//! writes an object's keys sorted, as the documents always were, so a field's place
//! here changes no byte of what a client reads.

use serde::Serialize;

use crate::report::history::{Parameters, Series};
use crate::store::{CaseRow, LiveSecond, RunFilter, RunRow, Status};

/// `/api/v1/`: the endpoints.
#[derive(Serialize)]
pub struct Index {
    pub schema: &'static str,
    pub strainline_version: &'static str,
    pub endpoints: Vec<String>,
}

/// Any endpoint's answer when it cannot give its document.
#[derive(Serialize)]
pub struct Failure<'a> {
    pub error: &'a str,
}

/// `/api/v1/runs?…`: a page of the runs list.
#[derive(Serialize)]
pub struct Runs<'a> {
    pub schema: &'static str,
    pub filter: &'a RunFilter,
    pub page: usize,
    pub more: bool,
    pub runs: Vec<Listed<'a>>,
}

/// A run of the list: its row (with its gates' tally), with why it failed and how long
/// it took.
#[derive(Serialize)]
pub struct Listed<'a> {
    #[serde(flatten)]
    pub run: &'a RunRow,
    pub reason: Option<&'a String>,
    pub duration_seconds: Option<f64>,
    /// What it ran, by name: its scenario's or suite's name, else its command.
    pub name: &'a str,
}

/// `/api/v1/runs/ID`: a run, its cases and its neighbours in its suite.
#[derive(Serialize)]
pub struct Run<'a> {
    pub schema: &'static str,
    pub run: &'a RunRow,
    pub cases: &'a [CaseRow],
    pub previous: Option<i64>,
    pub next: Option<i64>,
}

/// `/api/v1/live`: the runs in progress.
#[derive(Serialize)]
pub struct Live<'a> {
    pub schema: &'static str,
    pub running: &'a [RunRow],
}

/// `/api/v1/live/ID?after=T`: a run's seconds after `T`, as it writes them.
#[derive(Serialize)]
pub struct LiveRun<'a> {
    pub schema: &'static str,
    pub run: i64,
    pub status: &'a Status,
    pub seconds: &'a [LiveSecond],
}

/// `/api/v1/history`: the suites, and the kinds of runs outside any suite.
#[derive(Serialize)]
pub struct Suites {
    pub schema: &'static str,
    pub suites: Vec<SuiteRuns>,
    pub outside_suites: Vec<KindRuns>,
}

#[derive(Serialize)]
pub struct SuiteRuns {
    pub suite: String,
    pub runs: i64,
    pub newest: Option<Newest>,
}

#[derive(Serialize)]
pub struct KindRuns {
    pub kind: String,
    pub runs: i64,
    pub newest: Option<Newest>,
}

/// The newest run of a suite (or of a kind outside suites) and its verdict.
#[derive(Serialize)]
pub struct Newest {
    pub run: i64,
    pub status: Status,
}

impl Newest {
    pub fn of(r: &RunRow) -> Newest {
        Newest {
            run: r.id,
            status: r.status.clone(),
        }
    }
}

/// `/api/v1/history?suite=S` (or `?kind=K`): a suite's judged series.
#[derive(Serialize)]
pub struct History<'a> {
    pub schema: &'static str,
    pub suite: Option<&'a str>,
    pub kind: Option<&'a str>,
    pub runs: usize,
    pub parameters: Parameters,
    pub series: Vec<Banded<'a>>,
}

/// A series with the comparison's tolerance band for its metric.
#[derive(Serialize)]
pub struct Banded<'a> {
    #[serde(flatten)]
    pub series: &'a Series,
    pub tolerance: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::http::Response;

    /// A listed run is its row's keys and its own two, side by side and sorted, as
    /// `/api/v1/runs` always wrote them.
    #[test]
    fn a_listed_run_is_one_object_with_its_keys_sorted() {
        let row = RunRow {
            id: 3,
            kind: "suite".into(),
            label: Some("v2".into()),
            command: "run s.toml".into(),
            started_at: "2026-11-28T10:00:00Z".into(),
            ended_at: None,
            status: Status::Failed,
            exit_code: Some(1),
            git_commit: None,
            git_dirty: None,
            host: "h".into(),
            fingerprint: "f".into(),
            strainline_version: "0.1.0".into(),
            suite: Some("s".into()),
            scenario: None,
            gates: crate::store::GateTally {
                total: 2,
                failed: 1,
            },
        };
        let why = "bench: p99 over".to_string();
        let doc = Runs {
            schema: "strainline.serve.runs.v1",
            filter: &RunFilter::default(),
            page: 1,
            more: false,
            runs: vec![Listed {
                run: &row,
                reason: Some(&why),
                duration_seconds: None,
                name: row.name(),
            }],
        };
        let body = String::from_utf8(Response::json(200, &doc).body).unwrap();
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        let run = v["runs"][0].as_object().unwrap();
        assert_eq!(run["status"], "failed");
        assert_eq!(run["reason"], "bench: p99 over");
        assert!(run["duration_seconds"].is_null());
        assert_eq!(run["gates"], serde_json::json!({"total": 2, "failed": 1}));
        assert_eq!(run["name"], "s");
        assert_eq!(run.len(), 18, "{run:?}");
        // As written (a parsed object sorts its keys whatever the text's order): the
        // document's keys, then the run's from where its list starts.
        let at = |k: &str, from: usize| from + body[from..].find(&format!("\"{k}\"")).unwrap();
        let runs = at("runs", 0);
        let places = [
            at("filter", 0),
            at("more", 0),
            at("page", 0),
            runs,
            at("command", runs),
            at("duration_seconds", runs),
            at("ended_at", runs),
            at("reason", runs),
            at("status", runs),
            at("schema", runs),
        ];
        assert!(places.windows(2).all(|w| w[0] < w[1]), "{body}");
    }
}
