//! A scenario file as written: the serde types that read it (unknown keys refused), and
//! the JSON Schema derived from them (`strainline schema scenario`).

use std::collections::BTreeMap;

use serde::Deserialize;
use toml::Spanned;

/// A strainline scenario file: virtual clients (or sessions, or arrivals) and the steps
/// they run, with their extractions, checks and recovery (docs/load.md, "Scenarios").
#[derive(Deserialize, schemars::JsonSchema)]
#[schemars(title = "strainline scenario")]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Scenario")]
pub(super) struct RawScenario {
    #[schemars(with = "Option<i64>")]
    pub(super) clients: Option<Spanned<i64>>,
    #[schemars(with = "Option<String>")]
    pub(super) ramp_up: Option<Spanned<String>>,
    #[schemars(with = "Option<Vec<RawStage>>")]
    pub(super) stages: Option<Spanned<Vec<RawStage>>>,
    #[schemars(with = "Option<String>")]
    pub(super) csv: Option<Spanned<String>>,
    #[schemars(with = "Option<String>")]
    pub(super) jsonl: Option<Spanned<String>>,
    pub(super) seed: Option<u64>,
    pub(super) cookies: Option<bool>,
    #[schemars(with = "Option<String>")]
    pub(super) script: Option<Spanned<String>>,
    /// `[vars]`: the flow's variables and their values (`NAME = "g-{{uuid}}"`), rendered
    /// as each client's flow starts; or a list of the names a script sets (`r.vars.NAME`).
    /// Either is usable as `{{NAME}}`.
    #[serde(default)]
    #[schemars(with = "Option<VarsSchema>")]
    pub(super) vars: RawVars,
    #[schemars(with = "Option<String>")]
    pub(super) csv_order: Option<Spanned<String>>,
    #[schemars(with = "Option<String>")]
    pub(super) csv_exhausted: Option<Spanned<String>>,
    #[schemars(with = "Option<RawArrivals>")]
    pub(super) arrivals: Option<Spanned<RawArrivals>>,
    #[schemars(with = "Option<RawSessions>")]
    pub(super) sessions: Option<Spanned<RawSessions>>,
    #[schemars(with = "Vec<RawStep>")]
    pub(super) step: Vec<Spanned<RawStep>>,
    /// `[metrics]`: the scenario's own metrics and their kinds (`cart_items = "trend"`:
    /// counter, trend, rate or gauge), fed by an extraction's `metric` or the script's
    /// `strainline.metric(NAME, value)`.
    #[serde(default)]
    #[schemars(with = "BTreeMap<String, String>")]
    pub(super) metrics: BTreeMap<String, Spanned<String>>,
}

/// `[sessions]`: `rate = N` new sessions a second, or `stages` of such rates;
/// `poisson = true` for Poisson arrivals.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Sessions")]
pub(super) struct RawSessions {
    #[schemars(with = "Option<f64>")]
    pub(super) rate: Option<Spanned<f64>>,
    #[schemars(with = "Option<Vec<RawStage>>")]
    pub(super) stages: Option<Spanned<Vec<RawStage>>>,
    pub(super) poisson: Option<bool>,
}

/// `{ to = 200, over = "30s" }` or `{ hold = "2m" }`.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Stage")]
pub(super) struct RawStage {
    pub(super) to: Option<f64>,
    pub(super) over: Option<String>,
    pub(super) hold: Option<String>,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Arrivals")]
pub(super) struct RawArrivals {
    #[schemars(with = "Option<Vec<i64>>")]
    pub(super) per_second: Option<Spanned<Vec<Spanned<i64>>>>,
    #[schemars(with = "Option<f64>")]
    pub(super) rate: Option<Spanned<f64>>,
    pub(super) poisson: Option<bool>,
    #[schemars(with = "Option<f64>")]
    pub(super) scale: Option<Spanned<f64>>,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Step")]
pub(super) struct RawStep {
    pub(super) name: Option<String>,
    #[schemars(with = "Option<bool>")]
    pub(super) once: Option<Spanned<bool>>,
    #[schemars(with = "Option<String>")]
    pub(super) every: Option<Spanned<String>>,
    #[schemars(with = "Option<i64>")]
    pub(super) weight: Option<Spanned<i64>>,
    #[schemars(with = "Option<String>")]
    pub(super) think: Option<Spanned<String>>,
    #[schemars(with = "Option<String>")]
    pub(super) pace: Option<Spanned<String>>,
    #[schemars(with = "Option<String>")]
    pub(super) method: Option<Spanned<String>>,
    #[schemars(with = "Option<String>")]
    pub(super) path: Option<Spanned<String>>,
    #[schemars(with = "Option<Vec<String>>")]
    pub(super) paths: Option<Spanned<Vec<Spanned<String>>>>,
    #[serde(default)]
    #[schemars(with = "BTreeMap<String, String>")]
    pub(super) headers: BTreeMap<String, Spanned<String>>,
    #[schemars(with = "Option<String>")]
    pub(super) body: Option<Spanned<String>>,
    /// A form body from fields (`form = { username = "{{csv.username}}" }`), each name
    /// and value URL-encoded, in name order; Content-Type set.
    #[schemars(with = "Option<BTreeMap<String, String>>")]
    pub(super) form: Option<Spanned<BTreeMap<String, Spanned<String>>>>,
    /// A JSON body from a TOML value (`json = { name = "{{group}}", n = 3 }`), its
    /// strings templates; Content-Type set.
    #[schemars(with = "Option<serde_json::Value>")]
    pub(super) json: Option<Spanned<toml::Value>>,
    #[serde(default)]
    #[schemars(with = "BTreeMap<String, RawExtract>")]
    pub(super) extract: BTreeMap<String, Spanned<RawExtract>>,
    #[serde(default)]
    #[schemars(with = "BTreeMap<String, RawCheck>")]
    pub(super) check: BTreeMap<String, Spanned<RawCheck>>,
    #[schemars(with = "Option<serde_json::Value>")]
    pub(super) on_failure: Option<Spanned<toml::Value>>,
    pub(super) follow: Option<bool>,
    #[serde(rename = "loop")]
    #[schemars(with = "Option<RawLoop>")]
    pub(super) repeat: Option<Spanned<RawLoop>>,
    /// Variables this step sets before its request is made (`set.group = "g-{{uuid}}"`):
    /// its request, checks and the steps after it see them.
    #[serde(default)]
    #[schemars(with = "BTreeMap<String, String>")]
    pub(super) set: BTreeMap<String, Spanned<String>>,
    /// The group the step belongs to (`group = "checkout"`), with the steps beside it
    /// that name it: their figures together and the time they took in a row.
    #[schemars(with = "Option<String>")]
    pub(super) group: Option<Spanned<String>>,
    /// Tags of the step (`tags = { page = "admin" }`): the figures of every step with a
    /// tag are kept together (`tag.page=admin.latency_p95`).
    #[serde(default)]
    #[schemars(with = "BTreeMap<String, String>")]
    pub(super) tags: BTreeMap<String, Spanned<String>>,
}

/// What `vars` may be, for the schema (read by [`RawVars`]'s own deserializer).
#[derive(schemars::JsonSchema)]
#[serde(untagged)]
#[allow(dead_code)]
enum VarsSchema {
    Values(BTreeMap<String, String>),
    Names(Vec<String>),
}

/// `vars`: a table of names and values, or a list of names a script sets.
#[derive(Default)]
pub(super) enum RawVars {
    #[default]
    None,
    Names(Vec<String>),
    Values(BTreeMap<String, Spanned<String>>),
}

impl RawVars {
    /// The names it declares, in order.
    pub(super) fn names(&self) -> Vec<String> {
        match self {
            RawVars::None => Vec::new(),
            RawVars::Names(n) => n.clone(),
            RawVars::Values(v) => v.keys().cloned().collect(),
        }
    }
}

// By hand: serde's untagged enums buffer the value and lose `Spanned`'s positions.
impl<'de> Deserialize<'de> for RawVars {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = RawVars;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a table of variables ([vars] NAME = \"value\") or a list of the names a script sets")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, a: A) -> Result<RawVars, A::Error> {
                Vec::deserialize(serde::de::value::SeqAccessDeserializer::new(a))
                    .map(RawVars::Names)
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, a: A) -> Result<RawVars, A::Error> {
                // Read on from the same map: each value keeps its position.
                BTreeMap::deserialize(serde::de::value::MapAccessDeserializer::new(a))
                    .map(RawVars::Values)
            }
        }
        d.deserialize_any(Visit)
    }
}

/// `loop = { from = "add", times = 3 }` (or `times = "1..5"`, or `until = {…}`).
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Loop")]
pub(super) struct RawLoop {
    pub(super) from: String,
    #[schemars(with = "Option<serde_json::Value>")]
    pub(super) times: Option<toml::Value>,
    pub(super) until: Option<RawCheck>,
}

/// `extract.NAME = { json = "$.token" }` (or `regex`, `header`, `cookie`).
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Extract")]
pub(super) struct RawExtract {
    pub(super) json: Option<String>,
    pub(super) regex: Option<String>,
    pub(super) header: Option<String>,
    pub(super) cookie: Option<String>,
    /// The scenario's metric (`[metrics]`) each value found feeds.
    pub(super) metric: Option<String>,
}

/// `check.NAME = { status = [200], body_contains = "…", … }`.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Check")]
pub(super) struct RawCheck {
    #[schemars(with = "Option<serde_json::Value>")]
    pub(super) status: Option<toml::Value>,
    #[schemars(with = "Option<String>")]
    pub(super) body_contains: Option<Spanned<String>>,
    pub(super) body_matches: Option<String>,
    #[serde(default)]
    #[schemars(with = "BTreeMap<String, serde_json::Value>")]
    pub(super) json: BTreeMap<String, toml::Value>,
    #[serde(default)]
    pub(super) json_exists: Vec<String>,
    #[serde(default)]
    pub(super) headers: Vec<String>,
    pub(super) latency: Option<String>,
}

/// The JSON Schema of a scenario file, from the very types that read it.
pub fn schema() -> serde_json::Value {
    serde_json::to_value(schemars::schema_for!(RawScenario)).expect("a schema is JSON")
}
