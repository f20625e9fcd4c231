//! `strainline demo`: the README's main-job command. Runs on embedded defaults only —
//! the bundled testbed, reached through this very binary — so it works on a fresh clone.

use std::path::Path;
use std::time::Duration;

use crate::cli::MonitorArgs;

pub fn run(store: &Path) -> anyhow::Result<i32> {
    let me = std::env::current_exe()?;
    eprintln!(
        "strainline demo: monitoring the testbed's memory profile — 20 MiB idle, a 50 ms \
         spike to 300 MiB, then a child holding 100 MiB for 1 s — sampled every 250 ms.\n\
         The spike falls between samples; the exact peak still catches it.\n"
    );
    let args = MonitorArgs {
        pid: None,
        duration: None,
        interval: Duration::from_millis(250),
        json: None,
        csv: None,
        label: Some("demo".into()),
        top: 3,
        no_cgroup: false,
        quiet: false,
        command: vec![me.into_os_string(), "testbed".into(), "memhog".into()],
    };
    let code = super::monitor::run(store, args)?;
    eprintln!(
        "\nStored in {}: list runs with `strainline runs`, see this one with `strainline show demo`.",
        store.display()
    );
    Ok(code)
}
