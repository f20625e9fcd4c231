//! Stopping a watched command's tree: what `monitor` does when the command exits and
//! leaves processes behind (daemons, `setsid` children), or when it is interrupted.

use std::time::{Duration, Instant};

use super::Sampler;
use crate::os::process;

/// SIGKILL to every live member of the tree (and the cgroup, which also catches any
/// process forked since the last sample).
pub fn kill_tree(sampler: &Sampler, root: u32) {
    if let Some(cg) = sampler.cgroup() {
        cg.kill_all();
    }
    process::signal(root, libc::SIGKILL);
    for pid in sampler.live_pids() {
        process::signal(pid, libc::SIGKILL);
    }
}

/// After the command exits: SIGTERM what is left of its tree, give it the grace period,
/// then SIGKILL; reap everything. Returns how many processes were left.
pub fn stop_leftovers(sampler: &mut Sampler, root: u32) -> u64 {
    // One more look, so that a daemon started just before the end is found too.
    sampler.sample();
    // Only what still runs: a process already exiting (a zombie not yet reaped, `X`) was
    // not left running — `xargs -P15 gcc` waits for every child, and its last compilers
    // can still be in /proc as zombies when it is reaped.
    let leftover: Vec<u32> = sampler
        .live_pids()
        .into_iter()
        .filter(|&p| p != root && running(p))
        .collect();
    if !leftover.is_empty() {
        for &pid in &leftover {
            process::signal(pid, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline && !sampler.live_pids().is_empty() {
            std::thread::sleep(Duration::from_millis(20));
            for (pid, r) in process::reap_exited() {
                sampler.on_reaped(pid, r);
            }
            sampler.sample();
        }
        kill_tree(sampler, root);
    }
    // Reap until no child of ours is left (subreaper: orphans come to us).
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        for (pid, r) in process::reap_exited() {
            sampler.on_reaped(pid, r);
        }
        // Any child left but strainline's own guardian?
        let me = std::process::id();
        let guardian = crate::os::guardian::pid();
        let left = process::table()
            .iter()
            .any(|e| e.ppid == me && Some(e.pid) != guardian);
        if !left || Instant::now() >= deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    leftover.len() as u64
}

/// Whether `pid` exists and is not exiting (state neither `Z` nor `X`).
fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|t| process::parse_stat(&t))
        .is_some_and(|s| !matches!(s.state, 'Z' | 'X'))
}
