//! The protocol registry: a protocol added to strainline is one module here and one row
//! of [`PROTOCOLS`]. The module owns its URL schemes, the checking of a workload for it
//! (once, for `strainline load`, suites and agents alike: all three make a
//! [`super::LoadSpec`]), its client (connect, one unit of work, goodbye) and the names
//! of its statuses. The driver reaches it through [`super::client::Client::Proto`] and
//! names none of them; docs/design.md says how to add a protocol. No code outside spells
//! a scheme: what one decides elsewhere is asked here ([`default_method`],
//! [`setup_origin`], [`tls_if_http`]).

use std::future::Future;
use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use super::client::{Companions, CompanionsAsk, Reply};
use super::recorder::ErrorKind;
use super::request::Rendered;
use super::spec::{BodySpec, ClientOptions};

mod grpc;
mod http;
mod hyper2;
mod mqtt;
mod resp;
mod ws;

/// Every protocol of the registry, in the order `--help` and errors list them.
pub static PROTOCOLS: &[&dyn Protocol] = &[
    &http::Http,
    &mqtt::Mqtt,
    &grpc::Grpc,
    &ws::WebSocket,
    &resp::Resp,
];

/// A future of a protocol's client, polled on the driver's thread.
pub type Fut<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

/// What a workload asks of a protocol, as the spec gives it.
pub struct Ask<'a> {
    pub url: &'a str,
    /// `GET` unless given (`-X`, `method =`).
    pub method: &'a str,
    pub headers: &'a [(String, String)],
    pub body: &'a BodySpec,
    pub options: &'a ClientOptions,
    /// The spec replays an access log's HTTP requests.
    pub replay: bool,
    /// A scenario's steps send their own bodies: the workload's is never sent.
    pub scenario: bool,
    /// The open model: units of work start at a rate (`-q`).
    pub open: bool,
}

/// A protocol: its schemes, and the checking of a workload into a [`Target`].
pub trait Protocol: Sync {
    /// Its name in sentences (`Redis`).
    fn name(&self) -> &'static str;
    /// Its URL schemes (`redis`), the plain one first.
    fn schemes(&self) -> &'static [&'static str];
    /// Those of its schemes that speak TLS (`rediss`).
    fn tls_schemes(&self) -> &'static [&'static str];
    /// Checks what it can of a URL without resolving anything (`check` on a suite, whose
    /// URLs hold `{{port}}`): its path and options, as [`Protocol::plan`] would.
    fn check(&self, _url: &str) -> crate::error::Result<()> {
        Ok(())
    }
    /// Checks a workload for this protocol, or says exactly what is wrong and the fix.
    fn plan(&'static self, ask: &Ask<'_>) -> crate::error::Result<Arc<dyn Target>>;
    /// A status as the summary names it (`reply`, `error WRONGTYPE`).
    fn label(&self, code: u16) -> String;
    /// Whether several units may be in flight on one connection (`--streams M`): its
    /// connections' [`Connection::share`] gives handles that pipeline.
    fn pipelines(&self) -> bool {
        false
    }
    /// Whether the closed model's units on one connection go as batches
    /// ([`Connection::batch`]): one task keeps `--streams M` units in flight on each
    /// connection, writing those it adds in one write and reading their replies in one
    /// read, instead of a task and a wake-up per unit (Redis).
    fn batches(&self) -> bool {
        false
    }
    /// The workload options of its own it takes (`reply_field`), by their suite keys:
    /// another protocol's URL refuses them.
    fn options(&self) -> &'static [&'static str] {
        &[]
    }
    /// Whether its replies are bodies a scenario's flow can read (extract, check, a
    /// script's `response`): its connections keep them in [`Reply::kept`] when asked.
    fn keeps_bodies(&self) -> bool {
        false
    }
    /// Whether a scenario step's body is a command it splits into words (Redis): the
    /// scenario then keeps each placeholder's value one word.
    fn body_is_words(&self) -> bool {
        false
    }
    /// Whether its replies also have a head a step can read (gRPC's metadata: headers
    /// and trailers), kept with the body.
    fn reply_heads(&self) -> bool {
        false
    }
    /// The options of its URLs' queries that name a file (gRPC's `proto=FILE`): a
    /// suite's are found beside the suite file, and `check` checks they can be read.
    fn file_options(&self) -> &'static [&'static str] {
        &[]
    }
    /// The method of a workload's unit when none is given (a suite's `method`), with a
    /// body or without: HTTP's POST with one; GET elsewhere (a WebSocket's opening
    /// request; MQTT's and Redis's units have none).
    fn default_method(&self, _has_body: bool) -> &'static str {
        "GET"
    }
    /// The scheme of HTTP requests to a URL's server (a suite's set-up requests) where
    /// it is not the URL's own, over TLS or not: WebSocket's `http` / `https`.
    fn setup_scheme(&self, _tls: bool) -> Option<&'static str> {
        None
    }
    /// The statuses a scenario's `status` check may name (HTTP's 100 to 999); `None`:
    /// any the protocol labels.
    fn status_range(&self) -> Option<(u16, u16)> {
        None
    }
}

/// Where and what a protocol's units of work go to, checked before the run.
pub trait Target: Send + Sync {
    fn protocol(&self) -> &'static dyn Protocol;
    /// The protocol part of the run's description (`Redis: SET k{{seq}} …`).
    fn describe(&self) -> String;
    /// Whether opening a connection takes a handshake beyond TCP's (TLS, a login).
    fn handshakes(&self) -> bool;
    /// The run holds at most `connections` of its connections at once: a protocol that
    /// bounds its buffers by a share of a budget takes its share here, before the run.
    fn sized_for(&self, _connections: usize) {}
    /// The target's `Host` (a scenario client's cookies belong to it; its redirects are
    /// followed within it, [`Target::redirect`]) and whether it is reached over TLS:
    /// HTTP's; empty elsewhere.
    fn origin(&self) -> (String, bool) {
        (String::new(), false)
    }
    /// Where a redirect from a scenario step's `path` to `location` goes within the
    /// target (HTTP's: its path, for a `Location` of the same scheme and authority, or a
    /// path), or `None`: not followed. Elsewhere none is.
    fn redirect(&self, _location: &str, _path: &str) -> Option<String> {
        None
    }
    /// Why it cannot send a scenario step's request, if it cannot (a gRPC message its
    /// `.proto` does not describe): the step is refused before the run.
    fn refuses(&self, _step: &Rendered) -> Option<String> {
        None
    }
    /// Makes a scenario step's rendered request what the protocol's wire carries
    /// (HTTP's request target percent-encoded), or names the field that cannot carry
    /// what a value, a redirect or the script put in it: the step is not sent. On every
    /// send.
    fn fit(&self, _step: &mut Rendered) -> Result<(), Unfit> {
        Ok(())
    }
    fn connect(&self) -> Fut<'_, Result<Box<dyn Connection>, ErrorKind>>;
    /// Each unit of work is a connection of its own, opened by [`Target::hold`] and held
    /// to the end of the run (MQTT's `conn` mode): the driver opens none for it.
    fn units_connect(&self) -> bool {
        false
    }
    /// One unit of work where [`Target::units_connect`]: a connection opened and held.
    fn hold(&self) -> Fut<'_, Result<Reply, ErrorKind>> {
        Box::pin(async { Err(ErrorKind::Connect) })
    }
    /// The run is over on this worker: what [`Target::hold`] holds is closed politely.
    fn release(&self) -> Fut<'_, ()> {
        Box::pin(async {})
    }
    /// Connections it keeps beside the units of work, the whole run's (MQTT's
    /// subscribers); they open before the clock starts.
    fn companions(&self) -> u64 {
        0
    }
    /// Starts this generator's companions on a thread of their own.
    fn start_companions(&self, _ask: CompanionsAsk) -> Option<Companions> {
        None
    }
}

/// A field of a step's rendered request that its protocol's wire cannot carry.
#[derive(Debug, Clone, Copy)]
pub struct Unfit {
    pub field: &'static str,
    /// The bytes it cannot carry, to find the value that put them there; `None` when
    /// only the script can have (a header a step may not set).
    pub bad: Option<fn(u8) -> bool>,
}

/// One open connection of a protocol.
pub trait Connection {
    /// Its socket, shut down by the driver's watchdog when a unit overruns its timeout.
    fn fd(&self) -> RawFd;
    /// It cannot carry another unit of work (the driver opens a new one).
    fn is_closed(&self) -> bool;
    /// One unit of work: `step` is a scenario step's rendered request (its body, its
    /// headers, its path, and what of the reply it reads — [`Rendered::keep`], where the
    /// protocol [`Protocol::keeps_bodies`]), or `None` for the workload's own, as the
    /// `seq`th unit of the run; `intended` is when it was due.
    fn send<'a>(
        &'a mut self,
        step: Option<&'a Rendered>,
        seq: u64,
        intended: Instant,
    ) -> Fut<'a, Result<Reply, ErrorKind>>;
    /// The workload's `seq`th unit of work, as [`Connection::send`] with no step, polled
    /// in place so that it allocates nothing (HTTP/1.1's: docs/performance.md): `first`
    /// on its first poll, then polled until ready. `None` from the first poll: the
    /// protocol has no such path, and the unit goes through [`Connection::send`]. A
    /// unit dropped unfinished leaves the connection closed ([`Connection::is_closed`]).
    fn poll_unit(
        &mut self,
        _cx: &mut Context<'_>,
        _first: bool,
        _seq: u64,
        _intended: Instant,
    ) -> Option<Poll<Result<Reply, ErrorKind>>> {
        None
    }
    /// Closes the connection politely at the end of the run.
    fn goodbye(self: Box<Self>) -> Fut<'static, ()>;
    /// Another handle on the same connection for a unit in flight beside this one's,
    /// where the protocol [`Protocol::pipelines`].
    fn share(&self) -> Option<Box<dyn Connection>> {
        None
    }
    /// The connection as a batch of the workload's units, where its protocol
    /// [`Protocol::batches`].
    fn batch(&mut self) -> Option<&mut dyn Batch> {
        None
    }
}

/// A connection whose workload units are written and read in batches (pipelining): the
/// driver queues units, then takes a turn, which writes them and reads replies; each
/// reply is the oldest unanswered unit's (the server answers in order). The driver
/// times and records each unit against its own start.
pub trait Batch {
    /// Adds the workload's `seq`th unit to what the next [`Batch::turn`] writes.
    fn queue(&mut self, seq: u64);
    /// Writes what was queued (one write, the replies read meanwhile), reads until at
    /// least one unit in flight has its whole reply, and pushes onto `replies`, oldest
    /// first, every reply that is whole in what was read. An error is the connection's (it is then closed):
    /// the replies pushed before it are their units', the error is the next unit's.
    fn turn<'a>(&'a mut self, replies: &'a mut Vec<Reply>) -> Fut<'a, Result<(), ErrorKind>>;
}

/// What all of a run's connections may hold of replies still arriving (WebSocket's
/// messages, Redis's replies): [`reply_share`] shares it among them.
pub const REPLY_BUDGET: usize = 32 << 20;

/// The largest reply one of `connections` reads: its share of [`REPLY_BUDGET`], from
/// 1 MiB to the protocol's `max`.
pub fn reply_share(connections: usize, max: usize) -> usize {
    (REPLY_BUDGET / connections.max(1)).clamp(1 << 20, max)
}

/// Whether `url`'s protocol is one of the registry's that pipelines (`--streams`).
pub fn pipelines(url: &str) -> bool {
    by_url(url).is_some_and(|p| p.pipelines())
}

/// The protocol whose scheme begins `url`, if one of the registry's does.
pub fn by_url(url: &str) -> Option<&'static dyn Protocol> {
    let scheme = url.split_once("://")?.0;
    PROTOCOLS
        .iter()
        .copied()
        .find(|p| p.schemes().contains(&scheme))
}

/// The method of a workload at `url` when it names none, with a body or without: its
/// protocol's ([`Protocol::default_method`]: HTTP's POST with a body, else GET); GET for
/// a URL of no protocol of the registry; a command workload (`None`) as HTTP's.
pub fn default_method(url: Option<&str>, has_body: bool) -> &'static str {
    match url {
        None => http::Http.default_method(has_body),
        Some(u) => by_url(u).map_or("GET", |p| p.default_method(has_body)),
    }
}

/// The origin (`scheme://authority`) a suite's set-up requests for a workload at `url`
/// go to: its server over HTTP ([`Protocol::setup_scheme`]: WebSocket's `ws://h` as
/// `http://h`, `wss://h` as `https://h`); else `url`'s own origin (the probe refuses a
/// scheme it does not speak).
pub fn setup_origin(url: &str) -> String {
    let origin = url.splitn(4, '/').take(3).collect::<Vec<_>>().join("/");
    let scheme = by_url(url).and_then(|p| p.setup_scheme(is_tls(url)));
    match (scheme, origin.split_once("://")) {
        (Some(s), Some((_, rest))) => format!("{s}://{rest}"),
        _ => origin,
    }
}

/// Whether `scheme` (as a parsed URL gives it: `https`) is HTTP's, and then whether it
/// speaks TLS: what sends one HTTP request of its own (the readiness probe, `init`'s
/// look at a server) asks.
pub fn tls_if_http(scheme: &str) -> Option<bool> {
    let http: &dyn Protocol = &http::Http;
    http.schemes()
        .contains(&scheme)
        .then(|| http.tls_schemes().contains(&scheme))
}

/// `None` when `url`'s protocol takes the workload option `key` (a suite key, e.g.
/// `reply_field`); else the schemes of those that do (`ws:// or wss://`).
pub fn taken_elsewhere(url: &str, key: &str) -> Option<String> {
    if by_url(url).is_some_and(|p| p.options().contains(&key)) {
        return None;
    }
    let schemes: Vec<String> = PROTOCOLS
        .iter()
        .filter(|p| p.options().contains(&key))
        .flat_map(|p| p.schemes().iter().map(|s| format!("{s}://")))
        .collect();
    Some(schemes.join(" or "))
}

/// `a.b` as the path of keys `["a", "b"]` into a JSON message, each key non-empty.
pub fn field_path(f: &str) -> crate::error::Result<Arc<[String]>> {
    let keys: Vec<String> = f.split('.').map(str::to_string).collect();
    if keys.iter().any(String::is_empty) {
        return Err(crate::Error::usage(format!(
            "--reply-field '{f}': give a JSON field name, or a.b for a nested one"
        )));
    }
    Ok(keys.into())
}

/// Every registry scheme as URLs begin (`redis://`), for the lists errors give.
pub fn prefixes() -> impl Iterator<Item = String> {
    PROTOCOLS
        .iter()
        .flat_map(|p| p.schemes().iter().map(|s| format!("{s}://")))
}

/// Whether `url`'s scheme is one of the registry's TLS schemes.
pub fn is_tls(url: &str) -> bool {
    url.split_once("://")
        .is_some_and(|(s, _)| PROTOCOLS.iter().any(|p| p.tls_schemes().contains(&s)))
}

/// The address and TLS settings of `host[:port]` for a protocol whose default port is
/// `port`: resolved, with the certificate options of the workload.
pub fn endpoint(
    url: &str,
    hostport: &str,
    port: u16,
    tls: bool,
    options: &ClientOptions,
) -> crate::error::Result<(SocketAddr, Option<super::net::Tls>)> {
    let with_port = if hostport.ends_with(']') || !hostport.contains(':') {
        format!("{hostport}:{port}")
    } else {
        hostport.to_string()
    };
    let scheme = if tls { "https" } else { "http" };
    let (target, _) = http::resolve(&format!("{scheme}://{with_port}/"), options)
        .map_err(|e| e.context(format_args!("URL '{url}'")))?;
    Ok((target.addr, target.tls))
}

/// A byte stream to `addr` (TCP without Nagle, then TLS if asked) and its descriptor.
pub async fn open(
    addr: SocketAddr,
    tls: &Option<super::net::Tls>,
) -> Result<(super::net::Stream, RawFd), ErrorKind> {
    super::net::open_stream(addr, tls).await
}

/// How an I/O error ends a unit of work.
pub fn io_kind(e: &std::io::Error) -> ErrorKind {
    super::net::io_kind(e)
}

/// The test build's allocator: the system's, counting the allocations each thread makes
/// (a unit of HTTP/1.1 work must make none: [`allocations`]).
#[cfg(test)]
pub(crate) mod counted {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;

    thread_local! {
        static MADE: Cell<u64> = const { Cell::new(0) };
    }

    struct Counting;

    // SAFETY: every call is passed to the system allocator unchanged; the count is a
    // const-initialised thread-local `Cell` (no allocation, no destructor).
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, l: Layout) -> *mut u8 {
            MADE.with(|m| m.set(m.get() + 1));
            System.alloc(l)
        }
        unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
            MADE.with(|m| m.set(m.get() + 1));
            System.alloc_zeroed(l)
        }
        unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
            MADE.with(|m| m.set(m.get() + 1));
            System.realloc(p, l, n)
        }
        unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
            System.dealloc(p, l)
        }
    }

    #[global_allocator]
    static COUNTING: Counting = Counting;

    /// Allocations made so far on the calling thread.
    pub fn allocations() -> u64 {
        MADE.with(Cell::get)
    }
}

/// What the protocols' tests share: the size of a unit of work's future.
#[cfg(test)]
pub(crate) mod unit_size {
    use super::{Ask, Protocol};
    use crate::load::spec::{BodySpec, ClientOptions};

    /// The most a unit of work's future may take: it is boxed and moved on every send,
    /// so a buffer held in it is copied each time (MQTT's reader once held 16 KiB there:
    /// 20% of QoS 0's CPU, docs/performance.md).
    pub const MOST: usize = 2048;

    /// The size of the future `send` gives on a connection to `url` (a server there
    /// accepts it), with `body` as the workload's; the unit is never polled.
    pub async fn of(protocol: &'static dyn Protocol, url: &str, body: &[u8]) -> usize {
        of_with(protocol, url, body, &ClientOptions::default()).await
    }

    /// [`of`], with the workload's client `options` (`--http2`).
    pub async fn of_with(
        protocol: &'static dyn Protocol,
        url: &str,
        body: &[u8],
        options: &ClientOptions,
    ) -> usize {
        let target = protocol
            .plan(&Ask {
                url,
                method: "GET",
                headers: &[],
                body: &BodySpec::Bytes(body.to_vec()),
                options,
                replay: false,
                scenario: false,
                open: false,
            })
            .unwrap();
        let mut conn = target.connect().await.unwrap();
        let unit = conn.send(None, 0, std::time::Instant::now());
        std::mem::size_of_val(&*unit)
    }

    /// A port on loopback whose first connection `serve` is given.
    pub async fn serving<F, R>(serve: F) -> u16
    where
        F: FnOnce(tokio::net::TcpStream) -> R + 'static,
        R: std::future::Future<Output = ()> + 'static,
    {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::task::spawn_local(async move {
            let (s, _) = listener.accept().await.unwrap();
            serve(s).await;
        });
        port
    }

    /// A runtime for one test, on its thread (with a local set: [`serving`]'s server
    /// runs on it).
    pub fn run<F: std::future::Future>(f: F) -> F::Output {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        tokio::task::LocalSet::new().block_on(&rt, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_finds_its_protocol_by_scheme_alone() {
        assert_eq!(by_url("redis://127.0.0.1:6379").unwrap().name(), "Redis");
        assert_eq!(by_url("rediss://h").unwrap().name(), "Redis");
        assert!(by_url("redisx://h").is_none());
        assert_eq!(by_url("http://h/").unwrap().name(), "HTTP");
        assert!(by_url("ftp://h/").is_none());
        assert!(is_tls("rediss://h:1") && !is_tls("redis://h:1"));
        assert!(prefixes().any(|p| p == "redis://"));
        assert_eq!(by_url("wss://h/x").unwrap().name(), "WebSocket");
        assert_eq!(taken_elsewhere("ws://h/", "reply_field"), None);
        assert_eq!(
            taken_elsewhere("redis://h", "reply_field").unwrap(),
            "ws:// or wss://"
        );
    }

    /// As a suite's workload chose before the registry did (`url` starting with
    /// `http`: POST with a body; else GET).
    #[test]
    fn a_workload_without_a_method_takes_its_protocols() {
        for (url, body, want) in [
            (Some("http://h:1/x"), true, "POST"),
            (Some("http://h:1/x"), false, "GET"),
            (Some("https://h/{{seq}}"), true, "POST"),
            (Some("ws://h:1/echo"), true, "GET"),
            (Some("wss://h/echo"), false, "GET"),
            (Some("mqtt://h/t"), true, "GET"),
            (Some("redis://h"), true, "GET"),
            (Some("grpc://h/a.B/C"), true, "GET"),
            (Some("ftp://h/"), true, "GET"),
            (None, true, "POST"),
            (None, false, "GET"),
        ] {
            assert_eq!(default_method(url, body), want, "{url:?} {body}");
        }
    }

    #[test]
    fn set_up_requests_go_to_the_server_over_http() {
        for (url, want) in [
            ("http://127.0.0.1:{{port}}/x?y", "http://127.0.0.1:{{port}}"),
            ("https://h:8443", "https://h:8443"),
            ("ws://127.0.0.1:9000/echo", "http://127.0.0.1:9000"),
            ("wss://h:9443/a/b", "https://h:9443"),
            ("ws://h?x=1", "http://h?x=1"),
            ("redis://127.0.0.1:6379", "redis://127.0.0.1:6379"),
            ("mqtt://h:1883/t/u", "mqtt://h:1883"),
            ("wsx://h/p", "wsx://h"),
            ("ws:/x", "ws:/x"),
        ] {
            assert_eq!(setup_origin(url), want, "{url}");
        }
    }

    #[test]
    fn the_probe_asks_whether_a_scheme_is_http() {
        assert_eq!(tls_if_http("http"), Some(false));
        assert_eq!(tls_if_http("https"), Some(true));
        for not in ["ws", "wss", "grpcs", "HTTP", ""] {
            assert_eq!(tls_if_http(not), None, "{not}");
        }
    }
}
