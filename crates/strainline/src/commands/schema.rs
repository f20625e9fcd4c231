//! `strainline schema suite|scenario`: the JSON Schema of a suite file or a scenario
//! file, derived (schemars) from the very types that read them, so that an editor's
//! completion and checking never drift from what `check` and `run` accept. The
//! repository keeps both in `schemas/`, and a test holds them equal to this output.

/// A file `strainline schema` describes.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum SchemaOf {
    /// A suite file (`strainline run`, `strainline check`).
    Suite,
    /// A scenario file (`--scenario`, a test's `scenario =`).
    Scenario,
}

/// The schema of `of`, as JSON.
pub fn of(of: SchemaOf) -> serde_json::Value {
    match of {
        SchemaOf::Suite => crate::suite::schema(),
        SchemaOf::Scenario => crate::load::scenario::schema(),
    }
}

/// Prints the schema of `file`.
pub fn print(file: SchemaOf) -> crate::error::Result<i32> {
    let text = serde_json::to_string_pretty(&of(file))?;
    println!("{text}");
    Ok(crate::exit::PASSED)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::{Path, PathBuf};

    fn root() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
    }

    /// A TOML text as the JSON a schema validates.
    fn json_of(text: &str) -> serde_json::Value {
        serde_json::to_value(text.parse::<toml::Table>().unwrap()).unwrap()
    }

    fn errors(schema: &serde_json::Value, text: &str) -> Vec<String> {
        let v = jsonschema::validator_for(schema).unwrap();
        v.iter_errors(&json_of(text))
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect()
    }

    #[test]
    fn the_repository_s_schemas_are_the_ones_the_types_make() {
        for (of, file) in [
            (SchemaOf::Suite, "suite.schema.json"),
            (SchemaOf::Scenario, "scenario.schema.json"),
        ] {
            let kept: serde_json::Value = serde_json::from_str(
                &std::fs::read_to_string(root().join("schemas").join(file)).unwrap(),
            )
            .unwrap();
            assert!(
                kept == super::of(of),
                "schemas/{file} is stale: run `strainline schema {} > schemas/{file}`",
                file.split('.').next().unwrap()
            );
        }
    }

    /// Every example names its schema on its first line (`#:schema`, for taplo / Even
    /// Better TOML) and holds to it.
    #[test]
    fn every_example_names_its_schema_and_holds_to_it() {
        let mut files = Vec::new();
        for dir in ["examples", "examples/flows"] {
            for e in std::fs::read_dir(root().join(dir)).unwrap() {
                let p = e.unwrap().path();
                if p.extension().is_some_and(|x| x == "toml") {
                    files.push(p);
                }
            }
        }
        assert!(files.len() >= 10, "{files:?}");
        for p in files {
            let text = std::fs::read_to_string(&p).unwrap();
            let named = text
                .lines()
                .next()
                .and_then(|l| l.strip_prefix("#:schema "))
                .unwrap_or_else(|| panic!("{}: no #:schema first line", p.display()));
            let schema_path = p.parent().unwrap().join(named.trim());
            let schema: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&schema_path).unwrap()).unwrap();
            let wrong = errors(&schema, &text);
            assert!(wrong.is_empty(), "{}: {wrong:?}", p.display());
        }
    }

    #[test]
    fn a_key_no_test_or_step_takes_breaks_the_schema_as_it_breaks_check() {
        let suite = of(SchemaOf::Suite);
        let ok = "[target]\ncommand = [\"x\"]\n\n[[test]]\nname = \"a\"\nkind = \"bench\"\nurl = \"http://127.0.0.1:1/\"\nduration = \"1s\"\n";
        assert_eq!(errors(&suite, ok), Vec::<String>::new());
        let e = errors(&suite, &ok.replace("duration", "duratoin"));
        assert!(e.iter().any(|e| e.contains("duratoin")), "{e:?}");
        let e = errors(&suite, &ok.replace("kind = \"bench\"\n", ""));
        assert!(e.iter().any(|e| e.contains("kind")), "{e:?}");
        // Each kind takes its own keys: a ramp's `start`, not a bench's `rate`, and a
        // crash test no workload.
        let ramp = ok
            .replace("\"bench\"", "\"ramp\"")
            .replace("duration", "step_duration");
        assert_eq!(errors(&suite, &ramp), Vec::<String>::new());
        let e = errors(&suite, &ramp.replace("step_duration = \"1s\"", "rate = 10"));
        assert!(e.iter().any(|e| e.contains("rate")), "{e:?}");
        let crash =
            "[[test]]\nname = \"c\"\nkind = \"crash\"\ncommand = [\"x\"]\nverify = [\"y\"]\n";
        assert_eq!(errors(&suite, crash), Vec::<String>::new());
        let e = errors(&suite, &format!("{crash}url = \"http://h/\"\n"));
        assert!(e.iter().any(|e| e.contains("url")), "{e:?}");
        let scenario = of(SchemaOf::Scenario);
        let flow = "clients = 2\n\n[[step]]\nname = \"poll\"\nonce = true\npath = \"/jobs/1\"\nloop = { from = \"poll\", until = { json = { \"$.status\" = \"done\" } } }\n";
        assert_eq!(errors(&scenario, flow), Vec::<String>::new());
        let e = errors(&scenario, &flow.replace("until", "untill"));
        assert!(e.iter().any(|e| e.contains("untill")), "{e:?}");
    }
}
