//! The testbed's knobs do what they say, checked from outside with the kernel's own
//! figures (/proc) and a plain HTTP client over real loopback sockets.

use std::process::Command;

use std::time::{Duration, Instant};
use strainline_testbed::harness::{Http, RunningServer};

const TESTBED: &str = env!("CARGO_BIN_EXE_strainline-testbed");
const MIB: f64 = 1024.0 * 1024.0;

fn server(args: &[&str]) -> RunningServer {
    RunningServer::start(std::path::Path::new(TESTBED), args)
}

fn rss_bytes(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: f64 = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap();
    kib * 1024.0
}

/// Every thread of `pid` to run on the first CPU this test may use (`taskset`, as the
/// end-to-end tests pin their targets).
fn pin_to_one_cpu(pid: u32) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let first: String = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap()
        .trim()
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    let out = Command::new("taskset")
        .args(["-a", "-p", "-c", &first, &pid.to_string()])
        .output()
        .expect("taskset (util-linux)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// CPU time of a process, seconds, from the kernel's per-thread scheduler statistics
/// (nanosecond resolution, unlike the 10 ms ticks of /proc/PID/stat).
fn cpu_seconds(pid: u32) -> f64 {
    let mut ns = 0u64;
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let path = task.unwrap().path().join("schedstat");
        if let Ok(s) = std::fs::read_to_string(path) {
            ns += s
                .split_whitespace()
                .next()
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0);
        }
    }
    ns as f64 / 1e9
}

fn register(c: &mut Http, devices: usize) {
    c.register(devices);
}

fn push_n(c: &mut Http, n: usize, devices: usize) {
    let payload = vec![b'x'; 256];
    for i in 0..n {
        let (code, body) = c.request("POST", &format!("/push/dev{}", i % devices), &payload);
        assert_eq!(code, 200, "{body}");
    }
}

#[test]
fn the_leak_knob_leaks_what_it_says_and_none_without_it() {
    let leaky = server(&["--leak-bytes", "10240", "--cpu-cost", "1"]);
    let mut c = leaky.client();
    register(&mut c, 100);
    push_n(&mut c, 100, 100); // warm up allocator and connection
    let before = rss_bytes(leaky.pid());
    push_n(&mut c, 10_000, 100);
    let grew = rss_bytes(leaky.pid()) - before;
    assert!(
        (80.0 * MIB..=120.0 * MIB).contains(&grew),
        "10,000 pushes leaking 10 KiB each grew RSS by {:.1} MiB",
        grew / MIB
    );

    let clean = server(&["--cpu-cost", "1"]);
    let mut c = clean.client();
    register(&mut c, 100);
    push_n(&mut c, 1000, 100);
    let after_1k = rss_bytes(clean.pid());
    push_n(&mut c, 9000, 100);
    let after_10k = rss_bytes(clean.pid());
    assert!(
        (after_10k - after_1k).abs() < 5.0 * MIB,
        "without a leak RSS moved {:.1} MiB",
        (after_10k - after_1k) / MIB
    );
}

#[test]
fn profile_v2_costs_half_as_much_cpu_again_per_push() {
    // v1 and v2 run side by side, on one CPU, and take turns, so both see the same
    // machine noise (the two vCPUs here run at different speeds when the host's other
    // guests load one of them: blocks of 1.30 against 1.50 before the pinning); a third
    // server without hashing measures what a push costs besides it (the HTTP
    // handling, whose cost moves with the machine: on a busy CI host it lowered the
    // plain v2/v1 ratio to 1.33). The knob's truth is on the hashing alone: v2's is
    // 1.5 times v1's.
    let start = |profile: &str, cost: &str| {
        let s = server(&["--profile", profile, "--cpu-cost", cost, "--workers", "1"]);
        let mut c = s.client();
        register(&mut c, 10);
        push_n(&mut c, 20, 10);
        pin_to_one_cpu(s.pid());
        (s, c)
    };
    let (v1, mut c1) = start("v1", "1000");
    let (v2, mut c2) = start("v2", "1000");
    let (bare, mut c0) = start("v1", "0");
    // Ten blocks of 30 pushes each, three at a time in turn; a burst of noise bends a
    // block, so the verdict is the median block's.
    let mut ratios: Vec<f64> = (0..10)
        .map(|_| {
            let cpu = || [&v1, &v2, &bare].map(|s| cpu_seconds(s.pid()));
            let before = cpu();
            for _ in 0..10 {
                push_n(&mut c1, 3, 10);
                push_n(&mut c2, 3, 10);
                push_n(&mut c0, 3, 10);
            }
            let after = cpu();
            let used = |i: usize| after[i] - before[i];
            (used(1) - used(2)) / (used(0) - used(2))
        })
        .collect();
    ratios.sort_by(f64::total_cmp);
    // Pinned, 13 runs of 14 here read 1.50 (blocks 1.44-1.53); one read 1.61 in every
    // block, a bias of that run's processes, not noise. The bounds take both and still
    // fail a knob that does not cost half as much again, or doubles it.
    let ratio = (ratios[4] + ratios[5]) / 2.0;
    eprintln!("v2/v1 CPU per push, hashing alone: {ratio:.3} (blocks: {ratios:.2?})");
    assert!(
        (1.4..=1.7).contains(&ratio),
        "v2/v1 hashing CPU over ten blocks of 30 pushes: median {ratio:.3}, blocks {ratios:.2?}"
    );
}

#[test]
fn stalls_last_as_long_as_configured() {
    let s = server(&["--stall-every", "1s", "--stall-for", "300ms"]);
    let mut c = s.client();
    let mut worst = Vec::new();
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(2600) {
        let t = Instant::now();
        let (code, _) = c.request("GET", "/health", b"");
        assert_eq!(code, 200);
        worst.push(t.elapsed());
        std::thread::sleep(Duration::from_millis(10));
    }
    let stalls: Vec<_> = worst
        .iter()
        .filter(|d| **d >= Duration::from_millis(150))
        .collect();
    assert!(stalls.len() >= 2, "{stalls:?}");
    let longest = worst.iter().max().unwrap();
    assert!(
        *longest >= Duration::from_millis(250) && *longest <= Duration::from_millis(400),
        "longest stall {longest:?}"
    );
}

#[test]
fn tls_and_http2_work_with_curl() {
    let curl = |args: &[&str]| {
        let o = Command::new("curl")
            .args(args)
            .output()
            .expect("curl is installed (.ci/run installs it)");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let tls = server(&["--tls"]);
    assert_eq!(tls.scheme, "https");
    let url = format!("https://{}/health", tls.addr);
    assert_eq!(
        curl(&[
            "-sS",
            "-k",
            "--http2",
            "-o",
            "/dev/null",
            "-w",
            "%{http_version}",
            &url
        ]),
        "2"
    );
    assert_eq!(curl(&["-sS", "-k", "--http1.1", &url]), "ok\n");
    let plain = server(&[]);
    let url = format!("http://{}/health", plain.addr);
    assert_eq!(
        curl(&[
            "-sS",
            "--http2-prior-knowledge",
            "-o",
            "/dev/null",
            "-w",
            "%{http_version}",
            &url
        ]),
        "2"
    );
}

#[test]
fn pushes_need_registration_and_stats_count_them() {
    let s = server(&["--cpu-cost", "1"]);
    let mut c = s.client();
    assert_eq!(c.request("POST", "/push/ghost", b"x").0, 404);
    register(&mut c, 2);
    push_n(&mut c, 5, 2);
    let (code, body) = c.request("GET", "/stats", b"");
    assert_eq!(code, 200);
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["pushes"], 5);
    assert_eq!(v["registered"], 2);
    assert_eq!(v["not_found"], 1);
}

#[test]
fn a_non_loopback_listen_address_is_refused() {
    let o = Command::new(TESTBED)
        .args(["serve", "--listen", "0.0.0.0:0"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("not a loopback address"));
}

#[test]
fn unsafe_writes_tear_under_sigkill_and_the_protocol_does_not() {
    let trial = |unsafe_mode: bool, i: u64| -> bool {
        let dir = tempfile::tempdir().unwrap();
        let mut args = vec![
            "store",
            "write",
            "--dir",
            dir.path().to_str().unwrap(),
            "--count",
            "100000",
            "--value-bytes",
            "262144",
            "--progress-every",
            "0",
        ];
        if unsafe_mode {
            args.push("--unsafe");
        }
        let mut w = Command::new(TESTBED).args(&args).spawn().unwrap();
        // Spread the kills over the first 20–210 ms, deterministically.
        std::thread::sleep(Duration::from_millis(20 + (i * 37) % 190));
        w.kill().unwrap(); // SIGKILL
        w.wait().unwrap();
        let v = Command::new(TESTBED)
            .args(["store", "verify", "--dir", dir.path().to_str().unwrap()])
            .output()
            .unwrap();
        v.status.success()
    };
    let unsafe_failures = (0..20).filter(|&i| !trial(true, i)).count();
    assert!(
        unsafe_failures >= 1,
        "no unsafe trial out of 20 tore a record"
    );
    let safe_passes = (0..20).filter(|&i| trial(false, i)).count();
    assert_eq!(safe_passes, 20);
}
