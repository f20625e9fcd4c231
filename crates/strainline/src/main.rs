//! The `strainline` binary: parse arguments, run, map the result to an exit code.

use clap::Parser;

fn main() {
    let cli = strainline::cli::Cli::parse();
    let code = match strainline::run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("strainline: {e:#}");
            e.downcast_ref::<strainline::Failure>()
                .map_or(strainline::exit::USAGE, |f| f.code)
        }
    };
    std::process::exit(code);
}
