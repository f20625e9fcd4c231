//! The architecture, checked: which top-level module may use which. Reads every source
//! file's `crate::` paths (in `use` lines, grouped imports and inline paths), and fails
//! on a path that points up the layers, on a cycle between top-level modules, and on
//! clap outside `cli` and `commands`. The layers are drawn in `docs/design.md`. The
//! house rules that keep it easy to change are checked here too: no function is longer
//! than [`LONG`] lines, and no library signature returns `Result<_, String>` (errors
//! are `crate::Error`). A URL scheme is the protocol registry's (`load/proto/`): no code
//! outside it spells one (`"ws"`).

/// Top to bottom; a module may use its own layer's modules (without a cycle) and any
/// layer below. `main.rs` and `lib.rs` are the top and are not checked.
pub const LAYERS: &[&[&str]] = &[
    &["cli", "commands"],
    &["serve", "runner", "live"],
    &["report"],
    &["kinds"],
    &["suite"],
    &["agents"],
    &["sut", "load", "monitor", "workload", "import"],
    &["analysis", "store"],
    &[
        "os",
        "units",
        "metrics",
        "kind",
        "measure",
        "host",
        "clock",
        "located",
        "placeholders",
        "limits",
        "rng",
        "error",
        "observe",
        "logging",
    ],
];

/// Lines a function may have at most.
pub const LONG: usize = 150;

/// The functions of a source text longer than [`LONG`] lines: (name, first line, lines).
pub fn too_long(text: &str) -> Vec<(String, usize, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let Some(name) = fn_name(l) else { continue };
        let mut depth = 0i64;
        let mut opened = false;
        let mut end = None;
        for (j, l) in lines.iter().enumerate().skip(i) {
            let code = code_of(l);
            for c in code.chars() {
                match c {
                    '{' => (depth, opened) = (depth + 1, true),
                    '}' => depth -= 1,
                    _ => {}
                }
            }
            if opened && depth == 0 || !opened && code.trim_end().ends_with(';') {
                end = opened.then_some(j);
                break;
            }
        }
        let Some(end) = end else { continue };
        let len = end - i + 1;
        if len > LONG {
            out.push((name, i + 1, len));
        }
    }
    out
}

/// The name of the function a line declares, if it does.
fn fn_name(line: &str) -> Option<String> {
    let mut words = line.split_whitespace().peekable();
    while let Some(w) = words.next() {
        match w {
            "pub" | "async" | "const" | "unsafe" => continue,
            w if w.starts_with("pub(") => continue,
            "fn" => {
                let name: String = words
                    .next()?
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                return (!name.is_empty()).then_some(name);
            }
            _ => return None,
        }
    }
    None
}

/// A line without its comment and the insides of its string and char literals.
fn code_of(line: &str) -> String {
    let mut out = String::new();
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '/' if chars.peek() == Some(&'/') => break,
            '"' => {
                while let Some(c) = chars.next() {
                    match c {
                        '\\' => {
                            chars.next();
                        }
                        '"' => break,
                        _ => {}
                    }
                }
            }
            '\'' => {
                // A char literal ('{', '\''), not a lifetime ('a).
                let rest: String = chars.clone().take(3).collect();
                if rest.starts_with('\\') {
                    chars.nth(2);
                } else if rest.chars().nth(1) == Some('\'') {
                    chars.nth(1);
                }
            }
            c => out.push(c),
        }
    }
    out
}

/// The string literals of a line outside its comment, as written between the quotes
/// (escapes left as they are).
fn literals_of(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '/' if chars.peek() == Some(&'/') => break,
            '"' => {
                let mut lit = String::new();
                while let Some(c) = chars.next() {
                    match c {
                        '\\' => {
                            lit.push(c);
                            lit.extend(chars.next());
                        }
                        '"' => break,
                        c => lit.push(c),
                    }
                }
                out.push(lit);
            }
            '\'' => {
                // A char literal ('"', '\''), not a lifetime ('a).
                let rest: String = chars.clone().take(3).collect();
                if rest.starts_with('\\') {
                    chars.nth(2);
                } else if rest.chars().nth(1) == Some('\'') {
                    chars.nth(1);
                }
            }
            _ => {}
        }
    }
    out
}

/// Whether a line's code names `path` (`http::`, `Kind::Bench`) whole: not the end of
/// a longer name (`xhttp::`) nor, when it ends in a name, the start of one
/// (`Kind::BenchMark`).
fn names(code: &str, path: &str) -> bool {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    code.match_indices(path).any(|(i, _)| {
        let longer_before = code[..i].ends_with(ident);
        let longer_after = path.ends_with(ident) && code[i + path.len()..].starts_with(ident);
        !longer_before && !longer_after
    })
}

/// The lines of a source text outside its `#[cfg(test)]` items (a test module, a test
/// helper): (line number, text).
fn non_test_lines(text: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut lines = text.lines().enumerate();
    while let Some((i, l)) = lines.next() {
        if l.trim() != "#[cfg(test)]" {
            out.push((i + 1, l));
            continue;
        }
        // The item it marks: to its closing brace, or its `;` before any brace.
        let mut depth = 0i64;
        for (_, l) in lines.by_ref() {
            let code = code_of(l);
            for c in code.chars() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    _ => {}
                }
            }
            let opened = depth > 0 || code.contains('{');
            if opened && depth == 0 || !opened && code.trim_end().ends_with(';') {
                break;
            }
        }
    }
    out
}

/// The string literals of a source text's non-test code that are a URL scheme of
/// `schemes` alone (`"ws"`, not `"ws://h/"` nor a message naming one): (line, text).
pub fn scheme_literals(text: &str, schemes: &[&str]) -> Vec<(usize, String)> {
    non_test_lines(text)
        .into_iter()
        .filter(|(_, l)| literals_of(l).iter().any(|s| schemes.contains(&s.as_str())))
        .map(|(n, l)| (n, l.trim().to_string()))
        .collect()
}

/// Signatures in a source text that return `Result<…, String>`: (line, text).
pub fn string_errors(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (i, l) in text.lines().enumerate() {
        let code = code_of(l);
        let mut rest = code.as_str();
        while let Some(at) = rest.find("Result<") {
            let after = &rest[at + "Result<".len()..];
            let mut depth = 1;
            let mut end = None;
            for (k, c) in after.char_indices() {
                match c {
                    '<' => depth += 1,
                    '>' if !after[..k].ends_with('-') => {
                        depth -= 1;
                        if depth == 0 {
                            end = Some(k);
                            break;
                        }
                    }
                    _ => {}
                }
            }
            let Some(end) = end else { break };
            if after[..end].trim_end().ends_with(", String") {
                out.push((i + 1, l.trim().to_string()));
            }
            rest = &after[end..];
        }
    }
    out
}

/// The layer of a top-level module (0 is the top), if it is one.
pub fn layer(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&module))
}

/// The top-level modules a source text names through `crate::`.
pub fn uses(text: &str) -> std::collections::BTreeSet<String> {
    let mut out = std::collections::BTreeSet::new();
    let code: String = text
        .lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n");
    let mut rest = code.as_str();
    while let Some(i) = rest.find("crate::") {
        let after = &rest[i + "crate::".len()..];
        if let Some(group) = after.strip_prefix('{') {
            // `use crate::{a, b::c, d::{e, f}}`: the first name of each top-level item.
            let mut depth = 0;
            let mut item_start = true;
            let mut name = String::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        if !name.is_empty() {
                            out.insert(std::mem::take(&mut name));
                        }
                        item_start = true;
                    }
                    c if item_start && (c.is_alphanumeric() || c == '_') => name.push(c),
                    _ if item_start && !name.is_empty() => {
                        out.insert(std::mem::take(&mut name));
                        item_start = false;
                    }
                    _ => {}
                }
            }
            if !name.is_empty() {
                out.insert(name);
            }
        } else {
            let name: String = after
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                out.insert(name);
            }
        }
        rest = after;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{BTreeMap, BTreeSet};
    use std::path::Path;

    fn sources(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                sources(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }

    /// Each top-level module's `crate::` uses, from the files under `src/`.
    fn graph() -> BTreeMap<String, BTreeMap<String, Vec<String>>> {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = Vec::new();
        sources(&src, &mut files);
        let mut g: BTreeMap<String, BTreeMap<String, Vec<String>>> = BTreeMap::new();
        for f in files {
            let rel = f.strip_prefix(&src).unwrap();
            let module = rel
                .iter()
                .next()
                .unwrap()
                .to_string_lossy()
                .trim_end_matches(".rs")
                .to_string();
            if module == "main" || module == "lib" || module == "layering" {
                continue;
            }
            let text = std::fs::read_to_string(&f).unwrap();
            for used in uses(&text) {
                if used != module && layer(&used).is_some() {
                    g.entry(module.clone())
                        .or_default()
                        .entry(used)
                        .or_default()
                        .push(rel.display().to_string());
                }
            }
            if text.contains("clap::") && !matches!(module.as_str(), "cli" | "commands") {
                g.entry(module.clone())
                    .or_default()
                    .entry("clap".into())
                    .or_default()
                    .push(rel.display().to_string());
            }
        }
        g
    }

    /// Every source file under `src/`, with its path from there.
    fn files() -> Vec<(String, String)> {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut paths = Vec::new();
        sources(&src, &mut paths);
        paths
            .into_iter()
            .map(|p| {
                let rel = p.strip_prefix(&src).unwrap().display().to_string();
                (rel, std::fs::read_to_string(&p).unwrap())
            })
            .collect()
    }

    #[test]
    fn finds_a_long_function_whatever_its_doc_says() {
        let body = "    x();\n".repeat(LONG);
        let long = format!("/// Does x.\npub fn f() {{\n{body}}}\nfn g() {{ '{{'; \"}}\" }}\n");
        assert_eq!(too_long(&long), vec![("f".into(), 2, LONG + 2)]);
        let said = long.replace("/// Does x.", "/// Does x. Long because x is done often.");
        assert_eq!(too_long(&said), vec![("f".into(), 2, LONG + 2)]);
        let short = format!("fn f() {{\n{}}}\n", "    x();\n".repeat(LONG - 2));
        assert!(too_long(&short).is_empty());
    }

    #[test]
    fn functions_are_short() {
        let mut wrong = Vec::new();
        for (rel, text) in files() {
            if rel == "layering.rs" {
                continue;
            }
            for (name, line, len) in too_long(&text) {
                wrong.push(format!("{rel}:{line}: {name} is {len} lines"));
            }
        }
        assert!(
            wrong.is_empty(),
            "functions over {LONG} lines (split them along their seams):\n{}",
            wrong.join("\n")
        );
    }

    /// A registry protocol's module (`load/proto/resp.rs`) is named by the registry
    /// alone: the driver, the client seam, the spec, the suite and every other file
    /// reach it through `load::proto`, so adding one touches no file outside it.
    #[test]
    fn a_registry_protocol_is_named_only_by_the_registry() {
        let all = files();
        let modules: Vec<String> = all
            .iter()
            .filter_map(|(rel, _)| {
                // A module's file (`resp.rs`) or its folder (`http/`).
                let rest = rel.strip_prefix("load/proto/")?;
                Some(rest.split('/').next()?.trim_end_matches(".rs"))
            })
            .filter(|m| *m != "mod")
            .map(str::to_string)
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        assert!(modules.iter().any(|m| m == "resp"), "{modules:?}");
        let mut wrong = Vec::new();
        for (rel, text) in &all {
            if rel.starts_with("load/proto/") || rel == "layering.rs" {
                continue;
            }
            for m in &modules {
                // Outside `load/`, `http::` is another module's (serve's own).
                let mut named = vec![format!("proto::{m}")];
                if rel.starts_with("load/") {
                    named.push(format!("{m}::"));
                }
                // As a whole name: `ws::` but not `Rows::`.
                let names = |code: &str, n: &str| {
                    code.match_indices(n).any(|(i, _)| {
                        !code[..i]
                            .chars()
                            .next_back()
                            .is_some_and(|c| c.is_alphanumeric() || c == '_')
                    })
                };
                if text.lines().any(|l| {
                    let code = code_of(l);
                    named.iter().any(|n| names(&code, n))
                }) {
                    wrong.push(format!("{rel} names load/proto/{m}"));
                }
            }
        }
        assert!(
            wrong.is_empty(),
            "only load/proto/mod.rs may name a registry protocol:\n{}",
            wrong.join("\n")
        );
    }

    /// The driver (schedules, pools, timeouts, the cut, the recorder) reaches every
    /// protocol through the client seam (`load/client.rs`) and names none of their
    /// modules: a protocol is changed or added without touching it.
    #[test]
    fn the_driver_names_no_protocol() {
        let protocols = ["http", "h1", "h2", "ws", "grpc", "mqtt", "command", "proto"];
        let driver: Vec<(String, String)> = files()
            .into_iter()
            .filter(|(rel, _)| rel.starts_with("load/driver/"))
            .collect();
        assert!(driver.iter().any(|(rel, _)| rel == "load/driver/mod.rs"));
        let mut wrong = Vec::new();
        for (rel, text) in &driver {
            for (n, l) in text.lines().enumerate() {
                let code = code_of(l);
                // `super::http::`, `http::`, not `crate::os::http_x::` or `xhttp::`.
                if protocols.iter().any(|p| names(&code, &format!("{p}::"))) {
                    wrong.push(format!("{rel}:{}: {}", n + 1, l.trim()));
                }
            }
        }
        assert!(
            wrong.is_empty(),
            "the driver names a protocol's module (reach it through load/client.rs):\n{}",
            wrong.join("\n")
        );
    }

    /// A kind's modules (its run, `kinds/ramp.rs`; its keys, `suite/parse/kinds/ramp.rs`)
    /// name no other kind's: what kinds share lives in `kinds/load.rs`,
    /// `kinds/process.rs`, `kinds/mod.rs` and `suite/parse/kinds/mod.rs`, so a kind is
    /// changed or added without reading another.
    #[test]
    fn a_kind_names_no_other_kind() {
        let kinds: Vec<&str> = crate::kind::Kind::TESTS.iter().map(|k| k.name()).collect();
        let mut wrong = Vec::new();
        let all = files();
        // Its run (`kinds/`) and its keys (`suite/parse/kinds/`).
        for (k, rel) in kinds.iter().flat_map(|k| {
            [
                (*k, format!("kinds/{k}.rs")),
                (*k, format!("suite/parse/kinds/{k}.rs")),
            ]
        }) {
            let text = &all
                .iter()
                .find(|(r, _)| *r == rel)
                .unwrap_or_else(|| panic!("a kind's module: {rel}"))
                .1;
            for (n, l) in text.lines().enumerate() {
                let code = code_of(l);
                for other in kinds.iter().filter(|o| **o != k) {
                    if [format!("super::{other}::"), format!("kinds::{other}::")]
                        .iter()
                        .any(|p| code.contains(p.as_str()))
                    {
                        wrong.push(format!("{rel}:{}: {}", n + 1, l.trim()));
                    }
                }
            }
        }
        assert!(
            wrong.is_empty(),
            "a kind names another kind (share through kinds/load.rs, kinds/process.rs or suite/parse/kinds/mod.rs):\n{}",
            wrong.join("\n")
        );
    }

    /// Adding a kind is its row in `kind.rs`, its metrics in `metrics.rs` and its two
    /// modules (docs/design.md, "How to add a test kind", lists those four files): no
    /// other file's code names a kind's variant, so no other file changes.
    #[test]
    fn a_kind_is_its_row_its_metrics_and_its_two_modules() {
        let doc = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/design.md"),
        )
        .unwrap();
        let from = doc.find("### How to add a test kind").expect("the section");
        let section = &doc[from..];
        let section = &section[..section[4..].find("\n### ").map_or(section.len(), |i| i + 4)];
        let listed: Vec<&str> = section
            .lines()
            .filter(|l| l.chars().next().is_some_and(|c| c.is_ascii_digit()) && l.contains(". `"))
            .filter_map(|l| l.split('`').nth(1))
            .collect();
        let four = [
            "kind.rs",
            "metrics.rs",
            "suite/parse/kinds/KIND.rs",
            "kinds/KIND.rs",
        ];
        assert_eq!(listed, four, "docs/design.md's list of a kind's files");
        let all = files();
        let mut wrong = Vec::new();
        for &kind in crate::kind::Kind::TESTS {
            let (name, variant) = (kind.name(), format!("{kind:?}"));
            let own: Vec<String> = four.iter().map(|f| f.replace("KIND", name)).collect();
            for f in &own {
                assert!(all.iter().any(|(r, _)| r == f), "{name}: no {f}");
            }
            for (rel, text) in all
                .iter()
                .filter(|(r, _)| !own.contains(r) && r != "layering.rs")
            {
                for (n, l) in non_test_lines(text) {
                    let code = code_of(l);
                    let paths = ["Kind::", "Spec::", "LoadTest::", "ProcessTest::"];
                    if paths.iter().any(|p| names(&code, &format!("{p}{variant}"))) {
                        wrong.push(format!("{rel}:{n}: {}", l.trim()));
                    }
                }
            }
        }
        assert!(
            wrong.is_empty(),
            "a file beside a kind's four names it (make it a trait of its row in kind.rs):\n{}",
            wrong.join("\n")
        );
    }

    #[test]
    fn a_path_is_named_whole() {
        assert!(names("use super::http::Http;", "http::"));
        assert!(!names("use crate::xhttp::X;", "http::"));
        assert!(names("Kind::Bench => 1", "Kind::Bench"));
        assert!(!names("Kind::BenchMark", "Kind::Bench"));
        assert!(!names("MyKind::Bench", "Kind::Bench"));
    }

    #[test]
    fn finds_a_scheme_literal_outside_the_tests() {
        let text = "\
//! \"mqtt\" in a header, and // \"mqtt\" in a comment
fn kind() {
    let url = \"mqtt://h/t\"; // a URL: not a scheme alone
    let why = format!(\"give an mqtt URL\");
    let c = '\"'; let s = \"mqtt\";
    if scheme == \"grpc\" { x(\"{\") }
}
#[cfg(test)]
mod tests {
    fn t() { let _ = \"mqtt\"; }
}
#[cfg(test)]
const ALSO: &str = \"ws\";
fn after() -> &'static str { \"ws\" }
";
        let found: Vec<usize> = scheme_literals(text, &["mqtt", "grpc", "ws"])
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        assert_eq!(found, vec![5, 6, 14]);
    }

    /// A URL scheme is its protocol's: what another module needs of one (a default
    /// method, redirects, set-up requests' origin, the probe's TLS) it asks of the
    /// registry (`load::proto`), so a scheme is added or changed in `load/proto/` alone.
    #[test]
    fn schemes_are_spelled_only_in_the_registry() {
        let mut schemes: Vec<String> = crate::load::proto::prefixes()
            .map(|p| p.trim_end_matches("://").to_string())
            .collect();
        for s in [
            "http", "https", "ws", "wss", "redis", "mqtt", "mqtts", "grpc",
        ] {
            assert!(schemes.iter().any(|k| k == s), "{s} is no registry scheme");
        }
        schemes.sort();
        let schemes: Vec<&str> = schemes.iter().map(String::as_str).collect();
        let mut wrong = Vec::new();
        for (rel, text) in files() {
            if rel.starts_with("load/proto/") || rel == "layering.rs" {
                continue;
            }
            for (line, t) in scheme_literals(&text, &schemes) {
                wrong.push(format!("{rel}:{line}: {t}"));
            }
        }
        assert!(
            wrong.is_empty(),
            "a URL scheme spelled outside load/proto/ (ask the protocol registry, load::proto, what the scheme decides):\n{}",
            wrong.join("\n")
        );
    }

    #[test]
    fn errors_are_the_crate_error_not_strings() {
        assert_eq!(
            string_errors("fn f() -> Result<Vec<u8>, String> {\nfn g() -> Result<(), Error> {\nlet x: Result<HashMap<A, B>, String>;"),
            vec![
                (1, "fn f() -> Result<Vec<u8>, String> {".to_string()),
                (3, "let x: Result<HashMap<A, B>, String>;".to_string())
            ]
        );
        let mut wrong = Vec::new();
        for (rel, text) in files() {
            if rel == "layering.rs" {
                continue;
            }
            for (line, t) in string_errors(&text) {
                wrong.push(format!("{rel}:{line}: {t}"));
            }
        }
        let error = files()
            .into_iter()
            .find(|(rel, _)| rel == "error.rs")
            .expect("error.rs")
            .1;
        assert!(
            !error.contains("impl From<String> for Error") && !error.contains("impl From<&str> for Error"),
            "a message must say its category where it is returned (error::Category), not take one by default"
        );
        assert!(
            wrong.is_empty(),
            "Result<_, String> in the library (return crate::Error, which says what happened and so the exit code):\n{}",
            wrong.join("\n")
        );
    }

    #[test]
    fn reads_grouped_and_inline_paths() {
        let u = uses(
            "use crate::{a, b::c, d::{e, f}};\nlet x = crate::g::h(); // crate::comment\nuse crate::i::{j, k};",
        );
        let want: BTreeSet<String> = ["a", "b", "d", "g", "i"].map(String::from).into();
        assert_eq!(u, want);
    }

    #[test]
    fn every_module_has_a_layer() {
        for m in graph().keys() {
            assert!(
                layer(m).is_some(),
                "module '{m}' is in no layer: add it to LAYERS and docs/design.md"
            );
        }
    }

    #[test]
    fn no_module_uses_one_above_it_and_clap_stays_in_the_cli() {
        let mut wrong = Vec::new();
        for (m, used) in graph() {
            let lm = layer(&m).unwrap_or(usize::MAX);
            for (u, files) in used {
                if u == "clap" {
                    wrong.push(format!(
                        "{m} uses clap (only cli and commands may): {files:?}"
                    ));
                } else if layer(&u).is_some_and(|lu| lu < lm) {
                    wrong.push(format!(
                        "{m} (layer {lm}) uses {u} (layer {}), above it: {files:?}",
                        layer(&u).unwrap()
                    ));
                }
            }
        }
        assert!(wrong.is_empty(), "layering broken:\n{}", wrong.join("\n"));
    }

    #[test]
    fn no_cycles_between_modules() {
        let g = graph();
        // Depth-first search for a back edge.
        fn visit(
            m: &str,
            g: &BTreeMap<String, BTreeMap<String, Vec<String>>>,
            path: &mut Vec<String>,
            done: &mut BTreeSet<String>,
        ) -> Option<Vec<String>> {
            if let Some(i) = path.iter().position(|p| p == m) {
                let mut cycle = path[i..].to_vec();
                cycle.push(m.to_string());
                return Some(cycle);
            }
            if !done.insert(m.to_string()) {
                return None;
            }
            path.push(m.to_string());
            for u in g.get(m).map(|u| u.keys()).into_iter().flatten() {
                if u != "clap" {
                    if let Some(c) = visit(u, g, path, done) {
                        return Some(c);
                    }
                }
            }
            path.pop();
            None
        }
        let mut done = BTreeSet::new();
        for m in g.keys() {
            if let Some(c) = visit(m, &g, &mut Vec::new(), &mut done) {
                panic!("a cycle between modules: {}", c.join(" → "));
            }
        }
    }
}
