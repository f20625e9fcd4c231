//! `strainline agent`: serve as a load agent (see [`crate::agents`]); `strainline
//! agents manifest`: the Kubernetes Job that starts agents which dial the coordinator.

use crate::agents::{self, Token};
use crate::commands::flags::parse_duration;
use crate::exit;
use clap::{Args, Subcommand};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Subcommand)]
pub enum AgentsCommand {
    /// Print a Kubernetes Indexed Job of N agents that dial the coordinator (apply it
    /// with kubectl; the token comes from a Secret you create from the token file).
    #[command(after_help = "Example:\n  \
        kubectl create secret generic strainline-agent-token --from-file=token=agent.token\n  \
        strainline agents manifest --count 3 --coordinator COORDINATOR:7461 | kubectl apply -f -\n  \
        strainline load URL -q 30000 -z 5m \\\n    \
        --agents 'listen://ADDR:7461?count=3' --agent-token-file agent.token")]
    Manifest(ManifestArgs),
}

#[derive(Debug, Args)]
pub struct ManifestArgs {
    /// Agents (the Job's completions and parallelism).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub count: u32,
    /// Where the coordinator waits for them (`--agents listen://…?count=N`), as the pods
    /// reach it.
    #[arg(long, value_name = "HOST:PORT")]
    pub coordinator: String,
    /// The container image with strainline in it.
    #[arg(long, default_value = concat!("ghcr.io/strainline/strainline:", env!("CARGO_PKG_VERSION")))]
    pub image: String,
    /// The Secret holding the token (key `token`).
    #[arg(long, default_value = "strainline-agent-token")]
    pub secret: String,
    /// The Job's name.
    #[arg(long, default_value = "strainline-agents")]
    pub name: String,
    /// CPU each agent asks for (a whole core keeps a generator's figures its own).
    #[arg(long, default_value = "1")]
    pub cpu: String,
}

#[derive(Debug, Args)]
#[command(
    group(clap::ArgGroup::new("how").required(true).args(["listen", "connect", "stdio"])),
    after_help = "Examples:\n  head -c 32 /dev/urandom | base64 > agent.token\n  \
                  strainline agent --listen ADDR:7461 --token-file agent.token\n  \
                  strainline load URL -q 30000 -z 60s \\\n    \
                  --agents tls://HOST1:7461,tls://HOST2:7461 --agent-token-file agent.token"
)]
pub struct AgentArgs {
    /// Listen for a coordinator on this address (TLS; the token authenticates both sides).
    #[arg(long, value_name = "ADDR", requires = "token_file")]
    pub listen: Option<String>,
    /// Dial a coordinator waiting with `--agents listen://ADDR?count=N` (what the pods of
    /// `strainline agents manifest` run), serve its run, and exit.
    #[arg(long, value_name = "HOST:PORT", requires = "token_file")]
    pub connect: Option<String>,
    /// How long --connect keeps trying while the coordinator is not there yet.
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = parse_duration)]
    pub patience: Duration,
    /// The shared token (at least 16 bytes; the same file the coordinator is given).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Speak the protocol on stdin/stdout, for one session (what ssh:// agents run).
    #[arg(long, conflicts_with_all = ["listen", "token_file"])]
    pub stdio: bool,
    /// The name reports give this agent (default: `agent-N` in a Kubernetes Indexed Job,
    /// from JOB_COMPLETION_INDEX; else the host name).
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// Serve one coordinator's session, then exit.
    #[arg(long, requires = "listen")]
    pub once: bool,
}

pub fn run(args: AgentArgs) -> crate::error::Result<i32> {
    let name = args.name.clone().unwrap_or_else(default_name);
    if args.stdio {
        agents::agent::serve_stdio(name)?;
        return Ok(exit::PASSED);
    }
    let Some(token_file) = &args.token_file else {
        return Err(crate::Error::usage(
            "give --token-file FILE (the shared token)",
        ));
    };
    let token = Token::read(token_file)?;
    match (&args.listen, &args.connect) {
        (Some(addr), _) => agents::agent::serve_listen(addr, token, name, args.once),
        (None, Some(addr)) => agents::agent::serve_connect(addr, token, name, args.patience),
        (None, None) => Err(crate::Error::usage(
            "give --listen ADDR, --connect HOST:PORT or --stdio",
        )),
    }?;
    Ok(exit::PASSED)
}

/// `agent-N` in a Kubernetes Indexed Job (its completion index), else the host name.
fn default_name() -> String {
    if let Ok(i) = std::env::var("JOB_COMPLETION_INDEX") {
        return format!("agent-{}", i.trim());
    }
    Some(crate::host::hostname())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "agent".into())
}

pub fn agents(cmd: AgentsCommand) -> crate::error::Result<i32> {
    match cmd {
        AgentsCommand::Manifest(m) => {
            print!("{}", manifest(&m));
            Ok(exit::PASSED)
        }
    }
}

/// A YAML string literal (double-quoted, escaped).
fn q(s: &str) -> String {
    serde_json::to_string(s).expect("a string serializes")
}

/// An Indexed Job: `count` pods, all at once, each an agent named `agent-INDEX` that
/// dials the coordinator with the token from the Secret, and is done when its run is.
fn manifest(m: &ManifestArgs) -> String {
    format!(
        "# strainline agents: {count} pods that dial the coordinator at {coord}.\n\
         # 1. kubectl create secret generic {secret} --from-file=token=agent.token\n\
         # 2. kubectl apply -f this file\n\
         # 3. strainline load URL ... --agents 'listen://0.0.0.0:PORT?count={count}' --agent-token-file agent.token\n\
         apiVersion: batch/v1\n\
         kind: Job\n\
         metadata:\n  name: {name}\n  labels:\n    app.kubernetes.io/name: strainline-agent\n\
         spec:\n  completionMode: Indexed\n  completions: {count}\n  parallelism: {count}\n  backoffLimit: 0\n  ttlSecondsAfterFinished: 600\n\
         \x20 template:\n    metadata:\n      labels:\n        app.kubernetes.io/name: strainline-agent\n\
         \x20   spec:\n      restartPolicy: Never\n\
         \x20     # One agent per node where possible: agents sharing a node share its cores.\n\
         \x20     topologySpreadConstraints:\n        - maxSkew: 1\n          topologyKey: kubernetes.io/hostname\n          whenUnsatisfiable: ScheduleAnyway\n          labelSelector:\n            matchLabels:\n              app.kubernetes.io/name: strainline-agent\n\
         \x20     containers:\n        - name: agent\n          image: {image}\n\
         \x20         args: [\"agent\", \"--connect\", {coord_q}, \"--token-file\", \"/etc/strainline/token\"]\n\
         \x20         resources:\n            requests:\n              cpu: {cpu}\n            limits:\n              cpu: {cpu}\n\
         \x20         volumeMounts:\n            - name: token\n              mountPath: /etc/strainline\n              readOnly: true\n\
         \x20     volumes:\n        - name: token\n          secret:\n            secretName: {secret_q}\n            defaultMode: 288  # 0440: the agent refuses a token others can read\n",
        count = m.count,
        coord = m.coordinator,
        coord_q = q(&m.coordinator),
        secret = m.secret,
        secret_q = q(&m.secret),
        name = q(&m.name),
        image = q(&m.image),
        cpu = q(&m.cpu),
    )
}
