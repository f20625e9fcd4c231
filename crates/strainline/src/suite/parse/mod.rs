//! From the suite file as written ([`super::raw`]) to the checked model, section by
//! section — `[target]`, `[logs]`, `[[watch]]` and `[compare]` (`sections.rs`), each
//! `[[test]]`: its common keys here (read by `keys.rs`, which also refuses a key its kind
//! does not take), then its kind's own keys and workload, one module per kind
//! (`kinds/`), URLs checked without resolving them (`urls.rs`) — every mistake refused as
//! `FILE:LINE:COLUMN: what is wrong` with the fix (`doc.rs`). A key that belongs to
//! another kind is refused too: a `rate` on a ramp would otherwise be silently ignored.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::gate;
use super::raw::RawSuite;
use super::{kind_metrics, log_class_metric, Kind, Suite, Test};
use crate::metrics::Unit;

mod doc;
mod keys;
pub(super) mod kinds;
mod sections;
mod urls;

use doc::Doc;
use keys::{Common, Table};

type Result<T> = crate::error::Result<T>;

/// Reads and checks a suite's text; `time_scale` multiplies every test duration.
pub fn parse(text: &str, path: &Path, time_scale: f64) -> Result<Suite> {
    let doc = Doc {
        path,
        text,
        time_scale,
    };
    let raw: RawSuite = toml::from_str(text).map_err(|e| {
        let at = e.span().map_or(0, |s| s.start);
        doc.at(at, e.message().trim())
    })?;
    // The tests again, spanned: each is read by its kind's keys.
    let tables: Vec<Table> = match toml::de::DeTable::parse(text) {
        Ok(d) => match d.into_inner().remove("test").map(|t| t.into_inner()) {
            Some(toml::de::DeValue::Array(tests)) => {
                tests.iter().cloned().map(Table::new).collect()
            }
            _ => Vec::new(),
        },
        Err(_) => Vec::new(), // toml::from_str read the same text
    };
    let target = raw
        .target
        .as_ref()
        .map(|t| sections::target(&doc, t))
        .transpose()?;
    let logs = raw
        .logs
        .as_ref()
        .map(|l| sections::logs(&doc, l))
        .transpose()?
        .unwrap_or_default();
    let watches = raw
        .watch
        .iter()
        .map(|w| sections::watch(&doc, w))
        .collect::<Result<Vec<_>>>()?;
    // Metrics the suite adds to every kind with a target: its watches and log classes.
    let suite_metrics: Vec<(String, Unit)> = watches
        .iter()
        .flat_map(|w| {
            [
                (format!("watch_{}_peak_rss", w.name), Unit::Bytes),
                (format!("watch_{}_cpu", w.name), Unit::Cores),
            ]
        })
        .chain(
            logs.classes
                .iter()
                .map(|(n, _)| (log_class_metric(n), Unit::Count)),
        )
        .collect();
    let mut commons = Vec::new();
    let mut tests = Vec::new();
    for table in &tables {
        let common: Common = table.read(&doc)?;
        tests.push(test(
            &doc,
            &common,
            table,
            target.is_some(),
            &suite_metrics,
        )?);
        commons.push(common);
    }
    if tests.is_empty() {
        return Err(doc.at(0, "the suite has no [[test]]"));
    }
    if let Some(url) = target.as_ref().and_then(|t| t.unwatched.as_ref()) {
        unwatched_fits(&doc, &commons, &tests, url)?;
    }
    let compare = raw
        .compare
        .as_ref()
        .map(|c| sections::compare(&doc, c))
        .transpose()?
        .unwrap_or_default();
    let (name, vars) = raw
        .suite
        .map_or((None, BTreeMap::new()), |s| (s.name, s.vars));
    let name = name.unwrap_or_else(|| default_name(path));
    Ok(Suite {
        name,
        vars,
        path: path.to_path_buf(),
        target,
        logs,
        watches,
        tests,
        compare,
    })
}

/// A target that is only a URL gives no CPU, memory or thread figures: the kinds whose
/// verdicts read them, and gates on them, are refused at their line.
fn unwatched_fits(doc: &Doc, raw: &[Common], tests: &[Test], url: &str) -> Result<()> {
    for (r, t) in raw.iter().zip(tests) {
        if t.kind.traits().watched {
            return Err(doc.at(
                r.kind.span().start,
                format!(
                    "test '{}': kind = \"{}\" needs a target strainline starts or watches (its verdict reads the target's CPU, memory or threads), and [target] url = \"{url}\" is only reached: use kind = \"bench\", or watch it by an agent on its host (attach_port with host = \"AGENT\")",
                    t.name,
                    t.kind.name()
                ),
            ));
        }
        for (g, raw_gate) in t.gates.iter().zip(&r.gates) {
            // The load's figures, and a kind's own that are not the target's processes'
            // (a spike's recovery time).
            let measured = crate::metrics::lookup(&g.metric).is_some_and(|d| {
                d.made_by(crate::metrics::Source::Load) || d.made_by(t.kind) && !d.target
            });
            if !measured {
                return Err(doc.at(
                    raw_gate.span().start + 1,
                    format!(
                        "gate: '{}' is a figure of the target's processes, and [target] url = \"{url}\" is not watched",
                        g.metric
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// A `[[test]]`: its common keys, its gates, then its kind's own spec.
fn test(
    doc: &Doc,
    t: &Common,
    table: &Table,
    has_target: bool,
    suite_metrics: &[(String, Unit)],
) -> Result<Test> {
    let header = table.start();
    let kind = Kind::parse_test(t.kind.get_ref()).ok_or_else(|| {
        let kinds: Vec<&str> = Kind::TESTS.iter().map(|k| k.name()).collect();
        doc.at(
            t.kind.span().start,
            format!(
                "kind: '{}' (expected one of: {})",
                t.kind.get_ref(),
                kinds.join(", ")
            ),
        )
    })?;
    keys::unknown(doc, table, &t.name, kind)?;
    let at = kinds::At {
        doc,
        header,
        name: &t.name,
        kind,
    };
    at.range(t.repeat.map(f64::from), crate::limits::REPEAT)?;
    matrix_fits(&at, t)?;
    let mut metrics = kind_metrics(kind);
    if kind.has_target() {
        metrics.extend(suite_metrics.iter().map(|(n, u)| (n.as_str(), *u)));
    }
    let mut gates = Vec::new();
    let mut harness_gates = Vec::new();
    for g in &t.gates {
        match gate::parse(g.get_ref(), &metrics) {
            Ok(parsed) => gates.push(parsed),
            Err((_, msg)) if kind.traits().printed_gates && msg.starts_with("unknown metric") => {
                harness_gates.push(g.get_ref().clone())
            }
            Err((off, msg)) => return Err(doc.at(g.span().start + 1 + off, format!("gate: {msg}"))),
        }
    }
    let expect_failure = match &t.expect {
        None => false,
        Some(e) if e.get_ref() == "failed" => true,
        Some(e) if e.get_ref() == "passed" => false,
        Some(e) => {
            return Err(doc.at(
                e.span().start,
                format!("expect: '{}': give \"failed\" (the test shows a defect being caught: its failure passes the suite) or \"passed\" (the default)", e.get_ref()),
            ))
        }
    };
    let spec = kinds::spec(&at, table, has_target)?;
    let test = Test {
        name: t.name.clone(),
        kind,
        repeat: t.repeat.unwrap_or(1).max(1),
        matrix: t
            .matrix
            .iter()
            .map(|(k, vs)| {
                (
                    k.clone(),
                    vs.iter()
                        .map(|v| match v {
                            toml::Value::String(s) => s.clone(),
                            other => other.to_string(),
                        })
                        .collect(),
                )
            })
            .collect(),
        gates,
        harness_gates,
        expect_failure,
        interval: doc.opt_dur(&t.interval, "interval", Duration::from_millis(250), false)?,
        profile: t.profile,
        spec,
    };
    scenario_gates_fit(doc, t, &test)?;
    Ok(test)
}

/// A test's gates that name a step, group, tag or metric of its scenario name one it has
/// (`load` checks its `--gate`s the same way).
fn scenario_gates_fit(doc: &Doc, t: &Common, test: &Test) -> Result<()> {
    let Some(path) = test.workload().and_then(|w| w.scenario.as_ref()) else {
        return Ok(());
    };
    let Ok(sc) = crate::load::scenario::load(path) else {
        return Ok(()); // read (and refused) with the workload
    };
    let steps: Vec<String> = sc.steps.iter().map(|s| s.name.clone()).collect();
    let labels = crate::load::scenario::Labels::of(&sc.steps, &sc.groups, &sc.metrics);
    // A kind with a scenario has no harness gates: its gates are its lines', in order.
    for (g, raw) in test.gates.iter().zip(&t.gates) {
        labels
            .gate_fits(&g.metric, &steps)
            .map_err(|e| doc.at(raw.span().start + 1, format!("gate: '{}': {e}", g.text)))?;
    }
    Ok(())
}

/// The cases a test expands to, bounded before any is made (10⁸ cases allocated until
/// the machine ran out), and a matrix key with no values refused.
fn matrix_fits(at: &kinds::At, t: &Common) -> Result<()> {
    let cases = t.matrix.values().map(|vs| vs.len() as f64).product::<f64>()
        * f64::from(t.repeat.unwrap_or(1));
    if cases > crate::limits::MAX_CASES {
        return Err(at.refuse(
            if t.repeat.is_some() { "repeat" } else { "matrix" },
            format!(
                "{cases:.0} cases (the matrix's combinations × repeat), more than {}: split the test or give fewer values",
                crate::limits::MAX_CASES
            ),
        ));
    }
    if let Some((k, _)) = t.matrix.iter().find(|(_, vs)| vs.is_empty()) {
        return Err(at.refuse(
            "matrix",
            format!("matrix key '{k}' has no values (give at least one)"),
        ));
    }
    Ok(())
}

/// Sets `schema`'s `[[test]]` to the keys every test takes, and for each kind (`if` its
/// `kind` is that kind's name, `then`) an object of those, a load kind's workload's and
/// its own, and no other — from the structs that read them. (`if`/`then` rather than
/// `oneOf`: an editor then names the key a kind does not take.)
pub fn test_schema(schema: &mut serde_json::Value) {
    use serde_json::json;
    let common = serde_json::to_value(schemars::schema_for!(Common)).expect("a schema is JSON");
    let mut defs = schema["$defs"].take();
    let mut cases = Vec::new();
    for (kind, parts) in kinds::schemas() {
        let mut properties = common["properties"].clone();
        for part in parts {
            if let Some(p) = part["properties"].as_object() {
                for (k, v) in p {
                    properties[k] = v.clone();
                }
            }
            if let Some(d) = part["$defs"].as_object() {
                for (k, v) in d {
                    defs[k] = v.clone();
                }
            }
        }
        cases.push(json!({
            "if": { "properties": { "kind": { "const": kind.name() } }, "required": ["kind"] },
            "then": { "properties": properties, "additionalProperties": false },
        }));
    }
    let names: Vec<&str> = Kind::TESTS.iter().map(|k| k.name()).collect();
    let mut properties = common["properties"].clone();
    properties["kind"] = json!({ "enum": names, "type": "string" });
    defs["Test"] = json!({
        "description": "A test: the keys every test takes, and its kind's (docs/suites.md).",
        "type": "object",
        "properties": properties,
        "required": common["required"],
        "allOf": cases,
    });
    schema["$defs"] = defs;
    schema["properties"]["test"] = json!({ "type": "array", "items": { "$ref": "#/$defs/Test" } });
}

/// A suite's name without `[suite] name`: its file's stem, or — for a file named after
/// the tool (`strainline.toml`, what `init` writes) or `suite.toml` — its directory's
/// name, the project it tests (so that reports do not all read "strainline").
pub fn default_name(path: &Path) -> String {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    if !matches!(stem.as_str(), "strainline" | "suite") {
        return stem;
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::canonicalize(dir)
        .ok()
        .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()))
        .filter(|n| !n.is_empty())
        .unwrap_or(stem)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_grpc_url_s_proto_is_found_beside_the_suite() {
        use super::urls::beside_the_suite;
        let suite = std::path::Path::new("/srv/perf/suite.toml");
        assert_eq!(
            beside_the_suite(suite, "grpc://h:1/a.B/C?proto=api/x.proto"),
            "grpc://h:1/a.B/C?proto=/srv/perf/api/x.proto"
        );
        assert_eq!(
            beside_the_suite(suite, "grpc://h:1/a.B/C?proto=/abs/x.proto"),
            "grpc://h:1/a.B/C?proto=/abs/x.proto"
        );
        // Other URLs are as written, even with a query that looks alike.
        assert_eq!(
            beside_the_suite(suite, "http://h:1/x?proto=y"),
            "http://h:1/x?proto=y"
        );
    }

    use super::*;

    /// The backticked names on the line of docs/suites.md that starts with `lead`,
    /// after the heading `heading` (or anywhere, when `heading` is empty).
    fn documented(text: &str, heading: &str, lead: &str) -> Vec<String> {
        let from = if heading.is_empty() {
            0
        } else {
            text.find(heading)
                .unwrap_or_else(|| panic!("docs/suites.md has no '{heading}'"))
        };
        let line = text[from..]
            .lines()
            .find(|l| l.starts_with(lead))
            .unwrap_or_else(|| panic!("no '{lead}' line after '{heading}' in docs/suites.md"));
        line.split('`')
            .skip(1)
            .step_by(2)
            .map(String::from)
            .collect()
    }

    #[test]
    fn the_docs_list_every_kinds_keys_as_the_parser_takes_them() {
        let text = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/suites.md"),
        )
        .unwrap();
        assert_eq!(
            documented(&text, "", "Workload keys"),
            keys::fields_of::<kinds::workload::Keys>(),
            "docs/suites.md's workload keys differ from the workload's struct"
        );
        for &kind in Kind::TESTS {
            let heading = format!("### {} — ", kind.name());
            assert_eq!(
                documented(&text, &heading, "Keys of its own"),
                kinds::own_keys(kind),
                "docs/suites.md's keys of {} differ from the parser's",
                kind.name()
            );
        }
    }
}
