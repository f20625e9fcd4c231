//! Watching a target on another machine: an agent there samples the process tree (the
//! same sampler as here) and streams its samples; the coordinator keeps them in a
//! [`Watcher`] like a local one's, so soaks and ramps of a remote service get the same
//! leak, capacity and limiting-factor analysis. Sample times count from when the agent
//! began watching (within a round trip of the watcher's start here).

use crate::error::Category;
use std::sync::{mpsc as std_mpsc, Arc, Mutex};
use std::time::Duration;

use super::coordinator::{Fleet, LEASE};
use super::link::{self, Link};
use super::wire::{self, FromAgent, ToAgent};
use crate::measure::MonitorSummary;
use crate::monitor::watch::{Shared, Watcher};
use crate::sut::spec::Attach;

/// The agent of `fleet` named `host` (its name, or its address as given).
async fn find(fleet: &Fleet, host: &str) -> crate::error::Result<Link> {
    let mut seen = Vec::new();
    for a in &fleet.addresses {
        // Agents that dial in (listen://) serve one run each: not a watch.
        if matches!(a, link::Address::Listen { .. }) {
            continue;
        }
        match link::connect(a, fleet.token.as_ref()).await {
            Ok(l) if l.name == host || a.label() == host => return Ok(l),
            Ok(l) => seen.push(l.name.clone()),
            Err(e) => seen.push(format!("{} ({e})", a.label())),
        }
    }
    Err(crate::Error::usage(format!(
        "no agent named '{host}' among the tls:// and ssh:// agents of --agents (found: {})",
        if seen.is_empty() {
            "none".to_string()
        } else {
            seen.join(", ")
        }
    )))
}

/// Starts watching `attach` on agent `host`: the pid there, its command line and the
/// watcher its samples go into.
pub fn remote(
    fleet: &Fleet,
    host: &str,
    attach: &Attach,
    interval: Duration,
) -> crate::error::Result<(u32, String, Watcher)> {
    let shared = Arc::new(Mutex::new(Shared::default()));
    let (started_tx, started_rx) = std_mpsc::channel();
    let (end_tx, end_rx) = tokio::sync::oneshot::channel::<()>();
    let (summary_tx, summary_rx) = std_mpsc::channel();
    let (fleet, host_name, attach) = (fleet.clone(), host.to_string(), attach.clone());
    let sh = shared.clone();
    std::thread::Builder::new()
        .name("remote-watch".into())
        .spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    let _ = started_tx.send(Err(e.to_string()));
                    return;
                }
            };
            rt.block_on(async move {
                let mut l = match find(&fleet, &host_name).await {
                    Ok(l) => l,
                    Err(e) => {
                        let _ = started_tx.send(Err(e.to_string()));
                        return;
                    }
                };
                let msg = ToAgent::Watch {
                    attach,
                    interval_ms: interval.as_millis() as u64,
                };
                if let Err(e) = wire::send(&mut l.writer, &msg).await {
                    let _ = started_tx.send(Err(e.to_string()));
                    return;
                }
                match wire::recv::<_, FromAgent>(&mut l.reader).await {
                    Ok(Some(FromAgent::Watching { pid, command })) => {
                        let _ = started_tx.send(Ok((pid, command)));
                    }
                    Ok(Some(FromAgent::Failed { why })) => {
                        let _ = started_tx.send(Err(why));
                        return;
                    }
                    other => {
                        let _ = started_tx.send(Err(format!("unexpected answer: {other:?}")));
                        return;
                    }
                }
                let summary = follow(&mut l, &sh, end_rx).await;
                let _ = summary_tx.send(summary);
            });
        })
        .usage()?;
    let (pid, command) = started_rx
        .recv_timeout(link::CONNECT_TIMEOUT * 2)
        .map_err(|_| crate::Error::usage(format!("agent {host} did not start watching in time")))?
        .usage()?;
    let end: crate::monitor::watch::RemoteEnd = Box::new(move || {
        let _ = end_tx.send(());
        summary_rx
            .recv_timeout(Duration::from_secs(15))
            .ok()
            .flatten()
    });
    Ok((pid, command, Watcher::remote(shared, interval, end)))
}

/// Keeps the samples coming into `shared` and the agent's lease renewed until `end`;
/// then asks for the summary. `None` if the agent was lost.
async fn follow(
    l: &mut Link,
    shared: &Mutex<Shared>,
    mut end: tokio::sync::oneshot::Receiver<()>,
) -> Option<MonitorSummary> {
    let mut renew = tokio::time::interval(Duration::from_secs(1));
    let mut ending = false;
    loop {
        tokio::select! {
            m = tokio::time::timeout(LEASE, wire::recv::<_, FromAgent>(&mut l.reader)) => {
                match m {
                    Ok(Ok(Some(FromAgent::Samples { samples, exit }))) => {
                        let mut sh = shared.lock().unwrap();
                        for s in samples {
                            sh.keep(s);
                        }
                        if exit.is_some() {
                            sh.root_exit = exit;
                        }
                    }
                    Ok(Ok(Some(FromAgent::Watched(summary)))) => return Some(*summary),
                    Ok(Ok(Some(_))) => {}
                    // Lost: silent beyond the lease, cut off, or gone.
                    _ => {
                        tracing::warn!("strainline: the agent watching the target was lost: its figures stop here");
                        return None;
                    }
                }
            }
            _ = renew.tick() => {
                if wire::send(&mut l.writer, &ToAgent::Renew).await.is_err() {
                    return None;
                }
            }
            _ = &mut end, if !ending => {
                ending = true;
                if wire::send(&mut l.writer, &ToAgent::Unwatch).await.is_err() {
                    return None;
                }
            }
        }
    }
}
