//! The command workload as a protocol: a unit of work runs an argv to its end inside
//! the run's containment unit (whatever it starts ends with it); its exit code is its
//! status (128 + N for signal N) and success is exit 0. No connection: a program that
//! cannot be started is a `connect` error, a unit past its timeout is killed.

use std::time::Duration;

use super::client::Reply;
use super::recorder::ErrorKind;
use crate::os::unit::Unit;

/// Runs `argv` once in `unit`, within `timeout`.
pub async fn run(unit: &Unit, argv: &[String], timeout: Duration) -> Result<Reply, ErrorKind> {
    let mut cmd = unit.command(argv);
    cmd.stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let child = tokio::process::Command::from(cmd)
        .kill_on_drop(true)
        .spawn();
    let mut c = child.map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound | std::io::ErrorKind::PermissionDenied => ErrorKind::Connect,
        _ => ErrorKind::LocalResources,
    })?;
    let pid = c.id().unwrap_or(0);
    unit.started(pid);
    let r = match tokio::time::timeout(timeout, c.wait()).await {
        Ok(Ok(status)) => {
            use std::os::unix::process::ExitStatusExt;
            let code = status
                .code()
                .unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
                as u16;
            Ok(Reply::new(code, code == 0))
        }
        Ok(Err(_)) => Err(ErrorKind::LocalResources),
        Err(_) => Err(ErrorKind::Timeout),
    };
    // The unit of work is over, and so is whatever it started in its group.
    unit.finished(pid);
    r
}
