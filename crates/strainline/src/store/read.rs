//! Reading stored runs back: listed, found by id, label or `latest~N`, their cases,
//! samples, series, histograms and artifacts.

use super::backend::{vals, Row};
use super::{
    CaseRow, GateResult, GateTally, Metric, Result, RunRow, Status, Store, StoreError,
    StoredHistogram,
};
use crate::measure::Sample;
use crate::metrics::Direction;

impl Store {
    pub fn run_settings(&self, run_id: i64) -> Result<Option<serde_json::Value>> {
        Ok(self
            .one("SELECT settings FROM runs WHERE id = ?1", vals![run_id])?
            .and_then(|r| r.opt_text(0))
            .and_then(|s| serde_json::from_str(&s).ok()))
    }

    /// The names of a case's series.
    pub fn series_names(&self, case_id: i64) -> Result<Vec<String>> {
        Ok(self
            .query(
                "SELECT DISTINCT name FROM series WHERE case_id = ?1 ORDER BY name",
                vals![case_id],
            )?
            .iter()
            .map(|r| r.text(0))
            .collect())
    }

    /// The points of a named series of a case, in time order.
    pub fn series(&self, case_id: i64, name: &str) -> Result<Vec<(f64, f64)>> {
        Ok(self
            .query(
                "SELECT t, value FROM series WHERE case_id = ?1 AND name = ?2 ORDER BY t",
                vals![case_id, name],
            )?
            .iter()
            .map(|r| (r.real(0), r.real(1)))
            .collect())
    }

    /// The stored histograms of a case, in time order.
    pub fn histograms(&self, case_id: i64) -> Result<Vec<StoredHistogram>> {
        Ok(self
            .query(
                "SELECT name, interval_start, interval_end, encoding, data FROM histograms
                 WHERE case_id = ?1 ORDER BY interval_start",
                vals![case_id],
            )?
            .iter()
            .map(|r| StoredHistogram {
                name: r.text(0),
                span: (r.real(1), r.real(2)),
                encoding: r.text(3),
                data: r.blob(4),
            })
            .collect())
    }

    pub fn artifact(&self, case_id: i64, name: &str) -> Result<Option<Vec<u8>>> {
        Ok(self
            .one(
                "SELECT data FROM artifacts WHERE case_id = ?1 AND name = ?2",
                vals![case_id, name],
            )?
            .map(|r| r.blob(0)))
    }

    pub(super) const RUN_COLUMNS: &'static str =
        "r.id, r.kind, r.label, r.command, r.started_at, r.ended_at, r.status, r.exit_code,
         r.git_commit, r.git_dirty, h.hostname, h.fingerprint, r.strainline_version, r.pid, r.suite,
         (SELECT COUNT(*) FROM gates g JOIN cases c ON c.id = g.case_id WHERE c.run_id = r.id),
         (SELECT COUNT(*) FROM gates g JOIN cases c ON c.id = g.case_id
          WHERE c.run_id = r.id AND g.passed = 0),
         r.scenario";

    pub(super) fn run_row(r: &Row) -> RunRow {
        let status = r.text(6);
        RunRow {
            id: r.int(0),
            kind: r.text(1),
            label: r.opt_text(2),
            command: r.text(3),
            started_at: r.text(4),
            ended_at: r.opt_text(5),
            status: match Status::read(&status) {
                Status::Running if !process_alive(r.int(13)) => Status::Abandoned,
                s => s,
            },
            exit_code: r.opt_int(7),
            git_commit: r.opt_text(8),
            git_dirty: r.opt_int(9).map(|v| v != 0),
            host: r.text(10),
            fingerprint: r.text(11),
            strainline_version: r.text(12),
            suite: r.opt_text(14),
            scenario: r.opt_text(17),
            gates: GateTally {
                total: r.int(15),
                failed: r.int(16),
            },
        }
    }

    /// Runs, newest first. A run still marked `running` whose strainline process is gone
    /// is shown as `abandoned`.
    pub fn list_runs(&self, limit: usize, label: Option<&str>) -> Result<Vec<RunRow>> {
        let rows = self.query(
            &format!(
                "SELECT {} FROM runs r JOIN hosts h ON h.id = r.host_id
                 WHERE (CAST(?1 AS TEXT) IS NULL OR r.label = ?1)
                 ORDER BY r.id DESC LIMIT ?2",
                Self::RUN_COLUMNS
            ),
            vals![label, limit.min(i64::MAX as usize) as i64],
        )?;
        Ok(rows.iter().map(Self::run_row).collect())
    }

    /// One run by id (`12` or `#12`), or the newest run with that label.
    pub fn find_run(&self, key: &str) -> Result<RunRow> {
        if let Some((base, back)) = relative(key) {
            // `latest`, `latest~N`, `LABEL~N`: the newest run (of that label), or the
            // N-th before it.
            let label = (base != "latest").then_some(base);
            let rows = self.query(
                &format!(
                    "SELECT {} FROM runs r JOIN hosts h ON h.id = r.host_id
                     WHERE (CAST(?1 AS TEXT) IS NULL OR r.label = ?1)
                     ORDER BY r.id DESC LIMIT 1 OFFSET ?2",
                    Self::RUN_COLUMNS
                ),
                vals![label, back.min(i64::MAX as u64) as i64],
            )?;
            return rows
                .first()
                .map(Self::run_row)
                .ok_or_else(|| StoreError::NoSuchRun(key.to_string()));
        }
        let row = match key.trim_start_matches('#').parse::<i64>() {
            Ok(id) => self.one(
                &format!(
                    "SELECT {} FROM runs r JOIN hosts h ON h.id = r.host_id WHERE r.id = ?1",
                    Self::RUN_COLUMNS
                ),
                vals![id],
            )?,
            Err(_) => self.one(
                &format!(
                    "SELECT {} FROM runs r JOIN hosts h ON h.id = r.host_id WHERE r.label = ?1
                     ORDER BY r.id DESC LIMIT 1",
                    Self::RUN_COLUMNS
                ),
                vals![key],
            )?,
        };
        row.as_ref()
            .map(Self::run_row)
            .ok_or_else(|| StoreError::NoSuchRun(key.to_string()))
    }

    /// Every run a key names: the run with that id, or all runs with that label,
    /// oldest first.
    pub fn find_runs(&self, key: &str) -> Result<Vec<RunRow>> {
        if key.trim_start_matches('#').parse::<i64>().is_ok() || relative(key).is_some() {
            return Ok(vec![self.find_run(key)?]);
        }
        let rows = self.query(
            &format!(
                "SELECT {} FROM runs r JOIN hosts h ON h.id = r.host_id WHERE r.label = ?1 ORDER BY r.id",
                Self::RUN_COLUMNS
            ),
            vals![key],
        )?;
        if rows.is_empty() {
            return Err(StoreError::NoSuchRun(key.to_string()));
        }
        Ok(rows.iter().map(Self::run_row).collect())
    }

    /// Runs in store order (oldest first), optionally only those with a label or
    /// started at or after `since` (RFC 3339).
    pub fn runs_in_order(&self, label: Option<&str>, since: Option<&str>) -> Result<Vec<RunRow>> {
        let rows = self.query(
            &format!(
                "SELECT {} FROM runs r JOIN hosts h ON h.id = r.host_id
                 WHERE (CAST(?1 AS TEXT) IS NULL OR r.label = ?1) AND (CAST(?2 AS TEXT) IS NULL OR r.started_at >= ?2)
                 ORDER BY r.id",
                Self::RUN_COLUMNS
            ),
            vals![label, since],
        )?;
        Ok(rows.iter().map(Self::run_row).collect())
    }

    pub fn cases(&self, run_id: i64) -> Result<Vec<CaseRow>> {
        let mut cases: Vec<CaseRow> = self
            .query(
                "SELECT id, name, test_kind, status, started_at, ended_at, summary, params, repetition,
                        (SELECT COUNT(*) FROM samples s WHERE s.case_id = cases.id)
                 FROM cases WHERE run_id = ?1 ORDER BY id",
                vals![run_id],
            )?
            .iter()
            .map(|r| CaseRow {
                id: r.int(0),
                run_id,
                name: r.text(1),
                test_kind: r.text(2),
                status: Status::read(&r.text(3)),
                started_at: r.text(4),
                ended_at: r.opt_text(5),
                summary: r.opt_text(6).and_then(|s| serde_json::from_str(&s).ok()),
                params: r.opt_text(7).and_then(|s| serde_json::from_str(&s).ok()),
                repetition: r.int(8),
                samples_stored: r.int(9),
                metrics: Vec::new(),
                gates: Vec::new(),
            })
            .collect();
        for c in &mut cases {
            c.metrics = self
                .query(
                    "SELECT name, value, unit, direction, source FROM metrics WHERE case_id = ?1",
                    vals![c.id],
                )?
                .iter()
                .map(|r| Metric {
                    name: r.text(0),
                    value: r.real(1),
                    unit: r.text(2),
                    direction: Direction::parse(&r.text(3)),
                    source: r.opt_text(4),
                })
                .collect();
            // Byte order, the same on every backend.
            c.metrics.sort_by(|a, b| a.name.cmp(&b.name));
            c.gates = self.gates(c.id, c.summary.as_ref())?;
        }
        Ok(cases)
    }

    /// A case's gates in the order given. A case stored before the store had its `gates`
    /// table (migration 6) kept them, without the measured value, in its summary.
    pub fn gates(
        &self,
        case_id: i64,
        summary: Option<&serde_json::Value>,
    ) -> Result<Vec<GateResult>> {
        let stored: Vec<GateResult> = self
            .query(
                "SELECT gate, metric, measured, unit, passed, detail FROM gates
                 WHERE case_id = ?1 ORDER BY seq",
                vals![case_id],
            )?
            .iter()
            .map(|r| GateResult {
                gate: r.text(0),
                metric: r.text(1),
                measured: r.opt_real(2),
                unit: r.text(3),
                passed: r.int(4) != 0,
                detail: r.text(5),
            })
            .collect();
        if !stored.is_empty() {
            return Ok(stored);
        }
        Ok(summary
            .and_then(|s| s.get("gates"))
            .and_then(|g| serde_json::from_value(g.clone()).ok())
            .unwrap_or_default())
    }

    /// The stored samples of a case, in time order.
    pub fn samples(&self, case_id: i64) -> Result<Vec<Sample>> {
        Ok(self
            .query(
                "SELECT t, rss_bytes, cpu_cores, threads, fds, read_bytes, write_bytes, ctx_switches, processes, top
                 FROM samples WHERE case_id = ?1 ORDER BY t",
                vals![case_id],
            )?
            .iter()
            .map(|r| Sample {
                t: r.real(0),
                rss_bytes: r.int(1) as u64,
                cpu_cores: r.real(2),
                threads: r.int(3) as u64,
                fds: r.int(4) as u64,
                read_bytes: r.int(5) as u64,
                write_bytes: r.int(6) as u64,
                ctx_switches: r.int(7) as u64,
                processes: r.int(8) as _,
                top: serde_json::from_str(&r.text(9)).unwrap_or_default(),
            })
            .collect())
    }
}

fn process_alive(pid: i64) -> bool {
    // SAFETY: kill with signal 0 only checks for existence and permission.
    pid > 0 && unsafe { libc::kill(pid as libc::pid_t, 0) } == 0
}

/// A key relative to the newest run: `latest` (0 back), `latest~N`, or `LABEL~N` (N
/// runs before the newest of that label). `None` for an id or a plain label.
fn relative(key: &str) -> Option<(&str, u64)> {
    if key == "latest" {
        return Some(("latest", 0));
    }
    let (base, n) = key.rsplit_once('~')?;
    let n = n.parse().ok()?;
    (!base.is_empty()).then_some((base, n))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::super::{
        GateResult, GateTally, Location, Metric, NewRun, Status, Store, StoreError,
    };
    use crate::host::{GitState, Host};
    use crate::measure::Sample;

    fn store() -> Store {
        Store::open(&Location::Sqlite(":memory:".into())).unwrap()
    }

    fn host(name: &str) -> Host {
        Host {
            hostname: name.into(),
            cpu_model: "Test CPU".into(),
            cores: 2,
            memory_bytes: 24 << 30,
            kernel: "6.1.0".into(),
            os: "Debian 12".into(),
        }
    }

    fn begin(s: &Store, label: Option<&str>, h: &Host) -> i64 {
        let git = GitState {
            commit: "0123456789abcdef".into(),
            dirty: true,
        };
        s.begin_run(&NewRun {
            kind: "run",
            label,
            suite: Some("iot"),
            command: "strainline run iot.toml",
            cwd: Path::new("/work"),
            git: Some(&git),
            host: h,
        })
        .unwrap()
    }

    #[test]
    fn a_run_written_as_it_happens_reads_back_as_written() {
        let s = store();
        let id = begin(&s, Some("0.7.0"), &host("c1"));
        assert_eq!(s.find_run("latest").unwrap().status, Status::Running);
        let case = s
            .begin_case(id, "push", "bench", Some(r#"{"threads":4}"#), 1)
            .unwrap();
        let samples: Vec<Sample> = (1..=3)
            .map(|i| Sample {
                t: f64::from(i) * 0.5,
                rss_bytes: 1 << 20,
                cpu_cores: 0.25,
                threads: 5,
                processes: 1,
                ..Sample::default()
            })
            .collect();
        s.append_samples(case, &samples).unwrap();
        s.append_series(case, "p99_us", &[(1.0, 800.0), (2.0, 950.0)])
            .unwrap();
        s.put_artifact(case, "flame.svg", b"<svg/>").unwrap();
        let metrics = [
            Metric::of("throughput", 1234.5),
            Metric::of("peak_rss", 1e6),
        ];
        s.finish_case(
            case,
            Status::Passed,
            &metrics,
            &[],
            &serde_json::json!({"lines": 3}),
        )
        .unwrap();
        s.finish_run(id, Status::Passed, Some(0), &[]).unwrap();

        let run = s.find_run("latest").unwrap();
        assert_eq!(
            (
                run.id,
                run.status.name(),
                run.label.as_deref(),
                run.exit_code
            ),
            (id, "passed", Some("0.7.0"), Some(0))
        );
        assert_eq!(
            (run.host.as_str(), run.commit_shown(7)),
            ("c1", "0123456+".into())
        );
        assert_eq!(run.suite.as_deref(), Some("iot"));
        let cases = s.cases(id).unwrap();
        assert_eq!(cases.len(), 1);
        let c = &cases[0];
        assert_eq!(
            (c.name.as_str(), c.test_kind.as_str(), c.status.name()),
            ("push", "bench", "passed")
        );
        assert_eq!((c.repetition, c.samples_stored), (1, 3));
        assert_eq!(c.params, Some(serde_json::json!({"threads": 4})));
        assert_eq!(c.summary, Some(serde_json::json!({"lines": 3})));
        // In byte order of their names.
        assert_eq!(c.metrics, vec![metrics[1].clone(), metrics[0].clone()]);
        assert_eq!(s.samples(case).unwrap(), samples);
        assert_eq!(s.series_names(case).unwrap(), ["p99_us"]);
        assert_eq!(
            s.series(case, "p99_us").unwrap(),
            [(1.0, 800.0), (2.0, 950.0)]
        );
        assert_eq!(s.artifact(case, "flame.svg").unwrap().unwrap(), b"<svg/>");
        assert_eq!(s.artifact(case, "other").unwrap(), None);
    }

    #[test]
    fn runs_are_found_by_id_label_and_steps_back() {
        let s = store();
        let h = host("c1");
        let ids: Vec<i64> = ["0.6.0", "0.7.0", "0.6.0"]
            .iter()
            .map(|l| begin(&s, Some(l), &h))
            .collect();
        let found = |key: &str| s.find_run(key).unwrap().id;
        assert_eq!(found("0.6.0"), ids[2], "a label names its newest run");
        assert_eq!(found("0.6.0~1"), ids[0]);
        assert_eq!(found("latest"), ids[2]);
        assert_eq!(found("latest~2"), ids[0]);
        assert_eq!(found(&format!("#{}", ids[1])), ids[1]);
        assert!(matches!(
            s.find_run("latest~3"),
            Err(StoreError::NoSuchRun(_))
        ));
        assert!(matches!(s.find_run("0.9.0"), Err(StoreError::NoSuchRun(_))));
        let all: Vec<i64> = s.find_runs("0.6.0").unwrap().iter().map(|r| r.id).collect();
        assert_eq!(all, [ids[0], ids[2]], "oldest first");
        let listed: Vec<i64> = s.list_runs(2, None).unwrap().iter().map(|r| r.id).collect();
        assert_eq!(listed, [ids[2], ids[1]], "newest first, at most the limit");
        let ordered = s.runs_in_order(Some("0.7.0"), None).unwrap();
        assert_eq!(ordered.len(), 1);
        assert_eq!(ordered[0].id, ids[1]);
    }

    fn gate(text: &str, measured: Option<f64>, unit: &str, passed: bool) -> GateResult {
        GateResult {
            gate: text.into(),
            metric: text.split(' ').next().unwrap().into(),
            measured,
            unit: unit.into(),
            passed,
            detail: format!("{text} (measured {measured:?})"),
        }
    }

    #[test]
    fn gates_read_back_with_their_measured_values_and_are_the_why_not_a_note() {
        let s = store();
        let id = begin(&s, None, &host("c1"));
        let case = s
            .begin_case(id, "http://127.0.0.1:1/", "load", None, 0)
            .unwrap();
        let gates = [
            gate("error_rate < 5%", Some(0.1938), "ratio", false),
            gate("latency_p99 < 50ms", Some(62.9), "ms", false),
            gate("throughput > 1", None, "req/s", false),
            gate("latency_p50 < 1s", Some(3.5), "ms", true),
        ];
        s.put_gates(case, &gates).unwrap();
        let summary = serde_json::json!({"reasons": ["note: the generator sent late in a burst"]});
        s.finish_case(case, Status::Failed, &[], &[], &summary)
            .unwrap();
        let note = "note: the generator sent late in a burst".to_string();
        s.finish_run(id, Status::Failed, Some(1), std::slice::from_ref(&note))
            .unwrap();
        let c = &s.cases(id).unwrap()[0];
        assert_eq!(c.gates, gates, "in order, each with its measured value");
        let run = s.find_run("latest").unwrap();
        assert_eq!(
            run.gates,
            GateTally {
                total: 4,
                failed: 3
            }
        );
        assert_eq!(run.gates.shown(), "3 of 4 failed");
        assert_eq!(s.list_runs(1, None).unwrap()[0].gates, run.gates);
        // The run's only reason is a note: its Why is its case's first failed gate,
        // named by its case (a suite's run; a load run's one case goes unnamed).
        let why = s.first_reasons(&[id]).unwrap();
        assert_eq!(
            why[&id],
            "http://127.0.0.1:1/: gate failed: error_rate < 5% (measured Some(0.1938))"
        );
        // Put again (a case judged again): replaced, not doubled.
        s.put_gates(case, &gates[..1]).unwrap();
        assert_eq!(s.cases(id).unwrap()[0].gates.len(), 4);
    }

    #[test]
    fn a_case_stored_before_the_gates_table_reads_its_gates_from_its_summary() {
        let s = store();
        let id = begin(&s, None, &host("c1"));
        let case = s.begin_case(id, "push", "bench", None, 0).unwrap();
        let summary = serde_json::json!({"gates": [
            {"gate": "latency_p99 < 2ms", "passed": false, "detail": "latency_p99 < 2ms (measured 2.5 ms, needs < 2 ms)"}
        ]});
        s.finish_case(case, Status::Failed, &[], &[], &summary)
            .unwrap();
        let g = &s.cases(id).unwrap()[0].gates;
        assert_eq!((g.len(), g[0].passed, g[0].measured), (1, false, None));
        assert_eq!(g[0].gate, "latency_p99 < 2ms");
    }

    /// A run is named by its scenario, else its suite, else its command; the newest run
    /// of each suite and of each kind outside suites is found in one query.
    #[test]
    fn runs_are_named_by_scenario_or_suite_and_the_newest_of_each_is_found() {
        let s = store();
        let h = host("n1");
        let suite_run = begin(&s, Some("v1"), &h);
        let newer = begin(&s, Some("v2"), &h);
        let load = |label| {
            s.begin_run(&NewRun {
                kind: "load",
                label,
                suite: None,
                command: "load http://127.0.0.1:8765",
                cwd: Path::new("/work"),
                git: None,
                host: &h,
            })
            .unwrap()
        };
        let plain = load(Some("a"));
        let scenario = load(Some("b"));
        s.set_run_scenario(scenario, "checkout").unwrap();
        let name = |id: i64| s.find_run(&id.to_string()).unwrap().name().to_string();
        assert_eq!(name(suite_run), "iot");
        assert_eq!(name(plain), "load http://127.0.0.1:8765");
        assert_eq!(name(scenario), "checkout");
        let newest: Vec<i64> = s.newest_of_each().unwrap().iter().map(|r| r.id).collect();
        assert_eq!(newest, vec![scenario, newer]);
    }
}
