//! The command line's top: the global flags and the table of commands (`Command`).
//! Each command's own flags, their help and the parsers that check their values live
//! beside it in `commands/` (those several share in `commands/flags.rs`), so that bad
//! input is refused before any work starts.

use std::ffi::OsString;

use clap::{Parser, Subcommand};

use crate::commands::agent::{AgentArgs, AgentsCommand};
use crate::commands::compare::CompareArgs;
use crate::commands::history::HistoryArgs;
use crate::commands::import::ImportArgs;
use crate::commands::init::InitArgs;
use crate::commands::load::LoadArgs;
use crate::commands::monitor::MonitorArgs;
use crate::commands::report::ReportArgs;
use crate::commands::run::{CheckArgs, RunArgs};
use crate::commands::runs::{RunsArgs, ShowArgs};
use crate::commands::schema::SchemaOf;
use crate::commands::serve::ServeArgs;
use crate::commands::workload::WorkloadCommand;

#[derive(Debug, Parser)]
#[command(
    name = "strainline",
    version,
    about = "Performance non-regression testing: benchmark, stress, soak and compare programs and services",
    after_help = "Exit codes: 0 passed · 1 a gate or comparison failed · 2 usage or configuration error · \
                  3 run invalid · 4 target crashed · 130 interrupted. `monitor` exits with the command's own status."
)]
pub struct Cli {
    /// The results store: a path to an SQLite file, or a PostgreSQL URL
    /// (postgres://user:password@host:port/database) shared by a team's machines. The
    /// password is never printed nor stored.
    #[arg(long, global = true, env = "STRAINLINE_STORE", hide_env_values = true, value_name = "PATH|URL", default_value = crate::store::DEFAULT_PATH)]
    pub store: crate::store::Location,

    /// Say more of what strainline does on stderr (-v, -vv); RUST_LOG overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,

    /// strainline's log on stderr as text, or one JSON object per line (for agents in
    /// pods).
    #[arg(
        long,
        global = true,
        value_enum,
        default_value = "text",
        value_name = "FORMAT"
    )]
    pub log_format: LogFormat,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a command (or attach to a process) and watch its whole process tree.
    Monitor(MonitorArgs),
    /// Run a suite: start the target, apply each test's workload, judge, store.
    Run(RunArgs),
    /// Check a suite without running it: every key, value, gate and placeholder (exit 0
    /// valid, 2 not).
    Check(CheckArgs),
    /// Drive load at a URL (HTTP/1.1, HTTP/2, WebSocket, gRPC, MQTT or Redis) or a
    /// command: open model (-q RATE) or closed model (-c N).
    Load(Box<LoadArgs>),
    /// List the runs in the results store, newest first.
    Runs(RunsArgs),
    /// Show one stored run: its summary and metrics.
    Show(ShowArgs),
    /// Write a stored run's reports: HTML with charts, Markdown, JUnit XML, CSV, JSON.
    Report(ReportArgs),
    /// Compare two versions: every metric of every case both ran, with a verdict.
    Compare(CompareArgs),
    /// A metric's history across stored runs, and the change points in it.
    History(HistoryArgs),
    /// A short tour on built-in defaults: a benchmark, a ramp and two soaks of the bundled
    /// testbed, with an HTML report.
    Demo,
    /// Write a commented starter suite for a URL, a command that serves, or a benchmark
    /// binary.
    Init(InitArgs),
    /// Serve as a load agent: a coordinator (`load --agents`) drives it over TLS with a
    /// shared token (--listen, --connect), or over ssh (--stdio).
    Agent(AgentArgs),
    /// Deploy agents: `agents manifest` prints a Kubernetes Indexed Job of agents that
    /// dial the coordinator.
    #[command(subcommand)]
    Agents(AgentsCommand),
    /// Workloads from access logs: `characterize` what production sends, `compare` two
    /// workloads dimension by dimension, write a `scenario` that reproduces one.
    #[command(subcommand)]
    Workload(WorkloadCommand),
    /// Store the results of another benchmark tool as a run (one case per benchmark, one
    /// repetition per sample), for compare, history, reports and gates.
    Import(ImportArgs),
    /// Serve the results store as pages in a browser: runs, a run's report, comparisons,
    /// histories with change points, runs in progress; and as JSON under /api/v1/.
    Serve(ServeArgs),
    /// Print a shell's completion script for strainline: bash, zsh, fish, elvish or
    /// powershell (e.g. `strainline completions bash > ~/.local/share/bash-completion/completions/strainline`).
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Write man pages generated from this help: strainline(1) and one per command
    /// (strainline-load(1), …), into --dir; without it, print strainline(1) (e.g.
    /// `strainline man --dir ~/.local/share/man/man1`, then `man strainline`).
    Man {
        /// The directory to write strainline.1 and strainline-COMMAND.1 into (made if
        /// missing).
        #[arg(long, value_name = "DIR")]
        dir: Option<std::path::PathBuf>,
    },
    /// Print the JSON Schema of a suite file or a scenario file, made from the types that
    /// read them: editors complete and check their keys with it (Even Better TOML /
    /// taplo: a first line `#:schema ./suite.schema.json`; e.g. `strainline schema
    /// suite > suite.schema.json`).
    Schema {
        #[arg(value_enum)]
        file: SchemaOf,
    },
    /// Run the bundled system under test (the same as the `strainline-testbed` binary).
    #[command(disable_help_flag = true)]
    Testbed {
        /// Arguments for strainline-testbed (try `strainline testbed --help`).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<OsString>,
    },
}

#[cfg(test)]
mod documented {
    use super::Cli;
    use clap::Parser;

    /// Every `strainline …` command in the README's and docs' shell blocks, one line
    /// each (continuations joined, comments, pipes and redirections cut off).
    fn commands() -> Vec<(String, String)> {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let mut files = vec![root.join("README.md")];
        for e in std::fs::read_dir(root.join("docs")).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "md") {
                files.push(p);
            }
        }
        let mut out = Vec::new();
        for f in files {
            let text = std::fs::read_to_string(&f).unwrap();
            let mut in_sh = false;
            let mut line = String::new();
            for l in text.lines() {
                if l.trim_start().starts_with("```") {
                    in_sh = !in_sh && matches!(l.trim(), "```sh" | "```bash" | "```console");
                    continue;
                }
                if !in_sh {
                    continue;
                }
                let l = l.trim();
                match l.strip_suffix('\\') {
                    Some(head) => {
                        line.push_str(head);
                        line.push(' ');
                        continue;
                    }
                    None => line.push_str(l),
                }
                let whole = std::mem::take(&mut line);
                let whole = whole.trim_start_matches("$ ");
                if !whole.starts_with("strainline ") {
                    continue;
                }
                out.push((
                    f.file_name().unwrap().to_string_lossy().into_owned(),
                    whole.trim().to_string(),
                ));
            }
        }
        out
    }

    /// The commands the docs show parse as written: every subcommand and flag exists
    /// and takes the values shown (placeholders in capitals such as `PORT` or `FILE` are
    /// values too). A command written for a reader to adapt says so with `…`.
    #[test]
    fn every_documented_command_parses() {
        let all = commands();
        assert!(all.len() >= 100, "{} commands found", all.len());
        let mut wrong = Vec::new();
        for (file, cmd) in &all {
            if cmd.contains('…') || cmd.contains("...") {
                continue;
            }
            let Some(words) = shlex::split(cmd) else {
                wrong.push(format!("{file}: {cmd}: unbalanced quotes"));
                continue;
            };
            // A comment, a pipe, a redirection or a chain ends what strainline reads; a
            // shell expansion (`"$(pgrep -o server)"`) is a value the shell fills in.
            let words: Vec<String> = words
                .into_iter()
                .take_while(|w| {
                    !w.starts_with('#')
                        && !matches!(w.as_str(), "|" | ">" | ">>" | "2>" | "&&" | ";" | "&")
                })
                .map(|w| if w.starts_with('$') { "1".into() } else { w })
                .collect();
            if let Err(e) = Cli::try_parse_from(&words) {
                if matches!(
                    e.kind(),
                    clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion
                ) {
                    continue;
                }
                let first = e.to_string();
                let first = first.lines().next().unwrap_or_default().to_string();
                wrong.push(format!("{file}: {cmd}\n    {first}"));
            }
        }
        assert!(
            wrong.is_empty(),
            "{} of {}:\n{}",
            wrong.len(),
            all.len(),
            wrong.join("\n")
        );
    }
}
