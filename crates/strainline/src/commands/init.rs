//! `strainline init`: a commented starter suite for what the user points at — a URL
//! already served, a command that serves, or a benchmark binary — valid as written
//! (`strainline check` passes it), so the first suite is an edit, not a blank page.

use std::path::Path;

use crate::error::Category;
use crate::exit;
use crate::load::proto::tls_if_http;
use crate::Error;
use clap::Args;
use std::path::PathBuf;

#[derive(Debug, Args)]
#[command(
    group(clap::ArgGroup::new("what").required(true).args(["url", "serve", "harness"])),
    after_help = "Examples:\n  strainline init --url http://127.0.0.1:8080/\n  \
                  strainline init --serve \"./server --port {{port}}\" --path /health\n  \
                  strainline init --harness \"./bench_writes --iterations 1000\" -o writes.toml"
)]
pub struct InitArgs {
    /// A service already running at this URL: strainline watches the process listening on
    /// its port, and never stops it.
    #[arg(long)]
    pub url: Option<String>,
    /// A command that serves HTTP on `{{port}}` (a free port strainline picks per case).
    #[arg(long, value_name = "CMD")]
    pub serve: Option<String>,
    /// A benchmark binary that prints its results (`key=value` or JSON lines).
    #[arg(long, value_name = "CMD")]
    pub harness: Option<String>,
    /// The path the tests request with --serve (and that answers when it is ready).
    #[arg(long, value_name = "PATH")]
    pub path: Option<String>,
    /// Also write a user flow beside the suite (FILE.flow.toml: sessions arriving at a
    /// rate, each step checked, with commented examples of a login whose token the next
    /// steps carry) and a test that runs it.
    #[arg(long)]
    pub flow: bool,
    /// Where to write the suite.
    #[arg(short, long, value_name = "FILE", default_value = "strainline.toml")]
    pub output: PathBuf,
    /// Replace the file if it exists.
    #[arg(long)]
    pub force: bool,
}

/// How the user runs it, printed at the top of every suite and after writing it.
fn how_to_run(file: &str) -> String {
    let steps = [
        (
            format!("strainline check {file}"),
            "validate: every key, value, gate",
        ),
        (
            format!("strainline run {file} --time-scale 0.05"),
            "the same shape, 20x shorter: a first try",
        ),
        (
            format!("strainline run {file}"),
            "the real run (exit 0 passed, 1 failed, 3 invalid)",
        ),
        (
            "strainline report latest --html report.html".into(),
            "charts of the newest run",
        ),
        (
            "strainline compare latest~1 latest".into(),
            "this run against the one before",
        ),
    ];
    let width = steps.iter().map(|s| s.0.chars().count()).max().unwrap_or(0);
    steps
        .iter()
        .map(|(cmd, why)| format!("{cmd:<width$}  # {why}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `["a", "b c"]` as TOML.
fn toml_array(words: &[String]) -> String {
    let quoted: Vec<String> = words
        .iter()
        .map(|w| toml::Value::String(w.clone()).to_string())
        .collect();
    format!("[{}]", quoted.join(", "))
}

/// Characters that need a shell: such a command runs through `sh -c`.
fn needs_shell(cmd: &str) -> bool {
    cmd.contains(['|', '&', ';', '<', '>', '$', '`', '(', ')', '*', '?'])
}

/// Splits a command line into words, honouring single and double quotes and
/// backslashes (the subset of `sh` a command line needs). `None` on an open quote.
fn split_words(cmd: &str) -> Option<Vec<String>> {
    let (mut words, mut word, mut quote, mut started) = (Vec::new(), String::new(), None, false);
    let mut chars = cmd.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (None, '\'' | '"') => {
                quote = Some(c);
                started = true;
            }
            (Some(q), c) if c == q => quote = None,
            (None | Some('"'), '\\') => {
                word.push(chars.next()?);
                started = true;
            }
            (None, c) if c.is_whitespace() => {
                if started {
                    words.push(std::mem::take(&mut word));
                    started = false;
                }
            }
            (_, c) => {
                word.push(c);
                started = true;
            }
        }
    }
    if quote.is_some() {
        return None;
    }
    if started {
        words.push(word);
    }
    Some(words)
}

/// A command line as a target runs it: its argv, and whether it goes through `sh -c`
/// (then the argv is the whole line). The same for the probe and the suite written.
fn argv(cmd: &str) -> crate::error::Result<(Vec<String>, bool)> {
    if needs_shell(cmd) {
        return Ok((vec![cmd.to_string()], true));
    }
    let words = split_words(cmd).filter(|w| !w.is_empty()).ok_or_else(|| {
        Error::usage(format!(
            "cannot split '{cmd}' into words: an unclosed quote?"
        ))
    })?;
    Ok((words, false))
}

/// The `command = …` (and `shell = true`) lines for a command line.
fn command_lines(cmd: &str) -> crate::error::Result<String> {
    let (words, shell) = argv(cmd)?;
    Ok(if shell {
        format!(
            "command = {}\nshell = true                     # run through sh -c",
            toml_array(&words)
        )
    } else {
        format!("command = {}", toml_array(&words))
    })
}

/// The HTTP tests: a benchmark, a ramp and a soak against `url`.
fn http_tests(url: &str) -> String {
    format!(
        r#"
# How fast is it? A fixed open-model load (requests at set times, as real clients send
# them), five times: the spread says how far one run can be trusted on this machine.
[[test]]
name = "bench"
kind = "bench"
url = "{url}"
# method = "POST"                # and body = "…", headers = {{ "content-type" = "application/json" }}
rate = 100                       # requests per second
duration = "30s"
repeat = 5                       # five: enough for `strainline compare` to decide (Mann–Whitney)
gates = ["latency_p99 < 500ms", "error_rate < 1%"]

# Where does it break? The offered rate rises step by step until the SLO, the error
# budget or the throughput gives; the summary names the ceiling and what limited it.
[[test]]
name = "peak"
kind = "ramp"
url = "{url}"
start = 100
step = 100
step_duration = "10s"
max_steps = 20
slo_p99 = "500ms"

# Does it hold? A constant load while memory, file descriptors and threads are watched
# for a trend. Raise the duration to hours before a release. A leak is a trend that,
# projected over `horizon`, grows past `leak_budget`; a store or cache that is meant to
# grow (new keys, a warming cache) needs a budget for that growth.
[[test]]
name = "stability"
kind = "soak"
url = "{url}"
rate = 50
duration = "10m"
leak_budget = "10MiB"            # growth tolerated over the horizon (the default)
horizon = "24h"                  # how far the trend is projected (the default)
gates = ["leak = none", "error_rate < 1%"]
"#
    )
}

/// The user flow `--flow` writes: sessions at a rate, each requesting `path` (checked),
/// with a login whose token the next steps carry left in comments.
fn flow_scenario(path: &str) -> String {
    format!(
        r#"# A user flow written by `strainline init --flow`: what one user does, step by step.
# Sessions arrive at a rate whatever the service does (the open model), each runs every
# step once, in order, then leaves. Every key is described in docs/load.md ("User flows").
# Check it alone with `strainline check THIS_FILE`.

[sessions]
rate = 10                          # new sessions a second

# A login whose token the next steps carry (uncomment and adapt):
# [[step]]
# name = "login"
# method = "POST"
# path = "/login"
# headers = {{ Content-Type = "application/json" }}
# body = '{{"user": "u{{{{client}}}}", "password": "secret"}}'
# extract.token = {{ json = "$.token" }}       # or {{ header = "X-Token" }}, {{ cookie = "sid" }}
# check.logged_in = {{ status = 200 }}
# on_failure = "stop"                         # or "continue", "restart", {{ retry = 3 }}

[[step]]
name = "first"
path = "{path}"
# headers = {{ Authorization = "Bearer {{{{token}}}}" }}
check.answers = {{ status = 200 }}          # also body_contains, json = {{ "$.status" = "ok" }}, latency = "300ms"
think = "1s..3s"                             # a pause before the next step, as a user reads
"#
    )
}

/// The suite's test of the flow in `scenario` (a file beside it), at `base`.
fn flow_test(base: &str, scenario: &str) -> String {
    format!(
        r#"
# Do its users get through? The user flow of {scenario}: sessions arriving at its rate,
# every step checked; a failed check fails the case.
[[test]]
name = "flow"
kind = "bench"
url = "{base}"                  # the flow's paths are under it
scenario = "{scenario}"
duration = "30s"
gates = ["checks_failed = 0", "error_rate < 1%"]
"#
    )
}

/// Paths a service commonly answers; the first that answers below 400 is the one the
/// tests request when `--path` is not given.
const CANDIDATE_PATHS: [&str; 5] = ["/", "/health", "/healthz", "/ping", "/status"];

/// Starts `cmd` once on a free port (contained, stopped afterwards) and asks each
/// candidate path: the first answering below 400, with what the others answered.
fn probe(cmd: &str) -> crate::error::Result<(Option<String>, Vec<String>)> {
    use crate::suite::{Ready, TargetSpec};
    let port = crate::sut::lifecycle::free_port();
    let (command, shell) = argv(cmd)?;
    let spec = TargetSpec {
        build: None,
        command,
        attach: None,
        unwatched: None,
        host: None,
        shell,
        env: Default::default(),
        cwd: None,
        ready: Ready::Tcp("127.0.0.1:{{port}}".into()),
        ready_timeout: std::time::Duration::from_secs(30),
        stop_signal: libc::SIGTERM,
        stop_grace: std::time::Duration::from_secs(2),
    };
    let vars = std::collections::BTreeMap::from([("port".to_string(), port.to_string())]);
    let log = std::env::temp_dir().join(format!("strainline-init-{}.log", std::process::id()));
    let running = crate::sut::lifecycle::start(
        &spec,
        &vars,
        &log,
        std::time::Duration::from_millis(500),
        None,
        crate::observe::quiet(),
        &|_, _, _| Err(crate::Error::usage("init starts its target here")),
    )
    .usage_with(|e| {
        format!("--serve: started `{cmd}` on port {port} to find a path it answers, but: {e}")
    });
    let _ = std::fs::remove_file(&log);
    let running = running?;
    let mut tried = Vec::new();
    let mut found = None;
    for path in CANDIDATE_PATHS {
        let status =
            crate::sut::probe::request("GET", &format!("http://127.0.0.1:{port}{path}"), "");
        tried.push(format!(
            "{path} {}",
            status.map_or("no answer".to_string(), |s| s.to_string())
        ));
        if status.is_some_and(|s| s < 400) {
            found = Some(path.to_string());
            break;
        }
    }
    let _ = running.stop(spec.stop_signal, spec.stop_grace);
    Ok((found, tried))
}

/// The suite for `args`, and what it is for (printed after writing it).
/// The suite's text, what it tests (a sentence) and the path its tests request.
fn suite(args: &InitArgs, file: &str) -> crate::error::Result<(String, String, String)> {
    let head = |what: &str| {
        let how: String = how_to_run(file)
            .lines()
            .map(|l| format!("#   {l}\n"))
            .collect();
        format!(
            "# A starter suite written by `strainline init` for {what}.\n\
             # Edit the rates, durations and gates to your service's own; every key is\n\
             # described in docs/suites.md. Run it:\n{how}\n"
        )
    };
    if let Some(path) = args.path.as_deref().filter(|p| !p.starts_with('/')) {
        return Err(crate::Error::usage(format!(
            "--path '{path}' must start with /"
        )));
    }
    if let Some(url) = &args.url {
        let parsed = url
            .parse::<hyper::Uri>()
            .ok()
            .filter(|u| u.scheme_str().and_then(tls_if_http).is_some() && u.host().is_some())
            .ok_or_else(|| {
                Error::usage(format!(
                    "--url '{url}' is not an http(s) URL with a host (e.g. http://127.0.0.1:8080/)"
                ))
            })?;
        let tls = parsed.scheme_str().and_then(tls_if_http) == Some(true);
        let port = parsed.port_u16().unwrap_or(if tls { 443 } else { 80 });
        let mut text = format!(
            "{}\n[suite]\nname = \"{}\"\n\n\
             # The service already runs: strainline watches the process listening on port {port}\n\
             # (and its children) during each test, and never stops it.\n\
             [target]\nattach_port = {port}\nready = {}\n{}",
            head(&format!("the service at {url}")),
            suite_name(file),
            toml::Value::String(url.clone()),
            http_tests(url)
        );
        if args.flow {
            let base = format!(
                "{}://{}/",
                parsed.scheme_str().unwrap_or_default(),
                parsed.authority().map_or("", |a| a.as_str())
            );
            text.push_str(&flow_test(&base, &flow_file(file)));
        }
        return Ok((
            text,
            format!(
                "a bench, a ramp and a soak of the service at {url}, watched through port {port}"
            ),
            parsed.path().to_string(),
        ));
    }
    if let Some(cmd) = &args.serve {
        if !cmd.contains("{{port}}") {
            return Err(Error::usage(format!(
                    "--serve '{cmd}' does not take {{{{port}}}}: put {{{{port}}}} where the command \
                     takes its port (e.g. --listen 127.0.0.1:{{{{port}}}}); strainline picks a free one \
                     for each case"
                ),
            ));
        }
        // Without --path, the service is asked which of the usual paths it answers.
        let (path, probed) = match &args.path {
            Some(p) => (p.clone(), String::new()),
            None => match probe(cmd)? {
                (Some(p), tried) => (p, format!("# Probed at init: {}.\n", tried.join(", "))),
                (None, tried) => (
                    "/".to_string(),
                    format!(
                        "# FIX: probed at init, no usual path answered below 400 ({}): set\n\
                         # the url of each test (and ready) to one your service answers.\n",
                        tried.join(", ")
                    ),
                ),
            },
        };
        let url = format!("http://127.0.0.1:{{{{port}}}}{path}");
        let mut text = format!(
            "{}\n[suite]\nname = \"{}\"\n\n\
             # Started afresh for each case on a free port ({{{{port}}}}), watched with its whole\n\
             # process tree, and stopped (SIGTERM, then SIGKILL to the tree) at the end.\n\
             {probed}[target]\n{}\nready = \"{url}\"          # answered before each case starts\n\
             ready_timeout = \"30s\"\n\n\
             [logs]                           # counted per case in the target's output\n\
             errors = [\"ERROR\", \"panicked\"]\nwarnings = [\"WARN\"]\n{}",
            head(&format!("`{cmd}`")),
            suite_name(file),
            command_lines(cmd)?,
            http_tests(&url)
        );
        if args.flow {
            text.push_str(&flow_test("http://127.0.0.1:{{port}}/", &flow_file(file)));
        }
        return Ok((
            text,
            format!("a bench, a ramp and a soak of `{cmd}`, started for each case"),
            path,
        ));
    }
    if let Some(cmd) = args.harness.as_ref().filter(|_| args.flow) {
        return Err(Error::usage(format!(
            "--flow writes a user flow of HTTP requests; `{cmd}` is a benchmark binary: \
             give --url or --serve"
        )));
    }
    if let Some(cmd) = &args.harness {
        let text = format!(
            "{}\n[suite]\nname = \"{}\"\n\n\
             # Your benchmark binary, run under strainline's monitor, five times. What it\n\
             # prints as key=value numbers (`ops_per_sec=3500`) or JSON lines of numbers\n\
             # becomes metrics you can gate on; peak_rss (exact, from the kernel), cpu_avg,\n\
             # duration and exit_code are always measured.\n\
             [[test]]\nname = \"harness\"\nkind = \"harness\"\n{}\nrepeat = 5\n\
             gates = [\"exit_code = 0\"]      # e.g. add \"ops_per_sec > 1000\", \"peak_rss < 256MiB\"\n",
            head(&format!("`{cmd}`")),
            suite_name(file),
            command_lines(cmd)?
        );
        return Ok((
            text,
            format!("five runs of `{cmd}` under the monitor"),
            "/".into(),
        ));
    }
    Err(Error::usage(
        "say what to test: --url URL (a service already running), --serve CMD (a command \
         that serves on {{port}}) or --harness CMD (a benchmark binary)",
    ))
}

/// The flow's file beside the suite `file`: `strainline.toml` → `strainline.flow.toml`
/// (its name alone: a suite's scenario is read beside it).
fn flow_file(file: &str) -> String {
    let stem = Path::new(file)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "suite".into());
    format!("{stem}.flow.toml")
}

/// The suite's name: the file's stem, or for `strainline.toml` its directory's name
/// (the project it tests), as a suite without a name is called.
fn suite_name(file: &str) -> String {
    crate::suite::default_name(Path::new(file)).replace(['"', '\\'], "")
}

pub fn run(args: InitArgs) -> crate::error::Result<i32> {
    let out = &args.output;
    let file = out.display().to_string();
    if out.exists() && !args.force {
        return Err(Error::usage(format!(
            "{file} exists: give another -o FILE, or --force to replace it"
        )));
    }
    let (text, what, path) = suite(&args, &file)?;
    // The flow first: the suite reads it from beside itself.
    let flow = out.with_file_name(flow_file(&file));
    if args.flow {
        if flow.exists() && !args.force {
            return Err(Error::usage(format!(
                "{} exists: give another -o FILE, or --force to replace it",
                flow.display()
            )));
        }
        let scenario = flow_scenario(&path);
        // Re-categorised on purpose: the flow is strainline's own template, so a
        // refusal is strainline's fault, not the user's.
        crate::load::scenario::parse(&scenario, &flow).map_err(|e| {
            crate::Error::environment(format!(
                "internal error: the starter flow does not parse: {e}"
            ))
            .because(e)
        })?;
        std::fs::write(&flow, &scenario).map_err(|e| crate::error::writing(&flow, e))?;
        // A suite's files are committed and shared, as the user's umask says.
        crate::os::file::share(&flow).map_err(|e| crate::error::writing(&flow, e))?;
    }
    // What init writes must parse: a template bug is caught here, not by the user.
    // Re-categorised on purpose: the suite is strainline's own template (see above).
    crate::suite::parse(&text, out, 1.0).map_err(|e| {
        crate::Error::environment(format!(
            "internal error: the starter suite does not parse: {e}"
        ))
        .because(e)
    })?;
    std::fs::write(out, &text).map_err(|e| crate::error::writing(out, e))?;
    crate::os::file::share(out).map_err(|e| crate::error::writing(out, e))?;
    println!("Wrote {file}: {what}.\n");
    if args.flow {
        println!(
            "Wrote {}: a user flow (sessions at 10 a second, each step checked), run by the test 'flow'.\n",
            flow.display()
        );
    }
    println!("Next:\n{}", how_to_run(&file));
    Ok(exit::PASSED)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_a_command_line_as_sh_would() {
        assert_eq!(
            split_words(r#"./server --name "my app" --x 'a b' c\ d"#).unwrap(),
            vec!["./server", "--name", "my app", "--x", "a b", "c d"]
        );
        assert_eq!(split_words("a ''").unwrap(), vec!["a", ""]);
        assert!(split_words("a 'b").is_none());
        assert!(needs_shell("a | b") && needs_shell("x && y") && !needs_shell("a --b=c"));
    }
}
