//! A monitor run's summary as named metrics: what the store keeps and `compare` reads.

use crate::measure::MonitorSummary;
use crate::store::Metric;

/// The figures of a monitor run, as named metrics for the store and for comparisons.
pub fn metrics(s: &MonitorSummary) -> Vec<Metric> {
    let mut v = vec![
        Metric::of("peak_rss", s.peak_rss.bytes as f64).from(s.peak_rss.source.describe()),
        Metric::of(
            "peak_tree_rss_sampled",
            s.peak_tree_rss_sampled.bytes as f64,
        ),
        Metric::of("cpu_avg", s.cpu.avg_cores).from(&s.cpu.source),
        Metric::of("cpu_max", s.cpu.max_cores),
        Metric::of("cpu_seconds", s.cpu.total_seconds).from(&s.cpu.source),
        Metric::of("duration", s.duration_seconds),
        Metric::of("max_threads", s.max_threads as f64),
        Metric::of("max_fds", s.max_fds as f64),
        Metric::of("max_processes", s.max_processes as f64),
        Metric::of("read_bytes", s.read_bytes as f64),
        Metric::of("write_bytes", s.write_bytes as f64),
        Metric::of("ctx_switches", s.ctx_switches as f64),
        Metric::of("monitor_overhead", s.overhead.percent_of_core),
    ];
    if let Some(c) = &s.cgroup_memory_peak {
        v.push(Metric::of("cgroup_memory_peak", c.bytes as f64).from(c.source.describe()));
    }
    v
}
