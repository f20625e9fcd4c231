//! The suite's sections besides its tests: `[target]` (what to start or attach to, how
//! to tell it is ready, how to stop it), `[logs]`, `[[watch]]` and `[compare]`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use toml::Spanned;

use super::super::raw::{RawCompare, RawLogs, RawTarget, RawWatch};
use super::super::{Attach, CompareSpec, LogSpec, Ready, TargetSpec, WatchBy, WatchSpec};
use super::doc::Doc;
use super::kinds::share;
use super::urls::{url_shape, HTTP_SCHEMES};
use super::Result;
use crate::units::parse_duration;

/// `[target]`: what to start (or attach to), how to tell it is ready, how to stop it.
pub(super) fn target(doc: &Doc, t: &RawTarget) -> Result<TargetSpec> {
    let ways = [
        t.command.is_some(),
        t.attach_pid_file.is_some(),
        t.attach_port.is_some(),
        t.url.is_some(),
    ];
    if ways.iter().filter(|&&w| w).count() != 1 {
        return Err(doc.at(
            0,
            "[target] needs exactly one of command = [...] (start it), attach_pid_file = \"...\" or attach_port = N (watch a running one), or url = \"...\" (a service only reached, not watched)",
        ));
    }
    if let Some(u) = &t.url {
        url_shape(u.get_ref(), HTTP_SCHEMES)
            .map_err(|e| doc.at(u.span().start, format!("target.url '{}': {e}", u.get_ref())))?;
        if t.host.is_some() || t.build.is_some() || t.ready.is_some() {
            return Err(doc.at(
                u.span().start,
                "[target] url = \"...\" is a service strainline only reaches: no build, ready or host with it (its readiness is the URL answering; to watch it, attach on its host: attach_port with host = \"AGENT\")",
            ));
        }
    }
    if let (Some(h), true) = (&t.host, t.command.is_some()) {
        return Err(doc.at(
            h.span().start,
            "[target] host = \"...\" watches a process on that agent's machine, which strainline does not start: use attach_pid_file = \"...\" or attach_port = N there (and run with --agents naming that agent)",
        ));
    }
    if let Some(c) = t.command.as_ref().filter(|c| c.get_ref().is_empty()) {
        return Err(doc.at(
            c.span().start,
            "target.command is empty: give the argv, e.g. [\"./server\", \"--port\", \"{{port}}\"]",
        ));
    }
    let ready = match &t.ready {
        None => Ready::Delay(Duration::from_millis(500)),
        Some(r) => {
            let v = r.get_ref();
            if v.starts_with("http://") || v.starts_with("https://") {
                url_shape(v, HTTP_SCHEMES)
                    .map_err(|e| doc.at(r.span().start, format!("ready '{v}': {e}")))?;
                Ready::Http(v.clone())
            } else if let Some(a) = v.strip_prefix("tcp://") {
                // The same host[:port] rules as a URL's.
                url_shape(&format!("http://{a}/"), HTTP_SCHEMES)
                    .and_then(|()| {
                        if a.ends_with(']') || !a.contains(':') {
                            Err(crate::Error::usage(
                                "it names no port (write e.g. tcp://127.0.0.1:{{port}})",
                            ))
                        } else {
                            Ok(())
                        }
                    })
                    .map_err(|e| doc.at(r.span().start, format!("ready '{v}': {e}")))?;
                Ready::Tcp(a.to_string())
            } else if let Some(re) = v.strip_prefix("log:") {
                regex_lite::Regex::new(re)
                    .map_err(|e| doc.at(r.span().start, format!("ready: bad regex: {e}")))?;
                Ready::Log(re.to_string())
            } else if let Some(d) = v.strip_prefix("delay:") {
                Ready::Delay(
                    parse_duration(d).map_err(|e| doc.at(r.span().start, format!("ready: {e}")))?,
                )
            } else {
                return Err(doc.at(
                    r.span().start,
                    format!("ready: '{v}' (expected http://…, tcp://HOST:PORT, log:REGEX or delay:DURATION)"),
                ));
            }
        }
    };
    let stop_signal = match &t.stop_signal {
        Some(s) => signal(s.get_ref()).ok_or_else(|| {
            doc.at(
                s.span().start,
                format!(
                    "stop_signal: '{}' (expected TERM, INT, HUP, QUIT, KILL, USR1 or USR2)",
                    s.get_ref()
                ),
            )
        })?,
        None => libc::SIGTERM,
    };
    Ok(TargetSpec {
        build: t.build.clone(),
        command: t
            .command
            .as_ref()
            .map(|c| c.get_ref().clone())
            .unwrap_or_default(),
        attach: match (&t.attach_pid_file, t.attach_port) {
            (Some(f), _) => Some(Attach::PidFile(PathBuf::from(f))),
            (None, Some(port)) => Some(Attach::Port(port)),
            (None, None) => None,
        },
        unwatched: t.url.as_ref().map(|u| u.get_ref().clone()),
        host: t.host.as_ref().map(|h| h.get_ref().clone()),
        shell: t.shell,
        env: t.env.clone(),
        cwd: t.cwd.as_ref().map(PathBuf::from),
        ready,
        ready_timeout: doc.opt_dur(
            &t.ready_timeout,
            "ready_timeout",
            Duration::from_secs(10),
            false,
        )?,
        stop_signal,
        stop_grace: doc.opt_dur(&t.stop_grace, "stop_grace", Duration::from_secs(5), false)?,
    })
}

/// `[logs]`: regexes counted in the target's output.
pub(super) fn logs(doc: &Doc, l: &RawLogs) -> Result<LogSpec> {
    let mut logs = LogSpec::default();
    for e in &l.errors {
        logs.errors.push(doc.regex(e, "logs.errors")?);
    }
    for w in &l.warnings {
        logs.warnings.push(doc.regex(w, "logs.warnings")?);
    }
    for (name, r) in &l.classes {
        logs.classes
            .push((name.clone(), doc.regex(r, "logs.classes")?));
    }
    Ok(logs)
}

/// A `[[watch]]`: a process beside the target, found by pid file, name or command line.
pub(super) fn watch(doc: &Doc, w: &Spanned<RawWatch>) -> Result<WatchSpec> {
    let pos = w.span().start;
    let w = w.get_ref();
    let by = match (&w.pid_file, &w.process, &w.cmdline) {
        (Some(p), None, None) => WatchBy::PidFile(PathBuf::from(p)),
        (None, Some(n), None) => WatchBy::Name(n.clone()),
        (None, None, Some(c)) => WatchBy::Cmdline(doc.regex(c, "watch.cmdline")?),
        _ => {
            return Err(doc.at(
                pos,
                format!(
                    "watch '{}': give exactly one of pid_file, process or cmdline",
                    w.name
                ),
            ))
        }
    };
    if !w
        .name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        return Err(doc.at(
            pos,
            format!(
                "watch '{}': a name of letters, digits and _ (it names metrics)",
                w.name
            ),
        ));
    }
    Ok(WatchSpec {
        name: w.name.clone(),
        by,
    })
}

pub(super) fn signal(s: &str) -> Option<i32> {
    Some(match s.trim_start_matches("SIG") {
        "TERM" => libc::SIGTERM,
        "INT" => libc::SIGINT,
        "HUP" => libc::SIGHUP,
        "QUIT" => libc::SIGQUIT,
        "KILL" => libc::SIGKILL,
        "USR1" => libc::SIGUSR1,
        "USR2" => libc::SIGUSR2,
        _ => return None,
    })
}

/// `[compare]`: the significance level and tolerance bands for `strainline compare`.
pub(super) fn compare(doc: &Doc, c: &RawCompare) -> Result<CompareSpec> {
    let mut compare = CompareSpec::default();
    if let Some(a) = &c.alpha {
        if !(*a.get_ref() > 0.0 && *a.get_ref() < 1.0) {
            return Err(doc.at(a.span().start, "alpha: must be between 0 and 1 (e.g. 0.05)"));
        }
        compare.alpha = Some(*a.get_ref());
    }
    compare.band = c
        .band
        .as_ref()
        .map(|b| share(doc, b, "band", 10.0))
        .transpose()?;
    let mut bands = BTreeMap::new();
    for (metric, v) in &c.bands {
        bands.insert(
            metric.clone(),
            share(doc, v, &format!("bands.{metric}"), 10.0)?,
        );
    }
    compare.bands = bands;
    Ok(compare)
}
