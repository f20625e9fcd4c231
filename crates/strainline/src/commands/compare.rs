//! `strainline compare BASELINE CANDIDATE`: gathers both versions' repetitions from the
//! store, refuses runs from different hosts unless allowed, judges every metric
//! ([`crate::analysis::comparison`]) and reports ([`crate::report::compare`]).

use std::collections::BTreeMap;
use std::io::Write;

use crate::analysis::comparison::{judge, Pair, Policy, Verdict};
use crate::cli::CompareArgs;
use crate::exit;
use crate::report::compare::{self as report, Comparison, Mode, Session, Version};
use crate::store::{case_key, usable, Location, RunRow, Store, StoreError};
use crate::Error;

/// Every metric's values with their repetition numbers, by (case, metric).
type Values = BTreeMap<(String, String), (String, crate::metrics::Direction, Vec<(i64, f64)>)>;

/// Every metric's values over the runs' repetitions, by (case, metric).
fn gather(store: &Store, runs: &[RunRow], notes: &mut Vec<String>) -> crate::error::Result<Values> {
    let mut out: Values = BTreeMap::new();
    for run in runs {
        for case in store.cases(run.id)? {
            if !usable(&case.status) {
                notes.push(format!(
                    "run #{} case {} left out: it is {}",
                    run.id, case.name, case.status
                ));
                continue;
            }
            for m in case.metrics {
                let e = out
                    .entry((case_key(&case.name, &case.test_kind).to_string(), m.name))
                    .or_insert_with(|| (m.unit, m.direction, Vec::new()));
                e.2.push((case.repetition, m.value));
            }
        }
    }
    Ok(out)
}

/// The paired session two single runs were measured in, when they were: each run's
/// settings name the other (`paired.with`), written by `strainline run --baseline …
/// --candidate …`.
fn paired_session(
    store: &Store,
    base: &[RunRow],
    cand: &[RunRow],
) -> crate::error::Result<Option<Session>> {
    let ([b], [c]) = (base, cand) else {
        return Ok(None);
    };
    let Some(settings) = store.run_settings(c.id)? else {
        return Ok(None);
    };
    let Ok(session) = serde_json::from_value::<Session>(settings["paired"].clone()) else {
        return Ok(None);
    };
    Ok((session.with == b.id).then_some(session))
}

/// The values of the repetitions both sides measured, in pairs.
fn aligned(xs: &[(i64, f64)], ys: &[(i64, f64)]) -> (Vec<f64>, Vec<f64>) {
    xs.iter()
        .filter_map(|(rep, x)| ys.iter().find(|y| y.0 == *rep).map(|y| (*x, y.1)))
        .unzip()
}

fn runs(store: &Store, key: &str) -> crate::error::Result<Vec<RunRow>> {
    store.find_runs(key).map_err(|e| match e {
        StoreError::NoSuchRun(_) => Error::usage(format!("nothing to compare: no run or label '{key}' in the store at {} (see `strainline runs`)", store.location()),
        ),
        e => e.into(),
    })
}

fn version(key: &str, runs: &[RunRow]) -> Version {
    let mut hosts: Vec<String> = runs
        .iter()
        .map(|r| format!("{} ({})", r.host, r.fingerprint))
        .collect();
    hosts.dedup();
    Version {
        key: key.to_string(),
        runs: runs.iter().map(|r| r.id).collect(),
        hosts,
    }
}

/// The tolerance bands: the candidate's suite settings, then the command line.
fn policy(store: &Store, candidate: &[RunRow], args: &CompareArgs) -> crate::error::Result<Policy> {
    let spec: crate::suite::CompareSpec = candidate
        .last()
        .map(|r| store.run_settings(r.id))
        .transpose()?
        .flatten()
        .and_then(|s| serde_json::from_value(s["compare"].clone()).ok())
        .unwrap_or_default();
    Ok(spec.policy(&args.bands, args.alpha))
}

/// The baseline `--baseline KEY` names for the candidate: the newest run labelled KEY
/// in the candidate's suite, else the newest run (of that suite) whose commit is the
/// git merge-base of KEY and HEAD — what a pull request is judged against.
fn baseline_for(
    store: &Store,
    key: &str,
    candidate: &[RunRow],
) -> crate::error::Result<(String, Vec<RunRow>)> {
    let newest = candidate
        .last()
        .expect("find_runs returns at least one run");
    let suite = newest.suite.clone();
    let same_suite = |r: &RunRow| r.suite == suite && !candidate.iter().any(|c| c.id == r.id);
    let all = store.runs_in_order(None, None)?;
    if let Some(r) = all
        .iter()
        .rev()
        .find(|r| r.label.as_deref() == Some(key) && same_suite(r))
    {
        return Ok((format!("{key} (run #{})", r.id), vec![r.clone()]));
    }
    let cwd = std::env::current_dir()?;
    let base = std::process::Command::new("git")
        .args(["merge-base", key, "HEAD"])
        .current_dir(&cwd)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|c| !c.is_empty());
    if let Some(commit) = &base {
        if let Some(r) = all
            .iter()
            .rev()
            .find(|r| r.git_commit.as_deref() == Some(commit) && same_suite(r))
        {
            return Ok((
                format!(
                    "{key} (merge-base {}, run #{})",
                    &commit[..commit.len().min(12)],
                    r.id
                ),
                vec![r.clone()],
            ));
        }
    }
    let suite_text = suite
        .as_deref()
        .map(|s| format!(" of suite '{s}'"))
        .unwrap_or_default();
    Err(Error::usage(format!(
            "no baseline '{key}': no run labelled '{key}'{suite_text}{} in the store at {} — store one on the main branch first (e.g. `strainline run SUITE --label {key}`)",
            match &base {
                Some(c) => format!(", and no run of its merge-base commit {}", &c[..c.len().min(12)]),
                None => ", and it is not a git branch here".to_string(),
            },
            store.location()
        ),
    ))
}

pub fn run(location: &Location, args: CompareArgs) -> crate::error::Result<i32> {
    let store = Store::open(location).map_err(|e| crate::Error::usage(e.to_string()))?;
    let (base_key, cand_key) = match (&args.baseline, args.versions.as_slice()) {
        (None, [b, c]) => (b.clone(), c.clone()),
        (Some(_), []) => (String::new(), "latest".to_string()),
        (Some(_), [c]) => (String::new(), c.clone()),
        (None, _) => return Err(crate::Error::usage("compare: give BASELINE and CANDIDATE (run ids or labels), or --baseline LABEL [CANDIDATE]")),
        (Some(_), _) => return Err(crate::Error::usage("compare: with --baseline, give only the CANDIDATE")),
    };
    let cand_runs = runs(&store, &cand_key)?;
    let (base_key, base_runs) = match &args.baseline {
        Some(key) => baseline_for(&store, key, &cand_runs)?,
        None => (base_key.clone(), runs(&store, &base_key)?),
    };
    let (baseline, candidate) = (
        version(&base_key, &base_runs),
        version(&cand_key, &cand_runs),
    );
    let fingerprints = |rs: &[RunRow]| {
        let mut f: Vec<String> = rs.iter().map(|r| r.fingerprint.clone()).collect();
        f.sort();
        f.dedup();
        f
    };
    let (fb, fc) = (fingerprints(&base_runs), fingerprints(&cand_runs));
    let environment_mismatch = if fb != fc {
        let what = format!(
            "baseline ran on {}, candidate on {}",
            baseline.hosts.join(", "),
            candidate.hosts.join(", ")
        );
        if !args.allow_env_mismatch {
            return Err(Error::usage(format!("refusing to compare runs from different hosts: {what}. Their figures differ for reasons that are not the code; rerun both on one host, or pass --allow-env-mismatch to compare anyway"),
            ));
        }
        Some(what)
    } else {
        None
    };
    let mut notes = Vec::new();
    let b = gather(&store, &base_runs, &mut notes)?;
    let c = gather(&store, &cand_runs, &mut notes)?;
    let session = paired_session(&store, &base_runs, &cand_runs)?;
    let paired = session.is_some_and(|s| s.mode != Mode::Sequential);
    let pairs: Vec<Pair> = b
        .iter()
        .filter_map(|((case, metric), (unit, direction, xs))| {
            let (_, _, ys) = c.get(&(case.clone(), metric.clone()))?;
            let (baseline, candidate) = match paired {
                true => aligned(xs, ys),
                false => (
                    xs.iter().map(|v| v.1).collect(),
                    ys.iter().map(|v| v.1).collect(),
                ),
            };
            Some(Pair {
                case: case.clone(),
                metric: metric.clone(),
                unit: unit.clone(),
                direction: *direction,
                baseline,
                candidate,
                paired,
            })
        })
        .collect();
    if pairs.is_empty() {
        let cases = |v: &Values| {
            let mut k: Vec<&str> = v.keys().map(|k| k.0.as_str()).collect();
            k.dedup();
            if k.is_empty() {
                "none".to_string()
            } else {
                k.join(", ")
            }
        };
        // Imported results are named by the tool: hyperfine by the command it timed,
        // which differs between ./old/app and ./new/app.
        let imported = base_runs
            .iter()
            .chain(&cand_runs)
            .all(|r| r.kind == "import");
        let hint = if imported {
            "; imported benchmarks pair by name — give both versions the same name (hyperfine -n NAME 'COMMAND', or the same benchmark names in the other tools)"
        } else {
            ""
        };
        return Err(Error::usage(format!(
                "nothing to compare: no case ran in both versions (baseline {}: {}; candidate {}: {}){hint}",
                base_key,
                crate::units::one_line(&cases(&b)),
                cand_key,
                crate::units::one_line(&cases(&c))
            ),
        ));
    }
    let mut policy = policy(&store, &cand_runs, &args)?;
    policy.looks = session.and_then(|s| s.looks);
    let rows = judge(&pairs, &policy);
    let regressed = rows.iter().any(|r| r.verdict == Verdict::Regressed);
    let mut comparison = Comparison {
        schema: "strainline.compare.v1",
        baseline,
        candidate,
        environment_mismatch,
        alpha: policy.alpha,
        notes,
        rows,
        verdict: if regressed { "regressed" } else { "ok" },
        flame_diff: None,
        mode: session.map_or(Mode::Separate, |s| s.mode),
        machine: session.and_then(|s| s.machine),
    };
    if let Some(path) = &args.html {
        comparison.flame_diff = flame_difference(&store, &base_runs, &cand_runs, path)?;
    }
    let mut out = crate::units::Printable(std::io::stdout().lock());
    super::quiet_pipe(report::write_table(&mut out, &comparison).and_then(|()| out.flush()))?;
    if let Some(path) = &args.json {
        write_file(path, &report::to_json(&comparison))?;
    }
    if let Some(path) = &args.markdown {
        write_file(path, &report::to_markdown(&comparison))?;
    }
    if let Some(path) = &args.html {
        write_file(path, &crate::report::html::comparison_report(&comparison))?;
    }
    Ok(if regressed {
        exit::FAILED
    } else {
        exit::PASSED
    })
}

/// The folded CPU stacks of the first case of `runs` that has them: `(case key, stacks)`.
fn stacks(
    store: &Store,
    runs: &[RunRow],
    key: Option<&str>,
) -> crate::error::Result<Option<(String, String)>> {
    for run in runs {
        for case in store.cases(run.id)? {
            let k = case_key(&case.name, &case.test_kind).to_string();
            if key.is_some_and(|want| want != k) {
                continue;
            }
            if let Some(data) = store.artifact(case.id, "cpu_stacks.folded")? {
                return Ok(Some((k, String::from_utf8_lossy(&data).into_owned())));
            }
        }
    }
    Ok(None)
}

/// A differential flame graph beside the HTML, when both versions were profiled.
fn flame_difference(
    store: &Store,
    base: &[RunRow],
    cand: &[RunRow],
    html: &std::path::Path,
) -> crate::error::Result<Option<String>> {
    let Some((key, after)) = stacks(store, cand, None)? else {
        return Ok(None);
    };
    let Some((_, before)) = stacks(store, base, Some(&key))? else {
        return Ok(None);
    };
    let name = format!(
        "{}-flame-diff.svg",
        html.file_stem().unwrap_or_default().to_string_lossy()
    );
    let svg = html
        .parent()
        .unwrap_or(std::path::Path::new("."))
        .join(&name);
    crate::monitor::profile::draw_difference(
        &before,
        &after,
        &format!("CPU of {key}: candidate against baseline"),
        &svg,
    )?;
    Ok(Some(name))
}

fn write_file(path: &std::path::Path, text: &str) -> crate::error::Result<()> {
    std::fs::write(path, text)
        .map_err(|e| crate::Error::usage(format!("cannot write {}: {e}", path.display())))
}
