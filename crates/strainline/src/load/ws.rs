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
//! again at the next send. A reply is at most a socket's share of [`REPLY_BUDGET`]
//! ([`reply_bound`]).

use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::sync::Arc;

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use hyper::header::{HeaderName, HeaderValue};
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_tungstenite::WebSocketStream;

use super::h1::Stream;
use super::http::{io_kind, open_stream};
use super::recorder::ErrorKind;

/// Where the WebSocket is opened, resolved and checked before the run.
#[derive(Clone)]
pub struct Target {
    pub addr: SocketAddr,
    /// The URL as given (`ws://host:port/path`), for the upgrade request.
    pub url: String,
    pub tls: Option<super::http::Tls>,
    /// The JSON field (a path of object keys) a reply shares with its message.
    pub reply_field: Option<Arc<[String]>>,
    /// The largest message (or frame) read on one socket ([`reply_bound`]).
    pub max_reply: usize,
}

/// `a.b` as the path of keys `["a", "b"]`, each key non-empty.
pub fn field_path(f: &str) -> crate::error::Result<Arc<[String]>> {
    let keys: Vec<String> = f.split('.').map(str::to_string).collect();
    if keys.iter().any(String::is_empty) {
        return Err(crate::Error::usage(format!(
            "--reply-field '{f}': give a JSON field name, or a.b for a nested one"
        )));
    }
    Ok(keys.into())
}

/// The value at `path` in a JSON message, if it is one and has it.
pub fn id_of(message: &[u8], path: &[String]) -> Option<serde_json::Value> {
    let mut v: serde_json::Value = serde_json::from_slice(message).ok()?;
    for key in path {
        v = v.as_object_mut()?.remove(key)?;
    }
    Some(v)
}

/// What a unit of work read: the reply's size and the messages pushed before it.
pub struct Read {
    pub bytes: u64,
    pub pushed: u64,
}

/// One open WebSocket, and its socket's descriptor for the driver's watchdog.
pub struct Conn {
    socket: Box<WebSocketStream<Stream>>,
    pub fd: RawFd,
    closed: bool,
}

impl Conn {
    pub fn is_closed(&self) -> bool {
        self.closed
    }
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

/// Opens a WebSocket: TCP, TLS for `wss://`, then the upgrade with `headers`.
pub async fn connect(t: &Target, headers: &[(HeaderName, HeaderValue)]) -> Result<Conn, ErrorKind> {
    use tungstenite::client::IntoClientRequest;
    let mut request = t
        .url
        .as_str()
        .into_client_request()
        .map_err(|_| ErrorKind::Protocol)?;
    for (k, v) in headers {
        request.headers_mut().append(k.clone(), v.clone());
    }
    let (stream, fd) = open_stream(t.addr, &t.tls).await?;
    // tungstenite zero-fills its read buffer's spare room up to `read_buffer_size` at
    // every read: at its default (128 KiB) a message cost ~10% more CPU (memset was the
    // hottest user-space symbol; docs/performance.md); 4 KiB covers a typical message
    // and the buffer still grows for a larger one.
    let config = tungstenite::protocol::WebSocketConfig::default()
        .read_buffer_size(READ_BUFFER)
        .max_message_size(Some(t.max_reply))
        .max_frame_size(Some(t.max_reply));
    let (ws, _) = tokio_tungstenite::client_async_with_config(request, stream, Some(config))
        .await
        .map_err(|e| ws_kind(&e))?;
    Ok(Conn {
        socket: Box::new(ws),
        fd,
        closed: false,
    })
}

/// What tungstenite reads into at once (see [`connect`]).
const READ_BUFFER: usize = 4096;

/// The largest message (or frame) read from a server on one socket: a larger one is a
/// `protocol` error, before more of it is buffered (tungstenite's default is 64 MiB).
pub const MAX_REPLY: usize = 16 << 20;

/// What all of a run's sockets may hold of replies still arriving: [`reply_bound`]
/// shares it among them.
pub const REPLY_BUDGET: usize = 32 << 20;

/// The largest reply one of `sockets` reads: its share of [`REPLY_BUDGET`], from 1 MiB to
/// [`MAX_REPLY`] (a server sending a 100 MB message in fragments to 20 sockets held
/// 1.27 GB; the buffers that hold a reply take about twice its bound: a budget of 64 MiB
/// peaked at 109 MB at 20 sockets).
pub fn reply_bound(sockets: usize) -> usize {
    (REPLY_BUDGET / sockets.max(1)).clamp(1 << 20, MAX_REPLY)
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
pub async fn send(conn: &mut Conn, t: &Target, body: Bytes) -> Result<Read, ErrorKind> {
    let id = t
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
pub async fn close(mut conn: Conn) {
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
            let bytes = data.len() as u64;
            return Ok(Read { bytes, pushed });
        }
        pushed += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
