//! `strainline agent`: serve as a load agent (see [`crate::agents`]).

use crate::agents::{self, Token};
use crate::cli::AgentArgs;
use crate::{exit, Failure};

pub fn run(args: AgentArgs) -> anyhow::Result<i32> {
    let usage = |m: String| Failure::new(exit::USAGE, m);
    let name = args.name.clone().unwrap_or_else(|| {
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .unwrap_or_else(|_| "agent".into())
    });
    if args.stdio {
        agents::agent::serve_stdio(name).map_err(usage)?;
        return Ok(exit::PASSED);
    }
    let (Some(addr), Some(token_file)) = (&args.listen, &args.token_file) else {
        return Err(usage("give --listen ADDR --token-file FILE, or --stdio".into()).into());
    };
    let token = Token::read(token_file).map_err(usage)?;
    agents::agent::serve_listen(addr, token, name, args.once).map_err(usage)?;
    Ok(exit::PASSED)
}
