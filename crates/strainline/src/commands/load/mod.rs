//! `strainline load`: turn the command line into a [`LoadSpec`], run the load engine
//! with a live progress line, judge whether the generator was the limit, store the run
//! and print the summary.

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use crate::agents;
use crate::agents::session::Session;
use crate::error::Category;
use crate::exit;
use crate::load::schedule::Rate;
use crate::load::verdict::Validity;
use crate::load::{self, BodySpec, ClientOptions, LoadSpec, Offer, Work};
use crate::os::signals;
use crate::report::load as report;
use crate::store::{GateResult, Location, Status, Store};
use crate::suite::abort::Abort;
use crate::suite::gate::Gate;

mod args;

pub use args::{AgentsArgs, LoadArgs};

/// The command line as a load spec: files read, conflicts refused.
pub fn spec(args: &LoadArgs) -> crate::error::Result<LoadSpec> {
    let seed = crate::load::spec::RunSeed {
        value: args.seed.unwrap_or_else(crate::rng::fresh_seed),
        given: args.seed.is_some(),
    };
    let work = match (&args.url, args.exec.is_empty()) {
        (Some(_), false) => return Err(crate::Error::usage("give a URL or a command after --, not both")),
        (None, true) => {
            return Err(crate::Error::usage(
                "give a URL to load (e.g. http://127.0.0.1:8080/) or a command after -- (e.g. -- ./client)",
            ))
        }
        (None, false) => Work::Command(args.exec.clone()),
        (Some(url), true) => {
            let mut headers = Vec::new();
            for h in &args.headers {
                let (k, v) = h
                    .split_once(':')
                    .ok_or_else(|| crate::Error::usage(format!("-H '{h}': write a header as 'Name: value'")))?;
                headers.push((k.to_string(), v.to_string()));
            }
            let body = if let Some(b) = &args.body {
                BodySpec::Bytes(b.clone().into_bytes())
            } else if let Some(p) = &args.body_file {
                BodySpec::Bytes(
                    crate::os::file::read(p, "--body-file")?,
                )
            } else if let Some(n) = args.body_bytes {
                BodySpec::Random {
                    len: n,
                    seed: seed.value,
                }
            } else {
                BodySpec::Empty
            };
            Work::Http {
                url: url.clone(),
                method: args.method.clone(),
                headers,
                body,
            }
        }
    };
    if args.poisson && args.rate.is_none() && args.ramp.is_none() {
        return Err(crate::Error::usage(
            "--poisson goes with an open model: add -q RATE or --ramp FROM..TO",
        ));
    }
    let poisson = args.poisson.then_some(seed.value);
    let offer = match (&args.scenario, args.rate, args.ramp) {
        _ if args.replay.is_some() => Offer::Replay(crate::workload::replay::open(
            args.replay.as_deref().expect("checked"),
            args.speed,
        )?),
        (Some(path), _, _) => Offer::Scenario(path.clone()),
        (None, _, Some((from, to))) => Offer::Open {
            rate: Rate::Ramp {
                from,
                to,
                over: args.duration.expect("clap: --ramp requires -z"),
            },
            poisson,
            pool_cap: args.connections,
        },
        (None, Some(r), None) => Offer::Open {
            rate: Rate::Constant(r),
            poisson,
            pool_cap: args.connections,
        },
        (None, None, None) => Offer::Closed {
            connections: args.connections,
            think: args.think.unwrap_or(Duration::ZERO),
        },
    };
    if args.streams == 0 {
        return Err(crate::Error::usage("--streams 0: give 1 to 1000 streams"));
    }
    let cacert_pem = match &args.cacert {
        Some(p) => Some(crate::os::file::read(p, "--cacert")?),
        None => None,
    };
    let client_cert = match (&args.cert, &args.key) {
        (Some(c), Some(k)) => Some(crate::load::spec::client_cert(c, k)?),
        _ => None,
    };
    Ok(LoadSpec {
        work,
        offer,
        threads: args.threads,
        duration: args.duration,
        count: args.count,
        timeout: args.timeout,
        client: ClientOptions {
            http2: args.http2,
            insecure: args.insecure,
            cacert_pem,
            client_cert,
            password: ClientOptions::from_env().password,
            streams: args.streams,
            reply_field: args.reply_field.clone(),
        },
        vars: args.vars.clone(),
        seed: Some(seed),
        // The gates' own percentiles are added once they are parsed (`run`).
        percentiles: crate::load::spec::Percentiles {
            shown: shown_percentiles(&args.percentiles)?,
            gated: Vec::new(),
        },
    })
}

/// The agents of `--agents`, with their token, checked against the spec; `None` for
/// load from this machine.
pub fn fleet(
    args: &AgentsArgs,
    spec: Option<&LoadSpec>,
) -> crate::error::Result<Option<agents::Fleet>> {
    let Some(list) = &args.list else {
        if args.token_file.is_some() && std::env::var_os("STRAINLINE_AGENT_TOKEN_FILE").is_none() {
            return Err(crate::Error::usage("--agent-token-file without --agents: give the agents (--agents tls://HOST:PORT,...)"));
        }
        return Ok(None);
    };
    let fleet = agents::Fleet::new(list, args.token_file.as_deref())?;
    if let Some(spec) = spec {
        fleet.check(spec)?;
    }
    Ok(Some(fleet))
}

/// `--percentiles`, each once, in the order given: at most [`MOST_PERCENTILES`].
fn shown_percentiles(asked: &[f64]) -> crate::error::Result<Vec<f64>> {
    let mut shown: Vec<f64> = Vec::new();
    for &q in asked {
        if !shown.contains(&q) {
            shown.push(q);
        }
    }
    if shown.len() > MOST_PERCENTILES {
        return Err(crate::Error::usage(format!(
            "--percentiles: {} percentiles; a summary shows at most {MOST_PERCENTILES} (each is stored for the run and every step, group and tag)",
            shown.len()
        )));
    }
    Ok(shown)
}

/// The most percentiles `--percentiles` may list.
const MOST_PERCENTILES: usize = 12;

/// The `--gate`s, checked against the metrics `load` stores (exit 2 on a bad one, before
/// any load is sent).
fn gates(args: &LoadArgs) -> crate::error::Result<Vec<Gate>> {
    let metrics: Vec<(&str, crate::metrics::Unit)> = crate::metrics::METRICS
        .iter()
        .filter(|d| d.made_by(crate::metrics::Source::Load))
        .map(|d| (d.name, d.unit))
        .collect();
    let gates: Vec<Gate> = args
        .gates
        .iter()
        .map(|text| {
            crate::suite::gate::parse(text, &metrics)
                .map_err(|(_, e)| crate::Error::usage(format!("--gate '{text}': {e}")))
        })
        .collect::<crate::error::Result<_>>()?;
    if args.abort_on_fail && !gates.iter().any(crate::suite::abort::decidable) {
        return Err(crate::Error::usage(
            "--abort-on-fail: no --gate can be decided during the run (those are ceilings on \
             error_rate or a latency percentile, e.g. --gate 'error_rate < 1%')",
        ));
    }
    Ok(gates)
}

/// The `--gate`s that name a step, group, tag or metric of the scenario name one it has
/// (exit 2 before any load: `step.lgoin.latency_p95` would be "not measured" after the
/// whole run), and a metric of its own a figure of its kind.
fn gates_fit(gates: &[Gate], planned: &load::Planned) -> crate::error::Result<()> {
    for g in gates {
        planned
            .labels
            .gate_fits(&g.metric, &planned.step_names)
            .map_err(|e| e.context(format_args!("--gate '{}'", g.text)))?;
    }
    Ok(())
}

/// The requests the run will make due in all, when the command line fixes it: `-n`, or
/// an open model's rate over its duration.
fn planned_requests(spec: &LoadSpec) -> Option<u64> {
    if let Some(n) = spec.count {
        return Some(n);
    }
    let over = spec.duration?.as_secs_f64();
    match &spec.offer {
        Offer::Open { rate, .. } => Some(rate.count_by(over).floor() as u64),
        _ => None,
    }
}

pub fn run(store_location: &Location, args: LoadArgs) -> crate::error::Result<i32> {
    let mut spec = spec(&args)?;
    let gates = gates(&args)?;
    // What the gates read beyond the usual percentiles is kept (`latency_p75`).
    spec.percentiles.gated = gates
        .iter()
        .filter_map(|g| crate::metrics::asked_percentile(&g.metric))
        .collect();
    let mut planned = load::plan(&spec)?;
    gates_fit(&gates, &planned)?;
    // Agents are reached, and their clocks checked, before a run is opened in the store.
    let fleet = match fleet(&args.agents, Some(&spec))? {
        Some(f) => {
            let ready = agents::coordinator::connect(&f)?;
            planned.on_agents(ready.count());
            Some(ready)
        }
        None => None,
    };
    let store = Store::open(store_location).usage()?;
    if let Some(p) = &args.json {
        std::fs::File::create(p)
            .map_err(|e| crate::Error::usage(format!("--json {}: {e}", p.display())).because(e))?;
    }
    let loaded = spec.what();
    let command = format!("load {loaded}");
    let run_id = store.begin_run_here("load", args.label.as_deref(), None, &command)?;
    if let Offer::Scenario(path) = &spec.offer {
        if let Some(stem) = path.file_stem() {
            store.set_run_scenario(run_id, &stem.to_string_lossy())?;
        }
    }
    let case_id = store.begin_case(run_id, &loaded, "load", None, 0)?;
    let conditions = crate::host::ConditionsProbe::start();
    signals::install();
    let export = crate::live::export::start(&args.export.targets())?;
    let feed = crate::live::feed();
    let _recording = crate::live::record::start(store_location, run_id);
    feed.case(&loaded, None);
    let watcher = watcher(args.pid, &feed)?;
    let live = crate::live::start(!args.no_progress && !args.no_tui, &command);
    let abort = Arc::new(Abort::new(feed.clone(), &gates, planned_requests(&spec)));
    let observer: crate::observe::Shared = if args.abort_on_fail {
        abort.clone()
    } else {
        feed.clone()
    };
    let session =
        agents::session::drive(&spec, &planned, fleet, (!args.no_progress, ""), &*observer);
    drop(live);
    let Session {
        outcome,
        verdict: v,
        mut summary,
    } = match session {
        Ok(s) => s,
        Err(e) => {
            // An agent refused the plan: no load was sent.
            store.finish_run(run_id, Status::Failed, Some(exit::USAGE), &[e.to_string()])?;
            return Err(e);
        }
    };
    summary.seed = planned.seed;
    let target = watcher.map(|w| w.finish(Vec::new(), "watched").0);
    drop(export);
    let metrics = load::summary::metrics(&summary);
    let judged: Vec<GateResult> = gates
        .iter()
        .map(|g| g.judge(metrics.iter().find(|m| m.name == g.metric).map(|m| m.value)))
        .collect();
    let aborted = abort.decided();
    let gate_failed = judged.iter().any(|g| !g.passed);
    let (code, status) = ending(
        gate_failed,
        aborted.is_some(),
        outcome.interrupted,
        &v.status,
    );
    let reasons = reasons(&summary.reasons, aborted.as_deref(), &judged, code);
    let kept = outcome.stored_seconds(0.0);
    for (name, points) in &kept.series {
        store.append_series(case_id, name, points)?;
    }
    if let Some(encoded) = load::recorder::hdr::stored(&outcome.total.corrected) {
        store.put_histogram(
            case_id,
            "latency_us",
            (0.0, outcome.elapsed),
            load::recorder::hdr::STORED,
            &encoded,
        )?;
    }
    for (name, span, data) in &kept.histograms {
        store.put_histogram(case_id, name, *span, load::recorder::hdr::STORED, data)?;
    }
    store.put_gates(case_id, &judged)?;
    store.finish_case(case_id, status.clone(), &metrics, &[], &summary)?;
    store.set_run_settings(
        run_id,
        &serde_json::json!({
            "shape": {
                "time_scale": 1.0,
                "strainline": env!("CARGO_PKG_VERSION"),
                "tests": { "load": summary.description },
                "seed": summary.seed,
            },
            "conditions": conditions.finish(),
        }),
    )?;
    store.finish_run(run_id, status, Some(code), &reasons)?;
    if let Some(p) = &args.json {
        std::fs::write(p, report::to_json(&summary, &outcome.seconds, Some(run_id)))?;
    }
    let printed = print(
        &summary,
        run_id,
        aborted.as_deref(),
        &judged,
        target.as_ref(),
    );
    super::quiet_pipe(printed)?;
    Ok(code)
}

/// The target's watcher, when `--pid` names one (refused when no such process runs).
fn watcher(
    pid: Option<u32>,
    feed: &crate::observe::Shared,
) -> crate::error::Result<Option<crate::monitor::watch::Watcher>> {
    Ok(match pid {
        Some(pid) if crate::os::process::exists(pid) => {
            Some(crate::monitor::watch::Watcher::attach_target(
                pid,
                std::time::Duration::from_millis(500),
                feed.clone(),
            ))
        }
        Some(pid) => return Err(crate::Error::usage(format!("--pid {pid}: no such process"))),
        None => None,
    })
}

/// The run's exit code and stored status: failed by a gate (or a stop on one),
/// interrupted by the user (not by a gate's stop), or as the verdict says.
fn ending(gate_failed: bool, aborted: bool, interrupted: bool, v: &Validity) -> (i32, Status) {
    let code = exit::all([
        if aborted || gate_failed {
            exit::FAILED
        } else {
            exit::PASSED
        },
        // A run a gate stopped early was not interrupted by the user.
        if interrupted && !aborted {
            exit::INTERRUPTED
        } else {
            exit::PASSED
        },
        match v {
            Validity::Valid => exit::PASSED,
            Validity::Invalid => exit::INVALID,
            Validity::Failed => exit::FAILED,
        },
    ]);
    let status = match code {
        exit::PASSED => Status::Valid,
        exit::INVALID => Status::Invalid,
        exit::INTERRUPTED => Status::Interrupted,
        _ => Status::Failed,
    };
    (code, status)
}

/// Why the run ended as it did, the reason its exit `code` stands for first: a stop or a
/// failed gate before the generator's evidence, unless that evidence made the run
/// INVALID; the verdict's notes (evidence that did not change it) last.
fn reasons(
    verdict: &[String],
    aborted: Option<&str>,
    judged: &[GateResult],
    code: i32,
) -> Vec<String> {
    let (notes, evidence): (Vec<&String>, Vec<&String>) =
        verdict.iter().partition(|r| r.starts_with("note: "));
    let gates = aborted
        .map(|why| format!("stopped early: {why}"))
        .into_iter()
        .chain(
            judged
                .iter()
                .filter(|g| !g.passed)
                .map(|g| format!("gate failed: {}", g.detail)),
        );
    let evidence = evidence.into_iter().cloned();
    let mut out: Vec<String> = if code == exit::INVALID {
        evidence.chain(gates).collect()
    } else {
        gates.chain(evidence).collect()
    };
    out.extend(notes.into_iter().cloned());
    out
}

/// The terminal's account of a load run: failures first (a stopped run's reason, failed
/// gates), the summary, each gate, and the watched target.
fn print(
    summary: &load::summary::LoadSummary,
    run_id: i64,
    aborted: Option<&str>,
    judged: &[GateResult],
    target: Option<&crate::measure::MonitorSummary>,
) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    let failed = judged.iter().filter(|g| !g.passed).count();
    if let Some(why) = aborted {
        writeln!(
            out,
            "{}",
            crate::units::alarm(&format!("FAILED, stopped early: {why}"))
        )?;
    } else if failed > 0 {
        let line = format!("FAILED: {failed} of {} gates", judged.len());
        writeln!(out, "{}", crate::units::alarm(&line))?;
    }
    report::write_summary(&mut out, summary, Some(run_id))?;
    for g in judged {
        let line = format!(
            "  {:<14}{} {}",
            "Gate",
            if g.passed { "ok:" } else { "FAILED:" },
            g.detail
        );
        writeln!(
            out,
            "{}",
            if g.passed {
                line
            } else {
                crate::units::alarm(&line)
            }
        )?;
    }
    if let Some(t) = target {
        writeln!(
            out,
            "  Target pid {}: peak RSS {} (tree, sampled), CPU {:.2} s ({:.2} cores on average), at most {} threads and {} FDs",
            t.root_pid,
            crate::units::Bytes(t.peak_tree_rss_sampled.bytes),
            t.cpu.total_seconds,
            t.cpu.avg_cores,
            t.max_threads,
            t.max_fds
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reason_a_load_run_s_code_stands_for_comes_first_and_notes_last() {
        let verdict = [
            "note: the generator sent late in a burst".to_string(),
            "the generator was the limit: a worker thread busy 99% of the run".to_string(),
        ];
        let gate = crate::suite::gate::parse(
            "error_rate < 5%",
            &[("error_rate", crate::metrics::Unit::Ratio)],
        )
        .unwrap()
        .judge(Some(0.1938));
        assert!(!gate.passed);
        let failed = reasons(&verdict, None, std::slice::from_ref(&gate), exit::FAILED);
        assert!(
            failed[0].starts_with("gate failed: error_rate < 5% (measured 19.38%"),
            "{failed:?}"
        );
        assert_eq!(failed[1], verdict[1]);
        assert_eq!(failed[2], verdict[0], "a note last");
        // INVALID wins over a failed gate (exit::combine): its evidence leads.
        let invalid = reasons(&verdict, None, std::slice::from_ref(&gate), exit::INVALID);
        assert_eq!(invalid[0], verdict[1]);
        assert!(invalid[1].starts_with("gate failed: "));
        assert_eq!(exit::combine(exit::INVALID, exit::FAILED), exit::INVALID);
        let stopped = reasons(
            &[],
            Some("gate error_rate < 5% decided failed after 1 s"),
            &[],
            exit::FAILED,
        );
        assert_eq!(
            stopped,
            ["stopped early: gate error_rate < 5% decided failed after 1 s"]
        );
    }
}
