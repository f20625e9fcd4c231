//! What the system under test is: how to start (or attach to) it, how to tell it is
//! ready and how to stop it. The suite fills it in; the lifecycle acts on it.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// How to tell the target is ready.
#[derive(Debug, Clone, PartialEq)]
pub enum Ready {
    /// An HTTP GET answering below 500.
    Http(String),
    /// A TCP connect succeeding.
    Tcp(String),
    /// A line of the target's output matching this regex.
    Log(String),
    /// Just wait.
    Delay(Duration),
}

/// How to find a running target.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Attach {
    /// The process whose pid this file holds.
    PidFile(PathBuf),
    /// The process listening on this TCP port (the top of its tree, e.g. nginx's
    /// master, whose workers share the socket).
    Port(u16),
}

/// The system under test.
#[derive(Debug, Clone)]
pub struct TargetSpec {
    pub build: Option<Vec<String>>,
    /// argv, with `{{var}}` placeholders; run through `sh -c` when `shell`. Empty when
    /// attaching.
    pub command: Vec<String>,
    /// Attach to a running process instead of starting one: it is watched, never
    /// stopped.
    pub attach: Option<Attach>,
    /// A service reached by this URL only: not started, not watched (no CPU, memory or
    /// thread figures); the cases wait until it answers, then load it.
    pub unwatched: Option<String>,
    /// The agent on whose machine the attached process runs (`None`: this machine).
    pub host: Option<String>,
    pub shell: bool,
    pub env: BTreeMap<String, String>,
    pub cwd: Option<PathBuf>,
    pub ready: Ready,
    pub ready_timeout: Duration,
    pub stop_signal: i32,
    pub stop_grace: Duration,
}
