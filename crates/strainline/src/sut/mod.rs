//! The system under test ("SUT"; not `target/`, which is Cargo's): building it, starting
//! it, telling when it is ready, watching it, stopping it and everything it started.

pub mod lifecycle;
pub mod port;
pub mod probe;
pub mod spec;
