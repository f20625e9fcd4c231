//! The results store and its readers: `runs`, `show`, and the JSON schema. The store
//! tests run twice: on SQLite and on a real PostgreSQL server.

use crate::common::*;

#[test]
fn runs_lists_and_show_prints_what_monitor_stored() {
    runs_and_show(&Scratch::new());
}

#[test]
fn postgres_runs_lists_and_show_prints_what_monitor_stored() {
    runs_and_show(&Scratch::postgres());
}

fn runs_and_show(s: &Scratch) {
    let out = s.run(&[
        "monitor", "-q", "--label", "v0.7.0", "--", "sh", "-c", "exit 0",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = s.run(&[
        "monitor", "-q", "--label", "v0.8.0", "--", "sh", "-c", "exit 5",
    ]);
    assert_eq!(out.status.code(), Some(5));

    let out = s.run(&["runs"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(lines[1].contains("v0.8.0") && lines[1].contains("completed"));
    assert!(lines[2].contains("v0.7.0"));

    let out = s.run(&["runs", "--json", "--label", "v0.7.0"]);
    let runs: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(runs.as_array().unwrap().len(), 1);
    assert_eq!(runs[0]["exit_code"], 0);
    assert!(runs[0]["fingerprint"].as_str().unwrap().contains('c'));

    let out = s.run(&["show", "v0.8.0"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("exit code:  5") && text.contains("Peak RSS:"),
        "{text}"
    );

    let out = s.run(&["show", "--json", "1"]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let metrics = doc["cases"][0]["metrics"].as_array().unwrap();
    assert!(metrics
        .iter()
        .any(|m| m["name"] == "peak_rss" && m["value"].as_f64().unwrap() > 0.0));

    let out = s.run(&["show", "42"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("no run 42"));

    // Relative keys count back from the newest; one past the oldest names no run (a
    // count that overflowed SQLite's OFFSET used to name the newest).
    assert_has(&stdout(&s.run(&["show", "latest~1"])), "v0.7.0");
    for key in ["latest~2", "latest~18446744073709551615"] {
        let out = s.run(&["show", key]);
        assert_eq!(out.status.code(), Some(2), "{key}: {}", stdout(&out));
    }
    let out = s.run(&["history", "--metric", "peak_rss", "--since", "2026-02-30"]);
    assert_eq!(out.status.code(), Some(2));
    assert_has(&stderr(&out), "is not a date");
}

#[test]
fn the_json_output_validates_against_the_committed_schema() {
    let schema_path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../schemas/monitor.v1.schema.json"
    );
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(schema_path).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let s = Scratch::new();
    let (out, doc) = s.monitor_testbed(
        "20ms",
        &["memhog", "--total-ms", "1200", "--child-ms", "200"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let errors: Vec<String> = validator
        .iter_errors(&doc)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
    assert!(doc["samples"].as_array().unwrap().len() > 20);
    // And a document that breaks the contract is refused, so the check can fail.
    let mut broken = doc.clone();
    broken["summary"]["peak_rss"]["bytes"] = serde_json::json!("a lot");
    assert!(!validator.is_valid(&broken));
}

#[test]
fn csv_has_one_row_per_sample() {
    let s = Scratch::new();
    let csv = s.path("series.csv");
    let json = s.path("series.json");
    let out = s.run(&[
        "monitor",
        "-q",
        "-i",
        "50ms",
        "--csv",
        csv.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
        "--",
        "sleep",
        "0.5",
    ]);
    assert!(out.status.success());
    let text = std::fs::read_to_string(csv).unwrap();
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap();
    let rows: Vec<&str> = text.lines().collect();
    assert!(rows[0].starts_with("t_seconds,rss_bytes,cpu_cores"));
    assert_eq!(rows.len() - 1, doc["samples"].as_array().unwrap().len());
    assert!(rows[1].contains(":sleep:"), "{}", rows[1]);
    // Thread-seconds per state so far: `sleep` spends its life in nanosleep, so the
    // last row's sleep column is about its age, and never more than the time watched.
    let head: Vec<&str> = rows[0].split(',').collect();
    let col = head
        .iter()
        .position(|c| *c == "thread_s_sleep")
        .unwrap_or_else(|| panic!("{}", rows[0]));
    assert_eq!(head.len(), 21, "{}", rows[0]);
    let last: Vec<&str> = rows.last().unwrap().rsplitn(11, ',').collect();
    let sleep: f64 = last[10 - (col - 10)].parse().unwrap();
    let t: f64 = rows
        .last()
        .unwrap()
        .split(',')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        sleep >= 0.6 * t && sleep <= t + 0.06,
        "slept {sleep:.3} thread-s in {t:.3} s: {}",
        rows.last().unwrap()
    );
}

/// Several strainline processes writing to one store at once: every run, case and
/// sample arrives, ids are distinct, nothing is half-written.
fn concurrent_writers(s: &Scratch) {
    let writers: Vec<_> = (0..4)
        .map(|i| {
            let json = s.path(&format!("w{i}.json"));
            let child = strainline()
                .args(["--store", &s.store(), "monitor", "-q", "-i", "10ms"])
                .args(["--label", &format!("writer-{i}")])
                .args(["--json", json.to_str().unwrap(), "--", "sleep", "1"])
                .current_dir(s.dir.path())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            (child, json)
        })
        .collect();
    for (i, (child, json)) in writers.into_iter().enumerate() {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "writer {i}: {}", stderr(&out));
        let doc: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap();
        let run_id = doc["run_id"].as_i64().expect("run_id in the JSON");
        let shown = s.run(&["show", "--json", &run_id.to_string()]);
        assert!(shown.status.success(), "{}", stderr(&shown));
        let stored: serde_json::Value = serde_json::from_slice(&shown.stdout).unwrap();
        assert_eq!(stored["run"]["label"], format!("writer-{i}"));
        assert_eq!(stored["run"]["status"], "completed");
        let samples = doc["samples"].as_array().unwrap().len() as i64;
        assert!(samples > 50, "{samples}");
        assert_eq!(stored["cases"][0]["samples_stored"], samples);
    }
    let out = s.run(&["runs", "--json"]);
    let runs: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut ids: Vec<i64> = runs
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_i64().unwrap())
        .collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 4);
}

#[test]
fn concurrent_writers_to_sqlite_lose_nothing() {
    let _bench = loaded();
    on_a_quiet_machine(|| {
        concurrent_writers(&Scratch::new());
    });
}

#[test]
fn concurrent_writers_to_postgres_lose_nothing() {
    let _bench = loaded();
    on_a_quiet_machine(|| {
        concurrent_writers(&Scratch::postgres());
    });
}

#[test]
fn a_postgres_password_never_appears_in_output_or_stored_runs() {
    let s = Scratch::postgres();
    let url = s.store();
    assert!(url.contains(crate::pg::PASSWORD));
    // Through the environment variable, and on the command line.
    let out = strainline()
        .env("STRAINLINE_STORE", &url)
        .args([
            "monitor",
            "--label",
            "secret-check",
            "--",
            "sh",
            "-c",
            "echo hi",
        ])
        .current_dir(s.dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    // A harness that prints its environment, and fails so that its output becomes
    // the case's stored reason.
    let suite = s.path("env.toml");
    std::fs::write(
        &suite,
        "[[test]]\nname = \"env\"\nkind = \"harness\"\ncommand = [\"sh\", \"-c\", \"env | grep -i strainline; echo store=$STRAINLINE_STORE.; exit 1\"]\n",
    )
    .unwrap();
    let harness = strainline()
        .env("STRAINLINE_STORE", &url)
        .args(["run", "--label", "env-check", suite.to_str().unwrap()])
        .current_dir(s.dir.path())
        .output()
        .unwrap();
    assert_eq!(harness.status.code(), Some(1), "{}", stderr(&harness));
    // The environment did reach the stored reason (the check below can fail)...
    assert_has(&stdout(&harness), "store=.");
    let out2 = s.run(&["show", "--json", "secret-check"]);
    let out3 = s.run(&["runs"]);
    let out4 = s.run(&["show", "--json", "env-check"]);
    assert_has(&stdout(&out4), "store=.");
    // ... and no log strainline wrote holds the password.
    for log in walk(&s.dir.path().join(".strainline")) {
        let text = String::from_utf8_lossy(&std::fs::read(&log).unwrap()).into_owned();
        assert!(
            !text.contains(crate::pg::PASSWORD),
            "{}: {text}",
            log.display()
        );
    }
    for o in [&out, &out2, &out3, &harness, &out4] {
        let all = format!("{}{}", stdout(o), stderr(o));
        assert!(!all.contains(crate::pg::PASSWORD), "{all}");
    }
    // Nothing stored holds it either: dump every text column of every table.
    let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let tables: Vec<String> = c
        .query(
            "SELECT table_name::text FROM information_schema.tables WHERE table_schema = current_schema()",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(tables.contains(&"runs".to_string()), "{tables:?}");
    for t in tables {
        let rows = c
            .query(&format!("SELECT CAST(t AS text) FROM {t} AS t"), &[])
            .unwrap();
        for r in rows {
            let text: String = r.get(0);
            assert!(!text.contains(crate::pg::PASSWORD), "{t}: {text}");
        }
    }
    // A password given as a parameter, first or not, is masked too.
    let bad = format!(
        "postgres://u@127.0.0.1:1/db?password={}",
        crate::pg::PASSWORD
    );
    let out = strainline()
        .args(["--store", &bad, "runs"])
        .output()
        .unwrap();
    assert!(
        !stderr(&out).contains(crate::pg::PASSWORD),
        "{}",
        stderr(&out)
    );
    // A wrong password is refused with a clear error that does not echo it.
    let wrong = url.replace(crate::pg::PASSWORD, "not-the-password");
    let out = strainline()
        .args(["--store", &wrong, "runs"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("cannot open the results store") && err.contains(":***@"),
        "{err}"
    );
    assert!(!err.contains("not-the-password"), "{err}");

    // libpq's keyword form names the same database; a wrong password in it is masked,
    // and no SQLite file of that name appears (it was taken for a path before).
    let (userinfo, rest) = url["postgres://".len()..].split_once('@').unwrap();
    let (user, _) = userinfo.split_once(':').unwrap();
    let (hostport, db) = rest.split_once('/').unwrap();
    let (host, port) = hostport.split_once(':').unwrap();
    let keywords =
        |pw: &str| format!("host={host} port={port} user={user} password={pw} dbname={db}");
    let out = strainline()
        .env("STRAINLINE_STORE", keywords(crate::pg::PASSWORD))
        .args(["runs"])
        .current_dir(s.dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_has(&stdout(&out), "secret-check");
    let out = strainline()
        .env("STRAINLINE_STORE", keywords("SECRETPW"))
        .args(["monitor", "--", "true"])
        .current_dir(s.dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let all = format!("{}{}", stdout(&out), stderr(&out));
    assert!(
        !all.contains("SECRETPW") && all.contains("password=***"),
        "{all}"
    );
    assert!(
        !std::fs::read_dir(s.dir.path())
            .unwrap()
            .flatten()
            .any(|e| e.file_name().to_string_lossy().contains("host=")),
        "a file named after the connection string was made"
    );
}

/// Every file under `dir`.
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}
