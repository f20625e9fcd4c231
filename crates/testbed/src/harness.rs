//! For tests and benchmarks that drive the testbed from outside: start `serve` as a
//! real process and learn its address from the line it prints, and a minimal blocking
//! HTTP/1.1 keep-alive client for setting up state (registering devices) and checks.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// A running `strainline-testbed serve`, killed on drop.
pub struct RunningServer {
    pub child: Child,
    /// `127.0.0.1:PORT`
    pub addr: String,
    /// `http` or `https`
    pub scheme: String,
    /// The self-signed certificate (PEM), with `--tls`.
    pub cert: Option<PathBuf>,
}

impl RunningServer {
    /// Starts `bin serve ARGS…` and waits for its address line.
    pub fn start(bin: &Path, args: &[&str]) -> RunningServer {
        let mut child = Command::new(bin)
            .arg("serve")
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start strainline-testbed serve");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("piped stdout"))
            .read_line(&mut line)
            .expect("read the address line");
        // "listening http://127.0.0.1:PORT cpu_unit_us=… [cert=PATH]"
        let mut words = line.split_whitespace();
        let url = words
            .nth(1)
            .unwrap_or_else(|| panic!("no address line: {line:?}"));
        let (scheme, addr) = url.split_once("://").expect("scheme://addr");
        let cert = line
            .split_whitespace()
            .find_map(|w| w.strip_prefix("cert="))
            .map(PathBuf::from);
        RunningServer {
            child,
            addr: addr.to_string(),
            scheme: scheme.to_string(),
            cert,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `scheme://addr` followed by `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}://{}{path}", self.scheme, self.addr)
    }

    pub fn client(&self) -> Http {
        Http::connect(&self.addr)
    }
}

impl Drop for RunningServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A minimal HTTP/1.1 keep-alive client (plain TCP).
pub struct Http {
    r: BufReader<TcpStream>,
}

impl Http {
    pub fn connect(addr: &str) -> Http {
        let s = TcpStream::connect(addr).expect("connect");
        s.set_nodelay(true).expect("nodelay");
        Http {
            r: BufReader::new(s),
        }
    }

    /// Sends one request and returns the status and body.
    pub fn request(&mut self, method: &str, path: &str, body: &[u8]) -> (u16, String) {
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: localhost\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        let s = self.r.get_mut();
        s.write_all(head.as_bytes()).expect("write");
        s.write_all(body).expect("write");
        let mut status = String::new();
        self.r.read_line(&mut status).expect("status line");
        let code: u16 = status
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or_else(|| panic!("bad status line {status:?}"));
        let mut len = 0usize;
        loop {
            let mut h = String::new();
            self.r.read_line(&mut h).expect("header");
            if h == "\r\n" || h.is_empty() {
                break;
            }
            if let Some(v) = h.to_ascii_lowercase().strip_prefix("content-length:") {
                len = v.trim().parse().unwrap_or(0);
            }
        }
        let mut b = vec![0; len];
        self.r.read_exact(&mut b).expect("body");
        (code, String::from_utf8_lossy(&b).into_owned())
    }

    /// Registers devices `dev0` … `dev{n-1}`.
    pub fn register(&mut self, n: usize) {
        for d in 0..n {
            let (code, body) = self.request(
                "POST",
                "/register",
                format!("{{\"id\": \"dev{d}\"}}").as_bytes(),
            );
            assert!(code == 201 || code == 200, "register dev{d}: {code} {body}");
        }
    }
}
