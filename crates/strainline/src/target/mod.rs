//! The system under test's lifecycle: starting it, forwarding signals, reaping it and
//! making sure nothing it started outlives strainline.

pub mod lifecycle;
pub mod process;
pub mod signals;
