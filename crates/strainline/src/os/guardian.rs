//! The guardian: what stops strainline's processes when strainline itself is killed with
//! SIGKILL. `PR_SET_PDEATHSIG` takes only the direct child with it; a `setsid` or
//! daemonised grandchild would live on. So the first unit strainline makes starts a
//! small copy of itself (`strainline __guardian`) in a session of its own, ignoring the
//! terminal's signals, holding the read end of a pipe. Strainline tells it every
//! containment unit it makes and removes (`+cg DIR`, `-cg DIR`, `+pg PGID`, `-pg PGID`);
//! when the pipe reaches end of file — strainline has exited, however — the guardian
//! kills what is still registered, removes the groups, and exits. A clean exit has
//! unregistered everything, so the guardian then has nothing to do.

use std::collections::BTreeSet;
use std::io::{BufRead, Write};
use std::path::Path;
use std::process::{ChildStdin, Command, Stdio};
use std::sync::Mutex;

static PIPE: Mutex<Option<Option<ChildStdin>>> = Mutex::new(None);
static PID: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// The guardian's pid once started: strainline's own child, which code that waits for
/// "every child" must not wait for.
pub fn pid() -> Option<u32> {
    Some(PID.load(std::sync::atomic::Ordering::Relaxed)).filter(|&p| p != 0)
}

/// The hidden subcommand that runs the guardian.
pub const SUBCOMMAND: &str = "__guardian";

fn start() -> Option<ChildStdin> {
    use std::os::unix::process::CommandExt;
    let exe = std::env::current_exe().ok()?;
    let mut cmd = Command::new(exe);
    cmd.arg(SUBCOMMAND)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: setsid is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let mut child = cmd.spawn().ok()?;
    PID.store(child.id(), std::sync::atomic::Ordering::Relaxed);
    crate::os::process::note_born(child.id());
    child.stdin.take()
}

/// Tells the guardian one line; it is started on first use. Best effort: without a
/// guardian, units are still stopped by strainline itself and by the next run.
pub fn tell(line: &str) {
    let mut pipe = PIPE.lock().unwrap_or_else(|e| e.into_inner());
    let p = pipe.get_or_insert_with(start);
    if let Some(w) = p {
        if w.write_all(format!("{line}\n").as_bytes()).is_err() {
            *p = None;
        }
    }
}

/// The guardian's own life: read registrations until strainline is gone, then stop what
/// is left.
pub fn serve() -> ! {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGPIPE] {
        // SAFETY: ignoring a signal has no memory effects.
        unsafe { libc::signal(sig, libc::SIG_IGN) };
    }
    let mut groups = BTreeSet::new();
    let mut pgids = BTreeSet::new();
    // A process group is a positive pid above init's: kill(0) or kill(-1) would reach
    // far more than a unit.
    let pgid = |n: &str| n.parse::<i32>().ok().filter(|&n| n > 1);
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        match line.split_once(' ') {
            Some(("+cg", d)) => groups.insert(d.to_string()),
            Some(("-cg", d)) => groups.remove(d),
            Some(("+pg", n)) => pgid(n).is_some_and(|n| pgids.insert(n)),
            Some(("-pg", n)) => pgid(n).is_some_and(|n| pgids.remove(&n)),
            _ => false,
        };
    }
    for &pg in &pgids {
        // SAFETY: kill with a negative pid signals a process group.
        unsafe { libc::kill(-pg, libc::SIGKILL) };
    }
    for d in &groups {
        super::cgroup::remove(Path::new(d));
    }
    std::process::exit(0)
}
