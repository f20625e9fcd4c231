//! Layout of every page in Chromium at 1400 and 800 px wide: the HTML report, the
//! comparison report and `serve`'s runs list, run, history and compare pages of real
//! runs (a ramp, a soak with its leak chart, a bench) show no overlapping texts, no SVG
//! text cut by its chart, no horizontal scroll. `layout_check.py` checks them through
//! Playwright and leaves a full-page screenshot of each under
//! `$CARGO_TARGET_TMPDIR/pages/`.

use crate::common::*;

/// A ramp, a soak judged for leaks and a bench of the testbed, each a few seconds; the
/// bench's long name and matrix make long titles, labels and table cells.
fn suite() -> String {
    with_testbed(&format!(
        r#"
[suite]
name = "layout"

[target]
command = ["TB", "serve", "--listen", "127.0.0.1:{{{{port}}}}", "--workers", "1", "--cpu-cost", "200"]
ready = "http://127.0.0.1:{{{{port}}}}/health"

[[test]]
name = "peak"
kind = "ramp"
{PUSH}
start = 200
step = 200
step_duration = "500ms"
max_steps = 6

[[test]]
name = "stability"
kind = "soak"
{PUSH}
rate = 200
duration = "3s"
leak_budget = "10MiB"
horizon = "24h"

[[test]]
name = "push every notification through the front door of the device registry"
matrix = {{ workers = [1], batch = ["small-and-frequent"] }}
kind = "bench"
{PUSH}
rate = 200
duration = "1s"
"#
    ))
}

#[test]
fn every_page_lays_out_without_overlaps_cuts_or_horizontal_scroll() {
    let _bench = loaded();
    let s = Scratch::new();
    let path = s.path("suite.toml");
    std::fs::write(&path, suite()).unwrap();
    let reports = s.path("reports");
    for label in ["v1", "v2"] {
        let out = s.run(&[
            "run",
            path.to_str().unwrap(),
            "--label",
            label,
            "--report",
            reports.to_str().unwrap(),
        ]);
        // Passed, failed or made invalid by a busy machine (its generator late): the
        // pages show it all the same.
        assert!(
            matches!(out.status.code(), Some(0) | Some(1) | Some(3)),
            "{}{}",
            stdout(&out),
            stderr(&out)
        );
    }
    let compare_html = s.path("compare.html");
    let cmp = s.run(&[
        "compare",
        "v1",
        "v2",
        "--html",
        compare_html.to_str().unwrap(),
    ]);
    assert!(
        matches!(cmp.status.code(), Some(0) | Some(1)),
        "{}",
        stderr(&cmp)
    );
    let runs: serde_json::Value =
        serde_json::from_slice(&s.run(&["runs", "--json", "--limit", "1"]).stdout).unwrap();
    let newest = runs[0]["id"].as_i64().unwrap();

    let (_server, base) = crate::serve::serve(&s, &[]);
    let pages = [
        (
            "report",
            format!("file://{}", reports.join("report.html").display()),
        ),
        (
            "compare-report",
            format!("file://{}", compare_html.display()),
        ),
        ("runs", format!("{base}/runs")),
        ("run", format!("{base}/runs/{newest}")),
        ("history", format!("{base}/history?suite=layout")),
        (
            "compare",
            format!("{base}/compare?baseline=v1&candidate=v2"),
        ),
    ];
    let out_dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("pages");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/e2e/layout_check.py");
    let out = std::process::Command::new("python3")
        .arg(script)
        .arg(&out_dir)
        .args(pages.iter().map(|(name, url)| format!("{name}={url}")))
        .output()
        .expect("python3 with Playwright (scripts/test-deps.sh installs it)");
    // The screenshots' paths, for whoever looks at them.
    println!("{}", stdout(&out));
    assert!(
        out.status.success(),
        "the pages' layout:\n{}{}",
        stdout(&out),
        stderr(&out)
    );
}
