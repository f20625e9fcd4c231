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
    let code = match strainline::run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("strainline: {e}");
            e.exit_code()
        }
    };
    std::process::exit(code);
}
