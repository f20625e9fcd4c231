//! How a coordinator reaches an agent, and how an agent is reached: TLS over TCP (the
//! agent listens, `tls://HOST:PORT`) or ssh (`ssh://[USER@]HOST[:PORT][/PATH]` runs
//! `ssh … PATH agent --stdio` with the user's own ssh: no open port, ssh does the
//! authentication). Either way the result is one byte stream carrying [`super::wire`].

use crate::error::Category;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, BufReader, ReadHalf, WriteHalf};

use super::auth::{self, Token};
use super::wire::{self, FromAgent, ToAgent, PROTOCOL};

/// A byte stream both ways.
pub trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Stream for T {}

pub type Reader = BufReader<ReadHalf<Box<dyn Stream>>>;
pub type Writer = WriteHalf<Box<dyn Stream>>;

/// ALPN of the agent protocol over TLS.
const ALPN: &[u8] = b"strainline-agent";

/// How long connecting and the handshake may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Where an agent is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Address {
    Tls {
        host: String,
        port: u16,
    },
    Ssh {
        /// `[user@]host`.
        destination: String,
        port: Option<u16>,
        /// The strainline binary on that host.
        program: String,
    },
    /// `count` agents dial this address (`strainline agent --connect`, e.g. the pods
    /// of a Kubernetes Indexed Job).
    Listen {
        addr: String,
        count: usize,
    },
}

impl Address {
    /// The name reports use until the agent says its own.
    pub fn label(&self) -> String {
        match self {
            Address::Tls { host, port } => format!("{host}:{port}"),
            Address::Ssh { destination, .. } => destination.clone(),
            Address::Listen { addr, .. } => format!("listen://{addr}"),
        }
    }
}

/// `tls://HOST:PORT`, `HOST:PORT`, or `ssh://[USER@]HOST[:PORT][/PATH]`, comma-separated.
pub fn parse_list(list: &str) -> crate::error::Result<Vec<Address>> {
    let addrs: Vec<Address> = list
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(parse)
        .collect::<Result<_, _>>()?;
    if addrs.is_empty() {
        return Err(crate::Error::usage(
            "--agents: no agent given (expected e.g. tls://HOST:7461,ssh://USER@HOST)",
        ));
    }
    Ok(addrs)
}

fn parse(s: &str) -> crate::error::Result<Address> {
    let port_of = |p: &str| {
        p.parse::<u16>().ok().filter(|p| *p > 0).ok_or_else(|| {
            crate::Error::usage(format!("agent '{s}': '{p}' is not a port (1-65535)"))
        })
    };
    if let Some(rest) = s.strip_prefix("listen://") {
        let (addr, count) = rest
            .split_once("?count=")
            .ok_or_else(|| {
                format!(
                    "agent '{s}': how many agents dial in? (expected listen://HOST:PORT?count=N)"
                )
            })
            .usage()?;
        let count = count
            .parse::<usize>()
            .ok()
            .filter(|c| *c > 0)
            .ok_or_else(|| {
                crate::Error::usage(format!(
                    "agent '{s}': count '{count}' is not a positive number"
                ))
            })?;
        let port = addr.rsplit_once(':').map(|(_, p)| p).unwrap_or("");
        port_of(port)?;
        return Ok(Address::Listen {
            addr: addr.to_string(),
            count,
        });
    }
    if let Some(rest) = s.strip_prefix("ssh://") {
        let (hostpart, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        let (destination, port) = match hostpart.rsplit_once(':') {
            Some((d, p)) if !d.contains('[') || d.ends_with(']') => (d, Some(port_of(p)?)),
            _ => (hostpart, None),
        };
        if destination.is_empty() || destination.ends_with('@') {
            return Err(crate::Error::usage(format!(
                "agent '{s}': no host (expected ssh://[USER@]HOST[:PORT][/PATH])"
            )));
        }
        return Ok(Address::Ssh {
            destination: destination.to_string(),
            port,
            program: if path.len() > 1 {
                path.to_string()
            } else {
                "strainline".into()
            },
        });
    }
    let rest = s.strip_prefix("tls://").unwrap_or(s);
    if rest.contains("://") {
        return Err(crate::Error::usage(format!(
            "agent '{s}': unknown scheme (expected tls:// or ssh://)"
        )));
    }
    let (host, port) = rest.rsplit_once(':').ok_or_else(|| {
        crate::Error::usage(format!("agent '{s}': no port (expected tls://HOST:PORT)"))
    })?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() {
        return Err(crate::Error::usage(format!(
            "agent '{s}': no host (expected tls://HOST:PORT)"
        )));
    }
    Ok(Address::Tls {
        host: host.to_string(),
        port: port_of(port)?,
    })
}

/// A connected, authenticated agent.
pub struct Link {
    pub name: String,
    pub reader: Reader,
    pub writer: Writer,
    /// The ssh process, killed when the link is dropped.
    pub child: Option<tokio::process::Child>,
}

/// Connects to an agent and checks who it is: the protocol version, and over TLS the
/// token's proofs both ways.
pub async fn connect(addr: &Address, token: Option<&Token>) -> crate::error::Result<Link> {
    let label = addr.label();
    let fail = |e: crate::Error| e.context(format!("agent {label}"));
    tokio::time::timeout(CONNECT_TIMEOUT, open(addr, token))
        .await
        .map_err(|_| {
            fail(crate::Error::usage(format!(
                "no answer within {} s",
                CONNECT_TIMEOUT.as_secs()
            )))
        })?
        .map_err(fail)
}

async fn open(addr: &Address, token: Option<&Token>) -> crate::error::Result<Link> {
    let (stream, ekm, child): (Box<dyn Stream>, Option<[u8; 32]>, _) = match addr {
        Address::Tls { host, port } => {
            if token.is_none() {
                return Err(crate::Error::usage("a tls:// agent needs the shared token: --agent-token-file FILE (the file the agent was started with)"));
            }
            let tcp = tokio::net::TcpStream::connect((host.as_str(), *port))
                .await
                .usage_with(|e| {
                    format!("cannot connect: {e} (is `strainline agent --listen` running there?)")
                })?;
            let (tls, ekm) = tls_client(tcp).await?;
            (tls, Some(ekm), None)
        }
        Address::Ssh {
            destination,
            port,
            program,
        } => {
            let mut cmd = tokio::process::Command::new("ssh");
            cmd.args(["-o", "BatchMode=yes"]);
            if let Some(p) = port {
                cmd.arg("-p").arg(p.to_string());
            }
            cmd.arg(destination)
                .arg(program)
                .args(["agent", "--stdio"])
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::inherit())
                .kill_on_drop(true);
            let mut child = cmd.spawn().usage_with(|e| {
                format!("cannot run ssh: {e} (is the OpenSSH client installed?)")
            })?;
            crate::os::process::note_born(child.id().unwrap_or(0));
            let out = child.stdout.take().expect("piped");
            let inp = child.stdin.take().expect("piped");
            (Box::new(tokio::io::join(out, inp)), None, Some(child))
        }
        Address::Listen { .. } => {
            return Err(crate::Error::usage(
                "a listen:// address is accepted, not dialed",
            ))
        }
    };
    hello(stream, ekm, child, token).await
}

/// The TLS client end of an agent connection (whichever side dialed), and the session's
/// keying material for the token's proofs.
async fn tls_client(
    tcp: tokio::net::TcpStream,
) -> crate::error::Result<(Box<dyn Stream>, [u8; 32])> {
    let _ = tcp.set_nodelay(true);
    let mut cfg = crate::load::net::tls_config(None, true, false, None)?;
    cfg.alpn_protocols = vec![ALPN.to_vec()];
    let name =
        rustls::pki_types::ServerName::try_from("strainline-agent").expect("a valid DNS name");
    let tls = tokio_rustls::TlsConnector::from(Arc::new(cfg))
        .connect(name, tcp)
        .await
        .map_err(|e| crate::Error::usage(format!("TLS handshake: {e}")).because(e))?;
    let ekm = auth::keying_material(tls.get_ref().1)?;
    Ok((Box::new(tls), ekm))
}

/// Waits up to `wait` for `count` agents to dial `addr` (`strainline agent --connect`),
/// and greets each; they are ordered by name (`agent-0`, `agent-1`, … from a Job's
/// completion index).
pub async fn accept(
    addr: &str,
    count: usize,
    token: Option<&Token>,
    wait: Duration,
) -> crate::error::Result<Vec<Link>> {
    let token = token
        .ok_or("agents that dial in need the shared token: --agent-token-file FILE")
        .usage()?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| crate::Error::usage(format!("listen://{addr}: {e}")).because(e))?;
    tracing::info!("waiting for {count} agent(s) to dial {addr}");
    crate::os::process::raise_nofile();
    let until = tokio::time::Instant::now() + wait;
    let mut links = Vec::new();
    // Greetings run side by side, at most MAX_PENDING (a newer one ends the oldest),
    // each within CONNECT_TIMEOUT: a stranger's idle or slow connection delays no agent.
    let mut greeting = tokio::task::JoinSet::new();
    let mut pending = std::collections::VecDeque::new();
    let missing = |n: usize| {
        crate::Error::usage(format!(
            "listen://{addr}: {n} of {count} agents dialed in within {} s (are the pods running? `kubectl logs` shows why not)",
            wait.as_secs()
        ))
    };
    while links.len() < count {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((tcp, peer)) = accepted else {
                    // Out of descriptors, for a moment: go on.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                };
                let token = token.clone();
                let task = greeting.spawn(async move {
                    let greeted = async {
                        let (tls, ekm) = tls_client(tcp).await?;
                        hello(tls, Some(ekm), None, Some(&token)).await
                    };
                    match tokio::time::timeout(CONNECT_TIMEOUT, greeted).await {
                        Ok(r) => r.map_err(|e| e.context(format!("agent from {peer}"))),
                        Err(_) => Err(crate::Error::usage(format!("agent from {peer}: no greeting in time"))),
                    }
                });
                pending.push_back(task);
                pending.retain(|t: &tokio::task::AbortHandle| !t.is_finished());
                while pending.len() > crate::agents::agent::MAX_PENDING {
                    if let Some(oldest) = pending.pop_front() {
                        oldest.abort();
                    }
                }
            }
            Some(done) = greeting.join_next() => match done {
                Ok(Ok(l)) => links.push(l),
                Ok(Err(e)) => tracing::warn!("{}", crate::units::one_line(&e.to_string())),
                Err(_) => {}
            },
            _ = tokio::time::sleep_until(until) => return Err(missing(links.len())),
        }
    }
    links.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(links)
}

/// The hello exchange on a fresh stream: the protocol version both ways, and the
/// token's proofs over TLS.
async fn hello(
    stream: Box<dyn Stream>,
    ekm: Option<[u8; 32]>,
    child: Option<tokio::process::Child>,
    token: Option<&Token>,
) -> crate::error::Result<Link> {
    let (r, mut writer) = tokio::io::split(stream);
    let mut reader = BufReader::new(r);
    let proof = match (ekm, token) {
        (Some(ekm), Some(t)) => Some(t.proof("coordinator", &ekm)),
        _ => None,
    };
    wire::send(
        &mut writer,
        &ToAgent::Hello {
            protocol: PROTOCOL,
            strainline: env!("CARGO_PKG_VERSION").into(),
            proof,
        },
    )
    .await
    .map_err(|e| crate::Error::usage(format!("sending hello: {e}")).because(e))?;
    match wire::recv_within(&mut reader, wire::MAX_HELLO)
        .await
        .usage()?
    {
        Some(FromAgent::Welcome {
            protocol,
            strainline,
            name,
            proof,
        }) => {
            if protocol != PROTOCOL {
                return Err(crate::Error::usage(format!(
                    "it speaks agent protocol {protocol} (strainline {strainline}), this coordinator speaks {PROTOCOL} (strainline {}): run the same strainline version on both",
                    env!("CARGO_PKG_VERSION")
                )));
            }
            if let (Some(ekm), Some(t)) = (ekm, token) {
                if !proof.is_some_and(|p| t.verify("agent", &ekm, &p)) {
                    return Err(crate::Error::usage(
                        "it could not prove it holds the token: not the agent it should be",
                    ));
                }
            }
            Ok(Link {
                name,
                reader,
                writer,
                child,
            })
        }
        Some(FromAgent::Refused { why }) => Err(crate::Error::usage(format!(
            "refused: {}",
            crate::units::one_line(&why)
        ))),
        Some(other) => Err(crate::Error::usage(format!(
            "unexpected first message: {}",
            crate::units::one_line(&format!("{other:?}"))
        ))),
        None => Err(crate::Error::usage(
            "closed the connection before answering",
        )),
    }
}

/// The agent's TLS acceptor: a self-signed certificate made now (the token's proofs
/// authenticate, not the certificate).
pub fn acceptor() -> crate::error::Result<tokio_rustls::TlsAcceptor> {
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
    let ck = rcgen::generate_simple_self_signed(vec!["strainline-agent".to_string()])
        .map_err(|e| crate::Error::usage(format!("a certificate: {e}")).because(e))?;
    let cert = CertificateDer::from(ck.cert.der().to_vec());
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(ck.signing_key.serialize_der()));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .usage()?
        .with_no_client_auth()
        .with_single_cert(vec![cert], key)
        .usage()?;
    cfg.alpn_protocols = vec![ALPN.to_vec()];
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(cfg)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_addresses_parse_with_errors_that_say_the_form() {
        assert_eq!(
            parse_list("tls://10.0.0.2:7461, 127.0.0.1:9000").unwrap(),
            vec![
                Address::Tls {
                    host: "10.0.0.2".into(),
                    port: 7461
                },
                Address::Tls {
                    host: "127.0.0.1".into(),
                    port: 9000
                },
            ]
        );
        assert_eq!(
            parse("ssh://load@10.0.0.3:2222/opt/bin/strainline").unwrap(),
            Address::Ssh {
                destination: "load@10.0.0.3".into(),
                port: Some(2222),
                program: "/opt/bin/strainline".into()
            }
        );
        assert_eq!(
            parse("ssh://box").unwrap(),
            Address::Ssh {
                destination: "box".into(),
                port: None,
                program: "strainline".into()
            }
        );
        assert_eq!(
            parse("tls://[::1]:7461").unwrap(),
            Address::Tls {
                host: "::1".into(),
                port: 7461
            }
        );
        assert!(parse("10.0.0.2")
            .unwrap_err()
            .to_string()
            .contains("no port"));
        assert!(parse("http://x:1")
            .unwrap_err()
            .to_string()
            .contains("unknown scheme"));
        assert!(parse("tls://x:0")
            .unwrap_err()
            .to_string()
            .contains("not a port"));
        assert!(parse_list(" , ")
            .unwrap_err()
            .to_string()
            .contains("no agent"));
    }
}
