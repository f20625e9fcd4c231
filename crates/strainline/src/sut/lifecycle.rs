//! Starting the system under test for a suite's case and stopping it: an optional build
//! step (never measured), the command with its output captured to a log file, a
//! readiness check with a timeout, a watcher on its whole tree, crash detection, and a
//! stop that sends the configured signal, waits the grace period, then kills the tree.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Read;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::spec::{Attach, Ready, TargetSpec};
use crate::measure::{ExitInfo, MonitorSummary, Sample};
use crate::monitor::watch::{Sink, Watcher};
use crate::os::process;
use crate::os::unit::{Ended, Unit};
use crate::placeholders::substitute;

#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    #[error("build failed ({status}): {tail}")]
    Build { status: String, tail: String },
    #[error("cannot start the target '{program}': {why}")]
    Spawn { program: String, why: String },
    #[error("the target exited during start-up ({exit}); its last lines:\n{tail}")]
    DiedAtStart { exit: String, tail: String },
    #[error("{addr} already answers before the target is started: another process holds it, and the case would measure that one (a fixed port in the suite? write {{{{port}}}} for a free one)")]
    Occupied { addr: String },
    #[error("interrupted before the target was ready")]
    Interrupted,
    #[error("the target was not ready within {timeout:?} ({what}); its last lines:\n{tail}")]
    NotReady {
        timeout: Duration,
        what: String,
        tail: String,
    },
}

/// A target that could not be built, started or made ready: what its case would
/// measure cannot be trusted.
impl From<TargetError> for crate::Error {
    fn from(e: TargetError) -> crate::Error {
        match e {
            TargetError::Interrupted => crate::Error::Interrupted,
            e => crate::Error::Target(crate::error::Message::of(e)),
        }
    }
}

pub use super::port::free_port;

/// How much of a log's end [`tail`] reads, and how much of one line it shows.
const TAIL_BYTES: u64 = 64 * 1024;
const TAIL_LINE: usize = 300;

/// The last `n` lines of a file, indented, for a reason: read from its last 64 KiB
/// only, each line cut at 300 characters (a harness that printed 4 MB on one line
/// made a 4 MB reason, printed and stored).
pub fn tail(path: &Path, n: usize) -> String {
    use std::io::{Seek, SeekFrom};
    let mut bytes = Vec::new();
    if let Ok(mut f) = File::open(path) {
        let len = f.metadata().map_or(0, |m| m.len());
        let _ = f.seek(SeekFrom::Start(len.saturating_sub(TAIL_BYTES)));
        let _ = f.take(TAIL_BYTES).read_to_end(&mut bytes);
    }
    let s = String::from_utf8_lossy(&bytes);
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..]
        .iter()
        .map(|l| {
            let mut cut: String = l.chars().take(TAIL_LINE).collect();
            if cut.len() < l.len() {
                cut.push_str(&format!(" … ({} more bytes)", l.len() - cut.len()));
            }
            format!("    {cut}")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn argv(spec_cmd: &[String], shell: bool, vars: &BTreeMap<String, String>) -> Vec<String> {
    let v: Vec<String> = spec_cmd.iter().map(|a| substitute(a, vars)).collect();
    if shell {
        vec!["sh".into(), "-c".into(), v.join(" ")]
    } else {
        v
    }
}

/// Runs the build step, if any (its time is never measured), in a unit of its own: what
/// it leaves running (a build daemon) is stopped when it ends, and an interrupt stops
/// it at once.
pub fn build(
    spec: &TargetSpec,
    vars: &BTreeMap<String, String>,
    log: &Path,
) -> Result<(), TargetError> {
    let Some(b) = &spec.build else { return Ok(()) };
    let a = argv(b, spec.shell, vars);
    let spawn_err = |why: String| TargetError::Spawn {
        program: a[0].clone(),
        why,
    };
    let unit = Unit::new(true);
    let mut cmd = unit
        .logged(&a, log)
        .map_err(|e| spawn_err(format!("log file {}: {e}", log.display())))?;
    cmd.current_dir(spec.cwd.clone().unwrap_or_else(|| PathBuf::from(".")));
    match unit.run(&mut cmd).map_err(|e| spawn_err(e.to_string()))? {
        Ended::Interrupted => Err(TargetError::Interrupted),
        Ended::Exited(status) if !status.success() => Err(TargetError::Build {
            status: status.to_string(),
            tail: tail(log, 20),
        }),
        Ended::Exited(_) => Ok(()),
    }
}

/// A running target.
pub struct Running {
    pub pid: u32,
    pub command: Vec<String>,
    pub watcher: Watcher,
    /// What holds its whole tree; `None` for a process strainline attached to (never
    /// stopped by it).
    unit: Option<Unit>,
    /// The agent on whose machine it runs (its pid is that machine's).
    pub host: Option<String>,
    /// Whether a command that exits 0 leaving processes in its unit has daemonised, its
    /// processes being the target from then on (a suite's target), or has simply ended
    /// (a harness, whose leftovers are stopped).
    daemons: bool,
}

/// Starts a command with its output going to `log`, in a containment unit of its own,
/// watched from the first instant.
pub fn spawn_watched(
    argv: &[String],
    env: &BTreeMap<String, String>,
    cwd: Option<&Path>,
    log: &Path,
    interval: Duration,
    sink: Option<Sink>,
    observer: crate::observe::Shared,
) -> Result<Running, TargetError> {
    let err = |why: String| TargetError::Spawn {
        program: argv[0].clone(),
        why,
    };
    let unit = Unit::new(true);
    let mut cmd = unit
        .logged(argv, log)
        .map_err(|e| err(format!("log file {}: {e}", log.display())))?;
    cmd.envs(env);
    if let Some(d) = cwd {
        cmd.current_dir(d);
    }
    let child = unit.spawn(&mut cmd).map_err(|e| match e {
        process::SpawnError::NotFound(_) => err("command not found".into()),
        e => err(e.to_string()),
    })?;
    let pid = child.id();
    Ok(Running {
        pid,
        command: argv.to_vec(),
        watcher: Watcher::start(pid, unit.cgroup(), interval, sink, observer),
        unit: Some(unit),
        host: None,
        daemons: false,
    })
}

/// The running process `how` names on this machine: its pid and command line.
pub fn resolve(how: &Attach) -> Result<(u32, String), TargetError> {
    let (pid, what) = match how {
        Attach::PidFile(file) => (
            std::fs::read_to_string(file)
                .ok()
                .and_then(|t| t.trim().parse().ok())
                .filter(|&p| process::exists(p)),
            (
                format!("the process in {}", file.display()),
                "no running process has that pid (is it running? is the pid file current?)",
            ),
        ),
        Attach::Port(port) => (
            crate::monitor::net::listening_process(*port),
            (
                format!("the process listening on port {port}"),
                "no process this user may look into listens on that TCP port (is it running? started by another user?)",
            ),
        ),
    };
    let pid = pid.ok_or_else(|| TargetError::Spawn {
        program: what.0,
        why: what.1.into(),
    })?;
    Ok((pid, crate::monitor::procfs::cmdline(pid)))
}

/// Watches a process on an agent's machine: its pid there, its command line, and a
/// watcher fed by that agent (`Err` says why not).
pub type Remote<'a> =
    &'a dyn Fn(&str, &Attach, Duration) -> crate::error::Result<(u32, String, Watcher)>;

/// Starts the suite's target (or attaches to it, here or through `remote` on an
/// agent's machine) and waits until it is ready.
pub fn start(
    spec: &TargetSpec,
    vars: &BTreeMap<String, String>,
    log: &Path,
    interval: Duration,
    sink: Option<Sink>,
    observer: crate::observe::Shared,
    remote: Remote,
) -> Result<Running, TargetError> {
    let running = match (&spec.attach, &spec.host) {
        (Some(how), Some(host)) => {
            let (pid, command, watcher) =
                remote(host, how, interval).map_err(|why| TargetError::Spawn {
                    program: format!("the target on agent {host}"),
                    why: why.to_string(),
                })?;
            let _ = File::create(log);
            Running {
                pid,
                command: vec![format!("pid {pid} on {host}"), command],
                watcher,
                unit: None,
                host: Some(host.clone()),
                daemons: false,
            }
        }
        (Some(how), None) => {
            let (pid, command) = resolve(how)?;
            let _ = File::create(log);
            Running {
                pid,
                command: vec![format!("pid {pid}"), command],
                watcher: Watcher::attach_target(pid, interval, observer),
                unit: None,
                host: None,
                daemons: false,
            }
        }
        (None, _) => {
            if let Some(addr) = answering(&spec.ready, vars) {
                return Err(TargetError::Occupied { addr });
            }
            let a = argv(&spec.command, spec.shell, vars);
            let mut r = spawn_watched(
                &a,
                &spec.env,
                spec.cwd.as_deref(),
                log,
                interval,
                sink,
                observer,
            )?;
            r.daemons = true;
            r
        }
    };
    let deadline = Instant::now() + spec.ready_timeout;
    let what = match &spec.ready {
        Ready::Http(u) => format!("GET {}", substitute(u, vars)),
        Ready::Tcp(a) => format!("connect to {}", substitute(a, vars)),
        Ready::Log(r) => format!("a log line matching /{r}/"),
        Ready::Delay(d) => format!("a delay of {d:?}"),
    };
    let delay_end = match spec.ready {
        Ready::Delay(d) => Instant::now() + d,
        _ => Instant::now(),
    };
    loop {
        if crate::os::signals::interrupted() {
            running.kill();
            return Err(TargetError::Interrupted);
        }
        if running.exited().is_some() {
            let t = tail(log, 20);
            running.kill();
            return Err(TargetError::DiedAtStart {
                exit: running.ending(),
                tail: t,
            });
        }
        let ready = match &spec.ready {
            Ready::Http(u) => {
                super::probe::request("GET", &substitute(u, vars), "").is_some_and(|s| s < 500)
            }
            Ready::Tcp(a) => TcpStream::connect_timeout(
                &match substitute(a, vars).parse() {
                    Ok(x) => x,
                    Err(_) => {
                        return Err(TargetError::NotReady {
                            timeout: spec.ready_timeout,
                            what,
                            tail: "(bad address)".into(),
                        })
                    }
                },
                Duration::from_millis(200),
            )
            .is_ok(),
            Ready::Log(r) => {
                let re = regex_lite::Regex::new(r).expect("checked when the suite was read");
                std::fs::read_to_string(log)
                    .map(|s| re.is_match(&s))
                    .unwrap_or(false)
            }
            Ready::Delay(_) => Instant::now() >= delay_end,
        };
        if ready {
            return Ok(running);
        }
        if Instant::now() >= deadline {
            let t = tail(log, 20);
            running.kill();
            return Err(TargetError::NotReady {
                timeout: spec.ready_timeout,
                what,
                tail: t,
            });
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits until `url` answers an HTTP GET with any status below 500 (a target that is only
/// a URL), or `timeout` passes.
pub fn wait_answering(url: &str, timeout: Duration) -> Result<(), TargetError> {
    let deadline = Instant::now() + timeout;
    loop {
        if crate::os::signals::interrupted() {
            return Err(TargetError::Interrupted);
        }
        if super::probe::request("GET", url, "").is_some_and(|s| s < 500) {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(TargetError::NotReady {
                timeout,
                what: format!("GET {url}"),
                tail: "(a URL-only target: strainline neither started nor watches it)".into(),
            });
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The ready address, if something already accepts connections there.
fn answering(ready: &Ready, vars: &BTreeMap<String, String>) -> Option<String> {
    let text = match ready {
        Ready::Http(u) => {
            let u = substitute(u, vars);
            let rest = u
                .strip_prefix("http://")
                .or_else(|| u.strip_prefix("https://"))?;
            rest.split(['/', '?']).next()?.to_string()
        }
        Ready::Tcp(a) => substitute(a, vars),
        Ready::Log(_) | Ready::Delay(_) => return None,
    };
    let addr = std::net::ToSocketAddrs::to_socket_addrs(&text)
        .ok()?
        .next()?;
    TcpStream::connect_timeout(&addr, Duration::from_millis(300))
        .is_ok()
        .then_some(text)
}

/// The target tree's CPU time at one instant, to the microsecond or better.
#[derive(Debug, Clone)]
pub struct CpuReading {
    /// CPU seconds so far.
    pub seconds: f64,
    /// The processes it summed (sorted); empty when a cgroup counted the whole tree.
    pids: Vec<u32>,
}

impl CpuReading {
    /// CPU seconds from `self` to `later`, when both read the same processes (a
    /// process that ended or started between them would be miscounted: `None`, and
    /// the caller uses the sampled figure).
    pub fn until(&self, later: &CpuReading) -> Option<f64> {
        (self.pids == later.pids && later.seconds >= self.seconds)
            .then_some(later.seconds - self.seconds)
    }
}

impl Running {
    /// The tree's CPU time now: the cgroup's `usage_usec`, else the sum of every
    /// process's scheduler clock (nanoseconds, [`process::cpu_nanos`]) and the clock
    /// ticks of the children each has reaped. `None` on another machine.
    pub fn cpu_now(&self) -> Option<CpuReading> {
        if self.host.is_some() {
            return None;
        }
        if let Some(us) = self
            .unit
            .as_ref()
            .and_then(|u| u.cgroup())
            .and_then(|g| g.cpu_usage_usec())
        {
            return Some(CpuReading {
                seconds: us as f64 / 1e6,
                pids: Vec::new(),
            });
        }
        let mut pids = self.pids();
        pids.sort_unstable();
        let hz = crate::monitor::procfs::kernel_units().clock_ticks as f64;
        let mut seconds = 0.0;
        for &pid in &pids {
            let own = process::cpu_nanos(pid)? as f64 / 1e9;
            let reaped = std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|t| process::parse_stat(&t))?
                .children_cpu_ticks as f64
                / hz;
            seconds += own + reaped;
        }
        Some(CpuReading { seconds, pids })
    }

    /// How the target ended, if it has (unexpectedly, while a case ran). An attached
    /// process is not strainline's child: its end is seen, its status is not. A target
    /// whose command daemonised has ended when nothing of what it left runs any more.
    pub fn exited(&self) -> Option<ExitInfo> {
        match self.unit.is_some() {
            true => {
                let exit = self.watcher.root_exit()?;
                if self.daemonised() && !self.watcher.tree().is_empty() {
                    return None;
                }
                Some(exit)
            }
            // Attached, here or on an agent's machine: the watcher there saw it go.
            false => self.watcher.root_exit(),
        }
    }

    /// Whether the target's command exited 0 leaving processes behind (nginx's master,
    /// `redis-server --daemonize yes`, `pg_ctl start`): what it left is the target —
    /// watched, judged and stopped as it — as systemd's `Type=forking` takes it.
    pub fn daemonised(&self) -> bool {
        self.daemons && self.watcher.daemonised()
    }

    /// How the target ended, in words (see [`Running::exited`]).
    pub fn ending(&self) -> String {
        match self.exited() {
            Some(_) if self.daemonised() => "every process its command had left running in the background ended; the command itself had exited 0".into(),
            Some(_) if self.unit.is_none() => "the process strainline attached to is gone; its exit status is its parent's to see".into(),
            Some(e) => e.describe(),
            None => "still running".into(),
        }
    }

    /// The processes the target's command left when it daemonised, with their command
    /// lines: the tops of what remains of its tree (nginx's master, not its workers).
    pub fn daemons(&self) -> Vec<(u32, String)> {
        self.daemon_pids()
            .into_iter()
            .map(|pid| (pid, crate::monitor::procfs::cmdline(pid)))
            .collect()
    }

    /// The pids of [`Running::daemons`].
    fn daemon_pids(&self) -> Vec<u32> {
        let tree = self.watcher.tree();
        tree.iter()
            .filter(|(_, parent)| !tree.iter().any(|(p, _)| p == parent))
            .map(|&(pid, _)| pid)
            .collect()
    }

    /// Every process of the target's tree now: its cgroup's members, else the root and
    /// its descendants.
    pub fn pids(&self) -> Vec<u32> {
        // Another machine's processes are not in this one's /proc.
        if self.host.is_some() {
            return Vec::new();
        }
        self.unit
            .as_ref()
            .and_then(|u| u.cgroup())
            .and_then(|g| g.pids())
            .filter(|p| !p.is_empty())
            .unwrap_or_else(|| match self.daemonised() {
                // Without a cgroup, the daemon is found as the watcher follows it.
                true => self.watcher.tree().iter().map(|t| t.0).collect(),
                false => process::tree(self.pid),
            })
    }

    /// SIGKILL to the target's whole tree (never to an attached process).
    pub fn kill(&self) {
        self.watcher.stopping();
        if let Some(u) = &self.unit {
            u.kill();
            // A daemon that left the command's process group (`setsid`) without a
            // cgroup to hold it is where the watcher followed it.
            if self.daemonised() {
                for (pid, _) in self.watcher.tree() {
                    process::signal(pid, libc::SIGKILL);
                }
            }
        }
    }

    /// Stops the target (signal, grace, then SIGKILL) and returns what the watcher saw.
    pub fn stop(self, signal: i32, grace: Duration) -> (MonitorSummary, Vec<Sample>) {
        if self.unit.is_none() {
            let Running {
                watcher, command, ..
            } = self;
            return watcher.finish(command, "completed");
        }
        self.watcher.stopping();
        if self.exited().is_none() {
            // A daemonised target is asked to stop through the processes its command
            // left (nginx's master stops its workers), as its own scripts would.
            match self.daemonised() {
                true => self
                    .daemon_pids()
                    .into_iter()
                    .for_each(|pid| process::signal(pid, signal)),
                false => process::signal(self.pid, signal),
            }
            let deadline = Instant::now() + grace;
            while self.exited().is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            if self.exited().is_none() {
                self.kill();
            }
        }
        // Let the watcher reap the root and see the tree empty.
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.exited().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let Running {
            watcher,
            command,
            unit,
            ..
        } = self;
        if let Some(u) = unit {
            u.end();
        }
        watcher.finish(command, "completed")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tail_is_bounded_however_long_the_log_and_its_lines() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("out.log");
        let mut text = "early\n".repeat(100_000);
        text.push_str(&"x".repeat(4_000_000));
        text.push_str("\nlast\n");
        std::fs::write(&log, &text).unwrap();
        let t = tail(&log, 10);
        assert!(t.len() < 1000, "{} bytes", t.len());
        assert!(t.ends_with("    last"), "{t}");
        assert!(t.contains("more bytes)"), "{t}");
        assert!(!t.contains("early"), "read beyond the last 64 KiB");
        assert_eq!(tail(&dir.path().join("none"), 5), "");
    }
}
