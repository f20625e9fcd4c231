//! The testbed's command line; `main.rs` and `strainline testbed …` both call [`run`].

use std::ffi::OsString;

use clap::{Parser, Subcommand};

use crate::fixtures;

#[derive(Parser)]
#[command(
    name = "strainline-testbed",
    version,
    about = "A system under test with known behaviour, for strainline"
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Memory profile: idle at --base MiB, a short spike, then a child holding memory.
    Memhog {
        #[arg(long, default_value_t = 20)]
        base: usize,
        #[arg(long, default_value_t = 300)]
        spike: usize,
        #[arg(long, default_value_t = 50)]
        spike_ms: u64,
        #[arg(long, default_value_t = 100)]
        child: usize,
        #[arg(long, default_value_t = 1000)]
        child_ms: u64,
        #[arg(long, default_value_t = 2500)]
        total_ms: u64,
    },
    /// Hold --mib MiB resident for --ms milliseconds.
    Hold {
        #[arg(long)]
        mib: usize,
        #[arg(long)]
        ms: u64,
    },
    /// Keep one core busy for --seconds.
    Spin {
        #[arg(long, default_value_t = 2.0)]
        seconds: f64,
    },
    /// Sleep for --seconds.
    Idle {
        #[arg(long, default_value_t = 2.0)]
        seconds: f64,
    },
    /// Start --children sleeping children and wait for them.
    Forktree {
        #[arg(long, default_value_t = 50)]
        children: usize,
        #[arg(long, default_value_t = 5.0)]
        seconds: f64,
    },
    /// Leave behind a setsid daemon holding --mib MiB for --seconds, and exit at once.
    Daemonize {
        #[arg(long, default_value_t = 64)]
        mib: usize,
        #[arg(long, default_value_t = 30.0)]
        seconds: f64,
        /// How long the parent stays after starting the daemon, milliseconds.
        #[arg(long, default_value_t = 1000)]
        linger_ms: u64,
    },
}

/// Parses `args` (the first is the program name) and runs the chosen subcommand.
pub fn run<I: IntoIterator<Item = OsString>>(args: I) {
    match Cli::parse_from(args).command {
        Cmd::Memhog {
            base,
            spike,
            spike_ms,
            child,
            child_ms,
            total_ms,
        } => fixtures::memhog(base, spike, spike_ms, child, child_ms, total_ms),
        Cmd::Hold { mib, ms } => fixtures::hold(mib, ms),
        Cmd::Spin { seconds } => fixtures::spin(seconds),
        Cmd::Idle { seconds } => fixtures::idle(seconds),
        Cmd::Forktree { children, seconds } => fixtures::forktree(children, seconds),
        Cmd::Daemonize {
            mib,
            seconds,
            linger_ms,
        } => fixtures::daemonize(mib, seconds, linger_ms),
    }
}
