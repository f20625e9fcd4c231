//! strainline's own log: notes and warnings about a run (a rate too low for the threads
//! asked, an OTLP push that failed) and an agent's state (listening, a coordinator
//! connected, a stranger refused), written to stderr through `tracing`. What a command
//! prints as its result (summaries, tables, verdicts) is its output, not this log.
//!
//! Quiet by default: warnings only, and an agent's state (an agent is a daemon whose
//! log is all it says). `-v` adds what strainline is doing, `-vv` everything; `RUST_LOG`
//! (`strainline=debug`, `warn`, …) overrides both. `--log-format json` writes one JSON
//! object per line, for agents in pods whose logs a collector parses.

use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::prelude::*;

/// How the log is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    /// The message alone, as strainline's other stderr lines read.
    #[default]
    Text,
    /// One JSON object per line: time, level, target, message and fields.
    Json,
}

/// The level shown without `RUST_LOG`: `verbosity` is the count of `-v`; a daemon
/// (an agent) says its state at the default.
pub fn level(verbosity: u8, daemon: bool) -> LevelFilter {
    match (verbosity, daemon) {
        (0, false) => LevelFilter::WARN,
        (0, true) | (1, false) => LevelFilter::INFO,
        (1, true) => LevelFilter::DEBUG,
        _ => LevelFilter::TRACE,
    }
}

/// What is shown: `RUST_LOG` when it parses, else strainline's messages at `level`
/// (the libraries' at warnings).
fn filter(rust_log: Option<&str>, level: LevelFilter) -> Targets {
    rust_log
        .and_then(|s| s.parse::<Targets>().ok())
        .unwrap_or_else(|| {
            Targets::new()
                .with_target("strainline", level)
                .with_default(LevelFilter::WARN.min(level))
        })
}

/// Installs the log for this process (once; a second call is ignored).
pub fn init(verbosity: u8, daemon: bool, format: Format) {
    let filter = filter(
        std::env::var("RUST_LOG").ok().as_deref(),
        level(verbosity, daemon),
    );
    let layer = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(false);
    let _ = match format {
        Format::Text => tracing_subscriber::registry()
            .with(
                layer
                    .without_time()
                    .with_level(false)
                    .with_target(false)
                    .with_filter(filter),
            )
            .try_init(),
        Format::Json => tracing_subscriber::registry()
            .with(layer.json().with_filter(filter))
            .try_init(),
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing::Level;

    fn shows(t: &Targets, target: &str, level: Level) -> bool {
        t.would_enable(target, &level)
    }

    #[test]
    fn quiet_by_default_an_agent_says_its_state_and_rust_log_wins() {
        let cli = filter(None, level(0, false));
        assert!(shows(&cli, "strainline::load::spec", Level::WARN));
        assert!(!shows(&cli, "strainline::load::spec", Level::INFO));
        let agent = filter(None, level(0, true));
        assert!(shows(&agent, "strainline::agents::agent", Level::INFO));
        assert!(!shows(&agent, "strainline::agents::agent", Level::DEBUG));
        let v = filter(None, level(1, false));
        assert!(shows(&v, "strainline::runner", Level::INFO));
        assert!(
            !shows(&v, "hyper::proto", Level::INFO),
            "libraries stay at warnings"
        );
        let env = filter(Some("strainline=debug"), level(0, false));
        assert!(shows(&env, "strainline::runner", Level::DEBUG));
        // A RUST_LOG that does not parse leaves the default.
        let bad = filter(Some("strainline=loud"), level(0, false));
        assert!(!shows(&bad, "strainline::runner", Level::INFO));
    }
}
