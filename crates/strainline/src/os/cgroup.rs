//! A cgroup of its own for the command under test, where the machine lets strainline
//! make one. It gives three things no sampling can: every process of the tree in one
//! read (`cgroup.procs`, even those that called `setsid` and were re-parented), CPU time
//! in microseconds for the whole tree (`cpu.stat`), and the kernel's exact memory
//! high-water mark of the tree (`memory.peak` on cgroup v2, `memory.max_usage_in_bytes`
//! on v1), which also counts page cache. Without one, the monitor falls back to `/proc`.

use std::fs::{self, File};
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};

/// Which kernel file gave the tree memory peak.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeakFile {
    V2MemoryPeak,
    V1MaxUsage,
}

/// The cgroup directories made for one monitored command. Removed on drop.
pub struct Cgroup {
    /// The unified (v2) group: membership and CPU; memory too when its controller is on.
    v2: Option<PathBuf>,
    /// A v1 memory group on hybrid machines whose v2 tree has no memory controller.
    v1_memory: Option<PathBuf>,
    /// `cgroup.procs` files, opened before the fork so that the child only has to write.
    join_files: Vec<File>,
    procs: Option<File>,
    cpu_stat: Option<File>,
    peak: Option<(File, PeakFile)>,
    /// Memory charged to the group now (`memory.current` / `memory.usage_in_bytes`).
    usage: Option<File>,
}

fn mount_points() -> Vec<(String, PathBuf, String)> {
    // (fstype, mount point, super options) from /proc/self/mountinfo.
    let text = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let (left, right) = l.split_once(" - ")?;
            let mount = PathBuf::from(left.split(' ').nth(4)?);
            let mut r = right.split(' ');
            let fstype = r.next()?.to_string();
            let opts = r.nth(1).unwrap_or("").to_string();
            Some((fstype, mount, opts))
        })
        .collect()
}

/// This process's own path in a hierarchy, from /proc/self/cgroup (`0::/x` or `4:memory:/x`).
fn own_path(controller: Option<&str>) -> Option<String> {
    let text = fs::read_to_string("/proc/self/cgroup").ok()?;
    text.lines().find_map(|l| {
        let mut p = l.splitn(3, ':');
        let (id, ctrls, path) = (p.next()?, p.next()?, p.next()?);
        let hit = match controller {
            None => id == "0" && ctrls.is_empty(),
            Some(c) => ctrls.split(',').any(|x| x == c),
        };
        hit.then(|| path.to_string())
    })
}

/// The strainline whose group this is: `strainline-PID` or `strainline-PID-N`.
fn owner(name: &str) -> Option<u32> {
    let rest = name.strip_prefix("strainline-")?;
    rest.split('-').next()?.parse().ok()
}

/// Empties and removes `dir`: SIGKILL to whatever is still in it, then rmdir (a group
/// can only be removed once its processes are gone; exited ones leave at once).
pub(super) fn remove(dir: &Path) {
    for _ in 0..50 {
        if fs::remove_dir(dir).is_ok() || !dir.exists() {
            return;
        }
        if fs::write(dir.join("cgroup.kill"), "1").is_err() {
            let procs = fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
            for pid in procs.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
                // SAFETY: kill has no memory effects.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// Groups left by a strainline that no longer runs (one killed with SIGKILL): what is
/// still in them is stopped, and they are removed.
fn remove_stale(parent: &Path) {
    let Ok(entries) = fs::read_dir(parent) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name.to_str().and_then(owner) else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            remove(&e.path());
        }
    }
}

fn make_child(parent: &Path, name: &str) -> Option<PathBuf> {
    remove_stale(parent);
    let dir = parent.join(name);
    match fs::create_dir(&dir) {
        Ok(()) => Some(dir),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Some(dir),
        Err(_) => None,
    }
}

impl Cgroup {
    /// Makes the groups if this machine allows it; `None` otherwise (not an error: the
    /// monitor then finds descendants through `/proc`).
    pub fn create(name: &str) -> Option<Cgroup> {
        let mounts = mount_points();
        let v2 = mounts
            .iter()
            .find(|(t, _, _)| t == "cgroup2")
            .and_then(|(_, m, _)| {
                let own = own_path(None)?;
                make_child(&m.join(own.trim_start_matches('/')), name)
            });
        let v2_has_memory = v2.as_ref().is_some_and(|d| d.join("memory.peak").exists());
        let v1_memory = if v2_has_memory {
            None
        } else {
            mounts
                .iter()
                .find(|(t, _, o)| t == "cgroup" && o.split(',').any(|x| x == "memory"))
                .and_then(|(_, m, _)| {
                    let own = own_path(Some("memory"))?;
                    make_child(&m.join(own.trim_start_matches('/')), name)
                })
        };
        if v2.is_none() && v1_memory.is_none() {
            return None;
        }
        for d in v2.iter().chain(v1_memory.iter()) {
            super::guardian::tell(&format!("+cg {}", d.display()));
        }
        let open_rw = |p: PathBuf| fs::OpenOptions::new().write(true).open(p).ok();
        let join_files: Vec<File> = v2
            .iter()
            .chain(v1_memory.iter())
            .filter_map(|d| open_rw(d.join("cgroup.procs")))
            .collect();
        let peak = if v2_has_memory {
            v2.as_ref()
                .and_then(|d| File::open(d.join("memory.peak")).ok())
                .map(|f| (f, PeakFile::V2MemoryPeak))
        } else {
            v1_memory
                .as_ref()
                .and_then(|d| File::open(d.join("memory.max_usage_in_bytes")).ok())
                .map(|f| (f, PeakFile::V1MaxUsage))
        };
        let usage = if v2_has_memory {
            v2.as_ref()
                .and_then(|d| File::open(d.join("memory.current")).ok())
        } else {
            v1_memory
                .as_ref()
                .and_then(|d| File::open(d.join("memory.usage_in_bytes")).ok())
        };
        Some(Cgroup {
            usage,
            procs: v2
                .as_ref()
                .and_then(|d| File::open(d.join("cgroup.procs")).ok()),
            cpu_stat: v2
                .as_ref()
                .and_then(|d| File::open(d.join("cpu.stat")).ok()),
            v2,
            v1_memory,
            join_files,
            peak,
        })
    }

    /// File descriptors the child writes "0" to, between fork and exec, to join.
    pub fn join_fds(&self) -> Vec<RawFd> {
        self.join_files.iter().map(|f| f.as_raw_fd()).collect()
    }

    /// Whether membership (and so process discovery) comes from this group.
    pub fn lists_processes(&self) -> bool {
        self.procs.is_some()
    }

    /// Every process in the group.
    pub fn pids(&self) -> Option<Vec<u32>> {
        super::kfile::read_with(self.procs.as_ref()?, |text| {
            Some(text.lines().filter_map(|l| l.trim().parse().ok()).collect())
        })
    }

    /// CPU time of the whole group so far, microseconds.
    pub fn cpu_usage_usec(&self) -> Option<u64> {
        super::kfile::read_with(self.cpu_stat.as_ref()?, |text| {
            text.lines()
                .find_map(|l| l.strip_prefix("usage_usec "))
                .and_then(|v| v.trim().parse().ok())
        })
    }

    /// The kernel's memory high-water mark of the group, bytes, and which file said so.
    pub fn memory_peak(&self) -> Option<(u64, PeakFile)> {
        let (file, kind) = self.peak.as_ref()?;
        let v = super::kfile::read_with(file, |t| t.trim().parse().ok())?;
        Some((v, *kind))
    }

    /// Memory charged to the group right now, bytes: when it has not moved, no process
    /// of the tree has allocated or freed memory.
    pub fn memory_usage(&self) -> Option<u64> {
        super::kfile::read_with(self.usage.as_ref()?, |t| t.trim().parse().ok())
    }

    /// Sends SIGKILL to every process in the group (`cgroup.kill`, v2), or returns false.
    pub fn kill_all(&self) -> bool {
        self.v2
            .as_ref()
            .is_some_and(|d| fs::write(d.join("cgroup.kill"), "1").is_ok())
    }
}

impl Drop for Cgroup {
    /// The unit is over: whatever is still in it is stopped, and the groups removed.
    fn drop(&mut self) {
        for dir in self.v2.iter().chain(self.v1_memory.iter()) {
            remove(dir);
            super::guardian::tell(&format!("-cg {}", dir.display()));
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_group_names_its_strainline() {
        assert_eq!(super::owner("strainline-4242"), Some(4242));
        assert_eq!(super::owner("strainline-4242-3"), Some(4242));
        assert_eq!(super::owner("strainline-x"), None);
        assert_eq!(super::owner("system.slice"), None);
    }
}
