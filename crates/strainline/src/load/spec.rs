//! What a load run is, in the domain's words ([`LoadSpec`]: what to send, how load is
//! offered, when to stop, client options), and its checking into a runnable [`Plan`].
//! `strainline load` converts its arguments into a `LoadSpec`, and so does every test
//! kind; the engine never sees a command line.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use hyper::Uri;

use super::client::Client;
use super::schedule::{Arrivals, Rate};
use super::{scenario, Model, Plan};

/// Without a duration or a count, a run lasts this long.
pub const DEFAULT_DURATION: Duration = Duration::from_secs(10);
/// Connections of the closed model when none are asked for.
pub const DEFAULT_CONNECTIONS: usize = 50;
/// The open model's pool opens at most this many connections unless told otherwise.
pub const DEFAULT_POOL_CAP: usize = 1000;

/// A load spec that cannot run, with the fix in the message.
fn bad(msg: impl std::fmt::Display) -> crate::Error {
    crate::Error::usage(msg.to_string())
}

/// How load is offered.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Offer {
    /// N connections, each sending when its last response arrived (default 50).
    Closed {
        connections: Option<usize>,
        think: Duration,
    },
    /// Requests at intended times; `pool_cap` bounds the connections it may open.
    Open {
        rate: Rate,
        /// Poisson arrivals with this seed, or evenly spaced ones.
        poisson: Option<u64>,
        pool_cap: Option<usize>,
    },
    /// A scenario file's virtual clients.
    Scenario(PathBuf),
    /// A log's requests at their logged times (the open model).
    Replay(super::replay::ReplayLog),
}

/// What each unit of work is.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Work {
    /// An HTTP request to `url` (its scheme, host and port also serve a scenario).
    Http {
        url: String,
        method: String,
        /// `Name: value` pairs.
        headers: Vec<(String, String)>,
        body: BodySpec,
    },
    /// A command run to its end; exit 0 is success.
    Command(Vec<String>),
}

/// A request body.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum BodySpec {
    Empty,
    Bytes(Vec<u8>),
    /// A pool of random payloads of this many bytes.
    Random {
        len: usize,
        seed: u64,
    },
}

/// TLS and protocol options of the HTTP client.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ClientOptions {
    pub http2: bool,
    /// Accept any certificate (self-signed test servers).
    pub insecure: bool,
    /// A CA or certificate (PEM) to trust.
    pub cacert_pem: Option<Vec<u8>>,
    /// A client certificate (its chain, PEM) and its private key (PEM: PKCS#8, RSA or
    /// SEC1), for a server that asks for one (mutual TLS).
    #[serde(default)]
    pub client_cert: Option<(Vec<u8>, Secret)>,
    /// The MQTT password (`STRAINLINE_MQTT_PASSWORD`), for a URL's user.
    #[serde(default)]
    pub password: Option<Secret>,
    /// HTTP/2, closed model: requests in flight on each connection, each on its own
    /// stream (0 or 1: one at a time).
    #[serde(default)]
    pub streams: usize,
    /// WebSocket: the JSON field (dotted path) that matches a reply to its message.
    #[serde(default)]
    pub reply_field: Option<String>,
}

/// A secret that `{:?}` does not show (specs are logged and sent to agents over TLS).
#[derive(Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Secret(pub String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(…)")
    }
}

/// `--cert` and `--key` (a suite's `cert` and `key`): the client certificate's PEM and
/// its key's, read whole.
pub fn client_cert(
    cert: &std::path::Path,
    key: &std::path::Path,
) -> crate::error::Result<(Vec<u8>, Secret)> {
    let pem = crate::os::file::read(cert, "--cert")?;
    let key = crate::os::file::read(key, "--key")?;
    // Read now, as the run would: a suite's `check` refuses what its `run` would.
    super::net::tls_config(None, true, false, Some((&pem, &key)))?;
    let key = String::from_utf8(key).map_err(|_| {
        crate::Error::usage("--key: not PEM text (a DER key? convert it: openssl pkey -inform der -in KEY -out key.pem)")
    })?;
    Ok((pem, Secret(key)))
}

impl ClientOptions {
    /// The environment's part: the MQTT password, if `STRAINLINE_MQTT_PASSWORD` is set.
    pub fn from_env() -> ClientOptions {
        ClientOptions {
            password: std::env::var("STRAINLINE_MQTT_PASSWORD").ok().map(Secret),
            ..ClientOptions::default()
        }
    }
}

/// A load run, described in the domain's words.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LoadSpec {
    pub work: Work,
    pub offer: Offer,
    /// Worker threads (default: one per core).
    pub threads: Option<usize>,
    /// Stop after this long and/or this many requests; neither: [`DEFAULT_DURATION`].
    pub duration: Option<Duration>,
    pub count: Option<u64>,
    /// Per request (or command unit).
    pub timeout: Duration,
    pub client: ClientOptions,
    /// `--var NAME=VALUE`: a scenario's `[vars]` values given from outside.
    #[serde(default)]
    pub vars: Vec<(String, String)>,
    /// `load`'s seed, given or drawn for the run (none in a suite: a scenario's own or 1).
    #[serde(default)]
    pub seed: Option<RunSeed>,
    /// The latency percentiles the summary shows (`--percentiles`; empty: the default
    /// five) and those its gates read besides: each is kept, for the run and per step.
    #[serde(default)]
    pub percentiles: Percentiles,
}

/// Which latency percentiles a run keeps beyond its usual five (see [`LoadSpec`]).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Percentiles {
    pub shown: Vec<f64>,
    pub gated: Vec<f64>,
}

impl Percentiles {
    /// What the summary shows (the default five unless asked), and what is kept beyond
    /// the usual metrics: those asked for, shown or gated.
    pub fn lists(&self) -> (Vec<f64>, Vec<f64>) {
        let shown = if self.shown.is_empty() {
            crate::metrics::DEFAULT_PERCENTILES.to_vec()
        } else {
            self.shown.clone()
        };
        let kept = self.shown.iter().chain(&self.gated).copied().collect();
        (shown, kept)
    }
}

/// The seed of a `load` run: given with `--seed` (it wins over a scenario's own `seed`),
/// or drawn for the run (a scenario's own `seed` wins over it), so that two runs differ
/// unless pinned, and the seed printed replays one.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RunSeed {
    pub value: u64,
    pub given: bool,
}

impl LoadSpec {
    /// What the run loads, in words: the URL, or `command: ARGV`.
    pub fn what(&self) -> String {
        match &self.work {
            Work::Http { url, .. } => url.clone(),
            Work::Command(argv) => format!("command: {}", argv.join(" ")),
        }
    }

    /// `open`, `closed` or `scenario`.
    pub fn model_name(&self) -> &'static str {
        match self.offer {
            Offer::Closed { .. } => "closed",
            Offer::Open { .. } | Offer::Replay(_) => "open",
            Offer::Scenario(_) => "scenario",
        }
    }
}

/// A checked spec: the engine's plan and what it does, in words.
pub struct Planned {
    pub plan: Plan,
    pub description: String,
    /// Scenario step names, in order (empty without a scenario).
    pub step_names: Vec<String>,
    /// Its steps' groups and tags.
    pub labels: scenario::Labels,
    /// The seed the run's random choices come from (a scenario's, or the run's).
    pub seed: Option<u64>,
}

impl Planned {
    /// The description of the plan run by `n` agents (each with its own threads).
    pub fn on_agents(&mut self, n: usize) {
        let threads = self.plan.threads;
        let mine = format!(
            ", {threads} thread{}, ",
            if threads == 1 { "" } else { "s" }
        );
        self.description = self.description.replacen(
            &mine,
            &format!(", {n} agent{}, ", if n == 1 { "" } else { "s" }),
            1,
        );
    }
}

/// The protocol a spec's work speaks, by its URL's scheme, or a command.
fn client(spec: &LoadSpec) -> Result<Client, crate::Error> {
    match &spec.work {
        Work::Command(_) if matches!(spec.offer, Offer::Scenario(_) | Offer::Replay(_)) => Err(
            bad("a scenario or a replay is for HTTP: give a URL, not a command"),
        ),
        Work::Command(argv) if argv.is_empty() => {
            Err(bad("the command workload is empty: give the argv"))
        }
        Work::Command(argv) => Ok(Client::Command(argv.clone())),
        Work::Http {
            url,
            method,
            headers,
            body,
        } => {
            let Some(protocol) = super::proto::by_url(url) else {
                return Err(unknown_scheme(url));
            };
            let target = protocol.plan(&super::proto::Ask {
                url,
                method,
                headers,
                body,
                options: &spec.client,
                replay: matches!(spec.offer, Offer::Replay(_)),
                scenario: matches!(spec.offer, Offer::Scenario(_)),
                open: matches!(spec.offer, Offer::Open { .. }),
            })?;
            Ok(Client::Proto(target))
        }
    }
}

/// Why a URL no protocol takes is refused: it is no URL, or its scheme is none of theirs.
pub(super) fn unknown_scheme(url: &str) -> crate::Error {
    if let Err(e) = url.parse::<Uri>() {
        return bad(format!(
            "URL '{url}': {e} (expected e.g. http://127.0.0.1:8080/path)"
        ));
    }
    let mut all: Vec<String> = super::proto::prefixes().collect();
    let last = all.pop().unwrap_or_default();
    bad(format!(
        "URL '{url}': the scheme must be {} or {last} (e.g. http://127.0.0.1:8080/path)",
        all.join(", ")
    ))
}

/// Checks a spec and turns it into the engine's plan, or says exactly what is wrong.
pub fn plan(spec: &LoadSpec) -> Result<Planned, crate::Error> {
    let client = client(spec)?;
    client_options(spec, &client)?;
    // A replay lasts as long as its log (divided by the speed), a per-second
    // scenario as long as its list: set below with the offer.
    let mut natural = DEFAULT_DURATION;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut threads = spec.threads.unwrap_or(cores).max(1);
    let nofile = crate::os::process::raise_nofile() as usize;
    let files = (nofile.saturating_sub(64).max(1), nofile);
    let mut step_names = Vec::new();
    let mut labels = scenario::Labels::default();
    let mut seed = spec.seed.map(|s| s.value);
    let streams = spec.client.streams;
    let (model, mut description) = match &spec.offer {
        Offer::Scenario(path) => {
            let (model, d, names, used) = scenario_model(
                path,
                (&spec.vars, spec.seed),
                &client,
                &mut threads,
                &mut natural,
            )?;
            seed = Some(used);
            (step_names, labels) = names;
            (model, d)
        }
        Offer::Replay(log) => replay_model(log, &spec.work, &mut threads, &mut natural)?,
        Offer::Open { rate, poisson, .. } => open_model(rate, *poisson, streams, &mut threads)?,
        Offer::Closed { connections, think } => closed_model(
            connections.unwrap_or(DEFAULT_CONNECTIONS),
            *think,
            streams,
            files,
        )?,
    };
    let max_connections = max_connections(&model, &spec.offer, files)?;
    if let Client::Proto(t) = &client {
        t.sized_for(max_connections);
    }
    let duration = match (spec.duration, spec.count) {
        (None, None) => Some(natural),
        (d, _) => d,
    };
    description.push_str(&span_words(&model, duration, spec.duration.is_some()));
    if let Some(n) = spec.count {
        description.push_str(&format!(", at most {n} requests"));
    }
    let protocol = match &client {
        Client::Command(c) => format!("command: {}", c.join(" ")),
        Client::Proto(t) => t.describe(),
    };
    description.push_str(&format!(
        ", {threads} thread{}, {protocol}",
        if threads == 1 { "" } else { "s" }
    ));
    Ok(Planned {
        plan: Plan {
            client,
            model,
            threads,
            duration,
            count: spec.count,
            timeout: spec.timeout,
            max_connections,
            streams: streams.max(1),
            slice: super::driver::Slice::WHOLE,
        },
        description,
        step_names,
        labels,
        seed,
    })
}

/// The client options that only some targets and offers take: `--reply-field` (a
/// WebSocket's) and `--streams` (the closed or open model's, over HTTP/2, gRPC or a
/// protocol that pipelines).
fn client_options(spec: &LoadSpec, client: &Client) -> Result<(), crate::Error> {
    if spec.client.reply_field.is_some() {
        let url = match &spec.work {
            Work::Http { url, .. } => url.as_str(),
            Work::Command(_) => "",
        };
        if let Some(schemes) = super::proto::taken_elsewhere(url, "reply_field") {
            return Err(bad(format!(
                "--reply-field matches a WebSocket's replies to its messages: give a {schemes} URL"
            )));
        }
    }
    if spec.client.streams > 1 {
        if !matches!(spec.offer, Offer::Closed { .. } | Offer::Open { .. }) {
            return Err(bad(format!(
                "--streams {}: streams per connection are for -c (the closed model) or -q (the open model), not for a scenario or a replay",
                spec.client.streams
            )));
        }
        let pipelines = matches!(client, Client::Proto(t) if t.protocol().pipelines());
        if !(spec.client.http2 || pipelines) {
            return Err(bad(format!(
                "--streams {}: several requests in flight on one connection need HTTP/2 (add --http2), gRPC or a protocol that pipelines (Redis)",
                spec.client.streams
            )));
        }
    }
    Ok(())
}

/// The open model at `rate` and its description; a constant rate under one request
/// per second per thread takes fewer threads.
fn open_model(
    rate: &Rate,
    poisson: Option<u64>,
    streams: usize,
    threads: &mut usize,
) -> Result<(Model, String), crate::Error> {
    let arrivals = match poisson {
        Some(seed) => Arrivals::Poisson { seed },
        None => Arrivals::Uniform,
    };
    let d = match *rate {
        Rate::Ramp { from, to, over } => {
            format!(
                "open model, {from}..{to} req/s ramp over {}",
                crate::units::format_duration(over)
            )
        }
        Rate::Constant(r) => {
            if r < *threads as f64 {
                let t = (r.floor() as usize).max(1);
                tracing::warn!("note: {r} req/s is less than one request per second per thread: using {t} thread(s) instead of {threads}");
                *threads = t;
            }
            format!("open model, {r} req/s constant")
        }
        Rate::Staged(ref points) => {
            let mut rates: Vec<f64> = points.iter().map(|p| p.1).collect();
            rates.dedup();
            let rates: Vec<String> = rates
                .iter()
                .map(|&r| crate::units::format_number(r))
                .collect();
            format!("open model, {} req/s in stages", rates.join(" → "))
        }
    };
    let d = match streams {
        m if m > 1000 => return Err(bad(format!("--streams {m}: give 1 to 1000 streams"))),
        m if m > 1 => format!("{d}, up to {m} streams per connection"),
        _ => d,
    };
    let model = Model::Open {
        rate: rate.clone(),
        arrivals,
        requests: None,
    };
    Ok((model, d))
}

/// The closed model of `c` connections and its description. `files`: the connections
/// this process may open, and its limit of open files.
fn closed_model(
    c: usize,
    think: Duration,
    streams: usize,
    (cap_limit, nofile): (usize, usize),
) -> Result<(Model, String), crate::Error> {
    if streams > 1 {
        let most = crate::limits::CONNECTIONS.max as usize;
        if streams > 1000 || c * streams > most {
            return Err(bad(format!(
                "--streams {streams}: give 1 to 1000 streams, and at most {most} requests in flight in all (connections x streams)"
            )));
        }
    }
    if c == 0 {
        return Err(bad("0 connections: give at least one connection"));
    }
    if c > cap_limit {
        return Err(bad(format!(
            "{c} connections: more than this process may open files ({nofile}); raise `ulimit -n` or use fewer"
        )));
    }
    let mut d = format!("closed model, {c} connections");
    if streams > 1 {
        d.push_str(&format!(" x {streams} streams"));
    }
    if !think.is_zero() {
        d.push_str(&format!(", think {}", crate::units::format_duration(think)));
    }
    Ok((
        Model::Closed {
            connections: c,
            think,
        },
        d,
    ))
}

/// The connections a run may have open at once, all threads together: the open
/// model's pool cap, the closed model's connections, a scenario's clients (refused
/// beyond what this process may open). `files` as for [`closed_model`].
fn max_connections(
    model: &Model,
    offer: &Offer,
    (cap_limit, nofile): (usize, usize),
) -> Result<usize, crate::Error> {
    Ok(match (model, offer) {
        (Model::Open { .. }, Offer::Open { pool_cap, .. }) => {
            pool_cap.unwrap_or(DEFAULT_POOL_CAP).min(cap_limit)
        }
        (Model::Open { .. }, Offer::Replay(_) | Offer::Scenario(_)) => {
            DEFAULT_POOL_CAP.min(cap_limit)
        }
        (Model::Closed { connections, .. }, _) => *connections,
        (Model::Sessions { .. }, _) => DEFAULT_POOL_CAP.min(cap_limit),
        (Model::Scenario(sc), _) => {
            if sc.clients as usize > cap_limit {
                return Err(bad(format!(
                    "{} clients need {} connections, more than this process may open ({nofile}); raise `ulimit -n`",
                    sc.clients, sc.clients
                )));
            }
            sc.clients as usize
        }
        _ => unreachable!("the model follows the offer"),
    })
}

/// How long the run lasts, in the description's words: ` for 5.00s`, or — `once`
/// means once — that clients whose steps are all `once` end the run when they are
/// done (told before the run too when `-z` was `asked` for; docs/load.md).
fn span_words(model: &Model, duration: Option<Duration>, asked: bool) -> String {
    let Some(d) = duration.map(crate::units::format_duration) else {
        return String::new();
    };
    if !matches!(model, Model::Scenario(sc) if sc.once_only()) {
        return format!(" for {d}");
    }
    if asked {
        tracing::warn!("note: every step of this scenario is a `once` step: each client runs them once and the run ends when all have, within {d} (to load for {d}, give it a periodic or weighted step, or [sessions])");
    }
    format!(", each client's steps once: the run ends when they are done, within {d}")
}

/// A scenario file's model: its virtual clients, or its open-model arrivals with a
/// step drawn per request. The description and the steps' names with it.
/// A scenario's step names, in order, and its groups and tags.
type StepsOf = (Vec<String>, scenario::Labels);

fn scenario_model(
    path: &std::path::Path,
    (vars, run_seed): (&[(String, String)], Option<RunSeed>),
    client: &Client,
    threads: &mut usize,
    natural: &mut Duration,
) -> Result<(Model, String, StepsOf, u64), crate::Error> {
    let mut sc = scenario::load_seeded(path, run_seed)?;
    let used = sc.seed;
    for (name, value) in vars {
        sc.set_default(name, value)?;
    }
    if client.body_is_words() {
        if let Some((step, built)) = sc.built_body() {
            return Err(bad(format!(
                "scenario {}: step '{step}': {built} = {{…}} builds an HTTP body; this protocol's body is a command of words: give body = \"COMMAND ARG …\"",
                path.display()
            )));
        }
        sc.split_bodies();
    }
    let sc = Arc::new(sc);
    for i in 0..sc.steps.len() {
        step_fits(path, client, &sc, i)?;
    }
    let names = (
        sc.steps.iter().map(|s| s.name.clone()).collect(),
        scenario::Labels::of(&sc.steps, &sc.groups, &sc.metrics),
    );
    if let Some(sessions) = &sc.sessions {
        let (rate, poisson, shown) = match sessions {
            scenario::Arrive::Rate { rate, poisson } => (
                Rate::Constant(*rate),
                *poisson,
                format!("at {rate} a second"),
            ),
            scenario::Arrive::Staged { points, poisson } => {
                let end = points.last().map_or(0.0, |p| p.0);
                *natural = Duration::from_secs_f64(end);
                let shown = format!(
                    "in {} stages to at most {} a second over {}",
                    points.len(),
                    Rate::Staged(points.clone()).peak(),
                    crate::units::format_duration(*natural)
                );
                (Rate::Staged(points.clone()), *poisson, shown)
            }
            scenario::Arrive::PerSecond(_) => unreachable!("sessions come at a rate"),
        };
        *threads = (*threads).min((rate.peak().floor() as usize).max(1));
        let (arrivals, how) = if poisson {
            (Arrivals::Poisson { seed: sc.seed }, "Poisson")
        } else {
            (Arrivals::Uniform, "evenly spaced")
        };
        let d = format!(
            "scenario {} (open model, sessions {shown}, {how}, {} each)",
            path.display(),
            crate::units::count(sc.steps.len() as u64, "step", "steps")
        );
        let model = Model::Sessions { sc, rate, arrivals };
        return Ok((model, d, names, used));
    }
    match &sc.arrivals {
        None => {
            let staged = match sc.staged() {
                Some(all) => {
                    *natural = all;
                    format!(
                        " in {} stages over {}",
                        sc.stages.len(),
                        crate::units::format_duration(all)
                    )
                }
                None => String::new(),
            };
            let d = format!(
                "scenario {} ({}{staged}, {})",
                path.display(),
                crate::units::count(sc.clients, "client", "clients"),
                crate::units::count(sc.steps.len() as u64, "step", "steps")
            );
            Ok((Model::Scenario(sc), d, names, used))
        }
        Some(a) => {
            let mean = a.mean();
            *threads = (*threads).min((mean.floor() as usize).max(1));
            let (arrivals, how) = match a {
                scenario::Arrive::PerSecond(counts) => {
                    *natural = Duration::from_secs(counts.len() as u64);
                    (
                        Arrivals::PerSecond {
                            counts: Arc::new(counts.clone()),
                            seed: sc.seed,
                        },
                        format!("{} s of per-second counts", counts.len()),
                    )
                }
                scenario::Arrive::Rate { poisson: true, .. } => {
                    (Arrivals::Poisson { seed: sc.seed }, "Poisson".to_string())
                }
                scenario::Arrive::Rate { .. } => (Arrivals::Uniform, "evenly spaced".to_string()),
                scenario::Arrive::Staged { .. } => unreachable!("stages are for [sessions]"),
            };
            let d = format!(
                "scenario {} (open model, {how}, mean {mean:.1} req/s, {})",
                path.display(),
                crate::units::count(sc.steps.len() as u64, "step", "steps")
            );
            let requests = super::replay::Requests::Drawn(super::replay::Draw::new(sc));
            let model = Model::Open {
                rate: Rate::Constant(mean),
                arrivals,
                requests: Some(Arc::new(requests)),
            };
            Ok((model, d, names, used))
        }
    }
}

/// Step `i` of a scenario, rendered once (client 0, its first send) and shown to the
/// protocol: what it reads the protocol keeps, its statuses are the protocol's, and a
/// wildcard topic, a message the .proto does not describe or a path whose own text
/// holds a byte the wire cannot carry is refused here, not counted as an error for
/// every send of the run.
fn step_fits(
    path: &std::path::Path,
    client: &Client,
    sc: &scenario::Scenario,
    i: usize,
) -> Result<(), crate::Error> {
    let step = &sc.steps[i];
    let reads = !step.extract.is_empty() || !step.checks.is_empty() || sc.script.is_some();
    if reads && !client.keeps_replies() {
        return Err(bad(format!(
            "scenario {}: step '{}': extract, check and script read a reply, and this protocol keeps none",
            path.display(),
            step.name
        )));
    }
    let range = match client {
        Client::Proto(t) => t
            .protocol()
            .status_range()
            .map(|r| (t.protocol().name(), r)),
        Client::Command(_) => None,
    };
    if let Some((name, (low, high))) = range {
        let mut statuses = step.checks.iter().flat_map(|c| &c.status);
        if let Some(code) = statuses.find(|c| !(low..=high).contains(*c)) {
            return Err(bad(format!(
                "scenario {}: step '{}': status {code} is not an {name} status ({low} to {high})",
                path.display(),
                step.name
            )));
        }
    }
    if step.reads_head() && !client.reply_heads() {
        return Err(bad(format!(
            "scenario {}: step '{}': a header or cookie extracted, a header checked or a redirect followed reads an HTTP/1.1 reply's head; this protocol's replies are bodies alone: extract with json or regex, check status, body or json",
            path.display(),
            step.name
        )));
    }
    let unsent = |u: scenario::Unsent| {
        bad(format!(
            "scenario {}: step '{}': {} would put a byte its {} cannot carry (a control character, a space …)",
            path.display(),
            step.name,
            u.by,
            u.field
        ))
    };
    // A byte from the step's own text is refused here; one from a data row is counted
    // when that row is sent, as every other row's would be.
    let mut req = match sc.request(i, 0, 0, 0, &[], None) {
        Ok(r) => r,
        Err(u) if u.by == "text" => return Err(unsent(u)),
        Err(_) => return Ok(()),
    };
    if let Some(why) = client.refuses(&req) {
        return Err(bad(format!(
            "scenario {}: step '{}': {why}",
            path.display(),
            step.name
        )));
    }
    if let Err(unfit) = client.fit(&mut req) {
        let u = sc.unsent(i, 0, &[], None, unfit);
        if u.by == "text" {
            return Err(unsent(u));
        }
    }
    Ok(())
}

/// A replayed log's model: its requests at their logged times (divided by the speed).
/// (Only HTTP takes a replay: every other protocol's plan refuses it.)
fn replay_model(
    log: &super::replay::ReplayLog,
    work: &Work,
    threads: &mut usize,
    natural: &mut Duration,
) -> Result<(Model, String), crate::Error> {
    let Work::Http { headers, body, .. } = work else {
        return Err(bad("a replay is for HTTP: give a URL, not a command"));
    };
    let body = match body {
        BodySpec::Empty => Bytes::new(),
        BodySpec::Bytes(b) => Bytes::from(b.clone()),
        BodySpec::Random { len, seed } => Bytes::from(crate::rng::text(*len, *seed)),
    };
    let headers = super::request::headers(headers)?;
    let requests = super::replay::Requests::replayed(log, &headers, body)?;
    let (count, last, arrivals) = match &log.stream {
        Some(st) => (st.count, st.last, Arrivals::Streamed(st.clone())),
        None => (
            log.times.len() as u64,
            log.times.last().copied().unwrap_or(0.0),
            Arrivals::Listed(Arc::new(log.times.clone())),
        ),
    };
    *natural = Duration::from_secs_f64(last + 0.001);
    let span = last.max(1e-3);
    let mean = count as f64 / span;
    if mean < *threads as f64 {
        *threads = (mean.floor() as usize).max(1);
    }
    let d = format!(
        "replay of {} at speed {}: {} requests over {} (mean {:.1} req/s)",
        log.source,
        log.speed,
        count,
        crate::units::format_duration(Duration::from_secs_f64(span)),
        mean
    );
    let model = Model::Open {
        rate: Rate::Constant(mean),
        arrivals,
        requests: Some(Arc::new(requests)),
    };
    Ok((model, d))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(offer: Offer) -> LoadSpec {
        LoadSpec {
            work: Work::Http {
                url: "http://127.0.0.1:9/x?y=1".into(),
                method: "post".into(),
                headers: vec![("X-A".into(), "b".into())],
                body: BodySpec::Bytes(b"hi".to_vec()),
            },
            offer,
            threads: Some(2),
            duration: Some(Duration::from_secs(3)),
            count: None,
            timeout: Duration::from_secs(1),
            client: ClientOptions::default(),
            vars: Vec::new(),
            seed: None,
            percentiles: Default::default(),
        }
    }

    #[test]
    fn an_open_spec_becomes_an_open_plan_with_its_pool_cap() {
        let p = plan(&spec(Offer::Open {
            rate: Rate::Constant(100.0),
            poisson: None,
            pool_cap: Some(7),
        }))
        .unwrap();
        assert!(matches!(p.plan.model, Model::Open { .. }));
        assert_eq!(p.plan.max_connections, 7);
        assert_eq!(
            p.description,
            "open model, 100 req/s constant for 3.00s, 2 threads, HTTP/1.1"
        );
    }

    #[test]
    fn bad_specs_are_refused_with_the_fix() {
        let e = plan(&spec(Offer::Closed {
            connections: Some(0),
            think: Duration::ZERO,
        }))
        .err()
        .unwrap()
        .to_string();
        assert!(e.contains("at least one connection"), "{e}");
        let mut s = spec(Offer::Closed {
            connections: None,
            think: Duration::ZERO,
        });
        s.work = Work::Http {
            url: "ftp://127.0.0.1/".into(),
            method: "GET".into(),
            headers: vec![],
            body: BodySpec::Empty,
        };
        assert!(plan(&s)
            .err()
            .unwrap()
            .to_string()
            .contains("http://, https://, mqtt://, mqtts://, grpc://, grpcs://, ws://, wss://, redis:// or rediss://"));
    }

    #[test]
    fn mqtt_urls_are_checked_before_anything_is_sent() {
        let refused = |url: &str| -> String {
            let mut s = spec(Offer::Closed {
                connections: None,
                think: Duration::ZERO,
            });
            s.work = Work::Http {
                url: url.into(),
                method: "GET".into(),
                headers: vec![],
                body: BodySpec::Empty,
            };
            match plan(&s) {
                Ok(_) => panic!("{url} was taken"),
                Err(e) => e.to_string(),
            }
        };
        assert!(refused("mqtt://127.0.0.1:1883/t?qos=3").contains("qos=3: give 0, 1 or 2"));
        assert!(refused("mqtt://127.0.0.1:1883/devices/+/t").contains("has a wildcard"));
        assert!(refused("mqtt://127.0.0.1:1883/devices/#").contains("has a wildcard"));
        assert!(refused("mqtt://127.0.0.1:1883/").contains("names no topic"));
        assert!(refused("mqtt://127.0.0.1:1883").contains("names no topic"));
        assert!(refused("mqtt://127.0.0.1:1883/t?retain=1").contains("unknown option 'retain'"));
        assert!(refused("mqtt://127.0.0.1:1883/t?subscribers=-1").contains("subscribers=-1"));
        // A password in the URL is refused, and not repeated in the message.
        let e = refused("mqtt://dev:hunter2@127.0.0.1:1883/t");
        assert!(e.contains("STRAINLINE_MQTT_PASSWORD"), "{e}");
        assert!(!e.contains("hunter2"), "{e}");
        // The defaults: QoS 1, port 1883, subscribers' filter from {{client}}.
        let mut s = spec(Offer::Closed {
            connections: None,
            think: Duration::ZERO,
        });
        s.work = Work::Http {
            url: "mqtt://127.0.0.1/d/{{client}}/t?subscribers=2".into(),
            method: "GET".into(),
            headers: vec![],
            body: BodySpec::Empty,
        };
        let planned = plan(&s).unwrap();
        assert_eq!(planned.plan.client.companions(), 2);
        assert!(
            planned
                .description
                .contains("MQTT 3.1.1, publish QoS 1 to d/{{client}}/t"),
            "{}",
            planned.description
        );
    }
}
