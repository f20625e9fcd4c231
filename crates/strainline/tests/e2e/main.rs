//! End-to-end tests: the real `strainline` binary against real processes from
//! `strainline-testbed`, whose behaviour is known in advance. One test binary, to keep
//! link time down. Run through `make test`, which builds both binaries first.

mod action;
mod adversarial;
mod agents;
mod causes;
mod common;
mod compare;
mod containment;
mod daemons;
mod firsthour;
mod flows;
mod hostile;
mod import;
mod kinds;
mod layout;
mod load;
mod metrics;
mod monitor;
mod netns;
mod paired;
mod pg;
mod protocols;
mod recorded;
mod report;
mod run;
mod serve;
mod store;
mod threads;
mod verdicts;
mod workload;
