//! Hostile files for every import format, bounded and seeded: each format's recorded
//! fixture (`tests/fixtures/import/`) mutated — bytes flipped, cut, spliced, repeated,
//! numbers swapped for extremes — and read both as its format and detected. A reader may
//! refuse a file; it may not panic, and what it accepts is a measurement.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use super::{read, Format};

use crate::rng::Rng;

const EXTREMES: &[&str] = &[
    "-1",
    "1e400",
    "-1e308",
    "NaN",
    "null",
    "\"\"",
    "[]",
    "{}",
    "0",
    "1e-320",
    "18446744073709551616",
    "\"\u{1b}]8;;x\u{7}\"",
    "\"x1\"",
    "inf",
    "<",
    "&amp;",
];

fn mutate(rng: &mut Rng, original: &[u8]) -> Vec<u8> {
    let mut b = original.to_vec();
    for _ in 0..1 + rng.index(4) {
        let at = rng.index(b.len() + 1);
        match rng.index(5) {
            which @ 0..=2 => rng.mutate_bytes(&mut b, at, which),
            3 => {
                // A value (after a `:`, `=` or `"`, up to its end) replaced by an extreme.
                let from = b[at.min(b.len())..]
                    .iter()
                    .position(|c| matches!(c, b':' | b'='))
                    .map(|p| at + p + 1);
                if let Some(from) = from {
                    let end = b[from..]
                        .iter()
                        .position(|c| matches!(c, b',' | b'}' | b']' | b' ' | b'\n' | b'/'))
                        .map_or(b.len(), |e| from + e);
                    let x = EXTREMES[rng.index(EXTREMES.len())].as_bytes().to_vec();
                    b.splice(from..end, x);
                }
            }
            _ => {
                let from = at.min(b.len());
                let piece = b[from..(from + 200).min(b.len())].to_vec();
                b.splice(from..from, piece);
            }
        }
    }
    b
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/import")
}

/// Reads `path` as `format` and detected; panics are the failure.
fn survive(format: Format, path: &Path, what: &dyn Fn() -> String) {
    for f in [Some(format), None] {
        let r = catch_unwind(AssertUnwindSafe(|| read(f, path)));
        match r {
            Err(_) => panic!("the {} reader panicked on {}", format.name(), what()),
            Ok(Ok((_, benches))) => {
                for m in benches.iter().flat_map(|b| b.samples.iter().flatten()) {
                    assert!(
                        m.value.is_finite() && m.value >= 0.0,
                        "{} accepted {} = {} from {}",
                        format.name(),
                        m.name,
                        m.value,
                        what()
                    );
                }
            }
            Ok(Err(_)) => {}
        }
    }
}

#[test]
fn no_import_reader_panics_on_mutated_files() {
    let mut rng = Rng::new(0x1A9_0F7E5);
    let dir = tempfile::tempdir().unwrap();
    let files = [
        (Format::Hyperfine, "hyperfine/fast-a.json"),
        (Format::GoogleBenchmark, "google-benchmark/fast-a.json"),
        (Format::Jmh, "jmh/fast-a.json"),
        (Format::GoTest, "go/fast-a.txt"),
        (Format::PytestBenchmark, "pytest-benchmark/fast-a.json"),
        (Format::BenchmarkDotNet, "benchmarkdotnet/fast-a.json"),
        (Format::Junit, "junit/fast-a/run2.xml"),
    ];
    for (format, rel) in files {
        let original = std::fs::read(fixtures().join(rel)).unwrap();
        // The fixture itself reads.
        assert!(read(Some(format), &fixtures().join(rel)).is_ok(), "{rel}");
        let path = dir.path().join("f");
        for _ in 0..300 {
            let bytes = mutate(&mut rng, &original);
            std::fs::write(&path, &bytes).unwrap();
            survive(format, &path, &|| {
                format!("a mutation of {rel}: {:?}", String::from_utf8_lossy(&bytes))
            });
        }
    }
    // Criterion: a directory of JSON files, one of them mutated at a time.
    let bench = dir.path().join("criterion/sum/new");
    std::fs::create_dir_all(&bench).unwrap();
    let src = fixtures().join("criterion/fast-a/sum 10000/new");
    let names = ["sample.json", "estimates.json", "benchmark.json"];
    for _ in 0..150 {
        for n in names {
            std::fs::copy(src.join(n), bench.join(n)).unwrap();
        }
        let n = names[rng.index(names.len())];
        let bytes = mutate(&mut rng, &std::fs::read(src.join(n)).unwrap());
        std::fs::write(bench.join(n), &bytes).unwrap();
        survive(Format::Criterion, &dir.path().join("criterion"), &|| {
            format!(
                "a mutation of criterion's {n}: {:?}",
                String::from_utf8_lossy(&bytes)
            )
        });
    }
}
