//! The one seeded random stream of the crate: schedules (Poisson arrivals, per-second
//! instants), scenario draws, pair orders, crash points, reservoir samples, simulations
//! and payloads all step the same splitmix64, so a seed means one thing everywhere and
//! a run can be repeated. [`mix`] is also the hash that turns a position into a seed
//! (every thread and agent draws the same request for a position).

/// splitmix64's step: a fast, well-mixed function of a 64-bit state (also a hash
/// finalizer).
/// 64 random bits for a run's seed: the standard library's hasher keys come from the
/// kernel's randomness, hashed with the time.
pub fn fresh_seed() -> u64 {
    use std::hash::BuildHasher;
    std::collections::hash_map::RandomState::new().hash_one(std::time::SystemTime::now())
}

pub fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A seeded stream: each value is [`mix`] of the one before.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = mix(self.0);
        self.0
    }

    /// Uniform in [0, n) (n > 0; the modulo's bias is below 2⁻³² for n < 2³²).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// Uniform in [0, 1), 53 bits.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in (0, 1]: never 0, so its logarithm is finite.
    pub fn unit_open0(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 1.0) / (1u64 << 53) as f64
    }

    /// Uniform in (0, 1), centred in its 2⁻⁵³ cell.
    pub fn unit_open(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    /// A fair coin.
    pub fn coin(&mut self) -> bool {
        self.next_u64() >> 63 == 0
    }
}

/// What the seeded fuzzers draw.
#[cfg(test)]
impl Rng {
    /// Uniform in [0, n), as an index.
    pub fn index(&mut self, n: usize) -> usize {
        self.below(n as u64) as usize
    }

    /// One of `xs`.
    pub fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.index(xs.len())]
    }

    /// The byte mutations every fuzzer shares, `which` of them (0 to 2): a bit flipped
    /// at `at`, the bytes cut there, or up to 8 random bytes inserted there.
    pub fn mutate_bytes(&mut self, b: &mut Vec<u8>, at: usize, which: usize) {
        match which {
            0 if !b.is_empty() => {
                let i = at.min(b.len() - 1);
                b[i] ^= 1 << self.index(8);
            }
            0 => {}
            1 => b.truncate(at),
            _ => {
                let bytes: Vec<u8> = (0..1 + self.index(8))
                    .map(|_| self.next_u64() as u8)
                    .collect();
                b.splice(at..at, bytes);
            }
        }
    }
}

/// `len` letters and digits from `seed`: a payload that is text (an HTTP body, a
/// `{{random}}` value) and differs from one seed to the next.
pub fn text(len: usize, seed: u64) -> Vec<u8> {
    const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut r = Rng::new(seed);
    (0..len)
        .map(|_| ALNUM[r.below(ALNUM.len() as u64) as usize])
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_is_one_stream_and_its_values_are_in_range() {
        // splitmix64's published first output for seed 0 (Vigna's reference code: the
        // state advances by the golden gamma, the output is mixed).
        assert_eq!(mix(0), 0xE220_A839_7B1D_CDAF);
        let (mut a, mut b) = (Rng::new(7), Rng::new(7));
        for _ in 0..1000 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
        for _ in 0..1000 {
            let u = a.unit();
            assert!((0.0..1.0).contains(&u));
            assert!(b.unit_open0() > 0.0);
            assert!(a.below(10) < 10);
        }
        let heads = (0..10_000).filter(|_| a.coin()).count();
        assert!((4_800..5_200).contains(&heads), "{heads}");
        let t = text(64, 3);
        assert!(t.iter().all(u8::is_ascii_alphanumeric));
        assert_ne!(t, text(64, 4));
    }
}
