//! HTTP's client: connections to a target resolved once ([`crate::load::net`]) speaking
//! HTTP/1.1 keep-alive or HTTP/2 through strainline's lean clients ([`super::h1`],
//! [`super::h2`]), or HTTP/2 through hyper's ([`super::super::hyper2`]) where a scenario
//! reads whole heads. The workload's requests are prepared once as bytes; random
//! payloads come from a pool made once, so the generator spends its CPU on sending.
//! The workload's HTTP/1.1 request is also polled in place ([`poll_workload`]): no
//! allocation per request.

use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::header::{HeaderName, HeaderValue, CONTENT_LENGTH};
use hyper::Method;

use super::super::hyper2;
use super::h1::{Exchanged, Job};
use crate::load::flow::Kept;
use crate::load::net::{open_stream, Target};
use crate::load::recorder::ErrorKind;
use crate::load::request::{sends_length, Body, Outgoing, Template};

/// `template`'s requests as prepared before the run: HTTP/1.1's bytes on the wire, or
/// HTTP/2's header blocks (the body is sent from the template); one per distinct
/// body (a random body pool gives several).
pub fn prepare(template: &Template, target: &Target) -> Vec<Bytes> {
    let bodies: Vec<Bytes> = match &template.body {
        Body::Empty => vec![Bytes::new()],
        Body::Fixed(b) => vec![b.clone()],
        Body::Random(pool) => pool.as_ref().clone(),
    };
    let path = template.path.to_string();
    bodies
        .into_iter()
        .map(|body| {
            if target.http2 {
                return Bytes::from(h2_block(
                    &template.method,
                    &path,
                    target,
                    &template.headers,
                    &body,
                ));
            }
            let mut w = Vec::with_capacity(256 + body.len());
            write_h1(
                &template.method,
                &path,
                target,
                &template.headers,
                &body,
                &mut w,
            );
            Bytes::from(w)
        })
        .collect()
}

/// Writes an HTTP/1.1 request.
fn write_h1(
    method: &Method,
    path: &str,
    target: &Target,
    headers: &[(HeaderName, HeaderValue)],
    body: &[u8],
    w: &mut Vec<u8>,
) {
    w.extend_from_slice(method.as_str().as_bytes());
    w.push(b' ');
    w.extend_from_slice(path.as_bytes());
    w.extend_from_slice(b" HTTP/1.1\r\n");
    // A step's own Host (a virtual host) replaces the target's: never two.
    if !headers.iter().any(|(k, _)| *k == hyper::header::HOST) {
        w.extend_from_slice(b"Host: ");
        w.extend_from_slice(target.host_header.as_bytes());
        w.extend_from_slice(b"\r\n");
    }
    let length = sends_length(method, body);
    for (k, v) in headers {
        if length && *k == CONTENT_LENGTH {
            continue;
        }
        w.extend_from_slice(k.as_str().as_bytes());
        w.extend_from_slice(b": ");
        w.extend_from_slice(v.as_bytes());
        w.extend_from_slice(b"\r\n");
    }
    if length {
        w.extend_from_slice(format!("Content-Length: {}\r\n", body.len()).as_bytes());
    }
    w.extend_from_slice(b"\r\n");
    w.extend_from_slice(body);
}

/// An HTTP/2 request's header block (see [`super::h2::encode`]).
fn h2_block(
    method: &Method,
    path: &str,
    target: &Target,
    headers: &[(HeaderName, HeaderValue)],
    body: &[u8],
) -> Vec<u8> {
    let length = sends_length(method, body).then_some(body.len());
    let https = target.tls.is_some();
    // A step's own Host (a virtual host) is the request's :authority, not a second one.
    let host = headers.iter().position(|(k, _)| *k == hyper::header::HOST);
    let Some(at) = host else {
        let authority = target.host_header.as_bytes();
        return super::h2::encode(method.as_str(), https, authority, path, headers, length);
    };
    let mut rest = headers.to_vec();
    let (_, authority) = rest.remove(at);
    rest.retain(|(k, _)| *k != hyper::header::HOST);
    super::h2::encode(
        method.as_str(),
        https,
        authority.as_bytes(),
        path,
        &rest,
        length,
    )
}

/// One open connection, and its socket's descriptor so that the driver's watchdog can
/// cut a request that overran its timeout (`shutdown(2)`), whatever protocol runs on it.
pub struct Conn {
    kind: Kind,
    pub fd: std::os::fd::RawFd,
}

enum Kind {
    /// HTTP/1.1: strainline's own lean client, its exchanges in one future.
    H1(super::h1::Driven),
    /// HTTP/2: strainline's own lean client, a handle per stream loop.
    H2(super::h2::H2),
    /// HTTP/2 through hyper, for a scenario (whole heads).
    Hyper(hyper2::Conn),
}

impl Conn {
    /// Another handle on this HTTP/2 connection (hyper multiplexes their requests as
    /// streams); `None` for HTTP/1.1.
    pub fn share(&self) -> Option<Conn> {
        match &self.kind {
            Kind::H2(s) => Some(Conn {
                kind: Kind::H2(s.clone()),
                fd: self.fd,
            }),
            Kind::Hyper(s) => Some(Conn {
                kind: Kind::Hyper(s.share()),
                fd: self.fd,
            }),
            Kind::H1(_) => None,
        }
    }

    pub fn is_closed(&self) -> bool {
        match &self.kind {
            Kind::H1(h) => !h.reusable(),
            Kind::H2(s) => s.is_closed(),
            Kind::Hyper(s) => s.is_closed(),
        }
    }
}

/// Opens a connection (TCP, then TLS if asked, then the HTTP/2 handshake if asked).
pub async fn connect(t: &Target) -> Result<Conn, ErrorKind> {
    if t.http2 && t.whole_heads {
        let conn = hyper2::Conn::connect(t).await?;
        let fd = conn.fd;
        return Ok(Conn {
            kind: Kind::Hyper(conn),
            fd,
        });
    }
    let (stream, fd) = open_stream(t.addr, &t.tls).await?;
    let kind = if t.http2 {
        Kind::H2(super::h2::H2::handshake(stream).await?)
    } else {
        Kind::H1(super::h1::Driven::new(stream))
    };
    Ok(Conn { kind, fd })
}

/// Sends a request and reads the whole response. Returns its status, its body size and
/// whether its body came late after its head (HTTP/1.1:
/// [`crate::load::recorder::LATE_TAIL`]).
/// `keep` gets its head and body (HTTP/1.1; a flow over HTTP/2 is refused by its plan),
/// and is given back.
/// `workload`: the workload's request and its prepared forms ([`prepare`]).
pub async fn send(
    conn: &mut Conn,
    target: &Target,
    (t, prepared): (&Template, &[Bytes]),
    out: Outgoing<'_>,
    kept: &mut Option<Box<Kept>>,
) -> Result<(u16, u64, bool), ErrorKind> {
    match &mut conn.kind {
        Kind::H1(h) => {
            let job = match out {
                Outgoing::Workload(seq) => workload_job(t, prepared, seq),
                Outgoing::Rendered(r) => {
                    let mut w = Vec::with_capacity(256 + r.body.len());
                    write_h1(&r.method, &r.path, target, &r.headers, &r.body, &mut w);
                    Job {
                        request: Bytes::from(w),
                        head_request: r.method == Method::HEAD,
                        keep: kept.take(),
                    }
                }
            };
            let (r, back) = h.exchange(job).await;
            *kept = back;
            r
        }
        Kind::H2(h) => {
            let (status, bytes) = match out {
                Outgoing::Workload(seq) => {
                    let block = &prepared[(seq % prepared.len() as u64) as usize];
                    h.exchange(block, t.body.pick(seq)).await?
                }
                Outgoing::Rendered(r) => {
                    let block = h2_block(&r.method, &r.path, target, &r.headers, &r.body);
                    h.exchange(&block, r.body.clone()).await?
                }
            };
            Ok((status, bytes, false))
        }
        Kind::Hyper(c) => {
            let req = match out {
                Outgoing::Workload(seq) => hyper2::request(
                    &t.method,
                    hyper2::absolute(target, t.path.path_and_query().map_or("/", |p| p.as_str())),
                    &t.headers,
                    t.body.pick(seq),
                ),
                Outgoing::Rendered(r) => hyper2::request(
                    &r.method,
                    hyper2::absolute(target, &r.path),
                    &r.headers,
                    r.body.clone(),
                ),
            };
            let mut bytes = 0u64;
            let mut keep = kept.as_deref_mut();
            // Boxed apart: hyper's futures are large, and this branch (a scenario's) would
            // size every request's future, HTTP/1.1's fast path's too.
            let r = Box::pin(c.send(req, |d| {
                bytes += d.len() as u64;
                if let Some(k) = keep.as_deref_mut() {
                    k.take_body(d);
                }
            }))
            .await?;
            if let Some(k) = keep {
                for (name, value) in &r.headers {
                    k.take_header(name.as_str(), value.as_bytes());
                }
            }
            Ok((r.status, bytes, false))
        }
    }
}

/// The workload's `seq`th request on an HTTP/1.1 connection: its prepared bytes, shared.
fn workload_job(t: &Template, prepared: &[Bytes], seq: u64) -> Job {
    Job {
        request: prepared[(seq % prepared.len() as u64) as usize].clone(),
        head_request: t.method == Method::HEAD,
        keep: None,
    }
}

/// The workload's `seq`th request and its whole response, polled in place on an
/// HTTP/1.1 connection (the request given on the `first` poll): nothing is allocated.
/// `None` on an HTTP/2 connection, whose requests go through [`send`].
pub fn poll_workload(
    conn: &mut Conn,
    cx: &mut Context<'_>,
    first: bool,
    (t, prepared): (&Template, &[Bytes]),
    seq: u64,
) -> Option<Poll<Exchanged>> {
    let Kind::H1(h) = &mut conn.kind else {
        return None;
    };
    let job = first.then(|| workload_job(t, prepared, seq));
    Some(h.poll_exchange(cx, job).map(|(r, _)| r))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_s_own_host_replaces_the_target_s() {
        let target = Target {
            addr: "127.0.0.1:80".parse().unwrap(),
            host_header: HeaderValue::from_static("127.0.0.1:80"),
            tls: None,
            http2: false,
            whole_heads: false,
        };
        let vhost = [(hyper::header::HOST, HeaderValue::from_static("vhost.test"))];
        for (headers, want) in [(&vhost[..], "vhost.test"), (&[][..], "127.0.0.1:80")] {
            let mut w = Vec::new();
            write_h1(&Method::GET, "/", &target, headers, b"", &mut w);
            let text = String::from_utf8(w).unwrap();
            let hosts: Vec<&str> = text
                .lines()
                .filter(|l| l.to_ascii_lowercase().starts_with("host:"))
                .collect();
            assert_eq!(hosts.len(), 1, "{text}");
            assert!(hosts[0].ends_with(want), "{text}");
        }
    }
}
