//! HPACK (RFC 7541), as much as a load generator needs: a request's header block
//! encoded once per template (static indexes and plain literals, no dynamic table), and
//! a response's `:status` found in its block (static index, literal or Huffman-coded).

use hyper::header::{HeaderName, HeaderValue, HOST, TE};

/// Reads an integer with an `n`-bit prefix (RFC 7541 §5.1) at `b[*at..]`.
pub(super) fn hpack_int(b: &[u8], at: &mut usize, n: u32) -> Option<usize> {
    let mask = (1usize << n) - 1;
    let mut v = usize::from(*b.get(*at)?) & mask;
    *at += 1;
    if v < mask {
        return Some(v);
    }
    let mut shift = 0;
    loop {
        let byte = *b.get(*at)?;
        *at += 1;
        v = v.checked_add(usize::from(byte & 0x7f).checked_shl(shift)?)?;
        if byte & 0x80 == 0 {
            return Some(v);
        }
        shift += 7;
        if shift > 28 {
            return None;
        }
    }
}

/// A string literal (RFC 7541 §5.2): its Huffman flag and its bytes as sent.
pub(super) fn hpack_str<'a>(b: &'a [u8], at: &mut usize) -> Option<(bool, &'a [u8])> {
    let huffman = *b.get(*at)? & 0x80 != 0;
    let len = hpack_int(b, at, 7)?;
    let s = b.get(*at..at.checked_add(len)?)?;
    *at += len;
    Some((huffman, s))
}

/// The `:status` of a response header block, decoded without a dynamic table (we
/// advertised a table size of 0). `None` when there is none, or it cannot be read.
pub(super) fn status_of(block: &[u8]) -> Option<u16> {
    let mut at = 0;
    while at < block.len() {
        let b = block[at];
        let value = if b & 0x80 != 0 {
            // Indexed: the static table's :status entries are 8..=14.
            let index = hpack_int(block, &mut at, 7)?;
            let code = [200, 204, 206, 304, 400, 404, 500];
            match index {
                8..=14 => return Some(code[index - 8]),
                0 | 62.. => return None, // nothing, or a dynamic entry we never allowed
                _ => continue,
            }
        } else if b & 0xe0 == 0x20 {
            hpack_int(block, &mut at, 5)?; // a table size update
            continue;
        } else {
            let prefix = if b & 0x40 != 0 { 6 } else { 4 };
            let index = hpack_int(block, &mut at, prefix)?;
            let name = match index {
                0 => Some(hpack_str(block, &mut at)?),
                _ => None,
            };
            let value = hpack_str(block, &mut at)?;
            let is_status = match name {
                Some((huffman, n)) => !huffman && n == b":status",
                None => (8..=14).contains(&index),
            };
            if !is_status {
                continue;
            }
            value
        };
        let (huffman, v) = value;
        return if huffman {
            status_huffman(v)
        } else {
            digits(v)
        };
    }
    None
}

pub(super) fn digits(v: &[u8]) -> Option<u16> {
    if v.len() != 3 || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(v).ok()?.parse().ok()
}

/// A status's three digits in HPACK's Huffman code (RFC 7541 Appendix B: `0`–`2` are
/// the 5-bit codes 0–2, `3`–`9` the 6-bit codes 0x19–0x1f), padded with ones.
pub(super) fn status_huffman(v: &[u8]) -> Option<u16> {
    let mut bits: u64 = 0;
    for &b in v.iter().take(7) {
        bits = bits << 8 | u64::from(b);
    }
    let total = 8 * v.len().min(7) as u32;
    let mut used = 0u32;
    let mut out = Vec::with_capacity(3);
    let peek = |used: u32, n: u32| -> Option<u64> {
        (used + n <= total).then(|| (bits >> (total - used - n)) & ((1 << n) - 1))
    };
    while out.len() < 3 {
        let five = peek(used, 5)?;
        if five <= 2 {
            out.push(b'0' + five as u8);
            used += 5;
            continue;
        }
        let six = peek(used, 6)?;
        if (0x19..=0x1f).contains(&six) {
            out.push(b'3' + (six - 0x19) as u8);
            used += 6;
            continue;
        }
        return None;
    }
    // What is left must be padding: fewer than 8 bits, all ones.
    let rest = total - used;
    if rest >= 8 || peek(used, rest)? != (1 << rest) - 1 {
        return None;
    }
    digits(&out)
}

/// Encodes a request's header block: pseudo-headers from the static table, the rest as
/// literals never put in a table (the same bytes for every request of a template).
pub fn encode(
    method: &str,
    https: bool,
    authority: &[u8],
    path: &str,
    headers: &[(HeaderName, HeaderValue)],
    content_length: Option<usize>,
) -> Vec<u8> {
    let mut w = Vec::with_capacity(64 + path.len());
    match method {
        "GET" => w.push(0x82),
        "POST" => w.push(0x83),
        m => literal(&mut w, 2, m.as_bytes()),
    }
    w.push(if https { 0x87 } else { 0x86 });
    let authority = (headers.iter())
        .find(|(k, _)| k == HOST)
        .map_or(authority, |(_, v)| v.as_bytes());
    literal(&mut w, 1, authority);
    match path {
        "/" => w.push(0x84),
        p => literal(&mut w, 4, p.as_bytes()),
    }
    if let Some(n) = content_length {
        literal(&mut w, 28, n.to_string().as_bytes());
    }
    for (k, v) in headers {
        let te_trailers = k == TE && v.as_bytes() == b"trailers";
        let connection_specific = matches!(
            k.as_str(),
            "host"
                | "connection"
                | "keep-alive"
                | "proxy-connection"
                | "transfer-encoding"
                | "upgrade"
                | "te"
                | "content-length"
        );
        if connection_specific && !te_trailers {
            continue;
        }
        w.push(0x00);
        put_str(&mut w, k.as_str().as_bytes());
        put_str(&mut w, v.as_bytes());
    }
    w
}

/// A literal header field without indexing whose name is static entry `index`.
pub(super) fn literal(w: &mut Vec<u8>, index: usize, value: &[u8]) {
    put_int(w, 0x00, 4, index);
    put_str(w, value);
}

pub(super) fn put_str(w: &mut Vec<u8>, s: &[u8]) {
    put_int(w, 0x00, 7, s.len());
    w.extend_from_slice(s);
}

pub(super) fn put_int(w: &mut Vec<u8>, high: u8, n: u32, v: usize) {
    let mask = (1usize << n) - 1;
    if v < mask {
        w.push(high | v as u8);
        return;
    }
    w.push(high | mask as u8);
    let mut v = v - mask;
    while v >= 0x80 {
        w.push((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    w.push(v as u8);
}
