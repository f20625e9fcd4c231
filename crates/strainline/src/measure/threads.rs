//! Thread states as figures: where a tree's threads spent their time ([`State`]),
//! summed while watching ([`Tally`]) and per second over a window ([`Breakdown`]). The
//! monitor reads them (`monitor::threads`); the ramp's verdict reads the figures
//! (`analysis::threads`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Where a thread's time goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Running on a CPU (schedstat).
    OnCpu,
    /// Runnable, waiting for a CPU (schedstat's run-queue time).
    RunQueue,
    /// Blocked on a lock: a futex another thread of the process waits on at the same
    /// tick (a contended mutex, an interpreter lock), a System V semaphore, a file lock.
    Lock,
    /// Waiting for work: parked on a futex no other thread waits on (a pool's idle
    /// worker, a runtime's parked thread), or reading a connection accepted from a
    /// client (a thread per connection, between requests).
    Idle,
    /// Waiting for events: epoll, poll, select, accept, an eventfd or a pipe.
    Poll,
    /// Blocked reading or writing a socket the target opened (downstream), or connecting.
    Socket,
    /// Uninterruptible (`D`) or in fsync, reading or writing a file, asynchronous I/O.
    Storage,
    /// Uninterruptible in a page fault that read from storage.
    Paging,
    /// Sleeping on a timer (nanosleep, clock_nanosleep).
    Sleep,
    /// Waiting for a child process to end.
    Child,
    /// Anything else (stopped, a signal wait, a system call we cannot read).
    Other,
}

impl State {
    pub const ALL: [State; 11] = [
        State::OnCpu,
        State::RunQueue,
        State::Lock,
        State::Idle,
        State::Poll,
        State::Socket,
        State::Storage,
        State::Paging,
        State::Sleep,
        State::Child,
        State::Other,
    ];

    /// The waits that can be a request's limit (not waiting for work), in the order a
    /// tie is named.
    pub const CAUSES: [State; 6] = [
        State::Lock,
        State::Storage,
        State::Paging,
        State::Socket,
        State::Sleep,
        State::Child,
    ];

    /// The name in a table.
    pub fn label(self) -> &'static str {
        match self {
            State::OnCpu => "on CPU",
            State::RunQueue => "run queue",
            State::Lock => "lock",
            State::Idle => "idle",
            State::Poll => "poll/accept",
            State::Socket => "socket",
            State::Storage => "storage",
            State::Paging => "paging",
            State::Sleep => "sleep",
            State::Child => "child",
            State::Other => "other",
        }
    }

    /// Whether a thread in this state is working on something (running, or waiting on
    /// what a piece of work needs: a socket, storage, a timer, a child) rather than
    /// waiting for work to arrive (a poll, a parked futex) or for a lock.
    /// The state's name in files (JSON keys, CSV columns, metric labels).
    pub fn key(self) -> &'static str {
        match self {
            State::OnCpu => "on_cpu",
            State::RunQueue => "run_queue",
            State::Lock => "lock",
            State::Idle => "idle",
            State::Poll => "poll",
            State::Socket => "socket",
            State::Storage => "storage",
            State::Paging => "paging",
            State::Sleep => "sleep",
            State::Child => "child",
            State::Other => "other",
        }
    }

    pub fn busy(self) -> bool {
        !matches!(self, State::Lock | State::Idle | State::Poll | State::Other)
    }
}

/// Thread-seconds in each state (over a window), or thread-seconds per second (a
/// [`Breakdown`]: 3.0 in `lock` = three threads waiting on futexes all the time).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct States {
    pub on_cpu: f64,
    pub run_queue: f64,
    pub lock: f64,
    pub idle: f64,
    pub poll: f64,
    pub socket: f64,
    pub storage: f64,
    pub paging: f64,
    pub sleep: f64,
    pub child: f64,
    pub other: f64,
}

impl States {
    pub fn get(&self, s: State) -> f64 {
        match s {
            State::OnCpu => self.on_cpu,
            State::RunQueue => self.run_queue,
            State::Lock => self.lock,
            State::Idle => self.idle,
            State::Poll => self.poll,
            State::Socket => self.socket,
            State::Storage => self.storage,
            State::Paging => self.paging,
            State::Sleep => self.sleep,
            State::Child => self.child,
            State::Other => self.other,
        }
    }

    fn get_mut(&mut self, s: State) -> &mut f64 {
        match s {
            State::OnCpu => &mut self.on_cpu,
            State::RunQueue => &mut self.run_queue,
            State::Lock => &mut self.lock,
            State::Idle => &mut self.idle,
            State::Poll => &mut self.poll,
            State::Socket => &mut self.socket,
            State::Storage => &mut self.storage,
            State::Paging => &mut self.paging,
            State::Sleep => &mut self.sleep,
            State::Child => &mut self.child,
            State::Other => &mut self.other,
        }
    }

    pub fn add(&mut self, s: State, v: f64) {
        *self.get_mut(s) += v;
    }

    /// Each state: `self − earlier`, divided by `seconds`.
    fn rate_since(&self, earlier: &States, seconds: f64) -> States {
        let mut out = States::default();
        for s in State::ALL {
            out.add(s, (self.get(s) - earlier.get(s)).max(0.0) / seconds);
        }
        out
    }

    pub fn plus(mut self, other: &States) -> States {
        for s in State::ALL {
            self.add(s, other.get(s));
        }
        self
    }

    /// The sum over every state: thread-seconds (per second: threads).
    pub fn total(&self) -> f64 {
        State::ALL.iter().map(|s| self.get(*s)).sum()
    }

    /// The wait among [`State::CAUSES`] with the most time, and that time.
    pub fn dominant_wait(&self) -> (State, f64) {
        State::CAUSES
            .iter()
            .map(|s| (*s, self.get(*s)))
            .fold(
                (State::Other, 0.0),
                |best, x| if x.1 > best.1 { x } else { best },
            )
    }
}

/// The threads of one name (trailing numbers removed: `worker-3` is `worker`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Group {
    /// The most threads of this name seen at one tick.
    pub threads: u32,
    pub states: States,
    /// Seconds during which every thread of the group was [`State::busy`] at the tick.
    pub all_busy: f64,
}

/// Thread states summed since the watch began: what two readings a step apart subtract.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tally {
    /// Wall-clock seconds covered.
    pub seconds: f64,
    pub groups: BTreeMap<String, Group>,
}

impl Tally {
    /// Every group's thread-seconds added up, per state.
    pub fn total(&self) -> States {
        self.groups
            .values()
            .fold(States::default(), |t, g| t.plus(&g.states))
    }
}

/// One group over a window: thread-seconds per second in each state.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct GroupRates {
    pub name: String,
    pub threads: u32,
    #[serde(flatten)]
    pub states: States,
    /// The share of the window during which every thread of the group was busy.
    pub all_busy: f64,
}

/// Thread states over a window (a ramp's step, a monitored run), per second of it,
/// group by group, busiest first.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Breakdown {
    pub seconds: f64,
    pub groups: Vec<GroupRates>,
}

impl Tally {
    /// What happened since `earlier` (a reading of the same tally), per second.
    pub fn since(&self, earlier: &Tally) -> Breakdown {
        let seconds = self.seconds - earlier.seconds;
        if seconds <= 0.0 {
            return Breakdown::default();
        }
        let none = Group::default();
        let mut groups: Vec<GroupRates> = self
            .groups
            .iter()
            .map(|(name, g)| {
                let before = earlier.groups.get(name).unwrap_or(&none);
                GroupRates {
                    name: name.clone(),
                    threads: g.threads,
                    states: g.states.rate_since(&before.states, seconds),
                    all_busy: ((g.all_busy - before.all_busy) / seconds).clamp(0.0, 1.0),
                }
            })
            .filter(|g| g.states.total() > 0.0)
            .collect();
        groups.sort_by(|a, b| {
            let busy =
                |g: &GroupRates| g.states.total() - g.states.poll - g.states.idle - g.states.other;
            busy(b).total_cmp(&busy(a)).then(a.name.cmp(&b.name))
        });
        Breakdown { seconds, groups }
    }
}

impl Breakdown {
    /// The `n` busiest groups (what a step keeps).
    pub fn top(mut self, n: usize) -> Breakdown {
        self.groups.truncate(n);
        self
    }

    /// Every group's states added up.
    pub fn total(&self) -> States {
        self.groups
            .iter()
            .fold(States::default(), |t, g| t.plus(&g.states))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tally_subtracts_to_rates_per_second() {
        let mut a = Tally::default();
        let mut g = Group {
            threads: 4,
            ..Group::default()
        };
        g.states.add(State::Lock, 3.0);
        g.states.add(State::OnCpu, 1.0);
        a.groups.insert("w".into(), g.clone());
        a.seconds = 10.0;
        let mut b = a.clone();
        b.seconds = 12.0;
        let g = b.groups.get_mut("w").unwrap();
        g.states.add(State::Lock, 6.0);
        g.states.add(State::OnCpu, 1.0);
        g.all_busy += 1.0;
        let d = b.since(&a);
        assert_eq!(d.seconds, 2.0);
        assert_eq!(d.groups[0].states.lock, 3.0);
        assert_eq!(d.groups[0].states.on_cpu, 0.5);
        assert_eq!(d.groups[0].all_busy, 0.5);
        assert_eq!(d.total().dominant_wait(), (State::Lock, 3.0));
    }
}
