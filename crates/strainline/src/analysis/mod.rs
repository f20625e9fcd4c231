//! Turning measurements into verdicts: statistics ([`stats`], [`twosample`]), leaks
//! ([`leak`]), version comparisons ([`comparison`]) and change points across a history
//! ([`changepoint`]).

pub mod changepoint;
pub mod comparison;
pub mod leak;
pub mod stats;
pub mod twosample;
