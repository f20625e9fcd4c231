//! `strainline load`'s flags: the workload, the models, TLS, gates, and where the
//! load comes from (`--agents`), with the value parsers only they use.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use crate::commands::flags::{in_range, parse_duration, parse_pid, parse_var, ExportArgs};
use crate::error::Category;
use crate::limits;

#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    strainline load http://127.0.0.1:8080/health -c 50 -z 10s          # closed model\n  \
    strainline load http://127.0.0.1:8080/health -q 2000 -z 30s        # open model, constant rate\n  \
    strainline load http://127.0.0.1:8080/ --ramp 100..5000 -z 60s     # open model, ramp\n  \
    strainline load https://127.0.0.1:8443/ -q 500 --http2 --insecure  # HTTP/2 over TLS\n  \
    strainline load ws://127.0.0.1:9000/echo -q 5000 -d '{\"op\":1}'      # WebSocket messages, each awaiting its reply\n  \
    strainline load redis://127.0.0.1:6379 -c 50 -d 'SET k{{seq}} {{random 64}}'  # Redis commands (RESP)\n  \
    strainline load -c 4 -z 10s -- ./client --op put                   # a command as the unit of work")]
pub struct LoadArgs {
    /// The URL to load: http(s)://, ws(s):// (WebSocket messages), grpc(s)://, mqtt(s)://,
    /// redis(s):// (the body is the command); or give a command after `--`.
    pub url: Option<String>,
    /// Closed model: this many connections, each sending when its last response arrives.
    /// With -q or --ramp: the most connections the open model's pool may open.
    #[arg(short = 'c', long = "connections", value_name = "N", value_parser = parse_connections)]
    pub connections: Option<usize>,
    /// Open model: requests per second, sent at intended times whatever the target does.
    #[arg(short = 'q', long = "rate", value_name = "RATE", value_parser = parse_rate, conflicts_with = "ramp")]
    pub rate: Option<f64>,
    /// Open model: rate rising linearly from FROM to TO over the duration (e.g. 100..2000).
    #[arg(long, value_name = "FROM..TO", value_parser = parse_ramp, requires = "duration")]
    pub ramp: Option<(f64, f64)>,
    /// Run a scenario file (TOML): virtual clients with once / every / weighted steps.
    /// The URL gives the scheme, host and port; the steps give the paths.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["rate", "ramp", "connections", "body", "body_file", "body_bytes", "think", "method", "headers"])]
    pub scenario: Option<PathBuf>,
    /// With --scenario: give one of its [vars] this value (repeatable), as text, e.g. a
    /// run's prefix: --var prefix=rc2.
    #[arg(long = "var", value_name = "NAME=VALUE", value_parser = parse_var, requires = "scenario")]
    pub vars: Vec<(String, String)>,
    /// Replay an access log (the formats of `workload characterize`): each logged
    /// request sent at its logged time from the first, in the open model; the URL gives
    /// the scheme, host and port, the log the methods and paths. -d/--body-bytes is the
    /// body of POST, PUT and PATCH (bodies are not in access logs).
    #[arg(long, value_name = "LOG", conflicts_with_all = ["rate", "ramp", "scenario", "poisson", "think"])]
    pub replay: Option<PathBuf>,
    /// With --replay: how much faster than logged (2 = twice as fast).
    #[arg(long, value_name = "X", requires = "replay", default_value_t = 1.0)]
    pub speed: f64,
    /// Open model: Poisson arrivals instead of evenly spaced ones.
    #[arg(long)]
    pub poisson: bool,
    /// Seed for Poisson arrivals, random bodies and a scenario's random choices (it wins
    /// over the scenario's own `seed`). Without it each run draws one, printed with the
    /// summary and stored with the run, so that a run can be replayed.
    #[arg(long)]
    pub seed: Option<u64>,
    /// How long to send (e.g. 10s, 2m). Without -z or -n: 10s.
    #[arg(short = 'z', long = "duration", value_name = "DURATION", value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// How many requests to send.
    #[arg(short = 'n', long = "requests", value_name = "COUNT", value_parser = parse_requests)]
    pub count: Option<u64>,
    /// Worker threads (default: one per core).
    #[arg(long, value_name = "N", value_parser = parse_threads)]
    pub threads: Option<usize>,
    /// HTTP method.
    #[arg(short = 'm', long, default_value = "GET")]
    pub method: String,
    /// A request header, 'Name: value' (repeatable).
    #[arg(short = 'H', long = "header", value_name = "HEADER")]
    pub headers: Vec<String>,
    /// Request body.
    #[arg(short = 'd', long = "body", value_name = "TEXT", conflicts_with_all = ["body_file", "body_bytes"])]
    pub body: Option<String>,
    /// Request body from a file.
    #[arg(long, value_name = "FILE", conflicts_with = "body_bytes")]
    pub body_file: Option<PathBuf>,
    /// A random body of N bytes (a pool of distinct payloads).
    #[arg(long, value_name = "N", value_parser = parse_body_bytes)]
    pub body_bytes: Option<usize>,
    /// Per-request timeout.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub timeout: Duration,
    /// Closed model: pause between a response and the next request.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub think: Option<Duration>,
    /// Speak HTTP/2 (prior knowledge on http://, ALPN on https://).
    #[arg(long)]
    pub http2: bool,
    /// With --http2 (or gRPC): requests in flight on each connection, each on its own
    /// stream (h2load's -m). Closed model: -c 10 --streams 10 keeps 100 requests in
    /// flight; open model: the pool's connections carry up to M requests each.
    #[arg(long, value_name = "M", default_value_t = 1)]
    pub streams: usize,
    /// WebSocket: the reply to a message is the first one whose JSON field NAME (a.b for
    /// a nested one) equals the message's; other messages are counted as pushed.
    #[arg(long, value_name = "NAME")]
    pub reply_field: Option<String>,
    /// Accept any TLS certificate (self-signed test servers).
    #[arg(long)]
    pub insecure: bool,
    /// Trust this certificate or CA (PEM) for https://.
    #[arg(long, value_name = "FILE")]
    pub cacert: Option<PathBuf>,
    /// Show this client certificate (PEM, its chain) to a server that asks for one
    /// (mutual TLS), with --key.
    #[arg(long, value_name = "FILE", requires = "key")]
    pub cert: Option<PathBuf>,
    /// The private key of --cert (PEM: PKCS#8, RSA or EC).
    #[arg(long, value_name = "FILE", requires = "cert")]
    pub key: Option<PathBuf>,
    /// Write the summary and the per-second series as JSON (schema strainline.load.v1).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// A pass/fail condition on the run (repeatable), in the suite's gate language:
    /// `error_rate < 1%`, `latency_p99 < 300ms`, `throughput >= 500`. A failed gate
    /// exits 1, like a suite's.
    #[arg(long = "gate", value_name = "METRIC<VALUE")]
    pub gates: Vec<String>,
    /// The latency percentiles the summary shows, e.g. 50,75,95,99.9 (default
    /// 50,90,95,99,99.9); each is stored as latency_pNN, per step too. A gate's
    /// percentile (latency_p97.5) is kept whether listed or not.
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = parse_percentile)]
    pub percentiles: Vec<f64>,
    /// Stop the run as soon as a gate on error_rate or a latency is decided failed
    /// (it cannot pass whatever the rest of the run does), exit 1 with the reason.
    #[arg(long, requires = "gates")]
    pub abort_on_fail: bool,
    /// A label for the run in the store.
    #[arg(long, value_name = "TEXT")]
    pub label: Option<String>,
    /// No live progress line nor live view (they are only shown on a terminal anyway).
    #[arg(long)]
    pub no_progress: bool,
    /// No live view on a terminal: the plain progress line instead.
    #[arg(long)]
    pub no_tui: bool,
    #[command(flatten)]
    pub agents: AgentsArgs,
    #[command(flatten)]
    pub export: ExportArgs,
    /// Watch the target's process tree (its RSS, CPU, threads, FDs: in the summary and
    /// the live figures) — the server's PID on this machine.
    #[arg(long, value_name = "PID", value_parser = parse_pid)]
    pub pid: Option<u32>,
    /// A command workload instead of HTTP: each unit of work runs this command (after
    /// `--`) to its end; exit 0 is success (e.g. a client binary, `redis-benchmark`).
    #[arg(last = true, value_name = "CMD")]
    pub exec: Vec<String>,
}

/// Where the load comes from when not from this machine.
#[derive(Debug, Args, Default)]
pub struct AgentsArgs {
    /// Generate the load from these agents instead of this machine, each taking an exact
    /// slice of the schedule: tls://HOST:PORT (a `strainline agent --listen`) or
    /// ssh://[USER@]HOST[:PORT][/PATH] (runs `strainline agent --stdio` there), comma-separated.
    #[arg(long = "agents", value_name = "LIST")]
    pub list: Option<String>,
    /// The shared token of tls:// agents (the file each agent was started with).
    #[arg(
        long = "agent-token-file",
        value_name = "FILE",
        env = "STRAINLINE_AGENT_TOKEN_FILE",
        hide_env_values = true
    )]
    pub token_file: Option<PathBuf>,
}

fn parse_ramp(s: &str) -> crate::error::Result<(f64, f64)> {
    let (a, b) = s
        .split_once("..")
        .ok_or_else(|| {
            format!("'{s}' is not a ramp: write FROM..TO in requests per second, e.g. 100..2000")
        })
        .usage()?;
    let p = |v: &str| {
        v.trim()
            .parse::<f64>()
            .ok()
            .filter(|x| x.is_finite() && *x > 0.0)
    };
    match (p(a), p(b)) {
        (Some(a), Some(b)) => Ok((a, b)),
        _ => Err(crate::Error::usage(format!(
            "'{s}': both ends of a ramp must be positive rates, e.g. 100..2000"
        ))),
    }
}

fn parse_rate(s: &str) -> crate::error::Result<f64> {
    in_range(s, limits::RATE.named("--rate"))
}

fn parse_connections(s: &str) -> crate::error::Result<usize> {
    in_range(s, limits::CONNECTIONS.named("-c"))
}
fn parse_threads(s: &str) -> crate::error::Result<usize> {
    in_range(s, limits::THREADS.named("--threads"))
}
fn parse_requests(s: &str) -> crate::error::Result<u64> {
    in_range(s, limits::REQUESTS.named("-n"))
}
fn parse_body_bytes(s: &str) -> crate::error::Result<usize> {
    in_range(s, limits::BODY_BYTES.named("--body-bytes"))
}

fn parse_percentile(s: &str) -> crate::error::Result<f64> {
    let q: f64 = s
        .trim()
        .parse()
        .map_err(|_| crate::Error::usage(format!("'{s}' is not a percentile (e.g. 95 or 99.9)")))?;
    if !(q > 0.0 && q < 100.0) {
        return Err(crate::Error::usage(format!(
            "percentile {s}: give one above 0 and below 100 (the maximum is always shown)"
        )));
    }
    Ok(q)
}
