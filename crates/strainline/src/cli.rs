//! The command line, as clap derive structs. Parsing only: values are checked here
//! (durations, pids) so that bad input is refused before any work starts.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "strainline",
    version,
    about = "Performance non-regression testing: benchmark, stress, soak and compare programs and services",
    after_help = "Exit codes: 0 passed · 1 a gate or comparison failed · 2 usage or configuration error · \
                  3 run invalid · 4 target crashed · 130 interrupted. `monitor` exits with the command's own status."
)]
pub struct Cli {
    /// The results store: a path to an SQLite file.
    #[arg(long, global = true, env = "STRAINLINE_STORE", value_name = "PATH", default_value = crate::store::DEFAULT_PATH)]
    pub store: PathBuf,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a command (or attach to a process) and watch its whole process tree.
    Monitor(MonitorArgs),
    /// List the runs in the results store, newest first.
    Runs(RunsArgs),
    /// Show one stored run: its summary and metrics.
    Show(ShowArgs),
    /// A short tour on built-in defaults: monitors the bundled testbed's memory profile.
    Demo,
    /// Run the bundled system under test (the same as the `strainline-testbed` binary).
    #[command(disable_help_flag = true)]
    Testbed {
        /// Arguments for strainline-testbed (try `strainline testbed --help`).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<OsString>,
    },
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    let d = crate::units::parse_duration(s).map_err(|e| e.to_string())?;
    if d.is_zero() {
        return Err(format!(
            "'{s}' is zero; give a positive duration such as 10ms"
        ));
    }
    Ok(d)
}

#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  strainline monitor -- ./my-benchmark --iterations 1000\n  \
                  strainline monitor --interval 10ms --json out.json -- make -j2\n  \
                  strainline monitor --pid 4242 --duration 30s"
)]
pub struct MonitorArgs {
    /// Attach to a running process (and its descendants) instead of starting a command.
    #[arg(long, value_name = "PID", conflicts_with = "command")]
    pub pid: Option<u32>,

    /// Stop after this long: detach from --pid, or stop the command (SIGTERM).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub duration: Option<Duration>,

    /// Time between samples (e.g. 10ms, 0.5s).
    #[arg(short, long, value_name = "DURATION", default_value = "100ms", value_parser = parse_duration)]
    pub interval: Duration,

    /// Write the summary and every sample as JSON (schema strainline.monitor.v1).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,

    /// Write the sampled time series as CSV, one row per tick.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,

    /// A label for the run in the store (e.g. a version: v0.8.0).
    #[arg(long, value_name = "TEXT")]
    pub label: Option<String>,

    /// How many of the largest processes each sample lists.
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub top: usize,

    /// Do not put the command in a cgroup of its own: find descendants by scanning /proc
    /// and take CPU from /proc alone (the tree-wide kernel memory peak is then absent).
    #[arg(long)]
    pub no_cgroup: bool,

    /// Do not print the summary block.
    #[arg(short, long)]
    pub quiet: bool,

    /// The command to run, after `--`.
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<OsString>,
}

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
    /// A run id (as listed by `strainline runs`) or a label (its newest run).
    pub run: String,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}
