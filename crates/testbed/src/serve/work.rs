//! The work a push costs: `--cpu-cost` units of real hashing, calibrated at start so the
//! cost of a unit on this machine is known and printed (`cpu_unit_us=…`).

use sha2::{Digest, Sha256};
use std::time::Instant;

/// Bytes hashed by one unit of work.
pub const UNIT_BYTES: usize = 4096;

/// Does `units` units of work and returns a digest byte, so it cannot be optimised away.
#[inline(never)]
pub fn hash_units(units: u64, seed: u8) -> u8 {
    let block = [seed; UNIT_BYTES];
    let mut acc = [0u8; 32];
    for _ in 0..units {
        let mut h = Sha256::new();
        h.update(acc);
        h.update(block);
        acc = h.finalize().into();
    }
    std::hint::black_box(acc[0])
}

/// Measures one unit's cost on this machine, microseconds.
pub fn calibrate() -> f64 {
    hash_units(200, 1); // warm up
    let n = 2000;
    let t = Instant::now();
    hash_units(n, 2);
    t.elapsed().as_secs_f64() * 1e6 / n as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_is_deterministic_and_scales() {
        assert_eq!(hash_units(3, 7), hash_units(3, 7));
        assert_ne!(hash_units(3, 7), hash_units(4, 7));
    }
}
