//! The coordinator's side of a run on agents: connect and authenticate every agent,
//! measure each one's clock offset (refusing the run when one is beyond the
//! schedule-lag bound), give each its slice of the plan and one absolute start time,
//! then merge what they stream — losslessly, histograms added, not averaged — into the
//! same [`Outcome`] a run on one machine produces, so gates, reports and the verdict
//! read it unchanged. An agent that dies, hangs or is cut off makes the run INVALID
//! with its name and the time; the others are stopped and everything measured is kept.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use super::auth::Token;
use super::link::{self, Address, Link, Reader, Writer};
use super::wire::{self, FromAgent, Job, Report, ToAgent};
use crate::error::Category;
use crate::load::recorder::Tally;
use crate::load::verdict::LAG_BOUND_US;
use crate::load::{AgentPart, LoadSpec, Outcome, Plan, Second, Slice, StepSpans};

/// Where the agents are and the token that opens them.
#[derive(Debug, Clone)]
pub struct Fleet {
    pub addresses: Vec<Address>,
    pub token: Option<Token>,
}

impl Fleet {
    /// `--agents LIST` and `--agent-token-file FILE`.
    pub fn new(list: &str, token_file: Option<&std::path::Path>) -> crate::error::Result<Fleet> {
        let addresses = link::parse_list(list)?;
        let token = token_file.map(Token::read).transpose()?;
        Ok(Fleet { addresses, token })
    }

    /// How many agents there are (those that dial in included).
    pub fn count(&self) -> usize {
        self.addresses
            .iter()
            .map(|a| match a {
                Address::Listen { count, .. } => *count,
                _ => 1,
            })
            .sum()
    }

    /// Whether `spec` can be split over these agents, with the fix when not.
    pub fn check(&self, spec: &LoadSpec) -> crate::error::Result<()> {
        match &spec.offer {
            crate::load::Offer::Scenario(path) => scenario_files(path).map(|_| ()),
            crate::load::Offer::Closed { connections, .. }
                if connections.unwrap_or(crate::load::spec::DEFAULT_CONNECTIONS) < self.count() =>
            {
                Err(crate::Error::usage(format!(
                    "{} connections over {} agents: each agent needs one connection at least",
                    connections.unwrap_or(crate::load::spec::DEFAULT_CONNECTIONS),
                    self.count()
                )))
            }
            _ => Ok(()),
        }
    }
}

/// The name a scenario file has on the agents.
const SCENARIO_FILE: &str = "scenario.toml";

/// A scenario and the files it names (its `csv` or `jsonl`, its `script`), to be sent to the
/// agents: (name, content) pairs. Those files must be named relative to the scenario,
/// inside its directory.
fn scenario_files(path: &std::path::Path) -> crate::error::Result<Vec<(String, String)>> {
    let text = crate::os::file::read_text(path, "scenario")?;
    let mut files = vec![(SCENARIO_FILE.to_string(), text.clone())];
    let table = toml::from_str::<toml::Table>(&text).ok();
    for key in ["csv", "jsonl", "script"] {
        let Some(name) = table
            .as_ref()
            .and_then(|t| t.get(key).and_then(|c| c.as_str()).map(String::from))
        else {
            continue;
        };
        let rel = std::path::Path::new(&name);
        if rel.is_absolute()
            || rel
                .components()
                .any(|c| matches!(c, std::path::Component::ParentDir))
        {
            return Err(crate::Error::usage(format!(
                "{}: {key} = \"{name}\" is outside the scenario's directory: agents get the scenario and the files it names, so name it relative to the scenario, inside its directory",
                path.display()
            )));
        }
        let file = path.parent().unwrap_or(std::path::Path::new(".")).join(rel);
        let content = crate::os::file::read_text(&file, key)?;
        files.push((name, content));
    }
    Ok(files)
}

/// An agent silent this long is lost; it stops its own load after the same time
/// without hearing from the coordinator.
pub const LEASE: Duration = Duration::from_secs(3);

/// The largest clock offset accepted, µs: the schedule-lag bound — an agent whose clock
/// is further off sends its whole schedule that much early or late.
pub const CLOCK_BOUND_US: u64 = LAG_BOUND_US;

/// How far ahead of now the run starts: time for every agent to get the plan and open
/// its connections.
const LEAD: Duration = Duration::from_millis(1500);

/// How long the coordinator waits for agents that dial in (pods being scheduled).
const DIAL_IN_WAIT: Duration = Duration::from_secs(300);

/// Clock exchanges per agent; the one with the shortest round trip is kept.
const CLOCK_ROUNDS: u32 = 8;

enum Event {
    Second(usize, u64, Box<Tally>),
    Done(usize, Box<Report>),
    Lost(usize, String),
}

/// What the coordinator knows of one agent as the run goes.
struct Part {
    name: String,
    address: String,
    offset_ns: i64,
    rtt_ns: i64,
    streamed: Tally,
    /// The newest second it streamed, and its clients (the most running at once).
    last_second: (u64, u64),
    /// What it streamed too late for its second (merged already without it) or for a
    /// second it had sent already: the run's tail's, as its report's remainder is.
    late: Tally,
    report: Option<Report>,
    lost: Option<String>,
}

/// Agents connected, authenticated and with their clocks checked: no load sent yet.
pub struct Ready {
    rt: tokio::runtime::Runtime,
    links: Vec<Link>,
    parts: Vec<Part>,
}

/// Connects to every agent and measures its clock. `Err` names each agent that could
/// not be reached or refused, or whose clock is beyond the bound.
pub fn connect(fleet: &Fleet) -> crate::error::Result<Ready> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .usage()?;
    let (links, parts) = rt.block_on(connect_all(fleet))?;
    Ok(Ready { rt, links, parts })
}

impl Ready {
    /// How many agents answered.
    pub fn count(&self) -> usize {
        self.links.len()
    }

    /// Runs `plan` (checked from `spec`) on the agents. `Err` when an agent refused the
    /// plan: still before any load was sent.
    pub fn run(
        self,
        spec: &LoadSpec,
        plan: &Plan,
        stop: &dyn Fn() -> bool,
        progress: impl FnMut(&Second, &Tally),
    ) -> crate::error::Result<Outcome> {
        let Ready { rt, links, parts } = self;
        rt.block_on(coordinate(spec, plan, links, parts, stop, progress))
    }
}

async fn connect_all(fleet: &Fleet) -> crate::error::Result<(Vec<Link>, Vec<Part>)> {
    // Connect to all at once (agents that dial in are accepted).
    let mut tasks = tokio::task::JoinSet::new();
    for (i, a) in fleet.addresses.iter().enumerate() {
        let (a, token) = (a.clone(), fleet.token.clone());
        tasks.spawn(async move {
            let links = match &a {
                Address::Listen { addr, count } => {
                    link::accept(addr, *count, token.as_ref(), DIAL_IN_WAIT).await
                }
                _ => link::connect(&a, token.as_ref()).await.map(|l| vec![l]),
            };
            (
                i,
                links.map(|ls| ls.into_iter().map(|l| (l, a.clone())).collect::<Vec<_>>()),
            )
        });
    }
    let mut found: Vec<Vec<(Link, Address)>> =
        (0..fleet.addresses.len()).map(|_| Vec::new()).collect();
    let mut errors = Vec::new();
    while let Some(r) = tasks.join_next().await {
        match r.usage()? {
            (i, Ok(ls)) => found[i] = ls,
            (i, Err(e)) => errors.push((i, e)),
        }
    }
    if !errors.is_empty() {
        // Every agent's words, one a line, in the order they were given; the first
        // address's category and cause (not whichever failed first: the exit code is
        // the same every time).
        errors.sort_by_key(|(i, _)| *i);
        let mut errors: Vec<crate::Error> = errors.into_iter().map(|(_, e)| e).collect();
        let all: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
        let first = errors.swap_remove(0);
        return Err(first.reword(|_| all.join("\n")));
    }
    let (mut links, addresses): (Vec<Link>, Vec<Address>) = found.into_iter().flatten().unzip();
    let mut parts = Vec::with_capacity(links.len());
    for (l, a) in links.iter_mut().zip(&addresses) {
        let (offset_ns, rtt_ns) = clock(l).await?;
        let off_us = offset_ns.unsigned_abs() as f64 / 1e3;
        if offset_ns.unsigned_abs() > CLOCK_BOUND_US * 1000 {
            return Err(crate::Error::usage(format!(
                "agent {} ({}): its clock is {:.1} ms {} this machine's (measured over a {:.2} ms round trip; the bound is {:.1} ms, the schedule-lag bound): synchronise the clocks (chrony or systemd-timesyncd on both machines) and run again — no load was sent",
                l.name,
                a.label(),
                off_us / 1e3,
                if offset_ns > 0 { "ahead of" } else { "behind" },
                rtt_ns as f64 / 1e6,
                CLOCK_BOUND_US as f64 / 1e3
            )));
        }
        parts.push(Part {
            name: l.name.clone(),
            address: a.label(),
            offset_ns,
            rtt_ns,
            streamed: Tally::default(),
            last_second: (0, 0),
            late: Tally::default(),
            report: None,
            lost: None,
        });
    }
    Ok((links, parts))
}

/// Runs a plan over connected agents: each gets its slice and the start instant in its
/// own clock, and their seconds are merged into one as they stream in (one event loop:
/// each agent's second, a lost agent, the caller's stop, the end).
async fn coordinate(
    spec: &LoadSpec,
    plan: &Plan,
    mut links: Vec<Link>,
    mut parts: Vec<Part>,
    stop: &dyn Fn() -> bool,
    mut progress: impl FnMut(&Second, &Tally),
) -> crate::error::Result<Outcome> {
    let n = links.len();
    let shipped = shipped(spec)?;
    // One start for all, in each agent's own clock (per-second arrivals: on a second of
    // this machine's clock, as on one machine).
    let lead = crate::load::driver::lead(plan, crate::load::driver::warm_up(plan, LEAD));
    let start_ns = wire::unix_ns() + lead.as_nanos() as i64;
    let start = Instant::now() + lead;
    hand_out(&shipped, &mut links, &parts, start_ns).await?;
    // Readers forward what agents say; writers stay here (renew, stop).
    let (tx, mut events) = mpsc::unbounded_channel();
    let mut writers: Vec<Option<Writer>> = Vec::with_capacity(n);
    let mut children = Vec::new();
    for (i, l) in links.into_iter().enumerate() {
        writers.push(Some(l.writer));
        children.push(l.child);
        let bounds = Bounds {
            start,
            steps: steps_of(plan),
        };
        tokio::spawn(read_agent(i, l.reader, tx.clone(), bounds));
    }
    drop(tx);
    let mut pending: BTreeMap<u64, Vec<Option<Box<Tally>>>> = BTreeMap::new();
    let mut seconds = Vec::new();
    let mut spans = StepSpans::new(plan.duration);
    let mut ended = vec![false; n];
    let mut stopping = false;
    let mut interrupted = false;
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    let mut renewed = Instant::now();
    // However the agents behave, the run ends: its length, the request timeout, slack.
    let give_up = plan
        .duration
        .map(|d| start + d + plan.timeout + Duration::from_secs(15));
    while ended.iter().any(|e| !e) {
        tokio::select! {
            ev = events.recv() => {
                let Some(ev) = ev else { break };
                match ev {
                    Event::Second(i, index, tally) => {
                        received(&mut parts[i], &mut pending, &seconds, (i, n), index, tally);
                    }
                    Event::Done(i, report) => {
                        parts[i].report = Some(*report);
                        ended[i] = true;
                    }
                    Event::Lost(i, why) => {
                        if !ended[i] {
                            let at = Instant::now().saturating_duration_since(start).as_secs_f64();
                            parts[i].lost = Some(format!("{why}, {at:.1} s into the run"));
                            ended[i] = true;
                            writers[i] = None;
                            if !stopping {
                                stopping = true;
                                stop_agents(&mut writers).await;
                            }
                        }
                    }
                }
                place_remainders(&mut parts, &mut pending, &seconds);
                flush(&mut pending, &ended, &mut seconds, &mut spans, &mut progress, false);
            }
            _ = tick.tick() => {
                if !stopping && stop() {
                    stopping = true;
                    interrupted = true;
                    stop_agents(&mut writers).await;
                }
                if renewed.elapsed() >= Duration::from_secs(1) {
                    renewed = Instant::now();
                    renew(&mut writers).await;
                }
                if give_up.is_some_and(|g| Instant::now() >= g) {
                    for (i, e) in ended.iter_mut().enumerate() {
                        if !*e {
                            parts[i].lost = Some("did not finish its part in time".into());
                            *e = true;
                        }
                    }
                    stop_agents(&mut writers).await;
                    writers.iter_mut().for_each(|w| *w = None);
                }
            }
        }
    }
    flush(
        &mut pending,
        &ended,
        &mut seconds,
        &mut spans,
        &mut progress,
        true,
    );
    hang_up(writers, children).await;
    Ok(merge(plan, parts, seconds, spans, start, interrupted))
}

/// Sends each agent its job (the spec, its slice, the start in its own clock, the
/// scenario's files) and waits for each to accept it.
async fn hand_out(
    (spec, files): &(LoadSpec, Vec<(String, String)>),
    links: &mut [Link],
    parts: &[Part],
    start_ns: i64,
) -> crate::error::Result<()> {
    let n = links.len();
    for (i, l) in links.iter_mut().enumerate() {
        let job = Job {
            spec: spec.clone(),
            slice: Slice { index: i, of: n },
            start_unix_ns: start_ns + parts[i].offset_ns,
            lease_ms: LEASE.as_millis() as u64,
            files: files.clone(),
        };
        wire::send(&mut l.writer, &ToAgent::Run(Box::new(job)))
            .await
            .map_err(|e| {
                crate::Error::usage(format!("agent {}: sending the plan: {e}", l.name)).because(e)
            })?;
    }
    for l in links.iter_mut() {
        match tokio::time::timeout(LEAD, wire::recv::<_, FromAgent>(&mut l.reader)).await {
            Ok(Ok(Some(FromAgent::Ready))) => {}
            Ok(Ok(Some(FromAgent::Failed { why }))) => {
                return Err(crate::Error::usage(format!(
                    "agent {} cannot run the plan: {why}",
                    l.name
                )));
            }
            _ => {
                return Err(crate::Error::usage(format!(
                    "agent {} did not accept the plan in time",
                    l.name
                )))
            }
        }
    }
    Ok(())
}

/// The spec as it travels, and the files that travel with it: a scenario with its
/// files (the agents read it from their own copy), a streamed log whole (the agents
/// have no copy of it).
fn shipped(spec: &LoadSpec) -> crate::error::Result<(LoadSpec, Vec<(String, String)>)> {
    Ok(match &spec.offer {
        crate::load::Offer::Scenario(path) => {
            let files = scenario_files(path)?;
            let mut s = spec.clone();
            s.offer = crate::load::Offer::Scenario(SCENARIO_FILE.into());
            (s, files)
        }
        crate::load::Offer::Replay(log) if log.stream.is_some() => {
            let mut s = spec.clone();
            s.offer = crate::load::Offer::Replay(log.held());
            (s, Vec::new())
        }
        _ => (spec.clone(), Vec::new()),
    })
}

/// Renews every connected agent's lease; one that cannot be written to is dropped.
async fn renew(writers: &mut [Option<Writer>]) {
    for w in writers.iter_mut() {
        let gone = match w {
            Some(w) => wire::send(w, &ToAgent::Renew).await.is_err(),
            None => false,
        };
        if gone {
            *w = None;
        }
    }
}

/// Ends the sessions: TLS's close_notify on each (the agent sees a session that
/// ended, not a cut), then the ssh processes, which end with their session.
async fn hang_up(
    mut writers: Vec<Option<Writer>>,
    mut children: Vec<Option<tokio::process::Child>>,
) {
    for w in writers.iter_mut().flatten() {
        use tokio::io::AsyncWriteExt;
        let _ = tokio::time::timeout(Duration::from_secs(1), w.shutdown()).await;
    }
    drop(writers);
    for c in children.iter_mut().flatten() {
        let _ = c.start_kill();
    }
}

/// What an agent's second may say: a second of this run (from the first to a few past
/// the coordinator's own clock), of at most the plan's steps and groups. Beyond them an
/// agent is lost, not believed: its seconds are the run's timeline.
struct Bounds {
    start: Instant,
    /// The scenario's steps and groups (0 without a scenario).
    steps: usize,
}

/// Seconds an agent's clock may run ahead of the coordinator's.
const AHEAD: u64 = 5;

impl Bounds {
    /// Why the second `index` an agent sent is not believed, if it is not.
    fn refused(&self, index: u64, tally: &Tally) -> Option<String> {
        let now = Instant::now()
            .saturating_duration_since(self.start)
            .as_secs();
        if index == 0 || index > now + AHEAD {
            return Some(format!(
                "sent second {index} of a run {now} s old: not a second of this run"
            ));
        }
        (tally.step_seconds.len() > self.steps).then(|| {
            format!(
                "sent a second of {} steps; the scenario has {}",
                tally.step_seconds.len(),
                self.steps
            )
        })
    }
}

/// A plan's scenario steps and groups: the most an interval's steps may be (a
/// scenario's clients or sessions, or its steps drawn by the open model's arrivals).
fn steps_of(plan: &Plan) -> usize {
    use crate::load::Model;
    let sc = match &plan.model {
        Model::Scenario(sc) | Model::Sessions { sc, .. } => Some(&**sc),
        Model::Open {
            requests: Some(r), ..
        } => r.scenario(),
        _ => None,
    };
    sc.map_or(0, |sc| sc.steps.len() + sc.groups.len())
}

/// Sends `Stop` to every agent still connected.
async fn stop_agents(writers: &mut [Option<Writer>]) {
    for w in writers.iter_mut().flatten() {
        let _ = wire::send(w, &ToAgent::Stop).await;
    }
}

/// Forwards one agent's messages; its silence beyond the lease, an error or the end of
/// its stream before its report makes it lost. Before the run starts (a lead of up to
/// 2.5 s when per-second arrivals wait for a second of the clock) an agent has nothing
/// to say: the lease counts from the start.
async fn read_agent(i: usize, mut r: Reader, tx: mpsc::UnboundedSender<Event>, bounds: Bounds) {
    let start = bounds.start;
    loop {
        let patience = LEASE + start.saturating_duration_since(Instant::now());
        let ev = match tokio::time::timeout(patience, wire::recv::<_, FromAgent>(&mut r)).await {
            Err(_) => Event::Lost(i, format!("silent for {} s", LEASE.as_secs())),
            Ok(Err(e)) => Event::Lost(i, format!("connection failed ({e})")),
            Ok(Ok(None)) => Event::Lost(i, "closed the connection before reporting".into()),
            Ok(Ok(Some(FromAgent::Second { index, tally }))) => match bounds.refused(index, &tally)
            {
                None => Event::Second(i, index, tally),
                Some(why) => Event::Lost(i, why),
            },
            Ok(Ok(Some(FromAgent::Done(report)))) => {
                let _ = tx.send(Event::Done(i, report));
                return;
            }
            Ok(Ok(Some(FromAgent::Failed { why }))) => Event::Lost(i, format!("failed: {why}")),
            Ok(Ok(Some(_))) => continue,
        };
        let lost = matches!(ev, Event::Lost(..));
        if tx.send(ev).is_err() || lost {
            return;
        }
    }
}

/// The clock offset (agent − coordinator) and round trip, ns, of the exchange with the
/// shortest round trip.
async fn clock(l: &mut Link) -> crate::error::Result<(i64, i64)> {
    let mut best: Option<(i64, i64)> = None;
    for id in 0..CLOCK_ROUNDS {
        let t0 = wire::unix_ns();
        wire::send(&mut l.writer, &ToAgent::Clock { id })
            .await
            .map_err(|e| crate::Error::usage(format!("agent {}: {e}", l.name)).because(e))?;
        let reply = tokio::time::timeout(
            link::CONNECT_TIMEOUT,
            wire::recv::<_, FromAgent>(&mut l.reader),
        )
        .await
        .map_err(|_| crate::Error::usage(format!("agent {}: no clock reading", l.name)))?
        .map_err(|e| crate::Error::usage(format!("agent {}: {e}", l.name)).because(e))?;
        let t1 = wire::unix_ns();
        let Some(FromAgent::Clock { id: got, unix_ns }) = reply else {
            return Err(crate::Error::usage(format!(
                "agent {}: expected a clock reading",
                l.name
            )));
        };
        if got != id {
            continue;
        }
        let (offset, rtt) = (unix_ns - (t0 + t1) / 2, t1 - t0);
        if best.is_none_or(|(_, r)| rtt < r) {
            best = Some((offset, rtt));
        }
    }
    best.ok_or_else(|| crate::Error::usage(format!("agent {}: no clock reading", l.name)))
}

/// The newest second merged (0 before any).
fn merged_until(seconds: &[Second]) -> u64 {
    seconds.last().map_or(0, |s| s.t.ceil() as u64)
}

/// Agent `i` of `n`'s second `index`, as it arrives: counted in what it streamed and
/// kept to be merged with the other agents' parts of that second — unless that second
/// was merged already (the agent was three seconds behind another) or the agent sent
/// it before: then it is late, for the run's tail (merged again, it was a second back
/// in time, or one agent's part of it overwritten).
fn received(
    part: &mut Part,
    pending: &mut BTreeMap<u64, Vec<Option<Box<Tally>>>>,
    seconds: &[Second],
    (i, n): (usize, usize),
    index: u64,
    tally: Box<Tally>,
) {
    part.streamed.merge(&tally);
    let again = pending.get(&index).is_some_and(|got| got[i].is_some());
    if index <= merged_until(seconds) || again {
        part.late.merge(&tally);
        return;
    }
    if index > part.last_second.0 {
        part.last_second = (index, tally.active);
    }
    pending.entry(index).or_insert_with(|| vec![None; n])[i] = Some(tally);
}

/// The remainders of ended agents (their reports' totals beyond the seconds they
/// streamed) merged as the second after their newest streamed one, where they belong:
/// when the run ended at that second's close ([`last_as_second`]: the close never
/// came), or within that second while other agents' parts of it are still to be
/// merged (a second one of them streamed, or one's remainder that ended at its close).
/// Left in the run's tail, such a remainder ended before that merged second (the tail
/// at 9.97 s after a 10th second), out of the series. Any other stays in the tail, as a
/// partial second does on one machine.
fn place_remainders(
    parts: &mut [Part],
    pending: &mut BTreeMap<u64, Vec<Option<Box<Tally>>>>,
    seconds: &[Second],
) {
    let flushed = merged_until(seconds);
    let n = parts.len();
    for (j, part) in parts.iter_mut().enumerate() {
        let Some(r) = &part.report else { continue };
        let index = part.last_second.0 + 1;
        let within = (index as f64 - 1.0..index as f64).contains(&r.elapsed);
        let others = pending
            .get(&index)
            .is_some_and(|got| (got.iter().enumerate()).any(|(k, g)| k != j && g.is_some()));
        let placed = match last_as_second(part, r, flushed) {
            Some(at_close) => Some(at_close),
            None if within && others => remainder(part, r, index, flushed).map(|l| (index, l)),
            None => None,
        };
        if let Some((index, last)) = placed {
            part.streamed.merge(&last);
            pending.entry(index).or_insert_with(|| vec![None; n])[j] = Some(last);
        }
    }
}

/// How far short of the next whole second an agent's run may end and its last
/// interval still be that second: the run's end and the close of its second race, the
/// closer looking every 20 ms, so an interval of 0.98 s to 1.02 s was the second whose
/// close never came.
const WHOLE_ENOUGH: f64 = 0.05;

/// An agent's last interval (its report's total beyond the seconds it streamed) as the
/// second after its newest streamed one, when its run ended at that second's close:
/// merged there with the other agents' parts of it. Otherwise that second held the
/// others' parts alone (their clients only, half a rate), and this one's went into the
/// run's tail. `None` for a run that ended earlier in the second (its interval stays
/// in the tail, as a partial second does on one machine) or later than just after its
/// close (the interval was longer than a second), for an empty interval, and
/// when that second was already merged (`flushed`: the newest merged second).
fn last_as_second(part: &Part, report: &Report, flushed: u64) -> Option<(u64, Box<Tally>)> {
    let index = part.last_second.0 + 1;
    let close = index as f64;
    let whole = (close - WHOLE_ENOUGH..=close + WHOLE_ENOUGH).contains(&report.elapsed);
    if !whole {
        return None;
    }
    Some((index, remainder(part, report, index, flushed)?))
}

/// An agent's remainder (its report's total beyond the seconds it streamed) as its
/// part of the second `index`, with its clients; `None` when it is empty, or when that
/// second was already merged (`flushed`: the newest merged second).
fn remainder(part: &Part, report: &Report, index: u64, flushed: u64) -> Option<Box<Tally>> {
    if index <= flushed {
        return None;
    }
    let mut last = report.total.minus(&part.streamed);
    if last.sent + last.completed + last.errors() == 0 {
        return None;
    }
    // An agent before `last_active` kept its clients of the second before.
    last.active = match report.last_active {
        0 => part.last_second.1,
        n => n,
    };
    Some(Box::new(last))
}

/// Merges the seconds every agent still running has sent (or all, at the `end`); a
/// second some agent is late for is merged once three newer ones exist.
fn flush(
    pending: &mut BTreeMap<u64, Vec<Option<Box<Tally>>>>,
    ended: &[bool],
    seconds: &mut Vec<Second>,
    spans: &mut StepSpans,
    progress: &mut impl FnMut(&Second, &Tally),
    end: bool,
) {
    while let Some((&index, got)) = pending.first_key_value() {
        let newest = *pending.keys().next_back().expect("not empty");
        let complete = got.iter().zip(ended).all(|(g, e)| g.is_some() || *e);
        if !(end || complete || newest >= index + 3) {
            break;
        }
        let (_, got) = pending.pop_first().expect("not empty");
        let mut iv = Tally::default();
        for t in got.iter().flatten() {
            iv.merge(t);
        }
        spans.push(seconds, index as f64, &iv);
        if let Some(s) = seconds.last() {
            progress(s, &iv);
        }
    }
}

/// The run's outcome from the agents' parts: each agent's total (its report, or what
/// it streamed until it was lost), the seconds merged, each agent's own verdict kept.
fn merge(
    plan: &Plan,
    parts: Vec<Part>,
    mut seconds: Vec<Second>,
    mut spans: StepSpans,
    start: Instant,
    interrupted: bool,
) -> Outcome {
    let mut total = Tally::default();
    let mut steps: Vec<Tally> = Vec::new();
    let mut custom = Vec::new();
    let mut tail = Tally::default();
    let mut elapsed: f64 = 0.0;
    let of = parts.len();
    let mut agents = Vec::new();
    let (mut asked, mut ready, mut threads) = (0, 0, 0);
    for (i, p) in parts.into_iter().enumerate() {
        // What it streamed too late to be merged in its second ([`received`]).
        tail.merge(&p.late);
        let (part_total, part_elapsed, cpu, status, reasons) = match &p.report {
            Some(r) => {
                // What it measured after its last streamed second.
                tail.merge(&r.total.minus(&p.streamed));
                if steps.len() < r.steps.len() {
                    steps.resize_with(r.steps.len(), Tally::default);
                }
                for (s, t) in steps.iter_mut().zip(&r.steps) {
                    s.merge(t);
                }
                crate::load::custom::merge_all(&mut custom, &r.custom);
                asked += r.connections_asked;
                ready += r.connections_ready;
                threads += r.threads;
                (
                    r.total.clone(),
                    r.elapsed,
                    r.thread_cpu.clone(),
                    Some(r.status),
                    r.reasons.clone(),
                )
            }
            None => (
                p.streamed.clone(),
                start.elapsed().as_secs_f64(),
                Vec::new(),
                None,
                Vec::new(),
            ),
        };
        total.merge(&part_total);
        elapsed = elapsed.max(part_elapsed);
        agents.push(AgentPart {
            name: p.name,
            address: p.address,
            slice: Slice { index: i, of },
            clock_offset_us: p.offset_ns as f64 / 1e3,
            clock_rtt_us: p.rtt_ns as f64 / 1e3,
            total: part_total,
            elapsed: part_elapsed,
            thread_cpu: cpu,
            status,
            reasons,
            lost: p.lost,
        });
    }
    // The run lasted at least as long as its merged seconds, whatever the reports say
    // (an agent's `elapsed` earlier than a second it streamed put the tail back in
    // time, a point of the series before the one before it); a tail at that second's
    // end comes just after it (too short for the series, in the totals).
    let merged = seconds.last().map_or(0.0, |s| s.t);
    let elapsed = elapsed.max(merged);
    if tail.sent + tail.completed + tail.errors() > 0 {
        // The clients of the tail are not in the reports' totals (a gauge is not
        // summed over time): those of the last second streamed.
        tail.active = seconds.last().map_or(0, |s| s.users);
        let at = if elapsed > merged {
            elapsed
        } else {
            merged + 0.001
        };
        spans.push(&mut seconds, at, &tail);
    }
    spans.end(&mut seconds);
    Outcome {
        total,
        steps,
        custom,
        seconds,
        elapsed,
        scheduled: crate::load::driver::scheduled(plan),
        thread_cpu: Vec::new(),
        thread_queue: Vec::new(),
        connections_asked: asked,
        connections_ready: ready,
        threads,
        statuses: plan.client.statuses(),
        subscribers: plan.client.companions(),
        interrupted,
        stolen_seconds: 0.0,
        idle_seconds: 0.0,
        agents,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An agent's second is believed only as a second of this run, of the plan's steps.
    #[test]
    fn an_agent_s_second_out_of_the_run_or_its_steps_is_refused() {
        let b = Bounds {
            start: Instant::now() - Duration::from_secs(10),
            steps: 2,
        };
        let t = Tally::default();
        assert_eq!(b.refused(3, &t), None);
        assert_eq!(b.refused(15, &t), None, "a clock a little ahead");
        assert!(b.refused(0, &t).is_some());
        assert!(b
            .refused(1_000_000_000_000, &t)
            .unwrap()
            .contains("not a second of this run"));
        let mut many = Tally::default();
        many.step_seconds.resize_with(3, Default::default);
        assert!(b.refused(3, &many).unwrap().contains("the scenario has 2"));
    }

    fn part(last_second: (u64, u64), streamed: Tally) -> Part {
        Part {
            name: "a".into(),
            address: "127.0.0.1:1".into(),
            offset_ns: 0,
            rtt_ns: 0,
            streamed,
            last_second,
            late: Tally::default(),
            report: None,
            lost: None,
        }
    }

    fn report(total: Tally, elapsed: f64, last_active: u64) -> Report {
        Report {
            total,
            steps: Vec::new(),
            custom: Vec::new(),
            elapsed,
            thread_cpu: Vec::new(),
            connections_asked: 1,
            connections_ready: 1,
            threads: 1,
            status: crate::load::verdict::Validity::Valid,
            reasons: Vec::new(),
            last_active,
        }
    }

    fn tally(sent: u64, active: u64) -> Tally {
        Tally {
            sent,
            completed: sent,
            ok: sent,
            active,
            ..Tally::default()
        }
    }

    /// Two agents of 100 clients each: one closed its 10th second and streamed it, the
    /// other's run ended as that second closed, so its 10th second came in its report.
    /// Merged, the 10th second holds both (200 clients, both agents' responses).
    #[test]
    fn an_agent_s_last_second_in_its_report_is_merged_with_the_others_of_that_second() {
        let mut pending: BTreeMap<u64, Vec<Option<Box<Tally>>>> = BTreeMap::new();
        let mut seconds = Vec::new();
        let mut shown = Vec::new();
        let mut progress = |s: &Second, _: &Tally| shown.push(s.users);
        // Seconds 1..=9 from both, then agent 0's 10th.
        let mut streamed = Tally::default();
        for index in 1..=9 {
            let t = tally(50, 100);
            streamed.merge(&t);
            pending.insert(index, vec![Some(Box::new(t.clone())), Some(Box::new(t))]);
        }
        pending.entry(10).or_insert_with(|| vec![None, None])[0] = Some(Box::new(tally(50, 100)));
        let mut spans = StepSpans::new(None);
        flush(
            &mut pending,
            &[false, false],
            &mut seconds,
            &mut spans,
            &mut progress,
            false,
        );
        assert_eq!(seconds.len(), 9, "the 10th waits for agent 1");
        // Agent 1 ends 10.01 s in: its total is ten seconds' worth, 60 of them in the last.
        let mut total = streamed.clone();
        total.merge(&tally(60, 0));
        let p = part((9, 100), streamed.clone());
        let r = report(total.clone(), 10.01, 100);
        let (index, last) = last_as_second(&p, &r, 9).expect("its 10th second");
        assert_eq!((index, last.sent, last.active), (10, 60, 100));
        pending.entry(index).or_insert_with(|| vec![None, None])[1] = Some(last);
        flush(
            &mut pending,
            &[false, true],
            &mut seconds,
            &mut spans,
            &mut progress,
            false,
        );
        let tenth = seconds.last().unwrap();
        assert_eq!((tenth.t, tenth.users, tenth.sent), (10.0, 200, 110));
        assert_eq!(shown.last(), Some(&200));
        // A run that ended early in its second keeps that interval in the tail, as a
        // partial second; an agent before `last_active` gives the clients it had.
        assert!(last_as_second(&p, &report(total.clone(), 9.4, 100), 9).is_none());
        assert_eq!(
            last_as_second(&p, &report(total.clone(), 9.97, 0), 9)
                .unwrap()
                .1
                .active,
            100
        );
        // Nothing beyond what it streamed, or a second already merged: nothing to place.
        assert!(last_as_second(&p, &report(streamed, 10.01, 100), 9).is_none());
        assert!(last_as_second(&p, &r, 10).is_none());
    }

    /// An agent three seconds behind another: its 4th and 5th seconds come after they
    /// were merged without them (three newer ones existed), then its 3rd again, and the
    /// other's 7th again while still pending. No second is merged twice or out of
    /// order (a second 4 after 5 read as 10 responses in -1 s), and every response
    /// streamed is in a merged second, still pending, or in the run's tail.
    #[test]
    fn a_second_that_comes_after_its_merge_or_twice_is_not_merged_again() {
        let mut pending: BTreeMap<u64, Vec<Option<Box<Tally>>>> = BTreeMap::new();
        let mut seconds: Vec<Second> = Vec::new();
        let mut spans = StepSpans::new(None);
        let mut parts = [(), ()].map(|_| part((0, 0), Tally::default()));
        let mut progress = |_: &Second, _: &Tally| {};
        let sends = [(1, 1), (1, 2), (1, 3)]
            .into_iter()
            .chain((1..=8).map(|index| (0, index)))
            .chain([(1, 4), (1, 5), (1, 3), (0, 7)]);
        for (i, index) in sends {
            let t = Box::new(tally(10, 1));
            received(&mut parts[i], &mut pending, &seconds, (i, 2), index, t);
            let ended = [false, false];
            flush(
                &mut pending,
                &ended,
                &mut seconds,
                &mut spans,
                &mut progress,
                false,
            );
        }
        assert!(
            seconds.windows(2).all(|w| w[0].t < w[1].t),
            "{:?}",
            seconds.iter().map(|s| s.t).collect::<Vec<_>>()
        );
        let merged: u64 = seconds.iter().map(|s| s.sent).sum();
        let waiting: u64 = (pending.values().flatten().flatten()).map(|t| t.sent).sum();
        let late: u64 = parts.iter().map(|p| p.late.sent).sum();
        let streamed: u64 = parts.iter().map(|p| p.streamed.sent).sum();
        assert_eq!((streamed, merged + waiting + late), (150, 150));
        assert_eq!(
            late, 40,
            "agent 1's 4th, 5th and 3rd again, agent 0's 7th again"
        );
    }

    /// An agent's remainder is its next second only when its run ended within
    /// [`WHOLE_ENOUGH`] of that second's close: one that ran on 0.6 s past it (its closer
    /// stalled) measured 1.6 s, not a second, and an elapsed beyond any run (an agent's
    /// odd report) says nothing of that second.
    #[test]
    fn a_remainder_that_ran_past_its_second_is_not_that_second() {
        let streamed = tally(450, 100);
        let mut total = streamed.clone();
        total.merge(&tally(60, 0));
        let p = part((9, 100), streamed);
        assert!(last_as_second(&p, &report(total.clone(), 10.04, 100), 9).is_some());
        for elapsed in [10.6, 11.0, 3600.0, 1e300, f64::MAX] {
            let r = report(total.clone(), elapsed, 100);
            assert!(last_as_second(&p, &r, 9).is_none(), "{elapsed}");
        }
    }

    /// A plan of 10 s on 127.0.0.1 (the outcome's merge reads its statuses).
    fn plan() -> Plan {
        use crate::load::{BodySpec, ClientOptions, Offer, Work};
        let spec = LoadSpec {
            work: Work::Http {
                url: "http://127.0.0.1:1/".into(),
                method: "GET".into(),
                headers: Vec::new(),
                body: BodySpec::Empty,
            },
            offer: Offer::Open {
                rate: crate::load::schedule::Rate::Constant(100.0),
                poisson: None,
                pool_cap: None,
            },
            threads: Some(1),
            duration: Some(Duration::from_secs(10)),
            count: None,
            timeout: Duration::from_secs(1),
            client: ClientOptions::default(),
            vars: Vec::new(),
            seed: None,
            percentiles: Default::default(),
        };
        crate::load::plan(&spec).unwrap().plan
    }

    /// Two agents of a count-bound run: one's ended 9.97 s in (its remainder merged as
    /// the 10th second), the other's 9.6 s in, its report first or last. Its remainder
    /// lies in that 10th second: in the run's tail it ended before the second before it
    /// (a second back in time, 9.97 after 10), left out of the series (its 30 responses
    /// were in no point).
    #[test]
    fn a_tail_that_ends_within_an_agent_s_merged_last_second_is_in_the_series() {
        for order in [[0, 1], [1, 0]] {
            let mut pending: BTreeMap<u64, Vec<Option<Box<Tally>>>> = BTreeMap::new();
            let mut seconds: Vec<Second> = Vec::new();
            let mut spans = StepSpans::new(None);
            let mut parts = [(), ()].map(|_| part((0, 0), Tally::default()));
            let mut progress = |_: &Second, _: &Tally| {};
            let mut ended = [false; 2];
            let mut flush_now = |pending: &mut _, seconds: &mut _, ended: &[bool], end| {
                flush(pending, ended, seconds, &mut spans, &mut progress, end)
            };
            for index in 1..=9 {
                for (i, p) in parts.iter_mut().enumerate() {
                    let t = Box::new(tally(50, 100));
                    received(p, &mut pending, &seconds, (i, 2), index, t);
                }
                flush_now(&mut pending, &mut seconds, &ended, false);
            }
            for i in order {
                let (more, elapsed) = [(60, 9.97), (30, 9.6)][i];
                let mut total = parts[i].streamed.clone();
                total.merge(&tally(more, 0));
                let r = Box::new(report(total, elapsed, 100));
                parts[i].report = Some(*r);
                ended[i] = true;
                place_remainders(&mut parts, &mut pending, &seconds);
                flush_now(&mut pending, &mut seconds, &ended, false);
            }
            flush_now(&mut pending, &mut seconds, &ended, true);
            let outcome = merge(&plan(), parts.into(), seconds, spans, Instant::now(), false);
            assert_eq!(outcome.total.completed, 990);
            let ts: Vec<f64> = outcome.seconds.iter().map(|s| s.t).collect();
            assert!(ts.windows(2).all(|w| w[0] < w[1]), "{order:?}: {ts:?}");
            let tenth = outcome.seconds.last().unwrap();
            assert_eq!((tenth.t, tenth.completed, tenth.users), (10.0, 90, 200));
            // The series' responses, each point's rate over its interval, add up to
            // the total.
            let series = outcome.per_second();
            let points = &(series.iter())
                .find(|(n, _)| n == crate::load::series::COMPLETED)
                .unwrap()
                .1;
            let mut before = 0.0;
            let mut counted = 0.0;
            for (t, rate) in points {
                counted += rate * (t - before);
                before = *t;
            }
            assert!((counted - 990.0).abs() < 1e-6, "{counted} in {points:?}");
        }
    }

    /// Reports whose run ended before seconds they streamed (3 s in, or not a number,
    /// after ten seconds): the run lasted its ten seconds, and the tail comes after them.
    #[test]
    fn a_report_that_ends_before_its_streamed_seconds_leaves_them_in_order() {
        for elapsed in [3.0, 10.0, f64::NAN] {
            let mut pending: BTreeMap<u64, Vec<Option<Box<Tally>>>> = BTreeMap::new();
            let mut seconds: Vec<Second> = Vec::new();
            let mut spans = StepSpans::new(None);
            let mut parts = [part((0, 0), Tally::default())];
            for index in 1..=10 {
                received(
                    &mut parts[0],
                    &mut pending,
                    &seconds,
                    (0, 1),
                    index,
                    Box::new(tally(50, 100)),
                );
            }
            let mut total = parts[0].streamed.clone();
            total.merge(&tally(7, 0));
            parts[0].report = Some(report(total, elapsed, 100));
            place_remainders(&mut parts, &mut pending, &seconds);
            let mut progress = |_: &Second, _: &Tally| {};
            flush(
                &mut pending,
                &[true],
                &mut seconds,
                &mut spans,
                &mut progress,
                true,
            );
            let outcome = merge(&plan(), parts.into(), seconds, spans, Instant::now(), false);
            let ts: Vec<f64> = outcome.seconds.iter().map(|s| s.t).collect();
            assert!(ts.windows(2).all(|w| w[0] < w[1]), "{elapsed}: {ts:?}");
            assert!(outcome.elapsed >= 10.0, "{elapsed}: {}", outcome.elapsed);
            assert_eq!(outcome.total.completed, 507);
        }
    }

    #[test]
    fn a_scenario_travels_to_the_agents_with_its_csv_and_its_script() {
        let dir = tempfile::tempdir().unwrap();
        let sc = dir.path().join("flow.toml");
        std::fs::write(
            &sc,
            "clients = 1\ncsv = \"users.csv\"\nscript = \"sign.lua\"\n[[step]]\nonce = true\npath = \"/\"\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("users.csv"), "u\na\n").unwrap();
        std::fs::write(dir.path().join("sign.lua"), "function request(r) end\n").unwrap();
        let files = scenario_files(&sc).unwrap();
        let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, [SCENARIO_FILE, "users.csv", "sign.lua"]);
        assert_eq!(files[2].1, "function request(r) end\n");
        std::fs::write(&sc, "clients = 1\nscript = \"../sign.lua\"\n").unwrap();
        let e = scenario_files(&sc).unwrap_err().to_string();
        assert!(
            e.contains("script = \"../sign.lua\" is outside the scenario's directory"),
            "{e}"
        );
    }
}
