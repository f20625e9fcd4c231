//! A containment unit: everything strainline starts — a target, its build, a harness,
//! crash work and its verify step, a command workload's units — starts in one, and is
//! stopped with all its descendants. A unit is a cgroup of its own where the machine
//! allows one (a `setsid` or daemonised grandchild stays in it and `cgroup.kill` takes
//! it), and always a process group per started command with strainline as child
//! subreaper (the fallback: the group, and the descendants seen from the root). Each
//! command dies with strainline (`PR_SET_PDEATHSIG`) and the guardian stops the rest if
//! strainline is killed outright. Nothing of strainline's own configuration
//! (`STRAINLINE_*`, which may hold a database password) reaches the command's
//! environment.

use std::ffi::OsStr;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::cgroup::Cgroup;
use super::{guardian, process, signals};

/// A set of processes stopped as one.
pub struct Unit {
    group: Option<Arc<Cgroup>>,
    /// The pid of each command started in the unit: each leads a process group.
    roots: Mutex<Vec<u32>>,
    /// Descendants seen when the unit was killed, which strainline (their subreaper)
    /// must reap.
    orphans: Mutex<Vec<u32>>,
}

/// How a command run to its end in a unit ended.
#[derive(Debug)]
pub enum Ended {
    Exited(ExitStatus),
    /// Stopped, with its whole unit, because strainline was interrupted.
    Interrupted,
}

/// A number that makes each cgroup name unique within this process.
fn counter() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

impl Unit {
    /// A unit; with a cgroup when `contain` and the machine allows one.
    pub fn new(contain: bool) -> Unit {
        process::become_subreaper();
        let name = format!("strainline-{}-{}", std::process::id(), counter());
        Unit {
            group: contain
                .then(|| Cgroup::create(&name))
                .flatten()
                .map(Arc::new),
            roots: Mutex::new(Vec::new()),
            orphans: Mutex::new(Vec::new()),
        }
    }

    /// The unit's cgroup, which the monitor reads the tree from.
    pub fn cgroup(&self) -> Option<Arc<Cgroup>> {
        self.group.clone()
    }

    /// A command that will start inside the unit, in a process group of its own (so a
    /// terminal's Ctrl-C reaches strainline, which stops it in order), dying with
    /// strainline, with stdin closed and strainline's own variables removed.
    pub fn command<S: AsRef<OsStr>>(&self, argv: &[S]) -> Command {
        let mut cmd = Command::new(process::program(argv[0].as_ref()));
        cmd.args(&argv[1..]).stdin(Stdio::null());
        let fds = self
            .group
            .as_ref()
            .map(|c| c.join_fds())
            .unwrap_or_default();
        process::prepare(&mut cmd, fds, true);
        cmd
    }

    /// A command from [`Unit::command`] with its stdout and stderr going to `log`.
    pub fn logged<S: AsRef<OsStr>>(&self, argv: &[S], log: &Path) -> std::io::Result<Command> {
        let out = std::fs::File::create(log)?;
        let mut cmd = self.command(argv);
        cmd.stdout(out.try_clone()?).stderr(out);
        Ok(cmd)
    }

    /// Notes a command started from [`Unit::command`] (by std or tokio): its group is
    /// the unit's, and the guardian's.
    pub fn started(&self, pid: u32) {
        if pid == 0 {
            return;
        }
        process::note_born(pid);
        self.roots.lock().unwrap().push(pid);
        if self.group.is_none() {
            guardian::tell(&format!("+pg {pid}"));
        }
    }

    /// A command started with [`Unit::started`] is over: what is left of its process
    /// group is stopped (the rest of the unit when the unit ends).
    pub fn finished(&self, pid: u32) {
        if pid == 0 {
            return; // kill(0) would be strainline's own group
        }
        // SAFETY: kill with a negative pid signals a process group.
        unsafe { libc::kill(-(pid as i32), libc::SIGKILL) };
        process::note_gone(pid);
        self.roots.lock().unwrap().retain(|&r| r != pid);
        if self.group.is_none() {
            guardian::tell(&format!("-pg {pid}"));
        }
    }

    /// Starts `cmd` (from [`Unit::command`]).
    pub fn spawn(&self, cmd: &mut Command) -> Result<Child, process::SpawnError> {
        let program = cmd.get_program().to_string_lossy().into_owned();
        let child = cmd
            .spawn()
            .map_err(|e| process::SpawnError::of(program, e))?;
        self.started(child.id());
        Ok(child)
    }

    /// SIGKILL to everything in the unit, now.
    pub fn kill(&self) {
        let roots = self.roots.lock().unwrap().clone();
        let mut seen: Vec<u32> = roots.iter().flat_map(|&r| descendants(r)).collect();
        if let Some(g) = &self.group {
            seen.extend(g.pids().unwrap_or_default());
            g.kill_all();
        }
        for &r in &roots {
            // SAFETY: kill with a negative pid signals a process group.
            unsafe { libc::kill(-(r as i32), libc::SIGKILL) };
        }
        for &p in &seen {
            process::signal(p, libc::SIGKILL);
        }
        seen.retain(|p| !roots.contains(p));
        self.orphans.lock().unwrap().extend(seen);
    }

    /// Whether nothing of the unit runs any more (zombies aside).
    pub fn is_empty(&self) -> bool {
        if let Some(pids) = self.group.as_ref().and_then(|g| g.pids()) {
            let table = process::table();
            return !table
                .iter()
                .any(|e| pids.contains(&e.pid) && e.state != 'Z');
        }
        let roots = self.roots.lock().unwrap();
        let table = process::table();
        !table
            .iter()
            .any(|e| roots.contains(&e.pgrp) && e.state != 'Z')
    }

    /// Kills everything in the unit and waits (at most 2 s) until it is gone, reaping
    /// the orphans that were re-parented to strainline. Roots are left to whoever
    /// waits for them.
    pub fn end(&self) {
        self.kill();
        let deadline = Instant::now() + Duration::from_secs(2);
        while !self.is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
            self.kill();
        }
        let orphans = std::mem::take(&mut *self.orphans.lock().unwrap());
        process::reap_these(&orphans);
    }

    /// Runs `cmd` (from [`Unit::command`]) to its end, stopping the whole unit when
    /// strainline is interrupted.
    pub fn run(&self, cmd: &mut Command) -> Result<Ended, process::SpawnError> {
        let mut child = self.spawn(cmd)?;
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                process::note_gone(child.id());
                return Ok(Ended::Exited(status));
            }
            if signals::interrupted() {
                self.end();
                let _ = child.wait();
                return Ok(Ended::Interrupted);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// The descendants of `root` now, through `/proc` parent links; none once `root` is no
/// longer strainline's child (its pid may have been reused).
fn descendants(root: u32) -> Vec<u32> {
    let me = std::process::id();
    if !process::table()
        .iter()
        .any(|e| e.pid == root && e.ppid == me)
    {
        return Vec::new();
    }
    process::tree(root).split_off(1)
}

impl Drop for Unit {
    /// The unit is over: whatever is still in it is stopped.
    fn drop(&mut self) {
        self.end();
        if self.group.is_none() {
            for r in self.roots.lock().unwrap().iter() {
                guardian::tell(&format!("-pg {r}"));
            }
        }
    }
}
