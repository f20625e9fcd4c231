//! Turning measurements into verdicts: statistics ([`stats`], [`twosample`], [`paired`]), leaks
//! ([`leak`]), version comparisons ([`comparison`]), change points across a history
//! ([`changepoint`]), how a cost grows with size ([`growth`]), the ramp's ceiling, knee and limiting factor ([`ramp`]), and the
//! shared saturation bounds ([`bounds`]), capacity ([`capacity`]) and the rounds
//! verdict ([`rounds`]), what the target's thread states name as its limit
//! ([`threads`]), and latency signatures that name their own cause ([`signatures`]).

pub mod bounds;
pub mod capacity;
pub mod changepoint;
pub mod comparison;
pub mod growth;
pub mod leak;
pub mod paired;
pub mod ramp;
pub mod rounds;
pub mod signatures;
pub mod stats;
pub mod threads;
pub mod twosample;
