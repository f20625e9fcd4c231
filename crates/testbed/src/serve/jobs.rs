//! The job API of `serve`: `POST /jobs` submits a job that takes `--job-time`, and
//! `GET /jobs/j-N` polls it — `queued`, `running`, then `done` or `failed` (at
//! `--fail-rate`) — as a job server's clients submit work and poll for its result.

use std::collections::HashMap;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Response, StatusCode};

use super::{json, Server};

/// A job: when it was submitted, whether it is drawn to fail, whether a poll saw it
/// finished.
struct Record {
    submitted: Instant,
    fails: bool,
    seen_finished: bool,
}

/// The jobs a server knows, by number; finished ones are forgotten [`JOB_KEPT`] after
/// they finished (a sweep at most once a second), so a long run holds no more than a
/// few seconds' worth.
#[derive(Default)]
pub struct Jobs {
    all: HashMap<u64, Record>,
    swept: Option<Instant>,
}

/// How long a finished job is still answered for.
const JOB_KEPT: Duration = Duration::from_secs(10);

/// `POST /jobs`: 202 with the job's id; it runs for `--job-time`.
pub fn submit(s: &Server) -> Response<Full<Bytes>> {
    let n = s.counters.jobs.fetch_add(1, Relaxed);
    let fails = s.chance() < s.knobs.fail_rate;
    let now = Instant::now();
    let mut jobs = s.jobs.lock().unwrap();
    if jobs.swept.is_none_or(|t| now - t >= Duration::from_secs(1)) {
        let gone = s.knobs.job_time + JOB_KEPT;
        jobs.all.retain(|_, j| now - j.submitted < gone);
        jobs.swept = Some(now);
    }
    jobs.all.insert(
        n,
        Record {
            submitted: now,
            fails,
            seen_finished: false,
        },
    );
    json(
        StatusCode::ACCEPTED,
        format!("{{\"id\":\"j-{n}\",\"status\":\"queued\"}}"),
    )
}

/// `GET /jobs/j-N`: the job's status — `queued`, `running`, then `done` or `failed`.
pub fn poll(s: &Server, id: &str) -> Response<Full<Bytes>> {
    s.counters.job_polls.fetch_add(1, Relaxed);
    let mut jobs = s.jobs.lock().unwrap();
    let job = id
        .strip_prefix("j-")
        .and_then(|n| n.parse::<u64>().ok())
        .and_then(|n| jobs.all.get_mut(&n));
    let Some(job) = job else {
        s.counters.not_found.fetch_add(1, Relaxed);
        return json(StatusCode::NOT_FOUND, "{\"error\":\"no such job\"}".into());
    };
    let age = job.submitted.elapsed();
    let status = if age < s.knobs.job_time / 2 {
        "queued"
    } else if age < s.knobs.job_time {
        "running"
    } else {
        if !job.seen_finished {
            job.seen_finished = true;
            let c = if job.fails {
                &s.counters.jobs_failed
            } else {
                &s.counters.jobs_done
            };
            c.fetch_add(1, Relaxed);
        }
        if job.fails {
            "failed"
        } else {
            "done"
        }
    };
    json(
        StatusCode::OK,
        format!("{{\"id\":\"{id}\",\"status\":\"{status}\"}}"),
    )
}
