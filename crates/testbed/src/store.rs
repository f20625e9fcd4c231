//! `strainline-testbed store`: a tiny durable append-only record store for crash tests,
//! after the object-store seed's crash harness. Records go to `data`, commit markers to
//! `commits`. The safe protocol writes the record, fsyncs, then appends its marker in
//! one write: a kill at any moment leaves every committed record intact. `--unsafe`
//! appends the marker first (and fsyncs it) and only then writes the record in chunks,
//! so a kill in between leaves a committed record torn — which `verify` finds.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

const MAGIC: u32 = 0x5354_524c; // "STRL"
/// A commit marker: magic, sequence, offset, length, crc32 of the value, crc32 of these.
const MARKER: usize = 4 + 8 + 8 + 8 + 4 + 4;
/// The record header in `data`: magic, sequence, length.
const HEADER: usize = 4 + 8 + 8;
const CHUNK: usize = 4096;

fn marker_bytes(seq: u64, offset: u64, len: u64, crc: u32) -> [u8; MARKER] {
    let mut m = [0u8; MARKER];
    m[0..4].copy_from_slice(&MAGIC.to_le_bytes());
    m[4..12].copy_from_slice(&seq.to_le_bytes());
    m[12..20].copy_from_slice(&offset.to_le_bytes());
    m[20..28].copy_from_slice(&len.to_le_bytes());
    m[28..32].copy_from_slice(&crc.to_le_bytes());
    let own = crc32fast::hash(&m[..32]);
    m[32..36].copy_from_slice(&own.to_le_bytes());
    m
}

/// The value of record `seq`: a fixed pattern with the sequence number stamped at the
/// start (so that a record cannot pass for another), built into `buf`.
fn fill_value(buf: &mut Vec<u8>, seq: u64, len: usize) {
    if buf.len() != len {
        *buf = (0..len).map(|i| (i % 251) as u8).collect();
    }
    let n = len.min(8);
    buf[..n].copy_from_slice(&seq.to_le_bytes()[..n]);
}

/// Appends `count` records of `value_bytes` each; prints `committed N` every `every`.
pub fn write(
    dir: &Path,
    count: u64,
    value_bytes: usize,
    unsafe_mode: bool,
    every: u64,
) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let open = |name: &str| {
        OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join(name))
    };
    let mut data = open("data")?;
    let mut commits = open("commits")?;
    let start_seq = std::fs::metadata(dir.join("commits"))?.len() / MARKER as u64;
    let out = std::io::stdout();
    let mut v = Vec::new();
    for seq in start_seq..start_seq + count {
        fill_value(&mut v, seq, value_bytes);
        let crc = crc32fast::hash(&v);
        let offset = data.seek(SeekFrom::End(0))?;
        let mut header = Vec::with_capacity(HEADER);
        header.extend_from_slice(&MAGIC.to_le_bytes());
        header.extend_from_slice(&seq.to_le_bytes());
        header.extend_from_slice(&(value_bytes as u64).to_le_bytes());
        let marker = marker_bytes(seq, offset, value_bytes as u64, crc);
        if unsafe_mode {
            // The classic bug: the commit is made durable before the record exists.
            commits.write_all(&marker)?;
            commits.sync_data()?;
            data.write_all(&header)?;
            for chunk in v.chunks(CHUNK) {
                data.write_all(chunk)?;
            }
        } else {
            data.write_all(&header)?;
            for chunk in v.chunks(CHUNK) {
                data.write_all(chunk)?;
            }
            data.sync_data()?;
            commits.write_all(&marker)?;
            commits.sync_data()?;
        }
        if every > 0 && (seq + 1) % every == 0 {
            writeln!(out.lock(), "committed {}", seq + 1)?;
        }
    }
    Ok(())
}

/// Checks every invariant; returns what is wrong, or the number of committed records.
pub fn verify(dir: &Path) -> Result<u64, String> {
    let read = |name: &str| -> Result<Vec<u8>, String> {
        let mut b = Vec::new();
        match File::open(dir.join(name)) {
            Ok(mut f) => f.read_to_end(&mut b).map_err(|e| format!("{name}: {e}"))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
            Err(e) => return Err(format!("{name}: {e}")),
        };
        Ok(b)
    };
    let data = read("data")?;
    let commits = read("commits")?;
    // A trailing partial marker was never committed: it is invisible, not corrupt.
    let whole = commits.len() / MARKER;
    let mut expected_offset = None;
    let mut expect = Vec::new();
    for i in 0..whole {
        let m = &commits[i * MARKER..(i + 1) * MARKER];
        let u32_at = |o: usize| u32::from_le_bytes(m[o..o + 4].try_into().unwrap());
        let u64_at = |o: usize| u64::from_le_bytes(m[o..o + 8].try_into().unwrap());
        if u32_at(0) != MAGIC || crc32fast::hash(&m[..32]) != u32_at(32) {
            return Err(format!("commit marker {i} is corrupt"));
        }
        let (seq, offset, len, crc) = (u64_at(4), u64_at(12), u64_at(20), u32_at(28));
        if seq != i as u64 {
            return Err(format!(
                "commit marker {i} has sequence {seq}: markers out of order"
            ));
        }
        if let Some(e) = expected_offset {
            if offset < e {
                return Err(format!("record {seq} overlaps the one before it"));
            }
        }
        let (o, l) = (offset as usize, len as usize);
        let Some(rec) = data.get(o..o + HEADER + l) else {
            return Err(format!(
                "record {seq} is committed but torn: it needs bytes {o}..{} of data, which has {}",
                o + HEADER + l,
                data.len()
            ));
        };
        let h_seq = u64::from_le_bytes(rec[4..12].try_into().unwrap());
        if u32::from_le_bytes(rec[0..4].try_into().unwrap()) != MAGIC || h_seq != seq {
            return Err(format!(
                "record {seq} at offset {o}: header does not match its commit marker"
            ));
        }
        let v = &rec[HEADER..];
        fill_value(&mut expect, seq, l);
        if crc32fast::hash(v) != crc || v != expect.as_slice() {
            return Err(format!(
                "record {seq} at offset {o}: value does not match its checksum (torn write)"
            ));
        }
        expected_offset = Some(offset + (HEADER + l) as u64);
    }
    Ok(whole as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn safe_writes_verify_and_a_torn_record_is_found() {
        let dir = std::env::temp_dir().join(format!("sl-store-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        write(&dir, 10, 10_000, false, 0).unwrap();
        assert_eq!(verify(&dir), Ok(10));
        // Cut the data file inside the last record: a committed record is now torn.
        let f = OpenOptions::new()
            .write(true)
            .open(dir.join("data"))
            .unwrap();
        let len = f.metadata().unwrap().len();
        f.set_len(len - 100).unwrap();
        let e = verify(&dir).unwrap_err();
        assert!(e.contains("record 9 is committed but torn"), "{e}");
        // A half-written marker at the end was never committed: invisible, not corrupt.
        std::fs::remove_dir_all(&dir).unwrap();
        write(&dir, 3, 5000, false, 0).unwrap();
        let mut c = OpenOptions::new()
            .append(true)
            .open(dir.join("commits"))
            .unwrap();
        c.write_all(&[1, 2, 3]).unwrap();
        assert_eq!(verify(&dir), Ok(3));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
