//! Capacity, the IoT seed's way: how many clients the target serves, bounded by its
//! throughput (ceiling × the period of one client's requests, 80% of it as the safe
//! figure) and by its memory (usable RAM / memory per client); the smaller wins.

use std::time::Duration;

/// Share of the ideal client count taken as safe.
pub const SAFE_SHARE: f64 = 0.8;

#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Capacity {
    /// Memory growth per client, bytes.
    pub bytes_per_client: f64,
    /// Clients the throughput allows, and the safe share of them.
    pub ideal: f64,
    pub safe: f64,
    /// Clients the memory allows; `None` when memory did not grow (no bound).
    pub ram_bound: Option<f64>,
}

impl Capacity {
    /// The client count to plan for: the safe figure, or the memory bound if smaller.
    pub fn clients(&self) -> f64 {
        self.ram_bound.map_or(self.safe, |r| self.safe.min(r))
    }
}

/// `growth` bytes over a soak with `clients` clients each sending one request per
/// `period`, against a target that takes `rate` req/s and a host with `ram` bytes.
pub fn capacity(growth: f64, clients: u64, period: Duration, rate: f64, ram: f64) -> Capacity {
    let bytes_per_client = growth.max(0.0) / clients.max(1) as f64;
    let ideal = rate * period.as_secs_f64();
    Capacity {
        bytes_per_client,
        ideal,
        safe: SAFE_SHARE * ideal,
        ram_bound: (bytes_per_client > 0.0).then(|| ram / bytes_per_client),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_iot_seed_example() {
        // 1,000 req/s at one request per 200 s: 200,000 clients ideal, 160,000 safe;
        // 2 MiB per client in 64 GiB bounds at 32,768 clients, which wins.
        let c = capacity(
            2000.0 * 2.0 * 1048576.0,
            2000,
            Duration::from_secs(200),
            1000.0,
            64.0 * 1073741824.0,
        );
        assert_eq!((c.ideal, c.safe), (200_000.0, 160_000.0));
        assert_eq!(c.ram_bound, Some(32_768.0));
        assert_eq!(c.clients(), 32_768.0);
    }

    #[test]
    fn memory_that_did_not_grow_bounds_nothing() {
        let c = capacity(-5.0, 10, Duration::from_secs(1), 100.0, 1e9);
        assert_eq!(c.ram_bound, None);
        assert_eq!(c.clients(), 80.0);
    }
}
