//! Each kind's own keys into its spec, with their ranges and defaults; a load kind's
//! workload (a URL, a scenario or a command) with what its protocol needs.

use std::path::Path;
use std::time::Duration;

use toml::Spanned;

use super::super::raw::RawTest;
use super::super::{Bench, Crash, Harness, Kind, Ramp, Rounds, Scale, Soak, Spec, Workload};
use super::doc::{bytes, Doc};
use super::urls::{beside_the_suite, load_schemes, method_shape, url_shape, HTTP_SCHEMES};
use super::Result;
use crate::limits;
use crate::units::parse_duration;

/// Every number a test gives, against its range ([`limits`]): refused at its line.
pub(super) fn ranges(doc: &Doc, header: usize, t: &RawTest) -> Result<()> {
    let check = |v: Option<f64>, limit: limits::Limit| -> Result<()> {
        match v.map(|v| limit.check(v)) {
            Some(Err(e)) => Err(doc.at(
                doc.key_offset(header, limit.key),
                format!("test '{}': {e}", t.name),
            )),
            _ => Ok(()),
        }
    };
    check(t.rate, limits::RATE)?;
    check(t.start, limits::RAMP_START)?;
    check(t.step, limits::RAMP_STEP)?;
    check(t.connections.map(|v| v as f64), limits::CONNECTIONS)?;
    check(t.threads.map(|v| v as f64), limits::THREADS)?;
    check(t.streams.map(|v| v as f64), limits::STREAMS)?;
    check(t.max_steps.map(f64::from), limits::MAX_STEPS)?;
    check(t.clients.map(|v| v as f64), limits::CLIENTS)?;
    check(t.rounds.map(f64::from), limits::ROUNDS)?;
    check(t.ops.map(|v| v as f64), limits::OPS)?;
    check(t.iterations.map(f64::from), limits::ITERATIONS)?;
    check(t.repeat.map(f64::from), limits::REPEAT)?;
    for &size in &t.sizes {
        check(Some(size as f64), limits::SIZE)?;
    }
    let distinct: std::collections::BTreeSet<u64> = t.sizes.iter().copied().collect();
    if !t.sizes.is_empty() && distinct.len() < 2 {
        return Err(doc.at(
            doc.key_offset(header, "sizes"),
            format!(
                "test '{}': sizes need at least two different values to fit how cost grows",
                t.name
            ),
        ));
    }
    // An argv must name a program: `[]` or `[""]` would run nothing (or panic).
    for (key, argv) in [("verify", &t.verify), ("command", &t.command)] {
        if argv
            .as_ref()
            .is_some_and(|a| a.first().is_none_or(|p| p.trim().is_empty()))
        {
            return Err(doc.at(
                doc.key_offset(header, key),
                format!(
                    "test '{}': {key} names no program: give its argv, e.g. [\"./check\", \"data/\"]",
                    t.name
                ),
            ));
        }
    }
    // The cases a test expands to, bounded before any is made (10⁸ cases allocated
    // until the machine ran out).
    let cases = t.matrix.values().map(|vs| vs.len() as f64).product::<f64>()
        * f64::from(t.repeat.unwrap_or(1));
    if cases > limits::MAX_CASES {
        return Err(doc.at(
            doc.key_offset(header, if t.repeat.is_some() { "repeat" } else { "matrix" }),
            format!(
                "test '{}': {cases:.0} cases (the matrix's combinations × repeat), more than {}: split the test or give fewer values",
                t.name,
                limits::MAX_CASES
            ),
        ));
    }
    if let Some((k, _)) = t.matrix.iter().find(|(_, vs)| vs.is_empty()) {
        return Err(doc.at(
            doc.key_offset(header, "matrix"),
            format!(
                "test '{}': matrix key '{k}' has no values (give at least one)",
                t.name
            ),
        ));
    }
    // A workload's URL may be a WebSocket's; the quiesce request is HTTP.
    for (key, url, schemes) in [
        ("url", &t.url, load_schemes()),
        (
            "quiesce_url",
            &t.quiesce_url,
            HTTP_SCHEMES.iter().map(|s| s.to_string()).collect(),
        ),
    ] {
        if let Some(url) = url {
            url_shape(url, &schemes).map_err(|e| {
                doc.at(
                    doc.key_offset(header, key),
                    format!(
                        "test '{}': {key} '{}': {e}",
                        t.name,
                        crate::units::one_line(url)
                    ),
                )
            })?;
        }
    }
    if let Some(m) = &t.method {
        method_shape(m).map_err(|e| {
            doc.at(
                doc.key_offset(header, "method"),
                format!(
                    "test '{}': {}",
                    t.name,
                    crate::units::one_line(&e.to_string())
                ),
            )
        })?;
    }
    Ok(())
}

/// The workload of a load kind: a URL (or scenario) or a command.
pub(super) fn workload(
    doc: &Doc,
    kind: Kind,
    t: &RawTest,
    has_target: bool,
    needs: &dyn Fn(bool, &str) -> Result<()>,
) -> Result<Workload> {
    // A bench of a command workload may address a service strainline did not start.
    let bench_without_target = kind == Kind::Bench && t.command.is_some();
    needs(
        t.url.is_some() || t.command.is_some(),
        "url = \"http://127.0.0.1:{{port}}/…\" (or, for a command workload, command = [\"…\"])",
    )?;
    needs(
        t.url.is_none() || t.command.is_none(),
        "either url or command (a command workload), not both",
    )?;
    if !bench_without_target {
        needs(has_target, "a [target] to start")?;
    }
    if t.reply_field.is_some() {
        if let Some(schemes) =
            crate::load::proto::taken_elsewhere(t.url.as_deref().unwrap_or(""), "reply_field")
        {
            needs(
                false,
                &format!("a {schemes} url for reply_field (it matches a WebSocket's replies to its messages)"),
            )?;
        }
    }
    let tls = t
        .url
        .as_deref()
        .is_some_and(|u| u.starts_with("https://") || crate::load::proto::is_tls(u));
    needs(
        !tls || t.cacert.is_some() || t.insecure == Some(true),
        "cacert = \"FILE\" (the server's certificate or its CA, PEM, beside the suite) or insecure = true for a TLS url",
    )?;
    let pipelines = t.url.as_deref().is_some_and(crate::load::proto::pipelines);
    needs(
        t.streams.is_none_or(|m| m < 2) || t.http2 == Some(true) || pipelines,
        "http2 = true for streams (requests in flight on one connection are HTTP/2's, gRPC's or a pipelining protocol's such as Redis)",
    )?;
    Ok(Workload {
        url: t.url.as_deref().map(|u| beside_the_suite(doc.path, u)),
        scenario: match &t.scenario {
            Some(sc) => {
                let p = doc
                    .path
                    .parent()
                    .unwrap_or(Path::new("."))
                    .join(sc.get_ref());
                crate::load::scenario::load(&p)
                    .map_err(|e| doc.at(sc.span().start, format!("scenario: {e}")))?;
                Some(p)
            }
            None => None,
        },
        // A body makes an HTTP request a POST; a WebSocket message or an MQTT publish
        // has no method (GET opens the WebSocket).
        method: t.method.clone().unwrap_or_else(|| {
            let http = t.url.as_deref().is_none_or(|u| u.starts_with("http"));
            if t.body.is_some() && http {
                "POST".into()
            } else {
                "GET".into()
            }
        }),
        body: t.body.clone(),
        headers: t.headers.clone(),
        command: t.command.clone(),
        connections: t.connections,
        threads: t.threads,
        timeout: doc.opt_dur(&t.timeout, "timeout", Duration::from_secs(10), false)?,
        setup: t.setup.clone(),
        http2: t.http2.unwrap_or(false),
        streams: t.streams.unwrap_or(1),
        cacert_pem: match &t.cacert {
            Some(f) => {
                let p = doc
                    .path
                    .parent()
                    .unwrap_or(Path::new("."))
                    .join(f.get_ref());
                Some(crate::os::file::read(&p, "cacert").map_err(|e| doc.at(f.span().start, e))?)
            }
            None => None,
        },
        insecure: t.insecure.unwrap_or(false),
        reply_field: t.reply_field.clone(),
    })
}

/// A share as written (`"1%"`), from 0% to `at_most`: a bare number is refused with the fix.
pub(super) fn share(doc: &Doc, v: &Spanned<toml::Value>, key: &str, at_most: f64) -> Result<f64> {
    let parsed = match v.get_ref() {
        toml::Value::String(s) => crate::units::parse_fraction(s),
        toml::Value::Float(f) => crate::units::parse_fraction(&f.to_string())
            .map_err(|e| crate::Error::usage(format!("{e}, in quotes: \"{f}%\""))),
        toml::Value::Integer(i) => crate::units::parse_fraction(&i.to_string())
            .map_err(|e| crate::Error::usage(format!("{e}, in quotes: \"{i}%\""))),
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

pub(super) fn leak_budget(doc: &Doc, t: &RawTest) -> Result<f64> {
    match &t.leak_budget {
        Some(b) => size(doc, b, limits::LEAK_BUDGET, "10MiB"),
        None => Ok(10.0 * 1048576.0),
    }
}

/// The kind's own spec, with its defaults.
pub(super) fn spec(
    doc: &Doc,
    kind: Kind,
    t: &RawTest,
    has_target: bool,
    needs: &dyn Fn(bool, &str) -> Result<()>,
) -> Result<Spec> {
    let duration = || doc.opt_dur(&t.duration, "duration", Duration::from_secs(10), true);
    let command = || t.command.clone().unwrap_or_default();
    Ok(match kind {
        Kind::Bench => Spec::Bench(Bench {
            workload: workload(doc, kind, t, has_target, needs)?,
            rate: t.rate,
            duration: duration()?,
        }),
        Kind::Ramp => Spec::Ramp(Ramp {
            workload: workload(doc, kind, t, has_target, needs)?,
            start: t.start.unwrap_or(100.0),
            step: t.step.unwrap_or(100.0),
            step_duration: doc.opt_dur(
                &t.step_duration,
                "step_duration",
                Duration::from_secs(5),
                true,
            )?,
            max_steps: t.max_steps.unwrap_or(50),
            slo_p99: t
                .slo_p99
                .as_ref()
                .map(|s| doc.dur(s, "slo_p99", false))
                .transpose()?,
            max_error_rate: t
                .max_error_rate
                .as_ref()
                .map(|v| share(doc, v, "max_error_rate", 1.0))
                .transpose()?
                .unwrap_or(0.01),
        }),
        Kind::Soak => Spec::Soak(Soak {
            workload: workload(doc, kind, t, has_target, needs)?,
            rate: t.rate.unwrap_or(100.0),
            duration: duration()?,
            leak_budget: leak_budget(doc, t)?,
            horizon: doc.opt_dur(&t.horizon, "horizon", Duration::from_secs(24 * 3600), false)?,
            clients: t.clients,
            client_period: t
                .client_period
                .as_ref()
                .map(|s| doc.dur(s, "client_period", false))
                .transpose()?,
            ram: match &t.ram {
                Some(b) => Some(size(doc, b, limits::RAM, "4GiB")?),
                None => None,
            },
        }),
        Kind::Rounds => Spec::Rounds(Rounds {
            workload: workload(doc, kind, t, has_target, needs)?,
            rounds: t.rounds.unwrap_or(10),
            ops: t.ops.unwrap_or(1000),
            quiesce_url: t.quiesce_url.clone(),
            settle: doc.opt_dur(&t.settle, "settle", Duration::from_millis(500), true)?,
            leak_budget: leak_budget(doc, t)?,
        }),
        Kind::Crash => {
            needs(t.command.is_some(), "command = [\"…\"] (the work to kill)")?;
            needs(
                t.verify.is_some(),
                "verify = [\"…\"] (the check after each kill)",
            )?;
            let kill_after = match &t.kill_after {
                Some(k) => {
                    let v = k.get_ref();
                    let (a, b) = v.split_once("..").unwrap_or((v, v));
                    let at = |e: String| doc.at(k.span().start, e);
                    let p = |s: &str| {
                        parse_duration(s)
                            .map_err(|e| format!("kill_after: {e} (write e.g. 100ms..2s)"))
                            .and_then(|d| {
                                limits::PAUSE.duration(d).map_err(|_| {
                                    format!(
                                        "kill_after = \"{v}\": out of range, give durations from 0s to {:?} (e.g. 100ms..2s)",
                                        Duration::from_secs_f64(limits::LONGEST)
                                    )
                                })
                            })
                            .map_err(at)
                    };
                    let (lo, hi) = (p(a)?, p(b)?);
                    if lo > hi {
                        return Err(at(format!(
                            "kill_after = \"{v}\": the range is reversed: write the earlier time first ({b}..{a})"
                        )));
                    }
                    (lo.mul_f64(doc.time_scale), hi.mul_f64(doc.time_scale))
                }
                None => (
                    Duration::from_millis(100).mul_f64(doc.time_scale),
                    Duration::from_secs(1).mul_f64(doc.time_scale),
                ),
            };
            Spec::Crash(Crash {
                command: command(),
                iterations: t.iterations.unwrap_or(10),
                kill_after,
                kill_at_log: t
                    .kill_at_log
                    .as_ref()
                    .map(|r| doc.regex(r, "kill_at_log"))
                    .transpose()?,
                verify: t.verify.clone().unwrap_or_default(),
            })
        }
        Kind::Scale => {
            needs(t.command.is_some(), "command = [\"…\", \"{{size}}\"]")?;
            needs(
                t.sizes.len() >= 3,
                "sizes = [N1, N2, N3, …] (at least three)",
            )?;
            Spec::Scale(Scale {
                command: command(),
                sizes: t.sizes.clone(),
            })
        }
        Kind::Harness => {
            needs(
                t.command.is_some(),
                "command = [\"…\"] (the harness binary)",
            )?;
            Spec::Harness(Harness { command: command() })
        }
    })
}
