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
    let (out, doc) = load_json(
        &s,
        &[
            &url,
            "--no-tui",
            "--scenario",
            flow.to_str().unwrap(),
            "-z",
            "5s",
        ],
    );
    assert_exit(&out, 0);
    let (sent, ok) = step(&doc, "post_admin_auth_group");
    assert!(ok >= 5 && sent >= ok, "{}", stdout(&out));
    let log = std::fs::read_to_string(site.join("server.log")).unwrap();
    only_the_databases_own_failures(&doc, &log, &out);
    // Django's own database holds exactly the groups the summary counts as added.
    assert_eq!(groups(&site, "g-") - before, ok, "{}", stdout(&out));
    // Played once as one user against the application (`--target`): every step answers
    // as recorded; verbatim, the login diverges first (Django's 403 for a CSRF token of
    // another session), and the exit says so.
    let out = s.run(&[
        "workload",
        "flow",
        har.to_str().unwrap(),
        "-o",
        s.path("checked.toml").to_str().unwrap(),
        "--target",
        &url,
    ]);
    assert_exit(&out, 0);
    assert_has(&stdout(&out), "verified: every step answered as recorded");
    let out = s.run(&[
        "workload",
        "flow",
        har.to_str().unwrap(),
        "-o",
        s.path("unchecked.toml").to_str().unwrap(),
        "--no-correlate",
        "--target",
        &url,
    ]);
    assert_exit(&out, 1);
    assert_has(
        &stdout(&out),
        "diverged first at post_admin_login: check:recorded 1",
    );
    assert_has(&stdout(&out), "403: 1");
    // Verbatim (no correlation): the recording's CSRF token is another session's, and
    // Django answers 403 to the login and the add.
    let verbatim = s.path("verbatim.toml");
    let said = make_flow(&s, &har, &verbatim, &["--no-correlate"]);
    assert_has(&said, "not correlated (--no-correlate)");
    let (out, doc) = load_json(
        &s,
        &[
            &url,
            "--no-tui",
            "--scenario",
            verbatim.to_str().unwrap(),
            "-z",
            "2s",
            "--gate",
            "checks_failed = 0",
        ],
    );
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
    let (out, doc) = load_json(
        &s,
        &[
            &url,
            "--no-tui",
            "--scenario",
            flow.to_str().unwrap(),
            "-z",
            "5s",
        ],
    );
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
