//! What the open model sends by schedule position instead of its one template: a log's
//! requests sent again at their logged times (`load --replay`; the log is read by the
//! command, here it is only offsets and request lines, checked once), or a workload
//! scenario's weighted steps drawn per position.

use std::sync::Arc;

use bytes::Bytes;
use hyper::header::{HeaderName, HeaderValue};
use hyper::Method;

use super::http::Rendered;
use super::scenario::{Scenario, When};
use super::schedule::splitmix;
use std::borrow::Cow;

/// What `--replay` read: offsets from the first request (seconds, already divided by
/// the speed, sorted) and each request's method and path (with its query).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ReplayLog {
    pub source: String,
    pub speed: f64,
    pub times: Vec<f64>,
    pub requests: Vec<(String, String)>,
}

/// What the open model sends at each position of its schedule, when not the template:
/// a replayed log's requests, or a workload scenario's steps drawn by weight.
pub enum Requests {
    Listed(Vec<Rendered>),
    Drawn(Draw),
}

impl std::fmt::Debug for Requests {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Requests::Listed(r) => write!(f, "Listed({} requests)", r.len()),
            Requests::Drawn(d) => write!(f, "Drawn({} steps)", d.scenario.steps.len()),
        }
    }
}

/// A scenario's weighted steps, one drawn for each position (seeded by the position,
/// so every thread and agent draws the same request for it).
pub struct Draw {
    scenario: Arc<Scenario>,
    /// Running totals of the weights, with the step each ends.
    cumulative: Vec<(u64, usize)>,
}

impl Draw {
    pub fn new(scenario: Arc<Scenario>) -> Draw {
        let mut total = 0;
        let cumulative = scenario
            .steps
            .iter()
            .enumerate()
            .filter_map(|(i, s)| match s.when {
                When::Weight(w) => {
                    total += u64::from(w);
                    Some((total, i))
                }
                _ => None,
            })
            .collect();
        Draw {
            scenario,
            cumulative,
        }
    }

    /// The step drawn for `position`, and the hash that drew it.
    fn draw(&self, position: u64) -> (usize, u64) {
        let h = splitmix(self.scenario.seed ^ splitmix(position));
        let total = self.cumulative.last().map_or(1, |c| c.0);
        let pick = h % total;
        let k = self.cumulative.partition_point(|c| c.0 <= pick);
        (self.cumulative[k.min(self.cumulative.len() - 1)].1, h)
    }
}

impl Requests {
    /// Checks every request line of a replayed log; `body` goes with the methods that
    /// carry one.
    pub fn replayed(
        log: &ReplayLog,
        headers: &[(HeaderName, HeaderValue)],
        body: Bytes,
    ) -> Result<Requests, String> {
        if log.times.is_empty() || log.times.len() != log.requests.len() {
            return Err(format!("{}: no request to replay", log.source));
        }
        let requests = log
            .requests
            .iter()
            .enumerate()
            .map(|(i, (m, path))| {
                let method = Method::from_bytes(m.as_bytes()).map_err(|_| {
                    format!(
                        "{}: request {}: '{m}' is not an HTTP method",
                        log.source,
                        i + 1
                    )
                })?;
                if !sendable(path) {
                    return Err(format!(
                        "{}: request {}: '{}' is not a path that can be sent",
                        log.source,
                        i + 1,
                        crate::units::printable(path)
                    ));
                }
                let carries = matches!(method, Method::POST | Method::PUT | Method::PATCH);
                Ok(Rendered {
                    method,
                    path: path.clone(),
                    headers: headers.to_vec(),
                    body: if carries { body.clone() } else { Bytes::new() },
                })
            })
            .collect::<Result<_, String>>()?;
        Ok(Requests::Listed(requests))
    }

    /// The request at this position of the schedule, and its scenario step.
    pub fn at(&self, position: u64) -> (Cow<'_, Rendered>, Option<usize>) {
        match self {
            Requests::Listed(r) => (Cow::Borrowed(&r[position as usize]), None),
            Requests::Drawn(d) => {
                let (step, h) = d.draw(position);
                let r = d.scenario.request(step, position, position, splitmix(h));
                (Cow::Owned(r), Some(step))
            }
        }
    }

    /// The scenario step of the request at `position`, without making the request.
    pub fn step_at(&self, position: u64) -> Option<usize> {
        match self {
            Requests::Listed(_) => None,
            Requests::Drawn(d) => Some(d.draw(position).0),
        }
    }
}

/// A path an HTTP/1.1 request line can carry as it is: absolute, no space or control
/// byte (a logged path could otherwise inject headers).
pub fn sendable(path: &str) -> bool {
    path.starts_with('/') && !path.bytes().any(|b| b <= b' ' || b == 0x7f)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log(requests: &[(&str, &str)]) -> ReplayLog {
        ReplayLog {
            source: "access.log".into(),
            speed: 1.0,
            times: (0..requests.len()).map(|i| i as f64).collect(),
            requests: requests
                .iter()
                .map(|(m, p)| (m.to_string(), p.to_string()))
                .collect(),
        }
    }

    #[test]
    fn hostile_request_lines_are_refused_and_bodies_go_with_their_methods() {
        let body = Bytes::from_static(b"x");
        let r = Requests::replayed(
            &log(&[("GET", "/a?b=1"), ("POST", "/p")]),
            &[],
            body.clone(),
        )
        .unwrap();
        assert!(r.at(0).0.body.is_empty());
        assert_eq!(r.at(1).0.body, body);
        for (m, p, why) in [
            ("GET", "/a b", "not a path"),
            ("GET", "/a\r\nHost: evil", "not a path"),
            ("GET", "relative", "not a path"),
            ("G(T", "/", "not an HTTP method"),
        ] {
            let e = Requests::replayed(&log(&[(m, p)]), &[], body.clone()).unwrap_err();
            assert!(e.contains(why) && e.contains("request 1"), "{e}");
        }
        assert!(Requests::replayed(&log(&[]), &[], body).is_err());
    }
}
