//! Live figures where teams watch them: a real Prometheus server (Debian package,
//! installed by `make test`) scrapes `strainline load --metrics-listen`, and a local
//! OTLP/HTTP receiver gets `--otlp` pushes; both must hold the run's own figures.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

use crate::common::*;

/// A plain HTTP GET of a loopback URL's body.
fn get(port: u16, path: &str) -> Option<String> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.1 200").then(|| body.to_string())
}

/// A plain HTTP POST of a JSON body; true on a 2xx answer.
fn post(port: u16, path: &str, body: &str) -> bool {
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut text = String::new();
    let _ = s.read_to_string(&mut text);
    text.starts_with("HTTP/1.1 2")
}

fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// A process's CPU time (user + system, all threads) as the kernel counts it.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let f: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
    // Fields 14 and 15 (utime, stime); f[0] is field 3.
    let ticks: f64 = f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap();
    // SAFETY: sysconf has no preconditions.
    ticks / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64
}

/// A Prometheus query's URL form.
fn encoded(q: &str) -> String {
    q.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A range query's values (at least six points).
fn query(prom_port: u16, q: &str, range: &str) -> Vec<f64> {
    let body = get(
        prom_port,
        &format!("/api/v1/query_range?query={}{range}", encoded(q)),
    )
    .unwrap();
    let r: serde_json::Value = serde_json::from_str(&body).unwrap();
    let values: Vec<f64> = r["data"]["result"][0]["values"]
        .as_array()
        .unwrap_or_else(|| panic!("{q}: {r:#}"))
        .iter()
        .map(|v| v[1].as_str().unwrap().parse().unwrap())
        .collect();
    assert!(values.len() >= 6, "{q}: {r:#}");
    values
}

/// An instant query's value.
fn instant_value(prom_port: u16, q: &str, at: &str) -> f64 {
    let body = get(
        prom_port,
        &format!("/api/v1/query?query={}{at}", encoded(q)),
    )
    .unwrap();
    let r: serde_json::Value = serde_json::from_str(&body).unwrap();
    r["data"]["result"][0]["value"][1]
        .as_str()
        .unwrap_or_else(|| panic!("{q}: {r:#}"))
        .parse()
        .unwrap()
}

/// The OTLP/HTTP receiver: keeps every pushed body.
fn receiver(bodies: Arc<Mutex<Vec<serde_json::Value>>>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut r = BufReader::new(stream.try_clone().unwrap());
            let (mut line, mut length) = (String::new(), 0usize);
            r.read_line(&mut line).unwrap();
            assert!(line.starts_with("POST /v1/metrics "), "{line}");
            loop {
                let mut h = String::new();
                r.read_line(&mut h).unwrap();
                if h == "\r\n" {
                    break;
                }
                if let Some(v) = h.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap();
                }
            }
            let mut body = vec![0; length];
            r.read_exact(&mut body).unwrap();
            bodies
                .lock()
                .unwrap()
                .push(serde_json::from_slice(&body).unwrap());
            let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}");
        }
    });
    port
}

/// One OTLP metric's data points.
fn otlp_points<'a>(doc: &'a serde_json::Value, name: &str) -> &'a Vec<serde_json::Value> {
    let metrics = doc["resourceMetrics"][0]["scopeMetrics"][0]["metrics"]
        .as_array()
        .unwrap();
    let m = metrics
        .iter()
        .find(|m| m["name"] == name)
        .unwrap_or_else(|| panic!("no {name}"));
    m.get("sum")
        .or(m.get("gauge"))
        .or(m.get("histogram"))
        .unwrap()["dataPoints"]
        .as_array()
        .unwrap()
}

#[test]
fn prometheus_scrapes_a_load_s_rate_the_target_s_figures_and_the_generator_s_cpu_and_otlp_gets_the_same(
) {
    let _bench = loaded();
    on_a_quiet_machine(|| {
        let s = Scratch::new();
        let tb_port = free_port();
        // Each push hashes 400 KiB: the target's CPU is large enough to check.
        let target = KillOnDrop(
            Command::new(testbed())
                .args(["serve", "--listen", &format!("127.0.0.1:{tb_port}")])
                .args(["--cpu-cost", "100"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        assert!(eventually(5.0, || get(tb_port, "/health").is_some()));
        assert!(post(tb_port, "/register", r#"{"id":"d1"}"#));
        // Prometheus scraping strainline every second.
        let (metrics_port, prom_port) = (free_port(), free_port());
        let cfg = s.path("prometheus.yml");
        std::fs::write(
            &cfg,
            format!(
                "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: strainline\n    static_configs:\n      - targets: ['127.0.0.1:{metrics_port}']\n"
            ),
        )
        .unwrap();
        let _prometheus = KillOnDrop(
            Command::new("prometheus")
                .arg(format!("--config.file={}", cfg.display()))
                .arg(format!("--storage.tsdb.path={}", s.path("tsdb").display()))
                .arg(format!("--web.listen-address=127.0.0.1:{prom_port}"))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("prometheus is installed by `make test` (scripts/test-deps.sh)"),
        );
        assert!(
            eventually(20.0, || get(prom_port, "/-/ready").is_some()),
            "prometheus not ready"
        );
        let pushes = Arc::new(Mutex::new(Vec::new()));
        let otlp_port = receiver(pushes.clone());

        let json = s.path("load.json");
        let started = now();
        let load = strainline()
            .arg("--store")
            .arg(s.store())
            .args([
                "load",
                &format!("http://127.0.0.1:{tb_port}/push/d1"),
                "-m",
                "POST",
                "-d",
                "x",
                "-q",
                "200",
                "-z",
                "20s",
                "--metrics-listen",
                &format!("127.0.0.1:{metrics_port}"),
                "--otlp",
                &format!("http://127.0.0.1:{otlp_port}/v1/metrics"),
                "--pid",
                &target.0.id().to_string(),
                "--json",
                json.to_str().unwrap(),
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The kernel's own counters during the steady part, read when Prometheus'
        // range below begins and ends: the target's CPU ticks, its open descriptors and
        // strainline's own CPU.
        let at = |t: f64| {
            std::thread::sleep(std::time::Duration::from_secs_f64(
                (started + t - now()).max(0.0),
            ));
            (
                now(),
                cpu_seconds(target.0.id()),
                std::fs::read_dir(format!("/proc/{}/fd", target.0.id()))
                    .unwrap()
                    .count() as f64,
                cpu_seconds(load.id()),
            )
        };
        let (t0, target_cpu0, _, _) = at(11.0);
        let (t1, target_cpu1, fds, generator_cpu) = at(18.0);
        let out = load.wait_with_output().unwrap();
        assert_exit(&out, 0);
        assert_has(&stdout(&out), &format!("Target pid {}", target.0.id()));
        let doc: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let achieved = doc["summary"]["achieved_rate"].as_f64().unwrap();
        let completed = doc["summary"]["completed"].as_f64().unwrap();
        assert_eq!(
            doc["summary"]["ok"].as_f64(),
            Some(completed),
            "every push answered 200"
        );

        // Prometheus' own rate of the request counter over the steady middle of the run.
        // From 11 s: the 5 s window then lies wholly after the series began (the process
        // starts, plans and connects first).
        let range = format!("&start={t0:.3}&end={t1:.3}&step=1");
        let values = query(
            prom_port,
            "sum(rate(strainline_requests_total[5s]))",
            &range,
        );
        let rate = values.iter().sum::<f64>() / values.len() as f64;
        assert!(
            (rate - achieved).abs() <= 0.02 * achieved,
            "Prometheus rate {rate:.1} vs the run's achieved {achieved:.1} req/s ({values:?})"
        );
        // The target's CPU, averaged over the range, against its ticks in the kernel.
        let cores = query(prom_port, "strainline_target_cpu_cores", &range);
        let exported = cores.iter().sum::<f64>() / cores.len() as f64;
        let kernel = (target_cpu1 - target_cpu0) / (t1 - t0);
        assert!(
            kernel > 0.05,
            "the pushes cost the target {kernel:.3} cores"
        );
        assert!(
            (exported - kernel).abs() <= 0.15 * kernel + 0.01,
            "target CPU exported {exported:.3} cores, the kernel counted {kernel:.3} ({cores:?})"
        );
        // The threads' time on a CPU is the CPU: their on_cpu thread-seconds per second.
        let on_cpu = query(
            prom_port,
            "sum(rate(strainline_target_thread_seconds_total{state=\"on_cpu\"}[5s]))",
            &range,
        );
        let on_cpu = on_cpu.iter().sum::<f64>() / on_cpu.len() as f64;
        assert!(
            (on_cpu - kernel).abs() <= 0.2 * kernel + 0.01,
            "threads on CPU exported {on_cpu:.3} thread-s/s, the kernel counted {kernel:.3} cores"
        );
        // Descriptors and the generator's CPU at the range's end (a scrape is at most a
        // second old; strainline's CPU grows by a few hundredths of a second a second).
        let instant = format!("&time={t1:.3}");
        let exported_fds = instant_value(prom_port, "strainline_target_fds", &instant);
        assert!(
            (exported_fds - fds).abs() <= 2.0,
            "target FDs exported {exported_fds}, /proc/PID/fd holds {fds}"
        );
        let exported_cpu = instant_value(
            prom_port,
            "strainline_generator_cpu_seconds_total",
            &instant,
        );
        assert!(
            exported_cpu <= generator_cpu + 0.02
                && exported_cpu >= generator_cpu - 0.1 - 0.1 * generator_cpu,
            "generator CPU exported {exported_cpu:.3} s, the kernel counted {generator_cpu:.3} s"
        );
        // The target's RSS series: one point a scrape, the testbed's size.
        let rss = query(prom_port, "strainline_target_rss_bytes", &range);
        let status = std::fs::read_to_string(format!("/proc/{}/status", target.0.id())).unwrap();
        let vm_rss_kib: f64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .unwrap()
            .trim()
            .trim_end_matches(" kB")
            .trim()
            .parse()
            .unwrap();
        // The target's threads, as the kernel counts them (the testbed's are fixed).
        let threads = query(prom_port, "strainline_target_threads", &range);
        let kernel_threads: f64 = status
            .lines()
            .find_map(|l| l.strip_prefix("Threads:"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert_eq!(*threads.last().unwrap(), kernel_threads);
        let last = *rss.last().unwrap();
        assert!(
            (last - vm_rss_kib * 1024.0).abs() <= 0.2 * vm_rss_kib * 1024.0,
            "RSS series ends at {last}, the kernel says {vm_rss_kib} KiB"
        );

        // OTLP: pushes every 5 s, the last one at the end with the run's totals.
        let pushes = pushes.lock().unwrap();
        assert!(pushes.len() >= 4, "{} pushes", pushes.len());
        let last = pushes.last().unwrap();
        let responses: f64 = otlp_points(last, "strainline_requests")
            .iter()
            .map(|p| p["asDouble"].as_f64().unwrap())
            .sum();
        assert_eq!(responses, completed, "the last push holds every response");
        let hist = &otlp_points(last, "strainline_latency")[0];
        assert_eq!(
            hist["count"].as_str().unwrap().parse::<f64>().unwrap(),
            completed
        );
        assert!(
            otlp_points(last, "strainline_target_rss")[0]["asDouble"]
                .as_f64()
                .unwrap()
                > 1e6
        );
    });
}

#[test]
fn a_busy_metrics_address_or_a_bad_otlp_url_is_refused_before_the_run() {
    let s = Scratch::new();
    let busy = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = busy.local_addr().unwrap().to_string();
    let out = s.run(&[
        "load",
        "http://127.0.0.1:9/",
        "-q",
        "10",
        "-z",
        "1s",
        "--metrics-listen",
        &addr,
    ]);
    assert_exit(&out, 2);
    assert_has(&stderr(&out), &format!("--metrics-listen {addr}"));
    let out = s.run(&[
        "load",
        "http://127.0.0.1:9/",
        "-q",
        "10",
        "-z",
        "1s",
        "--otlp",
        "https://collector:4318",
    ]);
    assert_exit(&out, 2);
    assert_has(
        &stderr(&out),
        "give an http:// URL of an OTLP/HTTP receiver",
    );
}

/// A suite's cases are told apart on the scraped figures: `strainline_case_info` names
/// the case running at each scrape.
#[test]
fn a_suite_s_scrapes_name_the_case_that_is_running() {
    let _bench = loaded();
    let s = Scratch::new();
    let metrics_port = free_port();
    let suite = s.path("suite.toml");
    std::fs::write(
        &suite,
        format!(
            r#"
[suite]
name = "two"
[target]
command = ["{tb}", "serve", "--listen", "127.0.0.1:{{{{port}}}}"]
ready = "http://127.0.0.1:{{{{port}}}}/health"
[[test]]
name = "first \"quoted\" case"
kind = "bench"
url = "http://127.0.0.1:{{{{port}}}}/health"
rate = 50
duration = "3s"
[[test]]
name = "second"
kind = "bench"
url = "http://127.0.0.1:{{{{port}}}}/health"
rate = 50
duration = "3s"
"#,
            tb = testbed().display()
        ),
    )
    .unwrap();
    let run = strainline()
        .arg("--store")
        .arg(s.store())
        .args(["run", suite.to_str().unwrap(), "--metrics-listen"])
        .arg(format!("127.0.0.1:{metrics_port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut seen = std::collections::BTreeSet::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut run = KillOnDrop(run);
    while run.0.try_wait().unwrap().is_none() && std::time::Instant::now() < deadline {
        if let Some(text) = get(metrics_port, "/metrics") {
            seen.extend(
                text.lines()
                    .filter(|l| l.starts_with("strainline_case_info{"))
                    .map(str::to_string),
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let status = run.0.wait().unwrap();
    assert!(status.success(), "the suite failed: {status}");
    let seen: Vec<String> = seen.into_iter().collect();
    assert_eq!(
        seen,
        [
            r#"strainline_case_info{case="first \"quoted\" case"} 1"#,
            r#"strainline_case_info{case="second"} 1"#,
        ],
        "the case label at each scrape"
    );
}

/// `--metrics-listen` answers each scrape on its own: ten clients that connect and say
/// nothing do not hold the next scrape (before, each held the one server thread for its
/// 2 s read timeout: the eleventh waited 20 s).
#[test]
fn silent_clients_do_not_hold_a_scrape() {
    let s = Scratch::new();
    let port = free_port();
    let mut run = KillOnDrop(
        strainline()
            .args(["--store", &s.store()])
            .args([
                "load",
                "http://127.0.0.1:9/",
                "-q",
                "5",
                "-z",
                "8s",
                "--no-tui",
            ])
            .args(["--metrics-listen", &format!("127.0.0.1:{port}")])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    assert!(eventually(5.0, || get(port, "/metrics").is_some()));
    let silent: Vec<_> = (0..10)
        .map(|_| std::net::TcpStream::connect(("127.0.0.1", port)).unwrap())
        .collect();
    let mut s2 = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s2.set_read_timeout(Some(std::time::Duration::from_secs(1)))
        .unwrap();
    write!(
        s2,
        "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    let read = s2.read_to_string(&mut text);
    assert!(read.is_ok(), "{read:?}: {text}");
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert_has(&text, "strainline_requests_total");
    drop(silent);
    assert!(eventually(15.0, || run.0.try_wait().unwrap().is_some()));
}
