//! The results store: every run, case, metric and time series, kept so that runs can be
//! listed, shown and compared later. Embedded SQLite by default
//! (`.strainline/results.db`). Writes are committed as they happen — a run is recorded
//! as `running` before any work, samples are flushed in batches, and each finished case
//! is committed at once — so a crash or Ctrl-C of strainline loses nothing completed.

mod schema;

use std::path::{Path, PathBuf};

use rusqlite::{params, Connection, OptionalExtension};
use serde::Serialize;

use crate::host::{GitState, Host};
use crate::measure::{ProcessRecord, Sample};

/// The default store path, relative to the working directory.
pub const DEFAULT_PATH: &str = ".strainline/results.db";

/// Marks a database as a strainline store.
const APPLICATION: &str = "strainline results store";

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot create the results store at {path}: {source} (choose a writable path with --store PATH)")]
    Create {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "cannot open the results store at {path}: {source} (choose another path with --store PATH)"
    )]
    Open {
        path: PathBuf,
        source: rusqlite::Error,
    },
    #[error("{path} is not a strainline results store: {why} (point --store at a strainline store, or at a new file)")]
    Foreign { path: PathBuf, why: String },
    #[error("the results store at {path} has schema version {found}, newer than this strainline knows ({known}): upgrade strainline")]
    TooNew {
        path: PathBuf,
        found: i64,
        known: i64,
    },
    #[error("no run {0} in the results store (see `strainline runs`)")]
    NoSuchRun(String),
    #[error("results store: {0}")]
    Sql(#[from] rusqlite::Error),
    #[error("results store: {0}")]
    Json(#[from] serde_json::Error),
}

pub type Result<T> = std::result::Result<T, StoreError>;

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
    /// `lower`, `higher` or `none`.
    pub direction: String,
    pub source: Option<String>,
}

impl Metric {
    /// A metric; `direction` is `lower`, `higher` or `none` (which way is better).
    pub fn new(name: &str, value: f64, unit: &str, direction: &str) -> Metric {
        Metric {
            name: name.into(),
            value,
            unit: unit.into(),
            direction: direction.into(),
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
}

/// A case with its metrics and stored summary.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CaseRow {
    pub id: i64,
    pub name: String,
    pub test_kind: String,
    pub status: String,
    pub started_at: String,
    pub ended_at: Option<String>,
    pub summary: Option<serde_json::Value>,
    pub metrics: Vec<Metric>,
}

pub struct Store {
    conn: Connection,
    path: PathBuf,
}

impl Store {
    /// Opens (creating if needed) the store at `path` and brings its schema up to date.
    pub fn open(path: &Path) -> Result<Store> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| StoreError::Create {
                path: path.to_path_buf(),
                source,
            })?;
        }
        let existed = path.exists()
            && std::fs::metadata(path)
                .map(|m| m.len() > 0)
                .unwrap_or(false);
        let conn = Connection::open(path).map_err(|source| StoreError::Open {
            path: path.to_path_buf(),
            source,
        })?;
        let store = Store {
            conn,
            path: path.to_path_buf(),
        };
        store.prepare(existed)?;
        Ok(store)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn prepare(&self, existed: bool) -> Result<()> {
        let foreign = |why: String| StoreError::Foreign {
            path: self.path.clone(),
            why,
        };
        // Reading the schema is the first thing that touches the file's contents.
        let tables: Vec<String> = match self
            .conn
            .prepare("SELECT name FROM sqlite_master WHERE type = 'table'")
            .and_then(|mut st| st.query_map([], |r| r.get(0))?.collect())
        {
            Ok(t) => t,
            Err(rusqlite::Error::SqliteFailure(e, _))
                if e.code == rusqlite::ErrorCode::NotADatabase =>
            {
                return Err(foreign("the file is not an SQLite database".into()))
            }
            Err(e) => {
                return Err(StoreError::Open {
                    path: self.path.clone(),
                    source: e,
                })
            }
        };
        if existed && !tables.is_empty() && !tables.iter().any(|t| t == "strainline_meta") {
            return Err(foreign(format!(
                "it is an SQLite database without strainline's tables (it has: {})",
                tables.join(", ")
            )));
        }
        let io_err = |source| StoreError::Open {
            path: self.path.clone(),
            source,
        };
        self.conn
            .pragma_update(None, "journal_mode", "WAL")
            .map_err(io_err)?;
        self.conn
            .busy_timeout(std::time::Duration::from_secs(10))
            .map_err(io_err)?;
        self.conn.pragma_update(None, "foreign_keys", "ON")?;
        self.conn.pragma_update(None, "synchronous", "NORMAL")?;
        self.conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS strainline_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
             CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, description TEXT NOT NULL, applied_at TEXT NOT NULL);",
        )?;
        let app: Option<String> = self
            .conn
            .query_row(
                "SELECT value FROM strainline_meta WHERE key = 'application'",
                [],
                |r| r.get(0),
            )
            .optional()?;
        match app {
            Some(a) if a != APPLICATION => {
                return Err(foreign(format!("its application marker says '{a}'")))
            }
            Some(_) => {}
            None => {
                self.conn.execute(
                    "INSERT INTO strainline_meta (key, value) VALUES ('application', ?1)",
                    [APPLICATION],
                )?;
            }
        }
        self.migrate()
    }

    fn migrate(&self) -> Result<()> {
        let current: i64 = self.conn.query_row(
            "SELECT COALESCE(MAX(version), 0) FROM schema_migrations",
            [],
            |r| r.get(0),
        )?;
        if current > schema::latest() {
            return Err(StoreError::TooNew {
                path: self.path.clone(),
                found: current,
                known: schema::latest(),
            });
        }
        for (version, what, sql) in schema::MIGRATIONS.iter().filter(|m| m.0 > current) {
            let tx = self.conn.unchecked_transaction()?;
            tx.execute_batch(sql)?;
            tx.execute(
                "INSERT INTO schema_migrations (version, description, applied_at) VALUES (?1, ?2, ?3)",
                params![version, what, crate::clock::now_rfc3339()],
            )?;
            tx.commit()?;
        }
        Ok(())
    }

    /// The schema version of the open store.
    pub fn schema_version(&self) -> Result<i64> {
        Ok(self
            .conn
            .query_row("SELECT MAX(version) FROM schema_migrations", [], |r| {
                r.get(0)
            })?)
    }

    fn host_id(&self, h: &Host) -> Result<i64> {
        self.conn.execute(
            "INSERT OR IGNORE INTO hosts (fingerprint, hostname, cpu_model, cores, memory_bytes, kernel, os)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![h.fingerprint(), h.hostname, h.cpu_model, h.cores, h.memory_bytes as i64, h.kernel, h.os],
        )?;
        Ok(self.conn.query_row(
            "SELECT id FROM hosts WHERE fingerprint = ?1 AND hostname = ?2 AND kernel = ?3 AND os = ?4",
            params![h.fingerprint(), h.hostname, h.kernel, h.os],
            |r| r.get(0),
        )?)
    }

    /// Records a run as `running` and returns its id.
    pub fn begin_run(&self, run: &NewRun) -> Result<i64> {
        let host_id = self.host_id(run.host)?;
        self.conn.execute(
            "INSERT INTO runs (kind, label, suite, command, cwd, git_commit, git_dirty, host_id,
                               strainline_version, pid, started_at, status)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, 'running')",
            params![
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
        Ok(self.conn.last_insert_rowid())
    }

    /// Records the end of a run.
    pub fn finish_run(
        &self,
        run_id: i64,
        status: &str,
        exit_code: Option<i32>,
        reasons: &[String],
    ) -> Result<()> {
        self.conn.execute(
            "UPDATE runs SET status = ?2, exit_code = ?3, ended_at = ?4, reasons = ?5 WHERE id = ?1",
            params![
                run_id,
                status,
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
    ) -> Result<i64> {
        self.conn.execute(
            "INSERT INTO cases (run_id, name, test_kind, params, started_at, status)
             VALUES (?1, ?2, ?3, ?4, ?5, 'running')",
            params![
                run_id,
                name,
                test_kind,
                params_json,
                crate::clock::now_rfc3339()
            ],
        )?;
        Ok(self.conn.last_insert_rowid())
    }

    /// Appends samples to a case, in one transaction.
    pub fn append_samples(&self, case_id: i64, samples: &[Sample]) -> Result<()> {
        if samples.is_empty() {
            return Ok(());
        }
        let tx = self.conn.unchecked_transaction()?;
        {
            let mut st = tx.prepare_cached(
                "INSERT INTO samples (case_id, t, rss_bytes, cpu_cores, threads, fds, read_bytes,
                                      write_bytes, ctx_switches, processes, top)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
            )?;
            for s in samples {
                st.execute(params![
                    case_id,
                    s.t,
                    s.rss_bytes as i64,
                    s.cpu_cores,
                    s.threads as i64,
                    s.fds as i64,
                    s.read_bytes as i64,
                    s.write_bytes as i64,
                    s.ctx_switches as i64,
                    s.processes,
                    serde_json::to_string(&s.top)?,
                ])?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    /// Appends points of a named time series to a case.
    pub fn append_series(&self, case_id: i64, name: &str, points: &[(f64, f64)]) -> Result<()> {
        let tx = self.conn.unchecked_transaction()?;
        {
            let mut st = tx.prepare_cached(
                "INSERT INTO series (case_id, name, t, value) VALUES (?1, ?2, ?3, ?4)",
            )?;
            for (t, v) in points {
                st.execute(params![case_id, name, t, v])?;
            }
        }
        tx.commit()?;
        Ok(())
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
        self.conn.execute(
            "INSERT INTO histograms (case_id, name, interval_start, interval_end, encoding, data)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![case_id, name, span.0, span.1, encoding, data],
        )?;
        Ok(())
    }

    /// Finishes a case with its metrics, process table and summary, in one transaction.
    pub fn finish_case<S: Serialize>(
        &self,
        case_id: i64,
        status: &str,
        metrics: &[Metric],
        processes: &[ProcessRecord],
        summary: &S,
    ) -> Result<()> {
        let tx = self.conn.unchecked_transaction()?;
        for m in metrics {
            tx.execute(
                "INSERT OR REPLACE INTO metrics (case_id, name, value, unit, direction, source)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![case_id, m.name, m.value, m.unit, m.direction, m.source],
            )?;
        }
        for p in processes {
            tx.execute(
                "INSERT INTO processes (case_id, pid, ppid, name, cmdline, first_seen, last_seen,
                                        peak_rss_sampled, peak_rss_exact, cpu_seconds, exit)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
                params![
                    case_id,
                    p.pid,
                    p.ppid,
                    p.name,
                    p.cmdline,
                    p.first_seen,
                    p.last_seen,
                    p.peak_rss_sampled as i64,
                    p.peak_rss_exact as i64,
                    p.cpu_seconds,
                    p.exit
                ],
            )?;
        }
        tx.execute(
            "UPDATE cases SET status = ?2, ended_at = ?3, summary = ?4 WHERE id = ?1",
            params![
                case_id,
                status,
                crate::clock::now_rfc3339(),
                serde_json::to_string(summary)?
            ],
        )?;
        tx.commit()?;
        Ok(())
    }

    /// Runs, newest first. A run still marked `running` whose strainline process is gone
    /// is shown as `abandoned`.
    pub fn list_runs(&self, limit: usize, label: Option<&str>) -> Result<Vec<RunRow>> {
        let mut st = self.conn.prepare(
            "SELECT r.id, r.kind, r.label, r.command, r.started_at, r.ended_at, r.status, r.exit_code,
                    r.git_commit, r.git_dirty, h.hostname, h.fingerprint, r.strainline_version, r.pid
             FROM runs r JOIN hosts h ON h.id = r.host_id
             WHERE (?1 IS NULL OR r.label = ?1)
             ORDER BY r.id DESC LIMIT ?2",
        )?;
        let rows = st
            .query_map(params![label, limit as i64], |r| {
                let status: String = r.get(6)?;
                let pid: i64 = r.get(13)?;
                Ok(RunRow {
                    id: r.get(0)?,
                    kind: r.get(1)?,
                    label: r.get(2)?,
                    command: r.get(3)?,
                    started_at: r.get(4)?,
                    ended_at: r.get(5)?,
                    status: if status == "running" && !process_alive(pid) {
                        "abandoned".into()
                    } else {
                        status
                    },
                    exit_code: r.get(7)?,
                    git_commit: r.get(8)?,
                    git_dirty: r.get(9)?,
                    host: r.get(10)?,
                    fingerprint: r.get(11)?,
                    strainline_version: r.get(12)?,
                })
            })?
            .collect::<std::result::Result<Vec<_>, _>>()?;
        Ok(rows)
    }

    /// One run by id, or the newest run with that label.
    pub fn find_run(&self, key: &str) -> Result<RunRow> {
        let id: Option<i64> = match key.trim_start_matches('#').parse::<i64>() {
            Ok(id) => Some(id),
            Err(_) => self
                .conn
                .query_row(
                    "SELECT id FROM runs WHERE label = ?1 ORDER BY id DESC LIMIT 1",
                    [key],
                    |r| r.get(0),
                )
                .optional()?,
        };
        let id = id.ok_or_else(|| StoreError::NoSuchRun(key.to_string()))?;
        self.list_runs(usize::MAX >> 1, None)?
            .into_iter()
            .find(|r| r.id == id)
            .ok_or_else(|| StoreError::NoSuchRun(key.to_string()))
    }

    pub fn cases(&self, run_id: i64) -> Result<Vec<CaseRow>> {
        let mut st = self.conn.prepare(
            "SELECT id, name, test_kind, status, started_at, ended_at, summary FROM cases
             WHERE run_id = ?1 ORDER BY id",
        )?;
        let mut cases = st
            .query_map([run_id], |r| {
                let summary: Option<String> = r.get(6)?;
                Ok(CaseRow {
                    id: r.get(0)?,
                    name: r.get(1)?,
                    test_kind: r.get(2)?,
                    status: r.get(3)?,
                    started_at: r.get(4)?,
                    ended_at: r.get(5)?,
                    summary: summary.and_then(|s| serde_json::from_str(&s).ok()),
                    metrics: Vec::new(),
                })
            })?
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let mut mst = self.conn.prepare(
            "SELECT name, value, unit, direction, source FROM metrics WHERE case_id = ?1 ORDER BY name",
        )?;
        for c in &mut cases {
            c.metrics = mst
                .query_map([c.id], |r| {
                    Ok(Metric {
                        name: r.get(0)?,
                        value: r.get(1)?,
                        unit: r.get(2)?,
                        direction: r.get(3)?,
                        source: r.get(4)?,
                    })
                })?
                .collect::<std::result::Result<Vec<_>, _>>()?;
        }
        Ok(cases)
    }

    /// The stored samples of a case, in time order.
    pub fn samples(&self, case_id: i64) -> Result<Vec<Sample>> {
        let mut st = self.conn.prepare(
            "SELECT t, rss_bytes, cpu_cores, threads, fds, read_bytes, write_bytes, ctx_switches, processes, top
             FROM samples WHERE case_id = ?1 ORDER BY t",
        )?;
        let rows = st
            .query_map([case_id], |r| {
                let top: String = r.get(9)?;
                Ok(Sample {
                    t: r.get(0)?,
                    rss_bytes: r.get::<_, i64>(1)? as u64,
                    cpu_cores: r.get(2)?,
                    threads: r.get::<_, i64>(3)? as u64,
                    fds: r.get::<_, i64>(4)? as u64,
                    read_bytes: r.get::<_, i64>(5)? as u64,
                    write_bytes: r.get::<_, i64>(6)? as u64,
                    ctx_switches: r.get::<_, i64>(7)? as u64,
                    processes: r.get(8)?,
                    top: serde_json::from_str(&top).unwrap_or_default(),
                })
            })?
            .collect::<std::result::Result<Vec<_>, _>>()?;
        Ok(rows)
    }
}

fn process_alive(pid: i64) -> bool {
    // SAFETY: kill with signal 0 only checks for existence and permission.
    pid > 0 && unsafe { libc::kill(pid as libc::pid_t, 0) } == 0
}
