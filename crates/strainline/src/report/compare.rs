//! A comparison for people and machines: the "% of previous" table in the terminal, the
//! same table in Markdown for a pull request or CI step summary, and JSON.

use std::io::{self, Write};

use serde::Serialize;

use crate::analysis::comparison::{p_text, percent, Method, Row, Verdict};
use crate::analysis::paired::Looks;
use crate::metrics::Direction;
use crate::units::format_value;

/// One side of a comparison, as stored.
#[derive(Debug, Clone, Serialize)]
pub struct Version {
    /// What the user named: a label or a run id.
    pub key: String,
    pub runs: Vec<i64>,
    pub hosts: Vec<String>,
}

/// How the two versions were measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// In separate runs (`run` once per version): independent samples.
    Separate,
    /// In one session, each pair's two members adjacent in time, their order drawn
    /// per pair (A B or B A) from a seeded stream.
    Interleaved,
    /// In one session, every baseline repetition first, then every candidate one
    /// (one after the other, as separate runs would be): independent samples.
    Sequential,
    /// In one session, both versions at once, each target on its own CPUs, their loads
    /// started together: each pair measured over the same window of time.
    Duet,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Separate => "separate runs",
            Mode::Interleaved => "interleaved pairs",
            Mode::Sequential => "one after the other",
            Mode::Duet => "duet (both at once)",
        }
    }
}

/// What the machine did during a paired session: its noise, for the reader.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, serde::Deserialize)]
pub struct MachineNoise {
    /// Share of the machine's CPU time the hypervisor took (steal) during the session.
    pub steal: f64,
    /// The session's length, seconds.
    pub seconds: f64,
}

/// What a paired session stores with each of its two runs (`settings.paired`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, serde::Deserialize)]
pub struct Session {
    /// The other run of the session.
    pub with: i64,
    pub mode: Mode,
    /// The seed of the pairs' order.
    pub seed: u64,
    /// The looks the session planned (paired modes).
    pub looks: Option<Looks>,
    #[serde(default)]
    pub machine: Option<MachineNoise>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    pub schema: &'static str,
    pub baseline: Version,
    pub candidate: Version,
    /// Set when the versions ran on different hosts and the user allowed it.
    pub environment_mismatch: Option<String>,
    /// Set when the runs were measured differently (time scale, durations, rates…) and
    /// the user allowed it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shape_mismatch: Option<String>,
    /// Set when the machine did other work during one side's runs beyond the stated
    /// thresholds: a warning that leads every form of the report.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conditions: Option<String>,
    pub alpha: f64,
    /// Cases left out, with why (e.g. generator-bound repetitions).
    pub notes: Vec<String>,
    pub rows: Vec<Row>,
    /// `regressed` when any metric regressed, else `ok`.
    pub verdict: &'static str,
    /// A differential flame graph of the two versions (file name), when both profiled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flame_diff: Option<String>,
    /// How the versions were measured.
    pub mode: Mode,
    /// The machine's noise during a paired session.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub machine: Option<MachineNoise>,
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

/// The candidate as % of the baseline, as every format writes it (`new`: no baseline).
pub fn pct(r: &Row) -> String {
    r.ratio.map_or("new".into(), crate::units::percent_of)
}

/// The ratio's interval, as every format writes it.
pub fn ci(r: &Row) -> String {
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

/// The change the row could have seen, for judged rows.
pub fn seen(r: &Row) -> String {
    match r.detectable {
        Some(d) if r.band.is_some() && r.direction != Direction::None && d.is_finite() => {
            format!("±{}", percent(d))
        }
        _ => "-".into(),
    }
}

/// The lines that say what was compared and how: the versions, the mode, the machine's
/// noise and the method (the terminal's header, the Markdown's footer, the HTML's notes).
/// A header line that the Markdown and the HTML show apart, at the top.
pub fn is_alarm(line: &str) -> bool {
    [
        "ENVIRONMENT MISMATCH",
        "SHAPE MISMATCH",
        "CONDITIONS DIFFERED",
    ]
    .iter()
    .any(|a| line.starts_with(a))
}

pub fn header_lines(c: &Comparison) -> Vec<String> {
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
    if let Some(m) = &c.shape_mismatch {
        lines.push(format!("SHAPE MISMATCH: {m}"));
    }
    if let Some(m) = &c.conditions {
        lines.push(format!("CONDITIONS DIFFERED: {m}"));
    }
    lines.push(format!(
        "baseline {} (run {}) → candidate {} (run {})",
        c.baseline.key,
        runs(&c.baseline),
        c.candidate.key,
        runs(&c.candidate)
    ));
    let paired = c.rows.iter().any(|r| r.method == Method::SignedRank);
    lines.push(format!(
        "measured as {}{}",
        c.mode.name(),
        match (c.mode, c.rows.iter().map(|r| r.baseline.n).max()) {
            (Mode::Interleaved | Mode::Duet, Some(n)) =>
                format!(", {n} pairs: each pair under the same conditions of the machine"),
            _ => String::new(),
        }
    ));
    if let Some(m) = &c.machine {
        lines.push(format!(
            "machine: the hypervisor took {:.1}% of its CPU over the {:.0} s session{}",
            100.0 * m.steal,
            m.seconds,
            if m.steal > 0.05 {
                " — a noisy machine"
            } else {
                ""
            }
        ));
    }
    lines.push(format!(
        "regressed only when significant ({}, Benjamini–Hochberg adjusted p < {}) and beyond the metric's band; 'seen' is the change each row would flag with 80% probability",
        if paired {
            "Wilcoxon signed-rank of the pairs' log-ratios, Hodges–Lehmann estimate, a confidence sequence over every look"
        } else {
            "Mann–Whitney U"
        },
        c.alpha
    ));
    lines
}

pub fn summary_line(c: &Comparison) -> String {
    let blind = c.rows.iter().filter(|r| r.blind()).count();
    format!(
        "{}: {} regressed, {} improved, {} unchanged{}, {} inconclusive",
        if c.verdict == "regressed" {
            "REGRESSION"
        } else {
            "no regression"
        },
        c.count(Verdict::Regressed),
        c.count(Verdict::Improved),
        c.count(Verdict::Unchanged),
        if blind > 0 {
            format!(" ({blind} of them could miss a change of their band's size)")
        } else {
            String::new()
        },
        c.count(Verdict::Inconclusive)
    ) + if c.conditions.is_some() {
        " — but the runs' conditions differed (see the top)"
    } else {
        ""
    }
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
                "  {:<22} {:>20} {:>20} {:>9} {:>11} {:>8} {:>7}  verdict",
                "metric", "baseline", "candidate", "% of prev", "95% CI", "p (adj)", "seen"
            )?;
        }
        writeln!(
            out,
            "  {:<22} {:>20} {:>20} {:>9} {:>11} {:>8} {:>7}  {}",
            r.metric,
            side_text(r, false),
            side_text(r, true),
            pct(r),
            ci(r),
            p(r),
            seen(r),
            r.verdict.word()
        )?;
        // Why, for every verdict that is not plainly "no change": a significant change
        // within the band is worth seeing too.
        if matches!(r.verdict, Verdict::Regressed | Verdict::Inconclusive)
            || r.p_adjusted.is_some_and(|p| p < c.alpha)
            || r.blind()
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
    let detectable: Vec<f64> = c
        .rows
        .iter()
        .filter(|r| r.verdict != Verdict::Info)
        .filter_map(|r| r.detectable.filter(|d| d.is_finite()))
        .collect();
    let range = match (
        detectable.iter().copied().reduce(f64::min),
        detectable.iter().copied().reduce(f64::max),
    ) {
        (Some(lo), Some(hi)) => format!(
            "; the smallest change each judged metric could have seen: ±{} to ±{} (column *seen*)",
            percent(lo),
            percent(hi)
        ),
        _ => String::new(),
    };
    s.push_str(&format!("Measured as **{}**{range}.\n\n", c.mode.name()));
    if let Some(m) = &c.environment_mismatch {
        s.push_str(&format!("> **ENVIRONMENT MISMATCH: {}**\n\n", md(m)));
    }
    if let Some(m) = &c.shape_mismatch {
        s.push_str(&format!("> **SHAPE MISMATCH: {}**\n\n", md(m)));
    }
    if let Some(m) = &c.conditions {
        s.push_str(&format!("> **CONDITIONS DIFFERED: {}**\n\n", md(m)));
    }
    let header = "| case | metric | baseline | candidate | change | 95% CI | p (adj) | seen | verdict |\n|---|---|---:|---:|---:|---:|---:|---:|---|\n";
    let row = |r: &Row| {
        let verdict = match r.verdict {
            Verdict::Regressed => format!("**REGRESSED** ({})", md(&r.why)),
            Verdict::Inconclusive => format!("inconclusive ({})", md(&r.why)),
            _ if r.blind() => format!(
                "unchanged, **could miss a change of the band's size** ({})",
                md(&r.why)
            ),
            v => v.word().to_string(),
        };
        format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            md(&r.case),
            md(&r.metric),
            md(&side_text(r, false)),
            md(&side_text(r, true)),
            pct(r),
            ci(r),
            p(r),
            seen(r),
            verdict
        )
    };
    let (changed, same): (Vec<&Row>, Vec<&Row>) = c
        .rows
        .iter()
        .partition(|r| r.verdict != Verdict::Unchanged || r.blind());
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
            .filter(|l| !is_alarm(l))
            .map(|l| md(l))
            .collect::<Vec<_>>()
            .join(" · ")
    ));
    s
}

pub fn to_json(c: &Comparison) -> String {
    serde_json::to_string_pretty(c).expect("a comparison serializes")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::comparison::{judge, Pair, Policy};

    /// A comparison of one case's `cpu_per_op` over six repetitions each, judged
    /// unchanged with a band of ±3% it could miss.
    fn comparison(case: &str) -> Comparison {
        let mut policy = Policy::default();
        policy.bands.insert("cpu_per_op".into(), 0.03);
        let rows = judge(
            &[Pair {
                case: case.into(),
                metric: "cpu_per_op".into(),
                unit: "ms".into(),
                direction: Direction::Lower,
                baseline: vec![1.0, 1.2, 0.9, 1.1, 0.95, 1.05],
                candidate: vec![1.02, 1.15, 0.93, 1.08, 0.97, 1.1],
                paired: false,
            }],
            &policy,
        );
        assert!(rows[0].blind(), "{}", rows[0].why);
        let version = |key: &str, run| Version {
            key: key.into(),
            runs: vec![run],
            hosts: vec![],
        };
        Comparison {
            schema: "strainline.compare.v1",
            baseline: version("a", 1),
            candidate: version("b", 2),
            environment_mismatch: None,
            shape_mismatch: None,
            conditions: None,
            alpha: 0.05,
            notes: vec![],
            rows,
            verdict: "ok",
            flame_diff: None,
            mode: Mode::Separate,
            machine: None,
        }
    }

    #[test]
    fn an_unchanged_that_could_miss_its_band_says_so_on_the_terminal_and_in_markdown() {
        let c = comparison("bench");
        let mut term = Vec::new();
        write_table(&mut term, &c).unwrap();
        let term = String::from_utf8(term).unwrap();
        assert!(
            term.contains("↳") && term.contains("wider than the ±3% band"),
            "{term}"
        );
        assert!(
            term.contains("1 unchanged (1 of them could miss a change of their band's size)"),
            "{term}"
        );
        let md = to_markdown(&c);
        assert!(
            md.contains("could miss a change of the band's size"),
            "{md}"
        );
        assert!(!md.contains("<details>"), "{md}");
        let html = crate::report::html::comparison_over_time(&c, &[]);
        assert!(html.contains("could miss a change of their band"), "{html}");
    }

    /// A case named `<b>&"x` and a shape mismatch's text are escaped once each in the
    /// HTML comparison, its bars' labels too.
    #[test]
    fn a_hostile_case_is_escaped_once_in_the_html_comparison() {
        let mut c = comparison("<b>&\"x");
        c.shape_mismatch = Some("<i>window</i> & more".into());
        let html = crate::report::html::comparison_over_time(&c, &[]);
        let name = "&lt;b&gt;&amp;&quot;x";
        assert_eq!(
            html.matches(&format!("<td>{name}</td>")).count(),
            1,
            "{html}"
        );
        assert!(
            html.contains(&format!(">{name} cpu_per_op</text>")),
            "{html}"
        );
        assert!(
            html.contains("<strong>SHAPE MISMATCH</strong>: &lt;i&gt;window&lt;/i&gt; &amp; more")
        );
        assert!(!html.contains("<b>") && !html.contains("<i>"), "{html}");
        for twice in ["&amp;lt;", "&amp;amp;", "&amp;quot;"] {
            assert!(!html.contains(twice), "escaped twice: {twice}");
        }
    }
}
