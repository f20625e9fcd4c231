//! Watching a process tree: which processes belong to it ([`tree`]), how to read them
//! ([`procfs`], and the cgroup of [`crate::os::cgroup`]) and how one tick becomes a sample ([`sampler`]); where its
//! CPU time goes ([`profile`]: perf stacks and flame graphs); the kernel's TCP counters
//! ([`net`]).

pub mod figures;
pub mod net;
pub mod procfs;
pub mod profile;
pub mod sampler;
pub mod stop;
pub mod threads;
pub mod tree;
pub mod watch;

pub use sampler::{Ending, Sampler, SamplerConfig};
