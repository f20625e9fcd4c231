//! The protocol seam. The driver (schedules, the open model's pool, timeouts, the cut,
//! the recorder) is protocol-free; it asks the plan's [`Client`] whether a unit of work
//! needs a connection, to open one, to do one unit of work on it (send, read the reply,
//! sort a failure into an [`ErrorKind`]), how to name its statuses and how to close it.
//! HTTP ([`super::http`]) and the command workload ([`super::command`]) each answer in
//! their own module; a protocol of the registry ([`super::proto`]: MQTT, gRPC,
//! WebSocket, Redis) answers through [`Client::Proto`], and adding one touches nothing
//! here.

use std::os::fd::RawFd;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::flow::{Keep, Kept};
use super::http;
use super::proto;
use super::recorder::{ErrorKind, Recorder};
use super::request::Outgoing;
use crate::os::unit::Unit;

/// What units of work are sent to, and how.
#[derive(Clone)]
pub enum Client {
    /// HTTP/1.1 or HTTP/2 requests; `prepared`: the template's HTTP/1.1 requests as
    /// bytes, made once for every worker.
    Http {
        target: http::Target,
        prepared: Arc<Vec<Bytes>>,
    },
    /// A command run to its end per unit; its exit code is the status.
    Command(Vec<String>),
    /// A protocol of the registry ([`super::proto::PROTOCOLS`]).
    Proto(Arc<dyn proto::Target>),
}

/// What a unit of work's statuses are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Statuses {
    /// HTTP status codes (ok below 400).
    Http,
    /// A command's exit code (ok when 0; 128 + N for signal N).
    Exit,
    /// A registry protocol's statuses, named by it.
    Proto(Named),
}

/// A registry protocol, as the statuses it names.
#[derive(Clone, Copy)]
pub struct Named(pub &'static dyn proto::Protocol);

impl std::fmt::Debug for Named {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0.name())
    }
}

impl PartialEq for Named {
    fn eq(&self, other: &Named) -> bool {
        self.0.name() == other.0.name()
    }
}

impl Eq for Named {}

impl Statuses {
    /// A status as the summary names it: `200`, `exit 1`, `reply`.
    pub fn label(self, code: u16) -> String {
        match self {
            Statuses::Http => code.to_string(),
            Statuses::Exit => format!("exit {code}"),
            Statuses::Proto(p) => p.0.label(code),
        }
    }

    /// A status in a sentence: `HTTP 503`, `exit 1`, a registry protocol's (`gRPC
    /// UNAVAILABLE`, `MQTT refused 0x87`).
    pub fn named(self, code: u16) -> String {
        match self {
            Statuses::Http => format!("HTTP {code}"),
            Statuses::Exit => self.label(code),
            Statuses::Proto(p) => format!("{} {}", p.0.name(), self.label(code)),
        }
    }
}

/// How a unit of work ended: its status, whether it counts as a success, the bytes
/// of its reply.
pub struct Reply {
    pub status: u16,
    pub ok: bool,
    pub bytes: u64,
    /// Messages in the reply, where a reply is a stream of them (gRPC); 0 elsewhere.
    pub messages: u64,
    /// Its body came [`super::recorder::LATE_TAIL`] or more after its head (HTTP/1.1).
    pub late_tail: bool,
    /// Its head and body, when the request asked for them ([`super::request::Rendered::keep`]).
    pub kept: Option<Box<super::flow::Kept>>,
}

impl Reply {
    /// A reply of `status`, a success or not, that brought nothing to count or keep
    /// (the other fields are set on it where a protocol has them).
    pub fn new(status: u16, ok: bool) -> Reply {
        Reply {
            status,
            ok,
            bytes: 0,
            messages: 0,
            late_tail: false,
            kept: None,
        }
    }
}

/// What a protocol's companions (MQTT subscribers) are started with.
pub struct CompanionsAsk {
    /// Their indexes among the run's (this generator's slice).
    pub mine: Vec<u64>,
    /// The run's timeout: the longest they drain after the units are done.
    pub timeout: Duration,
    /// When the clock starts (they connect before).
    pub start: Instant,
    /// Theirs alone, merged with the workers' each second.
    pub rec: Arc<Mutex<Recorder>>,
    pub cancel: Arc<AtomicBool>,
}

/// A protocol's companions, running on a thread of their own.
pub struct Companions {
    pub thread: std::thread::JoinHandle<()>,
    /// Set when the run's units are done: the companions drain and end.
    pub units_done: Arc<AtomicBool>,
}

/// An open connection of some protocol.
pub enum Conn {
    Http(http::Conn),
    Proto(Box<dyn proto::Connection>),
}

impl Conn {
    /// Its socket, shut down by the watchdog when a unit overruns its timeout.
    pub fn fd(&self) -> RawFd {
        match self {
            Conn::Http(c) => c.fd,
            Conn::Proto(c) => c.fd(),
        }
    }

    /// Another handle on the same connection for a request in parallel: HTTP/2's
    /// (each request its own stream); `None` where one request at a time is the rule.
    pub fn share(&self) -> Option<Conn> {
        match self {
            Conn::Http(c) => c.share().map(Conn::Http),
            Conn::Proto(c) => c.share().map(Conn::Proto),
        }
    }

    pub fn is_closed(&self) -> bool {
        match self {
            Conn::Http(c) => c.is_closed(),
            Conn::Proto(c) => c.is_closed(),
        }
    }
}

impl Client {
    /// Whether units of work go over a connection of the driver's (a command's do not;
    /// MQTT's `conn` mode opens one per unit itself).
    pub fn connects(&self) -> bool {
        match self {
            Client::Command(_) => false,
            Client::Proto(t) => !t.units_connect(),
            _ => true,
        }
    }

    /// Whether each unit of work is a connection opened (MQTT's `conn` mode).
    pub fn unit_connects(&self) -> bool {
        matches!(self, Client::Proto(t) if t.units_connect())
    }

    /// Whether units of work are commands (run in one containment unit).
    pub fn runs_commands(&self) -> bool {
        matches!(self, Client::Command(_))
    }

    pub fn statuses(&self) -> Statuses {
        match self {
            Client::Http { .. } => Statuses::Http,
            Client::Command(_) => Statuses::Exit,
            Client::Proto(t) => Statuses::Proto(Named(t.protocol())),
        }
    }

    /// Opens a connection (not called for a command workload).
    pub async fn connect(&self) -> Result<Conn, ErrorKind> {
        match self {
            Client::Http { target, .. } => http::connect(target).await.map(Conn::Http),
            Client::Command(_) => Err(ErrorKind::Connect),
            Client::Proto(t) => t.connect().await.map(Conn::Proto),
        }
    }

    /// One unit of work on `conn`, meant to go at `intended`: the request and its whole
    /// response, the message and the reply to it, the publish and its acknowledgement.
    pub async fn send(
        &self,
        conn: &mut Conn,
        out: Outgoing<'_>,
        intended: Instant,
    ) -> Result<Reply, ErrorKind> {
        match (self, conn) {
            (Client::Http { target, .. }, Conn::Http(c)) => {
                let mut kept = match &out {
                    Outgoing::Rendered(r) if r.keep != Keep::Nothing => {
                        Some(Box::new(Kept::new(r.keep)))
                    }
                    _ => None,
                };
                let (status, bytes, late_tail) =
                    http::send(c, target, out, kept.as_deref_mut()).await?;
                Ok(Reply {
                    status,
                    ok: status < 400,
                    bytes,
                    messages: 0,
                    late_tail,
                    kept,
                })
            }
            (Client::Proto(_), Conn::Proto(c)) => match out {
                Outgoing::Template(_, _, seq) => c.send(None, seq, intended).await,
                Outgoing::Rendered(r) => c.send(Some(r), 0, intended).await,
            },
            _ => Err(ErrorKind::Protocol),
        }
    }

    /// Closes a connection politely at the end of the run: MQTT's DISCONNECT, a
    /// registry protocol's goodbye (a WebSocket's close frame); HTTP's is dropped.
    pub async fn goodbye(&self, conn: Conn) {
        match conn {
            Conn::Proto(c) => c.goodbye().await,
            Conn::Http(_) => {}
        }
    }

    /// One unit of work that needs no connection of the driver's, within `timeout`: a
    /// command run in `unit`, or an MQTT client connecting to stay (`conn` mode).
    pub async fn run(&self, unit: Option<&Unit>, timeout: Duration) -> Result<Reply, ErrorKind> {
        match (self, unit) {
            (Client::Command(argv), Some(unit)) => super::command::run(unit, argv, timeout).await,
            (Client::Proto(t), _) if t.units_connect() => {
                let held = tokio::time::timeout(timeout, t.hold()).await;
                held.map_err(|_| ErrorKind::Timeout)?
            }
            _ => Err(ErrorKind::Connect),
        }
    }

    /// The run is over on this worker: what units left open (MQTT `conn` mode's
    /// clients) is closed politely.
    pub async fn release(&self) {
        if let Client::Proto(t) = self {
            t.release().await;
        }
    }

    /// Why this protocol cannot send a scenario step's request, if it cannot: an MQTT
    /// topic with a wildcard, a registry protocol's refusal (a gRPC message the `.proto`
    /// does not describe).
    pub fn refuses(&self, r: &super::request::Rendered) -> Option<String> {
        match self {
            Client::Proto(t) => t.refuses(r),
            _ => None,
        }
    }

    /// Whether opening a connection takes a handshake beyond TCP's (TLS, MQTT's
    /// CONNECT, a registry protocol's: a WebSocket's upgrade).
    pub fn handshakes(&self) -> bool {
        match self {
            Client::Http { target, .. } => target.tls.is_some(),
            Client::Command(_) => false,
            Client::Proto(t) => t.handshakes(),
        }
    }

    /// Whether it keeps a reply's body for a scenario step that extracts or checks
    /// (HTTP/1.1, HTTP/2 in a scenario, and the registry's protocols that say so: gRPC,
    /// WebSocket, Redis).
    pub fn keeps_replies(&self) -> bool {
        match self {
            Client::Http { target, .. } => !target.http2 || target.whole_heads,
            Client::Proto(t) => t.protocol().keeps_bodies(),
            _ => false,
        }
    }

    /// Whether its replies have a head (status line and header fields) a step can
    /// read: HTTP/1.1's, HTTP/2's in a scenario, a registry protocol's that says so
    /// (gRPC's metadata).
    pub fn reply_heads(&self) -> bool {
        match self {
            Client::Http { target, .. } => !target.http2 || target.whole_heads,
            Client::Proto(t) => t.protocol().reply_heads(),
            _ => false,
        }
    }

    /// The target's `Host` (a scenario client's cookies belong to its host; its
    /// redirects are followed within it) and whether it is reached over TLS (HTTP;
    /// empty elsewhere).
    pub fn origin(&self) -> (String, bool) {
        match self {
            Client::Http { target, .. } => (
                target.host_header.to_str().unwrap_or_default().to_string(),
                target.tls.is_some(),
            ),
            _ => (String::new(), false),
        }
    }

    /// Connections the protocol keeps beside the units of work, the whole run's: MQTT
    /// subscribers (0 for other protocols). They open before the clock starts.
    pub fn companions(&self) -> u64 {
        match self {
            Client::Proto(t) => t.companions(),
            _ => 0,
        }
    }

    /// Starts this generator's companions (see [`Client::companions`]) on a thread of
    /// their own.
    pub fn start_companions(&self, ask: CompanionsAsk) -> Option<Companions> {
        match self {
            Client::Proto(t) => t.start_companions(ask),
            _ => None,
        }
    }

    /// The template's requests as prepared (HTTP/1.1's bytes, HTTP/2's header blocks;
    /// empty for other protocols).
    pub fn prepared(&self) -> &[Bytes] {
        match self {
            Client::Http { prepared, .. } => prepared,
            _ => &[],
        }
    }
}
