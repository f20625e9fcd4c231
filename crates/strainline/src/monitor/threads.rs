//! Thread states: what each thread of the watched tree spends its time on — a CPU, the
//! run queue, or off CPU and *why*: the system call it is blocked in (a futex, a poll for
//! events, a socket, storage, a timer). When no resource is saturated, this is what names
//! the limit (*Systems Performance*'s thread-state analysis; `analysis::threads` judges).
//!
//! Cost: each reading (at most every [`PERIOD`]) reads one small file per thread,
//! `schedstat`, whose clocks give the time on a CPU and in the run queue exactly. `stat` and `syscall` are read only for
//! threads that ran since the last tick: a thread that did not is still in the same wait.
//! With the tree's CPU counter (a cgroup's), a tree that ran nothing since the last
//! reading is not read at all: each thread is still in its wait.
//! What is sampled is the reason for the off-CPU time of threads that ran: the wait they
//! are in at the tick (or, caught running, the wait they were last seen in).

use std::collections::HashMap;
use std::fs::File;
use std::time::Instant;

use super::procfs::{parse_stat, ProcFiles};
pub use crate::measure::threads::{State, Tally};

/// Threads followed at most: each keeps three files open.
pub const MAX_THREADS: usize = 1024;

/// Thread states are read at most this often, whatever the monitor's interval: their
/// clocks are exact at any period, and 20 readings a second place the off-CPU time
/// well enough; at a 10 ms interval this keeps them to a fifth of the ticks.
pub const PERIOD: std::time::Duration = std::time::Duration::from_millis(50);
/// The processes' threads are listed again this often (a thread that lives less may
/// not be seen).
pub const RELIST: std::time::Duration = std::time::Duration::from_millis(250);

/// The group a thread's name belongs to: trailing digits after a separator removed
/// (`worker-3`, `pool-1-thread-7`, `GC Thread#0`), a name without one kept
/// (`python3`).
pub fn group_of(comm: &str) -> String {
    const SEPARATORS: [char; 7] = ['-', '_', ' ', '#', ':', '.', '/'];
    let t = comm.trim_end_matches(|c: char| c.is_ascii_digit());
    if t.len() < comm.len() && t.ends_with(SEPARATORS) {
        let t = t.trim_end_matches(SEPARATORS);
        if !t.is_empty() {
            return t.to_string();
        }
    }
    comm.to_string()
}

/// The TCP sockets of the network namespaces the tree is in: which were accepted from a
/// client (their local port is one the namespace listens on). A thread blocked reading
/// one waits for a client's next request (a thread per connection between requests):
/// idle, not a downstream wait.
#[derive(Default)]
struct Sockets {
    /// Socket inode → accepted from a client.
    accepted: HashMap<u64, bool>,
}

impl Sockets {
    /// Forgotten past this many, so a long soak's churn cannot grow it.
    const MAX: usize = 100_000;

    fn accepted(&mut self, pid: u32, inode: u64) -> bool {
        if let Some(a) = self.accepted.get(&inode) {
            return *a;
        }
        if self.accepted.len() > Self::MAX {
            self.accepted.clear();
        }
        let mut listening = std::collections::HashSet::new();
        let mut ports = Vec::new();
        for table in ["tcp", "tcp6"] {
            let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/net/{table}")) else {
                continue;
            };
            for line in text.lines().skip(1) {
                let f: Vec<&str> = line.split_ascii_whitespace().collect();
                let (Some(local), Some(state), Some(Ok(inode))) =
                    (f.get(1), f.get(3), f.get(9).map(|i| i.parse::<u64>()))
                else {
                    continue;
                };
                let port = local.rsplit(':').next().unwrap_or_default().to_string();
                if *state == "0A" {
                    listening.insert(port.clone());
                }
                ports.push((inode, port));
            }
        }
        for (i, port) in ports {
            self.accepted.insert(i, listening.contains(&port));
        }
        // Not TCP (a UNIX socket, UDP) or gone: a socket of its own, not a client's.
        *self.accepted.entry(inode).or_insert(false)
    }
}

/// What a file descriptor is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fd {
    /// A connection accepted from a client.
    Client,
    /// Any other socket.
    Socket,
    /// A pipe, an eventfd and the like: a wait for an event.
    Event,
    /// A file on storage.
    File,
    Other,
}

/// What a file descriptor is, from its `/proc/PID/fd` link.
fn fd_kind(pid: u32, fd: u64, sockets: &mut Sockets) -> Fd {
    match std::fs::read_link(format!("/proc/{pid}/fd/{fd}")) {
        Ok(l) => {
            let l = l.to_string_lossy();
            if let Some(inode) = l.strip_prefix("socket:[") {
                let inode = inode.trim_end_matches(']').parse().unwrap_or(0);
                if sockets.accepted(pid, inode) {
                    Fd::Client
                } else {
                    Fd::Socket
                }
            } else if l.starts_with("pipe:") || l.starts_with("anon_inode:") {
                Fd::Event
            } else if l.starts_with('/') && !l.starts_with("/dev/") {
                Fd::File
            } else {
                Fd::Other
            }
        }
        Err(_) => Fd::Other,
    }
}

/// The state of a blocked thread from the text of its `/proc/…/syscall`: the call's
/// number, then its arguments. `fd` says what a file descriptor is, for the calls that
/// read or write one: reading a client's connection is waiting for its next request.
pub fn classify(syscall: &str, fd: impl FnOnce(u64) -> Fd) -> State {
    let mut words = syscall.split_ascii_whitespace();
    let Some(Ok(nr)) = words.next().map(str::parse::<i64>) else {
        return State::Other;
    };
    let arg =
        |w: Option<&str>| w.and_then(|a| u64::from_str_radix(a.trim_start_matches("0x"), 16).ok());
    let arg0 = arg(words.next());
    use libc as l;
    let lock = [
        l::SYS_futex,
        l::SYS_futex_waitv,
        l::SYS_semtimedop,
        l::SYS_flock,
    ];
    let poll = [
        l::SYS_epoll_pwait,
        l::SYS_epoll_pwait2,
        l::SYS_ppoll,
        l::SYS_pselect6,
        l::SYS_accept4,
        l::SYS_io_uring_enter,
        l::SYS_rt_sigtimedwait,
    ];
    let reads = [
        l::SYS_read,
        l::SYS_readv,
        l::SYS_pread64,
        l::SYS_recvfrom,
        l::SYS_recvmsg,
        l::SYS_recvmmsg,
    ];
    let writes = [
        l::SYS_write,
        l::SYS_writev,
        l::SYS_pwrite64,
        l::SYS_sendto,
        l::SYS_sendmsg,
        l::SYS_sendmmsg,
    ];
    let storage = [
        l::SYS_fsync,
        l::SYS_fdatasync,
        l::SYS_sync,
        l::SYS_syncfs,
        l::SYS_sync_file_range,
        l::SYS_io_getevents,
    ];
    let sleep = [l::SYS_nanosleep, l::SYS_clock_nanosleep];
    let child = [l::SYS_wait4, l::SYS_waitid];
    #[cfg(target_arch = "x86_64")]
    let (lock_x, poll_x) = (
        [l::SYS_semop],
        [l::SYS_epoll_wait, l::SYS_poll, l::SYS_select, l::SYS_accept],
    );
    #[cfg(not(target_arch = "x86_64"))]
    let (lock_x, poll_x): ([l::c_long; 0], [l::c_long; 0]) = ([], []);
    if lock.contains(&nr) || lock_x.contains(&nr) {
        State::Lock
    } else if poll.contains(&nr) || poll_x.contains(&nr) {
        State::Poll
    } else if nr == l::SYS_connect {
        State::Socket
    } else if storage.contains(&nr) {
        State::Storage
    } else if sleep.contains(&nr) {
        State::Sleep
    } else if child.contains(&nr) {
        State::Child
    } else if reads.contains(&nr) || writes.contains(&nr) {
        match arg0.map(fd) {
            Some(Fd::Client) if reads.contains(&nr) => State::Idle,
            Some(Fd::Client | Fd::Socket) => State::Socket,
            Some(Fd::Event) => State::Poll,
            Some(Fd::File) => State::Storage,
            _ => State::Other,
        }
    } else {
        State::Other
    }
}

/// The futex word a thread blocked in `futex(2)` waits on (its first argument).
pub fn futex_word(syscall: &str) -> Option<u64> {
    let mut words = syscall.split_ascii_whitespace();
    if words.next()?.parse::<i64>().ok()? != libc::SYS_futex {
        return None;
    }
    u64::from_str_radix(words.next()?.trim_start_matches("0x"), 16).ok()
}

/// A process whose threads are read: its pid and, when known, how many threads its
/// `stat` last counted (unknown: its thread directory is listed at every relisting).
#[derive(Debug, Clone, Copy)]
pub struct Proc {
    pub pid: u32,
    pub threads: Option<u64>,
}

#[cfg(test)]
impl Proc {
    /// A process whose thread count is not known.
    pub fn pid(pid: u32) -> Proc {
        Proc { pid, threads: None }
    }
}

/// One followed thread.
struct Thread {
    pid: u32,
    group: String,
    schedstat: File,
    stat: File,
    syscall: Option<File>,
    /// schedstat: ns on a CPU, ns in the run queue, times scheduled.
    clocks: [u64; 3],
    major_faults: u64,
    /// The wait it was last seen in.
    reason: State,
    /// The futex word it waits on, when its wait is a futex.
    futex: Option<u64>,
    /// Whether it was running or runnable at the last tick.
    running: bool,
    /// Found at this tick: its clocks start here.
    fresh: bool,
    /// It did not run between the last two readings.
    quiet: bool,
}

/// Reads the thread states of a tree, tick after tick, into a [`Tally`].
#[derive(Default)]
pub struct ThreadReader {
    threads: HashMap<u32, Thread>,
    pub tally: Tally,
    last: Option<Instant>,
    listed: Option<Instant>,
    buf: Vec<u8>,
    sockets: Sockets,
    /// The tree's CPU counter at the last reading and at the last listing (see
    /// [`Self::tick`]).
    tree_cpu: Option<u64>,
    listed_cpu: Option<u64>,
    /// `schedstat` files read so far (what the reading costs; its unit test counts).
    reads: u64,
}

impl ThreadReader {
    /// Whether a reading is due at `now`: none yet, or the last [`PERIOD`] ago. A
    /// caller asks before gathering the tree's pids (and publishing the tally).
    pub fn due(&self, now: Instant) -> bool {
        self.last
            .is_none_or(|l| now.saturating_duration_since(l) >= PERIOD)
    }

    /// One reading over the processes `procs` (nothing when not [`Self::due`]); every
    /// [`RELIST`] it also looks for threads that started and processes that joined.
    /// `tree_cpu` is a CPU counter of the whole tree read before this call (the
    /// cgroup's), when there is one: if it has not moved since the last reading, no
    /// thread ran, so a thread that was not runnable then is still in the same wait
    /// and is not read, and no thread can have started. Returns whether it read.
    pub fn tick(&mut self, procs: &[Proc], tree_cpu: Option<u64>, now: Instant) -> bool {
        if !self.due(now) {
            return false;
        }
        if self.buf.is_empty() {
            self.buf = vec![0; 1024];
        }
        let idle = tree_cpu.is_some() && tree_cpu == self.tree_cpu;
        self.tree_cpu = tree_cpu;
        // A listing is due if the tree ran since the last one (it may have started
        // threads then, even if it has been idle since).
        let ran_since_listed = tree_cpu.is_none() || tree_cpu != self.listed_cpu;
        if ran_since_listed
            && self
                .listed
                .is_none_or(|l| now.saturating_duration_since(l) >= RELIST)
        {
            self.listed = Some(now);
            self.listed_cpu = tree_cpu;
            self.relist(procs);
        }
        let dt = self
            .last
            .map_or(0.0, |l| now.saturating_duration_since(l).as_secs_f64());
        self.last = Some(now);
        // Each thread's time this tick, placed once every thread is read: whether a
        // futex wait is a lock depends on who else waits on the same word.
        let mut spent: Vec<(u32, [(State, f64); 3])> = Vec::with_capacity(self.threads.len());
        let mut waiters: HashMap<(u32, u64), u32> = HashMap::new();
        let mut gone = Vec::new();
        for (&tid, t) in self.threads.iter_mut() {
            // Nothing of the tree ran since the last reading: its clocks stand.
            let clocks = if idle && !t.running && !t.fresh {
                Some(t.clocks)
            } else {
                self.reads += 1;
                ProcFiles::pread(&t.schedstat, &mut self.buf)
                    .ok()
                    .and_then(|n| {
                        crate::os::process::schedstat(&String::from_utf8_lossy(&self.buf[..n]))
                    })
            };
            let Some(clocks) = clocks else {
                gone.push(tid);
                continue;
            };
            let mut this = [(State::OnCpu, 0.0), (State::RunQueue, 0.0), (t.reason, 0.0)];
            t.quiet = !t.fresh && clocks == t.clocks;
            if std::mem::take(&mut t.fresh) {
                t.clocks = clocks;
            } else if clocks == t.clocks {
                // It has not run since the last tick: still in the same wait (or still
                // waiting for a CPU: the run-queue clock moves when it gets one).
                this[2] = (if t.running { State::RunQueue } else { t.reason }, dt);
            } else {
                let cpu = (clocks[0].saturating_sub(t.clocks[0]) as f64 / 1e9).min(dt);
                let queued = (clocks[1].saturating_sub(t.clocks[1]) as f64 / 1e9).min(dt - cpu);
                t.clocks = clocks;
                let was_running = t.running;
                if !Self::read_state(t, &mut self.buf, &mut self.sockets) {
                    gone.push(tid);
                    continue;
                }
                // Runnable at both ticks: the time not yet in its clocks is a wait for a
                // CPU (the run-queue clock moves only when it gets one).
                let rest = if was_running && t.running {
                    State::RunQueue
                } else {
                    t.reason
                };
                this = [
                    (State::OnCpu, cpu),
                    (State::RunQueue, queued),
                    (rest, dt - cpu - queued),
                ];
            }
            if let (false, Some(word)) = (t.running, t.futex) {
                *waiters.entry((t.pid, word)).or_default() += 1;
            }
            spent.push((tid, this));
        }
        // Per group this tick: (threads, of which busy).
        let mut busy: HashMap<&str, (u32, u32)> = HashMap::new();
        for (tid, mut this) in spent {
            let t = &self.threads[&tid];
            let now = if t.running { State::OnCpu } else { t.reason };
            // A futex only this thread waits on is a parked thread, not a lock.
            let alone = t
                .futex
                .is_some_and(|w| waiters.get(&(t.pid, w)).copied().unwrap_or(0) < 2);
            let settle = |s: State| {
                if s == State::Lock && alone {
                    State::Idle
                } else {
                    s
                }
            };
            this[2].0 = settle(this[2].0);
            // The group's name is copied only the first time it is seen.
            if !self.tally.groups.contains_key(&t.group) {
                self.tally
                    .groups
                    .insert(t.group.clone(), Default::default());
            }
            let g = self.tally.groups.get_mut(&t.group).expect("inserted above");
            for (state, secs) in this {
                g.states.add(state, secs);
            }
            let b = busy.entry(t.group.as_str()).or_default();
            b.0 += 1;
            b.1 += u32::from(settle(now).busy());
        }
        for (name, (n, b)) in busy {
            let g = self.tally.groups.get_mut(name).expect("counted above");
            g.threads = g.threads.max(n);
            if n == b {
                g.all_busy += dt;
            }
        }
        for tid in gone {
            self.threads.remove(&tid);
        }
        self.tally.seconds += dt;
        true
    }

    /// Single-threaded processes that, at the last reading, had not run since the one
    /// before and were blocked waiting for a child (`wait4`, `waitid`): a build's shells,
    /// `make`, `xargs` and compiler drivers. Their memory cannot change until a child of
    /// theirs ends or a signal wakes them; the sampler skips their per-tick RSS read
    /// until then. And the processes whose threads ran since the last reading.
    pub fn parked_and_ran(&self) -> (Vec<u32>, Vec<u32>) {
        let mut parked = Vec::new();
        let mut ran = Vec::new();
        for (&tid, t) in &self.threads {
            if !t.quiet {
                ran.push(t.pid);
            } else if tid == t.pid && !t.running && t.reason == State::Child {
                parked.push(t.pid);
            }
        }
        (parked, ran)
    }

    /// Reads where a thread that ran is now: running, or blocked and why. False when
    /// it has exited.
    fn read_state(t: &mut Thread, buf: &mut Vec<u8>, sockets: &mut Sockets) -> bool {
        let Some(st) = ProcFiles::pread(&t.stat, buf)
            .ok()
            .and_then(|n| parse_stat(&String::from_utf8_lossy(&buf[..n])))
        else {
            return false;
        };
        // A thread names itself after it starts (and may rename itself).
        let group = group_of(&st.comm);
        if group != t.group {
            t.group = group;
        }
        let faulted = st.major_faults > t.major_faults;
        t.major_faults = st.major_faults;
        t.running = st.state == 'R';
        if t.running {
            return true;
        }
        let call = t
            .syscall
            .as_ref()
            .and_then(|f| ProcFiles::pread(f, buf).ok())
            .map(|n| String::from_utf8_lossy(&buf[..n]).into_owned());
        let pid = t.pid;
        t.futex = call.as_deref().and_then(futex_word);
        t.reason = match (st.state, call.as_deref()) {
            ('D', _) if faulted => State::Paging,
            ('D', Some(c)) if c.starts_with("-1") => State::Paging,
            ('D', _) => State::Storage,
            ('Z' | 'X', _) => return false,
            ('S' | 'I', Some(c)) => classify(c, |fd| fd_kind(pid, fd, sockets)),
            _ => State::Other,
        };
        true
    }

    /// Follows the threads of `procs` not yet followed, and forgets those of processes
    /// that left. A process's thread directory is listed only when its thread count
    /// says a thread is not followed yet (a listing is five system calls), and a
    /// single-threaded process's one thread is its pid: under churn (a build's
    /// compilers) most processes are new and have one thread.
    fn relist(&mut self, procs: &[Proc]) {
        let live: std::collections::HashSet<u32> = procs.iter().map(|p| p.pid).collect();
        self.threads.retain(|_, t| live.contains(&t.pid));
        let mut followed: HashMap<u32, u64> = HashMap::new();
        for t in self.threads.values() {
            *followed.entry(t.pid).or_default() += 1;
        }
        for p in procs {
            if self.threads.len() >= MAX_THREADS {
                return;
            }
            let have = followed.get(&p.pid).copied().unwrap_or(0);
            match p.threads {
                Some(n) if n == have => continue,
                Some(1) => {
                    if let Some(t) = Self::open(p.pid, p.pid, &mut self.buf, &mut self.sockets) {
                        self.threads.insert(p.pid, t);
                    }
                    continue;
                }
                _ => {}
            }
            let Ok(dir) = std::fs::read_dir(format!("/proc/{}/task", p.pid)) else {
                continue;
            };
            for e in dir.flatten() {
                if self.threads.len() >= MAX_THREADS {
                    return;
                }
                let Some(tid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                    continue;
                };
                if self.threads.contains_key(&tid) {
                    continue;
                }
                if let Some(t) = Self::open(p.pid, tid, &mut self.buf, &mut self.sockets) {
                    self.threads.insert(tid, t);
                }
            }
        }
    }

    fn open(pid: u32, tid: u32, buf: &mut Vec<u8>, sockets: &mut Sockets) -> Option<Thread> {
        let base = format!("/proc/{pid}/task/{tid}");
        let schedstat = File::open(format!("{base}/schedstat")).ok()?;
        let n = ProcFiles::pread(&schedstat, buf).ok()?;
        let clocks = crate::os::process::schedstat(&String::from_utf8_lossy(&buf[..n]))?;
        let mut t = Thread {
            pid,
            group: String::new(),
            schedstat,
            stat: File::open(format!("{base}/stat")).ok()?,
            syscall: File::open(format!("{base}/syscall")).ok(),
            clocks,
            major_faults: u64::MAX,
            reason: State::Other,
            futex: None,
            running: false,
            fresh: true,
            quiet: false,
        };
        Self::read_state(&mut t, buf, sockets).then_some(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_group_by_their_stem() {
        assert_eq!(group_of("worker-3"), "worker");
        assert_eq!(group_of("pool-1-thread-12"), "pool-1-thread");
        assert_eq!(group_of("GC Thread#0"), "GC Thread");
        assert_eq!(group_of("python3"), "python3");
        assert_eq!(group_of("tokio-runtime-w"), "tokio-runtime-w");
        assert_eq!(group_of("-7"), "-7");
    }

    #[test]
    fn system_calls_name_the_wait() {
        let n = |nr: i64, rest: &str| format!("{nr} {rest} 0x0 0x0 0x0 0x0 0x0 0x7ffc 0x7f00");
        let none = |_| Fd::Other;
        let cases = [
            (libc::SYS_futex, Fd::Other, State::Lock),
            (libc::SYS_epoll_pwait, Fd::Other, State::Poll),
            (libc::SYS_recvfrom, Fd::Socket, State::Socket),
            // A thread per connection reading its client's next request waits for
            // work; blocked writing to a slow client, it is busy on the socket.
            (libc::SYS_recvfrom, Fd::Client, State::Idle),
            (libc::SYS_read, Fd::Client, State::Idle),
            (libc::SYS_sendto, Fd::Client, State::Socket),
            (libc::SYS_read, Fd::File, State::Storage),
            (libc::SYS_read, Fd::Event, State::Poll),
            (libc::SYS_fdatasync, Fd::Other, State::Storage),
            (libc::SYS_clock_nanosleep, Fd::Other, State::Sleep),
            (libc::SYS_wait4, Fd::Other, State::Child),
            (libc::SYS_connect, Fd::Other, State::Socket),
        ];
        for (nr, fd, want) in cases {
            assert_eq!(classify(&n(nr, "0x1a"), |_| fd), want, "{nr} on {fd:?}");
        }
        // The descriptor comes from the first argument.
        let kinds = |fd: u64| if fd == 0x1a { Fd::Socket } else { Fd::File };
        assert_eq!(classify(&n(libc::SYS_read, "0x1a"), kinds), State::Socket);
        assert_eq!(classify(&n(libc::SYS_read, "0x3"), kinds), State::Storage);
        for odd in ["", "running", "-1 0x7ffc 0x7f00", "x y z", "99999 0x1"] {
            assert_eq!(classify(odd, none), State::Other, "{odd:?}");
        }
    }

    /// Known truth from the kernel: a thread blocked reading a connection it opened
    /// waits downstream (`socket`); one reading a connection its listener accepted waits
    /// for the client's next request (`idle`); one waiting for a child process, `child`.
    #[test]
    fn socket_reads_are_told_from_waits_for_a_client_and_for_a_child() {
        use std::io::Read;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut opened = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut accepted, _) = listener.accept().unwrap();
        let reading = |name: &str, mut s: std::net::TcpStream| {
            std::thread::Builder::new()
                .name(name.into())
                .spawn(move || {
                    let mut b = [0u8; 1];
                    let _ = s.read(&mut b);
                })
                .unwrap()
        };
        let down = reading("down-0", opened.try_clone().unwrap());
        let client = reading("client-0", accepted.try_clone().unwrap());
        let child = std::thread::Builder::new()
            .name("child-0".into())
            .spawn(|| {
                let _ = std::process::Command::new("sleep").arg("0.6").status();
            })
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        let mut r = ThreadReader::default();
        let me = std::process::id();
        r.tick(&[Proc::pid(me)], None, Instant::now());
        for _ in 0..6 {
            std::thread::sleep(PERIOD);
            r.tick(&[Proc::pid(me)], None, Instant::now());
        }
        use std::io::Write;
        opened.write_all(b"x").unwrap();
        accepted.write_all(b"x").unwrap();
        for t in [down, client, child] {
            t.join().unwrap();
        }
        let b = r.tally.since(&Tally::default());
        let g = |n: &str| b.groups.iter().find(|g| g.name == n).unwrap().states;
        assert!(g("down").socket > 0.9, "{:?}", g("down"));
        assert!(g("client").idle > 0.9, "{:?}", g("client"));
        assert!(g("child").child > 0.9, "{:?}", g("child"));
    }

    /// With a tree CPU counter that stands still, a sleeping process's thread is not
    /// read again, yet its time is still its sleep; when the counter moves it is read.
    #[test]
    fn a_tree_that_ran_nothing_is_credited_its_waits_without_reading_them() {
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(100));
        let procs = [Proc::pid(child.id())];
        let mut r = ThreadReader::default();
        let start = Instant::now();
        r.tick(&procs, Some(7), start);
        std::thread::sleep(PERIOD);
        r.tick(&procs, Some(8), Instant::now());
        let read = r.reads;
        assert_eq!(read, 2, "one thread, read at both readings");
        for _ in 0..8 {
            std::thread::sleep(PERIOD);
            assert!(r.tick(&procs, Some(8), Instant::now()));
        }
        assert_eq!(r.reads, read, "the counter stood still: nothing read");
        std::thread::sleep(PERIOD);
        r.tick(&procs, Some(9), Instant::now());
        assert_eq!(r.reads, read + 1);
        let elapsed = start.elapsed().as_secs_f64();
        child.kill().unwrap();
        child.wait().unwrap();
        let g = r.tally.since(&Tally::default());
        let sleep = g.groups.iter().find(|g| g.name == "sleep").unwrap().states;
        // All of the time from the first reading to the last is its sleep: one
        // thread-second per second, over the whole time.
        assert!(
            (r.tally.seconds - elapsed).abs() < 0.02,
            "{} s",
            r.tally.seconds
        );
        assert!((sleep.sleep - 1.0).abs() < 1e-9, "{sleep:?}");
        assert_eq!(sleep.on_cpu, 0.0);
    }

    #[test]
    fn the_futex_word_is_the_first_argument_of_futex_only() {
        let futex = format!(
            "{} 0x7f3a10 0x80 0x2 0x0 0x0 0x0 0x7ffc 0x7f00",
            libc::SYS_futex
        );
        assert_eq!(futex_word(&futex), Some(0x7f3a10));
        let read = format!("{} 0x7f3a10 0x80", libc::SYS_read);
        assert_eq!(futex_word(&read), None);
        assert_eq!(futex_word("running"), None);
    }

    /// Known truth: eight threads queued on one mutex are a lock; a thread parked on
    /// its own condition variable is idle.
    #[test]
    fn threads_waiting_on_one_mutex_are_a_lock_and_a_parked_one_is_idle() {
        use std::sync::{Arc, Barrier, Condvar, Mutex};
        let lock = Arc::new(Mutex::new(()));
        let held = lock.lock().unwrap();
        let start = Arc::new(Barrier::new(9));
        let waiters: Vec<_> = (0..8)
            .map(|i| {
                let (lock, start) = (lock.clone(), start.clone());
                std::thread::Builder::new()
                    .name(format!("locked-{i}"))
                    .spawn(move || {
                        start.wait();
                        drop(lock.lock().unwrap());
                    })
                    .unwrap()
            })
            .collect();
        let parked = Arc::new((Mutex::new(false), Condvar::new()));
        let idle = {
            let parked = parked.clone();
            std::thread::Builder::new()
                .name("parked-0".into())
                .spawn(move || {
                    let (m, c) = &*parked;
                    let mut go = m.lock().unwrap();
                    while !*go {
                        go = c.wait(go).unwrap();
                    }
                })
                .unwrap()
        };
        start.wait();
        std::thread::sleep(std::time::Duration::from_millis(50));
        let mut r = ThreadReader::default();
        let me = std::process::id();
        r.tick(&[Proc::pid(me)], None, Instant::now());
        for _ in 0..6 {
            std::thread::sleep(std::time::Duration::from_millis(50));
            r.tick(&[Proc::pid(me)], None, Instant::now());
        }
        drop(held);
        for w in waiters {
            w.join().unwrap();
        }
        *parked.0.lock().unwrap() = true;
        parked.1.notify_all();
        idle.join().unwrap();
        let b = r.tally.since(&Tally::default());
        let g = |n: &str| b.groups.iter().find(|g| g.name == n).unwrap().states;
        let (locked, parked) = (g("locked"), g("parked"));
        assert!(locked.lock > 7.5, "{locked:?}");
        assert!(parked.idle > 0.9 && parked.lock == 0.0, "{parked:?}");
    }

    /// Known truth from the kernel: a thread asleep in nanosleep and one spinning, read
    /// through /proc as the watcher reads them.
    #[test]
    fn a_sleeping_and_a_spinning_thread_are_told_apart() {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let spin = {
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("spin-1".into())
                .spawn(move || {
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                })
                .unwrap()
        };
        let nap = std::thread::Builder::new()
            .name("nap-1".into())
            .spawn(|| std::thread::sleep(std::time::Duration::from_millis(900)))
            .unwrap();
        let mut r = ThreadReader::default();
        let me = std::process::id();
        r.tick(&[Proc::pid(me)], None, Instant::now());
        for _ in 0..10 {
            std::thread::sleep(std::time::Duration::from_millis(50));
            r.tick(&[Proc::pid(me)], None, Instant::now());
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        spin.join().unwrap();
        nap.join().unwrap();
        let b = r.tally.since(&Tally::default());
        let g = |n: &str| b.groups.iter().find(|g| g.name == n).unwrap().states;
        let (spin, nap) = (g("spin"), g("nap"));
        assert!(spin.on_cpu + spin.run_queue > 0.9, "{spin:?}");
        assert!(nap.sleep > 0.95, "{nap:?}");
        assert!(nap.on_cpu < 0.01, "{nap:?}");
    }
}
