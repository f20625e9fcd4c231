//! What the open model sends by schedule position instead of its one template: a log's
//! requests sent again at their logged times (`load --replay`; the log is read by the
//! command, here it is only offsets and request lines, checked once), or a workload
//! scenario's weighted steps drawn per position.

use crate::error::Category;
use std::sync::Arc;

use bytes::Bytes;
use hyper::header::{HeaderName, HeaderValue};
use hyper::Method;

use super::request::Rendered;
use super::scenario::{Scenario, Unsent, When};
use crate::rng::mix;
use std::borrow::Cow;

/// What `--replay` read: offsets from the first request (seconds, already divided by
/// the speed, sorted) and each request's method and path (with its query) — or, for a
/// log read as the run goes, its [`Stream`] (then `times` and `requests` are empty).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ReplayLog {
    pub source: String,
    pub speed: f64,
    pub times: Vec<f64>,
    pub requests: Vec<(String, String)>,
    /// Not sent to agents: they get `times` and `requests`.
    #[serde(skip)]
    pub stream: Option<Stream>,
}

impl ReplayLog {
    /// The log held whole (what agents are sent): a stream read to its end.
    pub fn held(&self) -> ReplayLog {
        let Some(st) = &self.stream else {
            return self.clone();
        };
        let (mut times, mut requests) = (Vec::new(), Vec::new());
        for (t, m, p) in (st.open)() {
            times.push(t);
            requests.push((m, p));
        }
        ReplayLog {
            source: self.source.clone(),
            speed: self.speed,
            times,
            requests,
            stream: None,
        }
    }
}

/// One request of a replayed log: its offset (seconds), method and target.
pub type Line = (f64, String, String);

/// Opens a log from its start, yielding its requests in time order.
pub type Open = Arc<dyn Fn() -> Box<dyn Iterator<Item = Line> + Send> + Send + Sync>;

/// A replayed log read as the run goes: each worker opens it for itself and keeps its
/// positions, so memory stays bounded whatever the log's size (a 326 MB log held whole
/// took 834 MB). Every line was checked before the run (methods, paths).
#[derive(Clone)]
pub struct Stream {
    pub open: Open,
    /// Requests in the log, and the offset of the last.
    pub count: u64,
    pub last: f64,
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Stream({} requests over {:.3} s)", self.count, self.last)
    }
}

impl PartialEq for Stream {
    fn eq(&self, o: &Stream) -> bool {
        Arc::ptr_eq(&self.open, &o.open)
    }
}

/// What the open model sends at each position of its schedule, when not the template:
/// a replayed log's requests, a workload scenario's steps drawn by weight, or a
/// streamed log's lines made into requests as they come (the schedule hands each over).
pub enum Requests {
    Listed(Vec<Rendered>),
    Drawn(Draw),
    Streamed {
        headers: Vec<(HeaderName, HeaderValue)>,
        body: Bytes,
    },
}

impl Requests {
    /// The scenario whose steps it draws, if it draws them.
    pub fn scenario(&self) -> Option<&super::scenario::Scenario> {
        match self {
            Requests::Drawn(d) => Some(&d.scenario),
            _ => None,
        }
    }
}

impl std::fmt::Debug for Requests {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Requests::Listed(r) => write!(f, "Listed({} requests)", r.len()),
            Requests::Drawn(d) => write!(f, "Drawn({} steps)", d.scenario.steps.len()),
            Requests::Streamed { .. } => write!(f, "Streamed"),
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
        let h = mix(self.scenario.seed ^ mix(position));
        let total = self.cumulative.last().map_or(1, |c| c.0);
        let pick = h % total;
        let k = self.cumulative.partition_point(|c| c.0 <= pick);
        (self.cumulative[k.min(self.cumulative.len() - 1)].1, h)
    }
}

/// A logged request as one that can be sent, or why not (`body` goes with the methods
/// that carry one).
pub fn request_of(
    method: &str,
    path: &str,
    headers: &[(HeaderName, HeaderValue)],
    body: &Bytes,
) -> crate::error::Result<Rendered> {
    let m = Method::from_bytes(method.as_bytes())
        .map_err(|_| format!("'{}' is not an HTTP method", crate::units::one_line(method)))
        .usage()?;
    if !sendable(path) {
        return Err(crate::Error::usage(format!(
            "'{}' is not a path that can be sent",
            crate::units::one_line(path)
        )));
    }
    let carries = matches!(m, Method::POST | Method::PUT | Method::PATCH);
    Ok(Rendered {
        method: m,
        path: path.to_string(),
        headers: headers.to_vec(),
        body: if carries { body.clone() } else { Bytes::new() },
        keep: super::flow::Keep::Nothing,
    })
}

impl Requests {
    /// Checks every request line of a replayed log; `body` goes with the methods that
    /// carry one. A streamed log was checked as it was first read.
    pub fn replayed(
        log: &ReplayLog,
        headers: &[(HeaderName, HeaderValue)],
        body: Bytes,
    ) -> crate::error::Result<Requests> {
        if log.stream.is_some() {
            return Ok(Requests::Streamed {
                headers: headers.to_vec(),
                body,
            });
        }
        if log.times.is_empty() || log.times.len() != log.requests.len() {
            return Err(crate::Error::usage(format!(
                "{}: no request to replay",
                log.source
            )));
        }
        let requests = log
            .requests
            .iter()
            .enumerate()
            .map(|(i, (m, path))| {
                request_of(m, path, headers, &body)
                    .map_err(|e| e.context(format!("{}: request {}", log.source, i + 1)))
            })
            .collect::<crate::error::Result<_>>()?;
        Ok(Requests::Listed(requests))
    }

    /// A streamed log's line as its request (checked before the run: a line that fails
    /// now is sent as `GET /`, which cannot happen unless the file changed).
    pub fn streamed(&self, method: &str, path: &str) -> Option<Rendered> {
        match self {
            Requests::Streamed { headers, body } => Some(
                request_of(method, path, headers, body)
                    .or_else(|_| request_of("GET", "/", headers, body))
                    .expect("GET / is a request"),
            ),
            _ => None,
        }
    }

    /// The request at this position of the schedule, and its scenario step; a drawn
    /// step's made what `client`'s wire carries, or why it cannot be sent
    /// ([`super::scenario::Unsent`]).
    pub fn at(
        &self,
        position: u64,
        client: &super::client::Client,
    ) -> (Result<Cow<'_, Rendered>, Unsent>, Option<usize>) {
        match self {
            Requests::Listed(r) => (Ok(Cow::Borrowed(&r[position as usize])), None),
            Requests::Drawn(d) => {
                let (step, h) = d.draw(position);
                let sc = &d.scenario;
                let r = sc.request(step, position, position, mix(h), &[], None);
                let r = r.and_then(|mut r| match client.fit(&mut r) {
                    Ok(()) => Ok(r),
                    Err(unfit) => Err(sc.unsent(step, position, &[], None, unfit)),
                });
                (r.map(Cow::Owned), Some(step))
            }
            Requests::Streamed { .. } => unreachable!("a streamed request comes with its send"),
        }
    }

    /// The scenario step of the request at `position`, without making the request.
    pub fn step_at(&self, position: u64) -> Option<usize> {
        match self {
            Requests::Listed(_) | Requests::Streamed { .. } => None,
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
            stream: None,
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
        let c = crate::load::client::Client::Command(Vec::new());
        assert!(r.at(0, &c).0.unwrap().body.is_empty());
        assert_eq!(r.at(1, &c).0.unwrap().body, body);
        for (m, p, why) in [
            ("GET", "/a b", "not a path"),
            ("GET", "/a\r\nHost: evil", "not a path"),
            ("GET", "relative", "not a path"),
            ("G(T", "/", "not an HTTP method"),
        ] {
            let e = Requests::replayed(&log(&[(m, p)]), &[], body.clone())
                .unwrap_err()
                .to_string();
            assert!(e.contains(why) && e.contains("request 1"), "{e}");
        }
        assert!(Requests::replayed(&log(&[]), &[], body).is_err());
    }
}
