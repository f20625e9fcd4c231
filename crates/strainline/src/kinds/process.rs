//! What the process kinds (`crash`, `scale`, `harness`) share: the user's commands
//! started in a unit of their own and waited for. The dispatch to each kind is
//! `kinds/mod.rs`'s.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::os::unit::Unit;
use crate::os::{process, signals};
use crate::suite::substitute;
pub(super) fn argv(cmd: &[String], vars: &BTreeMap<String, String>) -> Vec<String> {
    cmd.iter().map(|a| substitute(a, vars)).collect()
}

/// Starts `argv` in `unit` with output to `log`.
pub(super) fn spawn(
    unit: &Unit,
    argv: &[String],
    log: &std::path::Path,
) -> crate::error::Result<u32> {
    Ok(unit.spawn(&mut unit.logged(argv, log)?)?.id())
}

/// Waits for `pid` (a child, the root of `unit`) to end; its exit and CPU seconds
/// (its own and its reaped children's). Interrupted: the unit is stopped, and an error.
pub(super) fn wait(unit: &Unit, pid: u32) -> crate::error::Result<(crate::measure::ExitInfo, f64)> {
    loop {
        if let Some((_, r)) = process::reap_these(&[pid]).pop() {
            return Ok((
                crate::measure::ExitInfo {
                    code: r.exit,
                    signal: r.signal,
                },
                r.cpu_seconds,
            ));
        }
        if signals::interrupted() {
            unit.end();
            process::reap_these(&[pid]);
            return Err(crate::Error::Interrupted);
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Sleeps until `deadline` or `done` is true; false when interrupted.
pub(super) fn pause_until(deadline: Instant, mut done: impl FnMut() -> bool) -> bool {
    while Instant::now() < deadline && !done() {
        if signals::interrupted() {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    true
}
