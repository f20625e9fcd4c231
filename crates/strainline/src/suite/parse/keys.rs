//! A `[[test]]`'s table, read in parts: the keys every test takes ([`Common`]), a load
//! kind's workload's and its kind's own (each a serde struct of `kinds/`), each read from
//! the table as written, spans and all ([`Table::read`]). The keys a kind takes are its
//! structs' fields ([`fields_of`]), never a list kept beside them: a key none of them
//! takes is answered with that kind's keys alone, and the nearest of them.

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde::Deserialize;
use toml::de::{DeValue, ValueDeserializer};
use toml::Spanned;

use super::super::Kind;
use super::doc::Doc;
use super::Result;

/// The keys every test takes, whatever its kind.
#[derive(Deserialize, schemars::JsonSchema)]
#[schemars(rename = "Test")]
pub(super) struct Common {
    pub name: String,
    #[schemars(with = "String")]
    pub kind: Spanned<String>,
    pub repeat: Option<u32>,
    #[serde(default)]
    #[schemars(with = "BTreeMap<String, Vec<serde_json::Value>>")]
    pub matrix: BTreeMap<String, Vec<toml::Value>>,
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    pub gates: Vec<Spanned<String>>,
    #[schemars(with = "Option<String>")]
    pub expect: Option<Spanned<String>>,
    #[schemars(with = "Option<String>")]
    pub interval: Option<Spanned<String>>,
    #[serde(default)]
    pub profile: bool,
}

/// A `[[test]]`'s table as written: every key and value with its place in the file.
pub(super) struct Table<'i> {
    value: Spanned<DeValue<'i>>,
}

impl<'i> Table<'i> {
    pub(super) fn new(value: Spanned<DeValue<'i>>) -> Table<'i> {
        Table { value }
    }

    /// Where the table starts in the file.
    pub(super) fn start(&self) -> usize {
        self.value.span().start
    }

    /// The keys as written, with where each is.
    pub(super) fn keys(&self) -> Vec<(&str, usize)> {
        match self.value.get_ref() {
            DeValue::Table(t) => t
                .keys()
                .map(|k| (k.get_ref().as_ref(), k.span().start))
                .collect(),
            _ => Vec::new(),
        }
    }

    /// `T` read from the table: the keys `T` names (the others are another part's,
    /// checked by [`unknown`]), a mistake in one refused at its place.
    pub(super) fn read<T: DeserializeOwned>(&self, doc: &Doc) -> Result<T> {
        T::deserialize(ValueDeserializer::from(self.value.clone())).map_err(|e| {
            let at = e.span().map_or(self.start(), |s| s.start);
            doc.at(at, e.message().trim())
        })
    }
}

/// The fields a serde struct declares, in its order: the keys it reads.
pub(super) fn fields_of<T: DeserializeOwned>() -> &'static [&'static str] {
    use serde::de::{Error, Visitor};
    struct Probe<'a>(&'a mut &'static [&'static str]);
    impl<'de> serde::Deserializer<'de> for Probe<'_> {
        type Error = serde::de::value::Error;
        fn deserialize_any<V: Visitor<'de>>(
            self,
            _: V,
        ) -> std::result::Result<V::Value, Self::Error> {
            Err(Self::Error::custom("not a struct"))
        }
        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> std::result::Result<V::Value, Self::Error> {
            *self.0 = fields;
            Err(Self::Error::custom("its fields are known"))
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
            byte_buf option unit unit_struct newtype_struct seq tuple tuple_struct map enum
            identifier ignored_any
        }
    }
    let mut fields: &'static [&'static str] = &[];
    let _ = T::deserialize(Probe(&mut fields));
    fields
}

/// The keys every test takes.
pub(super) fn common_keys() -> &'static [&'static str] {
    fields_of::<Common>()
}

/// The first key of `table` that a `kind` test does not take, refused: a key of
/// another kind is named as such (a `rate` on a ramp would otherwise be ignored), any
/// other with the nearest of the kind's keys.
pub(super) fn unknown(doc: &Doc, table: &Table, name: &str, kind: Kind) -> Result<()> {
    let allowed = super::kinds::keys(kind);
    let Some((key, at)) = table
        .keys()
        .into_iter()
        .find(|(k, _)| !common_keys().contains(k) && !allowed.contains(k))
    else {
        return Ok(());
    };
    let owners: Vec<&str> = Kind::TESTS
        .iter()
        .copied()
        .filter(|k| super::kinds::keys(*k).contains(&key))
        .map(|k| k.name())
        .collect();
    if !owners.is_empty() {
        return Err(doc.at(
            at,
            format!(
                "test '{name}': '{key}' is not a key of a {} test (it is one of {}); a {} test takes: {}",
                kind.name(),
                owners.join(", "),
                kind.name(),
                allowed.join(", ")
            ),
        ));
    }
    let mut keys: Vec<&str> = common_keys().to_vec();
    keys.extend(allowed);
    let nearest = keys
        .iter()
        .map(|k| (edits(k, key), *k))
        .filter(|(d, _)| *d <= 2)
        .min()
        .map(|(_, k)| format!(" — did you mean `{k}`?"))
        .unwrap_or_default();
    Err(doc.at(
        at,
        format!(
            "test '{}': unknown key `{key}`{nearest} (a {} test takes: {})",
            crate::units::printable(name),
            kind.name(),
            keys.join(", ")
        ),
    ))
}

/// The edits (insert, delete, replace) that turn `a` into `b`.
pub(super) fn edits(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let here = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb))
                .min(row[j] + 1)
                .min(here + 1);
            prev = here;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_struct_s_keys_are_its_fields_in_order() {
        assert_eq!(
            common_keys(),
            ["name", "kind", "repeat", "matrix", "gates", "expect", "interval", "profile"]
        );
    }
}
