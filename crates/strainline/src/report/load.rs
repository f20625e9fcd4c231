//! How a load run's summary reads: the terminal block and the JSON document (schema
//! `strainline.load.v1`). The figures themselves come from [`crate::load::summary`].

use std::io::{self, Write};

use serde::Serialize;

use crate::load::summary::{LoadSummary, Percentiles};
use crate::load::verdict::Validity;
use crate::load::Second;
use crate::units::format_micros as us;

pub const JSON_SCHEMA: &str = "strainline.load.v1";

/// `p` at each of `shown` (those kept), then its maximum.
fn pline(out: &mut dyn Write, p: &Percentiles, shown: &[f64]) -> io::Result<()> {
    let mut line = String::new();
    for q in shown {
        if let Some(v) = p.at(*q) {
            line += &format!("p{} {}  ", crate::metrics::percentile_label(*q), us(v));
        }
    }
    writeln!(out, "  {:<14}{line}max {}", "", us(p.max))
}

/// The latency histogram, a bar a bucket (the longest 30 wide), with each bucket's
/// count and share: the shape p50/p99 cannot show (two modes, a tail).
fn write_histogram(
    out: &mut dyn Write,
    buckets: &[crate::load::summary::Bucket],
) -> io::Result<()> {
    let total: u64 = buckets.iter().map(|b| b.count).sum();
    let most = buckets.iter().map(|b| b.count).max().unwrap_or(0);
    if total == 0 {
        return Ok(());
    }
    writeln!(
        out,
        "  Histogram     of the latency above, log-spaced buckets:"
    )?;
    for b in buckets {
        let bar = ((b.count as f64 / most as f64) * 30.0).round() as usize;
        let bar = if b.count > 0 { bar.max(1) } else { 0 };
        writeln!(
            out,
            "    ≤ {:>9}  {:<30}  {:>9}  {:>7}",
            us(b.le_us),
            "■".repeat(bar),
            b.count,
            crate::units::share(b.count as f64 / total as f64)
        )?;
    }
    Ok(())
}

/// The line that leads a summary with failures: how many of the requests due failed,
/// and why, most frequent first (in colour on a terminal). Nothing when none failed.
fn write_failures(out: &mut dyn Write, s: &LoadSummary) -> io::Result<()> {
    // Failures lead: a run that mostly failed says so first, whatever else it says.
    let causes = crate::load::summary::causes_text(&s.failure_causes());
    match s.accounting().failures_line(&causes) {
        Some(line) => writeln!(
            out,
            "{}",
            crate::units::alarm(&format!("  {:<14}{line}", "FAILURES"))
        ),
        None => Ok(()),
    }
}

pub fn write_summary(out: &mut dyn Write, s: &LoadSummary, run_id: Option<i64>) -> io::Result<()> {
    let rule = "=".repeat(72);
    writeln!(out, "{rule}")?;
    let id = run_id.map(|i| format!("  (run #{i})")).unwrap_or_default();
    writeln!(out, "Load: {}{id}", s.url)?;
    writeln!(out, "  {}", s.description)?;
    writeln!(out, "{rule}")?;
    write_failures(out, s)?;
    writeln!(
        out,
        "  {:<14}{}",
        "Requests",
        s.accounting().requests_line()
    )?;
    writeln!(
        out,
        "  {:<14}{}",
        "Throughput",
        crate::load::accounting::throughput_line(
            s.achieved_rate,
            s.offered_rate,
            s.elapsed_seconds
        )
    )?;
    if s.model != "closed" {
        writeln!(
            out,
            "  Latency, from the intended send time (coordinated-omission corrected):"
        )?;
        pline(out, &s.latency_us, &s.percentiles)?;
        writeln!(out, "  Service time, from the actual send:")?;
        pline(out, &s.service_time_us, &s.percentiles)?;
    } else {
        writeln!(out, "  Latency (closed model: from the actual send):")?;
        pline(out, &s.latency_us, &s.percentiles)?;
    }
    write_histogram(out, &s.latency_histogram)?;
    write_steps(out, s)?;
    let statuses: Vec<String> = s
        .by_status
        .iter()
        .map(|(k, v)| format!("{k}: {v}"))
        .collect();
    writeln!(
        out,
        "  {:<14}{}",
        "Status",
        if statuses.is_empty() {
            "-".into()
        } else {
            statuses.join("  ")
        }
    )?;
    if !s.by_error.is_empty() {
        let errors: Vec<String> = s
            .by_error
            .iter()
            .map(|(k, v)| format!("{k}: {v}"))
            .collect();
        writeln!(out, "  {:<14}{}", "Errors", errors.join("  "))?;
    }
    if s.bytes_received > 0 {
        // What the replies carried (HTTP's bodies, WebSocket's and Redis's replies):
        // `data_received` in k6's words.
        writeln!(
            out,
            "  {:<14}{} in replies, {}/s",
            "Received",
            crate::units::Bytes(s.bytes_received),
            crate::units::Bytes((s.bytes_received as f64 / s.elapsed_seconds.max(1e-6)) as u64)
        )?;
    }
    if s.messages_received > 0 {
        let per = s.messages_received as f64 / s.completed.max(1) as f64;
        if s.by_status.contains_key("reply") {
            writeln!(
                out,
                "  {:<14}{} pushed by the server besides the replies, {per:.1} per reply",
                "Messages", s.messages_received
            )?;
        } else {
            writeln!(
                out,
                "  {:<14}{} received, {per:.1} per answered call",
                "Messages", s.messages_received
            )?;
        }
    }
    if let Some(d) = &s.deliveries {
        write_deliveries(out, d)?;
    }
    write_generator(out, s)?;
    if s.unfinished > 0 {
        writeln!(
            out,
            "  {:<14}{} request(s) still unanswered when the run ended were cut (counted as errors, latency censored at the cut)",
            "Unfinished", s.unfinished
        )?;
    }
    if s.unsent > 0 {
        writeln!(
            out,
            "  {:<14}{} of {} scheduled request(s) were never sent (counted as errors, latency censored at the run's end)",
            "Never sent",
            s.unsent,
            s.accounting().due()
        )?;
    }
    let verdict = verdict_words(s);
    writeln!(out, "  {:<14}{verdict}", "Verdict")?;
    for r in &s.reasons {
        writeln!(out, "    - {r}")?;
    }
    if s.interrupted {
        writeln!(
            out,
            "  Interrupted: what was measured until then is shown and saved."
        )?;
    }
    writeln!(out, "{rule}")
}

/// The verdict's line: valid or not, and whose the failures were.
fn verdict_words(s: &LoadSummary) -> String {
    match (s.status, script_words(s)) {
    (Validity::Valid, Some(w)) => {
        format!("VALID measurement: the generator was not the limit; {w}")
    }
    (Validity::Valid, None) if s.errors > 0 => {
        "VALID measurement: the generator was not the limit (the failures above are the target's answers)".into()
    }
    (Validity::Valid, None) => "VALID: the target, not the generator, set the pace".into(),
    (Validity::Invalid, w) => format!(
        "INVALID: the generator, not the target, was the limit{}",
        w.map(|w| format!("; {w}")).unwrap_or_default()
    ),
    (Validity::Failed, w) => {
        format!("FAILED{}", w.map(|w| format!(": {w}")).unwrap_or_default())
    }
}
}

/// Whose the failures were when some were the flow's own, not the target's answers:
/// the script's (its hook failed: a Lua error, or its time or memory limit), the
/// script's verdicts (its `response(r)` returned `false` on a reply whose status
/// passed), and requests not sent — a value put a byte in them that the wire cannot
/// carry, or a variable they use was never extracted.
fn script_words(s: &LoadSummary) -> Option<String> {
    let script = s.script_failures();
    let verdicts: u64 = s
        .steps
        .iter()
        .flat_map(|st| &st.causes)
        .filter(|(k, _)| *k == "check:script" || k.starts_with("check:script:"))
        .map(|(_, v)| v)
        .sum();
    let kind = |k: &str| s.by_error.get(k).copied().unwrap_or(0);
    let (invalid, missing) = (kind("invalid_request"), kind("extract"));
    let unsent = invalid + missing;
    let why = "a Lua error, or its time or memory limit; the first is logged";
    let mut parts = Vec::new();
    if script > 0 {
        parts.push(format!(
            "{script} were the script's (its hook failed: {why})"
        ));
    }
    if verdicts > 0 {
        parts.push(format!(
            "{verdicts} the script's verdicts (its response(r) returned false on a reply whose status passed)"
        ));
    }
    if unsent > 0 {
        parts.push(match (invalid, missing) {
            (_, 0) => format!("{unsent} requests were not sent (a value the wire cannot carry: see Not sent)"),
            (0, _) => format!("{unsent} requests were not sent (a variable never extracted: see Flow)"),
            _ => format!("{unsent} requests were not sent ({invalid} for a value the wire cannot carry, {missing} for a variable never extracted)"),
        });
    }
    if parts.is_empty() {
        return None;
    }
    let target = s.errors.saturating_sub(script + verdicts + unsent);
    Some(match (script, verdicts, unsent) {
        (n, 0, 0) if target == 0 => format!(
            "the failures were the script's: {n} of {} requests failed in its hook ({why}), none by the target's answer",
            s.sent
        ),
        (0, v, 0) if target == 0 => format!(
            "the failures were the script's verdicts: its response(r) returned false on {v} of {} replies whose status passed, none failed by the target's status or transport",
            s.sent
        ),
        (0, 0, _) if target == 0 => format!(
            "the failures were the flow's own: {}, none by the target's answer",
            parts[0]
        ),
        _ => format!(
            "of the {} failures, {}, {target} were the target's answers",
            s.errors,
            parts.join(", ")
        ),
    })
}

/// MQTT subscribers: how many listened, what reached them, how late.
fn write_deliveries(out: &mut dyn Write, d: &crate::load::summary::Deliveries) -> io::Result<()> {
    writeln!(
        out,
        "  {:<14}{} of {} expected ({} subscriber(s) of {} subscribed), {} lost ({}), {} duplicate(s)",
        "Delivered",
        d.distinct(),
        d.expected,
        d.subscribed,
        d.subscribers,
        d.lost,
        crate::units::share(d.loss_rate),
        d.duplicates
    )?;
    if d.unverified > 0 {
        writeln!(
            out,
            "  {:<14}{} delivery(ies) could not be checked for a duplicate (a stamp older than its publisher's last 4,096, or from more publishers than a subscriber tracks): counted once each — a broker that replays or forges stamps shows here",
            "", d.unverified
        )?;
    }
    if d.subscribed_late > 0 {
        writeln!(
            out,
            "  {:<14}{} subscriber(s) subscribed after the clock started: what was published before counts as lost",
            "", d.subscribed_late
        )?;
    }
    writeln!(
        out,
        "  End to end, from the publisher's intended send time to the subscriber:"
    )?;
    pline(out, &d.latency_us, &crate::metrics::DEFAULT_PERCENTILES)
}

/// The JSON document of a run: summary and the per-second series.
/// A scenario's steps: sent, ok, errors and latency of each.
fn write_steps(out: &mut dyn Write, s: &LoadSummary) -> io::Result<()> {
    if s.steps.is_empty() {
        return Ok(());
    }
    let steps: Vec<Row> = s
        .steps
        .iter()
        .map(|st| {
            (
                st.name.as_str(),
                [st.sent, st.ok, st.errors],
                &st.latency_us,
            )
        })
        .collect();
    let groups: Vec<Row> = s
        .groups
        .iter()
        .map(|g| {
            (
                g.name.as_str(),
                [g.steps.sent, g.steps.ok, g.steps.errors],
                &g.steps.latency_us,
            )
        })
        .collect();
    let tags: Vec<Row> = s
        .tags
        .iter()
        .map(|t| {
            (
                t.tag.as_str(),
                [t.steps.sent, t.steps.ok, t.steps.errors],
                &t.steps.latency_us,
            )
        })
        .collect();
    // One width for the three tables, as wide as the longest name (a workload
    // scenario's are routes).
    let w = steps
        .iter()
        .chain(&groups)
        .chain(&tags)
        .map(|r| r.0.chars().count())
        .max()
        .unwrap_or(0)
        .max(12);
    write_table(out, "Steps", ["sent", "ok", "errors"], &steps, w)?;
    write_table(out, "Groups", ["sent", "ok", "errors"], &groups, w)?;
    let times: Vec<Row> = s
        .groups
        .iter()
        .filter_map(|g| {
            Some((
                g.name.as_str(),
                [g.runs, g.runs_ok, g.runs - g.runs_ok],
                g.duration_us.as_ref()?,
            ))
        })
        .collect();
    if !times.is_empty() {
        write_table(out, "Group time", ["runs", "all ok", "not"], &times, w)?;
        writeln!(
            out,
            "    (a run: a client ran the group's steps in a row; its time from the first one's intended time to the last reply)"
        )?;
    }
    write_table(out, "Tags", ["sent", "ok", "errors"], &tags, w)?;
    write_custom(out, s, w)?;
    write_checks(out, s)
}

/// A scenario's own metrics: each one's kind, values fed and its kind's figures.
fn write_custom(out: &mut dyn Write, s: &LoadSummary, w: usize) -> io::Result<()> {
    if s.custom_metrics.is_empty() {
        return Ok(());
    }
    let w = s
        .custom_metrics
        .iter()
        .map(|c| c.name.chars().count())
        .max()
        .unwrap_or(0)
        .max(w);
    writeln!(
        out,
        "  {:<w$}{:>9} {:>9}   figures",
        "Metrics",
        "kind",
        "values",
        w = w + 2
    )?;
    let num = crate::units::format_number;
    for c in &s.custom_metrics {
        let mut figures: Vec<String> = Vec::new();
        if let Some(t) = c.total {
            figures.push(format!("total {}", num(t)));
        }
        if let Some(p) = c.per_second {
            figures.push(format!("{}/s", num(p)));
        }
        if let Some(r) = c.rate {
            figures.push(format!("{} true", crate::units::share(r)));
        }
        if let Some(l) = c.last {
            figures.push(format!("last {}", num(l)));
        }
        if let Some(m) = c.mean {
            figures.push(format!("mean {}", num(m)));
        }
        if let Some(m) = c.min {
            figures.push(format!("min {}", num(m)));
        }
        for (p, x) in &c.percentiles {
            figures.push(format!("{p} {}", num(*x)));
        }
        if let Some(m) = c.max {
            figures.push(format!("max {}", num(m)));
        }
        if c.count == 0 {
            figures.push("never fed".to_string());
        }
        writeln!(
            out,
            "    {:<w$}{:>9} {:>9}   {}",
            crate::units::printable(&c.name),
            c.kind.name(),
            c.count,
            figures.join("  ")
        )?;
    }
    Ok(())
}

/// A row of a step, group or tag table: its name, three counts and its latency.
type Row<'a> = (&'a str, [u64; 3], &'a Percentiles);

/// A table of `rows` under `title` (nothing without rows): the counts named `heads`,
/// then p50, p95 and p99.
fn write_table(
    out: &mut dyn Write,
    title: &str,
    heads: [&str; 3],
    rows: &[Row],
    w: usize,
) -> io::Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "  {:<w$}{:>9} {:>9} {:>7} {:>9} {:>9} {:>9}",
        title,
        heads[0],
        heads[1],
        heads[2],
        "p50",
        "p95",
        "p99",
        w = w + 2
    )?;
    for (name, [a, b, c], p) in rows {
        // Nothing timed (never answered) is no latency, not 0 µs.
        let us = |v: u64| if p.max == 0 { "-".to_string() } else { us(v) };
        writeln!(
            out,
            "    {:<w$}{:>9} {:>9} {:>7} {:>9} {:>9} {:>9}",
            crate::units::printable(name),
            a,
            b,
            c,
            us(p.p50),
            us(p.p95),
            us(p.p99)
        )?;
    }
    Ok(())
}

/// A flow's checks (each step's, by name: passed, failed, pass rate) and what its
/// clients did on failure (restarts, retries, stops, values never extracted).
fn write_checks(out: &mut dyn Write, s: &LoadSummary) -> io::Result<()> {
    let checks: Vec<(&str, &crate::load::summary::CheckSummary)> = s
        .steps
        .iter()
        .flat_map(|st| st.checks.iter().map(move |c| (st.name.as_str(), c)))
        .collect();
    if !checks.is_empty() {
        let w = checks
            .iter()
            .map(|(st, c)| c.name.chars().count() + st.chars().count() + 3)
            .max()
            .unwrap_or(0)
            .max(12);
        writeln!(
            out,
            "  {:<w$}{:>9} {:>9} {:>10}",
            "Checks",
            "passed",
            "failed",
            "pass rate",
            w = w + 2
        )?;
        for (step, c) in &checks {
            let name = format!(
                "{} ({})",
                crate::units::printable(&c.name),
                crate::units::printable(step)
            );
            writeln!(
                out,
                "    {:<w$}{:>9} {:>9} {:>9.2}%",
                name,
                c.passed,
                c.failed,
                100.0 * c.pass_rate()
            )?;
        }
    }
    let mut flow: std::collections::BTreeMap<&str, u64> = Default::default();
    let mut unsent = Vec::new();
    for st in &s.steps {
        for (k, v) in &st.flow {
            match k.strip_prefix("invalid.").and_then(|r| r.split_once('.')) {
                Some((field, by)) => unsent.push(format!(
                    "{v} of step '{}': {} put a byte its {field} cannot carry (a control character, a space …)",
                    crate::units::printable(&st.name),
                    crate::units::printable(by)
                )),
                None => *flow.entry(k.as_str()).or_default() += v,
            }
        }
    }
    if !unsent.is_empty() {
        writeln!(out, "  {:<14}{}", "Not sent", unsent.join("; "))?;
    }
    // A [sessions] scenario's: how many arrived, how many ran every step.
    if let Some(started) = flow.remove("sessions") {
        let completed = flow.remove("completed").unwrap_or(0);
        writeln!(
            out,
            "  {:<14}{started} started, {completed} ran every step ({} stopped, failed on or cut short)",
            "Sessions",
            started.saturating_sub(completed)
        )?;
    }
    if !flow.is_empty() {
        let said: Vec<String> = flow
            .iter()
            .map(|(k, v)| match *k {
                "restarts" => format!("{v} flows started again (on_failure = restart)"),
                "retries" => format!("{v} steps sent again (retry)"),
                "stopped" => format!("{v} clients stopped (on_failure = stop)"),
                "exhausted" => format!("{v} clients found no row left (csv_order = unique)"),
                "data_unreadable" => format!(
                    "{v} clients stopped: the data file was cut short or changed since the run began (the first error is logged)"
                ),
                "loops_exhausted" => {
                    format!("{v} loops ran their most times without their until condition")
                }
                "script_errors" => {
                    format!("{v} errors in the script's response(r) (the first is logged)")
                }
                "redirects_followed" => format!(
                    "{v} redirects followed (hops within their steps, not sends: a step's latency runs to its last reply)"
                ),
                "redirects_not_followed" => format!(
                    "{v} redirects not followed (another host or scheme, or a malformed Location: the 3xx was the reply)"
                ),
                "metric.undeclared" => format!(
                    "{v} values fed by the script to metrics [metrics] does not declare (not kept; the first is logged)"
                ),
                k if k.starts_with("metric.") => match k["metric.".len()..].rsplit_once('.') {
                    Some((m, _)) => format!(
                        "{v} values metric '{m}' could not take (not a number, below 0 or above a trillion; a rate: true, false or a number): not kept"
                    ),
                    None => format!("{v} × {k}"),
                },
                k => match k.trim_start_matches("extract.").rsplit_once('.') {
                    Some((var, "too_large")) => format!(
                        "{v} times {{{{{var}}}}} could not be extracted: the reply was too large to extract from (its first 1 MiB is kept)"
                    ),
                    Some((var, _)) => format!("{v} times {{{{{var}}}}} could not be extracted"),
                    None => format!("{v} × {k}"),
                },
            })
            .collect();
        writeln!(out, "  {:<14}{}", "Flow", said.join(", "))?;
    }
    Ok(())
}

/// The generator's threads and CPU, and each agent's part: what says whether the
/// generator, not the target, was the limit.
fn write_generator(out: &mut dyn Write, s: &LoadSummary) -> io::Result<()> {
    // (An empty sum is -0.0.)
    let cpu: f64 = s.generator_thread_cpu_seconds.iter().sum::<f64>() + 0.0;
    let busiest = s
        .generator_thread_cpu_seconds
        .iter()
        .fold(0.0f64, |a, b| a.max(*b));
    writeln!(
        out,
        "  {:<14}{} thread{}, CPU {:.2} s ({:.0}% of the busiest thread), {} opened{}",
        "Generator",
        s.threads,
        if s.threads == 1 { "" } else { "s" },
        cpu,
        if s.elapsed_seconds > 0.0 {
            100.0 * busiest / s.elapsed_seconds
        } else {
            0.0
        },
        crate::units::count(s.connections_opened, "connection", "connections"),
        if s.model != "closed" {
            format!(", schedule lag p99 {}", us(s.schedule_lag_us.p99))
        } else {
            String::new()
        }
    )?;
    if let Some(seed) = s.seed {
        writeln!(
            out,
            "  {:<14}{seed} (its random choices: --seed {seed} replays them)",
            "Seed"
        )?;
    }
    // Runnable but not running: the machine's CPUs were busy with something else (the
    // target, a neighbour) when the generator had sends to make.
    let queued = s.generator_run_queue_seconds;
    if s.elapsed_seconds > 0.0 && queued >= 0.01 * s.elapsed_seconds {
        writeln!(
            out,
            "  {:<14}its threads waited {queued:.2} s for a CPU (runnable, in the run queue: {:.1}% of the run per thread), the machine's CPUs busy elsewhere",
            "",
            100.0 * queued / (s.elapsed_seconds * s.generator_thread_cpu_seconds.len().max(1) as f64)
        )?;
    }
    for a in &s.agents {
        let state = match (&a.lost, a.status) {
            (Some(_), _) => "LOST".to_string(),
            (None, Some(Validity::Invalid)) => "INVALID".into(),
            (None, Some(Validity::Failed)) => "failed".into(),
            _ => "valid".into(),
        };
        writeln!(
            out,
            "  {:<14}{} (slice {}/{}): {} sent, {}, p99 {}, lag p99 {}, CPU {:.2} s, clock offset {:+.0} µs, {state}",
            "Agent",
            crate::units::printable(&a.name),
            a.slice + 1,
            a.of,
            a.sent,
            crate::units::rate(a.achieved_rate),
            us(a.latency_us.p99),
            us(a.schedule_lag_us.p99),
            a.generator_thread_cpu_seconds.iter().sum::<f64>() + 0.0,
            a.clock_offset_us
        )?;
    }
    Ok(())
}

pub fn to_json(s: &LoadSummary, seconds: &[Second], run_id: Option<i64>) -> String {
    #[derive(Serialize)]
    struct Body<'a> {
        summary: &'a LoadSummary,
        seconds: &'a [Second],
    }
    super::document(
        JSON_SCHEMA,
        run_id,
        Body {
            summary: s,
            seconds,
        },
    )
}
