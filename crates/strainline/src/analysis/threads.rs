//! What the target's threads say limited it, when no resource is saturated: a pool
//! whose every thread was busy, or the wait its working threads spent the most time in
//! (a lock, storage, a downstream socket, a timer). Pure functions of a
//! [`Breakdown`], so each rule is checked against the figures it names.

use crate::measure::threads::{Breakdown, GroupRates, State, States};
// Thread names are the target's text: one line, escapes shown.
use crate::units::one_line;

/// A group whose threads ran at least this many cores' worth took part in the work (a
/// millisecond a second: threads blocked on storage or a downstream barely run).
pub const WORKING_CPU: f64 = 0.001;
/// A pool is full when every thread of it was busy at least this share of the window.
pub const POOL_FULL: f64 = 0.9;
/// A wait is named when the working threads spent at least this many thread-seconds per
/// second in it…
pub const WAIT_MIN: f64 = 0.25;
/// …and more than they spent on a CPU.
pub const WAIT_OVER_CPU: f64 = 1.0;

/// The groups that did work in the window.
pub fn working(b: &Breakdown) -> impl Iterator<Item = &GroupRates> {
    b.groups
        .iter()
        .filter(|g| g.states.on_cpu + g.states.run_queue >= WORKING_CPU)
}

fn noun(n: u32) -> &'static str {
    if n == 1 {
        "thread"
    } else {
        "threads"
    }
}

/// The limit the threads name, in words with their figures; `None` when nothing stands
/// out — threads that mostly ran, or mostly waited for work (poll, parked: the time
/// went outside them) — and the caller says so and prints [`summary`].
pub fn limit(b: &Breakdown) -> Option<String> {
    cause(b).map(|(_, words)| words)
}

/// [`limit`] with the state it names (a pool: the state its threads waited in most), so
/// a caller can weigh it against a kernel counter that is its symptom.
pub fn cause(b: &Breakdown) -> Option<(State, String)> {
    // A pool: every thread of a group busy nearly all the time, mostly not on a CPU
    // (a pool on a CPU all the time is a CPU limit, named from the CPU figures).
    if let Some(g) = b
        .groups
        .iter()
        .find(|g| g.all_busy >= POOL_FULL && g.states.on_cpu < 0.5 * g.threads as f64)
    {
        let (wait, secs) = g.states.dominant_wait();
        return Some((wait, format!(
            "a pool: all {} `{}` {} were busy {:.0}% of the step ({} {:.2} thread-s/s, on CPU {:.2} thread-s/s) — requests queue for a free thread; more threads, or a shorter {}",
            g.threads,
            one_line(&g.name),
            noun(g.threads),
            100.0 * g.all_busy,
            wait.label(),
            secs,
            g.states.on_cpu,
            match wait {
                State::Sleep | State::Socket => "wait downstream",
                State::Storage | State::Paging => "wait for storage",
                _ => "time per request",
            }
        )));
    }
    let work: Vec<&GroupRates> = working(b).collect();
    let total = work
        .iter()
        .fold(States::default(), |t, g| t.plus(&g.states));
    let (wait, secs) = total.dominant_wait();
    if secs < WAIT_MIN || secs <= WAIT_OVER_CPU * total.on_cpu {
        return None;
    }
    // The group that waited most in it, named with its size.
    let top = work
        .iter()
        .max_by(|a, b| a.states.get(wait).total_cmp(&b.states.get(wait)))?;
    let who = if work.len() == 1 {
        format!(
            "the target's {} `{}` {}",
            top.threads,
            one_line(&top.name),
            noun(top.threads)
        )
    } else {
        let n: u32 = work.iter().map(|g| g.threads).sum();
        format!(
            "the target's {n} working threads (most in `{}`)",
            one_line(&top.name)
        )
    };
    let words = match wait {
        State::Lock => format!(
            "a lock: {who} spent {secs:.2} thread-s/s waiting on a futex other threads waited on too while {:.2} cores ran (a contended mutex or an interpreter lock; {:.0}% of their time)",
            total.on_cpu,
            100.0 * secs / total.total()
        ),
        State::Storage | State::Paging => format!(
            "storage I/O: {who} spent {secs:.2} thread-s/s in {} while {:.2} cores ran",
            if wait == State::Paging {
                "page faults that read from storage"
            } else {
                "uninterruptible I/O or fsync (D state)"
            },
            total.on_cpu
        ),
        State::Socket => format!(
            "a downstream wait: {who} spent {secs:.2} thread-s/s blocked reading or writing sockets while {:.2} cores ran",
            total.on_cpu
        ),
        State::Sleep => format!(
            "timers: {who} spent {secs:.2} thread-s/s asleep (nanosleep) while {:.2} cores ran — a delay, a back-off or a rate limit in the target",
            total.on_cpu
        ),
        State::Child => format!(
            "child processes: {who} spent {secs:.2} thread-s/s waiting for children to end while {:.2} cores ran",
            total.on_cpu
        ),
        _ => return None,
    };
    Some((wait, words))
}

/// The breakdown in one line: thread-seconds per second in each state that has any,
/// over every group (`on CPU 0.56, futex/lock 11.2, poll/accept 1.0`).
pub fn summary(b: &Breakdown) -> String {
    let t = b.total();
    let parts: Vec<String> = State::ALL
        .iter()
        .filter(|s| t.get(**s) >= 0.005)
        .map(|s| format!("{} {:.2}", s.label(), t.get(*s)))
        .collect();
    if parts.is_empty() {
        "no thread time".into()
    } else {
        format!("{} (thread-s/s)", parts.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(name: &str, threads: u32, all_busy: f64, states: &[(State, f64)]) -> GroupRates {
        let mut s = States::default();
        for (st, v) in states {
            s.add(*st, *v);
        }
        GroupRates {
            name: name.into(),
            threads,
            states: s,
            all_busy,
        }
    }

    fn of(groups: Vec<GroupRates>) -> Breakdown {
        Breakdown {
            seconds: 5.0,
            groups,
        }
    }

    #[test]
    fn futex_waits_of_working_threads_name_a_lock_with_their_figures() {
        let b = of(vec![group(
            "python3",
            15,
            0.0,
            &[
                (State::Lock, 11.2),
                (State::OnCpu, 0.56),
                (State::Poll, 1.0),
                (State::RunQueue, 0.1),
            ],
        )]);
        let l = limit(&b).unwrap();
        assert!(
            l.starts_with("a lock: the target's 15 `python3` threads spent 11.20 thread-s/s"),
            "{l}"
        );
        assert!(l.contains("0.56 cores"), "{l}");
    }

    #[test]
    fn a_group_busy_every_sample_is_a_full_pool() {
        let b = of(vec![
            group(
                "pool",
                2,
                0.97,
                &[(State::Sleep, 1.95), (State::OnCpu, 0.02)],
            ),
            group(
                "tokio-runtime-w",
                2,
                0.0,
                &[(State::Lock, 1.5), (State::Poll, 0.5), (State::OnCpu, 0.05)],
            ),
        ]);
        let l = limit(&b).unwrap();
        assert!(
            l.starts_with("a pool: all 2 `pool` threads were busy 97%"),
            "{l}"
        );
        assert!(l.contains("sleep 1.95"), "{l}");
    }

    #[test]
    fn storage_and_downstream_waits_are_named() {
        let b = of(vec![group(
            "w",
            4,
            0.5,
            &[(State::Storage, 0.9), (State::OnCpu, 0.2)],
        )]);
        assert!(limit(&b).unwrap().starts_with("storage I/O:"));
        let b = of(vec![group(
            "w",
            4,
            0.5,
            &[(State::Socket, 3.0), (State::OnCpu, 0.2)],
        )]);
        assert!(limit(&b).unwrap().starts_with("a downstream wait:"));
    }

    #[test]
    fn nothing_is_named_when_the_threads_mostly_ran_or_idled() {
        // Mostly on a CPU: the CPU figures speak, not a wait.
        let b = of(vec![group(
            "w",
            2,
            0.0,
            &[(State::OnCpu, 1.2), (State::Lock, 0.8)],
        )]);
        assert_eq!(limit(&b), None);
        // Threads that never ran are not the ones doing the work.
        let b = of(vec![
            group("idle", 40, 0.0, &[(State::Lock, 40.0)]),
            group("w", 1, 0.0, &[(State::OnCpu, 0.3), (State::Poll, 0.1)]),
        ]);
        assert_eq!(limit(&b), None);
        assert_eq!(summary(&of(vec![])), "no thread time");
        assert!(summary(&b).contains("lock 40.00"));
    }
}
