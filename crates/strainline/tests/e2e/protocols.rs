//! Protocols beyond HTTP, against servers no one here wrote: WebSocket against the
//! `websockets` library of Debian's Python (its echo server in
//! `tests/fixtures/ws_server.py`, installed by `make test`).

use std::process::{Command, Stdio};

use crate::common::*;

/// Debian's Python, which has the `websockets` package (`scripts/test-deps.sh`).
const PYTHON: &str = "/usr/bin/python3";

pub fn ws_server_script() -> String {
    format!("{}/tests/fixtures/ws_server.py", env!("CARGO_MANIFEST_DIR"))
}

/// The echo server on a free loopback port (with its `extra` options), once it listens.
fn ws_server(extra: &[&str]) -> (KillOnDrop, u16) {
    let port = free_port();
    let script = ws_server_script();
    let child = Command::new(PYTHON)
        .args([script.as_str(), "--port", &port.to_string()])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("python3 with websockets: installed by `make test` (scripts/test-deps.sh)");
    let child = KillOnDrop(child);
    assert!(
        eventually(10.0, || std::net::TcpStream::connect(("127.0.0.1", port))
            .is_ok()),
        "the WebSocket server did not start"
    );
    (child, port)
}

fn load(s: &Scratch, args: &[&str]) -> (std::process::Output, serde_json::Value) {
    let json = s.path("load.json");
    let mut all = vec!["load", "--json", json.to_str().unwrap(), "--no-tui"];
    all.extend_from_slice(args);
    let out = s.run(&all);
    let doc = std::fs::read_to_string(&json)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(serde_json::Value::Null);
    (out, doc)
}

fn n(v: &serde_json::Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

#[test]
fn every_websocket_message_is_echoed_and_counted_in_the_open_model() {
    let _l = loaded();
    let (_srv, port) = ws_server(&[]);
    let s = Scratch::new();
    let url = format!("ws://127.0.0.1:{port}/");
    // 5,000 messages a second for 3 s, each a 64-byte text from the random pool.
    let (out, doc) = load(&s, &[&url, "-q", "5000", "-z", "3s", "--body-bytes", "64"]);
    assert_exit(&out, 0);
    let sum = &doc["summary"];
    assert_eq!(n(&sum["sent"]), 15_000, "{}", stdout(&out));
    assert_eq!(n(&sum["ok"]), 15_000);
    assert_eq!(n(&sum["errors"]), 0);
    assert_eq!(n(&sum["by_status"]["reply"]), 15_000);
    // Every reply is the whole echo of its message.
    assert_eq!(n(&sum["bytes_received"]), 15_000 * 64);
    assert_has(&stdout(&out), "WebSocket");
    assert_has(&stdout(&out), "Status        reply: 15000");
}

#[test]
fn five_hundred_websockets_each_get_their_echoes_in_the_closed_model() {
    let _l = loaded();
    let (_srv, port) = ws_server(&[]);
    let s = Scratch::new();
    let url = format!("ws://127.0.0.1:{port}/");
    let (out, doc) = load(
        &s,
        &[&url, "-c", "500", "-n", "5000", "-d", "{\"op\":\"ping\"}"],
    );
    assert_exit(&out, 0);
    let sum = &doc["summary"];
    assert_eq!(n(&sum["ok"]), 5000, "{}", stdout(&out));
    assert_eq!(n(&sum["connections_opened"]), 500);
    assert_eq!(n(&sum["bytes_received"]), 5000 * 13);
}

#[test]
fn a_websocket_server_that_stalls_shows_it_in_corrected_latency_not_in_service_time() {
    let _bench = measuring();
    on_a_quiet_machine(|| {
        // The server's event loop is blocked 100 ms every second.
        let (_srv, port) = ws_server(&["--stall-ms", "100"]);
        let s = Scratch::new();
        let url = format!("ws://127.0.0.1:{port}/");
        let (out, doc) = load(&s, &[&url, "-q", "500", "-z", "5s", "-d", "x"]);
        assert_exit(&out, 0);
        let sum = &doc["summary"];
        let p99 = sum["latency_us"]["p99"].as_f64().unwrap();
        let service_p50 = sum["service_time_us"]["p50"].as_f64().unwrap();
        // ~10% of the messages are meant to go during a stall: p99 is near its length.
        assert!(
            (60_000.0..400_000.0).contains(&p99),
            "corrected p99 {p99} µs"
        );
        assert!(service_p50 < 20_000.0, "service-time p50 {service_p50} µs");
        assert_eq!(n(&sum["errors"]), 0);
    });
}

#[test]
fn a_websocket_url_that_is_not_a_websocket_is_a_protocol_error_and_a_bad_method_is_refused() {
    let _l = loaded();
    let s = Scratch::new();
    // An HTTP server answers the upgrade with 200, not 101: the handshake fails.
    let port = free_port();
    let _http = KillOnDrop(
        Command::new(PYTHON)
            .args([
                "-m",
                "http.server",
                "--bind",
                "127.0.0.1",
                &port.to_string(),
            ])
            .current_dir(s.path(""))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    assert!(eventually(10.0, || std::net::TcpStream::connect((
        "127.0.0.1",
        port
    ))
    .is_ok()));
    let url = format!("ws://127.0.0.1:{port}/");
    let (out, doc) = load(&s, &[&url, "-q", "20", "-z", "1s", "-d", "x"]);
    assert_exit(&out, 1);
    assert!(
        n(&doc["summary"]["by_error"]["protocol"]) > 0,
        "{}",
        stdout(&out)
    );
    // A method means nothing for a WebSocket's messages: refused before anything is sent.
    let out = s.run(&["load", &url, "-m", "POST", "-z", "1s", "--no-tui"]);
    assert_exit(&out, 2);
    assert_has(&stderr(&out), "a WebSocket opens with GET");
    let out = s.run(&["load", &url, "--http2", "-z", "1s", "--no-tui"]);
    assert_exit(&out, 2);
}

#[test]
fn a_suite_benches_a_websocket_server_it_started_and_watches_its_tree() {
    let _l = loaded();
    let s = Scratch::new();
    let script = ws_server_script();
    let suite = format!(
        "[target]\ncommand = [\"{PYTHON}\", \"{script}\", \"--port\", \"{{{{port}}}}\"]\n\
         ready = \"tcp://127.0.0.1:{{{{port}}}}\"\n\n\
         [[test]]\nname = \"echo\"\nkind = \"bench\"\n\
         url = \"ws://127.0.0.1:{{{{port}}}}/\"\nbody = '{{\"device\": 1}}'\n\
         rate = 300\nduration = \"2s\"\n\
         gates = [\"error_rate <= 0\", \"peak_rss < 1GiB\"]\n"
    );
    let out = run_suite(&s, &suite, &["--no-tui"]);
    assert_exit(&out, 0);
    let cases = case_metrics(&s);
    let metrics = cases[0]["metrics"].as_array().unwrap();
    let get = |name: &str| {
        metrics
            .iter()
            .find(|m| m["name"] == name)
            .and_then(|m| m["value"].as_f64())
            .unwrap_or_else(|| panic!("no {name} in {metrics:?}"))
    };
    assert_eq!(get("completed"), 600.0);
    assert_eq!(get("error_rate"), 0.0);
    // The server's own memory, from its process tree: Python with websockets loaded.
    let rss = get("peak_rss");
    assert!(
        (5.0 * 1048576.0..500.0 * 1048576.0).contains(&rss),
        "peak_rss {rss}"
    );
}
