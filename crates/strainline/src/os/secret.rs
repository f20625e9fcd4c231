//! Secret files (an agent's token, `serve --token-file`), read by one rule as ssh reads
//! a private key: a regular file (a link to one is fine, as a Kubernetes Secret mounts
//! it) of at most [`MAX_SECRET_FILE`] bytes that other users can neither read nor
//! change (group-readable is allowed, for a Secret shared with a pod's `fsGroup`).
//! Devices, pipes and endless files are refused before a byte is read.

use std::path::Path;

/// The most a secret file may hold, bytes.
pub const MAX_SECRET_FILE: u64 = 4096;

/// The bytes of the secret file at `path`, named `what` in errors (e.g. "token file"):
/// a regular file of at most [`MAX_SECRET_FILE`] ([`super::file::check`]) that other
/// users can neither read nor change.
pub fn read(path: &Path, what: &str) -> crate::error::Result<Vec<u8>> {
    use std::os::unix::fs::PermissionsExt;
    let meta = super::file::check(path, what, MAX_SECRET_FILE)?;
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o027 != 0 {
        let shown = path.display();
        return Err(crate::Error::usage(format!(
            "{what} {shown}: mode {mode:04o} lets other users {} the token: `chmod 600 {shown}`",
            if mode & 0o004 != 0 { "read" } else { "change" }
        )));
    }
    super::file::read_checked(path, what, MAX_SECRET_FILE + 1)
}
