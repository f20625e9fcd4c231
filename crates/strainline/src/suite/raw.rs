//! The suite file as written: serde shapes of its tables, every key spanned where an
//! error must point at it. Unknown keys are refused here (`deny_unknown_fields`);
//! [`super::parse`] turns these into the checked model.

use std::collections::BTreeMap;

use serde::Deserialize;
use toml::Spanned;

use super::SetupRequest;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSuite {
    pub suite: Option<RawMeta>,
    pub target: Option<RawTarget>,
    pub logs: Option<RawLogs>,
    #[serde(default)]
    pub watch: Vec<Spanned<RawWatch>>,
    #[serde(default)]
    pub test: Vec<Spanned<RawTest>>,
    pub compare: Option<RawCompare>,
}

/// `[compare]`: how `strainline compare` judges this suite's runs.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCompare {
    pub alpha: Option<Spanned<f64>>,
    pub band: Option<Spanned<toml::Value>>,
    #[serde(default)]
    pub bands: BTreeMap<String, Spanned<toml::Value>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawWatch {
    pub name: String,
    pub pid_file: Option<String>,
    pub process: Option<String>,
    pub cmdline: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawMeta {
    pub name: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTarget {
    pub build: Option<Vec<String>>,
    pub command: Option<Spanned<Vec<String>>>,
    pub attach_pid_file: Option<String>,
    #[serde(default)]
    pub shell: bool,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    pub cwd: Option<String>,
    pub ready: Option<Spanned<String>>,
    pub ready_timeout: Option<Spanned<String>>,
    pub stop_signal: Option<Spanned<String>>,
    pub stop_grace: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLogs {
    #[serde(default)]
    pub errors: Vec<Spanned<String>>,
    #[serde(default)]
    pub warnings: Vec<Spanned<String>>,
    #[serde(default)]
    pub classes: BTreeMap<String, Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTest {
    pub name: String,
    pub kind: Spanned<String>,
    pub repeat: Option<u32>,
    #[serde(default)]
    pub matrix: BTreeMap<String, Vec<toml::Value>>,
    #[serde(default)]
    pub gates: Vec<Spanned<String>>,
    pub interval: Option<Spanned<String>>,
    pub url: Option<String>,
    pub scenario: Option<Spanned<String>>,
    pub method: Option<String>,
    pub body: Option<String>,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    pub rate: Option<f64>,
    pub connections: Option<usize>,
    pub duration: Option<Spanned<String>>,
    pub threads: Option<usize>,
    pub timeout: Option<Spanned<String>>,
    #[serde(default)]
    pub setup: Vec<SetupRequest>,
    pub start: Option<f64>,
    pub step: Option<f64>,
    pub step_duration: Option<Spanned<String>>,
    pub max_steps: Option<u32>,
    pub slo_p99: Option<Spanned<String>>,
    pub max_error_rate: Option<f64>,
    pub leak_budget: Option<Spanned<String>>,
    pub horizon: Option<Spanned<String>>,
    pub clients: Option<u64>,
    pub client_period: Option<Spanned<String>>,
    pub ram: Option<Spanned<String>>,
    pub rounds: Option<u32>,
    pub ops: Option<u64>,
    pub quiesce_url: Option<String>,
    pub settle: Option<Spanned<String>>,
    pub command: Option<Vec<String>>,
    pub iterations: Option<u32>,
    pub kill_after: Option<Spanned<String>>,
    pub kill_at_log: Option<Spanned<String>>,
    pub verify: Option<Vec<String>>,
    #[serde(default)]
    pub sizes: Vec<u64>,
    #[serde(default)]
    pub profile: bool,
}

impl RawTest {
    /// The kind-specific keys this test sets (common keys are not listed).
    pub fn keys(&self) -> Vec<&'static str> {
        let mut k = Vec::new();
        let mut has = |present: bool, key: &'static str| {
            if present {
                k.push(key)
            }
        };
        has(self.url.is_some(), "url");
        has(self.scenario.is_some(), "scenario");
        has(self.method.is_some(), "method");
        has(self.body.is_some(), "body");
        has(!self.headers.is_empty(), "headers");
        has(self.rate.is_some(), "rate");
        has(self.connections.is_some(), "connections");
        has(self.duration.is_some(), "duration");
        has(self.threads.is_some(), "threads");
        has(self.timeout.is_some(), "timeout");
        has(!self.setup.is_empty(), "setup");
        has(self.start.is_some(), "start");
        has(self.step.is_some(), "step");
        has(self.step_duration.is_some(), "step_duration");
        has(self.max_steps.is_some(), "max_steps");
        has(self.slo_p99.is_some(), "slo_p99");
        has(self.max_error_rate.is_some(), "max_error_rate");
        has(self.leak_budget.is_some(), "leak_budget");
        has(self.horizon.is_some(), "horizon");
        has(self.clients.is_some(), "clients");
        has(self.client_period.is_some(), "client_period");
        has(self.ram.is_some(), "ram");
        has(self.rounds.is_some(), "rounds");
        has(self.ops.is_some(), "ops");
        has(self.quiesce_url.is_some(), "quiesce_url");
        has(self.settle.is_some(), "settle");
        has(self.command.is_some(), "command");
        has(self.iterations.is_some(), "iterations");
        has(self.kill_after.is_some(), "kill_after");
        has(self.kill_at_log.is_some(), "kill_at_log");
        has(self.verify.is_some(), "verify");
        has(!self.sizes.is_empty(), "sizes");
        k
    }
}
