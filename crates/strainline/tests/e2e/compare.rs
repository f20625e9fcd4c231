//! `strainline compare` and `strainline history` against real runs of the testbed:
//! A/A runs of one version flag nothing on this noisy machine, the v2 profile (1.5× the
//! CPU work per push) is flagged every time, a CPU-bound ceiling drop is flagged, and
//! a change injected into a history of 30 runs is found at the right run.

use crate::common::*;

fn ab_suite(kind_body: &str) -> String {
    format!(
        r#"
[suite]
name = "ab"

[target]
command = ["taskset", "-c", "CPU", "TB", "serve", "--listen", "127.0.0.1:{{{{port}}}}", "--workers", "1", "--cpu-cost", "{{{{cost}}}}", "--profile", "{{{{profile}}}}"]
ready = "http://127.0.0.1:{{{{port}}}}/health"

[[test]]
name = "push"
{PUSH}
{kind_body}
"#
    )
}

/// Runs the suite for one version; returns the run id.
fn run_version(s: &Scratch, suite: &str, profile: &str, cost: u32, label: &str) -> i64 {
    let path = s.path("ab.toml");
    let suite = with_testbed(suite).replace("\"CPU\"", &format!("\"{}\"", one_cpu()));
    std::fs::write(&path, suite).unwrap();
    let args = [
        "run",
        path.to_str().unwrap(),
        "--label",
        label,
        "--var",
        &format!("profile={profile}"),
        "--var",
        &format!("cost={cost}"),
    ];
    let out = s.run(&args);
    assert_exit(&out, 0);
    let runs: serde_json::Value =
        serde_json::from_slice(&s.run(&["runs", "--json", "--label", label]).stdout).unwrap();
    runs[0]["id"].as_i64().unwrap()
}

/// Compares two runs; returns the exit code, the terminal text and the JSON document.
fn compare(s: &Scratch, a: i64, b: i64, extra: &[&str]) -> (i32, String, serde_json::Value) {
    compare_with(s, &a.to_string(), &b.to_string(), extra)
}

/// Compares two labels (every run with each, pooled).
fn compare_keys(s: &Scratch, a: &str, b: &str) -> (i32, String, serde_json::Value) {
    compare_with(s, a, b, &[])
}

fn compare_with(s: &Scratch, a: &str, b: &str, extra: &[&str]) -> (i32, String, serde_json::Value) {
    let json = s.path("compare.json");
    let _ = std::fs::remove_file(&json);
    let mut args = vec!["compare", a, b, "--json", json.to_str().unwrap()];
    args.extend_from_slice(extra);
    let out = s.run(&args);
    let doc = std::fs::read_to_string(&json)
        .map(|t| serde_json::from_str(&t).unwrap())
        .unwrap_or(serde_json::Value::Null);
    (
        out.status.code().unwrap(),
        format!("{}{}", stdout(&out), stderr(&out)),
        doc,
    )
}

fn row<'a>(doc: &'a serde_json::Value, metric: &str) -> &'a serde_json::Value {
    doc["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["metric"] == metric)
        .unwrap_or_else(|| panic!("no row {metric}"))
}

#[test]
fn a_a_runs_flag_nothing_and_the_v2_profile_is_flagged_in_each_of_three_trials() {
    let _bench = measuring();
    on_a_quiet_machine(|| {
        let s = Scratch::new();
        let suite = ab_suite("kind = \"bench\"\nrepeat = 6\nrate = 200\nduration = \"1s\"");
        // Interleaved (v1 v2 v1 v2 v1 v2 v1 v1), so that each A/B pair ran side by side:
        // the CPU a push costs drifts ±10% within a minute on this VM, and a block of
        // v1 runs then a block of v2 runs compared the drift too (CI saw 1.74× for 1.5×).
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for i in 0..5 {
            a.push(run_version(&s, &suite, "v1", 300, &format!("a{i}")));
            if i < 3 {
                b.push(run_version(&s, &suite, "v2", 300, &format!("b{i}")));
            }
        }
        // A/A: every pair of the five runs of one version.
        for i in 0..a.len() {
            for j in i + 1..a.len() {
                let (code, text, doc) = compare(&s, a[i], a[j], &[]);
                assert_eq!(
                    code, 0,
                    "A/A #{} vs #{} flagged a regression:\n{text}",
                    a[i], a[j]
                );
                assert_eq!(doc["verdict"], "ok");
            }
        }
        // A/B: v2 costs 1.5× the hashing per push.
        for (x, y) in a.iter().zip(&b) {
            let (code, text, doc) = compare(&s, *x, *y, &[]);
            assert_eq!(code, 1, "{text}");
            let cpu = row(&doc, "cpu_per_op");
            assert_eq!(cpu["verdict"], "regressed", "{text}");
            let ratio = cpu["ratio"].as_f64().unwrap();
            // At most 1.5: the hashing is 1.5x, the rest of a push is unchanged. Pinned,
            // three trials read 1.445-1.451 here; regressed already says beyond 1.2.
            assert!(
                (1.25..=1.7).contains(&ratio),
                "cpu_per_op at {ratio:.2}× of v1\n{text}"
            );
            assert!(
                text.contains("REGRESSED") && text.contains("% of prev"),
                "{text}"
            );
            // Throughput at a fixed rate below capacity is the offered rate: unchanged.
            assert_eq!(row(&doc, "throughput")["verdict"], "unchanged", "{text}");
        }
    });
}

#[test]
fn a_cpu_bound_ceiling_that_drops_is_flagged() {
    let _bench = measuring();
    on_a_quiet_machine(|| {
        let s = Scratch::new();
        let suite = ab_suite(
            "kind = \"ramp\"\nrepeat = 2\nstart = 200\nstep = 100\nstep_duration = \"700ms\"\nmax_steps = 20",
        );
        // Interleaved, v1 v2 v1 v2 v1 v2, two ramps a run, as a performance engineer
        // would on a machine whose speed drifts (the CPU a push costs moves ±10% within
        // seconds here): six ramps a side, each label pooling its three runs. Run one
        // version's six ramps after the other's and the drift between the blocks is
        // compared instead (CI saw the drop missed that way).
        for _ in 0..3 {
            run_version(&s, &suite, "v1", 250, "ramp-v1");
            run_version(&s, &suite, "v2", 250, "ramp-v2");
        }
        let (code, text, doc) = compare_keys(&s, "ramp-v1", "ramp-v2");
        assert_eq!(code, 1, "{text}");
        // The drop is flagged in the ceiling or in the most throughput (each is a
        // regression of the same capacity; with six ramps a side on a shared VM, one of
        // the two can miss significance — seen: ceiling p 0.029, throughput p 0.052).
        let flagged = ["ceiling", "max_throughput"].iter().any(|m| {
            let r = row(&doc, m);
            r["verdict"] == "regressed" && r["ratio"].as_f64().unwrap() < 0.85
        });
        assert!(flagged, "{text}");
    });
}

#[test]
fn too_few_repetitions_are_inconclusive_and_other_hosts_are_refused() {
    let _bench = loaded();
    on_a_quiet_machine(|| {
        let s = Scratch::new();
        let suite = ab_suite("kind = \"bench\"\nrepeat = 2\nrate = 100\nduration = \"500ms\"");
        let a = run_version(&s, &suite, "v1", 50, "few-a");
        let b = run_version(&s, &suite, "v2", 400, "few-b");
        let (code, text, doc) =
            compare(&s, a, b, &["--markdown", s.path("c.md").to_str().unwrap()]);
        assert_eq!(code, 0, "{text}");
        let cpu = row(&doc, "cpu_per_op");
        assert_eq!(cpu["verdict"], "inconclusive", "{text}");
        assert!(
            cpu["why"].as_str().unwrap().contains("too few repetitions"),
            "{text}"
        );
        let md = std::fs::read_to_string(s.path("c.md")).unwrap();
        // The verdict first, then only what changed (here the inconclusive CPU).
        assert!(md.starts_with("### strainline: no regression"), "{md}");
        assert!(
            md.contains("| case | metric | baseline | candidate | change |"),
            "{md}"
        );

        // Unknown names and no common case: exit 2, nothing to compare.
        let (code, text, _) = compare(&s, a, 999, &[]);
        assert_eq!(code, 2);
        assert!(text.contains("nothing to compare"), "{text}");
        let mon = s.run(&["monitor", "-q", "--label", "mon", "--", "true"]);
        assert!(mon.status.success());
        let out = s.run(&["compare", "few-a", "mon"]);
        assert_eq!(out.status.code(), Some(2));
        assert_has(&stderr(&out), "no case ran in both");

        // The same run as if made on another machine: refused unless allowed.
        let db = rusqlite::Connection::open(s.store()).unwrap();
        db.execute_batch(&format!(
        "INSERT INTO hosts (fingerprint, hostname, cpu_model, cores, memory_bytes, kernel, os)
         VALUES ('other-cpu|64|512GiB', 'elsewhere', 'Other CPU', 64, 1, 'k', 'linux');
         UPDATE runs SET host_id = (SELECT id FROM hosts WHERE hostname = 'elsewhere') WHERE id = {b};"
    ))
    .unwrap();
        let (code, text, _) = compare(&s, a, b, &[]);
        assert_eq!(code, 2, "{text}");
        assert!(
            text.contains("different hosts") && text.contains("--allow-env-mismatch"),
            "{text}"
        );
        let (code, text, doc) = compare(&s, a, b, &["--allow-env-mismatch"]);
        assert_eq!(code, 0, "{text}");
        assert!(text.starts_with("ENVIRONMENT MISMATCH"), "{text}");
        assert!(doc["environment_mismatch"]
            .as_str()
            .unwrap()
            .contains("elsewhere"));
    });
}

/// Stores 30 monitor runs of a program holding `mib(i)` MiB; returns their run ids.
fn thirty_runs(s: &Scratch, label: &str, mib: impl Fn(usize) -> u32) -> Vec<i64> {
    (0..30)
        .map(|i| {
            let json = s.path("h.json");
            let out = s.run(&[
                "monitor",
                "-q",
                "--label",
                label,
                "--json",
                json.to_str().unwrap(),
                "--",
                testbed().to_str().unwrap(),
                "hold",
                "--mib",
                &mib(i).to_string(),
                "--ms",
                "100",
            ]);
            assert!(out.status.success(), "{}", stderr(&out));
            let doc: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap();
            doc["run_id"].as_i64().unwrap()
        })
        .collect()
}

fn history(s: &Scratch, label: &str) -> serde_json::Value {
    let json = s.path("history.json");
    let out = s.run(&[
        "history",
        "--metric",
        "peak_rss",
        "--label",
        label,
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap()
}

#[test]
fn history_finds_an_injected_change_at_the_right_run_and_none_without_one() {
    let _bench = loaded();
    on_a_quiet_machine(|| {
        // On the PostgreSQL store: the change comes with run 16.
        let s = Scratch::postgres();
        let ids = thirty_runs(&s, "nightly", |i| if i < 15 { 40 } else { 48 });
        let h = history(&s, "nightly");
        assert_eq!(h["points"].as_array().unwrap().len(), 30);
        let cps = h["change_points"].as_array().unwrap();
        assert_eq!(cps.len(), 1, "{h:#}");
        assert_eq!(cps[0]["run_after"].as_i64().unwrap(), ids[15]);
        assert_eq!(cps[0]["run_before"].as_i64().unwrap(), ids[14]);
        let pct = cps[0]["change_percent"].as_f64().unwrap();
        assert!((15.0..=25.0).contains(&pct), "{pct}");
        assert!(cps[0]["p"].as_f64().unwrap() < 0.001);
        // The shift it found is above the smallest one it says it can show.
        let smallest = h["detectable"].as_f64().unwrap();
        assert!(
            smallest > 0.0 && 100.0 * smallest < pct,
            "{smallest} against {pct}%"
        );

        // On SQLite: the same program every time, no change point.
        let s = Scratch::new();
        thirty_runs(&s, "flat", |_| 40);
        let h = history(&s, "flat");
        assert_eq!(h["points"].as_array().unwrap().len(), 30);
        assert!(h["change_points"].as_array().unwrap().is_empty(), "{h:#}");
        // The same program's peak varies by far less than 1%: the smallest shift it can
        // show is about the smallest change reported (`--min-change`, 1%), never less.
        let smallest = h["detectable"].as_f64().unwrap();
        assert!((0.01..0.02).contains(&smallest), "{h:#}");
    });
}

#[test]
fn separate_runs_under_other_conditions_are_warned_about_and_another_shape_is_refused() {
    let _bench = measuring();
    let s = Scratch::new();
    let suite = ab_suite("kind = \"bench\"\nrepeat = 3\nrate = 200\nduration = \"1s\"");
    let quiet = run_version(&s, &suite, "v1", 300, "quiet");
    // The same build, beside a CPU burner on the target's own CPU: the issue's A/A case.
    let cpu = one_cpu();
    let mut burner = std::process::Command::new("taskset")
        .args(["-c", &cpu, "sh", "-c", "while :; do :; done"])
        .spawn()
        .unwrap();
    let busy = run_version(&s, &suite, "v1", 300, "busy");
    let _ = burner.kill();
    let _ = burner.wait();
    let (code, text, doc) = compare(&s, quiet, busy, &[]);
    assert_eq!(code, 0, "{text}");
    let why = doc["conditions"]
        .as_str()
        .unwrap_or_else(|| panic!("no warning:\n{text}"));
    assert!(why.contains("cores were busy elsewhere"), "{why}");
    // It leads the terminal, and the summary line points at it. The quiet baseline's
    // figure is under a core: "0 cores" on a machine that did nothing else, as CI's can.
    let head = text
        .strip_prefix("CONDITIONS DIFFERED: the baseline ran while ")
        .unwrap_or_else(|| panic!("{text}"));
    let quiet_cores: f64 = head
        .split(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{text}"));
    assert!(quiet_cores < 0.75, "{text}");
    assert_has(&text, "— but the runs' conditions differed (see the top)");
    // Two quiet runs: strainline's own work and the target's are never counted as the
    // machine's. Only the hypervisor's share can differ, and only beyond its swings.
    let again = run_version(&s, &suite, "v1", 300, "again");
    let (_, text, doc) = compare(&s, quiet, again, &[]);
    if let Some(why) = doc["conditions"].as_str() {
        assert!(!why.contains("cores were busy elsewhere"), "{text}");
        assert!(why.contains("the hypervisor took"), "{text}");
    }
    // Each run shows the machine's conditions it was measured in.
    let shown = s.run(&["show", &again.to_string()]);
    assert_has(
        &String::from_utf8_lossy(&shown.stdout),
        "cores busy elsewhere, the hypervisor took",
    );
    let shown: serde_json::Value =
        serde_json::from_slice(&s.run(&["show", &again.to_string(), "--json"]).stdout).unwrap();
    let steady = shown["conditions"]["steal_seconds"].as_u64().unwrap();
    assert!(steady >= 3, "{shown:#}");
    // Another time scale: refused, exit 2, naming it; forced, the report starts with it.
    let path = s.path("ab.toml");
    let out = s.run(&[
        "run",
        path.to_str().unwrap(),
        "--label",
        "short",
        "--time-scale",
        "0.05",
        "--var",
        "profile=v1",
        "--var",
        "cost=300",
    ]);
    assert_exit(&out, 0);
    let (code, text, _) = compare_keys(&s, "quiet", "short");
    assert_eq!(code, 2, "{text}");
    assert_has(
        &text,
        "refusing to compare runs of different shapes: the time scale (baseline 1, candidate 0.05)",
    );
    assert_has(&text, "--allow-shape-mismatch");
    let (code, text, doc) = compare_with(&s, "quiet", "short", &["--allow-shape-mismatch"]);
    assert_eq!(code, 0, "{text}");
    assert!(text.starts_with("SHAPE MISMATCH: the time scale"), "{text}");
    assert!(doc["shape_mismatch"].as_str().is_some(), "{doc}");
}
