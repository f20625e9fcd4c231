//! The measurements that flow down the pipeline, shared by the monitor that makes them,
//! the store that keeps them and the reports that print them. Every field says its unit.

pub mod threads;

use serde::{Deserialize, Serialize};

/// One tick of the process-tree monitor. Cumulative counters (I/O, context switches)
/// include the processes of the tree that have already exited.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Seconds since the monitor started.
    pub t: f64,
    /// Sum of the resident set sizes of the live processes of the tree, bytes.
    pub rss_bytes: u64,
    /// CPU used by the tree since the previous tick, in cores (1.0 = one core busy).
    pub cpu_cores: f64,
    /// Threads of all live processes.
    pub threads: u64,
    /// Open file descriptors of all live processes.
    pub fds: u64,
    /// Bytes read from storage by the tree so far.
    pub read_bytes: u64,
    /// Bytes written to storage by the tree so far.
    pub write_bytes: u64,
    /// Voluntary and involuntary context switches of the tree so far.
    pub ctx_switches: u64,
    /// Live processes in the tree.
    pub processes: u32,
    /// The largest processes by RSS at this tick.
    pub top: Vec<TopProcess>,
}

/// A process as shown in a sample's top list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TopProcess {
    pub pid: u32,
    pub name: String,
    /// Resident set size, bytes.
    pub rss_bytes: u64,
}

/// Everything known about one process of the tree over the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcessRecord {
    pub pid: u32,
    pub ppid: u32,
    pub name: String,
    pub cmdline: String,
    /// Seconds since the monitor started when it was first and last seen.
    pub first_seen: f64,
    pub last_seen: f64,
    /// Highest RSS seen in a sample, bytes.
    pub peak_rss_sampled: u64,
    /// The kernel's high-water mark of the process itself (VmHWM; wait4's ru_maxrss
    /// when strainline reaped it before any sample read VmHWM), bytes.
    pub peak_rss_exact: u64,
    /// CPU time the process itself used, seconds (user + system).
    pub cpu_seconds: f64,
    /// CPU time of the children it waited for (the kernel's `cutime + cstime`, or
    /// wait4's totals less its own), seconds: not its own, shown apart.
    #[serde(default)]
    pub children_cpu_seconds: f64,
    /// The largest peak RSS among the children it waited for (wait4's ru_maxrss when it
    /// exceeds the process's own high-water mark; 0 when unknown or smaller), bytes.
    #[serde(default)]
    pub children_peak_rss: u64,
    /// How it ended, when strainline reaped it itself (`exit 0`, `signal 9`).
    pub exit: Option<String>,
}

/// Where a peak memory figure came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PeakSource {
    /// `VmHWM` in /proc/PID/status of a live process.
    VmHwm,
    /// `ru_maxrss` returned by wait4 when strainline reaped the process.
    RuMaxrss,
    /// The largest sum of RSS over the tree seen in a sample.
    SampledTreeSum,
    /// The largest sum of PSS (`smaps_rollup`) over the tree: shared pages once.
    SampledTreePss,
    /// cgroup v2 `memory.peak` (tree-wide; counts page cache and kernel memory too).
    CgroupV2MemoryPeak,
    /// cgroup v1 `memory.max_usage_in_bytes` (tree-wide; counts page cache too).
    CgroupV1MaxUsage,
}

impl PeakSource {
    /// Whether the figure is a kernel high-water mark (exact), not a sample.
    pub fn exact(self) -> bool {
        !matches!(
            self,
            PeakSource::SampledTreeSum | PeakSource::SampledTreePss
        )
    }

    pub fn describe(self) -> &'static str {
        match self {
            PeakSource::VmHwm => "VmHWM",
            PeakSource::RuMaxrss => "wait4's ru_maxrss",
            PeakSource::SampledTreeSum => "sampled tree sum of RSS",
            PeakSource::SampledTreePss => "sampled tree sum of smaps_rollup PSS",
            PeakSource::CgroupV2MemoryPeak => "cgroup v2 memory.peak",
            PeakSource::CgroupV1MaxUsage => "cgroup v1 memory.max_usage_in_bytes",
        }
    }
}

/// A peak memory figure with its provenance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Peak {
    pub bytes: u64,
    pub source: PeakSource,
    /// The process it belongs to, for per-process figures.
    pub pid: Option<u32>,
    pub process: Option<String>,
    /// Seconds since start, for sampled figures.
    pub at: Option<f64>,
}

/// How the command (or the attached process) ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExitInfo {
    /// Exit code, when it exited normally.
    pub code: Option<i32>,
    /// Signal number, when a signal ended it.
    pub signal: Option<i32>,
}

impl ExitInfo {
    /// The status a shell would report: the code, or 128 + the signal number.
    pub fn shell_status(&self) -> i32 {
        match (self.code, self.signal) {
            (Some(c), _) => c,
            (None, Some(s)) => 128 + s,
            (None, None) => 0,
        }
    }

    pub fn describe(&self) -> String {
        match (self.code, self.signal) {
            (Some(c), _) => format!("exit {c}"),
            (None, Some(s)) => format!("signal {s} ({})", signal_name(s)),
            (None, None) => "still running (attached)".to_string(),
        }
    }
}

pub fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        _ => "signal",
    }
}

/// CPU use of the tree over the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuSummary {
    /// CPU seconds (user + system) used by the whole tree.
    pub total_seconds: f64,
    /// Average over the run, in cores (1.0 = one core busy all the time).
    pub avg_cores: f64,
    /// Highest average over any window of `max_window_seconds`, in cores.
    pub max_cores: f64,
    pub max_window_seconds: f64,
    /// Where the CPU times came from.
    pub source: String,
}

/// What the monitor itself cost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Overhead {
    /// CPU seconds used by strainline while monitoring.
    pub cpu_seconds: f64,
    /// The same as a percentage of one core over the run.
    pub percent_of_core: f64,
    /// Average CPU time per tick, microseconds.
    pub per_tick_us: f64,
}

/// Fewer samples than this over a run and a sampled peak is only a reading, not a
/// peak: printed with its count and "too few to know the peak", never as a headline.
pub const MIN_PEAK_SAMPLES: u64 = 5;

/// The result of one `strainline monitor` run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MonitorSummary {
    pub label: Option<String>,
    /// The command run, or `pid N` when attached.
    pub command: Vec<String>,
    pub root_pid: u32,
    /// `completed` or `interrupted`.
    pub status: String,
    /// Wall-clock time of the run, seconds.
    pub duration_seconds: f64,
    pub interval_seconds: f64,
    pub samples: u64,
    pub exit: ExitInfo,
    /// The headline peak: the highest of the per-process kernel high-water marks (exact)
    /// and the sampled tree sum (of PSS where the kernel gives it, else of RSS), with the
    /// source that gave it.
    pub peak_rss: Peak,
    /// The highest sum of RSS across the tree in any sample (shared pages counted once
    /// per process that maps them).
    pub peak_tree_rss_sampled: Peak,
    /// The highest sum of PSS across the tree (once a second): shared pages once.
    #[serde(default)]
    pub peak_tree_pss_sampled: Option<Peak>,
    /// How many tree PSS sums that peak is the highest of: under
    /// [`MIN_PEAK_SAMPLES`] it is printed as too few to know the peak.
    #[serde(default)]
    pub tree_pss_samples: u64,
    /// The kernel's tree-wide memory peak from a cgroup, when one could be made.
    pub cgroup_memory_peak: Option<Peak>,
    pub cpu: CpuSummary,
    /// Distinct processes seen in the tree.
    pub processes_seen: u64,
    pub max_processes: u64,
    pub max_threads: u64,
    pub max_fds: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub ctx_switches: u64,
    /// Processes still alive when the command ended, which strainline stopped.
    pub leftover_processes_stopped: u64,
    pub overhead: Overhead,
    /// Processes of the tree, largest exact peak first.
    pub processes: Vec<ProcessRecord>,
    /// Where the tree's threads spent the run, its busiest groups (`strainline monitor`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<threads::Breakdown>,
    /// Which reader found the tree's processes: the kernel's process events (the
    /// netlink process connector) or a listing (`cgroup.procs`, `/proc`), and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process_events: Option<String>,
}
