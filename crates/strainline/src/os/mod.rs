//! The operating system seam, a leaf every engine may use: starting and reaping
//! processes as child subreaper ([`process`]), containment units that hold a whole
//! process tree ([`cgroup`]) and the signals that interrupt strainline ([`signals`]).
//! Nothing here knows about suites, load or reports.

pub mod cgroup;
pub mod process;
pub mod signals;
