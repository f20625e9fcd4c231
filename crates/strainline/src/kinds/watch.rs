//! `[[watch]]`: further processes monitored beside the target — the database or web
//! server in front of it, as the IoT seed wanted to compare its daemon with Apache and
//! MariaDB — found by pid file, executable name or command-line pattern, and reported
//! side by side with the target.

use std::collections::HashSet;
use std::time::Duration;

use super::lines::{Line, Watched};
use super::CaseResult;
use crate::monitor::procfs;
use crate::monitor::watch::Watcher;
use crate::store::Metric;
use crate::suite::{WatchBy, WatchSpec};

/// The processes a watch names: the top of each matching tree.
pub fn find(w: &WatchSpec) -> Vec<u32> {
    let me = std::process::id();
    let matches: Vec<(u32, u32)> = match &w.by {
        WatchBy::PidFile(p) => std::fs::read_to_string(p)
            .ok()
            .and_then(|t| t.trim().parse().ok())
            .map(|pid| vec![(pid, 0)])
            .unwrap_or_default(),
        WatchBy::Name(n) => procfs::list_pids()
            .unwrap_or_default()
            .into_iter()
            .filter_map(|pid| {
                procfs::read_stat(pid)
                    .filter(|s| &s.comm == n)
                    .map(|s| (pid, s.ppid))
            })
            .collect(),
        WatchBy::Cmdline(re) => procfs::list_pids()
            .unwrap_or_default()
            .into_iter()
            .filter(|&pid| pid != me && re.is_match(&procfs::cmdline(pid)))
            .filter_map(|pid| procfs::read_stat(pid).map(|s| (pid, s.ppid)))
            .collect(),
    };
    let set: HashSet<u32> = matches.iter().map(|m| m.0).collect();
    matches
        .into_iter()
        .filter(|(_, ppid)| !set.contains(ppid))
        .map(|(pid, _)| pid)
        .collect()
}

/// Watchers for every `[[watch]]`, started beside the target.
pub struct Watches(Vec<(String, Vec<Watcher>)>);

impl Watches {
    pub fn start(specs: &[WatchSpec], interval: Duration) -> Watches {
        Watches(
            specs
                .iter()
                .map(|w| {
                    (
                        w.name.clone(),
                        find(w)
                            .into_iter()
                            .map(|pid| Watcher::attach(pid, interval))
                            .collect(),
                    )
                })
                .collect(),
        )
    }

    /// Stops them and adds their figures to the case.
    pub fn finish(self, r: &mut CaseResult) {
        for (name, watchers) in self.0 {
            if watchers.is_empty() {
                r.table.push(Line::Watch { name, found: None });
                continue;
            }
            let (mut peak, mut cpu, mut procs) = (0u64, 0.0, 0u64);
            for w in watchers {
                let (s, _) = w.finish(vec![name.clone()], "completed");
                peak += s.peak_rss.bytes;
                cpu += s.cpu.avg_cores;
                procs += s.processes_seen;
            }
            r.metrics
                .push(Metric::of(&format!("watch_{name}_peak_rss"), peak as f64));
            r.metrics
                .push(Metric::of(&format!("watch_{name}_cpu"), cpu));
            r.table.push(Line::Watch {
                name,
                found: Some(Watched {
                    peak_rss: peak,
                    cpu_cores: cpu,
                    processes: procs,
                }),
            });
        }
    }
}
