//! `strainline demo`: the README's main-job command. Runs a short suite on embedded
//! defaults — the bundled testbed, reached through this very binary, so it works on a
//! fresh clone — through a benchmark, a ramp to the breaking point, and a soak of a
//! healthy and a leaking build. The leaking build is meant to fail: the demo succeeds
//! when strainline catches it and passes the rest.

use crate::store::{Location, Status};

use super::run::RunArgs;
use crate::exit;
use crate::report::export;

const SUITE: &str = include_str!("../../../../examples/demo-suite.toml");

pub fn run(store: &Location) -> crate::error::Result<i32> {
    let dir = store.work_dir();
    std::fs::create_dir_all(&dir)?;
    let suite = dir.join("demo-suite.toml");
    std::fs::write(&suite, SUITE)?;
    eprintln!(
        "strainline demo: a benchmark, a ramp to the breaking point and two soaks of the bundled \
         testbed (one build leaks 4 KiB per request, and should be caught). About 40 seconds.\n"
    );
    let code = super::run::run(
        store,
        RunArgs {
            suite: suite.clone(),
            time_scale: 1.0,
            label: Some("demo".into()),
            only: None,
            vars: Vec::new(),
            report: None,
            profile: false,
            no_tui: false,
            export: Default::default(),
            agents: Default::default(),
            pairing: Default::default(),
        },
    )?;
    // The leaking build fails, as it should (`expect = "failed"` in the suite makes that
    // its pass): every case passing is the demo going as expected.
    let store = crate::store::Store::open(store)?;
    let run = store.find_run("demo")?;
    let cases = store.cases(run.id)?;
    let as_expected = !cases.is_empty() && cases.iter().all(|c| c.status == Status::Passed);
    // The HTML report is the best thing strainline makes: the demo writes it, with the
    // Markdown, and says where.
    let html = dir.join("demo-report.html");
    let markdown = dir.join("demo-report.md");
    let written = super::report::write_reports(
        &store,
        &super::report::ReportArgs {
            run: run.id.to_string(),
            formats: super::report::Formats::default()
                .with(&export::Html, html.clone())
                .with(&export::Markdown, markdown.clone()),
            versions: Vec::new(),
            by_host: false,
            label: None,
            metrics: Vec::new(),
        },
    );
    println!(
        "\n{}",
        if as_expected {
            "Demo as expected: the healthy build passed every test, the leaking build was caught."
        } else {
            "Demo NOT as expected: see the cases above."
        }
    );
    match written {
        Ok(_) => {
            let absolute = std::path::absolute(&html).unwrap_or(html.clone());
            println!(
                "\nReport: {} (Markdown: {})\n        file://{}",
                html.display(),
                markdown.display(),
                absolute.display()
            );
        }
        Err(e) => println!("\nThe report could not be written: {e}"),
    }
    println!(
        "\nTry next:\n  \
         strainline show latest                         the run again, from the results store\n  \
         strainline init --url http://127.0.0.1:8080/   a starter suite for your own service\n  \
         strainline monitor -- YOUR COMMAND             any command's whole process tree, exact peaks"
    );
    Ok(if code == exit::INTERRUPTED {
        code
    } else if as_expected {
        exit::PASSED
    } else {
        exit::FAILED
    })
}
