//! `strainline agent`: serve as a load agent (see [`crate::agents`]); `strainline
//! agents manifest`: the Kubernetes Job that starts agents which dial the coordinator.

use crate::agents::{self, Token};
use crate::cli::{AgentArgs, AgentsCommand, ManifestArgs};
use crate::exit;

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
