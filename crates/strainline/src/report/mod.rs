//! What people read: terminal summaries and machine-readable files.

pub mod compare;
pub mod load;
pub mod monitor;
