//! WebSocket (RFC 6455) as a load protocol, over tokio-tungstenite: each of the
//! driver's connections is one WebSocket (TCP, then TLS for `wss://`, then the upgrade
//! handshake with the workload's headers). A unit of work sends one message — the
//! workload's body, a text frame when it is UTF-8 and a binary frame otherwise — and
//! ends when the server's next data message arrives (an echo server's echo, a
//! request/response server's reply): its latency is from the intended send time, as
//! for HTTP. Pings are answered as the reply is read; a close frame, or the stream's
//! end, is a `reset` and the connection is opened again at the next send.

use std::net::SocketAddr;
use std::os::fd::RawFd;

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use hyper::header::{HeaderName, HeaderValue};
use rustls::pki_types::ServerName;
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
    pub tls: Option<(tokio_rustls::TlsConnector, ServerName<'static>)>,
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
    let (ws, _) = tokio_tungstenite::client_async(request, stream)
        .await
        .map_err(|e| ws_kind(&e))?;
    Ok(Conn {
        socket: Box::new(ws),
        fd,
        closed: false,
    })
}

/// The message a body makes: text when it is UTF-8, binary otherwise.
pub fn message(body: Bytes) -> Message {
    match tungstenite::Utf8Bytes::try_from(body.clone()) {
        Ok(text) => Message::Text(text),
        Err(_) => Message::Binary(body),
    }
}

/// Sends one message and waits for the server's next data message; returns its size.
pub async fn send(conn: &mut Conn, body: Bytes) -> Result<u64, ErrorKind> {
    let r = exchange(&mut conn.socket, message(body)).await;
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

async fn exchange(ws: &mut WebSocketStream<Stream>, msg: Message) -> Result<u64, ErrorKind> {
    ws.send(msg).await.map_err(|e| ws_kind(&e))?;
    loop {
        match ws.next().await {
            Some(Ok(Message::Text(t))) => return Ok(t.len() as u64),
            Some(Ok(Message::Binary(b))) => return Ok(b.len() as u64),
            // Control frames: tungstenite queues the pong and sends it with the next
            // write; a close frame ends the connection.
            Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => continue,
            Some(Ok(Message::Close(_))) | None => return Err(ErrorKind::Reset),
            Some(Err(e)) => return Err(ws_kind(&e)),
        }
    }
}
