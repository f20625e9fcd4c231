//! Helpers shared by the end-to-end tests.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The strainline binary cargo built for these tests.
pub fn strainline() -> Command {
    Command::new(env!("CARGO_BIN_EXE_strainline"))
}

/// The testbed binary, built beside strainline by `cargo build --workspace` (`make test`).
pub fn testbed() -> PathBuf {
    let p = Path::new(env!("CARGO_BIN_EXE_strainline")).with_file_name("strainline-testbed");
    assert!(
        p.exists(),
        "{} is missing: build the workspace first (`make test` does: cargo build --workspace --bins)",
        p.display()
    );
    p
}

/// A fresh temporary directory and a fresh results store: an SQLite file in the
/// directory, or a new database on the test PostgreSQL server.
pub struct Scratch {
    pub dir: tempfile::TempDir,
    store: Option<String>,
}

impl Scratch {
    pub fn new() -> Scratch {
        Scratch {
            dir: tempfile::tempdir().unwrap(),
            store: None,
        }
    }
    /// A scratch whose store is a fresh PostgreSQL database.
    pub fn postgres() -> Scratch {
        Scratch {
            dir: tempfile::tempdir().unwrap(),
            store: Some(crate::pg::fresh_database()),
        }
    }
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
    /// A FIFO named `name` in the scratch directory: a path that blocks whoever reads it.
    pub fn fifo(&self, name: &str) -> PathBuf {
        let p = self.path(name);
        assert!(Command::new("mkfifo").arg(&p).status().unwrap().success());
        p
    }
    pub fn store(&self) -> String {
        self.store
            .clone()
            .unwrap_or_else(|| self.path("results.db").display().to_string())
    }
    /// A directory with an `index.html`, for Python's `http.server --directory` (a
    /// target we did not write).
    pub fn site(&self) -> PathBuf {
        let root = self.path("www");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(root.join("index.html"), "hello\n").unwrap();
        root
    }
    /// `strainline --store <scratch store> ARGS…`
    pub fn run(&self, args: &[&str]) -> Output {
        strainline()
            .arg("--store")
            .arg(self.store())
            .args(args)
            .current_dir(self.dir.path())
            .output()
            .unwrap()
    }
    /// strainline on this store, pinned to `cpu` (`taskset -c`), in the scratch
    /// directory: what a test that shares out the machine's cores runs.
    pub fn strainline_on_cpu(&self, cpu: &str) -> std::process::Command {
        let mut c = std::process::Command::new("taskset");
        c.args(["-c", cpu, env!("CARGO_BIN_EXE_strainline"), "--store"])
            .arg(self.store())
            .current_dir(self.dir.path());
        c
    }
    /// Monitors the testbed with `args`, writing JSON; returns the output and the document.
    pub fn monitor_testbed(&self, interval: &str, args: &[&str]) -> (Output, serde_json::Value) {
        let mut all = vec!["--"];
        all.extend_from_slice(args);
        self.monitor_testbed_with(interval, &all)
    }

    /// strainline's own peak RSS, bytes, running `args` (with a store of its own) under
    /// strainline monitor; the run must succeed.
    pub fn own_peak(&self, args: &[&str]) -> f64 {
        self.own_peak_ending(args, &[0])
    }

    /// [`Self::own_peak`] of a run that may end with any of `codes`.
    pub fn own_peak_ending(&self, args: &[&str], codes: &[i32]) -> f64 {
        let inner = self.path("inner.db").display().to_string();
        let mut argv = vec![env!("CARGO_BIN_EXE_strainline"), "--store", &inner];
        argv.extend_from_slice(args);
        let (out, doc) = self.monitor_plain(&argv);
        assert!(
            out.status.code().is_some_and(|c| codes.contains(&c)),
            "{:?}\n{}\n{}",
            out.status,
            stdout(&out),
            stderr(&out)
        );
        doc["summary"]["peak_rss"]["bytes"]
            .as_f64()
            .unwrap_or_else(|| panic!("no peak RSS: {doc}"))
    }

    /// Monitors an arbitrary command (`argv`), writing JSON.
    pub fn monitor_plain(&self, argv: &[&str]) -> (Output, serde_json::Value) {
        let json = self.path("plain.json");
        let mut all = vec!["monitor", "-q", "--json", json.to_str().unwrap(), "--"];
        all.extend_from_slice(argv);
        let out = self.run(&all);
        let doc = std::fs::read_to_string(&json)
            .map(|t| serde_json::from_str(&t).unwrap())
            .unwrap_or(serde_json::Value::Null);
        (out, doc)
    }

    /// Like `monitor_testbed`, with monitor flags first: `[flags…, "--", testbed args…]`.
    pub fn monitor_testbed_with(
        &self,
        interval: &str,
        args: &[&str],
    ) -> (Output, serde_json::Value) {
        let json = self.path("out.json");
        let tb = testbed();
        let split = args
            .iter()
            .position(|a| *a == "--")
            .expect("a -- in the arguments");
        let mut all = vec![
            "monitor",
            "--interval",
            interval,
            "--json",
            json.to_str().unwrap(),
        ];
        all.extend_from_slice(&args[..split]);
        all.extend(["--", tb.to_str().unwrap()]);
        all.extend_from_slice(&args[split + 1..]);
        let out = self.run(&all);
        let doc = std::fs::read_to_string(&json)
            .map(|t| serde_json::from_str(&t).unwrap())
            .unwrap_or(serde_json::Value::Null);
        (out, doc)
    }
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The values of `key=value` lines a fixture printed.
pub fn printed(o: &Output, key: &str) -> Vec<u64> {
    stdout(o)
        .lines()
        .filter_map(|l| l.strip_prefix(&format!("{key}="))?.trim().parse().ok())
        .collect()
}

pub fn alive(pid: u64) -> bool {
    // A zombie is dead for our purposes.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            !s.rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('Z')
        })
        .unwrap_or(false)
}

pub const MIB: f64 = 1024.0 * 1024.0;

/// Tests that check a measurement against a known truth (a rate, a CPU figure, a leak,
/// an A/A comparison) must not share the 2 cores with other load-generating tests of
/// this binary: that would be interference the tests themselves inflict. They take
/// [`measuring`] (exclusive); tests that drive load or run targets take [`loaded`]
/// (shared among themselves). Light tests take neither.
static BENCH: std::sync::RwLock<()> = std::sync::RwLock::new(());

pub fn measuring() -> std::sync::RwLockWriteGuard<'static, ()> {
    BENCH.write().unwrap_or_else(|e| e.into_inner())
}

pub fn loaded() -> std::sync::RwLockReadGuard<'static, ()> {
    BENCH.read().unwrap_or_else(|e| e.into_inner())
}

/// The testbed workload most suites use: push to a device registered in set-up. For a
/// `format!` suite, insert it as `{PUSH}` (its `{{port}}` is then left as written).
pub const PUSH: &str = r#"url = "http://127.0.0.1:{{port}}/push/dev0"
body = "x"
setup = [{ path = "/register", body = '{"id": "dev0"}' }]"#;

/// A suite of one bench test of the testbed, whose hashing per request is `{{cost}}`
/// (the version under test in paired sessions); `body` ends the test (rate, duration…).
pub fn cost_suite(body: &str) -> String {
    format!(
        r#"
[suite]
name = "duo"

[target]
command = ["{tb}", "serve", "--listen", "127.0.0.1:{{{{port}}}}", "--workers", "1", "--cpu-cost", "{{{{cost}}}}"]
ready = "http://127.0.0.1:{{{{port}}}}/health"

[[test]]
name = "push"
kind = "bench"
{PUSH}
{body}
"#,
        tb = testbed().display()
    )
}

/// Asserts a command's exit code, showing everything it printed when it differs.
#[track_caller]
pub fn assert_exit(o: &Output, code: i32) {
    assert_eq!(o.status.code(), Some(code), "{}{}", stdout(o), stderr(o));
}

/// Asserts that `text` contains `needle`, showing the text when it does not.
#[track_caller]
pub fn assert_has(text: &str, needle: &str) {
    assert!(text.contains(needle), "{needle:?} not in:\n{text}");
}

/// Every share a load summary prints of its requests — `(N%)` on its FAILURES,
/// Requests and Throughput lines — is at most 100%.
pub fn assert_shares_at_most_100(text: &str) {
    for line in text.lines().filter(|l| {
        let l = l.trim_start();
        l.starts_with("FAILURES") || l.starts_with("Requests") || l.starts_with("Throughput")
    }) {
        for part in line.split('(').skip(1) {
            let Some((n, _)) = part.split_once("%)") else {
                continue;
            };
            if let Ok(share) = n.trim().parse::<f64>() {
                assert!(share <= 100.0, "a share over 100%: {line}\n{text}");
            }
        }
    }
}

/// CPU time the hypervisor took from this VM so far (all CPUs), seconds: the `steal`
/// column of `/proc/stat`, in USER_HZ ticks.
pub fn steal_seconds() -> f64 {
    std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("cpu "))?
                .split_whitespace()
                .nth(8)?
                .parse::<f64>()
                .ok()
        })
        .map_or(0.0, |ticks| ticks / 100.0)
}

/// Seconds all tests of this binary have waited for a quiet machine so far.
static QUIET_WAITED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Waits until the hypervisor took less than 2% of the machine's CPU over the last
/// second, twice in a row: measuring while it takes half of it (seen in CI: 48–82%
/// during a ramp's steps for minutes) tells nothing of strainline. At most a minute a
/// wait and ten minutes for the whole test run, so a machine that is never quiet still
/// finishes its tests in bounded time (their attempts then judge as before).
fn wait_for_quiet(cores: f64) {
    use std::sync::atomic::Ordering;
    let start = std::time::Instant::now();
    let mut quiet = 0;
    while quiet < 2
        && start.elapsed() < std::time::Duration::from_secs(60)
        && QUIET_WAITED.load(Ordering::Relaxed) + start.elapsed().as_secs() < 600
    {
        let before = steal_seconds();
        std::thread::sleep(std::time::Duration::from_secs(1));
        if steal_seconds() - before < 0.02 * cores {
            quiet += 1;
        } else {
            quiet = 0;
        }
    }
    QUIET_WAITED.fetch_add(start.elapsed().as_secs(), Ordering::Relaxed);
}

/// Runs a test that checks a measurement against a known truth. Each attempt starts once
/// the machine is quiet ([`wait_for_quiet`]). If it fails while the hypervisor stole a
/// noticeable share of the machine's CPU (0.25%, and at least 0.05 s: a burst on the
/// target's core bends a 3 s step), the measurement is not of strainline or the target:
/// it is repeated, up to five attempts in all; so is one during which the machine's CPUs
/// ran more than 10% apart or changed speed by that much ([`cpu_speeds`]: this VM's two
/// vCPUs do at times, and a target costs more on the slower). Any other failure is
/// repeated once more at most: the measurement must hold in one of three attempts. The
/// assertions are the same in every attempt.
pub fn on_a_quiet_machine(mut body: impl FnMut()) {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    for attempt in 1..=5 {
        wait_for_quiet(cores);
        let (steal0, t0, speeds0) = (steal_seconds(), std::time::Instant::now(), cpu_speeds());
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(&mut body));
        let stolen = steal_seconds() - steal0;
        let budget = (0.0025 * t0.elapsed().as_secs_f64() * cores).max(0.05);
        let speeds = cpu_speeds();
        match r {
            Ok(()) => return,
            Err(_) if attempt < 5 && stolen > budget => eprintln!(
                "attempt {attempt} failed while the hypervisor stole {stolen:.2} s of CPU: repeated"
            ),
            // The VM's speed moves without any steal being accounted (a neighbour's
            // cache, the host's clock), and its CPUs can run at different speeds (a
            // process then costs more on one than on the other): a fixed loop timed on
            // each CPU before and after tells.
            Err(_) if attempt < 5 && speeds_differ(&speeds0, &speeds) => eprintln!(
                "attempt {attempt} failed while this machine's CPUs ran {speeds0:.2?} then {speeds:.2?} ns a turn (apart or moved by more than 10%): repeated"
            ),
            // A measurement on a shared VM can miss once without any sign above (a
            // pinned vCPU slowed 40% for one run of a history; a ramp's step shared its
            // CPUs with the generator): it must hold in one of three attempts.
            Err(_) if attempt < 3 => eprintln!(
                "attempt {attempt} failed on a machine that seemed to hold still: repeated (three attempts at most)"
            ),
            Err(e) => std::panic::resume_unwind(e),
        }
    }
}

/// The cgroup directories strainline `pid` made, in every hierarchy.
pub fn groups_of(pid: u32) -> Vec<PathBuf> {
    fn walk(dir: &Path, prefix: &str, depth: u32, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            if !p.is_dir() || p.is_symlink() {
                continue;
            }
            let name = e.file_name().to_string_lossy().into_owned();
            if name == prefix || name.starts_with(&format!("{prefix}-")) {
                out.push(p);
            } else if depth > 0 {
                walk(&p, prefix, depth - 1, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(
        Path::new("/sys/fs/cgroup"),
        &format!("strainline-{pid}"),
        4,
        &mut out,
    );
    out
}

/// Polls until `f` holds, for at most `secs`.
pub fn eventually(secs: f64, mut f: impl FnMut() -> bool) -> bool {
    let end = std::time::Instant::now() + std::time::Duration::from_secs_f64(secs);
    while std::time::Instant::now() < end {
        if f() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    f()
}

/// Live processes (other than this test process) for which `pick(pid)` holds.
pub fn processes_where(pick: impl Fn(u64) -> bool) -> Vec<u64> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u64>().ok())
        .filter(|&pid| pid != std::process::id() as u64 && alive(pid) && pick(pid))
        .collect()
}

/// Whether process `pid`'s command line contains `marker`.
pub fn has_marker(pid: u64, marker: &str) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .is_ok_and(|c| String::from_utf8_lossy(&c).contains(marker))
}

/// Processes whose command line contains `marker`.
pub fn with_marker(marker: &str) -> Vec<u64> {
    processes_where(|pid| has_marker(pid, marker))
}

/// `text` with each word `TB` replaced by the testbed's path. Only a whole word: a
/// scratch directory's random name may hold the letters (`/tmp/.tmpTBDidi`).
pub fn with_testbed(text: &str) -> String {
    let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || "._-/".contains(c));
    let mut out = String::with_capacity(text.len());
    let mut from = 0;
    for (at, _) in text.match_indices("TB") {
        let before = text[..at].chars().next_back();
        let after = text[at + 2..].chars().next();
        if at >= from && !word(before) && !word(after) {
            out.push_str(&text[from..at]);
            out.push_str(testbed().to_str().unwrap());
            from = at + 2;
        }
    }
    out.push_str(&text[from..]);
    out
}

/// Writes `body` as a suite (with `TB` replaced by the testbed's path) and runs it.
pub fn run_suite(s: &Scratch, body: &str, extra: &[&str]) -> std::process::Output {
    let path = s.path("suite.toml");
    std::fs::write(&path, with_testbed(body)).unwrap();
    let mut args = vec!["run", path.to_str().unwrap()];
    args.extend_from_slice(extra);
    s.run(&args)
}

/// The element of JSON array `list` whose `key` is `name` (a step, tag or metric of a
/// summary); it must be there.
pub fn named(list: &serde_json::Value, key: &str, name: &str) -> serde_json::Value {
    list.as_array()
        .and_then(|a| a.iter().find(|x| x[key] == name))
        .unwrap_or_else(|| panic!("no {key} = {name} in {list}"))
        .clone()
}

/// The cases of the newest run in the scratch store.
/// A metric a case stored (a case of `strainline show --json`), if it did.
pub fn stored_metric(case: &serde_json::Value, name: &str) -> Option<f64> {
    case["metrics"]
        .as_array()?
        .iter()
        .find(|m| m["name"] == name)?["value"]
        .as_f64()
}

/// A metric a case must have stored.
pub fn metric_of(case: &serde_json::Value, name: &str) -> f64 {
    stored_metric(case, name).unwrap_or_else(|| panic!("no metric {name} in {case}"))
}

pub fn case_metrics(s: &Scratch) -> Vec<serde_json::Value> {
    let runs: serde_json::Value =
        serde_json::from_slice(&s.run(&["runs", "--json"]).stdout).unwrap();
    let newest = runs[0]["id"].to_string();
    let out = s.run(&["show", "--json", &newest]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    doc["cases"].as_array().unwrap().clone()
}

/// Headless Chromium with `args` (installed by `make test`).
pub fn chromium(args: &[&str]) -> std::process::Output {
    std::process::Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
        ])
        .args([
            "--user-data-dir=/tmp/strainline-test-chromium",
            "--no-first-run",
        ])
        .args(args)
        .output()
        .expect("chromium is installed by `make test` (scripts/test-deps.sh)")
}

/// A child process killed (and reaped) when this is dropped — when the attempt that
/// started it ends, passed or panicked: a retried attempt must leave nothing running.
pub struct KillOnDrop(pub std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A process started in a process group of its own (a shell pipeline), the whole
/// group killed when dropped.
pub struct KillGroupOnDrop(pub std::process::Child);

impl KillGroupOnDrop {
    pub fn spawn(mut command: std::process::Command) -> KillGroupOnDrop {
        use std::os::unix::process::CommandExt;
        KillGroupOnDrop(
            command
                .process_group(0)
                .spawn()
                .expect("spawn a process group"),
        )
    }
}

impl Drop for KillGroupOnDrop {
    fn drop(&mut self) {
        // SAFETY: kill(2) with a negative pid signals the group this child leads.
        unsafe {
            libc::kill(-(self.0.id() as i32), libc::SIGKILL);
        }
        let _ = self.0.wait();
    }
}

/// The CPUs this thread may run on (its affinity; none if it cannot be read).
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain data; sched_getaffinity(0, …) reads this thread's set
    // into it and is given the set's own size.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

/// The first CPU this process may run on, for `taskset -c`. The VM's two vCPUs run at
/// different speeds at times (a fixed loop read 12% apart on one, not the other): a
/// target left to float lands on either, and two runs of one version then differ by
/// that much. Tests that compare runs pin the target.
pub fn one_cpu() -> String {
    allowed_cpus().first().copied().unwrap_or(0).to_string()
}

/// [`cpu_speed`] on each CPU this thread may use, pinned there in turn (the thread's
/// affinity is restored after); unpinned, once, if its affinity cannot be read.
pub fn cpu_speeds() -> Vec<f64> {
    let allowed = allowed_cpus();
    if allowed.is_empty() {
        return vec![cpu_speed()];
    }
    let size = std::mem::size_of::<libc::cpu_set_t>();
    let pin = |cpus: &[usize]| {
        // SAFETY: as in `allowed_cpus`; sched_setaffinity(0, …) sets this thread's.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            for &c in cpus {
                libc::CPU_SET(c, &mut set);
            }
            libc::sched_setaffinity(0, size, &set);
        }
    };
    let speeds = allowed
        .iter()
        .map(|&c| {
            pin(&[c]);
            cpu_speed()
        })
        .collect();
    pin(&allowed);
    speeds
}

/// Whether two readings of [`cpu_speeds`] show the CPUs more than 10% apart, or any one
/// moved by more than 10% between them.
fn speeds_differ(before: &[f64], after: &[f64]) -> bool {
    let apart = |v: &[f64]| {
        let (lo, hi) = v
            .iter()
            .fold((f64::INFINITY, 0.0f64), |(l, h), &x| (l.min(x), h.max(x)));
        hi / lo - 1.0 > 0.1
    };
    apart(before)
        || apart(after)
        || before.len() != after.len()
        || before
            .iter()
            .zip(after)
            .any(|(b, a)| (a / b - 1.0).abs() > 0.1)
}

/// Nanoseconds a fixed loop takes per turn, the best of five (the machine's speed now).
pub fn cpu_speed() -> f64 {
    (0..5)
        .map(|_| {
            let t = std::time::Instant::now();
            let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
            for _ in 0..2_000_000 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x = std::hint::black_box(x);
            }
            t.elapsed().as_nanos() as f64 / 2e6
        })
        .fold(f64::INFINITY, f64::min)
}

/// A loopback port nothing listens on now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `command` (its output discarded) once something accepts connections at `addr`; it is
/// killed when the result is dropped. `what` names it for the message when it cannot
/// start (the package `make test` installs).
pub fn serving(
    mut command: std::process::Command,
    addr: impl std::net::ToSocketAddrs + Copy,
    what: &str,
) -> KillOnDrop {
    let child = command
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{what} (installed by `make test`, scripts/test-deps.sh): {e}"));
    let child = KillOnDrop(child);
    assert!(
        eventually(10.0, || std::net::TcpStream::connect(addr).is_ok()),
        "{what} did not start"
    );
    child
}

/// `strainline load --json FILE ARGS…`: its output and the JSON document (`Null` when
/// none was written).
pub fn load_json(s: &Scratch, args: &[&str]) -> (Output, serde_json::Value) {
    let json = s.path("load.json");
    let mut all = vec!["load", "--json", json.to_str().unwrap()];
    all.extend_from_slice(args);
    let out = s.run(&all);
    let doc = std::fs::read_to_string(&json)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(serde_json::Value::Null);
    (out, doc)
}

/// Where a `load --json` document breaks schemas/load.v1.schema.json (empty: it holds).
pub fn load_schema_errors(doc: &serde_json::Value) -> Vec<String> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../schemas/load.v1.schema.json"
    );
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    validator
        .iter_errors(doc)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect()
}

/// Stops process `pid` for `stall` once a second (SIGSTOP, then SIGCONT) until `until`
/// passes, on a thread of its own: a pause the whole server takes, as a collection
/// would. Join the handle to be sure the process is running again.
pub fn stall_every_second(
    pid: u32,
    stall: std::time::Duration,
    until: std::time::Duration,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let end = std::time::Instant::now() + until;
        while std::time::Instant::now() < end {
            std::thread::sleep(std::time::Duration::from_secs(1) - stall);
            // SAFETY: signals to a child of this test.
            unsafe { libc::kill(pid as i32, libc::SIGSTOP) };
            std::thread::sleep(stall);
            unsafe { libc::kill(pid as i32, libc::SIGCONT) };
        }
    })
}

#[test]
fn only_the_word_tb_becomes_the_testbeds_path() {
    let bed = testbed().to_str().unwrap().to_string();
    assert_eq!(
        with_testbed("command = [\"TB\", \"/tmp/.tmpTBDidi/x\"]\nTB serve"),
        format!("command = [\"{bed}\", \"/tmp/.tmpTBDidi/x\"]\n{bed} serve")
    );
}

/// The only script elements of `html` are the timeline's data and its script, which
/// the page's policy allows by its hash (and allows nothing else inline).
pub fn assert_only_our_script(html: &str, file: &std::path::Path) {
    let ours = include_str!("../../src/report/timeline/timeline.js");
    let lower = html.to_lowercase();
    for (at, _) in lower.match_indices("<script") {
        let rest = &html[at..];
        let body = &rest[rest.find('>').unwrap() + 1..rest.find("</script>").unwrap()];
        let data = rest.starts_with("<script type=\"application/json\" class=\"timeline-data\">");
        assert!(
            data || body == ours,
            "{}: a script not ours: {}",
            file.display(),
            &rest[..rest.len().min(200)]
        );
    }
    assert!(!html.contains("<script>alert(1)"));
    let policy = html
        .find("Content-Security-Policy")
        .map(|at| &html[at..at + 300])
        .unwrap();
    assert!(
        policy.contains("default-src 'none'") && policy.contains("script-src 'sha256-"),
        "{policy}"
    );
    assert!(
        !policy.contains("'unsafe-inline'; img-src data:; script-src 'unsafe"),
        "{policy}"
    );
}
