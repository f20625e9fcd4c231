//! Queries for browsing a history (`serve`, `history`): a page of runs under filters,
//! one metric's values over many runs in one query, and the figures a
//! running run writes every second. Each reads only what one page shows — never the
//! whole store — so a page over 10,000 runs costs what a page over ten does.

use serde::{Deserialize, Serialize};

use super::backend::{vals, Value};
use super::{Result, RunRow, Status, Store};
use crate::metrics::Direction;

/// Which runs a page lists; every field narrows, `None` does not.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunFilter {
    pub suite: Option<String>,
    pub label: Option<String>,
    pub kind: Option<String>,
    pub status: Option<String>,
    pub host: Option<String>,
    /// Started at or after (RFC 3339 or a date).
    pub since: Option<String>,
    /// Started before (RFC 3339 or a date).
    pub until: Option<String>,
    /// Only runs outside any suite (`load`, `monitor`, `import`).
    #[serde(default)]
    pub without_suite: bool,
}

/// One metric of one case of one run.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricValue {
    pub run: i64,
    pub case: String,
    pub test_kind: String,
    pub metric: String,
    pub value: f64,
    pub unit: String,
    pub direction: Direction,
}

/// A second of a running run, as it wrote it: a second of load, or a sample of the
/// target (once a second), or both.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct LiveSecond {
    pub t: f64,
    pub case: String,
    pub offered: Option<f64>,
    pub achieved: Option<f64>,
    pub p99_us: Option<i64>,
    pub errors: Option<i64>,
    pub rss_bytes: Option<i64>,
    pub cpu_cores: Option<f64>,
}

/// `?1, ?2, …` for `n` values from `first`.
pub(super) fn placeholders(first: usize, n: usize) -> String {
    (first..first + n)
        .map(|i| format!("?{i}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The machine a run ran on, as the store keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct HostRow {
    pub hostname: String,
    pub cpu_model: String,
    pub cores: i64,
    pub memory_bytes: i64,
}

impl Store {
    /// The machine run `run_id` ran on.
    pub fn run_host(&self, run_id: i64) -> Result<Option<HostRow>> {
        Ok(self
            .one(
                "SELECT h.hostname, h.cpu_model, h.cores, h.memory_bytes
                 FROM runs r JOIN hosts h ON h.id = r.host_id WHERE r.id = ?1",
                vals![run_id],
            )?
            .map(|r| HostRow {
                hostname: r.text(0),
                cpu_model: r.text(1),
                cores: r.int(2),
                memory_bytes: r.int(3),
            }))
    }

    /// Runs under `filter`, newest first: `limit` of them after skipping `offset`.
    pub fn runs_page(
        &self,
        filter: &RunFilter,
        limit: usize,
        offset: usize,
    ) -> Result<Vec<RunRow>> {
        let f = filter;
        let rows = self.query(
            &format!(
                "SELECT {} FROM runs r JOIN hosts h ON h.id = r.host_id
                 WHERE (CAST(?1 AS TEXT) IS NULL OR r.suite = ?1)
                   AND (CAST(?2 AS TEXT) IS NULL OR r.label = ?2)
                   AND (CAST(?3 AS TEXT) IS NULL OR r.kind = ?3)
                   AND (CAST(?4 AS TEXT) IS NULL OR r.status = ?4)
                   AND (CAST(?5 AS TEXT) IS NULL OR h.hostname = ?5)
                   AND (CAST(?6 AS TEXT) IS NULL OR r.started_at >= ?6)
                   AND (CAST(?7 AS TEXT) IS NULL OR r.started_at < ?7)
                   AND (?10 = 0 OR r.suite IS NULL)
                 ORDER BY r.id DESC LIMIT ?8 OFFSET ?9",
                Self::RUN_COLUMNS
            ),
            vals![
                f.suite.as_deref(),
                f.label.as_deref(),
                f.kind.as_deref(),
                f.status.as_deref(),
                f.host.as_deref(),
                f.since.as_deref(),
                f.until.as_deref(),
                limit.min(10_000) as i64,
                offset.min(i64::MAX as usize) as i64,
                f.without_suite
            ],
        )?;
        Ok(rows.iter().map(Self::run_row).collect())
    }

    /// The suites in the store with their number of runs, by name.
    pub fn suites(&self) -> Result<Vec<(String, i64)>> {
        Ok(self
            .query(
                "SELECT suite, COUNT(*) FROM runs WHERE suite IS NOT NULL GROUP BY suite ORDER BY suite",
                &[],
            )?
            .iter()
            .map(|r| (r.text(0), r.int(1)))
            .collect())
    }

    /// The newest run of each suite, and of each kind of runs outside any suite (the
    /// suites page's verdicts): one query, by the index of runs by suite.
    pub fn newest_of_each(&self) -> Result<Vec<RunRow>> {
        let rows = self.query(
            &format!(
                "SELECT {} FROM runs r JOIN hosts h ON h.id = r.host_id
                 WHERE r.id IN (SELECT MAX(id) FROM runs WHERE suite IS NOT NULL GROUP BY suite)
                    OR r.id IN (SELECT MAX(id) FROM runs WHERE suite IS NULL GROUP BY kind)
                 ORDER BY r.id DESC",
                Self::RUN_COLUMNS
            ),
            &[],
        )?;
        Ok(rows.iter().map(Self::run_row).collect())
    }

    /// The kinds of the runs outside any suite, with their number of runs.
    pub fn suiteless_kinds(&self) -> Result<Vec<(String, i64)>> {
        Ok(self
            .query(
                "SELECT kind, COUNT(*) FROM runs WHERE suite IS NULL GROUP BY kind ORDER BY kind",
                &[],
            )?
            .iter()
            .map(|r| (r.text(0), r.int(1)))
            .collect())
    }

    /// The metrics of the usable cases of runs `first..=last` (one query), optionally
    /// only the metric named `metric`, in run then case order.
    pub fn metric_values(
        &self,
        first: i64,
        last: i64,
        metric: Option<&str>,
    ) -> Result<Vec<MetricValue>> {
        Ok(self
            .query(
                &format!(
                    "SELECT c.run_id, c.name, c.test_kind, m.name, m.value, m.unit, m.direction
                     FROM cases c JOIN metrics m ON m.case_id = c.id
                     WHERE c.run_id >= ?1 AND c.run_id <= ?2
                       AND c.status IN ({usable})
                       AND (CAST(?3 AS TEXT) IS NULL OR m.name = ?3)
                     ORDER BY c.run_id, c.id, m.name",
                    usable = Status::sql(&Status::USABLE)
                ),
                vals![first, last, metric],
            )?
            .iter()
            .map(|r| MetricValue {
                run: r.int(0),
                case: super::case_key(&r.text(1), &r.text(2)).to_string(),
                test_kind: r.text(2),
                metric: r.text(3),
                value: r.real(4),
                unit: r.text(5),
                direction: Direction::parse(&r.text(6)),
            })
            .collect())
    }

    /// Writes a second of a running run (its own short transaction: a reader never
    /// waits on it).
    pub fn append_live(&self, run_id: i64, s: &LiveSecond) -> Result<()> {
        self.execute(
            "INSERT INTO live (run_id, t, case_name, offered, achieved, p99_us, errors, rss_bytes, cpu_cores)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            vals![
                run_id,
                s.t,
                &s.case,
                s.offered,
                s.achieved,
                s.p99_us,
                s.errors,
                s.rss_bytes,
                s.cpu_cores
            ],
        )?;
        Ok(())
    }

    /// The seconds a run wrote after `after` (seconds since its start), oldest first,
    /// at most `limit`.
    pub fn live_seconds(&self, run_id: i64, after: f64, limit: usize) -> Result<Vec<LiveSecond>> {
        Ok(self
            .query(
                "SELECT t, case_name, offered, achieved, p99_us, errors, rss_bytes, cpu_cores
                 FROM live WHERE run_id = ?1 AND t > ?2 ORDER BY t LIMIT ?3",
                vals![run_id, after, limit.min(100_000) as i64],
            )?
            .iter()
            .map(|r| LiveSecond {
                t: r.real(0),
                case: r.text(1),
                offered: opt_real(&r.0[2]),
                achieved: opt_real(&r.0[3]),
                p99_us: r.opt_int(4),
                errors: r.opt_int(5),
                rss_bytes: r.opt_int(6),
                cpu_cores: opt_real(&r.0[7]),
            })
            .collect())
    }
}

fn opt_real(v: &Value) -> Option<f64> {
    match v {
        Value::Real(x) => Some(*x),
        Value::Int(x) => Some(*x as f64),
        _ => None,
    }
}
