//! The live terminal view of `load`, `run` and `monitor --pid`: a soak of hours or a ramp
//! of minutes is a thing one glances at. The pipeline feeds it through a few calls that
//! cost an atomic load when it is off ([`second`], [`sample`], [`step`], [`line`]); a
//! thread draws it four times a second and turns `q` or Ctrl-C into an interrupt, which
//! ends the run the way a SIGINT does (partial result kept, exit 130).
//!
//! Off unless the command asked for it and stdout is a terminal: CI logs keep the plain
//! lines, and no escape code is ever written to a pipe or a file. The same feed goes to
//! [`export`] (Prometheus, OTLP) when a command asks for it.

pub mod export;
pub mod record;
mod view;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

use crate::measure::Sample;

static ON: AtomicBool = AtomicBool::new(false);

/// Points kept per series: a little more than the widest chart.
const KEEP: usize = 600;

/// What the view shows, fed by the pipeline.
#[derive(Default)]
pub struct State {
    /// What runs (the command, the suite and case).
    pub title: String,
    pub case: String,
    /// Per second of load: offered (when known) and achieved rate, p50, p99 (µs),
    /// errors.
    pub seconds: VecDeque<Second>,
    /// The target's samples: time, RSS bytes, CPU cores, threads, FDs.
    pub samples: VecDeque<Sample>,
    /// A ramp's steps as they end: offered, achieved, p99 ms, held.
    pub steps: Vec<(f64, f64, f64, bool)>,
    /// The plain output so far (case headers, verdict evidence), newest last.
    pub lines: VecDeque<String>,
    /// The generator's offered rate, when the run has one.
    pub offered: Option<f64>,
    /// Load has been driven (a `monitor` never does: no load pane).
    pub load: bool,
    /// The target's thread states over the last second or so, busiest groups first.
    pub threads: Option<crate::measure::threads::Breakdown>,
    /// The thread-state reading that window began at.
    threads_at: Option<crate::measure::threads::Tally>,
}

#[derive(Debug, Clone, Copy)]
pub struct Second {
    /// What the schedule offered that second (open model).
    pub offered: Option<f64>,
    pub achieved: f64,
    pub p50_us: u64,
    pub p99_us: u64,
    pub errors: u64,
}

fn state() -> &'static Mutex<State> {
    static STATE: OnceLock<Mutex<State>> = OnceLock::new();
    STATE.get_or_init(|| Mutex::new(State::default()))
}

/// Whether the view is drawing.
pub fn on() -> bool {
    ON.load(Ordering::Relaxed)
}

fn push<T>(q: &mut VecDeque<T>, v: T) {
    if q.len() == KEEP {
        q.pop_front();
    }
    q.push_back(v);
}

/// A second of load ended.
pub fn second(s: Second) {
    if on() {
        let mut st = state().lock().unwrap();
        st.offered = s.offered.or(st.offered);
        push(&mut st.seconds, s);
    }
}

/// The offered rate of the load that starts (the open model's), and what runs.
pub fn starting(case: &str, offered: Option<f64>) {
    if on() {
        let mut st = state().lock().unwrap();
        if !case.is_empty() {
            st.case = case.to_string();
        }
        st.offered = offered;
        st.load = true;
        st.seconds.clear();
    }
}

/// A sample of the target's tree.
pub fn sample(s: &Sample) {
    export::sample(s);
    if on() {
        push(&mut state().lock().unwrap().samples, s.clone());
    }
}

/// Thread groups the view shows.
const THREAD_GROUPS: usize = 5;

/// A reading of the target's thread states: the view shows the last second's rates.
pub fn threads(t: &crate::measure::threads::Tally) {
    export::threads(t);
    if !on() {
        return;
    }
    let mut st = state().lock().unwrap();
    match &st.threads_at {
        Some(prev) if t.seconds - prev.seconds < 1.0 => {}
        Some(prev) => {
            st.threads = Some(t.since(prev).top(THREAD_GROUPS));
            st.threads_at = Some(t.clone());
        }
        None => st.threads_at = Some(t.clone()),
    }
}

/// A ramp step ended.
pub fn step(offered: f64, achieved: f64, p99_ms: f64, held: bool) {
    if on() {
        state()
            .lock()
            .unwrap()
            .steps
            .push((offered, achieved, p99_ms, held));
    }
}

/// Output the plain view would have printed.
pub fn line(text: &str) {
    if on() {
        let mut st = state().lock().unwrap();
        for l in text.lines() {
            push(&mut st.lines, l.to_string());
        }
    }
}

/// A new case starts (the `[i/n]` of a suite's cases, when in one): its own samples and
/// steps, and its name on the exported figures.
pub fn new_case(name: &str, of: Option<(usize, usize)>) {
    export::case(name);
    if on() {
        let mut st = state().lock().unwrap();
        st.case = match of {
            Some((i, n)) => format!("[{i}/{n}] {name}"),
            None => name.to_string(),
        };
        st.samples.clear();
        st.steps.clear();
        st.seconds.clear();
        st.threads = None;
        st.threads_at = None;
    }
}

/// The live view and the exporter as a run's observer: what the commands hand the
/// engines when either is on.
pub struct Feed;

impl crate::observe::Observer for Feed {
    fn draws(&self) -> bool {
        on()
    }

    fn case(&self, name: &str, of: Option<(usize, usize)>) {
        new_case(name, of);
        record::case(name);
    }

    fn load_starting(&self, what: &str, offered: Option<f64>) {
        starting(what, offered);
    }

    fn second(&self, s: &crate::observe::LoadSecond<'_>) {
        export::second(s);
        record::second(s);
        // The run's last, partial second goes to the exported counters only: as a
        // second of the view it would read as a drop in the rate.
        if !s.partial {
            second(Second {
                offered: s.offered,
                achieved: s.completed as f64,
                p50_us: s.p50_us,
                p99_us: s.p99_us,
                errors: s.errors,
            });
        }
    }

    fn sample(&self, s: &Sample) {
        sample(s);
        record::sample(s);
    }

    fn threads(&self, t: &crate::measure::threads::Tally) {
        threads(t);
    }

    fn step(&self, offered: f64, achieved: f64, p99_ms: f64, held: bool) {
        step(offered, achieved, p99_ms, held);
    }
}

/// The feed, to hand to a run.
pub fn feed() -> crate::observe::Shared {
    std::sync::Arc::new(Feed)
}

/// The running view; dropping it restores the terminal.
pub struct Live {
    thread: Option<std::thread::JoinHandle<()>>,
    stop: std::sync::Arc<AtomicBool>,
}

/// Starts the view when `wanted` and stdout is a terminal; `None` otherwise (the plain
/// output is then the view).
pub fn start(wanted: bool, title: &str) -> Option<Live> {
    use std::io::IsTerminal;
    if !wanted
        || !std::io::stdout().is_terminal()
        || std::env::var_os("TERM").is_some_and(|t| t == "dumb")
    {
        return None;
    }
    let mut terminal = view::enter().ok()?;
    state().lock().unwrap().title = title.to_string();
    ON.store(true, Ordering::SeqCst);
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let thread = std::thread::spawn(move || {
        let started = std::time::Instant::now();
        while !stop2.load(Ordering::Relaxed) {
            {
                let st = state().lock().unwrap();
                let _ = terminal.draw(|f| view::draw(f, &st, started.elapsed()));
            }
            if view::quit_pressed(std::time::Duration::from_millis(250)) {
                crate::os::signals::interrupt();
            }
        }
        view::leave(&mut terminal);
    });
    Some(Live {
        thread: Some(thread),
        stop,
    })
}

impl Drop for Live {
    fn drop(&mut self) {
        ON.store(false, Ordering::SeqCst);
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The plain output while the view draws: kept whole, to be printed when the view
/// ends, and shown line by line in its output pane.
#[derive(Default)]
pub struct Tee {
    pub kept: Vec<u8>,
    partial: Vec<u8>,
}

impl std::io::Write for Tee {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.kept.extend_from_slice(buf);
        self.partial.extend_from_slice(buf);
        if let Some(end) = self.partial.iter().rposition(|&b| b == b'\n') {
            let done: Vec<u8> = self.partial.drain(..=end).collect();
            line(&String::from_utf8_lossy(&done));
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
