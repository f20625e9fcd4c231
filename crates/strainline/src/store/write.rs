//! Writing a run as it happens: begun as `running`, its cases, samples, series,
//! histograms, artifacts and gates, each committed at once, then finished.

use std::path::PathBuf;

use serde::Serialize;

use super::backend::vals;
use super::{GateResult, Metric, NewRun, Result, Status, Store};
use crate::host::Host;
use crate::measure::{ProcessRecord, Sample};

impl Store {
    /// Records a run started here and now — this machine, the working directory and its
    /// commit — as `running`, and returns its id.
    pub fn begin_run_here(
        &self,
        kind: &str,
        label: Option<&str>,
        suite: Option<&str>,
        command: &str,
    ) -> Result<i64> {
        let host = Host::current();
        let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
        let git = crate::host::git_state(&cwd);
        self.begin_run(&NewRun {
            kind,
            label,
            suite,
            command,
            cwd: &cwd,
            git: git.as_ref(),
            host: &host,
        })
    }

    /// Records a run as `running` and returns its id.
    pub fn begin_run(&self, run: &NewRun) -> Result<i64> {
        let host_id = self.host_id(run.host)?;
        let row = self.one(
            "INSERT INTO runs (kind, label, suite, command, cwd, git_commit, git_dirty, host_id,
                               strainline_version, pid, started_at, status)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, 'running')
             RETURNING id",
            vals![
                run.kind,
                run.label,
                run.suite,
                run.command,
                run.cwd.display().to_string(),
                run.git.map(|g| g.commit.clone()),
                run.git.map(|g| g.dirty),
                host_id,
                env!("CARGO_PKG_VERSION"),
                std::process::id(),
                crate::clock::now_rfc3339(),
            ],
        )?;
        Ok(row.map_or(0, |r| r.int(0)))
    }

    /// The commit a run measured, where it was not the working tree's (a paired
    /// session's `--baseline-ref`).
    pub fn set_run_commit(&self, run_id: i64, commit: &str, dirty: bool) -> Result<()> {
        self.execute(
            "UPDATE runs SET git_commit = ?1, git_dirty = ?2 WHERE id = ?3",
            vals![commit, dirty, run_id],
        )?;
        Ok(())
    }

    /// Names the scenario a run ran (a `load --scenario FILE`: the file's stem), by which
    /// `serve` tells load runs of one URL apart.
    pub fn set_run_scenario(&self, run_id: i64, scenario: &str) -> Result<()> {
        self.execute(
            "UPDATE runs SET scenario = ?1 WHERE id = ?2",
            vals![scenario, run_id],
        )?;
        Ok(())
    }

    /// Keeps settings of a run that later commands need (a JSON object).
    pub fn set_run_settings(&self, run_id: i64, settings: &serde_json::Value) -> Result<()> {
        self.execute(
            "UPDATE runs SET settings = ?2 WHERE id = ?1",
            vals![run_id, serde_json::to_string(settings)?],
        )?;
        Ok(())
    }

    /// Sets one key of a run's settings, keeping the others.
    pub fn merge_run_settings(
        &self,
        run_id: i64,
        key: &str,
        value: serde_json::Value,
    ) -> Result<()> {
        let mut settings = match self.run_settings(run_id)? {
            Some(serde_json::Value::Object(m)) => m,
            _ => serde_json::Map::new(),
        };
        settings.insert(key.to_string(), value);
        self.set_run_settings(run_id, &serde_json::Value::Object(settings))
    }

    /// Records the end of a run.
    pub fn finish_run(
        &self,
        run_id: i64,
        status: Status,
        exit_code: Option<i32>,
        reasons: &[String],
    ) -> Result<()> {
        self.execute(
            "UPDATE runs SET status = ?2, exit_code = ?3, ended_at = ?4, reasons = ?5 WHERE id = ?1",
            vals![
                run_id,
                status.name(),
                exit_code,
                crate::clock::now_rfc3339(),
                serde_json::to_string(reasons)?
            ],
        )?;
        Ok(())
    }

    pub fn begin_case(
        &self,
        run_id: i64,
        name: &str,
        test_kind: &str,
        params_json: Option<&str>,
        repetition: u32,
    ) -> Result<i64> {
        let row = self.one(
            "INSERT INTO cases (run_id, name, test_kind, params, repetition, started_at, status)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'running')
             RETURNING id",
            vals![
                run_id,
                name,
                test_kind,
                params_json,
                repetition,
                crate::clock::now_rfc3339()
            ],
        )?;
        Ok(row.map_or(0, |r| r.int(0)))
    }

    /// Appends samples to a case, in one transaction.
    pub fn append_samples(&self, case_id: i64, samples: &[Sample]) -> Result<()> {
        if samples.is_empty() {
            return Ok(());
        }
        self.transaction(|s| {
            for x in samples {
                s.execute(
                    "INSERT INTO samples (case_id, t, rss_bytes, cpu_cores, threads, fds, read_bytes,
                                          write_bytes, ctx_switches, processes, top)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
                    vals![
                        case_id,
                        x.t,
                        x.rss_bytes,
                        x.cpu_cores,
                        x.threads,
                        x.fds,
                        x.read_bytes,
                        x.write_bytes,
                        x.ctx_switches,
                        x.processes as i64,
                        serde_json::to_string(&x.top)?,
                    ],
                )?;
            }
            Ok(())
        })
    }

    /// Appends points of a named time series to a case.
    pub fn append_series(&self, case_id: i64, name: &str, points: &[(f64, f64)]) -> Result<()> {
        self.transaction(|s| {
            for (t, v) in points {
                s.execute(
                    "INSERT INTO series (case_id, name, t, value) VALUES (?1, ?2, ?3, ?4)",
                    vals![case_id, name, *t, *v],
                )?;
            }
            Ok(())
        })
    }

    /// Stores a serialized histogram covering `[start, end]` seconds of a case.
    pub fn put_histogram(
        &self,
        case_id: i64,
        name: &str,
        span: (f64, f64),
        encoding: &str,
        data: &[u8],
    ) -> Result<()> {
        self.execute(
            "INSERT INTO histograms (case_id, name, interval_start, interval_end, encoding, data)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            vals![case_id, name, span.0, span.1, encoding, data],
        )?;
        Ok(())
    }

    /// Keeps a named file of a case (e.g. folded CPU stacks).
    pub fn put_artifact(&self, case_id: i64, name: &str, data: &[u8]) -> Result<()> {
        self.execute(
            "INSERT INTO artifacts (case_id, name, data) VALUES (?1, ?2, ?3)
             ON CONFLICT (case_id, name) DO UPDATE SET data = excluded.data",
            vals![case_id, name, data],
        )?;
        Ok(())
    }

    /// Keeps the gates a case was judged by, in the order given (replacing any kept).
    pub fn put_gates(&self, case_id: i64, gates: &[GateResult]) -> Result<()> {
        self.transaction(|s| {
            for (seq, g) in gates.iter().enumerate() {
                s.execute(
                    "INSERT INTO gates (case_id, seq, gate, metric, measured, unit, passed, detail)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
                     ON CONFLICT (case_id, seq) DO UPDATE SET gate = excluded.gate,
                         metric = excluded.metric, measured = excluded.measured,
                         unit = excluded.unit, passed = excluded.passed, detail = excluded.detail",
                    vals![
                        case_id,
                        seq as i64,
                        &g.gate,
                        &g.metric,
                        g.measured,
                        &g.unit,
                        i64::from(g.passed),
                        &g.detail
                    ],
                )?;
            }
            Ok(())
        })
    }

    /// Finishes a case with its metrics, process table and summary, in one transaction.
    pub fn finish_case<S: Serialize>(
        &self,
        case_id: i64,
        status: Status,
        metrics: &[Metric],
        processes: &[ProcessRecord],
        summary: &S,
    ) -> Result<()> {
        let summary = serde_json::to_string(summary)?;
        self.transaction(|s| {
            for m in metrics {
                s.execute(
                    "INSERT INTO metrics (case_id, name, value, unit, direction, source)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                     ON CONFLICT (case_id, name) DO UPDATE SET value = excluded.value,
                         unit = excluded.unit, direction = excluded.direction, source = excluded.source",
                    vals![case_id, &m.name, m.value, &m.unit, m.direction.name(), m.source.as_deref()],
                )?;
            }
            for p in processes {
                s.execute(
                    "INSERT INTO processes (case_id, pid, ppid, name, cmdline, first_seen, last_seen,
                                            peak_rss_sampled, peak_rss_exact, cpu_seconds, exit,
                                            children_cpu_seconds, children_peak_rss)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
                    vals![
                        case_id,
                        p.pid as i64,
                        p.ppid as i64,
                        &p.name,
                        &p.cmdline,
                        p.first_seen,
                        p.last_seen,
                        p.peak_rss_sampled,
                        p.peak_rss_exact,
                        p.cpu_seconds,
                        p.exit.as_deref(),
                        p.children_cpu_seconds,
                        p.children_peak_rss
                    ],
                )?;
            }
            s.execute(
                "UPDATE cases SET status = ?2, ended_at = ?3, summary = ?4 WHERE id = ?1",
                vals![case_id, status.name(), crate::clock::now_rfc3339(), &summary],
            )?;
            Ok(())
        })
    }
}
