//! Hostile input for the suite and gate parsers, bounded and seeded (the same inputs on
//! every run): random gates built from the tokens a gate is made of and the characters
//! that broke it before (non-breaking spaces, multi-byte units), and mutations of every
//! example suite. Neither parser may panic; every error must point at a line and column.
//! Then the table of values that used to slip through, each refused with its range.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use super::{gate, parse};
use crate::metrics::Unit;

use crate::rng::Rng;

const GATE_TOKENS: &[&str] = &[
    "latency_p99",
    "error_rate",
    "peak_rss",
    "leak",
    "throughput",
    "cpu_avg",
    "x",
    "<",
    "<=",
    ">",
    ">=",
    "=",
    "==",
    "!=",
    "!",
    " ",
    "\u{a0}",
    "\u{2003}",
    "\t",
    "0",
    "1",
    "9",
    ".",
    "-",
    "+",
    "e",
    "E",
    "5e300",
    "nan",
    "inf",
    "ms",
    "µs",
    "us",
    "s",
    "m",
    "h",
    "%",
    "MiB",
    "KiB",
    "GiB",
    "B",
    "req/s",
    "/s",
    "cores",
    "clients",
    "none",
    "detected",
    "é",
    "🦀",
    "\"",
    "'",
    "\n",
    "\u{0}",
    "\u{1b}[31m",
];

const SUITE_TOKENS: &[&str] = &[
    "0",
    "-1",
    "-0.5",
    "nan",
    "inf",
    "-inf",
    "1e300",
    "18446744073709551615",
    "\"\"",
    "\"0s\"",
    "\"-1s\"",
    "\"1e300s\"",
    "[",
    "]",
    "{",
    "}",
    "{{",
    "}}",
    "{{port}}",
    "{{nope}}",
    "=",
    "\n",
    "\u{a0}",
    "[[test]]",
    "[target]",
    "kind = \"ramp\"",
    "kind = \"crash\"",
    "rate = 0",
    "duration = \"0s\"",
    "interval = \"0ms\"",
    "sizes = [0, 0, 0]",
    "matrix = { n = [] }",
    "gates = [\"\u{a0}p99 < 1ms\"]",
    "url = \"ftp://x\"",
    "'",
    "#",
    "é",
    "🦀",
];

fn gate_metrics() -> Vec<(&'static str, Unit)> {
    crate::metrics::METRICS
        .iter()
        .map(|m| (m.name, m.unit))
        .collect()
}

#[test]
fn the_gate_parser_never_panics_and_points_inside_its_text() {
    let metrics = gate_metrics();
    let mut rng = Rng::new(0x005E_ED0F_6A7E);
    for _ in 0..20_000 {
        let n = rng.index(8);
        let text: String = (0..n).map(|_| rng.pick(GATE_TOKENS)).collect();
        let r = catch_unwind(AssertUnwindSafe(|| gate::parse(&text, &metrics)));
        match r {
            Err(_) => panic!("the gate parser panicked on {text:?}"),
            Ok(Err((at, _))) => assert!(at <= text.len(), "{text:?}: offset {at}"),
            Ok(Ok(g)) => assert!(g.value.is_finite(), "{text:?}: {g:?}"),
        }
    }
}

/// `s` as a TOML basic string; non-ASCII characters written as `\u` escapes at random
/// (the decoded text is then shorter or longer than the source).
fn toml_string(rng: &mut Rng, s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\u{:04x}", c as u32))
            }
            c if !c.is_ascii() && rng.index(2) == 0 => {
                out.push_str(&format!("\\U{:08x}", c as u32))
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[test]
fn a_suite_with_random_gates_never_panics() {
    let mut rng = Rng::new(0x6A7E_5EED);
    for _ in 0..5_000 {
        let n = rng.index(8);
        let gate: String = (0..n).map(|_| rng.pick(GATE_TOKENS)).collect();
        let text = format!(
            "{HEAD}[[test]]\nname = \"t\"\nkind = \"bench\"\nurl = \"http://127.0.0.1:{{{{port}}}}/\"\ngates = [{}]\n",
            toml_string(&mut rng, &gate)
        );
        let r = catch_unwind(AssertUnwindSafe(|| parse(&text, Path::new("s.toml"), 1.0)));
        assert!(
            r.is_ok(),
            "the suite parser panicked on gate {gate:?}:\n{text}"
        );
    }
}

fn examples() -> Vec<(PathBuf, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut out: Vec<(PathBuf, String)> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .filter_map(|p| Some((p.clone(), std::fs::read_to_string(&p).ok()?)))
        .filter(|(_, t)| t.contains("[[test]]"))
        .collect();
    out.sort();
    assert!(out.len() >= 5, "the example suites: {out:?}");
    out
}

/// A char boundary of `text` at random.
fn boundary(rng: &mut Rng, text: &str) -> usize {
    let mut i = rng.index(text.len() + 1);
    while !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

#[test]
fn the_suite_parser_never_panics_on_mutated_examples() {
    let mut rng = Rng::new(0xC0FF_EE15_600D);
    for (path, original) in examples() {
        for _ in 0..600 {
            let mut text = original.clone();
            for _ in 0..1 + rng.index(3) {
                let at = boundary(&mut rng, &text);
                match rng.index(3) {
                    0 => text.insert_str(at, rng.pick(SUITE_TOKENS)),
                    1 => {
                        let end = boundary(&mut rng, &text).max(at);
                        let end = (at + (end - at).min(40)).min(text.len());
                        let mut end = end;
                        while !text.is_char_boundary(end) {
                            end -= 1;
                        }
                        text.replace_range(at..end, "");
                    }
                    _ => {
                        // A value replaced: the text after the next `=` on this line.
                        if let Some(eq) = text[at..].find('=') {
                            let from = at + eq + 1;
                            let to = text[from..].find('\n').map_or(text.len(), |n| from + n);
                            text.replace_range(from..to, &format!(" {}", rng.pick(SUITE_TOKENS)));
                        }
                    }
                }
            }
            let r = catch_unwind(AssertUnwindSafe(|| parse(&text, &path, 1.0)));
            match r {
                Err(_) => panic!(
                    "the suite parser panicked on a mutation of {}:\n{text}",
                    path.display()
                ),
                Ok(Err(e)) => assert!(
                    e.to_string().starts_with(&format!("{}:", path.display()))
                        || e.to_string().contains(".toml"),
                    "an error that names no file: {e}"
                ),
                Ok(Ok(_)) => {}
            }
        }
    }
}

const HEAD: &str = "[target]\ncommand = [\"x\"]\nready = \"http://127.0.0.1:{{port}}/\"\n";

/// The suite with one test of `kind` whose last line is `line`; the error, which must
/// point at line 8 (where `line` is) and say what to write instead.
fn refused(kind: &str, extra: &str, line: &str) -> String {
    let text = format!("{HEAD}[[test]]\nname = \"t\"\nkind = \"{kind}\"\n{extra}{line}\n");
    let at = text.lines().position(|l| l == line).unwrap() + 1;
    let e = parse(&text, Path::new("s.toml"), 1.0)
        .err()
        .unwrap_or_else(|| panic!("accepted: {line}"))
        .to_string();
    assert!(e.starts_with(&format!("s.toml:{at}:")), "{line}: {e}");
    e
}

#[test]
fn every_value_that_used_to_slip_through_is_refused_with_its_range() {
    let bench = "url = \"http://127.0.0.1:{{port}}/\"\n";
    for line in [
        "rate = 0",
        "rate = -5",
        "rate = nan",
        "rate = inf",
        "rate = 1e12",
    ] {
        let e = refused("bench", bench, line);
        assert!(e.contains("from 0.001 to 10000000 req/s"), "{e}");
    }
    for (kind, line, range) in [
        ("bench", "connections = 0", "from 1 to 100000"),
        ("bench", "threads = 100000", "from 1 to 256"),
        ("ramp", "max_steps = 0", "from 1 to 10000"),
        ("ramp", "step = 0", "from 0.001"),
        ("ramp", "max_error_rate = \"200%\"", "from 0% to 100%"),
        ("rounds", "rounds = 0", "from 2 to 100000"),
        ("rounds", "ops = 0", "from 1 to"),
        ("bench", "repeat = 0", "from 1 to 1000"),
        ("soak", "interval = \"0s\"", "from 1ms to 3600s"),
        ("ramp", "step_duration = \"0s\"", "from 1ms"),
        ("bench", "duration = \"0s\"", "from 1ms"),
        ("bench", "timeout = \"0s\"", "from 1ms"),
    ] {
        let e = refused(kind, bench, line);
        assert!(e.contains(range), "{line}: {e}");
    }
    let e = refused(
        "crash",
        "command = [\"true\"]\nverify = [\"true\"]\n",
        "iterations = 0",
    );
    assert!(e.contains("from 1 to 100000"), "{e}");
    let e = refused("scale", "command = [\"true\"]\n", "sizes = [0, 0, 0]");
    assert!(e.contains("from 1 to"), "{e}");
    let e = refused("scale", "command = [\"true\"]\n", "sizes = [5, 5, 5]");
    assert!(e.contains("two different values"), "{e}");
    let e = refused("bench", "", "url = \"ftp://127.0.0.1/\"");
    assert!(e.contains("http://"), "{e}");
    let e = refused("bench", bench, "matrix = { n = [] }");
    assert!(e.contains("no values"), "{e}");
    // The second hardening pass: each of these was accepted by `check`.
    for (line, says) in [
        ("url = \"http://127.0.0.1:99999/\"", "'99999' is not a port"),
        ("url = \"http://127.0.0.1:0/\"", "'0' is not a port"),
        ("url = \"http://@/\"", "names no host"),
        ("url = \"http://[::1/\"", "no closing ]"),
        ("url = \"http://127.0.0.1:{{port}}/a b\"", "a space"),
    ] {
        let e = refused("bench", "", line);
        assert!(e.contains(says), "{line}: {e}");
    }
    for line in [
        "method = \"\"",
        "method = \"GET POST\"",
        "method = \"G\\r\\nX: y\"",
    ] {
        let e = refused("bench", bench, line);
        assert!(e.contains("is not one HTTP method"), "{line}: {e}");
        assert!(!e.contains('\r'), "{e:?}");
    }
    let e = refused("rounds", bench, "quiesce_url = \"ftp://x\"");
    assert!(e.contains("http://"), "{e}");
    let e = refused("soak", bench, "ram = \"0MiB\"");
    assert!(e.contains("from 1.0 MiB to 64.0 TiB"), "{e}");
    let e = refused("soak", bench, "leak_budget = \"99999999999GiB\"");
    assert!(e.contains("out of range"), "{e}");
    for gate in [
        "latency_p99 >= 5e300ms",
        "latency_p99 >= -1ms",
        "error_rate < 200%",
    ] {
        let e = refused("bench", bench, &format!("gates = [\"{gate}\"]"));
        assert!(e.contains("out of range for this metric"), "{gate}: {e}");
    }
    let crash = "command = [\"true\"]\n";
    for line in ["verify = []", "verify = [\"\"]"] {
        let e = refused("crash", crash, line);
        assert!(e.contains("verify names no program"), "{e}");
    }
    let e = refused("harness", "", "command = [\"\"]");
    assert!(e.contains("command names no program"), "{e}");
    let crash = "command = [\"true\"]\nverify = [\"true\"]\n";
    let e = refused("crash", crash, "kill_after = \"1ms..1000000h\"");
    assert!(e.contains("out of range"), "{e}");
    let e = refused("crash", crash, "kill_after = \"300ms..20ms\"");
    assert!(e.contains("reversed") && e.contains("20ms..300ms"), "{e}");
    // 10 × 10 values × repeat 1000 = 10⁵ cases: refused before one is made.
    let e = refused(
        "harness",
        "command = [\"true\"]\nmatrix = { a = [1,2,3,4,5,6,7,8,9,10], b = [1,2,3,4,5,6,7,8,9,10] }\n",
        "repeat = 1000",
    );
    assert!(
        e.contains("100000 cases") && e.contains("more than 10000"),
        "{e}"
    );
    let text = format!("{HEAD}[[test]]\nname = \"t\"\nkind = \"bench\"\n{bench}");
    let ready = text.replace("http://127.0.0.1:{{port}}/\"\n[[", "tcp://\"\n[[");
    let e = parse(&ready, Path::new("s.toml"), 1.0)
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.starts_with("s.toml:3:") && e.contains("ready 'tcp://'"),
        "{e}"
    );
}
