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
}
