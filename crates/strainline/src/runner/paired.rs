//! A paired session: two versions of the target measured in one sitting, so that the
//! machine's noise — the hypervisor's steal, neighbours, frequency — falls on both.
//! Interleaved (the default), each pair runs the baseline and the candidate one right
//! after the other, in an order drawn per pair from a seeded stream (A B or B A, so
//! neither version always runs second, on a warmer machine); after every pair from the
//! `min` on, the pairs' ratios are judged ([`crate::analysis::paired`]) and the session
//! stops once every judged metric's interval lies inside its band or beyond it, or when
//! the pairs or the time budget are spent. One after the other (`sequential`) runs every
//! baseline repetition, then every candidate one — what separate runs do — for
//! measuring what pairing gains.
//!
//! Both versions are stored as ordinary runs (labelled, each naming the other in its
//! settings), so `compare`, `history`, the reports and the GitHub Action read them.

use std::collections::BTreeMap;
use std::io::Write;
use std::time::{Duration, Instant};

use super::{begin, config, prepare, Ending, Options, RunInto};
use crate::analysis::comparison::{judge, settled, Method, Pair, Policy, Row, Verdict};
use crate::analysis::paired::Looks;
use crate::error::Category;
use crate::kinds::{CaseResult, Status};
use crate::os::signals;
use crate::report::compare::{self as report, Comparison, MachineNoise, Mode, Session, Version};
use crate::store::{Location, Store};
use crate::suite;

/// How to pair two versions.
#[derive(Debug, Clone)]
pub struct Pairing {
    /// `{{NAME}}` values of each version (on top of `--var`).
    pub baseline: Vec<(String, String)>,
    pub candidate: Vec<(String, String)>,
    pub baseline_label: String,
    pub candidate_label: String,
    /// `None`: a duet where the suite and the machine allow one, else interleaved.
    pub mode: Option<Mode>,
    /// Pairs before the first look, and at most.
    pub min_pairs: usize,
    pub max_pairs: usize,
    /// A duet pins each target to half of the CPUs (else both share them all).
    pub split_cpus: bool,
    /// Wall time for the whole session (shared evenly by its cases).
    pub budget: Option<Duration>,
    pub seed: u64,
    /// `--band METRIC=X` and `--alpha` over the suite's `[compare]`.
    pub bands: Vec<(String, f64)>,
    pub alpha: Option<f64>,
    /// `--baseline-ref`: the ref's worktree; the baseline's target runs from the same
    /// place in it as the candidate's in the working tree, and its run records its
    /// commit.
    pub baseline_tree: Option<super::worktree::Tree>,
}

/// What a paired session produced.
#[derive(Debug, Clone)]
pub struct PairedOutcome {
    pub candidate_run: i64,
    pub ending: Ending,
    pub regressed: bool,
}

/// One version's side of a case: its results by pair number.
type Side = BTreeMap<usize, CaseResult>;

fn usable(r: &CaseResult) -> bool {
    matches!(r.status, Status::Passed | Status::Failed)
}

/// The comparable metrics of one case's pairs so far: values of the pairs in which both
/// versions measured.
fn pairs_of(case: &str, a: &Side, b: &Side, paired: bool) -> Vec<Pair> {
    let both: Vec<usize> = a
        .iter()
        .filter(|(k, r)| usable(r) && b.get(k).is_some_and(usable))
        .map(|(k, _)| *k)
        .collect();
    let Some(first) = both.first() else {
        return Vec::new();
    };
    let value = |side: &Side, k: usize, name: &str| side[&k].metric(name);
    a[first]
        .metrics
        .iter()
        .filter_map(|m| {
            let xs: Vec<f64> = both.iter().filter_map(|&k| value(a, k, &m.name)).collect();
            let ys: Vec<f64> = both.iter().filter_map(|&k| value(b, k, &m.name)).collect();
            (xs.len() == both.len() && ys.len() == both.len()).then(|| Pair {
                case: case.to_string(),
                metric: m.name.clone(),
                unit: m.unit.clone(),
                direction: m.direction,
                baseline: xs,
                candidate: ys,
                paired,
            })
        })
        .collect()
}

/// The name that pairs a case across versions: without the suite's repetition suffix.
fn group_name(case: &suite::Case, repeat: u32) -> String {
    if repeat > 1 {
        case.name
            .rsplit_once('#')
            .map_or(case.name.clone(), |(g, _)| g.to_string())
    } else {
        case.name.clone()
    }
}

/// Why these cases cannot run as a duet, if they cannot: a duet runs bench tests of a
/// suite with a [target], each version's target on a CPU of its own.
fn duet_refusal(suite: &suite::Suite, groups: &[(String, &suite::Case)]) -> Option<String> {
    let cores = crate::host::cores();
    if cores < 2 {
        return Some(format!(
            "a duet runs both versions at once, each on a CPU of its own, and this machine has {cores}"
        ));
    }
    if suite.target.is_none() {
        return Some("a duet starts two targets, and the suite has no [target]".into());
    }
    groups
        .iter()
        .find(|(_, c)| !suite.tests[c.test].kind.traits().duet)
        .map(|(name, c)| {
            format!(
                "test '{name}' is a {} test, and a duet runs bench tests (one fixed load at each version, started together)",
                suite.tests[c.test].kind.name()
            )
        })
}

/// The runs of one case in order: each step is one run `(pair, side)`, or two run at
/// once (a duet).
fn steps(mode: Mode, pairs: usize, coin: &mut Coin) -> Vec<Vec<(usize, usize)>> {
    match mode {
        Mode::Sequential => (0..2)
            .flat_map(|side| (1..=pairs).map(move |k| vec![(k, side)]))
            .collect(),
        Mode::Duet => (1..=pairs).map(|k| vec![(k, 0), (k, 1)]).collect(),
        Mode::Interleaved | Mode::Separate => (1..=pairs)
            .flat_map(|k| {
                let first = usize::from(!coin.baseline_first());
                [vec![(k, first)], vec![(k, 1 - first)]]
            })
            .collect(),
    }
}

/// A seeded stream of coin flips: which version of a pair runs first.
struct Coin(crate::rng::Rng);

impl Coin {
    fn baseline_first(&mut self) -> bool {
        self.0.coin()
    }
}

fn policy(suite: &suite::Suite, p: &Pairing, mode: Mode) -> Policy {
    let mut policy = suite.compare.policy(&p.bands, p.alpha);
    if mode != Mode::Sequential {
        policy.looks = Some(Looks::spread(p.min_pairs, p.max_pairs));
    }
    policy
}

/// Runs a suite's cases as a paired session of two versions, printing as it goes and
/// the comparison at the end.
pub fn run_paired(
    location: &Location,
    args: &Options,
    p: &Pairing,
    out: &mut dyn Write,
) -> crate::error::Result<PairedOutcome> {
    if p.min_pairs < 3 || p.max_pairs < p.min_pairs {
        return Err(config(format!(
            "--min-pairs {} and --pairs {}: need 3 ≤ --min-pairs ≤ --pairs (3 pairs are the fewest a paired comparison judges)",
            p.min_pairs, p.max_pairs
        )));
    }
    // Every name either version sets is known to the placeholder check.
    let mut checked = args.clone();
    checked
        .vars
        .extend(p.baseline.iter().chain(&p.candidate).cloned());
    let (suite, cases) = prepare(&checked)?;
    let groups: Vec<(String, &suite::Case)> = cases
        .iter()
        .filter(|c| c.repetition == 0)
        .map(|c| (group_name(c, suite.tests[c.test].repeat), c))
        .collect();
    let mode = mode(p, duet_refusal(&suite, &groups), args, out)?;
    let store = Store::open(location).usage()?;
    let base_suite = baseline_suite(&suite, p)?;
    let (base_id, base_work) = begin(&store, location, &suite, args, Some(&p.baseline_label))?;
    if let Some(tree) = &p.baseline_tree {
        store.set_run_commit(base_id, &tree.commit, false)?;
    }
    let (cand_id, cand_work) = begin(&store, location, &suite, args, Some(&p.candidate_label))?;
    let policy = policy(&suite, p, mode);
    let session = |with: i64, machine: Option<MachineNoise>| {
        serde_json::json!({
            "compare": suite.compare,
            "paired": Session {
                with,
                mode,
                seed: p.seed,
                looks: policy.looks,
                machine,
            },
        })
    };
    store.set_run_settings(base_id, &session(cand_id, None))?;
    store.set_run_settings(cand_id, &session(base_id, None))?;
    signals::install();
    let started = Instant::now();
    let steal_before = crate::host::stolen_seconds();
    writeln!(
        out,
        "Suite {} — {} of {} against {}, {} (seed {}), {} to {} pairs{}: baseline run #{base_id}, candidate run #{cand_id}",
        crate::units::printable(&suite.name),
        crate::units::count(groups.len() as u64, "case", "cases"),
        p.candidate_label,
        p.baseline_label,
        mode.name(),
        p.seed,
        p.min_pairs,
        p.max_pairs,
        p.budget
            .map(|b| format!(" within {}", crate::units::format_duration(b)))
            .unwrap_or_default()
    )?;
    let base = RunInto {
        store: &store,
        location,
        suite: &base_suite,
        args,
        run_id: base_id,
        work: &base_work,
    };
    let cand = RunInto {
        suite: &suite,
        run_id: cand_id,
        work: &cand_work,
        ..base
    };
    let mut sitting = Sitting {
        p,
        mode,
        policy: &policy,
        into: [base, cand],
        total: groups.len() * p.max_pairs * 2,
        per_case: p.budget.map(|b| b / groups.len().max(1) as u32),
        nth: 0,
        handed: Default::default(),
        worst: Status::Passed,
        notes: Vec::new(),
        coin: Coin(crate::rng::Rng::new(p.seed)),
    };
    let mut all_pairs = Vec::new();
    for (name, template) in &groups {
        let Some(pairs) = sitting.case(name, template, out)? else {
            break;
        };
        all_pairs.extend(pairs);
    }
    let Sitting { worst, notes, .. } = sitting;
    let seconds = started.elapsed().as_secs_f64();
    let machine = MachineNoise {
        steal: ((crate::host::stolen_seconds() - steal_before)
            / (seconds * crate::host::cores() as f64))
            .clamp(0.0, 1.0),
        seconds,
    };
    store.set_run_settings(base_id, &session(cand_id, Some(machine)))?;
    store.set_run_settings(cand_id, &session(base_id, Some(machine)))?;
    conclude(
        &store,
        p,
        (&policy, mode),
        (base_id, cand_id),
        machine,
        worst,
        &all_pairs,
        notes,
        out,
    )
}

/// The session's mode: as asked (a duet refused when the cases cannot run as one, with
/// `refusal` saying why), else a duet where the cases can, interleaved pairs (said so)
/// where they cannot.
fn mode(
    p: &Pairing,
    refusal: Option<String>,
    args: &Options,
    out: &mut dyn Write,
) -> crate::error::Result<Mode> {
    Ok(match (p.mode, &refusal) {
        (Some(Mode::Duet), Some(why)) => {
            return Err(config(format!(
                "{}: --mode duet: {why}; use --mode interleaved",
                args.suite.display()
            )))
        }
        (Some(m), _) => m,
        (None, Some(why)) => {
            writeln!(out, "interleaved pairs, not a duet: {why}")?;
            Mode::Interleaved
        }
        (None, None) => Mode::Duet,
    })
}

/// The baseline's suite: the same, its target run from the ref's worktree.
fn baseline_suite(suite: &suite::Suite, p: &Pairing) -> crate::error::Result<suite::Suite> {
    let mut base_suite = suite.clone();
    if let (Some(tree), Some(t)) = (&p.baseline_tree, base_suite.target.as_mut()) {
        let here = std::env::current_dir()?;
        let cwd = t
            .cwd
            .as_ref()
            .map_or_else(|| here.clone(), |c| here.join(c));
        t.cwd = Some(tree.mirror(&cwd)?);
    }
    Ok(base_suite)
}

/// A paired session as it sits: what it was asked, and what it has so far.
struct Sitting<'a> {
    p: &'a Pairing,
    mode: Mode,
    policy: &'a Policy,
    /// The baseline's run and the candidate's.
    into: [RunInto<'a>; 2],
    /// Cases the session may run at most, and has run.
    total: usize,
    nth: usize,
    /// A case's share of the time budget.
    per_case: Option<Duration>,
    handed: [crate::kinds::Handed; 2],
    worst: Status,
    notes: Vec<String>,
    coin: Coin,
}

impl<'a> Sitting<'a> {
    fn vars(&self) -> [&'a Vec<(String, String)>; 2] {
        [&self.p.baseline, &self.p.candidate]
    }

    fn labels(&self) -> [&'a String; 2] {
        [&self.p.baseline_label, &self.p.candidate_label]
    }

    /// One case's pairs, until they decide, the budget is spent or `--pairs` are run;
    /// `None` when a signal stopped the session.
    fn case(
        &mut self,
        name: &str,
        template: &suite::Case,
        out: &mut dyn Write,
    ) -> crate::error::Result<Option<Vec<Pair>>> {
        let case_start = Instant::now();
        let mut sides = [Side::default(), Side::default()];
        let mut stopped_by = None;
        for step in steps(self.mode, self.p.max_pairs, &mut self.coin) {
            if signals::interrupted() {
                return Ok(None);
            }
            let k = step[0].0;
            let case = suite::Case {
                test: template.test,
                name: format!("{name}#{k}"),
                vars: template.vars.clone(),
                repetition: k as u32 - 1,
            };
            let mut results: Vec<(usize, Option<CaseResult>)> = Vec::new();
            if step.len() == 1 {
                let side = step[0].1;
                self.nth += 1;
                write!(out, "\n{}:", self.labels()[side])?;
                let into = &self.into[side];
                let r = into
                    .execute(
                        &case,
                        self.vars()[side],
                        (self.nth, self.total),
                        &self.handed[side],
                        None,
                        out,
                    )
                    .map_err(|e| into.cut_short(e))?;
                results.push((side, r));
            } else {
                let outs = duet(
                    [&self.into[0], &self.into[1]],
                    &case,
                    self.vars(),
                    self.labels(),
                    (self.nth, self.total),
                    &self.handed,
                    self.p.split_cpus.then_some(k),
                );
                self.nth += 2;
                for (side, o) in outs.into_iter().enumerate() {
                    let (text, r) = o?;
                    out.write_all(&text)?;
                    results.push((side, r));
                }
            }
            for (side, r) in results {
                let Some(result) = r else {
                    return Ok(None);
                };
                // A case the machine made INVALID is left out of the pairs and is a
                // note; it is the session's status only when no pair of its case
                // measured (below). A target that crashed is a finding.
                if result.status != Status::Invalid {
                    self.worst = self.worst.worse(result.status);
                }
                if !usable(&result) {
                    self.notes.push(format!(
                        "{} {} left out of the pairs: it is {}",
                        self.labels()[side],
                        case.name,
                        result.status.stored()
                    ));
                }
                sides[side].insert(k, result);
            }
            // Once the pair is complete: look, when the plan does; then the budget,
            // checked after every pair (a budget spent between two looks ends the
            // plan there: `analysis::paired` uses the looks taken and this one).
            let complete =
                self.mode != Mode::Sequential && sides.iter().all(|s| s.contains_key(&k));
            if !complete {
                continue;
            }
            if self.policy.looks.is_some_and(|l| l.at(k)) {
                let rows = judge(&pairs_of(name, &sides[0], &sides[1], true), self.policy);
                write_look(out, k, &rows)?;
                if !rows.is_empty() && rows.iter().all(settled) {
                    stopped_by = Some(format!("decided after {k} pairs"));
                    break;
                }
            }
            if self.per_case.is_some_and(|b| case_start.elapsed() >= b) && k < self.p.max_pairs {
                stopped_by = Some(format!("time budget spent after {k} pairs"));
                break;
            }
        }
        if let Some(why) = stopped_by {
            writeln!(out, "  {name}: {why}")?;
        }
        let pairs = pairs_of(name, &sides[0], &sides[1], self.mode != Mode::Sequential);
        let lost = sides
            .iter()
            .flat_map(|s| s.values())
            .any(|r| r.status == Status::Invalid);
        if pairs.is_empty() && lost {
            self.worst = self.worst.worse(Status::Invalid);
        }
        Ok(Some(pairs))
    }
}

/// The session's end: both runs finished with the worst status, the pairs judged, the
/// comparison printed as `compare` prints it.
#[allow(clippy::too_many_arguments)]
fn conclude(
    store: &Store,
    p: &Pairing,
    (policy, mode): (&Policy, Mode),
    (base_id, cand_id): (i64, i64),
    machine: MachineNoise,
    worst: Status,
    all_pairs: &[Pair],
    notes: Vec<String>,
    out: &mut dyn Write,
) -> crate::error::Result<PairedOutcome> {
    let interrupted = signals::interrupted();
    let ending = if interrupted {
        Ending::Interrupted
    } else {
        Ending::Completed(worst)
    };
    let code = ending.exit_code();
    store.finish_run(base_id, ending.stored(), Some(code), &[])?;
    store.finish_run(cand_id, ending.stored(), Some(code), &[])?;
    let rows = judge(all_pairs, policy);
    let regressed = rows.iter().any(|r| r.verdict == Verdict::Regressed);
    let host = crate::host::Host::current();
    let version = |key: &str, id: i64| Version {
        key: key.to_string(),
        runs: vec![id],
        hosts: vec![format!("{} ({})", host.hostname, host.fingerprint())],
    };
    let comparison = Comparison {
        schema: "strainline.compare.v1",
        baseline: version(&p.baseline_label, base_id),
        candidate: version(&p.candidate_label, cand_id),
        environment_mismatch: None,
        shape_mismatch: None,
        conditions: None,
        alpha: policy.alpha,
        notes,
        rows,
        verdict: if regressed { "regressed" } else { "ok" },
        flame_diff: None,
        mode,
        machine: Some(machine),
    };
    writeln!(out)?;
    report::write_table(out, &comparison)?;
    write_noise(out, &comparison.rows)?;
    writeln!(
        out,
        "\nPaired session: {} — baseline run #{base_id}, candidate run #{cand_id}{}; `strainline compare {base_id} {cand_id}` shows it again",
        if regressed { "REGRESSION".to_string() } else { ending.stored().name().to_uppercase() },
        if interrupted {
            " (interrupted: the completed cases are saved)"
        } else {
            ""
        }
    )?;
    Ok(PairedOutcome {
        candidate_run: cand_id,
        ending,
        regressed,
    })
}

/// One pair as a duet: both versions' cases at once, their loads started together;
/// with `split` (the pair's number), each target on half of the CPUs, swapped every
/// pair so neither version keeps the better half. Each side's printed text and result,
/// in side order.
fn duet(
    into: [&RunInto; 2],
    case: &suite::Case,
    vars: [&Vec<(String, String)>; 2],
    labels: [&String; 2],
    (nth, total): (usize, usize),
    handed: &[crate::kinds::Handed; 2],
    split: Option<usize>,
) -> Vec<crate::error::Result<(Vec<u8>, Option<CaseResult>)>> {
    let together = std::sync::Arc::new(crate::kinds::Rendezvous::default());
    let cores = crate::host::cores();
    let cpus =
        |side: usize| split.map(|k| (0..cores).filter(|c| c % 2 == (side + k) % 2).collect());
    std::thread::scope(|scope| {
        let handles: Vec<_> = [0usize, 1]
            .map(|side| {
                let together = together.clone();
                let (handed, this, vars) = (&handed[side], *into[side], vars[side]);
                scope.spawn(
                    move || -> crate::error::Result<(Vec<u8>, Option<CaseResult>)> {
                        let duet = crate::kinds::Duet {
                            cpus: cpus(side),
                            side,
                            together,
                        };
                        // Its own connection: the two sides store at once.
                        let store = Store::open(this.location)?;
                        let this = RunInto {
                            store: &store,
                            ..this
                        };
                        let mut text = format!("\n{}:", labels[side]).into_bytes();
                        let r = this.execute(
                            case,
                            vars,
                            (nth + side + 1, total),
                            handed,
                            Some(&duet),
                            &mut text,
                        );
                        duet.together.arrive(side);
                        Ok((text, r.map_err(|e| this.cut_short(e))?))
                    },
                )
            })
            .into();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(crate::Error::environment("a duet side panicked")))
            })
            .collect()
    })
}

/// One look: the judged metrics' ratios and intervals so far, on one line.
fn write_look(out: &mut dyn Write, k: usize, rows: &[Row]) -> std::io::Result<()> {
    let figures: Vec<String> = rows
        .iter()
        .filter(|r| r.verdict != Verdict::Info && r.method == Method::SignedRank)
        .filter_map(|r| {
            let (lo, hi) = r.ratio_ci?;
            let interval = if lo > 0.0 && hi.is_finite() {
                format!("[{:.1}–{:.1}]", 100.0 * lo, 100.0 * hi)
            } else {
                "[too few pairs for a bound]".to_string()
            };
            Some(format!(
                "{} {:.1}% {interval}{}",
                r.metric,
                100.0 * r.ratio?,
                if settled(r) { "" } else { "…" }
            ))
        })
        .collect();
    writeln!(out, "  look at {k} pairs: {}", figures.join(", "))
}

/// The noise the pairs saw through: for the resource and throughput metrics, how much
/// the baseline alone varied from pair to pair (what separate runs must see through)
/// against how much the pairs' ratios varied.
fn write_noise(out: &mut dyn Write, rows: &[Row]) -> std::io::Result<()> {
    for r in rows.iter().filter(|r| {
        r.method == Method::SignedRank
            && r.band.is_some()
            && !r.metric.starts_with("latency_")
            && !r.metric.starts_with("service_")
    }) {
        let Some(ratio_sd) = r.pair_noise else {
            continue;
        };
        let logs: Vec<f64> = r.baseline.values.iter().map(|v| v.ln()).collect();
        let mean = logs.iter().sum::<f64>() / logs.len() as f64;
        let sd = (logs.iter().map(|x| (x - mean).powi(2)).sum::<f64>()
            / (logs.len().max(2) - 1) as f64)
            .sqrt();
        writeln!(
            out,
            "noise of {} {}: the baseline varied ±{:.1}% from pair to pair, the pairs' ratios ±{:.1}%",
            r.case,
            r.metric,
            100.0 * sd,
            100.0 * ratio_sd
        )?;
    }
    Ok(())
}
