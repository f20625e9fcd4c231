//! The suite file as written: serde shapes of its tables, every key spanned where an
//! error must point at it. Unknown keys are refused here (`deny_unknown_fields`);
//! [`super::parse`] turns these into the checked model.

use std::collections::BTreeMap;

use serde::Deserialize;
use toml::Spanned;

use super::SetupRequest;

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
    #[serde(default)]
    #[schemars(with = "Vec<RawTest>")]
    pub test: Vec<Spanned<RawTest>>,
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

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Test")]
pub struct RawTest {
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
    pub url: Option<String>,
    #[schemars(with = "Option<String>")]
    pub scenario: Option<Spanned<String>>,
    pub method: Option<String>,
    pub body: Option<String>,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    pub rate: Option<f64>,
    pub connections: Option<usize>,
    #[schemars(with = "Option<String>")]
    pub duration: Option<Spanned<String>>,
    pub threads: Option<usize>,
    #[schemars(with = "Option<String>")]
    pub timeout: Option<Spanned<String>>,
    #[serde(default)]
    pub setup: Vec<SetupRequest>,
    pub start: Option<f64>,
    pub step: Option<f64>,
    #[schemars(with = "Option<String>")]
    pub step_duration: Option<Spanned<String>>,
    pub max_steps: Option<u32>,
    #[schemars(with = "Option<String>")]
    pub slo_p99: Option<Spanned<String>>,
    #[schemars(with = "Option<serde_json::Value>")]
    pub max_error_rate: Option<Spanned<toml::Value>>,
    #[schemars(with = "Option<String>")]
    pub leak_budget: Option<Spanned<String>>,
    #[schemars(with = "Option<String>")]
    pub horizon: Option<Spanned<String>>,
    pub clients: Option<u64>,
    #[schemars(with = "Option<String>")]
    pub client_period: Option<Spanned<String>>,
    #[schemars(with = "Option<String>")]
    pub ram: Option<Spanned<String>>,
    pub rounds: Option<u32>,
    pub ops: Option<u64>,
    pub quiesce_url: Option<String>,
    #[schemars(with = "Option<String>")]
    pub settle: Option<Spanned<String>>,
    pub command: Option<Vec<String>>,
    pub http2: Option<bool>,
    pub streams: Option<usize>,
    #[schemars(with = "Option<String>")]
    pub cacert: Option<Spanned<String>>,
    pub insecure: Option<bool>,
    pub reply_field: Option<String>,
    pub iterations: Option<u32>,
    #[schemars(with = "Option<String>")]
    pub kill_after: Option<Spanned<String>>,
    #[schemars(with = "Option<String>")]
    pub kill_at_log: Option<Spanned<String>>,
    pub verify: Option<Vec<String>>,
    #[serde(default)]
    pub sizes: Vec<u64>,
    #[serde(default)]
    pub profile: bool,
}

/// The JSON Schema of a suite file, from these very types.
pub fn schema() -> serde_json::Value {
    serde_json::to_value(schemars::schema_for!(RawSuite)).expect("a schema is JSON")
}

/// The keys every test takes, whatever its kind; the rest are its kind's
/// ([`super::parse`]'s `own_keys`) or its workload's.
pub const COMMON_KEYS: &[&str] = &[
    "name", "kind", "repeat", "matrix", "gates", "expect", "interval", "profile",
];

/// The kind-specific keys each `[[test]]` sets, read from the file's own tables (not
/// from a list of `RawTest`'s fields kept by hand: a field added there and forgotten in
/// the kind's keys is refused at once, never silently taken by every kind).
pub fn test_keys(text: &str) -> Vec<Vec<String>> {
    let Ok(table) = text.parse::<toml::Table>() else {
        return Vec::new();
    };
    let Some(toml::Value::Array(tests)) = table.get("test") else {
        return Vec::new();
    };
    tests
        .iter()
        .map(|t| {
            t.as_table()
                .map(|t| {
                    t.keys()
                        .filter(|k| !COMMON_KEYS.contains(&k.as_str()))
                        .cloned()
                        .collect()
                })
                .unwrap_or_default()
        })
        .collect()
}
