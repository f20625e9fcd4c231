//! A log's requests sent again at their logged times (`load --replay`): the times and
//! the requests, checked once into what the open model sends. The log is read by the
//! command (`workload::parse`); here it is only offsets and request lines.

use std::sync::Arc;

use bytes::Bytes;
use hyper::header::{HeaderName, HeaderValue};
use hyper::Method;

use super::http::Rendered;

/// What `--replay` read: offsets from the first request (seconds, already divided by
/// the speed, sorted) and each request's method and path (with its query).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ReplayLog {
    pub source: String,
    pub speed: f64,
    pub times: Vec<f64>,
    pub requests: Vec<(String, String)>,
}

/// The requests ready to send, by position in the schedule.
pub struct Replay {
    pub times: Arc<Vec<f64>>,
    pub requests: Vec<Rendered>,
}

impl std::fmt::Debug for Replay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Replay({} requests)", self.requests.len())
    }
}

impl Replay {
    /// Checks every request line; `body` goes with the methods that carry one.
    pub fn new(
        log: &ReplayLog,
        headers: &[(HeaderName, HeaderValue)],
        body: Bytes,
    ) -> Result<Replay, String> {
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
                if !path.starts_with('/') || path.bytes().any(|b| b <= b' ' || b == 0x7f) {
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
        Ok(Replay {
            times: Arc::new(log.times.clone()),
            requests,
        })
    }

    /// The span of the schedule, seconds.
    pub fn span(&self) -> f64 {
        self.times.last().copied().unwrap_or(0.0)
    }
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
        let r = Replay::new(
            &log(&[("GET", "/a?b=1"), ("POST", "/p")]),
            &[],
            body.clone(),
        )
        .unwrap();
        assert!(r.requests[0].body.is_empty());
        assert_eq!(r.requests[1].body, body);
        assert_eq!(r.span(), 1.0);
        for (m, p, why) in [
            ("GET", "/a b", "not a path"),
            ("GET", "/a\r\nHost: evil", "not a path"),
            ("GET", "relative", "not a path"),
            ("G(T", "/", "not an HTTP method"),
        ] {
            let e = Replay::new(&log(&[(m, p)]), &[], body.clone()).unwrap_err();
            assert!(e.contains(why) && e.contains("request 1"), "{e}");
        }
        assert!(Replay::new(&log(&[]), &[], body).is_err());
    }
}
