//! strainline: performance non-regression testing. The modules follow the pipeline:
//! `suite` (what to run) → `runner` (each case) → `kinds` (what a case does) → `sut`
//! (the system under test), `load` (the workload) and `monitor` (its process tree) →
//! `analysis` (verdicts) → `store` (results) → `report` (what people read); `os`,
//! `metrics` and `units` are leaves every layer may use. `commands` turns each
//! subcommand's arguments into domain specs. The layers are drawn in docs/design.md and
//! checked by a test (`layering`).

mod agents;
mod analysis;
pub mod cli;
mod clock;
mod commands;
mod error;
mod host;
mod import;
mod kind;
mod kinds;
#[cfg(test)]
mod layering;
mod limits;
mod live;
mod load;
mod located;
mod logging;
mod measure;
mod metrics;
mod monitor;
mod observe;
mod os;
mod placeholders;
mod report;
mod rng;
mod runner;
mod serve;
mod store;
pub mod suite;
mod sut;
mod units;
mod workload;

pub use error::{exit, Error};

/// The hidden subcommand of the guardian process (see `os::guardian`).
pub const GUARDIAN: &str = os::guardian::SUBCOMMAND;

/// Runs the guardian: stops what strainline left when it is gone.
pub fn guard() -> ! {
    os::guardian::serve()
}

/// Runs a parsed command line and returns the exit code.
pub fn run(cli: cli::Cli) -> error::Result<i32> {
    os::process::private_files();
    logging::init(
        cli.verbose,
        matches!(cli.command, cli::Command::Agent(_)),
        match cli.log_format {
            cli::LogFormat::Text => logging::Format::Text,
            cli::LogFormat::Json => logging::Format::Json,
        },
    );
    match cli.command {
        cli::Command::Monitor(args) => commands::monitor::run(&cli.store, args),
        cli::Command::Run(args) => commands::run::run(&cli.store, args),
        cli::Command::Check(args) => commands::run::check(args),
        cli::Command::Load(args) => commands::load::run(&cli.store, *args),
        cli::Command::Runs(args) => commands::runs::list(&cli.store, args),
        cli::Command::Show(args) => commands::runs::show(&cli.store, args),
        cli::Command::Report(args) => commands::report::run(&cli.store, args),
        cli::Command::Compare(args) => commands::compare::run(&cli.store, args),
        cli::Command::History(args) => commands::history::run(&cli.store, args),
        cli::Command::Demo => commands::demo::run(&cli.store),
        cli::Command::Init(args) => commands::init::run(args),
        cli::Command::Agent(args) => commands::agent::run(args),
        cli::Command::Agents(cmd) => commands::agent::agents(cmd),
        cli::Command::Workload(cmd) => commands::workload::run(cmd),
        cli::Command::Import(args) => commands::import::run(&cli.store, args),
        cli::Command::Serve(args) => commands::serve::run(&cli.store, args),
        cli::Command::Completions { shell } => {
            use clap::CommandFactory;
            let mut cmd = cli::Cli::command();
            clap_complete::generate(shell, &mut cmd, "strainline", &mut std::io::stdout());
            Ok(exit::PASSED)
        }
        cli::Command::Man { dir } => {
            use clap::CommandFactory;
            commands::man::write(cli::Cli::command(), dir.as_deref())
        }
        cli::Command::Schema { file } => commands::schema::print(file),
        cli::Command::Testbed { args } => {
            let argv0 = std::ffi::OsString::from("strainline testbed");
            strainline_testbed::fixtures::set_reinvoke_prefix(vec!["testbed".into()]);
            Ok(strainline_testbed::cli::run(
                std::iter::once(argv0).chain(args),
            ))
        }
    }
}
