//! Ports for `{{port}}`: free on loopback when handed out, and taken by nothing else
//! before the target binds them. They are drawn from below the kernel's ephemeral range
//! (`ip_local_port_range`), where no connection's local port and no other `bind(0)` can
//! land, and this process never hands one out twice among its last [`RECENT`] — the two
//! targets of a duet, started at once and slow to bind, each get their own.

use std::collections::VecDeque;
use std::sync::Mutex;

/// Ports handed out are not handed out again until this many others have been.
pub const RECENT: usize = 4096;
/// The lowest port drawn (below: well-known and registered services' usual ports).
const LOWEST: u16 = 20000;

static HANDED: Mutex<VecDeque<u16>> = Mutex::new(VecDeque::new());

/// A free TCP port on loopback, for `{{port}}`; 0 if none could be bound.
pub fn free_port() -> u16 {
    let (lo, hi) = range(
        &std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").unwrap_or_default(),
    );
    let mut handed = HANDED.lock().unwrap_or_else(|e| e.into_inner());
    let mut draw = crate::rng::Rng::new(seed());
    // Below the ephemeral range first; the kernel's own choice if that is crowded.
    let candidates = (0..256)
        .map(|_| (lo as u64 + draw.below((hi - lo) as u64 + 1)) as u16)
        .chain((0..64).map(|_| 0));
    for want in candidates {
        let Some(port) = bind(want) else { continue };
        if !handed.contains(&port) {
            handed.push_back(port);
            if handed.len() > RECENT {
                handed.pop_front();
            }
            return port;
        }
    }
    0
}

/// The ports to draw from: [`LOWEST`] up to just below the ephemeral range's start
/// (`"32768\t60999"`); an ephemeral range starting too low leaves [`LOWEST`]..=29999.
fn range(local_port_range: &str) -> (u16, u16) {
    let start: u16 = local_port_range
        .split_whitespace()
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(32768);
    if start > LOWEST + 1000 {
        (LOWEST, start - 1)
    } else {
        (LOWEST, 29999)
    }
}

/// The port `want` (0: the kernel's choice) if it can be bound on loopback now.
fn bind(want: u16) -> Option<u16> {
    let l = std::net::TcpListener::bind(("127.0.0.1", want)).ok()?;
    l.local_addr().ok().map(|a| a.port()).filter(|p| *p != 0)
}

fn seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    crate::rng::mix(nanos ^ u64::from(std::process::id()) << 32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_come_from_below_the_ephemeral_range() {
        assert_eq!(range("32768\t60999\n"), (20000, 32767));
        assert_eq!(range("1024 65535"), (20000, 29999));
        assert_eq!(range(""), (20000, 32767));
    }

    #[test]
    fn two_threads_asking_at_once_never_get_the_same_port() {
        // The two sides of a duet ask together and bind late: among 2 × 500 ports
        // handed out (none bound meanwhile), none twice.
        let got: Vec<u16> = std::thread::scope(|s| {
            let a = s.spawn(|| (0..500).map(|_| free_port()).collect::<Vec<_>>());
            let b = s.spawn(|| (0..500).map(|_| free_port()).collect::<Vec<_>>());
            let mut v = a.join().unwrap();
            v.extend(b.join().unwrap());
            v
        });
        let (lo, hi) =
            range(&std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").unwrap());
        assert!(got.iter().all(|p| (lo..=hi).contains(p)), "{got:?}");
        let distinct: std::collections::BTreeSet<u16> = got.iter().copied().collect();
        assert_eq!(distinct.len(), got.len());
    }
}
