//! The kernel's own TCP counters (`/proc/net/netstat`, `/proc/net/snmp`) for the
//! network namespace strainline runs in: a listen queue that overflowed, SYNs dropped,
//! segments retransmitted. Sampled before and after a ramp step, they name a limit no
//! process-level figure shows: a target that accepts too slowly (a `listen(5)` backlog)
//! makes clients wait for the kernel's 1 s SYN retransmit while its CPU is idle.

/// Counters since boot; subtract two readings for a window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct TcpCounters {
    /// Connections completed while the listen (accept) queue was full.
    pub listen_overflows: u64,
    /// Connection attempts dropped at a listening socket (overflows included).
    pub listen_drops: u64,
    pub retransmitted_segments: u64,
}

/// The value of `name` in a `Prefix: names…` / `Prefix: values…` pair of lines.
fn field(text: &str, prefix: &str, name: &str) -> Option<u64> {
    let mut lines = text.lines().filter(|l| l.starts_with(prefix));
    while let (Some(names), Some(values)) = (lines.next(), lines.next()) {
        let i = names.split_whitespace().position(|n| n == name);
        if let Some(i) = i {
            return values.split_whitespace().nth(i)?.parse().ok();
        }
    }
    None
}

/// The counters now; `None` where `/proc/net` cannot be read.
pub fn tcp_counters() -> Option<TcpCounters> {
    let netstat = std::fs::read_to_string("/proc/net/netstat").ok()?;
    let snmp = std::fs::read_to_string("/proc/net/snmp").unwrap_or_default();
    Some(TcpCounters {
        listen_overflows: field(&netstat, "TcpExt:", "ListenOverflows")?,
        listen_drops: field(&netstat, "TcpExt:", "ListenDrops").unwrap_or(0),
        retransmitted_segments: field(&snmp, "Tcp:", "RetransSegs").unwrap_or(0),
    })
}

impl TcpCounters {
    /// What happened between `before` and `self`.
    pub fn since(&self, before: &TcpCounters) -> TcpCounters {
        TcpCounters {
            listen_overflows: self
                .listen_overflows
                .saturating_sub(before.listen_overflows),
            listen_drops: self.listen_drops.saturating_sub(before.listen_drops),
            retransmitted_segments: self
                .retransmitted_segments
                .saturating_sub(before.retransmitted_segments),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_counter_by_its_name_from_the_pair_of_lines() {
        let text = "TcpExt: SyncookiesSent ListenOverflows ListenDrops\nTcpExt: 1 825 830\n\
                    IpExt: InNoRoutes\nIpExt: 0\n";
        assert_eq!(field(text, "TcpExt:", "ListenOverflows"), Some(825));
        assert_eq!(field(text, "TcpExt:", "ListenDrops"), Some(830));
        assert_eq!(field(text, "TcpExt:", "Nope"), None);
        // The machine's own file has them.
        assert!(tcp_counters().is_some());
    }
}
