//! The results store: every run, case, metric and time series, kept so that runs can be
//! listed, shown and compared later. Embedded SQLite by default
//! (`.strainline/results.db`), or PostgreSQL (`--store postgres://…`) for a history a
//! team's CI machines share; both through one [`backend::Backend`], with the same
//! migrations and the same queries. Writes are committed as they happen — a run is
//! recorded as `running` before any work, samples are flushed in batches, and each
//! finished case is committed at once — so a crash or Ctrl-C of strainline loses
//! nothing completed.

pub mod backend;
mod browse;
mod keys;
mod pg;
mod schema;
mod sqlite;

use std::cell::RefCell;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::host::{GitState, Host};
use crate::measure::{ProcessRecord, Sample};
use crate::metrics::Direction;
use backend::{vals, Backend, Row, Value};
pub use browse::{LiveSecond, RunFilter};
pub use keys::{case_key, usable};

/// The default store path, relative to the working directory.
pub const DEFAULT_PATH: &str = ".strainline/results.db";

/// Marks a database as a strainline store.
const APPLICATION: &str = "strainline results store";

/// Where the results are kept: an SQLite file, or a PostgreSQL database.
#[derive(Debug, Clone, PartialEq)]
pub enum Location {
    Sqlite(PathBuf),
    Postgres(String),
}

impl Location {
    /// `postgres://…`, `postgresql://…` or a libpq keyword string (`host=… dbname=…`)
    /// is a PostgreSQL database; anything else a path.
    pub fn parse(s: &str) -> Location {
        if s.starts_with("postgres://") || s.starts_with("postgresql://") || pg::is_keywords(s) {
            Location::Postgres(s.to_string())
        } else {
            Location::Sqlite(PathBuf::from(s))
        }
    }

    /// How the location may be shown: a PostgreSQL password is never printed.
    pub fn shown(&self) -> String {
        match self {
            Location::Sqlite(p) => p.display().to_string(),
            Location::Postgres(url) => pg::mask(url),
        }
    }

    /// Where a run's own files (logs, scratch) go: beside an SQLite store, or in
    /// `.strainline/` of the working directory for a database server.
    pub fn work_dir(&self) -> PathBuf {
        match self {
            Location::Sqlite(p) => p
                .parent()
                .filter(|d| !d.as_os_str().is_empty())
                .unwrap_or(Path::new("."))
                .to_path_buf(),
            Location::Postgres(_) => PathBuf::from(".strainline"),
        }
    }
}

impl std::str::FromStr for Location {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> std::result::Result<Location, Self::Err> {
        Ok(Location::parse(s))
    }
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.shown())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot create the results store at {where_}: {source} (choose a writable path with --store PATH)")]
    Create {
        where_: String,
        source: std::io::Error,
    },
    #[error("cannot open the results store at {where_}: {why} (choose another store with --store PATH|postgres://…)")]
    Open { where_: String, why: String },
    #[error("{where_} is not a strainline results store: {why} (point --store at a strainline store, or at a new file or empty database)")]
    Foreign { where_: String, why: String },
    #[error("the results store at {where_} has schema version {found}, newer than this strainline knows ({known}): upgrade strainline")]
    TooNew {
        where_: String,
        found: i64,
        known: i64,
    },
    #[error("the results store at {where_} has schema version {found}, older than this strainline's ({known}), and is opened read-only: run `strainline runs --store {where_}` once to upgrade it")]
    TooOld {
        where_: String,
        found: i64,
        known: i64,
    },
    #[error("no run {0} in the results store (see `strainline runs`)")]
    NoSuchRun(String),
    #[error("results store: {0}")]
    Sql(#[from] rusqlite::Error),
    #[error("results store (PostgreSQL): {0}")]
    Postgres(String),
    #[error("results store: {0}")]
    Json(#[from] serde_json::Error),
}

pub type Result<T> = std::result::Result<T, StoreError>;

/// A store that cannot be used as given is the user's to fix; one that fails while in
/// use (a full disk, a server gone) is strainline unable to go on.
impl From<StoreError> for crate::Error {
    fn from(e: StoreError) -> crate::Error {
        match e {
            StoreError::Create { .. }
            | StoreError::Open { .. }
            | StoreError::Foreign { .. }
            | StoreError::TooNew { .. }
            | StoreError::TooOld { .. }
            | StoreError::NoSuchRun(_) => crate::Error::Usage(e.to_string()),
            StoreError::Sql(_) | StoreError::Postgres(_) | StoreError::Json(_) => {
                crate::Error::Environment(e.to_string())
            }
        }
    }
}

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

pub struct Store {
    db: RefCell<Box<dyn Backend>>,
    location: Location,
}

impl Store {
    /// Opens (creating if needed) the store and brings its schema up to date.
    pub fn open(location: &Location) -> Result<Store> {
        let shown = location.shown();
        let db: Box<dyn Backend> = match location {
            Location::Sqlite(path) => {
                let existed = std::fs::metadata(path)
                    .map(|m| m.len() > 0)
                    .unwrap_or(false);
                let mut db = sqlite::Sqlite::open(path)?;
                let tables = db.tables()?;
                check_ours(&shown, existed, &tables)?;
                db.configure()?;
                Box::new(db)
            }
            Location::Postgres(url) => {
                let mut db = pg::Postgres::connect(url, &shown)?;
                let tables = db.tables()?;
                check_ours(&shown, true, &tables)?;
                Box::new(db)
            }
        };
        let store = Store {
            db: RefCell::new(db),
            location: location.clone(),
        };
        store.prepare()?;
        Ok(store)
    }

    /// Opens an existing store to read only (`serve`): SQLite opened read-only, a
    /// PostgreSQL session whose transactions are read-only. Nothing is created or
    /// migrated; a store of another schema version is refused.
    pub fn open_read_only(location: &Location) -> Result<Store> {
        let shown = location.shown();
        let db: Box<dyn Backend> = match location {
            Location::Sqlite(path) => {
                if !path.exists() {
                    return Err(StoreError::Open {
                        where_: shown,
                        why: "no such file".into(),
                    });
                }
                Box::new(sqlite::Sqlite::open_read_only(path)?)
            }
            Location::Postgres(url) => {
                let mut db = pg::Postgres::connect(url, &shown)?;
                db.batch("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")?;
                Box::new(db)
            }
        };
        let store = Store {
            db: RefCell::new(db),
            location: location.clone(),
        };
        let found = store.current_version().map_err(|e| StoreError::Foreign {
            where_: shown.clone(),
            why: e.to_string(),
        })?;
        store.check_marker()?;
        let known = schema::latest();
        match found.cmp(&known) {
            std::cmp::Ordering::Greater => Err(StoreError::TooNew {
                where_: shown,
                found,
                known,
            }),
            std::cmp::Ordering::Less => Err(StoreError::TooOld {
                where_: shown,
                found,
                known,
            }),
            std::cmp::Ordering::Equal => Ok(store),
        }
    }

    pub fn location(&self) -> &Location {
        &self.location
    }

    fn execute(&self, sql: &str, params: &[Value]) -> Result<u64> {
        self.db.borrow_mut().execute(sql, params)
    }

    fn query(&self, sql: &str, params: &[Value]) -> Result<Vec<Row>> {
        self.db.borrow_mut().query(sql, params)
    }

    fn one(&self, sql: &str, params: &[Value]) -> Result<Option<Row>> {
        Ok(self.query(sql, params)?.into_iter().next())
    }

    /// Runs `work` in one write transaction: all of it is stored, or none.
    fn transaction<T>(&self, work: impl FnOnce(&Store) -> Result<T>) -> Result<T> {
        self.db.borrow_mut().begin_write()?;
        match work(self) {
            Ok(v) => {
                self.db.borrow_mut().batch("COMMIT")?;
                Ok(v)
            }
            Err(e) => {
                let _ = self.db.borrow_mut().batch("ROLLBACK");
                Err(e)
            }
        }
    }

    fn current_version(&self) -> Result<i64> {
        Ok(self
            .one(
                "SELECT COALESCE(MAX(version), 0) FROM schema_migrations",
                &[],
            )?
            .map_or(0, |r| r.int(0)))
    }

    fn check_marker(&self) -> Result<()> {
        let app = self
            .one(
                "SELECT value FROM strainline_meta WHERE key = 'application'",
                &[],
            )?
            .map(|r| r.text(0));
        match app {
            Some(a) if a != APPLICATION => Err(StoreError::Foreign {
                where_: self.location.shown(),
                why: format!("its application marker says '{a}'"),
            }),
            _ => Ok(()),
        }
    }

    /// Brings the schema up to date. An up-to-date store is only read; otherwise one
    /// transaction, under the migration lock, creates what is missing — so concurrent
    /// first openers of an empty database queue instead of colliding.
    fn prepare(&self) -> Result<()> {
        let known = schema::latest();
        let too_new = |found| StoreError::TooNew {
            where_: self.location.shown(),
            found,
            known,
        };
        if let Ok(found) = self.current_version() {
            self.check_marker()?;
            if found > known {
                return Err(too_new(found));
            }
            if found == known {
                return Ok(());
            }
        }
        let dialect = self.db.borrow().dialect();
        self.transaction(|s| {
            s.db.borrow_mut().lock_for_migration()?;
            s.db.borrow_mut().batch(&dialect.ddl(
                "CREATE TABLE IF NOT EXISTS strainline_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
                 CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER NOT NULL PRIMARY KEY, description TEXT NOT NULL, applied_at TEXT NOT NULL);",
            ))?;
            s.execute(
                "INSERT INTO strainline_meta (key, value) VALUES ('application', ?1) ON CONFLICT (key) DO NOTHING",
                vals![APPLICATION],
            )?;
            s.check_marker()?;
            // Another strainline may have migrated while this one waited for the lock.
            let now = s.current_version()?;
            if now > known {
                return Err(too_new(now));
            }
            for (version, what, sql) in schema::MIGRATIONS.iter().filter(|m| m.0 > now) {
                s.db.borrow_mut().batch(&dialect.ddl(sql))?;
                s.execute(
                    "INSERT INTO schema_migrations (version, description, applied_at) VALUES (?1, ?2, ?3)",
                    vals![*version, *what, crate::clock::now_rfc3339()],
                )?;
            }
            Ok(())
        })
    }

    fn host_id(&self, h: &Host) -> Result<i64> {
        let fingerprint = h.fingerprint();
        self.execute(
            "INSERT INTO hosts (fingerprint, hostname, cpu_model, cores, memory_bytes, kernel, os)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
             ON CONFLICT (fingerprint, hostname, kernel, os) DO NOTHING",
            vals![
                &fingerprint,
                &h.hostname,
                &h.cpu_model,
                h.cores as i64,
                h.memory_bytes,
                &h.kernel,
                &h.os
            ],
        )?;
        Ok(self
            .one(
                "SELECT id FROM hosts WHERE fingerprint = ?1 AND hostname = ?2 AND kernel = ?3 AND os = ?4",
                vals![&fingerprint, &h.hostname, &h.kernel, &h.os],
            )?
            .map_or(0, |r| r.int(0)))
    }

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

    /// Keeps settings of a run that later commands need (a JSON object).
    /// The commit a run measured, where it was not the working tree's (a paired
    /// session's `--baseline-ref`).
    pub fn set_run_commit(&self, run_id: i64, commit: &str, dirty: bool) -> Result<()> {
        self.execute(
            "UPDATE runs SET git_commit = ?1, git_dirty = ?2 WHERE id = ?3",
            vals![commit, dirty, run_id],
        )?;
        Ok(())
    }

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

    pub fn run_settings(&self, run_id: i64) -> Result<Option<serde_json::Value>> {
        Ok(self
            .one("SELECT settings FROM runs WHERE id = ?1", vals![run_id])?
            .and_then(|r| r.opt_text(0))
            .and_then(|s| serde_json::from_str(&s).ok()))
    }

    /// Records the end of a run.
    pub fn finish_run(
        &self,
        run_id: i64,
        status: &str,
        exit_code: Option<i32>,
        reasons: &[String],
    ) -> Result<()> {
        self.execute(
            "UPDATE runs SET status = ?2, exit_code = ?3, ended_at = ?4, reasons = ?5 WHERE id = ?1",
            vals![
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

    /// Keeps a named file of a case (e.g. folded CPU stacks).
    pub fn put_artifact(&self, case_id: i64, name: &str, data: &[u8]) -> Result<()> {
        self.execute(
            "INSERT INTO artifacts (case_id, name, data) VALUES (?1, ?2, ?3)
             ON CONFLICT (case_id, name) DO UPDATE SET data = excluded.data",
            vals![case_id, name, data],
        )?;
        Ok(())
    }

    pub fn artifact(&self, case_id: i64, name: &str) -> Result<Option<Vec<u8>>> {
        Ok(self
            .one(
                "SELECT data FROM artifacts WHERE case_id = ?1 AND name = ?2",
                vals![case_id, name],
            )?
            .map(|r| r.blob(0)))
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
                vals![case_id, status, crate::clock::now_rfc3339(), &summary],
            )?;
            Ok(())
        })
    }

    const RUN_COLUMNS: &'static str =
        "r.id, r.kind, r.label, r.command, r.started_at, r.ended_at, r.status, r.exit_code,
         r.git_commit, r.git_dirty, h.hostname, h.fingerprint, r.strainline_version, r.pid, r.suite";

    fn run_row(r: &Row) -> RunRow {
        let status = r.text(6);
        RunRow {
            id: r.int(0),
            kind: r.text(1),
            label: r.opt_text(2),
            command: r.text(3),
            started_at: r.text(4),
            ended_at: r.opt_text(5),
            status: if status == "running" && !process_alive(r.int(13)) {
                "abandoned".into()
            } else {
                status
            },
            exit_code: r.opt_int(7),
            git_commit: r.opt_text(8),
            git_dirty: r.opt_int(9).map(|v| v != 0),
            host: r.text(10),
            fingerprint: r.text(11),
            strainline_version: r.text(12),
            suite: r.opt_text(14),
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
                status: r.text(3),
                started_at: r.text(4),
                ended_at: r.opt_text(5),
                summary: r.opt_text(6).and_then(|s| serde_json::from_str(&s).ok()),
                params: r.opt_text(7).and_then(|s| serde_json::from_str(&s).ok()),
                repetition: r.int(8),
                samples_stored: r.int(9),
                metrics: Vec::new(),
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
        }
        Ok(cases)
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

/// Refuses a database that holds something other than a strainline store.
fn check_ours(shown: &str, existed: bool, tables: &[String]) -> Result<()> {
    if existed && !tables.is_empty() && !tables.iter().any(|t| t == "strainline_meta") {
        return Err(StoreError::Foreign {
            where_: shown.to_string(),
            why: format!(
                "it holds tables that are not strainline's (it has: {})",
                tables.join(", ")
            ),
        });
    }
    Ok(())
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
