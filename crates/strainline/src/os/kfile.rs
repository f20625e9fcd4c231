//! Kernel files (`/proc`, cgroupfs) read whole through a descriptor kept open: `pread`
//! from offset 0 makes the kernel format the file afresh, and a read that returns less
//! than asked for has returned everything — so one system call usually does.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

/// Reads the rest of `file` into `buf` after the `len` bytes already in it (read from
/// its start), growing `buf` as needed; returns the file's whole length. `buf` keeps its
/// size between calls, so a caller that reuses it allocates only for a larger file.
pub fn read_on(file: &File, buf: &mut Vec<u8>, mut len: usize) -> io::Result<usize> {
    loop {
        if len == buf.len() {
            buf.resize((2 * len).max(4096), 0);
        }
        let want = buf.len() - len;
        let n = file.read_at(&mut buf[len..], len as u64)?;
        len += n;
        if n < want {
            return Ok(len);
        }
    }
}

/// Reads a whole kernel file from its start and hands its text to `parse`. Most of these
/// files are a line or a few, read every tick: one read into the stack, no allocation.
pub fn read_with<T>(f: &File, parse: impl FnOnce(&str) -> Option<T>) -> Option<T> {
    let mut small = [0u8; 512];
    let n = f.read_at(&mut small, 0).ok()?;
    if n < small.len() {
        return parse(std::str::from_utf8(&small[..n]).ok()?);
    }
    // A larger one (the `cgroup.procs` of a big tree): the rest follows into the heap.
    let mut buf = small.to_vec();
    let len = read_on(f, &mut buf, small.len()).ok()?;
    parse(std::str::from_utf8(&buf[..len]).ok()?)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_file_is_read_whole_from_any_start_and_any_buffer() {
        let dir = tempfile::tempdir().unwrap();
        for size in [0, 18, 512, 4096, 6000, 20_000] {
            let text: Vec<u8> = (0..size).map(|i| b'a' + (i % 26) as u8).collect();
            let path = dir.path().join(format!("f-{size}"));
            std::fs::write(&path, &text).unwrap();
            let f = std::fs::File::open(&path).unwrap();
            for start in [0, 7, 512] {
                let start = start.min(size);
                // Its first `start` bytes already read, into a buffer of that size.
                let mut buf = text[..start].to_vec();
                let len = super::read_on(&f, &mut buf, start).unwrap();
                assert_eq!(&buf[..len], &text[..], "{size} from {start}");
            }
            // A buffer reused, larger than the file.
            let mut buf = vec![b'x'; 30_000];
            let len = super::read_on(&f, &mut buf, 0).unwrap();
            assert_eq!(&buf[..len], &text[..], "{size} into a larger buffer");
        }
    }

    #[test]
    fn a_file_is_read_whole_whether_it_fits_the_stack_buffer_or_not() {
        let dir = tempfile::tempdir().unwrap();
        for lines in [3, 128, 1000] {
            // Pids of a big group: 6 bytes a line, 18 to 6,000 bytes in all.
            let text: String = (0..lines).map(|i| format!("{:05}\n", 10000 + i)).collect();
            let path = dir.path().join(format!("procs-{lines}"));
            std::fs::write(&path, &text).unwrap();
            let f = std::fs::File::open(&path).unwrap();
            let pids: Vec<u32> = super::read_with(&f, |t| {
                Some(t.lines().filter_map(|l| l.parse().ok()).collect())
            })
            .unwrap();
            assert_eq!(pids.len(), lines);
            assert_eq!(pids.last(), Some(&(10000 + lines as u32 - 1)));
        }
    }
}
