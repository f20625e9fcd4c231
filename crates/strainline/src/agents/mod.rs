//! Load from many machines with one merged result. `strainline agent` runs on each load
//! machine ([`agent`]); the coordinator ([`coordinator`]) reaches them ([`link`]: TLS
//! with a shared token ([`auth`]), or ssh), gives each an exact slice of the one plan and
//! one start time, and merges what they stream ([`wire`]) into the outcome a run on one
//! machine would have — with each agent's own verdict on its generator kept. An agent on
//! the target's machine can also watch the target there ([`watch`]).

pub mod agent;
mod auth;
pub mod coordinator;
#[cfg(test)]
mod fuzz;
pub mod link;
pub mod session;
pub mod watch;
mod wire;

pub use auth::Token;
pub use coordinator::Fleet;
