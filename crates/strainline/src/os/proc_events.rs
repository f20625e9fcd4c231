//! The kernel's process events (the netlink process connector, `NETLINK_CONNECTOR`,
//! `CN_IDX_PROC`): forks, execs and exits of every process of the machine as they happen, so a
//! monitor learns its tree's new members without listing processes. Subscribing takes
//! CAP_NET_ADMIN in the initial user and pid namespaces; the kernel's acknowledgement of
//! the subscription is awaited, so a socket that would stay silent is never trusted.
//! The socket is non-blocking and drained by the caller; an overflow (`ENOBUFS`: events
//! were dropped) is reported, never hidden. Only forks, execs and exits are asked for (the
//! kernel filters, since 6.6; older kernels send every kind and the parser skips them).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

const NETLINK_CONNECTOR: libc::c_int = 11;
const CN_IDX_PROC: u32 = 1;
const CN_VAL_PROC: u32 = 1;
const NLMSG_HDRLEN: usize = 16;
const CN_MSG_LEN: usize = 20;
const NLMSG_DONE: u16 = 3;
const PROC_CN_MCAST_LISTEN: u32 = 1;
const PROC_EVENT_NONE: u32 = 0;
const PROC_EVENT_FORK: u32 = 1;
const PROC_EVENT_EXEC: u32 = 2;
const PROC_EVENT_EXIT: u32 = 0x8000_0000;
/// Datagrams read per system call, and the room for each (an event is 76 bytes; a
/// longer datagram is cut, and its cut message skipped by the parser).
const BATCH: usize = 64;
const SLOT: usize = 256;
/// CAP_NET_ADMIN's bit in the capability sets.
const CAP_NET_ADMIN: u32 = 12;

/// One event of interest. Pids are the kernel's (the initial pid namespace's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// `parent_tgid` (a process) made `child_pid`; a new process when `child_pid ==
    /// child_tgid`, else a thread.
    Fork {
        parent_tgid: u32,
        child_pid: u32,
        child_tgid: u32,
    },
    /// The process `tgid` called exec (from its thread `pid`).
    Exec { pid: u32, tgid: u32 },
    /// The thread `pid` of `tgid` ended (the process, when `pid == tgid`).
    Exit { pid: u32, tgid: u32 },
}

/// What one drain of the socket found.
#[derive(Debug, Default)]
pub struct Drained {
    pub events: Vec<Event>,
    /// The kernel dropped events (the socket's buffer was full): whatever happened
    /// since the last drain must be found by other means.
    pub overflow: bool,
}

/// Why the process connector is not used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unavailable {
    /// Without CAP_NET_ADMIN (not root, or the capability dropped).
    NoCapability,
    /// The kernel refused or never acknowledged the subscription (another namespace, a
    /// kernel without the connector).
    NotAcknowledged,
    /// The socket could not be made.
    Socket,
}

impl Unavailable {
    /// As the monitor's summary says it.
    pub fn describe(self) -> &'static str {
        match self {
            Unavailable::NoCapability => "no CAP_NET_ADMIN",
            Unavailable::NotAcknowledged => "the kernel did not acknowledge the subscription",
            Unavailable::Socket => "no netlink connector socket",
        }
    }
}

/// A subscription to the kernel's process events.
pub struct ProcEvents {
    fd: OwnedFd,
    buf: Vec<u8>,
}

/// Whether this process holds CAP_NET_ADMIN (its effective set, `/proc/self/status`).
pub fn has_net_admin() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let hex = s.lines().find_map(|l| l.strip_prefix("CapEff:"))?.trim();
            u64::from_str_radix(hex, 16).ok()
        })
        .is_some_and(|caps| caps & (1 << CAP_NET_ADMIN) != 0)
}

impl ProcEvents {
    /// Subscribes to forks, execs and exits, where permitted.
    pub fn open() -> Result<ProcEvents, Unavailable> {
        if !has_net_admin() {
            return Err(Unavailable::NoCapability);
        }
        // SAFETY: plain socket creation; a descriptor returned is ours alone.
        let fd = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_DGRAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                NETLINK_CONNECTOR,
            )
        };
        if fd < 0 {
            return Err(Unavailable::Socket);
        }
        // SAFETY: `fd` was just returned by socket() and is owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // A larger buffer (root may force it past rmem_max): the connector sees the whole
        // machine, and the monitor drains at most once a tick.
        let size: libc::c_int = 4 << 20;
        // SAFETY: `size` lives across the call and its length is given.
        unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVBUFFORCE,
                (&size as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            );
        }
        // SAFETY: an all-zero sockaddr_nl is valid; the fields are set below.
        let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        addr.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        addr.nl_groups = CN_IDX_PROC;
        // SAFETY: `addr` is a valid sockaddr_nl and its length is given.
        let rc = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&addr as *const libc::sockaddr_nl).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(Unavailable::Socket);
        }
        let mut me = ProcEvents {
            fd,
            buf: vec![0; BATCH * SLOT],
        };
        // The plain subscription first: the kernel answers it (to every listener; our
        // acknowledgement number tells ours), and its error says whether we may.
        let nonce = std::process::id() & 0x00ff_ffff;
        if me.listen(nonce, false).is_err() {
            return Err(Unavailable::Socket);
        }
        match me.await_ack(nonce, Duration::from_millis(500)) {
            Some(0) => {}
            _ => return Err(Unavailable::NotAcknowledged),
        }
        // Then the filtered one (kernel 6.6+: forks, execs and exits only). Its answer is
        // filtered out with the rest; a kernel without filters ignores it and sends
        // every kind of event, which the parser skips.
        let _ = me.listen(nonce, true);
        Ok(me)
    }

    fn listen(&self, nonce: u32, with_filter: bool) -> io::Result<()> {
        let msg = listen_message(nonce, with_filter);
        // SAFETY: an all-zero sockaddr_nl addresses the kernel (pid 0).
        let mut to: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        to.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        // SAFETY: `msg` and `to` live across the call, their lengths given.
        let n = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                msg.as_ptr().cast(),
                msg.len(),
                0,
                (&to as *const libc::sockaddr_nl).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Waits for the kernel's answer to our subscription: its error number, or `None`
    /// when none came in time.
    fn await_ack(&mut self, nonce: u32, within: Duration) -> Option<u32> {
        let end = Instant::now() + within;
        loop {
            let left = end.checked_duration_since(Instant::now())?;
            let mut pfd = libc::pollfd {
                fd: self.fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            let rc = unsafe { libc::poll(&mut pfd, 1, left.as_millis().max(1) as libc::c_int) };
            if rc <= 0 {
                return None;
            }
            loop {
                match self.recv() {
                    Ok(Some(n)) => {
                        if let Some(err) = parse_ack(&self.buf[..n], nonce) {
                            return Some(err);
                        }
                    }
                    Ok(None) => break,
                    // An overflow before the answer: the answer may be lost; wait on.
                    Err(_) => break,
                }
            }
        }
    }

    /// One datagram into the buffer: its length, `None` when there is none now.
    fn recv(&mut self) -> io::Result<Option<usize>> {
        // SAFETY: the buffer is valid for its length and ours for the call.
        let n = unsafe {
            libc::recv(
                self.fd.as_raw_fd(),
                self.buf.as_mut_ptr().cast(),
                self.buf.len(),
                libc::MSG_DONTWAIT,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::WouldBlock {
                return Ok(None);
            }
            if e.kind() == io::ErrorKind::Interrupted {
                return self.recv();
            }
            return Err(e);
        }
        Ok(Some(n as usize))
    }

    /// Everything waiting on the socket, without blocking, [`BATCH`] datagrams per
    /// system call (each event is one); events of other processes are left to the
    /// caller's cheap filter.
    pub fn drain(&mut self) -> Drained {
        let mut out = Drained::default();
        loop {
            match self.recv_batch() {
                Ok(lens) => {
                    for (i, &n) in lens.iter().enumerate() {
                        let at = i * SLOT;
                        parse_into(&self.buf[at..at + n.min(SLOT)], &mut out.events);
                    }
                    if lens.len() < BATCH {
                        return out;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return out,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // ENOBUFS: events were dropped; what is queued after it is still read.
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => out.overflow = true,
                Err(_) => {
                    out.overflow = true;
                    return out;
                }
            }
        }
    }

    /// Up to [`BATCH`] datagrams into the buffer's slots: their lengths.
    fn recv_batch(&mut self) -> io::Result<Vec<usize>> {
        // SAFETY: all-zero iovecs and mmsghdrs are valid; each is pointed below at its
        // own slot of the buffer, which outlives the call and is not otherwise touched.
        let mut iov: [libc::iovec; BATCH] = unsafe { std::mem::zeroed() };
        let mut hdrs: [libc::mmsghdr; BATCH] = unsafe { std::mem::zeroed() };
        let base = self.buf.as_mut_ptr();
        for i in 0..BATCH {
            // SAFETY: the buffer holds BATCH slots of SLOT bytes (see `open`).
            iov[i].iov_base = unsafe { base.add(i * SLOT) }.cast();
            iov[i].iov_len = SLOT;
            hdrs[i].msg_hdr.msg_iov = &mut iov[i];
            hdrs[i].msg_hdr.msg_iovlen = 1;
        }
        // SAFETY: `hdrs` and what they point at are valid for the call.
        let n = unsafe {
            libc::recvmmsg(
                self.fd.as_raw_fd(),
                hdrs.as_mut_ptr(),
                BATCH as libc::c_uint,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(hdrs[..n as usize]
            .iter()
            .map(|h| h.msg_len as usize)
            .collect())
    }
}

/// The subscription message: a netlink header, the connector's header (its
/// acknowledgement number `nonce`, which the kernel's answer carries plus one), and the
/// operation (with the kernel-side filter of event kinds when `with_filter`).
fn listen_message(nonce: u32, with_filter: bool) -> Vec<u8> {
    let payload: Vec<u8> = if with_filter {
        let mut p = PROC_CN_MCAST_LISTEN.to_ne_bytes().to_vec();
        p.extend_from_slice(&(PROC_EVENT_FORK | PROC_EVENT_EXEC | PROC_EVENT_EXIT).to_ne_bytes());
        p
    } else {
        PROC_CN_MCAST_LISTEN.to_ne_bytes().to_vec()
    };
    let total = NLMSG_HDRLEN + CN_MSG_LEN + payload.len();
    let mut m = Vec::with_capacity(total);
    m.extend_from_slice(&(total as u32).to_ne_bytes());
    m.extend_from_slice(&NLMSG_DONE.to_ne_bytes());
    m.extend_from_slice(&0u16.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes());
    m.extend_from_slice(&CN_IDX_PROC.to_ne_bytes());
    m.extend_from_slice(&CN_VAL_PROC.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes());
    m.extend_from_slice(&nonce.to_ne_bytes());
    m.extend_from_slice(&(payload.len() as u16).to_ne_bytes());
    m.extend_from_slice(&0u16.to_ne_bytes());
    m.extend_from_slice(&payload);
    m
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    let bytes = b.get(at..at.checked_add(4)?)?;
    Some(u32::from_ne_bytes(bytes.try_into().ok()?))
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    let bytes = b.get(at..at.checked_add(2)?)?;
    Some(u16::from_ne_bytes(bytes.try_into().ok()?))
}

/// The process-connector payloads (`struct proc_event`) of the netlink messages in one
/// datagram, with the connector's sequence and acknowledgement numbers; anything short,
/// of another connector or malformed ends the walk.
fn payloads(datagram: &[u8]) -> Vec<(u32, u32, &[u8])> {
    let mut out = Vec::new();
    let mut at = 0usize;
    while let Some(len) = u32_at(datagram, at) {
        let len = len as usize;
        let Some(msg) = at.checked_add(len).and_then(|end| datagram.get(at..end)) else {
            break;
        };
        if len < NLMSG_HDRLEN + CN_MSG_LEN {
            break;
        }
        let cn = &msg[NLMSG_HDRLEN..];
        let (Some(idx), Some(val), Some(seq), Some(ack), Some(dlen)) = (
            u32_at(cn, 0),
            u32_at(cn, 4),
            u32_at(cn, 8),
            u32_at(cn, 12),
            u16_at(cn, 16),
        ) else {
            break;
        };
        if idx == CN_IDX_PROC && val == CN_VAL_PROC {
            if let Some(data) = cn.get(CN_MSG_LEN..CN_MSG_LEN + dlen as usize) {
                out.push((seq, ack, data));
            }
        }
        // Netlink messages are 4-byte aligned in a datagram.
        let step = (len + 3) & !3;
        at = match at.checked_add(step) {
            Some(n) => n,
            None => break,
        };
    }
    out
}

/// The events of interest in one datagram, appended to `out`.
pub fn parse_into(datagram: &[u8], out: &mut Vec<Event>) {
    for (_, _, ev) in payloads(datagram) {
        // struct proc_event: what, cpu, timestamp_ns (u64), then the event's data.
        let Some(what) = u32_at(ev, 0) else { continue };
        let d = 16;
        match what {
            PROC_EVENT_FORK => {
                if let (Some(_), Some(parent_tgid), Some(child_pid), Some(child_tgid)) = (
                    u32_at(ev, d),
                    u32_at(ev, d + 4),
                    u32_at(ev, d + 8),
                    u32_at(ev, d + 12),
                ) {
                    out.push(Event::Fork {
                        parent_tgid,
                        child_pid,
                        child_tgid,
                    });
                }
            }
            PROC_EVENT_EXEC => {
                if let (Some(pid), Some(tgid)) = (u32_at(ev, d), u32_at(ev, d + 4)) {
                    out.push(Event::Exec { pid, tgid });
                }
            }
            PROC_EVENT_EXIT => {
                if let (Some(pid), Some(tgid)) = (u32_at(ev, d), u32_at(ev, d + 4)) {
                    out.push(Event::Exit { pid, tgid });
                }
            }
            _ => {}
        }
    }
}

/// The error number of the kernel's answer to our subscription sent with `nonce`, if
/// this datagram holds it (the answer goes to every listener: its acknowledgement
/// number, `nonce + 1`, tells ours).
fn parse_ack(datagram: &[u8], nonce: u32) -> Option<u32> {
    payloads(datagram).into_iter().find_map(|(_, ack, ev)| {
        (ack == nonce.wrapping_add(1) && u32_at(ev, 0)? == PROC_EVENT_NONE)
            .then(|| u32_at(ev, 16))?
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A datagram of one connector message carrying `event`.
    fn datagram(seq: u32, ack: u32, event: &[u8]) -> Vec<u8> {
        let total = NLMSG_HDRLEN + CN_MSG_LEN + event.len();
        let mut m = Vec::new();
        m.extend_from_slice(&(total as u32).to_ne_bytes());
        m.extend_from_slice(&NLMSG_DONE.to_ne_bytes());
        m.extend_from_slice(&[0; 10]);
        m.extend_from_slice(&CN_IDX_PROC.to_ne_bytes());
        m.extend_from_slice(&CN_VAL_PROC.to_ne_bytes());
        m.extend_from_slice(&seq.to_ne_bytes());
        m.extend_from_slice(&ack.to_ne_bytes());
        m.extend_from_slice(&(event.len() as u16).to_ne_bytes());
        m.extend_from_slice(&0u16.to_ne_bytes());
        m.extend_from_slice(event);
        m
    }

    fn event(what: u32, data: &[u32]) -> Vec<u8> {
        let mut e = what.to_ne_bytes().to_vec();
        e.extend_from_slice(&[0; 12]);
        for v in data {
            e.extend_from_slice(&v.to_ne_bytes());
        }
        e
    }

    #[test]
    fn forks_execs_and_exits_are_read_and_other_kinds_skipped() {
        let mut out = Vec::new();
        parse_into(
            &datagram(0, 0, &event(PROC_EVENT_FORK, &[10, 10, 11, 11])),
            &mut out,
        );
        parse_into(&datagram(0, 0, &event(2, &[11, 11])), &mut out);
        parse_into(&datagram(0, 0, &event(0x200, &[11, 11])), &mut out);
        parse_into(
            &datagram(0, 0, &event(PROC_EVENT_EXIT, &[11, 11, 0, 17, 10, 10])),
            &mut out,
        );
        assert_eq!(
            out,
            vec![
                Event::Fork {
                    parent_tgid: 10,
                    child_pid: 11,
                    child_tgid: 11
                },
                Event::Exec { pid: 11, tgid: 11 },
                Event::Exit { pid: 11, tgid: 11 }
            ]
        );
    }

    #[test]
    fn hostile_and_short_datagrams_never_panic() {
        let good = datagram(0, 0, &event(PROC_EVENT_FORK, &[1, 2, 3, 4]));
        let mut out = Vec::new();
        // Every prefix, every length field, garbage.
        for cut in 0..good.len() {
            parse_into(&good[..cut], &mut out);
        }
        for len in [0u32, 1, 15, 35, 36, 1000, u32::MAX] {
            let mut bad = good.clone();
            bad[..4].copy_from_slice(&len.to_ne_bytes());
            parse_into(&bad, &mut out);
        }
        let mut bad = good.clone();
        bad[NLMSG_HDRLEN + 16..NLMSG_HDRLEN + 18].copy_from_slice(&u16::MAX.to_ne_bytes());
        parse_into(&bad, &mut out);
        let mut x = 12345u32;
        for _ in 0..2000 {
            let junk: Vec<u8> = (0..(x % 200))
                .map(|_| {
                    x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                    (x >> 16) as u8
                })
                .collect();
            parse_into(&junk, &mut out);
            let _ = parse_ack(&junk, 7);
        }
        // The whole message alone parses; the truncated ones gave nothing.
        let mut whole = Vec::new();
        parse_into(&good, &mut whole);
        assert_eq!(whole.len(), 1);
    }

    #[test]
    fn two_messages_in_one_datagram_are_both_read() {
        let mut d = datagram(0, 0, &event(PROC_EVENT_EXIT, &[5, 5, 0, 0, 1, 1]));
        while !d.len().is_multiple_of(4) {
            d.push(0);
        }
        d.extend(datagram(0, 0, &event(PROC_EVENT_EXIT, &[6, 6, 0, 0, 1, 1])));
        let mut out = Vec::new();
        parse_into(&d, &mut out);
        assert_eq!(out.len(), 2);
    }

    #[test]
    fn only_our_acknowledgement_counts() {
        let ack = |seq, ackn, err| datagram(seq, ackn, &event(PROC_EVENT_NONE, &[err]));
        assert_eq!(parse_ack(&ack(99, 8, 0), 7), Some(0));
        assert_eq!(parse_ack(&ack(99, 8, 1), 7), Some(1));
        assert_eq!(parse_ack(&ack(99, 1, 0), 7), None);
        let listen = listen_message(7, true);
        assert_eq!(listen.len(), NLMSG_HDRLEN + CN_MSG_LEN + 8);
        assert_eq!(u32_at(&listen, 0), Some(listen.len() as u32));
    }
}

#[cfg(test)]
mod kernel_tests {
    use super::*;

    #[test]
    fn a_fork_and_its_exit_are_seen_where_permitted() {
        let mut ev = match ProcEvents::open() {
            Ok(ev) => ev,
            // Not permitted here: what the monitor then says is an e2e test's.
            Err(why) => {
                eprintln!("process connector not used: {}", why.describe());
                return;
            }
        };
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        let mut seen = Vec::new();
        let end = Instant::now() + Duration::from_secs(2);
        while Instant::now() < end && !seen.contains(&Event::Exit { pid, tgid: pid }) {
            seen.extend(ev.drain().events);
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(seen
            .iter()
            .any(|e| matches!(e, Event::Fork { child_pid, .. } if *child_pid == pid)));
        assert!(seen.contains(&Event::Exit { pid, tgid: pid }));
    }
}

#[cfg(test)]
mod batch_tests {
    use super::*;

    #[test]
    fn a_burst_longer_than_a_batch_is_drained_whole() {
        let Ok(mut ev) = ProcEvents::open() else {
            return;
        };
        let pids: Vec<u32> = (0..3 * BATCH)
            .map(|_| {
                let mut c = std::process::Command::new("true").spawn().unwrap();
                c.wait().unwrap();
                c.id()
            })
            .collect();
        std::thread::sleep(Duration::from_millis(50));
        let d = ev.drain();
        assert!(!d.overflow);
        for pid in pids {
            assert!(d.events.contains(&Event::Exit { pid, tgid: pid }), "{pid}");
        }
    }
}
