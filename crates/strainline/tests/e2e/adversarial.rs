//! A hostile suite: a build, a target, command units, a harness, crash work and scale
//! work that all leave a `setsid` child behind, and strainline sent SIGINT, SIGTERM and
//! SIGKILL at seeded random points of it (every phase is hit). After each: no process
//! of the suite is left (found by its working directory, the scratch directory, and by
//! the marker in its command line), no cgroup directory, and SIGINT/SIGTERM ended
//! strainline within 2 s. The crash kind's verify step fails if any process of the work
//! is still there, so "survived" also says the tree was gone before verify ran.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::common::*;

/// Trials per signal: one at a random point of each tenth of the suite's ~4 s, so every
/// phase (build, start, each case, the store's writes) is hit by every signal (the 20
/// points drawn over the whole span before took twice as long and could miss a phase).
const TRIALS: u64 = 10;

/// Processes that belong to the suite: their working directory is inside `dir` (where
/// strainline was started: everything it starts inherits it), or their command line
/// holds `marker`.
pub fn of_the_suite(dir: &Path, marker: &str) -> Vec<u64> {
    processes_where(|pid| {
        std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|c| c.starts_with(dir))
            || has_marker(pid, marker)
    })
}

fn hostile_suite(s: &Scratch, marker: &str) -> String {
    // `[s]leep M` matches a running `sleep M` but not the verify script's own text.
    let pattern = format!("[s]leep {marker}");
    let text = format!(
        r#"[target]
build = ["setsid sleep {marker} & sleep 0.3"]
command = ["setsid sleep {marker} & exec TB serve --listen 127.0.0.1:{{{{port}}}}"]
shell = true
ready = "http://127.0.0.1:{{{{port}}}}/health"

[[test]]
name = "http"
kind = "bench"
url = "http://127.0.0.1:{{{{port}}}}/health"
rate = 50
duration = "500ms"

[[test]]
name = "units"
kind = "bench"
command = ["sh", "-c", "setsid sleep {marker} & sleep 0.05"]
rate = 20
duration = "500ms"

[[test]]
name = "harness"
kind = "harness"
command = ["sh", "-c", "setsid sleep {marker} & sleep 0.3; echo ops=1"]

[[test]]
name = "crash"
kind = "crash"
command = ["sh", "-c", "setsid sleep {marker} & sleep {marker} & sleep 5"]
kill_after = "50ms..200ms"
iterations = 2
verify = ["sh", "-c", "for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < $f 2>/dev/null | grep -q '{pattern}' && exit 1; done; exit 0"]

[[test]]
name = "scale"
kind = "scale"
command = ["sh", "-c", "setsid sleep {marker} & sleep 0.{{{{size}}}}"]
sizes = [1, 2, 3]
"#
    );
    let path = s.path("hostile.toml");
    std::fs::write(&path, with_testbed(&text)).unwrap();
    path.display().to_string()
}

#[test]
fn a_clean_run_of_a_hostile_suite_leaves_nothing_and_crash_verify_sees_no_work() {
    let _bench = loaded();
    // Its bench cases measure: a machine being stolen from may make them INVALID.
    on_a_quiet_machine(|| {
        let s = Scratch::new();
        let marker = format!("31{}", std::process::id() % 10_000);
        let suite = hostile_suite(&s, &marker);
        let out = s.run(&["run", &suite]);
        assert_exit(&out, 0);
        assert_has(
            &String::from_utf8_lossy(&out.stdout),
            "2 of 2 iterations survived",
        );
        assert!(
            eventually(2.0, || of_the_suite(s.dir.path(), &marker).is_empty()),
            "left behind: {:?}",
            of_the_suite(s.dir.path(), &marker)
        );
        // What strainline wrote is private to the user: the store, the run's logs.
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&s.path("results.db")), 0o600);
        assert_eq!(mode(&s.path("run-1")), 0o700);
        assert_eq!(mode(&s.path("run-1/case-003/harness.log")), 0o600);
    });
}

#[test]
fn signals_at_random_points_leave_no_process_and_no_cgroup() {
    let _bench = loaded();
    let s = Scratch::new();
    let marker = format!("32{}", std::process::id() % 10_000);
    let suite = hostile_suite(&s, &marker);
    let mut rng = 0x9E37_79B9_7F4A_7C15u64;
    let mut slow = Vec::new();
    for (sig, name) in [
        (libc::SIGINT, "SIGINT"),
        (libc::SIGTERM, "SIGTERM"),
        (libc::SIGKILL, "SIGKILL"),
    ] {
        for trial in 0..TRIALS {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            // The suite takes ~4 s: a point in each of its tenths, from its build to its
            // last case.
            let at = Duration::from_millis(50 + trial * 400 + rng % 400);
            let child = strainline()
                .args(["--store", &s.store(), "run", &suite])
                .current_dir(s.dir.path())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            let pid = child.id();
            std::thread::sleep(at);
            // SAFETY: signalling our own child.
            unsafe { libc::kill(pid as i32, sig) };
            let sent = Instant::now();
            let out = child.wait_with_output().unwrap();
            let took = sent.elapsed();
            if sig != libc::SIGKILL && took > Duration::from_secs(2) {
                slow.push(format!("{name} at {at:?}: exited after {took:?}"));
            }
            if sig != libc::SIGKILL {
                // Interrupted (130), or done before the signal came (0).
                assert!(
                    matches!(out.status.code(), Some(130 | 0)),
                    "{name} trial {trial} at {at:?}: exit {:?}",
                    out.status
                );
            }
            assert!(
                eventually(3.0, || of_the_suite(s.dir.path(), &marker).is_empty()),
                "{name} trial {trial} at {at:?} left: {:?}",
                of_the_suite(s.dir.path(), &marker)
            );
            assert!(
                eventually(2.0, || groups_of(pid).is_empty()),
                "{name} trial {trial} at {at:?} left cgroups {:?}",
                groups_of(pid)
            );
        }
    }
    assert!(slow.is_empty(), "slow to stop: {slow:#?}");
}
