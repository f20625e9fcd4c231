//! The suite file as written: serde shapes of its tables, every key spanned where an
//! error must point at it. Unknown keys are refused here (`deny_unknown_fields`);
//! [`super::parse`] turns these into the checked model.

use std::collections::BTreeMap;

use serde::Deserialize;
use toml::Spanned;

/// A strainline suite file: the system under test (`[target]`), what else to watch,
/// and the tests (`[[test]]`) run against it (docs/suites.md).
#[derive(Deserialize, schemars::JsonSchema)]
#[schemars(title = "strainline suite")]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Suite")]
pub struct RawSuite {
    pub suite: Option<RawMeta>,
    pub target: Option<RawTarget>,
    pub logs: Option<RawLogs>,
    #[serde(default)]
    #[schemars(with = "Vec<RawWatch>")]
    pub watch: Vec<Spanned<RawWatch>>,
    // Read by kind from the spanned document (`parse`'s `keys` and `kinds`); here only
    // checked to be an array of tables. Its schema is `parse::test_schema`'s.
    #[serde(default)]
    #[allow(dead_code)]
    #[schemars(with = "Vec<serde_json::Map<String, serde_json::Value>>")]
    pub test: Vec<toml::Table>,
    pub compare: Option<RawCompare>,
}

/// `[compare]`: how `strainline compare` judges this suite's runs.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Compare")]
pub struct RawCompare {
    #[schemars(with = "Option<f64>")]
    pub alpha: Option<Spanned<f64>>,
    #[schemars(with = "Option<serde_json::Value>")]
    pub band: Option<Spanned<toml::Value>>,
    #[serde(default)]
    #[schemars(with = "BTreeMap<String, serde_json::Value>")]
    pub bands: BTreeMap<String, Spanned<toml::Value>>,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Watch")]
pub struct RawWatch {
    pub name: String,
    pub pid_file: Option<String>,
    pub process: Option<String>,
    #[schemars(with = "Option<String>")]
    pub cmdline: Option<Spanned<String>>,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Meta")]
pub struct RawMeta {
    pub name: Option<String>,
    /// Defaults of `{{NAME}}` placeholders: a `--var NAME=VALUE` (and a matrix value)
    /// wins over them.
    #[serde(default)]
    pub vars: BTreeMap<String, String>,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Target")]
pub struct RawTarget {
    pub build: Option<Vec<String>>,
    #[schemars(with = "Option<Vec<String>>")]
    pub command: Option<Spanned<Vec<String>>>,
    pub attach_pid_file: Option<String>,
    pub attach_port: Option<u16>,
    /// A service strainline neither starts nor watches: only its URL (a staging host).
    #[schemars(with = "Option<String>")]
    pub url: Option<Spanned<String>>,
    /// The agent (by name) on whose machine the process to attach to runs.
    #[schemars(with = "Option<String>")]
    pub host: Option<Spanned<String>>,
    #[serde(default)]
    pub shell: bool,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    pub cwd: Option<String>,
    #[schemars(with = "Option<String>")]
    pub ready: Option<Spanned<String>>,
    #[schemars(with = "Option<String>")]
    pub ready_timeout: Option<Spanned<String>>,
    #[schemars(with = "Option<String>")]
    pub stop_signal: Option<Spanned<String>>,
    #[schemars(with = "Option<String>")]
    pub stop_grace: Option<Spanned<String>>,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Logs")]
pub struct RawLogs {
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    pub errors: Vec<Spanned<String>>,
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    pub warnings: Vec<Spanned<String>>,
    #[serde(default)]
    #[schemars(with = "BTreeMap<String, String>")]
    pub classes: BTreeMap<String, Spanned<String>>,
}

/// The JSON Schema of a suite file, from these very types: a `[[test]]` is one of the
/// kinds, each with the keys every test takes, a load kind's workload's and its own
/// (`parse`'s structs, which read them).
pub fn schema() -> serde_json::Value {
    let mut schema =
        serde_json::to_value(schemars::schema_for!(RawSuite)).expect("a schema is JSON");
    super::parse::test_schema(&mut schema);
    schema
}
