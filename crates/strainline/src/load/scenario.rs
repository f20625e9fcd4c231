//! Scenarios: N virtual clients, each running steps — `once` (e.g. register), `every`
//! PERIOD (e.g. push data every 200 s), or a weighted mix with think times — with
//! templated paths, headers and bodies. This is the IoT seed's device emulator, built
//! in. The file is TOML; mistakes are reported as `FILE:LINE:COLUMN: what is wrong`.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use hyper::header::HeaderName;
use hyper::Method;
use serde::Deserialize;
use toml::Spanned;

use super::template::{RandomPool, Text};
use crate::units::parse_duration;

/// When a step runs.
#[derive(Debug, Clone, PartialEq)]
pub enum When {
    /// Once per client, first, in file order.
    Once,
    /// Periodically, at intended times; latency counts from the intended time.
    Every(Duration),
    /// Part of a closed-loop mix, chosen in proportion to its weight.
    Weight(u32),
}

#[derive(Debug, Clone)]
pub struct Step {
    pub name: String,
    pub when: When,
    /// Pause after the step.
    pub think: Duration,
    pub method: Method,
    pub path: Text,
    pub headers: Vec<(HeaderName, Text)>,
    pub body: Option<Text>,
}

/// A checked scenario.
#[derive(Debug, Clone)]
pub struct Scenario {
    pub clients: u64,
    /// Clients start evenly spread over this.
    pub ramp_up: Duration,
    /// CSV rows (header excluded); client i uses row i mod rows.
    pub rows: Vec<Vec<String>>,
    pub seed: u64,
    pub steps: Vec<Step>,
    /// Random bytes for `{{random N}}`, made once from the seed.
    pub random: RandomPool,
}

impl Scenario {
    /// When client `i` starts, after the common start.
    pub fn start_offset(&self, i: u64) -> Duration {
        self.ramp_up.mul_f64(i as f64 / self.clients.max(1) as f64)
    }

    /// Where client `i`'s first occurrence of a step with this period falls, after its
    /// `once` steps: clients are spread evenly over the period so that they do not all
    /// push at the same instant.
    pub fn phase(&self, i: u64, period: Duration) -> Duration {
        period.mul_f64((i as f64 * 0.618_033_988_749) % 1.0)
    }

    pub fn row(&self, i: u64) -> Option<&[String]> {
        (!self.rows.is_empty()).then(|| self.rows[(i % self.rows.len() as u64) as usize].as_slice())
    }

    /// Requests the scenario offers within `d` — each client's `once` steps and its
    /// periodic ones — for the achieved-versus-offered check; `None` when it has a
    /// closed mix, whose pace is the target's.
    pub fn scheduled(&self, d: Duration) -> Option<u64> {
        if self.steps.iter().any(|s| matches!(s.when, When::Weight(_))) {
            return None;
        }
        let mut n = 0u64;
        let once = self.steps.iter().filter(|s| s.when == When::Once).count() as u64;
        for i in 0..self.clients {
            let start = self.start_offset(i);
            if start < d {
                n += once;
            }
            for s in &self.steps {
                if let When::Every(p) = s.when {
                    let first = start + self.phase(i, p);
                    if first < d {
                        n += 1 + ((d - first).as_secs_f64() / p.as_secs_f64()).ceil() as u64 - 1;
                    }
                }
            }
        }
        Some(n)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScenario {
    clients: Spanned<i64>,
    ramp_up: Option<Spanned<String>>,
    csv: Option<Spanned<String>>,
    seed: Option<u64>,
    step: Vec<RawStep>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStep {
    name: Option<String>,
    once: Option<Spanned<bool>>,
    every: Option<Spanned<String>>,
    weight: Option<Spanned<i64>>,
    think: Option<Spanned<String>>,
    method: Option<Spanned<String>>,
    path: Spanned<String>,
    #[serde(default)]
    headers: BTreeMap<String, Spanned<String>>,
    body: Option<Spanned<String>>,
}

/// Reads and checks a scenario file.
pub fn load(path: &Path) -> Result<Scenario, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    parse(&text, path)
}

pub fn parse(text: &str, path: &Path) -> Result<Scenario, String> {
    let at = |offset: usize, msg: String| crate::located::message(path, text, offset, &msg);
    let raw: RawScenario = toml::from_str(text).map_err(|e| {
        let offset = e.span().map_or(0, |s| s.start);
        at(offset, e.message().trim().to_string())
    })?;
    let duration = |s: &Spanned<String>, key: &str| {
        parse_duration(s.get_ref()).map_err(|e| at(s.span().start, format!("{key}: {e}")))
    };
    let clients = *raw.clients.get_ref();
    if clients < 1 {
        return Err(at(
            raw.clients.span().start,
            "clients must be at least 1".into(),
        ));
    }
    let ramp_up = raw
        .ramp_up
        .as_ref()
        .map(|r| duration(r, "ramp_up"))
        .transpose()?
        .unwrap_or_default();
    let (columns, rows) = match &raw.csv {
        Some(c) => {
            let file = path.parent().unwrap_or(Path::new(".")).join(c.get_ref());
            let csv = std::fs::read_to_string(&file)
                .map_err(|e| at(c.span().start, format!("csv: {}: {e}", file.display())))?;
            let mut lines = parse_csv(&csv).into_iter();
            let header = lines.next().ok_or_else(|| {
                at(
                    c.span().start,
                    format!("csv: {} is empty (it needs a header row)", file.display()),
                )
            })?;
            let rows: Vec<Vec<String>> = lines.collect();
            if rows.is_empty() {
                return Err(at(
                    c.span().start,
                    format!("csv: {} has a header but no rows", file.display()),
                ));
            }
            (header, rows)
        }
        None => (Vec::new(), Vec::new()),
    };
    let template = |s: &Spanned<String>| {
        // The span covers the quotes; the template starts one byte in.
        Text::parse(s.get_ref(), &columns).map_err(|(off, msg)| at(s.span().start + 1 + off, msg))
    };
    if raw.step.is_empty() {
        return Err(at(0, "a scenario needs at least one [[step]]".into()));
    }
    let mut steps = Vec::new();
    for (i, st) in raw.step.iter().enumerate() {
        let name = st.name.clone().unwrap_or_else(|| format!("step {}", i + 1));
        let pos = st.path.span().start;
        let once = st.once.as_ref().is_some_and(|o| *o.get_ref());
        let when = match (once, &st.every, &st.weight) {
            (true, None, None) => When::Once,
            (false, Some(e), None) => {
                let p = duration(e, "every")?;
                if p.is_zero() {
                    return Err(at(
                        e.span().start,
                        "every: the period must be positive".into(),
                    ));
                }
                When::Every(p)
            }
            (false, None, Some(w)) if *w.get_ref() >= 1 => When::Weight(*w.get_ref() as u32),
            (false, None, Some(w)) => {
                return Err(at(w.span().start, "weight must be at least 1".into()))
            }
            (false, None, None) => {
                let msg = format!(
                    "step '{name}': say when it runs: once = true, every = \"200s\" or weight = 1"
                );
                return Err(at(pos, msg));
            }
            _ => {
                return Err(at(
                    pos,
                    format!("step '{name}': give only one of once, every and weight"),
                ))
            }
        };
        let method = match &st.method {
            Some(m) => Method::from_bytes(m.get_ref().to_uppercase().as_bytes()).map_err(|_| {
                at(
                    m.span().start,
                    format!("method: '{}' is not an HTTP method", m.get_ref()),
                )
            })?,
            None if st.body.is_some() => Method::POST,
            None => Method::GET,
        };
        if !st.path.get_ref().starts_with('/') {
            return Err(at(
                pos,
                format!("path: '{}' must start with /", st.path.get_ref()),
            ));
        }
        let mut headers = Vec::new();
        for (k, v) in &st.headers {
            let name = HeaderName::from_bytes(k.as_bytes()).map_err(|_| {
                at(
                    v.span().start,
                    format!("headers: '{k}' is not a header name"),
                )
            })?;
            headers.push((name, template(v)?));
        }
        steps.push(Step {
            name,
            when,
            think: st
                .think
                .as_ref()
                .map(|t| duration(t, "think"))
                .transpose()?
                .unwrap_or_default(),
            method,
            path: template(&st.path)?,
            headers,
            body: st.body.as_ref().map(template).transpose()?,
        });
    }
    let seed = raw.seed.unwrap_or(1);
    Ok(Scenario {
        clients: clients as u64,
        ramp_up,
        rows,
        seed,
        steps,
        random: RandomPool::new(seed),
    })
}

/// RFC 4180 CSV: comma-separated, fields optionally in double quotes ("" escapes a quote).
pub fn parse_csv(text: &str) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    let mut row = Vec::new();
    let mut field = String::new();
    let mut quoted = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                field.push('"');
                chars.next();
            }
            (true, '"') => quoted = false,
            (true, c) => field.push(c),
            (false, '"') if field.is_empty() => quoted = true,
            (false, ',') => row.push(std::mem::take(&mut field)),
            (false, '\n') => {
                row.push(std::mem::take(&mut field));
                if !(row.len() == 1 && row[0].is_empty()) {
                    rows.push(std::mem::take(&mut row));
                } else {
                    row.clear();
                }
            }
            (false, '\r') => {}
            (false, c) => field.push(c),
        }
    }
    if !field.is_empty() || !row.is_empty() {
        row.push(field);
        rows.push(row);
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    const IOT: &str = r#"
clients = 100
ramp_up = "10s"

[[step]]
name = "register"
once = true
path = "/register"
headers = { "content-type" = "application/json" }
body = '{"id": "dev-{{client}}"}'

[[step]]
name = "push"
every = "200s"
path = "/push/dev-{{client}}"
body = "{{random 512}}"
"#;

    #[test]
    fn reads_the_iot_emulator() {
        let s = parse(IOT, Path::new("iot.toml")).unwrap();
        assert_eq!(s.clients, 100);
        assert_eq!(s.steps.len(), 2);
        assert_eq!(s.steps[0].when, When::Once);
        assert_eq!(s.steps[0].method, Method::POST);
        assert_eq!(s.steps[1].when, When::Every(Duration::from_secs(200)));
        // 100 registrations, then 100 clients pushing every 200 s offer 0.5 push/s:
        // ~300 pushes in 600 s (less the ramp-up and phases).
        let n = s.scheduled(Duration::from_secs(600)).unwrap();
        assert!((390..=400).contains(&n), "{n}");
    }

    #[test]
    fn mistakes_point_at_file_line_and_column() {
        let bad_key = IOT.replace("ramp_up", "rampup");
        let e = parse(&bad_key, Path::new("iot.toml")).unwrap_err();
        assert!(e.starts_with("iot.toml:3:1: unknown field `rampup`"), "{e}");
        let bad_duration = IOT.replace("\"200s\"", "\"200 parsecs\"");
        let e = parse(&bad_duration, Path::new("iot.toml")).unwrap_err();
        assert!(
            e.starts_with("iot.toml:14:9: every: '200 parsecs' is not a duration"),
            "{e}"
        );
        let bad_placeholder = IOT.replace("dev-{{client}}\"", "dev-{{clint}}\"");
        let e = parse(&bad_placeholder, Path::new("iot.toml")).unwrap_err();
        assert!(
            e.starts_with("iot.toml:10:21: unknown placeholder '{{clint}}'"),
            "{e}"
        );
        let no_when = IOT.replace("once = true\n", "");
        let e = parse(&no_when, Path::new("iot.toml")).unwrap_err();
        assert!(e.contains("say when it runs"), "{e}");
    }

    #[test]
    fn csv_quotes_and_escapes() {
        let rows = parse_csv("serial,model\nSN-1,\"ICR, 3231\"\n\"SN-\"\"2\"\"\",x\n");
        assert_eq!(rows[1], vec!["SN-1", "ICR, 3231"]);
        assert_eq!(rows[2], vec!["SN-\"2\"", "x"]);
    }
}
