//! What a unit of work sends, whatever its protocol: the `seq`th of the workload's own
//! (HTTP's [`Template`], its [`Body`] fixed or drawn from a pool of random payloads), or
//! a scenario step's [`Rendered`] request; [`Outgoing`] is either. HTTP sends all of a
//! step's request; another protocol ([`super::proto`]) sends what it means in it (gRPC
//! its headers and body, MQTT its path as the topic).

use std::sync::Arc;

use bytes::Bytes;
use hyper::header::{HeaderName, HeaderValue};
use hyper::{Method, Uri};

/// What every request looks like.
#[derive(Clone)]
pub struct Template {
    pub method: Method,
    pub path: Uri,
    pub headers: Vec<(HeaderName, HeaderValue)>,
    pub body: Body,
}

#[derive(Clone)]
pub enum Body {
    Empty,
    Fixed(Bytes),
    /// Random bytes: a pool of distinct payloads of one size, used in turn.
    Random(Arc<Vec<Bytes>>),
}

impl Body {
    /// A pool of `count` random payloads of `len` bytes each.
    pub fn random(len: usize, count: usize, seed: u64) -> Body {
        let pool = (0..count.max(1) as u64)
            .map(|k| Bytes::from(crate::rng::text(len, crate::rng::mix(seed ^ k))))
            .collect();
        Body::Random(Arc::new(pool))
    }

    /// The body a workload gives: up to 64 distinct random bodies (a target cannot cache
    /// one answer) in at most 16 MiB together (a large body is one shared copy, not 64).
    pub fn of(spec: &super::spec::BodySpec) -> Body {
        use super::spec::BodySpec;
        /// What a random body's pool of distinct bodies may hold, bytes.
        const RANDOM_POOL_BYTES: usize = 16 << 20;
        match spec {
            BodySpec::Empty => Body::Empty,
            BodySpec::Bytes(b) => Body::Fixed(Bytes::from(b.clone())),
            BodySpec::Random { len, seed } => Body::random(
                *len,
                (RANDOM_POOL_BYTES / (*len).max(1)).clamp(1, 64),
                *seed,
            ),
        }
    }

    pub(crate) fn pick(&self, seq: u64) -> Bytes {
        match self {
            Body::Empty => Bytes::new(),
            Body::Fixed(b) => b.clone(),
            Body::Random(pool) => pool[(seq % pool.len() as u64) as usize].clone(),
        }
    }
}

/// Whether an HTTP request with `method` and `body` states its body's length.
pub fn sends_length(method: &Method, body: &[u8]) -> bool {
    !body.is_empty() || matches!(*method, Method::POST | Method::PUT | Method::PATCH)
}

/// Whether a header says how the body is framed (`Content-Length`,
/// `Transfer-Encoding`): the client writes those itself, and one a step or a script
/// sets beside them would let the server read the body as another request.
pub fn frames_body(name: &HeaderName) -> bool {
    *name == hyper::header::CONTENT_LENGTH || *name == hyper::header::TRANSFER_ENCODING
}

/// A workload's headers (`-H 'Name: value'`), checked.
pub fn headers(pairs: &[(String, String)]) -> crate::error::Result<Vec<(HeaderName, HeaderValue)>> {
    pairs
        .iter()
        .map(|(k, v)| {
            let name = HeaderName::from_bytes(k.trim().as_bytes())
                .map_err(|_| crate::Error::usage(format!("header '{k}: {v}': bad header name")))?;
            let value = HeaderValue::from_str(v.trim())
                .map_err(|_| crate::Error::usage(format!("header '{k}: {v}': bad header value")))?;
            Ok((name, value))
        })
        .collect()
}

/// A request made for one send (scenario steps, whose text changes per request).
#[derive(Clone)]
pub struct Rendered {
    pub method: Method,
    pub path: String,
    pub headers: Vec<(HeaderName, HeaderValue)>,
    pub body: Bytes,
    /// The step extracts from or checks its reply: the protocol keeps the reply's head
    /// and body ([`super::flow::Kept`]) in [`super::client::Reply::kept`].
    pub keep: super::flow::Keep,
}

/// What a unit of work sends: the workload's own, as the `seq`th unit of the run (its
/// protocol's plan holds it), or a scenario step's rendered request.
#[derive(Clone, Copy)]
pub enum Outgoing<'a> {
    Workload(u64),
    Rendered(&'a Rendered),
}
