//! The command line, as clap derive structs. Parsing only: values are checked here
//! (durations, pids) so that bad input is refused before any work starts.

use crate::error::Category;
use crate::limits;
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "strainline",
    version,
    about = "Performance non-regression testing: benchmark, stress, soak and compare programs and services",
    after_help = "Exit codes: 0 passed · 1 a gate or comparison failed · 2 usage or configuration error · \
                  3 run invalid · 4 target crashed · 130 interrupted. `monitor` exits with the command's own status."
)]
pub struct Cli {
    /// The results store: a path to an SQLite file, or a PostgreSQL URL
    /// (postgres://user:password@host:port/database) shared by a team's machines. The
    /// password is never printed nor stored.
    #[arg(long, global = true, env = "STRAINLINE_STORE", hide_env_values = true, value_name = "PATH|URL", default_value = crate::store::DEFAULT_PATH)]
    pub store: crate::store::Location,

    /// Say more of what strainline does on stderr (-v, -vv); RUST_LOG overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,

    /// strainline's log on stderr as text, or one JSON object per line (for agents in
    /// pods).
    #[arg(
        long,
        global = true,
        value_enum,
        default_value = "text",
        value_name = "FORMAT"
    )]
    pub log_format: LogFormat,

    #[command(subcommand)]
    pub command: Command,
}

/// A file `strainline schema` describes.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum SchemaOf {
    /// A suite file (`strainline run`, `strainline check`).
    Suite,
    /// A scenario file (`--scenario`, a test's `scenario =`).
    Scenario,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a command (or attach to a process) and watch its whole process tree.
    Monitor(MonitorArgs),
    /// Run a suite: start the target, apply each test's workload, judge, store.
    Run(RunArgs),
    /// Check a suite without running it: every key, value, gate and placeholder (exit 0
    /// valid, 2 not).
    Check(CheckArgs),
    /// Drive load at a URL (HTTP/1.1, HTTP/2, WebSocket, gRPC, MQTT or Redis) or a
    /// command: open model (-q RATE) or closed model (-c N).
    Load(Box<LoadArgs>),
    /// List the runs in the results store, newest first.
    Runs(RunsArgs),
    /// Show one stored run: its summary and metrics.
    Show(ShowArgs),
    /// Write a stored run's reports: HTML with charts, Markdown, JUnit XML, CSV, JSON.
    Report(ReportArgs),
    /// Compare two versions: every metric of every case both ran, with a verdict.
    Compare(CompareArgs),
    /// A metric's history across stored runs, and the change points in it.
    History(HistoryArgs),
    /// A short tour on built-in defaults: a benchmark, a ramp and two soaks of the bundled
    /// testbed, with an HTML report.
    Demo,
    /// Write a commented starter suite for a URL, a command that serves, or a benchmark
    /// binary.
    Init(InitArgs),
    /// Serve as a load agent: a coordinator (`load --agents`) drives it over TLS with a
    /// shared token (--listen, --connect), or over ssh (--stdio).
    Agent(AgentArgs),
    /// Deploy agents: `agents manifest` prints a Kubernetes Indexed Job of agents that
    /// dial the coordinator.
    #[command(subcommand)]
    Agents(AgentsCommand),
    /// Workloads from access logs: `characterize` what production sends, `compare` two
    /// workloads dimension by dimension, write a `scenario` that reproduces one.
    #[command(subcommand)]
    Workload(WorkloadCommand),
    /// Store the results of another benchmark tool as a run (one case per benchmark, one
    /// repetition per sample), for compare, history, reports and gates.
    Import(ImportArgs),
    /// Serve the results store as pages in a browser: runs, a run's report, comparisons,
    /// histories with change points, runs in progress; and as JSON under /api/v1/.
    Serve(ServeArgs),
    /// Print a shell's completion script for strainline: bash, zsh, fish, elvish or
    /// powershell (e.g. `strainline completions bash > ~/.local/share/bash-completion/completions/strainline`).
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Write man pages generated from this help: strainline(1) and one per command
    /// (strainline-load(1), …), into --dir; without it, print strainline(1) (e.g.
    /// `strainline man --dir ~/.local/share/man/man1`, then `man strainline`).
    Man {
        /// The directory to write strainline.1 and strainline-COMMAND.1 into (made if
        /// missing).
        #[arg(long, value_name = "DIR")]
        dir: Option<std::path::PathBuf>,
    },
    /// Print the JSON Schema of a suite file or a scenario file, made from the types that
    /// read them: editors complete and check their keys with it (Even Better TOML /
    /// taplo: a first line `#:schema ./suite.schema.json`; e.g. `strainline schema
    /// suite > suite.schema.json`).
    Schema {
        #[arg(value_enum)]
        file: SchemaOf,
    },
    /// Run the bundled system under test (the same as the `strainline-testbed` binary).
    #[command(disable_help_flag = true)]
    Testbed {
        /// Arguments for strainline-testbed (try `strainline testbed --help`).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<OsString>,
    },
}

fn parse_duration(s: &str) -> crate::error::Result<Duration> {
    let d = crate::units::parse_duration(s).usage()?;
    if d.is_zero() {
        return Err(crate::Error::usage(format!(
            "'{s}' is zero; give a positive duration such as 10ms"
        )));
    }
    limits::DURATION
        .duration(d)
        .map_err(|_| crate::Error::usage(format!("'{s}': give a duration from 1ms to 30 days")))
}

#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  strainline monitor -- ./my-benchmark --iterations 1000\n  \
                  strainline monitor --interval 10ms --json out.json -- make -j2\n  \
                  strainline monitor --pid 4242 --duration 30s"
)]
pub struct MonitorArgs {
    /// Attach to a running process (and its descendants) instead of starting a command.
    #[arg(long, value_name = "PID", conflicts_with = "command", value_parser = parse_pid)]
    pub pid: Option<u32>,

    /// Stop after this long: detach from --pid, or stop the command (SIGTERM).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub duration: Option<Duration>,

    /// Time between samples (e.g. 10ms, 0.5s).
    #[arg(short, long, value_name = "DURATION", default_value = "100ms", value_parser = parse_duration)]
    pub interval: Duration,

    /// Write the summary and every sample as JSON (schema strainline.monitor.v1).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,

    /// Write the sampled time series as CSV, one row per tick.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,

    /// A label for the run in the store (e.g. a version: v0.8.0).
    #[arg(long, value_name = "TEXT")]
    pub label: Option<String>,

    /// How many of the largest processes each sample lists.
    #[arg(long, value_name = "N", default_value_t = 3, value_parser = parse_top)]
    pub top: usize,

    /// Do not put the command in a cgroup of its own: find descendants by scanning /proc
    /// and take CPU from /proc alone (the tree-wide kernel memory peak is then absent).
    #[arg(long)]
    pub no_cgroup: bool,

    /// Do not print the summary block.
    #[arg(short, long)]
    pub quiet: bool,

    /// No live view with --pid on a terminal (a command run after `--` keeps the
    /// terminal for its own output and never has one).
    #[arg(long)]
    pub no_tui: bool,
    #[command(flatten)]
    pub export: ExportArgs,

    /// The command to run, after `--`.
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<OsString>,
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

/// A number within `limit` (see `limits`), as the type the flag takes.
fn in_range<T: std::str::FromStr>(s: &str, limit: limits::Limit) -> crate::error::Result<T> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| crate::Error::usage(format!("'{s}' is not a number")))?;
    limit.check(v)?;
    s.trim()
        .parse::<T>()
        .map_err(|_| crate::Error::usage(format!("'{s}': give a whole number")))
}

/// A date (`2026-11-01`) or an RFC 3339 time (`2026-11-01T08:00:00Z`), as the store
/// compares them.
fn parse_since(s: &str) -> crate::error::Result<String> {
    if crate::clock::is_date_or_time(s) {
        Ok(s.replacen(' ', "T", 1))
    } else {
        Err(crate::Error::usage(format!(
            "'{s}' is not a date: give YYYY-MM-DD (2026-11-01) or an RFC 3339 time (2026-11-01T08:00:00Z)"
        )))
    }
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
fn parse_time_scale(s: &str) -> crate::error::Result<f64> {
    in_range(s, limits::TIME_SCALE.named("--time-scale"))
}
fn parse_top(s: &str) -> crate::error::Result<usize> {
    in_range(s, limits::TOP.named("--top"))
}
/// A pid the kernel could have given (above 0 and within `pid_t`): never one that
/// `kill` would read as "every process".
fn parse_pid(s: &str) -> crate::error::Result<u32> {
    in_range(s, limits::PID.named("--pid"))
}

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

/// Live figures for Prometheus and OpenTelemetry (load, run, monitor).
#[derive(Debug, Args, Default, Clone)]
pub struct ExportArgs {
    /// Serve the live figures at http://ADDR/metrics in the Prometheus text format
    /// (requests by status, latency histogram, offered and achieved rate, the target's
    /// RSS, CPU, threads and FDs, the generator's CPU and lag), e.g. 127.0.0.1:9464.
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<String>,
    /// Push the same figures over OTLP/HTTP (JSON) every 5 s and at the end, e.g.
    /// http://127.0.0.1:4318/v1/metrics.
    #[arg(long, value_name = "URL")]
    pub otlp: Option<String>,
}

impl ExportArgs {
    pub fn targets(&self) -> crate::live::export::Targets {
        crate::live::export::Targets {
            listen: self.metrics_listen.clone(),
            otlp: self.otlp.clone(),
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum AgentsCommand {
    /// Print a Kubernetes Indexed Job of N agents that dial the coordinator (apply it
    /// with kubectl; the token comes from a Secret you create from the token file).
    #[command(after_help = "Example:\n  \
        kubectl create secret generic strainline-agent-token --from-file=token=agent.token\n  \
        strainline agents manifest --count 3 --coordinator COORDINATOR:7461 | kubectl apply -f -\n  \
        strainline load URL -q 30000 -z 5m \\\n    \
        --agents 'listen://ADDR:7461?count=3' --agent-token-file agent.token")]
    Manifest(ManifestArgs),
}

#[derive(Debug, Subcommand)]
pub enum WorkloadCommand {
    /// Read access logs (nginx/Apache Common or Combined, JSON lines; gzip accepted) and
    /// report the request mix by route, the arrival rate and its variance, the status
    /// mix and the clients.
    #[command(after_help = "Examples:\n  \
        strainline workload characterize /var/log/nginx/access.log\n  \
        strainline workload characterize access.log.1.gz access.log --by hour --json profile.json\n  \
        strainline workload characterize app.jsonl --json-fields time=ts,path=uri --route '^/files/(.+)$'")]
    Characterize(CharacterizeArgs),
    /// Compare workload B (e.g. the target's access log during a test) with A (e.g.
    /// production): mix, status, rate, peak rate, dispersion and sizes, each against a
    /// tolerance (exit 0 similar, 1 differs).
    #[command(after_help = "Examples:\n  \
        strainline workload compare production.log test.log\n  \
        strainline workload compare access.log access.log --by hour --a-window '2026-11-22 09' --b-window '2026-11-22 18'\n  \
        strainline workload compare prod.log test.log --tolerance mix=2,rate=5%,dispersion=20%")]
    Compare(WorkloadCompareArgs),
    /// Write a scenario that reproduces a log's workload: its mix as weighted steps
    /// sending the observed requests, its arrivals as the log's own per-second counts
    /// (the rate with its variance). Run it with `strainline load URL --scenario FILE`.
    #[command(after_help = "Examples:\n  \
        strainline workload scenario access.log -o production.toml\n  \
        strainline workload scenario access.log --by hour --window '2026-11-22 18' --scale 2 -o peak-x2.toml\n  \
        strainline workload scenario access.log --constant -o average.toml")]
    Scenario(WorkloadScenarioArgs),
    /// Make a user's flow from a recorded browser session (HAR 1.2: DevTools, mitmproxy's
    /// hardump, Playwright, k6 Studio): the values the server handed out and later
    /// requests sent back (CSRF tokens, ids, bearer tokens) found and correlated by
    /// themselves, static assets and other hosts left out, redirects followed.
    #[command(after_help = "Examples:\n  \
        strainline workload flow session.har -o flow.toml\n  \
        strainline workload flow session.har --host 127.0.0.1:8000 -o flow.toml\n  \
        strainline workload flow session.har --no-correlate -o verbatim.toml")]
    Flow(WorkloadFlowArgs),
}

#[derive(Debug, Args)]
#[command(
    after_help = "The store is only read. A non-loopback address needs --token-file: \
    clients send `Authorization: Bearer TOKEN`, a browser opens http://HOST:PORT/?token=TOKEN once.\n\n\
    Examples:\n  \
    strainline serve                                  # http://127.0.0.1:8080\n  \
    strainline serve --store postgres://ci@db/perf --listen 127.0.0.1:9000\n  \
    curl -s 127.0.0.1:8080/api/v1/runs?suite=api"
)]
pub struct ServeArgs {
    /// Where to listen (HOST:PORT; port 0 picks a free one, printed at start).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8080")]
    pub listen: std::net::SocketAddr,
    /// A file whose first line is the token clients must present (required for an
    /// address other than loopback).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// The path a reverse proxy serves it under (e.g. /perf/ for
    /// https://ci.example/perf/): every link, redirect, form and API address is made
    /// under it; requests come with or without it.
    #[arg(long, value_name = "PATH", default_value = "/")]
    pub base_path: String,
}

#[derive(Debug, Args)]
#[command(
    after_help = "FORMAT: auto, hyperfine, criterion, google-benchmark, jmh, go, \
    pytest-benchmark, benchmarkdotnet, junit.\n\n\
    Examples:\n  \
    hyperfine --export-json bench.json './app' && strainline import hyperfine bench.json --label main\n  \
    strainline import criterion target/criterion --label pr-42\n  \
    go test -bench . -count 10 -benchmem > go.txt && strainline import auto go.txt\n  \
    strainline compare main pr-42"
)]
pub struct ImportArgs {
    /// The tool's format, or `auto` to detect it from each file.
    pub format: String,
    /// Result files (a directory for Criterion: its `new/sample.json` files are read).
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Label of the run (e.g. the branch or version), for compare and history.
    #[arg(long)]
    pub label: Option<String>,
    /// The suite the run belongs to (compare --baseline pairs runs of one suite);
    /// default: the format's name.
    #[arg(long)]
    pub suite: Option<String>,
}

#[derive(Debug, Args)]
pub struct WorkloadScenarioArgs {
    /// Access logs, read in order as one workload.
    #[arg(required = true, value_name = "LOG")]
    pub logs: Vec<PathBuf>,
    #[command(flatten)]
    pub read: LogArgs,
    /// With --by: the window whose label starts with this (e.g. '2026-11-22 18').
    #[arg(long, value_name = "LABEL", requires = "by")]
    pub window: Option<String>,
    /// Multiply the rate (2 = twice the logged rate).
    #[arg(long, value_name = "X", default_value_t = 1.0)]
    pub scale: f64,
    /// The mean rate evenly spaced: the variance removed (for comparison).
    #[arg(long)]
    pub constant: bool,
    /// Where to write the scenario (default: standard output).
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct WorkloadFlowArgs {
    /// The recording (HAR 1.2).
    #[arg(value_name = "RECORDING.har")]
    pub har: PathBuf,
    /// The application's host (or host:port) in the recording; default: the first page's.
    #[arg(long, value_name = "HOST")]
    pub host: Option<String>,
    /// Send every value as recorded (no correlation): what recorders without it make.
    #[arg(long)]
    pub no_correlate: bool,
    /// Play the flow once, as one user and without its pauses, against the application
    /// at URL (a copy running for tests: it is sent the recorded actions) and print each
    /// step's outcome beside the recorded status; exit 1 when a step diverged.
    #[arg(long, value_name = "URL")]
    pub target: Option<String>,
    /// Where to write the flow (default: standard output).
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// How logs are read: shared by characterize and compare.
#[derive(Debug, Args)]
pub struct LogArgs {
    /// Split into windows aligned to UTC: minute, hour, day, or a duration (15m).
    #[arg(long, value_name = "WINDOW")]
    pub by: Option<String>,
    /// A route template for paths the built-in rules miss: a regular expression whose
    /// capture groups become {NAME} (named groups) or {id}. Repeatable, tried in order.
    #[arg(long = "route", value_name = "REGEX")]
    pub routes: Vec<String>,
    /// JSON lines: which keys hold what, NAME=KEY,… (names: time, method, path, request,
    /// status, bytes, duration, client).
    #[arg(long, value_name = "SPEC")]
    pub json_fields: Option<String>,
}

#[derive(Debug, Args)]
pub struct CharacterizeArgs {
    /// Access logs, read in order as one workload.
    #[arg(required = true, value_name = "LOG")]
    pub logs: Vec<PathBuf>,
    #[command(flatten)]
    pub read: LogArgs,
    /// Write the profile as JSON (schema strainline.workload.v1).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write an HTML report: the rate over time, the dispersion by window size, the mix.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct WorkloadCompareArgs {
    /// The reference workload's log (e.g. production).
    #[arg(value_name = "A")]
    pub a: PathBuf,
    /// The workload compared with it (e.g. the target's log during a test).
    #[arg(value_name = "B")]
    pub b: PathBuf,
    #[command(flatten)]
    pub read: LogArgs,
    /// With --by: compare only A's window whose label starts with this (e.g. '2026-11-22 09').
    #[arg(long, value_name = "LABEL", requires = "by")]
    pub a_window: Option<String>,
    /// With --by: B's window whose label starts with this.
    #[arg(long, value_name = "LABEL", requires = "by")]
    pub b_window: Option<String>,
    /// How much each dimension may differ: mix=POINTS,rate=%,dispersion=%,size=%
    /// (defaults mix=3,rate=10%,dispersion=25%,size=10%).
    #[arg(long, value_name = "SPEC")]
    pub tolerance: Option<String>,
    /// Write the comparison as JSON (schema strainline.workload-compare.v1).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct ManifestArgs {
    /// Agents (the Job's completions and parallelism).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub count: u32,
    /// Where the coordinator waits for them (`--agents listen://…?count=N`), as the pods
    /// reach it.
    #[arg(long, value_name = "HOST:PORT")]
    pub coordinator: String,
    /// The container image with strainline in it.
    #[arg(long, default_value = concat!("ghcr.io/strainline/strainline:", env!("CARGO_PKG_VERSION")))]
    pub image: String,
    /// The Secret holding the token (key `token`).
    #[arg(long, default_value = "strainline-agent-token")]
    pub secret: String,
    /// The Job's name.
    #[arg(long, default_value = "strainline-agents")]
    pub name: String,
    /// CPU each agent asks for (a whole core keeps a generator's figures its own).
    #[arg(long, default_value = "1")]
    pub cpu: String,
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

#[derive(Debug, Args)]
#[command(
    group(clap::ArgGroup::new("how").required(true).args(["listen", "connect", "stdio"])),
    after_help = "Examples:\n  head -c 32 /dev/urandom | base64 > agent.token\n  \
                  strainline agent --listen ADDR:7461 --token-file agent.token\n  \
                  strainline load URL -q 30000 -z 60s \\\n    \
                  --agents tls://HOST1:7461,tls://HOST2:7461 --agent-token-file agent.token"
)]
pub struct AgentArgs {
    /// Listen for a coordinator on this address (TLS; the token authenticates both sides).
    #[arg(long, value_name = "ADDR", requires = "token_file")]
    pub listen: Option<String>,
    /// Dial a coordinator waiting with `--agents listen://ADDR?count=N` (what the pods of
    /// `strainline agents manifest` run), serve its run, and exit.
    #[arg(long, value_name = "HOST:PORT", requires = "token_file")]
    pub connect: Option<String>,
    /// How long --connect keeps trying while the coordinator is not there yet.
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = parse_duration)]
    pub patience: Duration,
    /// The shared token (at least 16 bytes; the same file the coordinator is given).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Speak the protocol on stdin/stdout, for one session (what ssh:// agents run).
    #[arg(long, conflicts_with_all = ["listen", "token_file"])]
    pub stdio: bool,
    /// The name reports give this agent (default: `agent-N` in a Kubernetes Indexed Job,
    /// from JOB_COMPLETION_INDEX; else the host name).
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// Serve one coordinator's session, then exit.
    #[arg(long, requires = "listen")]
    pub once: bool,
}

#[derive(Debug, Args)]
#[command(
    group(clap::ArgGroup::new("what").required(true).args(["url", "serve", "harness"])),
    after_help = "Examples:\n  strainline init --url http://127.0.0.1:8080/\n  \
                  strainline init --serve \"./server --port {{port}}\" --path /health\n  \
                  strainline init --harness \"./bench_writes --iterations 1000\" -o writes.toml"
)]
pub struct InitArgs {
    /// A service already running at this URL: strainline watches the process listening on
    /// its port, and never stops it.
    #[arg(long)]
    pub url: Option<String>,
    /// A command that serves HTTP on `{{port}}` (a free port strainline picks per case).
    #[arg(long, value_name = "CMD")]
    pub serve: Option<String>,
    /// A benchmark binary that prints its results (`key=value` or JSON lines).
    #[arg(long, value_name = "CMD")]
    pub harness: Option<String>,
    /// The path the tests request with --serve (and that answers when it is ready).
    #[arg(long, value_name = "PATH")]
    pub path: Option<String>,
    /// Also write a user flow beside the suite (FILE.flow.toml: sessions arriving at a
    /// rate, each step checked, with commented examples of a login whose token the next
    /// steps carry) and a test that runs it.
    #[arg(long)]
    pub flow: bool,
    /// Where to write the suite.
    #[arg(short, long, value_name = "FILE", default_value = "strainline.toml")]
    pub output: PathBuf,
    /// Replace the file if it exists.
    #[arg(long)]
    pub force: bool,
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The suite file (TOML).
    pub suite: PathBuf,
    /// Variables the run would get with --var (so their placeholders count as set).
    #[arg(long = "var", value_name = "NAME=VALUE", value_parser = parse_var)]
    pub vars: Vec<(String, String)>,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The suite file (TOML).
    pub suite: PathBuf,
    /// Multiply every duration of the suite (0.01 runs a 2 h soak in 72 s).
    #[arg(long, default_value_t = 1.0, value_parser = parse_time_scale)]
    pub time_scale: f64,
    /// A label for the run in the store (e.g. the version under test).
    #[arg(long)]
    pub label: Option<String>,
    /// Only the test with this name.
    #[arg(long)]
    pub only: Option<String>,
    /// Set a variable for `{{NAME}}` in the target and workloads (repeatable), e.g. the
    /// build under test: --var server=./v0.8.0/server. Not part of case names, so runs
    /// of two versions compare case by case.
    #[arg(long = "var", value_name = "NAME=VALUE", value_parser = parse_var)]
    pub vars: Vec<(String, String)>,
    /// Record the target's CPU stacks with perf during every case (as `profile = true`
    /// on each test) and render flame graphs.
    #[arg(long)]
    pub profile: bool,
    /// After the run, write every report into DIR: report.html, summary.md, junit.xml,
    /// run.json and csv/.
    #[arg(long, value_name = "DIR")]
    pub report: Option<PathBuf>,
    /// No live view on a terminal: plain output as it happens (as in CI logs).
    #[arg(long)]
    pub no_tui: bool,
    /// Every HTTP test's load from these agents (the target still runs here: its URL
    /// must be one the agents reach).
    #[command(flatten)]
    pub export: ExportArgs,
    #[command(flatten)]
    pub agents: AgentsArgs,
    #[command(flatten)]
    pub pairing: Box<PairingArgs>,
}

/// Two versions in one paired session: `--baseline` and `--candidate` each set the
/// `{{NAME}}` values of one version.
#[derive(Debug, Args)]
#[command(next_help_heading = "Two versions in one session")]
#[command(group = clap::ArgGroup::new("paired").multiple(true).args(["baseline", "candidate", "baseline_ref"]))]
pub struct PairingArgs {
    /// The baseline version's value of a `{{NAME}}` (repeatable), e.g.
    /// --baseline server=./v0.7.0/server. With --candidate: a paired session.
    #[arg(long, value_name = "NAME=VALUE", value_parser = parse_var)]
    pub baseline: Vec<(String, String)>,
    /// The candidate version's value of a `{{NAME}}` (repeatable).
    #[arg(long, value_name = "NAME=VALUE", value_parser = parse_var)]
    pub candidate: Vec<(String, String)>,
    /// The baseline is this git ref (main, HEAD~1, a tag): checked out as a worktree
    /// beside the working tree, its target built and run there, and removed when the
    /// session ends; the candidate is the working tree, uncommitted changes included. A
    /// paired session of the two ("is my change worse than main?").
    #[arg(long, value_name = "REF")]
    pub baseline_ref: Option<String>,
    /// duet: both versions at once, each target on its own CPU (bench tests of a suite
    /// with a [target], 2 CPUs or more); interleaved: pairs adjacent in time, order
    /// drawn per pair (any test); auto: a duet where possible, else interleaved;
    /// sequential: every baseline run, then every candidate run (as separate runs
    /// would: for measuring what pairing gains).
    #[arg(long, default_value = "auto", value_parser = ["auto", "duet", "interleaved", "sequential"], requires = "paired")]
    pub mode: String,
    /// A duet's CPUs: shared (both targets may run on every CPU) or split (each target
    /// pinned to half of them, the halves swapped every pair).
    #[arg(long, default_value = "shared", value_parser = ["shared", "split"], requires = "paired")]
    pub duet_cpus: String,
    /// At most this many pairs per case (sequential: exactly this many of each).
    /// Default 20; with --budget, 200 (a safety bound: the budget ends the session).
    #[arg(long, value_parser = clap::value_parser!(u32).range(3..=crate::analysis::paired::MAX_PAIRS as i64), requires = "paired")]
    pub pairs: Option<u32>,
    /// Pairs before the first look at the verdict.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(3..=crate::analysis::paired::MAX_PAIRS as i64), requires = "paired")]
    pub min_pairs: u32,
    /// Wall time for the whole session, shared by its cases: a case still undecided
    /// when its share is spent stops there (inconclusive, saying how many pairs would
    /// decide).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, requires = "paired")]
    pub budget: Option<Duration>,
    /// Seed of the pairs' order (default: from the clock; printed and stored).
    #[arg(long, requires = "paired")]
    pub seed: Option<u64>,
    /// The baseline run's label (the candidate's is --label, default "candidate").
    #[arg(long, default_value = "baseline", requires = "paired")]
    pub baseline_label: String,
    /// Tolerance band for a metric (repeatable): METRIC=PCT, or default=PCT.
    #[arg(long = "band", value_name = "METRIC=PCT", value_parser = parse_band, requires = "paired")]
    pub bands: Vec<(String, f64)>,
    /// Significance level (default 0.05, or the suite's [compare] alpha).
    #[arg(long, value_name = "P", value_parser = parse_probability, requires = "paired")]
    pub alpha: Option<f64>,
}

impl Default for PairingArgs {
    /// No paired session (what a plain `run` gets).
    fn default() -> PairingArgs {
        PairingArgs {
            baseline: Vec::new(),
            candidate: Vec::new(),
            baseline_ref: None,
            mode: "auto".into(),
            duet_cpus: "shared".into(),
            pairs: None,
            min_pairs: 5,
            budget: None,
            seed: None,
            baseline_label: "baseline".into(),
            bands: Vec::new(),
            alpha: None,
        }
    }
}

fn parse_min_change(s: &str) -> crate::error::Result<f64> {
    crate::units::parse_fraction(s)
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

fn parse_var(s: &str) -> crate::error::Result<(String, String)> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.to_string())),
        _ => Err(crate::Error::usage(format!(
            "'{s}' is not NAME=VALUE (e.g. --var profile=v2)"
        ))),
    }
}

#[derive(Debug, Args)]
pub struct RunsArgs {
    /// Only runs with this label.
    #[arg(long)]
    pub label: Option<String>,
    /// At most this many runs.
    #[arg(long, default_value_t = 20)]
    pub limit: usize,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    /// A run id (as listed by `strainline runs`), a label (its newest run), `latest`,
    /// or `latest~N` / `LABEL~N` (N runs before the newest).
    pub run: String,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// A tolerance band: `METRIC=PCT`, e.g. `latency_p99=30%`, or `default=10%`.
fn parse_band(s: &str) -> crate::error::Result<(String, f64)> {
    let (metric, pct) = s
        .split_once('=')
        .ok_or_else(|| format!("'{s}' is not METRIC=PERCENT (e.g. latency_p99=30%)"))
        .usage()?;
    Ok((
        metric.trim().to_string(),
        crate::units::parse_fraction(pct)?,
    ))
}

fn parse_probability(s: &str) -> crate::error::Result<f64> {
    match s.parse::<f64>() {
        Ok(p) if p > 0.0 && p < 1.0 => Ok(p),
        _ => Err(crate::Error::usage(format!(
            "'{s}' is not a probability between 0 and 1 (e.g. 0.05)"
        ))),
    }
}

#[derive(Debug, Args)]
#[command(
    after_help = "BASELINE and CANDIDATE are run ids (12 or #12) or labels; a label stands for \
                  every run with that label, their repetitions pooled. `latest` is the newest \
                  run, `latest~1` the one before it, `LABEL~N` the N-th before the newest with \
                  that label.\n\n\
                  Examples:\n  strainline compare latest~1 latest\n  \
                  strainline compare v0.7.0 v0.8.0\n  \
                  strainline compare 12 15 --band latency_p99=50% --markdown compare.md\n  \
                  strainline compare --baseline main latest --markdown comment.md\n\n\
                  Exit codes: 0 no regression · 1 a metric regressed · 2 nothing to compare, or usage."
)]
pub struct CompareArgs {
    /// BASELINE CANDIDATE (run ids or labels); with --baseline, only CANDIDATE
    /// (default: latest).
    #[arg(value_name = "RUN", num_args = 0..=2)]
    pub versions: Vec<String>,
    /// Compare with the newest run of this label (e.g. main) in the candidate's suite,
    /// or else with the newest run of the git merge-base of this branch and HEAD.
    #[arg(long, value_name = "LABEL-or-BRANCH")]
    pub baseline: Option<String>,
    /// Tolerance band for a metric (repeatable): METRIC=PCT, or default=PCT for all.
    /// Regressed needs the change beyond it. Overrides the suite's `[compare]` bands.
    #[arg(long = "band", value_name = "METRIC=PCT", value_parser = parse_band)]
    pub bands: Vec<(String, f64)>,
    /// Significance level for the Benjamini–Hochberg adjusted p-value.
    #[arg(long, value_name = "P", value_parser = parse_probability)]
    pub alpha: Option<f64>,
    /// Compare runs made on different hosts (the report says so at the top).
    #[arg(long)]
    pub allow_env_mismatch: bool,
    /// Compare runs measured differently — another --time-scale, duration, rate,
    /// connection count, matrix or strainline version (the report starts with it).
    #[arg(long)]
    pub allow_shape_mismatch: bool,
    /// Write the comparison as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write the comparison as Markdown (a pull request comment, a CI step summary).
    #[arg(long, value_name = "FILE")]
    pub markdown: Option<PathBuf>,
    /// Write the comparison as a self-contained HTML page with its bars.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
}

#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  strainline report 12 --html report.html\n  \
                  strainline report v0.8.0 --junit junit.xml --markdown summary.md --csv csv/\n  \
                  strainline run suite.toml --report reports/     # all of them, at the end of a run\n  \
                  strainline report my-service --versions v0.6.0,v0.7.0,v0.8.0 --markdown versions.md\n  \
                  strainline report my-service --by-host --label v0.8.0 --csv hosts.csv"
)]
pub struct ReportArgs {
    /// The run: its id (12 or #12), label (the newest run with it), `latest`, or
    /// `latest~N` / `LABEL~N` (N runs before the newest); with --versions, the suite.
    pub run: String,
    /// A table of the suite's versions, oldest first: per host, case and key metric,
    /// each label's value (its newest finished run) and its % of the previous one.
    /// Printed, or written with --markdown / --csv (a file).
    #[arg(long, value_name = "L1,L2,…", value_delimiter = ',')]
    pub versions: Vec<String>,
    /// A table of the suite on each host it ran on: per case and key metric, each host's
    /// value (its newest finished run; with --label, of that label), the hosts' cores and
    /// memory in the heads. Printed, or written with --markdown / --csv.
    #[arg(long, conflicts_with = "versions")]
    pub by_host: bool,
    /// With --by-host: only runs with this label (e.g. the version measured everywhere).
    #[arg(long, requires = "by_host")]
    pub label: Option<String>,
    /// With --versions or --by-host: the metrics to show (default: throughput,
    /// latency_p99, error_rate, ceiling, peak_rss, cpu_per_op, and a soak's
    /// capacity_ideal_clients and capacity_safe_clients by host, where a case has them).
    #[arg(long, value_name = "M1,M2,…", value_delimiter = ',')]
    pub metrics: Vec<String>,
    /// One self-contained HTML file: verdict, metrics, gates and SVG charts per case.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Markdown for a pull request comment or a CI step summary.
    #[arg(long, value_name = "FILE")]
    pub markdown: Option<PathBuf>,
    /// JUnit XML: one test case per case and per gate.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// CSV files (metrics, time series, ramp steps, latency percentiles) into DIR.
    #[arg(long, value_name = "DIR")]
    pub csv: Option<PathBuf>,
    /// The run, its cases, metrics and summaries as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

impl ReportArgs {
    /// The formats asked for, by their exporters' names (`report::export`), with where.
    pub fn asked(&self) -> Vec<(&'static str, &PathBuf)> {
        [
            ("html", &self.html),
            ("markdown", &self.markdown),
            ("junit", &self.junit),
            ("csv", &self.csv),
            ("json", &self.json),
        ]
        .into_iter()
        .filter_map(|(name, path)| Some((name, path.as_ref()?)))
        .collect()
    }
}

#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  strainline history --metric cpu_per_op\n  \
                  strainline history --case 'bench[profile=v1]' --metric latency_p99 --since 2026-11-01\n\n\
                  Change points: E-Divisive means with a Student's t-test, as Apache Otava \
                  (window 50, p < 0.001 by default; see docs/compare.md).")]
pub struct HistoryArgs {
    /// The metric to follow (e.g. cpu_per_op, peak_rss, latency_p99).
    #[arg(long)]
    pub metric: String,
    /// The case (its name without the repetition suffix); needed when several cases
    /// have the metric.
    #[arg(long)]
    pub case: Option<String>,
    /// Only runs of this suite (its name).
    #[arg(long)]
    pub suite: Option<String>,
    /// Only runs with this label.
    #[arg(long)]
    pub label: Option<String>,
    /// Only runs started at or after this date or time (2026-11-01, or RFC 3339).
    #[arg(long, value_name = "DATE", value_parser = parse_since)]
    pub since: Option<String>,
    /// Significance level for a change point.
    #[arg(long, value_name = "P", default_value = "0.001", value_parser = parse_probability)]
    pub max_p: f64,
    /// Points per sliding window of the split step.
    #[arg(long, value_name = "N", default_value = "50")]
    pub window: usize,
    /// Smallest change worth reporting, relative (e.g. 1% or 0.01): a significant shift
    /// of 0.2% in a stored metric is real to a t-test and useless to a reader.
    #[arg(long, value_name = "PCT", default_value = "1%", value_parser = parse_min_change)]
    pub min_change: f64,
    /// Write the series and change points as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_takes_real_dates_and_times_only() {
        for ok in [
            "2026-11-01",
            "2024-02-29",
            "2026-11-01T08:00:00Z",
            "2026-11-01 23:59",
            "2026-12-31T23:59:60+01:00",
        ] {
            assert!(parse_since(ok).is_ok(), "{ok}");
        }
        for bad in [
            "2026-02-30",
            "2025-02-29",
            "2026-04-31",
            "2026-13-01",
            "2026-11-01T24:00",
            "2026-11-01T08:60",
            "2026-11-01T08:00:61Z",
            "20261101",
            "2026-11-01T08",
            "yesterday",
        ] {
            assert!(parse_since(bad).is_err(), "{bad}");
        }
    }
}

#[cfg(test)]
mod documented {
    use super::Cli;
    use clap::Parser;

    /// Every `strainline …` command in the README's and docs' shell blocks, one line
    /// each (continuations joined, comments, pipes and redirections cut off).
    fn commands() -> Vec<(String, String)> {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let mut files = vec![root.join("README.md")];
        for e in std::fs::read_dir(root.join("docs")).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "md") {
                files.push(p);
            }
        }
        let mut out = Vec::new();
        for f in files {
            let text = std::fs::read_to_string(&f).unwrap();
            let mut in_sh = false;
            let mut line = String::new();
            for l in text.lines() {
                if l.trim_start().starts_with("```") {
                    in_sh = !in_sh && matches!(l.trim(), "```sh" | "```bash" | "```console");
                    continue;
                }
                if !in_sh {
                    continue;
                }
                let l = l.trim();
                match l.strip_suffix('\\') {
                    Some(head) => {
                        line.push_str(head);
                        line.push(' ');
                        continue;
                    }
                    None => line.push_str(l),
                }
                let whole = std::mem::take(&mut line);
                let whole = whole.trim_start_matches("$ ");
                if !whole.starts_with("strainline ") {
                    continue;
                }
                out.push((
                    f.file_name().unwrap().to_string_lossy().into_owned(),
                    whole.trim().to_string(),
                ));
            }
        }
        out
    }

    /// The commands the docs show parse as written: every subcommand and flag exists
    /// and takes the values shown (placeholders in capitals such as `PORT` or `FILE` are
    /// values too). A command written for a reader to adapt says so with `…`.
    #[test]
    fn every_documented_command_parses() {
        let all = commands();
        assert!(all.len() >= 100, "{} commands found", all.len());
        let mut wrong = Vec::new();
        for (file, cmd) in &all {
            if cmd.contains('…') || cmd.contains("...") {
                continue;
            }
            let Some(words) = shlex::split(cmd) else {
                wrong.push(format!("{file}: {cmd}: unbalanced quotes"));
                continue;
            };
            // A comment, a pipe, a redirection or a chain ends what strainline reads; a
            // shell expansion (`"$(pgrep -o server)"`) is a value the shell fills in.
            let words: Vec<String> = words
                .into_iter()
                .take_while(|w| {
                    !w.starts_with('#')
                        && !matches!(w.as_str(), "|" | ">" | ">>" | "2>" | "&&" | ";" | "&")
                })
                .map(|w| if w.starts_with('$') { "1".into() } else { w })
                .collect();
            if let Err(e) = Cli::try_parse_from(&words) {
                if matches!(
                    e.kind(),
                    clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion
                ) {
                    continue;
                }
                let first = e.to_string();
                let first = first.lines().next().unwrap_or_default().to_string();
                wrong.push(format!("{file}: {cmd}\n    {first}"));
            }
        }
        assert!(
            wrong.is_empty(),
            "{} of {}:\n{}",
            wrong.len(),
            all.len(),
            wrong.join("\n")
        );
    }
}
