//! Running a suite: every case in order — start the target (build first if asked),
//! apply the workload of the test's kind, stop the target, judge (the kind's own
//! verdict, then the gates), store the case at once, print it — and the suite's
//! outcome. A signal stops the target and keeps the completed cases. `commands::run`
//! only turns arguments into [`Options`] and the [`Outcome`] into an exit code.

mod case;
pub mod paired;
mod spread;
pub mod worktree;

use std::io::Write;
use std::path::PathBuf;

use crate::error::Category;
use crate::kinds::{self, CaseResult, Status};
use crate::os::signals;
use crate::store::{Location, Metric, Store};
use crate::suite::{self, Kind};
use crate::sut::lifecycle;

/// A suite that cannot run as written: a usage error, not a failed case.
fn config(msg: impl Into<String>) -> crate::Error {
    crate::Error::usage(msg)
}

/// How to run a suite.
#[derive(Clone)]
pub struct Options {
    pub suite: PathBuf,
    /// Multiplies every duration of the suite.
    pub time_scale: f64,
    pub label: Option<String>,
    /// Only the test with this name.
    pub only: Option<String>,
    /// `{{NAME}}` values for every case (the build under test…).
    pub vars: Vec<(String, String)>,
    /// Profile every case's target (flame graphs).
    pub profile: bool,
    /// Every HTTP test's load from these agents instead of this machine.
    pub agents: Option<crate::agents::Fleet>,
    /// Told of the run's progress: the live view, the exporter, or no one.
    pub observer: crate::observe::Shared,
}

/// A case whose load came from agents keeps their parts of its last load run in its
/// details, and says how each did.
fn keep_agents(result: &mut kinds::CaseResult, parts: &[crate::load::summary::AgentSummary]) {
    if parts.is_empty() {
        return;
    }
    result.details.agents = Some(parts.to_vec());
    result.table.push(kinds::lines::Line::Agents);
}

/// How a suite's run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// Every case ran; the worst case status.
    Completed(Status),
    /// A signal stopped it; the completed cases are stored.
    Interrupted,
}

impl Ending {
    /// As stored with the run.
    pub fn stored(self) -> crate::store::Status {
        match self {
            Ending::Completed(s) => s.stored(),
            Ending::Interrupted => crate::store::Status::Interrupted,
        }
    }

    /// The exit code of a suite's run (stored with it, and strainline's own).
    pub fn exit_code(self) -> i32 {
        use crate::error::exit;
        match self {
            Ending::Interrupted => exit::INTERRUPTED,
            Ending::Completed(s) => s.exit_code(),
        }
    }
}

/// What a suite's run produced.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub run_id: i64,
    pub ending: Ending,
}

/// A `{{NAME}}` in the target or a workload that neither the matrix nor a `--var`
/// sets would reach the target literally: refused before anything starts.
fn check_placeholders(suite: &suite::Suite, args: &Options) -> crate::error::Result<()> {
    let mut known: std::collections::BTreeSet<String> =
        ["port", "dir", "client", "seq", "size", "iteration"]
            .map(String::from)
            .into();
    known.extend(args.vars.iter().map(|v| v.0.clone()));
    known.extend(suite.vars.keys().cloned());
    for t in &suite.tests {
        known.extend(t.matrix.iter().map(|m| m.0.clone()));
    }
    let mut texts: Vec<(&str, &str)> = Vec::new();
    let cwd = suite
        .target
        .as_ref()
        .and_then(|t| t.cwd.as_ref())
        .map(|c| c.to_string_lossy().into_owned());
    if let Some(target) = &suite.target {
        texts.extend(
            target
                .command
                .iter()
                .map(|a| ("the target's command", a.as_str())),
        );
        texts.extend(
            target
                .env
                .values()
                .map(|v| ("the target's env", v.as_str())),
        );
        texts.extend(cwd.as_deref().map(|c| ("the target's cwd", c)));
        match &target.ready {
            crate::sut::spec::Ready::Http(u) | crate::sut::spec::Ready::Tcp(u) => {
                texts.push(("the target's ready", u.as_str()))
            }
            _ => {}
        }
        texts.extend(
            target
                .build
                .iter()
                .flatten()
                .map(|a| ("the target's build", a.as_str())),
        );
    }
    for t in &suite.tests {
        if let Some(w) = t.workload() {
            texts.extend(w.url.as_deref().map(|u| ("a test's url", u)));
            texts.extend(w.body.as_deref().map(|b| ("a test's body", b)));
            texts.extend(w.headers.values().map(|h| ("a test's header", h.as_str())));
            texts.extend(
                w.headers
                    .keys()
                    .map(|h| ("a test's header name", h.as_str())),
            );
            for s in &w.setup {
                texts.push(("a set-up request's path", s.path.as_str()));
                texts.push(("a set-up request's body", s.body.as_str()));
            }
        }
        texts.extend(
            t.command()
                .into_iter()
                .flatten()
                .map(|a| ("a test's command", a.as_str())),
        );
        texts.extend(t.spec.own().texts());
    }
    for (what, text) in texts {
        let mut rest = text;
        while let Some(i) = rest.find("{{") {
            let Some(j) = rest[i..].find("}}") else { break };
            let name = rest[i + 2..i + j].trim();
            if !known.contains(name) && !name.starts_with("random") && !name.starts_with("csv") {
                let msg = format!(
                    "{what} uses {{{{{name}}}}}, which no matrix value or --var sets: add --var {name}=VALUE"
                );
                // At the first place the file writes it.
                let located = std::fs::read_to_string(&args.suite).ok().and_then(|text| {
                    let at = text.find(&rest[i..i + j + 2])?;
                    Some(crate::located::message(&args.suite, &text, at, &msg))
                });
                return Err(config(
                    located.unwrap_or_else(|| format!("{}: {msg}", args.suite.display())),
                ));
            }
            rest = &rest[i + j + 2..];
        }
    }
    Ok(())
}

/// Everything that can be known before running: the suite read and checked, its
/// placeholders set, the cases `--only` selects. Nothing is started or stored.
pub fn prepare(args: &Options) -> crate::error::Result<(suite::Suite, Vec<suite::Case>)> {
    // The command line checks it too; a runner's caller (the demo) need not.
    crate::limits::TIME_SCALE
        .named("--time-scale")
        .check(args.time_scale)?;
    let suite = suite::load(&args.suite, args.time_scale)?;
    check_placeholders(&suite, args)?;
    let cases: Vec<suite::Case> = suite
        .cases()
        .into_iter()
        .filter(|c| {
            args.only
                .as_ref()
                .is_none_or(|o| suite.tests[c.test].name == *o)
        })
        .collect();
    if cases.is_empty() {
        let names: Vec<&str> = suite.tests.iter().map(|t| t.name.as_str()).collect();
        return Err(config(format!(
            "{}: no test named '{}' (its tests: {})",
            args.suite.display(),
            args.only.clone().unwrap_or_default(),
            names.join(", ")
        )));
    }
    Ok((suite, cases))
}

/// Runs a suite, printing each case to `out` as it ends, and stores everything.
/// A usage error means the suite could not run as written.
pub fn run(
    store_location: &Location,
    args: &Options,
    out: &mut dyn Write,
) -> crate::error::Result<Outcome> {
    let (suite, cases) = prepare(args)?;
    let store = Store::open(store_location).usage()?;
    let (run_id, work) = begin(&store, store_location, &suite, args, args.label.as_deref())?;
    let conditions = crate::host::ConditionsProbe::start();
    let _recording = crate::live::record::start(store_location, run_id);
    signals::install();
    writeln!(
        out,
        "Suite {} — {}, run #{run_id}, logs in {}",
        crate::units::printable(&suite.name),
        crate::units::count(cases.len() as u64, "case", "cases"),
        work.display()
    )?;
    let mut worst = Status::Passed;
    // Metrics of every case, by test and matrix values, for the spread across repetitions.
    let mut groups: std::collections::BTreeMap<String, Vec<Vec<Metric>>> = Default::default();
    let mut done = 0;
    let handed = kinds::Handed::default();
    let into = RunInto {
        store: &store,
        location: store_location,
        suite: &suite,
        args,
        run_id,
        work: &work,
    };
    for (i, case) in cases.iter().enumerate() {
        if signals::interrupted() {
            break;
        }
        let Some(result) = into
            .execute(case, &[], (i + 1, cases.len()), &handed, None, out)
            .map_err(|e| into.cut_short(e))?
        else {
            break;
        };
        worst = worst.worse(result.status);
        done += 1;
        let group = case
            .name
            .rsplit_once('#')
            .map_or(case.name.clone(), |(g, _)| g.to_string());
        groups
            .entry(group)
            .or_default()
            .push(result.metrics.clone());
    }
    spread::print(out, &groups)?;
    let interrupted = signals::interrupted();
    let ending = if interrupted {
        Ending::Interrupted
    } else {
        Ending::Completed(worst)
    };
    let status = ending.stored();
    store.merge_run_settings(
        run_id,
        "conditions",
        serde_json::to_value(conditions.finish())?,
    )?;
    store.finish_run(run_id, status.clone(), Some(ending.exit_code()), &[])?;
    writeln!(
        out,
        "\nSuite {}: {} — {done} of {} run; stored as run #{run_id}{}",
        crate::units::printable(&suite.name),
        status.name().to_uppercase(),
        crate::units::count(cases.len() as u64, "case", "cases"),
        if interrupted {
            " (interrupted: the completed cases are saved)"
        } else {
            ""
        }
    )?;
    Ok(Outcome { run_id, ending })
}

/// What shapes a suite run's figures, for `compare` to refuse runs that differ in it:
/// the time scale, strainline's version and each test as parsed (durations scaled,
/// rates, connections, threads, sizes, matrix values, repetitions, interval). `--var`
/// values are not in it: they name the version under test.
pub fn shape(suite: &suite::Suite, args: &Options) -> serde_json::Value {
    let tests: serde_json::Map<String, serde_json::Value> = suite
        .tests
        .iter()
        .map(|t| {
            (
                t.name.clone(),
                serde_json::Value::String(format!(
                    "{:?}, repeat: {}, matrix: {:?}, interval: {:?}",
                    t.spec, t.repeat, t.matrix, t.interval
                )),
            )
        })
        .collect();
    serde_json::json!({
        "time_scale": args.time_scale,
        "strainline": env!("CARGO_PKG_VERSION"),
        "tests": tests,
    })
}

/// Opens a run of the suite in the store (its host, directory and commit recorded, the
/// suite's `[compare]` settings and its shape kept) and its work directory.
fn begin(
    store: &Store,
    location: &Location,
    suite: &suite::Suite,
    args: &Options,
    label: Option<&str>,
) -> crate::error::Result<(i64, PathBuf)> {
    let run_id = store.begin_run_here(
        "suite",
        label,
        Some(&suite.name),
        &format!("run {}", args.suite.display()),
    )?;
    store.set_run_settings(
        run_id,
        &serde_json::json!({ "compare": suite.compare, "shape": shape(suite, args) }),
    )?;
    let work = location.work_dir().join(format!("run-{run_id}"));
    std::fs::create_dir_all(&work)?;
    Ok((run_id, work))
}

/// A run being written: where its cases go.
#[derive(Clone, Copy)]
struct RunInto<'a> {
    store: &'a Store,
    location: &'a Location,
    suite: &'a suite::Suite,
    args: &'a Options,
    run_id: i64,
    work: &'a std::path::Path,
}

impl RunInto<'_> {
    /// Runs one case into the run — its own directory, its variables (the case's, then
    /// `extra`, then `--var`), its kind, its gates — prints it and stores it at once.
    /// `None` when a signal stopped it before it measured anything (not a result).
    /// An error once the run has begun is strainline unable to go on (a full disk, a
    /// store that went away), not a usage error: the run is stored as invalid, as far
    /// as the store still can, and strainline exits 3 saying so. A suite that cannot run
    /// as written stays a configuration error (2).
    pub(crate) fn cut_short(&self, e: crate::Error) -> crate::Error {
        if matches!(e, crate::Error::Usage(_)) {
            return e;
        }
        let why = format!(
            "run #{} stopped: strainline could not go on: {e:#} (a full disk? a store that went away?); the cases before it are stored",
            self.run_id
        );
        let _ = self.store.finish_run(
            self.run_id,
            crate::store::Status::Invalid,
            Some(crate::exit::INVALID),
            std::slice::from_ref(&why),
        );
        crate::Error::exit(crate::error::exit::INVALID, why)
    }

    fn execute(
        &self,
        case: &suite::Case,
        extra: &[(String, String)],
        (nth, of): (usize, usize),
        handed: &kinds::Handed,
        duet: Option<&kinds::Duet>,
        out: &mut dyn Write,
    ) -> crate::error::Result<Option<CaseResult>> {
        let (store, suite, args) = (self.store, self.suite, self.args);
        let test = &suite.tests[case.test];
        let dir = self.work.join(format!("case-{nth:03}"));
        std::fs::create_dir_all(&dir)?;
        let mut vars = case.vars.clone();
        // A matrix value first, then a version's (paired), then --var, then the suite's
        // own default.
        let defaults = suite.vars.iter();
        for (k, v) in extra
            .iter()
            .chain(&args.vars)
            .map(|(k, v)| (k, v))
            .chain(defaults)
        {
            vars.entry(k.clone()).or_insert_with(|| v.clone());
        }
        vars.insert("port".into(), lifecycle::free_port().to_string());
        vars.insert("dir".into(), dir.display().to_string());
        args.observer.case(&case.name, Some((nth, of)));
        writeln!(
            out,
            "\n[{nth}/{of}] {} ({})",
            crate::units::printable(&case.name),
            test.kind.name()
        )?;
        out.flush()?;
        let params = serde_json::to_string(&case.vars)?;
        let case_id = store.begin_case(
            self.run_id,
            &case.name,
            test.kind.name(),
            Some(&params),
            case.repetition,
        )?;
        let ctx = kinds::CaseCtx {
            suite,
            test,
            case,
            vars,
            dir,
            handed,
            store: self.location.clone(),
            profile: test.profile || args.profile,
            case_id,
            agents: args.agents.as_ref(),
            agent_parts: Default::default(),
            duet,
            observer: args.observer.clone(),
        };
        let (mut result, ran_at_all) = case::outcome(&ctx);
        keep_agents(&mut result, &ctx.agent_parts.borrow());
        debug_assert_catalogued(test.kind, &result);
        if matches!(result.status, Status::Passed | Status::Failed) && !result.metrics.is_empty() {
            if let Err(e) = kinds::apply_gates(test, &mut result) {
                store.finish_run(
                    self.run_id,
                    crate::store::Status::Failed,
                    Some(2),
                    &[e.to_string()],
                )?;
                return Err(config(format!("{}: {e}", args.suite.display())));
            }
        }
        // What it is there to catch is judged with its gates (a failed gate caught).
        if ran_at_all {
            result = case::expected(test.expect_failure, result);
        }
        if signals::interrupted() && result.metrics.is_empty() {
            return Ok(None);
        }
        print_case(out, &result)?;
        store_case(store, case_id, &result)?;
        Ok(Some(result))
    }
}

/// Commits a finished case at once: a crash of strainline later loses nothing of it.
fn store_case(store: &Store, case_id: i64, result: &CaseResult) -> crate::error::Result<()> {
    for (name, points) in &result.series {
        store.append_series(case_id, name, points)?;
    }
    if let Some(folded) = &result.folded {
        store.put_artifact(case_id, "cpu_stacks.folded", folded.as_bytes())?;
    }
    for (name, span, data) in &result.histograms {
        store.put_histogram(
            case_id,
            name,
            *span,
            crate::load::recorder::hdr::STORED,
            data,
        )?;
    }
    let processes = result
        .target
        .as_ref()
        .map(|t| t.processes.clone())
        .unwrap_or_default();
    store.put_gates(case_id, &result.gates)?;
    store.finish_case(
        case_id,
        result.status.stored(),
        &result.metrics,
        &processes,
        result,
    )?;
    Ok(())
}

/// Every metric a case stores is in the catalogue for its kind (or printed by a
/// harness): what gates, compare and reports rely on. Checked in debug builds, which
/// the end-to-end tests run.
fn debug_assert_catalogued(kind: Kind, r: &CaseResult) {
    for m in &r.metrics {
        debug_assert!(
            m.source.as_deref() == Some("harness output")
                || crate::metrics::lookup(&m.name).is_some_and(|d| d.made_by(kind)),
            "a {} case stored '{}', which the metric catalogue does not list for it",
            kind.name(),
            m.name
        );
    }
}

fn print_case(out: &mut dyn Write, r: &CaseResult) -> std::io::Result<()> {
    use crate::units::printable;
    for l in crate::report::case::lines(r) {
        writeln!(out, "    {}", printable(&l))?;
    }
    writeln!(out, "  → {}", r.status.stored().name().to_uppercase())?;
    for reason in &r.reasons {
        writeln!(out, "    - {}", printable(reason))?;
    }
    Ok(())
}
