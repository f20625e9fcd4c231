//! `strainline monitor`: run a command (or attach to a pid), sample its process tree
//! until it ends, store the run and print the summary. The command's stdio is passed
//! through; strainline's own output goes to stderr, so `monitor` can sit in a pipeline.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::time::{Duration, Instant};

use crate::cli::MonitorArgs;
use crate::error::Category;
use crate::exit;
use crate::host::{git_state, Host};
use crate::measure::{ExitInfo, Sample};
use crate::monitor::watch::{tick, Flusher, Reap, DETAIL_PERIOD, STATUS_PERIOD};
use crate::monitor::{Ending, Sampler, SamplerConfig};
use crate::os::cgroup::Cgroup;
use crate::os::{process, signals};
use crate::report::monitor as report;
use crate::store::{Location, NewRun, Status, Store};
use crate::Error;
use std::sync::Arc;

/// Long because `monitor` is one foreground loop (tick, stream, signals, deadline,
/// stop) between a spawn and a summary; the tick itself is [`tick`], shared with the
/// suite runner's watcher.
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
    let mut csv = match &args.csv {
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
    let (root, cgroup, adopter) = match args.pid {
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
    };
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
    let every = |period: Duration| {
        (period.as_secs_f64() / args.interval.as_secs_f64())
            .ceil()
            .max(1.0) as u64
    };
    let mut sampler = Sampler::new(
        SamplerConfig {
            root,
            adopter,
            detail_every: every(DETAIL_PERIOD),
            status_every: every(STATUS_PERIOD),
            top_n: args.top,
        },
        cgroup,
        start,
    );
    let mut all: Vec<Sample> = Vec::new();
    let mut flusher = Flusher::new(|samples: &[Sample]| {
        store.append_samples(case_id, samples)?;
        Ok(())
    });
    let mut root_exit: Option<ExitInfo> = None;
    let mut interrupted = false;
    let mut kill_at: Option<Instant> = None;
    let mut next_tick = Instant::now();
    let attached = args.pid.is_some();
    let stop_at = args.duration.map(|d| start + d);
    // The live view only for an attached process: a command's own output keeps the
    // terminal, as under `time`.
    let _export = crate::live::export::start(&args.export.targets())?;
    let live = crate::live::start(
        attached && !args.no_tui && !args.quiet,
        &format!("monitor --pid {root}"),
    );
    let _recording = crate::live::record::start(store_location, run_id);
    let feed = crate::live::Feed;
    crate::observe::Observer::case(&feed, &command.join(" "), None);

    let mut states = crate::monitor::threads::ThreadReader::default();
    loop {
        let (s, exit) = tick(&mut sampler, root, Reap::All);
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
        root_exit = root_exit.or(exit);
        if let Some(w) = csv.as_mut() {
            writeln!(w, "{}", report::csv_row(&s, Some(&states.tally.total())))?;
        }
        if args.json.is_some() {
            all.push(s.clone());
        }
        flusher.push(s)?;
        if root_exit.is_some() || (attached && !process::exists(root)) {
            break;
        }
        if let Some(sig) = signals::take() {
            interrupted = true;
            if attached {
                break;
            }
            if sig.count > 1 {
                kill_at = Some(Instant::now());
            } else {
                if sig.from_kill {
                    process::signal(root, sig.signal);
                }
                kill_at = Some(Instant::now() + process::GRACE);
            }
        }
        if let Some(at) = stop_at {
            if Instant::now() >= at {
                if attached {
                    break;
                }
                if kill_at.is_none() {
                    process::signal(root, libc::SIGTERM);
                    kill_at = Some(Instant::now() + process::GRACE);
                }
            }
        }
        if kill_at.is_some_and(|k| Instant::now() >= k) {
            crate::monitor::stop::kill_tree(&sampler, root);
        }
        next_tick += args.interval;
        if next_tick < Instant::now() {
            // Fell behind (a slow tick): skip missed ticks rather than bursting.
            next_tick = Instant::now();
        }
        if process::sleep_until(next_tick, pidfd.as_ref()) {
            sampler.end_seen();
        }
    }
    drop(live);

    // The command has ended; stop whatever it left behind and reap it all.
    let leftovers = if attached {
        0
    } else {
        crate::monitor::stop::stop_leftovers(&mut sampler, root)
    };
    let overhead = process::own_cpu_seconds() - cpu_at_start;
    let exit_info = root_exit.unwrap_or(ExitInfo {
        code: None,
        signal: None,
    });
    let status = if interrupted {
        Status::Interrupted
    } else {
        Status::Completed
    };
    let mut summary = sampler.finish(Ending {
        command,
        label: args.label.clone(),
        exit: exit_info.clone(),
        status: status.name().to_string(),
        interval_seconds: args.interval.as_secs_f64(),
        overhead_cpu_seconds: overhead,
        leftover_processes_stopped: leftovers,
    });
    summary.threads = Some(states.tally.since(&Default::default()).top(8));
    flusher.flush()?;
    store.finish_case(
        case_id,
        status.clone(),
        &crate::monitor::figures::metrics(&summary),
        &summary.processes,
        &summary,
    )?;
    let code = if interrupted {
        exit::INTERRUPTED
    } else if attached {
        exit::PASSED
    } else {
        exit_info.shell_status()
    };
    store.finish_run(run_id, status, Some(code), &[])?;

    if let Some(mut w) = csv {
        w.flush()?;
    }
    if let Some(p) = &args.json {
        std::fs::write(p, report::to_json(&summary, &all, &host, Some(run_id)))
            .map_err(|e| Error::from(e).context(format!("writing {}", p.display())))?;
    }
    if !args.quiet {
        let mut err = std::io::stderr().lock();
        report::write_summary(&mut err, &summary, Some(run_id))?;
        if interrupted {
            writeln!(
                err,
                "Interrupted: the partial run is saved as run #{run_id}."
            )?;
        }
    }
    Ok(code)
}
