//! `strainline agent`: a load generator a coordinator drives. It answers the clock
//! exchange, runs its slice of the plan from the start time it was given (in its own
//! clock), streams each second's tally, and reports its whole run with its own verdict
//! on its generator. It stops its load when the coordinator says so, goes away, or is
//! silent longer than the lease — never an orphan load.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufRead, AsyncWrite, BufReader};
use tokio::sync::mpsc;

use super::auth::Token;
use super::wire::{self, FromAgent, Job, Report, ToAgent, PROTOCOL};
use crate::error::Category;
use crate::load::{self, verdict};

/// Test-only: milliseconds added to this agent's clock readings, to inject a clock
/// offset (documented in docs/agents.md).
pub const CLOCK_SKEW_ENV: &str = "STRAINLINE_AGENT_CLOCK_SKEW_MS";

fn skew_ns() -> i64 {
    std::env::var(CLOCK_SKEW_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map_or(0, |ms| (ms * 1e6) as i64)
}

/// This agent's clock: the machine's, plus the test-only skew.
fn clock_ns() -> i64 {
    wire::unix_ns() + skew_ns()
}

/// Who the agent is.
pub struct Identity {
    pub name: String,
    /// Over TLS: the shared token, and the session's keying material.
    pub auth: Option<(Token, [u8; 32])>,
}

/// Connections that have not yet proved they know the token, at most: a newer one
/// closes the oldest. Strangers' idle or slow connections cost a few kilobytes each
/// (a TLS session and a hello of at most [`wire::MAX_HELLO`]) and cannot starve the
/// coordinator, whose hello takes milliseconds.
pub const MAX_PENDING: usize = 64;

/// How long a connection has to finish its TLS handshake and hello.
pub const HELLO_TIMEOUT: Duration = Duration::from_secs(10);

/// The connections still proving who they are, oldest first.
#[derive(Default)]
struct Pending {
    next: std::cell::Cell<u64>,
    open: std::cell::RefCell<std::collections::VecDeque<(u64, tokio::task::AbortHandle)>>,
}

impl Pending {
    /// Admits a connection's task, closing the oldest pending one past the cap.
    fn admit(&self, id: u64, task: tokio::task::AbortHandle) {
        let mut open = self.open.borrow_mut();
        open.push_back((id, task));
        while open.len() > MAX_PENDING {
            if let Some((_, oldest)) = open.pop_front() {
                oldest.abort();
            }
        }
    }

    /// The connection proved it knows the token (or ended): no longer pending.
    fn done(&self, id: u64) {
        self.open.borrow_mut().retain(|(i, _)| *i != id);
    }
}

/// Serves `strainline agent --listen`: one coordinator's run at a time (another is
/// refused while a run is on; watch sessions run beside it), until killed — or after
/// one session with `once`. Strangers are bounded: the descriptor limit is raised to
/// the hard one, at most [`MAX_PENDING`] unauthenticated connections are held, each
/// for at most [`HELLO_TIMEOUT`], and a failed accept (out of descriptors) waits and
/// goes on instead of ending the agent.
pub fn serve_listen(
    addr: &str,
    token: Token,
    name: String,
    once: bool,
) -> crate::error::Result<()> {
    stop_on_signals(&name);
    crate::os::process::raise_nofile();
    runtime()?.block_on(async move {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| crate::Error::usage(format!("--listen {addr}: {e}")).because(e))?;
        let local = listener.local_addr().usage()?;
        let acceptor = super::link::acceptor()?;
        tracing::info!("strainline agent {name}: listening on {local} (TLS, token)");
        let busy = Arc::new(AtomicBool::new(false));
        let pending = std::rc::Rc::new(Pending::default());
        let local_set = tokio::task::LocalSet::new();
        local_set
            .run_until(async move {
                let mut said = Instant::now() - Duration::from_secs(60);
                loop {
                    let (tcp, peer) = match listener.accept().await {
                        Ok(c) => c,
                        Err(e) => {
                            if said.elapsed() >= Duration::from_secs(10) {
                                tracing::warn!("strainline agent {name}: accept: {e} (waiting)");
                                said = Instant::now();
                            }
                            tokio::time::sleep(Duration::from_millis(50)).await;
                            continue;
                        }
                    };
                    let id = pending.next.get();
                    pending.next.set(id + 1);
                    let session = serve_tls(
                        tcp,
                        peer.to_string(),
                        acceptor.clone(),
                        token.clone(),
                        name.clone(),
                        busy.clone(),
                        Some((pending.clone(), id)),
                    );
                    if once {
                        session.await;
                        return Ok(());
                    }
                    let task = tokio::task::spawn_local(session);
                    if !task.is_finished() {
                        pending.admit(id, task.abort_handle());
                    }
                }
            })
            .await
    })
}

/// Serves `strainline agent --connect`: dials the coordinator (again every second
/// until `patience` runs out: a pod may start before its coordinator listens), serves
/// that one session over the connection — TLS server on a socket it opened — and ends.
pub fn serve_connect(
    addr: &str,
    token: Token,
    name: String,
    patience: Duration,
) -> crate::error::Result<()> {
    stop_on_signals(&name);
    runtime()?.block_on(async move {
        let acceptor = super::link::acceptor()?;
        let until = Instant::now() + patience;
        let tcp = loop {
            match tokio::net::TcpStream::connect(addr).await {
                Ok(t) => break t,
                Err(e) if Instant::now() >= until => {
                    return Err(crate::Error::usage(format!(
                        "--connect {addr}: {e} (for {} s)",
                        patience.as_secs()
                    )))
                }
                Err(_) => tokio::time::sleep(Duration::from_secs(1)).await,
            }
        };
        tracing::info!("strainline agent {name}: connected to the coordinator at {addr}");
        let busy = Arc::new(AtomicBool::new(false));
        serve_tls(tcp, addr.to_string(), acceptor, token, name, busy, None).await;
        Ok(())
    })
}

/// Stops the agent on SIGTERM, SIGINT or SIGHUP with its own handlers: as a
/// container's PID 1 (a Kubernetes pod) it would otherwise ignore SIGTERM and hold the
/// pod for its whole grace period. What it started (a command workload's units) dies
/// with it.
fn stop_on_signals(name: &str) {
    crate::os::signals::install();
    let name = name.to_string();
    std::thread::spawn(move || loop {
        if let Some(r) = crate::os::signals::take() {
            tracing::info!(
                "strainline agent {name}: stopped by {}",
                crate::measure::signal_name(r.signal)
            );
            std::process::exit(128 + r.signal);
        }
        std::thread::sleep(Duration::from_millis(50));
    });
}

fn runtime() -> crate::error::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .usage()
}

/// One session over TCP, this agent the TLS server whoever dialed; `pending` is told
/// when the peer has proved it knows the token.
async fn serve_tls(
    tcp: tokio::net::TcpStream,
    peer: String,
    acceptor: tokio_rustls::TlsAcceptor,
    token: Token,
    name: String,
    busy: Arc<AtomicBool>,
    pending: Option<(std::rc::Rc<Pending>, u64)>,
) {
    struct Done(Option<(std::rc::Rc<Pending>, u64)>);
    impl Done {
        fn now(&mut self) {
            if let Some((p, id)) = self.0.take() {
                p.done(id);
            }
        }
    }
    impl Drop for Done {
        fn drop(&mut self) {
            self.now();
        }
    }
    let mut done = Done(pending);
    let _ = tcp.set_nodelay(true);
    let until = tokio::time::Instant::now() + HELLO_TIMEOUT;
    let tls = match tokio::time::timeout_at(until, acceptor.accept(tcp)).await {
        Ok(Ok(t)) => t,
        _ => {
            tracing::warn!("agent {name}: {peer}: no TLS handshake");
            return;
        }
    };
    let Ok(ekm) = super::auth::keying_material(tls.get_ref().1) else {
        return;
    };
    let (r, w) = tokio::io::split(tls);
    let id = Identity {
        name: name.clone(),
        auth: Some((token, ekm)),
    };
    let greeted = Greeting {
        until,
        authenticated: &mut || done.now(),
    };
    if let Err(e) = session(BufReader::new(r), w, &id, &busy, greeted).await {
        tracing::warn!(
            "agent {name}: {peer}: {}",
            crate::units::one_line(&e.to_string())
        );
    }
}

/// The hello's deadline, and what to do once the peer has proved who it is.
struct Greeting<'a> {
    until: tokio::time::Instant,
    authenticated: &'a mut dyn FnMut(),
}

/// Serves `strainline agent --stdio` (under ssh): one session on stdin/stdout.
pub fn serve_stdio(name: String) -> crate::error::Result<()> {
    stop_on_signals(&name);
    runtime()?.block_on(async move {
        let id = Identity { name, auth: None };
        let busy = AtomicBool::new(false);
        session(
            BufReader::new(tokio::io::stdin()),
            tokio::io::stdout(),
            &id,
            &busy,
            Greeting {
                until: tokio::time::Instant::now() + HELLO_TIMEOUT,
                authenticated: &mut || {},
            },
        )
        .await
    })
}

/// One coordinator's session: hello, clock exchanges, at most one run. The protocol's
/// states (greeted, leased, running, cancelled) are [`Session`]'s; this loop waits for
/// each message within the lease and hands it over.
async fn session<R, W>(
    mut r: R,
    mut w: W,
    id: &Identity,
    busy: &AtomicBool,
    greeting: Greeting<'_>,
) -> crate::error::Result<()>
where
    R: AsyncBufRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    greet(&mut r, &mut w, id, greeting).await?;
    // Every message out goes through one writer task.
    let (out, mut outq) = mpsc::unbounded_channel::<FromAgent>();
    let writer = tokio::spawn(async move {
        while let Some(m) = outq.recv().await {
            if wire::send(&mut w, &m).await.is_err() {
                break;
            }
        }
    });
    let mut s = Session {
        busy,
        release: None,
        out,
        cancel: Arc::new(AtomicBool::new(false)),
        run: None,
        watch: None,
        lease: Duration::from_secs(3600),
    };
    let mut heard = Instant::now();
    loop {
        let wait = s.lease.saturating_sub(heard.elapsed());
        let msg = match tokio::time::timeout(wait, wire::recv::<_, ToAgent>(&mut r)).await {
            Err(_) => {
                tracing::warn!(
                    "agent {}: nothing from the coordinator for {:.1} s (lease): load stopped",
                    id.name,
                    s.lease.as_secs_f64()
                );
                break;
            }
            Ok(Ok(Some(m))) => m,
            // The coordinator went away (or sent garbage): stop.
            Ok(Ok(None)) => break,
            Ok(Err(e)) => {
                tracing::warn!("agent {}: {e}", id.name);
                break;
            }
        };
        heard = Instant::now();
        s.handle(msg).await?;
        if s.run.as_ref().is_some_and(|h| h.is_finished()) {
            // Its report is queued; the coordinator closes when it has read it.
            s.lease = Duration::from_secs(10);
        }
    }
    let Session {
        release,
        out,
        cancel,
        run,
        watch,
        ..
    } = s;
    cancel.store(true, Ordering::Relaxed);
    if let Some(h) = run {
        // The run ends within its request timeout once cancelled.
        let _ = tokio::task::spawn_blocking(move || h.join()).await;
    }
    drop(out);
    let _ = writer.await;
    drop(watch);
    drop(release);
    Ok(())
}

/// The hello, checked (the protocol, the token's proof), and the welcome sent.
async fn greet<R, W>(
    r: &mut R,
    w: &mut W,
    id: &Identity,
    greeting: Greeting<'_>,
) -> crate::error::Result<()>
where
    R: AsyncBufRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let refuse = |why: String| FromAgent::Refused { why };
    let hello = tokio::time::timeout_at(greeting.until, wire::recv_within(r, wire::MAX_HELLO))
        .await
        .map_err(|_| {
            crate::Error::usage(format!("no hello within {} s", HELLO_TIMEOUT.as_secs()))
        })?;
    let Some(ToAgent::Hello {
        protocol,
        strainline,
        proof,
    }) = hello.usage()?
    else {
        return Err(crate::Error::usage("the first message was not a hello"));
    };
    if protocol != PROTOCOL {
        let why = format!(
            "this agent speaks agent protocol {PROTOCOL} (strainline {}), the coordinator speaks {protocol} (strainline {strainline}): run the same strainline version on both",
            env!("CARGO_PKG_VERSION")
        );
        let _ = wire::send(w, &refuse(why.clone())).await;
        return Err(crate::Error::usage(why));
    }
    let agent_proof = match &id.auth {
        Some((token, ekm)) => {
            if !proof.is_some_and(|p| token.verify("coordinator", ekm, &p)) {
                let why = "the coordinator's token does not match this agent's (--token-file)";
                let _ = wire::send(w, &refuse(why.into())).await;
                return Err(crate::Error::usage(why));
            }
            Some(token.proof("agent", ekm))
        }
        None => None,
    };
    (greeting.authenticated)();
    wire::send(
        w,
        &FromAgent::Welcome {
            protocol: PROTOCOL,
            strainline: env!("CARGO_PKG_VERSION").into(),
            name: id.name.clone(),
            proof: agent_proof,
        },
    )
    .await
    .usage()
}

/// Marks the agent free again when its run's session ends.
struct Release<'a>(&'a AtomicBool);

impl Drop for Release<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

/// A watched process: its watcher, the sender that stops its samples' streamer, and
/// the streamer.
type Watching = (
    crate::monitor::watch::Watcher,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
);

/// A greeted session's state: its run (only a run makes the agent busy: a watch
/// session runs beside it), its watch, and the lease the coordinator must renew.
struct Session<'a> {
    busy: &'a AtomicBool,
    release: Option<Release<'a>>,
    out: mpsc::UnboundedSender<FromAgent>,
    cancel: Arc<AtomicBool>,
    run: Option<std::thread::JoinHandle<()>>,
    watch: Option<Watching>,
    lease: Duration,
}

impl Session<'_> {
    /// One message from the coordinator, checked against the state it may come in.
    async fn handle(&mut self, msg: ToAgent) -> crate::error::Result<()> {
        let out = &self.out;
        match msg {
            ToAgent::Clock { id } => {
                let _ = out.send(FromAgent::Clock {
                    id,
                    unix_ns: clock_ns(),
                });
            }
            ToAgent::Run(_) if self.run.is_none() && self.busy.swap(true, Ordering::SeqCst) => {
                let _ = out.send(FromAgent::Failed {
                    why: "busy: another coordinator's run is on".into(),
                });
            }
            ToAgent::Run(job) if self.run.is_none() => {
                self.release = Some(Release(self.busy));
                self.lease = Duration::from_millis(job.lease_ms.max(500));
                match start(*job, self.cancel.clone(), out.clone()) {
                    Ok(h) => self.run = Some(h),
                    Err(why) => {
                        let _ = out.send(FromAgent::Failed {
                            why: why.to_string(),
                        });
                    }
                }
            }
            ToAgent::Run(_) => {
                let _ = out.send(FromAgent::Failed {
                    why: "a run is already on in this session".into(),
                });
            }
            ToAgent::Watch {
                attach,
                interval_ms,
            } if self.watch.is_none() => {
                self.lease = super::coordinator::LEASE;
                self.watch = self.attach(&attach, interval_ms);
            }
            ToAgent::Watch { .. } => {
                let _ = out.send(FromAgent::Failed {
                    why: "already watching in this session".into(),
                });
            }
            ToAgent::Unwatch => {
                if let Some((w, done, streamer)) = self.watch.take() {
                    // The last samples go first, then the summary.
                    let _ = done.send(());
                    let _ = streamer.await;
                    let summary =
                        tokio::task::spawn_blocking(move || w.finish(Vec::new(), "watched").0)
                            .await
                            .usage()?;
                    let _ = out.send(FromAgent::Watched(Box::new(summary)));
                }
            }
            ToAgent::Renew => {}
            ToAgent::Stop => self.cancel.store(true, Ordering::Relaxed),
            ToAgent::Hello { .. } => {}
        }
        Ok(())
    }

    /// Starts watching the process `attach` names, its samples streamed as they come;
    /// `None` (the coordinator told why) when there is no such process.
    fn attach(&self, attach: &crate::sut::spec::Attach, interval_ms: u64) -> Option<Watching> {
        match crate::sut::lifecycle::resolve(attach) {
            Ok((pid, command)) => {
                let interval = Duration::from_millis(interval_ms.clamp(10, 60_000));
                let w = crate::monitor::watch::Watcher::attach(pid, interval);
                let _ = self.out.send(FromAgent::Watching { pid, command });
                let (done, stopped) = tokio::sync::oneshot::channel();
                let streamer =
                    tokio::spawn(stream_samples(w.shared.clone(), self.out.clone(), stopped));
                Some((w, done, streamer))
            }
            Err(e) => {
                let _ = self.out.send(FromAgent::Failed { why: e.to_string() });
                None
            }
        }
    }
}

/// Sends the watched process's new samples every 250 ms (and how it ended, once it
/// has), and what is left when told to stop.
async fn stream_samples(
    shared: std::sync::Arc<std::sync::Mutex<crate::monitor::watch::Shared>>,
    out: mpsc::UnboundedSender<FromAgent>,
    mut stopped: tokio::sync::oneshot::Receiver<()>,
) {
    let mut last_t = f64::NEG_INFINITY;
    let mut told_exit = false;
    loop {
        let stop = tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(250)) => false,
            _ = &mut stopped => true,
        };
        let (samples, exit) = {
            let sh = shared.lock().unwrap();
            let fresh: Vec<_> = sh
                .samples
                .iter()
                .filter(|x| x.t > last_t)
                .cloned()
                .collect();
            (fresh, sh.root_exit.clone())
        };
        if let Some(s) = samples.last() {
            last_t = s.t;
        }
        let exit = exit.filter(|_| !told_exit);
        if !samples.is_empty() || exit.is_some() {
            told_exit |= exit.is_some();
            let _ = out.send(FromAgent::Samples { samples, exit });
        }
        if stop {
            return;
        }
    }
}

/// The files a job brought (a scenario, its CSV and its script), in a directory of their own,
/// removed with this.
struct JobFiles(Option<std::path::PathBuf>);

impl JobFiles {
    fn write(files: &[(String, String)]) -> crate::error::Result<JobFiles> {
        if files.is_empty() {
            return Ok(JobFiles(None));
        }
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "strainline-agent-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let made = JobFiles(Some(dir.clone()));
        for (name, content) in files {
            let rel = std::path::Path::new(name);
            // Only plain relative names: a job never writes outside its directory.
            if rel.is_absolute()
                || rel
                    .components()
                    .any(|c| !matches!(c, std::path::Component::Normal(_)))
            {
                return Err(crate::Error::usage(format!(
                    "the job's file '{name}' is not a plain relative name"
                )));
            }
            let path = dir.join(rel);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).usage()?;
            }
            std::fs::write(&path, content)
                .map_err(|e| crate::Error::usage(format!("{}: {e}", path.display())).because(e))?;
        }
        Ok(made)
    }
}

impl Drop for JobFiles {
    fn drop(&mut self) {
        if let Some(d) = &self.0 {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

/// Checks the job's plan and starts its run on a thread; `Ready` is sent once checked.
fn start(
    mut job: Job,
    cancel: Arc<AtomicBool>,
    out: mpsc::UnboundedSender<FromAgent>,
) -> crate::error::Result<std::thread::JoinHandle<()>> {
    let files = JobFiles::write(&job.files)?;
    if let (Some(dir), load::Offer::Scenario(p)) = (&files.0, &mut job.spec.offer) {
        *p = dir.join(&*p);
    }
    let mut planned = load::plan(&job.spec)?;
    if job.slice.of == 0 || job.slice.index >= job.slice.of {
        return Err(crate::Error::usage(format!(
            "slice {} of {} does not exist",
            job.slice.index, job.slice.of
        )));
    }
    planned.plan.slice = job.slice;
    let ahead = job.start_unix_ns - clock_ns();
    if ahead < 0 {
        return Err(crate::Error::usage(format!(
            "the start time was {:.1} ms ago by this agent's clock",
            -ahead as f64 / 1e6
        )));
    }
    let start = Instant::now() + Duration::from_nanos(ahead as u64);
    tracing::info!(
        "agent: slice {} of {} of {}, starting in {:.2} s",
        job.slice.index + 1,
        job.slice.of,
        planned.description,
        ahead as f64 / 1e9
    );
    let _ = out.send(FromAgent::Ready);
    Ok(std::thread::spawn(move || {
        let _files = files;
        let mut index = 0u64;
        let seconds = out.clone();
        let outcome = load::run_from(&planned.plan, start, cancel, &|| false, |s, tally| {
            // Whole seconds only: the last, partial one arrives in the report's totals.
            if s.partial() {
                return;
            }
            index += 1;
            let _ = seconds.send(FromAgent::Second {
                index,
                tally: Box::new(tally.clone()),
            });
        });
        let v = verdict::judge(&outcome);
        tracing::info!(
            "agent: done: {} sent, {} completed, {} errors; its generator {:?}",
            outcome.total.sent,
            outcome.total.completed,
            outcome.total.errors(),
            v.status
        );
        let _ = out.send(FromAgent::Done(Box::new(Report {
            total: outcome.total,
            steps: outcome.steps,
            custom: outcome.custom,
            elapsed: outcome.elapsed,
            thread_cpu: outcome.thread_cpu,
            connections_asked: outcome.connections_asked,
            connections_ready: outcome.connections_ready,
            threads: outcome.threads,
            status: v.status,
            reasons: v.reasons,
            last_active: outcome
                .seconds
                .last()
                .filter(|s| s.partial())
                .map_or(0, |s| s.users),
        })));
    }))
}
