//! gRPC as a load protocol, over the HTTP/2 client the load engine already has: a unit
//! of work is one call — a POST to `/package.Service/Method` with `content-type:
//! application/grpc`, the message length-prefixed, the workload's headers as metadata —
//! and it ends when the response's trailers bring its `grpc-status` (the status of the
//! unit: 0 OK, 14 UNAVAILABLE, …). A server-streaming call's messages are counted as
//! they arrive. With a `.proto` (compiled in-process by protox), the message is written
//! as JSON (the workload's body or a scenario step's) and encoded with prost-reflect;
//! without one, the body is sent as the message's bytes as they are. A scenario step
//! that extracts or checks reads the reply's metadata (headers and trailers) and its
//! message as JSON (a stream's as a JSON array), decoded with the `.proto`.

use crate::error::Category;
use bytes::{BufMut, Bytes, BytesMut};
use hyper::header::{HeaderName, HeaderValue};
use hyper::Method;
use prost::Message;
use prost_reflect::{DescriptorPool, DynamicMessage, MessageDescriptor};

use super::flow::Kept;
use super::http::{self, H2Response};
use super::recorder::ErrorKind;

/// Where calls go and what they are, checked before the run.
#[derive(Clone)]
pub struct Target {
    /// The server, always over HTTP/2.
    pub http: http::Target,
    /// `/package.Service/Method`, and the whole URI made once.
    pub path: String,
    pub uri: hyper::Uri,
    /// The method's request message, when a `.proto` described it: a JSON body is
    /// encoded with it.
    pub input: Option<MessageDescriptor>,
    /// The method's reply message, when a `.proto` described it: a flow reads it as
    /// JSON.
    pub output: Option<MessageDescriptor>,
    pub server_streaming: bool,
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
    let files = protox::compile([name], [dir]).map_err(|e| crate::Error::usage(e.to_string()))?;
    let pool = DescriptorPool::from_file_descriptor_set(files)
        .map_err(|e| crate::Error::usage(e.to_string()))?;
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
    let msg = DynamicMessage::deserialize(input.clone(), &mut de).map_err(|e| {
        crate::Error::usage(format!("the message is not a {}: {e}", input.full_name()))
    })?;
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
fn status(r: &H2Response) -> Option<u16> {
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
pub async fn call(
    conn: &mut http::Conn,
    t: &Target,
    metadata: &[(HeaderName, HeaderValue)],
    message: Bytes,
    kept: Option<&mut Kept>,
) -> Result<Called, ErrorKind> {
    let mut req = http::hyper_request(&Method::POST, t.uri.clone(), metadata, message);
    let h = req.headers_mut();
    h.insert("content-type", HeaderValue::from_static("application/grpc"));
    h.insert("te", HeaderValue::from_static("trailers"));
    let mut messages = Messages {
        keep: kept.is_some().then(Vec::new),
        ..Messages::default()
    };
    let r = http::send_h2(conn, req, |d| messages.feed(d)).await?;
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
fn as_json(t: &Target, messages: Vec<Vec<u8>>) -> Vec<u8> {
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
