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
            cause: Some(Box::new(e)),
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

/// libpq's connection keywords (a keyword string names at least one of them).
const KEYWORDS: &[&str] = &[
    "host",
    "hostaddr",
    "port",
    "dbname",
    "user",
    "password",
    "sslmode",
    "connect_timeout",
    "application_name",
    "options",
];

/// Whether `s` is a libpq keyword string (`host=db.internal dbname=perf user=ci`): words
/// of `key=value`, one of them a connection keyword.
pub fn is_keywords(s: &str) -> bool {
    !s.contains("://")
        && s.split_whitespace().any(|w| {
            w.split_once('=')
                .is_some_and(|(k, _)| KEYWORDS.contains(&k.trim().to_ascii_lowercase().as_str()))
        })
}

/// A keyword string with its password's value masked (quoted values included).
fn mask_keywords(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.to_ascii_lowercase().find("password") {
        let (head, tail) = rest.split_at(i);
        out.push_str(head);
        let after = &tail["password".len()..];
        let eq = after.trim_start();
        // Not `password=` (a word such as `mypassword` or `password_file`): keep going.
        let boundary = head.chars().last().is_none_or(char::is_whitespace);
        if !boundary || !eq.starts_with('=') {
            out.push_str("password");
            rest = after;
            continue;
        }
        let value = eq[1..].trim_start();
        let len = if let Some(q) = value.strip_prefix('\'') {
            // A quoted value ends at the next unescaped quote.
            let mut end = q.len();
            let mut escaped = false;
            for (j, c) in q.char_indices() {
                match c {
                    '\\' if !escaped => escaped = true,
                    '\'' if !escaped => {
                        end = j + 1;
                        break;
                    }
                    _ => escaped = false,
                }
            }
            1 + end
        } else {
            value.find(char::is_whitespace).unwrap_or(value.len())
        };
        out.push_str("password=***");
        rest = &value[len.min(value.len())..];
    }
    out.push_str(rest);
    out
}

/// The URL (or keyword string) with its password masked: what may appear in messages
/// and stored runs.
pub fn mask(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return mask_keywords(url);
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
    fn a_keyword_string_is_postgres_and_its_password_is_masked() {
        use super::is_keywords;
        let s = "host=127.0.0.1 port=5432 password=SECRETPW dbname=perf";
        assert!(is_keywords(s));
        assert!(!is_keywords("results.db"));
        assert!(!is_keywords("dir/a=b.db"));
        assert_eq!(mask(s), "host=127.0.0.1 port=5432 password=*** dbname=perf");
        assert_eq!(
            mask(r"user=ci password = 'it\'s a secret' dbname=x"),
            "user=ci password=*** dbname=x"
        );
        assert!(!mask("password='a b c' host=h").contains("a b"));
        assert_eq!(mask("mypassword=1 host=h"), "mypassword=1 host=h");
    }

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
