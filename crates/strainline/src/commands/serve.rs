//! `strainline serve`: binds the page server over the store ([`crate::serve`]) and
//! answers until stopped.

use std::io::Write;

use crate::store::Location;
use clap::Args;
use std::path::PathBuf;

#[derive(Debug, Args)]
#[command(
    after_help = "The store is only read. A non-loopback address needs --token-file: \
    clients send `Authorization: Bearer TOKEN`, a browser opens http://HOST:PORT/?token=TOKEN once.\n\n\
    Examples:\n  \
    strainline serve                                  # http://127.0.0.1:8080\n  \
    strainline serve --store postgres://ci@db/perf --listen 127.0.0.1:9000\n  \
    curl -s 127.0.0.1:8080/api/v1/runs?suite=api"
)]
pub struct ServeArgs {
    /// Where to listen (HOST:PORT; port 0 picks a free one, printed at start).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8080")]
    pub listen: std::net::SocketAddr,
    /// A file whose first line is the token clients must present (required for an
    /// address other than loopback).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// The path a reverse proxy serves it under (e.g. /perf/ for
    /// https://ci.example/perf/): every link, redirect, form and API address is made
    /// under it; requests come with or without it.
    #[arg(long, value_name = "PATH", default_value = "/")]
    pub base_path: String,
}

pub fn run(location: &Location, args: ServeArgs) -> crate::error::Result<i32> {
    if let Location::Sqlite(path) = location {
        if !path.exists() {
            return Err(crate::Error::usage(format!(
                "no results store at {} (run something first, or pass --store PATH|postgres://…)",
                path.display()
            )));
        }
    }
    let token = args
        .token_file
        .as_deref()
        .map(crate::serve::read_token)
        .transpose()?;
    let server = crate::serve::bind(crate::serve::Options {
        listen: args.listen,
        store: location.clone(),
        token,
        base: crate::serve::base_path(&args.base_path)?,
    })?;
    let addr = server.local_addr()?;
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "Serving the results store at {location} on http://{addr}/ (read-only; Ctrl-C stops)"
    )?;
    out.flush()?;
    drop(out);
    server.run()
}
