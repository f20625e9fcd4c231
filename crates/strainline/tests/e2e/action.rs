//! The GitHub Action's comment script against a recording server: a fake of GitHub's
//! REST API (the external service, not strainline) that keeps the pull request's
//! comments and every request it got. The first run creates one comment, the second
//! finds it by its marker (on the second page of comments) and updates it.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use crate::common::*;

#[derive(Default)]
struct Github {
    /// (id, body, author's login) of pull request 7's comments.
    comments: Vec<(u64, String, String)>,
    /// (method, path, authorization, body) of every request.
    requests: Vec<(String, String, String, String)>,
}

/// Serves the three calls the script makes, one connection per request.
fn serve(listener: TcpListener, state: Arc<Mutex<Github>>) {
    for stream in listener.incoming() {
        let Ok(mut stream) = stream else { return };
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            continue;
        }
        let mut parts = line.split_whitespace();
        let (method, target) = (
            parts.next().unwrap().to_string(),
            parts.next().unwrap().to_string(),
        );
        let (mut length, mut auth) = (0usize, String::new());
        loop {
            let mut h = String::new();
            reader.read_line(&mut h).unwrap();
            if h == "\r\n" || h.is_empty() {
                break;
            }
            let (k, v) = h.split_once(':').unwrap();
            match k.to_ascii_lowercase().as_str() {
                "content-length" => length = v.trim().parse().unwrap(),
                "authorization" => auth = v.trim().to_string(),
                _ => {}
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body).unwrap();
        let body = String::from_utf8(body).unwrap();
        let mut g = state.lock().unwrap();
        g.requests
            .push((method.clone(), target.clone(), auth, body.clone()));
        let (path, query) = target.split_once('?').unwrap_or((&target, ""));
        let (status, reply) = match (method.as_str(), path) {
            ("GET", "/repos/acme/shop/issues/7/comments") => {
                let page: usize = query
                    .split('&')
                    .find_map(|kv| kv.strip_prefix("page="))
                    .unwrap()
                    .parse()
                    .unwrap();
                let items: Vec<serde_json::Value> = g
                    .comments
                    .iter()
                    .skip((page - 1) * 100)
                    .take(100)
                    .map(
                        |(id, b, u)| serde_json::json!({"id": id, "body": b, "user": {"login": u}}),
                    )
                    .collect();
                ("200 OK", serde_json::Value::from(items).to_string())
            }
            ("POST", "/repos/acme/shop/issues/7/comments") => {
                let b: serde_json::Value = serde_json::from_str(&body).unwrap();
                let id = 9000 + g.comments.len() as u64;
                // The workflow's GITHUB_TOKEN writes as the Actions bot.
                g.comments.push((
                    id,
                    b["body"].as_str().unwrap().to_string(),
                    "github-actions[bot]".into(),
                ));
                ("201 Created", serde_json::json!({"id": id}).to_string())
            }
            ("PATCH", p) if p.starts_with("/repos/acme/shop/issues/comments/") => {
                let id: u64 = p.rsplit('/').next().unwrap().parse().unwrap();
                let b: serde_json::Value = serde_json::from_str(&body).unwrap();
                match g.comments.iter_mut().find(|c| c.0 == id) {
                    Some(c) => {
                        c.1 = b["body"].as_str().unwrap().to_string();
                        ("200 OK", serde_json::json!({"id": id}).to_string())
                    }
                    None => ("404 Not Found", "{}".to_string()),
                }
            }
            // As GitHub answers an installation token (the workflow's GITHUB_TOKEN).
            ("GET", "/user") => (
                "403 Forbidden",
                r#"{"message": "Resource not accessible by integration"}"#.to_string(),
            ),
            _ => ("404 Not Found", "{}".to_string()),
        };
        drop(g);
        let _ = write!(
            stream,
            "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{reply}",
            reply.len()
        );
    }
}

#[test]
fn the_action_comments_once_and_then_updates_its_comment() {
    let s = Scratch::new();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let api = format!("http://{}", listener.local_addr().unwrap());
    let state = Arc::new(Mutex::new(Github::default()));
    // 120 comments from reviewers first: ours will be on the second page. Reviewer 5
    // pasted our marker at the top of theirs: it is not ours to edit.
    let review = |i: u64| {
        if i == 5 {
            "<!-- strainline comment -->\nI own the verdict now".to_string()
        } else {
            format!("review {i}")
        }
    };
    state.lock().unwrap().comments = (1..=120)
        .map(|i| (i, review(i), format!("reviewer{i}")))
        .collect();
    std::thread::spawn({
        let state = state.clone();
        move || serve(listener, state)
    });
    let event = s.path("event.json");
    std::fs::write(
        &event,
        r#"{"action": "synchronize", "pull_request": {"number": 7}}"#,
    )
    .unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../action/comment.sh");
    let comment = |text: &str| {
        let md = s.path("comment.md");
        std::fs::write(&md, text).unwrap();
        let out = std::process::Command::new("sh")
            .arg(script)
            .arg(&md)
            .env("GITHUB_API_URL", &api)
            .env("GITHUB_REPOSITORY", "acme/shop")
            .env("GITHUB_TOKEN", "t0ken")
            .env("GITHUB_EVENT_PATH", &event)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert_has(
        &comment("### strainline: REGRESSION: 1 regressed\n| a \"quoted\" `cell` |\n"),
        "commented on pull request #7",
    );
    assert_has(
        &comment("### strainline: no regression\n"),
        "updated comment 9120 on pull request #7",
    );
    let g = state.lock().unwrap();
    let calls: Vec<String> = g
        .requests
        .iter()
        .map(|r| format!("{} {}", r.0, r.1))
        .collect();
    assert_eq!(
        calls,
        [
            "GET /user",
            "GET /repos/acme/shop/issues/7/comments?per_page=100&page=1",
            "GET /repos/acme/shop/issues/7/comments?per_page=100&page=2",
            "POST /repos/acme/shop/issues/7/comments",
            "GET /user",
            "GET /repos/acme/shop/issues/7/comments?per_page=100&page=1",
            "GET /repos/acme/shop/issues/7/comments?per_page=100&page=2",
            "PATCH /repos/acme/shop/issues/comments/9120",
        ]
    );
    assert!(g.requests.iter().all(|r| r.2 == "Bearer t0ken"));
    // One comment of ours, with the second body; the reviewers' untouched.
    let ours: Vec<&(u64, String, String)> = g
        .comments
        .iter()
        .filter(|c| c.2 == "github-actions[bot]")
        .collect();
    assert_eq!(ours.len(), 1);
    assert_eq!(
        ours[0].1,
        "<!-- strainline comment -->\n### strainline: no regression\n"
    );
    assert_eq!(g.comments.len(), 121);
    assert!(g.comments[..120]
        .iter()
        .enumerate()
        .all(|(i, c)| c.1 == review(i as u64 + 1)));
    // The first body arrived as sent (JSON-escaped by jq, quotes and backticks intact).
    let first: serde_json::Value = serde_json::from_str(&g.requests[3].3).unwrap();
    assert_has(first["body"].as_str().unwrap(), "| a \"quoted\" `cell` |");
}

/// action.yml as JSON (read by PyYAML, as a YAML parser we did not write).
fn action_doc() -> serde_json::Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../action.yml");
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            "import sys, yaml, json; print(json.dumps(yaml.safe_load(open(sys.argv[1]))))",
            path,
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn the_action_is_a_composite_action_that_uses_the_script() {
    let doc = action_doc();
    assert_eq!(doc["runs"]["using"], "composite");
    let steps = doc["runs"]["steps"].as_array().unwrap();
    let runs: String = steps.iter().filter_map(|s| s["run"].as_str()).collect();
    for needle in [
        "comment.sh",
        "compare --baseline",
        "--markdown",
        "import \"$FORMAT\"",
    ] {
        assert_has(&runs, needle);
    }
    // Every step that runs a script says its shell (composite actions require it).
    assert!(steps
        .iter()
        .filter(|s| s.get("run").is_some())
        .all(|s| s["shell"] == "bash"));
}

/// One step of the action as GitHub runs it: its `run:` script with the `${{ … }}`
/// expressions it uses filled in, under bash, with its environment.
pub(crate) fn action_step(
    name: &str,
    fill: &[(&str, &str)],
    env: &[(&str, String)],
    cwd: &std::path::Path,
) -> std::process::Output {
    let doc = action_doc();
    let step = doc["runs"]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("no step '{name}'"));
    let mut script = step["run"].as_str().unwrap().to_string();
    for (expr, value) in fill {
        script = script.replace(&format!("${{{{ {expr} }}}}"), value);
    }
    assert!(!script.contains("${{"), "unfilled expression in:\n{script}");
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_strainline"))
        .parent()
        .unwrap()
        .to_path_buf();
    let path_var = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    std::process::Command::new("bash")
        .args(["-e", "-c", &script])
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .env("PATH", path_var)
        .current_dir(cwd)
        .output()
        .unwrap()
}

#[test]
fn the_action_measures_a_pull_request_beside_its_baseline_and_says_how_and_what_it_could_see() {
    let _l = loaded();
    let s = Scratch::new();
    let suite = s.path("suite.toml");
    std::fs::write(&suite, cost_suite("rate = 100\nduration = \"1s\"")).unwrap();
    let (outputs, summary) = (s.path("github_output"), s.path("step_summary"));
    let env = |extra: &[(&'static str, String)]| {
        let mut e: Vec<(&str, String)> = vec![
            ("STORE", s.store()),
            ("GITHUB_OUTPUT", outputs.display().to_string()),
            ("GITHUB_STEP_SUMMARY", summary.display().to_string()),
        ];
        e.extend_from_slice(extra);
        e
    };
    let measure = action_step(
        "Measure",
        &[],
        &env(&[
            ("SUITE", suite.display().to_string()),
            ("FORMAT", String::new()),
            ("FILES", String::new()),
            ("BASE_VARS", "cost=4".into()),
            ("CAND_VARS", "cost=5".into()),
            ("MODE", "auto".into()),
            ("BUDGET", "12s".into()),
            ("PR", "7".into()),
            ("GITHUB_REF_NAME", "feature".into()),
        ]),
        s.dir.path(),
    );
    assert!(
        measure.status.success(),
        "{}{}",
        String::from_utf8_lossy(&measure.stdout),
        String::from_utf8_lossy(&measure.stderr)
    );
    let written = std::fs::read_to_string(&outputs).unwrap();
    assert_has(&written, "label=pr-7");
    assert_has(&written, "paired=true");
    let compare = action_step(
        "Compare with the baseline",
        &[("github.event.pull_request.number", "7")],
        &env(&[
            ("BASELINE", "main".into()),
            ("LABEL", "pr-7".into()),
            ("PAIRED", "true".into()),
        ]),
        s.dir.path(),
    );
    assert!(
        compare.status.success(),
        "{}",
        String::from_utf8_lossy(&compare.stderr)
    );
    let comment = std::fs::read_to_string(s.path("strainline-comment.md")).unwrap();
    // Which mode ran (a duet on a machine of 2 CPUs or more), and what it could see.
    let mode = if std::thread::available_parallelism().map_or(1, |n| n.get()) >= 2 {
        "Measured as **duet (both at once)**"
    } else {
        "Measured as **interleaved pairs**"
    };
    assert_has(&comment, mode);
    assert_has(
        &comment,
        "the smallest change each judged metric could have seen: ±",
    );
    assert_has(&comment, "| seen |");
    assert_has(&std::fs::read_to_string(&summary).unwrap(), mode);
}
