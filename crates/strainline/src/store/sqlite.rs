//! The embedded store: one SQLite file in WAL mode, so readers never block the writer
//! and a second strainline writing to the same file waits (busy timeout) instead of
//! failing.

use std::path::Path;

use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::Connection;

use super::backend::{Backend, Dialect, Row, Value};
use super::{Result, StoreError};

pub struct Sqlite {
    conn: Connection,
}

impl rusqlite::ToSql for Value {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match self {
            Value::Null => ToSqlOutput::Borrowed(ValueRef::Null),
            Value::Int(v) => ToSqlOutput::Borrowed(ValueRef::Integer(*v)),
            Value::Real(v) => ToSqlOutput::Borrowed(ValueRef::Real(*v)),
            Value::Text(s) => ToSqlOutput::Borrowed(ValueRef::Text(s.as_bytes())),
            Value::Blob(b) => ToSqlOutput::Borrowed(ValueRef::Blob(b)),
        })
    }
}

impl Sqlite {
    pub fn open(path: &Path) -> Result<Sqlite> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| StoreError::Create {
                where_: path.display().to_string(),
                source,
            })?;
        }
        let conn = Connection::open(path).map_err(|e| StoreError::Open {
            where_: path.display().to_string(),
            why: e.to_string(),
            cause: Some(Box::new(e)),
        })?;
        // Before anything touches the file: another strainline may be creating it or
        // switching it to WAL at this very moment; wait for it rather than fail.
        conn.busy_timeout(std::time::Duration::from_secs(30))?;
        Ok(Sqlite { conn })
    }

    /// An existing file, read-only: `serve` never writes to the store (WAL readers
    /// neither block the writer nor see a half-written transaction).
    pub fn open_read_only(path: &Path) -> Result<Sqlite> {
        use rusqlite::OpenFlags;
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| StoreError::Open {
            where_: path.display().to_string(),
            why: e.to_string(),
            cause: Some(Box::new(e)),
        })?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        Ok(Sqlite { conn })
    }

    /// Settings that only make sense once the file is known to be ours.
    pub fn configure(&mut self) -> Result<()> {
        // WAL is a property of the file: the first opener sets it. Switching needs the
        // file to itself, and SQLite answers "locked" at once rather than waiting when
        // other strainlines are opening it too: retry, within the busy timeout.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let mode: rusqlite::Result<String> =
                self.conn
                    .pragma_query_value(None, "journal_mode", |r| r.get(0));
            let attempt = match mode {
                Ok(m) if m.eq_ignore_ascii_case("wal") => Ok(()),
                Ok(_) => self.conn.pragma_update(None, "journal_mode", "WAL"),
                Err(e) => Err(e),
            };
            match attempt {
                Ok(()) => break,
                Err(rusqlite::Error::SqliteFailure(e, _))
                    if e.code == rusqlite::ErrorCode::DatabaseBusy
                        && std::time::Instant::now() < deadline =>
                {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                Err(e) => return Err(e.into()),
            }
        }
        self.conn.pragma_update(None, "foreign_keys", "ON")?;
        self.conn.pragma_update(None, "synchronous", "NORMAL")?;
        Ok(())
    }
}

impl Backend for Sqlite {
    fn dialect(&self) -> Dialect {
        Dialect::Sqlite
    }

    fn execute(&mut self, sql: &str, params: &[Value]) -> Result<u64> {
        let mut st = self.conn.prepare_cached(sql)?;
        Ok(st.execute(rusqlite::params_from_iter(params.iter()))? as u64)
    }

    fn query(&mut self, sql: &str, params: &[Value]) -> Result<Vec<Row>> {
        let mut st = self.conn.prepare_cached(sql)?;
        let n = st.column_count();
        let rows = st
            .query_map(rusqlite::params_from_iter(params.iter()), |r| {
                (0..n)
                    .map(|i| {
                        Ok(match r.get_ref(i)? {
                            ValueRef::Null => Value::Null,
                            ValueRef::Integer(v) => Value::Int(v),
                            ValueRef::Real(v) => Value::Real(v),
                            ValueRef::Text(t) => Value::Text(String::from_utf8_lossy(t).into()),
                            ValueRef::Blob(b) => Value::Blob(b.to_vec()),
                        })
                    })
                    .collect::<rusqlite::Result<Vec<_>>>()
                    .map(Row)
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(rows)
    }

    fn batch(&mut self, sql: &str) -> Result<()> {
        Ok(self.conn.execute_batch(sql)?)
    }

    fn tables(&mut self) -> Result<Vec<String>> {
        let rows = match self.query("SELECT name FROM sqlite_master WHERE type = 'table'", &[]) {
            Err(StoreError::Sql(e @ rusqlite::Error::SqliteFailure(f, _)))
                if f.code == rusqlite::ErrorCode::NotADatabase =>
            {
                return Err(StoreError::Foreign {
                    where_: self.conn.path().unwrap_or_default().to_string(),
                    why: "the file is not an SQLite database".into(),
                    cause: Some(Box::new(e)),
                })
            }
            r => r?,
        };
        Ok(rows.iter().map(|r| r.text(0)).collect())
    }

    fn lock_for_migration(&mut self) -> Result<()> {
        // BEGIN IMMEDIATE already holds SQLite's write lock.
        Ok(())
    }

    fn begin_write(&mut self) -> Result<()> {
        self.batch("BEGIN IMMEDIATE")
    }
}
