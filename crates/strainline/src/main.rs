//! The `strainline` binary: parse arguments, run, map the result to an exit code.

use clap::Parser;

fn main() {
    if std::env::args_os()
        .nth(1)
        .is_some_and(|a| a == strainline::GUARDIAN)
    {
        strainline::guard();
    }
    let cli = strainline::cli::Cli::parse();
    let verbose = cli.verbose > 0;
    let code = match strainline::run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("strainline: {e}");
            // With -v, the precise errors it was made from (an I/O error's, a store's).
            for cause in e.causes().iter().filter(|_| verbose) {
                eprintln!("  caused by: {cause}");
            }
            e.exit_code()
        }
    };
    std::process::exit(code);
}
