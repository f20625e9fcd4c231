//! The testbed's command line; `main.rs` and `strainline testbed …` both call [`run`].

use std::ffi::OsString;

use clap::{Parser, Subcommand};

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::fixtures;
use crate::serve::{self, Knobs, Profile};

#[derive(Parser)]
#[command(
    name = "strainline-testbed",
    version,
    about = "A system under test with known behaviour, for strainline"
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Serve the IoT-like HTTP service (HTTP/1.1 and HTTP/2, optionally TLS).
    Serve(Box<ServeArgs>),
    /// The crash-test record store.
    #[command(subcommand)]
    Store(StoreCmd),
    /// Memory profile: idle at --base MiB, a short spike, then a child holding memory.
    Memhog {
        #[arg(long, default_value_t = 20)]
        base: usize,
        #[arg(long, default_value_t = 300)]
        spike: usize,
        #[arg(long, default_value_t = 50)]
        spike_ms: u64,
        #[arg(long, default_value_t = 100)]
        child: usize,
        #[arg(long, default_value_t = 1000)]
        child_ms: u64,
        #[arg(long, default_value_t = 2500)]
        total_ms: u64,
    },
    /// Hold --mib MiB resident for --ms milliseconds.
    Hold {
        #[arg(long)]
        mib: usize,
        #[arg(long)]
        ms: u64,
    },
    /// Keep one core busy for --seconds.
    Spin {
        #[arg(long, default_value_t = 2.0)]
        seconds: f64,
    },
    /// A noisy neighbour for --seconds: each of --threads threads alternates random
    /// spells (0.5–2 s) of CPU work, memory-bandwidth work and idleness.
    Noise {
        #[arg(long, default_value_t = 60.0)]
        seconds: f64,
        #[arg(long, default_value_t = 2)]
        threads: usize,
        /// Seed of the spells (default: from the clock, so no two neighbours agree).
        #[arg(long)]
        seed: Option<u64>,
    },
    /// Sleep for --seconds.
    Idle {
        #[arg(long, default_value_t = 2.0)]
        seconds: f64,
    },
    /// Start --children sleeping children and wait for them.
    /// A parent that maps --mib MiB of shared memory, touches it, and forks --children
    /// that touch it too and sleep --seconds: every process's RSS counts the mapping,
    /// its proportional share (PSS) counts it once across the tree
    Shared {
        #[arg(long, default_value_t = 200)]
        mib: usize,
        #[arg(long, default_value_t = 20)]
        children: usize,
        #[arg(long, default_value_t = 3.0)]
        seconds: f64,
    },
    Forktree {
        #[arg(long, default_value_t = 50)]
        children: usize,
        #[arg(long, default_value_t = 5.0)]
        seconds: f64,
    },
    /// Work of known complexity: --n units, or n²/1000 with --quadratic, after a fixed
    /// start of --start-ms of CPU (what a real binary's start costs).
    Work {
        #[arg(long)]
        n: u64,
        #[arg(long)]
        quadratic: bool,
        #[arg(long, default_value_t = 0.0)]
        start_ms: f64,
        /// Hashing rounds per unit (the work's weight).
        #[arg(long, default_value_t = 200)]
        rounds: u64,
    },
    /// Leave behind a setsid daemon holding --mib MiB for --seconds, and exit at once.
    /// A server with a small listen backlog that accepts slowly (one connection every
    /// --accept-every), as `listen(5)` servers do under load; accepted connections get a
    /// keep-alive `200 OK` for every request
    Backlog {
        #[arg(long)]
        listen: String,
        #[arg(long, default_value_t = 5)]
        backlog: i32,
        #[arg(long, value_parser = duration, default_value = "200ms")]
        accept_every: Duration,
        /// Answer one request per connection and close it (`Connection: close`), so
        /// every request needs a new connection through the listen queue
        #[arg(long)]
        close: bool,
    },
    Daemonize {
        #[arg(long, default_value_t = 64)]
        mib: usize,
        #[arg(long, default_value_t = 30.0)]
        seconds: f64,
        /// How long the parent stays after starting the daemon, milliseconds.
        #[arg(long, default_value_t = 1000)]
        linger_ms: u64,
    },
}

/// Parses `500ms`, `2s`, `1.5s`, `1m`.
fn duration(s: &str) -> Result<Duration, String> {
    let (num, unit) = s.split_at(s.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(s.len()));
    let v: f64 = num
        .parse()
        .map_err(|_| format!("'{s}' is not a duration (e.g. 500ms, 2s)"))?;
    let secs = match unit {
        "ms" => v / 1000.0,
        "s" => v,
        "m" => v * 60.0,
        _ => return Err(format!("'{s}' is not a duration (e.g. 500ms, 2s)")),
    };
    Ok(Duration::from_secs_f64(secs))
}

#[derive(clap::Args)]
struct ServeArgs {
    /// Address to listen on; port 0 picks a free one (printed on stdout).
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// Also write the chosen address to this file.
    #[arg(long, value_name = "FILE")]
    addr_file: Option<PathBuf>,
    /// Allow a non-loopback --listen address.
    #[arg(long)]
    allow_non_loopback: bool,
    /// Handler threads.
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// State kept per registered device, bytes.
    #[arg(long, default_value_t = 2048)]
    state_bytes: usize,
    /// Units of hashing work per push, each 10 µs of the handler thread's CPU time (its
    /// thread CPU clock); a unit's wall time at start is printed as cpu_unit_us.
    #[arg(long, default_value_t = 10)]
    cpu_cost: u64,
    /// Bytes retained and never freed per push (a deliberate leak).
    #[arg(long, default_value_t = 0)]
    leak_bytes: usize,
    /// v2 does 1.5x the CPU work per push of v1.
    #[arg(long, default_value = "v1", value_parser = ["v1", "v2"])]
    profile: String,
    /// Probability (0..1) of answering register/push with HTTP 500.
    #[arg(long, default_value_t = 0.0)]
    fail_rate: f64,
    /// Probability (0..1) that `POST /devices` answers with an id but forgets the
    /// device (its pushes then get 404, as the IoT seed's device that failed to
    /// register properly); `forgotten` in /stats counts them.
    #[arg(long, default_value_t = 0.0)]
    forget_rate: f64,
    /// How long a job takes: `POST /jobs` answers 202 with `{"id": "j-N", "status":
    /// "queued"}`; `GET /jobs/j-N` says `queued` for the first half, `running` for the
    /// second, then `done` (or `failed`, at --fail-rate); 404 for an id never given.
    #[arg(long, value_parser = duration, default_value = "50ms")]
    job_time: Duration,
    /// Serve `POST /signed`, which answers 200 only to a request whose `X-Signature` is
    /// the hex HMAC-SHA256 of its body under this key (401 otherwise), with
    /// `{"status": "ok", "n": N}`, N counting the signed requests.
    #[arg(long)]
    hmac_key: Option<String>,
    /// Stop answering for --stall-for once every this long.
    #[arg(long, value_parser = duration, requires = "stall_for")]
    stall_every: Option<Duration>,
    /// How long each stall lasts.
    #[arg(long, value_parser = duration, requires = "stall_every")]
    stall_for: Option<Duration>,
    /// Wait this long before answering each push, without using CPU (like a downstream call).
    #[arg(long, value_parser = duration, default_value = "0s")]
    delay: Duration,
    /// Apply --delay only from this long after the first push (a latency rise at a
    /// known second of a run); before, pushes are answered at once.
    #[arg(long, value_parser = duration, requires = "delay")]
    delay_after: Option<Duration>,
    /// Answer 503 beyond this many requests in flight.
    #[arg(long)]
    max_inflight: Option<usize>,
    /// Serve HTTPS with a self-signed certificate generated at start.
    #[arg(long)]
    tls: bool,
    /// Where to write the certificate (PEM).
    #[arg(long, value_name = "FILE")]
    cert_out: Option<PathBuf>,
    /// Abort after this many requests.
    #[arg(long)]
    crash_after: Option<u64>,
    /// Hold one global lock this long per push, on the worker thread (a contended mutex).
    #[arg(long, value_parser = duration)]
    lock_hold: Option<Duration>,
    /// Hand pushes to this many `pool-N` threads, each blocked for --delay (a blocking call).
    #[arg(long, requires = "delay")]
    pool: Option<usize>,
    /// Write this many bytes per push to a file and fdatasync it (real storage writes).
    #[arg(long, value_name = "BYTES")]
    fsync_bytes: Option<usize>,
}

#[derive(Subcommand)]
enum StoreCmd {
    /// Append records with the commit protocol (or without it: --unsafe).
    Write {
        #[arg(long)]
        dir: PathBuf,
        #[arg(long, default_value_t = 1000)]
        count: u64,
        #[arg(long, default_value_t = 65536)]
        value_bytes: usize,
        /// Write the commit marker first and the record after, unprotected.
        #[arg(long = "unsafe")]
        unsafe_mode: bool,
        /// Print `committed N` every this many records (0: never).
        #[arg(long, default_value_t = 10)]
        progress_every: u64,
    },
    /// Check every invariant; exit 0 if all hold, 1 with what is wrong.
    Verify {
        #[arg(long)]
        dir: PathBuf,
    },
}

/// Parses `args` (the first is the program name) and runs the chosen subcommand.
pub fn run<I: IntoIterator<Item = OsString>>(args: I) -> i32 {
    let code = match Cli::parse_from(args).command {
        Cmd::Memhog {
            base,
            spike,
            spike_ms,
            child,
            child_ms,
            total_ms,
        } => {
            fixtures::memhog(base, spike, spike_ms, child, child_ms, total_ms);
            0
        }
        Cmd::Hold { mib, ms } => {
            fixtures::hold(mib, ms);
            0
        }
        Cmd::Spin { seconds } => {
            fixtures::spin(seconds);
            0
        }
        Cmd::Noise {
            seconds,
            threads,
            seed,
        } => {
            let seed = seed.unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(1, |d| d.as_nanos() as u64)
            });
            fixtures::noise(seconds, threads, seed);
            0
        }
        Cmd::Idle { seconds } => {
            fixtures::idle(seconds);
            0
        }
        Cmd::Shared {
            mib,
            children,
            seconds,
        } => {
            fixtures::shared(mib, children, seconds);
            0
        }
        Cmd::Forktree { children, seconds } => {
            fixtures::forktree(children, seconds);
            0
        }
        Cmd::Daemonize {
            mib,
            seconds,
            linger_ms,
        } => {
            fixtures::daemonize(mib, seconds, linger_ms);
            0
        }
        Cmd::Backlog {
            listen,
            backlog,
            accept_every,
            close,
        } => fixtures::backlog(&listen, backlog, accept_every, close),
        Cmd::Work {
            n,
            quadratic,
            start_ms,
            rounds,
        } => {
            fixtures::work(n, quadratic, start_ms, rounds);
            0
        }
        Cmd::Serve(a) => serve::run(
            Knobs {
                listen: a.listen,
                addr_file: a.addr_file,
                workers: a.workers,
                state_bytes: a.state_bytes,
                cpu_cost: a.cpu_cost,
                leak_bytes: a.leak_bytes,
                profile: if a.profile == "v2" {
                    Profile::V2
                } else {
                    Profile::V1
                },
                fail_rate: a.fail_rate,
                forget_rate: a.forget_rate,
                job_time: a.job_time,
                hmac_key: a.hmac_key.clone(),
                stall: a.stall_every.zip(a.stall_for),
                delay: a.delay,
                delay_after: a.delay_after,
                max_inflight: a.max_inflight,
                tls: a.tls,
                cert_out: a.cert_out,
                crash_after: a.crash_after,
                lock_hold: a.lock_hold,
                pool: a.pool.map(|n| n.max(1)),
                fsync_bytes: a.fsync_bytes,
            },
            a.allow_non_loopback,
        ),
        Cmd::Store(StoreCmd::Write {
            dir,
            count,
            value_bytes,
            unsafe_mode,
            progress_every,
        }) => match crate::store::write(&dir, count, value_bytes, unsafe_mode, progress_every) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("store write: {}: {e}", dir.display());
                1
            }
        },
        Cmd::Store(StoreCmd::Verify { dir }) => match crate::store::verify(&dir) {
            Ok(n) => {
                println!("ok: {n} committed records, all intact");
                0
            }
            Err(why) => {
                println!("FAIL: {why}");
                1
            }
        },
    };
    code
}
