//! User flows against programs no one here wrote, each a known truth: Django's admin
//! login (its CSRF token read from the form, its cookie kept by the client's jar, its
//! own log naming a refusal), and the IoT seed's device that re-registers when the
//! server forgot it (the testbed counts what it forgot).

use std::path::Path;
use std::process::Command;

use crate::common::*;
use strainline_testbed::harness::RunningServer;

/// A Django project made by `django-admin startproject` in `dir`, migrated, with the
/// users of `users` (a CSV `username,password`) as superusers; its dev server on a
/// free port, logging to `dir/server.log`.
pub fn django(dir: &Path, users: &Path) -> (KillOnDrop, u16) {
    python(dir, &["-m", "django", "startproject", "mysite", "."]);
    let make_users = format!(
        "import csv\nfrom django.contrib.auth.models import User\nfor r in csv.DictReader(open({:?})):\n    User.objects.create_superuser(r['username'], '', r['password'])\n",
        users.display().to_string()
    );
    django_project(dir, &[&make_users])
}

/// Debian's python3 with `args` in `dir`, which must succeed.
fn python(dir: &Path, args: &[&str]) {
    let out = Command::new("/usr/bin/python3")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("Debian's python3 with python3-django (installed by `make test`)");
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The Django project in `dir` migrated, `scripts` run in its shell, and its dev server
/// on a free port, logging to `dir/server.log`.
pub fn django_project(dir: &Path, scripts: &[&str]) -> (KillOnDrop, u16) {
    python(dir, &["manage.py", "migrate", "-v0"]);
    for script in scripts {
        python(dir, &["manage.py", "shell", "-c", script]);
    }
    let port = free_port();
    let log = std::fs::File::create(dir.join("server.log")).unwrap();
    let mut c = Command::new("/usr/bin/python3");
    c.args([
        "manage.py",
        "runserver",
        &format!("127.0.0.1:{port}"),
        "--noreload",
    ])
    .current_dir(dir);
    let child = c
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .expect("python3 manage.py runserver");
    let child = KillOnDrop(child);
    assert!(
        eventually(15.0, || std::net::TcpStream::connect(("127.0.0.1", port))
            .is_ok()),
        "Django's runserver did not start"
    );
    (child, port)
}

/// `strainline-testbed serve ARGS…` on a free loopback port, stopped when dropped.
fn testbed_serving(args: &[&str]) -> RunningServer {
    RunningServer::start(&testbed(), args)
}

/// The testbed's own counters (`GET /stats`).
fn stats_of(tb: &RunningServer) -> serde_json::Value {
    let (code, body) = tb.client().request("GET", "/stats", b"");
    assert_eq!(code, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

/// The fields of the summary's Checks row of `check (step)`.
fn checks_row(out: &std::process::Output, check: &str, step: &str) -> Vec<String> {
    let text = stdout(out);
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("{check} ({step})")))
        .unwrap_or_else(|| panic!("no Checks row for {check} ({step}) in {text}"));
    line.split_whitespace()
        .skip(2)
        .map(str::to_string)
        .collect()
}

fn example(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/flows")
        .join(name)
}

/// A step's check figures from `load --json`: (passed, failed).
fn check(doc: &serde_json::Value, step: &str, name: &str) -> (u64, u64) {
    let st = doc["summary"]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == step)
        .unwrap_or_else(|| panic!("no step {step}"));
    let c = st["checks"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["name"] == name))
        .unwrap_or_else(|| panic!("no check {name} in {st}"));
    (c["passed"].as_u64().unwrap(), c["failed"].as_u64().unwrap())
}

/// Django's database: how many groups there are (prefixed `prefix`).
fn django_groups(site: &Path, prefix: &str) -> u64 {
    let out = Command::new("/usr/bin/python3")
        .args([
            "manage.py",
            "shell",
            "-c",
            &format!(
                "from django.contrib.auth.models import Group; print(Group.objects.filter(name__startswith={:?}).count())",
                format!("{prefix}-")
            ),
        ])
        .current_dir(site)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

/// Replies with a status of 500 and above in a `load --json`.
fn server_errors(doc: &serde_json::Value) -> u64 {
    doc["summary"]["by_status"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(k, _)| k.parse::<u16>().is_ok_and(|s| s >= 500))
        .map(|(_, v)| v.as_u64().unwrap())
        .sum()
}

/// The shipped group flow, without a script: each add's name made by `set.group`, the
/// list after the redirect checked for that very name by a templated `body_contains`.
/// Django's database holds exactly the groups the checks counted; a check on another
/// name fails every add; `--var prefix=…` names a run's groups.
#[test]
fn django_groups_are_added_and_checked_by_name_from_a_template_without_a_script() {
    let _l = loaded();
    let s = Scratch::new();
    let site = s.path("site");
    std::fs::create_dir_all(&site).unwrap();
    let (_server, port) = django(&site, &example("django-users.csv"));
    let url = format!("http://127.0.0.1:{port}");
    let scenario = example("django-groups.toml");
    let (out, doc) = load_json(
        &s,
        &[
            &url,
            "--no-tui",
            "--scenario",
            scenario.to_str().unwrap(),
            "-z",
            "10s",
            "--var",
            "prefix=run1",
            "--gate",
            "checks_failed = 0",
        ],
    );
    let text = stdout(&out);
    let (listed, failed) = check(&doc, "add", "listed");
    // Django's dev server on SQLite may answer a write with its own 500 ("database is
    // locked"): such a reply fails the check, and nothing else may.
    let errors = server_errors(&doc);
    assert_eq!(failed, errors, "{text}");
    if failed == 0 {
        assert_exit(&out, 0);
    }
    assert!(listed >= 20, "{text}");
    assert_eq!(django_groups(&site, "run1"), listed, "{text}");
    assert_eq!(check(&doc, "login", "logged_in"), (5, 0), "{text}");
    // The check on another name than the one posted: every add fails it.
    let wrong = s.path("wrong");
    std::fs::create_dir_all(&wrong).unwrap();
    std::fs::copy(example("django-users.csv"), wrong.join("django-users.csv")).unwrap();
    std::fs::write(
        wrong.join("groups.toml"),
        std::fs::read_to_string(&scenario).unwrap().replace(
            "body_contains = \"{{group}}\"",
            "body_contains = \"{{prefix}}-{{client}}-{{uuid}}\"",
        ),
    )
    .unwrap();
    let (out, doc) = load_json(
        &s,
        &[
            &url,
            "--no-tui",
            "--scenario",
            wrong.join("groups.toml").to_str().unwrap(),
            "-z",
            "3s",
            "--var",
            "prefix=run2",
            "--gate",
            "checks_failed = 0",
        ],
    );
    assert_exit(&out, 1);
    let (passed, failed) = check(&doc, "add", "listed");
    assert_eq!(passed, 0, "{}", stdout(&out));
    assert!(failed >= 5, "{}", stdout(&out));
    // …while Django added each of them all the same.
    assert_eq!(
        django_groups(&site, "run2"),
        failed - server_errors(&doc),
        "{}",
        stdout(&out)
    );
    // A --var the scenario does not declare is refused, naming those it does.
    let out = s.run(&[
        "load",
        &url,
        "--scenario",
        scenario.to_str().unwrap(),
        "--var",
        "prefx=x",
        "-z",
        "1s",
    ]);
    assert_exit(&out, 2);
    assert_has(
        &stderr(&out),
        "--var prefx: the scenario's [vars] are prefix",
    );
}

#[test]
fn django_admin_logins_pass_their_checks_and_fail_with_wrong_passwords_or_no_cookie_jar() {
    let _l = loaded();
    let s = Scratch::new();
    let site = s.path("site");
    std::fs::create_dir_all(&site).unwrap();
    let (_server, port) = django(&site, &example("django-users.csv"));
    let url = format!("http://127.0.0.1:{port}");
    // The example as shipped, with the command its header and docs/load.md give.
    let scenario = example("django-admin.toml");
    let (out, doc) = load_json(
        &s,
        &[
            &url,
            "--no-tui",
            "--scenario",
            scenario.to_str().unwrap(),
            "-z",
            "5s",
            "--gate",
            "checks_failed = 0",
        ],
    );
    assert_exit(&out, 0);
    assert!(
        load_schema_errors(&doc).is_empty(),
        "{:?}",
        load_schema_errors(&doc)
    );
    // Every client (6) logged in once: Django redirected each POST to /admin/.
    assert_eq!(
        check(&doc, "login", "logged_in"),
        (6, 0),
        "{}",
        stdout(&out)
    );
    assert_eq!(check(&doc, "form", "form"), (6, 0));
    let (admin, failed) = check(&doc, "admin", "site_admin");
    assert!(admin > 6 && failed == 0, "{}", stdout(&out));
    let log = std::fs::read_to_string(site.join("server.log")).unwrap();
    assert_eq!(
        log.matches("\"POST /admin/login/?next=/admin/ HTTP/1.1\" 302")
            .count(),
        6,
        "Django's own log: {log}"
    );
    // The terminal's Checks table says what the JSON does: passed, failed, pass rate.
    assert_eq!(
        checks_row(&out, "logged_in", "login"),
        ["6", "0", "100.00%"]
    );
    // 20 virtual users for 10 s: every check passes.
    let many = s.path("many.toml");
    let text = std::fs::read_to_string(&scenario)
        .unwrap()
        .replace("clients = 6", "clients = 20")
        .replace(
            "csv = \"django-users.csv\"",
            &format!(
                "csv = {:?}",
                example("django-users.csv").display().to_string()
            ),
        );
    std::fs::write(&many, text).unwrap();
    let (out, doc) = load_json(
        &s,
        &[
            &url,
            "--no-tui",
            "--scenario",
            many.to_str().unwrap(),
            "-z",
            "10s",
            "--gate",
            "checks_failed = 0",
        ],
    );
    assert_exit(&out, 0);
    assert_eq!(
        check(&doc, "login", "logged_in"),
        (20, 0),
        "{}",
        stdout(&out)
    );
    assert_eq!(doc["summary"]["errors"], 0, "{}", stdout(&out));
    // The same users with other passwords: every login fails its check, named.
    let wrong = s.path("wrong");
    std::fs::create_dir_all(&wrong).unwrap();
    let users = std::fs::read_to_string(example("django-users.csv")).unwrap();
    let other: String = users
        .lines()
        .enumerate()
        .map(|(i, l)| {
            if i == 0 {
                format!("{l}\n")
            } else {
                format!("{l}-not\n")
            }
        })
        .collect();
    std::fs::write(wrong.join("django-users.csv"), other).unwrap();
    std::fs::copy(&scenario, wrong.join("django-admin.toml")).unwrap();
    let (out, doc) = load_json(
        &s,
        &[
            &url,
            "--no-tui",
            "--scenario",
            wrong.join("django-admin.toml").to_str().unwrap(),
            "-z",
            "5s",
            "--gate",
            "checks_failed = 0",
        ],
    );
    assert_exit(&out, 1);
    assert_eq!(
        check(&doc, "login", "logged_in"),
        (0, 6),
        "{}",
        stdout(&out)
    );
    assert_has(&stdout(&out), "check:logged_in 6");
    assert_eq!(checks_row(&out, "logged_in", "login"), ["0", "6", "0.00%"]);
    assert_has(&stdout(&out), "6 clients stopped (on_failure = stop)");
    assert_has(&stdout(&out), "FAILED: checks_failed = 0 (measured 6");
    // Without the cookie jar, Django's CSRF protection refuses the POST.
    let bare = s.path("bare");
    std::fs::create_dir_all(&bare).unwrap();
    std::fs::copy(example("django-users.csv"), bare.join("django-users.csv")).unwrap();
    let text = std::fs::read_to_string(&scenario).unwrap();
    std::fs::write(
        bare.join("django-admin.toml"),
        format!("cookies = false\n{text}"),
    )
    .unwrap();
    let (out, doc) = load_json(
        &s,
        &[
            &url,
            "--no-tui",
            "--scenario",
            bare.join("django-admin.toml").to_str().unwrap(),
            "-z",
            "3s",
            "--gate",
            "checks_failed = 0",
        ],
    );
    assert_exit(&out, 1);
    assert_eq!(check(&doc, "login", "logged_in"), (0, 6));
    assert_eq!(doc["summary"]["by_status"]["403"], 6, "{}", stdout(&out));
    let log = std::fs::read_to_string(site.join("server.log")).unwrap();
    assert_eq!(
        log.matches("Forbidden (CSRF cookie not set.)").count(),
        6,
        "{log}"
    );
    // Redirects followed as a browser does: /admin/ → the login form; the POST's 302 →
    // a GET of /admin/ carrying the session cookie, checked on its page.
    let follow = s.path("follow.toml");
    std::fs::write(
        &follow,
        format!(
            r#"clients = 3
csv = {:?}

[[step]]
name = "form"
once = true
path = "/admin/"
follow = true
extract.csrf = {{ regex = 'name="csrfmiddlewaretoken" value="([^"]+)"' }}
check.form = {{ status = 200, body_contains = "csrfmiddlewaretoken" }}
on_failure = "stop"

[[step]]
name = "login"
once = true
method = "POST"
path = "/admin/login/?next=/admin/"
follow = true
headers = {{ Content-Type = "application/x-www-form-urlencoded" }}
body = "csrfmiddlewaretoken={{{{csrf}}}}&username={{{{csv.username}}}}&password={{{{csv.password}}}}&next=/admin/"
check.logged_in = {{ status = 200, body_contains = "Site administration" }}
"#,
            example("django-users.csv").display().to_string()
        ),
    )
    .unwrap();
    let before = std::fs::read_to_string(site.join("server.log"))
        .unwrap()
        .len();
    let (out, doc) = load_json(
        &s,
        &[
            &url,
            "--no-tui",
            "--scenario",
            follow.to_str().unwrap(),
            "-n",
            "6",
        ],
    );
    assert_exit(&out, 0);
    assert_eq!(check(&doc, "form", "form"), (3, 0), "{}", stdout(&out));
    assert_eq!(
        check(&doc, "login", "logged_in"),
        (3, 0),
        "{}",
        stdout(&out)
    );
    let log = std::fs::read_to_string(site.join("server.log")).unwrap();
    let log = &log[before..];
    for (line, times) in [
        ("\"GET /admin/ HTTP/1.1\" 302", 3),
        ("\"GET /admin/login/?next=/admin/ HTTP/1.1\" 200", 3),
        ("\"POST /admin/login/?next=/admin/ HTTP/1.1\" 302", 3),
        ("\"GET /admin/ HTTP/1.1\" 200", 3),
    ] {
        assert_eq!(log.matches(line).count(), times, "{line} in {log}");
    }
}

#[test]
fn a_forgotten_device_re_registers_once_per_forgetting_and_pushes_again() {
    let _l = loaded();
    let s = Scratch::new();
    let tb = testbed_serving(&["--forget-rate", "0.3"]);
    let scenario = s.path("devices.toml");
    std::fs::write(
        &scenario,
        r#"clients = 40

[[step]]
name = "register"
once = true
method = "POST"
path = "/devices"
extract.id = { json = "$.id" }
check.created = { status = 201 }

[[step]]
name = "push"
every = "500ms"
method = "POST"
path = "/push/{{id}}"
body = '{"t": {{seq}}}'
on_failure = "restart"
"#,
    )
    .unwrap();
    let url = tb.url("");
    let (out, doc) = load_json(
        &s,
        &[
            &url,
            "--no-tui",
            "--scenario",
            scenario.to_str().unwrap(),
            "-z",
            "4s",
        ],
    );
    let stats = stats_of(&tb);
    let n = |v: &serde_json::Value| v.as_u64().unwrap();
    let steps = doc["summary"]["steps"].as_array().unwrap();
    let restarts = n(&steps[1]["flow"]["restarts"]);
    let forgotten = n(&stats["forgotten"]);
    assert!(
        forgotten >= 5,
        "a 0.3 share of 40 devices and more: {stats}"
    );
    // Each 404 (a push for a forgotten id) made its device register again, at once.
    assert_eq!(
        restarts,
        n(&stats["not_found"]),
        "{}\n{stats}",
        stdout(&out)
    );
    assert_eq!(n(&stats["registers"]), 40 + restarts, "{stats}");
    // Every forgotten registration was re-registered, but those forgotten too late to
    // push again: the devices the server does not know at the end.
    let unknown_at_end = 40 - n(&stats["registered"]);
    assert_eq!(
        forgotten,
        restarts + unknown_at_end,
        "{}\n{stats}",
        stdout(&out)
    );
    assert!(
        unknown_at_end <= forgotten / 2 + 2,
        "re-registered within a period: {stats}"
    );
    assert_eq!(check(&doc, "register", "created"), (40 + restarts, 0));
    assert_has(
        &stdout(&out),
        &format!("{restarts} flows started again (on_failure = restart)"),
    );
    // The summary's failures are exactly those 404s.
    assert_eq!(doc["summary"]["by_status"]["404"], restarts);
}

#[test]
fn a_bad_flow_is_refused_before_the_run_at_its_line_and_column() {
    let s = Scratch::new();
    let cases: &[(&str, &str)] = &[
        (
            "clients = 1\n[[step]]\nonce = true\npath = \"/me\"\nheaders = { Authorization = \"Bearer {{token}}\" }\n",
            ":5:37: unknown placeholder '{{token}}' (expected {{client}}, {{seq}}, {{random N}}, {{uuid}}, {{now_ms}}, {{env.NAME}}, {{csv.COLUMN}} or a variable of the flow: it has none)",
        ),
        (
            "clients = 1\n[[step]]\nonce = true\npath = \"/login\"\nextract.token = { json = \"token\" }\n",
            ":5:17: extract.token: 'token' is not a JSON path: it starts with $",
        ),
        (
            "clients = 1\n[[step]]\nonce = true\npath = \"/\"\nextract.t = { regex = \"(a\" }\n",
            ":5:13: extract.t: regex '(a'",
        ),
        (
            "clients = 1\n[[step]]\nweight = 1\npath = \"/\"\non_failure = \"restart\"\n",
            ":5:14: step 'step 1': on_failure = \"restart\" starts the client's flow again from its first once step, and this scenario has none",
        ),
        (
            "clients = 1\n[[step]]\nonce = true\npath = \"/\"\ncheck.x = { latency = \"1s\", json_exists = [\"$.items[?(@.a)]\"] }\n",
            ":5:11: check.x: '$.items[?(@.a)]'",
        ),
        (
            "clients = 1\n[[step]]\nonce = true\npath = \"/\"\nthink = \"3s..1s\"\n",
            ":5:9: think = \"3s..1s\": the range runs from the shorter pause to the longer",
        ),
        (
            "[sessions]\nrate = 5\n[[step]]\nweight = 2\npath = \"/\"\n",
            ":4:10: step 'step 1': weight: with [sessions] each session runs every step once, in file order",
        ),
        (
            "clients = 2\n[sessions]\nrate = 5\n[[step]]\npath = \"/\"\n",
            ":1:11: clients: with [sessions] new sessions arrive at its rate",
        ),
    ];
    for (i, (text, said)) in cases.iter().enumerate() {
        let file = s.path(&format!("bad{i}.toml"));
        std::fs::write(&file, text).unwrap();
        let out = s.run(&[
            "load",
            "http://127.0.0.1:9",
            "--scenario",
            file.to_str().unwrap(),
            "-z",
            "1s",
        ]);
        assert_exit(&out, 2);
        assert_has(&stderr(&out), &format!("bad{i}.toml{said}"));
    }
}

#[test]
fn rows_are_handed_out_once_each_and_a_paced_step_keeps_its_pace() {
    let _l = loaded();
    let s = Scratch::new();
    let tb = testbed_serving(&[]);
    std::fs::write(s.path("devices.csv"), "serial\nA1\nB2\nC3\n").unwrap();
    let scenario = s.path("feed.toml");
    std::fs::write(
        &scenario,
        r#"clients = 5
csv = "devices.csv"
csv_order = "unique"

[[step]]
name = "register"
once = true
method = "POST"
path = "/register"
body = '{"id": "{{csv.serial}}"}'
check.new = { status = 201 }

[[step]]
name = "push"
weight = 1
pace = "500ms"
method = "POST"
path = "/push/{{csv.serial}}"
body = "x"
"#,
    )
    .unwrap();
    let url = tb.url("");
    let (out, doc) = load_json(
        &s,
        &[
            &url,
            "--no-tui",
            "--scenario",
            scenario.to_str().unwrap(),
            "-z",
            "2s",
        ],
    );
    assert_exit(&out, 0);
    // Three rows for five clients: three registered, each a row of its own (a second
    // registration of a serial would answer 200, failing the check); two found none.
    assert_eq!(check(&doc, "register", "new"), (3, 0), "{}", stdout(&out));
    assert_eq!(
        doc["summary"]["steps"][0]["flow"]["exhausted"],
        2,
        "{}",
        stdout(&out)
    );
    assert_has(
        &stdout(&out),
        "2 clients found no row left (csv_order = unique)",
    );
    // Three clients pushing at most once per 500 ms for 2 s: 4 pushes each at most
    // (without the pace, thousands).
    let pushes = doc["summary"]["steps"][1]["sent"].as_u64().unwrap();
    assert!(
        (9..=12).contains(&pushes),
        "{pushes} pushes: {}",
        stdout(&out)
    );
}

#[test]
fn stages_bring_clients_in_and_out_and_end_the_run() {
    let _l = loaded();
    let s = Scratch::new();
    let tb = testbed_serving(&[]);
    let scenario = s.path("stages.toml");
    std::fs::write(
        &scenario,
        r#"stages = [{ to = 10, over = "1s" }, { hold = "1s" }, { to = 0, over = "1s" }]

[[step]]
name = "health"
weight = 1
pace = "100ms"
path = "/health"
"#,
    )
    .unwrap();
    let url = tb.url("");
    let t = std::time::Instant::now();
    let (out, doc) = load_json(
        &s,
        &[&url, "--no-tui", "--scenario", scenario.to_str().unwrap()],
    );
    assert_exit(&out, 0);
    // No -z: the stages' 3 s are the run.
    assert!(
        t.elapsed() < std::time::Duration::from_secs(8),
        "{:?}",
        t.elapsed()
    );
    // Client i is active from (i + 0.5)/10 s to 2 + (9.5 - i)/10 s, one request per
    // 100 ms: 29 - 2i requests, 200 in all.
    let sent = doc["summary"]["sent"].as_u64().unwrap();
    assert!((185..=215).contains(&sent), "{sent}: {}", stdout(&out));
    assert_has(
        &stdout(&out),
        "(10 clients in 3 stages over 3.00s, 1 step) for 3.00s",
    );
}

#[test]
fn a_script_signs_each_request_the_server_verifies_and_branches_on_a_reply_field() {
    let _l = loaded();
    let s = Scratch::new();
    let tb = testbed_serving(&["--hmac-key", "k3y"]);
    std::fs::write(
        s.path("sign.lua"),
        r#"-- Signs each body as the server expects; branches on the reply's n.
function request(r)
  if r.step == "sign" then
    r.headers["x-signature"] = strainline.hmac_sha256("k3y", r.body)
  end
end

function response(r)
  if r.step ~= "sign" then return end
  local doc = strainline.json(r.body)
  if doc == nil or doc.status ~= "ok" then return false, "signed" end
  if doc.n % 2 == 0 then r.next = "even" else r.next = "odd" end
  return true
end
"#,
    )
    .unwrap();
    let flow = |script: bool| {
        format!(
            r#"clients = 4
{}

[[step]]
name = "sign"
weight = 1000000
method = "POST"
path = "/signed"
body = '{{"client": {{{{client}}}}, "seq": {{{{seq}}}}}}'
think = "20ms"

[[step]]
name = "even"
weight = 1
path = "/health"

[[step]]
name = "odd"
weight = 1
path = "/stats"
"#,
            if script { "script = \"sign.lua\"" } else { "" }
        )
    };
    std::fs::write(s.path("signed.toml"), flow(true)).unwrap();
    std::fs::write(s.path("unsigned.toml"), flow(false)).unwrap();
    let url = tb.url("");
    let stats = || stats_of(&tb);
    // Without the hook the server refuses every request.
    let (out, doc) = load_json(
        &s,
        &[
            &url,
            "--no-tui",
            "--scenario",
            s.path("unsigned.toml").to_str().unwrap(),
            "-n",
            "40",
        ],
    );
    // No request succeeded: FAILED.
    assert_exit(&out, 1);
    assert_eq!(doc["summary"]["by_status"]["401"], 40, "{}", stdout(&out));
    assert_eq!(stats()["signed"], 0);
    // With it, every signature holds, and the hook sends each client to /health after
    // an even n and to /stats after an odd one.
    let (out, doc) = load_json(
        &s,
        &[
            &url,
            "--no-tui",
            "--scenario",
            s.path("signed.toml").to_str().unwrap(),
            "-z",
            "2s",
            "--gate",
            "checks_failed = 0",
        ],
    );
    assert_exit(&out, 0);
    let st = stats();
    let n = |v: &serde_json::Value| v.as_u64().unwrap();
    let steps = doc["summary"]["steps"].as_array().unwrap();
    let (signs, even, odd) = (n(&steps[0]["ok"]), n(&steps[1]["ok"]), n(&steps[2]["ok"]));
    assert_eq!(signs, n(&st["signed"]), "{}\n{st}", stdout(&out));
    assert_eq!(
        n(&st["unsigned"]),
        40,
        "no request of the hooked run was refused: {st}"
    );
    assert!(signs >= 20, "{}", stdout(&out));
    // The hook is the check `script`: every reply passed it — shown only on the step
    // it judged (it returns nothing on the others: no verdict, no check).
    assert_eq!(
        check(&doc, "sign", "script"),
        (signs, 0),
        "{}",
        stdout(&out)
    );
    for other in &steps[1..] {
        assert!(other["checks"].is_null(), "{other}\n{}", stdout(&out));
    }
    assert!(
        !stdout(&out).contains("script (even)") && !stdout(&out).contains("script (odd)"),
        "{}",
        stdout(&out)
    );
    assert_shares_at_most_100(&stdout(&out));
    // Every sign but each client's last is followed by its branch; n runs 1..=signs.
    assert!(
        even + odd + 4 >= signs && even + odd <= signs,
        "{signs} {even} {odd}"
    );
    assert!(
        even.abs_diff(signs / 2) <= 4 && odd.abs_diff(signs - signs / 2) <= 4,
        "{signs} {even} {odd}"
    );
    // A hook that holds its worker thread (3 million Lua additions, tens of ms a call,
    // against a service time under 1 ms; 4 clients on 2 threads): the generator — its
    // script — set the pace.
    let sign = "function request(r)\n  r.headers['x-signature'] = strainline.hmac_sha256('k3y', r.body)\nend\n";
    let spin = "function response(r)\n  local n = 0\n  for i = 1, 3000000 do n = n + i end\n  if n < 0 then return false end\nend\n";
    std::fs::write(s.path("sign.lua"), format!("{sign}{spin}")).unwrap();
    let hooked = |secs: &str| {
        load_json(
            &s,
            &[
                &url,
                "--no-tui",
                "--scenario",
                s.path("signed.toml").to_str().unwrap(),
                "-z",
                secs,
                "--threads",
                "2",
            ],
        )
    };
    let (out, doc) = hooked("1s");
    let text = stdout(&out);
    assert_exit(&out, 3);
    assert_has(
        &text,
        "INVALID: the generator, not the target, was the limit",
    );
    assert_has(&text, "the script's hooks held the worker threads");
    let held = doc["summary"]["hook_seconds"].as_f64().unwrap();
    let elapsed = doc["summary"]["elapsed_seconds"].as_f64().unwrap();
    assert!(held >= 0.5 * 2.0 * elapsed, "{held} of {elapsed}\n{text}");
    // A hook failing most of its calls: the script's failures, and the run INVALID.
    std::fs::write(
        s.path("sign.lua"),
        format!("{sign}function response(r)\n  if r.random < 0.9 then error('boom') end\n  return true\nend\n"),
    )
    .unwrap();
    let (out, doc) = hooked("1s");
    let text = stdout(&out);
    assert_exit(&out, 3);
    assert_shares_at_most_100(&text);
    assert_has(&text, "the failures were the script's: ");
    assert!(!text.contains("target's answers"), "{text}");
    assert_has(&text, "the script's hooks failed ");
    let n = |v: &serde_json::Value| v.as_u64().unwrap_or(0);
    let sign = &doc["summary"]["steps"][0];
    // Its errors are the script's: one check per judged reply, none for an error.
    assert_eq!(
        n(&sign["flow"]["script_errors"]),
        n(&sign["errors"]),
        "{sign}"
    );
    assert_eq!(check(&doc, "sign", "script"), (n(&sign["ok"]), 0), "{sign}");
    // A reply failing two checks (a table's and the hook's) is one in checks_failed.
    let twice = s.path("twice.toml");
    std::fs::write(
        &twice,
        "clients = 2\nscript = \"sign.lua\"\n\n[[step]]\nname = \"sign\"\nevery = \"100ms\"\nmethod = \"POST\"\npath = \"/signed\"\ncheck.never = { body_contains = \"no such text\" }\n",
    )
    .unwrap();
    std::fs::write(
        s.path("sign.lua"),
        "function response(r)\n  return false\nend\n",
    )
    .unwrap();
    let (out, doc) = load_json(
        &s,
        &[
            &url,
            "--no-tui",
            "--scenario",
            twice.to_str().unwrap(),
            "-z",
            "1s",
            "--gate",
            "checks_failed = 0",
        ],
    );
    let sign = &doc["summary"]["steps"][0];
    let sent = n(&sign["sent"]);
    assert!(sent >= 10, "{}", stdout(&out));
    assert_eq!(n(&sign["checks_failed"]), sent, "{sign}");
    assert_has(
        &stdout(&out),
        &format!("FAILED: checks_failed = 0 (measured {sent}"),
    );
    // A script that does not compile is refused before the run, at its line.
    std::fs::write(s.path("sign.lua"), "function request(r)\n  r.path = \n").unwrap();
    let out = s.run(&[
        "load",
        &url,
        "--scenario",
        s.path("signed.toml").to_str().unwrap(),
        "-n",
        "1",
    ]);
    assert_exit(&out, 2);
    assert_has(&stderr(&out), "sign.lua:3:");
}

/// Known truth: an echo server (Python's `websockets`) sends back each message as it
/// came. A token the first step sends comes back in its echo, is extracted, and is sent
/// again by every later step: the check that reads it in their echoes passes exactly as
/// often as the step was answered, and a check no echo can pass fails as often. A step
/// reading a reply's head over WebSocket is refused before the run.
#[test]
fn a_websocket_flow_extracts_from_replies_and_checks_them() {
    let _l = loaded();
    let (_srv, port) = crate::protocols::ws_server(&[]);
    let s = Scratch::new();
    let flow = |extra: &str| {
        format!(
            r#"clients = 4

[[step]]
name = "hello"
once = true
path = "/"
body = '{{"id": "{{{{client}}}}", "token": "t{{{{client}}}}x{{{{seq}}}}"}}'
extract.token = {{ json = "$.token" }}
check.echoed = {{ json_exists = ["$.id"] }}
on_failure = "stop"

[[step]]
name = "use"
weight = 1
think = "2ms"
path = "/"
body = '{{"id": "{{{{client}}}}", "with": "{{{{token}}}}"}}'
check.carried = {{ body_matches = '"with": "t[0-9]+x[0-9]+"' }}
{extra}
"#
        )
    };
    std::fs::write(s.path("ok.toml"), flow("")).unwrap();
    std::fs::write(
        s.path("never.toml"),
        flow(r#"check.never = { json = { "$.with" = "nope" } }"#),
    )
    .unwrap();
    std::fs::write(
        s.path("head.toml"),
        flow(r#"extract.h = { header = "x-token" }"#),
    )
    .unwrap();
    let url = format!("ws://127.0.0.1:{port}/");
    let run = |file: &str| {
        load_json(
            &s,
            &[
                &url,
                "--no-tui",
                "--scenario",
                s.path(file).to_str().unwrap(),
                "-z",
                "2s",
                "--gate",
                "checks_failed = 0",
            ],
        )
    };
    let (out, doc) = run("ok.toml");
    assert_exit(&out, 0);
    let steps = doc["summary"]["steps"].as_array().unwrap();
    let n = |v: &serde_json::Value| v.as_u64().unwrap();
    assert_eq!(n(&steps[0]["ok"]), 4, "{}", stdout(&out));
    let used = n(&steps[1]["ok"]);
    assert!(used >= 40, "{}", stdout(&out));
    assert_eq!(check(&doc, "hello", "echoed"), (4, 0));
    assert_eq!(check(&doc, "use", "carried"), (used, 0), "{}", stdout(&out));
    assert_eq!(checks_row(&out, "carried", "use")[0], used.to_string());
    // A check no echo passes fails every answered message: the gate says so.
    let (out, doc) = run("never.toml");
    assert_exit(&out, 1);
    let steps = doc["summary"]["steps"].as_array().unwrap();
    let sent = n(&steps[1]["sent"]);
    assert_eq!(check(&doc, "use", "never"), (0, sent), "{}", stdout(&out));
    assert_eq!(check(&doc, "use", "carried"), (sent, 0));
    assert_has(&stdout(&out), "check:never");
    let out = s.run(&[
        "load",
        &url,
        "--no-tui",
        "--scenario",
        s.path("head.toml").to_str().unwrap(),
        "-z",
        "1s",
    ]);
    assert_exit(&out, 2);
    assert_has(&stderr(&out), "this protocol's replies are bodies alone");
}

/// Known truth: redis-server's own replies. Each client stores its name, reads it back
/// (extracted from the bulk string), has Redis ECHO it and reads a list as JSON: every
/// check passes as often as its step was answered, and the keys the server holds are the
/// clients'. A check the list cannot pass fails every answered LRANGE.
#[test]
fn a_redis_flow_reads_its_replies_as_text_and_json() {
    let _l = loaded();
    let (_srv, port) = crate::protocols::redis_server();
    let s = Scratch::new();
    let flow = |second: &str| {
        format!(
            r#"clients = 3

[[step]]
name = "set"
once = true
path = "/"
body = "SET user:{{{{client}}}} u{{{{client}}}}"
check.ok = {{ body_contains = "OK" }}

[[step]]
name = "push"
once = true
path = "/"
body = "RPUSH list:{{{{client}}}} a b"

[[step]]
name = "get"
once = true
path = "/"
body = "GET user:{{{{client}}}}"
extract.me = {{ regex = "^(u[0-9]+)$" }}
on_failure = "stop"

[[step]]
name = "echo"
weight = 1
think = "2ms"
path = "/"
body = "ECHO {{{{me}}}}"
check.same = {{ body_matches = "^u[0-9]+$" }}

[[step]]
name = "range"
weight = 1
think = "2ms"
path = "/"
body = "LRANGE list:{{{{client}}}} 0 -1"
check.list = {{ json = {{ "$[1]" = "{second}" }} }}
"#
        )
    };
    std::fs::write(s.path("ok.toml"), flow("b")).unwrap();
    std::fs::write(s.path("wrong.toml"), flow("c")).unwrap();
    let url = format!("redis://127.0.0.1:{port}");
    let run = |file: &str| {
        load_json(
            &s,
            &[
                &url,
                "--no-tui",
                "--scenario",
                s.path(file).to_str().unwrap(),
                "-z",
                "2s",
                "--gate",
                "checks_failed = 0",
            ],
        )
    };
    let (out, doc) = run("ok.toml");
    assert_exit(&out, 0);
    let steps = doc["summary"]["steps"].as_array().unwrap();
    let ok = |i: usize| steps[i]["ok"].as_u64().unwrap();
    assert_eq!(check(&doc, "set", "ok"), (3, 0), "{}", stdout(&out));
    assert!(ok(3) >= 10 && ok(4) >= 10, "{}", stdout(&out));
    assert_eq!(check(&doc, "echo", "same"), (ok(3), 0));
    assert_eq!(check(&doc, "range", "list"), (ok(4), 0));
    assert_eq!(crate::protocols::redis_cli(port, &["dbsize"]), "6");
    // The reports show each step and each check with the run's own figures.
    let r = s.run(&["report", "latest", "--markdown", "r.md", "--html", "r.html"]);
    assert_exit(&r, 0);
    let md = std::fs::read_to_string(s.path("r.md")).unwrap();
    assert_has(&md, "| check | step | passed | failed | pass rate |");
    assert_has(&md, &format!("| same | echo | {} | 0 | 100.00% |", ok(3)));
    assert_has(
        &md,
        &format!("| range | {} | {} | 0 |", steps[4]["sent"], ok(4)),
    );
    let html = std::fs::read_to_string(s.path("r.html")).unwrap();
    assert_has(
        &html,
        &format!(
            "<td>list</td><td>range</td><td>{}</td><td>0</td><td>100.00%</td>",
            ok(4)
        ),
    );
    let (out, doc) = run("wrong.toml");
    assert_exit(&out, 1);
    let steps = doc["summary"]["steps"].as_array().unwrap();
    let answered = steps[4]["sent"].as_u64().unwrap();
    assert_eq!(
        check(&doc, "range", "list"),
        (0, answered),
        "{}",
        stdout(&out)
    );
}

/// Known truth: Node's own HTTP/2 server (its http2 module, nghttp2 inside) counts the
/// requests that came with session N's cookie, its Bearer token (extracted from the
/// login's JSON) and its request id (extracted from a header): every one over HTTP/2
/// when the client keeps its cookies, none without the jar.
#[test]
fn an_http2_flow_keeps_its_cookie_and_extracts_from_json_and_headers() {
    let _l = loaded();
    let (_srv, port) = crate::protocols::node_h2_server();
    let s = Scratch::new();
    let flow = |cookies: bool| {
        format!(
            r#"clients = 5
cookies = {cookies}

[[step]]
name = "login"
once = true
method = "POST"
path = "/login"
extract.token = {{ json = "$.token" }}
extract.rid = {{ header = "x-request-id" }}
check.session = {{ status = 200, headers = ["set-cookie"] }}

[[step]]
name = "me"
weight = 1
think = "10ms"
path = "/me?rid={{{{rid}}}}"
headers = {{ Authorization = "Bearer {{{{token}}}}" }}
check.me = {{ status = 200, json_exists = ["$.user"] }}
"#
        )
    };
    std::fs::write(s.path("jar.toml"), flow(true)).unwrap();
    std::fs::write(s.path("nojar.toml"), flow(false)).unwrap();
    let base = format!("http://127.0.0.1:{port}");
    let stats = || -> serde_json::Value {
        let out = Command::new("curl")
            .args(["-s", "--http2-prior-knowledge", &format!("{base}/stats")])
            .output()
            .unwrap();
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let run = |file: &str| {
        load_json(
            &s,
            &[
                &base,
                "--http2",
                "--no-tui",
                "--scenario",
                s.path(file).to_str().unwrap(),
                "-z",
                "2s",
                "--gate",
                "checks_failed = 0",
            ],
        )
    };
    let (out, doc) = run("jar.toml");
    assert_exit(&out, 0);
    let st = stats();
    let steps = doc["summary"]["steps"].as_array().unwrap();
    let me = steps[1]["ok"].as_u64().unwrap();
    assert!(me >= 20, "{}", stdout(&out));
    assert_eq!(st["logins"], 5, "{st}");
    assert_eq!(st["me_ok"], me, "{st}\n{}", stdout(&out));
    assert_eq!(st["me_denied"], 0, "{st}");
    assert_eq!(check(&doc, "me", "me"), (me, 0));
    assert_has(&stdout(&out), "HTTP/2");
    // Without the jar the server sees no cookie: every request denied, every check failed.
    let (out, doc) = run("nojar.toml");
    assert_exit(&out, 1);
    let st = stats();
    let steps = doc["summary"]["steps"].as_array().unwrap();
    let sent = steps[1]["sent"].as_u64().unwrap();
    assert_eq!(st["me_denied"], sent, "{st}\n{}", stdout(&out));
    assert_eq!(st["me_ok"], me, "{st}");
    assert_eq!(check(&doc, "me", "me"), (0, sent));
}

/// Known truth: the open model's arrivals are the schedule's, whatever the target does.
/// Sessions at 20 a second for 3 s are 60 sessions — the testbed registered exactly 60
/// devices — although each push waits 300 ms (a closed model of a few clients would have
/// registered a few); every session that pushed pushed with the id its registration
/// gave, and the push's latency, from its intended time, holds the 300 ms.
#[test]
fn sessions_arrive_at_their_rate_whatever_the_target_does_and_run_every_step_once() {
    let _l = loaded();
    let s = Scratch::new();
    let tb = testbed_serving(&["--delay", "300ms", "--workers", "8"]);
    let scenario = s.path("sessions.toml");
    std::fs::write(
        &scenario,
        r#"[sessions]
rate = 20

[[step]]
name = "register"
method = "POST"
path = "/devices"
extract.id = { json = "$.id" }
check.created = { status = 201 }

[[step]]
name = "push"
method = "POST"
path = "/push/{{id}}"
body = '{"t": 1}'
check.pushed = { status = 200 }
"#,
    )
    .unwrap();
    let (out, doc) = load_json(
        &s,
        &[
            &tb.url(""),
            "--no-tui",
            "--scenario",
            scenario.to_str().unwrap(),
            "-z",
            "3s",
        ],
    );
    assert_exit(&out, 0);
    let stats = stats_of(&tb);
    let n = |v: &serde_json::Value| v.as_u64().unwrap();
    let steps = doc["summary"]["steps"].as_array().unwrap();
    assert_eq!(n(&stats["registers"]), 60, "{}\n{stats}", stdout(&out));
    assert_eq!(n(&steps[0]["sent"]), 60, "{}", stdout(&out));
    assert_eq!(n(&steps[0]["flow"]["sessions"]), 60);
    let pushed = n(&steps[1]["ok"]);
    assert_eq!(pushed, n(&stats["pushes"]), "{stats}");
    assert_eq!(
        n(&stats["not_found"]),
        0,
        "every push used its own session's id"
    );
    assert!(pushed >= 50, "{}", stdout(&out));
    assert_eq!(n(&steps[1]["flow"]["completed"]), pushed);
    assert!(
        n(&steps[1]["latency_us"]["p50"]) >= 300_000,
        "{}",
        stdout(&out)
    );
    assert_has(&stdout(&out), "sessions at 20 a second");
    assert_has(
        &stdout(&out),
        &format!("Sessions      60 started, {pushed} ran every step"),
    );
}

/// Known truth: grpcio's server answers Hello with the request and Many with three
/// copies of it. A device name sent by the first call comes back in its reply, is
/// extracted from the reply's JSON (decoded with the .proto) and sent by every later
/// call; their checks find it, read the reply's `grpc-status` trailer, and a stream's
/// third message. A check no echo passes fails every answered call.
#[test]
fn a_grpc_flow_uses_a_reply_field_in_the_next_call() {
    let _l = loaded();
    let (_srv, port) = crate::protocols::grpc_server(&[]);
    let s = Scratch::new();
    let proto = crate::protocols::fixture("grpc_demo.proto");
    let flow = |expect: &str| {
        format!(
            r#"clients = 3

[[step]]
name = "hello"
once = true
path = "/"
body = '{{"device": "d{{{{client}}}}-x", "seq": 1}}'
extract.device = {{ json = "$.device" }}
check.echo = {{ status = 0, headers = ["grpc-status"] }}
on_failure = "stop"

[[step]]
name = "again"
weight = 1
think = "2ms"
path = "/"
body = '{{"device": "{{{{device}}}}", "seq": {{{{seq}}}}, "temperature": 21.5}}'
check.same = {{ json = {{ "$.device" = "{expect}", "$.temperature" = 21.5 }} }}
"#
        )
    };
    let run = |file: &str, method: &str, gate: bool| {
        let url = format!("grpc://127.0.0.1:{port}/demo.Greeter/{method}?proto={proto}");
        let mut args = vec![
            url,
            "--no-tui".into(),
            "--scenario".into(),
            s.path(file).to_str().unwrap().to_string(),
            "-z".into(),
            "2s".into(),
        ];
        if gate {
            args.extend(["--gate".into(), "checks_failed = 0".into()]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        load_json(&s, &args)
    };
    // Client 0's device is d0-x: only its calls pass a check that expects d0-x, so the
    // extracted name is each client's own.
    std::fs::write(s.path("ok.toml"), flow("d0-x")).unwrap();
    let (out, doc) = run("ok.toml", "Hello", false);
    let steps = doc["summary"]["steps"].as_array().unwrap();
    let sent = steps[1]["sent"].as_u64().unwrap();
    assert!(sent >= 30, "{}", stdout(&out));
    assert_eq!(check(&doc, "hello", "echo"), (3, 0), "{}", stdout(&out));
    assert_eq!(
        steps[1]["ok"].as_u64().unwrap(),
        check(&doc, "again", "same").0
    );
    let (passed, failed) = check(&doc, "again", "same");
    assert_eq!(passed + failed, sent, "{}", stdout(&out));
    // A third of the calls are client 0's (the clients alike): 2 of 3 fail.
    let share = passed as f64 / sent as f64;
    assert!((0.2..=0.45).contains(&share), "{share}: {}", stdout(&out));
    // A stream's reply is the array of its messages: the third one's device.
    std::fs::write(
        s.path("many.toml"),
        flow("d0-x")
            .replace("json = \"$.device\"", "json = \"$[0].device\"")
            .replace("\"$.device\" = \"d0-x\"", "\"$[2].device\" = \"d0-x\"")
            .replace("\"$.temperature\"", "\"$[2].temperature\""),
    )
    .unwrap();
    let (out, doc) = run("many.toml", "Many", false);
    let (passed, failed) = check(&doc, "again", "same");
    assert!(passed > 0 && failed > 0, "{}", stdout(&out));
    assert_eq!(
        passed + failed,
        doc["summary"]["steps"][1]["sent"].as_u64().unwrap()
    );
}

/// The peak resident memory of strainline run with `args`, KiB, and its exit code. The
/// run is a child of a small Python (its `RUSAGE_CHILDREN`), not of this test process:
/// a child's `ru_maxrss` counts the memory of the process it was forked from until it
/// execs, and this one holds hundreds of MiB by the end of a full run.
fn peak_rss_kib(s: &Scratch, args: &[&str]) -> (u64, i32) {
    let wrapper = "import resource, subprocess, sys\n\
        r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode\n\
        print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n\
        sys.exit(r)\n";
    let out = Command::new("/usr/bin/python3")
        .args(["-c", wrapper, env!("CARGO_BIN_EXE_strainline"), "--store"])
        .arg(s.store())
        .args(args)
        .current_dir(s.path(""))
        .output()
        .expect("Debian's python3 (installed by `make test`)");
    let kib = stdout(&out).trim().parse().unwrap_or(u64::MAX);
    (kib, out.status.code().unwrap_or(-1))
}

#[test]
fn a_json_lines_feeder_larger_than_the_memory_cap_is_read_from_disk_row_by_row() {
    let _l = loaded();
    let s = Scratch::new();
    let tb = testbed_serving(&[]);
    // 1.2 million devices, 96 MiB: over the 64 MiB a file may hold in memory.
    let file = s.path("devices.jsonl");
    {
        use std::io::Write;
        let mut w = std::io::BufWriter::new(std::fs::File::create(&file).unwrap());
        let pad = "p".repeat(56);
        for i in 0..1_200_000u32 {
            writeln!(
                w,
                "{{\"serial\": \"S{i:07}\", \"model\": {i}, \"pad\": \"{pad}\"}}"
            )
            .unwrap();
        }
    }
    let size = std::fs::metadata(&file).unwrap().len();
    assert!(size > 90 << 20, "{size}");
    let scenario = s.path("big.toml");
    std::fs::write(
        &scenario,
        r#"clients = 4
jsonl = "devices.jsonl"
csv_order = "unique"

[[step]]
name = "register"
once = true
method = "POST"
path = "/register"
body = '{"id": "{{row.serial}}", "model": {{row.model}}}'
check.new = { status = 201 }

[[step]]
name = "again"
weight = 1
think = "20ms"
method = "POST"
path = "/register"
body = '{"id": "{{row.serial}}"}'
check.fresh = { status = 201 }
on_failure = "restart"
"#,
    )
    .unwrap();
    let out = s.run(&["check", scenario.to_str().unwrap()]);
    assert_exit(&out, 0);
    assert_has(
        &stdout(&out),
        "1200000 rows of data (read from disk as clients take them)",
    );
    let url = tb.url("");
    let json = s.path("load.json");
    let (rss, code) = peak_rss_kib(
        &s,
        &[
            "load",
            "--json",
            json.to_str().unwrap(),
            "--no-tui",
            &url,
            "--scenario",
            scenario.to_str().unwrap(),
            "-z",
            "2s",
        ],
    );
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(code, 0, "{doc}");
    // Every registration is a new serial: each `again` re-registers its row (200, its
    // check fails) and restarts the flow, which takes the next unique row (201).
    let (new, repeated) = check(&doc, "register", "new");
    assert!(new > 20 && repeated == 0, "{new} {repeated}");
    let registered = stats_of(&tb)["registered"].as_u64().unwrap_or_default();
    assert!(registered >= new, "{registered} {new}");
    eprintln!("{new} registrations, peak RSS {rss} KiB");
    // The file is not held: the generator's peak is far below its 96 MiB.
    assert!(rss < 60 << 10, "peak RSS {rss} KiB with a {size}-byte file");
}

/// Data files a careless user or a hostile author may give, each within 128 MiB of peak
/// memory (the child's `ru_maxrss`): 60 MiB of `1,2` rows (15.7 million, once 2.48 GB)
/// indexed and taken at random for a second; a one-row CSV of 200 MB and a file of
/// 300 MB without a line end (once 2.64 and 1.89 GB) refused at their line, the bound
/// named, having read 64 KiB of them. (The long files are real files of their size:
/// their first MiB written, the rest left a hole of zero bytes — the same row to the
/// reader, without writing half a GB on CI.)
#[test]
fn data_files_of_any_size_or_shape_are_read_in_bounded_memory() {
    let _l = loaded();
    let s = Scratch::new();
    let tb = testbed_serving(&[]);
    let rows = (60u64 << 20) / 4;
    {
        use std::io::Write;
        let mut w = std::io::BufWriter::new(std::fs::File::create(s.path("small.csv")).unwrap());
        w.write_all(b"a,b\n").unwrap();
        for _ in 0..rows {
            w.write_all(b"1,2\n").unwrap();
        }
    }
    let long = |name: &str, head: &[u8], size: u64| {
        let f = std::fs::File::create(s.path(name)).unwrap();
        std::io::Write::write_all(&mut &f, head).unwrap();
        std::io::Write::write_all(&mut &f, &vec![b'x'; 1 << 20]).unwrap();
        f.set_len(size).unwrap();
    };
    long("one-row.csv", b"a,b\n", 200_000_000);
    long("no-newline.csv", b"", 300_000_000);
    let scenario = |file: &str| {
        let path = s.path(&format!("{file}.toml"));
        std::fs::write(
            &path,
            format!(
                "clients = 4\ncsv = \"{file}\"\ncsv_order = \"random\"\n\n[[step]]\nname = \"push\"\nweight = 1\n\
                 method = \"POST\"\npath = \"/register\"\nbody = '{{\"id\": \"{{{{row.a}}}}{{{{row.b}}}}\"}}'\n"
            ),
        )
        .unwrap();
        path.to_str().unwrap().to_string()
    };
    let small = scenario("small.csv");
    let out = s.run(&["check", &small]);
    assert_exit(&out, 0);
    assert_has(&stdout(&out), &format!("{rows} rows of data"));
    let json = s.path("load.json");
    let started = std::time::Instant::now();
    let (rss, code) = peak_rss_kib(
        &s,
        &[
            "load",
            "--json",
            json.to_str().unwrap(),
            "--no-tui",
            &tb.url(""),
            "--scenario",
            &small,
            "-z",
            "1s",
        ],
    );
    eprintln!(
        "60 MiB of 1,2 rows: peak RSS {rss} KiB, {:?}",
        started.elapsed()
    );
    assert_eq!(code, 0);
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert!(
        doc["summary"]["steps"][0]["sent"].as_u64().unwrap() > 10,
        "{doc}"
    );
    assert!(rss < 128 << 10, "peak RSS {rss} KiB");
    for (file, line) in [("one-row.csv", 2), ("no-newline.csv", 1)] {
        let path = scenario(file);
        let out = s.run(&["check", &path]);
        assert_exit(&out, 2);
        assert_has(
            &stderr(&out),
            &format!("{file}: line {line}: a row of more than 65536 bytes (64 KiB, the most a row may hold)"),
        );
        let (rss, code) = peak_rss_kib(&s, &["check", &path]);
        eprintln!("{file}: peak RSS {rss} KiB");
        assert_eq!(code, 2);
        assert!(rss < 128 << 10, "{file}: peak RSS {rss} KiB");
    }
}

/// Session rates in stages: up to 20 a second over 1 s, held 1 s, down to 0 over 1 s —
/// the line's 10 + 20 + 10 = 40 sessions, the run ending by itself after 3 s.
#[test]
fn session_rates_in_stages_follow_their_line_and_end_the_run() {
    let _l = loaded();
    let s = Scratch::new();
    let tb = testbed_serving(&[]);
    let scenario = s.path("staged.toml");
    std::fs::write(
        &scenario,
        r#"[sessions]
stages = [{ to = 20, over = "1s" }, { hold = "1s" }, { to = 0, over = "1s" }]

[[step]]
name = "register"
method = "POST"
path = "/devices"
extract.id = { json = "$.id" }
check.created = { status = 201 }
"#,
    )
    .unwrap();
    let started = std::time::Instant::now();
    let (out, doc) = load_json(
        &s,
        &[
            &tb.url(""),
            "--no-tui",
            "--scenario",
            scenario.to_str().unwrap(),
        ],
    );
    let took = started.elapsed();
    assert_exit(&out, 0);
    let steps = doc["summary"]["steps"].as_array().unwrap();
    assert_eq!(steps[0]["flow"]["sessions"], 40, "{}", stdout(&out));
    assert_eq!(stats_of(&tb)["registers"], 40);
    assert!(took < std::time::Duration::from_secs(15), "{took:?}");
    assert_has(
        &stdout(&out),
        "sessions in 3 stages to at most 20 a second over 3.00s",
    );
    // A line that never rises is refused before the run, at its line.
    std::fs::write(
        &scenario,
        "[sessions]\nstages = [{ hold = \"1s\" }]\n[[step]]\npath = \"/\"\n",
    )
    .unwrap();
    let out = s.run(&["check", scenario.to_str().unwrap()]);
    assert_exit(&out, 2);
    assert_has(
        &stderr(&out),
        ":2:10: [sessions] stages: no stage has a rate",
    );
}

/// A loop over a group of steps: each session registers once, then pushes and reads
/// its health three times (the group's two steps, in order, three times): the testbed
/// counts exactly three pushes a session. Loops that cross are refused at their line.
#[test]
fn a_loop_runs_its_group_of_steps_its_times_in_order() {
    let _l = loaded();
    let s = Scratch::new();
    let tb = testbed_serving(&[]);
    let scenario = s.path("loop.toml");
    std::fs::write(
        &scenario,
        r#"[sessions]
rate = 10

[[step]]
name = "register"
method = "POST"
path = "/devices"
extract.id = { json = "$.id" }

[[step]]
name = "push"
method = "POST"
path = "/push/{{id}}"
body = '{"t": {{seq}}}'
check.pushed = { status = 200 }

[[step]]
name = "health"
path = "/health"
loop = { from = "push", times = 3 }
"#,
    )
    .unwrap();
    let (out, doc) = load_json(
        &s,
        &[
            &tb.url(""),
            "--no-tui",
            "--scenario",
            scenario.to_str().unwrap(),
            "-z",
            "2s",
        ],
    );
    assert_exit(&out, 0);
    let steps = doc["summary"]["steps"].as_array().unwrap();
    let n = |v: &serde_json::Value| v.as_u64().unwrap();
    let sessions = n(&steps[0]["flow"]["sessions"]);
    assert_eq!(sessions, 20, "{}", stdout(&out));
    let completed = n(&steps[2]["flow"]["completed"]);
    assert_eq!(n(&stats_of(&tb)["pushes"]), n(&steps[1]["ok"]));
    assert_eq!(
        n(&steps[1]["sent"]),
        n(&steps[2]["sent"]),
        "{}",
        stdout(&out)
    );
    // Every completed session pushed three times; one cut short by the run's end fewer.
    assert!(
        n(&steps[1]["sent"]) >= 3 * completed && n(&steps[1]["sent"]) <= 3 * sessions,
        "{}",
        stdout(&out)
    );
    assert!(completed >= 18, "{}", stdout(&out));
    std::fs::write(
        &scenario,
        "clients = 1\n[[step]]\nname = \"a\"\nonce = true\npath = \"/\"\n[[step]]\nname = \"b\"\nonce = true\npath = \"/\"\nloop = { from = \"a\", times = 2 }\n[[step]]\nname = \"c\"\nonce = true\npath = \"/\"\nloop = { from = \"b\", times = 2 }\n",
    )
    .unwrap();
    let out = s.run(&["check", scenario.to_str().unwrap()]);
    assert_exit(&out, 2);
    assert_has(
        &stderr(&out),
        ":15:8: step 'c': loop: its steps ('b' to 'c') cross another loop's ('a' to 'b'): loops must be nested or apart",
    );
}

/// Known truth: mosquitto carries the messages, and a device registry made of
/// mosquitto's own clients (mosquitto_sub piped into mosquitto_pub) answers each
/// registration on `reg/C` with `{"id": "srv-N-C"}` on `ack/C`, N its count. Each
/// client registers once (request, then the reply on its reply topic), extracts the id
/// the registry gave it, and pushes under it; a capture of every push, taken by another
/// mosquitto_sub, holds exactly the ids the registry gave, each under its own client.
#[test]
fn an_mqtt_flow_registers_by_request_and_reply_then_pushes_under_the_id_it_was_given() {
    let _l = loaded();
    let s = Scratch::new();
    let (_broker, port) = crate::protocols::mosquitto(&s, "allow_anonymous true");
    let registry = format!(
        "n=0; mosquitto_sub -p {port} -t 'reg/+' -v | while read -r topic msg; do \
         n=$((n+1)); c=${{topic#reg/}}; \
         mosquitto_pub -p {port} -t \"ack/$c\" -m \"{{\\\"id\\\": \\\"srv-$n-$c\\\"}}\"; \
         echo \"$c srv-$n-$c\" >> {log}; done",
        log = s.path("registered.txt").display()
    );
    let mut sh = Command::new("sh");
    sh.args(["-c", &registry]);
    let _registry = KillGroupOnDrop::spawn(sh);
    let capture = s.path("pushes.txt");
    let mut sub = Command::new("sh");
    sub.arg("-c").arg(format!(
        "exec mosquitto_sub -p {port} -t 'push/#' -v > {}",
        capture.display()
    ));
    let _capture = KillGroupOnDrop::spawn(sub);
    // Both subscribed before the run (mosquitto_sub connects in milliseconds).
    std::thread::sleep(std::time::Duration::from_millis(500));
    std::fs::write(
        s.path("flow.toml"),
        r#"clients = 3

[[step]]
name = "register"
once = true
path = "/reg/{{client}}?reply=ack/{{client}}"
body = '{"device": {{client}}}'
extract.id = { json = "$.id" }
check.given = { json_exists = ["$.id"] }
on_failure = "stop"

[[step]]
name = "push"
weight = 1
think = "20ms"
path = "/push/{{id}}"
body = '{"id": "{{id}}", "seq": {{seq}}}'
"#,
    )
    .unwrap();
    let url = format!("mqtt://127.0.0.1:{port}/unused?qos=1");
    let (out, doc) = load_json(
        &s,
        &[
            &url,
            "--no-tui",
            "--scenario",
            s.path("flow.toml").to_str().unwrap(),
            "-z",
            "2s",
            "--gate",
            "checks_failed = 0",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert_eq!(check(&doc, "register", "given"), (3, 0), "{}", stdout(&out));
    let steps = doc["summary"]["steps"].as_array().unwrap();
    let pushed = steps[1]["ok"].as_u64().unwrap();
    assert!(pushed >= 30, "{}", stdout(&out));
    std::thread::sleep(std::time::Duration::from_millis(300));
    // What the registry gave: one id per client.
    let given: std::collections::HashMap<String, String> =
        std::fs::read_to_string(s.path("registered.txt"))
            .unwrap()
            .lines()
            .filter_map(|l| l.split_once(' '))
            .map(|(c, id)| (c.to_string(), id.to_string()))
            .collect();
    assert_eq!(given.len(), 3, "{given:?}");
    // Every push the broker carried is under an id the registry gave, with that id in
    // its body, and every acknowledged push is there.
    let pushes = std::fs::read_to_string(&capture).unwrap();
    let mut seen = std::collections::HashSet::new();
    for line in pushes.lines() {
        let (topic, body) = line.split_once(' ').unwrap();
        let id = topic.strip_prefix("push/").unwrap();
        assert!(given.values().any(|g| g == id), "{line} not in {given:?}");
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(v["id"], id, "{line}");
        seen.insert(id.to_string());
    }
    assert_eq!(seen.len(), 3, "{pushes}");
    assert_eq!(pushes.lines().count() as u64, pushed, "{}", stdout(&out));
}

/// What an MQTT step cannot do is refused before anything is sent, with the fix.
#[test]
fn an_mqtt_step_that_reads_a_reply_without_a_reply_topic_is_refused_before_the_run() {
    let s = Scratch::new();
    for (step, says) in [
        (
            "path = \"/reg/1\"\nextract.id = { json = \"$.id\" }",
            "path = \"reg/1?reply=TOPIC\"",
        ),
        (
            "path = \"/reg/1?retain=1\"",
            "the path's option 'retain=1' is not one of an MQTT step's",
        ),
    ] {
        std::fs::write(
            s.path("flow.toml"),
            format!("clients = 1\n\n[[step]]\nname = \"a\"\nweight = 1\n{step}\n"),
        )
        .unwrap();
        let out = s.run(&[
            "load",
            "mqtt://127.0.0.1:9/t",
            "--no-tui",
            "--scenario",
            s.path("flow.toml").to_str().unwrap(),
            "-z",
            "1s",
        ]);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(stderr(&out).contains(says), "{}", stderr(&out));
    }
}

/// Known truth: the testbed's job API runs each job for --job-time and fails a share
/// of them (--fail-rate), counting what its polls saw. The shipped job flow submits,
/// polls until the job is finished (`loop … until`), and checks the result: its failed
/// checks are exactly the jobs the server failed, and every finished session polled
/// until its job was finished. A job that outlasts the loop's times is counted as a loop
/// that ran its most times, once per session.
#[test]
fn a_job_flow_polls_until_each_job_is_finished_and_its_failures_are_the_server_s() {
    let _l = loaded();
    let s = Scratch::new();
    let tb = testbed_serving(&["--job-time", "60ms", "--fail-rate", "0.1"]);
    let url = tb.url("");
    let flow = example("jobs.toml");
    let (out, doc) = load_json(
        &s,
        &[
            &url,
            "--no-tui",
            "--scenario",
            flow.to_str().unwrap(),
            "-z",
            "2s",
        ],
    );
    let stats = stats_of(&tb);
    let steps = doc["summary"]["steps"].as_array().unwrap();
    let (done, failed) = check(&doc, "result", "done");
    assert_eq!(
        failed,
        stats["jobs_failed"].as_u64().unwrap(),
        "{}",
        stdout(&out)
    );
    assert!(
        done >= 60 && done <= stats["jobs_done"].as_u64().unwrap(),
        "{}",
        stdout(&out)
    );
    // Each job was polled until finished: at least twice (queued or running, then
    // finished), and never past its loop's most.
    let polls = steps[1]["sent"].as_u64().unwrap();
    assert!(polls >= 2 * (done + failed), "{polls}: {}", stdout(&out));
    assert!(
        steps[1]["flow"].get("loops_exhausted").is_none(),
        "{}",
        steps[1]
    );
    // Jobs that take a minute: every poll loop runs its 50 times and is counted.
    let tb = testbed_serving(&["--job-time", "60s"]);
    let url = tb.url("");
    std::fs::write(
        s.path("slow.toml"),
        std::fs::read_to_string(&flow)
            .unwrap()
            .replace("times = 50", "times = 5"),
    )
    .unwrap();
    let (out, doc) = load_json(
        &s,
        &[
            &url,
            "--no-tui",
            "--scenario",
            s.path("slow.toml").to_str().unwrap(),
            "-z",
            "1s",
        ],
    );
    let steps = doc["summary"]["steps"].as_array().unwrap();
    let results = steps[2]["sent"].as_u64().unwrap();
    assert!(results >= 20, "{}", stdout(&out));
    // Once per session whose loop ended (one cut by the run's end in the poll's last
    // think time reaches no result).
    let exhausted = steps[1]["flow"]["loops_exhausted"].as_u64().unwrap();
    assert!(
        (results..=results + 2).contains(&exhausted),
        "{exhausted}: {}",
        stdout(&out)
    );
    assert_eq!(check(&doc, "result", "done"), (0, results));
    assert!(
        stdout(&out).contains("loops ran their most times without their until condition"),
        "{}",
        stdout(&out)
    );
}

/// Known truth: 4 clients whose two steps are both `once` send 8 requests and are done.
/// Given `-z 5s`, the run still ends when they are (`once` means once), says so before
/// the run and in its header, and shows no offered rate (`once` steps set none) — no
/// share of a meaningless offer, none over 100%.
#[test]
fn once_only_clients_run_their_steps_once_and_say_the_run_ends_when_they_are_done() {
    let _l = loaded();
    let s = Scratch::new();
    let tb = testbed_serving(&[]);
    let scenario = s.path("once.toml");
    std::fs::write(
        &scenario,
        "clients = 4\n\n[[step]]\nname = \"health\"\nonce = true\npath = \"/health\"\n\n[[step]]\nname = \"stats\"\nonce = true\npath = \"/stats\"\n",
    )
    .unwrap();
    let (out, doc) = load_json(
        &s,
        &[
            &tb.url(""),
            "--no-tui",
            "--scenario",
            scenario.to_str().unwrap(),
            "-z",
            "5s",
        ],
    );
    let text = stdout(&out);
    assert_exit(&out, 0);
    assert_has(
        &text,
        "each client's steps once: the run ends when they are done, within 5.00s",
    );
    assert!(!text.contains(" for 5.00s"), "{text}");
    assert_has(
        &stderr(&out),
        "every step of this scenario is a `once` step",
    );
    let n = |v: &serde_json::Value| v.as_u64().unwrap();
    for st in doc["summary"]["steps"].as_array().unwrap() {
        assert_eq!(n(&st["sent"]), 4, "{st}");
    }
    assert!(
        doc["summary"]["elapsed_seconds"].as_f64().unwrap() < 4.0,
        "{text}"
    );
    assert!(doc["summary"]["offered_rate"].is_null(), "{text}");
    let throughput = text.lines().find(|l| l.contains("Throughput")).unwrap();
    assert!(!throughput.contains("offered"), "{throughput}");
    assert_shares_at_most_100(&text);
}
