//! strainline-testbed: a small, honest system under test for strainline, and programs
//! whose behaviour is known in advance, so that strainline's figures can be checked
//! against the truth. Also reachable as `strainline testbed …`, so that
//! `strainline demo` works from a single binary.

pub mod cli;
pub mod fixtures;
pub mod harness;
pub mod serve;
pub mod store;
