//! The protocol seam. The driver (schedules, the open model's pool, timeouts, the cut,
//! the recorder) is protocol-free; it asks the plan's [`Client`] whether a unit of work
//! needs a connection, to open one, to do one unit of work on it (send, read the reply,
//! sort a failure into an [`ErrorKind`]), how to name its statuses and how to close it.
//! The command workload ([`super::command`]) answers in its own module; every protocol
//! (HTTP, MQTT, gRPC, WebSocket, Redis: the registry, [`super::proto`]) answers through
//! [`Client::Proto`], and adding one touches nothing here.

use std::os::fd::RawFd;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::{Duration, Instant};

use super::proto;
pub use super::proto::Batch;
use super::recorder::{ErrorKind, Recorder};
use super::request::Outgoing;
use crate::os::unit::Unit;

/// What units of work are sent to, and how.
#[derive(Clone)]
pub enum Client {
    /// A command run to its end per unit; its exit code is the status.
    Command(Vec<String>),
    /// A protocol of the registry ([`super::proto::PROTOCOLS`]).
    Proto(Arc<dyn proto::Target>),
}

/// What a unit of work's statuses are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Statuses {
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
            Statuses::Exit => format!("exit {code}"),
            Statuses::Proto(p) => p.0.label(code),
        }
    }

    /// A status in a sentence: `HTTP 503`, `exit 1`, a registry protocol's (`gRPC
    /// UNAVAILABLE`, `MQTT refused 0x87`).
    pub fn named(self, code: u16) -> String {
        match self {
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
pub struct Conn(Box<dyn proto::Connection>);

impl Conn {
    /// Its socket, shut down by the watchdog when a unit overruns its timeout.
    pub fn fd(&self) -> RawFd {
        self.0.fd()
    }

    /// Another handle on the same connection for a unit in parallel: HTTP/2's (each
    /// request its own stream), a pipelining protocol's; `None` where one unit at a
    /// time is the rule.
    pub fn share(&self) -> Option<Conn> {
        self.0.share().map(Conn)
    }

    pub fn is_closed(&self) -> bool {
        self.0.is_closed()
    }

    /// The connection as a batch of units, where its protocol [`Client::batches`].
    pub fn batch(&mut self) -> Option<&mut dyn Batch> {
        self.0.batch()
    }
}

impl Client {
    /// Whether units of work go over a connection of the driver's (a command's do not;
    /// MQTT's `conn` mode opens one per unit itself).
    pub fn connects(&self) -> bool {
        match self {
            Client::Command(_) => false,
            Client::Proto(t) => !t.units_connect(),
        }
    }

    /// Whether the closed model sends its units on a connection as batches
    /// ([`super::proto::Protocol::batches`]).
    pub fn batches(&self) -> bool {
        matches!(self, Client::Proto(t) if t.protocol().batches())
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
            Client::Command(_) => Statuses::Exit,
            Client::Proto(t) => Statuses::Proto(Named(t.protocol())),
        }
    }

    /// Opens a connection (not called for a command workload).
    pub async fn connect(&self) -> Result<Conn, ErrorKind> {
        match self {
            Client::Command(_) => Err(ErrorKind::Connect),
            Client::Proto(t) => t.connect().await.map(Conn),
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
        match self {
            Client::Proto(_) => match out {
                Outgoing::Workload(seq) => {
                    // In place where the connection can (no future allocated per unit).
                    let mut first = true;
                    let lent = std::future::poll_fn(|cx| {
                        let p = conn.0.poll_unit(cx, first, seq, intended);
                        first = false;
                        p.map_or(Poll::Ready(None), |p| p.map(Some))
                    })
                    .await;
                    match lent {
                        Some(r) => r,
                        None => conn.0.send(None, seq, intended).await,
                    }
                }
                Outgoing::Rendered(r) => conn.0.send(Some(r), 0, intended).await,
            },
            Client::Command(_) => Err(ErrorKind::Protocol),
        }
    }

    /// Closes a connection politely at the end of the run: MQTT's DISCONNECT, a
    /// registry protocol's goodbye (a WebSocket's close frame); HTTP's is dropped.
    pub async fn goodbye(&self, conn: Conn) {
        conn.0.goodbye().await
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
    /// topic with a wildcard, a gRPC message the `.proto` does not describe.
    pub fn refuses(&self, r: &super::request::Rendered) -> Option<String> {
        match self {
            Client::Proto(t) => t.refuses(r),
            _ => None,
        }
    }

    /// A scenario step's rendered request made what the protocol's wire carries, or
    /// the field that cannot carry what was put in it ([`super::proto::Target::fit`]).
    pub fn fit(&self, r: &mut super::request::Rendered) -> Result<(), super::proto::Unfit> {
        match self {
            Client::Proto(t) => t.fit(r),
            _ => Ok(()),
        }
    }

    /// Where a redirect from a scenario step's `path` to `location` goes within the
    /// target, or `None`: not followed ([`super::proto::Target::redirect`]).
    pub fn redirect(&self, location: &str, path: &str) -> Option<String> {
        match self {
            Client::Proto(t) => t.redirect(location, path),
            _ => None,
        }
    }

    /// Whether opening a connection takes a handshake beyond TCP's (TLS, MQTT's
    /// CONNECT, a registry protocol's: a WebSocket's upgrade).
    pub fn handshakes(&self) -> bool {
        match self {
            Client::Command(_) => false,
            Client::Proto(t) => t.handshakes(),
        }
    }

    /// Whether it keeps a reply's body for a scenario step that extracts or checks
    /// (HTTP, gRPC, WebSocket, Redis: the protocols that say so).
    pub fn keeps_replies(&self) -> bool {
        matches!(self, Client::Proto(t) if t.protocol().keeps_bodies())
    }

    /// Whether a scenario step's body is a command of words (Redis's): a value stays
    /// one word ([`super::scenario::Scenario::split_bodies`]).
    pub fn body_is_words(&self) -> bool {
        matches!(self, Client::Proto(t) if t.protocol().body_is_words())
    }

    /// Whether its replies have a head (status line and header fields, gRPC's
    /// metadata) a step can read.
    pub fn reply_heads(&self) -> bool {
        matches!(self, Client::Proto(t) if t.protocol().reply_heads())
    }

    /// The target's `Host` (a scenario client's cookies belong to its host) and whether
    /// it is reached over TLS (HTTP; empty elsewhere).
    pub fn origin(&self) -> (String, bool) {
        match self {
            Client::Proto(t) => t.origin(),
            Client::Command(_) => (String::new(), false),
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
}
