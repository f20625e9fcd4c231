//! Watching a process tree in the background while something else drives it: the
//! suite runner starts a target, hands its pid to a [`Watcher`], applies the workload,
//! and asks the watcher for the samples and the summary at the end. The watcher reaps
//! only the target and the orphans re-parented to strainline, so that commands the runner
//! waits for itself (a verify step, a build) are left to it.
//!
//! A soak may last weeks: every sample goes to a *sink* (the results store) once a
//! second as the run goes, and the copy kept in memory for analysis is thinned to at
//! most [`KEPT`] points, so strainline's own memory stays flat.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::threads::{Tally, ThreadReader};
use super::{Ending, Sampler, SamplerConfig};
use crate::measure::{ExitInfo, MonitorSummary, Sample};
use crate::observe;
use crate::os::cgroup::Cgroup;
use crate::os::process;

/// Threads and per-process CPU are read at most this often (RSS and CPU every tick).
pub const DETAIL_PERIOD: Duration = Duration::from_millis(250);
/// VmHWM, context switches, FDs and I/O, the costliest reads, at most this often.
pub const STATUS_PERIOD: Duration = Duration::from_secs(1);

/// Samples kept in memory at most; beyond, every other one is dropped.
pub const KEPT: usize = 20_000;

/// Where every sample goes as the run goes.
pub type Sink = Box<dyn FnMut(&[Sample]) + Send>;

/// What the watcher shares with the runner while it runs.
#[derive(Default)]
pub struct Shared {
    /// How the root ended, once it has.
    pub root_exit: Option<ExitInfo>,
    /// The tree's live processes at the last sample: (pid, parent).
    pub tree: Vec<(u32, u32)>,
    /// The root exited 0 leaving processes in the tree, on its own.
    pub daemonised: bool,
    /// strainline has begun stopping the tree: an exit from now on is the stop's.
    pub stopping: bool,
    /// The samples, thinned evenly to at most [`KEPT`].
    pub samples: Vec<Sample>,
    /// The tree's thread states summed since the watch began (none from an agent).
    pub threads: Tally,
    /// One sample in `stride` is kept.
    stride: u64,
    seen: u64,
}

impl Shared {
    /// Keeps a sample (thinned evenly past [`KEPT`]).
    pub fn keep(&mut self, s: Sample) {
        self.seen += 1;
        if !self.seen.is_multiple_of(self.stride.max(1)) {
            return;
        }
        self.samples.push(s);
        if self.samples.len() >= KEPT {
            let mut i = 0;
            self.samples.retain(|_| {
                i += 1;
                i % 2 == 0
            });
            self.stride = self.stride.max(1) * 2;
        }
    }
}

/// Which exited processes a tick reaps.
#[derive(Debug, Clone, Copy)]
pub enum Reap {
    /// Every exited child of strainline (`strainline monitor` owns them all).
    All,
    /// Only the root and the orphans re-parented to strainline (`me`): commands a suite
    /// runner waits for itself are left to it.
    Adopted { me: u32 },
}

/// One tick of watching a tree, the same for `strainline monitor` and the suite
/// runner's background watcher: reap what exited (their `ru_maxrss` and CPU go to the
/// sampler), note the root's exit, take a sample.
pub fn tick(sampler: &mut Sampler, root: u32, reap: Reap) -> (Sample, Option<ExitInfo>) {
    // A tree that did not run ended nothing: no wait system call.
    let reaped = match reap {
        _ if !sampler.may_have_ended() => Vec::new(),
        Reap::All => process::reap_exited(),
        Reap::Adopted { me } => {
            let mut mine = sampler.children_of(me);
            if !mine.contains(&root) {
                mine.push(root);
            }
            process::reap_these(&mine)
        }
    };
    let mut root_exit = None;
    for (pid, r) in reaped {
        sampler.on_reaped(pid, r);
        if pid == root {
            root_exit = Some(ExitInfo {
                code: r.exit,
                signal: r.signal,
            });
        }
    }
    (sampler.sample(), root_exit)
}

/// Batches samples to a sink at most once per [`FLUSH_EVERY`]: a crash loses at most
/// that much, and the store is not written on every tick. The sink's error (a store
/// that went away) is the caller's to act on.
pub struct Flusher<F: FnMut(&[Sample]) -> crate::error::Result<()>> {
    sink: F,
    pending: Vec<Sample>,
    last: Instant,
}

/// Samples reach the sink at least this often.
pub const FLUSH_EVERY: Duration = Duration::from_secs(1);

impl<F: FnMut(&[Sample]) -> crate::error::Result<()>> Flusher<F> {
    pub fn new(sink: F) -> Flusher<F> {
        Flusher {
            sink,
            pending: Vec::new(),
            last: Instant::now(),
        }
    }

    pub fn push(&mut self, s: Sample) -> crate::error::Result<()> {
        self.pending.push(s);
        if self.last.elapsed() >= FLUSH_EVERY {
            self.flush()?;
        }
        Ok(())
    }

    pub fn flush(&mut self) -> crate::error::Result<()> {
        let r = (self.sink)(&self.pending);
        self.pending.clear();
        self.last = Instant::now();
        r
    }
}

/// How a watcher whose sampler runs elsewhere (an agent on the target's host) ends:
/// stop it there and get its summary (`None` when it cannot be had: the agent lost).
pub type RemoteEnd = Box<dyn FnOnce() -> Option<MonitorSummary> + Send>;

pub struct Watcher {
    stop: Arc<AtomicBool>,
    pub shared: Arc<Mutex<Shared>>,
    /// A sampler on another host: what ends it (its samples arrive in `shared`).
    remote: Option<RemoteEnd>,
    /// Taken by [`Watcher::finish`]; a watcher dropped without it (a target that never
    /// became ready) still stops its thread, and so removes its cgroup.
    thread: Option<std::thread::JoinHandle<Sampler>>,
    pub started: Instant,
    interval: Duration,
}

impl Watcher {
    /// Watches a process strainline did not start (and its descendants): no cgroup, no
    /// adoption of strainline's own children.
    pub fn attach(pid: u32, interval: Duration) -> Watcher {
        Watcher::watch(pid, None, interval, None, false, None)
    }

    /// [`Watcher::attach`] for the target of a run: `observer` is told of its samples.
    pub fn attach_target(pid: u32, interval: Duration, observer: observe::Shared) -> Watcher {
        Watcher::watch(pid, None, interval, None, false, Some(observer))
    }

    /// A watcher whose samples another thread puts in `shared` as they arrive from a
    /// sampler elsewhere (an agent); `end` stops that sampler and returns its summary.
    pub fn remote(shared: Arc<Mutex<Shared>>, interval: Duration, end: RemoteEnd) -> Watcher {
        Watcher {
            stop: Arc::new(AtomicBool::new(false)),
            shared,
            remote: Some(end),
            thread: None,
            started: Instant::now(),
            interval,
        }
    }

    /// Starts sampling the tree of `root`, a child of strainline, every `interval`;
    /// every sample also goes to `sink`, and `observer` is told of it.
    pub fn start(
        root: u32,
        cgroup: Option<Arc<Cgroup>>,
        interval: Duration,
        sink: Option<Sink>,
        observer: observe::Shared,
    ) -> Watcher {
        Watcher::watch(root, cgroup, interval, sink, true, Some(observer))
    }

    fn watch(
        root: u32,
        cgroup: Option<Arc<Cgroup>>,
        interval: Duration,
        mut sink: Option<Sink>,
        adopt: bool,
        observer: Option<observe::Shared>,
    ) -> Watcher {
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
                adopter: adopt.then_some(me),
                detail_every: every(DETAIL_PERIOD),
                status_every: every(STATUS_PERIOD),
                top_n: 3,
            },
            cgroup,
            started,
        );
        let (stop2, shared2) = (stop.clone(), shared.clone());
        // The suite's stream is best effort: the case is stored whole when it ends.
        let mut flusher = sink.take().map(|mut sink| {
            Flusher::new(move |samples: &[Sample]| {
                sink(samples);
                Ok(())
            })
        });
        let thread = std::thread::spawn(move || {
            let mut next = Instant::now();
            let mut states = ThreadReader::default();
            loop {
                let (s, exit) = tick(&mut sampler, root, Reap::Adopted { me });
                if let Some(o) = &observer {
                    o.sample(&s);
                }
                if let Some(f) = flusher.as_mut() {
                    let _ = f.push(s.clone());
                }
                let tree = sampler.members();
                let now = Instant::now();
                let read = states.due(now)
                    && states.tick(&sampler.thread_procs(), sampler.tree_cpu_usec(), now);
                if read {
                    let (parked, ran) = states.parked_and_ran();
                    sampler.on_threads(parked, &ran);
                }
                if let Some(o) = observer.as_ref().filter(|_| read) {
                    o.threads(&states.tally);
                }
                let mut shared = shared2.lock().unwrap();
                if read {
                    shared.threads.clone_from(&states.tally);
                }
                if let Some(e) = exit {
                    shared.daemonised = e.code == Some(0) && !tree.is_empty() && !shared.stopping;
                    shared.root_exit = Some(e);
                }
                // A process strainline attached to is not its child: its end is seen as
                // its absence (by pid and start time, so a reused pid is not it).
                if !adopt && shared.root_exit.is_none() && !tree.iter().any(|t| t.0 == root) {
                    shared.root_exit = Some(ExitInfo {
                        code: None,
                        signal: None,
                    });
                }
                shared.tree = tree;
                shared.keep(s);
                drop(shared);
                if stop2.load(Ordering::Relaxed) {
                    if let Some(f) = flusher.as_mut() {
                        let _ = f.flush();
                    }
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
            remote: None,
            thread: Some(thread),
            started,
            interval,
        }
    }

    /// How the root ended, if it has.
    pub fn root_exit(&self) -> Option<ExitInfo> {
        self.shared.lock().unwrap().root_exit.clone()
    }

    /// Whether the root exited 0 leaving processes in the tree, on its own.
    pub fn daemonised(&self) -> bool {
        self.shared.lock().unwrap().daemonised
    }

    /// strainline begins stopping the tree: the root's exit from now on is not a
    /// daemon's launcher returning (a server leaving a child when asked to stop).
    pub fn stopping(&self) {
        self.shared.lock().unwrap().stopping = true;
    }

    /// The tree's live processes at the last sample: (pid, parent).
    pub fn tree(&self) -> Vec<(u32, u32)> {
        self.shared.lock().unwrap().tree.clone()
    }

    /// Stops watching and returns the summary and every sample.
    pub fn finish(mut self, command: Vec<String>, status: &str) -> (MonitorSummary, Vec<Sample>) {
        if let Some(end) = self.remote.take() {
            let summary = end();
            let shared = std::mem::take(&mut *self.shared.lock().unwrap());
            // Lost with its agent: no figures (the samples that arrived are kept).
            let summary = summary.unwrap_or_else(|| {
                let sampler = Sampler::new(
                    SamplerConfig {
                        root: 0,
                        adopter: None,
                        detail_every: 1,
                        status_every: 1,
                        top_n: 0,
                    },
                    None,
                    self.started,
                );
                sampler.finish(Ending {
                    command: command.clone(),
                    label: None,
                    exit: ExitInfo {
                        code: None,
                        signal: None,
                    },
                    status: "lost: the agent watching it stopped answering".into(),
                    interval_seconds: self.interval.as_secs_f64(),
                    overhead_cpu_seconds: 0.0,
                    leftover_processes_stopped: 0,
                })
            });
            return (summary, shared.samples);
        }
        let sampler = self.stop_thread().expect("finish runs once");
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

    fn stop_thread(&mut self) -> Option<Sampler> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .take()
            .map(|t| t.join().expect("the watcher thread"))
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        // The sampler owns the tree's cgroup: dropping it removes the group.
        drop(self.stop_thread());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(t: f64) -> Sample {
        Sample {
            t,
            rss_bytes: 0,
            cpu_cores: 0.0,
            threads: 0,
            fds: 0,
            read_bytes: 0,
            write_bytes: 0,
            ctx_switches: 0,
            processes: 0,
            top: Vec::new(),
        }
    }

    #[test]
    fn the_kept_copy_stays_bounded_and_evenly_spread() {
        let mut s = Shared::default();
        for i in 0..(KEPT * 5) {
            s.keep(sample(i as f64));
        }
        assert!(s.samples.len() < KEPT);
        assert!(s.samples.len() > KEPT / 4);
        // Evenly spaced: every gap is the same.
        let gaps: Vec<f64> = s.samples.windows(2).map(|w| w[1].t - w[0].t).collect();
        assert!(gaps.iter().all(|g| *g == gaps[0]), "{:?}", &gaps[..5]);
        assert!(s.samples.last().unwrap().t > (KEPT * 4) as f64);
    }
}
