//! Results of other benchmark tools as strainline runs (`strainline import`): each
//! benchmark becomes a case, each sample the tool kept a repetition, with units and
//! direction, so that `compare`, `history`, the reports and gates work on them
//! unchanged. The readers only turn a file into [`Bench`]es; storing is one function.

#[cfg(test)]
mod fuzz;
mod json;
mod text;

use crate::error::Category;
use crate::metrics::Direction;
use std::path::{Path, PathBuf};

use crate::store::{Metric, Status};

/// A tool's output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Hyperfine,
    Criterion,
    GoogleBenchmark,
    Jmh,
    GoTest,
    PytestBenchmark,
    BenchmarkDotNet,
    Junit,
}

impl Format {
    pub const ALL: [Format; 8] = [
        Format::Hyperfine,
        Format::Criterion,
        Format::GoogleBenchmark,
        Format::Jmh,
        Format::GoTest,
        Format::PytestBenchmark,
        Format::BenchmarkDotNet,
        Format::Junit,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Format::Hyperfine => "hyperfine",
            Format::Criterion => "criterion",
            Format::GoogleBenchmark => "google-benchmark",
            Format::Jmh => "jmh",
            Format::GoTest => "go",
            Format::PytestBenchmark => "pytest-benchmark",
            Format::BenchmarkDotNet => "benchmarkdotnet",
            Format::Junit => "junit",
        }
    }

    /// What a file of this format is, for error messages.
    pub fn expected(self) -> &'static str {
        match self {
            Format::Hyperfine => "hyperfine --export-json: {\"results\": [{\"command\", \"times\", …}]}",
            Format::Criterion => "Criterion's sample.json or estimates.json (target/criterion/NAME/new/), or a directory holding them",
            Format::GoogleBenchmark => "Google Benchmark --benchmark_format=json: {\"context\", \"benchmarks\": [{\"name\", \"real_time\", …}]}",
            Format::Jmh => "JMH -rf json: [{\"benchmark\", \"mode\", \"primaryMetric\": {\"rawData\", …}}]",
            Format::GoTest => "go test -bench text: lines like 'BenchmarkX-8  1000  1234 ns/op'",
            Format::PytestBenchmark => "pytest --benchmark-json: {\"machine_info\", \"benchmarks\": [{\"name\", \"stats\", …}]}",
            Format::BenchmarkDotNet => "BenchmarkDotNet's JSON exporter (full): {\"Benchmarks\": [{\"FullName\", \"Measurements\", \"Memory\", …}]}",
            Format::Junit => "JUnit XML: <testsuite> / <testsuites> with <testcase time=\"…\">",
        }
    }

    pub fn parse(s: &str) -> Option<Format> {
        let s = s.to_ascii_lowercase();
        Format::ALL.into_iter().find(|f| {
            f.name() == s
                || matches!(
                    (f, s.as_str()),
                    (Format::GoogleBenchmark, "gbench" | "googlebenchmark")
                        | (Format::GoTest, "go-test" | "gotest")
                        | (Format::PytestBenchmark, "pytest")
                        | (Format::BenchmarkDotNet, "bdn" | "benchmark-dotnet")
                )
        })
    }
}

/// One benchmark: its samples, each the metrics of one repetition.
#[derive(Debug, Clone, PartialEq)]
pub struct Bench {
    pub name: String,
    pub samples: Vec<Vec<Metric>>,
    /// `passed`, or `failed` (a JUnit test that failed, a command with a non-zero exit).
    pub status: Status,
}

/// Samples kept per benchmark at most: beyond, consecutive samples are averaged into
/// this many batch means (pytest-benchmark keeps every round — thousands; batch means
/// also damp the correlation between neighbouring rounds).
pub const MAX_SAMPLES: usize = 50;

/// `samples` folded into at most [`MAX_SAMPLES`] batch means, metric by metric.
fn batch_means(samples: Vec<Vec<Metric>>) -> Vec<Vec<Metric>> {
    let n = samples.len();
    if n <= MAX_SAMPLES {
        return samples;
    }
    (0..MAX_SAMPLES)
        .map(|k| {
            let batch = &samples[k * n / MAX_SAMPLES..(k + 1) * n / MAX_SAMPLES];
            let mut out: Vec<Metric> = batch[0].clone();
            for m in &mut out {
                let xs: Vec<f64> = batch
                    .iter()
                    .filter_map(|s| s.iter().find(|x| x.name == m.name).map(|x| x.value))
                    .collect();
                m.value = xs.iter().sum::<f64>() / xs.len() as f64;
            }
            out
        })
        .collect()
}

/// Benchmarks by name, in the order first seen: a tool lists repetitions one by one,
/// and a sample joins its benchmark in constant time (a linear search took 10 minutes
/// for a million benchmarks).
#[derive(Default)]
pub struct Benches {
    list: Vec<Bench>,
    at: std::collections::HashMap<String, usize>,
}

impl Benches {
    /// Adds a sample (none: a failed benchmark without a figure) to the bench of that
    /// name; `failed` marks it failed.
    pub fn push_sample(&mut self, name: String, sample: Vec<Metric>, failed: bool) {
        match self.at.get(&name) {
            Some(&i) => push_sample_into(&mut self.list[i], sample, failed),
            None => {
                self.at.insert(name.clone(), self.list.len());
                let mut b = Bench {
                    name,
                    samples: Vec::new(),
                    status: Status::Passed,
                };
                push_sample_into(&mut b, sample, failed);
                self.list.push(b);
            }
        }
    }
}

impl From<Benches> for Vec<Bench> {
    fn from(b: Benches) -> Vec<Bench> {
        b.list
    }
}

fn push_sample_into(b: &mut Bench, sample: Vec<Metric>, failed: bool) {
    if !sample.is_empty() {
        b.samples.push(sample);
    }
    if failed {
        b.status = Status::Failed;
    }
}

/// A time per operation, stored in nanoseconds.
pub fn time_ns(name: &str, ns: f64) -> Metric {
    Metric::new(name, ns, "ns", Direction::Lower)
}

/// Reads one file (or Criterion directory) in `format`, or detects it.
pub fn read(format: Option<Format>, path: &Path) -> crate::error::Result<(Format, Vec<Bench>)> {
    let shown = path.display().to_string();
    let criterion_files = if path.is_dir() {
        json::criterion_files(path)
    } else {
        Vec::new()
    };
    if path.is_dir() && criterion_files.is_empty() {
        return Err(crate::Error::usage(format!(
            "{shown}: a directory, and no Criterion sample.json below it"
        )));
    }
    let format = match format {
        Some(f) => f,
        None if path.is_dir() => Format::Criterion,
        None => {
            let text = read_text(path)?;
            detect(&text)
                .ok_or_else(|| {
                    format!(
                        "{shown}: not a format strainline imports; expected one of:\n{}",
                        Format::ALL
                            .iter()
                            .map(|f| format!("  {:<17} {}", f.name(), f.expected()))
                            .collect::<Vec<_>>()
                            .join("\n")
                    )
                })
                .usage()?
        }
    };
    let wrong = |why: crate::Error| {
        crate::Error::usage(format!(
            "{shown}: not {} output ({why}); expected {}",
            format.name(),
            format.expected()
        ))
    };
    let benches = match format {
        Format::Criterion => json::criterion(path, &criterion_files).map_err(wrong)?,
        Format::GoTest => text::go_test(&read_text(path)?).map_err(wrong)?,
        Format::Junit => text::junit(&read_text(path)?).map_err(wrong)?,
        f => {
            let text = read_text(path)?;
            let v: serde_json::Value = serde_json::from_str(&text)
                .map_err(|e| wrong(crate::Error::usage(format!("not JSON: {e}")).because(e)))?;
            match f {
                Format::Hyperfine => json::hyperfine(&v),
                Format::GoogleBenchmark => json::google_benchmark(&v),
                Format::Jmh => json::jmh(&v),
                Format::PytestBenchmark => json::pytest_benchmark(&v),
                Format::BenchmarkDotNet => json::benchmark_dotnet(&v),
                _ => unreachable!("read above"),
            }
            .map_err(wrong)?
        }
    };
    if benches.is_empty() {
        return Err(wrong(crate::Error::usage("it holds no benchmark")));
    }
    check_values(&shown, &benches)?;
    let benches = benches
        .into_iter()
        .map(|mut b| {
            b.samples = batch_means(std::mem::take(&mut b.samples));
            b
        })
        .collect();
    Ok((format, benches))
}

/// The largest file read, bytes: far above any tool's results (hyperfine's JSON of a
/// million runs is ~40 MB), and what a file or a device that never ends is cut at.
pub const MAX_FILE: u64 = 64 << 20;

/// The most benchmarks, and samples (stored cases), one import holds.
pub const MAX_BENCHES: usize = 10_000;
pub const MAX_CASES: usize = 100_000;

/// The largest value a metric may have (ns, bytes, ops/s: 10¹⁸ is 31 years of ns).
const MAX_VALUE: f64 = 1e18;

fn read_text(path: &Path) -> crate::error::Result<String> {
    use std::io::Read;
    let shown = path.display();
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_FILE + 1).read_to_end(&mut bytes))
        .usage_with(|e| format!("{shown}: {e}"))?;
    if bytes.len() as u64 > MAX_FILE {
        return Err(crate::Error::usage(format!(
            "{shown}: larger than {} MiB, more than any benchmark tool's results: give the tool's own output file",
            MAX_FILE >> 20
        )));
    }
    String::from_utf8(bytes).map_err(|_| crate::Error::usage(format!("{shown}: not text (UTF-8)")))
}

/// Every value is a measurement: finite, not negative, and below [`MAX_VALUE`] — a
/// NaN failed in the store after the run was begun, and 1e308 or -5 were stored.
fn check_values(shown: &str, benches: &[Bench]) -> crate::error::Result<()> {
    for b in benches {
        for m in b.samples.iter().flatten() {
            if !(m.value.is_finite() && (0.0..=MAX_VALUE).contains(&m.value)) {
                return Err(crate::Error::usage(format!(
                    "{shown}: benchmark '{}': {} = {} is not a measurement (a finite value from 0 to 1e18 {})",
                    crate::units::one_line(&b.name),
                    m.name,
                    m.value,
                    m.unit
                )));
            }
        }
    }
    Ok(())
}

/// The format a file's text looks like.
pub fn detect(text: &str) -> Option<Format> {
    let t = text.trim_start();
    if t.starts_with('<') {
        return (t.contains("<testsuite") || t.contains("<testcase")).then_some(Format::Junit);
    }
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(t) {
        return json::detect(&v);
    }
    t.lines()
        .any(|l| l.starts_with("Benchmark") && l.contains("ns/op"))
        .then_some(Format::GoTest)
}

/// Files given on the command line, and the format each is read in.
pub struct Imported {
    pub files: Vec<(PathBuf, Format)>,
    pub benches: Vec<Bench>,
}

/// Reads every file; benchmarks of the same name across files pool their samples.
pub fn read_all(format: Option<Format>, paths: &[PathBuf]) -> crate::error::Result<Imported> {
    let mut files = Vec::new();
    let mut benches = Benches::default();
    for p in paths {
        let (f, bs) = read(format, p)?;
        files.push((p.clone(), f));
        for b in bs {
            let failed = b.status != Status::Passed;
            if b.samples.is_empty() {
                benches.push_sample(b.name.clone(), Vec::new(), failed);
            }
            for sample in b.samples {
                benches.push_sample(b.name.clone(), sample, failed);
            }
        }
        let cases: usize = benches.list.iter().map(|b| b.samples.len().max(1)).sum();
        if benches.list.len() > MAX_BENCHES || cases > MAX_CASES {
            return Err(crate::Error::usage(format!(
                "{}: {} benchmarks ({cases} samples) so far, more than one import holds ({MAX_BENCHES} benchmarks, {MAX_CASES} samples): import the files in parts",
                p.display(),
                benches.list.len()
            )));
        }
    }
    Ok(Imported {
        files,
        benches: benches.list,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_of_rounds_become_fifty_batch_means() {
        let samples: Vec<Vec<Metric>> =
            (0..1000).map(|i| vec![time_ns("time", i as f64)]).collect();
        let b = batch_means(samples);
        assert_eq!(b.len(), MAX_SAMPLES);
        // Batch k holds 20k..20k+19: its mean is 20k + 9.5; the overall mean is kept.
        assert_eq!(b[0][0].value, 9.5);
        assert_eq!(b[49][0].value, 989.5);
        let short: Vec<Vec<Metric>> = (0..7).map(|i| vec![time_ns("time", i as f64)]).collect();
        assert_eq!(batch_means(short.clone()), short);
    }

    #[test]
    fn formats_have_names_and_aliases() {
        for f in Format::ALL {
            assert_eq!(Format::parse(f.name()), Some(f));
        }
        assert_eq!(Format::parse("gbench"), Some(Format::GoogleBenchmark));
        assert_eq!(Format::parse("pytest"), Some(Format::PytestBenchmark));
        assert_eq!(Format::parse("nope"), None);
    }
}
