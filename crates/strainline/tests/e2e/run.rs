//! `strainline run`: suites against the real testbed, one test per promise of the
//! suite runner — each kind's verdict against a known truth, configuration errors,
//! a crashing target, and Ctrl-C.

use crate::common::*;

const TARGET: &str = r#"
[target]
command = ["TB", "serve", "--listen", "127.0.0.1:{{port}}", "--workers", "1", "--cpu-cost", "{{cost}}", "--leak-bytes", "{{leak}}"]
ready = "http://127.0.0.1:{{port}}/health"
"#;

/// The testbed's capacity at `--cpu-cost 250` on one worker, measured with a closed model
/// (8 connections, 3 s) against a fresh server: the known truth a ramp's ceiling is
/// checked against.
fn closed_model_capacity(s: &Scratch) -> f64 {
    let srv = strainline_testbed::harness::RunningServer::start(
        &testbed(),
        &["--workers", "1", "--cpu-cost", "250"],
    );
    srv.client().register(1);
    let json = s.path("closed.json");
    let out = s.run(&[
        "load",
        &srv.url("/push/dev0"),
        "-m",
        "POST",
        "-d",
        "x",
        "-c",
        "8",
        "--threads",
        "1",
        "-z",
        "3s",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(
        matches!(out.status.code(), Some(0) | Some(3)),
        "{}",
        stdout(&out)
    );
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap();
    doc["summary"]["achieved_rate"].as_f64().unwrap()
}

#[test]
fn ramp_finds_the_ceiling_the_closed_model_measures_and_names_the_cpu() {
    let _bench = measuring();
    on_a_quiet_machine(|| {
        // On this VM the CPU a push costs drifts by ±10% within seconds, without any
        // steal the guest can see (seen: 1,580–2,040 µs per push in consecutive 3 s
        // runs). So the truth is measured before and after the ramp, and the ceiling is
        // checked against the range the two span. If they differ by more than 20% the
        // truth itself moved too far to judge by: the attempt is repeated.
        for attempt in 1..=3 {
            let s = Scratch::new();
            let before = closed_model_capacity(&s);
            // Steps of 5% from half the capacity: the ceiling is quantised to 5%, the
            // rest of the ±15% is the measurements' noise on a shared 2-core machine.
            let step = (before / 20.0).round().max(5.0);
            let start = 10.0 * step;
            let suite = format!(
                "{TARGET}\n[[test]]\nname = \"peak\"\nkind = \"ramp\"\nmatrix = {{ cost = [250], leak = [0] }}\n\
                 url = \"http://127.0.0.1:{{{{port}}}}/push/dev0\"\nbody = \"x\"\n\
                 setup = [{{ path = \"/register\", body = '{{\"id\": \"dev0\"}}' }}]\n\
                 start = {start}\nstep = {step}\nstep_duration = \"1500ms\"\nmax_steps = 20\nslo_p99 = \"200ms\"\n"
            );
            let out = run_suite(&s, &suite, &[]);
            assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
            let ceiling = metric_of(&case_metrics(&s)[0], "ceiling");
            let after = closed_model_capacity(&s);
            let (low, high) = (before.min(after), before.max(after));
            eprintln!("ceiling {ceiling} vs closed-model {before:.0} before, {after:.0} after");
            if high / low > 1.2 && attempt < 3 {
                eprintln!(
                    "attempt {attempt}: the target's capacity moved by more than 20%: repeated"
                );
                continue;
            }
            assert!(
                ceiling >= 0.85 * low && ceiling <= 1.15 * high,
                "ceiling {ceiling} vs closed-model {before:.0} before, {after:.0} after\n{}",
                stdout(&out)
            );
            assert_has(&stdout(&out), "limiting factor: target CPU saturated");
            return;
        }
    });
}

/// A soak of the testbed. The open model's pool is capped at 8 connections (300 req/s
/// of sub-millisecond pushes need 1–2): on a busy machine a hiccup would otherwise make
/// the pool open connections all through the soak, each ~90 KiB of the target's
/// memory, which the leak fit rightly counts (seen: 5.1 KiB per push measured for
/// 4 KiB injected). The pool policy that avoids this is issue #12's.
fn soak_suite(leak: u32, repeat: u32, duration: &str) -> String {
    format!(
        "{TARGET}\n[[test]]\nname = \"stability\"\nkind = \"soak\"\nrepeat = {repeat}\nmatrix = {{ cost = [1], leak = [{leak}] }}\n\
         url = \"http://127.0.0.1:{{{{port}}}}/push/dev0\"\nbody = \"x\"\nconnections = 8\n\
         setup = [{{ path = \"/register\", body = '{{\"id\": \"dev0\"}}' }}]\n\
         rate = 300\nduration = \"{duration}\"\nleak_budget = \"10MiB\"\nhorizon = \"24h\"\ngates = [\"leak = none\"]\n"
    )
}

#[test]
fn soak_measures_an_injected_leak_per_request() {
    let _bench = measuring();
    on_a_quiet_machine(|| {
        let s = Scratch::new();
        let out = run_suite(&s, &soak_suite(4096, 1, "6s"), &[]);
        assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
        let cases = case_metrics(&s);
        let per_op = metric_of(&cases[0], "retained_per_op");
        assert!(
            (per_op / 4096.0 - 1.0).abs() <= 0.25,
            "retained {per_op} bytes per push\n{}",
            stdout(&out)
        );
        assert_eq!(metric_of(&cases[0], "leak"), 1.0);
        // The target's samples went to the store as the soak ran (one every 250 ms).
        let db = rusqlite::Connection::open(s.store()).unwrap();
        let n: i64 = db
            .query_row("SELECT COUNT(*) FROM samples", [], |r| r.get(0))
            .unwrap();
        assert!(n >= 20, "{n} samples stored");
    });
}

#[test]
fn soak_without_a_leak_passes_five_times_out_of_five() {
    let _bench = measuring();
    on_a_quiet_machine(|| {
        let s = Scratch::new();
        let out = run_suite(&s, &soak_suite(0, 5, "5s"), &[]);
        assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
        let cases = case_metrics(&s);
        assert_eq!(cases.len(), 5);
        assert!(cases.iter().all(|c| c["status"] == "passed"));
    });
}

fn rounds_suite(leak: u32) -> String {
    format!(
        "{TARGET}\n[[test]]\nname = \"rounds\"\nkind = \"rounds\"\nmatrix = {{ cost = [1], leak = [{leak}] }}\n\
         url = \"http://127.0.0.1:{{{{port}}}}/push/dev0\"\nbody = \"x\"\n\
         setup = [{{ path = \"/register\", body = '{{\"id\": \"dev0\"}}' }}]\n\
         rounds = 6\nops = 1000\nconnections = 4\nsettle = \"200ms\"\nleak_budget = \"1MiB\"\n"
    )
}

#[test]
fn rounds_detect_the_leak_and_pass_without_it() {
    let _bench = measuring();
    on_a_quiet_machine(|| {
        let s = Scratch::new();
        let out = run_suite(&s, &rounds_suite(4096), &[]);
        assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
        let c = &case_metrics(&s)[0];
        assert_eq!(metric_of(c, "leak"), 1.0);
        let per_op = metric_of(c, "retained_per_op");
        assert!((per_op / 4096.0 - 1.0).abs() <= 0.25, "{per_op}");
        let s = Scratch::new();
        let out = run_suite(&s, &rounds_suite(0), &[]);
        assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
        assert_eq!(metric_of(&case_metrics(&s)[0], "leak"), 0.0);
    });
}

fn crash_suite(unsafe_flag: &str) -> String {
    format!(
        "[[test]]\nname = \"crash\"\nkind = \"crash\"\niterations = 10\nkill_after = \"20ms..150ms\"\n\
         command = [\"TB\", \"store\", \"write\", \"--dir\", \"{{{{dir}}}}\", \"--count\", \"100000\", \"--value-bytes\", \"262144\", \"--progress-every\", \"0\"{unsafe_flag}]\n\
         verify = [\"TB\", \"store\", \"verify\", \"--dir\", \"{{{{dir}}}}\"]\n"
    )
}

#[test]
fn crash_tests_fail_the_unsafe_store_and_pass_the_safe_one() {
    let _bench = loaded();
    on_a_quiet_machine(|| {
        let s = Scratch::new();
        let out = run_suite(&s, &crash_suite(", \"--unsafe\""), &[]);
        assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
        let c = &case_metrics(&s)[0];
        assert!(metric_of(c, "failed_iterations") >= 1.0);
        assert_has(&stdout(&out), "torn");
        let s = Scratch::new();
        let out = run_suite(&s, &crash_suite(""), &[]);
        assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
        assert_eq!(metric_of(&case_metrics(&s)[0], "survived_iterations"), 10.0);
        // A test there to show the defect caught (`expect = "failed"`) fails the suite
        // when the defect goes unseen: here the safe store, which survives.
        let s = Scratch::new();
        let expecting = crash_suite("").replace(
            "kind = \"crash\"\n",
            "kind = \"crash\"\nexpect = \"failed\"\n",
        );
        let out = run_suite(&s, &expecting, &[]);
        assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
        assert_has(
            &stdout(&out),
            "expected to fail (expect = \"failed\") but passed: the defect it is there to show was not caught",
        );
    });
}

/// The sizes of `examples/job-server-leak.toml`, the ones users run.
const SCALE_SIZES: &str = "[200, 2000, 10000, 50000]";

fn scale_run(command: &str) -> (Option<i32>, Option<f64>, String) {
    let s = Scratch::new();
    let suite = format!(
        "[[test]]\nname = \"scale\"\nkind = \"scale\"\nsizes = {SCALE_SIZES}\ncommand = {command}\n"
    );
    let out = run_suite(&s, &suite, &[]);
    let exponent = case_metrics(&s)[0]["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "exponent")
        .and_then(|m| m["value"].as_f64());
    (out.status.code(), exponent, stdout(&out))
}

#[test]
fn scale_tells_linear_from_quadratic_at_the_example_s_sizes_despite_a_fixed_start() {
    let _bench = measuring();
    on_a_quiet_machine(|| {
        // 2 ms of CPU to start, as a real binary spends: the log–log slope over all four
        // sizes called a quadratic linear (0.67); the fit of a + b·nᵏ does not.
        let (code, e, text) = scale_run(r#"["TB", "work", "--n", "{{size}}", "--start-ms", "2"]"#);
        assert_eq!(code, Some(0), "{text}");
        let e = e.unwrap();
        assert!((0.8..=1.2).contains(&e), "linear work fitted {e}\n{text}");
        assert_has(&text, "linear (or better)");
        let (code, e, text) = scale_run(
            r#"["TB", "work", "--n", "{{size}}", "--start-ms", "2", "--quadratic", "--rounds", "20"]"#,
        );
        assert_eq!(code, Some(1), "{text}");
        let e = e.unwrap();
        assert!(
            (1.7..=2.3).contains(&e),
            "quadratic work fitted {e}\n{text}"
        );
        assert_has(&text, "superlinear: the interval is above 1.3");
    });
}

#[test]
fn scale_judges_a_program_we_did_not_write_or_says_it_cannot() {
    let _bench = measuring();
    on_a_quiet_machine(|| {
        // CPython's list.insert(0, …) moves the whole list: n² behind a ~100 ms start.
        let (code, e, text) = scale_run(
            r#"["python3", "-c", "import sys\nl = []\nfor i in range(int(sys.argv[1])): l.insert(0, i)", "{{size}}"]"#,
        );
        assert_eq!(code, Some(1), "{text}");
        assert!(e.unwrap() > 1.5, "{text}");
        // list.append at these sizes is a millisecond of work under the interpreter's
        // start and its noise: no verdict, and the sizes that would give one.
        let (code, _, text) = scale_run(
            r#"["python3", "-c", "import sys\nl = []\nfor i in range(int(sys.argv[1])): l.append(i)", "{{size}}"]"#,
        );
        assert_eq!(code, Some(3), "{text}");
        assert_has(&text, "the sizes cannot tell linear from superlinear");
        assert_has(&text, "would decide it");
    });
}

#[test]
fn harness_metrics_are_parsed_and_gated() {
    let _bench = loaded();
    on_a_quiet_machine(|| {
        let suite = |gate: &str| {
            format!("[[test]]\nname = \"harness\"\nkind = \"harness\"\ncommand = [\"TB\", \"work\", \"--n\", \"1000\"]\ngates = [{gate}]\n")
        };
        let s = Scratch::new();
        let out = run_suite(&s, &suite("\"ops >= 1000\", \"peak_rss < 100MiB\""), &[]);
        assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
        assert_eq!(metric_of(&case_metrics(&s)[0], "ops"), 1000.0);
        let s = Scratch::new();
        let out = run_suite(&s, &suite("\"ops > 5000\""), &[]);
        assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
        assert!(
            stdout(&out).contains("gate failed: ops > 5000 (measured 1000"),
            "{}",
            stdout(&out)
        );
    });
}

#[test]
fn configuration_errors_exit_2_with_their_position() {
    let base = format!("{TARGET}\n[[test]]\nname = \"b\"\nkind = \"bench\"\nurl = \"http://127.0.0.1:{{{{port}}}}/health\"\nduration = \"1s\"\ngates = [\"latency_p99 < 1s\"]\n");
    for (bad, expect) in [
        (
            base.replace("latency_p99", "p99"),
            "suite.toml:11:11: gate: unknown metric 'p99'",
        ),
        (
            base.replace("duration =", "duraton ="),
            "suite.toml:10:1: test 'b': unknown key `duraton` — did you mean `duration`? (a bench test takes: name, kind,",
        ),
        (
            base.replace("\"1s\"", "\"1 sec\""),
            "suite.toml:10:12: duration: '1 sec' is not a duration",
        ),
    ] {
        let s = Scratch::new();
        let out = run_suite(&s, &bad, &[]);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(
            stderr(&out).contains(expect),
            "expected {expect:?} in {}",
            stderr(&out)
        );
        // An unknown key lists the bench's own keys, never another kind's.
        assert!(!stderr(&out).contains("kill_after"), "{}", stderr(&out));
    }
}

#[test]
fn a_target_that_crashes_mid_test_fails_the_case_with_exit_4_and_its_last_lines() {
    let _bench = loaded();
    on_a_quiet_machine(|| {
        let s = Scratch::new();
        let suite = "[target]\ncommand = [\"TB\", \"serve\", \"--listen\", \"127.0.0.1:{{port}}\", \"--crash-after\", \"150\"]\n\
                 ready = \"http://127.0.0.1:{{port}}/health\"\n\n[[test]]\nname = \"b\"\nkind = \"bench\"\n\
                 url = \"http://127.0.0.1:{{port}}/health\"\nrate = 200\nduration = \"3s\"\n";
        let out = run_suite(&s, suite, &[]);
        assert_eq!(out.status.code(), Some(4), "{}", stdout(&out));
        let text = stdout(&out);
        assert!(
            text.contains("CRASHED") && text.contains("the target exited during the case"),
            "{text}"
        );
        assert!(
            text.contains("crash-after: request 151 over the limit"),
            "{text}"
        );
    });
}

#[test]
fn ctrl_c_mid_suite_stops_the_target_and_keeps_the_completed_cases() {
    let _bench = loaded();
    on_a_quiet_machine(|| {
        let s = Scratch::new();
        let marker = "2049"; // an unusual --state-bytes, to find the target's processes
        let suite = format!(
        "[target]\ncommand = [\"TB\", \"serve\", \"--listen\", \"127.0.0.1:{{{{port}}}}\", \"--state-bytes\", \"{marker}\"]\n\
         ready = \"http://127.0.0.1:{{{{port}}}}/health\"\n\n[[test]]\nname = \"b\"\nkind = \"bench\"\nrepeat = 3\n\
         url = \"http://127.0.0.1:{{{{port}}}}/health\"\nrate = 100\nduration = \"2s\"\n"
    );
        let path = s.path("suite.toml");
        std::fs::write(&path, with_testbed(&suite)).unwrap();
        let mut child = strainline()
            .args(["--store", &s.store(), "run", path.to_str().unwrap()])
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(3500));
        unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(130));
        let out = s.run(&["runs", "--json"]);
        let runs: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(runs[0]["status"], "interrupted");
        let cases = case_metrics(&s);
        assert!(cases.iter().any(|c| c["status"] == "passed"), "{cases:?}");
        // No testbed of this suite survives.
        let survivors: Vec<String> = std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
            .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
            .filter(|c| c.contains("serve") && c.contains(&format!("--state-bytes {marker}")))
            .collect();
        assert!(survivors.is_empty(), "{survivors:?}");
    });
}

#[test]
fn every_example_suite_is_valid() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples");
    let mut n = 0;
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        let text = std::fs::read_to_string(&p).unwrap_or_default();
        if p.extension().is_some_and(|x| x == "toml") && text.contains("[[test]]") {
            strainline::suite::load(&p, 1.0).unwrap_or_else(|e| panic!("{e}"));
            n += 1;
        }
    }
    assert!(n >= 6, "only {n} example suites");
}

#[test]
fn a_target_that_cannot_start_makes_the_run_invalid() {
    let s = Scratch::new();
    let suite = "[target]\ncommand = [\"TB\", \"serve\", \"--listen\", \"10.1.2.3:{{port}}\"]\n\
                 ready = \"http://127.0.0.1:{{port}}/health\"\nready_timeout = \"3s\"\n\n[[test]]\nname = \"b\"\nkind = \"bench\"\n\
                 url = \"http://127.0.0.1:{{port}}/health\"\nduration = \"1s\"\n";
    // The testbed refuses a non-loopback address and exits at once: nothing is sent anywhere.
    let out = run_suite(&s, suite, &[]);
    assert_eq!(out.status.code(), Some(3), "{}", stdout(&out));
    let text = stdout(&out);
    assert!(
        text.contains("the target exited during start-up")
            && text.contains("not a loopback address"),
        "{text}"
    );
}

#[test]
fn watched_processes_are_reported_beside_the_target_and_an_attached_target_is_left_running() {
    let _bench = loaded();
    on_a_quiet_machine(|| {
        // A "database" to watch: a process holding 30 MiB, found by its command line.
        let mut db = std::process::Command::new(testbed())
            .args(["hold", "--mib", "30", "--ms", "20017"])
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // The target, started by us; strainline attaches to it through a pid file.
        let srv = strainline_testbed::harness::RunningServer::start(&testbed(), &[]);
        let s = Scratch::new();
        let pid_file = s.path("server.pid");
        std::fs::write(&pid_file, srv.pid().to_string()).unwrap();
        let suite = format!(
        "[target]\nattach_pid_file = \"{}\"\nready = \"http://{}/health\"\n\n\
         [[watch]]\nname = \"db\"\ncmdline = \"hold --mib 30 --ms 20017\"\n\n\
         [[test]]\nname = \"b\"\nkind = \"bench\"\nurl = \"http://{}/health\"\nrate = 100\nduration = \"1s\"\n\
         gates = [\"watch_db_peak_rss > 25MiB\", \"peak_rss < 200MiB\"]\n",
        pid_file.display(),
        srv.addr,
        srv.addr
    );
        let out = run_suite(&s, &suite, &[]);
        db.kill().unwrap();
        db.wait().unwrap();
        assert_exit(&out, 0);
        assert_has(&stdout(&out), "watch db: peak RSS");
        assert!(
            alive(srv.pid() as u64),
            "strainline stopped a target it had only attached to"
        );
    });
}

/// A target that speaks TLS only is ready when its https:// probe answers (the probe
/// accepts the testbed's self-signed certificate); before, the probe spoke http:// only
/// and such a target was never ready.
#[test]
fn an_https_readiness_probe_sees_a_tls_target_ready() {
    let s = Scratch::new();
    let suite = "[target]\ncommand = [\"TB\", \"serve\", \"--listen\", \"127.0.0.1:{{port}}\", \"--tls\"]\n\
                 ready = \"https://127.0.0.1:{{port}}/health\"\nready_timeout = \"20s\"\n\
                 [[test]]\nname = \"client\"\nkind = \"bench\"\ncommand = [\"true\"]\n\
                 connections = 1\nduration = \"1s\"\n";
    let out = run_suite(&s, suite, &[]);
    assert_exit(&out, 0);
    assert!(!stdout(&out).contains("not ready"), "{}", stdout(&out));
    // The same target behind a plain http:// probe never answers HTTP: not ready, named.
    let plain = suite
        .replace("https://", "http://")
        .replace("\"20s\"", "\"2s\"");
    let out = run_suite(&s, &plain, &[]);
    assert_exit(&out, 3);
    assert_has(&stdout(&out), "was not ready within");
}

#[test]
fn a_command_workload_runs_without_a_target() {
    let _bench = loaded();
    on_a_quiet_machine(|| {
        let s = Scratch::new();
        let suite = "[[test]]\nname = \"client\"\nkind = \"bench\"\ncommand = [\"TB\", \"work\", \"--n\", \"100\"]\n\
                 connections = 2\nduration = \"1s\"\ngates = [\"error_rate = 0\", \"throughput > 5\"]\n";
        let out = run_suite(&s, suite, &[]);
        assert_exit(&out, 0);
        assert_has(&stdout(&out), "command: ");
    });
}

#[test]
fn a_suite_s_own_variable_defaults_give_way_to_var() {
    let s = Scratch::new();
    let seen = s.path("seen");
    let suite = format!(
        "[suite]\nvars = {{ version = \"v1\" }}\n\n[[test]]\nname = \"c\"\nkind = \"bench\"\n\
         command = [\"sh\", \"-c\", \"echo {{{{version}}}} >> {}\"]\nconnections = 1\nduration = \"200ms\"\n",
        seen.display()
    );
    // As shipped: the suite's default.
    assert_exit(&run_suite(&s, &suite, &["--no-tui"]), 0);
    let lines = std::fs::read_to_string(&seen).unwrap();
    assert!(
        !lines.is_empty() && lines.lines().all(|l| l == "v1"),
        "{lines}"
    );
    // --var wins over it.
    std::fs::remove_file(&seen).unwrap();
    assert_exit(
        &run_suite(&s, &suite, &["--no-tui", "--var", "version=v2"]),
        0,
    );
    let lines = std::fs::read_to_string(&seen).unwrap();
    assert!(
        !lines.is_empty() && lines.lines().all(|l| l == "v2"),
        "{lines}"
    );
}

#[test]
fn a_scenario_can_be_a_soak_workload_and_log_classes_are_gateable() {
    let _bench = loaded();
    on_a_quiet_machine(|| {
        let s = Scratch::new();
        std::fs::write(
        s.path("devices.toml"),
        "clients = 10\n[[step]]\nname = \"register\"\nonce = true\npath = \"/register\"\nbody = '{\"id\": \"d{{client}}\"}'\n\
         [[step]]\nname = \"again\"\nonce = true\npath = \"/register\"\nbody = '{\"id\": \"d{{client}}\"}'\n\
         [[step]]\nname = \"push\"\nevery = \"200ms\"\npath = \"/push/d{{client}}\"\nbody = \"x\"\n",
    )
    .unwrap();
        let suite = "[target]\ncommand = [\"TB\", \"serve\", \"--listen\", \"127.0.0.1:{{port}}\"]\n\
                 ready = \"http://127.0.0.1:{{port}}/health\"\n\n[logs]\nclasses = { \"re-registration\" = \"registered again\" }\n\n\
                 [[test]]\nname = \"devices\"\nkind = \"soak\"\nurl = \"http://127.0.0.1:{{port}}\"\nscenario = \"devices.toml\"\n\
                 duration = \"3s\"\ngates = [\"log_re_registration = 10\", \"error_rate = 0\"]\n";
        let out = run_suite(&s, suite, &[]);
        assert_exit(&out, 0);
        let c = &case_metrics(&s)[0];
        // Each device registered twice: the target logged ten re-registrations.
        assert_eq!(metric_of(c, "log_re_registration"), 10.0);
        assert!(metric_of(c, "throughput") > 30.0);
    });
}

/// A store on a full filesystem mid-suite (a 2 MiB tmpfs, filled by a harness's 4 MB
/// output): strainline cannot go on, which is not a usage error — it exits 3 (the run
/// is invalid) naming the cause, and the case before it was stored. Before, any error
/// without a class read as a usage error (2).
#[test]
fn a_store_on_a_full_disk_mid_suite_is_an_invalid_run_not_a_usage_error() {
    let s = Scratch::new();
    let full = s.path("full");
    std::fs::create_dir_all(&full).unwrap();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=2m", "tmpfs"])
        .arg(&full)
        .status()
        .unwrap();
    assert!(
        mounted.success(),
        "mounting a tmpfs needs root (CI runs as root)"
    );
    struct Unmount(std::path::PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg(&self.0).status();
        }
    }
    let _u = Unmount(full.clone());
    let suite = s.path("fill.toml");
    std::fs::write(
        &suite,
        "[[test]]\nname = \"small\"\nkind = \"harness\"\ncommand = [\"sh\", \"-c\", \"echo ops=1\"]\n\
         [[test]]\nname = \"big\"\nkind = \"harness\"\ncommand = [\"sh\", \"-c\", \"head -c 4000000 /dev/zero | tr '\\\\0' x; echo; echo ops=2\"]\n\
         [[test]]\nname = \"after\"\nkind = \"harness\"\ncommand = [\"sh\", \"-c\", \"echo ops=3\"]\n",
    )
    .unwrap();
    let store = full.join("results.db");
    let out = strainline()
        .args([
            "--store",
            store.to_str().unwrap(),
            "run",
            suite.to_str().unwrap(),
            "--no-tui",
        ])
        .output()
        .unwrap();
    let (text, err) = (stdout(&out), stderr(&out));
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert_has(&err, "strainline could not go on");
    assert!(err.contains("full"), "{err}");
    // The harness's 4 MB line is not the reason's text: a reason is bounded.
    assert!(text.len() < 20_000, "{} bytes printed", text.len());
    // The first case is in the store.
    let shown = strainline()
        .args([
            "--store",
            store.to_str().unwrap(),
            "show",
            "--json",
            "latest",
        ])
        .output()
        .unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(doc["cases"][0]["name"], "small", "{doc}");
    assert_eq!(doc["cases"][0]["status"], "passed", "{doc}");
}

#[test]
fn a_target_that_is_only_a_url_is_loaded_and_said_to_be_unmonitored() {
    let _bench = loaded();
    // A service strainline did not start and cannot watch (a staging URL in CI).
    let srv =
        strainline_testbed::harness::RunningServer::start(&testbed(), &["--fail-rate", "0.5"]);
    let health = srv.url("/health");
    let register = srv.url("/register");
    let suite = |kind: &str, gate: &str| {
        format!(
            "[target]\nurl = \"{health}\"\n\n[[test]]\nname = \"b\"\nkind = \"{kind}\"\nurl = \"{register}\"\n\
             body = '{{\"id\": \"a\"}}'\nrate = 100\nduration = \"1s\"\ngates = [\"{gate}\"]\n"
        )
    };
    let s = Scratch::new();
    let out = run_suite(&s, &suite("bench", "error_rate < 1%"), &[]);
    let text = stdout(&out);
    // Half its registrations fail: the gate fails the run, exit 1.
    assert_eq!(out.status.code(), Some(1), "{text}{}", stderr(&out));
    assert_has(&text, "target: not monitored");
    assert_has(&text, "gate failed: error_rate < 1%");
    // No figure of the target is made up: no CPU line, no target metrics.
    assert!(!text.contains("ms of CPU per request"), "{text}");
    let names: Vec<String> = case_metrics(&s)[0]["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap().to_string())
        .collect();
    assert!(
        !names.iter().any(|n| n == "target_cpu" || n == "peak_rss"),
        "{names:?}"
    );
    // What needs the target's figures is refused at its line.
    let out = run_suite(&s, &suite("bench", "peak_rss < 10MiB"), &[]);
    assert_eq!(out.status.code(), Some(2));
    assert_has(
        &stderr(&out),
        "'peak_rss' is a figure of the target's processes",
    );
    let out = run_suite(&s, &suite("soak", "error_rate < 1%"), &[]);
    assert_eq!(out.status.code(), Some(2));
    assert_has(&stderr(&out), "needs a target strainline starts or watches");
}

#[test]
fn a_number_without_its_unit_is_refused_with_the_fix_in_flags_and_suites() {
    let s = Scratch::new();
    // Flags: refused at once, exit 2, before anything runs.
    for (args, says) in [
        (
            vec![
                "run",
                "x.toml",
                "--baseline",
                "v=1",
                "--candidate",
                "v=2",
                "--band",
                "cpu_per_op=3",
            ],
            "'3' has no unit: 3 what? write 3%",
        ),
        (
            vec!["compare", "1", "2", "--band", "default=0.2"],
            "write 0.2% (or 20% if 0.2 was a fraction)",
        ),
        (vec!["history", "--min-change", "5"], "'5' has no unit"),
        (
            vec![
                "load",
                "http://127.0.0.1:9/",
                "-z",
                "1s",
                "--gate",
                "latency_p99 < 300",
            ],
            "write 300ms or 300s",
        ),
    ] {
        let out = s.run(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert_has(&stderr(&out), says);
    }
    // The suite: at its line and column.
    let base = format!(
        "{TARGET}\n[[test]]\nname = \"r\"\nkind = \"ramp\"\nurl = \"http://127.0.0.1:{{{{port}}}}/health\"\nstart = 10\nstep = 10\nstep_duration = \"1s\"\n"
    );
    for (line, says) in [
        (
            "max_error_rate = 0.01",
            "max_error_rate: '0.01' has no unit",
        ),
        (
            "gates = [\"peak_rss < 64\"]",
            "'64' has no unit: 64 what? write 64MiB",
        ),
    ] {
        let out = s.run(&["check", &{
            let p = s.path("u.toml");
            std::fs::write(&p, format!("{base}{line}\n")).unwrap();
            p.to_str().unwrap().to_string()
        }]);
        assert_eq!(out.status.code(), Some(2), "{line}: {}", stderr(&out));
        let e = stderr(&out);
        assert!(e.contains("u.toml:") && e.contains(says), "{line}: {e}");
    }
    let out = s.run(&["check", &{
        let p = s.path("c.toml");
        std::fs::write(&p, format!("{base}\n[compare]\nband = 20\n")).unwrap();
        p.to_str().unwrap().to_string()
    }]);
    assert_eq!(out.status.code(), Some(2));
    assert_has(
        &stderr(&out),
        "band: '20' has no unit: 20 what? write 20%, in quotes: \"20%\"",
    );
}
