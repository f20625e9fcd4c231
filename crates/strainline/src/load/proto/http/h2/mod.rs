//! The HTTP/2 fast path of the load engine, as [`super::h1`] is for HTTP/1.1: a request
//! is a header block encoded once per template ([`hpack`], without the dynamic table:
//! static indexes and plain literals) sent in one HEADERS frame ([`frame`]), and a
//! response is read as frames in place — its `:status` found, its DATA counted and
//! discarded, no header map, no body object, no connection task. The streams sharing a connection take turns
//! driving its socket: whichever is waiting and finds no one driving reads and writes
//! for all of them, and hands the turn on when its own response is complete. What several
//! streams write meanwhile leaves in one `write(2)`.
//!
//! The client tells the server it keeps no HPACK dynamic table (`SETTINGS_HEADER_TABLE_SIZE`
//! 0), so a response's `:status` is always in the static table or a literal: nothing
//! but `:status` is ever decoded. Windows are opened to 2³⁰−1 as h2load's are; pushes are
//! refused. gRPC keeps hyper's client (it reads trailers and messages).

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::future::poll_fn;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

mod frame;
mod hpack;

use crate::load::net::{io_kind, Stream};
use crate::load::recorder::ErrorKind;
use frame::*;
pub use hpack::encode;
use hpack::status_of;

/// One HTTP/2 connection; clones are handles on the same connection (one per stream
/// loop of the closed model).
#[derive(Clone)]
pub struct H2 {
    conn: Rc<RefCell<Connection>>,
}

struct Connection {
    stream: Stream,
    rbuf: Vec<u8>,
    /// Unread bytes are `rbuf[start..end]`.
    start: usize,
    end: usize,
    /// Frames waiting to be written.
    wbuf: Vec<u8>,
    next_id: u32,
    streams: HashMap<u32, Slot>,
    /// The stream whose task drives the socket.
    driver: Option<u32>,
    /// Tasks waiting for the server's stream limit to let them start.
    admit: VecDeque<Waker>,
    /// Set once the connection failed or the server said GOAWAY: no new streams.
    closed: Option<ErrorKind>,
    /// A header block still arriving in CONTINUATION frames: its stream, its flags,
    /// the block so far.
    partial: Option<(u32, u8, Vec<u8>)>,
    peer_max_streams: usize,
    peer_max_frame: usize,
    peer_window: i64,
    send_window: i64,
    /// Bytes received on the connection not yet returned with a WINDOW_UPDATE.
    unacked: u32,
    /// PING and SETTINGS acknowledgements in `wbuf` since it was last written whole.
    acks_queued: usize,
}

#[derive(Default)]
struct Slot {
    waker: Option<Waker>,
    status: Option<u16>,
    bytes: u64,
    done: Option<Result<(), ErrorKind>>,
    send_window: i64,
    /// Body bytes waiting for flow-control window.
    pending: Option<Bytes>,
    unacked: u32,
}

impl H2 {
    /// Starts HTTP/2 on `stream` (prior knowledge, or ALPN's `h2` over TLS): the
    /// preface, our settings and windows, then waits for the server's settings, so
    /// that a server that does not speak HTTP/2 is a protocol error here.
    pub async fn handshake(stream: Stream) -> Result<H2, ErrorKind> {
        let mut w = Vec::with_capacity(128);
        w.extend_from_slice(PREFACE);
        // HEADER_TABLE_SIZE 0, ENABLE_PUSH 0, INITIAL_WINDOW_SIZE 2^30-1.
        let settings: [(u16, u32); 3] = [(1, 0), (2, 0), (4, WINDOW)];
        frame_head(&mut w, 6 * settings.len(), SETTINGS, 0, 0);
        for (k, v) in settings {
            w.extend_from_slice(&k.to_be_bytes());
            w.extend_from_slice(&v.to_be_bytes());
        }
        window_update(&mut w, 0, WINDOW - 65_535);
        let h2 = H2 {
            conn: Rc::new(RefCell::new(Connection::new(stream, w))),
        };
        poll_fn(|cx| h2.conn.borrow_mut().poll_settings(cx)).await?;
        Ok(h2)
    }

    /// Whether the connection can take no more streams (failed, or the server is
    /// going away).
    pub fn is_closed(&self) -> bool {
        self.conn.borrow().closed.is_some()
    }

    /// Sends one request — its header block (see [`encode`]) and body — on a stream of
    /// its own and reads the whole response: its status and body size.
    pub async fn exchange(&self, block: &[u8], body: Bytes) -> Result<(u16, u64), ErrorKind> {
        poll_fn(|cx| self.conn.borrow_mut().poll_admit(cx)).await?;
        let id = self.conn.borrow_mut().open(block, body);
        let turn = Turn { h2: self, id };
        let result = poll_fn(|cx| self.conn.borrow_mut().poll_stream(cx, id)).await;
        drop(turn);
        result
    }
}

/// A stream's hold on its connection: when its future is dropped mid-response (the
/// run's end, a timeout), the stream is forgotten and the driving turn handed on.
struct Turn<'a> {
    h2: &'a H2,
    id: u32,
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        let mut c = self.h2.conn.borrow_mut();
        c.streams.remove(&self.id);
        if c.driver == Some(self.id) {
            c.driver = None;
            c.hand_on();
        }
        c.admit_all();
    }
}

impl Connection {
    /// A connection on `stream` with `wbuf` waiting to be written.
    fn new(stream: Stream, wbuf: Vec<u8>) -> Connection {
        Connection {
            stream,
            rbuf: vec![0; 4 * MAX_FRAME],
            start: 0,
            end: 0,
            wbuf,
            next_id: 1,
            streams: HashMap::new(),
            driver: None,
            admit: VecDeque::new(),
            closed: None,
            partial: None,
            peer_max_streams: usize::MAX,
            peer_max_frame: MAX_FRAME,
            peer_window: 65_535,
            send_window: 65_535,
            unacked: 0,
            acks_queued: 0,
        }
    }

    /// Waits until the server's stream limit lets one more stream start.
    fn poll_admit(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), ErrorKind>> {
        if let Some(kind) = self.closed {
            return Poll::Ready(Err(kind));
        }
        if self.streams.len() < self.peer_max_streams {
            return Poll::Ready(Ok(()));
        }
        self.admit.push_back(cx.waker().clone());
        Poll::Pending
    }

    /// A stream ended: every task waiting to start one looks again (a waiting task that
    /// was dropped must not swallow the turn of one that was not).
    fn admit_all(&mut self) {
        for w in self.admit.drain(..) {
            w.wake();
        }
    }

    /// Opens a stream: the HEADERS frame (with CONTINUATIONs if the block is larger
    /// than a frame) and as much of the body as the windows allow, queued to be written.
    fn open(&mut self, block: &[u8], body: Bytes) -> u32 {
        let id = self.next_id;
        self.next_id += 2;
        let mut slot = Slot {
            send_window: self.peer_window,
            ..Slot::default()
        };
        let mut chunks = block.chunks(self.peer_max_frame).peekable();
        let mut kind = HEADERS;
        let mut flags = if body.is_empty() { END_STREAM } else { 0 };
        while let Some(chunk) = chunks.next() {
            if chunks.peek().is_none() {
                flags |= END_HEADERS;
            }
            frame_head(&mut self.wbuf, chunk.len(), kind, flags, id);
            self.wbuf.extend_from_slice(chunk);
            kind = CONTINUATION;
            flags = 0;
        }
        if !body.is_empty() {
            slot.pending = Some(body);
            self.send_body(id, &mut slot);
        }
        self.streams.insert(id, slot);
        id
    }

    /// Queues as much of a stream's waiting body as the windows allow.
    fn send_body(&mut self, id: u32, slot: &mut Slot) {
        let Some(mut body) = slot.pending.take() else {
            return;
        };
        while !body.is_empty() {
            let room = self
                .send_window
                .min(slot.send_window)
                .min(self.peer_max_frame as i64);
            if room <= 0 {
                slot.pending = Some(body);
                return;
            }
            let n = body.len().min(room as usize);
            let chunk = body.split_to(n);
            let flags = if body.is_empty() { END_STREAM } else { 0 };
            frame_head(&mut self.wbuf, n, DATA, flags, id);
            self.wbuf.extend_from_slice(&chunk);
            self.send_window -= n as i64;
            slot.send_window -= n as i64;
        }
    }

    /// Bodies held back for want of window, sent now that the window opened.
    fn send_waiting_bodies(&mut self) {
        if self.streams.values().all(|s| s.pending.is_none()) {
            return; // the usual case: no allocation per WINDOW_UPDATE
        }
        let waiting: Vec<u32> = (self.streams.iter())
            .filter(|(_, s)| s.pending.is_some())
            .map(|(id, _)| *id)
            .collect();
        for id in waiting {
            if let Some(mut slot) = self.streams.remove(&id) {
                self.send_body(id, &mut slot);
                self.streams.insert(id, slot);
            }
        }
    }

    /// Wakes a waiting stream to take the driving turn.
    fn hand_on(&mut self) {
        if let Some(w) = (self.streams.values_mut())
            .filter(|s| s.done.is_none())
            .find_map(|s| s.waker.take())
        {
            w.wake();
        }
    }

    fn poll_stream(
        &mut self,
        cx: &mut Context<'_>,
        id: u32,
    ) -> Poll<Result<(u16, u64), ErrorKind>> {
        if self.driver.is_none() {
            self.driver = Some(id);
        }
        if self.driver == Some(id) {
            if let Err(kind) = self.drive(cx, id) {
                self.fail(kind);
            }
        } else if let Err(kind) = self.poll_flush(cx) {
            self.fail(kind);
        }
        let Some(slot) = self.streams.get_mut(&id) else {
            return Poll::Ready(Err(ErrorKind::Reset));
        };
        match slot.done.take() {
            Some(result) => {
                let status = slot.status.unwrap_or(0);
                let bytes = slot.bytes;
                self.streams.remove(&id);
                if self.driver == Some(id) {
                    self.driver = None;
                    self.hand_on();
                }
                self.admit_all();
                Poll::Ready(result.map(|()| (status, bytes)))
            }
            None => {
                if self.driver != Some(id)
                    && !slot.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker()))
                {
                    slot.waker = Some(cx.waker().clone());
                }
                Poll::Pending
            }
        }
    }

    /// The driving turn: writes what is queued, reads and handles frames until the
    /// socket has nothing more or stream `id` is complete.
    fn drive(&mut self, cx: &mut Context<'_>, id: u32) -> Result<(), ErrorKind> {
        loop {
            self.poll_flush(cx)?;
            self.handle_frames()?;
            if self.streams.get(&id).is_none_or(|s| s.done.is_some()) {
                return self.poll_flush(cx);
            }
            match self.poll_fill(cx)? {
                Poll::Pending => return self.poll_flush(cx),
                Poll::Ready(0) => return Err(ErrorKind::Reset),
                Poll::Ready(_) => {}
            }
        }
    }

    /// Every stream fails with `kind`; the connection takes no more.
    fn fail(&mut self, kind: ErrorKind) {
        self.closed.get_or_insert(kind);
        for slot in self.streams.values_mut() {
            if slot.done.is_none() {
                slot.done = Some(Err(kind));
                if let Some(w) = slot.waker.take() {
                    w.wake();
                }
            }
        }
        self.admit_all();
    }

    /// Writes the queued frames (several streams' at once).
    fn poll_flush(&mut self, cx: &mut Context<'_>) -> Result<(), ErrorKind> {
        let mut written = 0;
        while written < self.wbuf.len() {
            match Pin::new(&mut self.stream).poll_write(cx, &self.wbuf[written..]) {
                Poll::Ready(Ok(0)) => return Err(ErrorKind::Reset),
                Poll::Ready(Ok(n)) => written += n,
                Poll::Ready(Err(e)) => return Err(io_kind(&e)),
                Poll::Pending => break,
            }
        }
        self.wbuf.drain(..written);
        if self.wbuf.is_empty() {
            self.acks_queued = 0;
        }
        if written > 0 {
            if let Poll::Ready(Err(e)) = Pin::new(&mut self.stream).poll_flush(cx) {
                return Err(io_kind(&e));
            }
        }
        Ok(())
    }

    /// Reads more bytes into the buffer; `Ready(0)` when the server closed.
    fn poll_fill(&mut self, cx: &mut Context<'_>) -> Result<Poll<usize>, ErrorKind> {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        } else if self.start > 0 && self.rbuf.len() - self.end < MAX_FRAME + 9 {
            self.rbuf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        let mut rb = ReadBuf::new(&mut self.rbuf[self.end..]);
        match Pin::new(&mut self.stream).poll_read(cx, &mut rb) {
            Poll::Ready(Ok(())) => {
                let n = rb.filled().len();
                self.end += n;
                Ok(Poll::Ready(n))
            }
            Poll::Ready(Err(e)) => Err(read_kind(&e)),
            Poll::Pending => Ok(Poll::Pending),
        }
    }

    /// Waits for the server's first SETTINGS frame (handling anything before it).
    fn poll_settings(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), ErrorKind>> {
        let result = (|| loop {
            self.poll_flush(cx)?;
            if self.peer_seen()? {
                self.poll_flush(cx)?;
                return Ok(Poll::Ready(()));
            }
            match self.poll_fill(cx)? {
                Poll::Pending => return Ok(Poll::Pending),
                Poll::Ready(0) => return Err(ErrorKind::Reset),
                Poll::Ready(_) => {}
            }
        })();
        match result {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(())) => Poll::Ready(Ok(())),
            Err(kind) => Poll::Ready(Err(kind)),
        }
    }

    /// Whether the server's first frame, its SETTINGS, has come (and was handled).
    fn peer_seen(&mut self) -> Result<bool, ErrorKind> {
        if self.end - self.start < 9 {
            return Ok(false);
        }
        if self.rbuf[self.start + 3] != SETTINGS || self.rbuf[self.start + 4] & ACK != 0 {
            // Not HTTP/2: an HTTP/1.1 server's "HTTP/1.1 400", a TLS alert.
            return Err(ErrorKind::Protocol);
        }
        let len = be24(&self.rbuf[self.start..]);
        if self.end - self.start < 9 + len {
            return Ok(false);
        }
        self.handle_frames()?;
        Ok(true)
    }

    /// Handles every complete frame in the buffer.
    fn handle_frames(&mut self) -> Result<(), ErrorKind> {
        while self.end - self.start >= 9 {
            let head = &self.rbuf[self.start..self.start + 9];
            let len = be24(head);
            if len > MAX_FRAME {
                return Err(ErrorKind::Protocol);
            }
            if self.end - self.start < 9 + len {
                break;
            }
            let (kind, flags) = (head[3], head[4]);
            let id = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
            let from = self.start + 9;
            self.start = from + len;
            self.frame(kind, flags, id, from, len)?;
        }
        Ok(())
    }

    /// One frame, its payload at `rbuf[from..from + len]`.
    fn frame(
        &mut self,
        kind: u8,
        flags: u8,
        id: u32,
        from: usize,
        len: usize,
    ) -> Result<(), ErrorKind> {
        if self.partial.is_some() && kind != CONTINUATION {
            return Err(ErrorKind::Protocol);
        }
        let payload = from..from + len;
        match kind {
            DATA => {
                let body = unpad(&self.rbuf[payload], flags)?.len() as u64;
                self.unacked += len as u32;
                if self.unacked >= WINDOW / 2 {
                    window_update(&mut self.wbuf, 0, self.unacked);
                    self.unacked = 0;
                }
                let Some(slot) = self.streams.get_mut(&id) else {
                    return Ok(()); // a stream we forgot (its request was cut)
                };
                if slot.status.is_none() {
                    finish(slot, Err(ErrorKind::Protocol));
                    return Ok(());
                }
                slot.bytes += body;
                slot.unacked += len as u32;
                if slot.unacked >= WINDOW / 2 && flags & END_STREAM == 0 {
                    window_update(&mut self.wbuf, id, slot.unacked);
                    slot.unacked = 0;
                }
                if flags & END_STREAM != 0 {
                    finish(slot, Ok(()));
                }
            }
            HEADERS => {
                let mut block = unpad(&self.rbuf[payload], flags)?;
                if flags & PRIORITY != 0 {
                    block = block.get(5..).ok_or(ErrorKind::Protocol)?;
                }
                if flags & END_HEADERS == 0 {
                    self.partial = Some((id, flags, block.to_vec()));
                } else {
                    let status = status_of(block);
                    self.headers(id, flags, status);
                }
            }
            CONTINUATION => {
                let Some((pid, pflags, mut block)) = self.partial.take() else {
                    return Err(ErrorKind::Protocol);
                };
                if pid != id {
                    return Err(ErrorKind::Protocol);
                }
                block.extend_from_slice(&self.rbuf[payload]);
                if block.len() > 1 << 20 {
                    return Err(ErrorKind::Protocol);
                }
                if flags & END_HEADERS == 0 {
                    self.partial = Some((pid, pflags, block));
                } else {
                    let status = status_of(&block);
                    self.headers(id, pflags, status);
                }
            }
            RST_STREAM => {
                if let Some(slot) = self.streams.get_mut(&id) {
                    finish(slot, Err(ErrorKind::Reset));
                }
            }
            SETTINGS if flags & ACK == 0 => {
                if !len.is_multiple_of(6) {
                    return Err(ErrorKind::Protocol);
                }
                for k in (from..from + len).step_by(6) {
                    let p = &self.rbuf[k..k + 6];
                    let value = u32::from_be_bytes([p[2], p[3], p[4], p[5]]);
                    match u16::from_be_bytes([p[0], p[1]]) {
                        3 => self.peer_max_streams = value as usize,
                        4 if value > i32::MAX as u32 => return Err(ErrorKind::Protocol),
                        4 => {
                            let delta = i64::from(value) - self.peer_window;
                            self.peer_window = i64::from(value);
                            for s in self.streams.values_mut() {
                                s.send_window += delta;
                            }
                        }
                        5 if !(16_384..=16_777_215).contains(&value) => {
                            return Err(ErrorKind::Protocol)
                        }
                        5 => self.peer_max_frame = value as usize,
                        _ => {}
                    }
                }
                self.ack()?;
                frame_head(&mut self.wbuf, 0, SETTINGS, ACK, 0);
                self.send_waiting_bodies();
            }
            PING if flags & ACK == 0 && len == 8 => {
                self.ack()?;
                let mut pong = [0u8; 8];
                pong.copy_from_slice(&self.rbuf[payload]);
                frame_head(&mut self.wbuf, 8, PING, ACK, 0);
                self.wbuf.extend_from_slice(&pong);
            }
            GOAWAY if len >= 8 => {
                let p = &self.rbuf[from..from + 4];
                let last = u32::from_be_bytes([p[0], p[1], p[2], p[3]]) & 0x7fff_ffff;
                self.closed.get_or_insert(ErrorKind::Reset);
                for (sid, slot) in self.streams.iter_mut() {
                    if *sid > last {
                        finish(slot, Err(ErrorKind::Reset));
                    }
                }
                self.admit_all();
            }
            WINDOW_UPDATE if len == 4 => {
                let p = &self.rbuf[payload];
                let n = i64::from(u32::from_be_bytes([p[0], p[1], p[2], p[3]]) & 0x7fff_ffff);
                if id == 0 {
                    self.send_window += n;
                } else if let Some(slot) = self.streams.get_mut(&id) {
                    slot.send_window += n;
                }
                self.send_waiting_bodies();
            }
            // We said ENABLE_PUSH 0: a push is the server's protocol error.
            PUSH_PROMISE => return Err(ErrorKind::Protocol),
            // PRIORITY, acknowledgements, unknown types: nothing to do.
            _ => {}
        }
        Ok(())
    }

    /// Counts one more acknowledgement to write: a flood of them is a protocol error.
    fn ack(&mut self) -> Result<(), ErrorKind> {
        self.acks_queued += 1;
        if self.acks_queued > MAX_QUEUED_ACKS {
            return Err(ErrorKind::Protocol);
        }
        Ok(())
    }

    /// A header block for stream `id`: its response's head, an interim response, or
    /// its trailers.
    fn headers(&mut self, id: u32, flags: u8, status: Option<u16>) {
        let Some(slot) = self.streams.get_mut(&id) else {
            return;
        };
        if slot.status.is_none() {
            match status {
                Some(s) if (100..200).contains(&s) && flags & END_STREAM == 0 => return,
                Some(s) if s >= 200 => slot.status = Some(s),
                _ => {
                    finish(slot, Err(ErrorKind::Protocol));
                    return;
                }
            }
        }
        if flags & END_STREAM != 0 {
            finish(slot, Ok(()));
        }
    }
}

fn finish(slot: &mut Slot, result: Result<(), ErrorKind>) {
    if slot.done.is_none() {
        slot.done = Some(result);
        if let Some(w) = slot.waker.take() {
            w.wake();
        }
    }
}

fn read_kind(e: &io::Error) -> ErrorKind {
    match e.kind() {
        io::ErrorKind::TimedOut => ErrorKind::Timeout,
        io::ErrorKind::InvalidData => ErrorKind::Protocol,
        _ => ErrorKind::Reset,
    }
}

#[cfg(test)]
mod tests {
    use super::hpack::{hpack_int, put_int};
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    fn frame(kind: u8, flags: u8, id: u32, payload: &[u8]) -> Vec<u8> {
        let mut w = Vec::new();
        frame_head(&mut w, payload.len(), kind, flags, id);
        w.extend_from_slice(payload);
        w
    }

    /// What the scripted server saw of a stream: its request's DATA bytes and the
    /// largest DATA frame.
    #[derive(Debug, Default, Clone)]
    struct Seen {
        body: usize,
        largest: usize,
        pong: Option<Vec<u8>>,
    }

    /// A server speaking raw frames: sends `settings`, then, for each request complete
    /// (END_STREAM), the frames `answer(stream id, how many requests so far)` returns.
    /// `window` is the stream window it grants a request's body, `WINDOW_UPDATE`s
    /// included, 0 for the default. Returns its address and what it saw.
    async fn scripted(
        settings: Vec<u8>,
        answer: fn(u32, usize) -> Vec<u8>,
    ) -> (
        std::net::SocketAddr,
        tokio::task::JoinHandle<HashMap<u32, Seen>>,
    ) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut preface = [0u8; 24];
            s.read_exact(&mut preface).await.unwrap();
            assert_eq!(&preface, PREFACE);
            s.write_all(&settings).await.unwrap();
            let mut seen: HashMap<u32, Seen> = HashMap::new();
            let mut served = 0;
            loop {
                let mut head = [0u8; 9];
                if s.read_exact(&mut head).await.is_err() {
                    return seen;
                }
                let len = be24(&head);
                let mut payload = vec![0u8; len];
                s.read_exact(&mut payload).await.unwrap();
                let id = u32::from_be_bytes([head[5], head[6], head[7], head[8]]);
                let entry = seen.entry(id).or_default();
                if head[3] == PING && head[4] & ACK != 0 {
                    seen.entry(0).or_default().pong = Some(payload);
                    continue;
                }
                if head[3] == DATA {
                    entry.body += len;
                    entry.largest = entry.largest.max(len);
                    // Grant the window back, a frame at a time.
                    let mut w = frame(WINDOW_UPDATE, 0, id, &(len as u32).to_be_bytes());
                    w.extend(frame(WINDOW_UPDATE, 0, 0, &(len as u32).to_be_bytes()));
                    s.write_all(&w).await.unwrap();
                }
                let ends = head[4] & END_STREAM != 0;
                if (head[3] == HEADERS || head[3] == DATA) && ends {
                    served += 1;
                    s.write_all(&answer(id, served)).await.unwrap();
                }
            }
        });
        (addr, server)
    }

    fn settings(pairs: &[(u16, u32)]) -> Vec<u8> {
        let mut p = Vec::new();
        for (k, v) in pairs {
            p.extend_from_slice(&k.to_be_bytes());
            p.extend_from_slice(&v.to_be_bytes());
        }
        frame(SETTINGS, 0, 0, &p)
    }

    async fn connect(addr: std::net::SocketAddr) -> Result<H2, ErrorKind> {
        let tcp = TcpStream::connect(addr).await.unwrap();
        H2::handshake(Stream::Tcp(tcp)).await
    }

    fn get() -> Vec<u8> {
        encode("GET", false, b"x", "/", &[], None)
    }

    #[tokio::test]
    async fn a_response_in_every_shape_the_protocol_allows_is_read() {
        // 100 Continue first; the head padded, with a priority, split over a
        // CONTINUATION; the body in two DATA frames, one padded; trailers last.
        let (addr, server) = scripted(settings(&[]), |id, _| {
            let mut w = frame(HEADERS, END_HEADERS, id, &[0x08, 0x03, b'1', b'0', b'0']);
            let block = [0x48, 0x03, b'2', b'0', b'3', 0x00, 0x01, b'a', 0x01, b'b'];
            let mut first = vec![2u8, 0, 0, 0, 0, 16];
            first.extend_from_slice(&block[..4]);
            first.extend_from_slice(&[0, 0]);
            w.extend(frame(HEADERS, PADDED | PRIORITY, id, &first));
            w.extend(frame(CONTINUATION, END_HEADERS, id, &block[4..]));
            w.extend(frame(DATA, 0, id, b"hello"));
            w.extend(frame(DATA, PADDED, id, &[3, b'!', b'!', 0, 0, 0]));
            w.extend(frame(
                HEADERS,
                END_HEADERS | END_STREAM,
                id,
                &[0x40, 1, b'x', 1, b'y'],
            ));
            w
        })
        .await;
        let h2 = connect(addr).await.unwrap();
        assert_eq!(h2.exchange(&get(), Bytes::new()).await, Ok((203, 7)));
        drop(h2);
        server.await.unwrap();
    }

    #[tokio::test]
    async fn streams_of_one_connection_complete_in_any_order() {
        // Each request answered when it ends; stream k's body is k bytes.
        let (addr, server) = scripted(settings(&[(3, 100)]), |id, _| {
            let mut w = frame(HEADERS, END_HEADERS, id, &[0x8d]);
            w.extend(frame(DATA, END_STREAM, id, &vec![b'.'; id as usize]));
            w
        })
        .await;
        let h2 = connect(addr).await.unwrap();
        let (a, b, c) = (h2.clone(), h2.clone(), h2.clone());
        let block = get();
        let got = tokio::join!(
            a.exchange(&block, Bytes::new()),
            b.exchange(&block, Bytes::new()),
            c.exchange(&block, Bytes::new()),
        );
        let mut got = [got.0.unwrap(), got.1.unwrap(), got.2.unwrap()];
        got.sort();
        assert_eq!(got, [(404, 1), (404, 3), (404, 5)]);
        drop((h2, a, b, c));
        server.await.unwrap();
    }

    /// A server allowing one stream at a time: the others wait their turn, none is lost.
    #[tokio::test]
    async fn streams_beyond_the_servers_limit_wait_for_their_turn() {
        let (addr, server) = scripted(settings(&[(3, 1)]), |id, _| {
            frame(HEADERS, END_HEADERS | END_STREAM, id, &[0x88])
        })
        .await;
        let h2 = connect(addr).await.unwrap();
        let block = get();
        let all = async {
            tokio::join!(
                h2.exchange(&block, Bytes::new()),
                h2.exchange(&block, Bytes::new()),
                h2.exchange(&block, Bytes::new()),
            )
        };
        let got = tokio::time::timeout(std::time::Duration::from_secs(5), all)
            .await
            .expect("every stream got its turn");
        assert_eq!([got.0, got.1, got.2], [Ok((200, 0)); 3]);
        drop(h2);
        let seen = server.await.unwrap();
        let streams: Vec<u32> = seen.keys().copied().filter(|id| *id != 0).collect();
        assert_eq!(streams.len(), 3, "{seen:?}");
    }

    /// Known truth: a server granting 1,000 bytes of window gets a 10,000-byte body in
    /// frames no larger, all of it, and only as its WINDOW_UPDATEs allow.
    #[tokio::test]
    async fn a_body_waits_for_the_servers_window() {
        let (addr, server) = scripted(settings(&[(4, 1000)]), |id, _| {
            frame(HEADERS, END_HEADERS | END_STREAM, id, &[0x88])
        })
        .await;
        let h2 = connect(addr).await.unwrap();
        let body = Bytes::from(vec![b'z'; 10_000]);
        let block = encode("POST", false, b"x", "/up", &[], Some(body.len()));
        assert_eq!(h2.exchange(&block, body).await, Ok((200, 0)));
        drop(h2);
        let seen = server.await.unwrap();
        assert_eq!(seen[&1].body, 10_000);
        assert!(seen[&1].largest <= 1000, "{:?}", seen[&1]);
    }

    /// The 2019 ping and settings floods: a server that sends PINGs (or SETTINGS)
    /// without end and never reads our acknowledgements. The connection ends as a
    /// protocol error, its write buffer never beyond 1,000 acknowledgements.
    #[tokio::test]
    async fn a_server_flooding_pings_or_settings_unread_is_a_protocol_error() {
        for flood in [frame(PING, 0, 0, b"12345678"), settings(&[(3, 100)])] {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let server = tokio::spawn(async move {
                let (mut s, _) = listener.accept().await.unwrap();
                let _ = s.write_all(&settings(&[])).await;
                // Small: the kernel buffers fill with what we never read.
                let _ = s.set_nodelay(true);
                let batch = flood.repeat(1000);
                for _ in 0..10_000 {
                    if s.write_all(&batch).await.is_err() {
                        return;
                    }
                }
            });
            // The flood may end the handshake already, or the first exchange.
            let r = tokio::time::timeout(std::time::Duration::from_secs(10), async {
                connect(addr).await?.exchange(&get(), Bytes::new()).await
            })
            .await
            .expect("ended, not held");
            assert_eq!(r, Err(ErrorKind::Protocol));
            server.abort();
        }
    }

    #[tokio::test]
    async fn resets_pushes_and_pings_are_answered_as_the_protocol_says() {
        let (addr, server) = scripted(settings(&[]), |id, n| match n {
            // A ping first, then the stream refused.
            1 => {
                let mut w = frame(PING, 0, 0, b"12345678");
                w.extend(frame(RST_STREAM, 0, id, &7u32.to_be_bytes()));
                w
            }
            2 => frame(HEADERS, END_HEADERS | END_STREAM, id, &[0x88]),
            // A push, which the client refused in its settings.
            _ => frame(PUSH_PROMISE, END_HEADERS, id, &[0, 0, 0, 2, 0x88]),
        })
        .await;
        let h2 = connect(addr).await.unwrap();
        assert_eq!(
            h2.exchange(&get(), Bytes::new()).await,
            Err(ErrorKind::Reset)
        );
        assert!(!h2.is_closed(), "a reset stream leaves its connection open");
        assert_eq!(h2.exchange(&get(), Bytes::new()).await, Ok((200, 0)));
        assert_eq!(
            h2.exchange(&get(), Bytes::new()).await,
            Err(ErrorKind::Protocol)
        );
        assert!(h2.is_closed());
        drop(h2);
        let seen = server.await.unwrap();
        assert_eq!(seen[&0].pong.as_deref(), Some(&b"12345678"[..]));
    }

    #[tokio::test]
    async fn a_server_that_does_not_speak_http2_is_a_protocol_error() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let _ = s.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n").await;
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        });
        assert_eq!(connect(addr).await.err(), Some(ErrorKind::Protocol));
    }

    /// RFC 7541's representations of `:status`, the Huffman ones computed from its
    /// Appendix B by hand.
    #[test]
    fn status_is_read_from_every_representation() {
        let cases: [(&[u8], Option<u16>); 12] = [
            (&[0x88], Some(200)),
            (&[0x8d], Some(404)),
            (&[0x8e], Some(500)),
            (&[0x20, 0x89], Some(204)), // a table size update first
            (&[0x08, 0x03, b'5', b'0', b'3'], Some(503)),
            (&[0x48, 0x03, b'2', b'0', b'1'], Some(201)),
            (&[0x18, 0x03, b'4', b'2', b'9'], Some(429)), // never indexed
            (&[0x08, 0x82, 0x10, 0x03], Some(201)),       // Huffman
            (&[0x08, 0x82, 0x6c, 0x02], Some(502)),
            (&[0x08, 0x82, 0x68, 0x01], Some(401)),
            (&[0x08, 0x82, 0x10, 0x02], None), // padded with a zero bit
            (&[0xbe], None),                   // a dynamic entry never allowed
        ];
        for (block, want) in cases {
            assert_eq!(status_of(block), want, "{block:02x?}");
        }
        // Other headers first; a literal name; cut short.
        let named = [
            0x00, 0x07, b':', b's', b't', b'a', b't', b'u', b's', 0x03, b'3', b'0', b'2',
        ];
        assert_eq!(status_of(&named), Some(302));
        assert_eq!(status_of(&[0x0f, 0x0d, 0x01, b'5', 0x8d]), Some(404));
        assert_eq!(status_of(&[0x08, 0x03, b'5']), None);
        assert_eq!(status_of(&[0x08, 0x7f]), None);
    }

    #[test]
    fn integers_round_trip_across_their_prefix() {
        for n in [4, 5, 6, 7] {
            for v in [0, 1, 14, 15, 16, 30, 31, 126, 127, 128, 1337, 1 << 20] {
                let mut w = Vec::new();
                put_int(&mut w, 0, n, v);
                let mut at = 0;
                assert_eq!(hpack_int(&w, &mut at, n), Some(v), "{v} with {n} bits");
                assert_eq!(at, w.len());
            }
        }
        // RFC 7541 C.1.2: 1337 with a 5-bit prefix is 1f 9a 0a.
        let mut w = Vec::new();
        put_int(&mut w, 0, 5, 1337);
        assert_eq!(w, [0x1f, 0x9a, 0x0a]);
    }

    /// Hostile header blocks and frames never panic: they read as a status or none.
    #[test]
    fn mutated_header_blocks_never_panic() {
        let mut rng = crate::rng::Rng::new(7);
        let seed: Vec<u8> = [0x20, 0x08, 0x82, 0x6c, 0x02, 0x00, 0x01, b'a', 0x01, b'b'].to_vec();
        for _ in 0..20_000 {
            let mut b = seed.clone();
            for _ in 0..1 + rng.index(4) {
                let (at, which) = (rng.index(b.len() + 1), rng.index(3));
                rng.mutate_bytes(&mut b, at, which);
            }
            let _ = status_of(&b);
        }
    }

    /// A server's bytes cut, flipped and spliced at random are handled as frames or
    /// refused as a protocol error, never a panic.
    #[tokio::test]
    async fn mutated_frames_never_panic() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let tcp = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let mut c = Connection::new(Stream::Tcp(tcp), Vec::new());
        c.streams.insert(1, Slot::default());
        let mut answer = frame(SETTINGS, 0, 0, &[0, 4, 0, 0, 0, 9]);
        answer.extend(frame(HEADERS, END_HEADERS | PADDED, 1, &[1, 0x88, 0]));
        answer.extend(frame(WINDOW_UPDATE, 0, 1, &9u32.to_be_bytes()));
        answer.extend(frame(DATA, END_STREAM, 1, b"body"));
        answer.extend(frame(GOAWAY, 0, 0, &[0, 0, 0, 1, 0, 0, 0, 0]));
        let mut rng = crate::rng::Rng::new(11);
        for _ in 0..5_000 {
            let mut b = answer.clone();
            for _ in 0..1 + rng.index(3) {
                let (at, which) = (rng.index(b.len() + 1), rng.index(3));
                rng.mutate_bytes(&mut b, at, which);
            }
            c.start = 0;
            c.end = b.len().min(c.rbuf.len());
            c.rbuf[..c.end].copy_from_slice(&b[..c.end]);
            c.partial = None;
            c.wbuf.clear();
            let _ = c.handle_frames();
        }
    }
}
