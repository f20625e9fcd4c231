//! From a recorded browser session to many users (`workload flow`): real Chromium,
//! driven by Playwright, records a person's session with applications we did not write
//! — Django's admin (CSRF tokens in hidden inputs, a session cookie, redirects) and a
//! Django REST framework API (a token from JSON sent back in a header, an id from JSON
//! sent back in a path) — and the flow strainline makes from it, correlations found by
//! themselves, runs as five users, each its own; the same recording replayed verbatim
//! is refused by the server.

use std::path::Path;
use std::process::Command;

use crate::common::*;

fn fixture(name: &str) -> String {
    format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// Records `mode` of `record_session.py` against `url` into `har`.
fn record(mode: &str, url: &str, har: &Path) {
    let out = Command::new("python3")
        .args([
            &fixture("record_session.py"),
            mode,
            url,
            har.to_str().unwrap(),
        ])
        .output()
        .expect("python3 with Playwright (installed by `make test`)");
    assert!(
        out.status.success(),
        "recording failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Django's groups whose name starts with `prefix`, from its own database.
fn groups(site: &Path, prefix: &str) -> u64 {
    let out = Command::new("/usr/bin/python3")
        .args([
            "manage.py",
            "shell",
            "-c",
            &format!("from django.contrib.auth.models import Group; print(Group.objects.filter(name__startswith={prefix:?}).count())"),
        ])
        .current_dir(site)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

/// A step's (sent, ok) in a load's JSON.
fn step(doc: &serde_json::Value, name: &str) -> (u64, u64) {
    let s = doc["summary"]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("no step {name}"));
    (s["sent"].as_u64().unwrap(), s["ok"].as_u64().unwrap())
}

/// The run's failures are Django's own and none is a refusal: five users writing to
/// Django's SQLite database at once meet its lock (`database is locked`, a 500, and the
/// steps after it in that user's round), as they would in production on SQLite. A run
/// with failures has that in Django's log; one without, none.
fn only_the_databases_own_failures(doc: &serde_json::Value, log: &str, out: &std::process::Output) {
    let errors = doc["summary"]["errors"].as_u64().unwrap();
    let logged = log.matches("\" 500 ").count() as u64;
    assert!(!log.contains("\" 403 "), "Django refused a request: {log}");
    if errors > 0 {
        assert!(logged > 0, "{}\n{log}", stdout(out));
        assert_has(log, "database is locked");
    }
}

/// `flow` run against `url` for `secs`, with `extra` arguments: its output and JSON.
fn play(
    s: &Scratch,
    url: &str,
    flow: &Path,
    secs: &str,
    extra: &[&str],
) -> (std::process::Output, serde_json::Value) {
    let mut args = vec![
        url,
        "--no-tui",
        "--scenario",
        flow.to_str().unwrap(),
        "-z",
        secs,
    ];
    args.extend_from_slice(extra);
    load_json(s, &args)
}

/// Makes the flow of `har` (with `extra` arguments) into `toml`; its stderr.
fn make_flow(s: &Scratch, har: &Path, toml: &Path, extra: &[&str]) -> String {
    let mut args = vec![
        "workload",
        "flow",
        har.to_str().unwrap(),
        "-o",
        toml.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let out = s.run(&args);
    assert_exit(&out, 0);
    stderr(&out)
}

#[test]
fn a_recorded_django_admin_session_runs_as_five_users_and_verbatim_is_refused() {
    let _l = loaded();
    let s = Scratch::new();
    let site = s.path("site");
    std::fs::create_dir_all(&site).unwrap();
    let users = s.path("users.csv");
    std::fs::write(&users, "username,password\nadmin,s3cret-pw\n").unwrap();
    let (_server, port) = crate::flows::django(&site, &users);
    let url = format!("http://127.0.0.1:{port}");
    let har = s.path("session.har");
    record("admin", &url, &har);
    let flow = s.path("flow.toml");
    let said = make_flow(&s, &har, &flow, &[]);
    // The two CSRF tokens (login form, add form) from their hidden inputs, the typed
    // group name as a variable; Django's CSS, JS and fonts left out and counted.
    assert_has(&said, r#"{{csrfmiddlewaretoken}} = "#);
    assert_has(
        &said,
        r#"given by get_admin (regex name="csrfmiddlewaretoken""#,
    );
    assert_has(&said, r#"{{csrfmiddlewaretoken_2}} = "#);
    assert_has(
        &said,
        r#""recorded-group" typed by the person as name, sent as typed by post_admin_auth_group"#,
    );
    assert_has(&said, "left out, static assets (");
    assert_has(&said, "GET /static/admin/css/base.css");
    // The one edit: a name of its own for each group.
    let text = std::fs::read_to_string(&flow).unwrap();
    assert_has(&text, "name=recorded-group");
    std::fs::write(
        &flow,
        text.replace("name=recorded-group", "name=g-{{uuid}}"),
    )
    .unwrap();
    let before = groups(&site, "g-");
    let (out, doc) = play(&s, &url, &flow, "5s", &[]);
    assert_exit(&out, 0);
    let (sent, ok) = step(&doc, "post_admin_auth_group");
    assert!(ok >= 5 && sent >= ok, "{}", stdout(&out));
    let log = std::fs::read_to_string(site.join("server.log")).unwrap();
    only_the_databases_own_failures(&doc, &log, &out);
    // Django's own database holds exactly the groups the summary counts as added.
    assert_eq!(groups(&site, "g-") - before, ok, "{}", stdout(&out));
    // Played once as one user against the application (`--target`), the group the
    // recording made removed first: every step answers as recorded. Played again, the
    // group exists, Django shows the form again (200, "Add group") where the recording
    // was led to the list, and the add diverges; verbatim, the login diverges first
    // (Django's 403 for a CSRF token of another session). The exit says so.
    let target = |name: &str, extra: &[&str]| {
        let mut args = vec![
            "workload",
            "flow",
            har.to_str().unwrap(),
            "-o",
            name,
            "--target",
            &url,
        ];
        args.extend_from_slice(extra);
        s.run(&args)
    };
    let removed = Command::new("/usr/bin/python3")
        .args([
            "manage.py",
            "shell",
            "-c",
            "from django.contrib.auth.models import Group; Group.objects.filter(name='recorded-group').delete()",
        ])
        .current_dir(&site)
        .status()
        .unwrap();
    assert!(removed.success());
    let checked = s.path("checked.toml");
    let out = target(checked.to_str().unwrap(), &[]);
    assert_exit(&out, 0);
    assert_has(&stdout(&out), "verified: every step answered as recorded");
    let out = target(checked.to_str().unwrap(), &[]);
    assert_exit(&out, 1);
    assert_has(
        &stdout(&out),
        "diverged first at post_admin_auth_group: check:recorded 1",
    );
    let unchecked = s.path("unchecked.toml");
    let out = target(unchecked.to_str().unwrap(), &["--no-correlate"]);
    assert_exit(&out, 1);
    assert_has(
        &stdout(&out),
        "diverged first at post_admin_login: its reply was not status 200 as recorded",
    );
    assert_has(&stdout(&out), "403: ");
    // Verbatim (no correlation): the recording's CSRF token is another session's, and
    // Django answers 403 to the login and the add.
    let verbatim = s.path("verbatim.toml");
    let said = make_flow(&s, &har, &verbatim, &["--no-correlate"]);
    assert_has(&said, "not correlated (--no-correlate)");
    let (out, doc) = play(&s, &url, &verbatim, "2s", &["--gate", "checks_failed = 0"]);
    assert_exit(&out, 1);
    let (sent, ok) = step(&doc, "post_admin_login");
    assert!(sent >= 1 && ok == 0, "{}", stdout(&out));
    let log = std::fs::read_to_string(site.join("server.log")).unwrap();
    assert_has(&log, "Forbidden (CSRF token");
}

#[test]
fn a_recorded_api_session_carries_its_token_and_ids_for_five_users() {
    let _l = loaded();
    let s = Scratch::new();
    let site = s.path("api");
    std::fs::create_dir_all(&site).unwrap();
    // Django REST framework's token login and a things API, in a fresh project.
    let setup = Command::new("/usr/bin/python3")
        .args(["-m", "django", "startproject", "mysite", "."])
        .current_dir(&site)
        .status()
        .unwrap();
    assert!(setup.success());
    std::fs::copy(fixture("drf_urls.py"), site.join("mysite/urls.py")).unwrap();
    let mut settings = std::fs::OpenOptions::new()
        .append(true)
        .open(site.join("mysite/settings.py"))
        .unwrap();
    use std::io::Write;
    writeln!(
        settings,
        "INSTALLED_APPS += ['rest_framework', 'rest_framework.authtoken']\nREST_FRAMEWORK = {{'DEFAULT_AUTHENTICATION_CLASSES': ['rest_framework.authentication.TokenAuthentication']}}"
    )
    .unwrap();
    drop(settings);
    let (_server, port) = crate::flows::django_project(&site, &["from django.contrib.auth.models import User; User.objects.create_user('alice', '', 'alice-pw')"]);
    let url = format!("http://127.0.0.1:{port}");
    let har = s.path("api.har");
    record("api", &url, &har);
    let flow = s.path("flow.toml");
    let said = make_flow(&s, &har, &flow, &[]);
    assert_has(
        &said,
        "given by post_api_token_auth (json $.token); sent by post_api_things, get_api_things",
    );
    assert_has(
        &said,
        "given by post_api_things (json $.id); sent by get_api_things",
    );
    let text = std::fs::read_to_string(&flow).unwrap();
    assert_has(&text, r#""Authorization" = "Token {{token}}""#);
    assert_has(&text, r#"path = "/api/things/{{thing_id}}/""#);
    assert_has(&text, r#"body = "{\"name\":\"lamp-recorded\"}""#);
    std::fs::write(&flow, text.replace("lamp-recorded", "lamp-{{uuid}}")).unwrap();
    let (out, doc) = play(&s, &url, &flow, "5s", &[]);
    assert_exit(&out, 0);
    let log = std::fs::read_to_string(site.join("server.log")).unwrap();
    only_the_databases_own_failures(&doc, &log, &out);
    let (made, made_ok) = step(&doc, "post_api_things");
    let (fetched, fetched_ok) = step(&doc, "get_api_things");
    assert!(made_ok >= 5 && made >= made_ok, "{}", stdout(&out));
    // Each thing made was fetched by its own id (a wrong id is a 404, a failure).
    assert!(
        fetched_ok == fetched && fetched + 5 >= made_ok,
        "{}",
        stdout(&out)
    );
    assert_eq!(groups(&site, "lamp-"), made_ok + 1, "{}", stdout(&out));
}

#[test]
fn a_recording_of_50_mb_is_read_in_bounded_memory_and_a_truncated_one_is_refused_at_its_path() {
    let s = Scratch::new();
    // 5,000 entries of ~10 KB: 1,000 pages of the application, each handing out a
    // token the next one sends back, and 4,000 stylesheets.
    let filler = "x".repeat(10_000);
    let mut entries = Vec::new();
    for i in 0..5_000 {
        let page = i % 5 == 0;
        let n = i / 5;
        let (url, mime, text) = if page {
            (
                format!("http://127.0.0.1:8000/p/{n}?t=tok{:08}abc", n.max(1) - 1),
                "text/html",
                format!(r#"<input type="hidden" name="t" value="tok{n:08}abc">{filler}"#),
            )
        } else {
            (
                format!("http://127.0.0.1:8000/static/{i}.css"),
                "text/css",
                filler.clone(),
            )
        };
        entries.push(serde_json::json!({
            "startedDateTime": format!("2026-01-01T00:{:02}:{:02}.{:03}Z", i / 6000, (i / 100) % 60, i % 1000),
            "time": 5,
            "request": {"method": "GET", "url": url, "headers": []},
            "response": {"status": 200, "headers": [], "content": {"mimeType": mime, "text": text}},
        }));
    }
    let har = serde_json::json!({"log": {"version": "1.2", "entries": entries}}).to_string();
    assert!(har.len() > 50_000_000, "{}", har.len());
    let path = s.path("big.har");
    std::fs::write(&path, &har).unwrap();
    let flow = s.path("big.toml");
    let peak = s.own_peak(&[
        "workload",
        "flow",
        path.to_str().unwrap(),
        "-o",
        flow.to_str().unwrap(),
    ]);
    assert!(peak < 128.0 * 1048576.0, "peak RSS {peak}");
    let text = std::fs::read_to_string(&flow).unwrap();
    assert_eq!(text.matches("[[step]]").count(), 1_000);
    // Each page's token taken from the page before it.
    assert_has(&text, "extract.t = { regex = ");
    assert!(text.matches("?t={{t").count() >= 998, "{}", &text[..4000]);
    // Cut in the middle of an entry: refused where it stopped.
    let cut = s.path("cut.har");
    std::fs::write(&cut, &har[..har.len() / 2]).unwrap();
    let out = s.run(&["workload", "flow", cut.to_str().unwrap()]);
    assert_exit(&out, 2);
    assert_has(
        &stderr(&out),
        "cut.har: not a HAR 1.2 recording: at log.entries[",
    );
    // A device or a directory is refused before a byte is read.
    let dir = s.path("");
    for path in ["/dev/zero", dir.to_str().unwrap()] {
        let out = s.run(&["workload", "flow", path]);
        assert_exit(&out, 2);
        assert_has(&stderr(&out), "is not a regular file");
    }
}
