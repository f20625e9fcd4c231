//! The agent protocol: newline-delimited JSON messages over one byte stream (TLS over
//! TCP, or ssh's stdin/stdout). Versioned: a peer of another version is refused with
//! both versions named. Frames are bounded in size, so a hostile or broken peer gets an
//! error, not this process's memory.

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite, AsyncWriteExt};

use crate::load::recorder::Tally;
use crate::load::verdict::Validity;
use crate::load::{LoadSpec, Slice};
use crate::measure::{ExitInfo, MonitorSummary, Sample};
use crate::sut::spec::Attach;

/// The protocol's version; bumped on any change to the messages.
pub const PROTOCOL: u32 = 1;

/// The largest frame read (a second's histograms are a few KiB).
const MAX_FRAME: u64 = 16 << 20;

/// What the coordinator sends.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToAgent {
    /// First message. `proof` authenticates the coordinator over TLS (see [`super::auth`]).
    Hello {
        protocol: u32,
        strainline: String,
        proof: Option<String>,
    },
    /// Asks for the agent's wall clock (an NTP-like exchange).
    Clock {
        id: u32,
    },
    Run(Box<Job>),
    /// Watch a process on the agent's machine (and its descendants), every
    /// `interval_ms`, streaming its samples.
    Watch {
        attach: Attach,
        interval_ms: u64,
    },
    /// Stop watching; the agent answers with the summary.
    Unwatch,
    /// The coordinator is alive: the agent's lease is extended.
    Renew,
    /// Stop sending (in-flight requests finish), report, end.
    Stop,
}

/// One agent's part of a run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Job {
    pub spec: LoadSpec,
    pub slice: Slice,
    /// When the clock starts, nanoseconds since the Unix epoch in the agent's clock.
    pub start_unix_ns: i64,
    /// The agent stops its load when it heard nothing from the coordinator this long.
    pub lease_ms: u64,
    /// Files the plan reads (a scenario and its CSV): name relative to the scenario's
    /// directory, and content. The agent writes them to a directory of its own.
    #[serde(default)]
    pub files: Vec<(String, String)>,
}

/// What an agent sends.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum FromAgent {
    Welcome {
        protocol: u32,
        strainline: String,
        name: String,
        proof: Option<String>,
    },
    Refused {
        why: String,
    },
    Clock {
        id: u32,
        unix_ns: i64,
    },
    /// The job's plan was checked; the agent waits for the start.
    Ready,
    /// One closed second of the agent's run (`index` 1, 2, …; the last may be partial).
    Second {
        index: u64,
        tally: Box<Tally>,
    },
    Done(Box<Report>),
    /// Watching: the process's pid and command line on the agent's machine.
    Watching {
        pid: u32,
        command: String,
    },
    /// Samples taken since the last message (`t` from when watching began), and how the
    /// process ended once it has.
    Samples {
        samples: Vec<Sample>,
        exit: Option<ExitInfo>,
    },
    /// The watch's summary, after `Unwatch`.
    Watched(Box<MonitorSummary>),
    /// The job could not run.
    Failed {
        why: String,
    },
}

/// An agent's whole run, with its own verdict on its generator.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    pub total: Tally,
    pub steps: Vec<Tally>,
    /// A scenario's own metrics' values (absent from an agent before them).
    #[serde(default)]
    pub custom: Vec<crate::load::custom::Custom>,
    pub elapsed: f64,
    pub thread_cpu: Vec<f64>,
    pub connections_asked: usize,
    pub connections_ready: usize,
    pub threads: usize,
    pub status: Validity,
    pub reasons: Vec<String>,
    /// The most clients running at once in its last interval, the one after its last
    /// streamed second (absent from an agent before it: 0).
    #[serde(default)]
    pub last_active: u64,
}

/// Writes one message as a line.
pub async fn send<W: AsyncWrite + Unpin, M: Serialize>(w: &mut W, msg: &M) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(msg).map_err(std::io::Error::other)?;
    line.push(b'\n');
    w.write_all(&line).await?;
    w.flush().await
}

/// The longest hello or welcome, bytes: what a peer may make the other side hold before
/// it has proved it knows the token (a stranger's 40 connections of 16 MiB frames took
/// an agent to 624 MB).
pub const MAX_HELLO: u64 = 4096;

/// Reads one message; `None` at the end of the stream.
pub async fn recv<R: AsyncBufRead + Unpin, M: for<'de> Deserialize<'de>>(
    r: &mut R,
) -> std::io::Result<Option<M>> {
    recv_within(r, MAX_FRAME).await
}

/// Reads one message of at most `max` bytes; `None` at the end of the stream. What the
/// peer sent is quoted in an error only as printable text (its bytes may be anyone's).
pub async fn recv_within<R: AsyncBufRead + Unpin, M: for<'de> Deserialize<'de>>(
    r: &mut R,
    max: u64,
) -> std::io::Result<Option<M>> {
    use tokio::io::AsyncReadExt;
    let mut line = Vec::new();
    let n = (&mut *r).take(max).read_until(b'\n', &mut line).await?;
    if n == 0 {
        return Ok(None);
    }
    if line.last() != Some(&b'\n') {
        return Err(std::io::Error::other(if n as u64 >= max {
            if max >= 1 << 20 {
                format!("a message longer than {} MiB", max >> 20)
            } else {
                format!("a message longer than {max} bytes")
            }
        } else {
            "the stream ended inside a message".to_string()
        }));
    }
    serde_json::from_slice(&line).map(Some).map_err(|e| {
        let head = String::from_utf8_lossy(&line[..line.len().min(80)]).into_owned();
        // serde quotes what it could not read (an unknown variant's decoded name).
        std::io::Error::other(format!(
            "not a strainline agent message ({}): '{}'",
            crate::units::one_line(&e.to_string()),
            crate::units::one_line(head.trim_end())
        ))
    })
}

/// Nanoseconds since the Unix epoch by this machine's clock.
pub fn unix_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tally_crosses_the_wire_exactly() {
        let mut t = Tally::default();
        for v in [80u64, 95, 120, 4_000, 250_000] {
            t.corrected.record(v).unwrap();
            t.service.record(v / 2).unwrap();
        }
        t.sent = 5;
        t.completed = 5;
        t.ok = 4;
        t.by_status.insert(200, 4);
        t.by_status.insert(503, 1);
        t.by_error
            .insert(crate::load::recorder::ErrorKind::Timeout, 2);
        let msg = FromAgent::Second {
            index: 3,
            tally: Box::new(t.clone()),
        };
        let line = serde_json::to_string(&msg).unwrap();
        let FromAgent::Second { index, tally } = serde_json::from_str(&line).unwrap() else {
            panic!("not a second")
        };
        assert_eq!(index, 3);
        assert_eq!(tally.corrected, t.corrected);
        assert_eq!(
            tally.service.value_at_quantile(0.99),
            t.service.value_at_quantile(0.99)
        );
        assert_eq!(tally.by_status, t.by_status);
        assert_eq!(tally.by_error, t.by_error);
        // Merging a received tally into a local one keeps every count.
        let mut merged = Tally::default();
        merged.merge(&tally);
        merged.merge(&t);
        assert_eq!(merged.corrected.len(), 10);
        assert_eq!(merged.corrected.max(), t.corrected.max());
    }

    #[tokio::test(flavor = "current_thread")]
    async fn frames_are_bounded_and_garbage_is_named() {
        let mut r = tokio::io::BufReader::new(&b"{\"type\":\"renew\"}\nGET / HTTP/1.1\n"[..]);
        let m: Option<ToAgent> = recv(&mut r).await.unwrap();
        assert!(matches!(m, Some(ToAgent::Renew)));
        let e = recv::<_, ToAgent>(&mut r).await.unwrap_err().to_string();
        assert!(
            e.contains("not a strainline agent message") && e.contains("GET / HTTP/1.1"),
            "{e}"
        );
        let mut r = tokio::io::BufReader::new(&b"{\"type\":\"ren"[..]);
        let e = recv::<_, ToAgent>(&mut r).await.unwrap_err().to_string();
        assert!(e.contains("ended inside a message"), "{e}");
    }
}
