//! A case's facts ([`Line`]) in words, for the terminal under its name: the one place
//! they are worded (with its details, where a fact's figures are kept). Tables (a ramp's steps, a rounds test's rounds, a scale test's
//! sizes) keep their columns.

use crate::kinds::details::Details;
use crate::kinds::lines::{self, Line};
use crate::kinds::CaseResult;
use crate::units::{
    count, format_duration, format_micros, format_number, format_value, latency_ms, rate, share,
    Bytes,
};

/// A case's facts in words, a line each, as the terminal prints them under its name
/// (without their indentation).
pub fn lines(r: &CaseResult) -> Vec<String> {
    r.table
        .iter()
        .map(|l| line(l, &r.details))
        .flat_map(|words| words.lines().map(str::to_string).collect::<Vec<_>>())
        .collect()
}

/// `l` in words (more than one line for some); `d`: the case's details, which hold
/// what some facts tell.
fn line(l: &Line, d: &Details) -> String {
    match l {
        Line::GateOk { detail } => format!("gate ok: {detail}"),
        Line::GateUndecided { detail } => format!("gate undecided: {detail}"),
        Line::LogClass { name, lines } => format!("log class '{name}': {lines} line(s)"),
        Line::TargetCost { cores, ms_per_op } => {
            format!(
                "target: {}, {} of CPU per request",
                format_value(*cores, "cores"),
                latency_ms(*ms_per_op)
            )
        }
        Line::Load {
            description,
            achieved_rate,
            p50_us,
            p99_us,
            error_rate,
        } => format!(
            "load: {description} — {}, p50 {}, p99 {}, errors {}",
            rate(*achieved_rate),
            format_micros(*p50_us),
            format_micros(*p99_us),
            share(*error_rate)
        ),
        Line::Checks { checks } => {
            let each: Vec<String> = checks
                .iter()
                .map(|c| {
                    format!(
                        "{} {}/{} ({})",
                        c.name,
                        c.passed,
                        c.passed + c.failed,
                        share(c.pass_rate())
                    )
                })
                .collect();
            format!("checks: {}", each.join(", "))
        }
        Line::Deliveries { deliveries: d } => format!(
            "deliveries: {} of {} expected to {} subscriber(s), {} lost ({}), {} duplicate(s){}, end to end p50 {}, p99 {}",
            d.distinct(),
            d.expected,
            d.subscribed,
            d.lost,
            share(d.loss_rate),
            d.duplicates,
            if d.unverified > 0 {
                format!(", {} not checked for a duplicate (unverified stamps)", d.unverified)
            } else {
                String::new()
            },
            format_micros(d.latency_us.p50),
            format_micros(d.latency_us.p99)
        ),
        Line::Finding { words } | Line::Said { words } => words.clone(),
        Line::ThreadStates { closed } => {
            let Some(states) = &d.threads else {
                return String::new();
            };
            let mut s = format!("thread states: {}", crate::analysis::threads::summary(states));
            if let Some(limit) = closed.then(|| crate::analysis::threads::limit(states)).flatten()
            {
                s.push_str(&format!("\nlimiting factor (thread states): {limit}"));
            }
            s
        }
        Line::Ramp(r) => ramp(r),
        Line::Rounds(r) => rounds(r),
        Line::Scale(s) => scale(s),
        Line::Soak(s) => soak(s),
        Line::Crash(c) => crash(c),
        Line::Harness {
            argv,
            exit,
            wall_s,
            peak_rss,
            rss_source,
            cpu_cores,
            parsed,
        } => format!(
            "harness {}: {exit}, {wall_s:.2}s, peak RSS {} ({rss_source}), CPU {:.1}% of a core; {parsed} metric(s) parsed",
            argv.join(" "),
            Bytes(*peak_rss),
            100.0 * cpu_cores,
        ),
        Line::Watch { name, found: None } => {
            format!("watch {name}: no matching process was found")
        }
        Line::Watch {
            name,
            found: Some(w),
        } => format!(
            "watch {name}: peak RSS {}, CPU {:.2} cores on average, {}",
            Bytes(w.peak_rss),
            w.cpu_cores,
            count(w.processes, "process", "processes")
        ),
        Line::Target {
            host,
            peak_rss,
            rss_source,
            cpu_s,
            processes,
        } => format!(
            "target{}: peak RSS {} ({rss_source}), CPU {cpu_s:.2} s, {}",
            host.as_ref()
                .map_or(String::new(), |h| format!(" (on {h}, watched by its agent)")),
            Bytes(*peak_rss),
            count(*processes, "process", "processes")
        ),
        Line::Unwatched { url } => format!(
            "target: not monitored — [target] url = \"{url}\" is only reached, so no CPU, memory, thread or log figures of it; its answers are measured"
        ),
        Line::FlameGraph { file } => format!("flame graph: {file}"),
        Line::NoFlameGraph { why } => format!("no flame graph: {why}"),
        Line::Daemonised { names } => format!(
            "target daemonised: its command exited 0 leaving {} running — watched, judged and stopped as the target",
            names.join(", ")
        ),
        Line::Agents => d
            .agents
            .iter()
            .flatten()
            .map(|a| format!("agent {}", super::run::agent_line(&super::run::agent_row(a))))
            .collect::<Vec<_>>()
            .join("\n"),
    }
}

fn ramp(r: &lines::Ramp) -> String {
    match r {
        lines::Ramp::Head => format!(
            "{:>10} {:>10} {:>9} {:>8} {:>8} {:>8}  verdict",
            "offered", "achieved", "p99", "errors", "cpu", "thread"
        ),
        lines::Ramp::Step { figures: f, broke } => format!(
            "{:>10.0} {:>10.1} {:>9} {:>8} {:>8.2} {:>7.0}%  {}",
            f.offered,
            f.achieved,
            latency_ms(f.p99_ms),
            share(f.error_rate),
            f.target_cpu,
            100.0 * f.busiest_thread,
            if broke.is_empty() {
                "ok".into()
            } else {
                broke.join(", ")
            }
        ),
        lines::Ramp::Repeated { rate, stolen } => format!(
            "{rate:>10.0} repeated: the hypervisor took {:.1}% of the machine's CPU during the step",
            100.0 * stolen
        ),
        lines::Ramp::Ceiling {
            ceiling,
            knee,
            max_throughput,
        } => format!(
            "{ceiling}, knee {}, max throughput {}",
            rate(*knee),
            rate(*max_throughput)
        ),
        lines::Ramp::LimitingFactor { words } => format!("limiting factor: {words}"),
    }
}

fn rounds(r: &lines::Rounds) -> String {
    const MIB: f64 = 1048576.0;
    match r {
        lines::Rounds::Head => format!(
            "{:>6} {:>10} {:>10} {:>12} {:>10}",
            "round", "ops", "RSS MiB", "retained MiB", "ops/s"
        ),
        lines::Rounds::Base { rss } => format!(
            "{:>6} {:>10} {:>10.2} {:>12} {:>10}",
            "base",
            0,
            rss / MIB,
            "-",
            "-"
        ),
        lines::Rounds::Round {
            round,
            ops,
            rss,
            retained,
            rate,
        } => format!(
            "{round:>6} {ops:>10} {:>10.2} {:>+12.2} {rate:>10.1}",
            rss / MIB,
            retained / MIB
        ),
        lines::Rounds::End {
            retained_per_op,
            retained_total,
            trend_p,
            throughput,
            drop,
        } => format!(
            "retained {:.3} KiB per op (Theil–Sen), {:.2} MiB in all; trend p = {trend_p:.3}; throughput {throughput:.1} ops/s median, {} over the rounds",
            retained_per_op / 1024.0,
            retained_total / MIB,
            crate::units::signed_percent(-100.0 * drop)
        ),
    }
}

fn scale(s: &lines::Scale) -> String {
    match s {
        lines::Scale::Head { runs, by_cpu } => format!(
            "{:>12} {:>12} {:>12} {:>14}   ({runs} runs a size, median; cost = {} time)",
            "size",
            "wall s",
            "CPU s",
            "cost µs / unit",
            if *by_cpu { "CPU" } else { "wall" }
        ),
        lines::Scale::Size {
            size,
            wall_s,
            cpu_s,
            us_per_unit,
        } => format!("{size:>12} {wall_s:>12.3} {cpu_s:>12.3} {us_per_unit:>14.3}"),
        lines::Scale::Fit { words } => words.clone(),
    }
}

fn soak(s: &lines::Soak) -> String {
    match s {
        lines::Soak::Fit {
            name,
            words,
            warmup_s,
            points,
        } => {
            let warm = match warmup_s {
                Some(w) => format!("warm-up of {w:.1}s dropped"),
                None => "no warm-up found".into(),
            };
            format!("{name}: {words} ({warm}, {points} points)")
        }
        lines::Soak::GrowthHint => {
            "    if this target is meant to grow (a store filling with new keys, a cache \
             warming), set leak_budget to the growth its workload should cause over \
             the horizon, or gate on retained_per_op instead"
                .into()
        }
        lines::Soak::Retained { per_op, growth } => format!(
            "retained {:.2} KiB per request; RSS grew {:.1} MiB over the soak",
            per_op / 1024.0,
            growth / 1048576.0
        ),
        lines::Soak::Capacity {
            capacity: c,
            period,
            basis,
            from_ceiling,
            ram,
        } => {
            let n = |v: f64| format_number(v.floor());
            format!(
                "capacity: {} per client; ideal {} clients at one request per {} ({} {basis:.1} req/s), safe (80%) {}, RAM bound {} ({} usable): {} clients",
                Bytes(c.bytes_per_client as u64),
                n(c.ideal),
                format_duration(*period),
                if *from_ceiling { "ceiling" } else { "throughput, a lower bound:" },
                n(c.safe),
                c.ram_bound.map_or("none (memory did not grow)".into(), |b| format!("{} clients", n(b))),
                Bytes(*ram as u64),
                n(c.clients())
            )
        }
    }
}

fn crash(c: &lines::Crash) -> String {
    match c {
        lines::Crash::Iteration {
            iteration,
            kill,
            exit,
            survived,
            verify_said,
        } => format!(
            "iteration {iteration:>3}: killed {kill} ({exit}); verify: {} — {}",
            if *survived { "survived" } else { "FAILED" },
            verify_said.lines().last().unwrap_or("")
        ),
        lines::Crash::Survived {
            survived,
            iterations,
        } => format!("{survived} of {iterations} iterations survived"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_case_s_facts_are_worded_as_the_terminal_has_always_printed_them() {
        let step = Line::Ramp(lines::Ramp::Step {
            figures: crate::analysis::ramp::Figures {
                offered: 400.0,
                achieved: 399.5,
                p99_ms: 12.25,
                error_rate: 0.001,
                target_cpu: 0.5,
                busiest_thread: 0.42,
                ..Default::default()
            },
            broke: vec!["p99 over the SLO".into()],
        });
        assert_eq!(
            line(&step, &Details::default()),
            "       400      399.5   12.2 ms    0.10%     0.50      42%  p99 over the SLO"
        );
        let kill = Line::Crash(lines::Crash::Iteration {
            iteration: 3,
            kill: "after 120 ms".into(),
            exit: "killed by SIGKILL".into(),
            survived: false,
            verify_said: "checking\nbad page 7".into(),
        });
        assert_eq!(
            line(&kill, &Details::default()),
            "iteration   3: killed after 120 ms (killed by SIGKILL); verify: FAILED — bad page 7"
        );
        let round = Line::Rounds(lines::Rounds::Round {
            round: 2,
            ops: 2000,
            rss: 3.0 * 1048576.0,
            retained: 0.5 * 1048576.0,
            rate: 812.34,
        });
        assert_eq!(
            line(&round, &Details::default()),
            "     2       2000       3.00        +0.50      812.3"
        );
        let fit = Line::Soak(lines::Soak::Fit {
            name: "memory".into(),
            words: "no leak".into(),
            warmup_s: None,
            points: 40,
        });
        assert_eq!(
            line(&fit, &Details::default()),
            "memory: no leak (no warm-up found, 40 points)"
        );
        let gate = Line::GateOk {
            detail: "latency_p99 < 1s (measured 3.1 ms)".into(),
        };
        assert_eq!(
            line(&gate, &Details::default()),
            "gate ok: latency_p99 < 1s (measured 3.1 ms)"
        );
    }

    #[test]
    fn a_fact_the_details_hold_is_worded_from_them() {
        let mut r = CaseResult::new();
        r.table.push(Line::ThreadStates { closed: true });
        r.table.push(Line::Agents);
        r.table.push(Line::GateOk {
            detail: "ok_rate > 0.99".into(),
        });
        // Nothing in the details: those lines say nothing, the rest is as it was.
        assert_eq!(lines(&r), vec!["gate ok: ok_rate > 0.99".to_string()]);
        r.details.agents = Some(vec![Default::default(), Default::default()]);
        let said = lines(&r);
        assert_eq!(said.len(), 3, "{said:?}");
        assert!(
            said[0].starts_with("agent ") && said[1].starts_with("agent "),
            "{said:?}"
        );
    }
}
