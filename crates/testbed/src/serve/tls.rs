//! A self-signed certificate for `serve --tls`, made at start, so that TLS can be tested
//! with no files to provide. The certificate is written out (PEM) so a client can trust
//! it explicitly instead of disabling verification.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio_rustls::TlsAcceptor;

/// Makes the certificate, writes it to `cert_out` (or a temporary file) and returns the
/// acceptor and the path.
pub fn acceptor(cert_out: Option<&Path>) -> std::io::Result<(TlsAcceptor, PathBuf)> {
    let names = vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        "::1".to_string(),
    ];
    let ck = rcgen::generate_simple_self_signed(names).map_err(std::io::Error::other)?;
    let path = match cert_out {
        Some(p) => p.to_path_buf(),
        None => std::env::temp_dir().join(format!("strainline-testbed-{}.pem", std::process::id())),
    };
    std::fs::write(&path, ck.cert.pem())?;
    let cert = CertificateDer::from(ck.cert.der().to_vec());
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(ck.signing_key.serialize_der()));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(std::io::Error::other)?
        .with_no_client_auth()
        .with_single_cert(vec![cert], key)
        .map_err(std::io::Error::other)?;
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok((TlsAcceptor::from(Arc::new(cfg)), path))
}
