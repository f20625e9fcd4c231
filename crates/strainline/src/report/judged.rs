//! A comparison read from the store: both versions' runs found (by id, label or the
//! branch a pull request is judged against), their metrics gathered over repetitions,
//! judged ([`crate::analysis::comparison`]). `strainline compare` prints it; `serve`
//! shows it as a page.

use std::collections::BTreeMap;

use crate::analysis::comparison::{judge, Pair, Policy, Verdict};
use crate::report::compare::{Comparison, Mode, Session, Version};
use crate::store::{case_key, RunRow, Store, StoreError};
use crate::Error;

/// What to compare.
#[derive(Debug, Clone, Default)]
pub struct Ask {
    /// The baseline as a run id or label, unless [`Ask::baseline`] names a branch.
    pub baseline_key: String,
    /// `--baseline LABEL-or-BRANCH`: the newest run of that label in the candidate's
    /// suite, else the run of the branch's merge-base.
    pub baseline: Option<String>,
    pub candidate: String,
    pub bands: Vec<(String, f64)>,
    pub alpha: Option<f64>,
    pub allow_env_mismatch: bool,
    /// Compare runs whose shapes differ (time scale, durations, rates…): the report
    /// starts with what differs.
    pub allow_shape_mismatch: bool,
}

/// A comparison and the runs on each side.
pub struct Judged {
    pub comparison: Comparison,
    pub baseline: Vec<RunRow>,
    pub candidate: Vec<RunRow>,
}

/// Finds both versions' runs and judges every metric they share.
pub fn compare(store: &Store, ask: &Ask) -> crate::error::Result<Judged> {
    let cand_runs = runs(store, &ask.candidate)?;
    let (base_key, base_runs) = match &ask.baseline {
        Some(key) => baseline_for(store, key, &cand_runs)?,
        None => (ask.baseline_key.clone(), runs(store, &ask.baseline_key)?),
    };
    let (baseline, candidate) = (
        version(&base_key, &base_runs),
        version(&ask.candidate, &cand_runs),
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
        if !ask.allow_env_mismatch {
            return Err(Error::usage(format!("refusing to compare runs from different hosts: {what}. Their figures differ for reasons that are not the code; rerun both on one host, or pass --allow-env-mismatch to compare anyway"),
            ));
        }
        Some(what)
    } else {
        None
    };
    let shape_mismatch = shape_difference(store, &base_runs, &cand_runs)?;
    if let (Some(what), false) = (&shape_mismatch, ask.allow_shape_mismatch) {
        return Err(Error::usage(format!(
            "refusing to compare runs of different shapes: {what}. Their figures differ because they were measured differently, not because of the code; rerun one with the other's settings, or pass --allow-shape-mismatch to compare anyway"
        )));
    }
    let mut notes = Vec::new();
    let b = gather(store, &base_runs, &mut notes)?;
    let c = gather(store, &cand_runs, &mut notes)?;
    let session = paired_session(store, &base_runs, &cand_runs)?;
    let paired = session.is_some_and(|s| s.mode != Mode::Sequential);
    // One session's two runs share the machine's conditions by construction.
    let conditions = match session {
        Some(_) => None,
        None => conditions_difference(store, &base_runs, &cand_runs)?,
    };
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
                ask.candidate,
                crate::units::one_line(&cases(&c))
            ),
        ));
    }
    let mut policy = policy(store, &cand_runs, ask)?;
    policy.looks = session.and_then(|s| s.looks);
    let rows = judge(&pairs, &policy);
    let regressed = rows.iter().any(|r| r.verdict == Verdict::Regressed);
    Ok(Judged {
        comparison: Comparison {
            schema: "strainline.compare.v1",
            baseline,
            candidate,
            environment_mismatch,
            shape_mismatch,
            conditions,
            alpha: policy.alpha,
            notes,
            rows,
            verdict: if regressed { "regressed" } else { "ok" },
            flame_diff: None,
            mode: session.map_or(Mode::Separate, |s| s.mode),
            machine: session.and_then(|s| s.machine),
        },
        baseline: base_runs,
        candidate: cand_runs,
    })
}

/// A run's settings under `key`, as `T`, when it recorded them.
fn setting<T: serde::de::DeserializeOwned>(
    store: &Store,
    run: &RunRow,
    key: &str,
) -> crate::error::Result<Option<T>> {
    Ok(store
        .run_settings(run.id)?
        .and_then(|s| serde_json::from_value(s.get(key)?.clone()).ok()))
}

#[derive(serde::Deserialize, PartialEq)]
struct Shape {
    time_scale: f64,
    strainline: String,
    tests: BTreeMap<String, String>,
}

/// What differs between the two sides' shapes (the first run of each that recorded
/// one; runs from before shapes were recorded are not judged), in words.
fn shape_difference(
    store: &Store,
    base: &[RunRow],
    cand: &[RunRow],
) -> crate::error::Result<Option<String>> {
    let first = |runs: &[RunRow]| -> crate::error::Result<Option<Shape>> {
        for r in runs {
            if let Some(s) = setting::<Shape>(store, r, "shape")? {
                return Ok(Some(s));
            }
        }
        Ok(None)
    };
    let (Some(b), Some(c)) = (first(base)?, first(cand)?) else {
        return Ok(None);
    };
    let mut differs = Vec::new();
    if b.time_scale != c.time_scale {
        differs.push(format!(
            "the time scale (baseline {}, candidate {})",
            b.time_scale, c.time_scale
        ));
    }
    if b.strainline != c.strainline {
        differs.push(format!(
            "strainline's version (baseline {}, candidate {})",
            b.strainline, c.strainline
        ));
    }
    for (name, bt) in &b.tests {
        let Some(ct) = c.tests.get(name) else {
            continue;
        };
        if bt != ct {
            differs.push(format!("test '{name}': {}", token_difference(bt, ct)));
        }
    }
    Ok((!differs.is_empty()).then(|| differs.join("; ")))
}

/// The first settings that differ between two descriptions (`duration: 30s` against
/// `duration: 12s`), at most three.
fn token_difference(a: &str, b: &str) -> String {
    let split = |s: &str| -> Vec<String> {
        s.split([',', '{', '}', '(', ')', '[', ']'])
            .map(|t| t.trim().to_string())
            .filter(|t| !t.is_empty())
            .collect()
    };
    let (ta, tb) = (split(a), split(b));
    let pairs: Vec<String> = ta
        .iter()
        .zip(&tb)
        .filter(|(x, y)| x != y)
        .take(3)
        .map(|(x, y)| format!("{x} in the baseline, {y} in the candidate"))
        .collect();
    if pairs.is_empty() {
        "its settings differ".into()
    } else {
        pairs.join("; ")
    }
}

/// Cores busy elsewhere that make two runs' conditions differ enough to say so, and the
/// steal share (a point is 1% of the machine).
pub const CONDITIONS_CORES: f64 = 0.25;
pub const CONDITIONS_STEAL: f64 = 0.02;
/// Standard errors of steal's own second-to-second swings a difference must exceed: on a
/// VM whose neighbours come and go, two runs of the same conditions differ by more than
/// [`CONDITIONS_STEAL`] by chance.
pub const CONDITIONS_STEAL_SE: f64 = 3.0;

/// One side's conditions: the means over its runs of the cores busy elsewhere and of the
/// steal share, and the variance of that steal mean from its per-second swings.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Side {
    cores: f64,
    steal: f64,
    steal_var: f64,
}

impl Side {
    fn of(c: &[crate::host::Conditions]) -> Option<Side> {
        let n = c.len() as f64;
        (n > 0.0).then(|| Side {
            cores: c.iter().map(|c| c.busy_elsewhere_cores).sum::<f64>() / n,
            steal: c.iter().map(|c| c.steal).sum::<f64>() / n,
            steal_var: c
                .iter()
                .filter(|c| c.steal_seconds > 1)
                .map(|c| c.steal_sd * c.steal_sd / c.steal_seconds as f64)
                .sum::<f64>()
                / (n * n),
        })
    }
}

/// Why two sides' conditions differ enough to warn, if they do: cores busy elsewhere
/// beyond [`CONDITIONS_CORES`]; steal beyond [`CONDITIONS_STEAL`] and beyond
/// [`CONDITIONS_STEAL_SE`] standard errors of its own swings.
fn conditions_why(b: Side, c: Side) -> Vec<String> {
    let mut why = Vec::new();
    if (b.cores - c.cores).abs() >= CONDITIONS_CORES {
        why.push(format!(
            "the baseline ran while {} were busy elsewhere on the machine, the candidate beside {}",
            crate::units::format_value(b.cores, "cores"),
            crate::units::format_value(c.cores, "cores")
        ));
    }
    let swing = CONDITIONS_STEAL_SE * (b.steal_var + c.steal_var).sqrt();
    if (b.steal - c.steal).abs() >= CONDITIONS_STEAL.max(swing) {
        why.push(format!(
            "the hypervisor took {:.1}% of the machine during the baseline, {:.1}% during the candidate{}",
            100.0 * b.steal,
            100.0 * c.steal,
            if swing > 0.0 {
                format!(
                    " (beyond its swings from second to second, which could explain ±{:.1} points)",
                    100.0 * swing
                )
            } else {
                String::new()
            }
        ));
    }
    why
}

/// A warning when the machine did other work during one side's runs and not (as much)
/// during the other's (see [`conditions_why`]).
fn conditions_difference(
    store: &Store,
    base: &[RunRow],
    cand: &[RunRow],
) -> crate::error::Result<Option<String>> {
    let side = |runs: &[RunRow]| -> crate::error::Result<Option<Side>> {
        let mut v = Vec::new();
        for r in runs {
            v.extend(setting::<crate::host::Conditions>(store, r, "conditions")?);
        }
        Ok(Side::of(&v))
    };
    let (Some(b), Some(c)) = (side(base)?, side(cand)?) else {
        return Ok(None);
    };
    let why = conditions_why(b, c);
    Ok((!why.is_empty()).then(|| {
        format!(
            "{}: a difference below may be the machine's, not the code's — repeat both on a quiet machine, or measure them in one paired session (strainline run SUITE --baseline … --candidate …)",
            why.join("; ")
        )
    }))
}

/// Every metric's values with their repetition numbers, by (case, metric).
type Values = BTreeMap<(String, String), (String, crate::metrics::Direction, Vec<(i64, f64)>)>;

/// Every metric's values over the runs' repetitions, by (case, metric).
fn gather(store: &Store, runs: &[RunRow], notes: &mut Vec<String>) -> crate::error::Result<Values> {
    let mut out: Values = BTreeMap::new();
    for run in runs {
        for case in store.cases(run.id)? {
            if !case.status.usable() {
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

pub fn runs(store: &Store, key: &str) -> crate::error::Result<Vec<RunRow>> {
    store.find_runs(key).map_err(|e| match e {
        StoreError::NoSuchRun(_) => Error::usage(format!("nothing to compare: no run or label '{key}' in the store at {} (see `strainline runs`)", store.location()),
        )
        .because(e),
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
fn policy(store: &Store, candidate: &[RunRow], ask: &Ask) -> crate::error::Result<Policy> {
    let spec: crate::suite::CompareSpec = candidate
        .last()
        .map(|r| store.run_settings(r.id))
        .transpose()?
        .flatten()
        .and_then(|s| serde_json::from_value(s["compare"].clone()).ok())
        .unwrap_or_default();
    Ok(spec.policy(&ask.bands, ask.alpha))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn side(cores: f64, steal: f64, sd: f64, seconds: u32) -> Side {
        Side::of(&[crate::host::Conditions {
            seconds: seconds as f64,
            busy_elsewhere_cores: cores,
            steal,
            steal_sd: sd,
            steal_seconds: seconds,
            load_avg: 0.0,
        }])
        .unwrap()
    }

    #[test]
    fn a_burner_beside_one_side_is_named() {
        let why = conditions_why(side(0.05, 0.0, 0.0, 5), side(1.02, 0.0, 0.0, 5));
        assert_eq!(why.len(), 1);
        assert!(
            why[0].contains("0.050 cores were busy elsewhere"),
            "{why:?}"
        );
    }

    #[test]
    fn steal_within_its_own_swings_is_not_a_difference_of_conditions() {
        // 12% and 16% of steal that swings ±8 points from second to second: 5 seconds
        // each cannot tell them apart (3 × √(2 × 0.08² / 5) = 15 points).
        assert!(conditions_why(side(0.05, 0.12, 0.08, 5), side(0.05, 0.16, 0.08, 5)).is_empty());
        // The same means, steady for a minute each: a change of conditions.
        let why = conditions_why(side(0.05, 0.12, 0.005, 60), side(0.05, 0.16, 0.005, 60));
        assert_eq!(why.len(), 1, "{why:?}");
        assert!(why[0].contains("12.0% of the machine during the baseline, 16.0%"));
        assert!(why[0].contains("±0.3 points"), "{why:?}");
    }

    #[test]
    fn runs_stored_without_steals_swings_keep_the_fixed_threshold() {
        let why = conditions_why(side(0.0, 0.10, 0.0, 0), side(0.0, 0.13, 0.0, 0));
        assert!(why[0].ends_with("13.0% during the candidate"), "{why:?}");
        assert!(conditions_why(side(0.0, 0.10, 0.0, 0), side(0.0, 0.115, 0.0, 0)).is_empty());
    }
}
