//! A worker thread of a run: its single-threaded runtime and context, its share of the
//! model's load (scenario clients, sessions, closed connections or open sends), the cut
//! at the end's grace, and what its thread spent from the clock's start.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::super::local::{join, single_threaded};
use super::super::recorder::Recorder;
use super::super::schedule::Share;
use super::closed::closed_connection;
use super::open::open;
use super::{
    clients, hard_stop, queue_seconds, sleep_or_stop, thread_cpu_seconds, watchdog, Ctx, Model,
    Plan, END_GRACE,
};
use crate::os::unit::Unit;

/// What every worker thread of a run is given beside the plan (each its own copy).
#[derive(Clone)]
pub(super) struct Shared {
    pub threads: usize,
    pub cancel: Arc<AtomicBool>,
    pub tickets: Option<Arc<AtomicI64>>,
    pub ready: Arc<AtomicI64>,
    /// When the last worker's units were done (µs after the start), before any hold.
    pub units_done: Arc<AtomicU64>,
    pub unit: Option<Arc<Unit>>,
    pub start: Instant,
    pub deadline: Option<Instant>,
}

/// Worker `w`'s thread: runs its share of the plan to its end (or its cut) and returns
/// the thread's CPU seconds and run-queue wait from the clock's start.
pub(super) fn worker(
    plan: Plan,
    s: Shared,
    rec: Arc<Mutex<Recorder>>,
    w: usize,
) -> (f64, Option<f64>) {
    let queued_before = queue_seconds().unwrap_or(0.0);
    let (rt, local) = single_threaded();
    // A script's call still running at the cut, or at a Ctrl-C, ends then.
    crate::load::script::serve(
        s.cancel.clone(),
        s.deadline.map(|d| d + END_GRACE.min(plan.timeout)),
    );
    let slots = Rc::new(RefCell::new(Vec::new()));
    let ctx = Rc::new(Ctx {
        client: plan.client.clone(),
        slots: slots.clone(),
        rec,
        unit: s.unit,
        timeout: plan.timeout,
        cancel: s.cancel,
        start: s.start,
        deadline: s.deadline,
        tickets: s.tickets,
        ready: s.ready,
        pool: RefCell::new(None),
    });
    // The thread's CPU and run-queue wait at the clock's start: what it spent opening
    // the closed model's connections before is not the run's (a 5-request run read
    // 153% busy from its 50 connections).
    let at_start = Rc::new(Cell::new(None));
    let mark = at_start.clone();
    let start = s.start;
    local.spawn_local(async move {
        tokio::time::sleep_until(start.into()).await;
        mark.set(Some((thread_cpu_seconds(), queue_seconds())));
    });
    let (threads, units_done) = (s.threads, s.units_done);
    local.block_on(&rt, async move {
        let dog = tokio::task::spawn_local(watchdog(slots.clone()));
        let stopper = ctx.clone();
        tokio::select! {
            _ = work(ctx, &plan, w, threads) => {}
            _ = hard_stop(stopper.clone()) => {
                // Cut: what is still unanswered is counted, not waited for.
                stopper.cut();
            }
        }
        let done = start.elapsed().as_micros() as u64;
        units_done.fetch_max(done, Ordering::Relaxed);
        // Clients connected to stay (MQTT `conn` mode) are held to the end of the
        // run's duration, however soon they were all made.
        if let (true, Some(end)) = (stopper.client.unit_connects(), stopper.deadline) {
            tokio::select! {
                _ = sleep_or_stop(&stopper, end) => {}
                _ = hard_stop(stopper.clone()) => {}
            }
        }
        stopper.client.release().await;
        dog.abort();
    });
    let (cpu_before, queue_before) = at_start.get().unwrap_or((0.0, None));
    let queue_before = queue_before.unwrap_or(queued_before);
    (
        thread_cpu_seconds() - cpu_before,
        queue_seconds().map(|q| q - queue_before),
    )
}

/// Worker `w` of `threads`'s share of the plan's load, by its model.
async fn work(ctx: Rc<Ctx>, plan: &Plan, w: usize, threads: usize) {
    let slice = plan.slice;
    // Thread w of this slice is worker index + of·w of of·threads in the one global
    // schedule.
    let (worker, workers) = (slice.index + slice.of * w, slice.of * threads);
    // The pool's cap of the open model and of sessions: this thread's part of the
    // slice's connections.
    let cap = || {
        let slice_connections = slice.share(plan.max_connections as u64) as usize;
        per_thread(slice_connections.max(threads), threads, w).max(1)
    };
    match plan.model.clone() {
        Model::Scenario(sc) => {
            // Client c belongs to slice c mod of, thread (c div of) mod threads.
            let tasks: Vec<_> = (worker as u64..sc.clients)
                .step_by(workers)
                .map(|c| {
                    tokio::task::spawn_local(clients::scenario_client(ctx.clone(), sc.clone(), c))
                })
                .collect();
            join(tasks).await;
        }
        Model::Sessions { sc, rate, arrivals } => {
            // As the open model's: one global schedule, thread w of this slice takes
            // its positions.
            let share = Share::new(rate, arrivals, worker, workers, None, plan.duration);
            clients::sessions(ctx, sc, share, cap()).await;
        }
        Model::Closed { connections, think } => {
            let n = per_thread(slice.share(connections as u64) as usize, threads, w);
            let tasks: Vec<_> = (0..n)
                .map(|i| {
                    let worker = (w * 1_000_000 + i) as u64;
                    tokio::task::spawn_local(closed_connection(
                        ctx.clone(),
                        think,
                        worker,
                        plan.streams,
                    ))
                })
                .collect();
            join(tasks).await;
        }
        Model::Open {
            rate,
            arrivals,
            requests,
        } => {
            let peak = rate.peak();
            let share = Share::new(rate, arrivals, worker, workers, plan.count, plan.duration);
            let per_worker = peak / workers as f64;
            open(ctx, share, cap(), plan.streams, per_worker, requests).await;
        }
    }
}

/// Worker `w`'s part of `total` split over `threads`: the first `total % threads`
/// workers take one more.
fn per_thread(total: usize, threads: usize, w: usize) -> usize {
    total / threads + usize::from(w < total % threads)
}
