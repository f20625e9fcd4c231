//! A load kind's workload keys: what each unit of work sends (a URL, a scenario or a
//! command), how (connections, threads, timeout, HTTP/2, TLS) and what the protocol of
//! its URL needs.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::super::super::{SetupRequest, Workload};
use super::super::keys::Table;
use super::super::urls::{beside_the_suite, files_named, load_schemes, method_shape, url_shape};
use super::super::Result;
use super::At;
use crate::limits;

#[derive(Deserialize, schemars::JsonSchema)]
#[schemars(rename = "WorkloadKeys")]
pub(in super::super) struct Keys {
    url: Option<String>,
    #[schemars(with = "Option<String>")]
    scenario: Option<Spanned<String>>,
    method: Option<String>,
    body: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    command: Option<Vec<String>>,
    connections: Option<usize>,
    threads: Option<usize>,
    #[schemars(with = "Option<String>")]
    timeout: Option<Spanned<String>>,
    #[serde(default)]
    setup: Vec<SetupRequest>,
    http2: Option<bool>,
    streams: Option<usize>,
    #[schemars(with = "Option<String>")]
    cacert: Option<Spanned<String>>,
    /// A client certificate (PEM) for a server that asks for one, with `key`.
    #[schemars(with = "Option<String>")]
    cert: Option<Spanned<String>>,
    /// The private key of `cert` (PEM).
    #[schemars(with = "Option<String>")]
    key: Option<Spanned<String>>,
    insecure: Option<bool>,
    reply_field: Option<String>,
}

/// The workload of a load kind's test.
pub(super) fn read(at: &At, table: &Table, has_target: bool) -> Result<Workload> {
    let w: Keys = table.read(at.doc)?;
    shapes(at, &w)?;
    url_fits(at, &w)?;
    workload(at, w, has_target)
}

/// What a run would refuse of the URL's options and the reply field, `check` refuses at
/// their line (MQTT's qos, keep_alive, subscribers; a `.proto` that cannot be read; an
/// empty field).
fn url_fits(at: &At, w: &Keys) -> Result<()> {
    let (doc, url_at) = (at.doc, at.doc.key_offset(at.header, "url"));
    if let Some(url) = w.url.as_deref() {
        if let Some(p) = crate::load::proto::by_url(url) {
            p.check(url).map_err(|e| doc.at(url_at, e))?;
        }
        for (what, f) in files_named(&beside_the_suite(doc.path, url)) {
            crate::os::file::check(Path::new(&f), what, crate::os::file::MAX_INPUT)
                .map_err(|e| doc.at(url_at, e))?;
        }
    }
    if let Some(f) = &w.reply_field {
        crate::load::proto::field_path(f).map_err(|e| {
            let msg = e.to_string().replacen("--reply-field", "reply_field =", 1);
            doc.at(doc.key_offset(at.header, "reply_field"), msg)
        })?;
    }
    Ok(())
}

/// Every number within its range, the URL's and the method's shapes, an argv that
/// names a program: refused at their lines.
fn shapes(at: &At, w: &Keys) -> Result<()> {
    at.range(w.connections.map(|v| v as f64), limits::CONNECTIONS)?;
    at.range(w.threads.map(|v| v as f64), limits::THREADS)?;
    at.range(w.streams.map(|v| v as f64), limits::STREAMS)?;
    at.argv("command", &w.command)?;
    if let Some(url) = &w.url {
        url_shape(url, &load_schemes())
            .map_err(|e| at.refuse("url", format!("url '{}': {e}", crate::units::one_line(url))))?;
    }
    if let Some(m) = &w.method {
        method_shape(m).map_err(|e| at.refuse("method", crate::units::one_line(&e.to_string())))?;
    }
    Ok(())
}

/// The workload with its defaults, once what each key needs of the others is there.
fn workload(at: &At, w: Keys, has_target: bool) -> Result<Workload> {
    let (doc, kind) = (at.doc, at.kind);
    // A command workload may address a service strainline did not start (a bench's).
    let bench_without_target = kind.traits().commands_alone && w.command.is_some();
    at.needs(
        w.url.is_some() || w.command.is_some(),
        "url = \"http://127.0.0.1:{{port}}/…\" (or, for a command workload, command = [\"…\"])",
    )?;
    at.needs(
        w.url.is_none() || w.command.is_none(),
        "either url or command (a command workload), not both",
    )?;
    if !bench_without_target {
        at.needs(has_target, "a [target] to start")?;
    }
    if w.reply_field.is_some() {
        if let Some(schemes) =
            crate::load::proto::taken_elsewhere(w.url.as_deref().unwrap_or(""), "reply_field")
        {
            at.needs(
                false,
                &format!("a {schemes} url for reply_field (it matches a WebSocket's replies to its messages)"),
            )?;
        }
    }
    let tls = w.url.as_deref().is_some_and(crate::load::proto::is_tls);
    at.needs(
        !tls || w.cacert.is_some() || w.insecure == Some(true),
        "cacert = \"FILE\" (the server's certificate or its CA, PEM, beside the suite) or insecure = true for a TLS url",
    )?;
    let pipelines = w.url.as_deref().is_some_and(crate::load::proto::pipelines);
    at.needs(
        w.streams.is_none_or(|m| m < 2) || w.http2 == Some(true) || pipelines,
        "http2 = true for streams (requests in flight on one connection are HTTP/2's, gRPC's or a pipelining protocol's such as Redis)",
    )?;
    let beside = |f: &str| doc.path.parent().unwrap_or(Path::new(".")).join(f);
    // A body makes an HTTP request a POST; a WebSocket message or an MQTT publish has
    // no method (GET opens the WebSocket).
    let method = w.method.unwrap_or_else(|| {
        crate::load::proto::default_method(w.url.as_deref(), w.body.is_some()).into()
    });
    Ok(Workload {
        url: w.url.as_deref().map(|u| beside_the_suite(doc.path, u)),
        scenario: match &w.scenario {
            Some(sc) => {
                let p = beside(sc.get_ref());
                crate::load::scenario::load(&p)
                    .map_err(|e| doc.at(sc.span().start, format!("scenario: {e}")))?;
                Some(p)
            }
            None => None,
        },
        method,
        body: w.body,
        headers: w.headers,
        command: w.command,
        connections: w.connections,
        threads: w.threads,
        timeout: doc.opt_dur(&w.timeout, "timeout", Duration::from_secs(10), false)?,
        setup: w.setup,
        http2: w.http2.unwrap_or(false),
        streams: w.streams.unwrap_or(1),
        cacert_pem: match &w.cacert {
            Some(f) => Some(
                crate::os::file::read(&beside(f.get_ref()), "cacert")
                    .map_err(|e| doc.at(f.span().start, e))?,
            ),
            None => None,
        },
        client_cert: match (&w.cert, &w.key) {
            (None, None) => None,
            (Some(c), Some(k)) => Some(
                crate::load::spec::client_cert(&beside(c.get_ref()), &beside(k.get_ref()))
                    .map_err(|e| doc.at(c.span().start, e))?,
            ),
            (Some(c), None) | (None, Some(c)) => {
                return Err(doc.at(
                    c.span().start,
                    "give cert = \"FILE\" and key = \"FILE\" together (a client certificate and its private key, PEM, beside the suite)",
                ))
            }
        },
        insecure: w.insecure.unwrap_or(false),
        reply_field: w.reply_field,
    })
}
