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
mod read;
mod rows;
mod schema;
mod sqlite;
mod why;
mod write;

use std::cell::RefCell;
use std::path::{Path, PathBuf};

use crate::host::Host;
use backend::{vals, Backend, Row, Value};
pub use browse::{LiveSecond, RunFilter};
pub use keys::case_key;
pub use rows::{CaseRow, GateResult, GateTally, Metric, NewRun, RunRow, Status, StoredHistogram};

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
    Open {
        where_: String,
        why: String,
        /// The driver's error it was made from, if any (`-v` prints what of it `why`
        /// does not say).
        #[source]
        cause: Option<Cause>,
    },
    #[error("{where_} is not a strainline results store: {why} (point --store at a strainline store, or at a new file or empty database)")]
    Foreign {
        where_: String,
        why: String,
        #[source]
        cause: Option<Cause>,
    },
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

/// The precise error a store's refusal was made from.
pub type Cause = Box<dyn std::error::Error + Send + Sync>;

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
            | StoreError::NoSuchRun(_) => crate::Error::Usage(crate::error::Message::of(e)),
            StoreError::Sql(_) | StoreError::Postgres(_) | StoreError::Json(_) => {
                crate::Error::Environment(crate::error::Message::of(e))
            }
        }
    }
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
                        cause: None,
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
            cause: Some(Box::new(e)),
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
                cause: None,
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
            cause: None,
        });
    }
    Ok(())
}
