//! `strainline serve` against stores filled by real runs: Chromium loads every page
//! (rows, verdicts, a change point where the v2 profile entered the history, no
//! console errors, hostile names inert, screenshots), the live page of a running soak
//! advances and agrees with what the run stores at its end, PostgreSQL serves what
//! SQLite serves, a failed gate is stored with its measured value and shown by `show`,
//! `runs`, every report and the pages (a suite's in PostgreSQL here, a `load` run's in
//! `load.rs`), the token is enforced, the store file is not touched, and 20 clients
//! browsing while a suite writes get only 200s.

use std::io::{BufRead, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::common::*;

/// Hostile texts: they must reach the pages as text.
const XSS_LABEL: &str = "\"><script>alert(1)</script>";
const JS_LINK: &str = "javascript:alert(2)";
const IMG: &str = "<img src=x onerror=alert(3)>";

/// A suite of the testbed pinned to one CPU at 2 ms of CPU a push: 60% busy at the
/// soak's 300 req/s, with room for the Chromium that browses beside it on 2 cores.
fn suite(name: &str, kind_body: &str) -> String {
    with_testbed(&format!(
        r#"
[suite]
name = "{name}"

[target]
command = ["taskset", "-c", "CPU", "TB", "serve", "--listen", "127.0.0.1:{{{{port}}}}", "--workers", "1", "--cpu-cost", "200", "--profile", "{{{{profile}}}}"]
ready = "http://127.0.0.1:{{{{port}}}}/health"

[[test]]
name = "push<script>alert(4)</script>"
{PUSH}
{kind_body}
"#
    ))
    .replace("\"CPU\"", &format!("\"{}\"", one_cpu()))
}

fn run_suite_as(s: &Scratch, text: &str, label: &str, profile: &str) -> std::process::Output {
    let path = s.path("suite.toml");
    std::fs::write(&path, text).unwrap();
    s.run(&[
        "run",
        path.to_str().unwrap(),
        "--label",
        label,
        "--var",
        &format!("profile={profile}"),
    ])
}

/// A hyperfine result with fixed times (the same figures in every store).
fn import(s: &Scratch, label: &str, command: &str, base: f64) {
    let path = s.path("hyperfine.json");
    let times: Vec<f64> = (0..10).map(|i| base * (1.0 + 0.01 * i as f64)).collect();
    std::fs::write(
        &path,
        serde_json::json!({ "results": [{ "command": command, "times": times, "exit_codes": vec![0; 10] }] })
            .to_string(),
    )
    .unwrap();
    let out = s.run(&[
        "import",
        "hyperfine",
        path.to_str().unwrap(),
        "--label",
        label,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
}

/// `strainline serve` on a free loopback port; its base URL.
pub(crate) fn serve(s: &Scratch, extra: &[&str]) -> (KillOnDrop, String) {
    let mut child = strainline()
        .arg("--store")
        .arg(s.store())
        .args(["serve", "--listen", "127.0.0.1:0"])
        .args(extra)
        .current_dir(s.dir.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|r| r.split('/').next())
        .unwrap_or_else(|| panic!("no address in: {line}"))
        .to_string();
    (KillOnDrop(child), format!("http://{addr}"))
}

/// One GET: (status, head, body).
pub(crate) fn get(base: &str, path: &str, headers: &[&str]) -> (u16, String, String) {
    let addr = base.trim_start_matches("http://");
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n");
    for h in headers {
        req.push_str(h);
        req.push_str("\r\n");
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, head.to_string(), body.to_string())
}

pub(crate) fn get_json(base: &str, path: &str) -> serde_json::Value {
    let (status, _, body) = get(base, path, &[]);
    assert_eq!(status, 200, "{path}: {body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path}: {e}: {body}"))
}

/// Text as an HTML page shows it escaped.
fn html(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The newest run in `s`'s store failed gate `failed` (as written) and held the others
/// of its `total`: `show` (text and JSON), `runs`, `report` in every format, and
/// `serve`'s runs page (HTML and `/api/v1/runs`) and run page each show the failed gate
/// with the value it measured, and its tally; the Why of the run is that gate, not a
/// note. Returns the failed gate's measured value, in its metric's unit.
pub(crate) fn a_failed_gate_shows_everywhere(s: &Scratch, failed: &str, total: usize) -> f64 {
    let out = s.run(&["show", "latest", "--json"]);
    assert_exit(&out, 0);
    let doc: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let id = doc["run"]["id"].as_i64().unwrap();
    let gates = doc["cases"][0]["gates"].as_array().unwrap();
    assert_eq!(gates.len(), total, "{doc:#}");
    let gate = gates.iter().find(|g| g["gate"] == failed).unwrap();
    assert_eq!(gate["passed"], false, "{doc:#}");
    let measured = gate["measured"]
        .as_f64()
        .expect("the measured value is stored");
    let detail = gate["detail"].as_str().unwrap().to_string();
    let tally = format!(
        "{} of {total} failed",
        gates.iter().filter(|g| g["passed"] == false).count()
    );
    assert_eq!(doc["run"]["gates"]["total"], total as i64, "{doc:#}");
    let why = doc["why"].as_str().unwrap_or_default();
    assert!(
        why.contains(&format!("gate failed: {detail}")),
        "why: {why}"
    );
    assert!(!why.starts_with("note:"), "{why}");
    let out = s.run(&["show", "latest"]);
    let text = stdout(&out);
    assert_has(&text, &format!("gates:      {tally}"));
    assert_has(&text, &format!("why:        {why}"));
    let line = text
        .lines()
        .find(|l| l.contains(failed) && l.contains("FAILED"));
    assert!(line.is_some_and(|l| l.contains("measured ")), "{text}");
    assert_has(&stdout(&s.run(&["runs"])), &tally);
    // Every format `report` writes.
    let (md, htm, junit, json, csv) = (
        s.path("r.md"),
        s.path("r.html"),
        s.path("r.xml"),
        s.path("r.json"),
        s.path("csv"),
    );
    let p = |x: &std::path::Path| x.to_str().unwrap().to_string();
    assert_exit(
        &s.run(&[
            "report",
            "latest",
            "--markdown",
            &p(&md),
            "--html",
            &p(&htm),
            "--junit",
            &p(&junit),
            "--json",
            &p(&json),
            "--csv",
            &p(&csv),
        ]),
        0,
    );
    let read = |x: &std::path::Path| std::fs::read_to_string(x).unwrap();
    let md = read(&md);
    let md_detail = detail.replace('<', "&lt;").replace('>', "&gt;");
    assert_has(&md, &format!("gate failed: {md_detail}"));
    assert!(
        !md.contains("note: the generator"),
        "a note is no reason:\n{md}"
    );
    assert_has(&read(&htm), &html(&detail));
    assert_has(&read(&junit), &html(&detail));
    let json: serde_json::Value = serde_json::from_str(&read(&json)).unwrap();
    assert_eq!(json["cases"][0]["gates"], doc["cases"][0]["gates"]);
    let csv = read(&csv.join("gates.csv"));
    assert!(
        csv.lines().any(|l| l.contains(failed)
            && l.contains(&measured.to_string())
            && l.contains(",false,")),
        "{csv}"
    );
    // serve: the runs page (its Gates and Why columns), its JSON, the run's page.
    let (_server, base) = serve(s, &[]);
    let (status, _, page) = get(&base, "/runs", &[]);
    assert_eq!(status, 200);
    let row = page
        .split("<tr class=\"run\"")
        .find(|r| r.contains(&format!("data-run=\"{id}\"")))
        .unwrap_or_else(|| panic!("no row of run {id}: {page}"));
    assert_has(row, &format!("<td class=\"gates\">{tally}</td>"));
    assert_has(row, &html(&format!("gate failed: {detail}")));
    let api = get_json(&base, "/api/v1/runs");
    let listed = api["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == id)
        .unwrap();
    assert_eq!(listed["reason"].as_str(), Some(why), "{listed:#}");
    let (status, _, page) = get(&base, &format!("/runs/{id}"), &[]);
    assert_eq!(status, 200);
    assert_has(&page, &html(&detail));
    measured
}

/// Chromium's DOM of a page after its scripts ran, and what it logged (console
/// messages, script errors, refused resources).
fn browse(url: &str, extra: &[&str]) -> (String, String) {
    let mut args = vec!["--enable-logging=stderr", "--v=0", "--dump-dom"];
    args.extend_from_slice(extra);
    args.push(url);
    let out = chromium(&args);
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// What in Chromium's log is a page's fault: a console error, an uncaught exception, a
/// resource the policy refused.
fn page_errors(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|l| {
            (l.contains("CONSOLE") && (l.contains("error") || l.contains("Error")))
                || l.contains("Uncaught")
                || l.contains("Refused to")
                || l.contains("Content Security Policy")
        })
        .collect()
}

/// Screenshots for docs/serve.md, made by the test (copied there by hand after viewing).
fn screenshot(url: &str, name: &str) -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("serve-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    let png = dir.join(format!("{name}.png"));
    let out = chromium(&[
        &format!("--screenshot={}", png.display()),
        "--window-size=1200,1500",
        url,
    ]);
    assert!(png.exists(), "{}", String::from_utf8_lossy(&out.stderr));
    png
}

fn sha(path: &std::path::Path) -> Vec<u8> {
    let bytes = std::fs::read(path).unwrap();
    ring::digest::digest(&ring::digest::SHA256, &bytes)
        .as_ref()
        .to_vec()
}

#[test]
fn every_page_loads_in_chromium_over_real_runs_with_hostile_names_inert() {
    let _bench = loaded();
    // Its history and comparison measure CPU per request: repeated when the
    // hypervisor took the machine during it (CI once measured v2's change at 27%).
    on_a_quiet_machine(|| {
        let s = Scratch::new();
        let text = suite(
            "web <b>api</b>",
            "kind = \"bench\"\nrate = 200\nduration = \"1s\"",
        );
        // Six runs of v1 then six of v2 (1.5× the hashing per request): the history's
        // change point must be at the first v2 run.
        let mut ids = Vec::new();
        for (label, profile) in [("v1", "v1"), ("v2", "v2")] {
            for _ in 0..6 {
                let out = run_suite_as(&s, &text, label, profile);
                assert_exit(&out, 0);
                let runs: serde_json::Value =
                    serde_json::from_slice(&s.run(&["runs", "--json", "--limit", "1"]).stdout)
                        .unwrap();
                ids.push(runs[0]["id"].as_i64().unwrap());
            }
        }
        let first_v2 = ids[6];
        // A failing run with a hostile label, and imports named by hostile text.
        let failing = suite(
            "web <b>api</b>",
            "kind = \"bench\"\nrate = 200\nduration = \"1s\"\ngates = [\"latency_p99 < 1us\"]",
        );
        // (v2 too: its figures count in the history, whose change stays single)
        assert_exit(&run_suite_as(&s, &failing, XSS_LABEL, "v2"), 1);
        import(&s, JS_LINK, IMG, 0.010);
        import(&s, "imported-2", IMG, 0.011);
        for _ in 0..2 {
            assert_exit(&s.run(&["monitor", "-q", "--", "sleep", "0.2"]), 0);
        }
        let db = s.path("results.db");
        let before = sha(&db);

        let (_server, base) = serve(&s, &[]);

        // Runs: every run, newest first, with its verdict; the failing one says why.
        let (dom, log) = browse(&format!("{base}/runs"), &[]);
        assert!(page_errors(&log).is_empty(), "{:?}", page_errors(&log));
        assert_eq!(dom.matches("<tr class=\"run\"").count(), 17, "{dom}");
        // Twelve suite runs and two imports passed (the monitor runs are `completed`).
        assert_eq!(dom.matches("verdict passed").count(), 14);
        assert!(dom.contains("verdict failed"));
        assert!(
            dom.contains("latency_p99"),
            "the first reason of the failing run"
        );
        // Hostile texts are text: no element they could make, no javascript: link.
        assert!(!dom.to_lowercase().contains("<script"), "{dom}");
        assert!(!dom.contains("<img"));
        assert!(!dom.contains("href=\"javascript:"));
        assert!(dom.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(dom.contains("web &lt;b&gt;api&lt;/b&gt;"));
        screenshot(&format!("{base}/runs"), "runs");
        // The JSON of the same page.
        let doc = get_json(
            &base,
            "/api/v1/runs?suite=web%20%3Cb%3Eapi%3C%2Fb%3E&status=passed",
        );
        assert_eq!(doc["schema"], "strainline.serve.runs.v1");
        assert_eq!(doc["runs"].as_array().unwrap().len(), 12);
        let (status, _, body) = get(&base, "/runs?kind=import", &["Accept: application/json"]);
        assert_eq!(status, 200);
        let doc: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(doc["runs"].as_array().unwrap().len(), 2);
        assert_eq!(doc["runs"][1]["label"], JS_LINK);

        // A run: its report, its neighbours, the compare picker.
        let (dom, log) = browse(&format!("{base}/runs/{first_v2}"), &[]);
        assert!(page_errors(&log).is_empty(), "{:?}", page_errors(&log));
        assert!(dom.contains(&format!(" run #{first_v2}")));
        assert!(
            dom.contains(&format!("href=\"/runs/{}\"", ids[5])),
            "previous run"
        );
        assert!(
            dom.contains(&format!("href=\"/runs/{}\"", ids[7])),
            "next run"
        );
        assert!(dom.contains("name=\"baseline\""));
        assert!(dom.matches("<svg class=\"chart\"").count() >= 3);
        assert_only_our_script(&dom, std::path::Path::new("/runs"));
        screenshot(&format!("{base}/runs/{first_v2}"), "run");

        // Compare: v1's six runs against v2's; the CPU per request regressed.
        let url = format!("{base}/compare?baseline=v1&candidate=v2");
        let (dom, log) = browse(&url, &[]);
        assert!(page_errors(&log).is_empty(), "{:?}", page_errors(&log));
        assert!(dom.contains("cpu_per_op"), "{dom}");
        assert!(dom.contains("permalink"));
        let doc = get_json(&base, "/api/v1/compare?baseline=v1&candidate=v2");
        let cpu = doc["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["metric"] == "cpu_per_op")
            .unwrap();
        assert_eq!(cpu["verdict"], "regressed", "{doc:#}");
        let compared = 100.0 * (cpu["ratio"].as_f64().unwrap() - 1.0);
        assert_eq!(doc["verdict"], "regressed");
        screenshot(&url, "compare");
        // The imports compare too (the hostile label as a key).
        let doc = get_json(
            &base,
            &format!(
                "/api/v1/compare?baseline={}&candidate=imported-2",
                "javascript%3Aalert(2)"
            ),
        );
        assert_eq!(doc["rows"][0]["case"], IMG);

        // History: the suite's small multiples; cpu_per_op changes at the first v2 run.
        let url = format!("{base}/history?suite=web%20%3Cb%3Eapi%3C%2Fb%3E");
        let (dom, log) = browse(&url, &[]);
        assert!(page_errors(&log).is_empty(), "{:?}", page_errors(&log));
        let cpu = dom
            .split("<div class=\"series\"")
            .find(|d| d.contains("data-metric=\"cpu_per_op\""))
            .expect("a cpu_per_op chart");
        // The change is marked at the first v2 run (this VM's noise may add a small one
        // elsewhere; the JSON below checks their sizes).
        assert!(!cpu.contains("data-change-points=\"0\""));
        assert!(
            cpu.contains(&format!(
                "Change point at run <a href=\"/runs/{first_v2}\">"
            )),
            "{:?}",
            cpu.split("<p class=\"change-point\">")
                .skip(1)
                .collect::<Vec<_>>()
        );
        // Every run is a point that links to it.
        assert_eq!(cpu.matches("<circle class=\"point\"").count(), 13);
        assert!(cpu.contains("tolerance"));
        assert!(!dom.to_lowercase().contains("<script"));
        screenshot(&url, "history");
        let doc = get_json(
            &base,
            "/api/v1/history?suite=web%20%3Cb%3Eapi%3C%2Fb%3E&metric=cpu_per_op",
        );
        let changes = doc["series"][0]["change_points"].as_array().unwrap();
        let v2 = changes
            .iter()
            .find(|c| c["run_after"] == first_v2)
            .unwrap_or_else(|| panic!("no change at run #{first_v2}: {changes:#?}"));
        assert_eq!(v2["runs_before"], 6, "the six v1 runs: {v2}");
        // The smallest shift the series can show is stated, on the page and in the JSON.
        let smallest = doc["series"][0]["detectable"].as_f64().unwrap();
        assert!(smallest > 0.0 && smallest < 1.0, "{smallest}");
        assert!(cpu.contains("Smallest shift this history can show: ±"));
        // Its size is the level's: the mean of the runs after it over the mean of the six
        // before, recomputed here from the points the page plots.
        let points = doc["series"][0]["points"].as_array().unwrap();
        let at = points.iter().position(|p| p["run"] == first_v2).unwrap();
        let after = v2["runs_after"].as_u64().unwrap() as usize;
        let mean = |ps: &[serde_json::Value]| {
            ps.iter().map(|p| p["value"].as_f64().unwrap()).sum::<f64>() / ps.len() as f64
        };
        let level = 100.0 * (mean(&points[at..at + after]) / mean(&points[at - 6..at]) - 1.0);
        let pct = v2["change_percent"].as_f64().unwrap();
        assert!((pct - level).abs() < 0.01, "{pct} against {level}");
        // And it is the regression the comparison found: v2 hashes 1.5x as much per request
        // and the rest of a request's work is the same, so the whole grows by about half at
        // most (43-52% here on a quiet machine; 27% in a CI run before the target was
        // pinned to one CPU, the VM's two running at different speeds). The comparison of
        // the medians tells the same size.
        assert!((5.0..=65.0).contains(&pct), "{pct}");
        assert!(
            (pct - compared).abs() < 15.0,
            "change point {pct:+.1}%, comparison {compared:+.1}%"
        );
        // No other shift of size: a change whose one side is a single run is a run the
        // method cannot tell from an outlier (in CI, the last run of thirteen once took 19%
        // more CPU per request than the six v2 runs before it), so it is not held to this.
        for c in changes.iter().filter(|c| c["run_after"] != first_v2) {
            let side = |k: &str| c[k].as_u64().unwrap();
            if side("runs_before") < 2 || side("runs_after") < 2 {
                // The page says what the method cannot tell.
                assert!(
                    cpu.contains("an outlier or a new level") || cpu.contains("may be an outlier")
                );
                continue;
            }
            // The machine's own drift between separate runs reaches 15% here: what is
            // held is that the injected change stands out, any other under half of it.
            let other = c["change_percent"].as_f64().unwrap().abs();
            assert!(
                other < pct.abs() / 2.0,
                "a change of {other:.1}% besides v2's {pct:+.1}%: {changes:#?}"
            );
        }

        // Imports are a suite of their tool's name; runs outside a suite have a history
        // per kind: the two monitor runs.
        let doc = get_json(&base, "/api/v1/history");
        assert_eq!(doc["outside_suites"][0]["kind"], "monitor", "{doc:#}");
        let doc = get_json(&base, "/api/v1/history?suite=hyperfine&metric=time");
        assert_eq!(
            doc["series"][0]["points"].as_array().unwrap().len(),
            2,
            "{doc:#}"
        );
        assert_eq!(doc["series"][0]["case"], IMG);
        let doc = get_json(&base, "/api/v1/history?kind=monitor&metric=peak_rss");
        assert_eq!(
            doc["series"][0]["points"].as_array().unwrap().len(),
            2,
            "{doc:#}"
        );
        let (dom, _) = browse(&format!("{base}/history?suite=hyperfine"), &[]);
        assert!(dom.contains("History of hyperfine"));
        assert!(!dom.contains("<img"));

        // Unknown pages and runs are 404s, in HTML and JSON.
        assert_eq!(get(&base, "/runs/999999", &[]).0, 404);
        assert_eq!(get(&base, "/api/v1/runs/999999", &[]).0, 404);
        assert_eq!(
            get(&base, "/compare?baseline=nope&candidate=v2", &[]).0,
            404
        );
        assert_eq!(get(&base, "/etc/passwd", &[]).0, 404);

        // Nothing was written to the store.
        assert_eq!(sha(&db), before, "the store file changed while browsing");
    });
}

#[test]
fn the_live_page_of_a_running_soak_advances_and_agrees_with_what_the_run_stores() {
    // Exclusive: it reads the achieved rate off the page (beside another suite and a
    // Chromium on the 2 cores the soak was once starved to below 250 of 300 req/s).
    let _bench = measuring();
    let s = Scratch::new();
    // An empty store first: serve refuses none, shows nothing running.
    import(&s, "seed", "./seed", 0.01);
    let (_server, base) = serve(&s, &[]);
    let path = s.path("soak.toml");
    std::fs::write(
        &path,
        suite("soak", "kind = \"soak\"\nrate = 300\nduration = \"8s\""),
    )
    .unwrap();
    let run = strainline()
        .arg("--store")
        .arg(s.store())
        .args(["run", path.to_str().unwrap(), "--var", "profile=v1"])
        .current_dir(s.dir.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut run = KillOnDrop(run);
    let mut id = None;
    assert!(eventually(20.0, || {
        id = get_json(&base, "/api/v1/live")["running"][0]["id"].as_i64();
        id.is_some()
    }));
    let id = id.unwrap();
    // Two reads 2 s apart: more seconds, later figures.
    let seconds = |doc: &serde_json::Value| doc["seconds"].as_array().unwrap().clone();
    assert!(eventually(10.0, || seconds(&get_json(
        &base,
        &format!("/api/v1/live/{id}")
    ))
    .iter()
    .any(|s| s["achieved"].is_number())));
    let first = seconds(&get_json(&base, &format!("/api/v1/live/{id}")));
    std::thread::sleep(Duration::from_secs(2));
    let second = get_json(&base, &format!("/api/v1/live/{id}"));
    assert_eq!(second["status"], "running");
    let second = seconds(&second);
    assert!(
        second.len() >= first.len() + 2,
        "{} then {} seconds",
        first.len(),
        second.len()
    );
    assert_ne!(first.last(), second.last());
    // Chromium runs the page's script: the figures are filled in from the API.
    let (dom, log) = browse(
        &format!("{base}/live/{id}"),
        &[
            "--virtual-time-budget=3000",
            "--run-all-compositor-stages-before-draw",
        ],
    );
    assert!(page_errors(&log).is_empty(), "{:?}", page_errors(&log));
    let figure = |name: &str| -> String {
        let at = dom
            .find(&format!("id=\"{name}\">"))
            .unwrap_or_else(|| panic!("no {name} in {dom}"));
        let rest = &dom[at + name.len() + 6..];
        rest[..rest.find('<').unwrap()].to_string()
    };
    // The figure is the latest second the page had read; checked against the store
    // below (Chromium's own start takes the pinned CPU for a second or so, and that
    // second's figure is what it is: 109 and 186 req/s were seen).
    let achieved = figure("achieved");
    let page_seconds: usize = figure("seen").parse().unwrap_or_else(|_| panic!("{dom}"));
    assert!(figure("rss").parse::<f64>().unwrap() > 0.5);
    assert!(dom.contains("<polyline"), "the rate chart is drawn");
    screenshot(&format!("{base}/live/{id}"), "live");
    let status = run.0.wait().unwrap();
    assert_eq!(status.code(), Some(0));

    // What the page showed is what the run stored at its end: the responses of each
    // second, and the target's RSS samples.
    let all = seconds(&get_json(&base, &format!("/api/v1/live/{id}")));
    let live: Vec<f64> = all.iter().filter_map(|s| s["achieved"].as_f64()).collect();
    let conn = rusqlite::Connection::open(s.path("results.db")).unwrap();
    let stored: Vec<f64> = conn
        .prepare("SELECT value FROM series s JOIN cases c ON c.id = s.case_id WHERE c.run_id = ?1 AND s.name = 'completed_per_second' ORDER BY s.t")
        .unwrap()
        .query_map([id], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert!(live.len() >= 6, "{live:?}");
    let shown = all[..page_seconds]
        .iter()
        .rev()
        .find_map(|s| s["achieved"].as_f64())
        .expect("the page showed a second with responses");
    assert_eq!(achieved, format!("{shown:.0}"), "the page's latest second");
    // The soak held its 300 req/s over its seconds (the open model catches up on a
    // second the CPU was taken).
    let mut sorted = stored.clone();
    sorted.sort_by(f64::total_cmp);
    let median = sorted[sorted.len() / 2];
    assert!((250.0..=350.0).contains(&median), "{stored:?}");
    assert_eq!(
        &stored[..live.len()],
        &live[..],
        "live {live:?}, stored {stored:?}"
    );
    let rss: Vec<i64> = conn
        .prepare(
            "SELECT rss_bytes FROM samples s JOIN cases c ON c.id = s.case_id WHERE c.run_id = ?1",
        )
        .unwrap()
        .query_map([id], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let live_rss: Vec<i64> = all.iter().filter_map(|s| s["rss_bytes"].as_i64()).collect();
    assert!(live_rss.len() >= 5);
    for r in &live_rss {
        assert!(rss.contains(r), "live RSS {r} is not a stored sample");
    }
    let doc = get_json(&base, &format!("/api/v1/live/{id}"));
    assert_ne!(doc["status"], "running");
}

/// A suite's gates are stored as a load run's are, in PostgreSQL as in SQLite: a bench
/// case whose p99 cannot be under a microsecond fails that gate and holds the other.
#[test]
fn a_suite_s_failed_gate_is_stored_in_postgres_and_shown_everywhere() {
    let _bench = loaded();
    let text = suite(
        "gated",
        "kind = \"bench\"\nrate = 100\nduration = \"1s\"\ngates = [\"error_rate < 5%\", \"latency_p99 < 1us\"]",
    );
    let s = Scratch::postgres();
    assert_exit(&run_suite_as(&s, &text, "g", "v1"), 1);
    let p99 = a_failed_gate_shows_everywhere(&s, "latency_p99 < 1us", 2);
    assert!(p99 > 0.001, "p99 {p99} ms");
}

#[test]
fn postgres_serves_the_pages_sqlite_serves() {
    let _bench = loaded();
    let text = suite("pg", "kind = \"bench\"\nrate = 200\nduration = \"1s\"");
    let mut docs = Vec::new();
    for s in [Scratch::new(), Scratch::postgres()] {
        import(&s, "base", "./app", 0.010);
        import(&s, "cand", "./app", 0.013);
        for label in ["a", "b", "c"] {
            assert_exit(&run_suite_as(&s, &text, label, "v1"), 0);
        }
        let (_server, base) = serve(&s, &[]);
        for page in [
            "/runs",
            "/runs/3",
            "/compare?baseline=base&candidate=cand",
            "/history",
            "/history?suite=pg",
            "/live",
            "/live/3",
        ] {
            let (status, _, body) = get(&base, page, &[]);
            assert_eq!(status, 200, "{} {page}: {body}", s.store());
        }
        let history = get_json(&base, "/api/v1/history?suite=pg&metric=throughput");
        assert_eq!(
            history["series"][0]["points"].as_array().unwrap().len(),
            3,
            "{history:#}"
        );
        let runs = get_json(&base, "/api/v1/runs");
        assert_eq!(runs["runs"].as_array().unwrap().len(), 5);
        let mut compare = get_json(&base, "/api/v1/compare?baseline=base&candidate=cand");
        // The same figures judged the same way; only the hosts' text may differ.
        compare["baseline"]["hosts"] = serde_json::Value::Null;
        compare["candidate"]["hosts"] = serde_json::Value::Null;
        docs.push(compare);
    }
    assert_eq!(docs[0], docs[1]);
    assert_eq!(docs[0]["verdict"], "regressed");
}

#[test]
fn a_token_guards_a_reachable_address_and_hostile_requests_get_clean_answers() {
    let s = Scratch::new();
    import(&s, "one", "./app", 0.01);
    // Any address but loopback needs a token.
    let out = s.run(&["serve", "--listen", "0.0.0.0:0"]);
    assert_exit(&out, 2);
    assert_has(&stderr(&out), "--token-file");
    let token = s.path("token");
    std::fs::write(&token, "short\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
    let out = s.run(&[
        "serve",
        "--listen",
        "0.0.0.0:0",
        "--token-file",
        token.to_str().unwrap(),
    ]);
    assert_exit(&out, 2);
    assert_has(&stderr(&out), "at least 16 characters");
    let secret = "s3cret-token-0123456789";
    std::fs::write(&token, format!("{secret}\n")).unwrap();
    // The agents' rule for a secret file: others may not read it, and it must be a
    // regular file (a device or a FIFO would be read for ever).
    for (mode, word) in [(0o644, "read"), (0o666, "read"), (0o622, "change")] {
        std::fs::set_permissions(&token, std::fs::Permissions::from_mode(mode)).unwrap();
        let out = s.run(&["serve", "--token-file", token.to_str().unwrap()]);
        assert_exit(&out, 2);
        assert_has(
            &stderr(&out),
            &format!("lets other users {word} the token: `chmod 600"),
        );
    }
    let fifo = s.fifo("fifo");
    for dev in [std::path::Path::new("/dev/zero"), fifo.as_path()] {
        let out = s.run(&["serve", "--token-file", dev.to_str().unwrap()]);
        assert_exit(&out, 2);
        assert_has(&stderr(&out), "not a regular file");
    }
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
    let (_server, base) = serve(&s, &["--token-file", token.to_str().unwrap()]);
    // (bound to loopback here: the network rule; the token is enforced on any address)
    assert_eq!(get(&base, "/runs", &[]).0, 401);
    assert_eq!(
        get(
            &base,
            "/api/v1/runs",
            &["Authorization: Bearer wrong-token-0123456789"]
        )
        .0,
        401
    );
    assert_eq!(
        get(
            &base,
            "/api/v1/runs",
            &[&format!("Authorization: Bearer {secret}")]
        )
        .0,
        200
    );
    let (status, head, _) = get(&base, &format!("/runs?kind=import&token={secret}"), &[]);
    assert_eq!(status, 303);
    assert!(head.contains("Location: /runs?kind=import"), "{head}");
    assert!(head.contains(&format!(
        "Set-Cookie: strainline_token={secret}; Path=/; HttpOnly"
    )));
    assert_eq!(
        get(
            &base,
            "/runs",
            &[&format!("Cookie: strainline_token={secret}")]
        )
        .0,
        200
    );
    assert_eq!(get(&base, "/runs?token=nope", &[]).0, 401);
    // The redirect that drops the token never leaves this server, nor breaks its head.
    let (status, head, _) = get(
        &base,
        &format!("//evil.example/%0D%0AX-Injected:%201?token={secret}"),
        &[],
    );
    assert_eq!(status, 303);
    assert!(
        head.contains("Location: /evil.example/%0D%0AX-Injected%3A%201\r\n"),
        "{head}"
    );
    assert!(!head.contains("\nX-Injected"), "{head}");

    // Hostile requests: a method that writes, a malformed head, a silent client and an
    // oversized head get clean answers and do not stop the next request.
    let auth = format!("Authorization: Bearer {secret}");
    let addr = base.trim_start_matches("http://").to_string();
    let mut w = TcpStream::connect(&addr).unwrap();
    w.write_all(b"DELETE /runs/1 HTTP/1.1\r\n\r\n").unwrap();
    let mut answer = String::new();
    w.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 405"), "{answer}");
    let mut g = TcpStream::connect(&addr).unwrap();
    g.write_all(b"\x16\x03\x01\x02\x00garbage\r\n\r\n").unwrap();
    let mut answer = String::new();
    g.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    let _silent: Vec<TcpStream> = (0..10)
        .map(|_| TcpStream::connect(&addr).unwrap())
        .collect();
    let mut big = TcpStream::connect(&addr).unwrap();
    let _ = big.write_all(format!("GET /{} HTTP/1.1\r\n", "a".repeat(40_000)).as_bytes());
    let mut answer = String::new();
    let _ = big.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    let t = Instant::now();
    assert_eq!(get(&base, "/api/v1/runs", &[&auth]).0, 200);
    assert!(
        t.elapsed() < Duration::from_secs(4),
        "silent clients held the server"
    );
    // Strangers holding 64, then 2,000, connections open and silent: the newest closes
    // the oldest silent one, so the token holder and a stranger's own page are answered
    // within 2 s.
    for idle in [64, 2000] {
        let strangers: Vec<TcpStream> = (0..idle)
            .filter_map(|_| TcpStream::connect(&addr).ok())
            .collect();
        assert!(
            strangers.len() >= idle * 9 / 10,
            "{} connected",
            strangers.len()
        );
        for headers in [vec![auth.as_str()], vec![]] {
            let t = Instant::now();
            let status = get(&base, "/api/v1/runs", &headers).0;
            assert_eq!(status, if headers.is_empty() { 401 } else { 200 });
            assert!(
                t.elapsed() < Duration::from_secs(2),
                "{idle} idle strangers: answered in {:?}",
                t.elapsed()
            );
        }
    }
}

#[test]
fn twenty_clients_browsing_while_a_suite_writes_get_only_200s() {
    // Exclusive: the suite must keep its offered rate while browsed (run beside the
    // Chromium test's twelve runs, it was INVALID, generator-bound, 2 of 2 times).
    let _bench = measuring();
    let s = Scratch::new();
    // Twelve repetitions of 2 s: the clients browse for the ~30 s the run takes.
    let text = suite(
        "busy",
        "kind = \"bench\"\nrate = 200\nduration = \"2s\"\nrepeat = 12",
    );
    let once = suite("busy", "kind = \"bench\"\nrate = 200\nduration = \"2s\"");
    assert_exit(&run_suite_as(&s, &once, "before", "v1"), 0);
    let (_server, base) = serve(&s, &[]);
    let path = s.path("suite.toml");
    std::fs::write(&path, &text).unwrap();
    let writer = strainline()
        .arg("--store")
        .arg(s.store())
        .args([
            "run",
            path.to_str().unwrap(),
            "--label",
            "during",
            "--var",
            "profile=v1",
        ])
        .current_dir(s.dir.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut writer = KillOnDrop(writer);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let clients: Vec<_> = (0..20)
        .map(|i| {
            let (base, stop) = (base.clone(), stop.clone());
            std::thread::spawn(move || {
                let pages = [
                    "/runs",
                    "/runs/1",
                    "/history?suite=busy",
                    "/api/v1/runs",
                    "/live",
                    "/compare?baseline=before&candidate=1",
                ];
                let mut answers = std::collections::BTreeMap::new();
                let mut n = i;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let (status, _, _) = get(&base, pages[n % pages.len()], &[]);
                    *answers.entry(status).or_insert(0u32) += 1;
                    n += 1;
                    // A person reads a page before the next: 20 of them ask ~80 pages/s.
                    std::thread::sleep(Duration::from_millis(250));
                }
                answers
            })
        })
        .collect();
    let status = writer.0.wait().unwrap();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut all = std::collections::BTreeMap::new();
    for c in clients {
        for (k, v) in c.join().unwrap() {
            *all.entry(k).or_insert(0u32) += v;
        }
    }
    assert_eq!(
        status.code(),
        Some(0),
        "the suite's run failed while browsed"
    );
    assert_eq!(
        all.keys().copied().collect::<Vec<u16>>(),
        vec![200],
        "{all:?}"
    );
    assert!(all[&200] > 1000, "{all:?}");
    // The run was not held up: every repetition kept the offered rate, with no error.
    let doc = get_json(&base, "/api/v1/runs?label=during");
    let id = doc["runs"][0]["id"].as_i64().unwrap();
    let run = get_json(&base, &format!("/api/v1/runs/{id}"));
    let cases = run["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 12);
    for c in cases {
        let metric = |name: &str| {
            c["metrics"]
                .as_array()
                .unwrap()
                .iter()
                .find(|m| m["name"] == name)
                .unwrap()["value"]
                .as_f64()
                .unwrap()
        };
        assert!(metric("throughput") >= 190.0, "{c:#}");
        assert_eq!(metric("error_rate"), 0.0);
    }
}

/// `serve --base-path /perf/` behind nginx as a reverse proxy (`location /perf/ {
/// proxy_pass http://127.0.0.1:PORT/; }`, which strips the prefix), as a team would put
/// it at https://ci.example/perf/: in Chromium, every page's links, forms, script and
/// API address are under /perf/, each link followed answers through the proxy, and a
/// redirect stays under it. A proxy that passes the prefix on is served too.
#[test]
fn behind_nginx_under_a_base_path_every_link_stays_under_it() {
    let _l = loaded();
    let s = Scratch::new();
    import(&s, "v1", "./app", 0.010);
    import(&s, "v2", "./app", 0.012);
    let (_server, direct) = serve(&s, &["--base-path", "/perf"]);
    let upstream = direct.trim_start_matches("http://");
    let dir = s.path("nginx");
    std::fs::create_dir_all(&dir).unwrap();
    let port = free_port();
    let d = dir.display();
    std::fs::write(
        dir.join("nginx.conf"),
        format!(
            "daemon off;\nworker_processes 1;\npid {d}/nginx.pid;\nerror_log {d}/error.log;\n\
             events {{ worker_connections 64; }}\n\
             http {{ access_log off; keepalive_timeout 0; client_body_temp_path {d}/body; proxy_temp_path {d}/proxy;\n\
             server {{ listen 127.0.0.1:{port};\n\
             location /perf/ {{ proxy_pass http://{upstream}/; }} }} }}\n"
        ),
    )
    .unwrap();
    let _ = std::process::Command::new("chmod")
        .args(["-R", "a+rwX"])
        .arg(s.dir.path())
        .status();
    /// nginx stopped as its master stops its workers (SIGTERM; a SIGKILL would leave
    /// them behind).
    struct Nginx(std::process::Child);
    impl Drop for Nginx {
        fn drop(&mut self) {
            unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
            let _ = self.0.wait();
        }
    }
    let _nginx = Nginx(
        std::process::Command::new("nginx")
            .args(["-c", &format!("{d}/nginx.conf"), "-p", &format!("{d}")])
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("nginx is installed by `make test` (scripts/test-deps.sh)"),
    );
    let proxy = format!("http://127.0.0.1:{port}");
    assert!(eventually(10.0, || TcpStream::connect(("127.0.0.1", port)).is_ok()));
    // The root redirects to the runs, under the base.
    let (status, head, _) = get(&proxy, "/perf/", &[]);
    assert_eq!(status, 303);
    assert!(head.lines().any(|l| l == "Location: /perf/runs"), "{head}");
    let (dom, log) = browse(&format!("{proxy}/perf/runs"), &[]);
    assert!(page_errors(&log).is_empty(), "{:?}", page_errors(&log));
    for link in [
        "href=\"/perf/history\"",
        "href=\"/perf/compare\"",
        "action=\"/perf/runs\"",
    ] {
        assert!(dom.contains(link), "{link} not in the runs page");
    }
    assert!(
        !dom.contains("href=\"/runs") && !dom.contains("href=\"/history"),
        "a link escaped the base: {dom}"
    );
    // Every link of the page, followed through the proxy, answers.
    let links: Vec<&str> = dom
        .split("href=\"")
        .skip(1)
        .filter_map(|r| r.split('"').next())
        .filter(|l| l.starts_with('/'))
        .collect();
    assert!(links.len() >= 6, "{links:?}");
    for link in links {
        let link = link.replace("&amp;", "&");
        let (status, _, _) = get(&proxy, &link, &[]);
        assert_eq!(status, 200, "{link} through the proxy");
    }
    let doc = get_json(&proxy, "/perf/api/v1/runs");
    let id = doc["runs"][0]["id"].as_i64().unwrap();
    let (dom, log) = browse(&format!("{proxy}/perf/runs/{id}"), &[]);
    assert!(page_errors(&log).is_empty(), "{:?}", page_errors(&log));
    assert!(dom.contains(&format!(" run #{id}")), "the run's report");
    let (_, _, index) = get(&proxy, "/perf/", &["Accept: application/json"]);
    let index: serde_json::Value = serde_json::from_str(&index).unwrap();
    assert!(index["endpoints"]
        .as_array()
        .unwrap()
        .iter()
        .all(|e| e.as_str().unwrap().starts_with("/perf/api/v1/")));
    // Without a proxy that strips it, the prefixed path is served as well.
    assert_eq!(get(&direct, "/perf/runs", &[]).0, 200);
    assert_eq!(get(&direct, "/runs", &[]).0, 200);
}
