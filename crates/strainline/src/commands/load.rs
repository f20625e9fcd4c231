//! `strainline load`: turn the command line into a checked plan, run the load engine
//! with a live progress line, judge whether the generator was the limit, store the run
//! and print the summary.

use std::io::{IsTerminal, Write};
use std::net::ToSocketAddrs;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use hdrhistogram::serialization::Serializer;
use hyper::header::{HeaderName, HeaderValue};
use hyper::{Method, Uri};

use crate::cli::LoadArgs;
use crate::exit;
use crate::host::{git_state, Host};
use crate::load::http::{tls_config, Body, Target, Template};
use crate::load::schedule::{Arrivals, Rate};
use crate::load::{self, scenario, verdict, Model, Plan};
use crate::report::load as report;
use crate::store::{Location, NewRun, Store};
use crate::target::signals;
use crate::Failure;

const DEFAULT_DURATION: Duration = Duration::from_secs(10);
const DEFAULT_CONNECTIONS: usize = 50;
const DEFAULT_POOL_CAP: usize = 1000;

fn usage(msg: impl Into<String>) -> anyhow::Error {
    Failure::new(exit::USAGE, msg).into()
}

/// Raises the soft open-files limit to the hard one: each connection is a descriptor.
fn raise_nofile() -> u64 {
    // SAFETY: getrlimit/setrlimit with a valid struct.
    unsafe {
        let mut r: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) == 0 {
            r.rlim_cur = r.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &r);
            return r.rlim_cur;
        }
    }
    1024
}

/// Turns the arguments into a plan, or says exactly what is wrong.
/// What the run loads, in words: the URL, or `command: ARGV`.
pub fn what(args: &LoadArgs) -> String {
    if args.exec.is_empty() {
        args.url.clone().unwrap_or_default()
    } else {
        format!("command: {}", args.exec.join(" "))
    }
}

pub fn plan(args: &LoadArgs) -> anyhow::Result<(Plan, String)> {
    let command = (!args.exec.is_empty()).then(|| args.exec.clone());
    let url = match (&args.url, &command) {
        (Some(u), None) => u.clone(),
        // A command workload sends no HTTP; the target below is never used.
        (None, Some(_)) if args.scenario.is_none() => "http://127.0.0.1/".to_string(),
        (None, Some(_)) => return Err(usage("--scenario is for HTTP: give a URL, not a command")),
        (Some(_), Some(_)) => return Err(usage("give a URL or a command after --, not both")),
        (None, None) => {
            return Err(usage(
                "give a URL to load (e.g. http://127.0.0.1:8080/) or a command after -- (e.g. -- ./client)",
            ))
        }
    };
    let uri: Uri = url.parse().map_err(|e| {
        usage(format!(
            "URL '{}': {e} (expected e.g. http://127.0.0.1:8080/path)",
            url
        ))
    })?;
    let scheme = uri.scheme_str().unwrap_or("");
    if scheme != "http" && scheme != "https" {
        return Err(usage(format!(
            "URL '{}': the scheme must be http:// or https:// (e.g. http://127.0.0.1:8080/path)",
            url
        )));
    }
    let host = uri.host().ok_or_else(|| {
        usage(format!(
            "URL '{}' has no host (e.g. http://127.0.0.1:8080/path)",
            url
        ))
    })?;
    let tls = scheme == "https";
    let port = uri.port_u16().unwrap_or(if tls { 443 } else { 80 });
    let bare_host = host.trim_start_matches('[').trim_end_matches(']');
    let addr = (bare_host, port)
        .to_socket_addrs()
        .map_err(|e| usage(format!("URL '{}': cannot resolve '{host}': {e}", url)))?
        .next()
        .ok_or_else(|| usage(format!("URL '{}': '{host}' has no address", url)))?;
    let authority = uri
        .authority()
        .map(|a| a.as_str().to_string())
        .unwrap_or_default();
    let tls = if tls {
        let pem = match &args.cacert {
            Some(p) => Some(
                std::fs::read(p).map_err(|e| usage(format!("--cacert {}: {e}", p.display())))?,
            ),
            None => None,
        };
        let cfg = tls_config(pem.as_deref(), args.insecure, args.http2).map_err(usage)?;
        let name = rustls::pki_types::ServerName::try_from(bare_host.to_string()).map_err(|e| {
            usage(format!(
                "URL '{}': '{host}' is not a valid TLS server name: {e}",
                url
            ))
        })?;
        Some((tokio_rustls::TlsConnector::from(Arc::new(cfg)), name))
    } else {
        None
    };
    let target = Target {
        addr,
        host_header: HeaderValue::from_str(&authority)
            .map_err(|e| usage(format!("URL host: {e}")))?,
        tls,
        http2: args.http2,
    };
    let method = Method::from_bytes(args.method.to_uppercase().as_bytes()).map_err(|_| {
        usage(format!(
            "-m '{}' is not an HTTP method (e.g. GET, POST)",
            args.method
        ))
    })?;
    let mut headers = Vec::new();
    for h in &args.headers {
        let (k, v) = h
            .split_once(':')
            .ok_or_else(|| usage(format!("-H '{h}': write a header as 'Name: value'")))?;
        let name = HeaderName::from_bytes(k.trim().as_bytes())
            .map_err(|_| usage(format!("-H '{h}': bad header name")))?;
        let value = HeaderValue::from_str(v.trim())
            .map_err(|_| usage(format!("-H '{h}': bad header value")))?;
        headers.push((name, value));
    }
    let body = if let Some(b) = &args.body {
        Body::Fixed(Bytes::from(b.clone()))
    } else if let Some(p) = &args.body_file {
        Body::Fixed(Bytes::from(
            std::fs::read(p).map_err(|e| usage(format!("--body-file {}: {e}", p.display())))?,
        ))
    } else if let Some(n) = args.body_bytes {
        Body::random(n, 64, args.seed)
    } else {
        Body::Empty
    };
    let path = uri
        .path_and_query()
        .map(|p| p.as_str())
        .unwrap_or("/")
        .parse()
        .map_err(|e| usage(format!("URL path: {e}")))?;
    let duration = match (args.duration, args.count) {
        (None, None) => Some(DEFAULT_DURATION),
        (d, _) => d,
    };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut threads = args.threads.unwrap_or(cores).max(1);
    let nofile = raise_nofile() as usize;
    let cap_limit = nofile.saturating_sub(64).max(1);
    let (model, mut description) = match (args.rate, args.ramp) {
        _ if args.scenario.is_some() => {
            let path = args.scenario.as_ref().expect("checked");
            let sc = scenario::load(path).map_err(usage)?;
            let d = format!(
                "scenario {} ({} clients, {} steps)",
                path.display(),
                sc.clients,
                sc.steps.len()
            );
            (Model::Scenario(Arc::new(sc)), d)
        }
        (_, Some((from, to))) => {
            let over = duration.expect("--ramp requires -z");
            (
                Model::Open {
                    rate: Rate::Ramp { from, to, over },
                    arrivals: arrivals(args),
                },
                format!(
                    "open model, {from}..{to} req/s ramp over {}",
                    crate::units::format_duration(over)
                ),
            )
        }
        (Some(r), None) => {
            if r < threads as f64 {
                let t = (r.floor() as usize).max(1);
                eprintln!("note: {r} req/s is less than one request per second per thread: using {t} thread(s) instead of {threads}");
                threads = t;
            }
            (
                Model::Open {
                    rate: Rate::Constant(r),
                    arrivals: arrivals(args),
                },
                format!("open model, {r} req/s constant"),
            )
        }
        (None, None) => {
            let c = args.connections.unwrap_or(DEFAULT_CONNECTIONS);
            if c == 0 {
                return Err(usage("-c 0: give at least one connection"));
            }
            if c > cap_limit {
                return Err(usage(format!(
                    "-c {c}: more connections than this process may open files ({nofile}); raise `ulimit -n` or use fewer"
                )));
            }
            let think = args.think.unwrap_or(Duration::ZERO);
            let mut d = format!("closed model, {c} connections");
            if !think.is_zero() {
                d.push_str(&format!(", think {}", crate::units::format_duration(think)));
            }
            (
                Model::Closed {
                    connections: c,
                    think,
                },
                d,
            )
        }
    };
    if args.poisson && args.rate.is_none() && args.ramp.is_none() {
        return Err(usage(
            "--poisson goes with an open model: add -q RATE or --ramp FROM..TO",
        ));
    }
    let max_connections = match &model {
        Model::Open { .. } => args.connections.unwrap_or(DEFAULT_POOL_CAP).min(cap_limit),
        Model::Closed { connections, .. } => *connections,
        Model::Scenario(sc) => {
            if sc.clients as usize > cap_limit {
                return Err(usage(format!(
                    "{} clients need {} connections, more than this process may open ({nofile}); raise `ulimit -n`",
                    sc.clients, sc.clients
                )));
            }
            sc.clients as usize
        }
    };
    if let Some(d) = duration {
        description.push_str(&format!(" for {}", crate::units::format_duration(d)));
    }
    if let Some(n) = args.count {
        description.push_str(&format!(", at most {n} requests"));
    }
    let protocol = match &command {
        Some(c) => format!("command: {}", c.join(" ")),
        None => format!(
            "HTTP/{}{}",
            if args.http2 { "2" } else { "1.1" },
            if target.tls.is_some() {
                " over TLS"
            } else {
                ""
            }
        ),
    };
    description.push_str(&format!(
        ", {threads} thread{}, {protocol}",
        if threads == 1 { "" } else { "s" }
    ));
    Ok((
        Plan {
            command,
            target,
            template: Template {
                method,
                path,
                headers,
                body,
            },
            model,
            threads,
            duration,
            count: args.count,
            timeout: args.timeout,
            max_connections,
        },
        description,
    ))
}

/// Runs a plan with a live line on stderr (seconds, req/s, p99, errors) when it is a
/// terminal and `progress` is asked for; `prefix` says what runs (a suite's case).
pub fn run_with_progress(plan: &Plan, progress: bool, prefix: &str) -> load::Outcome {
    let live = progress && std::io::stderr().is_terminal();
    let cancel = Arc::new(AtomicBool::new(false));
    let outcome = load::run(plan, cancel, |s, _| {
        if live {
            let mut e = std::io::stderr().lock();
            let _ = write!(
                e,
                "\r\x1b[2K  {prefix}{:>5.0}s  {:>9.1} req/s  p99 {:>9}  errors {}",
                s.t,
                s.completed as f64,
                report::us(s.p99_us),
                s.errors
            );
            let _ = e.flush();
        }
    });
    if live {
        eprint!("\r\x1b[2K");
    }
    outcome
}

fn arrivals(args: &LoadArgs) -> Arrivals {
    if args.poisson {
        Arrivals::Poisson { seed: args.seed }
    } else {
        Arrivals::Uniform
    }
}

pub fn run(store_location: &Location, args: LoadArgs) -> anyhow::Result<i32> {
    let (plan, description) = plan(&args)?;
    let store = Store::open(store_location).map_err(|e| usage(e.to_string()))?;
    if let Some(p) = &args.json {
        std::fs::File::create(p).map_err(|e| usage(format!("--json {}: {e}", p.display())))?;
    }
    let host = Host::current();
    let cwd = std::env::current_dir()?;
    let git = git_state(&cwd);
    let loaded = what(&args);
    let command = format!("load {loaded}");
    let run_id = store.begin_run(&NewRun {
        kind: "load",
        label: args.label.as_deref(),
        suite: None,
        command: &command,
        cwd: &cwd,
        git: git.as_ref(),
        host: &host,
    })?;
    let case_id = store.begin_case(run_id, &loaded, "load", None, 0)?;
    signals::install();
    let outcome = run_with_progress(&plan, !args.no_progress, "");
    let v = verdict::judge(&outcome);
    let (model, step_names): (&str, Vec<String>) = match &plan.model {
        Model::Open { .. } => ("open", Vec::new()),
        Model::Closed { .. } => ("closed", Vec::new()),
        Model::Scenario(sc) => (
            "scenario",
            sc.steps.iter().map(|s| s.name.clone()).collect(),
        ),
    };
    let summary = report::summarize(&loaded, model, &description, &outcome, &v, &step_names);
    let code = if outcome.interrupted {
        exit::INTERRUPTED
    } else {
        match v.status {
            "valid" => exit::PASSED,
            "invalid" => exit::INVALID,
            _ => exit::FAILED,
        }
    };
    let status = if outcome.interrupted {
        "interrupted"
    } else {
        v.status
    };
    let series = |f: &dyn Fn(&load::Second) -> f64| -> Vec<(f64, f64)> {
        outcome.seconds.iter().map(|s| (s.t, f(s))).collect()
    };
    store.append_series(
        case_id,
        "completed_per_second",
        &series(&|s| s.completed as f64),
    )?;
    store.append_series(case_id, "errors_per_second", &series(&|s| s.errors as f64))?;
    store.append_series(case_id, "p99_us", &series(&|s| s.p99_us as f64))?;
    let mut encoded = Vec::new();
    if hdrhistogram::serialization::V2DeflateSerializer::new()
        .serialize(&outcome.total.corrected, &mut encoded)
        .is_ok()
    {
        store.put_histogram(
            case_id,
            "latency_us",
            (0.0, outcome.elapsed),
            "hdr-v2-deflate",
            &encoded,
        )?;
    }
    store.finish_case(case_id, status, &report::metrics(&summary), &[], &summary)?;
    store.finish_run(run_id, status, Some(code), &summary.reasons)?;
    if let Some(p) = &args.json {
        std::fs::write(p, report::to_json(&summary, &outcome.seconds, Some(run_id)))?;
    }
    report::write_summary(&mut std::io::stdout().lock(), &summary, Some(run_id))?;
    Ok(code)
}
