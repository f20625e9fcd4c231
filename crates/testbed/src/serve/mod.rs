//! `strainline-testbed serve`: an IoT-like HTTP service (devices register, then push
//! data) whose behaviour is set by knobs — CPU cost per push, a deliberate leak, a slower
//! v2 profile, injected failures, periodic stalls, an in-flight cap, TLS, a crash after N
//! requests, a contended lock, a full thread pool, storage writes — and a job API (submit,
//! then poll until done) — so that strainline's figures can be checked against known truth.

mod jobs;
mod knobs;
mod tls;
pub mod work;

pub use knobs::{Knobs, Profile};

use std::collections::{HashMap, HashSet};
use std::convert::Infallible;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;

struct Device {
    _state: Vec<u8>,
    last_payload: Bytes,
    pushes: u64,
}

#[derive(Default)]
struct Counters {
    requests: AtomicU64,
    registers: AtomicU64,
    /// `POST /devices` registrations answered with an id that was then forgotten.
    forgotten: AtomicU64,
    /// Ids `POST /devices` gave out.
    issued: AtomicU64,
    /// `POST /signed` requests whose signature held, and those refused.
    signed: AtomicU64,
    unsigned: AtomicU64,
    pushes: AtomicU64,
    /// Jobs submitted, the polls of them, and those seen finished by a poll.
    jobs: AtomicU64,
    job_polls: AtomicU64,
    jobs_done: AtomicU64,
    jobs_failed: AtomicU64,
    failed: AtomicU64,
    rejected: AtomicU64,
    not_found: AtomicU64,
    inflight: AtomicU64,
    leaked_bytes: AtomicU64,
}

/// Work handed to the `pool-N` threads.
type Job = Box<dyn FnOnce() + Send>;

struct Server {
    knobs: Knobs,
    /// The lock `--lock-hold` holds.
    lock: Mutex<()>,
    /// Where `--pool` hands its pushes.
    pool: Option<std::sync::mpsc::Sender<Job>>,
    /// The file `--fsync-bytes` writes to, and where the next write goes.
    journal: Option<(std::fs::File, AtomicU64)>,
    start: Instant,
    /// When the first push came (`--delay-after` counts from it).
    first_push: std::sync::OnceLock<Instant>,
    devices: Mutex<HashMap<String, Device>>,
    jobs: Mutex<jobs::Jobs>,
    registering: Mutex<HashSet<String>>,
    leaked: Mutex<Vec<Box<[u8]>>>,
    counters: Counters,
    rng: AtomicU64,
}

impl Server {
    fn log(&self, level: &str, msg: &str) {
        let t = self.start.elapsed().as_secs_f64();
        eprintln!("[{t:10.3}s] {level} {msg}");
    }

    /// A uniform number in [0, 1), from a shared xorshift generator.
    fn chance(&self) -> f64 {
        let mut x = self.rng.load(Relaxed);
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng.store(x, Relaxed);
        (x >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Waits out the stall window if we are in one: the last `stall_for` of every
    /// `stall_every`, measured from start.
    async fn stall(&self) {
        if let Some((every, dur)) = self.knobs.stall {
            let e = self.start.elapsed().as_nanos() % every.as_nanos();
            let window_start = every.as_nanos() - dur.as_nanos();
            if e >= window_start {
                tokio::time::sleep(Duration::from_nanos((every.as_nanos() - e) as u64)).await;
            }
        }
    }

    fn stats(&self) -> serde_json::Value {
        let c = &self.counters;
        serde_json::json!({
            "uptime_seconds": self.start.elapsed().as_secs_f64(),
            "requests": c.requests.load(Relaxed),
            "registered": self.devices.lock().unwrap().len(),
            "registers": c.registers.load(Relaxed),
            "forgotten": c.forgotten.load(Relaxed),
            "signed": c.signed.load(Relaxed),
            "unsigned": c.unsigned.load(Relaxed),
            "pushes": c.pushes.load(Relaxed),
            "jobs": c.jobs.load(Relaxed),
            "job_polls": c.job_polls.load(Relaxed),
            "jobs_done": c.jobs_done.load(Relaxed),
            "jobs_failed": c.jobs_failed.load(Relaxed),
            "failed": c.failed.load(Relaxed),
            "rejected": c.rejected.load(Relaxed),
            "not_found": c.not_found.load(Relaxed),
            "inflight": c.inflight.load(Relaxed),
            "leaked_bytes": c.leaked_bytes.load(Relaxed),
            "profile": match self.knobs.profile { Profile::V1 => "v1", Profile::V2 => "v2" },
            "cpu_units_per_push": self.knobs.units_per_push(),
        })
    }
}

fn reply(status: StatusCode, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = status;
    r
}

/// A JSON answer: `body` with its content type.
fn json(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    let mut r = reply(status, body);
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    r
}

/// Where `--fsync-bytes` wraps around.
const JOURNAL_BYTES: u64 = 64 << 20;

/// The byte `--fsync-bytes` writes: from the body, so the write is not all zeroes.
fn journal_byte(body: &[u8]) -> u8 {
    body.first().copied().unwrap_or(0) | 1
}

/// Decrements the in-flight count when a request ends, however it ends.
struct InflightGuard<'a>(&'a AtomicU64);
impl Drop for InflightGuard<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Relaxed);
    }
}

impl Server {
    /// Whether `--delay` applies now: always, or from `--delay-after` past the first
    /// push.
    fn delaying(&self) -> bool {
        match self.knobs.delay_after {
            None => true,
            Some(after) => self.first_push.get().is_some_and(|f| f.elapsed() >= after),
        }
    }
}

async fn handle(req: Request<Incoming>, s: Arc<Server>) -> Response<Full<Bytes>> {
    let c = &s.counters;
    let n = c.requests.fetch_add(1, Relaxed) + 1;
    if s.knobs.crash_after.is_some_and(|limit| n > limit) {
        s.log(
            "ERROR",
            &format!("crash-after: request {n} over the limit, aborting"),
        );
        std::process::abort();
    }
    let inflight = c.inflight.fetch_add(1, Relaxed) + 1;
    let _guard = InflightGuard(&c.inflight);
    if s.knobs.max_inflight.is_some_and(|m| inflight as usize > m) {
        c.rejected.fetch_add(1, Relaxed);
        return reply(
            StatusCode::SERVICE_UNAVAILABLE,
            "too many requests in flight\n",
        );
    }
    s.stall().await;
    let method = req.method().clone();
    let signature = req
        .headers()
        .get("x-signature")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let path = req.uri().path().to_string();
    let body = match req.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => return reply(StatusCode::BAD_REQUEST, "unreadable body\n"),
    };
    match (method, path.as_str()) {
        (Method::GET, "/health") => reply(StatusCode::OK, "ok\n"),
        (Method::GET, "/stats") => reply(StatusCode::OK, s.stats().to_string()),
        (Method::POST, "/register") => register(&s, &body).await,
        (Method::POST, "/devices") => enroll(&s),
        (Method::POST, "/jobs") => jobs::submit(&s),
        (Method::GET, p) if p.starts_with("/jobs/") => jobs::poll(&s, &p["/jobs/".len()..]),
        (Method::POST, "/signed") if s.knobs.hmac_key.is_some() => {
            signed(&s, signature.as_deref(), &body)
        }
        (Method::POST, p) if p.starts_with("/push/") => {
            let id = p["/push/".len()..].to_string();
            s.first_push.get_or_init(Instant::now);
            if let Some(pool) = &s.pool {
                // A blocking call on one of the pool's threads; the request waits for one.
                let (tx, rx) = tokio::sync::oneshot::channel();
                let s2 = s.clone();
                let job: Job = Box::new(move || {
                    std::thread::sleep(s2.knobs.delay);
                    let _ = tx.send(push(&s2, &id, body));
                });
                let _ = pool.send(job);
                return rx.await.unwrap_or_else(|_| {
                    reply(StatusCode::INTERNAL_SERVER_ERROR, "the pool stopped\n")
                });
            }
            if !s.knobs.delay.is_zero() && s.delaying() {
                tokio::time::sleep(s.knobs.delay).await;
            }
            push(&s, &id, body)
        }
        _ => reply(StatusCode::NOT_FOUND, "no such endpoint\n"),
    }
}

async fn register(s: &Server, body: &Bytes) -> Response<Full<Bytes>> {
    let id = match serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v.get("id")?.as_str().map(str::to_string))
    {
        Some(id) if !id.is_empty() => id,
        _ => {
            return reply(
                StatusCode::BAD_REQUEST,
                "expected a JSON body {\"id\": \"…\"}\n",
            )
        }
    };
    s.counters.registers.fetch_add(1, Relaxed);
    if s.chance() < s.knobs.fail_rate {
        s.counters.failed.fetch_add(1, Relaxed);
        s.log(
            "ERROR",
            &format!("register failed for device {id} (injected failure)"),
        );
        return reply(StatusCode::INTERNAL_SERVER_ERROR, "injected failure\n");
    }
    if !s.registering.lock().unwrap().insert(id.clone()) {
        s.log(
            "WARN",
            &format!("mid-air profile collision: device {id} is registering twice at once"),
        );
    }
    // Building the device's profile takes a moment, as it would with a database.
    let state = vec![1u8; s.knobs.state_bytes];
    tokio::time::sleep(Duration::from_millis(1)).await;
    let existed = s
        .devices
        .lock()
        .unwrap()
        .insert(
            id.clone(),
            Device {
                _state: state,
                last_payload: Bytes::new(),
                pushes: 0,
            },
        )
        .is_some();
    s.registering.lock().unwrap().remove(&id);
    if existed {
        s.log(
            "WARN",
            &format!("device {id} registered again; its state was reset"),
        );
        reply(StatusCode::OK, "registered again\n")
    } else {
        reply(StatusCode::CREATED, "registered\n")
    }
}

/// `POST /devices`: the server names the device (`{"id": "d-N"}`, 201), as a device
/// API that hands out ids does; with `--forget-rate` a share of them is forgotten at
/// once.
fn enroll(s: &Server) -> Response<Full<Bytes>> {
    s.counters.registers.fetch_add(1, Relaxed);
    let id = format!("d-{}", s.counters.issued.fetch_add(1, Relaxed));
    if s.chance() < s.knobs.forget_rate {
        s.counters.forgotten.fetch_add(1, Relaxed);
    } else {
        s.devices.lock().unwrap().insert(
            id.clone(),
            Device {
                _state: vec![1u8; s.knobs.state_bytes],
                last_payload: Bytes::new(),
                pushes: 0,
            },
        );
    }
    let mut r = json(StatusCode::CREATED, format!("{{\"id\":\"{id}\"}}"));
    // A session cookie, as a device API behind a login would set.
    if let Ok(v) = hyper::header::HeaderValue::from_str(&format!("device={id}; Path=/; HttpOnly")) {
        r.headers_mut().insert(hyper::header::SET_COOKIE, v);
    }
    r
}

/// `POST /signed`: 200 with `{"status": "ok", "n": N}` when `X-Signature` is the hex
/// HMAC-SHA256 of the body under `--hmac-key`, 401 `{"status": "error"}` otherwise.
fn signed(s: &Server, signature: Option<&str>, body: &Bytes) -> Response<Full<Bytes>> {
    let key = s.knobs.hmac_key.as_deref().unwrap_or_default();
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, key.as_bytes());
    let given = signature.and_then(|h| {
        (h.len() % 2 == 0)
            .then(|| {
                (0..h.len())
                    .step_by(2)
                    .map(|i| u8::from_str_radix(&h[i..i + 2], 16).ok())
                    .collect::<Option<Vec<u8>>>()
            })
            .flatten()
    });
    let ok = given.is_some_and(|g| ring::hmac::verify(&key, body, &g).is_ok());
    let (status, text) = if ok {
        let n = s.counters.signed.fetch_add(1, Relaxed) + 1;
        (StatusCode::OK, format!("{{\"status\":\"ok\",\"n\":{n}}}"))
    } else {
        s.counters.unsigned.fetch_add(1, Relaxed);
        (
            StatusCode::UNAUTHORIZED,
            "{\"status\":\"error\"}".to_string(),
        )
    };
    let mut r = reply(status, text);
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    r
}

fn push(s: &Server, id: &str, body: Bytes) -> Response<Full<Bytes>> {
    if !s.devices.lock().unwrap().contains_key(id) {
        s.counters.not_found.fetch_add(1, Relaxed);
        return reply(StatusCode::NOT_FOUND, "unknown device: register first\n");
    }
    if s.chance() < s.knobs.fail_rate {
        s.counters.failed.fetch_add(1, Relaxed);
        s.log(
            "ERROR",
            &format!("push failed for device {id} (injected failure)"),
        );
        return reply(StatusCode::INTERNAL_SERVER_ERROR, "injected failure\n");
    }
    if let Some(hold) = s.knobs.lock_hold {
        // Blocks this worker thread while held: the others queue on the futex.
        let _held = s.lock.lock().unwrap();
        std::thread::sleep(hold);
    }
    if let (Some((file, next)), Some(n)) = (&s.journal, s.knobs.fsync_bytes) {
        // Each push at its own offset (the file bounded to JOURNAL_BYTES): no lock of
        // ours between the writers; the kernel orders their flushes.
        use std::os::unix::fs::FileExt;
        let at = next.fetch_add(n as u64, Relaxed) % JOURNAL_BYTES;
        let _ = file
            .write_all_at(&vec![journal_byte(&body); n], at)
            .and_then(|_| file.sync_data());
    }
    let digest = work::hash_units(s.knobs.units_per_push(), body.first().copied().unwrap_or(0));
    if s.knobs.leak_bytes > 0 {
        let leak = vec![digest | 1; s.knobs.leak_bytes].into_boxed_slice();
        s.leaked.lock().unwrap().push(leak);
        s.counters
            .leaked_bytes
            .fetch_add(s.knobs.leak_bytes as u64, Relaxed);
    }
    if let Some(d) = s.devices.lock().unwrap().get_mut(id) {
        d.last_payload = body;
        d.pushes += 1;
    }
    s.counters.pushes.fetch_add(1, Relaxed);
    reply(StatusCode::OK, format!("ok {digest:02x}\n"))
}

/// Runs the server until SIGINT or SIGTERM. Returns the process exit code.
pub fn run(knobs: Knobs, allow_non_loopback: bool) -> i32 {
    if !knobs.listen.ip().is_loopback() && !allow_non_loopback {
        eprintln!(
            "strainline-testbed: refusing to listen on {}: not a loopback address. The testbed is for \
             load tests on this machine; use 127.0.0.1 or [::1], or pass --allow-non-loopback if you \
             really mean it.",
            knobs.listen
        );
        return 2;
    }
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(knobs.workers.max(1))
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("strainline-testbed: cannot start the runtime: {e}");
            return 1;
        }
    };
    rt.block_on(serve(knobs))
}

async fn serve(knobs: Knobs) -> i32 {
    let unit_us = work::calibrate();
    let listener = match tokio::net::TcpListener::bind(knobs.listen).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("strainline-testbed: cannot listen on {}: {e}", knobs.listen);
            return 2;
        }
    };
    let addr = listener.local_addr().expect("bound address");
    let tls = if knobs.tls {
        match tls::acceptor(knobs.cert_out.as_deref()) {
            Ok(t) => Some(t),
            Err(e) => {
                eprintln!("strainline-testbed: cannot set up TLS: {e}");
                return 1;
            }
        }
    } else {
        None
    };
    let scheme = if tls.is_some() { "https" } else { "http" };
    let mut line = format!("listening {scheme}://{addr} cpu_unit_us={unit_us:.2}");
    if let Some((_, path)) = &tls {
        line.push_str(&format!(" cert={}", path.display()));
    }
    println!("{line}");
    let _ = std::io::stdout().flush();
    if let Some(p) = &knobs.addr_file {
        if let Err(e) = std::fs::write(p, format!("{addr}\n")) {
            eprintln!("strainline-testbed: cannot write {}: {e}", p.display());
            return 2;
        }
    }
    let journal = if knobs.fsync_bytes.is_some() {
        // Beside the working directory's files (on storage; /tmp may be in memory).
        let path = std::path::PathBuf::from(format!(
            ".strainline-testbed-{}.journal",
            std::process::id()
        ));
        match std::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .read(true)
            .write(true)
            .open(&path)
        {
            // Unlinked at once: the writes go to storage, the file goes with the process.
            Ok(f) => {
                let _ = std::fs::remove_file(&path);
                Some((f, AtomicU64::new(0)))
            }
            Err(e) => {
                eprintln!("strainline-testbed: cannot open {}: {e}", path.display());
                return 1;
            }
        }
    } else {
        None
    };
    let pool = knobs.pool.map(|n| {
        let (tx, rx) = std::sync::mpsc::channel::<Job>();
        let rx = Arc::new(Mutex::new(rx));
        for i in 0..n {
            let rx = rx.clone();
            std::thread::Builder::new()
                .name(format!("pool-{i}"))
                .spawn(move || loop {
                    let job = rx.lock().unwrap().recv();
                    match job {
                        Ok(job) => job(),
                        Err(_) => return,
                    }
                })
                .expect("a pool thread");
        }
        tx
    });
    let server = Arc::new(Server {
        lock: Mutex::new(()),
        pool,
        journal,
        knobs,
        start: Instant::now(),
        first_push: std::sync::OnceLock::new(),
        devices: Mutex::new(HashMap::new()),
        jobs: Mutex::new(jobs::Jobs::default()),
        registering: Mutex::new(HashSet::new()),
        leaked: Mutex::new(Vec::new()),
        counters: Counters::default(),
        rng: AtomicU64::new(0x9E37_79B9_7F4A_7C15),
    });
    let acceptor = tls.map(|(a, _)| a);
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("signal handler");
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                let _ = stream.set_nodelay(true);
                let s = server.clone();
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let svc = hyper::service::service_fn(move |req| {
                        let s = s.clone();
                        async move { Ok::<_, Infallible>(handle(req, s).await) }
                    });
                    let builder = auto::Builder::new(TokioExecutor::new());
                    match acceptor {
                        Some(a) => {
                            if let Ok(tls) = a.accept(stream).await {
                                let _ = builder.serve_connection(TokioIo::new(tls), svc).await;
                            }
                        }
                        None => {
                            let _ = builder.serve_connection(TokioIo::new(stream), svc).await;
                        }
                    }
                });
            }
            _ = tokio::signal::ctrl_c() => break,
            _ = term.recv() => break,
        }
    }
    eprintln!("strainline-testbed: stopping; stats {}", server.stats());
    0
}
