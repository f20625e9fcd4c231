//! `strainline import`: files the real tools wrote (fixtures, with the commands that
//! made them in their README) become runs that `compare` judges — an A/A pair of each
//! tool is not flagged, a deliberately slower build is.

use std::path::PathBuf;

use crate::common::*;

fn fixture(rel: &str) -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/import"
    ))
    .join(rel)
}

/// The files of one version of one tool's fixture.
fn files(tool: &str, version: &str) -> Vec<String> {
    let p = match tool {
        "criterion" => vec![fixture(&format!("criterion/{version}"))],
        "junit" => (1..=8)
            .map(|i| fixture(&format!("junit/{version}/run{i}.xml")))
            .collect(),
        "go" => vec![fixture(&format!("go/{version}.txt"))],
        _ => vec![fixture(&format!("{tool}/{version}.json"))],
    };
    p.iter().map(|p| p.display().to_string()).collect()
}

#[test]
fn every_tool_s_results_compare_a_a_unchanged_and_a_slower_build_regressed() {
    let s = Scratch::new();
    for (tool, format, case, metric) in [
        ("hyperfine", "hyperfine", "./work.sh", "time"),
        (
            "google-benchmark",
            "google-benchmark",
            "BM_Sum/4096",
            "cpu_time",
        ),
        ("criterion", "criterion", "sum 10000", "time"),
        ("go", "go", "BenchmarkSum", "time"),
        (
            "pytest-benchmark",
            "pytest-benchmark",
            "test_sum.py::test_sum",
            "time",
        ),
        ("junit", "junit", "test_work.test_sort", "time"),
        (
            "jmh",
            "jmh",
            "org.example.SumBenchmark.sum(size=4096)",
            "time",
        ),
        (
            "benchmarkdotnet",
            "benchmarkdotnet",
            "JobServer.Benchmarks.JobBenchmarks.RunJob(Jobs: 100)",
            "allocated",
        ),
    ] {
        for (version, how) in [("fast-a", "auto"), ("fast-b", format), ("slow", "auto")] {
            let label = format!("{tool}-{version}");
            let mut args = vec!["import", how];
            let fs = files(tool, version);
            args.extend(fs.iter().map(String::as_str));
            args.extend(["--label", &label, "--suite", tool]);
            let out = s.run(&args);
            assert_exit(&out, 0);
            assert_has(&stdout(&out), case);
        }
        let json = s.path("cmp.json");
        let compare = |b: &str| {
            s.run(&[
                "compare",
                &format!("{tool}-fast-a"),
                &format!("{tool}-{b}"),
                "--json",
                json.to_str().unwrap(),
            ])
        };
        let out = compare("fast-b");
        assert_exit(&out, 0);
        let out = compare("slow");
        assert_exit(&out, 1);
        let doc: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let row = doc["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["case"] == case && r["metric"] == metric)
            .unwrap_or_else(|| panic!("{tool}: no {case} {metric} in {:#}", doc["rows"]));
        assert_eq!(row["verdict"], "regressed", "{tool}: {row:#}");
    }
}

#[test]
fn samples_units_and_names_are_the_tools() {
    let s = Scratch::new();
    // Google Benchmark: ten repetitions, real and CPU time in ns, items per second.
    let out = s.run(&["import", "auto", &files("google-benchmark", "fast-a")[0]]);
    assert_exit(&out, 0);
    let text = stdout(&out);
    assert_has(&text, "BM_Sum/4096       10");
    assert_has(&text, "items_per_second");
    // go: eight -count lines, the -2 suffix dropped, B/op and allocs/op kept.
    let out = s.run(&["import", "go", &files("go", "fast-a")[0]]);
    assert_exit(&out, 0);
    let text = stdout(&out);
    assert_has(&text, "BenchmarkSum          8");
    assert_has(&text, "allocations 0");
    assert!(!text.contains("BenchmarkSum-2"), "{text}");
    // pytest-benchmark keeps every round (3,000): folded into 50 batch means.
    let out = s.run(&["import", "pytest", &files("pytest-benchmark", "fast-a")[0]]);
    assert_has(&stdout(&out), "test_sum.py::test_sum       50");
    // The figures match the tool's own: the printed median of hyperfine's times is the
    // median hyperfine itself reported, in ns.
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&files("hyperfine", "fast-a")[0]).unwrap())
            .unwrap();
    let theirs = doc["results"][0]["median"].as_f64().unwrap();
    let out = s.run(&[
        "import",
        "hyperfine",
        &files("hyperfine", "fast-a")[0],
        "--label",
        "h",
    ]);
    assert_exit(&out, 0);
    assert_has(&stdout(&out), &format!("time {:.4} ms", theirs * 1e3));
}

#[test]
fn a_file_in_another_format_or_a_newer_schema_is_refused_naming_what_was_expected() {
    let s = Scratch::new();
    let hyperfine = &files("hyperfine", "fast-a")[0];
    let out = s.run(&["import", "jmh", hyperfine]);
    assert_exit(&out, 2);
    let err = stderr(&out);
    assert_has(&err, "fast-a.json: not jmh output");
    assert_has(&err, "JMH -rf json");
    // Google Benchmark's schema version 2 does not exist yet: refused, not misread.
    let mut doc: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(&files("google-benchmark", "fast-a")[0]).unwrap(),
    )
    .unwrap();
    doc["context"]["json_schema_version"] = 2.into();
    let newer = s.path("newer.json");
    std::fs::write(&newer, doc.to_string()).unwrap();
    let out = s.run(&["import", "auto", newer.to_str().unwrap()]);
    assert_exit(&out, 2);
    assert_has(
        &stderr(&out),
        "a newer schema: json_schema_version 2; strainline reads 1",
    );
    // Not a benchmark file at all: every format named.
    let toml = s.path("suite.toml");
    std::fs::write(&toml, "[suite]\nname = \"x\"\n").unwrap();
    let out = s.run(&["import", "auto", toml.to_str().unwrap()]);
    assert_exit(&out, 2);
    for f in [
        "hyperfine",
        "criterion",
        "google-benchmark",
        "jmh",
        "go",
        "pytest-benchmark",
        "benchmarkdotnet",
        "junit",
    ] {
        assert_has(&stderr(&out), f);
    }
    // Hostile XML: an unclosed element is an error with its place, not a panic.
    let bad = s.path("bad.xml");
    std::fs::write(
        &bad,
        "<testsuite><testcase name=\"a\" time=\"x1\"/></testsuite>",
    )
    .unwrap();
    let out = s.run(&["import", "junit", bad.to_str().unwrap()]);
    assert_exit(&out, 2);
    assert_has(&stderr(&out), "time 'x1' is not a number of seconds");
    // Values that are no measurement: refused by name before anything is stored (a NaN
    // failed in the store and left an abandoned run; -1, inf and 1e308 were stored).
    for (time, shown) in [
        ("NaN", "NaN"),
        ("-1", "-1000000000"),
        ("inf", "inf"),
        ("1e308", "inf"),
    ] {
        let odd = s.path("odd.xml");
        std::fs::write(
            &odd,
            format!(
                "<testsuite><testcase classname=\"c\" name=\"t\" time=\"{time}\"/></testsuite>"
            ),
        )
        .unwrap();
        let out = s.run(&["import", "junit", odd.to_str().unwrap()]);
        assert_exit(&out, 2);
        assert_has(
            &stderr(&out),
            &format!("benchmark 'c.t': time = {shown} is not a measurement"),
        );
    }
    // A device that never ends is cut at the size no tool writes.
    let out = s.run(&["import", "auto", "/dev/zero"]);
    assert_exit(&out, 2);
    assert_has(&stderr(&out), "/dev/zero: larger than 64 MiB");
    // More benchmarks than one import holds: refused, naming the limit.
    let many = s.path("many.txt");
    let lines: String = (0..10_001)
        .map(|i| format!("BenchmarkB{i}-2  1000  {i} ns/op\n"))
        .collect();
    std::fs::write(&many, format!("pkg: p\n{lines}PASS\n")).unwrap();
    let out = s.run(&["import", "go", many.to_str().unwrap()]);
    assert_exit(&out, 2);
    assert_has(&stderr(&out), "10001 benchmarks");
    // Nothing was stored by the refused imports.
    let out = s.run(&["runs"]);
    assert!(!stdout(&out).contains("import"), "{}", stdout(&out));
    // hyperfine names each result by its command: ./old/app and ./new/app pair with
    // nothing, and the error says how to name them alike.
    let doc = |cmd: &str| {
        serde_json::json!({"results": [{"command": cmd, "mean": 0.01, "stddev": 0.0,
            "median": 0.01, "user": 0.0, "system": 0.0, "min": 0.01, "max": 0.01,
            "times": [0.01, 0.011, 0.0105], "exit_codes": [0, 0, 0]}]})
        .to_string()
    };
    for (label, cmd) in [("old", "./old/app"), ("new", "./new/app")] {
        let f = s.path(&format!("{label}.json"));
        std::fs::write(&f, doc(cmd)).unwrap();
        assert_exit(
            &s.run(&["import", "hyperfine", f.to_str().unwrap(), "--label", label]),
            0,
        );
    }
    let out = s.run(&["compare", "old", "new"]);
    assert_exit(&out, 2);
    assert_has(&stderr(&out), "hyperfine -n NAME");
}

#[test]
fn the_baseline_is_the_newest_run_of_the_label_or_of_the_merge_base_commit() {
    let s = Scratch::new();
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
            .args(args)
            .current_dir(s.dir.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    git(&["init", "-q", "-b", "main"]);
    git(&["commit", "-q", "--allow-empty", "-m", "main"]);
    let import = |version: &str, extra: &[&str]| {
        let fs = files("google-benchmark", version);
        let mut args = vec!["import", "google-benchmark", &fs[0], "--suite", "gb"];
        args.extend_from_slice(extra);
        let out = s.run(&args);
        assert_exit(&out, 0);
    };
    // On main, unlabelled (its commit is recorded); then a pull request's branch.
    import("fast-a", &[]);
    git(&["checkout", "-q", "-b", "pr"]);
    git(&["commit", "-q", "--allow-empty", "-m", "pr"]);
    import("slow", &["--label", "pr"]);
    let md = s.path("comment.md");
    let out = s.run(&[
        "compare",
        "--baseline",
        "main",
        "pr",
        "--markdown",
        md.to_str().unwrap(),
    ]);
    assert_exit(&out, 1);
    // No run is labelled main: the merge-base commit's run (#1) is the baseline.
    assert_has(&stdout(&out), "merge-base");
    assert_has(&stdout(&out), "run #1");
    let text = std::fs::read_to_string(&md).unwrap();
    assert!(text.starts_with("### strainline: REGRESSION"), "{text}");
    assert_has(&text, "**REGRESSED**");
    // A run labelled main (newer, A/A) is preferred to the merge-base; without a
    // candidate, the newest run is judged.
    import("fast-b", &["--label", "main"]);
    import("fast-a", &["--label", "pr"]);
    let out = s.run(&["compare", "--baseline", "main"]);
    assert_exit(&out, 0);
    assert_has(&stdout(&out), "main (run #3)");
    // Another suite's runs are never the baseline.
    let out = s.run(&[
        "import",
        "hyperfine",
        &files("hyperfine", "fast-a")[0],
        "--label",
        "h",
    ]);
    assert_exit(&out, 0);
    let out = s.run(&["compare", "--baseline", "nightly", "h"]);
    assert_exit(&out, 2);
    assert_has(
        &stderr(&out),
        "no baseline 'nightly': no run labelled 'nightly' of suite 'hyperfine'",
    );
}
