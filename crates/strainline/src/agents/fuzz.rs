//! Hostile frames for the agent protocol's decoder, bounded and seeded (the same inputs
//! on every run): every kind of message an agent or a coordinator sends — a tally's
//! histograms, a run's job, a monitor's samples — serialized, then mutated (bytes
//! flipped, cut, spliced, repeated, numbers swapped for extremes). Reading a frame may
//! fail; it may not panic, and what a peer sent is quoted only as printable text.

use std::panic::{catch_unwind, AssertUnwindSafe};

use super::wire::{self, FromAgent, ToAgent};
use crate::load::recorder::Tally;

use crate::rng::Rng;

/// Values that broke decoders elsewhere, spliced in for a number or a string.
const EXTREMES: &[&str] = &[
    "-1",
    "1e400",
    "18446744073709551616",
    "-9223372036854775809",
    "NaN",
    "null",
    "\"\"",
    "\"\\u0000\"",
    "\"\\ud800\"",
    "[]",
    "{}",
    "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]",
    "\"\u{1b}[2J\"",
    "\"HISTFAAAAB54nJNpmSzMwMDAwgABzFCaEUzqXFrsu2LywBo=\"",
];

/// Well-formed frames of every kind, as their peers write them.
fn originals() -> Vec<String> {
    let mut t = Tally::default();
    for v in [120, 340, 90_000, 1, 3_600_000_000] {
        t.corrected.record(v).unwrap();
        t.service.record(v / 2 + 1).unwrap();
        t.lag.record(17).unwrap();
    }
    (t.sent, t.completed, t.ok, t.unsent) = (5, 5, 4, 2);
    t.by_status.insert(200, 4);
    t.by_error
        .insert(crate::load::recorder::ErrorKind::Reset, 1);
    let mut out: Vec<String> = [
        FromAgent::Welcome {
            protocol: wire::PROTOCOL,
            strainline: "0.1.0".into(),
            name: "a1".into(),
            proof: Some("ab".repeat(32)),
        },
        FromAgent::Clock {
            id: 7,
            unix_ns: 1_700_000_000_000_000_000,
        },
        FromAgent::Second {
            index: 3,
            tally: Box::new(t.clone()),
        },
        FromAgent::Refused { why: "busy".into() },
        FromAgent::Ready,
    ]
    .iter()
    .map(|m| serde_json::to_string(m).unwrap())
    .collect();
    out.extend(
        [
            ToAgent::Hello {
                protocol: wire::PROTOCOL,
                strainline: "0.1.0".into(),
                proof: None,
            },
            ToAgent::Clock { id: 1 },
            ToAgent::Renew,
            ToAgent::Stop,
            ToAgent::Unwatch,
        ]
        .iter()
        .map(|m| serde_json::to_string(m).unwrap()),
    );
    // A run's job, as a coordinator sends it (the spec is the biggest frame).
    use crate::load::{BodySpec, ClientOptions, LoadSpec, Offer, Slice, Work};
    let job = wire::Job {
        spec: LoadSpec {
            work: Work::Http {
                url: "http://127.0.0.1:8080/x?y=1".into(),
                method: "POST".into(),
                headers: vec![("X-A".into(), "b".into())],
                body: BodySpec::Bytes(b"hi".to_vec()),
            },
            offer: Offer::Open {
                rate: crate::load::schedule::Rate::Constant(100.0),
                poisson: None,
                pool_cap: Some(8),
            },
            threads: Some(1),
            duration: Some(std::time::Duration::from_secs(1)),
            count: None,
            timeout: std::time::Duration::from_secs(1),
            client: ClientOptions::default(),
            vars: Vec::new(),
            seed: None,
            percentiles: Default::default(),
        },
        slice: Slice { index: 0, of: 2 },
        start_unix_ns: 1,
        lease_ms: 1000,
        files: vec![("users.csv".into(), "id\n1\n".into())],
    };
    out.push(serde_json::to_string(&ToAgent::Run(Box::new(job))).unwrap());
    out
}

fn mutate(rng: &mut Rng, frame: &str) -> Vec<u8> {
    let mut b = frame.as_bytes().to_vec();
    for _ in 0..1 + rng.index(4) {
        let at = rng.index(b.len() + 1);
        match rng.index(6) {
            which @ 0..=2 => rng.mutate_bytes(&mut b, at, which),
            3 => {
                // A number or a string replaced by an extreme.
                let text = String::from_utf8_lossy(&b).into_owned();
                let mut at = at.min(text.len());
                while !text.is_char_boundary(at) {
                    at -= 1;
                }
                if let Some(colon) = text[at..].find(':').map(|c| c + at) {
                    let end = text[colon + 1..]
                        .find([',', '}', ']'])
                        .map_or(text.len(), |e| colon + 1 + e);
                    let mut t = text.clone();
                    t.replace_range(colon + 1..end, EXTREMES[rng.index(EXTREMES.len())]);
                    b = t.into_bytes();
                }
            }
            4 => {
                let from = at.min(b.len());
                let piece = b[from..].to_vec();
                b.extend_from_slice(&piece);
            }
            _ => b.insert(at.min(b.len()), b"\n{}\"\\"[rng.index(5)]),
        }
    }
    b.push(b'\n');
    b
}

#[test]
fn the_frame_decoder_never_panics_on_hostile_frames() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let mut rng = Rng::new(0xF4A3_E5EED);
    let frames = originals();
    // Each original is a frame its reader takes whole.
    for f in &frames {
        let to = serde_json::from_str::<ToAgent>(f).is_ok();
        let from = serde_json::from_str::<FromAgent>(f).is_ok();
        assert!(to || from, "not a frame: {f}");
    }
    let mut errors = 0;
    for k in 0..4_000 {
        let bytes = mutate(&mut rng, &frames[k % frames.len()]);
        let r = catch_unwind(AssertUnwindSafe(|| {
            rt.block_on(async {
                let mut a = tokio::io::BufReader::new(&bytes[..]);
                let to = wire::recv::<_, ToAgent>(&mut a).await;
                let mut b = tokio::io::BufReader::new(&bytes[..]);
                let from = wire::recv::<_, FromAgent>(&mut b).await;
                let mut c = tokio::io::BufReader::new(&bytes[..]);
                let hello = wire::recv_within::<_, ToAgent>(&mut c, wire::MAX_HELLO).await;
                // A job that decoded is planned, as the agent does before any load.
                if let Ok(Some(ToAgent::Run(job))) = &to {
                    let _ = crate::load::plan(&job.spec);
                }
                // A tally that decoded is used as the coordinator uses it.
                if let Ok(Some(FromAgent::Second { tally, .. })) = &from {
                    let mut m = Tally::default();
                    m.merge(tally);
                    let _ = m.error_rate();
                    let _ = crate::load::summary::percentiles(&m.corrected);
                }
                for e in [to.err(), from.err(), hello.err()].into_iter().flatten() {
                    errors += 1;
                    let e = e.to_string();
                    assert!(!e.contains('\u{1b}') && !e.contains('\n'), "{e:?}");
                }
            })
        }));
        assert!(
            r.is_ok(),
            "the frame decoder panicked on {:?}",
            String::from_utf8_lossy(&bytes)
        );
    }
    // The mutations reach the decoder's error paths, not only the happy one.
    assert!(errors > 4_000, "{errors} errors in 12,000 reads");
}
