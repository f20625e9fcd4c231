//! The `crash` kind: kill the work with SIGKILL at a random or chosen point, then run
//! a verify command; K iterations — the object store's crash harness, generalised.

use std::time::Instant;

use super::details::{CrashDetails, CrashIteration, Of};
use super::lines::{self, Line};
use super::process::{argv, pause_until, spawn, wait};
use super::{CaseCtx, CaseResult, Status};
use crate::os::unit::{Ended, Unit};
use crate::store::Metric;
use crate::suite;

pub(super) fn run(ctx: &CaseCtx, t: &suite::Crash) -> crate::error::Result<CaseResult> {
    let mut r = CaseResult::new();
    let (lo, hi) = t.kill_after;
    let mut rng = crate::rng::Rng::new(0x2545_F491_4F6C_DD1D ^ ctx.case.repetition as u64);
    let (mut survived, mut failed) = (0u32, 0u32);
    let mut rows = Vec::new();
    for i in 0..t.iterations {
        let dir = ctx.dir.join(format!("iteration-{i}"));
        std::fs::create_dir_all(&dir)?;
        let mut vars = ctx.vars.clone();
        vars.insert("dir".into(), dir.display().to_string());
        vars.insert("iteration".into(), i.to_string());
        let log = dir.join("work.log");
        let unit = Unit::new(true);
        let pid = spawn(&unit, &argv(&t.command, &vars), &log)?;
        let delay = lo + (hi.saturating_sub(lo)).mul_f64(rng.unit());
        let started = Instant::now();
        let point = match &t.kill_at_log {
            Some(re) => {
                let seen = || {
                    std::fs::read_to_string(&log)
                        .map(|s| re.is_match(&s))
                        .unwrap_or(false)
                };
                if !pause_until(started + hi, seen) {
                    unit.end();
                    return Err(crate::Error::Interrupted);
                }
                format!(
                    "at the log marker /{}/ ({:.0} ms)",
                    re.as_str(),
                    started.elapsed().as_secs_f64() * 1000.0
                )
            }
            None => {
                if !pause_until(started + delay, || false) {
                    unit.end();
                    return Err(crate::Error::Interrupted);
                }
                format!("after {:.0} ms", delay.as_secs_f64() * 1000.0)
            }
        };
        // The whole tree goes, and is gone, before verify looks at what it left.
        unit.kill();
        let (exit, _) = wait(&unit, pid)?;
        unit.end();
        drop(unit);
        let verify_log = dir.join("verify.log");
        let verify = Unit::new(true);
        let status = match verify.run(&mut verify.logged(&argv(&t.verify, &vars), &verify_log)?)? {
            Ended::Exited(status) => status,
            Ended::Interrupted => return Err(crate::Error::Interrupted),
        };
        let out = std::fs::read(&verify_log).unwrap_or_default();
        let said = String::from_utf8_lossy(&out).trim().to_string();
        let ok = status.success();
        if ok {
            survived += 1;
        } else {
            failed += 1;
            if failed == 1 {
                r.reasons.push(format!(
                    "iteration {i}: killed {point}; verify said: {said}"
                ));
            }
        }
        r.table.push(Line::Crash(lines::Crash::Iteration {
            iteration: i,
            kill: point.clone(),
            exit: exit.describe(),
            survived: ok,
            verify_said: said.clone(),
        }));
        rows.push(CrashIteration {
            iteration: i,
            kill: point,
            survived: ok,
            verify: said,
        });
    }
    r.metrics
        .push(Metric::of("failed_iterations", failed as f64));
    r.metrics
        .push(Metric::of("survived_iterations", survived as f64));
    r.table.push(Line::Crash(lines::Crash::Survived {
        survived,
        iterations: t.iterations,
    }));
    if failed > 0 {
        r.status = Status::Failed;
        r.reasons.insert(
            0,
            format!(
                "{failed} of {} iterations failed verification",
                t.iterations
            ),
        );
    }
    r.details.of = Some(Of::Crash(CrashDetails { iterations: rows }));
    Ok(r)
}
