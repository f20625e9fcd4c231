//! Where the target's CPU time goes: `perf record -g` attached to the target during a
//! case, its stacks folded and drawn as a flame graph with `inferno`. Profiling is an
//! extra, never a reason to fail: when perf is missing or not permitted, the case runs
//! anyway and the report says why there is no flame graph.

use crate::error::Category;
use std::io::{BufRead, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use inferno::collapse::Collapse;

/// Samples per second: a prime, so the sampling does not beat with periodic work.
const FREQUENCY: &str = "499";

/// What the report links to, or why it cannot.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, PartialEq)]
pub struct FlameInfo {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why_not: Option<String>,
    /// Total weight of the recorded stacks (perf's sample periods: nanoseconds of CPU
    /// for the software clock, cycles for the hardware counter).
    pub weight: u64,
}

impl FlameInfo {
    pub fn missing(why: String) -> FlameInfo {
        FlameInfo {
            file: None,
            why_not: Some(why),
            weight: 0,
        }
    }
}

/// The perf binary: `STRAINLINE_PERF`, or `perf` on the PATH.
fn perf() -> String {
    std::env::var("STRAINLINE_PERF").unwrap_or_else(|_| "perf".into())
}

pub struct Profiler {
    child: Child,
    data: PathBuf,
    log: PathBuf,
}

fn first_line(path: &Path) -> String {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("no message")
        .to_string()
}

/// Starts recording `pid`'s stacks into `dir/perf.data`.
pub fn start(pid: u32, dir: &Path) -> crate::error::Result<Profiler> {
    let data = dir.join("perf.data");
    let log = dir.join("perf.log");
    let stderr = std::fs::File::create(&log).map_err(|e| crate::error::writing(&log, e))?;
    let mut child = Command::new(perf())
        .args(["record", "-F", FREQUENCY, "-g", "-p", &pid.to_string(), "-o"])
        .arg(&data)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .usage_with(|e| match e.kind() {
            std::io::ErrorKind::NotFound => format!(
                "perf is not installed ({} not found): install it (Debian: apt-get install linux-perf) or point STRAINLINE_PERF at it",
                perf()
            ),
            _ => format!("perf could not be started: {e}"),
        })?;
    crate::os::process::note_born(child.id());
    // perf fails at once when it may not attach (perf_event_paranoid, no permission).
    std::thread::sleep(Duration::from_millis(300));
    if let Ok(Some(status)) = child.try_wait() {
        return Err(crate::Error::usage(format!(
            "perf record could not attach to the target ({status}): {} (see {}; as non-root, lower /proc/sys/kernel/perf_event_paranoid)",
            first_line(&log),
            log.display()
        )));
    }
    Ok(Profiler { child, data, log })
}

/// Folds `perf script` text into `stack;frames count` lines.
pub fn fold(script: impl BufRead) -> std::io::Result<String> {
    let mut out = Vec::new();
    inferno::collapse::perf::Folder::default().collapse(script, &mut out)?;
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// Draws folded stacks as a flame graph SVG.
pub fn draw(folded: &str, title: &str, svg: &Path) -> std::io::Result<()> {
    let mut opts = inferno::flamegraph::Options::default();
    opts.title = title.to_string();
    opts.count_name = "samples".into();
    let file = std::io::BufWriter::new(std::fs::File::create(svg)?);
    inferno::flamegraph::from_lines(&mut opts, folded.lines(), file)
}

/// A differential flame graph: the candidate's stacks coloured by how much more (red)
/// or less (blue) they take than the baseline's.
pub fn draw_difference(before: &str, after: &str, title: &str, svg: &Path) -> std::io::Result<()> {
    let mut diff = Vec::new();
    inferno::differential::from_readers(
        inferno::differential::Options::default(),
        before.as_bytes(),
        after.as_bytes(),
        &mut diff,
    )?;
    draw(&String::from_utf8_lossy(&diff), title, svg)
}

impl Profiler {
    /// Stops recording and draws `svg`; returns the folded stacks and what to link.
    pub fn finish(mut self, title: &str, svg: &Path) -> (FlameInfo, Option<String>) {
        // SIGINT makes perf write its data and exit.
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGINT) };
        let deadline = Instant::now() + Duration::from_secs(20);
        while matches!(self.child.try_wait(), Ok(None)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        crate::os::process::note_gone(self.child.id());
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
            return (
                FlameInfo::missing("perf record did not stop within 20 s".into()),
                None,
            );
        }
        let script = Command::new(perf())
            .args(["script", "-i"])
            .arg(&self.data)
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .stdout(Stdio::piped())
            .spawn();
        let mut text = Vec::new();
        match script {
            Ok(mut c) => {
                crate::os::process::note_born(c.id());
                if let Some(mut out) = c.stdout.take() {
                    let _ = out.read_to_end(&mut text);
                }
                let _ = c.wait();
                crate::os::process::note_gone(c.id());
            }
            Err(e) => return (FlameInfo::missing(format!("perf script failed: {e}")), None),
        }
        let folded = match fold(text.as_slice()) {
            Ok(f) if !f.trim().is_empty() => f,
            Ok(_) => {
                return (
                    FlameInfo::missing(format!(
                        "perf recorded no samples of the target ({})",
                        first_line(&self.log)
                    )),
                    None,
                )
            }
            Err(e) => {
                return (
                    FlameInfo::missing(format!("cannot fold perf's stacks: {e}")),
                    None,
                )
            }
        };
        let weight: u64 = folded
            .lines()
            .filter_map(|l| l.rsplit_once(' ')?.1.parse::<u64>().ok())
            .sum();
        let _ = std::fs::remove_file(&self.data);
        match draw(&folded, title, svg) {
            Ok(()) => (
                FlameInfo {
                    file: Some(svg.display().to_string()),
                    why_not: None,
                    weight,
                },
                Some(folded),
            ),
            Err(e) => (
                FlameInfo::missing(format!("cannot draw the flame graph: {e}")),
                Some(folded),
            ),
        }
    }
}
