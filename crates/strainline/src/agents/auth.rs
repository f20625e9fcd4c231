//! Who is on the other end of an agent connection. TLS encrypts; a shared token
//! authenticates both sides without certificates to distribute: each proves it knows
//! the token with an HMAC of the TLS session's exported keying material (RFC 5705), so
//! the token never crosses the wire and a proof cannot be replayed on another session —
//! a man in the middle holds two sessions with different keying material. The agent's
//! certificate is self-signed and made at start; the proofs, not the certificate, say
//! who it is.

use std::path::Path;

use ring::hmac;

/// The exporter label both sides use (RFC 5705 `label`).
const LABEL: &[u8] = b"EXPORTER-strainline-agent";

/// The shortest token accepted, bytes.
const MIN_TOKEN: usize = 16;

/// A shared secret, read from a file (surrounding whitespace ignored).
#[derive(Clone)]
pub struct Token(Vec<u8>);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(hidden)")
    }
}

impl Token {
    /// Reads the token from `path`, a secret file ([`crate::os::secret`]).
    pub fn read(path: &Path) -> crate::error::Result<Token> {
        let text = crate::os::secret::read(path, "token file")?;
        let t = text.trim_ascii().to_vec();
        if t.len() < MIN_TOKEN {
            return Err(crate::Error::usage(format!(
                "token file {}: {} bytes, fewer than {MIN_TOKEN}: make one with `head -c 32 /dev/urandom | base64 > {}` and give the same file to the agents",
                path.display(),
                t.len(),
                path.display()
            )));
        }
        Ok(Token(t))
    }

    #[cfg(test)]
    pub fn from_bytes(b: &[u8]) -> Token {
        Token(b.to_vec())
    }

    /// The proof that `role` ("coordinator" or "agent") knows the token, bound to the
    /// session whose keying material is `ekm`.
    pub fn proof(&self, role: &str, ekm: &[u8]) -> String {
        let key = hmac::Key::new(hmac::HMAC_SHA256, &self.0);
        let mut msg = role.as_bytes().to_vec();
        msg.push(0);
        msg.extend_from_slice(ekm);
        hex(hmac::sign(&key, &msg).as_ref())
    }

    /// Whether `proof` is `role`'s proof for this session (compared in constant time).
    pub fn verify(&self, role: &str, ekm: &[u8], proof: &str) -> bool {
        let key = hmac::Key::new(hmac::HMAC_SHA256, &self.0);
        let mut msg = role.as_bytes().to_vec();
        msg.push(0);
        msg.extend_from_slice(ekm);
        unhex(proof).is_some_and(|tag| hmac::verify(&key, &msg, &tag).is_ok())
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// The session's keying material, 32 bytes, from either side's TLS connection.
pub fn keying_material<D>(conn: &rustls::ConnectionCommon<D>) -> crate::error::Result<[u8; 32]> {
    conn.export_keying_material([0u8; 32], LABEL, None)
        .map_err(|e| crate::Error::usage(format!("TLS keying material: {e}")).because(e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proof_holds_for_its_role_session_and_token_only() {
        let t = Token::from_bytes(b"0123456789abcdef-secret");
        let ekm = [7u8; 32];
        let p = t.proof("coordinator", &ekm);
        assert!(t.verify("coordinator", &ekm, &p));
        assert!(!t.verify("agent", &ekm, &p), "a proof is for one role");
        assert!(!t.verify("coordinator", &[8u8; 32], &p), "and one session");
        let other = Token::from_bytes(b"0123456789abcdef-other!");
        assert!(!other.verify("coordinator", &ekm, &p), "and one token");
        assert!(!t.verify("coordinator", &ekm, "zz"));
    }

    /// A token file as the docs say to make one: only its owner can read it.
    fn private(f: &Path, text: &str) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::write(f, text).unwrap();
        std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o600)).unwrap();
    }

    #[test]
    fn an_insecure_or_endless_token_file_is_refused_with_the_fix() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("token");
        private(&f, "0123456789abcdef0123\n");
        assert!(Token::read(&f).is_ok());
        // Group-readable (a Secret shared through fsGroup) is fine; others are not.
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o640)).unwrap();
        assert!(Token::read(&f).is_ok());
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = Token::read(&f).err().unwrap().to_string();
        assert!(
            e.contains("mode 0644 lets other users read") && e.contains("chmod 600"),
            "{e}"
        );
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o620)).unwrap();
        assert!(Token::read(&f)
            .err()
            .unwrap()
            .to_string()
            .contains("change"));
        // A device that never ends, a directory, and a file too large to be a token.
        let e = Token::read(Path::new("/dev/zero"))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("not a regular file"), "{e}");
        assert!(Token::read(dir.path()).is_err());
        private(&f, &"x".repeat(5000));
        assert!(Token::read(&f)
            .err()
            .unwrap()
            .to_string()
            .contains("5000 bytes, more than 4096"));
    }

    #[test]
    fn a_short_token_is_refused_with_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("token");
        private(&f, "short\n");
        let e = Token::read(&f).err().unwrap().to_string();
        assert!(
            e.contains("5 bytes") && e.contains("head -c 32 /dev/urandom"),
            "{e}"
        );
        private(&f, "  0123456789abcdef0123\n");
        assert!(Token::read(&f).is_ok());
    }
}
