//! `strainline runs` and `strainline show`: reading the results store back.

use std::io::{self, Write};

use crate::error::Category;
use crate::exit;
use crate::measure::MonitorSummary;
use crate::report::monitor::write_summary;
use crate::store::{Location, Store};
use crate::Error;
use clap::Args;

#[derive(Debug, Args)]
pub struct RunsArgs {
    /// Only runs with this label.
    #[arg(long)]
    pub label: Option<String>,
    /// At most this many runs.
    #[arg(long, default_value_t = 20)]
    pub limit: usize,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    /// A run id (as listed by `strainline runs`), a label (its newest run), `latest`,
    /// or `latest~N` / `LABEL~N` (N runs before the newest).
    pub run: String,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

fn open(location: &Location) -> crate::error::Result<Store> {
    // Reading commands do not create an empty SQLite store where there was none.
    if let Location::Sqlite(path) = location {
        if !path.exists() {
            return Err(Error::usage(format!(
                    "no results store at {} (run something first, e.g. `strainline monitor -- sleep 1`, or pass --store PATH)",
                    path.display()
                ),
            ));
        }
    }
    Store::open(location).usage()
}

fn quiet_pipe(r: io::Result<()>) -> crate::error::Result<i32> {
    super::quiet_pipe(r).map(|()| exit::PASSED)
}

pub fn list(store: &Location, args: RunsArgs) -> crate::error::Result<i32> {
    let store = open(store)?;
    let runs = store.list_runs(args.limit, args.label.as_deref())?;
    if args.json {
        let mut out = io::stdout().lock();
        return quiet_pipe(writeln!(out, "{}", serde_json::to_string_pretty(&runs)?));
    }
    let mut out = crate::units::Printable(io::stdout().lock());
    quiet_pipe((|| {
        writeln!(
            out,
            "{:>5}  {:<24}  {:<8}  {:<12}  {:>4}  {:<14}  {:<12}  {:<10}  COMMAND",
            "RUN", "STARTED (UTC)", "KIND", "STATUS", "EXIT", "GATES", "LABEL", "COMMIT"
        )?;
        for r in &runs {
            // Anyone's text, each one line: a tab or a bidi override cannot shift or
            // reorder the columns.
            let name = crate::units::one_line;
            let cmd: String = r.command.chars().take(50).collect();
            writeln!(
                out,
                "{:>5}  {:<24}  {:<8}  {:<12}  {:>4}  {:<14}  {:<12}  {:<10}  {}",
                r.id,
                name(&r.started_at),
                name(&r.kind),
                name(&r.status.to_string()),
                r.exit_code.map(|c| c.to_string()).unwrap_or_default(),
                r.gates.shown(),
                name(r.label.as_deref().unwrap_or("")),
                name(&r.commit_shown(8)),
                name(&cmd)
            )?;
        }
        if runs.is_empty() {
            writeln!(out, "(no runs yet)")?;
        }
        Ok(())
    })())
}

/// Each gate a case was judged by: as written, what was measured, and its verdict.
fn write_gates(out: &mut dyn Write, gates: &[crate::store::GateResult]) -> io::Result<()> {
    if !gates.is_empty() {
        writeln!(out, "  gates:")?;
    }
    for g in gates {
        writeln!(
            out,
            "    {:<8} {}  (measured {})",
            g.verdict_word(),
            crate::units::one_line(&g.gate),
            g.measured_shown()
        )?;
    }
    Ok(())
}

/// The per-agent breakdown a case on agents stored (see `load --agents`).
fn write_agents(out: &mut dyn Write, summary: Option<&serde_json::Value>) -> io::Result<()> {
    let rows = summary.map_or_else(Vec::new, crate::report::run::agent_rows);
    if !rows.is_empty() {
        writeln!(out, "  agents:")?;
    }
    for row in rows {
        writeln!(out, "    agent {}", crate::report::run::agent_line(&row))?;
    }
    Ok(())
}

pub fn show(store: &Location, args: ShowArgs) -> crate::error::Result<i32> {
    let store = open(store)?;
    let run = store.find_run(&args.run).usage()?;
    let cases = store.cases(run.id)?;
    let why = store.first_reasons(&[run.id])?.remove(&run.id);
    let settings = store.run_settings(run.id)?;
    let conditions = settings
        .as_ref()
        .and_then(|s| s.get("conditions").cloned())
        .and_then(|c| serde_json::from_value::<crate::host::Conditions>(c).ok());
    let seed = settings
        .as_ref()
        .and_then(|s| s.pointer("/shape/seed"))
        .and_then(|v| v.as_u64());
    if args.json {
        let mut out = io::stdout().lock();
        let doc =
            serde_json::json!({ "run": run, "why": why, "conditions": conditions, "cases": cases });
        return quiet_pipe(writeln!(out, "{}", serde_json::to_string_pretty(&doc)?));
    }
    let mut out = crate::units::Printable(io::stdout().lock());
    quiet_pipe((|| {
        writeln!(out, "Run #{}  {}  {}", run.id, run.kind, run.status)?;
        writeln!(out, "  command:    {}", run.command)?;
        if let Some(l) = &run.label {
            writeln!(out, "  label:      {}", crate::units::one_line(l))?;
        }
        writeln!(out, "  started:    {}", run.started_at)?;
        writeln!(
            out,
            "  ended:      {}",
            run.ended_at.as_deref().unwrap_or("-")
        )?;
        writeln!(
            out,
            "  exit code:  {}",
            run.exit_code.map(|c| c.to_string()).unwrap_or("-".into())
        )?;
        writeln!(
            out,
            "  host:       {} [{}]",
            crate::units::one_line(&run.host),
            run.fingerprint
        )?;
        if let Some(c) = &conditions {
            // Runs stored before steal was read each second have no swing to show.
            let swing = match c.steal_seconds {
                0 => String::new(),
                _ => format!(" (±{:.1} points from second to second)", 100.0 * c.steal_sd),
            };
            writeln!(
                out,
                "  machine:    {:.2} cores busy elsewhere, the hypervisor took {:.1}%{swing}, load average {:.2}",
                c.busy_elsewhere_cores,
                100.0 * c.steal,
                c.load_avg
            )?;
        }
        if let Some(c) = &run.git_commit {
            writeln!(
                out,
                "  git:        {c}{}",
                if run.git_dirty == Some(true) {
                    " (dirty)"
                } else {
                    ""
                }
            )?;
        }
        writeln!(out, "  strainline: {}", run.strainline_version)?;
        if let Some(seed) = seed {
            writeln!(
                out,
                "  seed:       {seed} (--seed {seed} replays its random choices)"
            )?;
        }
        if !run.gates.shown().is_empty() {
            writeln!(out, "  gates:      {}", run.gates.shown())?;
        }
        if let Some(why) = why {
            writeln!(out, "  why:        {}", crate::units::one_line(&why))?;
        }
        for c in &cases {
            writeln!(out)?;
            match c
                .summary
                .clone()
                .and_then(|v| serde_json::from_value::<MonitorSummary>(v).ok())
            {
                Some(s) if c.test_kind == "monitor" => write_summary(&mut out, &s, Some(run.id))?,
                _ => {
                    writeln!(out, "Case {} ({}): {}", c.name, c.test_kind, c.status)?;
                    for m in &c.metrics {
                        writeln!(
                            out,
                            "  {:<24} {:>16}",
                            m.name,
                            crate::units::format_value(m.value, &m.unit)
                        )?;
                    }
                    write_agents(&mut out, c.summary.as_ref())?;
                }
            }
            write_gates(&mut out, &c.gates)?;
        }
        Ok(())
    })())
}
