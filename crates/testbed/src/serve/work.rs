//! The work a push costs: `--cpu-cost` units of real hashing, its cost on this machine
//! measured at start and printed (`cpu_unit_us=…`). A unit is a SHA-256 of 4 KiB where
//! the CPU hashes SHA-256 in hardware (about 10 µs on the development machine), and of
//! 1 KiB where it does not (a Xeon without SHA extensions took 25.6 µs for 4 KiB, about 8.5 µs
//! for 1 KiB): a cost and a rate then mean about the same load on either. The size is
//! chosen from the CPU's features, never from a timing, so that every run on one machine
//! does the same work whatever else the machine was doing at its start.

use sha2::{Digest, Sha256};
use std::time::Instant;

/// Bytes hashed by one unit of work at most (the development machine's unit).
pub const UNIT_BYTES: usize = 4096;

/// Bytes one unit hashes on this machine: 4 KiB with SHA in hardware, else 1 KiB.
pub fn unit_bytes() -> usize {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("sha") {
            return UNIT_BYTES;
        }
        1024
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        UNIT_BYTES
    }
}

/// Does `units` units of work and returns a digest byte, so it cannot be optimised away.
#[inline(never)]
pub fn hash_units(units: u64, seed: u8) -> u8 {
    let block = [seed; UNIT_BYTES];
    let len = unit_bytes();
    let mut acc = [0u8; 32];
    for _ in 0..units {
        let mut h = Sha256::new();
        h.update(acc);
        h.update(&block[..len]);
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
