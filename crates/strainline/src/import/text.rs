//! The text formats: `go test -bench` output and JUnit XML.

use crate::error::Category;
use crate::metrics::Direction;
use quick_xml::events::Event;
use quick_xml::Reader;

use super::{time_ns, Bench};
use crate::store::Metric;

/// `go test -bench` (with `-count N`: N lines per benchmark, one repetition each):
/// `ns/op` as time, `B/op` and `allocs/op` (`-benchmem`) as allocated bytes and
/// allocations, `MB/s` (`b.SetBytes`) as throughput; other units as reported. The
/// `-8` GOMAXPROCS suffix is dropped (it names the machine, not the benchmark); with
/// several packages, the name is prefixed with its package.
pub fn go_test(text: &str) -> crate::error::Result<Vec<Bench>> {
    let mut pkg = String::new();
    let mut rows: Vec<(String, String, Vec<Metric>)> = Vec::new();
    let mut failed: Vec<String> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if let Some(p) = line.strip_prefix("pkg: ") {
            pkg = p.trim().to_string();
            continue;
        }
        if let Some(rest) = line.trim_start().strip_prefix("--- FAIL: ") {
            failed.push(strip_procs(rest.split_whitespace().next().unwrap_or("")).to_string());
            continue;
        }
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.len() < 4
            || !fields[0].starts_with("Benchmark")
            || fields[1].parse::<u64>().is_err()
        {
            continue;
        }
        let name = strip_procs(fields[0]).to_string();
        let mut metrics = Vec::new();
        for pair in fields[2..].chunks(2) {
            let [value, unit] = pair else {
                return Err(crate::Error::usage(format!(
                    "line {}: '{value}' without a unit",
                    i + 1,
                    value = pair[0]
                )));
            };
            let x: f64 = value
                .parse()
                .map_err(|_| format!("line {}: '{value}' is not a number", i + 1))
                .usage()?;
            metrics.push(match *unit {
                "ns/op" => time_ns("time", x),
                "B/op" => Metric::new("allocated", x, "bytes", Direction::Lower),
                "allocs/op" => Metric::new("allocations", x, "count", Direction::Lower),
                "MB/s" => Metric::new("throughput", x, "MB/s", Direction::Higher),
                other => Metric::new(&other.replace('/', "_per_"), x, other, Direction::None),
            });
        }
        rows.push((pkg.clone(), name, metrics));
    }
    let mut pkgs: Vec<&String> = rows.iter().map(|r| &r.0).collect();
    pkgs.sort();
    pkgs.dedup();
    let prefix = pkgs.len() > 1;
    let mut out = super::Benches::default();
    for (p, name, metrics) in rows.iter().cloned() {
        let fail = failed.contains(&name);
        let name = if prefix { format!("{p}/{name}") } else { name };
        out.push_sample(name, metrics, fail);
    }
    Ok(out.into())
}

/// `BenchmarkSum-8` → `BenchmarkSum`.
fn strip_procs(name: &str) -> &str {
    match name.rsplit_once('-') {
        Some((base, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => base,
        _ => name,
    }
}

/// JUnit XML: each `<testcase>`'s `time` (seconds) as one repetition, named
/// `classname.name`; a test with `<failure>` or `<error>` makes its case failed, a
/// `<skipped>` one is left out.
pub fn junit(text: &str) -> crate::error::Result<Vec<Bench>> {
    let mut reader = Reader::from_str(text);
    let mut out = super::Benches::default();
    // The open test case: name, time, failed, skipped.
    let mut open: Option<(String, Option<f64>, bool, bool)> = None;
    let mut seen_suite = false;
    let finish = |out: &mut super::Benches, c: (String, Option<f64>, bool, bool)| {
        let (name, time, failed, skipped) = c;
        if skipped {
            return;
        }
        let sample = time
            .map(|t| vec![time_ns("time", t * 1e9)])
            .unwrap_or_default();
        out.push_sample(name, sample, failed);
    };
    loop {
        let event = reader
            .read_event()
            .usage_with(|e| format!("XML at byte {}: {e}", reader.buffer_position()))?;
        match event {
            Event::Start(ref e) | Event::Empty(ref e) => {
                let empty = matches!(event, Event::Empty(_));
                let tag = e.name();
                match tag.as_ref() {
                    b"testsuite" | b"testsuites" => seen_suite = true,
                    b"testcase" => {
                        let mut name = String::new();
                        let mut class = String::new();
                        let mut time = None;
                        for a in e.attributes().flatten() {
                            let v = a
                                .normalized_value(quick_xml::XmlVersion::Implicit1_0)
                                .usage_with(|e| format!("XML attribute: {e}"))?
                                .into_owned();
                            match a.key.as_ref() {
                                b"name" => name = v,
                                b"classname" => class = v,
                                b"time" => {
                                    time = Some(v.trim().replace(',', "").parse::<f64>().map_err(
                                        |_| format!("testcase '{name}': time '{v}' is not a number of seconds"),
                                    ).usage()?)
                                }
                                _ => {}
                            }
                        }
                        let full = if class.is_empty() {
                            name
                        } else {
                            format!("{class}.{name}")
                        };
                        let case = (full, time, false, false);
                        if empty {
                            finish(&mut out, case);
                        } else {
                            open = Some(case);
                        }
                    }
                    b"failure" | b"error" => {
                        if let Some(c) = open.as_mut() {
                            c.2 = true;
                        }
                    }
                    b"skipped" => {
                        if let Some(c) = open.as_mut() {
                            c.3 = true;
                        }
                    }
                    _ => {}
                }
            }
            Event::End(ref e) if e.name().as_ref() == b"testcase" => {
                if let Some(c) = open.take() {
                    finish(&mut out, c);
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    if !seen_suite {
        return Err(crate::Error::usage("no <testsuite> element"));
    }
    Ok(out.into())
}
