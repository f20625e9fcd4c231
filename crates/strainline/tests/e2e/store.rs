//! The results store and its readers: `runs`, `show`, and the JSON schema.

use crate::common::*;

#[test]
fn runs_lists_and_show_prints_what_monitor_stored() {
    let s = Scratch::new();
    let out = s.run(&[
        "monitor", "-q", "--label", "v0.7.0", "--", "sh", "-c", "exit 0",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = s.run(&[
        "monitor", "-q", "--label", "v0.8.0", "--", "sh", "-c", "exit 5",
    ]);
    assert_eq!(out.status.code(), Some(5));

    let out = s.run(&["runs"]);
    assert!(out.status.success());
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
}
