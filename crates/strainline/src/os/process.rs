//! Starting the command under test and ending it and everything it started. strainline
//! makes itself the child subreaper, so descendants that double-fork or call `setsid`
//! are re-parented to it rather than to init: they stay visible, get reaped with their
//! `ru_maxrss`, and can be stopped. The direct child dies with strainline
//! (`PR_SET_PDEATHSIG`), even on SIGKILL.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::time::{Duration, Instant};

/// How a process that strainline reaped itself ended, from wait4.
#[derive(Debug, Clone, Copy)]
pub struct Reaped {
    pub exit: Option<i32>,
    pub signal: Option<i32>,
    /// ru_maxrss, bytes.
    pub maxrss_bytes: u64,
    /// ru_utime + ru_stime, seconds (includes the children it reaped).
    pub cpu_seconds: f64,
    /// Of that, the children it reaped (its `cutime + cstime`, read from its
    /// `/proc/PID/stat` while it was a zombie), seconds; `None` if unreadable.
    pub children_cpu_seconds: Option<f64>,
}

#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    #[error("command not found: '{0}' (check the name, or give a path)")]
    NotFound(String),
    #[error("cannot execute '{0}': permission denied (is it executable? try `chmod +x`)")]
    NotExecutable(String),
    #[error("cannot start '{program}': {source}")]
    Other { program: String, source: io::Error },
}

impl SpawnError {
    /// What starting `program` failed with, in a user's words.
    pub fn of(program: String, e: io::Error) -> SpawnError {
        match e.kind() {
            io::ErrorKind::NotFound => SpawnError::NotFound(program),
            io::ErrorKind::PermissionDenied => SpawnError::NotExecutable(program),
            _ => SpawnError::Other { program, source: e },
        }
    }

    /// The status a shell would give: 127 not found, 126 not executable.
    pub fn exit_code(&self) -> i32 {
        match self {
            SpawnError::NotFound(_) => 127,
            _ => 126,
        }
    }
}

/// A command that cannot be started as written is the user's to fix.
impl From<SpawnError> for crate::Error {
    fn from(e: SpawnError) -> crate::Error {
        crate::Error::Usage(crate::error::Message::of(e))
    }
}

static USER_UMASK: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0o022);

/// Everything strainline writes from now on (store, logs, reports) is private to the
/// user (umask 077): a store or a log may hold what a target printed. The user's own
/// umask is kept for the commands strainline starts ([`user_umask`]).
pub fn private_files() {
    // SAFETY: umask has no memory effects.
    let old = unsafe { libc::umask(0o077) };
    USER_UMASK.store(old as u32, std::sync::atomic::Ordering::Relaxed);
}

/// The umask strainline was started with, which the commands it starts get back.
pub fn user_umask() -> libc::mode_t {
    USER_UMASK.load(std::sync::atomic::Ordering::Relaxed) as libc::mode_t
}

/// The processes strainline started itself — every unit's commands, the guardian, perf,
/// ssh to agents: its children by birth. As child subreaper it also becomes the parent
/// of orphans from the trees it watches (a daemon whose launcher exited); only those are
/// adopted into a watched tree.
static BORN: std::sync::Mutex<std::collections::BTreeSet<u32>> =
    std::sync::Mutex::new(std::collections::BTreeSet::new());

/// Notes a process strainline just started.
pub fn note_born(pid: u32) {
    if pid != 0 {
        BORN.lock().unwrap().insert(pid);
    }
}

/// A process strainline started is over (its pid may be used again).
pub fn note_gone(pid: u32) {
    BORN.lock().unwrap().remove(&pid);
}

/// Whether strainline started `pid` itself (rather than adopting it).
pub fn born_here(pid: u32) -> bool {
    BORN.lock().unwrap().contains(&pid)
}

/// Makes this process the subreaper of everything it starts from now on.
pub fn become_subreaper() {
    // SAFETY: prctl with these arguments has no memory effects.
    unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    }
}

/// Starts `argv` directly (no shell), with stdio inherited, prepared as [`prepare`]
/// says (in strainline's own process group).
pub fn spawn(argv: &[OsString], cgroup_fds: Vec<RawFd>) -> Result<u32, SpawnError> {
    let name = argv[0].to_string_lossy().into_owned();
    let mut cmd = Command::new(program(&argv[0]));
    cmd.args(&argv[1..]);
    // Left in strainline's process group: the monitored command stays in the
    // terminal's foreground, as under `time`.
    prepare(&mut cmd, cgroup_fds, false);
    cmd.spawn()
        .map(|c| c.id())
        .map_err(|e| SpawnError::of(name, e))
}

/// The program to start for a command's first word: the bare name `strainline` is this
/// very binary (so `["strainline", "testbed", "serve", …]` in a suite runs the bundled
/// testbed of the same version, installed or not); anything else as given.
pub fn program(argv0: &OsStr) -> OsString {
    if argv0 == "strainline" {
        if let Ok(me) = std::env::current_exe() {
            // A binary replaced while it runs (a rebuild during a soak) is reached
            // through /proc/self/exe: the forked child execs its parent's image.
            return if me.exists() {
                me.into_os_string()
            } else {
                "/proc/self/exe".into()
            };
        }
    }
    argv0.to_os_string()
}

/// `PATH` for a command: the user's, with this binary's directory appended, so a shell
/// command (`shell = true`) that says `strainline` finds it even when it is not
/// installed (appended, never first: the user's own programs keep their precedence).
fn path_with_own_dir() -> Option<OsString> {
    let dir = std::env::current_exe().ok()?.parent()?.to_path_buf();
    let mut dirs: Vec<std::path::PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    if !dirs.contains(&dir) {
        dirs.push(dir);
    }
    std::env::join_paths(dirs).ok()
}

/// Whether an environment variable is strainline's own (never passed on).
pub fn own_variable(name: &std::ffi::OsStr) -> bool {
    name.to_string_lossy().starts_with("STRAINLINE_")
}

/// What every command strainline starts gets: none of strainline's own variables (which
/// may hold a database password), the user's umask back, death with strainline
/// (`PR_SET_PDEATHSIG`), membership of the cgroups behind `cgroup_fds` (`cgroup.procs`
/// files opened before the fork, so the child only writes), and with `own_group` a
/// process group of its own.
pub fn prepare(cmd: &mut Command, cgroup_fds: Vec<RawFd>, own_group: bool) {
    for (k, _) in std::env::vars_os() {
        if own_variable(&k) {
            cmd.env_remove(k);
        }
    }
    if let Some(path) = path_with_own_dir() {
        cmd.env("PATH", path);
    }
    let mask = user_umask();
    // SAFETY: only async-signal-safe calls (prctl, umask, setpgid, write) between fork
    // and exec.
    unsafe {
        cmd.pre_exec(move || {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
            libc::umask(mask);
            if own_group {
                libc::setpgid(0, 0);
            }
            for &fd in &cgroup_fds {
                libc::write(fd, b"0".as_ptr().cast(), 1);
            }
            Ok(())
        });
    }
}

/// A pidfd for `pid`: readable once the process has exited. `None` on old kernels.
pub fn pidfd(pid: u32) -> Option<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    // SAFETY: a non-negative result is a descriptor that we now own.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Sleeps until `deadline`, waking early if the process behind `pidfd` exits or a signal
/// arrives. Returns true if the process has exited.
pub fn sleep_until(deadline: Instant, pidfd: Option<&OwnedFd>) -> bool {
    use std::os::fd::AsRawFd;
    let now = Instant::now();
    if deadline <= now {
        return false;
    }
    let wait = deadline - now;
    match pidfd {
        Some(fd) => {
            let mut p = libc::pollfd {
                fd: fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            let ms = wait.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32;
            // SAFETY: one valid pollfd.
            let n = unsafe { libc::poll(&mut p, 1, ms) };
            n > 0 && p.revents != 0
        }
        None => {
            std::thread::sleep(wait);
            false
        }
    }
}

/// Reaps one exited child, without blocking: any child for `pid` = -1, else that one.
/// It is looked at first without reaping (`WNOWAIT`): a zombie's `/proc/PID/stat` still
/// holds the CPU time of the children it reaped apart from its own, which wait4 sums.
fn reap_one(pid: libc::pid_t) -> Option<(u32, Reaped)> {
    // SAFETY: zeroed siginfo is valid; waitid fills it.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    let (idtype, id) = if pid == -1 {
        (libc::P_ALL, 0)
    } else {
        (libc::P_PID, pid as libc::id_t)
    };
    let flags = libc::WEXITED | libc::WNOHANG | libc::WNOWAIT;
    // SAFETY: valid pointer to a siginfo_t.
    if unsafe { libc::waitid(idtype, id, &mut info, flags) } != 0 {
        return None;
    }
    // SAFETY: si_pid is valid for the SIGCHLD siginfo waitid reports.
    let pid = unsafe { info.si_pid() };
    if pid <= 0 {
        return None;
    }
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let children_cpu_seconds = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|t| parse_stat(&t))
        .map(|s| s.children_cpu_ticks as f64 / hz);
    let mut status = 0;
    // SAFETY: zeroed rusage is valid; wait4 fills it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let got = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut ru) };
    if got <= 0 {
        return None;
    }
    note_gone(got as u32);
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Some((
        got as u32,
        Reaped {
            exit: libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)),
            signal: libc::WIFSIGNALED(status).then(|| libc::WTERMSIG(status)),
            maxrss_bytes: ru.ru_maxrss as u64 * 1024,
            cpu_seconds: tv(ru.ru_utime) + tv(ru.ru_stime),
            children_cpu_seconds,
        },
    ))
}

/// Reaps every child that has exited, without blocking.
pub fn reap_exited() -> Vec<(u32, Reaped)> {
    std::iter::from_fn(|| reap_one(-1)).collect()
}

/// Reaps those of `pids` that have exited, without blocking, leaving other children
/// (commands another part of strainline is waiting for) alone.
pub fn reap_these(pids: &[u32]) -> Vec<(u32, Reaped)> {
    pids.iter()
        .filter_map(|&p| reap_one(p as libc::pid_t))
        .collect()
}

/// Sends `sig` to `pid`; a process that is already gone is not an error.
pub fn signal(pid: u32, sig: i32) {
    // SAFETY: kill has no memory effects.
    unsafe {
        libc::kill(pid as libc::pid_t, sig);
    }
}

/// Whether a process with this pid exists.
pub fn exists(pid: u32) -> bool {
    // SAFETY: signal 0 only checks existence.
    pid > 0
        && (unsafe { libc::kill(pid as libc::pid_t, 0) } == 0
            || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM))
}

/// The fields of `/proc/PID/stat` strainline uses (the monitor, and containment units
/// finding their members).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Stat {
    pub pid: u32,
    /// Executable name as the kernel keeps it (at most 15 bytes).
    pub comm: String,
    pub state: char,
    pub ppid: u32,
    pub pgrp: u32,
    pub session: u32,
    /// CPU time of the process itself, in clock ticks (user + system).
    pub cpu_ticks: u64,
    /// CPU time of children it has waited for, in clock ticks (user + system).
    pub children_cpu_ticks: u64,
    pub num_threads: u64,
    /// Page faults that had to read from storage (`majflt`).
    pub major_faults: u64,
    /// Start time after boot, in clock ticks: with the pid, it names a process uniquely.
    pub start_ticks: u64,
    pub rss_pages: u64,
    /// Where the stack began (`startstack`): set by `exec` from the new program's
    /// arguments and environment (and randomized), fixed afterwards, so a change says the
    /// process called exec even when its name stayed (a program re-executing itself).
    /// 0 when the kernel hides it (a process strainline may not trace).
    pub start_stack: u64,
}

/// Parses the text of `/proc/PID/stat`. The command name is in parentheses and may
/// itself contain spaces and parentheses, so fields are counted from the last `)`.
pub fn parse_stat(text: &str) -> Option<Stat> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let pid = text[..open].trim().parse().ok()?;
    let comm = text[open + 1..close].to_string();
    let f: Vec<&str> = text[close + 1..].split_ascii_whitespace().collect();
    // f[0] is field 3 (state); field N is f[N - 3].
    let num = |n: usize| -> Option<u64> { f.get(n - 3)?.parse().ok() };
    Some(Stat {
        pid,
        comm,
        state: f.first()?.chars().next()?,
        ppid: num(4)? as u32,
        pgrp: num(5)? as u32,
        session: num(6)? as u32,
        cpu_ticks: num(14)? + num(15)?,
        children_cpu_ticks: num(16)? + num(17)?,
        num_threads: num(20)?,
        major_faults: num(12)?,
        start_ticks: num(22)?,
        rss_pages: num(24)?,
        start_stack: num(28).unwrap_or(0),
    })
}

/// Every process on the machine now.
pub fn table() -> Vec<Stat> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|d| {
            let pid: u32 = d.file_name().to_str()?.parse().ok()?;
            parse_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
        })
        .collect()
}

/// `root` and its descendants now, through `/proc` parent links.
pub fn tree(root: u32) -> Vec<u32> {
    let all = table();
    let mut out = vec![root];
    let mut i = 0;
    while i < out.len() {
        let p = out[i];
        out.extend(all.iter().filter(|e| e.ppid == p).map(|e| e.pid));
        i += 1;
    }
    out
}

/// CPU time (user + system) this process has used so far, seconds.
pub fn own_cpu_seconds() -> f64 {
    // SAFETY: zeroed rusage is valid; getrusage fills it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// CPU time a process has used so far, nanoseconds: the kernel's scheduler clock of the
/// whole thread group (every thread's `sum_exec_runtime`, those that ended included),
/// read through the process's CPU-time clock (`clock_getcpuclockid`). Unlike
/// `/proc/PID/stat`'s clock ticks (10 ms each), it does not quantize a short window:
/// 3 s at 0.15 cores is 450 ms of CPU, which ticks would count to ±2%. Its reaped
/// children are not included. `None` when the process is gone.
pub fn cpu_nanos(pid: u32) -> Option<u64> {
    let mut clock: libc::clockid_t = 0;
    // SAFETY: clock_getcpuclockid writes a clock id; clock_gettime fills the timespec.
    unsafe {
        if libc::clock_getcpuclockid(pid as libc::pid_t, &mut clock) != 0 {
            return None;
        }
        let mut ts: libc::timespec = std::mem::zeroed();
        if libc::clock_gettime(clock, &mut ts) != 0 {
            return None;
        }
        Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
    }
}

/// Pins every thread of `pids` to `cpus` (threads they start later inherit it). Best
/// effort: a thread that ended meanwhile is skipped.
pub fn pin(pids: &[u32], cpus: &[usize]) {
    // SAFETY: a zeroed cpu_set_t is empty; CPU_SET and sched_setaffinity take it by
    // reference with its own size.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cpus {
            libc::CPU_SET(c, &mut set);
        }
        for pid in pids {
            let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
                continue;
            };
            for tid in dir
                .flatten()
                .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
            {
                libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set);
            }
        }
    }
}

/// The default time a process gets between SIGTERM and SIGKILL.
pub const GRACE: Duration = Duration::from_secs(5);

/// Raises the soft open-files limit to the hard one (each connection is a descriptor)
/// and returns it.
pub fn raise_nofile() -> u64 {
    // SAFETY: getrlimit/setrlimit with a valid struct.
    unsafe {
        let mut r: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) == 0 {
            r.rlim_cur = r.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &r);
            return r.rlim_cur;
        }
    }
    1024
}

/// A `schedstat` file's clocks (`/proc/PID/task/TID/schedstat`): ns on a CPU, ns
/// runnable in the run queue, times scheduled. Exact, whenever read.
pub fn schedstat(text: &str) -> Option<[u64; 3]> {
    let mut w = text.split_ascii_whitespace().map(|v| v.parse().ok());
    Some([w.next()??, w.next()??, w.next()??])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The nanosecond clock against the kernel's own account of a reaped process
    /// (wait4's rusage, microseconds): a shell that burns about half a second of CPU
    /// and then stops itself, read while stopped, then killed and reaped.
    #[test]
    fn cpu_nanos_agrees_with_rusage_of_the_reaped_process() {
        let child = std::process::Command::new("sh")
            .args([
                "-c",
                "i=0; while [ $i -lt 1000000 ]; do i=$((i+1)); done; kill -STOP $$",
            ])
            .spawn()
            .unwrap();
        let pid = child.id();
        let stopped = || {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|t| parse_stat(&t))
                .is_some_and(|s| s.state == 'T')
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        while !stopped() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(stopped(), "the shell never stopped itself");
        let read = cpu_nanos(pid).unwrap() as f64 / 1e9;
        signal(pid, libc::SIGKILL);
        let mut status = 0;
        // SAFETY: zeroed rusage is valid; wait4 fills it for our own child.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        unsafe { libc::wait4(pid as i32, &mut status, 0, &mut ru) };
        let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        let kernel = tv(ru.ru_utime) + tv(ru.ru_stime);
        assert!(kernel > 0.3, "the shell burned {kernel} s");
        let off = (read - kernel).abs() / kernel;
        assert!(off < 0.01, "clock {read:.6} s vs rusage {kernel:.6} s");
        drop(child);
    }
}
