//! gRPC as a load protocol, over the HTTP/2 client the load engine already has: a unit
//! of work is one call — a POST to `/package.Service/Method` with `content-type:
//! application/grpc`, the message length-prefixed, the workload's headers as metadata —
//! and it ends when the response's trailers bring its `grpc-status` (the status of the
//! unit: 0 OK, 14 UNAVAILABLE, …). A server-streaming call's messages are counted as
//! they arrive. With a `.proto` (compiled in-process by protox), the message is written
//! as JSON (the workload's body or a scenario step's) and encoded with prost-reflect;
//! without one, the body is sent as the message's bytes as they are. A scenario step
//! that extracts or checks reads the reply's metadata (headers and trailers) and its
//! message as JSON (a stream's as a JSON array), decoded with the `.proto`. Calls
//! pipeline as HTTP/2 streams (`--streams M`). A protocol of the registry
//! ([`super::PROTOCOLS`]).

use std::os::fd::RawFd;
use std::sync::Arc;
use std::time::Instant;

use crate::error::Category;
use bytes::{BufMut, Bytes, BytesMut};
use hyper::header::{HeaderName, HeaderValue};
use hyper::Method;
use prost::Message;
use prost_reflect::{DescriptorPool, DynamicMessage, MessageDescriptor};

use super::super::client::Reply;
use super::super::flow::{Keep, Kept};
use super::super::net;
use super::super::recorder::ErrorKind;
use super::super::request::Rendered;
use super::super::spec::{BodySpec, ClientOptions};
use super::hyper2;
use super::{Ask, Connection, Fut, Protocol};

/// gRPC in the registry.
pub struct Grpc;

impl Protocol for Grpc {
    fn name(&self) -> &'static str {
        "gRPC"
    }

    fn schemes(&self) -> &'static [&'static str] {
        &["grpc", "grpcs"]
    }

    fn tls_schemes(&self) -> &'static [&'static str] {
        &["grpcs"]
    }

    fn file_options(&self) -> &'static [&'static str] {
        &["proto"]
    }

    /// `grpc[s]://HOST:PORT/package.Service/Method[?proto=FILE]`: the server resolved
    /// (HTTP/2, TLS with ALPN for `grpcs://`), the method found in the `.proto` if one is
    /// named, and the body made the framed message — JSON encoded with the `.proto`, or
    /// the bytes as given.
    fn plan(&'static self, ask: &Ask<'_>) -> crate::error::Result<Arc<dyn super::Target>> {
        let url = ask.url;
        if ask.replay {
            return Err(bad(format!(
                "URL '{url}': a replay sends an access log's HTTP requests; a gRPC load calls the URL's method"
            )));
        }
        if ask.method != "GET" && ask.method != "POST" {
            return Err(bad(format!(
                "URL '{url}': a gRPC call is a POST; a method ({}) has no meaning for it",
                ask.method
            )));
        }
        let (http, call) = call_of(url, ask.options, ask.body)?;
        Ok(Arc::new(Target {
            protocol: self,
            http,
            call: Arc::new(Call {
                metadata: super::super::request::headers(ask.headers)?,
                ..call
            }),
        }))
    }

    fn label(&self, code: u16) -> String {
        status_name(code).into()
    }

    fn pipelines(&self) -> bool {
        true
    }

    fn keeps_bodies(&self) -> bool {
        true
    }

    fn reply_heads(&self) -> bool {
        true
    }
}

fn bad(msg: String) -> crate::Error {
    crate::Error::usage(msg)
}

/// Where calls go, checked before the run.
pub struct Target {
    protocol: &'static Grpc,
    /// The server, always over HTTP/2.
    http: net::Target,
    call: Arc<Call>,
}

/// What each call is.
pub struct Call {
    /// `/package.Service/Method`, and the whole URI made once.
    path: String,
    uri: hyper::Uri,
    /// The method's request message, when a `.proto` described it: a JSON body is
    /// encoded with it.
    input: Option<MessageDescriptor>,
    /// The method's reply message, when a `.proto` described it: a flow reads it as
    /// JSON.
    output: Option<MessageDescriptor>,
    server_streaming: bool,
    /// The workload's headers, sent as metadata.
    metadata: Vec<(HeaderName, HeaderValue)>,
    /// The workload's message, framed.
    message: Bytes,
}

impl super::Target for Target {
    fn protocol(&self) -> &'static dyn Protocol {
        self.protocol
    }

    fn describe(&self) -> String {
        format!(
            "gRPC {}{}{}",
            self.call.path,
            if self.call.server_streaming {
                " (server streaming)"
            } else {
                ""
            },
            if self.http.tls.is_some() {
                " over TLS"
            } else {
                ""
            }
        )
    }

    fn handshakes(&self) -> bool {
        self.http.tls.is_some()
    }

    fn refuses(&self, step: &Rendered) -> Option<String> {
        let input = self.call.input.as_ref()?;
        encode(input, &step.body).err().map(|e| e.to_string())
    }

    fn connect(&self) -> Fut<'_, Result<Box<dyn Connection>, ErrorKind>> {
        Box::pin(async move {
            let http = hyper2::Conn::connect(&self.http).await?;
            Ok(Box::new(Conn {
                http,
                call: self.call.clone(),
            }) as Box<dyn Connection>)
        })
    }
}

/// An HTTP/2 connection calls go on, a stream each.
struct Conn {
    http: hyper2::Conn,
    call: Arc<Call>,
}

impl Connection for Conn {
    fn fd(&self) -> RawFd {
        self.http.fd
    }

    fn is_closed(&self) -> bool {
        self.http.is_closed()
    }

    fn share(&self) -> Option<Box<dyn Connection>> {
        let http = self.http.share();
        Some(Box::new(Conn {
            http,
            call: self.call.clone(),
        }))
    }

    fn send<'a>(
        &'a mut self,
        step: Option<&'a Rendered>,
        _seq: u64,
        _intended: Instant,
    ) -> Fut<'a, Result<Reply, ErrorKind>> {
        Box::pin(async move {
            // The connection and the call are apart: no copy of the call per unit.
            let (http, call) = (&mut self.http, &*self.call);
            let (message, metadata) = match step {
                // A scenario step's body is its JSON, encoded for the method.
                Some(r) => {
                    let message = match &call.input {
                        Some(input) => {
                            frame(&encode(input, &r.body).map_err(|_| ErrorKind::Protocol)?)
                        }
                        None => frame(&r.body),
                    };
                    (message, &r.headers[..])
                }
                None => (call.message.clone(), &call.metadata[..]),
            };
            let mut kept = match step {
                Some(r) if r.keep != Keep::Nothing => Some(Box::new(Kept::new(r.keep))),
                _ => None,
            };
            let called = self::call(http, call, metadata, message, kept.as_deref_mut()).await?;
            Ok(Reply {
                bytes: called.bytes,
                messages: called.messages,
                kept,
                ..Reply::new(called.status, called.status == 0)
            })
        })
    }

    fn goodbye(self: Box<Self>) -> Fut<'static, ()> {
        Box::pin(async {})
    }
}

/// The server and the call a gRPC URL names, with the workload's body made the framed
/// message (its metadata is added by [`Grpc::plan`]).
fn call_of(
    url: &str,
    client: &ClientOptions,
    body: &BodySpec,
) -> crate::error::Result<(net::Target, Call)> {
    let (tls, rest) = match url.strip_prefix("grpcs://") {
        Some(r) => (true, r),
        None => (false, url.trim_start_matches("grpc://")),
    };
    let eg = "e.g. grpc://127.0.0.1:50051/helloworld.Greeter/SayHello?proto=helloworld.proto";
    let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (authority, path) = rest
        .split_once('/')
        .ok_or_else(|| bad(format!("URL '{url}' names no method ({eg})")))?;
    let path = format!("/{path}");
    if path.matches('/').count() != 2 || path.ends_with('/') || !path[1..].contains('.') {
        return Err(bad(format!(
            "URL '{url}': the path must be /package.Service/Method ({eg})"
        )));
    }
    let mut proto = None;
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some(("proto", f)) if !f.is_empty() => proto = Some(std::path::PathBuf::from(f)),
            _ => {
                return Err(bad(format!(
                    "URL '{url}': unknown option '{pair}' (the option is proto=FILE)"
                )))
            }
        }
    }
    let scheme = if tls { "https" } else { "http" };
    let options = ClientOptions {
        http2: true,
        ..client.clone()
    };
    let (http, _) = super::http::resolve(&format!("{scheme}://{authority}/"), &options)
        .map_err(|e| e.context(format_args!("URL '{url}'")))?;
    let (input, output, server_streaming) = match &proto {
        Some(p) => {
            let (input, output, streaming) = method(p, &path)
                .map_err(|e| e.context(format_args!("URL '{url}': {}", p.display())))?;
            (Some(input), Some(output), streaming)
        }
        None => (None, None, false),
    };
    let message = match (body, &input) {
        (BodySpec::Random { .. }, Some(_)) => {
            return Err(bad(format!(
                "URL '{url}': random bytes are not a message of the .proto; give it as JSON (-d)"
            )))
        }
        (BodySpec::Random { len, seed }, None) => {
            Bytes::from(crate::rng::text(*len, crate::rng::mix(*seed)))
        }
        (BodySpec::Empty, None) => Bytes::new(),
        (BodySpec::Bytes(b), None) => Bytes::from(b.clone()),
        (BodySpec::Empty, Some(i)) => {
            encode(i, b"{}").map_err(|e| e.context(format_args!("URL '{url}'")))?
        }
        (BodySpec::Bytes(b), Some(i)) => {
            encode(i, b).map_err(|e| e.context(format_args!("URL '{url}'")))?
        }
    };
    Ok((
        http.clone(),
        Call {
            uri: hyper2::absolute(&http, &path),
            path,
            input,
            output,
            server_streaming,
            metadata: Vec::new(),
            message: frame(&message),
        },
    ))
}

/// How a call ended: its gRPC status, the messages and bytes it brought.
pub struct Called {
    pub status: u16,
    pub messages: u64,
    pub bytes: u64,
}

/// The method a `.proto` file declares under `path` (`/package.Service/Method`): its
/// request and reply messages and whether the server streams its answer.
pub fn method(
    proto: &std::path::Path,
    path: &str,
) -> crate::error::Result<(MessageDescriptor, MessageDescriptor, bool)> {
    let dir = proto.parent().filter(|d| !d.as_os_str().is_empty());
    let dir = dir.unwrap_or(std::path::Path::new("."));
    let name = proto.file_name().ok_or("names no file").usage()?;
    crate::os::file::check(proto, "proto", crate::os::file::MAX_INPUT)?;
    let files = protox::compile([name], [dir]).usage()?;
    let pool = DescriptorPool::from_file_descriptor_set(files).usage()?;
    let (service, method) = path
        .trim_start_matches('/')
        .rsplit_once('/')
        .ok_or("the URL's path must be /package.Service/Method")
        .usage()?;
    let s = pool.get_service_by_name(service).ok_or_else(|| {
        let all: Vec<String> = pool.services().map(|s| s.full_name().to_string()).collect();
        crate::Error::usage(format!(
            "no service '{service}' in it (it has: {})",
            all.join(", ")
        ))
    })?;
    let m = s.methods().find(|m| m.name() == method).ok_or_else(|| {
        let all: Vec<String> = s.methods().map(|m| m.name().to_string()).collect();
        crate::Error::usage(format!(
            "service '{service}' has no method '{method}' (it has: {})",
            all.join(", ")
        ))
    })?;
    Ok((m.input(), m.output(), m.is_server_streaming()))
}

/// A message as JSON, encoded for `input`: refused with the field and position.
pub fn encode(input: &MessageDescriptor, json: &[u8]) -> crate::error::Result<Bytes> {
    let text = if json.iter().all(u8::is_ascii_whitespace) {
        &b"{}"[..]
    } else {
        json
    };
    let mut de = serde_json::Deserializer::from_slice(text);
    let msg = DynamicMessage::deserialize(input.clone(), &mut de)
        .usage_with(|e| format!("the message is not a {}: {e}", input.full_name()))?;
    Ok(Bytes::from(msg.encode_to_vec()))
}

/// A message framed as gRPC sends it: uncompressed, its length, its bytes.
pub fn frame(message: &[u8]) -> Bytes {
    let mut b = BytesMut::with_capacity(5 + message.len());
    b.put_u8(0);
    b.put_u32(message.len() as u32);
    b.put_slice(message);
    b.freeze()
}

/// Counts whole messages in a response's data as frames arrive, and keeps them when a
/// flow reads them (`keep`: at most [`crate::load::flow::MAX_KEPT`] bytes in all).
#[derive(Default)]
struct Messages {
    /// Bytes still owed by the message being read (its prefix included).
    owed: u64,
    /// A prefix split across data frames.
    prefix: Vec<u8>,
    count: u64,
    bytes: u64,
    keep: Option<Vec<Vec<u8>>>,
    kept: usize,
}

impl Messages {
    fn feed(&mut self, mut d: &[u8]) {
        self.bytes += d.len() as u64;
        while !d.is_empty() {
            if self.owed > 0 {
                let take = (self.owed as usize).min(d.len());
                if let Some(last) = self.keep.as_mut().and_then(|k| k.last_mut()) {
                    let room = crate::load::flow::MAX_KEPT.saturating_sub(self.kept);
                    let part = &d[..take.min(room)];
                    last.extend_from_slice(part);
                    self.kept += part.len();
                }
                self.owed -= take as u64;
                d = &d[take..];
                continue;
            }
            let need = 5 - self.prefix.len();
            let take = need.min(d.len());
            self.prefix.extend_from_slice(&d[..take]);
            d = &d[take..];
            if self.prefix.len() == 5 {
                let len = u32::from_be_bytes([
                    self.prefix[1],
                    self.prefix[2],
                    self.prefix[3],
                    self.prefix[4],
                ]);
                self.prefix.clear();
                self.owed = u64::from(len);
                self.count += 1;
                if let Some(k) = self.keep.as_mut() {
                    k.push(Vec::new());
                }
            }
        }
    }
}

/// Whether a response says it is gRPC: `content-type: application/grpc`, alone or with
/// a `+proto` (or other) suffix or parameters. An HTML page with a `grpc-status` is not
/// a call that succeeded.
fn is_grpc(h: &hyper::HeaderMap) -> bool {
    h.get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            let v = v.trim().to_ascii_lowercase();
            v == "application/grpc"
                || v.starts_with("application/grpc+")
                || v.starts_with("application/grpc;")
        })
}

/// The status a response carries: in its trailers, or in its headers for a
/// trailers-only answer (an error without a message).
fn status(r: &hyper2::Response) -> Option<u16> {
    let from = |h: &hyper::HeaderMap| {
        h.get("grpc-status")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u16>().ok())
    };
    r.trailers
        .as_ref()
        .and_then(from)
        .or_else(|| from(&r.headers))
}

/// One call on `conn` with `message` (already framed), the workload's headers as its
/// metadata.
async fn call(
    conn: &mut hyper2::Conn,
    t: &Call,
    metadata: &[(HeaderName, HeaderValue)],
    message: Bytes,
    kept: Option<&mut Kept>,
) -> Result<Called, ErrorKind> {
    let mut req = hyper2::request(&Method::POST, t.uri.clone(), metadata, message);
    let h = req.headers_mut();
    h.insert("content-type", HeaderValue::from_static("application/grpc"));
    h.insert("te", HeaderValue::from_static("trailers"));
    let mut messages = Messages {
        keep: kept.is_some().then(Vec::new),
        ..Messages::default()
    };
    let r = conn.send(req, |d| messages.feed(d)).await?;
    if r.status != 200 || !is_grpc(&r.headers) {
        // Not a gRPC answer (a proxy's error page, an HTTP server).
        return Err(ErrorKind::Protocol);
    }
    let status = status(&r).ok_or(ErrorKind::Protocol)?;
    if let (Some(k), Some(all)) = (kept, messages.keep.take()) {
        for (name, value) in r.headers.iter().chain(r.trailers.iter().flatten()) {
            k.take_header(name.as_str(), value.as_bytes());
        }
        k.take_body(&as_json(t, all));
    }
    Ok(Called {
        status,
        messages: messages.count,
        bytes: messages.bytes,
    })
}

/// A reply's messages as a flow reads them: decoded with the `.proto` into JSON — the
/// message, or a stream's as an array — or, without one, their bytes as they came.
fn as_json(t: &Call, messages: Vec<Vec<u8>>) -> Vec<u8> {
    let Some(output) = &t.output else {
        return messages.concat();
    };
    let json = |m: &[u8]| -> serde_json::Value {
        DynamicMessage::decode(output.clone(), m)
            .ok()
            .and_then(|d| serde_json::to_value(&d).ok())
            .unwrap_or(serde_json::Value::Null)
    };
    let value = if t.server_streaming {
        serde_json::Value::Array(messages.iter().map(|m| json(m)).collect())
    } else {
        messages
            .first()
            .map_or(serde_json::Value::Null, |m| json(m))
    };
    serde_json::to_vec(&value).unwrap_or_default()
}

/// gRPC's name of a status code.
pub fn status_name(code: u16) -> &'static str {
    match code {
        0 => "OK",
        1 => "CANCELLED",
        2 => "UNKNOWN",
        3 => "INVALID_ARGUMENT",
        4 => "DEADLINE_EXCEEDED",
        5 => "NOT_FOUND",
        6 => "ALREADY_EXISTS",
        7 => "PERMISSION_DENIED",
        8 => "RESOURCE_EXHAUSTED",
        9 => "FAILED_PRECONDITION",
        10 => "ABORTED",
        11 => "OUT_OF_RANGE",
        12 => "UNIMPLEMENTED",
        13 => "INTERNAL",
        14 => "UNAVAILABLE",
        15 => "DATA_LOSS",
        16 => "UNAUTHENTICATED",
        _ => "UNKNOWN_CODE",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A call's future holds no buffer ([`super::super::unit_size`]). The server here
    /// only answers the HTTP/2 preface: the call is never polled.
    #[test]
    fn a_call_s_future_holds_no_buffer() {
        use super::super::unit_size;
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        unit_size::run(async {
            let port = unit_size::serving(|mut s| async move {
                // An empty SETTINGS frame, then whatever comes is read and dropped.
                s.write_all(&[0, 0, 0, 4, 0, 0, 0, 0, 0]).await.unwrap();
                let mut buf = [0u8; 4096];
                while s.read(&mut buf).await.is_ok_and(|n| n > 0) {}
            })
            .await;
            let url = format!("grpc://127.0.0.1:{port}/demo.Greeter/Hello");
            let size = unit_size::of(&Grpc, &url, b"\x0a\x01d").await;
            assert!(size < unit_size::MOST, "a call's future is {size} bytes");
        });
    }

    #[test]
    fn only_a_grpc_content_type_is_a_grpc_answer() {
        let with = |ct: &str| {
            let mut h = hyper::HeaderMap::new();
            h.insert("content-type", HeaderValue::from_str(ct).unwrap());
            is_grpc(&h)
        };
        for ok in [
            "application/grpc",
            "application/grpc+proto",
            "Application/GRPC; charset=x",
        ] {
            assert!(with(ok), "{ok}");
        }
        for bad in ["text/html", "application/grpc-web", "application/json", ""] {
            assert!(!with(bad), "{bad}");
        }
        assert!(!is_grpc(&hyper::HeaderMap::new()));
    }

    #[test]
    fn messages_are_counted_whatever_the_data_frames_cut() {
        let mut all = Vec::new();
        for m in [&b"abc"[..], b"", b"0123456789"] {
            all.extend_from_slice(&frame(m));
        }
        for cut in 1..all.len() {
            let mut m = Messages::default();
            for chunk in all.chunks(cut) {
                m.feed(chunk);
            }
            assert_eq!(m.count, 3, "cut every {cut} bytes");
            assert_eq!(m.bytes, all.len() as u64);
        }
    }

    #[test]
    fn a_proto_s_method_encodes_json_and_names_what_is_wrong() {
        let dir = std::env::temp_dir().join(format!("strainline-grpc-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let proto = dir.join("demo.proto");
        std::fs::write(
            &proto,
            "syntax = \"proto3\";\npackage demo;\nmessage Req { string name = 1; int32 n = 2; }\n\
             message Resp { string msg = 1; }\n\
             service Greeter { rpc Hello (Req) returns (Resp); rpc Many (Req) returns (stream Resp); }\n",
        )
        .unwrap();
        let (input, _, streaming) = method(&proto, "/demo.Greeter/Hello").unwrap();
        assert!(!streaming);
        assert!(method(&proto, "/demo.Greeter/Many").unwrap().2);
        // {"name": "x", "n": 3} is field 1 (length 1, 'x') and field 2 (varint 3).
        assert_eq!(
            &encode(&input, br#"{"name": "x", "n": 3}"#).unwrap()[..],
            &[10, 1, b'x', 16, 3]
        );
        let e = encode(&input, br#"{"nme": "x"}"#).unwrap_err().to_string();
        assert!(e.contains("unrecognized field name 'nme'"), "{e}");
        let e = method(&proto, "/demo.Greeter/Bye").unwrap_err().to_string();
        assert!(
            e.contains("has no method 'Bye' (it has: Hello, Many)"),
            "{e}"
        );
        let e = method(&proto, "/demo.Nope/Hello").unwrap_err().to_string();
        assert!(e.contains("no service 'demo.Nope'"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
