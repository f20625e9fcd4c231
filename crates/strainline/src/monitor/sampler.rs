//! One tick of the monitor: find the tree's processes, read each one, and add them up
//! into a [`Sample`]. Reads are tiered by cost so that a 10 ms interval stays
//! affordable: RSS (and the tree's CPU) every tick; threads and per-process CPU every
//! `detail_every` ticks; VmHWM, context switches, open FDs and I/O every `status_every`.
//! With a cgroup, even the per-tick RSS reads are skipped while the tree's memory charge
//! stands still, so idle processes cost almost nothing between detail reads. Exact figures that sampling could miss come from the
//! kernel instead: VmHWM, `ru_maxrss` of reaped processes, and the cgroup's counters.

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use super::procfs::{self, kernel_units, Io, ProcFiles, Stat};
use super::tree::{new_descendants, Outsiders};
use crate::measure::{
    CpuSummary, ExitInfo, MonitorSummary, Overhead, Peak, PeakSource, ProcessRecord, Sample,
    TopProcess,
};
use crate::os::cgroup::{Cgroup, PeakFile};
use crate::os::proc_events::{Event, ProcEvents};
use crate::os::process::Reaped;
use std::sync::Arc;

/// The share of the monitor's time that reading PSS may take. `smaps_rollup` walks a
/// process's page tables: ~100 µs for a compiler, milliseconds for a JVM of gigabytes.
/// A churning tree (a build's compilers, each new process read once) spent 0.7% of a
/// core on it alone at one reading a second; past the budget, the tree's PSS is summed
/// at fewer status ticks (its peak is the highest of the sums taken).
pub const PSS_BUDGET: f64 = 0.002;

struct Tracked {
    files: ProcFiles,
    last: Stat,
    io: Io,
    fds: u64,
    ctx_switches: u64,
    hwm_bytes: u64,
    /// Proportional set size at the last status tick, when the kernel gives it.
    pss_bytes: Option<u64>,
    /// Its resident pages when its PSS was read: PSS is read again once they moved.
    rss_at_pss: u64,
    /// Children of this process that the sampler saw end while it lived: their CPU
    /// (their own and their reaped children's) and their largest peak.
    children_seen: (f64, u64),
    record: ProcessRecord,
}

/// What one tick reads of each member.
#[derive(Clone, Copy)]
struct Reads {
    /// `stat` (else `statm` when `rss`).
    full_stat: bool,
    rss: bool,
    /// `status`, `io`, `fd/`.
    status: bool,
    /// `smaps_rollup` of every member (`pss`), or of those whose RSS moved since their
    /// last read or that were not read yet (`pss_due`).
    pss: bool,
    pss_due: bool,
}

/// What the sampler is told at start.
pub struct SamplerConfig {
    /// The process whose tree is watched.
    pub root: u32,
    /// Set when strainline is the child subreaper of the tree: orphans re-parented to it
    /// are members.
    pub adopter: Option<u32>,
    /// Read `stat` (threads, per-process CPU) every this many ticks.
    pub detail_every: u64,
    /// Read `status` (VmHWM, context switches), I/O and FDs every this many ticks.
    pub status_every: u64,
    /// How many processes each sample lists in its top list.
    pub top_n: usize,
}

/// How a monitored run ended, for [`Sampler::finish`].
pub struct Ending {
    pub command: Vec<String>,
    pub label: Option<String>,
    pub exit: ExitInfo,
    /// `completed` or `interrupted`.
    pub status: String,
    pub interval_seconds: f64,
    /// CPU seconds strainline itself used while monitoring.
    pub overhead_cpu_seconds: f64,
    pub leftover_processes_stopped: u64,
}

pub struct Sampler {
    cfg: SamplerConfig,
    cgroup: Option<Arc<Cgroup>>,
    /// Whether the cgroup gives the tree's CPU time.
    cgroup_cpu: bool,
    /// The cgroup's memory charge at the previous tick.
    last_charge: Option<u64>,
    start: Instant,
    live: HashMap<u32, Tracked>,
    outsiders: Outsiders,
    finished: Vec<ProcessRecord>,
    /// The pids of `finished`: a zombie still listed by the cgroup is not tracked again.
    finished_pids: HashSet<u32>,
    reaped: HashMap<u32, Reaped>,
    /// CPU ticks of processes that vanished with no member left to account for them.
    vanished_cpu_ticks: u64,
    /// CPU seconds of processes strainline reaped (from wait4).
    reaped_cpu_seconds: f64,
    /// Cumulative I/O and context switches of processes that are gone.
    gone_io: Io,
    gone_ctx: u64,
    prev_cpu: Option<(f64, f64)>,
    ticks: u64,
    samples: Vec<(f64, f64)>,
    peak_tree: (u64, f64),
    /// The highest sum of PSS over the tree (status ticks), and when.
    peak_tree_pss: Option<(u64, f64)>,
    /// How many tree PSS sums were taken (at most one a second).
    pss_sums: u64,
    /// Whether the tree's membership changed since PSS was last read: a process that
    /// forked, exited or mapped what others map changes everyone's share.
    pss_stale: bool,
    /// Single-threaded members parked in a wait for a child (from the thread-state
    /// reader): their RSS is not re-read every tick.
    parked: HashSet<u32>,
    /// Members a child of which ended since they were last seen running: not parked
    /// again until they have been seen to run.
    woken: HashSet<u32>,
    /// The kernel's last allocated pid at the last listing.
    last_pid: Option<u32>,
    /// The tree's CPU counter (the cgroup's `usage_usec`) read at the start of this
    /// tick, and when the pids, `stat` and `status` files were last read: a tree whose
    /// counter has not moved since ran nothing, so forked nothing and changed none of
    /// them.
    tree_cpu: Option<u64>,
    /// The counter at the sample before: the tree ran in the last tick if it moved.
    tree_cpu_before: Option<u64>,
    /// A process of the tree was seen to end (the root's pidfd): reap at the next tick.
    end_seen: bool,
    cpu_at_listing: Option<u64>,
    cpu_at_stat: Option<u64>,
    cpu_at_status: Option<u64>,
    /// The last tick at which the members were not visited (nothing ran, nothing was
    /// to be read): every live member was alive then.
    all_seen_at: f64,
    /// Seconds spent reading `smaps_rollup` so far, held to [`PSS_BUDGET`].
    pss_seconds: f64,
    max_processes: u64,
    max_threads: u64,
    max_fds: u64,
    last: Option<Sample>,
    /// The kernel's process events, where permitted: forks tell the new members, so
    /// the tree is not listed (see [`Sampler::discover`]).
    events: Option<ProcEvents>,
    /// Why there are none (said in the summary).
    events_unavailable: Option<&'static str>,
    /// The next discovery lists the tree: the first, and one after events were lost.
    scan_due: bool,
    /// How many times the kernel dropped events and a listing made up for them.
    overflows: u64,
}

impl Sampler {
    pub fn new(cfg: SamplerConfig, cgroup: Option<Arc<Cgroup>>, start: Instant) -> Sampler {
        let (events, events_unavailable) = match ProcEvents::open() {
            Ok(e) => (Some(e), None),
            Err(why) => (None, Some(why.describe())),
        };
        Sampler {
            events,
            events_unavailable,
            scan_due: true,
            overflows: 0,
            cfg,
            cgroup_cpu: cgroup.as_ref().and_then(|c| c.cpu_usage_usec()).is_some(),
            cgroup,
            last_charge: None,
            start,
            live: HashMap::new(),
            outsiders: Outsiders::default(),
            finished: Vec::new(),
            finished_pids: HashSet::new(),
            reaped: HashMap::new(),
            vanished_cpu_ticks: 0,
            reaped_cpu_seconds: 0.0,
            gone_io: Io::default(),
            gone_ctx: 0,
            prev_cpu: None,
            ticks: 0,
            samples: Vec::new(),
            peak_tree: (0, 0.0),
            peak_tree_pss: None,
            pss_sums: 0,
            pss_stale: true,
            pss_seconds: 0.0,
            all_seen_at: 0.0,
            last_pid: None,
            tree_cpu: None,
            tree_cpu_before: None,
            end_seen: false,
            cpu_at_listing: None,
            cpu_at_stat: None,
            cpu_at_status: None,
            parked: HashSet::new(),
            woken: HashSet::new(),
            max_processes: 0,
            max_threads: 0,
            max_fds: 0,
            last: None,
        }
    }

    pub fn cgroup(&self) -> Option<&Cgroup> {
        self.cgroup.as_deref()
    }

    /// The tree's CPU counter at the last sample, microseconds (with a cgroup): the
    /// thread-state reader skips the threads of a tree that has not run since its last
    /// reading.
    pub fn tree_cpu_usec(&self) -> Option<u64> {
        self.tree_cpu
    }

    /// Whether a process of the tree may have ended unreaped since the last tick's
    /// reaping: the tree ran between the last two samples (an end after the last
    /// sample moves the next one, so it is reaped a tick later, as an end just after a
    /// reaping always was), or an end was seen. Always, without the counter.
    pub fn may_have_ended(&mut self) -> bool {
        std::mem::take(&mut self.end_seen)
            || self.tree_cpu.is_none()
            || self.tree_cpu != self.tree_cpu_before
    }

    /// The root's end was seen (its pidfd became readable): reap at the next tick.
    pub fn end_seen(&mut self) {
        self.end_seen = true;
    }

    /// Whether the tree may have run since the counter read `at` (always, without one).
    fn ran_since(&self, at: Option<u64>) -> bool {
        self.tree_cpu.is_none() || self.tree_cpu != at
    }

    /// Pids of the live members of the tree.
    pub fn live_pids(&self) -> Vec<u32> {
        self.live.keys().copied().collect()
    }

    /// Whether `pid`, a child of strainline, is one it started itself (another unit's
    /// command, the guardian, perf) rather than an orphan it adopted from this tree.
    fn born_child(&self, pid: u32, ppid: u32) -> bool {
        Some(ppid) == self.cfg.adopter && pid != self.cfg.root && crate::os::process::born_here(pid)
    }

    /// The live members now: (pid, parent).
    pub fn members(&self) -> Vec<(u32, u32)> {
        self.live
            .iter()
            .map(|(&pid, p)| (pid, p.last.ppid))
            .collect()
    }

    /// The live members with their thread counts (as of their last `stat`), for the
    /// thread-state reader.
    pub fn thread_procs(&self) -> Vec<super::threads::Proc> {
        self.live
            .iter()
            .map(|(&pid, p)| super::threads::Proc {
                pid,
                threads: Some(p.last.num_threads),
            })
            .collect()
    }

    /// What the thread-state reader saw at its last reading: the processes parked in a
    /// wait for a child, and those that ran (see [`ThreadReader::parked_and_ran`]).
    ///
    /// [`ThreadReader::parked_and_ran`]: super::threads::ThreadReader::parked_and_ran
    pub fn on_threads(&mut self, parked: Vec<u32>, ran: &[u32]) {
        for pid in ran {
            self.woken.remove(pid);
        }
        self.parked = parked
            .into_iter()
            .filter(|pid| !self.woken.contains(pid))
            .collect();
    }

    /// Live members whose parent is `parent` (for strainline: the ones it must reap).
    pub fn children_of(&self, parent: u32) -> Vec<u32> {
        self.live
            .iter()
            .filter(|(_, p)| p.last.ppid == parent)
            .map(|(pid, _)| *pid)
            .collect()
    }

    /// Records what wait4 said about a process strainline reaped.
    pub fn on_reaped(&mut self, pid: u32, r: Reaped) {
        self.reaped.insert(pid, r);
    }

    fn elapsed(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }

    fn track(&mut self, pid: u32, t: f64) {
        let Ok(mut files) = ProcFiles::open(pid) else {
            return;
        };
        let Ok(stat) = files.stat() else { return };
        // Its parent forked it: the parent ran, and is no longer parked.
        if self.parked.remove(&stat.ppid) {
            self.woken.insert(stat.ppid);
        }
        let record = ProcessRecord {
            pid,
            ppid: stat.ppid,
            name: stat.comm.clone(),
            cmdline: files.cmdline(),
            first_seen: t,
            last_seen: t,
            peak_rss_sampled: 0,
            peak_rss_exact: 0,
            cpu_seconds: 0.0,
            children_cpu_seconds: 0.0,
            children_peak_rss: 0,
            exit: None,
        };
        self.live.insert(
            pid,
            Tracked {
                files,
                last: stat,
                io: Io::default(),
                fds: 0,
                ctx_switches: 0,
                hwm_bytes: 0,
                pss_bytes: None,
                rss_at_pss: 0,
                children_seen: (0.0, 0),
                record,
            },
        );
    }

    /// Finds the processes that joined the tree since the last tick. With the kernel's
    /// process events, from the forks of members (the tree is listed only at the first
    /// tick and after the kernel dropped events); else by listing the cgroup's
    /// processes, or every process of `/proc`, when a pid was allocated since.
    fn discover(&mut self, t: f64) {
        if self.live.is_empty() && self.finished.is_empty() {
            self.track(self.cfg.root, t);
        }
        if self.events.is_some() {
            return self.discover_by_events(t);
        }
        // Nothing of the tree ran since the last listing: nothing of it forked (and
        // no stray joined: this is a cgroup's count, and strainline's own commands are
        // not in it).
        if !self.ran_since(self.cpu_at_listing) {
            return;
        }
        self.cpu_at_listing = self.tree_cpu;
        // No pid allocated since the last listing: no process can have joined.
        let last_pid = procfs::last_pid();
        let listed = last_pid.is_some() && last_pid == self.last_pid;
        self.last_pid = last_pid;
        if listed {
            self.drop_strays();
            return;
        }
        self.scan(t);
    }

    /// Discovery from the kernel's events: drained when the tree ran since the last
    /// drain (a tree that ran nothing forked nothing), and at every detail tick so the
    /// machine's other events do not fill the socket. A fork whose parent is a member
    /// (or strainline, adopting) brings its child in; an exec renames a member; an exit of a member is read at
    /// once while it may still be a zombie (its final CPU times), and reaped at the
    /// next tick. Events were lost (the socket overflowed): the tree is listed.
    fn discover_by_events(&mut self, t: f64) {
        let detail = self.ticks.is_multiple_of(self.cfg.detail_every.max(1));
        if !self.scan_due && !detail && !self.ran_since(self.cpu_at_listing) {
            return;
        }
        self.cpu_at_listing = self.tree_cpu;
        let Some(drained) = self.events.as_mut().map(|e| e.drain()) else {
            return;
        };
        if drained.overflow {
            self.overflows += 1;
            self.scan_due = true;
        }
        if std::mem::take(&mut self.scan_due) {
            self.scan(t);
        }
        let mut born: HashSet<u32> = HashSet::new();
        for e in drained.events {
            match e {
                Event::Fork {
                    parent_tgid,
                    child_pid,
                    child_tgid,
                } if child_pid == child_tgid => {
                    let parent_in = self.live.contains_key(&parent_tgid)
                        || born.contains(&parent_tgid)
                        || Some(parent_tgid) == self.cfg.adopter;
                    if !parent_in || self.live.contains_key(&child_pid) {
                        continue;
                    }
                    born.insert(child_pid);
                    self.track(child_pid, t);
                    // A pid recycled since the fork (the child ended, was reaped, and
                    // its pid went to another process) is not the child.
                    let recycled = self.live.get(&child_pid).is_some_and(|p| {
                        let pp = p.last.ppid;
                        pp != parent_tgid
                            && !self.live.contains_key(&pp)
                            && Some(pp) != self.cfg.adopter
                    });
                    if recycled {
                        if let Some(p) = self.live.remove(&child_pid) {
                            self.outsiders.insert(child_pid, p.last.start_ticks);
                        }
                    }
                }
                // Named by its new command at once: a child seen at its fork carries
                // its parent's name until then, and may end before a `stat` read. One
                // that joined in this drain was read after every event of it: as it is.
                Event::Exec { tgid, .. } if !born.contains(&tgid) => {
                    if let Some(p) = self.live.get_mut(&tgid) {
                        if let Ok(st) = p.files.stat() {
                            p.record.name = st.comm.clone();
                            p.record.cmdline = p.files.cmdline();
                            p.last = st;
                        }
                    }
                }
                Event::Exit { pid, tgid } if pid == tgid && !born.contains(&pid) => {
                    if let Some(p) = self.live.get_mut(&pid) {
                        self.end_seen = true;
                        // Its final CPU times, if its parent has not reaped it yet.
                        if let Ok(st) = p.files.stat() {
                            p.last.cpu_ticks = st.cpu_ticks;
                            p.last.children_cpu_ticks = st.children_cpu_ticks;
                        }
                    }
                }
                _ => {}
            }
        }
        self.drop_strays();
    }

    /// Lists the tree's processes: the cgroup's, or those of `/proc` that descend
    /// from a member.
    fn scan(&mut self, t: f64) {
        if let Some(pids) = self
            .cgroup
            .as_ref()
            .filter(|c| c.lists_processes())
            .and_then(|c| c.pids())
        {
            for pid in pids {
                if !self.live.contains_key(&pid) && !self.finished_pids.contains(&pid) {
                    self.track(pid, t);
                }
            }
            return;
        }
        let Ok(all) = procfs::list_pids() else { return };
        let mut candidates = Vec::new();
        let mut starts = HashMap::new();
        for &pid in &all {
            if self.live.contains_key(&pid) || self.outsiders.contains_pid(pid) {
                continue;
            }
            if let Some(st) = procfs::read_stat(pid) {
                if self.born_child(pid, st.ppid) {
                    self.outsiders.insert(pid, st.start_ticks);
                    continue;
                }
                candidates.push((pid, st.ppid));
                starts.insert(pid, st.start_ticks);
            }
        }
        let mut members: HashSet<u32> = self.live.keys().copied().collect();
        members.extend(self.cfg.adopter);
        let joined: HashSet<u32> = new_descendants(&members, &candidates).into_iter().collect();
        for (pid, _) in candidates {
            if joined.contains(&pid) {
                self.track(pid, t);
            } else {
                self.outsiders.insert(pid, starts[&pid]);
            }
        }
        self.drop_strays();
        let live: HashSet<u32> = all.into_iter().collect();
        self.outsiders.retain_live(&live);
    }

    /// A command strainline started can be seen before it is noted as its own (the
    /// pid is known once it runs): it leaves the tree when noted.
    fn drop_strays(&mut self) {
        let strays: Vec<u32> = self
            .live
            .iter()
            .filter(|(&pid, p)| self.born_child(pid, p.last.ppid))
            .map(|(&pid, _)| pid)
            .collect();
        for pid in strays {
            if let Some(p) = self.live.remove(&pid) {
                self.outsiders.insert(pid, p.last.start_ticks);
            }
        }
    }

    /// Takes one sample of the tree.
    pub fn sample(&mut self) -> Sample {
        let t = self.elapsed();
        // Read first: every file read below is at least as new as this figure.
        self.tree_cpu_before = self.tree_cpu;
        self.tree_cpu = self
            .cgroup
            .as_ref()
            .filter(|_| self.cgroup_cpu)
            .and_then(|c| c.cpu_usage_usec());
        let members_before = self.live.len() + self.finished.len();
        self.discover(t);
        let joined = self.live.len() + self.finished.len() != members_before;
        let units = kernel_units();
        let detail = self.ticks.is_multiple_of(self.cfg.detail_every.max(1));
        let status_tick = self.ticks.is_multiple_of(self.cfg.status_every.max(1));
        self.ticks += 1;
        // With the cgroup's CPU counter, the per-tick read is the cheap `statm`; without
        // it, `stat` is needed every tick for the CPU times. A tree that ran nothing
        // since the last read of `stat` (or `status`, `io`, `fd/`) has not changed them.
        let full_stat = (detail && self.ran_since(self.cpu_at_stat)) || self.tree_cpu.is_none();
        if full_stat {
            self.cpu_at_stat = self.tree_cpu;
        }
        let read_status = status_tick && self.ran_since(self.cpu_at_status);
        if read_status {
            self.cpu_at_status = self.tree_cpu;
        }
        // Between full reads, RSS is re-read only when the cgroup's memory charge moved
        // (or a process joined): a tree that allocated and freed nothing kept its RSS.
        let charge = self.cgroup.as_ref().and_then(|c| c.memory_usage());
        let rss_unchanged = charge.is_some() && charge == self.last_charge && !joined;
        self.last_charge = charge;
        // PSS (`smaps_rollup` walks the page tables) is re-read, within its budget of the
        // monitor's time, for every member when one joined or left, else for those whose
        // RSS moved. A charge that moved while RSS did not is the kernel's (its per-CPU
        // charge caches drained, page cache): on an idle tree of 50 processes it moved
        // every few seconds and each time cost 50 reads of `smaps_rollup`.
        self.pss_stale |= joined;
        let pss_due = status_tick && self.pss_seconds <= PSS_BUDGET * t;
        let read_pss = pss_due && self.pss_stale;
        // Nothing is to be read and no process joined: the members are not visited, and
        // the tree's sums and its top processes are the last sample's.
        let still = !full_stat && !status_tick && rss_unchanged;

        let gone = if still {
            self.all_seen_at = t;
            Vec::new()
        } else {
            self.read_members(
                t,
                Reads {
                    full_stat,
                    rss: !rss_unchanged,
                    status: read_status,
                    pss: read_pss,
                    pss_due,
                },
            )
        };
        if read_pss {
            self.pss_stale = false;
        }
        let still = still && gone.is_empty();
        for pid in gone {
            self.retire(pid);
            self.pss_stale = true;
        }
        let cum_cpu = match self.tree_cpu {
            Some(us) => us as f64 / 1e6,
            None => self.cpu_of_members(),
        };
        let cpu_cores = match self.prev_cpu {
            Some((pt, pc)) if t > pt => ((cum_cpu - pc) / (t - pt)).max(0.0),
            _ => 0.0,
        };
        self.prev_cpu = Some((t, cum_cpu.max(self.prev_cpu.map_or(0.0, |p| p.1))));
        self.samples.push((t, cum_cpu));
        if let Some(last) = self.last.as_mut().filter(|_| still) {
            last.t = t;
            last.cpu_cores = cpu_cores;
            return last.clone();
        }

        let s = self.sum_tree(t, cpu_cores);
        if s.rss_bytes > self.peak_tree.0 {
            self.peak_tree = (s.rss_bytes, t);
        }
        if pss_due {
            // A process whose PSS cannot be read (it is exiting: a zombie has no
            // mappings; or its smaps are closed to us) counts by its RSS, PSS's upper
            // bound — before, one such process dropped the whole sum, and a build of
            // 15 compilers read 641 KiB against a cgroup peak of 134 MiB.
            let pss: u64 = self
                .live
                .values()
                .map(|p| p.pss_bytes.unwrap_or(p.last.rss_pages * units.page_size))
                .sum();
            self.pss_sums += 1;
            if pss > self.peak_tree_pss.map_or(0, |p| p.0) {
                self.peak_tree_pss = Some((pss, t));
            }
        }
        self.max_processes = self.max_processes.max(s.processes as u64);
        self.max_threads = self.max_threads.max(s.threads);
        self.max_fds = self.max_fds.max(s.fds);
        self.last = Some(s.clone());
        s
    }

    /// Reads what `r` says of every live member at `t`; the pids that are gone.
    fn read_members(&mut self, t: f64, r: Reads) -> Vec<u32> {
        let units = kernel_units();
        let mut gone = Vec::new();
        for (&pid, p) in self.live.iter_mut() {
            let stack_before = p.last.start_stack;
            let read = if r.full_stat {
                p.files.stat().map(|st| p.last = st)
            } else if !r.rss || (self.parked.contains(&pid) && p.last.num_threads == 1) {
                Ok(())
            } else {
                p.files.rss_pages().map(|r| p.last.rss_pages = r)
            };
            if read.is_err() {
                gone.push(pid);
                continue;
            }
            if r.full_stat && (p.last.comm != p.record.name || p.last.start_stack != stack_before) {
                // It called exec since the last read (a forked child seen before its exec
                // keeps its parent's command line until then).
                p.record.name = p.last.comm.clone();
                p.record.cmdline = p.files.cmdline();
            }
            let rss = p.last.rss_pages * units.page_size;
            p.record.last_seen = t;
            p.record.ppid = p.last.ppid;
            p.record.peak_rss_sampled = p.record.peak_rss_sampled.max(rss);
            if r.status {
                if let Some(s) = p.files.status() {
                    p.hwm_bytes = p.hwm_bytes.max(s.hwm_bytes);
                    p.ctx_switches = s.ctx_switches;
                }
                if let Some(io) = p.files.io() {
                    p.io = io;
                }
            }
            // A process not read yet (it joined since the last read) is read now —
            // under churn (a build's compilers) nearly every process is new — and one
            // whose resident pages moved since its last read.
            let moved = p.pss_bytes.is_none() || p.last.rss_pages != p.rss_at_pss;
            if r.pss || (r.pss_due && moved) {
                let began = Instant::now();
                p.pss_bytes = p.files.pss_bytes();
                p.rss_at_pss = p.last.rss_pages;
                self.pss_seconds += began.elapsed().as_secs_f64();
            }
            if r.status {
                if let Some(n) = p.files.fd_count() {
                    p.fds = n;
                }
            }
        }
        gone
    }

    /// The tree's sums over its live members at `t`, and its top processes by RSS.
    fn sum_tree(&self, t: f64, cpu_cores: f64) -> Sample {
        let units = kernel_units();
        let mut s = Sample {
            t,
            rss_bytes: 0,
            cpu_cores,
            threads: 0,
            fds: 0,
            read_bytes: self.gone_io.read_bytes,
            write_bytes: self.gone_io.write_bytes,
            ctx_switches: self.gone_ctx,
            processes: self.live.len() as u32,
            top: Vec::new(),
        };
        for p in self.live.values() {
            s.rss_bytes += p.last.rss_pages * units.page_size;
            s.threads += p.last.num_threads;
            s.fds += p.fds;
            s.read_bytes += p.io.read_bytes;
            s.write_bytes += p.io.write_bytes;
            s.ctx_switches += p.ctx_switches;
        }

        let mut top: Vec<&Tracked> = self.live.values().collect();
        top.sort_by_key(|p| std::cmp::Reverse(p.last.rss_pages));
        s.top = top
            .into_iter()
            .take(self.cfg.top_n)
            .map(|p| TopProcess {
                pid: p.record.pid,
                name: p.record.name.clone(),
                rss_bytes: p.last.rss_pages * units.page_size,
            })
            .collect();
        s
    }

    /// The tree's cumulative CPU seconds from its members' `stat` (without the
    /// cgroup's counter): the live, the vanished and the reaped.
    fn cpu_of_members(&self) -> f64 {
        let units = kernel_units();
        let live: u64 = self
            .live
            .values()
            .map(|p| p.last.cpu_ticks + p.last.children_cpu_ticks)
            .sum();
        (live + self.vanished_cpu_ticks) as f64 / units.clock_ticks as f64 + self.reaped_cpu_seconds
    }

    /// Moves a process that has exited from the live table to the finished list,
    /// keeping its CPU accounted for exactly once.
    fn retire(&mut self, pid: u32) {
        let Some(mut p) = self.live.remove(&pid) else {
            return;
        };
        p.record.last_seen = p.record.last_seen.max(self.all_seen_at);
        self.parked.remove(&pid);
        self.woken.remove(&pid);
        let units = kernel_units();
        let ticks = p.last.cpu_ticks + p.last.children_cpu_ticks;
        let seconds = |ticks: u64| ticks as f64 / units.clock_ticks as f64;
        // Its own figures, and its reaped children's apart: the kernel's cutime/cstime,
        // or what the sampler saw of children that ended, whichever knows more.
        p.record.cpu_seconds = seconds(p.last.cpu_ticks);
        p.record.children_cpu_seconds = seconds(p.last.children_cpu_ticks).max(p.children_seen.0);
        p.record.children_peak_rss = p.children_seen.1;
        p.record.peak_rss_exact = p.hwm_bytes.max(p.record.peak_rss_sampled);
        if let Some(r) = self.reaped.get(&pid) {
            // wait4 gave the final totals, the children it reaped included; the
            // zombie's stat said how much of it was theirs.
            self.reaped_cpu_seconds += r.cpu_seconds;
            if let Some(children) = r.children_cpu_seconds {
                p.record.children_cpu_seconds = p.record.children_cpu_seconds.max(children);
            }
            p.record.cpu_seconds = p
                .record
                .cpu_seconds
                .max(r.cpu_seconds - p.record.children_cpu_seconds);
            // ru_maxrss is the largest of the process and the children it reaped.
            if p.record.peak_rss_exact == 0 {
                p.record.peak_rss_exact = r.maxrss_bytes;
            } else if r.maxrss_bytes > p.record.peak_rss_exact {
                p.record.children_peak_rss = p.record.children_peak_rss.max(r.maxrss_bytes);
            }
            p.record.exit = Some(
                ExitInfo {
                    code: r.exit,
                    signal: r.signal,
                }
                .describe(),
            );
        } else if !self.live.contains_key(&p.last.ppid) {
            // Reaped outside the tree: its last reading is all we will ever know.
            self.vanished_cpu_ticks += ticks;
        }
        // Otherwise its parent, still a member, now counts it in its children's time.
        // Its parent wakes from its wait: its RSS is read every tick again.
        if self.parked.remove(&p.last.ppid) {
            self.woken.insert(p.last.ppid);
        }
        let mut io = p.io;
        if let Some(parent) = self.live.get_mut(&p.last.ppid) {
            let peak = p.record.peak_rss_exact.max(p.record.children_peak_rss);
            parent.children_seen.0 += p.record.cpu_seconds + p.record.children_cpu_seconds;
            parent.children_seen.1 = parent.children_seen.1.max(peak);
            // And in its I/O: the kernel adds a reaped child's to its parent's
            // `/proc/PID/io`. Read the parent now; what it did not take (a parent that
            // let the kernel reap for it) stays counted here. A child seen doing no
            // storage I/O (most of a build's compilers) has nothing to hand over.
            let moved = io.read_bytes > 0 || io.write_bytes > 0;
            if let Some(now) = moved.then(|| parent.files.io()).flatten() {
                if now.read_bytes.saturating_sub(parent.io.read_bytes) >= io.read_bytes {
                    io.read_bytes = 0;
                }
                if now.write_bytes.saturating_sub(parent.io.write_bytes) >= io.write_bytes {
                    io.write_bytes = 0;
                }
                parent.io = now;
            }
        }
        self.gone_io.read_bytes += io.read_bytes;
        self.gone_io.write_bytes += io.write_bytes;
        self.gone_ctx += p.ctx_switches;
        self.finished_pids.insert(p.record.pid);
        self.finished.push(p.record);
    }

    /// Ends the run: retires whatever is left and adds everything up.
    pub fn finish(mut self, end: Ending) -> MonitorSummary {
        let Ending {
            command,
            label,
            exit,
            status,
            interval_seconds,
            overhead_cpu_seconds,
            leftover_processes_stopped,
        } = end;
        let duration = self.elapsed();
        let cgroup_peak = self.cgroup.as_ref().and_then(|c| c.memory_peak());
        let final_cum = self.samples.last().map_or(0.0, |s| s.1);
        for pid in self.live_pids() {
            self.retire(pid);
        }
        self.unseen(&command);
        let (total_cpu, cpu_source) = self.total_cpu(final_cum);
        let window = interval_seconds.max(1.0);
        let max_cores = max_windowed_rate(&self.samples, window).unwrap_or(if duration > 0.0 {
            total_cpu / duration
        } else {
            0.0
        });

        let mut processes = std::mem::take(&mut self.finished);
        processes.sort_by_key(|p| std::cmp::Reverse(p.peak_rss_exact));
        let (peak_rss, tree, tree_pss) = self.peaks(&processes);
        let last = self.last.clone();
        MonitorSummary {
            label,
            command,
            root_pid: self.cfg.root,
            status,
            duration_seconds: duration,
            interval_seconds,
            samples: self.samples.len() as u64,
            exit,
            peak_rss,
            peak_tree_rss_sampled: tree,
            peak_tree_pss_sampled: tree_pss,
            tree_pss_samples: self.pss_sums,
            cgroup_memory_peak: cgroup_peak.map(|(bytes, f)| Peak {
                bytes,
                source: match f {
                    PeakFile::V2MemoryPeak => PeakSource::CgroupV2MemoryPeak,
                    PeakFile::V1MaxUsage => PeakSource::CgroupV1MaxUsage,
                },
                pid: None,
                process: None,
                at: None,
            }),
            cpu: CpuSummary {
                total_seconds: total_cpu,
                avg_cores: if duration > 0.0 {
                    total_cpu / duration
                } else {
                    0.0
                },
                max_cores,
                max_window_seconds: window,
                source: cpu_source.to_string(),
            },
            processes_seen: processes.len() as u64,
            max_processes: self.max_processes,
            max_threads: self.max_threads,
            max_fds: self.max_fds,
            read_bytes: last
                .as_ref()
                .map_or(0, |s| s.read_bytes)
                .max(self.gone_io.read_bytes),
            write_bytes: last
                .as_ref()
                .map_or(0, |s| s.write_bytes)
                .max(self.gone_io.write_bytes),
            ctx_switches: last
                .as_ref()
                .map_or(0, |s| s.ctx_switches)
                .max(self.gone_ctx),
            leftover_processes_stopped,
            overhead: Overhead {
                cpu_seconds: overhead_cpu_seconds,
                percent_of_core: if duration > 0.0 {
                    100.0 * overhead_cpu_seconds / duration
                } else {
                    0.0
                },
                per_tick_us: if self.ticks > 0 {
                    overhead_cpu_seconds * 1e6 / self.ticks as f64
                } else {
                    0.0
                },
            },
            processes,
            threads: None,
            process_events: Some(self.reader()),
        }
    }

    /// Which reader found the tree's processes, as the summary says it.
    fn reader(&self) -> String {
        let scan = if self.cgroup.as_ref().is_some_and(|c| c.lists_processes()) {
            "cgroup.procs listing"
        } else {
            "/proc scan"
        };
        match (&self.events, self.events_unavailable) {
            (Some(_), _) if self.overflows > 0 => format!(
                "kernel (netlink process connector); events lost {} times, made up by a {scan}",
                self.overflows
            ),
            (Some(_), _) => "kernel (netlink process connector)".to_string(),
            (None, Some(why)) => format!("{scan} ({why})"),
            (None, None) => scan.to_string(),
        }
    }

    /// Processes that ended before any sample saw them are known from wait4 alone:
    /// each gets its record (the root's named by `command`).
    fn unseen(&mut self, command: &[String]) {
        let mut unseen: Vec<(u32, Reaped)> = self
            .reaped
            .iter()
            .filter(|(pid, _)| !self.finished_pids.contains(pid))
            .map(|(&pid, &r)| (pid, r))
            .collect();
        unseen.sort_by_key(|u| u.0);
        for (pid, r) in unseen {
            self.reaped_cpu_seconds += r.cpu_seconds;
            let name = if pid == self.cfg.root {
                command.first().cloned().unwrap_or_default()
            } else {
                format!("pid {pid}")
            };
            self.finished.push(ProcessRecord {
                pid,
                ppid: 0,
                name: name.rsplit('/').next().unwrap_or(&name).to_string(),
                cmdline: if pid == self.cfg.root {
                    command.join(" ")
                } else {
                    String::new()
                },
                first_seen: 0.0,
                last_seen: 0.0,
                peak_rss_sampled: 0,
                peak_rss_exact: r.maxrss_bytes,
                // Never sampled: wait4's totals, its children's included, are all there is.
                cpu_seconds: r.cpu_seconds,
                children_cpu_seconds: 0.0,
                children_peak_rss: 0,
                exit: Some(
                    ExitInfo {
                        code: r.exit,
                        signal: r.signal,
                    }
                    .describe(),
                ),
            });
        }
    }

    /// Exact total CPU, seconds, and where it is from: the cgroup's counter, or the
    /// reaped processes' rusage (which includes everything they reaped), or the last
    /// sampled cumulative figure (`final_cum`).
    fn total_cpu(&self, final_cum: f64) -> (f64, &'static str) {
        match self.cgroup.as_ref().and_then(|c| c.cpu_usage_usec()) {
            Some(us) => (us as f64 / 1e6, "cgroup cpu.stat usage_usec"),
            None if self.reaped.contains_key(&self.cfg.root) => (
                (self.reaped_cpu_seconds
                    + self.vanished_cpu_ticks as f64 / kernel_units().clock_ticks as f64)
                    .max(final_cum),
                "rusage of reaped processes (wait4)",
            ),
            None => (final_cum, "/proc/PID/stat utime+stime"),
        }
    }

    /// The run's peaks: the headline (the biggest process's exact peak, or the tree's
    /// sampled sum when larger and from enough samples), the tree's RSS sum and its PSS
    /// sum when known. `processes` biggest first.
    fn peaks(&self, processes: &[ProcessRecord]) -> (Peak, Peak, Option<Peak>) {
        let biggest = processes.first();
        let single = biggest.map(|p| Peak {
            bytes: p.peak_rss_exact,
            source: match (p.exit.is_some(), self.reaped.get(&p.pid)) {
                (true, Some(r)) if r.maxrss_bytes >= p.peak_rss_exact => PeakSource::RuMaxrss,
                _ => PeakSource::VmHwm,
            },
            pid: Some(p.pid),
            process: Some(p.name.clone()),
            at: None,
        });
        let tree = Peak {
            bytes: self.peak_tree.0,
            source: PeakSource::SampledTreeSum,
            pid: None,
            process: None,
            at: Some(self.peak_tree.1),
        };
        // The tree's sum counts shared pages once when PSS is known; the RSS sum counts
        // them once per process that maps them (20 forks of a 200 MiB parent: 4 GiB).
        let tree_pss = self.peak_tree_pss.map(|(bytes, at)| Peak {
            bytes,
            source: PeakSource::SampledTreePss,
            pid: None,
            process: None,
            at: Some(at),
        });
        // A sum from too few samples is a reading, not a peak: it never takes the
        // headline (two PSS sums of a one-second build made a 49 MiB "Peak RSS" once in
        // five runs, a compiler's high-water mark the other four).
        let enough = |n: u64| n >= crate::measure::MIN_PEAK_SAMPLES;
        let tree_best = match &tree_pss {
            Some(pss) => enough(self.pss_sums).then(|| pss.clone()),
            None => enough(self.samples.len() as u64).then(|| tree.clone()),
        };
        let peak_rss = match (single, tree_best) {
            (Some(s), Some(t)) if s.bytes >= t.bytes => s,
            (Some(s), None) => s,
            (_, Some(t)) => t,
            (None, None) => tree_pss.clone().unwrap_or_else(|| tree.clone()),
        };
        (peak_rss, tree, tree_pss)
    }
}

/// The highest average rate of a cumulative series `(t, total)` over any window of at
/// least `window` seconds; `None` when the series is shorter than one window.
pub fn max_windowed_rate(series: &[(f64, f64)], window: f64) -> Option<f64> {
    let mut best: Option<f64> = None;
    let mut j = 0;
    for i in 0..series.len() {
        while j < series.len() && series[j].0 - series[i].0 < window {
            j += 1;
        }
        if j == series.len() {
            break;
        }
        let (t0, c0) = series[i];
        let (t1, c1) = series[j];
        let rate = (c1 - c0) / (t1 - t0);
        best = Some(best.map_or(rate, |b: f64| b.max(rate)));
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windowed_rate_finds_the_busiest_second() {
        // Idle for 2 s, then one core busy for 1 s, sampled every 0.1 s.
        let series: Vec<(f64, f64)> = (0..=40)
            .map(|i| {
                let t = i as f64 * 0.1;
                (t, (t - 2.0).clamp(0.0, 1.0))
            })
            .collect();
        let r = max_windowed_rate(&series, 1.0).unwrap();
        assert!((r - 1.0).abs() < 1e-9, "{r}");
        assert_eq!(max_windowed_rate(&series[..5], 1.0), None);
    }
}
