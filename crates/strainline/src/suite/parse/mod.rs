//! From the suite file as written ([`super::raw`]) to the checked model, section by
//! section — `[target]`, `[logs]`, `[[watch]]` and `[compare]` (`sections.rs`), each
//! `[[test]]`: its common keys here, the keys its kind takes (`keys.rs`), then its
//! kind's own spec and workload (`kinds.rs`), URLs checked without resolving them
//! (`urls.rs`) — every mistake refused as `FILE:LINE:COLUMN: what is wrong` with the fix
//! (`doc.rs`). A key that belongs to another kind is refused too: a `rate` on a ramp
//! would otherwise be silently ignored.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use toml::Spanned;

use super::gate;
use super::raw::{RawSuite, RawTest};
use super::{kind_metrics, log_class_metric, Kind, Suite, Test};
use crate::metrics::Unit;

mod doc;
mod keys;
mod kinds;
mod sections;
mod urls;

use doc::Doc;
use keys::{own_keys, unknown_test_key, WORKLOAD_KEYS};
use urls::{beside_the_suite, files_named};

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
        let message = e.message().trim();
        doc.at(
            at,
            unknown_test_key(text, at, message).unwrap_or_else(|| message.to_string()),
        )
    })?;
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
    let keys = super::raw::test_keys(text);
    let tests = raw
        .test
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let keys = keys.get(i).map_or(&[][..], |k| k.as_slice());
            test(&doc, t, keys, target.is_some(), &suite_metrics)
        })
        .collect::<Result<Vec<_>>>()?;
    if tests.is_empty() {
        return Err(doc.at(0, "the suite has no [[test]]"));
    }
    if let Some(url) = target.as_ref().and_then(|t| t.unwatched.as_ref()) {
        unwatched_fits(&doc, &raw.test, &tests, url)?;
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
fn unwatched_fits(doc: &Doc, raw: &[Spanned<RawTest>], tests: &[Test], url: &str) -> Result<()> {
    for (r, t) in raw.iter().zip(tests) {
        if matches!(t.kind, Kind::Ramp | Kind::Soak | Kind::Rounds) {
            return Err(doc.at(
                r.get_ref().kind.span().start,
                format!(
                    "test '{}': kind = \"{}\" needs a target strainline starts or watches (its verdict reads the target's CPU, memory or threads), and [target] url = \"{url}\" is only reached: use kind = \"bench\", or watch it by an agent on its host (attach_port with host = \"AGENT\")",
                    t.name,
                    t.kind.name()
                ),
            ));
        }
        for (g, raw_gate) in t.gates.iter().zip(&r.get_ref().gates) {
            let from_load = crate::metrics::lookup(&g.metric)
                .is_some_and(|d| d.made_by(crate::metrics::Source::Load));
            if !from_load {
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
    spanned: &Spanned<RawTest>,
    written: &[String],
    has_target: bool,
    suite_metrics: &[(String, Unit)],
) -> Result<Test> {
    let span = spanned.span();
    let t = spanned.get_ref();
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
    let allowed: Vec<&str> = if kind.has_target() {
        WORKLOAD_KEYS
            .iter()
            .chain(own_keys(kind))
            .copied()
            .collect()
    } else {
        own_keys(kind).to_vec()
    };
    if let Some(key) = written
        .iter()
        .map(String::as_str)
        .find(|k| !allowed.contains(k))
    {
        let owners: Vec<&str> = Kind::TESTS
            .into_iter()
            .filter(|k| {
                own_keys(*k).contains(&key) || (k.has_target() && WORKLOAD_KEYS.contains(&key))
            })
            .map(|k| k.name())
            .collect();
        return Err(doc.at(
            doc.key_offset(span.start, key),
            format!(
                "test '{}': '{key}' is not a key of a {} test (it is one of {}); a {} test takes: {}",
                t.name,
                kind.name(),
                owners.join(", "),
                kind.name(),
                allowed.join(", ")
            ),
        ));
    }
    kinds::ranges(doc, span.start, t)?;
    let mut metrics = kind_metrics(kind);
    if kind.has_target() {
        metrics.extend(suite_metrics.iter().map(|(n, u)| (n.as_str(), *u)));
    }
    let mut gates = Vec::new();
    let mut harness_gates = Vec::new();
    for g in &t.gates {
        match gate::parse(g.get_ref(), &metrics) {
            Ok(parsed) => gates.push(parsed),
            Err((_, msg)) if kind == Kind::Harness && msg.starts_with("unknown metric") => {
                harness_gates.push(g.get_ref().clone())
            }
            Err((off, msg)) => return Err(doc.at(g.span().start + 1 + off, format!("gate: {msg}"))),
        }
    }
    let needs = |present: bool, what: &str| -> Result<()> {
        if present {
            Ok(())
        } else {
            Err(doc.at(
                span.start,
                format!("test '{}' ({}) needs {what}", t.name, kind.name()),
            ))
        }
    };
    // What a run would refuse of the URL's options and the reply field, `check`
    // refuses at their line (MQTT's qos, keep_alive, subscribers; an empty field).
    if let Some((url, p)) = t
        .url
        .as_deref()
        .and_then(|u| Some((u, crate::load::proto::by_url(u)?)))
    {
        p.check(url)
            .map_err(|e| doc.at(doc.key_offset(span.start, "url"), e))?;
    }
    if let Some(url) = t.url.as_deref() {
        for (what, f) in files_named(&beside_the_suite(doc.path, url)) {
            crate::os::file::check(Path::new(&f), what, crate::os::file::MAX_INPUT)
                .map_err(|e| doc.at(doc.key_offset(span.start, "url"), e))?;
        }
    }
    if let Some(f) = &t.reply_field {
        crate::load::proto::field_path(f).map_err(|e| {
            let msg = e.to_string().replacen("--reply-field", "reply_field =", 1);
            doc.at(doc.key_offset(span.start, "reply_field"), msg)
        })?;
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
    let spec = kinds::spec(doc, kind, t, has_target, &needs)?;
    Ok(Test {
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
    })
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
        use super::beside_the_suite;
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
            WORKLOAD_KEYS,
            "docs/suites.md's workload keys differ from WORKLOAD_KEYS"
        );
        for kind in Kind::TESTS {
            let heading = format!("### {} — ", kind.name());
            assert_eq!(
                documented(&text, &heading, "Keys of its own"),
                own_keys(kind),
                "docs/suites.md's keys of {} differ from the parser's",
                kind.name()
            );
        }
    }
}
