//! A comparison for people and machines: the "% of previous" table in the terminal, the
//! same table in Markdown for a pull request or CI step summary, and JSON.

use std::io::{self, Write};

use serde::Serialize;

use crate::analysis::comparison::{p_text, Row, Verdict};
use crate::units::format_value;

/// One side of a comparison, as stored.
#[derive(Debug, Clone, Serialize)]
pub struct Version {
    /// What the user named: a label or a run id.
    pub key: String,
    pub runs: Vec<i64>,
    pub hosts: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    pub schema: &'static str,
    pub baseline: Version,
    pub candidate: Version,
    /// Set when the versions ran on different hosts and the user allowed it.
    pub environment_mismatch: Option<String>,
    pub alpha: f64,
    /// Cases left out, with why (e.g. generator-bound repetitions).
    pub notes: Vec<String>,
    pub rows: Vec<Row>,
    /// `regressed` when any metric regressed, else `ok`.
    pub verdict: &'static str,
    /// A differential flame graph of the two versions (file name), when both profiled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flame_diff: Option<String>,
}

impl Comparison {
    pub fn count(&self, v: Verdict) -> usize {
        self.rows.iter().filter(|r| r.verdict == v).count()
    }
}

/// The median, with the spread over the repetitions as ± half the range.
fn side_text(r: &Row, candidate: bool) -> String {
    let s = if candidate { &r.candidate } else { &r.baseline };
    let v = format_value(s.median, &r.unit);
    if s.n > 1 && s.min != s.max && s.median != 0.0 {
        format!("{v} ±{:.0}%", 50.0 * (s.max - s.min) / s.median.abs())
    } else {
        v
    }
}

fn pct(r: &Row) -> String {
    match r.ratio {
        Some(x) => format!("{:.1}%", 100.0 * x),
        None => "new".into(),
    }
}

fn ci(r: &Row) -> String {
    match r.ratio_ci {
        Some((lo, hi)) if lo.is_finite() && hi.is_finite() => {
            format!("{:.0}–{:.0}%", 100.0 * lo, 100.0 * hi)
        }
        _ => "-".into(),
    }
}

fn p(r: &Row) -> String {
    r.p_adjusted.map_or("-".into(), p_text)
}

fn header_lines(c: &Comparison) -> Vec<String> {
    let runs = |v: &Version| {
        v.runs
            .iter()
            .map(|r| format!("#{r}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut lines = Vec::new();
    if let Some(m) = &c.environment_mismatch {
        lines.push(format!("ENVIRONMENT MISMATCH: {m}"));
    }
    lines.push(format!(
        "baseline {} (run {}) → candidate {} (run {})",
        c.baseline.key,
        runs(&c.baseline),
        c.candidate.key,
        runs(&c.candidate)
    ));
    lines.push(format!(
        "regressed only when significant (Mann–Whitney U, Benjamini–Hochberg adjusted p < {}) and beyond the metric's band",
        c.alpha
    ));
    lines
}

fn summary_line(c: &Comparison) -> String {
    format!(
        "{}: {} regressed, {} improved, {} unchanged, {} inconclusive",
        if c.verdict == "regressed" {
            "REGRESSION"
        } else {
            "no regression"
        },
        c.count(Verdict::Regressed),
        c.count(Verdict::Improved),
        c.count(Verdict::Unchanged),
        c.count(Verdict::Inconclusive)
    )
}

/// The terminal table.
pub fn write_table(out: &mut dyn Write, c: &Comparison) -> io::Result<()> {
    for l in header_lines(c) {
        writeln!(out, "{l}")?;
    }
    for n in &c.notes {
        writeln!(out, "note: {n}")?;
    }
    let mut case = "";
    for r in &c.rows {
        if r.case != case {
            case = &r.case;
            writeln!(out, "\n{case}")?;
            writeln!(
                out,
                "  {:<22} {:>20} {:>20} {:>9} {:>11} {:>8}  verdict",
                "metric", "baseline", "candidate", "% of prev", "95% CI", "p (adj)"
            )?;
        }
        writeln!(
            out,
            "  {:<22} {:>20} {:>20} {:>9} {:>11} {:>8}  {}",
            r.metric,
            side_text(r, false),
            side_text(r, true),
            pct(r),
            ci(r),
            p(r),
            r.verdict.word()
        )?;
        // Why, for every verdict that is not plainly "no change": a significant change
        // within the band is worth seeing too.
        if matches!(r.verdict, Verdict::Regressed | Verdict::Inconclusive)
            || r.p_adjusted.is_some_and(|p| p < c.alpha)
        {
            writeln!(out, "  {:<22} ↳ {}", "", r.why)?;
        }
    }
    writeln!(out, "\n{}", summary_line(c))
}

use super::files::md;

/// The Markdown report, read in ten seconds on a pull request: the verdict first, then
/// only the metrics that changed (regressed, improved, inconclusive); the unchanged
/// ones and the method folded below.
pub fn to_markdown(c: &Comparison) -> String {
    let mut s = format!("### strainline: {}\n\n", md(&summary_line(c)));
    if let Some(m) = &c.environment_mismatch {
        s.push_str(&format!("> **ENVIRONMENT MISMATCH: {}**\n\n", md(m)));
    }
    let header = "| case | metric | baseline | candidate | change | 95% CI | p (adj) | verdict |\n|---|---|---:|---:|---:|---:|---:|---|\n";
    let row = |r: &Row| {
        let verdict = match r.verdict {
            Verdict::Regressed => format!("**REGRESSED** ({})", md(&r.why)),
            Verdict::Inconclusive => format!("inconclusive ({})", md(&r.why)),
            v => v.word().to_string(),
        };
        format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} |\n",
            md(&r.case),
            md(&r.metric),
            md(&side_text(r, false)),
            md(&side_text(r, true)),
            pct(r),
            ci(r),
            p(r),
            verdict
        )
    };
    let (changed, same): (Vec<&Row>, Vec<&Row>) =
        c.rows.iter().partition(|r| r.verdict != Verdict::Unchanged);
    if changed.is_empty() {
        s.push_str("No metric changed beyond its band.\n\n");
    } else {
        s.push_str(header);
        for r in &changed {
            s.push_str(&row(r));
        }
        s.push('\n');
    }
    for n in &c.notes {
        s.push_str(&format!("- note: {}\n", md(n)));
    }
    if !c.notes.is_empty() {
        s.push('\n');
    }
    if !same.is_empty() {
        s.push_str(&format!(
            "<details><summary>{} unchanged metric{}</summary>\n\n{header}",
            same.len(),
            if same.len() == 1 { "" } else { "s" }
        ));
        for r in &same {
            s.push_str(&row(r));
        }
        s.push_str("\n</details>\n\n");
    }
    s.push_str(&format!(
        "<sub>{}</sub>\n",
        header_lines(c)
            .iter()
            .filter(|l| !l.starts_with("ENVIRONMENT MISMATCH"))
            .map(|l| md(l))
            .collect::<Vec<_>>()
            .join(" · ")
    ));
    s
}

pub fn to_json(c: &Comparison) -> String {
    serde_json::to_string_pretty(c).expect("a comparison serializes")
}
