//! What `serve` can be told to do, each knob with its effect on the figures strainline
//! reports (see docs/testbed.md).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    /// The baseline.
    V1,
    /// 1.5× the CPU work per push: the regression of the *Systems Performance* seed.
    V2,
}

#[derive(Debug, Clone)]
pub struct Knobs {
    pub listen: SocketAddr,
    pub addr_file: Option<PathBuf>,
    /// Handler threads (tokio workers).
    pub workers: usize,
    /// State kept per registered device, bytes.
    pub state_bytes: usize,
    /// Units of hashing work per push (v2 does 1.5×).
    pub cpu_cost: u64,
    /// Bytes retained and never freed per push: a deliberate leak.
    pub leak_bytes: usize,
    pub profile: Profile,
    /// Probability of answering a push or register with HTTP 500.
    pub fail_rate: f64,
    /// Probability that `POST /devices` gives an id it then forgets.
    pub forget_rate: f64,
    /// How long a job (`POST /jobs`) takes: queued for the first half, running for
    /// the second, then done (or failed, at `fail_rate`).
    pub job_time: Duration,
    /// The key `POST /signed` verifies its requests' HMAC with.
    pub hmac_key: Option<String>,
    /// The whole server stops answering for `stall_for` once every `stall_every`.
    pub stall: Option<(Duration, Duration)>,
    /// Every push waits this long before it is answered, costing no CPU: a downstream
    /// call. Its service time does not depend on how many are in flight.
    pub delay: Duration,
    /// The delay applies only from this long after the first push (a latency that
    /// rises at a known second of a load run); from the first one when `None`.
    pub delay_after: Option<Duration>,
    /// Requests beyond this many in flight get 503.
    pub max_inflight: Option<usize>,
    /// Serve HTTPS with a self-signed certificate made at start.
    pub tls: bool,
    /// Where to write that certificate (PEM); a temporary file if not given.
    pub cert_out: Option<PathBuf>,
    /// Abort (SIGABRT) after this many requests.
    pub crash_after: Option<u64>,
    /// Each push holds one global mutex this long (asleep while holding it), on the
    /// worker thread: the other workers wait on the lock, a futex.
    pub lock_hold: Option<Duration>,
    /// Pushes are handed to this many threads named `pool-N`, each blocked for `delay`
    /// (a blocking downstream call): beyond `pool ÷ delay` requests queue for a thread.
    pub pool: Option<usize>,
    /// Each push writes this many bytes to a file (at its own offset, no lock) and
    /// waits for `fdatasync`: storage writes.
    pub fsync_bytes: Option<usize>,
}

impl Knobs {
    /// Units of work a push costs under the profile.
    pub fn units_per_push(&self) -> u64 {
        match self.profile {
            Profile::V1 => self.cpu_cost,
            Profile::V2 => self.cpu_cost * 3 / 2,
        }
    }
}
