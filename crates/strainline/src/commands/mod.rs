//! One module per subcommand: its flags (clap derive structs, with their help and value
//! parsers) and the wiring of the pipeline stages; `flags` holds what several share.

pub mod agent;
pub mod compare;
pub mod demo;
pub mod flags;
pub mod history;
pub mod import;
pub mod init;
pub mod load;
pub mod man;
pub mod monitor;
pub mod report;
pub mod run;
pub mod runs;
pub mod schema;
pub mod serve;
pub mod workload;

/// A closed pipe (`strainline runs | head`) ends the output quietly.
pub fn quiet_pipe(r: std::io::Result<()>) -> crate::error::Result<()> {
    match r {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => Ok(r?),
    }
}
