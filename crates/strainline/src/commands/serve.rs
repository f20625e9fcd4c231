//! `strainline serve`: binds the page server over the store ([`crate::serve`]) and
//! answers until stopped.

use std::io::Write;

use crate::cli::ServeArgs;
use crate::store::Location;

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
