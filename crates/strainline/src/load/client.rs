//! The protocol seam. The driver (schedules, the open model's pool, timeouts, the cut,
//! the recorder) is protocol-free; it asks the plan's [`Client`] whether a unit of work
//! needs a connection, to open one, to do one unit of work on it (send, read the reply,
//! sort a failure into an [`ErrorKind`]), how to name its statuses and how to close it.
//! HTTP ([`super::http`]), MQTT ([`super::mqtt`]) and the command workload
//! ([`super::command`]) each answer in their own module; a protocol of the registry
//! ([`super::proto`]: gRPC, WebSocket, Redis) answers through [`Client::Proto`], and
//! adding one touches nothing here.

use std::os::fd::RawFd;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::flow::{Keep, Kept};
use super::http;
use super::recorder::{ErrorKind, Recorder};
use super::request::Outgoing;
use super::{mqtt, proto};
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
    /// An MQTT client per connection; a unit is one PUBLISH, acknowledged as its QoS
    /// asks.
    Mqtt(mqtt::Target),
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
    /// A publish was acknowledged as its QoS asks (MQTT): status = the QoS.
    Published,
    /// A client connected and was accepted (MQTT `conn` mode): one status, 0.
    Connected,
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
            Statuses::Published => match code {
                0 => "qos0 written".into(),
                1 => "qos1 puback".into(),
                2 => "qos2 pubcomp".into(),
                // An MQTT 5 broker's refusal, by its reason code.
                _ => format!("refused {code:#04x}"),
            },
            Statuses::Connected => "connack".into(),
            Statuses::Proto(p) => p.0.label(code),
        }
    }

    /// A status in a sentence: `HTTP 503`, `exit 1`, `MQTT refused 0x87`, a registry
    /// protocol's (`gRPC UNAVAILABLE`).
    pub fn named(self, code: u16) -> String {
        match self {
            Statuses::Http => format!("HTTP {code}"),
            Statuses::Exit => self.label(code),
            Statuses::Published => format!("MQTT {}", self.label(code)),
            Statuses::Connected => format!("MQTT {}", self.label(code)),
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
    Mqtt(mqtt::Conn),
    Proto(Box<dyn proto::Connection>),
}

impl Conn {
    /// Its socket, shut down by the watchdog when a unit overruns its timeout.
    pub fn fd(&self) -> RawFd {
        match self {
            Conn::Http(c) => c.fd,
            Conn::Mqtt(c) => c.fd,
            Conn::Proto(c) => c.fd(),
        }
    }

    /// Another handle on the same connection for a request in parallel: HTTP/2's
    /// (each request its own stream); `None` where one request at a time is the rule.
    pub fn share(&self) -> Option<Conn> {
        match self {
            Conn::Http(c) => c.share().map(Conn::Http),
            Conn::Proto(c) => c.share().map(Conn::Proto),
            _ => None,
        }
    }

    pub fn is_closed(&self) -> bool {
        match self {
            Conn::Http(c) => c.is_closed(),
            Conn::Mqtt(c) => c.is_closed(),
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
            Client::Mqtt(t) => t.mode == mqtt::Mode::Publish,
            _ => true,
        }
    }

    /// Whether each unit of work is a connection opened (MQTT's `conn` mode).
    pub fn unit_connects(&self) -> bool {
        matches!(self, Client::Mqtt(t) if t.mode == mqtt::Mode::Connect)
    }

    /// Whether units of work are commands (run in one containment unit).
    pub fn runs_commands(&self) -> bool {
        matches!(self, Client::Command(_))
    }

    pub fn statuses(&self) -> Statuses {
        match self {
            Client::Http { .. } => Statuses::Http,
            Client::Mqtt(t) if t.mode == mqtt::Mode::Connect => Statuses::Connected,
            Client::Mqtt(_) => Statuses::Published,
            Client::Command(_) => Statuses::Exit,
            Client::Proto(t) => Statuses::Proto(Named(t.protocol())),
        }
    }

    /// Opens a connection (not called for a command workload).
    pub async fn connect(&self) -> Result<Conn, ErrorKind> {
        match self {
            Client::Http { target, .. } => http::connect(target).await.map(Conn::Http),
            Client::Mqtt(t) => mqtt::connect(t).await.map(Conn::Mqtt),
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
            (Client::Mqtt(t), Conn::Mqtt(c)) => {
                let topic = match &out {
                    Outgoing::Rendered(r) => mqtt::topic_of(r),
                    Outgoing::Template(..) => None,
                };
                let reason = mqtt::publish(c, t, topic, out.body(), intended).await?;
                let refused = reason >= 0x80;
                Ok(Reply {
                    status: if refused {
                        u16::from(reason)
                    } else {
                        u16::from(t.qos)
                    },
                    ok: !refused,
                    bytes: 0,
                    messages: 0,
                    late_tail: false,
                    kept: None,
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
            Conn::Mqtt(c) => mqtt::disconnect(c).await,
            Conn::Proto(c) => c.goodbye().await,
            Conn::Http(_) => {}
        }
    }

    /// One unit of work that needs no connection of the driver's, within `timeout`: a
    /// command run in `unit`, or an MQTT client connecting to stay (`conn` mode).
    pub async fn run(&self, unit: Option<&Unit>, timeout: Duration) -> Result<Reply, ErrorKind> {
        match (self, unit) {
            (Client::Command(argv), Some(unit)) => super::command::run(unit, argv, timeout).await,
            (Client::Mqtt(t), _) => {
                let held = tokio::time::timeout(timeout, mqtt::hold(t)).await;
                held.map_err(|_| ErrorKind::Timeout)??;
                Ok(Reply {
                    status: 0,
                    ok: true,
                    bytes: 0,
                    messages: 0,
                    late_tail: false,
                    kept: None,
                })
            }
            _ => Err(ErrorKind::Connect),
        }
    }

    /// The run is over on this worker: what units left open (MQTT `conn` mode's
    /// clients) is closed politely.
    pub async fn release(&self) {
        if let Client::Mqtt(t) = self {
            if t.mode == mqtt::Mode::Connect {
                mqtt::release().await;
            }
        }
    }

    /// Why this protocol cannot send a scenario step's request, if it cannot: an MQTT
    /// topic with a wildcard, a registry protocol's refusal (a gRPC message the `.proto`
    /// does not describe).
    pub fn refuses(&self, r: &super::request::Rendered) -> Option<String> {
        match self {
            Client::Mqtt(_) if mqtt::topic_of(r).is_some_and(mqtt::wildcard) => Some(format!(
                "the topic '{}' has a wildcard (+ or #): a message is published to one topic",
                r.path.trim_start_matches('/')
            )),
            Client::Proto(t) => t.refuses(r),
            _ => None,
        }
    }

    /// Whether opening a connection takes a handshake beyond TCP's (TLS, MQTT's
    /// CONNECT, a registry protocol's: a WebSocket's upgrade).
    pub fn handshakes(&self) -> bool {
        match self {
            Client::Http { target, .. } => target.tls.is_some(),
            Client::Mqtt(_) => true,
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
            Client::Mqtt(t) => t.subscribers,
            _ => 0,
        }
    }

    /// Starts this generator's companions (see [`Client::companions`]) on a thread of
    /// their own.
    pub fn start_companions(&self, ask: CompanionsAsk) -> Option<Companions> {
        match self {
            Client::Mqtt(t) => Some(mqtt::subscriber::start(t, ask)),
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
