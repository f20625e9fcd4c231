//! The monitor's summary block — the stress-suite seed's "Resource Usage Metrics", and
//! more — plus its JSON document and CSV time series.

use std::io::{self, Write};

use serde::Serialize;

use crate::host::Host;
use crate::measure::{MonitorSummary, PeakSource, Sample};
use crate::units::{format_duration, Bytes};

/// The JSON document's schema identifier; bump it on any incompatible change.
pub const JSON_SCHEMA: &str = "strainline.monitor.v1";

/// Where the tree's threads spent the run: thread-seconds per second in each state, per
/// group of threads of one name (docs/suites.md, "Thread states").
fn write_thread_states(
    out: &mut dyn Write,
    b: &crate::measure::threads::Breakdown,
) -> io::Result<()> {
    use crate::measure::threads::State;
    let shown: Vec<State> = State::ALL
        .into_iter()
        .filter(|st| b.total().get(*st) >= 0.005)
        .collect();
    writeln!(out, "Thread states (thread-seconds per second):")?;
    let mut head = format!("  {:<16} {:>7}", "GROUP", "THREADS");
    for st in &shown {
        head.push_str(&format!(" {:>10}", st.label()));
    }
    writeln!(out, "{head}")?;
    for g in &b.groups {
        // A thread names itself: its name is the target's text, escapes shown.
        let name = crate::units::one_line(&g.name);
        let mut line = format!("  {name:<16} {:>7}", g.threads);
        for st in &shown {
            line.push_str(&format!(" {:>10.2}", g.states.get(*st)));
        }
        writeln!(out, "{line}")?;
    }
    Ok(())
}

/// Prints the summary block, as it reads line by line: status, memory, CPU, threads,
/// FDs, I/O, the tree's thread states and its largest processes.
pub fn write_summary(
    out: &mut dyn Write,
    s: &MonitorSummary,
    run_id: Option<i64>,
) -> io::Result<()> {
    let rule = "=".repeat(60);
    let what = s.command.join(" ");
    let mut title = format!("Resource usage: {what}");
    if let Some(id) = run_id {
        title.push_str(&format!("  (run #{id}"));
        if let Some(l) = &s.label {
            title.push_str(&format!(", label {l}"));
        }
        title.push(')');
    }
    writeln!(out, "{rule}\n{title}\n{rule}")?;
    writeln!(out, "{:<20}{}, {}", "Status:", s.status, s.exit.describe())?;
    writeln!(
        out,
        "{:<20}{}  ({} samples every {})",
        "Duration:",
        secs(s.duration_seconds),
        s.samples,
        secs(s.interval_seconds)
    )?;
    write_memory(out, s)?;
    let cpu = &s.cpu;
    writeln!(
        out,
        "{:<20}{} of one core ({})",
        "Average CPU:",
        crate::units::share(cpu.avg_cores),
        crate::units::format_value(cpu.avg_cores, "cores")
    )?;
    writeln!(
        out,
        "{:<20}{} of one core (busiest {} window)",
        "Max CPU:",
        crate::units::share(cpu.max_cores),
        secs(cpu.max_window_seconds)
    )?;
    writeln!(
        out,
        "{:<20}{:.3} s  (from {})",
        "CPU time:", cpu.total_seconds, cpu.source
    )?;
    writeln!(
        out,
        "{:<20}{} seen, {} at once at most",
        "Processes:", s.processes_seen, s.max_processes
    )?;
    writeln!(out, "{:<20}{}", "Threads (max):", s.max_threads)?;
    writeln!(out, "{:<20}{}", "Open FDs (max):", s.max_fds)?;
    writeln!(
        out,
        "{:<20}read {}, written {}",
        "Storage I/O:",
        Bytes(s.read_bytes),
        Bytes(s.write_bytes)
    )?;
    writeln!(out, "{:<20}{}", "Context switches:", s.ctx_switches)?;
    if s.leftover_processes_stopped > 0 {
        writeln!(
            out,
            "{:<20}{} the command left running, stopped",
            "Leftovers:",
            crate::units::count(s.leftover_processes_stopped, "process", "processes")
        )?;
    }
    let o = &s.overhead;
    writeln!(
        out,
        "{:<20}{} of one core ({:.3} s CPU, {} per tick)",
        "Monitor overhead:",
        crate::units::share(o.percent_of_core / 100.0),
        o.cpu_seconds,
        crate::units::latency_ms(o.per_tick_us / 1000.0)
    )?;
    if let Some(r) = &s.process_events {
        writeln!(out, "{:<20}{r}", "Process events:")?;
    }
    if let Some(b) = s.threads.as_ref().filter(|b| !b.groups.is_empty()) {
        write_thread_states(out, b)?;
    }
    write_processes(out, s)?;
    writeln!(out, "{rule}")
}

/// Seconds as the summary shows them (none below zero).
fn secs(x: f64) -> String {
    format_duration(std::time::Duration::from_secs_f64(x.max(0.0)))
}

/// The summary's memory lines: the headline peak and where it is from, then the
/// sampled tree sums (or their readings, from too few samples) and the cgroup's peak.
fn write_memory(out: &mut dyn Write, s: &MonitorSummary) -> io::Result<()> {
    let p = &s.peak_rss;
    let whose = match (p.pid, &p.process) {
        (Some(pid), Some(name)) => format!(" of pid {pid} ({name})"),
        _ => String::new(),
    };
    // One name per figure in every run: the headline is named by what it is.
    let headline = match p.source {
        PeakSource::VmHwm | PeakSource::RuMaxrss => "Peak RSS:",
        PeakSource::SampledTreePss => "Peak tree PSS:",
        PeakSource::SampledTreeSum => "Peak tree RSS:",
        PeakSource::CgroupV2MemoryPeak | PeakSource::CgroupV1MaxUsage => "Peak tree memory:",
    };
    writeln!(
        out,
        "{:<20}{}  ({} KiB) {}, from {}{}",
        headline,
        Bytes(p.bytes),
        p.bytes / 1024,
        if p.source.exact() { "exact" } else { "sampled" },
        p.source.describe(),
        whose
    )?;
    // A sampled sum from too few samples is a reading, not a peak: a build under a
    // second had one PSS sum, taken before its compilers started (531 KiB beside an
    // exact 61 MiB). It says so and how many it had.
    let few = |n: u64, what: &str| {
        format!(
            "from {} over the run ({what}): too few to know the peak — the exact figures are above and below",
            crate::units::count(n, "sample", "samples")
        )
    };
    if let Some(t) = s
        .peak_tree_pss_sampled
        .as_ref()
        .filter(|_| p.source != PeakSource::SampledTreePss)
    {
        let n = s.tree_pss_samples;
        if n > 0 && n < crate::measure::MIN_PEAK_SAMPLES {
            writeln!(
                out,
                "{:<20}{}  {}",
                "Tree PSS reading:",
                Bytes(t.bytes),
                few(n, "PSS is summed at most once a second")
            )?;
        } else {
            writeln!(
                out,
                "{:<20}{}  sampled sum of PSS over the tree (shared pages once), at {}",
                "Peak tree PSS:",
                Bytes(t.bytes),
                secs(t.at.unwrap_or(0.0))
            )?;
        }
    }
    let t = &s.peak_tree_rss_sampled;
    if p.source == PeakSource::SampledTreeSum {
        // The headline above.
    } else if s.samples < crate::measure::MIN_PEAK_SAMPLES {
        writeln!(
            out,
            "{:<20}{}  {}",
            "Tree RSS reading:",
            Bytes(t.bytes),
            few(s.samples, "one a tick")
        )?;
    } else {
        writeln!(
            out,
            "{:<20}{}  sampled sum of RSS over the tree (shared pages once per process), at {}",
            "Peak tree RSS:",
            Bytes(t.bytes),
            secs(t.at.unwrap_or(0.0))
        )?;
    }
    if let Some(c) = &s.cgroup_memory_peak {
        writeln!(
            out,
            "{:<20}{}  exact, from {} (counts page cache too)",
            "Peak tree memory:",
            Bytes(c.bytes),
            c.source.describe()
        )?;
    }
    Ok(())
}

/// The summary's largest processes (five at most), each with its own figures.
fn write_processes(out: &mut dyn Write, s: &MonitorSummary) -> io::Result<()> {
    if s.processes.is_empty() {
        return Ok(());
    }
    writeln!(out, "Largest processes:")?;
    // Each process's own figures; what the children it waited for used is apart (a
    // `sh -c` or `/usr/bin/time` is not charged with its compiler's memory and CPU).
    writeln!(
        out,
        "  {:>8}  {:>11}  {:>8}  {:>22}  COMMAND",
        "PID", "PEAK RSS", "CPU s", "REAPED CHILDREN"
    )?;
    for p in s.processes.iter().take(5) {
        let cmd = if p.cmdline.is_empty() {
            &p.name
        } else {
            &p.cmdline
        };
        let cmd: String = crate::units::one_line(cmd).chars().take(60).collect();
        let children = if p.children_cpu_seconds > 0.0 || p.children_peak_rss > 0 {
            let peak = if p.children_peak_rss > 0 {
                format!(", peak {}", Bytes(p.children_peak_rss))
            } else {
                String::new()
            };
            format!("{:.2} s{peak}", p.children_cpu_seconds)
        } else {
            "-".into()
        };
        writeln!(
            out,
            "  {:>8}  {:>11}  {:>8.2}  {:>22}  {}",
            p.pid,
            Bytes(p.peak_rss_exact).to_string(),
            p.cpu_seconds,
            children,
            cmd
        )?;
    }
    if s.processes.len() > 5 {
        writeln!(out, "  … and {} more", s.processes.len() - 5)?;
    }
    Ok(())
}

/// The JSON document of a run: summary and every sample.
pub fn to_json(
    summary: &MonitorSummary,
    samples: &[Sample],
    host: &Host,
    run_id: Option<i64>,
) -> String {
    #[derive(Serialize)]
    struct Body<'a> {
        host: &'a Host,
        summary: &'a MonitorSummary,
        samples: &'a [Sample],
    }
    super::document(
        JSON_SCHEMA,
        run_id,
        Body {
            host,
            summary,
            samples,
        },
    )
}

/// The columns of a samples CSV: a sample, then (`monitor --csv`, `with_threads`) the
/// thread-seconds the tree's threads spent in each state so far (`thread_s_on_cpu`, …;
/// cumulative, like /proc's counters: the difference of two rows over their time apart
/// is the rate).
pub fn csv_header(with_threads: bool) -> String {
    let mut h = String::from(
        "t_seconds,rss_bytes,cpu_cores,threads,fds,read_bytes,write_bytes,ctx_switches,processes,top",
    );
    for st in crate::measure::threads::State::ALL
        .iter()
        .filter(|_| with_threads)
    {
        h.push_str(",thread_s_");
        h.push_str(st.key());
    }
    h
}

/// One CSV row for a sample and, when given, the thread states so far; `top` lists
/// `pid:name:rss_bytes` separated by spaces.
pub fn csv_row(s: &Sample, states: Option<&crate::measure::threads::States>) -> String {
    let top: Vec<String> = s
        .top
        .iter()
        .map(|p| format!("{}:{}:{}", p.pid, p.name, p.rss_bytes))
        .collect();
    let mut threads = String::new();
    for st in crate::measure::threads::State::ALL {
        if let Some(states) = states {
            threads.push_str(&format!(",{:.3}", states.get(st)));
        }
    }
    let row = format!(
        "{:.4},{},{:.4},{},{},{},{},{},{},{}",
        s.t,
        s.rss_bytes,
        s.cpu_cores,
        s.threads,
        s.fds,
        s.read_bytes,
        s.write_bytes,
        s.ctx_switches,
        s.processes,
        super::csv_text::text(&top.join(" "))
    );
    row + &threads
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A target names its threads (and writes its command line): an escape sequence or a
    /// line break there reaches the summary as text, not as a terminal control.
    #[test]
    fn hostile_thread_names_print_as_text() {
        use crate::measure::threads::{Breakdown, GroupRates, State, States};
        let mut states = States::default();
        states.add(State::OnCpu, 1.0);
        let b = Breakdown {
            seconds: 1.0,
            groups: vec![GroupRates {
                name: "\x1b]0;owned\x07\x1b[2J\nfake".into(),
                threads: 1,
                states,
                all_busy: 1.0,
            }],
        };
        let mut out = Vec::new();
        write_thread_states(&mut out, &b).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(!text.contains('\x1b') && !text.contains('\x07'), "{text:?}");
        assert_eq!(text.lines().count(), 3, "{text}");
        assert!(text.contains("\\u{1b}[2J\\u{a}fake"), "{text}");
    }
}
