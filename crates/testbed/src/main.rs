//! `strainline-testbed`: the system under test that strainline's tests, examples and
//! demo measure, and fixtures whose behaviour is known in advance.

fn main() {
    std::process::exit(strainline_testbed::cli::run(std::env::args_os()));
}
