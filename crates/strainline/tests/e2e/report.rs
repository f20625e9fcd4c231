//! Reports of real runs: the HTML opens in headless Chromium with its charts and axis
//! labels, nothing a user, a target or a log wrote can run as script, and JUnit XML
//! validates against the JUnit schema with a failed gate reported as a failure.

use std::process::Command;

use crate::common::*;

const XSS: &str = "<script>alert(1)</script>";

fn suite() -> String {
    format!(
        r#"
[suite]
name = "report-check"

[target]
command = ["sh", "-c", "echo '{XSS}'; exec \"$0\" serve --listen 127.0.0.1:{{{{port}}}} --workers 1 --cpu-cost 200 --crash-after {{{{crash}}}}", "{tb}"]
ready = "http://127.0.0.1:{{{{port}}}}/health"

[[test]]
name = "peak"
kind = "ramp"
matrix = {{ crash = [1000000] }}
{PUSH}
start = 300
step = 300
step_duration = "600ms"
max_steps = 8

[[test]]
name = "stability"
kind = "soak"
matrix = {{ crash = [1000000] }}
{PUSH}
rate = 200
duration = "3s"
gates = ["leak = none", "latency_p99 < 1us"]

[[test]]
name = "crashing"
kind = "soak"
matrix = {{ crash = [150] }}
{PUSH}
rate = 200
duration = "2s"
"#,
        tb = testbed().display()
    )
}

/// Share of non-white pixels and the number of distinct colours of a PNG.
fn ink(png_path: &std::path::Path) -> (f64, usize) {
    let decoder = png::Decoder::new(std::fs::File::open(png_path).unwrap());
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    let bytes = &buf[..info.buffer_size()];
    let step = info.color_type.samples();
    let mut colours = std::collections::HashSet::new();
    let mut inked = 0usize;
    let pixels = bytes.len() / step;
    for px in bytes.chunks(step) {
        let rgb = (px[0], px[1], px[2]);
        colours.insert(rgb);
        if rgb != (255, 255, 255) {
            inked += 1;
        }
    }
    (inked as f64 / pixels as f64, colours.len())
}

#[test]
fn the_html_report_opens_in_chromium_with_its_charts_and_runs_no_script() {
    let _bench = loaded();
    on_a_quiet_machine(|| {
        let s = Scratch::new();
        let path = s.path("suite.toml");
        std::fs::write(&path, suite()).unwrap();
        let reports = s.path("reports");
        let out = s.run(&[
            "run",
            path.to_str().unwrap(),
            "--label",
            XSS,
            "--report",
            reports.to_str().unwrap(),
        ]);
        // The latency gate fails and a case crashes: exit 4 (crashed wins).
        assert_exit(&out, 4);
        let again = s.run(&["run", path.to_str().unwrap(), "--label", "second"]);
        assert_eq!(again.status.code(), Some(4));
        let compare_html = s.path("compare.html");
        let cmp = s.run(&[
            "compare",
            XSS,
            "second",
            "--html",
            compare_html.to_str().unwrap(),
        ]);
        assert!(
            matches!(cmp.status.code(), Some(0) | Some(1)),
            "{}",
            stderr(&cmp)
        );

        for (file, min_charts, titles) in [
            (
                reports.join("report.html"),
                7,
                &[
                    "Stress–strain: completed vs offered load",
                    "Latency distribution",
                    "Leak check",
                    "Memory and CPU of the process tree",
                    "Threads and open file descriptors",
                ][..],
            ),
            (compare_html.clone(), 1, &["Candidate as % of baseline"][..]),
        ] {
            let html = std::fs::read_to_string(&file).unwrap();
            // Nothing that can run but the timeline's own script, the one the policy
            // allows by its hash; the rest of the script elements are its data.
            assert_only_our_script(&html, &file);
            for t in titles {
                assert!(html.contains(t), "{}: no chart '{t}'", file.display());
            }
            // Chromium parses it: the rendered DOM has the charts, each with labelled axes.
            let url = format!("file://{}", file.display());
            let dom = chromium(&["--dump-dom", &url]);
            let dom = String::from_utf8_lossy(&dom.stdout).to_string();
            let charts: Vec<&str> = dom.split("<svg class=\"chart\"").skip(1).collect();
            assert!(
                charts.len() >= min_charts,
                "{}: {} charts in the rendered DOM",
                file.display(),
                charts.len()
            );
            for c in &charts {
                let chart = &c[..c.find("</svg>").unwrap()];
                assert!(
                    chart.matches("class=\"axis-label\"").count() >= 1,
                    "a chart without axis labels: {}",
                    &chart[..chart.len().min(300)]
                );
            }
            assert_only_our_script(&dom, &file);
            // A screenshot that is not blank.
            let png = s.path("shot.png");
            let shot = chromium(&[
                &format!("--screenshot={}", png.display()),
                "--window-size=1200,2400",
                &url,
            ]);
            assert!(png.exists(), "{}", String::from_utf8_lossy(&shot.stderr));
            let (share, colours) = ink(&png);
            assert!(
                share > 0.03 && colours > 20,
                "{}: {share:.3} inked, {colours} colours",
                file.display()
            );
        }

        // The load cases' latency histograms, in the HTML and the Markdown.
        let html = std::fs::read_to_string(reports.join("report.html")).unwrap();
        assert_has(&html, "Latency histogram, from intended send times");
        let md = std::fs::read_to_string(reports.join("summary.md")).unwrap();
        assert_has(&md, "**Latency histogram of ");
        assert_has(&md, "| latency ≤ | requests | share |  |");
        // The label and the target's log line appear, escaped, in the run report.
        let escaped = "&lt;script&gt;alert(1)&lt;/script&gt;";
        let head = &html[..html.find("<h2>").unwrap()];
        assert!(head.contains(escaped), "the label, escaped");
        let crashed = &html[html.find("<h2>crashing").unwrap()..];
        assert!(crashed.contains(escaped), "the target's log line, escaped");
        // Charts are titled in words and units, not by their series' raw names: the
        // per-second figures are the timeline's.
        assert!(
            html.contains("Throughput (req/s)") && html.contains("Latency of each second (ms)"),
            "the timeline's panels"
        );
        assert!(!html.contains(">p99 us<") && !html.contains(">completed per second<"));
        let html = std::fs::read_to_string(&compare_html).unwrap();
        assert!(html.contains(escaped));
        // The two versions over time, case by case: the soaks' timelines overlaid.
        assert_has(&html, "Over time: baseline (grey, dashed) and candidate");
        let overlays = timelines(&html);
        assert!(!overlays.is_empty());
        assert!(overlays
            .iter()
            .all(|d| d["baseline"].as_array().is_some_and(|s| !s.is_empty())
                && d["candidate"].as_array().is_some_and(|s| !s.is_empty())));

        // JUnit XML validates against the schema; the failed gate is a failure.
        let junit = reports.join("junit.xml");
        let xsd = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/junit.xsd");
        let check = Command::new("xmllint")
            .args(["--noout", "--schema", xsd])
            .arg(&junit)
            .output()
            .expect("xmllint is installed by `make test` (scripts/test-deps.sh)");
        assert!(
            check.status.success(),
            "{}",
            String::from_utf8_lossy(&check.stderr)
        );
        let xml = std::fs::read_to_string(&junit).unwrap();
        assert!(
            xml.contains("stability[crash=1000000] :: latency_p99 &lt; 1us"),
            "{xml}"
        );
        let gate = xml
            .split("<testcase")
            .find(|t| t.contains(":: latency_p99"))
            .unwrap();
        assert!(
            gate.contains("<failure") && gate.contains("type=\"gate\""),
            "{gate}"
        );
        assert!(xml.contains("type=\"crashed\""), "{xml}");
        // Markdown and CSV were written beside them.
        let md = std::fs::read_to_string(reports.join("summary.md")).unwrap();
        // A summary of cases, a column per key figure, headed by the suite's name.
        assert!(md.starts_with("## report-check run #"), "{md}");
        assert!(
            md.contains("| case | kind | verdict | throughput | p99 |"),
            "{md}"
        );
        let html = std::fs::read_to_string(reports.join("report.html")).unwrap();
        assert!(html.contains("<h2 id=\"summary\">Cases</h2>"));
        assert!(reports.join("csv/metrics.csv").exists());
        // The steps hold every figure a limiting factor is named from; a thread's demand
        // for a CPU (on one, or queued) is never less than its time on one.
        let steps =
            std::fs::read_to_string(reports.join("csv/01-peak_crash_1000000_-steps.csv")).unwrap();
        let mut rows = steps.lines().map(|l| l.split(',').collect::<Vec<_>>());
        let header = rows.next().unwrap();
        let col = |name: &str| header.iter().position(|h| *h == name).expect(name);
        let (busy, demand, queue) = (
            col("busiest_thread"),
            col("busiest_demand"),
            col("run_queue"),
        );
        for k in [
            "listen_overflows",
            "syn_drops",
            "retransmits",
            "stolen",
            "ok",
        ] {
            col(k);
        }
        let rows: Vec<Vec<&str>> = rows.collect();
        assert!(!rows.is_empty(), "{steps}");
        for r in &rows {
            let f = |i: usize| r[i].parse::<f64>().unwrap();
            assert!(f(demand) + 1e-9 >= f(busy) && f(queue) >= 0.0, "{steps}");
        }
        // The target's threads were read at every step: their states, long form.
        let states =
            std::fs::read_to_string(reports.join("csv/01-peak_crash_1000000_-thread-states.csv"))
                .unwrap();
        assert!(
            states.starts_with("offered,group,threads,state,thread_s_per_s\n")
                && states.contains(",tokio-rt-worker,"),
            "{states}"
        );
    });
}

#[test]
fn a_flame_graph_of_the_testbed_shows_its_hashing_and_a_missing_perf_is_explained() {
    let _bench = loaded();
    on_a_quiet_machine(|| {
        let s = Scratch::new();
        let suite = format!(
            r#"
[suite]
name = "profiled"
[target]
command = ["{tb}", "serve", "--listen", "127.0.0.1:{{{{port}}}}", "--workers", "1", "--cpu-cost", "300", "--profile", "{{{{profile}}}}"]
ready = "http://127.0.0.1:{{{{port}}}}/health"
[[test]]
name = "push"
kind = "bench"
profile = true
{PUSH}
rate = 200
duration = "2s"
"#,
            tb = testbed().display()
        );
        let path = s.path("profiled.toml");
        std::fs::write(&path, suite).unwrap();
        let run = |profile: &str, label: &str, perf: Option<&str>| {
            let mut cmd = strainline();
            cmd.args(["--store", &s.store(), "run", path.to_str().unwrap()])
                .args(["--var", &format!("profile={profile}"), "--label", label])
                .arg("--report")
                .arg(s.path(label))
                .current_dir(s.dir.path());
            if let Some(p) = perf {
                cmd.env("STRAINLINE_PERF", p);
            }
            let out = cmd.output().unwrap();
            assert_exit(&out, 0);
            std::fs::read_to_string(s.path(label).join("report.html")).unwrap()
        };
        // With perf: the flame graph is linked from the report and shows the SHA-256 hashing
        // that each push does (work::hash_units).
        let html = run("v1", "v1", None);
        let flame = std::fs::read_dir(s.path("v1"))
            .unwrap()
            .flatten()
            .find(|e| e.file_name().to_string_lossy().starts_with("report-flame-"))
            .expect("a flame graph beside the report")
            .path();
        let name = flame.file_name().unwrap().to_string_lossy().into_owned();
        assert!(html.contains(&format!("href=\"{name}\"")), "not linked");
        let svg = std::fs::read_to_string(&flame).unwrap();
        assert!(
            svg.contains("Sha256"),
            "the testbed's hashing is missing from the flame graph"
        );

        // Both versions profiled: a differential flame graph beside the comparison.
        run("v2", "v2", None);
        let c = s.path("compare.html");
        let out = s.run(&["compare", "v1", "v2", "--html", c.to_str().unwrap()]);
        assert!(
            matches!(out.status.code(), Some(0) | Some(1)),
            "{}",
            stderr(&out)
        );
        let diff = std::fs::read_to_string(s.path("compare-flame-diff.svg")).unwrap();
        assert!(diff.contains("Sha256"));
        assert!(std::fs::read_to_string(&c)
            .unwrap()
            .contains("compare-flame-diff.svg"));

        // Without perf: the run passes, and the report says why there is no flame graph.
        let html = run("v1", "noperf", Some("/nonexistent/perf"));
        assert!(
            html.contains("No flame graph: perf is not installed"),
            "the report does not explain"
        );
    });
}

/// Names and logs a hostile user controls: a test name that is a spreadsheet formula, a
/// Markdown image and link, an ANSI escape, and longer than a file name may be; a harness
/// that prints an OSC title sequence. The CSV keeps the formula as text, the Markdown
/// shows the brackets as text, the terminal gets no escape byte, and `--report` writes
/// its files.
#[test]
fn hostile_names_and_logs_are_escaped_in_every_format() {
    let s = Scratch::new();
    let long = "x".repeat(250);
    let name = format!(
        "=HYPERLINK(\\\"http://127.0.0.1/\\\") ![i](http://127.0.0.1/i.png) \\u001b[31mred {long}"
    );
    let suite = s.path("hostile.toml");
    std::fs::write(
        &suite,
        format!(
            "[[test]]\nname = \"{name}\"\nkind = \"harness\"\n\
             command = [\"sh\", \"-c\", \"printf '\\\\033]0;owned\\\\007ops=1\\\\n'; echo ops=2\"]\n"
        ),
    )
    .unwrap();
    let reports = s.path("reports");
    let out = s.run(&[
        "run",
        suite.to_str().unwrap(),
        "--report",
        reports.to_str().unwrap(),
    ]);
    assert_exit(&out, 0);
    let text = stdout(&out);
    assert!(
        !text.contains('\u{1b}'),
        "an escape reached the terminal: {text:?}"
    );
    assert!(text.contains("\\u{1b}[31mred"), "{text}");
    let md = std::fs::read_to_string(reports.join("summary.md")).unwrap();
    assert!(md.contains("\\!\\[i\\](http"), "{md}");
    assert!(!md.contains("![i]("), "{md}");
    let csv = std::fs::read_to_string(reports.join("csv/metrics.csv")).unwrap();
    assert!(csv.contains("\"'=HYPERLINK("), "{csv}");
    assert!(
        !csv.lines()
            .any(|l| l.starts_with('=') || l.starts_with("\"=")),
        "{csv}"
    );
    assert!(!csv.contains('\u{1b}'), "{csv}");
    // Reports are for sharing: written as the user's umask says; the store stays private.
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let umask = std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("Umask:"))
        .map(|m| u32::from_str_radix(m.trim(), 8).unwrap())
        .unwrap();
    for f in [
        "report.html",
        "summary.md",
        "junit.xml",
        "run.json",
        "csv/metrics.csv",
    ] {
        assert_eq!(mode(&reports.join(f)), 0o666 & !umask, "{f}");
    }
    for d in ["", "csv"] {
        assert_eq!(mode(&reports.join(d)), 0o777 & !umask, "{d}/");
    }
    assert_eq!(mode(&s.path("results.db")), 0o600);

    // A second run under a label that would drive the terminal (an OSC 8 hyperlink and
    // a screen clear), and a stored row naming a flame graph that is a script, a system
    // file and a path out of the report's folder.
    let evil = "v1\u{1b}]8;;http://127.0.0.1/evil\u{7}click\u{1b}]8;;\u{7}\u{1b}[2J";
    let out = s.run(&["run", suite.to_str().unwrap(), "--label", evil]);
    assert_exit(&out, 0);
    for link in [
        "javascript:alert(document.cookie)",
        "/etc/shadow",
        "../../etc/passwd",
    ] {
        let sql = format!(
            "update cases set summary = json_set(coalesce(summary, '{{}}'), '$.flamegraph', \
             json_object('file', '{link}', 'weight', 1)) where run_id = (select max(id) from runs)"
        );
        let py = Command::new("python3")
            .args(["-c", "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute(sys.argv[2]); c.commit()"])
            .args([&s.store(), &sql])
            .output()
            .unwrap();
        assert!(
            py.status.success(),
            "{}",
            String::from_utf8_lossy(&py.stderr)
        );
        let html = s.path("evil.html");
        let out = s.run(&["report", "latest", "--html", html.to_str().unwrap()]);
        assert_exit(&out, 0);
        let page = std::fs::read_to_string(&html).unwrap();
        assert!(
            !page.contains(&format!("href=\"{link}")),
            "{link} became a link"
        );
        assert_has(&page, "The run wrote its flame graph to");
    }
    for args in [
        &["runs"][..],
        &["show", "latest"][..],
        &["compare", "latest~1", "latest"][..],
        &["history", "--metric", "ops"][..],
    ] {
        let out = s.run(args);
        let text = stdout(&out);
        assert!(
            !text.contains('\u{1b}') && !text.contains('\u{7}'),
            "{args:?}: an escape reached the terminal: {text:?}"
        );
    }
    assert_has(&stdout(&s.run(&["runs"])), "v1\\u{1b}]8;;http");
    let csv = s.path("csv2");
    assert_exit(
        &s.run(&["report", "latest", "--csv", csv.to_str().unwrap()]),
        0,
    );
    for f in std::fs::read_dir(&csv).unwrap().flatten() {
        let text = std::fs::read_to_string(f.path()).unwrap();
        assert!(!text.contains('\u{1b}'), "{}: {text}", f.path().display());
    }
}

/// A suite whose target is the testbed under a `{{profile}}`, pushed at 200 a second.
const VERSIONED: &str = r#"
[suite]
name = "versions"

[target]
command = ["TB", "serve", "--listen", "127.0.0.1:{{port}}", "--workers", "1", "--cpu-cost", "100", "--profile", "{{profile}}"]
ready = "http://127.0.0.1:{{port}}/health"

[[test]]
name = "push"
kind = "bench"
url = "http://127.0.0.1:{{port}}/push/d1"
body = "x"
setup = [{ path = "/register", body = '{"id": "d1"}' }]
rate = 200
duration = "2s"
"#;

/// The value `show --json` reads of the first case's `metric` in run `id`.
fn stored(s: &Scratch, id: i64, metric: &str) -> f64 {
    let doc: serde_json::Value =
        serde_json::from_slice(&s.run(&["show", "--json", &id.to_string()]).stdout).unwrap();
    doc["cases"][0]["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == metric)
        .unwrap_or_else(|| panic!("no {metric} in run {id}"))["value"]
        .as_f64()
        .unwrap()
}

/// Known truth: the stored runs. A suite run under three labels — the testbed as v1,
/// as v2 (1.5× the CPU work per push), as v1 again — laid out as the IoT programme's
/// version table: every cell is the value its run stored, each share is the quotient of
/// two stored values, and v2's CPU per push reads above v1's (a push hashes 1 ms, so
/// the fixed cost of each request and of the process, ~0.3 ms a push here, cannot hide
/// v2's extra 0.5 ms: at 0.2 ms a push CI once read 1.11× for the 1.5×).
#[test]
fn the_version_table_lays_out_each_label_s_stored_figures_and_their_share_of_the_previous() {
    let s = Scratch::new();
    let suite = VERSIONED;
    let mut ids = Vec::new();
    for (label, profile) in [("0.6.0", "v1"), ("0.7.0", "v2"), ("0.8.0", "v1")] {
        let out = run_suite(
            &s,
            suite,
            &["--label", label, "--var", &format!("profile={profile}")],
        );
        assert_exit(&out, 0);
        let runs: serde_json::Value =
            serde_json::from_slice(&s.run(&["runs", "--json", "--label", label]).stdout).unwrap();
        ids.push(runs[0]["id"].as_i64().unwrap());
    }
    let csv = s.path("versions.csv");
    let out = s.run(&[
        "report",
        "versions",
        "--versions",
        "0.6.0,0.7.0,0.8.0",
        "--metrics",
        "throughput,cpu_per_op,peak_rss",
        "--csv",
        csv.to_str().unwrap(),
    ]);
    assert_exit(&out, 0);
    let text = std::fs::read_to_string(&csv).unwrap();
    let mut lines = text.lines();
    assert_eq!(
        lines.next().unwrap(),
        "host,case,metric,unit,0.6.0,0.7.0,0.7.0_of_previous,0.8.0,0.8.0_of_previous"
    );
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), 3, "{text}");
    for row in &rows {
        let metric = row[2];
        let cells: Vec<f64> = [4, 5, 7].iter().map(|&i| row[i].parse().unwrap()).collect();
        for (cell, id) in cells.iter().zip(&ids) {
            assert_eq!(*cell, stored(&s, *id, metric), "{metric} of run {id}");
        }
        let share: f64 = row[6].parse().unwrap();
        assert!((share - cells[1] / cells[0]).abs() < 1e-6, "{row:?}");
        let share: f64 = row[8].parse().unwrap();
        assert!((share - cells[2] / cells[1]).abs() < 1e-6, "{row:?}");
    }
    let cpu = rows.iter().find(|r| r[2] == "cpu_per_op").unwrap();
    let (v1, v2): (f64, f64) = (cpu[4].parse().unwrap(), cpu[5].parse().unwrap());
    assert!(v2 > 1.15 * v1, "v2's CPU per push {v2} against v1's {v1}");
    // The terminal and Markdown lay out the same cells in units.
    let out = s.run(&["report", "versions", "--versions", "0.6.0,0.7.0,0.8.0"]);
    assert_exit(&out, 0);
    assert_has(&stdout(&out), "Versions of versions: 0.6.0 → 0.7.0 → 0.8.0");
    assert_has(&stdout(&out), "not a verdict");
    assert_has(&stdout(&out), "% of previous");
    let md = s.path("versions.md");
    let out = s.run(&[
        "report",
        "versions",
        "--versions",
        "0.6.0,0.7.0,0.8.0",
        "--markdown",
        md.to_str().unwrap(),
    ]);
    assert_exit(&out, 0);
    let md = std::fs::read_to_string(&md).unwrap();
    assert_has(
        &md,
        "| host | case | metric | 0.6.0 | 0.7.0 | % of previous | 0.8.0 | % of previous |",
    );
    // A label no run has is named, with the fix.
    let out = s.run(&["report", "versions", "--versions", "0.6.0,0.9.0"]);
    assert_exit(&out, 2);
    assert_has(
        &stderr(&out),
        "no finished run of suite 'versions' is labelled '0.9.0'",
    );
}

/// Known truth: the stored runs. The suite run on two "hosts" — two UTS namespaces
/// named c1 and h3, as the IoT programme's machines — under one label, and once more on
/// c1 without it: the host table has a column per host, each cell the value its host's
/// labelled run stored, and the hosts' cores and memory in the heads.
#[test]
fn the_host_table_has_a_column_per_host_from_each_host_s_newest_run_of_the_label() {
    let s = Scratch::new();
    let path = s.path("suite.toml");
    std::fs::write(&path, with_testbed(VERSIONED)).unwrap();
    let run_on = |host: &str, label: Option<&str>| -> i64 {
        let mut args = vec![
            "--store".to_string(),
            s.store(),
            "run".into(),
            path.display().to_string(),
            "--var".into(),
            "profile=v1".into(),
        ];
        if let Some(l) = label {
            args.extend(["--label".into(), l.to_string()]);
        }
        let out = Command::new("unshare")
            .args([
                "--uts",
                "sh",
                "-c",
                &format!("hostname {host} && exec \"$0\" \"$@\""),
            ])
            .arg(env!("CARGO_BIN_EXE_strainline"))
            .args(&args)
            .current_dir(s.path(""))
            .output()
            .unwrap();
        assert_exit(&out, 0);
        let runs: serde_json::Value =
            serde_json::from_slice(&s.run(&["runs", "--json"]).stdout).unwrap();
        assert_eq!(runs[0]["host"], host, "{}", runs[0]);
        runs[0]["id"].as_i64().unwrap()
    };
    let c1 = run_on("c1", Some("0.8.0"));
    let h3 = run_on("h3", Some("0.8.0"));
    let _unlabelled = run_on("c1", None);
    let csv = s.path("hosts.csv");
    let out = s.run(&[
        "report",
        "versions",
        "--by-host",
        "--label",
        "0.8.0",
        "--metrics",
        "throughput,peak_rss",
        "--csv",
        csv.to_str().unwrap(),
    ]);
    assert_exit(&out, 0);
    let text = std::fs::read_to_string(&csv).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next().unwrap(), "case,metric,unit,c1,h3");
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), 2, "{text}");
    for row in &rows {
        assert_eq!(
            row[3].parse::<f64>().unwrap(),
            stored(&s, c1, row[1]),
            "{row:?}"
        );
        assert_eq!(
            row[4].parse::<f64>().unwrap(),
            stored(&s, h3, row[1]),
            "{row:?}"
        );
    }
    let out = s.run(&["report", "versions", "--by-host", "--label", "0.8.0"]);
    assert_exit(&out, 0);
    // The head's cores and memory are this machine's: /proc's count of CPUs and MemTotal.
    let cores = std::fs::read_to_string("/proc/cpuinfo")
        .unwrap()
        .lines()
        .filter(|l| l.starts_with("processor"))
        .count();
    let kib: f64 = std::fs::read_to_string("/proc/meminfo")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    let gib = kib / (1024.0 * 1024.0);
    assert_has(&stdout(&out), &format!("c1 ({cores} cores, {gib:.1} GiB)"));
    assert_has(&stdout(&out), "not the host's");
    assert_has(&stdout(&out), &format!("#{c1} on c1, #{h3} on h3"));
}

/// Every cell of a CSV strainline wrote, unquoted (RFC 4180), with its file and line.
fn csv_cells(text: &str) -> Vec<String> {
    let mut cells = vec![String::new()];
    let (mut quoted, mut chars) = (false, text.chars().peekable());
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                chars.next();
                cells.last_mut().unwrap().push('"');
            }
            ('"', _) => quoted = !quoted,
            (',' | '\n', false) => cells.push(String::new()),
            (c, _) => cells.last_mut().unwrap().push(c),
        }
    }
    cells
}

/// Labels, a host and a case name a hostile user chose — spreadsheet formulas, a tab,
/// an escape sequence, a bell, a bidi override — through every CSV export (a run's
/// `--csv`, `--versions`, `--by-host`): a cell starting with `=`, `+`, `-`, `@`, a tab or
/// a carriage return is a number or starts with `'`, and no control byte but the line
/// ends is written; `runs` and the versions table show them escaped.
#[test]
fn hostile_labels_hosts_and_names_are_text_in_every_csv_and_escaped_on_the_terminal() {
    let s = Scratch::new();
    let suite = s.path("suite.toml");
    std::fs::write(
        &suite,
        "[suite]\nname = \"hostile\"\n[[test]]\nname = \"-2+3\\u0007\\t@x\"\nkind = \"harness\"\n\
         command = [\"sh\", \"-c\", \"echo ops=2\"]\n",
    )
    .unwrap();
    let labels = [
        "=HYPERLINK(\"http://127.0.0.1/\")\u{1b}[2J",
        "+cmd|' /C calc'!A0\u{202e}",
        "\t=1+1\u{7}",
    ];
    let host = "@SUM(1)\u{202e}\t\u{1b}]0;x";
    for label in labels {
        let out = Command::new("unshare")
            .args([
                "--uts",
                "sh",
                "-c",
                "printf %s \"$H\" > /proc/sys/kernel/hostname && exec \"$0\" \"$@\"",
            ])
            .env("H", host)
            .arg(env!("CARGO_BIN_EXE_strainline"))
            .args(["--store", &s.store(), "run", suite.to_str().unwrap()])
            .args(["--label", label])
            .current_dir(s.path(""))
            .output()
            .unwrap();
        assert_exit(&out, 0);
    }
    let dir = s.path("csv");
    let (versions, hosts) = (s.path("versions.csv"), s.path("hosts.csv"));
    let joined = labels.join(",");
    let by_version = [
        "report",
        "hostile",
        "--versions",
        &joined,
        "--metrics",
        "ops",
    ];
    let by_host = [
        "report",
        "hostile",
        "--by-host",
        "--label",
        labels[0],
        "--metrics",
        "ops",
    ];
    assert_exit(
        &s.run(&["report", "latest", "--csv", dir.to_str().unwrap()]),
        0,
    );
    for (table, csv) in [(&by_version[..], &versions), (&by_host[..], &hosts)] {
        let mut args = table.to_vec();
        args.extend(["--csv", csv.to_str().unwrap()]);
        assert_exit(&s.run(&args), 0);
    }
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|f| f.unwrap().path())
        .collect();
    files.extend([versions, hosts]);
    let mut seen = String::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        assert!(
            !text
                .chars()
                .any(|c| c != '\n' && (c.is_control() || c == '\u{202e}')),
            "a control character in {}: {text:?}",
            f.display()
        );
        for cell in csv_cells(&text) {
            assert!(
                !cell.starts_with(['=', '+', '-', '@', '\t', '\r']) || cell.parse::<f64>().is_ok(),
                "{}: {cell:?} in {text:?}",
                f.display()
            );
        }
        seen += &text;
    }
    // The names are there, as text: each hostile one was written, prefixed.
    for needle in [
        "'=HYPERLINK(",
        "'+cmd|",
        "'\\u{9}=1+1",
        "'@SUM(1)\\u{202e}",
        "'-2+3\\u{7}",
    ] {
        assert!(seen.contains(needle), "{needle} in {seen}");
    }
    for args in [&["runs"][..], &by_version[..], &by_host[..]] {
        let out = s.run(args);
        assert_exit(&out, 0);
        let text = stdout(&out);
        assert!(
            !text
                .chars()
                .any(|c| (c.is_control() && c != '\n') || c == '\u{202e}'),
            "{args:?}: {text:?}"
        );
    }
    let runs = stdout(&s.run(&["runs"]));
    assert_has(&runs, "\\u{9}=1+1\\u{7}");
    assert_has(&runs, "+cmd|' /C calc'!A0\\u{202e}");
}

/// The timeline data a report embeds, one document per load case.
fn timelines(html: &str) -> Vec<serde_json::Value> {
    let open = "<script type=\"application/json\" class=\"timeline-data\">";
    html.split(open)
        .skip(1)
        .map(|rest| serde_json::from_str(&rest[..rest.find("</script>").unwrap()]).unwrap())
        .collect()
}

/// Issue 55's acceptance: a 60 s flow whose clients double at 30 s against a target whose
/// pushes take 400 ms from 40 s on. The report alone answers "when did p95 cross 300 ms,
/// and how many users were on then?" from its embedded data: the users step in the
/// second from 30 s, the p95 rise in the second from 40 s, with 10 users on; and the
/// page is one file that opens with the network off, running only its own script.
#[test]
fn a_report_s_timeline_shows_when_users_stepped_and_p95_rose() {
    let _l = loaded();
    let s = Scratch::new();
    std::fs::write(
        s.path("flow.toml"),
        r#"stages = [{ to = 5, over = "1s" }, { hold = "29s" }, { to = 10, over = "1s" }, { hold = "29s" }]

[[step]]
name = "register"
once = true
method = "POST"
path = "/register"
body = '{"id": "dev0"}'

[[step]]
name = "push"
method = "POST"
path = "/push/dev0"
body = "x"
weight = 1
pace = "500ms"
"#,
    )
    .unwrap();
    let reports = s.path("reports");
    let out = run_suite(
        &s,
        r#"
[suite]
name = "over-time"

[target]
command = ["TB", "serve", "--listen", "127.0.0.1:{{port}}", "--delay", "400ms", "--delay-after", "40s"]
ready = "http://127.0.0.1:{{port}}/health"

[[test]]
name = "flow"
kind = "bench"
url = "http://127.0.0.1:{{port}}"
scenario = "flow.toml"
duration = "60s"
"#,
        &["--report", reports.to_str().unwrap()],
    );
    assert_exit(&out, 0);
    let file = reports.join("report.html");
    let html = std::fs::read_to_string(&file).unwrap();
    let data = timelines(&html);
    // The case's timeline, then each of its two steps' own.
    assert_eq!(data.len(), 3, "the case's timeline and its steps'");
    let push = &data[2]["seconds"].as_array().unwrap();
    let slow = push
        .iter()
        .find(|p| p["p95"].as_f64().unwrap() >= 300.0)
        .unwrap();
    assert!(
        (40.5..=42.0).contains(&slow["t"].as_f64().unwrap()),
        "{slow}"
    );
    assert!(html.contains("<h4>push</h4>"));
    let seconds = data[0]["seconds"].as_array().unwrap();
    assert!(seconds.len() >= 59, "{} seconds", seconds.len());
    let users = |p: &serde_json::Value| p["users"].as_f64().unwrap();
    let t = |p: &serde_json::Value| p["t"].as_f64().unwrap();
    // The users' step: 5 until 30 s, 10 from the second ending at 31 s.
    let step = seconds.iter().find(|p| users(p) >= 10.0).unwrap();
    assert!(
        (30.5..=31.5).contains(&t(step)),
        "users reached 10 at {}",
        t(step)
    );
    assert!(seconds
        .iter()
        .filter(|p| t(p) <= 30.0 && t(p) >= 2.0)
        .all(|p| users(p) == 5.0));
    // The p95's rise: under 300 ms until 40 s (pushes answered at once), then 400 ms.
    let crossed = seconds
        .iter()
        .find(|p| p["p95"].as_f64().unwrap() >= 300.0)
        .unwrap();
    assert!(
        (40.5..=42.0).contains(&t(crossed)),
        "p95 crossed 300 ms at {}",
        t(crossed)
    );
    assert_eq!(users(crossed), 10.0, "users on when p95 crossed 300 ms");
    // Well under the 400 ms before 40 s (a busy machine may stall a second a little).
    let early: Vec<f64> = (seconds.iter().filter(|p| t(p) < 40.0))
        .map(|p| p["p95"].as_f64().unwrap())
        .collect();
    assert!(early.iter().all(|v| *v < 200.0), "{early:?}");
    let late: Vec<f64> = seconds
        .iter()
        .filter(|p| t(p) >= 43.0 && t(p) <= 59.0)
        .map(|p| p["p95"].as_f64().unwrap())
        .collect();
    assert!(late.iter().all(|v| (390.0..=600.0).contains(v)), "{late:?}");
    // Throughput doubles with the users: 5 clients a push each 500 ms, then 10.
    let sent = |a: f64, b: f64| {
        let v: Vec<f64> = seconds
            .iter()
            .filter(|p| t(p) > a && t(p) <= b)
            .map(|p| p["sent"].as_f64().unwrap())
            .collect();
        v.iter().sum::<f64>() / v.len() as f64
    };
    let (before, after) = (sent(5.0, 29.0), sent(32.0, 39.0));
    assert!(
        (9.0..=11.0).contains(&before) && (18.0..=22.0).contains(&after),
        "{before} {after}"
    );
    // The same seconds for other tools: a CSV row each, and each step's in long form.
    let csv = std::fs::read_to_string(reports.join("csv/01-flow-timeline.csv")).unwrap();
    assert!(csv.starts_with("t,users,sent,responses,errors,min_ms,p50_ms"));
    assert_eq!(csv.lines().count(), seconds.len() + 1);
    let steps = std::fs::read_to_string(reports.join("csv/01-flow-steps-timeline.csv")).unwrap();
    assert!(steps.lines().any(|l| l.starts_with("push,50,")), "{steps}");
    // The target's CPU and memory on the same clock, beneath.
    assert!(data[0]["target"].as_array().unwrap().len() >= 50);
    // What the over-time data costs the store a minute: each second's histogram, and
    // its series' rows (name, t and value, with SQLite's ~32 bytes a row around them).
    let db = rusqlite::Connection::open(s.store()).unwrap();
    let one = |sql: &str| -> i64 { db.query_row(sql, [], |r| r.get(0)).unwrap() };
    let histograms =
        one("SELECT sum(length(data)) FROM histograms WHERE name = 'latency_us/second'");
    let rows = one(
        "SELECT sum(length(name) + 32) FROM series WHERE name IN ('completed_per_second', \
         'errors_per_second', 'p99_us', 'sent_per_second', 'users', 'load_start') \
         OR name LIKE 'errors_per_second/%'",
    );
    let per_minute = (histograms + rows) as f64 / (seconds.len() as f64 / 60.0);
    eprintln!("over-time data: {histograms} B of histograms, {rows} B of series rows: {per_minute:.0} B a minute");
    assert!(per_minute <= 64.0 * 1024.0, "{per_minute} B a minute");
    // One file that opens offline: nothing fetched, and only its own script runs.
    for attr in ["src=\"http", "href=\"http", "url(http", "@import"] {
        assert!(!html.contains(attr), "{attr}");
    }
    let url = format!("file://{}", file.display());
    // A profile of its own: another Chromium on the same one would take the page.
    let profile = format!("--user-data-dir={}", s.path("chromium").display());
    let opened = chromium(&[
        &profile,
        "--proxy-server=127.0.0.1:9",
        "--enable-logging=stderr",
        "--v=0",
        "--dump-dom",
        &url,
    ]);
    let dom = String::from_utf8_lossy(&opened.stdout);
    assert!(
        dom.contains("class=\"timeline-tip\""),
        "the script ran: its hover box is there"
    );
    assert!(!String::from_utf8_lossy(&opened.stderr).contains("Refused to"));
}
