//! The work a push costs: `--cpu-cost` units of real hashing, each unit [`UNIT_NS`] of
//! the serving thread's own CPU time (its thread CPU clock), spent hashing SHA-256 in
//! 256-byte pieces. A unit is a fixed CPU time rather than a fixed number of bytes
//! because the CI machine's speed swings: the same 1 KiB took 9 µs and 15.5 µs a few
//! seconds apart, and a cost sized in bytes left the tests' targets saturated at rates
//! they had taken an hour before. The thread's CPU clock leaves out the time the thread
//! waits for a CPU, so a push costs the same CPU whatever else the machine does; only
//! the hashing rate moves.
//! The wall time of a unit right after start is measured and printed (`cpu_unit_us=…`).

use sha2::{Digest, Sha256};
use std::time::Instant;

/// The CPU time of one unit, nanoseconds of the calling thread's CPU clock.
pub const UNIT_NS: u64 = 10_000;

/// Bytes hashed between two readings of the thread's CPU clock at most.
const PIECE: usize = 256;

/// The calling thread's CPU time, nanoseconds.
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Hashes for `units` × [`UNIT_NS`] of this thread's CPU time and returns a digest byte,
/// so that the work cannot be optimised away. The clock is read between batches of
/// pieces, each batch about half the time left, so a unit reads it a few times and a
/// push of 250 units about a dozen; the overshoot is one piece at most (~3 µs).
#[inline(never)]
pub fn hash_units(units: u64, seed: u8) -> u8 {
    let budget = units.saturating_mul(UNIT_NS);
    let block = [seed; PIECE];
    let mut acc = [0u8; 32];
    let start = thread_cpu_ns();
    let (mut spent, mut pieces, mut batch) = (0u64, 0u64, 1u64);
    while spent < budget {
        for _ in 0..batch {
            let mut h = Sha256::new();
            h.update(acc);
            h.update(block);
            acc = h.finalize().into();
        }
        pieces += batch;
        spent = thread_cpu_ns().saturating_sub(start);
        let per_piece = (spent / pieces).max(1);
        batch = (budget.saturating_sub(spent) / per_piece / 2).max(1);
    }
    std::hint::black_box(acc[0])
}

/// Measures one unit's wall time right now, microseconds: [`UNIT_NS`] when the thread
/// had its CPU to itself, more when it waited for one.
pub fn calibrate() -> f64 {
    hash_units(20, 1); // warm up
    let n = 200;
    let t = Instant::now();
    hash_units(n, 2);
    t.elapsed().as_secs_f64() * 1e6 / n as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_unit_is_its_cpu_time_and_units_add_up() {
        hash_units(5, 1); // the first call faults its code and stack in
        for units in [1u64, 10, 250] {
            let want = units * UNIT_NS;
            // At least the budget, every time; over it by a piece and a clock reading, or
            // by an interrupt taken on the way (20 µs, or 5% of a long push), in the best
            // of three: a VM's stolen time can be counted as the thread's CPU (one push of
            // 2.5 ms read 3.06 ms here), and it only ever adds.
            let spent = (0..3)
                .map(|_| {
                    let t0 = thread_cpu_ns();
                    hash_units(units, 7);
                    let spent = thread_cpu_ns() - t0;
                    assert!(
                        spent >= want,
                        "{units} units took {spent} ns of CPU, want {want}"
                    );
                    spent
                })
                .min()
                .unwrap();
            assert!(
                spent < want + (want / 20).max(20_000),
                "{units} units took {spent} ns of CPU at best of 3, want {want}"
            );
        }
        let t0 = thread_cpu_ns();
        hash_units(0, 7);
        assert!(thread_cpu_ns() - t0 < 20_000, "no units, no work");
    }
}
