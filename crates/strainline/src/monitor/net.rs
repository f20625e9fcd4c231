//! The kernel's own TCP counters (`/proc/PID/net/netstat`, `…/snmp`): a listen queue
//! that overflowed, SYNs dropped, segments retransmitted. Sampled before and after a ramp
//! step, they name a limit no process-level figure shows: a target that accepts too
//! slowly (a `listen(5)` backlog) makes clients wait for the kernel's 1 s SYN retransmit
//! while its CPU is idle. The counters are per network namespace, so they are read in
//! strainline's and in the target's (a container's, an `ip netns exec`'s): its listening
//! socket overflows in its own, and both ends retransmit.

/// Counters since boot; subtract two readings for a window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct TcpCounters {
    /// Connections completed while the listen (accept) queue was full.
    pub listen_overflows: u64,
    /// Connection attempts dropped at a listening socket (overflows included).
    pub listen_drops: u64,
    /// SYNs answered with a cookie because the SYN queue was full (`SyncookiesSent`).
    pub syn_cookies: u64,
    pub retransmitted_segments: u64,
}

impl TcpCounters {
    /// Connection attempts a listening socket dropped with its accept queue not full: a
    /// full SYN queue with SYN cookies off, or no memory (`ListenDrops` counts the
    /// overflows too).
    pub fn syn_drops(&self) -> u64 {
        self.listen_drops.saturating_sub(self.listen_overflows)
    }
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

/// The counters of every network namespace involved, by the namespace's inode.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Namespaces(std::collections::BTreeMap<u64, TcpCounters>);

/// The counters now in strainline's network namespace and in those of the `target`'s
/// processes, each namespace read once (through its first process: `/proc/PID/net` is
/// that process's namespace's). Namespaces that cannot be read are left out.
pub fn tcp_counters(target: &[u32]) -> Namespaces {
    use std::os::unix::fs::MetadataExt;
    let mut all = Namespaces::default();
    let dirs = std::iter::once("/proc/self".to_string())
        .chain(target.iter().map(|pid| format!("/proc/{pid}")));
    for dir in dirs {
        let Ok(ns) = std::fs::metadata(format!("{dir}/ns/net")) else {
            continue;
        };
        if all.0.contains_key(&ns.ino()) {
            continue;
        }
        if let Some(c) = read_counters(&dir) {
            all.0.insert(ns.ino(), c);
        }
    }
    all
}

impl Namespaces {
    /// What happened between `before` and `self`, summed over the namespaces read both
    /// times (one that appeared since has no window).
    pub fn since(&self, before: &Namespaces) -> TcpCounters {
        let mut sum = TcpCounters::default();
        for (ns, now) in &self.0 {
            if let Some(b) = before.0.get(ns) {
                sum += now.since(b);
            }
        }
        sum
    }
}

/// One namespace's counters through a process directory (`/proc/self`, `/proc/PID`).
fn read_counters(dir: &str) -> Option<TcpCounters> {
    let netstat = std::fs::read_to_string(format!("{dir}/net/netstat")).ok()?;
    let snmp = std::fs::read_to_string(format!("{dir}/net/snmp")).unwrap_or_default();
    Some(TcpCounters {
        listen_overflows: field(&netstat, "TcpExt:", "ListenOverflows")?,
        listen_drops: field(&netstat, "TcpExt:", "ListenDrops").unwrap_or(0),
        syn_cookies: field(&netstat, "TcpExt:", "SyncookiesSent").unwrap_or(0),
        retransmitted_segments: field(&snmp, "Tcp:", "RetransSegs").unwrap_or(0),
    })
}

impl std::ops::AddAssign for TcpCounters {
    fn add_assign(&mut self, d: TcpCounters) {
        self.listen_overflows += d.listen_overflows;
        self.listen_drops += d.listen_drops;
        self.syn_cookies += d.syn_cookies;
        self.retransmitted_segments += d.retransmitted_segments;
    }
}

impl TcpCounters {
    /// What happened between `before` and `self`.
    pub fn since(&self, before: &TcpCounters) -> TcpCounters {
        TcpCounters {
            listen_overflows: self
                .listen_overflows
                .saturating_sub(before.listen_overflows),
            listen_drops: self.listen_drops.saturating_sub(before.listen_drops),
            syn_cookies: self.syn_cookies.saturating_sub(before.syn_cookies),
            retransmitted_segments: self
                .retransmitted_segments
                .saturating_sub(before.retransmitted_segments),
        }
    }
}

/// The inodes of the sockets listening on TCP `port` (IPv4 and IPv6), from the
/// kernel's tables (`/proc/net/tcp`, `/proc/net/tcp6`: state 0A is LISTEN).
fn listening_inodes(port: u16, tables: &[String]) -> Vec<u64> {
    let want = format!("{port:04X}");
    tables
        .iter()
        .flat_map(|t| t.lines().skip(1))
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let local_port = f.get(1)?.rsplit(':').next()?;
            (local_port == want && *f.get(3)? == "0A").then(|| f.get(9)?.parse().ok())?
        })
        .collect()
}

/// The process listening on TCP `port`: of every process holding such a socket, the
/// one whose parent does not (nginx's master, not its workers). `None` when no process
/// this user may look into listens there.
pub fn listening_process(port: u16) -> Option<u32> {
    let tables: Vec<String> = ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .collect();
    let inodes = listening_inodes(port, &tables);
    if inodes.is_empty() {
        return None;
    }
    let wanted: Vec<String> = inodes.iter().map(|i| format!("socket:[{i}]")).collect();
    let mut holders = Vec::new();
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            continue;
        };
        let holds = fds.flatten().any(|fd| {
            std::fs::read_link(fd.path())
                .is_ok_and(|l| wanted.iter().any(|w| l.as_os_str() == w.as_str()))
        });
        if holds {
            holders.push(pid);
        }
    }
    let parent = |pid: u32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|t| crate::os::process::parse_stat(&t))
            .map(|s| s.ppid)
    };
    holders
        .iter()
        .copied()
        .find(|&p| parent(p).is_none_or(|pp| !holders.contains(&pp)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_listening_sockets_of_a_port_in_the_kernels_table() {
        let tcp = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 41234 1 0
   1: 0100007F:1F90 0100007F:D2F0 01 00000000:00000000 00:00000000 00000000     0        0 41240 1 0
   2: 0100007F:1F91 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 41300 1 0"
            .to_string();
        // Port 8080 (1F90): the listening socket, not the established connection.
        assert_eq!(
            listening_inodes(8080, std::slice::from_ref(&tcp)),
            vec![41234]
        );
        assert!(listening_inodes(80, &[tcp]).is_empty());
    }

    #[test]
    fn reads_a_counter_by_its_name_from_the_pair_of_lines() {
        let text = "TcpExt: SyncookiesSent ListenOverflows ListenDrops\nTcpExt: 1 825 830\n\
                    IpExt: InNoRoutes\nIpExt: 0\n";
        assert_eq!(field(text, "TcpExt:", "ListenOverflows"), Some(825));
        assert_eq!(field(text, "TcpExt:", "ListenDrops"), Some(830));
        let c = TcpCounters {
            listen_overflows: 825,
            listen_drops: 830,
            ..Default::default()
        };
        assert_eq!(c.syn_drops(), 5, "drops beyond the overflows");
        assert_eq!(field(text, "TcpExt:", "Nope"), None);
        // strainline's own namespace has them, read once however often it is named.
        let me = std::process::id();
        assert_eq!(tcp_counters(&[me, me]).0.len(), 1);
    }
}
