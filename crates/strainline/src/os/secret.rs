//! Secret files (an agent's token, `serve --token-file`), read by one rule as ssh reads
//! a private key: a regular file (a link to one is fine, as a Kubernetes Secret mounts
//! it) of at most [`MAX_SECRET_FILE`] bytes that other users can neither read nor
//! change (group-readable is allowed, for a Secret shared with a pod's `fsGroup`).
//! Devices, pipes and endless files are refused before a byte is read.

use std::path::Path;

/// The most a secret file may hold, bytes.
pub const MAX_SECRET_FILE: u64 = 4096;

/// The bytes of the secret file at `path`, named `what` in errors (e.g. "token file").
pub fn read(path: &Path, what: &str) -> crate::error::Result<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::PermissionsExt;
    let shown = path.display();
    let meta = std::fs::metadata(path).map_err(|e| format!("{what} {shown}: {e}"))?;
    if !meta.is_file() {
        return Err(crate::Error::usage(format!(
            "{what} {shown}: not a regular file (a device, a pipe or a directory): give a file holding the token"
        )));
    }
    if meta.len() > MAX_SECRET_FILE {
        return Err(crate::Error::usage(format!(
            "{what} {shown}: {} bytes, more than {MAX_SECRET_FILE}: a token is one line (`head -c 32 /dev/urandom | base64`)",
            meta.len()
        )));
    }
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o027 != 0 {
        return Err(crate::Error::usage(format!(
            "{what} {shown}: mode {mode:04o} lets other users {} the token: `chmod 600 {shown}`",
            if mode & 0o004 != 0 { "read" } else { "change" }
        )));
    }
    let mut text = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_SECRET_FILE + 1).read_to_end(&mut text))
        .map_err(|e| format!("{what} {shown}: {e}"))?;
    Ok(text)
}
