//! `strainline monitor`: run a command (or attach to a pid), sample its process tree
//! until it ends, store the run and print the summary. The command's stdio is passed
//! through; strainline's own output goes to stderr, so `monitor` can sit in a pipeline.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};

use crate::commands::flags::{in_range, parse_duration, parse_pid, ExportArgs};
use crate::error::Category;
use crate::exit;
use crate::host::{git_state, Host};
use crate::limits;
use crate::measure::{ExitInfo, Sample};
use crate::monitor::threads::ThreadReader;
use crate::monitor::watch::{tick, Flusher, Reap, DETAIL_PERIOD, STATUS_PERIOD};
use crate::monitor::{Ending, Sampler, SamplerConfig};
use crate::os::cgroup::Cgroup;
use crate::os::{process, signals};
use crate::report::monitor as report;
use crate::store::{Location, NewRun, Status, Store};
use crate::Error;
use clap::Args;
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;

#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  strainline monitor -- ./my-benchmark --iterations 1000\n  \
                  strainline monitor --interval 10ms --json out.json -- make -j2\n  \
                  strainline monitor --pid 4242 --duration 30s"
)]
pub struct MonitorArgs {
    /// Attach to a running process (and its descendants) instead of starting a command.
    #[arg(long, value_name = "PID", conflicts_with = "command", value_parser = parse_pid)]
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
    #[arg(long, value_name = "N", default_value_t = 3, value_parser = parse_top)]
    pub top: usize,

    /// Do not put the command in a cgroup of its own: find descendants by scanning /proc
    /// and take CPU from /proc alone (the tree-wide kernel memory peak is then absent).
    #[arg(long)]
    pub no_cgroup: bool,

    /// Do not print the summary block.
    #[arg(short, long)]
    pub quiet: bool,

    /// No live view with --pid on a terminal (a command run after `--` keeps the
    /// terminal for its own output and never has one).
    #[arg(long)]
    pub no_tui: bool,
    #[command(flatten)]
    pub export: ExportArgs,

    /// The command to run, after `--`.
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<OsString>,
}

fn parse_top(s: &str) -> crate::error::Result<usize> {
    in_range(s, limits::TOP.named("--top"))
}

/// `strainline monitor`: opens what can fail on bad input, starts the command (or
/// attaches to --pid), watches the tree until it ends ([`watch`]; the tick itself is
/// [`tick`], shared with the suite runner's watcher), then stores and prints what it saw
/// ([`conclude`]).
pub fn run(store_location: &Location, args: MonitorArgs) -> crate::error::Result<i32> {
    if args.pid.is_none() && args.command.is_empty() {
        return Err(Error::usage("monitor needs a command after `--` or --pid PID (e.g. `strainline monitor -- sleep 1`)",
        ));
    }
    if let Some(pid) = args.pid {
        if !process::exists(pid) {
            return Err(crate::Error::usage(format!("--pid {pid}: no such process")));
        }
    }
    // Open everything that can fail on bad input before starting anything.
    let store = Store::open(store_location).usage()?;
    let csv = open_outputs(&args)?;

    let host = Host::current();
    let cwd = std::env::current_dir()
        .map_err(|e| Error::from(e).context("reading the working directory"))?;
    let git = git_state(&cwd);
    let command: Vec<String> = match args.pid {
        Some(pid) => vec![format!("pid {pid}"), crate::monitor::procfs::cmdline(pid)],
        None => args
            .command
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect(),
    };

    signals::install();
    let start = Instant::now();
    let (root, cgroup, adopter) = start_or_attach(&args)?;
    let pidfd = process::pidfd(root);
    let run_id = store.begin_run(&NewRun {
        kind: "monitor",
        label: args.label.as_deref(),
        suite: None,
        command: &command.join(" "),
        cwd: &cwd,
        git: git.as_ref(),
        host: &host,
    })?;
    let case_id = store.begin_case(run_id, &command.join(" "), "monitor", None, 0)?;

    let cpu_at_start = process::own_cpu_seconds();
    let mut sampler = sampler(&args, (root, adopter), cgroup, start);
    let mut flusher = Flusher::new(|samples: &[Sample]| {
        store.append_samples(case_id, samples)?;
        Ok(())
    });
    let attached = args.pid.is_some();
    // The live view only for an attached process: a command's own output keeps the
    // terminal, as under `time`.
    let _export = crate::live::export::start(&args.export.targets())?;
    let live = crate::live::start(
        attached && !args.no_tui && !args.quiet,
        &format!("monitor --pid {root}"),
    );
    let _recording = crate::live::record::start(store_location, run_id);
    crate::observe::Observer::case(&crate::live::Feed, &command.join(" "), None);

    let stop_at = args.duration.map(|d| start + d);
    let watching = (root, pidfd.as_ref(), stop_at);
    let seen = watch(&args, &mut sampler, &mut flusher, watching, csv)?;
    drop(live);

    // The command has ended; stop whatever it left behind and reap it all.
    let leftovers = if attached {
        0
    } else {
        crate::monitor::stop::stop_leftovers(&mut sampler, root)
    };
    let overhead = process::own_cpu_seconds() - cpu_at_start;
    let ending = |exit: ExitInfo, status: &Status| Ending {
        command,
        label: args.label.clone(),
        exit,
        status: status.name().to_string(),
        interval_seconds: args.interval.as_secs_f64(),
        overhead_cpu_seconds: overhead,
        leftover_processes_stopped: leftovers,
    };
    conclude(
        &store,
        (run_id, case_id),
        &args,
        (sampler, &mut || flusher.flush()),
        seen,
        ending,
        &host,
    )
}

/// The sampler of the tree under `root` (`adopter`: who its orphans are reparented
/// to), every --interval, its slower readings at their own periods.
fn sampler(
    args: &MonitorArgs,
    (root, adopter): (u32, Option<u32>),
    cgroup: Option<Arc<Cgroup>>,
    start: Instant,
) -> Sampler {
    let every = |period: Duration| {
        (period.as_secs_f64() / args.interval.as_secs_f64())
            .ceil()
            .max(1.0) as u64
    };
    Sampler::new(
        SamplerConfig {
            root,
            adopter,
            detail_every: every(DETAIL_PERIOD),
            status_every: every(STATUS_PERIOD),
            top_n: args.top,
        },
        cgroup,
        start,
    )
}

/// Makes --csv's file (its header written) and --json's, so that a path that cannot be
/// written is refused before the command starts.
fn open_outputs(args: &MonitorArgs) -> crate::error::Result<Option<BufWriter<File>>> {
    let csv = match &args.csv {
        Some(p) => {
            let f = File::create(p).map_err(|e| {
                crate::Error::usage(format!("--csv {}: {e}", p.display())).because(e)
            })?;
            let mut w = BufWriter::new(f);
            writeln!(w, "{}", report::csv_header(true))?;
            Some(w)
        }
        None => None,
    };
    if let Some(p) = &args.json {
        File::create(p)
            .map_err(|e| crate::Error::usage(format!("--json {}: {e}", p.display())).because(e))?;
    }
    Ok(csv)
}

/// The root of the tree to watch: --pid as it is, or the command spawned (in a cgroup of
/// its own unless --no-cgroup, strainline its subreaper); with the cgroup and the
/// adopter of its orphans.
fn start_or_attach(
    args: &MonitorArgs,
) -> crate::error::Result<(u32, Option<Arc<Cgroup>>, Option<u32>)> {
    Ok(match args.pid {
        Some(pid) => (pid, None, None),
        None => {
            let cg = if args.no_cgroup {
                None
            } else {
                Cgroup::create(&format!("strainline-{}", std::process::id())).map(Arc::new)
            };
            process::become_subreaper();
            let fds = cg.as_ref().map(|c| c.join_fds()).unwrap_or_default();
            let pid = process::spawn(&args.command, fds)
                .map_err(|e| Error::exit(e.exit_code(), e.to_string()))?;
            (pid, cg, Some(std::process::id()))
        }
    })
}

/// What [`watch`] saw: how the root ended, whether the user interrupted, every sample
/// (kept for --json only), the threads' states, and the --csv file written to.
struct Seen {
    root_exit: Option<ExitInfo>,
    interrupted: bool,
    all: Vec<Sample>,
    states: ThreadReader,
    csv: Option<BufWriter<File>>,
}

/// Samples the tree every --interval until the root ends (attached: is gone), a signal
/// or --duration ends the watch ([`stopping`]); each sample goes to the live view, the
/// CSV, the store and, for --json, memory.
fn watch<F: FnMut(&[Sample]) -> crate::error::Result<()>>(
    args: &MonitorArgs,
    sampler: &mut Sampler,
    flusher: &mut Flusher<F>,
    (root, pidfd, stop_at): (u32, Option<&OwnedFd>, Option<Instant>),
    csv: Option<BufWriter<File>>,
) -> crate::error::Result<Seen> {
    let attached = args.pid.is_some();
    let feed = crate::live::Feed;
    let mut seen = Seen {
        root_exit: None,
        interrupted: false,
        all: Vec::new(),
        states: ThreadReader::default(),
        csv,
    };
    let states = &mut seen.states;
    let mut kill_at: Option<Instant> = None;
    let mut next_tick = Instant::now();
    loop {
        let (s, exit) = tick(sampler, root, Reap::All);
        if states.due(Instant::now())
            && states.tick(
                &sampler.thread_procs(),
                sampler.tree_cpu_usec(),
                Instant::now(),
            )
        {
            let (parked, ran) = states.parked_and_ran();
            sampler.on_threads(parked, &ran);
            crate::observe::Observer::threads(&feed, &states.tally);
        }
        crate::observe::Observer::sample(&feed, &s);
        seen.root_exit = seen.root_exit.or(exit);
        if let Some(w) = seen.csv.as_mut() {
            writeln!(w, "{}", report::csv_row(&s, Some(&states.tally.total())))?;
        }
        if args.json.is_some() {
            seen.all.push(s.clone());
        }
        flusher.push(s)?;
        if seen.root_exit.is_some() || (attached && !process::exists(root)) {
            break;
        }
        if stopping(attached, root, stop_at, &mut kill_at, &mut seen.interrupted) {
            break;
        }
        if kill_at.is_some_and(|k| Instant::now() >= k) {
            crate::monitor::stop::kill_tree(sampler, root);
        }
        next_tick += args.interval;
        if next_tick < Instant::now() {
            // Fell behind (a slow tick): skip missed ticks rather than bursting.
            next_tick = Instant::now();
        }
        if process::sleep_until(next_tick, pidfd) {
            sampler.end_seen();
        }
    }
    Ok(seen)
}

/// After a tick: whether to stop watching now (attached, at a signal or the deadline:
/// detach); a command is asked to stop instead (the signal passed on, or SIGTERM at
/// --duration), `kill_at` set to when its tree is killed (at once at a second signal).
fn stopping(
    attached: bool,
    root: u32,
    stop_at: Option<Instant>,
    kill_at: &mut Option<Instant>,
    interrupted: &mut bool,
) -> bool {
    if let Some(sig) = signals::take() {
        *interrupted = true;
        if attached {
            return true;
        }
        if sig.count > 1 {
            *kill_at = Some(Instant::now());
        } else {
            if sig.from_kill {
                process::signal(root, sig.signal);
            }
            *kill_at = Some(Instant::now() + process::GRACE);
        }
    }
    if let Some(at) = stop_at {
        if Instant::now() >= at {
            if attached {
                return true;
            }
            if kill_at.is_none() {
                process::signal(root, libc::SIGTERM);
                *kill_at = Some(Instant::now() + process::GRACE);
            }
        }
    }
    false
}

/// Finishes the case and the run in the store, writes --csv and --json, prints the
/// summary (unless --quiet); returns the exit code: the command's own, 0 for a process
/// watched to its end, 130 when interrupted.
fn conclude(
    store: &Store,
    (run_id, case_id): (i64, i64),
    args: &MonitorArgs,
    (sampler, flush): (Sampler, &mut dyn FnMut() -> crate::error::Result<()>),
    seen: Seen,
    ending: impl FnOnce(ExitInfo, &Status) -> Ending,
    host: &Host,
) -> crate::error::Result<i32> {
    let exit_info = seen.root_exit.unwrap_or(ExitInfo {
        code: None,
        signal: None,
    });
    let status = if seen.interrupted {
        Status::Interrupted
    } else {
        Status::Completed
    };
    // The run's figures end where sampling did, before the last samples are written.
    let mut summary = sampler.finish(ending(exit_info.clone(), &status));
    summary.threads = Some(seen.states.tally.since(&Default::default()).top(8));
    flush()?;
    store.finish_case(
        case_id,
        status.clone(),
        &crate::monitor::figures::metrics(&summary),
        &summary.processes,
        &summary,
    )?;
    let code = if seen.interrupted {
        exit::INTERRUPTED
    } else if args.pid.is_some() {
        exit::PASSED
    } else {
        exit_info.shell_status()
    };
    store.finish_run(run_id, status, Some(code), &[])?;

    if let Some(mut w) = seen.csv {
        w.flush()?;
    }
    if let Some(p) = &args.json {
        std::fs::write(p, report::to_json(&summary, &seen.all, host, Some(run_id)))
            .map_err(|e| Error::from(e).context(format!("writing {}", p.display())))?;
    }
    if !args.quiet {
        let mut err = std::io::stderr().lock();
        report::write_summary(&mut err, &summary, Some(run_id))?;
        if seen.interrupted {
            writeln!(
                err,
                "Interrupted: the partial run is saved as run #{run_id}."
            )?;
        }
    }
    Ok(code)
}
