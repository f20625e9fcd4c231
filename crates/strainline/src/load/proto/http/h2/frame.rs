//! HTTP/2's frame layer (RFC 9113 §4, §6), as much as the load engine writes and
//! reads: frame types and flags, a frame's head, WINDOW_UPDATE, padding.

use crate::load::recorder::ErrorKind;

pub(super) const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// Our receive windows (stream and connection), h2load's default `-w 30 -W 30`.
pub(super) const WINDOW: u32 = (1 << 30) - 1;
/// The largest frame we accept: the protocol's default, which we do not raise.
pub(super) const MAX_FRAME: usize = 16_384;
/// Acknowledgements (of PING and SETTINGS) queued and not yet written at most: a server
/// that floods them without reading our answers closes the connection as `protocol`,
/// as nghttp2's `max_outbound_ack` (1,000) does since the 2019 ping and settings floods.
pub(super) const MAX_QUEUED_ACKS: usize = 1000;

pub(super) const DATA: u8 = 0x0;
pub(super) const HEADERS: u8 = 0x1;
pub(super) const RST_STREAM: u8 = 0x3;
pub(super) const SETTINGS: u8 = 0x4;
pub(super) const PUSH_PROMISE: u8 = 0x5;
pub(super) const PING: u8 = 0x6;
pub(super) const GOAWAY: u8 = 0x7;
pub(super) const WINDOW_UPDATE: u8 = 0x8;
pub(super) const CONTINUATION: u8 = 0x9;

pub(super) const END_STREAM: u8 = 0x1;
pub(super) const ACK: u8 = 0x1;
pub(super) const END_HEADERS: u8 = 0x4;
pub(super) const PADDED: u8 = 0x8;
pub(super) const PRIORITY: u8 = 0x20;

pub(super) fn frame_head(w: &mut Vec<u8>, len: usize, kind: u8, flags: u8, id: u32) {
    w.extend_from_slice(&(len as u32).to_be_bytes()[1..]);
    w.push(kind);
    w.push(flags);
    w.extend_from_slice(&id.to_be_bytes());
}

pub(super) fn window_update(w: &mut Vec<u8>, id: u32, n: u32) {
    frame_head(w, 4, WINDOW_UPDATE, 0, id);
    w.extend_from_slice(&n.to_be_bytes());
}

pub(super) fn be24(b: &[u8]) -> usize {
    (usize::from(b[0]) << 16) | (usize::from(b[1]) << 8) | usize::from(b[2])
}

/// A frame's payload without its padding.
pub(super) fn unpad(p: &[u8], flags: u8) -> Result<&[u8], ErrorKind> {
    if flags & PADDED == 0 {
        return Ok(p);
    }
    let pad = usize::from(*p.first().ok_or(ErrorKind::Protocol)?);
    if 1 + pad > p.len() {
        return Err(ErrorKind::Protocol);
    }
    Ok(&p[1..p.len() - pad])
}
