//! Each kind's keys, one module per kind: its serde struct (the keys it takes, in the
//! order docs/suites.md lists them) and their checks — ranges, defaults, what it needs —
//! into its [`Spec`]. A load kind's workload (`workload.rs`) is read beside its own.
//! [`spec`], [`own_keys`] and their schemas are made from the table of kinds
//! (`crate::kind`).

use serde::de::DeserializeOwned;
use toml::Spanned;

use super::super::{Kind, Spec};
use super::doc::{bytes, Doc};
use super::keys::{fields_of, Table};
use super::Result;
use crate::limits;

pub(super) mod workload;

/// A test's own keys checked against: the text, where its table starts, its name and
/// kind.
pub(super) struct At<'a> {
    pub doc: &'a Doc<'a>,
    pub header: usize,
    pub name: &'a str,
    pub kind: Kind,
}

impl At<'_> {
    /// `v`, if given, within its range ([`limits`]); refused at its key.
    pub fn range(&self, v: Option<f64>, limit: limits::Limit) -> Result<()> {
        match v.map(|v| limit.check(v)) {
            Some(Err(e)) => Err(self.refuse(limit.key, e)),
            _ => Ok(()),
        }
    }

    /// `msg` at `key = …` in the test's table (at its header if it is not written).
    pub fn refuse(&self, key: &str, msg: impl std::fmt::Display) -> crate::Error {
        self.doc.at(
            self.doc.key_offset(self.header, key),
            format!("test '{}': {msg}", self.name),
        )
    }

    /// The test needs `what`, refused at its header unless `present`.
    pub fn needs(&self, present: bool, what: &str) -> Result<()> {
        if present {
            return Ok(());
        }
        Err(self.doc.at(
            self.header,
            format!("test '{}' ({}) needs {what}", self.name, self.kind.name()),
        ))
    }

    /// An argv under `key` names a program: `[]` or `[""]` would run nothing.
    pub fn argv(&self, key: &str, argv: &Option<Vec<String>>) -> Result<()> {
        if argv
            .as_ref()
            .is_some_and(|a| a.first().is_none_or(|p| p.trim().is_empty()))
        {
            return Err(self.refuse(
                key,
                format!("{key} names no program: give its argv, e.g. [\"./check\", \"data/\"]"),
            ));
        }
        Ok(())
    }
}

fn own<T: DeserializeOwned>(at: &At, table: &Table) -> Result<T> {
    table.read(at.doc)
}

fn schema_of<T: schemars::JsonSchema>() -> serde_json::Value {
    serde_json::to_value(schemars::schema_for!(T)).expect("a schema is JSON")
}

/// Each kind's module, its spec read ([`spec`]), its keys' fields ([`own_keys`]) and
/// their schema, from the table of kinds (`crate::kind`).
macro_rules! keys_of_kinds {
    (
        load: [$($lv:ident $lm:ident { $($lk:ident: $lx:expr),* $(,)? }),* $(,)?],
        process: [$($pv:ident $pm:ident { $($pk:ident: $px:expr),* $(,)? }),* $(,)?] $(,)?
    ) => {
        $(pub mod $lm;)*
        $(pub mod $pm;)*

        /// The kind's own spec from its test's table, with its defaults.
        pub(super) fn spec(at: &At, table: &Table, has_target: bool) -> Result<Spec> {
            Ok(match at.kind {
                $(Kind::$lv => Spec::$lv($lm::spec(
                    at,
                    own(at, table)?,
                    workload::read(at, table, has_target)?,
                )?),)*
                $(Kind::$pv => Spec::$pv($pm::spec(at, own(at, table)?)?),)*
            })
        }

        /// The keys a kind takes beyond the common ones, as its structs declare them.
        pub(super) fn own_keys(kind: Kind) -> &'static [&'static str] {
            match kind {
                $(Kind::$lv => fields_of::<$lm::Keys>(),)*
                $(Kind::$pv => fields_of::<$pm::Keys>(),)*
            }
        }

        /// A test of the kind with its least keys (its module's `EXAMPLE`).
        #[cfg(test)]
        pub(crate) fn example(kind: Kind) -> &'static str {
            match kind {
                $(Kind::$lv => $lm::EXAMPLE,)*
                $(Kind::$pv => $pm::EXAMPLE,)*
            }
        }

        /// Its own keys' JSON Schema.
        fn own_schema(kind: Kind) -> serde_json::Value {
            match kind {
                $(Kind::$lv => schema_of::<$lm::Keys>(),)*
                $(Kind::$pv => schema_of::<$pm::Keys>(),)*
            }
        }
    };
}
crate::kind::table!(keys_of_kinds);

/// The keys a kind takes beyond the common ones: a load kind's workload's, then its own.
pub(super) fn keys(kind: Kind) -> Vec<&'static str> {
    let mut keys = Vec::new();
    if kind.has_target() {
        keys.extend(fields_of::<workload::Keys>());
    }
    keys.extend(own_keys(kind));
    keys
}

/// Each kind's keys' JSON Schema (its own, then a load kind's workload's), made from the
/// structs that read them.
pub(super) fn schemas() -> Vec<(Kind, Vec<serde_json::Value>)> {
    Kind::TESTS
        .iter()
        .map(|&kind| {
            let mut parts = vec![own_schema(kind)];
            if kind.has_target() {
                parts.push(schema_of::<workload::Keys>());
            }
            (kind, parts)
        })
        .collect()
}

/// A share as written (`"1%"`), from 0% to `at_most`: a bare number is refused with the fix.
pub(super) fn share(doc: &Doc, v: &Spanned<toml::Value>, key: &str, at_most: f64) -> Result<f64> {
    let parsed = match v.get_ref() {
        toml::Value::String(s) => crate::units::parse_fraction(s),
        toml::Value::Float(f) => crate::units::parse_fraction(&f.to_string())
            .map_err(|e| e.reword(|m| format!("{m}, in quotes: \"{f}%\""))),
        toml::Value::Integer(i) => crate::units::parse_fraction(&i.to_string())
            .map_err(|e| e.reword(|m| format!("{m}, in quotes: \"{i}%\""))),
        other => Err(crate::Error::usage(format!(
            "{other} is not a percentage: write it as \"1%\""
        ))),
    };
    match parsed {
        Ok(f) if f <= at_most => Ok(f),
        Ok(_) => Err(doc.at(
            v.span().start,
            format!(
                "{key}: out of range, give a share from 0% to {}%",
                at_most * 100.0
            ),
        )),
        Err(e) => Err(doc.at(v.span().start, format!("{key}: {e}"))),
    }
}

/// A size in bytes as written (`17MiB`), within its range.
pub(super) fn size(
    doc: &Doc,
    b: &Spanned<String>,
    limit: limits::Limit,
    example: &str,
) -> Result<f64> {
    let v = b.get_ref();
    let n = bytes(v).ok_or_else(|| {
        let bare = v.trim().parse::<f64>().is_ok();
        doc.at(
            b.span().start,
            if bare {
                format!(
                    "{}: '{v}' has no unit: {v} what? write \"{v}MiB\", \"{v}KiB\" or \"{v}B\"",
                    limit.key
                )
            } else {
                format!("{}: '{v}' is not a size (e.g. {example})", limit.key)
            },
        )
    })?;
    limit.check(n).map_err(|_| {
        doc.at(
            b.span().start,
            format!(
                "{} = \"{v}\": out of range, give a size from {} to {}",
                limit.key,
                crate::units::Bytes(limit.min as u64),
                crate::units::Bytes(limit.max as u64)
            ),
        )
    })
}

/// A leak budget as written (`leak_budget = "10MiB"`, the default).
pub(super) fn leak_budget(doc: &Doc, b: &Option<Spanned<String>>) -> Result<f64> {
    match b {
        Some(b) => size(doc, b, limits::LEAK_BUDGET, "10MiB"),
        None => Ok(10.0 * 1048576.0),
    }
}
