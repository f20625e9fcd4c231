//! What a case tells its reader beside its metrics, as facts: each kind (and the runner)
//! says what it found as a [`Line`] with its figures, and `report::case` words it — the
//! terminal's lines are written there alone. Stored with the case's summary as these
//! facts (`table`), tagged by `line`; what the case's details already hold (its thread
//! states, its agents' parts) is read from there, not kept twice.

use serde::Serialize;

use crate::analysis::capacity::Capacity;
use crate::analysis::ramp::Figures;
use crate::load::summary::{CheckSummary, Deliveries};

/// One fact of a case, for the terminal under its name.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "line", rename_all = "snake_case")]
pub enum Line {
    /// A gate held (`detail`: the gate with the measured value, in words).
    GateOk {
        detail: String,
    },
    /// A gate could not be decided: its metric was not measured.
    GateUndecided {
        detail: String,
    },
    /// Lines of the target's log in a class of `[logs]`.
    LogClass {
        name: String,
        lines: u64,
    },
    /// The target's CPU over a bench: cores, and milliseconds of CPU per request.
    TargetCost {
        cores: f64,
        ms_per_op: f64,
    },
    /// A load run: its description and figures.
    Load {
        description: String,
        achieved_rate: f64,
        p50_us: u64,
        p99_us: u64,
        error_rate: f64,
    },
    /// A scenario's checks: how many passed of those made.
    Checks {
        checks: Vec<CheckSummary>,
    },
    /// Subscribers' deliveries (MQTT).
    Deliveries {
        deliveries: Deliveries,
    },
    /// What a run found about the target, in the load verdict's words (its accept
    /// queue, the delayed-ACK signature).
    Finding {
        words: String,
    },
    /// The target's threads by state (the case's `details.threads`); under the closed
    /// model, the limit they name.
    ThreadStates {
        closed: bool,
    },
    /// A kind's own line, in its module's words (a kind worded where it is made, as a
    /// verdict's words are: a spike's phases and recovery).
    Said {
        words: String,
    },
    Ramp(Ramp),
    Rounds(Rounds),
    Scale(Scale),
    Soak(Soak),
    Crash(Crash),
    /// A harness binary's run.
    Harness {
        argv: Vec<String>,
        exit: String,
        wall_s: f64,
        peak_rss: u64,
        rss_source: String,
        cpu_cores: f64,
        parsed: usize,
    },
    /// A `[[watch]]` process found (`processes` of them) or not (`None`).
    Watch {
        name: String,
        found: Option<Watched>,
    },
    /// The target's figures over the case (`host`: the agent that watched it).
    Target {
        host: Option<String>,
        peak_rss: u64,
        rss_source: String,
        cpu_s: f64,
        processes: u64,
    },
    /// `[target] url`: the target is only reached, not watched.
    Unwatched {
        url: String,
    },
    /// The CPU flame graph's file, or why there is none.
    FlameGraph {
        file: String,
    },
    NoFlameGraph {
        why: String,
    },
    /// The target's command exited 0 leaving these running.
    Daemonised {
        names: Vec<String>,
    },
    /// The agents' parts of the last load run (the case's `details.agents`).
    Agents,
}

/// A watched process tree's figures over the case.
#[derive(Debug, Clone, Serialize)]
pub struct Watched {
    pub peak_rss: u64,
    pub cpu_cores: f64,
    pub processes: u64,
}

/// A ramp's lines: its table's head, a step, a step measured again, its end.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "ramp", rename_all = "snake_case")]
pub enum Ramp {
    Head,
    /// A step's figures; `broke`: why it broke (empty: it held).
    Step {
        figures: Figures,
        broke: Vec<String>,
    },
    /// A step that broke while the hypervisor took `stolen` of the machine's CPU.
    Repeated {
        rate: f64,
        stolen: f64,
    },
    /// The ceiling in the verdict's words, the knee and the highest throughput.
    Ceiling {
        ceiling: String,
        knee: f64,
        max_throughput: f64,
    },
    LimitingFactor {
        words: String,
    },
}

/// A rounds test's lines: its table's head, the base, a round, its verdict's figures.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "rounds", rename_all = "snake_case")]
pub enum Rounds {
    Head,
    Base {
        rss: f64,
    },
    Round {
        round: u32,
        ops: u64,
        rss: f64,
        retained: f64,
        rate: f64,
    },
    End {
        retained_per_op: f64,
        retained_total: f64,
        trend_p: f64,
        throughput: f64,
        drop: f64,
    },
}

/// A scale test's lines: its table's head, a size, the fit in the verdict's words.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "scale", rename_all = "snake_case")]
pub enum Scale {
    Head {
        runs: usize,
        by_cpu: bool,
    },
    Size {
        size: u64,
        wall_s: f64,
        cpu_s: f64,
        us_per_unit: f64,
    },
    Fit {
        words: String,
    },
}

/// A soak's lines: a leak fit, the hint for growth by design, what it retained, its
/// capacity.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "soak", rename_all = "snake_case")]
pub enum Soak {
    /// A resource's fit (`memory`, `fds`, `threads`): its verdict's words, the warm-up
    /// dropped (seconds) if one was found, the points fitted.
    Fit {
        name: String,
        words: String,
        warmup_s: Option<f64>,
        points: usize,
    },
    GrowthHint,
    Retained {
        per_op: f64,
        growth: f64,
    },
    Capacity {
        capacity: Capacity,
        period: std::time::Duration,
        basis: f64,
        from_ceiling: bool,
        ram: f64,
    },
}

/// A crash test's lines: an iteration, and how many survived.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "crash", rename_all = "snake_case")]
pub enum Crash {
    Iteration {
        iteration: u32,
        kill: String,
        exit: String,
        survived: bool,
        verify_said: String,
    },
    Survived {
        survived: u32,
        iterations: u32,
    },
}
