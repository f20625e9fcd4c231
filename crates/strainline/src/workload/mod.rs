//! Workloads from production access logs: what the requests were (`characterize`), how
//! far another workload is from them (`compare`), and a scenario that sends them again
//! (`scenario`); and from a recorded browser session, a user's flow (`flow`, [`har`]).
//! The input side of the pipeline: a test's load is only as good as its resemblance to
//! what the target really serves.

pub mod compare;
pub mod har;
pub mod parse;
pub mod profile;
pub mod render;
pub mod replay;
pub mod route;
pub mod scenario;

use crate::error::Category;
use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;

use parse::{JsonFields, Malformed};
use profile::{Builder, Profile};
use route::Routes;

/// What to read and how to split it.
#[derive(Debug, Clone, Default)]
pub struct Options {
    pub fields: JsonFields,
    pub routes: Routes,
    /// Split into windows of this many seconds (`--by hour`), aligned to UTC.
    pub by: Option<u64>,
}

/// Everything `workload characterize` found.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct Characterization {
    pub schema: String,
    pub files: Vec<String>,
    /// The format of each file, as detected.
    pub formats: Vec<String>,
    pub lines: u64,
    pub requests: u64,
    pub malformed: u64,
    pub malformed_examples: Vec<MalformedLine>,
    pub all: Profile,
    /// One per window when split with `--by`, in time order.
    pub windows: Vec<Profile>,
}

#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct MalformedLine {
    pub file: String,
    pub line: u64,
    pub reason: String,
    pub text: String,
}

pub const SCHEMA: &str = "strainline.workload.v1";

/// Reads the logs in order and profiles them.
pub fn characterize(files: &[PathBuf], opts: &Options) -> crate::error::Result<Characterization> {
    let mut all = Builder::new("all");
    let mut windows: BTreeMap<i64, Builder> = BTreeMap::new();
    let mut bad: (u64, Vec<Malformed>) = (0, Vec::new());
    let mut formats = Vec::new();
    let mut lines = 0;
    let mut requests = 0;
    for f in files {
        let (format, n) = parse::read(f, &opts.fields, &mut bad, |e| {
            requests += 1;
            let routed = opts.routes.route(&e.path);
            all.add(&e, &routed);
            if let Some(w) = opts.by {
                let key = (e.time / w as f64).floor() as i64;
                windows
                    .entry(key)
                    .or_insert_with(|| Builder::new(window_label(key * w as i64, w)))
                    .add(&e, &routed);
            }
        })?;
        formats.push(format.name().to_string());
        lines += n;
    }
    if requests == 0 {
        return Err(crate::Error::usage(format!(
            "no request could be read from {} ({} malformed lines)",
            files
                .iter()
                .map(|f| f.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
            bad.0
        )));
    }
    Ok(Characterization {
        schema: SCHEMA.into(),
        files: files.iter().map(|f| f.display().to_string()).collect(),
        formats,
        lines,
        requests,
        malformed: bad.0,
        malformed_examples: bad
            .1
            .into_iter()
            .map(|m| MalformedLine {
                file: m.file,
                line: m.line,
                reason: m.reason,
                text: m.text,
            })
            .collect(),
        all: all.finish(),
        windows: windows.into_values().map(Builder::finish).collect(),
    })
}

/// `hour`, `minute`, `day` or a duration (`15m`) in seconds.
pub fn window_seconds(s: &str) -> crate::error::Result<u64> {
    let secs = match s {
        "minute" => 60,
        "hour" => 3600,
        "day" => 86_400,
        other => crate::units::parse_duration(other)
            .usage_with(|e| format!("--by '{other}': {e} (or minute, hour, day)"))?
            .as_secs(),
    };
    if secs == 0 {
        return Err(crate::Error::usage(format!(
            "--by '{s}': a window must be a second or longer"
        )));
    }
    Ok(secs)
}

/// `2026-11-22 09:00 UTC` (with seconds when the window is under a minute).
pub fn window_label(start: i64, w: u64) -> String {
    format!("{} UTC", crate::clock::utc_minute(start, w < 60))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// A synthetic Combined log: `mix` routes by weight, arrivals at `per_second[s]`
    /// requests in second `s` (spread within it), sizes by route.
    pub fn synthetic(per_second: &[u32], seed: u64) -> String {
        let mut rng = seed;
        let mut next = || {
            rng = rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = rng;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
        };
        let mut out = String::new();
        for (s, &n) in per_second.iter().enumerate() {
            for _ in 0..n {
                let r = next();
                let id = (next() * 10_000.0) as u32;
                let (req, size) = if r < 0.6 {
                    (format!("POST /push/dev-{id}"), 20)
                } else if r < 0.9 {
                    (format!("GET /devices/{id}/state"), 800)
                } else {
                    ("GET /health".to_string(), 2)
                };
                let t = 1_795_338_000 + s as i64;
                let sod = t.rem_euclid(86_400);
                out.push_str(&format!(
                    "10.0.{}.{} - - [22/Nov/2026:{:02}:{:02}:{:02} +0000] \"{req} HTTP/1.1\" 200 {size} \"-\" \"dev\"\n",
                    id % 7,
                    id % 200,
                    sod / 3600,
                    sod % 3600 / 60,
                    sod % 60
                ));
            }
        }
        out
    }

    /// Poisson counts with mean `mean` (Knuth's method; fine for the means here).
    fn poisson(mean: f64, n: usize, seed: u64) -> Vec<u32> {
        let mut rng = seed;
        let mut u = || {
            rng = rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = rng;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            (((z ^ (z >> 31)) >> 11) as f64 + 1.0) / (1u64 << 53) as f64
        };
        (0..n)
            .map(|_| {
                // Sum of exponential gaps within one second, for large means.
                let mut t = 0.0;
                let mut k = 0;
                loop {
                    t += -u().ln() / mean;
                    if t > 1.0 {
                        break k;
                    }
                    k += 1;
                }
            })
            .collect()
    }

    fn write(text: &str, name: &str) -> (tempdir::Dir, PathBuf) {
        let d = tempdir::Dir::new();
        let p = d.0.join(name);
        std::fs::File::create(&p)
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
        (d, p)
    }

    mod tempdir {
        pub struct Dir(pub std::path::PathBuf);
        impl Dir {
            pub fn new() -> Dir {
                use std::sync::atomic::{AtomicU32, Ordering};
                static N: AtomicU32 = AtomicU32::new(0);
                let p = std::env::temp_dir().join(format!(
                    "strainline-workload-{}-{}",
                    std::process::id(),
                    N.fetch_add(1, Ordering::Relaxed)
                ));
                std::fs::create_dir_all(&p).unwrap();
                Dir(p)
            }
        }
        impl Drop for Dir {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
    }

    #[test]
    fn a_known_mix_and_poisson_rate_are_recovered() {
        let counts = poisson(200.0, 300, 7);
        let total: u32 = counts.iter().sum();
        let (_d, p) = write(&synthetic(&counts, 1), "access.log");
        let c = characterize(&[p], &Options::default()).unwrap();
        assert_eq!(c.formats, ["Combined Log Format"]);
        assert_eq!(c.requests, u64::from(total));
        assert_eq!(c.malformed, 0);
        let shares: Vec<(&str, f64)> = c
            .all
            .mix
            .iter()
            .map(|r| (r.route.as_str(), r.share))
            .collect();
        assert_eq!(shares[0].0, "/push/{id}");
        assert_eq!(shares[1].0, "/devices/{id}/state");
        assert_eq!(shares[2].0, "/health");
        for (got, want) in shares.iter().zip([60.0, 30.0, 10.0]) {
            assert!((got.1 - want).abs() < 1.0, "{shares:?}");
        }
        // A constant size reads exactly.
        assert_eq!(c.all.mix[1].bytes.p50, 800.0);
        assert_eq!(c.all.mix[1].bytes.p99, 800.0);
        // The mean rate: of the whole seconds but the first and last (a real log's are
        // partial), within 1% of the requests over the 300 seconds.
        let whole = f64::from(total) / 300.0;
        assert!(
            (c.all.rate.mean - whole).abs() < 0.01 * whole,
            "{}",
            c.all.rate.mean
        );
        assert!((c.all.rate.mean - 200.0).abs() < 2.0, "{}", c.all.rate.mean);
        let d1 = &c.all.rate.dispersion[0];
        assert!((d1.index - 1.0).abs() < 0.3, "{d1:?}");
        assert!(c.all.rate.poisson, "{:?}", c.all.rate.dispersion);
    }

    #[test]
    fn bursts_are_told_from_poisson() {
        // 200/s Poisson, with a 5 s burst at 1,000/s every 30 s.
        let mut counts = poisson(200.0, 300, 9);
        for (s, c) in counts.iter_mut().enumerate() {
            if s % 30 < 5 {
                *c += 800;
            }
        }
        let (_d, p) = write(&synthetic(&counts, 2), "bursty.log");
        let c = characterize(&[p], &Options::default()).unwrap();
        let d1 = &c.all.rate.dispersion[0];
        assert!(d1.index > 100.0, "{d1:?}");
        assert!(!c.all.rate.poisson);
        assert!(c.all.rate.per_second.max >= 1000.0);
    }

    #[test]
    fn malformed_lines_are_counted_and_shown_and_windows_split() {
        let mut text = synthetic(&[50; 120], 3);
        text.push_str("10.0.0.1 - - [22/Nov/2026:09:01:0\n");
        text.push_str("\u{1}\u{2}garbage\n");
        let mut bytes = text.into_bytes();
        bytes.extend_from_slice(b"\xff\xfe binary\n");
        // A line of 1 MiB: malformed, its rest skipped, the next line read.
        bytes.extend(std::iter::repeat_n(b'a', 1 << 20));
        bytes.push(b'\n');
        bytes.extend_from_slice(synthetic(&[1], 4).as_bytes());
        let d = tempdir::Dir::new();
        let p = d.0.join("mixed.log");
        std::fs::write(&p, &bytes).unwrap();
        let opts = Options {
            by: Some(60),
            ..Options::default()
        };
        let c = characterize(std::slice::from_ref(&p), &opts).unwrap();
        assert_eq!(c.requests, 6001);
        assert_eq!(c.malformed, 4);
        assert_eq!(c.malformed_examples[0].line, 6001);
        assert!(c.malformed_examples[2].reason.contains("UTF-8"));
        assert_eq!(c.malformed_examples[3].line, 6004);
        assert!(c.malformed_examples[3]
            .reason
            .starts_with("longer than 64 KiB"));
        assert_eq!(c.windows.len(), 2);
        assert_eq!(c.windows[0].window, "2026-11-22 09:00 UTC");
        // (the line after the long one is at the log's first second)
        assert_eq!(c.windows[0].requests, 3001);
        // A file that is no log at all: one error naming the formats.
        let (_e, q) = write("[package]\nname = \"x\"\n", "Cargo.toml");
        let err = characterize(&[q], &Options::default())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("Common Log Format") && err.contains("JSON lines"),
            "{err}"
        );
        // Nor is a file without a newline in its first 64 KiB.
        let (_f, r) = write(&"x".repeat(200_000), "blob.bin");
        let err = characterize(&[r], &Options::default())
            .unwrap_err()
            .to_string();
        assert!(
            err.ends_with("is not an access log strainline reads: line 1 is longer than 64 KiB: not an access log line"),
            "{err}"
        );
    }

    #[test]
    fn gzip_is_read_as_the_plain_text() {
        let text = synthetic(&[20; 10], 4);
        let d = tempdir::Dir::new();
        let p = d.0.join("access.log.gz");
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(text.as_bytes()).unwrap();
        std::fs::write(&p, gz.finish().unwrap()).unwrap();
        let c = characterize(&[p], &Options::default()).unwrap();
        assert_eq!(c.requests, 200);
    }
}
