//! Hostile peers (`tests/fixtures/hostile_peer.py`, on loopback): a broker that floods
//! QoS 1 deliveries and stops reading, one that forges the stamps of deliveries, an
//! HTTP/2 server and a WebSocket server that flood pings without reading, an HTTP/1.1
//! server whose chunk-size line never ends, a WebSocket server sending a 100 MB message
//! in fragments to 20 sockets. Each run ends on time (SIGINT within 2 s), its resident
//! set within 64 MiB of a normal run's (28 MB in a debug build), with no panic or abort
//! and the failure classified. And the files that once passed `check` and broke `run`.

use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::common::*;

/// What one watched run of strainline did.
struct Watched {
    code: Option<i32>,
    text: String,
    peak_kib: u64,
    elapsed: Duration,
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// Runs `strainline load ARGS…`, its resident set read every 20 ms; SIGINT after
/// `interrupt` when given. Killed (and the test failed) after `limit`.
fn watched(s: &Scratch, args: &[&str], interrupt: Option<Duration>, limit: Duration) -> Watched {
    let out = s.path("out.txt");
    let mut child = KillOnDrop(
        strainline()
            .arg("--store")
            .arg(s.store())
            .args(["load", "--no-progress"])
            .args(args)
            .stdout(std::fs::File::create(&out).unwrap())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap(),
    );
    let pid = child.0.id();
    let t = Instant::now();
    let mut peak = 0;
    let mut interrupted = None;
    let status = loop {
        if let Some(st) = child.0.try_wait().unwrap() {
            break st;
        }
        peak = peak.max(rss_kib(pid));
        if interrupt.is_some_and(|after| t.elapsed() >= after) && interrupted.is_none() {
            // SAFETY: a signal to our own child, still unreaped.
            unsafe { libc::kill(pid as i32, libc::SIGINT) };
            interrupted = Some(Instant::now());
        }
        assert!(
            t.elapsed() < limit,
            "still running after {limit:?}: {}",
            std::fs::read_to_string(&out).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    if let Some(at) = interrupted {
        assert!(
            at.elapsed() < Duration::from_secs(2),
            "SIGINT took {:?} to end it",
            at.elapsed()
        );
    }
    Watched {
        code: status.code(),
        text: std::fs::read_to_string(&out).unwrap_or_default(),
        peak_kib: peak,
        elapsed: t.elapsed(),
    }
}

/// The hostile peer in `mode` on a free loopback port.
fn peer(mode: &str) -> (KillOnDrop, u16) {
    let port = free_port();
    let mut c = std::process::Command::new("python3");
    c.arg(format!(
        "{}/tests/fixtures/hostile_peer.py",
        env!("CARGO_MANIFEST_DIR")
    ))
    .args([mode, &port.to_string()]);
    (serving(c, ("127.0.0.1", port), "python3"), port)
}

/// Within 64 MiB of a normal run's peak (28 MB in a debug build), no panic, no abort:
/// an exit code.
fn bounded_and_whole(w: &Watched, what: &str) {
    assert!(
        w.peak_kib < 92 * 1024,
        "{what}: peak RSS {} KiB\n{}",
        w.peak_kib,
        w.text
    );
    assert!(
        matches!(w.code, Some(0..=4) | Some(130)),
        "{what}: exit {:?}\n{}",
        w.code,
        w.text
    );
}

#[test]
fn a_broker_that_floods_deliveries_and_stops_reading_cannot_hold_the_run() {
    let _l = loaded();
    let s = Scratch::new();
    let (_broker, port) = peer("mqtt-flood");
    let url = format!("mqtt://127.0.0.1:{port}/t?qos=1&subscribers=1");
    let args = [url.as_str(), "-q", "50", "-z", "3s", "--timeout", "2s"];
    // On its own: 3 s of publishing, the 2 s drain, then the end.
    let w = watched(&s, &args, None, Duration::from_secs(15));
    bounded_and_whole(&w, "QoS 1 flood");
    assert!(w.elapsed < Duration::from_secs(9), "took {:?}", w.elapsed);
    // SIGINT during the publishing and during the drain: each ends it within 2 s.
    for after in [1500, 4000] {
        let w = watched(
            &s,
            &args,
            Some(Duration::from_millis(after)),
            Duration::from_secs(15),
        );
        bounded_and_whole(&w, "QoS 1 flood, interrupted");
        assert_eq!(w.code, Some(130), "{}", w.text);
    }
}

/// A flow's reply topic met by a flood: the broker answers the step's SUBSCRIBE, then
/// floods PUBLISHes to another topic and never reads again. The client keeps at most
/// 64 of them while it waits (its inbox), each step ends at its timeout, and the run at
/// its end: bounded memory, an exit code, no reply counted that never came.
#[test]
fn a_broker_that_floods_a_reply_topic_s_client_cannot_hold_it_or_grow_it() {
    let _l = loaded();
    let s = Scratch::new();
    let (_broker, port) = peer("mqtt-flood");
    std::fs::write(
        s.path("flow.toml"),
        "clients = 2\n\n[[step]]\nname = \"ask\"\nweight = 1\npath = \"/cmd?reply=answers\"\nbody = \"x\"\ncheck.answered = { body_contains = \"x\" }\n",
    )
    .unwrap();
    let url = format!("mqtt://127.0.0.1:{port}/t?qos=1");
    let flow = s.path("flow.toml");
    let args = [
        url.as_str(),
        "--scenario",
        flow.to_str().unwrap(),
        "-z",
        "3s",
        "--timeout",
        "1s",
    ];
    let w = watched(&s, &args, None, Duration::from_secs(15));
    bounded_and_whole(&w, "reply-topic flood");
    assert!(w.elapsed < Duration::from_secs(9), "took {:?}", w.elapsed);
    // Every step timed out; none was taken as answered by another topic's message.
    assert!(w.text.contains(" completed (0 ok)"), "{}", w.text);
    let errors = w
        .text
        .lines()
        .find(|l| l.trim_start().starts_with("Errors"))
        .unwrap_or("");
    assert!(
        errors.contains("timeout") && !errors.contains(','),
        "{}",
        w.text
    );
}

#[test]
fn a_broker_that_forges_stamps_sizes_nothing_and_is_counted() {
    let _l = loaded();
    let s = Scratch::new();
    let (_broker, port) = peer("mqtt-forged");
    let url = format!("mqtt://127.0.0.1:{port}/t?subscribers=1");
    let json = s.path("forged.json");
    let w = watched(
        &s,
        &[
            &url,
            "-q",
            "50",
            "-z",
            "3s",
            "--timeout",
            "1s",
            "--json",
            json.to_str().unwrap(),
        ],
        None,
        Duration::from_secs(15),
    );
    bounded_and_whole(&w, "forged stamps");
    assert_has(&w.text, "could not be checked for a duplicate");
    // The JSON carries the count, and still validates against the committed schema.
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let d = &doc["summary"]["deliveries"];
    assert!(d["unverified"].as_u64().unwrap() > 0, "{d}");
    assert!(d["unverified"].as_u64() <= d["delivered"].as_u64(), "{d}");
    let errors = load_schema_errors(&doc);
    assert!(errors.is_empty(), "{errors:?}");
}

#[test]
fn servers_that_flood_pings_or_never_end_a_line_are_protocol_errors_in_bounded_memory() {
    let _l = loaded();
    let s = Scratch::new();
    for (mode, scheme, extra, connections) in [
        ("h2-ping", "http", "--http2", "4"),
        ("ws-ping", "ws", "", "4"),
        ("chunk-ext", "http", "", "4"),
        // 100 MB in 1 MiB fragments to each of 20 sockets: 64 MiB for all of them.
        ("ws-huge", "ws", "", "20"),
    ] {
        let (_srv, port) = peer(mode);
        let url = format!("{scheme}://127.0.0.1:{port}/");
        let mut args = vec![
            url.as_str(),
            "-c",
            connections,
            "-z",
            "2s",
            "--timeout",
            "1s",
        ];
        if !extra.is_empty() {
            args.push(extra);
        }
        let w = watched(&s, &args, None, Duration::from_secs(12));
        bounded_and_whole(&w, mode);
        assert!(
            w.elapsed < Duration::from_secs(6),
            "{mode} took {:?}",
            w.elapsed
        );
        assert_has(&w.text, "protocol");
        // Ctrl-C in the middle ends it within 2 s (asserted by `watched`), exit 130.
        let w = watched(
            &s,
            &args,
            Some(Duration::from_millis(1000)),
            Duration::from_secs(12),
        );
        bounded_and_whole(&w, mode);
        assert_eq!(w.code, Some(130), "{mode}: {}", w.text);
    }
}

/// A server's values never reach the wire as request lines: an extracted JSON value
/// holding CRLF and a second request, the same from the script's `r.path`, and 302s to
/// another port, a `/\\host`, `file:` or a tab. Each such request is counted
/// `invalid_request` with its step and culprit, a redirect out of the target is left as
/// the reply; the server (which logs every request line it gets) sees no second request
/// and nothing off its own authority. Its cookies' `Max-Age` of 2⁶³ − 1 and `Expires`
/// in the year 99999 are kept for the run, not a panic.
#[test]
fn a_server_s_values_never_smuggle_a_request_nor_crash_a_flow() {
    let _l = loaded();
    let s = Scratch::new();
    let log = s.path("lines.log");
    let port = free_port();
    let mut c = std::process::Command::new("python3");
    c.arg(format!(
        "{}/tests/fixtures/hostile_peer.py",
        env!("CARGO_MANIFEST_DIR")
    ))
    .args(["smuggle", &port.to_string(), log.to_str().unwrap()]);
    let _srv = serving(c, ("127.0.0.1", port), "python3");
    let script = s.path("hook.lua");
    std::fs::write(
        &script,
        "function request(r)\n  if r.step == 'hooked' then r.path = '/ok?y=1 HTTP/1.1\\r\\nX-Inj: z\\r\\n\\r\\nGET /smuggled3' end\nend\n",
    )
    .unwrap();
    let scenario = s.path("flow.toml");
    std::fs::write(
        &scenario,
        format!(
            r#"clients = 2
script = "{}"

[[step]]
name = "start"
once = true
path = "/start"
extract.id = {{ json = "$.id" }}

[[step]]
name = "use"
every = "100ms"
path = "/ok?x={{{{id}}}}"

[[step]]
name = "hooked"
every = "100ms"
path = "/ok"

[[step]]
name = "hop"
every = "50ms"
path = "/redir/{{{{seq}}}}"
follow = true
"#,
            script.display()
        ),
    )
    .unwrap();
    let url = format!("http://127.0.0.1:{port}");
    let (out, doc) = load_json(
        &s,
        &[
            &url,
            "--no-tui",
            "--scenario",
            scenario.to_str().unwrap(),
            "-z",
            "2s",
            "--gate",
            "error_rate < 1%",
        ],
    );
    let text = stdout(&out);
    assert_exit(&out, 1);
    let lines = std::fs::read_to_string(&log).unwrap();
    let got: Vec<&str> = lines.lines().collect();
    assert!(got.len() > 40, "{lines}");
    for l in &got {
        assert!(
            l.starts_with("GET /") && l.ends_with(" HTTP/1.1") && l.matches(' ').count() == 2,
            "a request line the client did not mean: {l:?}\n{text}"
        );
        assert!(
            !l.contains("smuggled") && !l.contains("passwd") && !l.starts_with("GET //"),
            "{l:?}"
        );
    }
    assert!(
        got.iter().all(|l| !l.starts_with("GET /ok?")),
        "neither the value nor the hook's path went out"
    );
    let step = |name: &str| {
        doc["summary"]["steps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|st| st["name"] == name)
            .unwrap_or_else(|| panic!("no step {name}: {doc}"))
            .clone()
    };
    let n = |v: &serde_json::Value| v.as_u64().unwrap_or(0);
    let used = step("use");
    assert!(n(&used["sent"]) >= 10, "{used}");
    assert_eq!(n(&used["errors"]), n(&used["sent"]), "{used}");
    assert_eq!(
        n(&used["flow"]["invalid.path.{{id}}"]),
        n(&used["sent"]),
        "{used}"
    );
    let hooked = step("hooked");
    assert_eq!(
        n(&hooked["flow"]["invalid.path.script"]),
        n(&hooked["sent"]),
        "{hooked}"
    );
    assert_eq!(
        n(&doc["summary"]["by_error"]["invalid_request"]),
        n(&used["sent"]) + n(&hooked["sent"]),
        "{doc}"
    );
    // Of six Locations the first (HTTP://, its own authority) is followed to /ok.
    let hop = step("hop");
    let followed = got.iter().filter(|l| **l == "GET /ok HTTP/1.1").count() as u64;
    let redirs = got.iter().filter(|l| l.starts_with("GET /redir/")).count() as u64;
    let left = n(&hop["flow"]["redirects_not_followed"]);
    assert!(followed >= 2 && left >= 8, "{followed} {left}\n{hop}");
    assert_eq!(
        followed + left,
        redirs,
        "each redirect followed or left\n{hop}"
    );
    // A step's sends and its hops apart: each /redir/ is one send of the step (its
    // reply the last hop's), each redirect followed a hop, not a send.
    // (A chain the run's end cut is unanswered, not sent.)
    let cut = n(&doc["summary"]["unfinished"]);
    assert!(
        n(&hop["sent"]) <= redirs && n(&hop["sent"]) + cut >= redirs,
        "{redirs} {cut}\n{hop}"
    );
    let hops = n(&hop["flow"]["redirects_followed"]);
    assert!(
        hops >= followed && hops <= followed + cut,
        "{followed} {cut}\n{hop}"
    );
    assert_eq!(n(&doc["summary"]["hops"]), hops, "{doc}");
    assert_has(&text, &format!("{hops} redirects followed"));
    assert_shares_at_most_100(&text);
    // The cookies of 2⁶³ − 1 s and of the year 99999 were kept and sent back; the one
    // of −2⁶³ s deleted itself.
    let cookies = std::fs::read_to_string(log.with_extension("log.cookies")).unwrap();
    let without = cookies.lines().filter(|c| *c == "-").count();
    let with = cookies.lines().filter(|c| *c == "a=1; b=2").count();
    assert_eq!(without, 2, "each client's /start alone: {cookies}");
    assert_eq!(with + 2, cookies.lines().count(), "{cookies}");
    assert_has(&text, "Not sent");
    assert_has(
        &text,
        "of step 'use': {{id}} put a byte its path cannot carry",
    );
    assert_has(&text, "redirects not followed");
    assert_has(&text, "the failures were the flow's own: ");
    assert!(!text.contains("target's answers"), "{text}");
}

/// A Redis server answering each command with 15 MB, to 64 connections, and a flow
/// (one client) extracting `$[0]` from a 4-million-item array: each connection reads at most its
/// share of the run's 32 MiB (the 15 MB replies are `protocol` errors), the array is
/// too large to extract from (counted so), and the generator stays under 256 MB.
#[test]
fn a_redis_server_s_huge_replies_are_bounded_per_run_and_counted() {
    let _l = loaded();
    let s = Scratch::new();
    let (_srv, port) = peer("redis-huge");
    let url = format!("redis://127.0.0.1:{port}");
    let w = watched(
        &s,
        &[
            &url,
            "-d",
            "GET k",
            "-c",
            "64",
            "-z",
            "2s",
            "--timeout",
            "2s",
        ],
        None,
        Duration::from_secs(15),
    );
    eprintln!(
        "15 MB replies to 64 connections: peak RSS {} KiB",
        w.peak_kib
    );
    assert!(
        w.peak_kib < 256 << 10,
        "peak RSS {} KiB\n{}",
        w.peak_kib,
        w.text
    );
    assert!(
        matches!(w.code, Some(0..=4)),
        "exit {:?}\n{}",
        w.code,
        w.text
    );
    assert_has(&w.text, "protocol");
    let (_srv, port) = peer("redis-array");
    let scenario = s.path("array.toml");
    std::fs::write(
        &scenario,
        "clients = 1\n\n[[step]]\nname = \"range\"\nevery = \"200ms\"\npath = \"/\"\nbody = \"LRANGE l 0 -1\"\nextract.first = { json = \"$[0]\" }\n",
    )
    .unwrap();
    let url = format!("redis://127.0.0.1:{port}");
    let w = watched(
        &s,
        &[
            &url,
            "--scenario",
            scenario.to_str().unwrap(),
            "-z",
            "2s",
            "--no-tui",
        ],
        None,
        Duration::from_secs(15),
    );
    eprintln!("a 4-million-item array: peak RSS {} KiB", w.peak_kib);
    assert!(
        w.peak_kib < 256 << 10,
        "peak RSS {} KiB\n{}",
        w.peak_kib,
        w.text
    );
    assert_has(
        &w.text,
        "could not be extracted: the reply was too large to extract from",
    );
}

/// `check` is the contract of `run`: each of these files once passed `check` and then
/// aborted or hung `run` (or ran unthrottled). Now `check` and `run` both refuse it,
/// exit 2, at its file, line and column.
#[test]
fn hostile_files_are_refused_by_check_and_run_at_their_line() {
    let s = Scratch::new();
    let fifo = s.fifo("fifo");
    let scenario =
        |body: &str| format!("clients = 1\n[[step]]\nevery = \"1s\"\npath = \"/\"\n{body}\n");
    let many_steps: String = (0..2049)
        .map(|i| format!("[[step]]\nname = \"s{i}\"\nweight = 1\npath = \"/\"\n"))
        .collect();
    let scenarios: Vec<(&str, String, &str)> = vec![
        (
            "[arrivals]\nrate = 1e300\n[[step]]\npath = \"/\"\n".into(),
            "rate = 1e300: out of range",
        ),
        (
            "[arrivals]\nper_second = [10]\nscale = 1e300\n[[step]]\npath = \"/\"\n".into(),
            "scale = 1e300: out of range",
        ),
        (
            scenario("body = \"{{random 99999999999}}\""),
            "more than 67108864",
        ),
        (
            scenario(&format!("body = \"{}\"", "{{random 16777216}}".repeat(200))),
            "more than 67108864",
        ),
        (
            "clients = 1\n[[step]]\nevery = \"1ns\"\npath = \"/\"\n".into(),
            "every = \"1ns\": out of range, give a period from 1ms to 30 days",
        ),
        (
            format!(
                "clients = 1\ncsv = \"{}\"\n[[step]]\nevery = \"1s\"\npath = \"/\"\n",
                fifo.display()
            ),
            "is not a regular file",
        ),
        (
            "clients = 1\ncsv = \"/dev/zero\"\n[[step]]\nevery = \"1s\"\npath = \"/\"\n".into(),
            "is not a regular file",
        ),
        (
            format!("[arrivals]\nrate = 10\n{many_steps}"),
            "2049 steps: a scenario has at most 2048",
        ),
    ]
    .into_iter()
    .enumerate()
    .map(|(i, (text, want))| {
        let name: &'static str = Box::leak(format!("sc{i}.toml").into_boxed_str());
        (name, text, want)
    })
    .collect();
    let head =
        "[target]\nurl = \"http://127.0.0.1:9/\"\n[[test]]\nname = \"t\"\nkind = \"bench\"\n";
    let mut suites: Vec<(String, &str)> = scenarios
        .iter()
        .map(|(name, text, want)| {
            std::fs::write(s.path(name), text).unwrap();
            (
                format!("{head}url = \"http://127.0.0.1:9/\"\nscenario = \"{name}\"\nduration = \"1s\"\n"),
                *want,
            )
        })
        .collect();
    for (url, want) in [
        ("mqtt://127.0.0.1:9/t?qos=1e20", "qos=1e20: give 0, 1 or 2"),
        (
            "mqtt://127.0.0.1:9/t?keep_alive=65536",
            "keep_alive=65536: give seconds",
        ),
        (
            "mqtt://127.0.0.1:9/t?subscribers=1000000000",
            "subscribers=1000000000: give a count",
        ),
        (
            "grpc://127.0.0.1:9/a.B/C?proto=/dev/zero",
            "proto: /dev/zero is not a regular file",
        ),
    ] {
        suites.push((
            format!("{head}url = \"{url}\"\nrate = 10\nduration = \"1s\"\n"),
            want,
        ));
    }
    let fifo_proto = format!("grpc://127.0.0.1:9/a.B/C?proto={}", fifo.display());
    suites.push((
        format!("{head}url = \"{fifo_proto}\"\nrate = 10\nduration = \"1s\"\n"),
        "is not a regular file",
    ));
    suites.push((
        format!(
            "{head}url = \"ws://127.0.0.1:9/\"\nreply_field = \"\"\nrate = 10\nduration = \"1s\"\n"
        ),
        "reply_field = '': give a JSON field name",
    ));
    // `check` reads a scenario file as a scenario, with the same refusals.
    for (name, _, want) in &scenarios {
        let out = s.run(&["check", s.path(name).to_str().unwrap()]);
        assert_exit(&out, 2);
        assert_has(&stderr(&out), want);
    }
    let example = format!(
        "{}/../../examples/iot-devices.toml",
        env!("CARGO_MANIFEST_DIR")
    );
    let out = s.run(&["check", &example]);
    assert_exit(&out, 0);
    assert_has(&stdout(&out), "valid — a scenario (200 clients), 2 steps");
    for (i, (text, want)) in suites.iter().enumerate() {
        let path = s.path(&format!("suite{i}.toml"));
        std::fs::write(&path, text).unwrap();
        let shown = path.display().to_string();
        for cmd in ["check", "run"] {
            let t = Instant::now();
            let out = s.run(&[cmd, &shown]);
            let err = stderr(&out);
            assert_exit(&out, 2);
            assert_has(&err, want);
            assert_has(&err, &format!("{shown}:"));
            // The terminal gets no escape sequence from the file.
            assert!(!err.contains('\u{1b}'), "{err:?}");
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "{cmd} {shown} took {:?}",
                t.elapsed()
            );
        }
    }
}

/// A suite named with an escape sequence (clear the screen) and an OSC 8 link reaches
/// the terminal of `check` and `run` as text, as it does in `runs` and `show`.
#[test]
fn a_suite_name_cannot_drive_the_terminal_of_check_or_run() {
    let s = Scratch::new();
    let path = s.path("esc.toml");
    std::fs::write(
        &path,
        "[suite]\nname = \"x\\u001b[2J\\u001b]8;;http://127.0.0.1/\\u0007link\"\n[[test]]\nname = \"t\"\nkind = \"bench\"\ncommand = [\"true\"]\nrate = 10\nduration = \"100ms\"\n",
    )
    .unwrap();
    for cmd in ["check", "run"] {
        let out = s.run(&[cmd, path.to_str().unwrap()]);
        assert_exit(&out, 0);
        let text = format!("{}{}", stdout(&out), stderr(&out));
        assert!(
            !text.contains('\u{1b}') && !text.contains('\u{7}'),
            "{cmd}: {text:?}"
        );
        assert_has(&text, "x\\u{1b}[2J\\u{1b}]8;;http://127.0.0.1/\\u{7}link");
    }
}

/// The script hooks a reviewer found escaping the sandbox (a loop in a coroutine or in
/// C library functions, bytecode, a finalizer through `r`'s metatable), each in a 1 s
/// run against the testbed: the run ends within its duration and 2 s, exits 0 or 1 (or
/// 3: the hook's loops are the generator's own CPU) with the hook's failures counted
/// as the script's, in bounded memory. SIGINT during a loop in a coroutine and during
/// one in C ends the run within 2 s (asserted by `watched`).
#[test]
fn hostile_script_hooks_end_on_time_as_the_script_s_failures() {
    let _l = loaded();
    let s = Scratch::new();
    let srv = strainline_testbed::harness::RunningServer::start(&testbed(), &[]);
    let url = srv.url("");
    let scenario = s.path("hook.toml");
    std::fs::write(
        &scenario,
        "clients = 1\nscript = \"hook.lua\"\n\n[[step]]\nname = \"get\"\nweight = 1\npath = \"/health\"\nthink = \"20ms\"\n",
    )
    .unwrap();
    let hooks = [
        ("coroutine", "coroutine.wrap(function() while true do end end)()"),
        ("rep", "local _ = string.rep('', math.maxinteger) .. string.rep('x', math.maxinteger)"),
        ("move", "table.move({}, 1, 1e15, 1, {})"),
        ("pattern", "string.find(('a'):rep(3000), '.-.-.-.-.-.-.-.-.-.-b')"),
        ("bytecode", "load(string.dump(function() end), 'bc', 'b')()"),
        ("patched", "load('\\27LuaT\\0' .. ('\\255'):rep(64), 'bc', 'b')()"),
        (
            "gc",
            "getmetatable(r).__gc = function() local t = {} while true do t[#t + 1] = ('x'):rep(1e6) end end",
        ),
    ];
    let args = [
        url.as_str(),
        "--scenario",
        scenario.to_str().unwrap(),
        "-z",
        "1s",
        "--timeout",
        "1s",
    ];
    for (name, attack) in hooks {
        // Every other request meets the attack: the others reach the target.
        std::fs::write(
            s.path("hook.lua"),
            format!("function request(r)\n  if r.seq % 2 == 0 then {attack} end\nend\n"),
        )
        .unwrap();
        let w = watched(&s, &args, None, Duration::from_secs(10));
        assert!(
            w.peak_kib < 128 * 1024,
            "{name}: peak RSS {} KiB",
            w.peak_kib
        );
        assert!(
            matches!(w.code, Some(0 | 1 | 3)),
            "{name}: exit {:?}\n{}",
            w.code,
            w.text
        );
        assert!(
            w.elapsed < Duration::from_millis(3500),
            "{name} took {:?}",
            w.elapsed
        );
        assert_has(&w.text, "script: ");
        assert_has(&w.text, "the failures were the script's");
        eprintln!(
            "{name}: ended at {:?}, {} KiB, exit {:?}",
            w.elapsed, w.peak_kib, w.code
        );
    }
    for attack in [
        "coroutine.wrap(function() while true do end end)()",
        "string.find(('a'):rep(3000), '.-.-.-.-.-.-.-.-.-.-b')",
    ] {
        std::fs::write(
            s.path("hook.lua"),
            format!("function request(r)\n  {attack}\nend\n"),
        )
        .unwrap();
        let long = [&args[..3], &["-z", "20s"]].concat();
        let w = watched(
            &s,
            &long,
            Some(Duration::from_millis(1500)),
            Duration::from_secs(10),
        );
        assert_eq!(w.code, Some(130), "{attack}: {}", w.text);
        eprintln!(
            "SIGINT at 1.5 s: ended at {:?}, {} KiB",
            w.elapsed, w.peak_kib
        );
    }
}
