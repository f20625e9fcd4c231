//! Paired sessions (`run --baseline … --candidate …`) against known truths, beside a
//! noisy neighbour the test starts (random spells of CPU and memory-bandwidth work on
//! both CPUs): the testbed at --cpu-cost 100 against 105 (5% more hashing per request) is
//! REGRESSED with a 3% band, and 100 against itself is not. The full table (10 trials of
//! each, and the same trials one after the other) is `bench/paired-verdicts.sh`; CI
//! runs one trial of each within a time budget.

use crate::common::*;

fn suite(s: &Scratch) -> std::path::PathBuf {
    let path = s.path("duo.toml");
    let body = "rate = 300\nduration = \"2s\"\n\n[compare]\nbands = { cpu_per_op = \"3%\" }";
    std::fs::write(&path, cost_suite(body)).unwrap();
    path
}

/// A noisy neighbour for the length of a session, killed when dropped.
fn neighbour() -> KillOnDrop {
    KillOnDrop(
        std::process::Command::new(testbed())
            .args(["noise", "--seconds", "400", "--threads", "2"])
            .spawn()
            .unwrap(),
    )
}

/// Runs a session of cost `a` against cost `b`; returns its output and the stored
/// comparison (`compare` of the two runs, as JSON) with its Markdown.
fn session(
    s: &Scratch,
    a: u32,
    b: u32,
    seed: u64,
    budget: &str,
) -> (std::process::Output, serde_json::Value, String) {
    let path = suite(s);
    let label = format!("cost{b}-seed{seed}");
    let _noise = neighbour();
    let out = s.run(&[
        "run",
        path.to_str().unwrap(),
        "--no-tui",
        "--baseline",
        &format!("cost={a}"),
        "--candidate",
        &format!("cost={b}"),
        "--baseline-label",
        &format!("base-{label}"),
        "--label",
        &label,
        "--pairs",
        "60",
        "--budget",
        budget,
        "--seed",
        &seed.to_string(),
    ]);
    let (json, md) = (s.path("c.json"), s.path("c.md"));
    let again = s.run(&[
        "compare",
        &format!("base-{label}"),
        &label,
        "--json",
        json.to_str().unwrap(),
        "--markdown",
        md.to_str().unwrap(),
    ]);
    // The stored runs compared again give the session's verdict, line for line, and
    // the same exit (a repetition lost to the machine is a note in both).
    let verdict = |text: &str| {
        text.lines()
            .find(|l| l.starts_with("REGRESSION: ") || l.starts_with("no regression: "))
            .map(str::to_string)
    };
    assert_eq!(
        verdict(&stdout(&again)),
        verdict(&stdout(&out)),
        "{}\n---\n{}",
        stdout(&again),
        stdout(&out)
    );
    assert_eq!(
        again.status.code(),
        Some(i32::from(
            verdict(&stdout(&again)).is_some_and(|l| l.starts_with("REGRESSION"))
        )),
        "{}",
        stdout(&again)
    );
    let doc = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    (out, doc, std::fs::read_to_string(&md).unwrap())
}

fn cpu_row(doc: &serde_json::Value) -> &serde_json::Value {
    doc["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["metric"] == "cpu_per_op")
        .expect("a cpu_per_op row")
}

#[test]
fn a_duet_flags_five_percent_more_cpu_per_request_beside_a_noisy_neighbour() {
    let _m = measuring();
    let s = Scratch::new();
    // One trial has about 90% power at this size; a second trial is run only when the
    // first missed, so CI fails when two in a row miss (about 1 in 100).
    let mut seen = Vec::new();
    for seed in [1, 2] {
        let (out, doc, md) = session(&s, 100, 105, seed, "150s");
        let text = stdout(&out);
        assert_has(&text, "measured as duet (both at once)");
        let row = cpu_row(&doc);
        assert_eq!(doc["mode"], "duet");
        assert_eq!(row["method"], "signed_rank");
        assert_has(&md, "Measured as **duet (both at once)**");
        let ratio = row["ratio"].as_f64().unwrap();
        // The truth: 5% more hashing per request, plus a fixed cost per request that
        // does not grow — a little under 5%; never above it by much.
        assert!((1.0..1.08).contains(&ratio), "ratio {ratio}\n{text}");
        seen.push(format!("{} at {ratio:.3}", row["verdict"]));
        if row["verdict"] == "regressed" {
            // 1: a repetition generator-bound (INVALID) beside the noise is left out
            // of the pairs as a note; the exit says the verdict. No target crashed for
            // a port the other side held.
            assert_eq!(out.status.code(), Some(1), "{text}");
            assert!(!text.contains("Address already in use"), "{text}");
            assert_has(&md, "**REGRESSED**");
            return;
        }
    }
    panic!("the 5% regression was missed twice: {seen:?}");
}

#[test]
fn a_duet_of_a_version_against_itself_flags_nothing_and_says_what_it_could_see() {
    let _m = measuring();
    let s = Scratch::new();
    let (out, doc, md) = session(&s, 100, 100, 3, "90s");
    // 0: a repetition generator-bound (INVALID) beside the noise is a note.
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let row = cpu_row(&doc);
    assert_ne!(row["verdict"], "regressed");
    let seen = row["detectable"].as_f64().unwrap();
    // A bounded session on this machine still resolves a few percent.
    assert!(seen > 0.0 && seen < 0.1, "detectable {seen}");
    assert_has(
        &md,
        "the smallest change each judged metric could have seen",
    );
    if row["verdict"] == "unchanged" {
        assert_has(
            row["why"].as_str().unwrap(),
            "would have seen a change of ±",
        );
    }
}

#[test]
fn a_duet_is_refused_for_a_ramp_and_auto_falls_back_to_interleaved() {
    let s = Scratch::new();
    let path = s.path("ramp.toml");
    std::fs::write(
        &path,
        format!(
            r#"
[target]
command = ["{tb}", "serve", "--listen", "127.0.0.1:{{{{port}}}}", "--cpu-cost", "{{{{cost}}}}"]
ready = "http://127.0.0.1:{{{{port}}}}/health"

[[test]]
name = "peak"
kind = "ramp"
{PUSH}
start = 100
step = 100
step_duration = "1s"
slo_p99 = "200ms"
"#,
            tb = testbed().display()
        ),
    )
    .unwrap();
    let pair = |extra: &[&str]| {
        let mut args = vec![
            "run",
            path.to_str().unwrap(),
            "--baseline",
            "cost=1",
            "--candidate",
            "cost=2",
        ];
        args.extend_from_slice(extra);
        s.run(&args)
    };
    let out = pair(&["--mode", "duet"]);
    assert_exit(&out, 2);
    assert_has(
        &stderr(&out),
        "test 'peak' is a ramp test, and a duet runs bench tests",
    );
    assert_has(&stderr(&out), "use --mode interleaved");
    // Three pairs are the fewest a paired comparison judges.
    assert_exit(&pair(&["--min-pairs", "2"]), 2);
    // Half of a pair is no session.
    let out = s.run(&["run", path.to_str().unwrap(), "--baseline", "cost=1"]);
    assert_exit(&out, 2);
    assert_has(&stderr(&out), "--candidate");
}

#[test]
fn an_interleaved_session_stores_two_linked_runs_that_compare_reads_as_pairs() {
    let _l = loaded();
    let s = Scratch::new();
    let path = suite(&s);
    let out = s.run(&[
        "run",
        path.to_str().unwrap(),
        "--no-tui",
        "--time-scale",
        "0.25",
        "--baseline",
        "cost=4",
        "--candidate",
        "cost=4",
        "--mode",
        "interleaved",
        "--pairs",
        "4",
        "--min-pairs",
        "3",
        "--seed",
        "5",
    ]);
    let text = stdout(&out);
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{text}{}",
        stderr(&out)
    );
    assert_has(&text, "interleaved pairs (seed 5)");
    assert_has(&text, "look at 3 pairs:");
    // The order of each pair is drawn: with this seed both orders occur.
    let firsts: Vec<&str> = text
        .lines()
        .filter(|l| *l == "baseline:" || *l == "candidate:")
        .step_by(2)
        .collect();
    assert!(
        firsts.contains(&"baseline:") && firsts.contains(&"candidate:"),
        "{firsts:?}\n{text}"
    );
    let runs: serde_json::Value =
        serde_json::from_slice(&s.run(&["runs", "--json"]).stdout).unwrap();
    let labels: Vec<&str> = runs
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["label"].as_str())
        .collect();
    assert!(
        labels.contains(&"baseline") && labels.contains(&"candidate"),
        "{labels:?}"
    );
    let json = s.path("c.json");
    s.run(&[
        "compare",
        "baseline",
        "candidate",
        "--json",
        json.to_str().unwrap(),
    ]);
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(doc["mode"], "interleaved");
    let row = cpu_row(&doc);
    assert_eq!(row["method"], "signed_rank");
    let n = row["baseline"]["n"].as_u64().unwrap();
    assert!((3..=4).contains(&n), "{n} pairs");
}

/// Known truth: the repository's history. Its server reads its profile from a file the
/// repository tracks: the previous commit's is v2 (1.5x the work per push), the last
/// commit's v1. `--baseline-ref HEAD~1` measures the working tree against the previous
/// commit, checked out beside it and built and run there: CPU per push improved; with
/// the working tree made v2 again (uncommitted) against `HEAD`, it REGRESSED and its
/// exit is 1. The baseline run records the ref's commit, and no worktree is left
/// behind. The GitHub Action's input `baseline-ref` runs the same session.
#[test]
fn baseline_ref_measures_the_working_tree_against_a_commit_of_its_repository() {
    let s = Scratch::new();
    let repo = s.path("repo");
    std::fs::create_dir_all(&repo).unwrap();
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .args([
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "-c",
                "init.defaultBranch=main",
            ])
            .args(args)
            .current_dir(&repo)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {}", stderr(&out));
        stdout(&out).trim().to_string()
    };
    // The server: the testbed, at the profile the tree says. Its "build" copies the
    // profile where the server reads it, as a build makes a binary.
    std::fs::write(
        repo.join("serve.sh"),
        format!(
            "#!/bin/sh\nexec {} serve --listen 127.0.0.1:$1 --workers 1 --cpu-cost 40 --profile $(cat build/profile)\n",
            testbed().display()
        ),
    )
    .unwrap();
    std::fs::write(
        repo.join("strainline.toml"),
        format!(
            "[suite]\nname = \"svc\"\n\n[target]\nbuild = [\"sh\", \"-c\", \"mkdir -p build && cp profile build/profile\"]\ncommand = [\"sh\", \"serve.sh\", \"{{{{port}}}}\"]\nready = \"http://127.0.0.1:{{{{port}}}}/health\"\n\n[[test]]\nname = \"push\"\nkind = \"bench\"\n{PUSH}\nrate = 300\nduration = \"1s\"\n\n[compare]\nbands = {{ cpu_per_op = \"10%\" }}\n"
        ),
    )
    .unwrap();
    std::fs::write(repo.join(".gitignore"), "build/\n.strainline/\n").unwrap();
    git(&["init", "-q"]);
    std::fs::write(repo.join("profile"), "v2\n").unwrap();
    git(&["add", "."]);
    git(&["commit", "-q", "-m", "slow"]);
    let slow = git(&["rev-parse", "HEAD"]);
    std::fs::write(repo.join("profile"), "v1\n").unwrap();
    git(&["commit", "-q", "-am", "fast"]);
    let session = |rev: &str, label: &str| {
        strainline()
            .args(["--store", &s.store(), "run", "strainline.toml", "--no-tui"])
            .args(["--baseline-ref", rev, "--label", label, "--baseline-label"])
            .arg(format!("base-{label}"))
            .args(["--pairs", "20", "--min-pairs", "5", "--seed", "7"])
            .current_dir(&repo)
            .output()
            .unwrap()
    };
    let out = session("HEAD~1", "fast");
    assert_exit(&out, 0);
    assert_has(&stdout(&out), "baseline: HEAD~1 (");
    let cpu = stdout(&out)
        .lines()
        .find(|l| l.trim_start().starts_with("cpu_per_op "))
        .map(str::to_string)
        .unwrap_or_default();
    assert!(cpu.trim_end().ends_with("improved"), "{}", stdout(&out));
    let runs: serde_json::Value =
        serde_json::from_slice(&s.run(&["runs", "--json", "--label", "base-fast"]).stdout).unwrap();
    assert_eq!(runs[0]["git_commit"], slow, "{}", runs[0]);
    // The same through the GitHub Action's Measure step (its input baseline-ref): one
    // paired session against HEAD~1, whose baseline run is that commit's.
    let outputs = s.path("github_output");
    let measure = crate::action::action_step(
        "Measure",
        &[],
        &[
            ("STORE", s.store()),
            ("GITHUB_OUTPUT", outputs.display().to_string()),
            ("SUITE", "strainline.toml".into()),
            ("FORMAT", String::new()),
            ("FILES", String::new()),
            ("BASE_VARS", String::new()),
            ("CAND_VARS", String::new()),
            ("BASE_REF", "HEAD~1".into()),
            ("MODE", "auto".into()),
            ("BUDGET", "10s".into()),
            ("PR", "9".into()),
            ("GITHUB_REF_NAME", "feature".into()),
        ],
        &repo,
    );
    assert!(
        measure.status.success(),
        "{}{}",
        stdout(&measure),
        stderr(&measure)
    );
    assert_has(&std::fs::read_to_string(&outputs).unwrap(), "paired=true");
    let runs: serde_json::Value = serde_json::from_slice(
        &s.run(&["runs", "--json", "--label", "pr-9-baseline"])
            .stdout,
    )
    .unwrap();
    assert_eq!(runs[0]["git_commit"], slow, "{}", runs[0]);
    // The working tree made slow again, not committed: against HEAD it regressed.
    std::fs::write(repo.join("profile"), "v2\n").unwrap();
    let out = session("HEAD", "slow-again");
    assert_exit(&out, 1);
    assert_has(&stdout(&out), "REGRESSION: ");
    let worktrees = git(&["worktree", "list"]);
    assert_eq!(worktrees.lines().count(), 1, "{worktrees}");
    // A ref the repository does not have is refused, named.
    let out = session("no-such-branch", "x");
    assert_exit(&out, 2);
    assert_has(
        &stderr(&out),
        "--baseline-ref no-such-branch: no such commit",
    );
}
