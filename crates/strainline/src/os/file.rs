//! Files a user names (a suite, a scenario, its CSV, a body, a certificate, a `.proto`),
//! read by one rule: a regular file (a link to one is fine) of at most a stated size (a
//! data file any: `load/feed.rs` reads it in bounded memory).
//! A device (`/dev/zero`), a FIFO or a directory is refused before a byte is read, so
//! that no path can hang a run or fill its memory; `check` and `run` read through here
//! alike.

use crate::error::Category;
use std::path::Path;

/// The most a suite, scenario, body or certificate file may hold: 64 MiB.
pub const MAX_INPUT: u64 = 64 << 20;

/// Whether `path` is a regular file of at most `max` bytes (its metadata if so); the
/// error names `what` (the key or flag that named it), the path and the fix.
pub fn check(path: &Path, what: &str, max: u64) -> crate::error::Result<std::fs::Metadata> {
    let shown = path.display();
    let meta = std::fs::metadata(path).usage_with(|e| format!("{what}: {shown}: {e}"))?;
    if !meta.is_file() {
        return Err(crate::Error::usage(format!(
            "{what}: {shown} is not a regular file (a device, a pipe or a directory): give a file"
        )));
    }
    if meta.len() > max {
        return Err(crate::Error::usage(format!(
            "{what}: {shown} holds {} bytes, more than {max}: give a smaller file",
            meta.len()
        )));
    }
    Ok(meta)
}

/// The bytes of `path`, checked by [`check`] with [`MAX_INPUT`].
pub fn read(path: &Path, what: &str) -> crate::error::Result<Vec<u8>> {
    check(path, what, MAX_INPUT)?;
    read_checked(path, what, MAX_INPUT)
}

/// The bytes of a file [`check`]ed already, read no further than `max` should it grow
/// meanwhile.
pub fn read_checked(path: &Path, what: &str, max: u64) -> crate::error::Result<Vec<u8>> {
    use std::io::Read;
    let mut out = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(max).read_to_end(&mut out))
        .usage_with(|e| format!("{what}: {}: {e}", path.display()))?;
    Ok(out)
}

/// [`read`] as UTF-8 text.
pub fn read_text(path: &Path, what: &str) -> crate::error::Result<String> {
    String::from_utf8(read(path, what)?)
        .map_err(|_| crate::Error::usage(format!("{what}: {} is not UTF-8 text", path.display())))
}

/// Makes a file strainline wrote for people to share (a report, a chart) readable as the
/// user's own umask says, as any tool's output would be: strainline writes everything
/// private first (`os::process::private_files`), and the store and tokens stay so.
pub fn share(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let base = if path.is_dir() { 0o777 } else { 0o666 };
    let mode = base & !(super::process::user_umask() as u32);
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_pipes_and_directories_are_refused_before_reading() {
        for p in ["/dev/zero", "/dev/null", "/tmp"] {
            let e = read(Path::new(p), "csv").unwrap_err().to_string();
            assert!(e.contains("is not a regular file"), "{e}");
        }
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid C string and mode.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert!(read(&fifo, "proto")
            .unwrap_err()
            .to_string()
            .contains("not a regular file"));
        let f = dir.path().join("f");
        std::fs::write(&f, "abc").unwrap();
        assert_eq!(read_text(&f, "x").unwrap(), "abc");
        assert!(check(&f, "x", 2)
            .unwrap_err()
            .to_string()
            .contains("3 bytes, more than 2"));
    }
}
