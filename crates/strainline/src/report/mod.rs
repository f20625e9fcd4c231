//! What people read: terminal summaries and machine-readable files.

pub mod load;
pub mod monitor;
