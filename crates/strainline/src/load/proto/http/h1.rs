//! The HTTP/1.1 fast path of the load engine, in the manner of wrk: the request is
//! written as prepared bytes, and the response is parsed in place with `httparse`,
//! counted and discarded — no header map, no body object, no second task per
//! connection. On loopback this is what lets strainline spend less CPU per request than
//! wrk. It handles keep-alive, `Content-Length`, chunked bodies, bodies delimited by
//! the connection's close, `1xx` interim responses and `Connection: close`. Nothing a
//! server sends grows a buffer without bound: a head, a chunk-size line (with its
//! extensions) and the trailers are [`MAX_HEAD`] at most, and a `Content-Length` that is
//! not one decimal number (absurd, negative, or two that differ: RFC 9112 §6.3) is a
//! `protocol` error, as is anything longer. A connection's exchanges run in one future
//! made when it opens ([`Driven`]), so a request allocates nothing.

use std::cell::Cell;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use bytes::Bytes;

use crate::load::flow::Kept;
use crate::load::net::Stream;
use crate::load::recorder::{ErrorKind, LATE_TAIL};

/// One HTTP/1.1 connection with its read buffer.
pub struct H1 {
    stream: Stream,
    buf: Vec<u8>,
    /// Unread bytes are `buf[start..end]`.
    start: usize,
    end: usize,
    /// False once the server said it will close, or the body ran to the close.
    pub reusable: bool,
}

const READ_CHUNK: usize = 16 * 1024;

/// The most a response head, a chunk-size line or a trailer section may take, bytes.
pub const MAX_HEAD: usize = 64 * 1024;

/// A `Content-Length` field's value as RFC 9112 §6.3 allows it: a decimal number, or a
/// list of the same number repeated (as some proxies send); None for anything else.
fn content_length(v: &[u8]) -> Option<u64> {
    let mut n = None;
    for part in v.split(|b| *b == b',') {
        let part = part.trim_ascii();
        if part.is_empty() || part.len() > 19 || !part.iter().all(u8::is_ascii_digit) {
            return None;
        }
        let this: u64 = std::str::from_utf8(part).ok()?.parse().ok()?;
        if n.is_some_and(|m| m != this) {
            return None;
        }
        n = Some(this);
    }
    n
}

fn io_kind(e: &io::Error) -> ErrorKind {
    match e.kind() {
        io::ErrorKind::TimedOut => ErrorKind::Timeout,
        io::ErrorKind::InvalidData => ErrorKind::Protocol,
        _ => ErrorKind::Reset,
    }
}

impl H1 {
    pub fn new(stream: Stream) -> H1 {
        H1 {
            stream,
            buf: vec![0; READ_CHUNK],
            start: 0,
            end: 0,
            reusable: true,
        }
    }

    /// Reads more bytes; `Ok(0)` means the server closed the connection.
    async fn fill(&mut self) -> Result<usize, ErrorKind> {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        } else if self.end == self.buf.len() {
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            } else {
                self.buf.resize(self.buf.len() * 2, 0);
            }
        }
        let n = self
            .stream
            .read(&mut self.buf[self.end..])
            .await
            .map_err(|e| io_kind(&e))?;
        self.end += n;
        Ok(n)
    }

    /// Consumes `n` body bytes (buffered or still to come), into `keep` if asked.
    async fn skip(&mut self, mut n: u64, mut keep: Option<&mut Kept>) -> Result<(), ErrorKind> {
        loop {
            let have = (self.end - self.start) as u64;
            if have >= n {
                if let Some(k) = keep {
                    k.take_body(&self.buf[self.start..self.start + n as usize]);
                }
                self.start += n as usize;
                return Ok(());
            }
            n -= have;
            if let Some(k) = keep.as_deref_mut() {
                k.take_body(&self.buf[self.start..self.end]);
            }
            self.start = self.end;
            if self.fill().await? == 0 {
                return Err(ErrorKind::Reset);
            }
        }
    }

    /// Sends one prepared request and reads its whole response; returns the status, the
    /// number of body bytes, and whether the body came [`LATE_TAIL`] or more after the
    /// head (a response in two segments, the second held back: Nagle's algorithm
    /// meeting a delayed ACK). `head_request` says the response has no body. `keep`,
    /// when a scenario step extracts or checks, gets the response's header fields and
    /// the first [`crate::load::flow::MAX_KEPT`] bytes of its body.
    pub async fn exchange(
        &mut self,
        request: &[u8],
        head_request: bool,
        mut keep: Option<&mut Kept>,
    ) -> Result<(u16, u64, bool), ErrorKind> {
        self.stream
            .write_all(request)
            .await
            .map_err(|e| io_kind(&e))?;
        loop {
            // Parse the header block, reading until it is complete.
            let (status, header_len, length, chunked, close) = loop {
                match head(&self.buf[self.start..self.end], keep.as_deref_mut())? {
                    Some(head) => break head,
                    None => {
                        if self.end - self.start > MAX_HEAD {
                            return Err(ErrorKind::Protocol);
                        }
                        if self.fill().await? == 0 {
                            return Err(ErrorKind::Reset);
                        }
                    }
                }
            };
            self.start += header_len;
            if (100..200).contains(&status) {
                continue; // an interim response; the real one follows
            }
            if close {
                self.reusable = false;
            }
            let bodiless = head_request || status == 204 || status == 304;
            // The clock is read only when the body is not all here with the head.
            let buffered = (self.end - self.start) as u64;
            let head_at = match length {
                _ if bodiless => None,
                Some(n) if !chunked && n <= buffered => None,
                _ => Some(std::time::Instant::now()),
            };
            let bytes = if bodiless || status == 204 || status == 304 {
                0
            } else if chunked {
                self.chunked_body(keep).await?
            } else if let Some(n) = length {
                self.skip(n, keep).await?;
                n
            } else {
                // Delimited by the close of the connection.
                self.reusable = false;
                let mut n = 0u64;
                loop {
                    n += (self.end - self.start) as u64;
                    if let Some(k) = keep.as_deref_mut() {
                        k.take_body(&self.buf[self.start..self.end]);
                    }
                    self.start = self.end;
                    if self.fill().await? == 0 {
                        break;
                    }
                }
                n
            };
            let late = head_at.is_some_and(|t| t.elapsed() >= LATE_TAIL);
            return Ok((status, bytes, late));
        }
    }

    async fn chunked_body(&mut self, mut keep: Option<&mut Kept>) -> Result<u64, ErrorKind> {
        let mut total = 0u64;
        loop {
            let (consumed, size) = loop {
                match httparse::parse_chunk_size(&self.buf[self.start..self.end]) {
                    Ok(httparse::Status::Complete(c)) => break c,
                    Ok(httparse::Status::Partial) => {
                        if self.end - self.start > MAX_HEAD {
                            return Err(ErrorKind::Protocol);
                        }
                        if self.fill().await? == 0 {
                            return Err(ErrorKind::Reset);
                        }
                    }
                    Err(_) => return Err(ErrorKind::Protocol),
                }
            };
            self.start += consumed;
            if size == 0 {
                // Trailers, if any, end with an empty line.
                let mut trailers = 0;
                loop {
                    let window = &self.buf[self.start..self.end];
                    if let Some(pos) = window.windows(2).position(|w| w == b"\r\n") {
                        self.start += pos + 2;
                        trailers += pos + 2;
                        if pos == 0 {
                            return Ok(total);
                        }
                    } else if trailers + window.len() > MAX_HEAD {
                        return Err(ErrorKind::Protocol);
                    } else if self.fill().await? == 0 {
                        return Err(ErrorKind::Reset);
                    }
                }
            }
            self.skip(size, keep.as_deref_mut()).await?;
            self.skip(2, None).await?; // its CRLF
            total += size;
        }
    }
}

/// One exchange handed to a [`Driven`] connection: the request's bytes (the workload's
/// prepared ones are shared, not copied), whether it is a `HEAD`, and what to keep of the
/// response (a scenario step's).
pub struct Job {
    pub request: Bytes,
    pub head_request: bool,
    pub keep: Option<Box<Kept>>,
}

/// An exchange's outcome ([`H1::exchange`]'s): status, body bytes, late tail.
pub type Exchanged = Result<(u16, u64, bool), ErrorKind>;

/// An exchange's outcome and its job's `keep`, given back.
pub type Done = (Exchanged, Option<Box<Kept>>);

/// What a [`Driven`] connection's future and its units pass each other.
#[derive(Default)]
struct Mail {
    job: Cell<Option<Job>>,
    done: Cell<Option<Done>>,
    /// A job was handed over and its outcome not yet taken.
    busy: Cell<bool>,
    /// [`H1::reusable`], as of the last exchange.
    closing: Cell<bool>,
}

/// An HTTP/1.1 connection whose exchanges run in one future, allocated once when the
/// connection opens and polled by each unit of work in turn: a unit allocates nothing
/// (a future per request, boxed through the registry's seam, was a malloc and a free
/// each: docs/performance.md). A unit dropped before its outcome leaves the connection
/// closed ([`Driven::reusable`] false): its response is not read.
pub struct Driven {
    run: Pin<Box<dyn Future<Output = ()>>>,
    mail: Rc<Mail>,
}

impl Driven {
    pub fn new(stream: Stream) -> Driven {
        let mail = Rc::new(Mail::default());
        let m = mail.clone();
        let run = Box::pin(async move {
            let mut h = H1::new(stream);
            loop {
                let mut job = std::future::poll_fn(|_| match m.job.take() {
                    Some(j) => Poll::Ready(j),
                    // Polled again by the next unit, which brings its job.
                    None => Poll::Pending,
                })
                .await;
                let r = h
                    .exchange(&job.request, job.head_request, job.keep.as_deref_mut())
                    .await;
                m.closing.set(!h.reusable);
                m.done.set(Some((r, job.keep)));
            }
        });
        Driven { run, mail }
    }

    /// It can carry another exchange: the server did not say it closes, the body did
    /// not run to the close, and no exchange was left unfinished.
    pub fn reusable(&self) -> bool {
        !self.mail.closing.get() && !self.mail.busy.get()
    }

    /// Polls the exchange of `job`, which the first poll gives and later polls do not.
    /// A job given while another is unfinished is refused (`reset`).
    pub fn poll_exchange(&mut self, cx: &mut Context<'_>, job: Option<Job>) -> Poll<Done> {
        if let Some(j) = job {
            if self.mail.busy.replace(true) {
                return Poll::Ready((Err(ErrorKind::Reset), j.keep));
            }
            self.mail.job.set(Some(j));
        }
        if self.run.as_mut().poll(cx).is_ready() {
            unreachable!("a connection's exchanges loop for its whole life");
        }
        match self.mail.done.take() {
            Some(d) => {
                self.mail.busy.set(false);
                Poll::Ready(d)
            }
            None => Poll::Pending,
        }
    }

    /// [`Driven::poll_exchange`] as a future.
    pub async fn exchange(&mut self, job: Job) -> Done {
        let mut job = Some(job);
        std::future::poll_fn(|cx| self.poll_exchange(cx, job.take())).await
    }
}

/// A response's head: its status, its length in bytes, its `Content-Length`, whether it
/// is chunked and whether the server closes.
type Head = (u16, usize, Option<u64>, bool, bool);

/// A response's head parsed from `buf`, if it is all there.
/// Not async: its 64 header slots live on the stack for the parse alone, not in every
/// exchange's future (which is boxed per request: 2.4 KiB with them).
fn head(buf: &[u8], keep: Option<&mut Kept>) -> Result<Option<Head>, ErrorKind> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut resp = httparse::Response::new(&mut headers);
    let len = match resp.parse(buf) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(_) => return Err(ErrorKind::Protocol),
    };
    let mut length = None;
    let mut chunked = false;
    let mut close = resp.version == Some(0);
    if let Some(k) = keep {
        k.headers.clear();
        for h in resp.headers.iter() {
            k.take_header(h.name, h.value);
        }
    }
    for h in resp.headers.iter() {
        if h.name.eq_ignore_ascii_case("content-length") {
            match content_length(h.value) {
                Some(n) if length.is_none_or(|m| m == n) => length = Some(n),
                _ => return Err(ErrorKind::Protocol),
            }
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = h
                .value
                .windows(7)
                .any(|w| w.eq_ignore_ascii_case(b"chunked"));
        } else if h.name.eq_ignore_ascii_case("connection") {
            close = h.value.windows(5).any(|w| w.eq_ignore_ascii_case(b"close"));
        }
    }
    Ok(Some((resp.code.unwrap_or(0), len, length, chunked, close)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Serves `responses` (raw bytes, one per request read) on a loopback socket and
    /// returns what an H1 client made of them.
    async fn against(responses: Vec<&'static [u8]>) -> Vec<Result<(u16, u64), ErrorKind>> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let n = responses.len();
        let server = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 1024];
            for r in responses {
                let _ = s.read(&mut buf).await.unwrap();
                // Dribble the response in small pieces to exercise partial parsing.
                for piece in r.chunks(7) {
                    s.write_all(piece).await.unwrap();
                    s.flush().await.unwrap();
                }
            }
        });
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let mut h = H1::new(Stream::Tcp(tcp));
        let mut out = Vec::new();
        for _ in 0..n {
            out.push(
                h.exchange(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", false, None)
                    .await
                    .map(|(status, bytes, _)| (status, bytes)),
            );
        }
        server.await.unwrap();
        out
    }

    #[tokio::test]
    async fn parses_lengths_chunks_and_interim_responses() {
        let got = against(vec![
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nWiki\r\n5\r\npedia\r\n0\r\n\r\n",
            b"HTTP/1.1 204 No Content\r\n\r\n",
            b"HTTP/1.1 503 Busy\r\nContent-Length: 4\r\nConnection: close\r\n\r\nbusy",
        ])
        .await;
        assert_eq!(
            got,
            vec![
                Ok((200, 5)),
                Ok((201, 0)),
                Ok((200, 9)),
                Ok((204, 0)),
                Ok((503, 4))
            ]
        );
    }

    /// Known truth: a body written 45 ms after its head is a late tail; one written
    /// with its head, or 5 ms after it, is not.
    #[tokio::test]
    async fn a_body_held_back_after_its_head_is_a_late_tail() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let gaps = [None, Some(5), Some(45), Some(45)];
        let server = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            s.set_nodelay(true).unwrap();
            let mut buf = [0u8; 1024];
            for gap in gaps {
                let _ = s.read(&mut buf).await.unwrap();
                let head: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n";
                match gap {
                    None => s.write_all(&[head, b"ok\n"].concat()).await.unwrap(),
                    Some(ms) => {
                        s.write_all(head).await.unwrap();
                        tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
                        s.write_all(b"ok\n").await.unwrap();
                    }
                }
            }
        });
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let mut h = H1::new(Stream::Tcp(tcp));
        let mut late = Vec::new();
        for _ in gaps {
            let (status, bytes, l) = h
                .exchange(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", false, None)
                .await
                .unwrap();
            assert_eq!((status, bytes), (200, 3));
            late.push(l);
        }
        server.await.unwrap();
        assert_eq!(late, [false, false, true, true]);
    }

    /// RFC 9112 §6.3 and bounded lines: each response is a `protocol` error at once,
    /// never a wait for the cut nor a buffer grown without end.
    #[tokio::test]
    async fn absurd_lengths_and_endless_lines_are_protocol_errors() {
        let endless_ext = [
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1;".as_slice(),
            &[b'e'; 200_000],
        ]
        .concat();
        let endless_trailer = [
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX: ".as_slice(),
            &[b'e'; 200_000],
        ]
        .concat();
        let endless_head = [b"HTTP/1.1 200 OK\r\nX: ".as_slice(), &[b'e'; 200_000]].concat();
        for response in [
            b"HTTP/1.1 200 OK\r\nContent-Length: 100000000000000000000000\r\n\r\n".to_vec(),
            b"HTTP/1.1 200 OK\r\nContent-Length: -5\r\n\r\n".to_vec(),
            b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd".to_vec(),
            b"HTTP/1.1 200 OK\r\nContent-Length: 3, 4\r\n\r\nabcd".to_vec(),
            endless_ext,
            endless_trailer,
            endless_head,
        ] {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let shown = String::from_utf8_lossy(&response[..response.len().min(80)]).to_string();
            let server = tokio::spawn(async move {
                let (mut s, _) = listener.accept().await.unwrap();
                let mut buf = [0u8; 1024];
                let _ = s.read(&mut buf).await;
                let _ = s.write_all(&response).await;
                // Held open: an error must not wait for the close.
                tokio::time::sleep(std::time::Duration::from_secs(5)).await;
            });
            let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
            let mut h = H1::new(Stream::Tcp(tcp));
            let got = tokio::time::timeout(
                std::time::Duration::from_secs(2),
                h.exchange(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", false, None),
            )
            .await
            .unwrap_or_else(|_| panic!("held: {shown}"));
            assert_eq!(got.map(|r| r.0), Err(ErrorKind::Protocol), "{shown}");
            assert!(h.buf.len() <= 2 * MAX_HEAD + READ_CHUNK, "{shown}");
            server.abort();
        }
        // The same length repeated is one length.
        assert_eq!(content_length(b"5, 5"), Some(5));
        assert_eq!(content_length(b"5"), Some(5));
        assert_eq!(content_length(b""), None);
        assert_eq!(content_length(b"+5"), None);
    }

    #[tokio::test]
    async fn garbage_is_a_protocol_error() {
        let got = against(vec![b"SSH-2.0-OpenSSH\r\n\r\n"]).await;
        assert_eq!(got, vec![Err(ErrorKind::Protocol)]);
    }
}
