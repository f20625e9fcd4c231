//! One module per subcommand, wiring the pipeline stages together.

pub mod monitor;
pub mod runs;
