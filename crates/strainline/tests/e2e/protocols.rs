//! Protocols beyond HTTP, against servers no one here wrote: WebSocket against the
//! `websockets` library of Debian's Python (its echo server in
//! `tests/fixtures/ws_server.py`), MQTT against mosquitto, gRPC against Debian's
//! grpcio (`tests/fixtures/grpc_server.py`), Redis's RESP against redis-server — all
//! installed by `make test`.

use std::process::{Command, Stdio};

use crate::common::*;

/// Debian's Python, which has the `websockets` package (`scripts/test-deps.sh`).
const PYTHON: &str = "/usr/bin/python3";

pub fn ws_server_script() -> String {
    format!("{}/tests/fixtures/ws_server.py", env!("CARGO_MANIFEST_DIR"))
}

/// The echo server on a free loopback port (with its `extra` options), once it listens.
pub fn ws_server(extra: &[&str]) -> (KillOnDrop, u16) {
    let port = free_port();
    let mut c = Command::new(PYTHON);
    c.args([ws_server_script().as_str(), "--port", &port.to_string()])
        .args(extra);
    (
        serving(c, ("127.0.0.1", port), "python3 with websockets"),
        port,
    )
}

fn load(s: &Scratch, args: &[&str]) -> (std::process::Output, serde_json::Value) {
    let mut all = vec!["--no-tui"];
    all.extend_from_slice(args);
    load_json(s, &all)
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
    let mut http = Command::new(PYTHON);
    http.args([
        "-m",
        "http.server",
        "--bind",
        "127.0.0.1",
        &port.to_string(),
    ])
    .current_dir(s.path(""));
    let _http = serving(http, ("127.0.0.1", port), "python3");
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
    let case = &case_metrics(&s)[0];
    let get = |name: &str| metric_of(case, name);
    let rate = get("throughput");
    assert!((290.0..=301.0).contains(&rate), "throughput {rate}");
    assert_eq!(get("error_rate"), 0.0);
    // The server's own memory, from its process tree: Python with websockets loaded.
    let rss = get("peak_rss");
    assert!(
        (5.0 * 1048576.0..500.0 * 1048576.0).contains(&rss),
        "peak_rss {rss}"
    );
}

/// mosquitto on a free loopback port with `conf` added to its configuration, once it
/// listens.
pub fn mosquitto(s: &Scratch, conf: &str) -> (KillOnDrop, u16) {
    let port = free_port();
    let path = s.path(&format!("mosquitto-{port}.conf"));
    std::fs::write(
        &path,
        format!("listener {port} 127.0.0.1\nuser root\n{conf}\n"),
    )
    .unwrap();
    let mut c = Command::new("mosquitto");
    c.args(["-c", path.to_str().unwrap()]);
    (serving(c, ("127.0.0.1", port), "mosquitto"), port)
}

/// The numbers in a line, in order.
fn numbers(line: &str) -> Vec<f64> {
    line.split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .filter_map(|w| w.trim_matches('.').parse().ok())
        .collect()
}

#[test]
fn a_thousand_devices_publish_to_mosquitto_and_ten_subscribers_get_every_message() {
    let _l = loaded();
    // A run the hypervisor slowed (it took 0.72 s of CPU once, and the generator was
    // rightly judged late: INVALID) is measured again, as every timing test is.
    on_a_quiet_machine(|| {
        let s = Scratch::new();
        // The shipped example: 1,000 devices connecting at 200/s, each publishing QoS 1
        // every second; mosquitto is the suite's target, watched as any other.
        let example = format!(
            "{}/../../examples/iot-mqtt.toml",
            env!("CARGO_MANIFEST_DIR")
        );
        let suite = format!(
            "[target]\ncommand = [\"mosquitto\", \"-p\", \"{{{{port}}}}\"]\n\
             ready = \"tcp://127.0.0.1:{{{{port}}}}\"\n\n\
             [[test]]\nname = \"devices\"\nkind = \"bench\"\n\
             url = \"mqtt://127.0.0.1:{{{{port}}}}/devices/{{{{client}}}}/telemetry?qos=1&subscribers=10\"\n\
             scenario = \"{example}\"\nduration = \"8s\"\n\
             gates = [\"delivery_loss <= 0\", \"error_rate <= 0\"]\n"
        );
        let out = run_suite(&s, &suite, &["--no-tui"]);
        let text = stdout(&out);
        assert_exit(&out, 0);
        let case = &case_metrics(&s)[0];
        let get = |name: &str| metric_of(case, name);
        assert_eq!(get("delivery_loss"), 0.0);
        assert!(get("delivery_p99") > 0.0);
        assert!(get("latency_p99") > 0.0);
        // Every publish reached each of the 10 subscribers, exactly once.
        let line = text
            .lines()
            .find(|l| l.contains("deliveries:"))
            .unwrap_or_else(|| panic!("no deliveries line\n{text}"));
        let n = numbers(line);
        let (delivered, expected) = (n[0], n[1]);
        assert_eq!(delivered, expected, "{line}");
        assert_eq!(n[2], 10.0, "{line}");
        // 1,000 devices over 8 s, each from its start in the 5 s ramp-up: ~5,500 publishes.
        let published = expected / 10.0;
        assert_eq!(published.fract(), 0.0, "{line}");
        assert!(
            (4000.0..7000.0).contains(&published),
            "{published} publishes\n{text}"
        );
        assert_has(line, "0 lost (0.00%), 0 duplicate(s)");
        // The broker's own memory and CPU, from its process tree.
        let rss = get("peak_rss");
        assert!(
            (1048576.0..200.0 * 1048576.0).contains(&rss),
            "peak_rss {rss}"
        );
        assert!(get("target_cpu") > 0.0);
    });
}

#[test]
fn each_qos_is_acknowledged_as_it_asks_and_a_lost_delivery_is_counted() {
    let _l = loaded();
    let s = Scratch::new();
    let (_broker, port) = mosquitto(&s, "allow_anonymous true");
    for (qos, status) in [(0, "qos0 written"), (1, "qos1 puback"), (2, "qos2 pubcomp")] {
        let url = format!("mqtt://127.0.0.1:{port}/t/{{{{client}}}}?qos={qos}&subscribers=2");
        let (out, doc) = load(&s, &[&url, "-c", "3", "-n", "300", "-d", "x"]);
        assert_exit(&out, 0);
        let sum = &doc["summary"];
        assert_eq!(n(&sum["by_status"][status]), 300, "{}", stdout(&out));
        assert_eq!(n(&sum["deliveries"]["expected"]), 600);
        assert_eq!(n(&sum["deliveries"]["delivered"]), 600);
        assert_eq!(n(&sum["deliveries"]["lost"]), 0);
        assert_eq!(n(&sum["deliveries"]["duplicates"]), 0);
        assert_eq!(n(&sum["deliveries"]["subscribed_late"]), 0);
        let errors = load_schema_errors(&doc);
        assert!(errors.is_empty(), "{errors:#?}");
    }
    // Known loss: the subscribers listen to a/#, and one of the two steps publishes
    // elsewhere — each of its messages is missing at each subscriber.
    std::fs::write(
        s.path("split.toml"),
        "clients = 4\n\n[[step]]\nname = \"seen\"\nevery = \"100ms\"\npath = \"/a/{{client}}\"\nbody = \"x\"\n\n\
         [[step]]\nname = \"unseen\"\nevery = \"200ms\"\npath = \"/b/{{client}}\"\nbody = \"y\"\n",
    )
    .unwrap();
    let url = format!("mqtt://127.0.0.1:{port}/a/{{{{client}}}}?subscribers=3&filter=a/%23");
    let url = url.replace("%23", "#");
    let (out, doc) = load(&s, &[&url, "--scenario", "split.toml", "-z", "2s"]);
    let sum = &doc["summary"];
    let steps = sum["steps"].as_array().unwrap();
    let ok = |name: &str| n(&steps.iter().find(|st| st["name"] == name).unwrap()["ok"]);
    let (seen, unseen) = (ok("seen"), ok("unseen"));
    assert!(seen > 0 && unseen > 0, "{}", stdout(&out));
    let d = &sum["deliveries"];
    assert_eq!(n(&d["expected"]), 3 * (seen + unseen));
    assert_eq!(n(&d["delivered"]), 3 * seen, "{}", stdout(&out));
    assert_eq!(n(&d["lost"]), 3 * unseen);
    assert_has(&stdout(&out), &format!("{} lost", 3 * unseen));
}

#[test]
fn a_broker_s_password_comes_from_the_environment_and_is_never_shown_or_stored() {
    let _l = loaded();
    let s = Scratch::new();
    let secret = "s3cret-Pa55-e2e";
    let pw = s.path("passwd");
    std::fs::write(&pw, "").unwrap();
    let made = Command::new("mosquitto_passwd")
        .args(["-b", pw.to_str().unwrap(), "device", secret])
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    let (_broker, port) = mosquitto(
        &s,
        &format!("allow_anonymous false\npassword_file {}", pw.display()),
    );
    let url = format!("mqtt://device@127.0.0.1:{port}/t");
    let run = |password: &str| {
        let json = s.path("mq.json");
        strainline()
            .args([
                "--store",
                &s.store(),
                "load",
                "--json",
                json.to_str().unwrap(),
            ])
            .args([&url, "-q", "100", "-z", "1s", "-d", "x", "--no-tui"])
            .env("STRAINLINE_MQTT_PASSWORD", password)
            .current_dir(s.path(""))
            .output()
            .unwrap()
    };
    let good = run(secret);
    assert_exit(&good, 0);
    // A wrong password: the broker refuses every CONNECT, a protocol error each.
    let bad = run("wrong");
    assert_exit(&bad, 1);
    assert_has(&stdout(&bad), "protocol");
    // Nowhere: not in what was printed, nor in the store.
    let shown = s.run(&["show", "--json", "latest"]);
    for text in [
        stdout(&good),
        stderr(&good),
        stdout(&bad),
        stderr(&bad),
        stdout(&shown),
    ] {
        assert!(!text.contains(secret), "the password was shown: {text}");
    }
    let store = std::fs::read(s.store()).unwrap();
    assert!(
        !store.windows(secret.len()).any(|w| w == secret.as_bytes()),
        "the password is in the store"
    );
    // In the URL it is refused before anything is sent.
    let out = s.run(&[
        "load",
        &format!("mqtt://device:{secret}@127.0.0.1:{port}/t"),
    ]);
    assert_exit(&out, 2);
    assert!(!stderr(&out).contains(secret));
}

pub fn fixture(name: &str) -> String {
    format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// The grpcio server on a free loopback port (with its `extra` options), once it serves.
pub fn grpc_server(extra: &[&str]) -> (KillOnDrop, u16) {
    let port = free_port();
    let mut c = Command::new(PYTHON);
    c.args([
        fixture("grpc_server.py").as_str(),
        "--port",
        &port.to_string(),
    ])
    .args(extra);
    (serving(c, ("127.0.0.1", port), "python3 with grpcio"), port)
}

/// {"device": "d1", "seq": 1, "temperature": 21.5} in grpc_demo.proto's Reading: 15 bytes
/// (device 2+2, seq 1+1, temperature 1+8), 20 framed.
const READING: &str = r#"{"device": "d1", "seq": 1, "temperature": 21.5}"#;
const READING_FRAMED: u64 = 20;

#[test]
fn grpc_calls_at_a_rate_count_grpcio_s_status_mix_and_its_streamed_messages() {
    let _l = loaded();
    let s = Scratch::new();
    // Every 20th call fails with UNAVAILABLE: 5% exactly.
    let (_srv, port) = grpc_server(&["--unavailable-every", "20", "--stream", "3"]);
    let proto = fixture("grpc_demo.proto");
    let url = format!("grpc://127.0.0.1:{port}/demo.Greeter/Hello?proto={proto}");
    let (out, doc) = load(&s, &[&url, "-q", "500", "-z", "4s", "-d", READING]);
    // Failed calls make the run fail its own verdict only when none succeeded.
    assert_exit(&out, 0);
    let sum = &doc["summary"];
    assert_eq!(n(&sum["sent"]), 2000, "{}", stdout(&out));
    assert_eq!(n(&sum["by_status"]["UNAVAILABLE"]), 100);
    assert_eq!(n(&sum["by_status"]["OK"]), 1900);
    assert!((sum["error_rate"].as_f64().unwrap() - 0.05).abs() < 1e-9);
    // Each OK call echoed the message whole, encoded from the JSON by the .proto.
    assert_eq!(n(&sum["bytes_received"]), 1900 * READING_FRAMED);
    assert_has(&stdout(&out), "Status        OK: 1900  UNAVAILABLE: 100");
    // A server-streaming call: its three messages counted.
    let url = format!("grpc://127.0.0.1:{port}/demo.Greeter/Many?proto={proto}");
    let (out, doc) = load(&s, &[&url, "-c", "4", "-n", "400", "-d", READING]);
    assert_exit(&out, 0);
    let sum = &doc["summary"];
    assert_eq!(n(&sum["ok"]), 400, "{}", stdout(&out));
    assert_eq!(n(&sum["messages_received"]), 1200);
    let errors = load_schema_errors(&doc);
    assert!(errors.is_empty(), "{errors:#?}");
    assert_has(&stdout(&out), "(server streaming)");
}

#[test]
fn a_grpc_call_the_proto_does_not_describe_is_refused_before_anything_is_sent() {
    let s = Scratch::new();
    let proto = fixture("grpc_demo.proto");
    // Port 9: nothing listens; refusals come before any connection.
    let refused = |url: &str, body: &str| -> String {
        let out = s.run(&["load", url, "-n", "1", "-d", body, "--no-tui"]);
        assert_exit(&out, 2);
        stderr(&out)
    };
    let e = refused(
        &format!("grpc://127.0.0.1:9/demo.Greeter/Bye?proto={proto}"),
        READING,
    );
    assert_has(&e, "has no method 'Bye' (it has: Hello, Many)");
    let e = refused(
        &format!("grpc://127.0.0.1:9/demo.Greeter/Hello?proto={proto}"),
        r#"{"devise": "d1"}"#,
    );
    assert_has(&e, "unrecognized field name 'devise'");
    let e = refused(
        &format!("grpc://127.0.0.1:9/demo.Greeter/Hello?proto={proto}"),
        r#"{"seq": "many"}"#,
    );
    assert_has(&e, "is not a demo.Reading");
    assert_has(
        &refused("grpc://127.0.0.1:9/Hello", "x"),
        "/package.Service/Method",
    );
    let e = refused(
        "grpc://127.0.0.1:9/demo.Greeter/Hello?proto=/no/such.proto",
        READING,
    );
    assert_has(&e, "/no/such.proto");
    // A scenario's step is checked too, rendered once: its JSON, and an MQTT step's
    // topic.
    std::fs::write(
        s.path("calls.toml"),
        "clients = 2\n\n[[step]]\nname = \"typo\"\nevery = \"1s\"\npath = \"/\"\nbody = '{\"device\": \"d{{client}}\", \"sequence\": {{seq}}}'\n",
    )
    .unwrap();
    let out = s.run(&[
        "load",
        &format!("grpc://127.0.0.1:9/demo.Greeter/Hello?proto={proto}"),
        "--scenario",
        "calls.toml",
        "--no-tui",
    ]);
    assert_exit(&out, 2);
    assert_has(
        &stderr(&out),
        "step 'typo': the message is not a demo.Reading",
    );
    assert_has(&stderr(&out), "'sequence'");
    std::fs::write(
        s.path("topics.toml"),
        "clients = 2\n\n[[step]]\nname = \"all\"\nevery = \"1s\"\npath = \"/devices/+/t\"\nbody = \"x\"\n",
    )
    .unwrap();
    let out = s.run(&[
        "load",
        "mqtt://127.0.0.1:9/devices/{{client}}/t",
        "--scenario",
        "topics.toml",
        "--no-tui",
    ]);
    assert_exit(&out, 2);
    assert_has(
        &stderr(&out),
        "step 'all': the topic 'devices/+/t' has a wildcard",
    );
}

#[test]
fn a_suite_benches_a_grpc_server_it_started() {
    let _l = loaded();
    let s = Scratch::new();
    // The .proto beside the suite, named relative to it.
    std::fs::copy(fixture("grpc_demo.proto"), s.path("demo.proto")).unwrap();
    let proto = "demo.proto";
    let suite = format!(
        "[target]\ncommand = [\"{PYTHON}\", \"{}\", \"--port\", \"{{{{port}}}}\", \"--unavailable-every\", \"50\"]\n\
         ready = \"tcp://127.0.0.1:{{{{port}}}}\"\n\n\
         [[test]]\nname = \"hello\"\nkind = \"bench\"\n\
         url = \"grpc://127.0.0.1:{{{{port}}}}/demo.Greeter/Hello?proto={proto}\"\n\
         body = '{READING}'\nrate = 200\nduration = \"2s\"\n\
         gates = [\"error_rate <= 3%\"]\n",
        fixture("grpc_server.py")
    );
    let out = run_suite(&s, &suite, &["--no-tui"]);
    assert_exit(&out, 0);
    let case = &case_metrics(&s)[0];
    let get = |name: &str| metric_of(case, name);
    // Every 50th call UNAVAILABLE: 2%.
    assert!((get("error_rate") - 0.02).abs() < 1e-9, "{}", stdout(&out));
    assert!(get("peak_rss") > 5.0 * 1048576.0);
}

#[test]
fn a_starved_broker_s_backlog_shows_end_to_end_and_what_missed_the_drain_is_lost() {
    let _l = loaded();
    let s = Scratch::new();
    let (broker, port) = mosquitto(&s, "allow_anonymous true");
    // mosquitto gets 10% of one CPU (a cgroup v1 CFS quota), removed after it stops.
    let cg = std::path::PathBuf::from(format!(
        "/sys/fs/cgroup/cpu/strainline-e2e-broker-{}",
        std::process::id()
    ));
    struct Remove(std::path::PathBuf, KillOnDrop);
    impl Drop for Remove {
        fn drop(&mut self) {
            let _ = self.1 .0.kill();
            let _ = self.1 .0.wait();
            let _ = std::fs::remove_dir(&self.0);
        }
    }
    std::fs::create_dir_all(&cg).unwrap();
    std::fs::write(cg.join("cpu.cfs_period_us"), "100000").unwrap();
    std::fs::write(cg.join("cpu.cfs_quota_us"), "10000").unwrap();
    let pid = broker.0.id();
    for t in std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
    {
        std::fs::write(cg.join("tasks"), t.file_name().to_str().unwrap()).unwrap();
    }
    let _broker = Remove(cg, broker);
    // QoS 0 at 20,000 publishes a second to 5 subscribers: 100,000 deliveries a second,
    // more than a tenth of a CPU forwards. A publish is "done" when written, so the
    // publishers see nothing; the subscribers see the broker's backlog, and what has not
    // arrived 1 s (--timeout) after the publishers stopped is lost.
    let url = format!("mqtt://127.0.0.1:{port}/t/{{{{client}}}}?qos=0&subscribers=5");
    let (out, doc) = load(
        &s,
        &[
            &url,
            "-q",
            "20000",
            "-z",
            "3s",
            "-d",
            "x",
            "--timeout",
            "1s",
        ],
    );
    let text = stdout(&out);
    let sum = &doc["summary"];
    let d = &sum["deliveries"];
    assert_eq!(n(&d["subscribed"]), 5, "{text}");
    assert_eq!(n(&d["expected"]), 5 * n(&sum["ok"]), "{text}");
    let lost = n(&d["lost"]);
    assert!(lost > 0, "no loss counted\n{text}");
    assert_eq!(n(&d["delivered"]) + lost, n(&d["expected"]), "{text}");
    let publish_p50 = sum["service_time_us"]["p50"].as_f64().unwrap();
    let e2e_p99 = d["latency_us"]["p99"].as_f64().unwrap();
    assert!(publish_p50 < 1000.0, "publish p50 {publish_p50} µs\n{text}");
    assert!(e2e_p99 > 500_000.0, "end-to-end p99 {e2e_p99} µs\n{text}");
}

#[test]
fn a_websocket_scenario_sends_templated_messages_and_closes_each_socket_politely() {
    let _l = loaded();
    let s = Scratch::new();
    let port = free_port();
    let log = std::fs::File::create(s.path("ws-server.log")).unwrap();
    let _srv = KillOnDrop(
        Command::new(PYTHON)
            .args([ws_server_script().as_str(), "--port", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap(),
    );
    assert!(eventually(10.0, || std::net::TcpStream::connect((
        "127.0.0.1",
        port
    ))
    .is_ok()));
    // Each client says hello once, then ticks every 100 ms with its number and counter.
    std::fs::write(
        s.path("chat.toml"),
        "clients = 20\nramp_up = \"200ms\"\n\n\
         [[step]]\nname = \"hello\"\nonce = true\npath = \"/\"\nbody = '{\"op\": \"hello\", \"client\": {{client}}}'\n\n\
         [[step]]\nname = \"tick\"\nevery = \"100ms\"\npath = \"/\"\nbody = '{\"op\": \"tick\", \"client\": {{client}}, \"seq\": {{seq}}}'\n",
    )
    .unwrap();
    let url = format!("ws://127.0.0.1:{port}/");
    let (out, doc) = load(&s, &[&url, "--scenario", "chat.toml", "-z", "2s"]);
    assert_exit(&out, 0);
    let sum = &doc["summary"];
    let steps = sum["steps"].as_array().unwrap();
    assert_eq!(n(&steps[0]["ok"]), 20, "{}", stdout(&out));
    // 20 clients × ~2 s / 100 ms, less the ramp-up and phases.
    let ticks = n(&steps[1]["ok"]);
    assert!(
        (300..=420).contains(&ticks),
        "{ticks} ticks\n{}",
        stdout(&out)
    );
    assert_eq!(n(&sum["errors"]), 0);
    assert_eq!(n(&sum["connections_opened"]), 20);
    // Every socket ended with a close frame (1000): the server logged no broken one.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let server_log = std::fs::read_to_string(s.path("ws-server.log")).unwrap();
    assert!(
        !server_log.contains("ConnectionClosedError"),
        "a socket was dropped without a close frame:\n{server_log}"
    );
}

#[test]
fn an_mqtt5_broker_s_refusal_is_counted_and_3_1_1_s_silent_drop_shows_as_loss() {
    let _l = loaded();
    let s = Scratch::new();
    // Anonymous clients may read everything and write only under allowed/.
    let acl = s.path("acl");
    std::fs::write(&acl, "topic read #\ntopic write allowed/#\n").unwrap();
    let (_broker, port) = mosquitto(
        &s,
        &format!("allow_anonymous true\nacl_file {}", acl.display()),
    );
    // MQTT 5: the broker answers each forbidden publish with PUBACK 0x87 (not
    // authorized): every one counted as refused, and the run fails.
    let url = format!("mqtt://127.0.0.1:{port}/denied/{{{{client}}}}?qos=1&version=5");
    let (out, doc) = load(&s, &[&url, "-c", "2", "-n", "100", "-d", "x"]);
    assert_exit(&out, 1);
    let sum = &doc["summary"];
    assert_eq!(
        n(&sum["by_status"]["refused 0x87"]),
        100,
        "{}",
        stdout(&out)
    );
    assert_eq!(n(&sum["ok"]), 0);
    assert_has(
        &stdout(&out),
        "no request succeeded (MQTT refused 0x87 100)",
    );
    // The same under allowed/: acknowledged, and the subscribers get them all.
    let url =
        format!("mqtt://127.0.0.1:{port}/allowed/{{{{client}}}}?qos=1&version=5&subscribers=2");
    let (out, doc) = load(&s, &[&url, "-c", "2", "-n", "100", "-d", "x"]);
    assert_exit(&out, 0);
    assert_eq!(
        n(&doc["summary"]["deliveries"]["delivered"]),
        200,
        "{}",
        stdout(&out)
    );
    // MQTT 3.1.1 has no way to refuse a publish: the broker acknowledges and drops it.
    // The publishers see success; the subscribers (reading #) see nothing: all lost.
    let url = format!(
        "mqtt://127.0.0.1:{port}/denied/{{{{client}}}}?qos=1&version=3.1.1&subscribers=2&filter=%23"
    )
    .replace("%23", "#");
    let (out, doc) = load(&s, &[&url, "-c", "2", "-n", "100", "-d", "x"]);
    let sum = &doc["summary"];
    assert_eq!(n(&sum["by_status"]["qos1 puback"]), 100, "{}", stdout(&out));
    assert_eq!(n(&sum["deliveries"]["expected"]), 200);
    assert_eq!(n(&sum["deliveries"]["lost"]), 200);
}

#[test]
fn subscribers_that_could_subscribe_only_after_the_clock_started_are_named() {
    let _l = loaded();
    let s = Scratch::new();
    let (broker, port) = mosquitto(&s, "allow_anonymous true");
    // The broker is stopped while the run opens its connections and continued 1.5 s
    // later: the subscribers' CONNECT waits, so they subscribe after the clock starts.
    let pid = broker.0.id() as i32;
    // SAFETY: signals to our own child.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    let resume = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(1500));
        unsafe { libc::kill(pid, libc::SIGCONT) };
    });
    let url = format!("mqtt://127.0.0.1:{port}/t/{{{{client}}}}?qos=1&subscribers=3");
    let (out, doc) = load(&s, &[&url, "-q", "200", "-z", "3s", "-d", "x"]);
    resume.join().unwrap();
    let d = &doc["summary"]["deliveries"];
    assert_eq!(n(&d["subscribed"]), 3, "{}", stdout(&out));
    assert_eq!(n(&d["subscribed_late"]), 3, "{}", stdout(&out));
    assert_has(
        &stdout(&out),
        "3 subscriber(s) subscribed after the clock started",
    );
}

/// A known stall: the server stopped 100 ms every second. About a tenth of the units
/// are meant to go during a stall, so the latency from the intended time has p99 near
/// 100 ms, while the service time (from the actual send) keeps its p50 small.
fn a_stall_shows(sum: &serde_json::Value, what: &str) {
    let p99 = sum["latency_us"]["p99"].as_f64().unwrap();
    let service_p50 = sum["service_time_us"]["p50"].as_f64().unwrap();
    assert!(
        (60_000.0..400_000.0).contains(&p99),
        "{what}: corrected p99 {p99} µs"
    );
    assert!(
        service_p50 < 20_000.0,
        "{what}: service p50 {service_p50} µs"
    );
}

#[test]
fn a_broker_and_a_grpc_server_that_stall_show_it_from_the_intended_time() {
    let _bench = measuring();
    on_a_quiet_machine(|| {
        let s = Scratch::new();
        let (broker, port) = mosquitto(&s, "allow_anonymous true");
        let stall = std::time::Duration::from_millis(100);
        let stalls = stall_every_second(broker.0.id(), stall, std::time::Duration::from_secs(5));
        let url = format!("mqtt://127.0.0.1:{port}/t/{{{{client}}}}?qos=1&subscribers=2");
        let (out, doc) = load(&s, &[&url, "-q", "500", "-z", "5s", "-d", "x"]);
        stalls.join().unwrap();
        assert_exit(&out, 0);
        let sum = &doc["summary"];
        a_stall_shows(sum, "MQTT publish");
        // The subscribers' end-to-end latency is measured from the same intended time.
        let e2e = sum["deliveries"]["latency_us"]["p99"].as_f64().unwrap();
        assert!(
            (60_000.0..400_000.0).contains(&e2e),
            "end-to-end p99 {e2e} µs"
        );

        let (server, port) = grpc_server(&[]);
        let stalls = stall_every_second(server.0.id(), stall, std::time::Duration::from_secs(5));
        let url = format!(
            "grpc://127.0.0.1:{port}/demo.Greeter/Hello?proto={}",
            fixture("grpc_demo.proto")
        );
        let (out, doc) = load(&s, &[&url, "-q", "300", "-z", "5s", "-d", READING]);
        stalls.join().unwrap();
        assert_exit(&out, 0);
        a_stall_shows(&doc["summary"], "gRPC call");
    });
}

/// Node's `http2` module (nghttp2 inside) serving h2c on a free port
/// (`tests/fixtures/h2_server.js`).
pub fn node_h2_server() -> (KillOnDrop, u16) {
    let port = free_port();
    let script = format!("{}/tests/fixtures/h2_server.js", env!("CARGO_MANIFEST_DIR"));
    let mut c = Command::new("node");
    c.args([script.as_str(), &port.to_string()]);
    (serving(c, ("127.0.0.1", port), "node"), port)
}

/// strainline's own HTTP/2 client against a server no one here wrote: statuses HPACK
/// sends Huffman-coded counted exactly (every 20th is a 502), in the closed model with
/// streams and in the open model; bodies larger than HTTP/2's default window sent and
/// received whole.
#[test]
fn http2_statuses_and_bodies_are_counted_exactly_against_nodes_server() {
    let _l = loaded();
    let (_srv, port) = node_h2_server();
    let s = Scratch::new();
    let base = format!("http://127.0.0.1:{port}");
    let mix = format!("{base}/mix");
    let (out, doc) = load(
        &s,
        &[&mix, "--http2", "-c", "4", "--streams", "8", "-n", "2000"],
    );
    let sum = &doc["summary"];
    assert_eq!(n(&sum["sent"]), 2000, "{}", stdout(&out));
    assert_eq!(n(&sum["by_status"]["201"]), 1900, "{}", stdout(&out));
    assert_eq!(n(&sum["by_status"]["502"]), 100);
    assert_eq!(n(&sum["bytes_received"]), 2000 * 5);
    assert_eq!(n(&sum["connections_opened"]), 4);
    // The open model, on the connections its rate needs: requests 2001..3000.
    let (out, doc) = load(&s, &[&mix, "--http2", "-q", "500", "-z", "2s"]);
    let sum = &doc["summary"];
    assert_eq!(n(&sum["sent"]), 1000, "{}", stdout(&out));
    assert_eq!(n(&sum["by_status"]["201"]), 950, "{}", stdout(&out));
    assert_eq!(n(&sum["by_status"]["502"]), 50);
    // 200,000-byte bodies (three times the default window) echoed back whole.
    let echo = format!("{base}/echo");
    let (out, doc) = load(
        &s,
        &[
            &echo,
            "--http2",
            "-c",
            "2",
            "--streams",
            "2",
            "-n",
            "40",
            "-m",
            "POST",
            "--body-bytes",
            "200000",
        ],
    );
    let sum = &doc["summary"];
    assert_eq!(n(&sum["ok"]), 40, "{}", stdout(&out));
    assert_eq!(n(&sum["bytes_received"]), 40 * 200_000);
    let (out, doc) = load(
        &s,
        &[&format!("{base}/big"), "--http2", "-c", "2", "-n", "20"],
    );
    assert_eq!(n(&doc["summary"]["ok"]), 20, "{}", stdout(&out));
    assert_eq!(n(&doc["summary"]["bytes_received"]), 20 << 20);
}

/// A self-signed certificate for 127.0.0.1 made by openssl in the scratch directory:
/// (certificate, key). Not a CA (`openssl req -x509` makes one by default, and rustls
/// refuses a CA certificate as a server's own; docs/load.md says so).
fn self_signed(s: &Scratch, name: &str) -> (String, String) {
    let cert = s.path(&format!("{name}.pem")).display().to_string();
    let key = s.path(&format!("{name}.key")).display().to_string();
    let out = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
        ])
        .args(["-nodes", "-days", "1", "-subj", "/CN=127.0.0.1"])
        .args(["-addext", "subjectAltName=IP:127.0.0.1"])
        .args(["-addext", "basicConstraints=critical,CA:FALSE"])
        .args(["-keyout", &key, "-out", &cert])
        .output()
        .expect("openssl (installed by `make test`)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (cert, key)
}

/// wss://, mqtts:// and grpcs:// against servers no one here wrote, serving TLS with a
/// certificate of their own: every unit succeeds when the certificate is trusted
/// (`--cacert`), none when another one is — counted as `tls` errors — and the run is
/// refused before anything is sent when no trust is given.
#[test]
fn the_tls_schemes_of_each_protocol_trust_only_the_certificate_given() {
    let _l = loaded();
    let s = Scratch::new();
    let (cert, key) = self_signed(&s, "server");
    let (other, _) = self_signed(&s, "stranger");
    let tls = ["--cert", cert.as_str(), "--key", key.as_str()];
    let (_ws, ws_port) = ws_server(&tls);
    let (_broker, mqtt_port) = mosquitto(
        &s,
        &format!("allow_anonymous true\ncertfile {cert}\nkeyfile {key}"),
    );
    let (_grpc, grpc_port) = grpc_server(&tls);
    let proto = fixture("grpc_demo.proto");
    let urls = [
        format!("wss://127.0.0.1:{ws_port}/"),
        format!("mqtts://127.0.0.1:{mqtt_port}/devices/t?qos=1"),
        format!("grpcs://127.0.0.1:{grpc_port}/demo.Greeter/Hello?proto={proto}"),
    ];
    for url in &urls {
        let (out, doc) = load(
            &s,
            &[
                url, "-q", "100", "-z", "1s", "-d", READING, "--cacert", &cert,
            ],
        );
        let sum = &doc["summary"];
        assert_eq!(n(&sum["ok"]), 100, "{url}\n{}", stdout(&out));
        assert_eq!(n(&sum["errors"]), 0, "{url}");
        let (out, doc) = load(
            &s,
            &[
                url, "-q", "20", "-z", "1s", "-d", READING, "--cacert", &other,
            ],
        );
        let sum = &doc["summary"];
        assert_eq!(n(&sum["ok"]), 0, "{url}\n{}", stdout(&out));
        assert!(n(&sum["by_error"]["tls"]) > 0, "{url}\n{}", stdout(&out));
        // Why, once: the count alone would not say.
        let said = stderr(&out);
        assert_eq!(said.matches("TLS handshake with").count(), 1, "{said}");
        assert_has(&said, "invalid peer certificate");
        let out = s.run(&[
            "load", url, "-q", "20", "-z", "1s", "-d", READING, "--no-tui",
        ]);
        assert_exit(&out, 2);
        assert_has(&stderr(&out), "--cacert");
    }
}

/// A suite's workload keys for HTTP/2 and TLS: `http2` with `streams` against Node's
/// server, `cacert` read from beside the suite (and `insecure`) for a `wss://` target;
/// without trust the case cannot run; streams without http2 refused at their line.
#[test]
fn a_suite_speaks_http2_with_streams_and_trusts_the_certificate_beside_it() {
    let _l = loaded();
    let s = Scratch::new();
    let node = fixture("h2_server.js");
    let suite = format!(
        "[target]\ncommand = [\"node\", \"{node}\", \"{{{{port}}}}\"]\n\
         ready = \"tcp://127.0.0.1:{{{{port}}}}\"\n\n\
         [[test]]\nname = \"h2\"\nkind = \"bench\"\n\
         url = \"http://127.0.0.1:{{{{port}}}}/echo\"\nbody = \"x\"\n\
         http2 = true\nstreams = 4\nconnections = 2\nduration = \"1s\"\n\
         gates = [\"error_rate <= 0\"]\n"
    );
    let out = run_suite(&s, &suite, &["--no-tui"]);
    assert_exit(&out, 0);
    assert_has(&stdout(&out), "closed model, 2 connections x 4 streams");
    assert_has(&stdout(&out), "HTTP/2");
    let out = run_suite(&s, &suite.replace("http2 = true\n", ""), &["--no-tui"]);
    assert_exit(&out, 2);
    assert_has(
        &stderr(&out),
        "suite.toml:5:1: test 'h2' (bench) needs http2 = true for streams",
    );

    let (cert, key) = self_signed(&s, "server");
    let script = ws_server_script();
    let wss = |trust: &str| {
        format!(
            "[target]\ncommand = [\"{PYTHON}\", \"{script}\", \"--port\", \"{{{{port}}}}\", \
             \"--cert\", \"{cert}\", \"--key\", \"{key}\"]\n\
             ready = \"tcp://127.0.0.1:{{{{port}}}}\"\n\n\
             [[test]]\nname = \"echo\"\nkind = \"bench\"\n\
             url = \"wss://127.0.0.1:{{{{port}}}}/\"\nbody = \"x\"\n{trust}\
             rate = 100\nduration = \"1s\"\ngates = [\"error_rate <= 0\"]\n"
        )
    };
    for trust in ["cacert = \"server.pem\"\n", "insecure = true\n"] {
        let out = run_suite(&s, &wss(trust), &["--no-tui"]);
        assert_exit(&out, 0);
        assert_eq!(
            metric_of(&case_metrics(&s)[0], "error_rate"),
            0.0,
            "{trust}"
        );
    }
    // Trusting another certificate: each case of the run says why its first handshake
    // failed, once (before, only the first case of a process did).
    self_signed(&s, "stranger");
    let two = wss("cacert = \"stranger.pem\"\n");
    let second = two[two.find("[[test]]").unwrap()..].replace("\"echo\"", "\"echo-again\"");
    let out = run_suite(&s, &format!("{two}\n{second}"), &["--no-tui"]);
    let said = stderr(&out);
    assert_eq!(said.matches("TLS handshake with").count(), 2, "{said}");
    assert_eq!(
        said.matches("invalid peer certificate").count(),
        2,
        "{said}"
    );
    let out = run_suite(&s, &wss(""), &["--no-tui"]);
    assert_exit(&out, 2);
    assert_has(&stderr(&out), "needs cacert = \"FILE\"");
    let out = run_suite(&s, &wss("cacert = \"missing.pem\"\n"), &["--no-tui"]);
    assert_exit(&out, 2);
    assert_has(&stderr(&out), "cacert: ");
}

/// Known truth: a server that pushes two event messages before each echo. Matched by
/// its `id`, every message's reply is its echo (bytes = messages × the message's size)
/// and the events are counted as pushed, exactly two per reply; bad reply fields are
/// refused before anything is sent.
#[test]
fn websocket_replies_are_matched_by_id_and_pushed_messages_counted() {
    let _l = loaded();
    let (_srv, port) = ws_server(&["--push", "2"]);
    let s = Scratch::new();
    let url = format!("ws://127.0.0.1:{port}/");
    let message = r#"{"id": 7, "op": "get"}"#;
    let (out, doc) = load(
        &s,
        &[
            &url,
            "-q",
            "300",
            "-z",
            "2s",
            "-d",
            message,
            "--reply-field",
            "id",
        ],
    );
    assert_exit(&out, 0);
    let sum = &doc["summary"];
    assert_eq!(n(&sum["ok"]), 600, "{}", stdout(&out));
    assert_eq!(n(&sum["bytes_received"]), 600 * message.len() as u64);
    assert_eq!(n(&sum["messages_received"]), 1200);
    assert_has(
        &stdout(&out),
        "Messages      1200 pushed by the server besides the replies, 2.0 per reply",
    );
    for (args, said) in [
        (
            vec!["-d", "x", "--reply-field", "id"],
            "the message has no such JSON field",
        ),
        (
            vec!["-d", "{}", "--reply-field", "a..b"],
            "give a JSON field name",
        ),
    ] {
        let mut all = vec!["load", url.as_str(), "-q", "10", "-z", "1s", "--no-tui"];
        all.extend(args);
        let out = s.run(&all);
        assert_exit(&out, 2);
        assert_has(&stderr(&out), said);
    }
    let out = s.run(&[
        "load",
        "http://127.0.0.1:9/",
        "-q",
        "10",
        "--reply-field",
        "id",
    ]);
    assert_exit(&out, 2);
    assert_has(&stderr(&out), "give a ws:// or wss:// URL");
}

/// MQTT `conn` mode (emqtt-bench's): 300 clients connect at 200/s and stay connected,
/// pinging within a 1 s keep-alive, until the run's 3 s end; then each leaves with
/// DISCONNECT. mosquitto's own log is the truth: 300 clients connected, no client timed out,
/// 300 DISCONNECTs; the rate is the one they came at, not diluted by the hold.
#[test]
fn mqtt_clients_connect_at_a_rate_and_stay_connected_until_the_end() {
    let _l = loaded();
    let s = Scratch::new();
    let log = s.path("mosquitto.log");
    let (_broker, port) = mosquitto(
        &s,
        &format!(
            "allow_anonymous true\nlog_dest file {}\nlog_type all",
            log.display()
        ),
    );
    let url = format!("mqtt://127.0.0.1:{port}/?mode=conn&keep_alive=1");
    let (out, doc) = load(&s, &[&url, "-q", "200", "-n", "300", "-z", "3s"]);
    assert_exit(&out, 0);
    let sum = &doc["summary"];
    assert_eq!(n(&sum["by_status"]["connack"]), 300, "{}", stdout(&out));
    assert_eq!(n(&sum["connections_opened"]), 300);
    let rate = sum["achieved_rate"].as_f64().unwrap();
    assert!((170.0..=210.0).contains(&rate), "{rate}\n{}", stdout(&out));
    assert_has(
        &stdout(&out),
        "clients connecting to stay until the end (keep-alive 1s)",
    );
    let text = std::fs::read_to_string(&log).unwrap();
    let count = |what: &str| text.lines().filter(|l| l.contains(what)).count();
    assert_eq!(count("New client connected from"), 300, "{text}");
    assert_eq!(count("exceeded timeout"), 0, "{text}");
    assert!(count("Received PINGREQ from") >= 300, "{text}");
    assert_eq!(count("Received DISCONNECT from"), 300, "{text}");
    // A mode that makes no sense with the load's shape is refused before anything is sent.
    let out = s.run(&["load", &url, "-c", "5", "-z", "1s", "--no-tui"]);
    assert_exit(&out, 2);
    assert_has(&stderr(&out), "mode=conn connects clients at a rate");
}

/// A redis-server on a free loopback port, nothing saved, once it listens.
pub fn redis_server() -> (KillOnDrop, u16) {
    let port = free_port();
    let mut c = Command::new("redis-server");
    c.args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"]);
    (serving(c, ("127.0.0.1", port), "redis-server"), port)
}

/// `redis-cli -p PORT ARGS…`'s answer, trimmed.
pub fn redis_cli(port: u16, args: &[&str]) -> String {
    let out = Command::new("redis-cli")
        .args(["-p", &port.to_string()])
        .args(args)
        .output()
        .expect("redis-cli (installed by `make test`)");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn redis_commands_land_one_each_and_error_replies_are_failures_by_their_prefix() {
    let _l = loaded();
    let (_srv, port) = redis_server();
    let s = Scratch::new();
    let url = format!("redis://127.0.0.1:{port}");
    // Closed model: every SET a key of its own, so the server's key count is the count.
    // A pause between requests keeps the (debug-built) generator from being the limit.
    let (out, doc) = load(
        &s,
        &[
            &url,
            "-d",
            "SET k{{seq}} {{random 64}}",
            "-n",
            "3000",
            "-c",
            "8",
            "--think",
            "2ms",
        ],
    );
    assert_exit(&out, 0);
    let sum = &doc["summary"];
    assert_eq!(n(&sum["ok"]), 3000, "{}", stdout(&out));
    assert_eq!(redis_cli(port, &["dbsize"]), "3000");
    assert_eq!(n(&sum["by_status"]["reply"]), 3000);
    // Each reply is +OK and its CRLF: 5 bytes.
    assert_eq!(n(&sum["bytes_received"]), 3000 * 5);
    assert_has(&stdout(&out), "Received      14.6 KiB in replies");
    assert!(
        load_schema_errors(&doc).is_empty(),
        "{:?}",
        load_schema_errors(&doc)
    );
    assert_has(&stdout(&out), "Redis: SET k{{seq}} {{random 64}}");
    // Open model: each INCR counted by the server exactly as by strainline.
    let (out, doc) = load(&s, &[&url, "-d", "INCR hits", "-q", "400", "-z", "2s"]);
    assert_exit(&out, 0);
    assert_eq!(n(&doc["summary"]["ok"]), 800, "{}", stdout(&out));
    assert_eq!(redis_cli(port, &["get", "hits"]), "800");
    // Pipelining: 8 commands in flight on one connection (--streams), each answered.
    let (out, doc) = load(
        &s,
        &[
            &url,
            "-d",
            "SADD piped {{seq}}",
            "-n",
            "3000",
            "-c",
            "1",
            "--streams",
            "8",
            "--think",
            "5ms",
        ],
    );
    assert_exit(&out, 0);
    assert_eq!(n(&doc["summary"]["ok"]), 3000, "{}", stdout(&out));
    assert_eq!(n(&doc["summary"]["connections_opened"]), 1);
    assert_eq!(redis_cli(port, &["scard", "piped"]), "3000");
    assert_has(&stdout(&out), "1 connections x 8 streams");
    // A database by the URL's path.
    let (out, _) = load(
        &s,
        &[&format!("{url}/3"), "-d", "SET \"a key\" v", "-n", "5"],
    );
    assert_exit(&out, 0);
    assert_eq!(redis_cli(port, &["-n", "3", "get", "a key"]), "v");
    // Error replies are failures, named by their first word: a wrong command, a wrong type.
    let (out, doc) = load(&s, &[&url, "-d", "NOSUCHCMD x", "-n", "50", "-c", "2"]);
    assert_exit(&out, 1);
    assert_eq!(n(&doc["summary"]["errors"]), 50);
    assert_eq!(n(&doc["summary"]["by_status"]["error ERR"]), 50);
    let (out, doc) = load(&s, &[&url, "-d", "LPUSH hits x", "-n", "20", "-c", "1"]);
    assert_exit(&out, 1);
    assert_eq!(
        n(&doc["summary"]["by_status"]["error WRONGTYPE"]),
        20,
        "{}",
        stdout(&out)
    );
    assert_has(&stdout(&out), "Redis error WRONGTYPE 20");
    // What cannot be sent is refused before anything is, with the fix.
    for (args, says) in [
        (
            vec![format!("{url}/x"), "-d".into(), "GET a".into()],
            "is not a database number",
        ),
        (
            vec![url.replace("//", "//u:p@"), "-d".into(), "GET a".into()],
            "AUTH is not sent",
        ),
        (vec![url.clone()], "give a command as the body"),
        (
            vec![url.clone(), "-d".into(), "GET \"a".into()],
            "is never closed",
        ),
        (
            vec![url.clone(), "--http2".into(), "-d".into(), "GET a".into()],
            "--http2 is for HTTP",
        ),
    ] {
        let mut all = vec!["load"];
        all.extend(args.iter().map(String::as_str));
        all.extend(["-n", "1"]);
        let out = s.run(&all);
        assert_exit(&out, 2);
        assert_has(&stderr(&out), says);
    }
}

#[test]
fn a_pipelined_redis_run_counts_stores_and_times_every_command() {
    let _l = loaded();
    let (_srv, port) = redis_server();
    let s = Scratch::new();
    let url = format!("redis://127.0.0.1:{port}");
    // 4 connections x 16 commands in flight, no think time: written and read as
    // batches, each command counted, stored and timed on its own.
    let (out, doc) = load(
        &s,
        &[
            &url,
            "-d",
            "SET key:{{seq}} {{random 64}}",
            "-n",
            "20000",
            "-c",
            "4",
            "--streams",
            "16",
            "--threads",
            "1",
        ],
    );
    assert_exit(&out, 0);
    let sum = &doc["summary"];
    assert_eq!(n(&sum["ok"]), 20000, "{}", stdout(&out));
    assert_eq!(n(&sum["sent"]), 20000);
    assert_eq!(n(&sum["errors"]), 0);
    assert_eq!(n(&sum["connections_opened"]), 4);
    assert_eq!(redis_cli(port, &["dbsize"]), "20000");
    assert_eq!(n(&sum["bytes_received"]), 20000 * 5);
    assert_has(&stdout(&out), "4 connections x 16 streams");
    // Each command's latency is from its own start to its own reply: by Little's law
    // the commands in flight (64) are the rate times the mean latency (less over the
    // run's start and end, when fewer are in flight).
    let rate = sum["achieved_rate"].as_f64().unwrap();
    let mean = sum["latency_us"]["mean"].as_f64().unwrap() / 1e6;
    let in_flight = rate * mean;
    assert!(
        (40.0..=68.0).contains(&in_flight),
        "{in_flight} in flight\n{}",
        stdout(&out)
    );
    assert!(
        load_schema_errors(&doc).is_empty(),
        "{:?}",
        load_schema_errors(&doc)
    );
    // A run of a duration ends with every command sent answered: the server holds
    // what was counted.
    redis_cli(port, &["flushall"]);
    let (out, doc) = load(
        &s,
        &[
            &url,
            "-d",
            "SET key:{{seq}} v",
            "-z",
            "1s",
            "-c",
            "3",
            "--streams",
            "7",
        ],
    );
    assert_exit(&out, 0);
    let ok = n(&doc["summary"]["ok"]);
    assert!(ok > 100, "{}", stdout(&out));
    assert_eq!(n(&doc["summary"]["errors"]), 0);
    assert_eq!(redis_cli(port, &["dbsize"]), ok.to_string());
}

#[test]
fn a_suite_benches_a_redis_server_it_started() {
    let _l = loaded();
    let s = Scratch::new();
    let suite = "[target]\ncommand = [\"redis-server\", \"--port\", \"{{port}}\", \"--bind\", \"127.0.0.1\", \"--save\", \"\", \"--appendonly\", \"no\"]\n\
         ready = \"tcp://127.0.0.1:{{port}}\"\n\n\
         [[test]]\nname = \"set\"\nkind = \"bench\"\n\
         url = \"redis://127.0.0.1:{{port}}\"\n\
         body = \"SET k{{seq}} {{random 32}}\"\nrate = 300\nduration = \"2s\"\n\
         gates = [\"error_rate <= 0%\"]\n";
    let out = run_suite(&s, suite, &["--no-tui"]);
    assert_exit(&out, 0);
    let case = &case_metrics(&s)[0];
    assert_eq!(metric_of(case, "error_rate"), 0.0, "{}", stdout(&out));
    assert!(
        (metric_of(case, "throughput") - 300.0).abs() < 6.0,
        "{}",
        stdout(&out)
    );
    // Its memory is redis-server's own: several MiB.
    assert!(metric_of(case, "peak_rss") > 2.0 * 1048576.0);
}
