//! The shared store: PostgreSQL, so that a team's CI machines keep one history. Same
//! schema and migrations as SQLite (widened types), same queries. Concurrent writers
//! are safe: ids come from identity columns, hosts are upserted, and migrations take a
//! transaction-scoped advisory lock.

use std::collections::HashMap;
use std::error::Error;

use bytes::BytesMut;
use postgres::types::{to_sql_checked, IsNull, ToSql, Type};
use postgres::{Client, NoTls, Statement};

use super::backend::{Backend, Dialect, Row, Value};
use super::{Result, StoreError};

/// The advisory lock key that serialises migrations ("strainln" in ASCII).
const MIGRATION_LOCK: i64 = 0x7374_7261_696e_6c6e;

pub struct Postgres {
    client: Client,
    statements: HashMap<String, Statement>,
}

impl ToSql for Value {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut BytesMut,
    ) -> std::result::Result<IsNull, Box<dyn Error + Sync + Send>> {
        match self {
            Value::Null => Ok(IsNull::Yes),
            Value::Int(v) => match *ty {
                Type::INT2 => (*v as i16).to_sql(ty, out),
                Type::INT4 => (*v as i32).to_sql(ty, out),
                Type::FLOAT8 => (*v as f64).to_sql(ty, out),
                Type::FLOAT4 => (*v as f32).to_sql(ty, out),
                Type::BOOL => (*v != 0).to_sql(ty, out),
                Type::TEXT | Type::VARCHAR => v.to_string().to_sql(ty, out),
                _ => v.to_sql(ty, out),
            },
            Value::Real(v) => match *ty {
                Type::FLOAT4 => (*v as f32).to_sql(ty, out),
                Type::INT8 => (*v as i64).to_sql(ty, out),
                _ => v.to_sql(ty, out),
            },
            Value::Text(s) => s.to_sql(ty, out),
            Value::Blob(b) => b.to_sql(ty, out),
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    to_sql_checked!();
}

impl Postgres {
    /// Connects; `shown` is the URL with its password masked, for messages.
    pub fn connect(url: &str, shown: &str) -> Result<Postgres> {
        let client = Client::connect(url, NoTls).map_err(|e| StoreError::Open {
            where_: shown.to_string(),
            why: describe(&e),
        })?;
        Ok(Postgres {
            client,
            statements: HashMap::new(),
        })
    }

    fn statement(&mut self, sql: &str) -> Result<Statement> {
        if let Some(st) = self.statements.get(sql) {
            return Ok(st.clone());
        }
        let st = self
            .client
            .prepare(&Dialect::Postgres.statement(sql))
            .map_err(pg)?;
        self.statements.insert(sql.to_string(), st.clone());
        Ok(st)
    }
}

fn params(values: &[Value]) -> Vec<&(dyn ToSql + Sync)> {
    values.iter().map(|v| v as &(dyn ToSql + Sync)).collect()
}

/// The server's own message when there is one (it says what is wrong), else the
/// client's.
fn describe(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{}: {}", db.severity(), db.message()),
        None => e.to_string(),
    }
}

fn pg(e: postgres::Error) -> StoreError {
    StoreError::Postgres(describe(&e))
}

impl Backend for Postgres {
    fn dialect(&self) -> Dialect {
        Dialect::Postgres
    }

    fn execute(&mut self, sql: &str, values: &[Value]) -> Result<u64> {
        let st = self.statement(sql)?;
        self.client.execute(&st, &params(values)).map_err(pg)
    }

    fn query(&mut self, sql: &str, values: &[Value]) -> Result<Vec<Row>> {
        let st = self.statement(sql)?;
        let rows = self.client.query(&st, &params(values)).map_err(pg)?;
        rows.iter()
            .map(|r| {
                (0..r.len())
                    .map(|i| {
                        let ty = r.columns()[i].type_().clone();
                        let v = match ty {
                            Type::INT8 => r.try_get::<_, Option<i64>>(i)?.map(Value::Int),
                            Type::INT4 => r
                                .try_get::<_, Option<i32>>(i)?
                                .map(|v| Value::Int(v as i64)),
                            Type::INT2 => r
                                .try_get::<_, Option<i16>>(i)?
                                .map(|v| Value::Int(v as i64)),
                            Type::BOOL => r
                                .try_get::<_, Option<bool>>(i)?
                                .map(|v| Value::Int(v as i64)),
                            Type::FLOAT8 => r.try_get::<_, Option<f64>>(i)?.map(Value::Real),
                            Type::FLOAT4 => r
                                .try_get::<_, Option<f32>>(i)?
                                .map(|v| Value::Real(v as f64)),
                            Type::BYTEA => r.try_get::<_, Option<Vec<u8>>>(i)?.map(Value::Blob),
                            _ => r.try_get::<_, Option<String>>(i)?.map(Value::Text),
                        };
                        Ok(v.unwrap_or(Value::Null))
                    })
                    .collect::<std::result::Result<Vec<_>, postgres::Error>>()
                    .map(Row)
                    .map_err(pg)
            })
            .collect()
    }

    fn batch(&mut self, sql: &str) -> Result<()> {
        self.client.batch_execute(sql).map_err(pg)
    }

    fn tables(&mut self) -> Result<Vec<String>> {
        let rows = self.query(
            "SELECT table_name::text FROM information_schema.tables WHERE table_schema = current_schema()",
            &[],
        )?;
        Ok(rows.iter().map(|r| r.text(0)).collect())
    }

    fn lock_for_migration(&mut self) -> Result<()> {
        self.execute(
            "SELECT pg_advisory_xact_lock(?1)",
            &[Value::Int(MIGRATION_LOCK)],
        )
        .map(|_| ())
    }

    fn begin_write(&mut self) -> Result<()> {
        self.batch("BEGIN")
    }
}

/// The URL with its password masked: what may appear in messages and stored runs.
pub fn mask(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let (authority, tail) = match rest.find(['/', '?']) {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    let authority = match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _)) => format!("{user}:***@{host}"),
            None => format!("{userinfo}@{host}"),
        },
        None => authority.to_string(),
    };
    // A password may also come as a query parameter, first or not.
    let tail = match tail.split_once('?') {
        Some((path, query)) => {
            let query = query
                .split('&')
                .map(|kv| match kv.split_once('=') {
                    Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}=***"),
                    _ => kv.to_string(),
                })
                .collect::<Vec<_>>()
                .join("&");
            format!("{path}?{query}")
        }
        None => tail.to_string(),
    };
    format!("{scheme}://{authority}{tail}")
}

#[cfg(test)]
mod tests {
    use super::mask;

    #[test]
    fn passwords_are_masked_wherever_they_are() {
        assert_eq!(
            mask("postgres://ci:s3cret@127.0.0.1:5432/perf"),
            "postgres://ci:***@127.0.0.1:5432/perf"
        );
        assert_eq!(
            mask("postgresql://ci@127.0.0.1/perf?sslmode=disable&password=s3cret"),
            "postgresql://ci@127.0.0.1/perf?sslmode=disable&password=***"
        );
        assert_eq!(
            mask("postgres://ci:p@ss@127.0.0.1/perf"),
            "postgres://ci:***@127.0.0.1/perf"
        );
        assert_eq!(
            mask("postgres://u@h/db?password=X&sslmode=disable"),
            "postgres://u@h/db?password=***&sslmode=disable"
        );
        assert_eq!(
            mask("postgres://u@h?password=X"),
            "postgres://u@h?password=***"
        );
        assert_eq!(
            mask("postgres://127.0.0.1/perf"),
            "postgres://127.0.0.1/perf"
        );
    }
}
