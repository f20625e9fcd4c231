//! Watching a process tree in the background while something else drives it: the
//! suite runner starts a target, hands its pid to a [`Watcher`], applies the workload,
//! and asks the watcher for the samples and the summary at the end. The watcher reaps
//! only the target and the orphans re-parented to strainline, so that commands the runner
//! waits for itself (a verify step, a build) are left to it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::cgroup::Cgroup;
use super::{Ending, Sampler, SamplerConfig};
use crate::measure::{ExitInfo, MonitorSummary, Sample};
use crate::target::process;

/// What the watcher shares with the runner while it runs.
#[derive(Default)]
pub struct Shared {
    /// How the root ended, once it has.
    pub root_exit: Option<ExitInfo>,
    pub samples: Vec<Sample>,
}

pub struct Watcher {
    stop: Arc<AtomicBool>,
    pub shared: Arc<Mutex<Shared>>,
    thread: std::thread::JoinHandle<Sampler>,
    pub started: Instant,
    interval: Duration,
}

impl Watcher {
    /// Starts sampling `root`'s tree every `interval`.
    pub fn start(root: u32, cgroup: Option<Cgroup>, interval: Duration) -> Watcher {
        let stop = Arc::new(AtomicBool::new(false));
        let shared = Arc::new(Mutex::new(Shared::default()));
        let started = Instant::now();
        let me = std::process::id();
        let every = |period: Duration| {
            (period.as_secs_f64() / interval.as_secs_f64())
                .ceil()
                .max(1.0) as u64
        };
        let mut sampler = Sampler::new(
            SamplerConfig {
                root,
                adopter: Some(me),
                detail_every: every(Duration::from_millis(250)),
                status_every: every(Duration::from_secs(1)),
                top_n: 3,
            },
            cgroup,
            started,
        );
        let (stop2, shared2) = (stop.clone(), shared.clone());
        let thread = std::thread::spawn(move || {
            let mut next = Instant::now();
            loop {
                let mut mine = sampler.children_of(me);
                if !mine.contains(&root) {
                    mine.push(root);
                }
                for (pid, r) in process::reap_these(&mine) {
                    sampler.on_reaped(pid, r);
                    if pid == root {
                        shared2.lock().unwrap().root_exit = Some(ExitInfo {
                            code: r.exit,
                            signal: r.signal,
                        });
                    }
                }
                let s = sampler.sample();
                shared2.lock().unwrap().samples.push(s);
                if stop2.load(Ordering::Relaxed) {
                    return sampler;
                }
                next += interval;
                let now = Instant::now();
                if next > now {
                    std::thread::sleep(next - now);
                } else {
                    next = now;
                }
            }
        });
        Watcher {
            stop,
            shared,
            thread,
            started,
            interval,
        }
    }

    /// How the root ended, if it has.
    pub fn root_exit(&self) -> Option<ExitInfo> {
        self.shared.lock().unwrap().root_exit.clone()
    }

    /// Stops watching and returns the summary and every sample.
    pub fn finish(self, command: Vec<String>, status: &str) -> (MonitorSummary, Vec<Sample>) {
        self.stop.store(true, Ordering::Relaxed);
        let sampler = self.thread.join().expect("the watcher thread");
        let shared = std::mem::take(&mut *self.shared.lock().unwrap());
        let exit = shared.root_exit.unwrap_or(ExitInfo {
            code: None,
            signal: None,
        });
        let summary = sampler.finish(Ending {
            command,
            label: None,
            exit,
            status: status.to_string(),
            interval_seconds: self.interval.as_secs_f64(),
            overhead_cpu_seconds: 0.0,
            leftover_processes_stopped: 0,
        });
        (summary, shared.samples)
    }
}
