//! The load engine: a domain spec checked into a plan ([`spec`]), schedules
//! ([`schedule`]), the protocols behind one seam ([`client`]: [`http`], a command,
//! and the registry's, [`proto`]), one driver for every shape of load
//! ([`driver`]), bounded-memory measurement ([`recorder`]), the generator-saturation
//! verdict ([`verdict`]), a scenario's own metrics ([`custom`]) and the run's own figures
//! ([`summary`]). `strainline load` and
//! the test kinds both describe load as a [`LoadSpec`]; neither reaches inside.

pub mod accounting;
pub mod client;
mod command;
pub mod custom;
pub mod driver;
pub mod feed;
pub mod flow;
mod local;
pub mod net;
mod progress;
pub mod proto;
pub mod recorder;
pub mod replay;
pub mod request;
pub mod scenario;
pub mod schedule;
pub mod script;
pub mod spec;
pub mod summary;
pub mod template;
mod timer;
pub mod verdict;

#[cfg(test)]
pub(crate) use driver::{latency_seconds, per_second};
pub use driver::{
    run, run_from, series, AgentPart, Model, Outcome, Plan, Second, Slice, StepSpans, CAUSE_PREFIX,
    LOAD_START, SECOND_LATENCY, STEP_PREFIX,
};
pub use progress::{live_with, run_live};
pub use spec::{plan, BodySpec, ClientOptions, LoadSpec, Offer, Planned, Work};
