//! One module per subcommand, wiring the pipeline stages together.

pub mod compare;
pub mod demo;
pub mod history;
pub mod load;
pub mod monitor;
pub mod run;
pub mod runs;
