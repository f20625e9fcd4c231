//! WebSocket (RFC 6455) as a load protocol, over tokio-tungstenite: each of the
//! driver's connections is one WebSocket (TCP, then TLS for `wss://`, then the upgrade
//! handshake with the workload's headers). A unit of work sends one message — the
//! workload's body, a text frame when it is UTF-8 and a binary frame otherwise — and
//! ends when the server's next data message arrives (an echo server's echo, a
//! request/response server's reply): its latency is from the intended send time, as
//! for HTTP. With a reply field (`--reply-field id`) the reply is the first message whose
//! JSON field has the message's value, and the messages before it are counted as pushed
//! by the server. Pings are answered as the reply is read, [`MAX_PINGS_PER_REPLY`] at
//! most; a close frame, or the stream's end, is a `reset` and the connection is opened
//! again at the next send. A reply is at most a socket's share of [`super::REPLY_BUDGET`]
//! ([`reply_bound`]). A protocol of the registry ([`super::PROTOCOLS`]).

use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use hyper::header::{HeaderName, HeaderValue};
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_tungstenite::WebSocketStream;

use super::super::client::Reply;
use super::super::flow::{Keep, Kept};
use super::super::net::Stream;
use super::super::recorder::ErrorKind;
use super::super::request::Body;
use super::super::request::Rendered;
use super::{field_path, io_kind, open, Ask, Connection, Fut, Protocol};

/// WebSocket in the registry.
pub struct WebSocket;

impl Protocol for WebSocket {
    fn name(&self) -> &'static str {
        "WebSocket"
    }

    fn schemes(&self) -> &'static [&'static str] {
        &["ws", "wss"]
    }

    fn tls_schemes(&self) -> &'static [&'static str] {
        &["wss"]
    }

    fn setup_scheme(&self, tls: bool) -> Option<&'static str> {
        // The handshake is an HTTP request: the same server answers HTTP.
        Some(if tls { "https" } else { "http" })
    }

    fn options(&self) -> &'static [&'static str] {
        &["reply_field"]
    }

    fn plan(&'static self, ask: &Ask<'_>) -> crate::error::Result<Arc<dyn super::Target>> {
        let url = ask.url;
        let bad = |why: String| crate::Error::usage(format!("URL '{url}': {why}"));
        if ask.replay {
            return Err(bad("a replay sends an access log's HTTP requests; a WebSocket load sends the body as a message (-d), or a scenario's steps' bodies".into()));
        }
        if ask.method != "GET" {
            return Err(bad(format!(
                "a WebSocket opens with GET; a method ({}) has no meaning for its messages",
                ask.method
            )));
        }
        if ask.options.http2 {
            return Err(bad(
                "--http2 is for HTTP; a WebSocket opens over HTTP/1.1".into()
            ));
        }
        let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
        let hostport = rest.split(['/', '?']).next().unwrap_or_default();
        if hostport.is_empty() {
            return Err(bad("give the host, e.g. ws://127.0.0.1:9000/echo".into()));
        }
        let tls = self.tls_schemes().contains(&scheme);
        let (addr, tls) =
            super::endpoint(url, hostport, if tls { 443 } else { 80 }, tls, ask.options)?;
        let headers = super::super::request::headers(ask.headers)?;
        let reply_field = match &ask.options.reply_field {
            Some(f) => Some(field_path(f)?),
            None => None,
        };
        if let (Some(path), super::super::spec::BodySpec::Bytes(b)) = (&reply_field, ask.body) {
            if id_of(b, path).is_none() {
                return Err(crate::Error::usage(format!(
                    "--reply-field {}: the message has no such JSON field, so no reply could be matched to it",
                    ask.options.reply_field.as_deref().unwrap_or_default()
                )));
            }
        }
        Ok(Arc::new(Target {
            protocol: self,
            addr,
            url: url.to_string(),
            tls,
            headers,
            messages: Arc::new(Messages {
                body: Body::of(ask.body),
                reply_field,
            }),
            max_reply: AtomicUsize::new(MAX_REPLY),
        }))
    }

    fn label(&self, _code: u16) -> String {
        "reply".into()
    }

    fn keeps_bodies(&self) -> bool {
        true
    }
}

/// Where the WebSocket is opened, resolved and checked before the run.
pub struct Target {
    protocol: &'static WebSocket,
    addr: SocketAddr,
    /// The URL as given (`ws://host:port/path`), for the upgrade request.
    url: String,
    tls: Option<super::super::net::Tls>,
    /// The upgrade request's headers beside tungstenite's own.
    headers: Vec<(HeaderName, HeaderValue)>,
    messages: Arc<Messages>,
    /// The largest message (or frame) read on one socket ([`reply_bound`]).
    max_reply: AtomicUsize,
}

impl super::Target for Target {
    fn protocol(&self) -> &'static dyn Protocol {
        self.protocol
    }

    fn describe(&self) -> String {
        format!(
            "WebSocket{}",
            if self.tls.is_some() { " over TLS" } else { "" }
        )
    }

    fn handshakes(&self) -> bool {
        true
    }

    fn sized_for(&self, connections: usize) {
        self.max_reply
            .store(reply_bound(connections), Ordering::Relaxed);
    }

    fn connect(&self) -> Fut<'_, Result<Box<dyn Connection>, ErrorKind>> {
        Box::pin(async move {
            let c = connect(self).await?;
            Ok(Box::new(c) as Box<dyn Connection>)
        })
    }
}

impl Connection for Conn {
    fn fd(&self) -> RawFd {
        self.fd
    }

    fn is_closed(&self) -> bool {
        self.closed
    }

    fn send<'a>(
        &'a mut self,
        step: Option<&'a Rendered>,
        seq: u64,
        _intended: Instant,
    ) -> Fut<'a, Result<Reply, ErrorKind>> {
        let body = step.map(|r| r.body.clone());
        let keep = step.map_or(Keep::Nothing, |r| r.keep);
        Box::pin(async move {
            let body = body.unwrap_or_else(|| self.messages.body.pick(seq));
            let read = send(self, body).await?;
            // The reply message is the body a flow reads; it has no head.
            let kept = (keep == Keep::All).then(|| {
                let mut k = Box::new(Kept::new(keep));
                k.take_body(&read.data);
                k
            });
            Ok(Reply {
                bytes: read.data.len() as u64,
                messages: read.pushed,
                kept,
                ..Reply::new(0, true)
            })
        })
    }

    fn goodbye(self: Box<Self>) -> Fut<'static, ()> {
        Box::pin(close(*self))
    }
}

/// The value at `path` in a JSON message, if it is one and has it.
pub fn id_of(message: &[u8], path: &[String]) -> Option<serde_json::Value> {
    let mut v: serde_json::Value = serde_json::from_slice(message).ok()?;
    for key in path {
        v = v.as_object_mut()?.remove(key)?;
    }
    Some(v)
}

/// What a unit of work read: the reply and the messages pushed before it.
struct Read {
    data: Bytes,
    pushed: u64,
}

/// One open WebSocket, and its socket's descriptor for the driver's watchdog.
pub struct Conn {
    socket: Box<WebSocketStream<Stream>>,
    fd: RawFd,
    closed: bool,
    messages: Arc<Messages>,
}

/// What every message of the run is: the workload's body, and how a reply is matched.
struct Messages {
    body: Body,
    /// The JSON field (a path of object keys) a reply shares with its message.
    reply_field: Option<Arc<[String]>>,
}

fn ws_kind(e: &tungstenite::Error) -> ErrorKind {
    use tungstenite::Error as E;
    match e {
        E::Io(io) => io_kind(io),
        E::Tls(_) => ErrorKind::Tls,
        E::ConnectionClosed | E::AlreadyClosed => ErrorKind::Reset,
        _ => ErrorKind::Protocol,
    }
}

/// Opens a WebSocket: TCP, TLS for `wss://`, then the upgrade with the workload's headers.
async fn connect(t: &Target) -> Result<Conn, ErrorKind> {
    use tungstenite::client::IntoClientRequest;
    let mut request = t
        .url
        .as_str()
        .into_client_request()
        .map_err(|_| ErrorKind::Protocol)?;
    for (k, v) in &t.headers {
        request.headers_mut().append(k.clone(), v.clone());
    }
    let (stream, fd) = open(t.addr, &t.tls).await?;
    let max_reply = t.max_reply.load(Ordering::Relaxed);
    // tungstenite zero-fills its read buffer's spare room up to `read_buffer_size` at
    // every read: at its default (128 KiB) a message cost ~10% more CPU (memset was the
    // hottest user-space symbol; docs/performance.md); 4 KiB covers a typical message
    // and the buffer still grows for a larger one.
    let config = tungstenite::protocol::WebSocketConfig::default()
        .read_buffer_size(READ_BUFFER)
        .max_message_size(Some(max_reply))
        .max_frame_size(Some(max_reply));
    let (ws, _) = tokio_tungstenite::client_async_with_config(request, stream, Some(config))
        .await
        .map_err(|e| ws_kind(&e))?;
    Ok(Conn {
        socket: Box::new(ws),
        fd,
        closed: false,
        messages: t.messages.clone(),
    })
}

/// What tungstenite reads into at once (see [`connect`]).
const READ_BUFFER: usize = 4096;

/// The largest message (or frame) read from a server on one socket: a larger one is a
/// `protocol` error, before more of it is buffered (tungstenite's default is 64 MiB).
pub const MAX_REPLY: usize = 16 << 20;

/// The largest reply one of `sockets` reads: its share of the run's
/// [`super::REPLY_BUDGET`], from 1 MiB to [`MAX_REPLY`] (a server sending a 100 MB
/// message in fragments to 20 sockets held 1.27 GB; the buffers that hold a reply take
/// about twice its bound: a budget of 64 MiB peaked at 109 MB at 20 sockets).
pub fn reply_bound(sockets: usize) -> usize {
    super::reply_share(sockets, MAX_REPLY)
}

/// Pings a server may send while one message waits for its reply: each is answered
/// (tungstenite queues the pong), and a server that floods them without reading our
/// pongs would grow the queue without end; beyond this the connection is closed as a
/// `protocol` error and opened again at the next send.
pub const MAX_PINGS_PER_REPLY: u32 = 1000;

/// The message a body makes: text when it is UTF-8, binary otherwise.
pub fn message(body: Bytes) -> Message {
    match tungstenite::Utf8Bytes::try_from(body.clone()) {
        Ok(text) => Message::Text(text),
        Err(_) => Message::Binary(body),
    }
}

/// Sends one message and waits for its reply: the server's next data message, or with
/// a reply field the first one that matches (a message without the field takes the next).
async fn send(conn: &mut Conn, body: Bytes) -> Result<Read, ErrorKind> {
    let id = conn
        .messages
        .reply_field
        .as_ref()
        .and_then(|p| Some((p, id_of(&body, p)?)));
    let r = exchange(&mut conn.socket, message(body), id).await;
    if r.is_err() {
        conn.closed = true;
    }
    r
}

/// Sends a close frame (normal closure) and lets the socket go.
async fn close(mut conn: Conn) {
    if conn.closed {
        return;
    }
    use tungstenite::protocol::frame::{coding::CloseCode, CloseFrame};
    let bye = Message::Close(Some(CloseFrame {
        code: CloseCode::Normal,
        reason: "".into(),
    }));
    let _ = conn.socket.send(bye).await;
}

async fn exchange(
    ws: &mut WebSocketStream<Stream>,
    msg: Message,
    id: Option<(&Arc<[String]>, serde_json::Value)>,
) -> Result<Read, ErrorKind> {
    ws.send(msg).await.map_err(|e| ws_kind(&e))?;
    let (mut pushed, mut pings) = (0, 0u32);
    loop {
        let data: Bytes = match ws.next().await {
            Some(Ok(Message::Text(t))) => t.into(),
            Some(Ok(Message::Binary(b))) => b,
            // Control frames: tungstenite queues the pong and sends it with the next
            // write (a flood of pings is bounded); a close frame ends the connection.
            Some(Ok(Message::Ping(_))) => {
                pings += 1;
                if pings > MAX_PINGS_PER_REPLY {
                    return Err(ErrorKind::Protocol);
                }
                continue;
            }
            Some(Ok(Message::Pong(_) | Message::Frame(_))) => continue,
            Some(Ok(Message::Close(_))) | None => return Err(ErrorKind::Reset),
            Some(Err(e)) => return Err(ws_kind(&e)),
        };
        let matched = match &id {
            None => true,
            Some((path, want)) => id_of(&data, path).as_ref() == Some(want),
        };
        if matched {
            return Ok(Read { data, pushed });
        }
        pushed += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A message's future holds no buffer ([`super::super::unit_size`]).
    #[test]
    fn a_message_s_future_holds_no_buffer() {
        use super::super::unit_size;
        unit_size::run(async {
            let port = unit_size::serving(|s| async move {
                let mut ws = tokio_tungstenite::accept_async(s).await.unwrap();
                while let Some(Ok(m)) = ws.next().await {
                    let _ = ws.send(m).await;
                }
            })
            .await;
            let url = format!("ws://127.0.0.1:{port}/echo");
            let size = unit_size::of(&WebSocket, &url, b"{}").await;
            assert!(size < unit_size::MOST, "a message's future is {size} bytes");
        });
    }

    #[test]
    fn a_reply_field_is_read_from_json_at_its_path() {
        let path = field_path("req.id").unwrap();
        let msg = br#"{"req": {"id": "a-1", "op": "get"}, "id": 9}"#;
        assert_eq!(id_of(msg, &path), Some(serde_json::json!("a-1")));
        assert_eq!(
            id_of(msg, &field_path("id").unwrap()),
            Some(serde_json::json!(9))
        );
        assert_eq!(id_of(msg, &field_path("req.nope").unwrap()), None);
        assert_eq!(id_of(b"not json", &path), None);
        assert_eq!(id_of(br#"{"req": 3}"#, &path), None);
        assert!(field_path("a..b").is_err());
        assert!(field_path("").is_err());
    }
}
