//! `strainline man`: man pages generated from the command line's own help (clap_mangen),
//! so that they never drift from it: strainline(1) and one page per command.

use std::path::Path;

/// Prints strainline(1), or writes it and every command's page into `dir`; `cli` is the
/// whole command line (`cli::Cli`'s clap tree).
pub fn write(cli: clap::Command, dir: Option<&Path>) -> crate::error::Result<i32> {
    let cmd = cli.name("strainline");
    let Some(dir) = dir else {
        let mut out = Vec::new();
        render(cmd, &mut out);
        use std::io::Write;
        std::io::stdout()
            .write_all(&out)
            .map_err(|e| crate::Error::environment(format!("stdout: {e}")).because(e))?;
        return Ok(crate::exit::PASSED);
    };
    std::fs::create_dir_all(dir)
        .map_err(|e| crate::Error::usage(format!("--dir {}: {e}", dir.display())).because(e))?;
    let mut pages = vec![("strainline".to_string(), cmd.clone())];
    for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
        let name = format!("strainline-{}", sub.get_name());
        let bin = format!("strainline {}", sub.get_name());
        pages.push((name.clone(), sub.clone().name(name).bin_name(bin)));
    }
    for (name, page) in pages {
        let mut out = Vec::new();
        render(page, &mut out);
        let file = dir.join(format!("{name}.1"));
        std::fs::write(&file, out).map_err(|e| crate::error::writing(&file, e))?;
        crate::os::file::share(&file).map_err(|e| crate::error::writing(&file, e))?;
    }
    println!(
        "wrote the man pages of strainline and its {} commands into {} (`man strainline` finds them when that directory is a man1 directory of your MANPATH)",
        cmd.get_subcommands().filter(|s| s.get_name() != "help").count(),
        dir.display()
    );
    Ok(crate::exit::PASSED)
}

fn render(cmd: clap::Command, out: &mut Vec<u8>) {
    clap_mangen::Man::new(cmd)
        .render(out)
        .expect("writing into memory");
}
