//! The JSON formats: hyperfine, Criterion, Google Benchmark, JMH, pytest-benchmark and
//! BenchmarkDotNet. Each keeps per-sample times where the tool does (one repetition per
//! sample), and its summary as one repetition where it does not. Times are stored in
//! nanoseconds per operation.

use crate::error::Category;
use crate::metrics::Direction;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{time_ns, Bench, Format};
use crate::store::{Metric, Status};

/// The JSON format a document looks like.
pub fn detect(v: &Value) -> Option<Format> {
    if let Some(first) = v.as_array().and_then(|a| a.first()) {
        return first.get("primaryMetric").map(|_| Format::Jmh);
    }
    let has = |k: &str| v.get(k).is_some();
    if v["results"]
        .as_array()
        .is_some_and(|r| r.iter().any(|x| x.get("command").is_some()))
    {
        Some(Format::Hyperfine)
    } else if has("benchmarks") && has("context") {
        Some(Format::GoogleBenchmark)
    } else if has("benchmarks") && has("machine_info") {
        Some(Format::PytestBenchmark)
    } else if has("Benchmarks") {
        Some(Format::BenchmarkDotNet)
    } else if (has("iters") && has("times")) || v["mean"].get("point_estimate").is_some() {
        Some(Format::Criterion)
    } else {
        None
    }
}

fn list<'a>(v: &'a Value, key: &str) -> crate::error::Result<&'a Vec<Value>> {
    v[key]
        .as_array()
        .ok_or_else(|| crate::Error::usage(format!("no \"{key}\" list")))
}

fn number(v: &Value, key: &str, what: &str) -> crate::error::Result<f64> {
    v[key]
        .as_f64()
        .ok_or_else(|| crate::Error::usage(format!("{what}: no number \"{key}\"")))
}

/// hyperfine: one case per command, one repetition per timed run (wall time).
pub fn hyperfine(v: &Value) -> crate::error::Result<Vec<Bench>> {
    list(v, "results")?
        .iter()
        .map(|r| {
            let name = r["command"]
                .as_str()
                .ok_or("a result without \"command\"")
                .usage()?
                .to_string();
            let times: Vec<f64> = match r["times"].as_array() {
                Some(t) => t.iter().filter_map(Value::as_f64).collect(),
                None => vec![number(r, "mean", &name)?],
            };
            let failed = r["exit_codes"]
                .as_array()
                .is_some_and(|c| c.iter().any(|x| x.as_i64() != Some(0)));
            Ok(Bench {
                name,
                samples: times
                    .iter()
                    .map(|t| vec![time_ns("time", t * 1e9)])
                    .collect(),
                status: if failed {
                    Status::Failed
                } else {
                    Status::Passed
                },
            })
        })
        .collect()
}

/// Nanoseconds in one `unit` of Google Benchmark's `time_unit`.
fn gbench_unit(u: &str) -> crate::error::Result<f64> {
    match u {
        "ns" => Ok(1.0),
        "us" => Ok(1e3),
        "ms" => Ok(1e6),
        "s" => Ok(1e9),
        other => Err(crate::Error::usage(format!("unknown time_unit '{other}'"))),
    }
}

/// Google Benchmark: one repetition per iteration run (`--benchmark_repetitions`), or
/// the mean aggregate when only aggregates were reported.
pub fn google_benchmark(v: &Value) -> crate::error::Result<Vec<Bench>> {
    if let Some(n) = v["context"]["json_schema_version"].as_i64() {
        if n > 1 {
            return Err(crate::Error::usage(format!(
                "a newer schema: json_schema_version {n}; strainline reads 1"
            )));
        }
    }
    let all = list(v, "benchmarks")?;
    let iterations: Vec<&Value> = all
        .iter()
        .filter(|b| b["run_type"].as_str().is_none_or(|t| t == "iteration"))
        .collect();
    let rows: Vec<&Value> = if iterations.is_empty() {
        all.iter()
            .filter(|b| b["aggregate_name"] == "mean")
            .collect()
    } else {
        iterations
    };
    let mut out = super::Benches::default();
    for b in rows {
        let name = b["run_name"]
            .as_str()
            .or(b["name"].as_str())
            .ok_or("a benchmark without \"name\"")
            .usage()?
            .to_string();
        let failed = b["error_occurred"].as_bool() == Some(true);
        let mut sample = Vec::new();
        if !failed {
            let unit = gbench_unit(b["time_unit"].as_str().unwrap_or("ns"))?;
            sample.push(time_ns("time", number(b, "real_time", &name)? * unit));
            if let Some(c) = b["cpu_time"].as_f64() {
                sample.push(time_ns("cpu_time", c * unit));
            }
            if let Some(x) = b["bytes_per_second"].as_f64() {
                sample.push(Metric::new("throughput", x, "B/s", Direction::Higher));
            }
            if let Some(x) = b["items_per_second"].as_f64() {
                sample.push(Metric::new(
                    "items_per_second",
                    x,
                    "items/s",
                    Direction::Higher,
                ));
            }
        }
        out.push_sample(name, sample, failed);
    }
    Ok(out.into())
}

/// JMH's `rawData` (one list of iterations per fork) as one list.
fn every_iteration(raw: &Value) -> Vec<f64> {
    raw.as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_array)
        .flatten()
        .filter_map(Value::as_f64)
        .collect()
}

/// JMH: one repetition per measurement iteration of every fork (`rawData`); the
/// throughput modes as operations per second (higher is better), the others as time
/// per operation; `·gc.alloc.rate.norm` (`-prof gc`) as bytes allocated per operation.
pub fn jmh(v: &Value) -> crate::error::Result<Vec<Bench>> {
    let runs = v.as_array().ok_or("not a JSON list").usage()?;
    let mut out = Vec::new();
    for r in runs {
        let mut name = r["benchmark"]
            .as_str()
            .ok_or("an entry without \"benchmark\"")
            .usage()?
            .to_string();
        if let Some(p) = r["params"].as_object().filter(|p| !p.is_empty()) {
            let ps: Vec<String> = p
                .iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().map_or(v.to_string(), String::from)))
                .collect();
            name.push_str(&format!("({})", ps.join(", ")));
        }
        let mode = r["mode"].as_str().unwrap_or("avgt");
        let pm = &r["primaryMetric"];
        let unit = pm["scoreUnit"].as_str().unwrap_or("");
        let metric = |x: f64| -> crate::error::Result<Metric> {
            if mode == "thrpt" {
                let per = match unit.split_once('/').map(|(_, t)| t) {
                    Some("s") => 1.0,
                    Some("ms") => 1e3,
                    Some("us") => 1e6,
                    Some("ns") => 1e9,
                    Some("min") => 1.0 / 60.0,
                    _ => {
                        return Err(crate::Error::usage(format!(
                            "{name}: unknown throughput unit '{unit}'"
                        )))
                    }
                };
                Ok(Metric::new(
                    "throughput",
                    x * per,
                    "ops/s",
                    Direction::Higher,
                ))
            } else {
                let ns = match unit.split_once('/').map(|(t, _)| t) {
                    Some("ns") => 1.0,
                    Some("us") => 1e3,
                    Some("ms") => 1e6,
                    Some("s") => 1e9,
                    _ => {
                        return Err(crate::Error::usage(format!(
                            "{name}: unknown time unit '{unit}'"
                        )))
                    }
                };
                Ok(time_ns("time", x * ns))
            }
        };
        let raw = every_iteration(&pm["rawData"]);
        let raw = if raw.is_empty() {
            vec![number(pm, "score", &name)?]
        } else {
            raw
        };
        let alloc = &r["secondaryMetrics"]["·gc.alloc.rate.norm"];
        let alloc_raw = every_iteration(&alloc["rawData"]);
        let mut samples = Vec::new();
        for (i, x) in raw.iter().enumerate() {
            let mut s = vec![metric(*x)?];
            if let Some(a) = alloc_raw.get(i).copied().or(alloc["score"].as_f64()) {
                s.push(Metric::new("allocated", a, "bytes", Direction::Lower));
            }
            samples.push(s);
        }
        out.push(Bench {
            name,
            samples,
            status: Status::Passed,
        });
    }
    Ok(out)
}

/// pytest-benchmark: one repetition per round when the data were saved
/// (`--benchmark-save-data`), else the mean as one.
pub fn pytest_benchmark(v: &Value) -> crate::error::Result<Vec<Bench>> {
    list(v, "benchmarks")?
        .iter()
        .map(|b| {
            let name = b["fullname"]
                .as_str()
                .or(b["name"].as_str())
                .ok_or("a benchmark without \"name\"")
                .usage()?
                .to_string();
            let stats = &b["stats"];
            let data: Vec<f64> = match stats["data"].as_array() {
                Some(d) if !d.is_empty() => d.iter().filter_map(Value::as_f64).collect(),
                _ => vec![number(stats, "mean", &name)?],
            };
            Ok(Bench {
                name,
                samples: data
                    .iter()
                    .map(|t| vec![time_ns("time", t * 1e9)])
                    .collect(),
                status: Status::Passed,
            })
        })
        .collect()
}

/// BenchmarkDotNet's full JSON: one repetition per workload result measurement (time
/// per operation), each with the bytes allocated per operation (`[MemoryDiagnoser]`).
pub fn benchmark_dotnet(v: &Value) -> crate::error::Result<Vec<Bench>> {
    list(v, "Benchmarks")?
        .iter()
        .map(|b| {
            let name = b["FullName"]
                .as_str()
                .map(String::from)
                .or_else(|| {
                    Some(format!(
                        "{}.{}({})",
                        b["Type"].as_str()?,
                        b["Method"].as_str()?,
                        b["Parameters"].as_str().unwrap_or("")
                    ))
                })
                .ok_or("a benchmark without \"FullName\"")
                .usage()?;
            let allocated = b["Memory"]["BytesAllocatedPerOperation"].as_f64();
            let mut times: Vec<f64> = b["Measurements"]
                .as_array()
                .map(|ms| {
                    ms.iter()
                        .filter(|m| {
                            m["IterationMode"] == "Workload" && m["IterationStage"] == "Result"
                        })
                        .filter_map(|m| {
                            Some(m["Nanoseconds"].as_f64()? / m["Operations"].as_f64()?.max(1.0))
                        })
                        .collect()
                })
                .unwrap_or_default();
            if times.is_empty() {
                times.push(number(&b["Statistics"], "Mean", &name)?);
            }
            Ok(Bench {
                name,
                samples: times
                    .iter()
                    .map(|t| {
                        let mut s = vec![time_ns("time", *t)];
                        if let Some(a) = allocated {
                            s.push(Metric::new("allocated", a, "bytes", Direction::Lower));
                        }
                        s
                    })
                    .collect(),
                status: Status::Passed,
            })
        })
        .collect()
}

/// Criterion's latest results below a directory: every `new/sample.json`.
pub fn criterion_files(path: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![path.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.file_name().is_some_and(|n| n == "sample.json")
                && p.parent()
                    .and_then(|d| d.file_name())
                    .is_some_and(|n| n == "new")
            {
                found.push(p);
            }
        }
    }
    found.sort();
    found
}

/// Criterion: one repetition per sample (its time over its iterations), named by the
/// `benchmark.json` beside it (`full_id`) or its directory; an `estimates.json` alone
/// gives the mean as one.
pub fn criterion(path: &Path, found: &[PathBuf]) -> crate::error::Result<Vec<Bench>> {
    let files: Vec<PathBuf> = if found.is_empty() {
        vec![path.to_path_buf()]
    } else {
        found.to_vec()
    };
    files
        .iter()
        .map(|f| {
            let text =
                std::fs::read_to_string(f).usage_with(|e| format!("{}: {e}", f.display()))?;
            let v: Value = serde_json::from_str(&text)
                .usage_with(|e| format!("{}: not JSON: {e}", f.display()))?;
            let dir = f.parent().unwrap_or(Path::new("."));
            let name = std::fs::read_to_string(dir.join("benchmark.json"))
                .ok()
                .and_then(|t| serde_json::from_str::<Value>(&t).ok())
                .and_then(|b| b["full_id"].as_str().map(String::from))
                .or_else(|| {
                    let d = if dir.file_name().is_some_and(|n| n == "new") {
                        dir.parent()?
                    } else {
                        dir
                    };
                    Some(d.file_name()?.to_string_lossy().into_owned())
                })
                .unwrap_or_else(|| "criterion".into());
            let samples: Vec<Vec<Metric>> = match (v["iters"].as_array(), v["times"].as_array()) {
                (Some(iters), Some(times)) => iters
                    .iter()
                    .zip(times)
                    .filter_map(|(n, t)| {
                        Some(vec![time_ns("time", t.as_f64()? / n.as_f64()?.max(1.0))])
                    })
                    .collect(),
                _ => match v["mean"]["point_estimate"].as_f64() {
                    Some(m) => vec![vec![time_ns("time", m)]],
                    None => {
                        return Err(crate::Error::usage(format!(
                            "{}: neither iters/times nor mean.point_estimate",
                            f.display()
                        )))
                    }
                },
            };
            Ok(Bench {
                name,
                samples,
                status: Status::Passed,
            })
        })
        .collect()
}
