//! What a scenario names beyond its steps: groups, tags and its own metrics.
//! `group = "checkout"` on steps that follow one another (their figures together, and
//! the time a client took to run them in a row: k6's `group_duration`, Gatling's group),
//! `tags = { page = "admin" }` on any step (the figures of every step that carries the
//! tag: k6's `http_req_duration{page:admin}`), and `[metrics]` (k6's custom metrics,
//! [`crate::load::custom`]) that extractions feed. Read once, after the steps; the
//! engine counts by step, and a group's or a tag's figures are its steps' merged
//! (exact: HDR histograms add).

use toml::Spanned;

use super::raw::RawScenario;
use super::Step;
use crate::load::custom::Kind;

/// What a group's or a tag's name and a tag's value may be: they go into metric names
/// (`group.checkout.duration_p95`, `tag.page=admin.latency_p95`).
pub(super) const LABEL_RULE: &str = "letters, digits, '_', '-', '/' and ':' (no '.', '=' nor space: it goes into metric names such as tag.page=admin.latency_p95)";

fn is_label(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-/:".contains(&b))
}

/// Sets each step's group and tags; the groups' names, in file order. A group's steps
/// follow one another in the file.
pub(super) fn labels(
    raw: &RawScenario,
    steps: &mut [Step],
    at: &dyn Fn(usize, String) -> crate::Error,
) -> crate::error::Result<Vec<String>> {
    let mut groups: Vec<String> = Vec::new();
    for (i, spanned) in raw.step.iter().enumerate() {
        let st = spanned.get_ref();
        for (key, value) in &st.tags {
            let checked = |s: &str, what: &str, p: usize| match is_label(s) {
                true => Ok(()),
                false => Err(at(
                    p,
                    format!("step '{}': tags: {what} '{s}': {LABEL_RULE}", steps[i].name),
                )),
            };
            checked(key, "the name", value.span().start)?;
            checked(value.get_ref(), "the value", value.span().start)?;
            steps[i].tags.push((key.clone(), value.get_ref().clone()));
        }
        let Some(g) = &st.group else { continue };
        let name: &String = g.get_ref();
        if !is_label(name) {
            return Err(at(
                g.span().start,
                format!("step '{}': group '{name}': {LABEL_RULE}", steps[i].name),
            ));
        }
        let index = match groups.iter().position(|n| n == name) {
            Some(k) if i > 0 && steps[i - 1].group == Some(k) => k,
            Some(_) => return Err(split(g, &steps[i].name, at)),
            None => {
                groups.push(name.clone());
                groups.len() - 1
            }
        };
        steps[i].group = Some(index);
    }
    loops_fit(raw, steps, &groups, at)?;
    Ok(groups)
}

/// A loop goes over whole groups or stays within one: a loop from inside a group to
/// past its end (or from before it to inside it) would make one pass of the group a
/// part of it, and its time in a row mean nothing.
fn loops_fit(
    raw: &RawScenario,
    steps: &[Step],
    groups: &[String],
    at: &dyn Fn(usize, String) -> crate::Error,
) -> crate::error::Result<()> {
    for (g, name) in groups.iter().enumerate() {
        let inside: Vec<usize> = (0..steps.len())
            .filter(|&i| steps[i].group == Some(g))
            .collect();
        let (first, last) = (inside[0], inside[inside.len() - 1]);
        for (end, st) in steps.iter().enumerate() {
            let Some(from) = st.repeat.as_ref().map(|l| l.from) else {
                continue;
            };
            let crosses = (first < from && from <= last && end > last)
                || (from < first && first <= end && end < last);
            if crosses {
                let pos = raw.step[end]
                    .get_ref()
                    .repeat
                    .as_ref()
                    .map_or(0, |l| l.span().start);
                return Err(at(
                    pos,
                    format!(
                        "step '{}': loop from '{}' crosses group '{name}' ('{}' to '{}'): loop over the whole group or within it",
                        st.name, steps[from].name, steps[first].name, steps[last].name
                    ),
                ));
            }
        }
    }
    Ok(())
}

fn split(
    g: &Spanned<String>,
    step: &str,
    at: &dyn Fn(usize, String) -> crate::Error,
) -> crate::Error {
    at(
        g.span().start,
        format!(
            "step '{step}': group '{}' again after other steps: a group's steps follow one another in the file (its duration is the time they took in a row); give these another group",
            g.get_ref()
        ),
    )
}

/// `[metrics]`, checked, in name order; each extraction's `metric` resolved.
pub(super) fn metrics(
    raw: &RawScenario,
    steps: &mut [Step],
    at: &dyn Fn(usize, String) -> crate::Error,
) -> crate::error::Result<Vec<(String, Kind)>> {
    let mut out = Vec::new();
    if let Some((name, kind)) = raw.metrics.iter().nth(crate::limits::SCENARIO_METRICS) {
        return Err(at(
            kind.span().start,
            format!(
                "metrics.{name}: a scenario declares at most {} metrics of its own (each worker keeps each one's values)",
                crate::limits::SCENARIO_METRICS
            ),
        ));
    }
    for (name, kind) in &raw.metrics {
        if !is_label(name) || name.contains([':', '/']) {
            return Err(at(kind.span().start, format!("metrics.{name}: a metric's name is letters, digits, '_' and '-' (it goes into metric names: metric.{name}.p95)")));
        }
        let Some(k) = Kind::parse(kind.get_ref()) else {
            return Err(at(
                kind.span().start,
                format!("metrics.{name}: '{}': give {}", kind.get_ref(), Kind::NAMES),
            ));
        };
        out.push((name.clone(), k));
    }
    for (st, spanned) in steps.iter_mut().zip(&raw.step) {
        for (e, (name, raw_e)) in st.extract.iter_mut().zip(&spanned.get_ref().extract) {
            let Some(m) = &raw_e.get_ref().metric else {
                continue;
            };
            let Some(k) = out.iter().position(|(n, _)| n == m) else {
                let declared: Vec<&str> = out.iter().map(|(n, _)| n.as_str()).collect();
                return Err(at(
                    raw_e.span().start,
                    format!(
                        "extract.{name}: metric '{m}' is not declared: add it to [metrics] ({m} = \"trend\"; {}){}",
                        Kind::NAMES,
                        match declared.is_empty() {
                            true => String::new(),
                            false => format!("; declared: {}", declared.join(", ")),
                        }
                    ),
                ));
            };
            e.metric = Some(k);
        }
    }
    Ok(out)
}

/// The steps of each group and of each tag (`page=admin`), by their indices, and the
/// scenario's own metrics.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Labels {
    pub groups: Vec<(String, Vec<usize>)>,
    pub tags: Vec<(String, Vec<usize>)>,
    pub metrics: Vec<(String, Kind)>,
}

impl Labels {
    pub fn of(steps: &[Step], groups: &[String], metrics: &[(String, Kind)]) -> Labels {
        let members = |g: usize| {
            (0..steps.len())
                .filter(|&i| steps[i].group == Some(g))
                .collect()
        };
        let mut tags: Vec<(String, Vec<usize>)> = Vec::new();
        for (i, st) in steps.iter().enumerate() {
            for (k, v) in &st.tags {
                let tag = format!("{k}={v}");
                match tags.iter_mut().find(|t| t.0 == tag) {
                    Some(t) => t.1.push(i),
                    None => tags.push((tag, vec![i])),
                }
            }
        }
        Labels {
            groups: groups
                .iter()
                .enumerate()
                .map(|(g, n)| (n.clone(), members(g)))
                .collect(),
            tags,
            metrics: metrics.to_vec(),
        }
    }
}

impl Labels {
    /// Whether a gate's `metric` that names a step, group, tag or metric of the scenario
    /// (its steps `steps`) names one it has, and a metric of its own a figure of its
    /// kind: the reason when not (a gate on it would be "not measured" after the run).
    pub fn gate_fits(&self, metric: &str, steps: &[String]) -> crate::error::Result<()> {
        // Where the name ends, from the catalogue's row (`step.*.latency_p*`): a step's
        // name may hold dots (`step.log.in.latency_p95`).
        let Some(row) = crate::metrics::lookup(metric) else {
            return Ok(());
        };
        let Some((head, tail)) = row.name.split_once('*') else {
            return Ok(());
        };
        // Only `SCOPE.*.FIGURE` rows name something of the scenario.
        let (Some(scope), Some(figure)) = (head.strip_suffix('.'), tail.strip_prefix('.')) else {
            return Ok(());
        };
        let rest = &metric[head.len()..];
        let Some(at) = rest.rfind(&format!(".{}", figure.trim_end_matches('*'))) else {
            return Ok(());
        };
        let (name, figure) = (&rest[..at], &rest[at + 1..]);
        fn names(v: &[(String, Vec<usize>)]) -> Vec<&str> {
            v.iter().map(|x| x.0.as_str()).collect()
        }
        let (known, what): (Vec<&str>, &str) = match scope {
            "step" => (steps.iter().map(String::as_str).collect(), "step"),
            "group" => (names(&self.groups), "group"),
            "tag" => (names(&self.tags), "tag"),
            "metric" => (
                self.metrics.iter().map(|m| m.0.as_str()).collect(),
                "metric",
            ),
            _ => return Ok(()),
        };
        if !known.contains(&name) {
            let has = match known.is_empty() {
                true => format!("it has no {what}s"),
                false => format!("its {what}s: {}", known.join(", ")),
            };
            return Err(crate::Error::usage(format!(
                "the scenario has no {what} '{name}' ({has})"
            )));
        }
        let Some((_, kind)) = self
            .metrics
            .iter()
            .find(|m| scope == "metric" && m.0 == name)
        else {
            return Ok(());
        };
        let fits = match kind {
            Kind::Counter => matches!(figure, "count" | "total" | "per_second"),
            Kind::Rate => matches!(figure, "count" | "rate"),
            Kind::Gauge => matches!(figure, "count" | "last" | "min" | "max"),
            Kind::Trend => !matches!(figure, "total" | "per_second" | "rate" | "last"),
        };
        match fits {
            true => Ok(()),
            false => Err(crate::Error::usage(format!(
                "'{name}' is a {}, which has no {figure} (docs/load.md, \"Metrics of your own\")",
                kind.name()
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Known truth: a scenario whose step `log.in` (a dotted name) is in group `login`,
    /// tagged `page=admin`, with a trend `items`.
    #[test]
    fn a_gate_names_what_the_scenario_has_and_a_figure_its_metric_has() {
        let labels = Labels {
            groups: vec![("login".into(), vec![0])],
            tags: vec![("page=admin".into(), vec![0])],
            metrics: vec![("items".into(), Kind::Trend)],
        };
        let steps = vec!["log.in".to_string()];
        for ok in [
            "step.log.in.latency_p97.5",
            "step.log.in.error_rate",
            "group.login.duration_p95",
            "tag.page=admin.latency_p99",
            "metric.items.p95",
            "metric.items.mean",
            "latency_p95",
            "latency_p97.5",
            "check.ok.pass_rate",
            "watch_db_cpu",
        ] {
            labels
                .gate_fits(ok, &steps)
                .unwrap_or_else(|e| panic!("{ok}: {e}"));
        }
        for (bad, says) in [
            ("step.log.latency_p95", "no step 'log' (its steps: log.in)"),
            ("group.logn.duration_p95", "no group 'logn'"),
            ("tag.page=adm.error_rate", "no tag 'page=adm'"),
            ("metric.item.mean", "no metric 'item'"),
            (
                "metric.items.total",
                "'items' is a trend, which has no total",
            ),
        ] {
            let e = labels.gate_fits(bad, &steps).unwrap_err().to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
