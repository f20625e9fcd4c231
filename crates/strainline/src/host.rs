//! Where and on what a run happened: the host's fingerprint (so that comparisons across
//! different machines can be refused) and the git commit of the working directory.

use serde::{Deserialize, Serialize};
use std::path::Path;
use std::process::{Command, Stdio};

/// CPU time the hypervisor took from this machine since boot (`steal` in `/proc/stat`),
/// seconds: on a VM, time the generator and the target wanted a CPU and had none.
pub fn stolen_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let steal: u64 = stat
        .lines()
        .next()
        .and_then(|l| l.split_ascii_whitespace().nth(8)?.parse().ok())
        .unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    steal as f64 / if hz > 0 { hz as f64 } else { 100.0 }
}

/// CPU time the machine's CPUs spent idle since boot (`idle` and `iowait` in
/// `/proc/stat`), seconds: what a step left free for a target that wanted more.
pub fn idle_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let idle: u64 = stat
        .lines()
        .next()
        .map(|l| {
            l.split_ascii_whitespace()
                .skip(4)
                .take(2)
                .filter_map(|v| v.parse::<u64>().ok())
                .sum()
        })
        .unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    idle as f64 / if hz > 0 { hz as f64 } else { 100.0 }
}

/// The machine's CPU time since boot from `/proc/stat`'s first line, seconds: (busy —
/// user, nice, system, irq, softirq — and steal).
fn machine_cpu() -> (f64, f64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let f: Vec<u64> = stat
        .lines()
        .next()
        .unwrap_or("")
        .split_ascii_whitespace()
        .skip(1)
        .map(|v| v.parse().unwrap_or(0))
        .collect();
    let at = |i: usize| f.get(i).copied().unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let hz = if hz > 0 { hz as f64 } else { 100.0 };
    let busy = at(0) + at(1) + at(2) + at(5) + at(6);
    (busy as f64 / hz, at(7) as f64 / hz)
}

/// CPU seconds of this process and of every child it reaped (a started target, the
/// processes it left to strainline as subreaper).
fn own_cpu() -> f64 {
    let of = |who| {
        // SAFETY: getrusage writes into the struct it is given.
        let mut u: libc::rusage = unsafe { std::mem::zeroed() };
        if unsafe { libc::getrusage(who, &mut u) } != 0 {
            return 0.0;
        }
        let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 / 1e6;
        t(u.ru_utime) + t(u.ru_stime)
    };
    of(libc::RUSAGE_SELF) + of(libc::RUSAGE_CHILDREN)
}

/// What the machine did during a run besides the run itself: the work of other
/// processes shapes every figure (a busy neighbour slows the target, the generator,
/// both), so a comparison of two runs must know it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Conditions {
    /// The run's wall time, seconds.
    pub seconds: f64,
    /// Cores kept busy by processes other than strainline and what it started and
    /// reaped (an attached target counts here: it is the same on both sides).
    pub busy_elsewhere_cores: f64,
    /// Share of the machine's CPU time the hypervisor took.
    pub steal: f64,
    /// The standard deviation of that share from one second to the next, and the
    /// seconds it was read in: what steal varies by on its own, so that a comparison
    /// tells a change of conditions from the hypervisor's usual swings (0 and 0 in runs
    /// stored before it was measured).
    #[serde(default)]
    pub steal_sd: f64,
    #[serde(default)]
    pub steal_seconds: u32,
    /// The 1-minute load average at the run's end.
    pub load_avg: f64,
}

/// Reads the machine at a run's start; [`ConditionsProbe::finish`] at its end. Between
/// the two, a thread reads steal once a second (see [`Conditions::steal_sd`]).
#[derive(Debug)]
pub struct ConditionsProbe {
    started: std::time::Instant,
    busy: f64,
    steal: f64,
    own: f64,
    seconds: std::sync::Arc<std::sync::Mutex<Spread>>,
    _stop: std::sync::mpsc::Sender<()>,
}

/// Welford's running mean and sum of squared deviations.
#[derive(Debug, Default, Clone, Copy)]
struct Spread {
    n: u32,
    mean: f64,
    m2: f64,
}

impl Spread {
    fn add(&mut self, x: f64) {
        self.n += 1;
        let d = x - self.mean;
        self.mean += d / self.n as f64;
        self.m2 += d * (x - self.mean);
    }

    fn sd(&self) -> f64 {
        if self.n < 2 {
            0.0
        } else {
            (self.m2 / (self.n - 1) as f64).sqrt()
        }
    }
}

impl ConditionsProbe {
    pub fn start() -> ConditionsProbe {
        let (busy, steal) = machine_cpu();
        let seconds = std::sync::Arc::new(std::sync::Mutex::new(Spread::default()));
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let shared = seconds.clone();
        // The thread ends when the probe (its sender) is dropped or finished.
        let _ = std::thread::Builder::new()
            .name("conditions".into())
            .spawn(move || {
                let mut last = (std::time::Instant::now(), steal);
                while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                    stopped.recv_timeout(std::time::Duration::from_secs(1))
                {
                    let now = (std::time::Instant::now(), machine_cpu().1);
                    let wall = now.0.duration_since(last.0).as_secs_f64() * cores() as f64;
                    if wall > 0.0 {
                        let share = ((now.1 - last.1) / wall).clamp(0.0, 1.0);
                        shared.lock().unwrap_or_else(|e| e.into_inner()).add(share);
                    }
                    last = now;
                }
            });
        ConditionsProbe {
            started: std::time::Instant::now(),
            busy,
            steal,
            own: own_cpu(),
            seconds,
            _stop: stop,
        }
    }

    pub fn finish(&self) -> Conditions {
        let seconds = self.started.elapsed().as_secs_f64().max(1e-3);
        let (busy, steal) = machine_cpu();
        let others = (busy - self.busy) - (own_cpu() - self.own);
        let load_avg = std::fs::read_to_string("/proc/loadavg")
            .ok()
            .and_then(|t| t.split_whitespace().next()?.parse().ok())
            .unwrap_or(0.0);
        let spread = *self.seconds.lock().unwrap_or_else(|e| e.into_inner());
        Conditions {
            seconds,
            busy_elsewhere_cores: (others / seconds).max(0.0),
            steal: ((steal - self.steal) / (seconds * cores() as f64)).clamp(0.0, 1.0),
            steal_sd: spread.sd(),
            steal_seconds: spread.n,
            load_avg,
        }
    }
}

/// Logical CPUs online on the machine (not only those this process may use): the
/// denominator of machine-wide shares such as steal, and of a target's CPU saturation.
pub fn cores() -> usize {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    if n > 0 {
        n as usize
    } else {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    }
}

/// The machine a run was measured on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Host {
    pub hostname: String,
    pub cpu_model: String,
    /// Logical CPUs online.
    pub cores: u32,
    /// Physical memory, bytes.
    pub memory_bytes: u64,
    pub kernel: String,
    pub os: String,
}

/// This machine's host name (empty when it cannot be read).
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default()
}

impl Host {
    /// Reads the running machine.
    pub fn current() -> Host {
        let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
        let cpuinfo = read("/proc/cpuinfo");
        let cpu_model = cpuinfo
            .lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
            .unwrap_or_else(|| "unknown".into());
        let memory_bytes = read("/proc/meminfo")
            .lines()
            .find(|l| l.starts_with("MemTotal:"))
            .and_then(|l| l.split_ascii_whitespace().nth(1)?.parse::<u64>().ok())
            .unwrap_or(0)
            * 1024;
        let os = read("/etc/os-release")
            .lines()
            .find_map(|l| l.strip_prefix("PRETTY_NAME="))
            .map(|v| v.trim_matches('"').to_string())
            .unwrap_or_else(|| "Linux".into());
        Host {
            hostname: hostname(),
            cpu_model,
            cores: cores() as u32,
            memory_bytes,
            kernel: read("/proc/sys/kernel/osrelease").trim().to_string(),
            os,
        }
    }

    /// What makes two measurements comparable: the CPU model, the number of logical
    /// CPUs and the memory size in whole GiB. The host name and kernel are recorded
    /// but left out, so that identical CI machines compare with each other.
    pub fn fingerprint(&self) -> String {
        let gib = (self.memory_bytes as f64 / (1u64 << 30) as f64).round() as u64;
        format!("{}|{}c|{}GiB", self.cpu_model, self.cores, gib)
    }
}

/// The git state of a directory, if it is inside a work tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GitState {
    pub commit: String,
    /// Uncommitted changes to tracked files.
    pub dirty: bool,
}

pub fn git_state(dir: &Path) -> Option<GitState> {
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .current_dir(dir)
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let commit = git(&["rev-parse", "HEAD"])?;
    let dirty =
        git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    Some(GitState { commit, dirty })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_machine() {
        let h = Host::current();
        assert!(h.cores >= 1);
        assert!(h.memory_bytes > 0);
        assert!(!h.kernel.is_empty());
        assert!(h.fingerprint().contains(&format!("{}c", h.cores)));
    }

    #[test]
    fn the_spread_of_steal_is_the_sample_standard_deviation() {
        // 2, 4, 4, 4, 5, 5, 7, 9: mean 5, sample variance 32/7.
        let mut s = Spread::default();
        for x in [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0] {
            s.add(x);
        }
        assert_eq!(s.n, 8);
        assert!((s.mean - 5.0).abs() < 1e-12);
        assert!((s.sd() - (32.0f64 / 7.0).sqrt()).abs() < 1e-12);
        let mut one = Spread::default();
        one.add(0.3);
        assert_eq!(one.sd(), 0.0);
    }

    #[test]
    fn a_probe_reads_steal_each_second_and_stops_with_the_run() {
        let probe = ConditionsProbe::start();
        std::thread::sleep(std::time::Duration::from_millis(2300));
        let c = probe.finish();
        assert_eq!(c.steal_seconds, 2, "{c:?}");
        assert!((2.2..3.0).contains(&c.seconds), "{c:?}");
        assert!((0.0..=1.0).contains(&c.steal), "{c:?}");
    }
}
