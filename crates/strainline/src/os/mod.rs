//! The operating system seam, a leaf every engine may use: starting and reaping
//! processes as child subreaper ([`process`]), containment units that hold a whole
//! process tree ([`unit`], on a [`cgroup`] where one can be made, with a [`guardian`]
//! for when strainline is killed) and the signals that interrupt strainline
//! ([`signals`]), the kernel's events of forks and exits ([`proc_events`]), kernel files read whole through kept descriptors ([`kfile`]), the
//! files a user names, regular and bounded ([`file`]), and secret files read by ssh's
//! rule ([`secret`]).
//! Nothing here knows about suites, load or reports.

pub mod cgroup;
pub mod file;
pub mod guardian;
pub mod kfile;
pub mod proc_events;
pub mod process;
pub mod secret;
pub mod signals;
pub mod unit;
