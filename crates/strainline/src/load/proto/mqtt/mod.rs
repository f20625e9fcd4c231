//! MQTT (3.1.1 or 5) as a load protocol: each of the driver's connections is one MQTT
//! client (TCP, TLS for `mqtts://`, then CONNECT and the broker's CONNACK), and a unit
//! of work is one PUBLISH of the workload's body to the URL's topic — done when it is
//! written at QoS 0, at its PUBACK at QoS 1, at its PUBCOMP (after PUBREC and PUBREL) at
//! QoS 2. Packets are encoded and decoded by rumqttc's codecs ([`wire`]); the I/O is
//! this module's own, one task per connection as for HTTP/1.1, with no event loop or
//! channel between the driver and the socket. Subscribers that count deliveries are in
//! [`subscriber`]; the URL and its options are checked in [`url`]. In `conn` mode
//! (`?mode=conn`) a unit of work is a client connecting and staying connected to the
//! end of the run. A protocol of the registry ([`super::PROTOCOLS`]).

use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use bytes::{BufMut, Bytes, BytesMut};

use super::super::client::{Companions, CompanionsAsk, Reply};
use super::super::flow::{Keep, Kept};
use super::super::net::Stream;
use super::super::net::{io_kind, open_stream};
use super::super::recorder::ErrorKind;
use super::super::request::{Body, Rendered};
use super::{Connection, Fut, Protocol};

mod reply;
pub mod subscriber;
mod url;
pub mod wire;

pub use url::Mqtt;
use wire::{In, Out, Version};

/// The status of a unit of `conn` mode: the broker accepted the client (CONNACK).
/// Publishes' statuses are their QoS (0, 1, 2) or an MQTT 5 refusal (0x80 and above).
pub const CONNACK: u16 = 0x100;

/// Where clients connect and what they publish, checked before the run.
#[derive(Clone)]
pub struct Target {
    pub addr: SocketAddr,
    pub tls: Option<super::super::net::Tls>,
    /// The topic published to; `{{client}}` stands for the client's number.
    pub topic: String,
    /// 0, 1 or 2, for every publish and subscription.
    pub qos: u8,
    pub version: Version,
    pub login: Option<(String, String)>,
    /// Seconds; 0 turns keep-alive off (an idle pooled client is not disconnected).
    pub keep_alive: u16,
    pub clean_session: bool,
    /// Subscribers to run beside the publishers, all of the run's (an agent runs its
    /// share), and the filter they subscribe to. With subscribers, each publish
    /// starts with a [`Stamp`] that they measure from.
    pub subscribers: u64,
    pub filter: String,
    /// What a unit of work is: a publish (emqtt-bench's `pub`), or a client connecting
    /// and staying connected (`conn`).
    pub mode: Mode,
    /// The workload's message (`-d`), published by each unit that is not a step's.
    pub body: Body,
}

/// A checked [`Target`] as the registry holds it.
pub struct Broker(Arc<Target>);

impl super::Target for Broker {
    fn protocol(&self) -> &'static dyn Protocol {
        &Mqtt
    }

    fn describe(&self) -> String {
        let t = &self.0;
        let tls = if t.tls.is_some() { " over TLS" } else { "" };
        match t.mode {
            Mode::Connect => format!(
                "MQTT {}{tls}, clients connecting to stay until the end{}",
                t.version.name(),
                match t.keep_alive {
                    0 => String::new(),
                    k => format!(" (keep-alive {k}s)"),
                }
            ),
            Mode::Publish => format!(
                "MQTT {}{tls}, publish QoS {} to {}",
                t.version.name(),
                t.qos,
                t.topic
            ),
        }
    }

    fn handshakes(&self) -> bool {
        true
    }

    fn fit(&self, step: &mut Rendered) -> Result<(), super::Unfit> {
        // MQTT 3.1.1 §4.7.3: no NUL (nor, as it advises, a control); a publish's topic
        // has no wildcard.
        let bad = |b: u8| b < b' ' || b == 0x7f || b == b'+' || b == b'#';
        match topic_of(step) {
            Some(t) if t.bytes().any(bad) => Err(super::Unfit {
                field: "topic",
                bad: Some(bad),
            }),
            _ => Ok(()),
        }
    }

    fn refuses(&self, step: &Rendered) -> Option<String> {
        if let Some(topic) = topic_of(step).filter(|t| wildcard(t)) {
            return Some(format!(
                "the topic '{topic}' has a wildcard (+ or #): a message is published to one topic"
            ));
        }
        match reply::of(step) {
            Err(why) => Some(why.to_string()),
            // A scenario's cookie jar asks for `Keep::Cookies`: MQTT has none to read.
            Ok(None) if matches!(step.keep, Keep::Head | Keep::All) => Some(format!(
                "it reads a reply (extract, check or script), and an MQTT publish has one only when the step names the topic it comes on: path = \"{}?reply=TOPIC\"",
                topic_of(step).unwrap_or("TOPIC")
            )),
            Ok(_) => None,
        }
    }

    fn connect(&self) -> Fut<'_, Result<Box<dyn Connection>, ErrorKind>> {
        Box::pin(async move {
            let conn = connect(&self.0).await?;
            Ok(Box::new(Publisher {
                conn,
                target: self.0.clone(),
            }) as Box<dyn Connection>)
        })
    }

    fn units_connect(&self) -> bool {
        self.0.mode == Mode::Connect
    }

    fn hold(&self) -> Fut<'_, Result<Reply, ErrorKind>> {
        Box::pin(async move {
            hold(&self.0).await?;
            Ok(Reply::new(CONNACK, true))
        })
    }

    fn release(&self) -> Fut<'_, ()> {
        Box::pin(release())
    }

    fn companions(&self) -> u64 {
        self.0.subscribers
    }

    fn start_companions(&self, ask: CompanionsAsk) -> Option<Companions> {
        (self.0.subscribers > 0).then(|| subscriber::start(&self.0, ask))
    }
}

/// A client the driver publishes with.
struct Publisher {
    conn: Conn,
    target: Arc<Target>,
}

impl Connection for Publisher {
    fn fd(&self) -> RawFd {
        self.conn.fd
    }

    fn is_closed(&self) -> bool {
        self.conn.closed
    }

    fn send<'a>(
        &'a mut self,
        step: Option<&'a Rendered>,
        seq: u64,
        intended: Instant,
    ) -> Fut<'a, Result<Reply, ErrorKind>> {
        Box::pin(async move {
            let (topic, body) = match step {
                Some(r) => (topic_of(r), r.body.clone()),
                None => (None, self.target.body.pick(seq)),
            };
            // A step that names its reply topic is a request: subscribed to first,
            // answered by the next message on it.
            let answer = step.and_then(|r| reply::of(r).ok().flatten());
            if let Some(filter) = answer {
                reply::subscribe(&mut self.conn, filter)
                    .await
                    .inspect_err(|_| self.conn.closed = true)?;
            }
            let t = &self.target;
            let reason = publish(&mut self.conn, t, topic, body, intended).await?;
            let refused = reason >= 0x80;
            let status = if refused {
                u16::from(reason)
            } else {
                u16::from(t.qos)
            };
            let mut reply = Reply::new(status, !refused);
            if let (Some(filter), false, Some(r)) = (answer, refused, step) {
                let message = reply::next(&mut self.conn, filter)
                    .await
                    .inspect_err(|_| self.conn.closed = true)?;
                reply.bytes = message.len() as u64;
                if matches!(r.keep, Keep::Head | Keep::All) {
                    let mut k = Box::new(Kept::new(r.keep));
                    k.take_body(&message);
                    reply.kept = Some(k);
                }
            }
            Ok(reply)
        })
    }

    fn goodbye(self: Box<Self>) -> Fut<'static, ()> {
        Box::pin(disconnect(self.conn))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Publish,
    Connect,
}

/// One connected client.
pub struct Conn {
    version: Version,
    stream: Stream,
    read: BytesMut,
    write: BytesMut,
    /// This client's topic, `{{client}}` filled in.
    topic: String,
    number: u64,
    seq: u64,
    pkid: u16,
    pub fd: std::os::fd::RawFd,
    closed: bool,
    /// Deliveries that came while an acknowledgement was awaited (a step's reply can
    /// come before its own PUBACK): topic and payload, at most [`INBOX`].
    inbox: std::collections::VecDeque<(Bytes, Bytes)>,
    /// The reply topics this client subscribed to ([`reply`]).
    replies: std::collections::HashSet<String>,
}

/// The most deliveries a publishing client keeps while it waits for an
/// acknowledgement; older ones are dropped (a broker that floods cannot grow it).
const INBOX: usize = 64;

impl Conn {
    /// Reads the next whole packet from the broker.
    async fn packet(&mut self) -> Result<In, ErrorKind> {
        use tokio::io::AsyncReadExt;
        loop {
            match wire::decode(self.version, &mut self.read) {
                Ok(Some(p)) => return Ok(p),
                Ok(None) => {}
                Err(()) => return Err(ErrorKind::Protocol),
            }
            // Straight into the buffer: a 16 KiB array here would live in every boxed
            // `send` future, copied on each publish (20% of QoS 0's CPU).
            self.read.reserve(16 * 1024);
            let n = self
                .stream
                .read_buf(&mut self.read)
                .await
                .map_err(|e| io_kind(&e))?;
            if n == 0 {
                return Err(ErrorKind::Reset);
            }
        }
    }

    async fn send(&mut self, packet: Out<'_>) -> Result<(), ErrorKind> {
        self.write.clear();
        wire::encode(self.version, packet, &mut self.write).map_err(|()| ErrorKind::Protocol)?;
        self.stream
            .write_all(&self.write)
            .await
            .map_err(|e| io_kind(&e))
    }

    /// Reads until the answer `pick` takes (its value; pings on the way skipped,
    /// deliveries to the client's reply topics kept in its inbox); anything else from
    /// the broker is a protocol error.
    async fn answer<T>(&mut self, pick: impl Fn(&In) -> Option<T>) -> Result<T, ErrorKind> {
        loop {
            match self.packet().await? {
                In::PingResp => continue,
                In::Publish {
                    qos,
                    pkid,
                    topic,
                    payload,
                } if !self.replies.is_empty() => self.delivered(qos, pkid, topic, payload).await?,
                p => return pick(&p).ok_or(ErrorKind::Protocol),
            }
        }
    }

    /// A delivery to one of the client's reply topics, acknowledged as its QoS asks
    /// and kept for [`reply`].
    async fn delivered(
        &mut self,
        qos: u8,
        pkid: u16,
        topic: Bytes,
        payload: Bytes,
    ) -> Result<(), ErrorKind> {
        match qos {
            0 => {}
            1 => self.send(Out::PubAck(pkid)).await?,
            // Subscribed at QoS 0: a broker has no reason to send QoS 2 to it.
            _ => return Err(ErrorKind::Protocol),
        }
        if self.inbox.len() == INBOX {
            self.inbox.pop_front();
        }
        self.inbox.push_back((topic, payload));
        Ok(())
    }

    fn next_pkid(&mut self) -> u16 {
        self.pkid = self.pkid % u16::MAX + 1;
        self.pkid
    }
}

/// This process's random number: in its clients' ids and stamps, distinct across
/// agents and runs, so that no two clients share an id (a broker disconnects the older
/// of two) and a subscriber tells publishers of several agents apart.
fn nonce() -> u32 {
    static NONCE: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *NONCE.get_or_init(|| {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        crate::rng::mix(nanos ^ u64::from(std::process::id())) as u32
    })
}

fn client_id(number: u64) -> String {
    format!("strainline-{:08x}-{number}", nonce())
}

/// Clients of this process, numbered in the order they connect.
static CLIENTS: AtomicU64 = AtomicU64::new(0);

/// Connects one client: CONNECT, then the broker's CONNACK (a refusal is a `protocol`
/// error: a bad user name or password, an id the broker does not take).
pub async fn connect(t: &Target) -> Result<Conn, ErrorKind> {
    let number = CLIENTS.fetch_add(1, Ordering::Relaxed);
    let mut conn = open(t, number).await?;
    handshake(&mut conn, t, client_id(number)).await?;
    Ok(conn)
}

async fn open(t: &Target, number: u64) -> Result<Conn, ErrorKind> {
    let (stream, fd) = open_stream(t.addr, &t.tls).await?;
    Ok(Conn {
        version: t.version,
        stream,
        read: BytesMut::with_capacity(4096),
        write: BytesMut::with_capacity(4096),
        topic: t.topic.replace("{{client}}", &number.to_string()),
        number,
        seq: 0,
        pkid: 0,
        fd,
        closed: false,
        inbox: std::collections::VecDeque::new(),
        replies: std::collections::HashSet::new(),
    })
}

async fn handshake(conn: &mut Conn, t: &Target, client_id: String) -> Result<(), ErrorKind> {
    conn.send(Out::Connect {
        id: client_id,
        keep_alive: t.keep_alive,
        clean: t.clean_session,
        login: t.login.as_ref().map(|(u, p)| (u.as_str(), p.as_str())),
    })
    .await?;
    match conn.packet().await? {
        In::ConnAck { ok: true } => Ok(()),
        _ => Err(ErrorKind::Protocol),
    }
}

/// The topic a scenario step publishes to: its path less the leading `/` and its
/// options (`?reply=…`), if it has one (else the URL's).
pub fn topic_of(r: &crate::load::request::Rendered) -> Option<&str> {
    let path = r.path.split_once('?').map_or(&r.path[..], |(p, _)| p);
    Some(path.trim_start_matches('/')).filter(|p| !p.is_empty())
}

/// Whether a topic has a wildcard, which is for subscribing, never for publishing.
pub fn wildcard(topic: &str) -> bool {
    topic.contains(['+', '#'])
}

thread_local! {
    /// The clients this worker thread connected in `conn` mode, held until the run ends.
    static HELD: std::cell::RefCell<Vec<Conn>> = const { std::cell::RefCell::new(Vec::new()) };
    /// What pings them, when they have a keep-alive.
    static PINGER: std::cell::RefCell<Option<tokio::task::JoinHandle<()>>> =
        const { std::cell::RefCell::new(None) };
}

/// A unit of `conn` mode: a client connects (CONNECT, CONNACK) and stays connected,
/// pinged every half keep-alive, until the run ends ([`release`]).
pub async fn hold(t: &Target) -> Result<(), ErrorKind> {
    let conn = connect(t).await?;
    HELD.with(|h| h.borrow_mut().push(conn));
    if t.keep_alive > 0 && PINGER.with(|p| p.borrow().is_none()) {
        let every = std::time::Duration::from_millis(500 * u64::from(t.keep_alive));
        let task = tokio::task::spawn_local(async move {
            loop {
                tokio::time::sleep(every).await;
                let mut conns = HELD.with(|h| std::mem::take(&mut *h.borrow_mut()));
                for c in conns.iter_mut().filter(|c| !c.closed) {
                    // The broker's PINGRESP (2 bytes) waits in the socket, unread.
                    if c.send(Out::PingReq).await.is_err() {
                        c.closed = true;
                    }
                }
                HELD.with(|h| h.borrow_mut().extend(conns));
            }
        });
        PINGER.with(|p| *p.borrow_mut() = Some(task));
    }
    Ok(())
}

/// The run is over: the clients this thread holds leave with DISCONNECT.
pub async fn release() {
    if let Some(task) = PINGER.with(|p| p.borrow_mut().take()) {
        task.abort();
    }
    let conns = HELD.with(|h| std::mem::take(&mut *h.borrow_mut()));
    let bye = futures_util::future::join_all(conns.into_iter().map(disconnect));
    let _ = tokio::time::timeout(std::time::Duration::from_secs(1), bye).await;
}

/// Sends DISCONNECT: the client leaves as a client that is done (no will published).
pub async fn disconnect(mut conn: Conn) {
    if !conn.closed {
        let _ = conn.send(Out::Disconnect).await;
    }
}

/// Publishes one message (its intended time in the stamp, if stamped) and waits for
/// what its QoS asks. Its MQTT 5 reason code: 0 done, 0x80 and above refused.
pub async fn publish(
    conn: &mut Conn,
    t: &Target,
    topic: Option<&str>,
    body: Bytes,
    intended: Instant,
) -> Result<u8, ErrorKind> {
    let r = publish_inner(conn, t, topic, body, intended).await;
    if r.is_err() {
        conn.closed = true;
    }
    r
}

async fn publish_inner(
    conn: &mut Conn,
    t: &Target,
    topic: Option<&str>,
    body: Bytes,
    intended: Instant,
) -> Result<u8, ErrorKind> {
    let payload = if t.subscribers > 0 {
        let stamp = Stamp {
            client: (u64::from(nonce()) << 32) | conn.number,
            seq: conn.seq,
            intended_ns: unix_nanos(intended),
        };
        let mut p = BytesMut::with_capacity(Stamp::LEN + body.len());
        stamp.put(&mut p);
        p.extend_from_slice(&body);
        p.freeze()
    } else {
        body
    };
    conn.seq += 1;
    if topic.is_some_and(wildcard) {
        // A wildcard is not a topic to publish to (refused before the run for a step
        // whose text has one; a rendered `{{csv.…}}` value still may).
        return Err(ErrorKind::Protocol);
    }
    let topic = topic.map_or_else(|| conn.topic.clone(), str::to_string);
    let pkid = match t.qos {
        0 => 0,
        _ => conn.next_pkid(),
    };
    conn.send(Out::Publish {
        topic,
        qos: t.qos,
        pkid,
        payload,
    })
    .await?;
    match t.qos {
        0 => Ok(0),
        1 => {
            conn.answer(|p| match p {
                In::PubAck { pkid: id, reason } if *id == pkid => Some(*reason),
                _ => None,
            })
            .await
        }
        _ => {
            let reason = conn
                .answer(|p| match p {
                    In::PubRec { pkid: id, reason } if *id == pkid => Some(*reason),
                    _ => None,
                })
                .await?;
            if reason >= 0x80 {
                // Refused: the exchange ends at PUBREC (MQTT 5).
                return Ok(reason);
            }
            conn.send(Out::PubRel(pkid)).await?;
            conn.answer(|p| matches!(p, In::PubComp { pkid: id } if *id == pkid).then_some(0))
                .await
        }
    }
}

/// What a stamped message starts with: who published it, its number from that
/// client, and when it was meant to be sent (nanoseconds since the Unix epoch, so that
/// a subscriber in another process — another agent — measures from it too).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    pub client: u64,
    pub seq: u64,
    pub intended_ns: u64,
}

impl Stamp {
    const MAGIC: &'static [u8; 4] = b"SLm1";
    pub const LEN: usize = 4 + 8 + 8 + 8;

    fn put(&self, b: &mut BytesMut) {
        b.put_slice(Self::MAGIC);
        b.put_u64(self.client);
        b.put_u64(self.seq);
        b.put_u64(self.intended_ns);
    }

    /// The stamp a payload starts with, if it has one.
    pub fn read(payload: &[u8]) -> Option<Stamp> {
        let rest = payload.strip_prefix(&Self::MAGIC[..])?;
        let n = |i: usize| -> Option<u64> {
            Some(u64::from_be_bytes(rest.get(i..i + 8)?.try_into().ok()?))
        };
        Some(Stamp {
            client: n(0)?,
            seq: n(8)?,
            intended_ns: n(16)?,
        })
    }
}

/// An instant as nanoseconds since the Unix epoch, through one anchor per process
/// (the monotonic clock's instants keep their spacing).
pub fn unix_nanos(at: Instant) -> u64 {
    static ANCHOR: std::sync::OnceLock<(Instant, u64)> = std::sync::OnceLock::new();
    let (i0, n0) = *ANCHOR.get_or_init(|| {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        (Instant::now(), now)
    });
    if at >= i0 {
        n0 + (at - i0).as_nanos() as u64
    } else {
        n0.saturating_sub((i0 - at).as_nanos() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stamp_reads_back_and_a_plain_payload_has_none() {
        let s = Stamp {
            client: 7,
            seq: 1 << 40,
            intended_ns: 1_790_000_000_123_456_789,
        };
        let mut b = BytesMut::new();
        s.put(&mut b);
        b.extend_from_slice(b"{\"t\":21.5}");
        assert_eq!(Stamp::read(&b), Some(s));
        assert_eq!(Stamp::read(b"{\"t\":21.5}"), None);
        assert_eq!(Stamp::read(&b[..Stamp::LEN - 1]), None);
    }

    /// A publish's future holds no buffer ([`super::super::unit_size`]).
    #[test]
    fn a_publish_s_future_holds_no_buffer() {
        use super::super::unit_size;
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        unit_size::run(async {
            let port = unit_size::serving(|mut s| async move {
                let mut buf = [0u8; 256];
                let _ = s.read(&mut buf).await; // CONNECT
                s.write_all(&[0x20, 0x02, 0x00, 0x00]).await.unwrap(); // CONNACK: accepted
                let _ = s.read(&mut buf).await;
            })
            .await;
            // One type whatever the QoS: its size is the largest of its states.
            let url = format!("mqtt://127.0.0.1:{port}/t?qos=1");
            let size = unit_size::of(&Mqtt, &url, b"{}").await;
            assert!(size < unit_size::MOST, "a publish's future is {size} bytes");
        });
    }

    #[test]
    fn unix_nanos_keeps_the_spacing_of_instants() {
        let a = Instant::now();
        let b = a + std::time::Duration::from_millis(1500);
        assert_eq!(unix_nanos(b) - unix_nanos(a), 1_500_000_000);
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64;
        assert!(unix_nanos(Instant::now()).abs_diff(wall) < 1_000_000_000);
    }
}
