//! The load engine: schedules ([`schedule`]), the HTTP client ([`http`]), one driver for
//! every shape of load ([`driver`]), bounded-memory measurement ([`recorder`]) and the
//! generator-saturation verdict ([`verdict`]). Used by `strainline load` and, later, by
//! the test kinds of a suite.

pub mod driver;
mod h1;
pub mod http;
pub mod recorder;
pub mod scenario;
pub mod schedule;
pub mod template;
mod timer;
pub mod verdict;

pub use driver::{run, Model, Outcome, Plan, Second};
