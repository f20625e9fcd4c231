//! Turning measurements into verdicts: statistics ([`stats`]), leaks ([`leak`]).

pub mod leak;
pub mod stats;
