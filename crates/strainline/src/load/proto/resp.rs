//! Redis's protocol, RESP, as a load protocol: `redis://HOST[:PORT][/DB]` (`rediss://`
//! over TLS). A unit of work is one command — the workload's body, words split at
//! spaces (`"…"` keeps one with spaces), each a template (`SET k{{seq}} {{random 64}}`)
//! — sent as an array of bulk strings, and the reply read whole. An error reply
//! (`-ERR …`, `-WRONGTYPE …`) is a failure, counted by its prefix; any other reply is a
//! success. With `--streams M`, M commands are in flight on each connection (pipelining):
//! each takes a ticket as it is written and reads its reply when those before it have
//! been read — or, as the closed model's batches ([`Batch`]), the commands queued go in
//! one write (the replies read while it is written) and every reply that came is read at
//! once. A reply is at most a connection's share of the run's [`super::REPLY_BUDGET`] (1 MiB to [`MAX_REPLY`]) and [`MAX_DEPTH`] arrays deep, and a
//! line (a simple string, an error, a length) at most [`MAX_LINE`]; a server that breaks
//! these, or answers one command twice, is a `protocol` error and the connection is
//! opened again; a connection's buffer shrinks back after a large reply. A scenario step
//! that extracts or checks reads the reply as text ([`text_of`]): a string, number or
//! error as itself, an array or map as JSON — of a reply over [`MAX_KEPT`] bytes, a
//! string's first [`MAX_KEPT`] bytes and no array, counted as too large to extract.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use super::super::client::Reply;
use super::super::flow::{Keep, Kept, MAX_KEPT};
use super::super::net::Stream;
use super::super::net::Tls;
use super::super::recorder::ErrorKind;
use super::super::request::Rendered;
use super::super::spec::BodySpec;
use super::super::template::{push_decimal, RandomPool, Text, Vars};
use super::{Ask, Batch, Connection, Fut, Protocol, Target};

/// The largest reply read on a connection that has the whole budget: a larger one is a
/// `protocol` error.
pub const MAX_REPLY: usize = 16 << 20;
/// What a connection's read buffer holds between replies: it shrinks back to this after
/// a larger reply (64 connections that each read a 15 MB reply once held 1 GB).
const READ_BUFFER: usize = 16 << 10;
/// The deepest nesting of arrays (and maps, sets) in a reply.
pub const MAX_DEPTH: usize = 64;
/// The longest line of a reply: a simple string, an error, a length.
pub const MAX_LINE: usize = 64 << 10;

/// Error replies by their first word: the status each is counted under.
const ERRORS: &[(&str, u16)] = &[
    ("ERR", 1),
    ("WRONGTYPE", 2),
    ("NOAUTH", 3),
    ("NOPERM", 4),
    ("OOM", 5),
    ("BUSY", 6),
    ("LOADING", 7),
    ("READONLY", 8),
    ("MOVED", 9),
    ("ASK", 10),
];
/// An error reply whose first word is none of [`ERRORS`].
const OTHER_ERROR: u16 = 99;

pub struct Resp;

impl Protocol for Resp {
    fn name(&self) -> &'static str {
        "Redis"
    }

    fn schemes(&self) -> &'static [&'static str] {
        &["redis", "rediss"]
    }

    fn tls_schemes(&self) -> &'static [&'static str] {
        &["rediss"]
    }

    fn plan(&'static self, ask: &Ask<'_>) -> crate::error::Result<Arc<dyn Target>> {
        let url = ask.url;
        let bad = |why: String| crate::Error::usage(format!("URL '{url}': {why}"));
        if ask.replay {
            return Err(bad("a replay sends an access log's HTTP requests; a Redis load sends the command in the body (-d 'SET k{{seq}} v'), or a scenario's steps' bodies".into()));
        }
        if ask.method != "GET" {
            return Err(bad(format!(
                "a Redis command has no method ({}): give the command as the body (-d 'GET k')",
                ask.method
            )));
        }
        if !ask.headers.is_empty() {
            return Err(bad("a Redis command has no headers: leave out -H".into()));
        }
        if ask.options.http2 {
            return Err(bad("--http2 is for HTTP, not Redis".into()));
        }
        let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
        let (hostport, db) = rest.split_once('/').unwrap_or((rest, ""));
        if hostport.contains('@') {
            return Err(bad(
                "a user or password in the URL is not supported (AUTH is not sent): load a Redis without requirepass, or one bound to loopback".into(),
            ));
        }
        if hostport.is_empty() {
            return Err(bad("give the host, e.g. redis://127.0.0.1:6379".into()));
        }
        let db = match db {
            "" => None,
            d => Some(d.parse::<u32>().map_err(|_| {
                bad(format!(
                    "'/{d}' is not a database number: give redis://HOST:PORT/0 … /15, or no path"
                ))
            })?),
        };
        let tls = self.tls_schemes().contains(&scheme);
        let (addr, tls) = super::endpoint(url, hostport, 6379, tls, ask.options)?;
        let command = match ask.body {
            BodySpec::Bytes(b) => String::from_utf8(b.clone())
                .map_err(|_| bad("the command (-d) must be text".into()))?,
            BodySpec::Empty => String::new(),
            BodySpec::Random { .. } => return Err(bad(
                "a random body is not a Redis command: give it as -d 'SET k{{seq}} {{random 64}}'"
                    .into(),
            )),
        };
        // A scenario's steps bring their commands, checked as each is rendered.
        let words = match command.trim() {
            "" if ask.scenario => Vec::new(),
            _ => {
                words(&command).map_err(|e| e.context(format_args!("URL '{url}': the command")))?
            }
        };
        let args = words
            .iter()
            .map(|w| {
                Text::parse(w, &[])
                    .map_err(|(at, e)| bad(format!("the command's word '{w}', at {}: {e}", at + 1)))
            })
            .collect::<crate::error::Result<Vec<Text>>>()?;
        Ok(Arc::new(Redis {
            protocol: self,
            addr,
            tls,
            db,
            command,
            args: Arc::new((args, RandomPool::new(0x5eed))),
            max_reply: AtomicUsize::new(MAX_REPLY),
        }))
    }

    fn pipelines(&self) -> bool {
        true
    }

    fn batches(&self) -> bool {
        true
    }

    fn body_is_words(&self) -> bool {
        true
    }

    fn keeps_bodies(&self) -> bool {
        true
    }

    fn label(&self, code: u16) -> String {
        match code {
            0 => "reply".into(),
            OTHER_ERROR => "error".into(),
            c => match ERRORS.iter().find(|e| e.1 == c) {
                Some((word, _)) => format!("error {word}"),
                None => format!("status {c}"),
            },
        }
    }
}

/// A command's words: split at ASCII whitespace, a `"…"` word kept whole (`\"` and `\\`
/// inside it), as redis-cli reads them, and a placeholder's spaces kept in its word.
fn words(command: &str) -> crate::error::Result<Vec<String>> {
    let mut out = Vec::new();
    let mut chars = command.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_ascii_whitespace()) {
            chars.next();
        }
        let Some(&first) = chars.peek() else { break };
        let mut word = String::new();
        if first == '"' {
            chars.next();
            loop {
                match chars.next() {
                    None => return Err(crate::Error::usage("a \" is never closed")),
                    Some('"') => break,
                    Some('\\') => word.extend(chars.next()),
                    Some(c) => word.push(c),
                }
            }
        } else {
            // A placeholder's spaces (`{{random 64}}`) are part of the word.
            let mut inside = false;
            while let Some(c) = chars
                .peek()
                .copied()
                .filter(|c| inside || !c.is_ascii_whitespace())
            {
                word.push(c);
                chars.next();
                if word.ends_with("{{") {
                    inside = true;
                } else if word.ends_with("}}") {
                    inside = false;
                }
            }
        }
        out.push(word);
    }
    if out.is_empty() {
        return Err(crate::Error::usage(
            "it is empty: give a command as the body, e.g. -d 'SET k{{seq}} v'",
        ));
    }
    Ok(out)
}

/// One command as RESP: an array of bulk strings.
fn encode<'a>(args: impl ExactSizeIterator<Item = &'a [u8]>, out: &mut Vec<u8>) {
    // No String and no formatter per command.
    out.push(b'*');
    push_decimal(args.len() as u64, out);
    out.extend_from_slice(b"\r\n");
    for a in args {
        out.push(b'$');
        push_decimal(a.len() as u64, out);
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

/// A Redis server and the command sent to it.
struct Redis {
    protocol: &'static Resp,
    addr: SocketAddr,
    tls: Option<Tls>,
    db: Option<u32>,
    command: String,
    /// The command's words as templates, and the random bytes they draw from.
    args: Arc<(Vec<Text>, RandomPool)>,
    /// The largest reply a connection reads: its share of the run's budget.
    max_reply: AtomicUsize,
}

impl Target for Redis {
    fn protocol(&self) -> &'static dyn Protocol {
        self.protocol
    }

    fn describe(&self) -> String {
        format!(
            "Redis{}{}: {}",
            if self.tls.is_some() { " over TLS" } else { "" },
            self.db
                .map(|d| format!(" database {d}"))
                .unwrap_or_default(),
            crate::units::printable(&self.command)
        )
    }

    fn handshakes(&self) -> bool {
        self.tls.is_some() || self.db.is_some()
    }

    fn sized_for(&self, connections: usize) {
        self.max_reply.store(
            super::reply_share(connections, MAX_REPLY),
            Ordering::Relaxed,
        );
    }

    fn connect(&self) -> Fut<'_, Result<Box<dyn Connection>, ErrorKind>> {
        Box::pin(async move {
            let (stream, fd) = super::open(self.addr, &self.tls).await?;
            let max = self.max_reply.load(Ordering::Relaxed);
            let mut conn = Conn::on(Link::over(stream, fd, max), self.args.clone());
            if let Some(db) = self.db {
                let db = db.to_string();
                encode([&b"SELECT"[..], db.as_bytes()].into_iter(), &mut conn.write);
                if conn.exchange(Keep::Nothing).await?.status != 0 {
                    return Err(ErrorKind::Protocol);
                }
            }
            Ok(Box::new(conn) as Box<dyn Connection>)
        })
    }
}

/// One connection to the server, shared by the handles that pipeline on it: each
/// command takes a ticket as it is written, and reads its reply when the replies before
/// it have been read (Redis answers in order).
struct Link {
    /// The socket's writing half, taken by the flusher while it writes.
    write: Cell<Option<tokio::io::WriteHalf<Stream>>>,
    /// Commands not yet written, in ticket order, and whether a handle is writing them.
    out: RefCell<Vec<u8>>,
    flushing: Cell<bool>,
    read: tokio::sync::Mutex<Incoming>,
    fd: RawFd,
    /// The next command's ticket, and the ticket whose reply is read next.
    tickets: Cell<u64>,
    serving: Cell<u64>,
    /// The handles whose commands are in flight, in ticket order: each is woken alone
    /// when its turn to read comes (or the connection broke).
    waiting: RefCell<VecDeque<Rc<tokio::sync::Notify>>>,
    closed: Cell<bool>,
    /// The largest reply it reads.
    max_reply: usize,
}

/// What has been read from the server and not yet taken as a reply.
struct Incoming {
    half: tokio::io::ReadHalf<Stream>,
    buf: Vec<u8>,
    /// Where the next reply begins in `buf`.
    start: usize,
}

impl Link {
    /// A connection's link over an open stream, nothing in flight.
    fn over(stream: Stream, fd: RawFd, max_reply: usize) -> Rc<Link> {
        let (read, write) = tokio::io::split(stream);
        Rc::new(Link {
            write: Cell::new(Some(write)),
            out: RefCell::new(Vec::with_capacity(4096)),
            flushing: Cell::new(false),
            read: tokio::sync::Mutex::new(Incoming {
                half: read,
                buf: Vec::with_capacity(READ_BUFFER),
                start: 0,
            }),
            fd,
            tickets: Cell::new(0),
            serving: Cell::new(0),
            waiting: RefCell::new(VecDeque::new()),
            closed: Cell::new(false),
            max_reply,
        })
    }

    fn broke(&self) -> ErrorKind {
        self.closed.set(true);
        for w in self.waiting.borrow().iter() {
            w.notify_one();
        }
        ErrorKind::Reset
    }

    /// Reads the next whole reply, that of command `ticket`. When no command was written
    /// after it (read once the reply is whole: a command's ticket is taken before it is
    /// written, so before any answer to it), anything after the reply is the server
    /// answering twice.
    async fn reply(&self, ticket: u64, keep: Keep) -> Result<Reply, ErrorKind> {
        let mut inc = self.read.lock().await;
        let mut parse = Parse {
            max: self.max_reply,
            ..Parse::default()
        };
        loop {
            let start = inc.start;
            match parse.more(&inc.buf[start..]) {
                Ok(Some(end)) => {
                    let kept = (keep == Keep::All).then(|| {
                        let mut k = Box::new(Kept::new(keep));
                        let (text, cut) = text_of(&inc.buf[start..start + end]);
                        k.take_body(&text);
                        k.cut |= cut;
                        k
                    });
                    inc.start += end;
                    if inc.start == inc.buf.len() {
                        inc.buf.clear();
                        inc.buf.shrink_to(READ_BUFFER);
                        inc.start = 0;
                    } else if self.tickets.get() == ticket + 1 {
                        return Err(self.broken(ErrorKind::Protocol));
                    }
                    return Ok(Reply {
                        kept,
                        ..parse.reply(end)
                    });
                }
                Ok(None) => {}
                Err(()) => return Err(self.broken(ErrorKind::Protocol)),
            }
            self.read_more(&mut inc).await?;
        }
    }

    /// Reads what the server sent next into `inc`'s buffer (after the replies already
    /// taken, which go first when room is short); an end or an error breaks the link.
    async fn read_more(&self, inc: &mut Incoming) -> Result<(), ErrorKind> {
        use tokio::io::AsyncReadExt;
        if inc.start > 0 && inc.buf.len() + READ_BUFFER > inc.buf.capacity() {
            inc.buf.drain(..inc.start);
            inc.start = 0;
        }
        // Into the buffer's spare room: nothing is zeroed first.
        inc.buf.reserve(READ_BUFFER);
        let Incoming { half, buf, .. } = inc;
        match half.read_buf(buf).await {
            Ok(0) => Err(self.broke()),
            Ok(_) => Ok(()),
            Err(e) => Err(self.broken(super::io_kind(&e))),
        }
    }

    /// Reads the replies of a batch's commands in flight (ticket order) until `replies`
    /// holds `want` (or none is in flight), then every one whole in what was read,
    /// pushed onto `replies`. Bytes past the last command's reply are the server
    /// answering one twice: that command's is then a `protocol` error, not a reply.
    /// Dropped while it waits for the server, it loses nothing: what was read stays in
    /// the buffer, each reply taken is in `replies`.
    async fn replies(&self, replies: &mut Vec<Reply>, want: usize) -> Result<(), ErrorKind> {
        let mut inc = self.read.lock().await;
        let fresh = || Parse {
            max: self.max_reply,
            ..Parse::default()
        };
        let mut parse = fresh();
        loop {
            while self.serving.get() < self.tickets.get() {
                let start = inc.start;
                match parse.more(&inc.buf[start..]) {
                    Ok(Some(end)) => {
                        inc.start += end;
                        self.serving.set(self.serving.get() + 1);
                        replies.push(parse.reply(end));
                        parse = fresh();
                    }
                    Ok(None) => break,
                    Err(()) => return Err(self.broken(ErrorKind::Protocol)),
                }
            }
            if inc.start == inc.buf.len() {
                inc.buf.clear();
                inc.buf.shrink_to(READ_BUFFER);
                inc.start = 0;
            } else if self.serving.get() == self.tickets.get() {
                replies.pop();
                return Err(self.broken(ErrorKind::Protocol));
            }
            if replies.len() >= want || self.serving.get() == self.tickets.get() {
                return Ok(());
            }
            self.read_more(&mut inc).await?;
        }
    }

    /// Writes the outgoing bytes until none are left, as the one flusher: the commands
    /// other handles add meanwhile go in the same writes (pipelining costs a `send(2)`
    /// per batch, not per command). A shared link first lets the handles ready now add
    /// theirs.
    async fn flush(&self, shared: bool) -> Result<(), ErrorKind> {
        use tokio::io::AsyncWriteExt;
        self.flushing.set(true);
        if shared {
            tokio::task::yield_now().await;
        }
        let mut spare = Vec::new();
        let done = loop {
            std::mem::swap(&mut *self.out.borrow_mut(), &mut spare);
            if spare.is_empty() {
                break Ok(());
            }
            let Some(mut w) = self.write.take() else {
                break Err(ErrorKind::Reset);
            };
            let wrote = async {
                w.write_all(&spare).await?;
                w.flush().await
            }
            .await;
            self.write.set(Some(w));
            spare.clear();
            if let Err(e) = wrote {
                break Err(self.broken(super::io_kind(&e)));
            }
        };
        self.flushing.set(false);
        done
    }

    fn broken(&self, kind: ErrorKind) -> ErrorKind {
        self.broke();
        kind
    }
}

/// A handle on a connection: its own buffers, the link shared with the handles that
/// pipeline beside it (`--streams`).
struct Conn {
    link: Rc<Link>,
    /// Woken when this handle's command is the next to read its reply.
    own: Rc<tokio::sync::Notify>,
    args: Arc<(Vec<Text>, RandomPool)>,
    /// The command being sent.
    write: Vec<u8>,
    /// Each word of the workload's command, rendered for this unit.
    rendered: Vec<Vec<u8>>,
}

impl Conn {
    /// A handle on `link` that sends the command `args` renders.
    fn on(link: Rc<Link>, args: Arc<(Vec<Text>, RandomPool)>) -> Conn {
        Conn {
            link,
            own: Rc::new(tokio::sync::Notify::new()),
            args,
            write: Vec::with_capacity(256),
            rendered: Vec::new(),
        }
    }

    /// Sends what is in `write` and reads the reply to it, in its turn, keeping it as
    /// `keep` asks.
    async fn exchange(&mut self, keep: Keep) -> Result<Reply, ErrorKind> {
        let link = &*self.link;
        if link.closed.get() {
            return Err(ErrorKind::Reset);
        }
        // The ticket and the command's place in the outgoing bytes are taken together,
        // so the wire's order is the tickets'.
        let ticket = link.tickets.get();
        link.tickets.set(ticket + 1);
        link.waiting.borrow_mut().push_back(self.own.clone());
        link.out.borrow_mut().extend_from_slice(&self.write);
        if !link.flushing.get() {
            link.flush(Rc::strong_count(&self.link) > 1).await?;
        }
        // A permit left by an earlier turn only makes the check run again.
        loop {
            if link.closed.get() {
                return Err(ErrorKind::Reset);
            }
            if link.serving.get() == ticket {
                break;
            }
            self.own.notified().await;
        }
        let reply = link.reply(ticket, keep).await;
        link.serving.set(ticket + 1);
        let mut waiting = link.waiting.borrow_mut();
        waiting.pop_front();
        if let Some(next) = waiting.front() {
            next.notify_one();
        }
        reply
    }
}

/// The workload's command for its `seq`th unit, its words rendered into `rendered`,
/// encoded at the end of `out`.
fn render(
    args: &(Vec<Text>, RandomPool),
    rendered: &mut Vec<Vec<u8>>,
    seq: u64,
    out: &mut Vec<u8>,
) {
    let (args, random) = args;
    rendered.resize_with(args.len(), Vec::new);
    let vars = Vars {
        client: 0,
        seq,
        row: None,
        random,
        values: &[],
    };
    for (t, word) in args.iter().zip(rendered.iter_mut()) {
        word.clear();
        t.render(&vars, word);
    }
    encode(rendered.iter().map(Vec::as_slice), out);
}

/// A connection of the closed model's batches: its commands go straight into the
/// link's outgoing bytes, a turn writes them in one write and reads the replies (while
/// it writes).
impl Batch for Conn {
    fn queue(&mut self, seq: u64) {
        let link = &*self.link;
        link.tickets.set(link.tickets.get() + 1);
        render(
            &self.args,
            &mut self.rendered,
            seq,
            &mut link.out.borrow_mut(),
        );
    }

    fn turn<'a>(&'a mut self, replies: &'a mut Vec<Reply>) -> Fut<'a, Result<(), ErrorKind>> {
        Box::pin(async move {
            let link = &*self.link;
            if link.closed.get() {
                return Err(ErrorKind::Reset);
            }
            // The replies are read while the commands are written: a server that stops
            // reading while its replies are not read (its output full) would otherwise
            // wait on the write as the write waits on it, until the timeout.
            let flush = link.flush(false);
            tokio::pin!(flush);
            loop {
                if link.serving.get() == link.tickets.get() {
                    (&mut flush).await?;
                    break;
                }
                let want = replies.len() + 1;
                tokio::select! {
                    biased;
                    wrote = &mut flush => {
                        wrote?;
                        break;
                    }
                    read = link.replies(replies, want) => read?,
                }
            }
            link.replies(replies, 1).await
        })
    }
}

impl Connection for Conn {
    fn fd(&self) -> RawFd {
        self.link.fd
    }

    fn batch(&mut self) -> Option<&mut dyn Batch> {
        Some(self)
    }

    fn is_closed(&self) -> bool {
        self.link.closed.get()
    }

    fn share(&self) -> Option<Box<dyn Connection>> {
        Some(Box::new(Conn::on(self.link.clone(), self.args.clone())))
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
            self.write.clear();
            match body {
                // A scenario step's body, rendered by the scenario: its words.
                Some(b) => {
                    let text = String::from_utf8_lossy(&b);
                    let words = words(&text).map_err(|_| ErrorKind::Protocol)?;
                    encode(words.iter().map(|w| w.as_bytes()), &mut self.write);
                }
                None => render(&self.args, &mut self.rendered, seq, &mut self.write),
            }
            self.exchange(keep).await
        })
    }

    fn goodbye(self: Box<Self>) -> Fut<'static, ()> {
        Box::pin(async move {
            // The last handle says QUIT; the socket closes when the link is dropped.
            if Rc::strong_count(&self.link) == 1 && !self.link.closed.get() {
                use tokio::io::AsyncWriteExt;
                let mut quit = Vec::new();
                encode([&b"QUIT"[..]].into_iter(), &mut quit);
                if let Some(mut w) = self.link.write.take() {
                    let _ = w.write_all(&quit).await;
                }
            }
        })
    }
}

/// A reply read as it arrives: each complete item is parsed once, so a reply that comes
/// in many reads costs no more than one that comes in one.
#[derive(Default)]
struct Parse {
    /// Bytes of the reply parsed so far.
    at: usize,
    /// Items still expected by each open array, innermost last.
    open: Vec<u64>,
    /// The first word of the reply's error, when it is one.
    error: Option<Vec<u8>>,
    started: bool,
    /// The largest reply it accepts ([`MAX_REPLY`] unless the link's share is less).
    max: usize,
}

impl Parse {
    /// The reply whole at `end`: a success, or an error counted by its first word.
    fn reply(&self, end: usize) -> Reply {
        let status = self.error.as_ref().map_or(0, |word| {
            ERRORS
                .iter()
                .find(|e| e.0.as_bytes() == word.as_slice())
                .map_or(OTHER_ERROR, |e| e.1)
        });
        Reply {
            bytes: end as u64,
            ..Reply::new(status, status == 0)
        }
    }

    fn max(&self) -> usize {
        if self.max == 0 {
            MAX_REPLY
        } else {
            self.max
        }
    }

    /// Parses what `buf` holds beyond what was parsed: the reply's end when it is whole,
    /// `None` when more must be read, `Err` when it breaks the protocol or its bounds.
    fn more(&mut self, buf: &[u8]) -> Result<Option<usize>, ()> {
        loop {
            let rest = &buf[self.at..];
            let Some(eol) = line_end(&rest[..rest.len().min(MAX_LINE + 2)]) else {
                return if rest.len() > MAX_LINE + 1 {
                    Err(())
                } else {
                    Ok(None)
                };
            };
            let line = &rest[..eol];
            let (&kind, value) = line.split_first().ok_or(())?;
            let number = || -> Result<i64, ()> {
                std::str::from_utf8(value)
                    .ok()
                    .and_then(|v| v.parse().ok())
                    .ok_or(())
            };
            let top = !self.started;
            self.started = true;
            let mut used = eol + 2;
            let mut items = 0u64;
            match kind {
                b'+' | b':' | b'_' | b'#' | b',' | b'(' => {}
                b'-' => {
                    if top {
                        self.error =
                            Some(value.split(|c| *c == b' ').next().unwrap_or(b"").to_vec());
                    }
                }
                b'$' | b'!' | b'=' => {
                    let n = number()?;
                    if n >= 0 {
                        let n = usize::try_from(n).map_err(|_| ())?;
                        if (self.at + used).saturating_add(n).saturating_add(2) > self.max() {
                            return Err(());
                        }
                        if rest.len() < used + n + 2 {
                            self.started = !top;
                            return Ok(None);
                        }
                        if &rest[used + n..used + n + 2] != b"\r\n" {
                            return Err(());
                        }
                        if top && kind == b'!' {
                            let e = &rest[used..used + n];
                            self.error =
                                Some(e.split(|c| *c == b' ').next().unwrap_or(b"").to_vec());
                        }
                        used += n + 2;
                    }
                }
                b'*' | b'~' | b'>' | b'%' => {
                    let n = number()?;
                    if n > 0 {
                        items = if kind == b'%' { 2 * n as u64 } else { n as u64 };
                    }
                }
                _ => return Err(()),
            }
            self.at += used;
            if self.at > self.max() {
                return Err(());
            }
            if items > 0 {
                if self.open.len() >= MAX_DEPTH {
                    return Err(());
                }
                self.open.push(items);
                continue;
            }
            // A whole item: it ends the arrays it completes.
            loop {
                match self.open.last_mut() {
                    None => return Ok(Some(self.at)),
                    Some(left) => {
                        *left -= 1;
                        if *left > 0 {
                            break;
                        }
                        self.open.pop();
                    }
                }
            }
        }
    }
}

/// Where the first CRLF of `b` is (a byte search: a reply of 4 million items has as
/// many lines).
fn line_end(b: &[u8]) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = memchr::memchr(b'\r', &b[from..]) {
        let at = from + i;
        if b.get(at + 1) == Some(&b'\n') {
            return Some(at);
        }
        from = at + 1;
    }
    None
}

/// A whole reply (checked by [`Parse`]) as a flow reads it: a simple or bulk string,
/// an error, a number or a boolean as its text, a null as nothing, an array, set, push
/// or map as JSON (`["a",1,null]`, `{"f":"v"}`). A reply over [`MAX_KEPT`] bytes is
/// not made whole (4 million items took 376 MB as JSON values): a bulk string gives
/// its first [`MAX_KEPT`] bytes, an array nothing; `true` says it was cut.
fn text_of(reply: &[u8]) -> (Vec<u8>, bool) {
    use serde_json::Value;
    if reply.len() > MAX_KEPT {
        let eol = memchr::memmem::find(reply, b"\r\n").unwrap_or(0);
        let text = match reply.first() {
            Some(b'$' | b'+' | b'-') => reply.get(eol + 2..).unwrap_or_default(),
            _ => &[],
        };
        return (text[..text.len().min(MAX_KEPT)].to_vec(), true);
    }
    let text = match value(reply, &mut 0) {
        Some(Value::String(s)) => s.into_bytes(),
        Some(Value::Null) | None => Vec::new(),
        Some(v @ (Value::Array(_) | Value::Object(_))) => {
            serde_json::to_vec(&v).unwrap_or_default()
        }
        Some(v) => v.to_string().into_bytes(),
    };
    (text, false)
}

/// The item at `*at` of a whole reply, and `*at` moved past it.
fn value(buf: &[u8], at: &mut usize) -> Option<serde_json::Value> {
    use serde_json::Value;
    let rest = buf.get(*at..)?;
    let eol = rest.windows(2).position(|w| w == b"\r\n")?;
    let (&kind, line) = rest[..eol].split_first()?;
    let text = String::from_utf8_lossy(line).into_owned();
    *at += eol + 2;
    let count = || text.parse::<i64>().ok();
    Some(match kind {
        b'+' | b'-' | b'(' => Value::String(text),
        b':' => count().map_or(Value::String(text.clone()), Value::from),
        b',' => text
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map_or(Value::String(text.clone()), Value::Number),
        b'#' => Value::Bool(text == "t"),
        b'_' => Value::Null,
        b'$' | b'!' | b'=' => match count()? {
            n if n < 0 => Value::Null,
            n => {
                let data = buf.get(*at..*at + n as usize)?;
                *at += n as usize + 2;
                let data = if kind == b'=' && data.len() >= 4 {
                    &data[4..]
                } else {
                    data
                };
                Value::String(String::from_utf8_lossy(data).into_owned())
            }
        },
        b'*' | b'~' | b'>' => match count()? {
            n if n < 0 => Value::Null,
            n => Value::Array((0..n).map(|_| value(buf, at)).collect::<Option<_>>()?),
        },
        b'%' => {
            let mut map = serde_json::Map::new();
            for _ in 0..count()?.max(0) {
                let k = match value(buf, at)? {
                    Value::String(s) => s,
                    other => other.to_string(),
                };
                map.insert(k, value(buf, at)?);
            }
            Value::Object(map)
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_reads_as_text_or_json() {
        for (wire, text) in [
            (&b"+OK\r\n"[..], "OK"),
            (
                b"-WRONGTYPE Operation against a key\r\n",
                "WRONGTYPE Operation against a key",
            ),
            (b":42\r\n", "42"),
            (b"$5\r\nhello\r\n", "hello"),
            (b"$-1\r\n", ""),
            (b"_\r\n", ""),
            (b"#t\r\n", "true"),
            (b",1.5\r\n", "1.5"),
            (b"*3\r\n$1\r\na\r\n:1\r\n$-1\r\n", r#"["a",1,null]"#),
            (b"*2\r\n*1\r\n+x\r\n*0\r\n", r#"[["x"],[]]"#),
            (b"%1\r\n$1\r\nf\r\n$1\r\nv\r\n", r#"{"f":"v"}"#),
            (b"=8\r\ntxt:abcd\r\n", "abcd"),
        ] {
            assert_eq!(
                String::from_utf8(text_of(wire).0).unwrap(),
                text,
                "{wire:?}"
            );
        }
    }

    fn whole(bytes: &[u8]) -> Result<Option<usize>, ()> {
        Parse::default().more(bytes)
    }

    #[test]
    fn a_scenario_s_quoted_words_read_back_whole() {
        // What `Scenario::split_bodies` writes: each word quoted by `quote_word`.
        let mut body = Vec::new();
        for w in ["SET", "k:v EX 1\r\n\"q", "a\\b", ""] {
            if !body.is_empty() {
                body.push(b' ');
            }
            crate::load::template::quote_word(w.as_bytes(), &mut body);
        }
        let text = String::from_utf8(body).unwrap();
        assert_eq!(
            words(&text).unwrap(),
            ["SET", "k:v EX 1\r\n\"q", "a\\b", ""]
        );
    }

    #[test]
    fn words_split_at_spaces_and_quotes_keep_one() {
        assert_eq!(words("SET k{{seq}}  v").unwrap(), ["SET", "k{{seq}}", "v"]);
        assert_eq!(
            words("SET k{{seq}} x{{random 64}}y").unwrap(),
            ["SET", "k{{seq}}", "x{{random 64}}y"]
        );
        assert_eq!(
            words(r#"SET "a key" "say \"hi\"""#).unwrap(),
            ["SET", "a key", "say \"hi\""]
        );
        assert!(words("  ").is_err());
        assert!(words("SET \"open").is_err());
    }

    #[test]
    fn a_command_is_an_array_of_bulk_strings() {
        let mut out = Vec::new();
        encode([&b"SET"[..], b"k1", b""].into_iter(), &mut out);
        assert_eq!(out, b"*3\r\n$3\r\nSET\r\n$2\r\nk1\r\n$0\r\n\r\n");
    }

    #[test]
    fn every_reply_type_is_read_whole_and_no_further() {
        for r in [
            &b"+OK\r\n"[..],
            b":42\r\n",
            b"$5\r\nhello\r\n",
            b"$-1\r\n",
            b"*-1\r\n",
            b"*0\r\n",
            b"*2\r\n$1\r\na\r\n*1\r\n:1\r\n",
            b"%1\r\n+k\r\n+v\r\n",
            b"_\r\n",
        ] {
            assert_eq!(
                whole(r),
                Ok(Some(r.len())),
                "{}",
                String::from_utf8_lossy(r)
            );
        }
        // Incomplete: more must be read; each item is parsed once.
        let mut p = Parse::default();
        let full = b"*2\r\n$5\r\nhello\r\n:7\r\n";
        assert_eq!(p.more(&full[..10]), Ok(None));
        assert_eq!(p.more(&full[..17]), Ok(None));
        assert_eq!(p.more(full), Ok(Some(full.len())));
    }

    #[test]
    fn an_error_reply_is_named_by_its_first_word() {
        let mut p = Parse::default();
        assert_eq!(
            p.more(b"-WRONGTYPE Operation against a key\r\n"),
            Ok(Some(36))
        );
        assert_eq!(p.error.as_deref(), Some(&b"WRONGTYPE"[..]));
        // An error inside an array (EXEC's) leaves the reply a success.
        let mut p = Parse::default();
        assert_eq!(p.more(b"*1\r\n-ERR x\r\n"), Ok(Some(12)));
        assert_eq!(p.error, None);
        assert_eq!(Resp.label(2), "error WRONGTYPE");
        assert_eq!(Resp.label(OTHER_ERROR), "error");
    }

    /// A server on loopback that answers its `i`th command with `answer(i)` (once it has
    /// read `per` bytes of commands; an empty answer closes the connection instead),
    /// then connects a handle to it.
    async fn served(answer: fn(usize) -> Vec<u8>, per: usize) -> Box<dyn Connection> {
        served_with(answer, per, "PING").await
    }

    /// [`served`], the handle sending `command`.
    async fn served_with(
        answer: fn(usize) -> Vec<u8>,
        per: usize,
        command: &str,
    ) -> Box<dyn Connection> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::task::spawn_local(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let (mut got, mut i) = (0, 0);
            let mut buf = [0u8; 4096];
            while let Ok(n) = s.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                got += n;
                while got >= per {
                    got -= per;
                    let a = answer(i);
                    if a.is_empty() {
                        // No answer: the server goes away.
                        return;
                    }
                    let _ = s.write_all(&a).await;
                    i += 1;
                }
            }
        });
        let (stream, fd) = super::super::open(addr, &None).await.unwrap();
        let words = words(command).unwrap();
        let args = words.iter().map(|w| Text::parse(w, &[]).unwrap()).collect();
        let args = Arc::new((args, RandomPool::new(1)));
        Box::new(Conn::on(Link::over(stream, fd, MAX_REPLY), args))
    }

    fn local<F: std::future::Future>(f: F) -> F::Output {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        tokio::task::LocalSet::new().block_on(&rt, f)
    }

    /// A command's future holds no buffer ([`super::super::unit_size`]).
    #[test]
    fn a_command_s_future_holds_no_buffer() {
        local(async {
            let mut conn = served(|_| b"+PONG\r\n".to_vec(), 14).await;
            let unit = conn.send(None, 0, Instant::now());
            let size = std::mem::size_of_val(&*unit);
            let most = super::super::unit_size::MOST;
            assert!(size < most, "a command's future is {size} bytes");
        });
    }

    #[test]
    fn pipelined_handles_each_read_their_own_reply_in_order() {
        local(async {
            // The ith PING (14 bytes) answered with i x's: each handle gets its own.
            let mut first = served(|i| format!("+{}\r\n", "x".repeat(i)).into_bytes(), 14).await;
            let mut others: Vec<_> = (0..7).map(|_| first.share().unwrap()).collect();
            let now = Instant::now();
            let mut sends = vec![first.send(None, 0, now)];
            sends.extend(others.iter_mut().map(|c| c.send(None, 0, now)));
            for (i, r) in futures_util::future::join_all(sends)
                .await
                .into_iter()
                .enumerate()
            {
                let r = r.unwrap();
                assert!(r.ok && r.bytes == i as u64 + 3, "{i}: {}", r.bytes);
            }
        });
    }

    /// A batch's turns until the replies of its `n` commands in flight came, or the
    /// error that ended them; never more replies than commands.
    async fn turns(c: &mut dyn Batch, n: usize) -> (Vec<Reply>, Option<ErrorKind>) {
        let mut all = Vec::new();
        while all.len() < n {
            let mut got = Vec::new();
            let r = c.turn(&mut got).await;
            assert!(got.len() + all.len() <= n, "more replies than commands");
            all.append(&mut got);
            if let Err(e) = r {
                return (all, Some(e));
            }
        }
        (all, None)
    }

    #[test]
    fn a_batch_reads_each_command_s_reply_in_order() {
        local(async {
            // The ith PING answered with i x's: the replies come back in the commands'
            // order, over as many turns as the reads take, and a turn adds what it
            // queued meanwhile.
            let mut conn = served(|i| format!("+{}\r\n", "x".repeat(i)).into_bytes(), 14).await;
            let b = conn.batch().unwrap();
            for seq in 0..8 {
                b.queue(seq);
            }
            let mut replies = Vec::new();
            assert_eq!(b.turn(&mut replies).await, Ok(()));
            assert!((1..=8).contains(&replies.len()));
            for seq in 8..12 {
                b.queue(seq);
            }
            let (more, err) = turns(b, 12 - replies.len()).await;
            assert_eq!(err, None);
            replies.extend(more);
            assert_eq!(replies.len(), 12);
            for (i, r) in replies.iter().enumerate() {
                assert!(
                    r.ok && r.status == 0 && r.bytes == i as u64 + 3,
                    "{i}: {}",
                    r.bytes
                );
            }
            // Nothing in flight: a turn reads nothing and waits for nothing.
            let mut none = Vec::new();
            assert_eq!(b.turn(&mut none).await, Ok(()));
            assert!(none.is_empty());
        });
    }

    #[test]
    fn a_batch_reads_while_it_writes() {
        local(async {
            // Large commands answered with larger replies by a server that reads no more
            // while its reply is not read: writing all before reading would wait on the
            // server as it waits on us (until the run's timeout).
            const VALUE: usize = 500_000;
            // *3, $3 SET, $1 k, $500000 and the value, each line ending in \r\n.
            const PER: usize = 4 + 9 + 7 + 9 + VALUE + 2;
            const REPLY: usize = 1 << 20;
            let command = format!("SET k {}", "v".repeat(VALUE));
            let mut conn = served_with(
                |_| {
                    let mut r = format!("${REPLY}\r\n").into_bytes();
                    r.resize(r.len() + REPLY, b'x');
                    r.extend_from_slice(b"\r\n");
                    r
                },
                PER,
                &command,
            )
            .await;
            let b = conn.batch().unwrap();
            for seq in 0..40 {
                b.queue(seq);
            }
            let done = tokio::time::timeout(std::time::Duration::from_secs(20), turns(b, 40)).await;
            let (replies, err) = done.expect("the batch waited on the server");
            assert_eq!(err, None);
            assert_eq!(replies.len(), 40);
            assert!(replies.iter().all(|r| r.ok && r.bytes == REPLY as u64 + 12));
        });
    }

    #[test]
    fn a_batch_s_error_replies_are_counted_by_their_word() {
        local(async {
            let mut conn = served(
                |i| match i % 2 {
                    0 => b"+OK\r\n".to_vec(),
                    _ => b"-WRONGTYPE no\r\n".to_vec(),
                },
                14,
            )
            .await;
            let b = conn.batch().unwrap();
            for seq in 0..4 {
                b.queue(seq);
            }
            let (replies, err) = turns(b, 4).await;
            assert_eq!(err, None);
            let statuses: Vec<_> = replies.iter().map(|r| (r.ok, r.status)).collect();
            assert_eq!(statuses, [(true, 0), (false, 2), (true, 0), (false, 2)]);
        });
    }

    #[test]
    fn a_batch_answered_twice_is_a_protocol_error() {
        local(async {
            // Each command answered twice: the first command's reply is the second's
            // command's; past the last command's, bytes nobody asked for.
            let mut conn = served(|_| b"+OK\r\n+OK\r\n".to_vec(), 14).await;
            let b = conn.batch().unwrap();
            b.queue(0);
            let (replies, err) = turns(b, 1).await;
            assert!(replies.is_empty());
            assert_eq!(err, Some(ErrorKind::Protocol));
            assert!(conn.is_closed());
            let b = conn.batch().unwrap();
            b.queue(1);
            assert_eq!(b.turn(&mut Vec::new()).await, Err(ErrorKind::Reset));
        });
    }

    #[test]
    fn a_batch_broken_midway_keeps_the_replies_that_came() {
        local(async {
            // Two answers, then the server goes: two replies, then the connection's
            // error for the third command.
            let mut conn = served(
                |i| match i {
                    0 | 1 => b"+OK\r\n".to_vec(),
                    _ => Vec::new(),
                },
                14,
            )
            .await;
            let b = conn.batch().unwrap();
            for seq in 0..5 {
                b.queue(seq);
            }
            let (replies, err) = turns(b, 5).await;
            assert_eq!(replies.len(), 2);
            assert_eq!(err, Some(ErrorKind::Reset));
            assert!(conn.is_closed());
        });
    }

    #[test]
    fn a_batch_s_malformed_reply_is_a_protocol_error() {
        local(async {
            let mut conn = served(
                |i| match i {
                    0 => b"+OK\r\n".to_vec(),
                    _ => b"?bad\r\n".to_vec(),
                },
                14,
            )
            .await;
            let b = conn.batch().unwrap();
            for seq in 0..3 {
                b.queue(seq);
            }
            let (replies, err) = turns(b, 3).await;
            assert_eq!(replies.len(), 1);
            assert_eq!(err, Some(ErrorKind::Protocol));
        });
    }

    #[test]
    fn a_server_that_answers_one_command_twice_is_a_protocol_error() {
        local(async {
            let mut c = served(|_| b"+OK\r\n+OK\r\n".to_vec(), 14).await;
            assert!(matches!(
                c.send(None, 0, Instant::now()).await,
                Err(ErrorKind::Protocol)
            ));
            assert!(c.is_closed());
            assert!(matches!(
                c.send(None, 1, Instant::now()).await,
                Err(ErrorKind::Reset)
            ));
        });
    }

    #[test]
    fn a_hostile_reply_is_refused_within_its_bounds() {
        // Deeper than MAX_DEPTH.
        let deep = b"*1\r\n".repeat(MAX_DEPTH + 1);
        assert_eq!(whole(&deep), Err(()));
        // A bulk larger than MAX_REPLY is refused before it is read.
        assert_eq!(whole(format!("${}\r\n", MAX_REPLY).as_bytes()), Err(()));
        // A line that never ends.
        assert_eq!(whole(&vec![b'+'; MAX_LINE + 8]), Err(()));
        // A bulk whose end is not CRLF, an unknown type, a bad length.
        assert_eq!(whole(b"$1\r\nab\r\n"), Err(()));
        assert_eq!(whole(b"?x\r\n"), Err(()));
        assert_eq!(whole(b"$x\r\n"), Err(()));
    }

    /// A server's bytes are not trusted: mutations of real replies (the corpus:
    /// tests/fixtures/fuzz/resp.txt), read in pieces as they would arrive, parse to a
    /// whole reply, to "more bytes" or to an error — never a panic — and a whole one
    /// reads as text.
    #[test]
    fn mutated_replies_never_panic_the_reader() {
        let corpus: Vec<Vec<u8>> = include_str!("../../../tests/fixtures/fuzz/resp.txt")
            .lines()
            .map(|l| l.replace("\\r\\n", "\r\n").into_bytes())
            .collect();
        let mut rng = crate::rng::Rng::new(51);
        for k in 0..6000 {
            let mut b = corpus[k % corpus.len()].clone();
            for _ in 0..1 + rng.index(4) {
                let at = rng.index(b.len() + 1);
                let which = rng.index(3);
                rng.mutate_bytes(&mut b, at, which);
            }
            let mut parse = Parse::default();
            let mut upto = 0;
            while upto < b.len() {
                upto = (upto + 1 + rng.index(8)).min(b.len());
                match parse.more(&b[..upto]) {
                    Ok(Some(end)) => {
                        let _ = text_of(&b[..end]);
                        break;
                    }
                    Ok(None) => {}
                    Err(()) => break,
                }
            }
        }
    }

    #[test]
    fn a_reply_too_large_to_keep_is_cut_not_made_whole() {
        let items = 400_000; // 1.6 MB of `:1`: over what a flow keeps
        let mut array = format!("*{items}\r\n").into_bytes();
        for _ in 0..items {
            array.extend_from_slice(b":1\r\n");
        }
        assert_eq!(whole(&array), Ok(Some(array.len())));
        assert_eq!(text_of(&array), (Vec::new(), true));
        let n = MAX_KEPT + 10;
        let mut bulk = format!("${n}\r\n").into_bytes();
        bulk.extend(std::iter::repeat_n(b'v', n));
        bulk.extend_from_slice(b"\r\n");
        let (text, cut) = text_of(&bulk);
        assert!(cut && text.len() == MAX_KEPT && text.iter().all(|&c| c == b'v'));
        // A connection's share of the budget bounds the reply it reads.
        let mut share = Parse {
            max: super::super::reply_share(64, MAX_REPLY),
            ..Parse::default()
        };
        assert_eq!(share.more(format!("${}\r\n", 2 << 20).as_bytes()), Err(()));
    }
}
