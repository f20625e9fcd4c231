//! `strainline serve`: the results store as pages in a browser — runs, a run's report,
//! comparisons, histories with change points, runs in progress — and the same as JSON
//! under `/api/v1/`. Server-rendered HTML with the reports' SVG charts; two small
//! scripts of ours — the live page's polling, served from here, and the timeline's
//! hover and zoom, inline and allowed by its hash; nothing fetched from elsewhere.
//!
//! The store is opened read-only (SQLite's read-only mode, PostgreSQL read-only
//! transactions), one connection per request at a time from a small pool, each request
//! one short read: a suite writing to the store is never held up, and a page never
//! reads a half-written case (WAL readers see committed transactions only). A
//! connection per request, a thread per connection, at most [`MAX_CLIENTS`] at once:
//! a slow client holds only its own thread. A non-loopback address needs a token.

mod charts;
mod docs;
pub mod http;
mod pages;

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::error::Category;
use crate::store::{Location, Store};
use http::{Request, Response};

/// Clients served at once. One more closes the oldest connection still waiting for its
/// request (a stranger holding a socket open, a browser's spare), as the agent's
/// newest-closes-oldest does; only when all are being answered is it answered 503.
pub const MAX_CLIENTS: usize = 64;

/// Connections whose request has not come yet, oldest first: each a clone of its socket,
/// shut down to close it.
#[derive(Default)]
struct Waiting {
    next: u64,
    sockets: std::collections::VecDeque<(u64, TcpStream)>,
}

impl Waiting {
    fn add(&mut self, s: &TcpStream) -> Option<u64> {
        let clone = s.try_clone().ok()?;
        self.next += 1;
        self.sockets.push_back((self.next, clone));
        Some(self.next)
    }

    fn remove(&mut self, id: u64) {
        self.sockets.retain(|(i, _)| *i != id);
    }

    /// Closes the oldest waiting connection; false if there is none.
    fn close_oldest(&mut self) -> bool {
        match self.sockets.pop_front() {
            Some((_, s)) => {
                let _ = s.shutdown(std::net::Shutdown::Both);
                true
            }
            None => false,
        }
    }
}

/// What `serve` was asked.
pub struct Options {
    pub listen: SocketAddr,
    pub store: Location,
    /// The secret a browser or client must present, when set.
    pub token: Option<String>,
    /// The path it is served under behind a reverse proxy (`/perf/`), `/` and `/`-ended.
    pub base: String,
}

/// What every request shares.
struct Shared {
    store: Location,
    token: Option<String>,
    /// `--base-path`: every link, redirect, form and API URL is under it.
    pub(crate) base: String,
    /// Idle read-only connections.
    pool: Mutex<Vec<Store>>,
}

impl Shared {
    /// A connection from the pool (or a new one) for the time of `work`.
    fn with_store<T>(
        &self,
        work: impl FnOnce(&Store) -> crate::error::Result<T>,
    ) -> crate::error::Result<T> {
        let store = self.pool.lock().unwrap().pop();
        let store = match store {
            Some(s) => s,
            None => Store::open_read_only(&self.store)?,
        };
        let out = work(&store);
        let mut pool = self.pool.lock().unwrap();
        if pool.len() < 8 {
            pool.push(store);
        }
        out
    }
}

/// The token in a token file: its first line, which must be long enough to guess at
/// no better than chance. The file is read by the agents' rule ([`crate::os::secret`]):
/// a regular file of 4 KiB at most that other users cannot read.
pub fn read_token(path: &std::path::Path) -> crate::error::Result<String> {
    let bytes = crate::os::secret::read(path, "--token-file")?;
    let text = String::from_utf8(bytes).map_err(|_| {
        crate::Error::usage(format!(
            "--token-file {}: not text: a token is one line (`head -c 24 /dev/urandom | base64`)",
            path.display()
        ))
    })?;
    let token = text.lines().next().unwrap_or("").trim().to_string();
    if token.len() < 16
        || token
            .chars()
            .any(|c| c.is_control() || c == ';' || c == ' ')
    {
        return Err(crate::Error::usage(format!(
            "--token-file {}: the token (its first line) must be at least 16 characters without spaces or ';' (e.g. `head -c 24 /dev/urandom | base64 > {}`)",
            path.display(),
            path.display()
        )));
    }
    Ok(token)
}

/// A bound server, not yet answering.
pub struct Server {
    listener: TcpListener,
    shared: Arc<Shared>,
}

/// Binds `options.listen`, after checking the store opens read-only and that a
/// non-loopback address has a token.
pub fn bind(options: Options) -> crate::error::Result<Server> {
    if !options.listen.ip().is_loopback() && options.token.is_none() {
        return Err(crate::Error::usage(format!(
            "serve --listen {}: an address other hosts can reach needs a token; give --token-file FILE (clients send `Authorization: Bearer TOKEN`, a browser opens http://HOST:PORT/?token=TOKEN once), or listen on 127.0.0.1",
            options.listen
        )));
    }
    // The store must open now, not at the first request.
    let first = Store::open_read_only(&options.store)?;
    let listener = TcpListener::bind(options.listen).usage_with(|e| {
        format!(
            "serve --listen {}: {e} (give a free HOST:PORT, e.g. 127.0.0.1:8080)",
            options.listen
        )
    })?;
    Ok(Server {
        listener,
        shared: Arc::new(Shared {
            store: options.store,
            token: options.token,
            base: options.base,
            pool: Mutex::new(vec![first]),
        }),
    })
}

impl Server {
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Answers until the process ends.
    pub fn run(self) -> ! {
        let busy = Arc::new(AtomicUsize::new(0));
        let waiting = Arc::new(Mutex::new(Waiting::default()));
        loop {
            let Ok((mut s, _)) = self.listener.accept() else {
                std::thread::sleep(std::time::Duration::from_millis(10));
                continue;
            };
            // At the cap, the oldest connection still silent makes room (its thread
            // ends at once); the threads of closed ones may overlap the new for a
            // moment, never beyond twice the cap.
            let full = busy.load(Ordering::SeqCst) >= MAX_CLIENTS;
            if full
                && (busy.load(Ordering::SeqCst) >= 2 * MAX_CLIENTS
                    || !waiting.lock().unwrap().close_oldest())
            {
                let _ = http::write(
                    &mut s,
                    &Response::html(503, "too many clients at once; retry\n".into()),
                    false,
                );
                continue;
            }
            let Some(id) = waiting.lock().unwrap().add(&s) else {
                continue;
            };
            busy.fetch_add(1, Ordering::SeqCst);
            let (shared, mine, wait) = (self.shared.clone(), busy.clone(), waiting.clone());
            let spawned = std::thread::Builder::new()
                .name("serve".into())
                .spawn(move || {
                    answer(&shared, s, || wait.lock().unwrap().remove(id));
                    wait.lock().unwrap().remove(id);
                    mine.fetch_sub(1, Ordering::SeqCst);
                });
            if spawned.is_err() {
                waiting.lock().unwrap().remove(id);
                busy.fetch_sub(1, Ordering::SeqCst);
            }
        }
    }
}

/// Compares in time independent of where the strings differ.
fn same_secret(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// Reads one request, then (`read`: no longer closable as silent) answers it.
fn answer(shared: &Shared, mut s: TcpStream, read: impl FnOnce()) {
    let req = http::read(&mut s, http::READ_TIMEOUT);
    read();
    let req = match req {
        Ok(r) => r,
        Err(http::Bad::Gone) => return,
        Err(http::Bad::Malformed(why)) => {
            let _ = http::write(&mut s, &Response::html(400, format!("{why}\n")), false);
            return;
        }
    };
    let r = respond(shared, &req);
    let _ = http::write(&mut s, &r, req.method == "HEAD");
}

/// `--base-path`'s value as the server uses it: `/`, or `/perf/` (one leading and one
/// trailing slash); a path with `..`, a query, a scheme or a control character is
/// refused.
pub fn base_path(given: &str) -> crate::error::Result<String> {
    let trimmed = given.trim_matches('/');
    let bad = trimmed
        .split('/')
        .any(|seg| seg.is_empty() || seg == "." || seg == "..")
        && !trimmed.is_empty();
    if bad
        || trimmed
            .chars()
            .any(|c| c.is_control() || matches!(c, '?' | '#' | '"' | '<' | '>' | '\\' | ' ' | ':'))
    {
        return Err(crate::Error::usage(format!(
            "--base-path '{given}': give the path the proxy serves strainline under, e.g. /perf/ (letters, digits, - _ . and /, no .. nor query)"
        )));
    }
    Ok(match trimmed {
        "" => "/".to_string(),
        t => format!("/{t}/"),
    })
}

/// Puts a page under the base path: its absolute links, forms, script and API address
/// (`href="/runs"` → `href="/perf/runs"`; no text from a user or target can hold `="/`,
/// every such text being escaped) and a redirect's `Location`.
fn under(base: &str, mut r: Response) -> Response {
    if base == "/" {
        return r;
    }
    for (name, value) in r.headers.iter_mut() {
        if *name == "Location" && value.starts_with('/') {
            *value = format!("{base}{}", &value[1..]);
        }
    }
    if r.content_type.starts_with("text/html") {
        let mut html = String::from_utf8_lossy(&r.body).into_owned();
        for attr in ["href", "action", "src", "data-api"] {
            html = html.replace(&format!("{attr}=\"/"), &format!("{attr}=\"{base}"));
        }
        r.body = html.into_bytes();
    }
    r
}

/// The answer to one request under the base path: the request's path made the
/// server's own (a proxy that passes the prefix on), the answer's links put under it.
fn respond(shared: &Shared, req: &Request) -> Response {
    let base = shared.base.as_str();
    let local;
    let req = match req.path.strip_prefix(base.trim_end_matches('/')) {
        Some(rest) if base != "/" && (rest.is_empty() || rest.starts_with('/')) => {
            local = Request {
                path: if rest.is_empty() {
                    "/".into()
                } else {
                    rest.to_string()
                },
                ..req.clone()
            };
            &local
        }
        _ => req,
    };
    under(base, answer_to(shared, req))
}

/// The answer to one request: the token checked, then the page.
fn answer_to(shared: &Shared, req: &Request) -> Response {
    if req.method != "GET" && req.method != "HEAD" {
        return Response::html(405, "strainline serve only reads: GET\n".into())
            .with("Allow", "GET, HEAD".into());
    }
    if let Some(token) = &shared.token {
        if let Some(given) = req.query.iter().find(|(k, _)| k == "token").map(|p| &p.1) {
            if !same_secret(given, token) {
                return unauthorized();
            }
            // A browser given the token once keeps it in a cookie; the address bar
            // loses it.
            let rest: Vec<(&str, Option<&str>)> = req
                .query
                .iter()
                .filter(|(k, _)| k != "token")
                .map(|(k, v)| (k.as_str(), Some(v.as_str())))
                .collect();
            return Response::redirect(format!(
                "{}{}",
                http::local_path(&req.path),
                http::query(&rest)
            ))
            .with(
                "Set-Cookie",
                format!(
                    "strainline_token={token}; Path={}; HttpOnly; SameSite=Strict",
                    shared.base
                ),
            );
        }
        let given = req.bearer.as_deref().or(req.cookie_token.as_deref());
        if !given.is_some_and(|g| same_secret(g, token)) {
            return unauthorized();
        }
    }
    pages::route(req, shared)
}

fn unauthorized() -> Response {
    Response::html(
        401,
        pages::message(
            "Token needed",
            maud::html! {
                "This strainline server needs its token: open this address with "
                code { "?token=TOKEN" } " once, or send " code { "Authorization: Bearer TOKEN" } "."
            },
        ),
    )
    .with("WWW-Authenticate", "Bearer realm=\"strainline\"".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_must_be_long_and_plain_and_compares_whole() {
        let dir = tempfile::tempdir().unwrap();
        let write_private = |path: &std::path::Path, text: &str| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::write(path, text).unwrap();
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
        };
        let path = dir.path().join("token");
        for bad in [
            "",
            "short",
            "has a space in it 0123",
            "semi;colon0123456789",
        ] {
            write_private(&path, &format!("{bad}\n"));
            assert!(read_token(&path).is_err(), "{bad:?} accepted");
        }
        write_private(&path, "0123456789abcdef-XYZ\nignored\n");
        assert_eq!(read_token(&path).unwrap(), "0123456789abcdef-XYZ");
        assert!(same_secret("0123456789abcdef", "0123456789abcdef"));
        assert!(!same_secret("0123456789abcdef", "0123456789abcdeg"));
        assert!(!same_secret("0123456789abcdef", "0123456789abcde"));
        assert!(!same_secret("", "x"));
    }

    #[test]
    fn a_reachable_address_without_a_token_is_refused_before_binding() {
        let e = bind(Options {
            base: "/".into(),
            listen: "0.0.0.0:0".parse().unwrap(),
            store: Location::Sqlite("/nonexistent/results.db".into()),
            token: None,
        })
        .err()
        .unwrap();
        assert!(e.to_string().contains("--token-file"), "{e}");
    }

    #[test]
    fn a_base_path_is_normalised_or_refused() {
        assert_eq!(base_path("/").unwrap(), "/");
        assert_eq!(base_path("").unwrap(), "/");
        assert_eq!(base_path("/perf").unwrap(), "/perf/");
        assert_eq!(base_path("perf/ci/").unwrap(), "/perf/ci/");
        // Never a host: the leading slashes collapse into one path.
        assert_eq!(base_path("//evil.example").unwrap(), "/evil.example/");
        for bad in ["/a/../b", "/a?x", "/a b", "/a\"b", "http://x/", "/a//b"] {
            assert!(base_path(bad).is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn a_page_and_a_redirect_are_put_under_the_base() {
        let page = Response::html(200, "<a href=\"/runs/5\">#5</a><form action=\"/compare\"><script src=\"/static/live.js\"></script><div data-api=\"/api/v1/\"></div> href=&quot;/x".into());
        let body = String::from_utf8(under("/perf/", page).body).unwrap();
        assert_eq!(body, "<a href=\"/perf/runs/5\">#5</a><form action=\"/perf/compare\"><script src=\"/perf/static/live.js\"></script><div data-api=\"/perf/api/v1/\"></div> href=&quot;/x");
        let r = under("/perf/", Response::redirect("/runs?kind=import".into()));
        assert_eq!(
            r.headers[0],
            ("Location", "/perf/runs?kind=import".to_string())
        );
    }
}
