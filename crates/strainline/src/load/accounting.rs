//! One accounting of a run's requests, read by the terminal summary, the JSON and the
//! gates alike: every request that was due was sent (and then answered ok, or failed),
//! or is unanswered — cut in flight at the run's end, or never sent. A redirect hop a
//! step followed is counted apart, never as a send of its own. Every share printed is
//! of one named denominator, and the parts beside it add up to it.

use serde::Serialize;

/// The counts of a run (or of an agent's part of one).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Accounting {
    /// Requests sent and settled: answered (`completed`) or failed without an answer.
    pub sent: u64,
    /// Replies received, whatever their status.
    pub completed: u64,
    /// Of `sent`, those that succeeded.
    pub ok: u64,
    /// Of `sent`, those that failed: a failing reply, a transport error, or a request
    /// the flow could not send (its script, a value the wire cannot carry).
    pub failed: u64,
    /// Due and unanswered when the run was cut: in flight, and never sent.
    pub unfinished: u64,
    pub unsent: u64,
    /// Redirects steps followed (`follow = true`): hops of their steps, not sends.
    pub hops: u64,
}

impl Accounting {
    /// A tally's counts (a run's, a second's, a step's).
    pub fn of(t: &super::recorder::Tally) -> Accounting {
        Accounting {
            sent: t.sent,
            completed: t.completed,
            ok: t.ok,
            failed: t.errors(),
            unfinished: t.unfinished,
            unsent: t.unsent,
            hops: t.counter(super::recorder::counters::HOPS),
        }
    }

    /// Requests that were due: ok, failed, or unanswered at the cut — the parts a
    /// failures line names, so that they add up to it (a send is ok or failed; a
    /// failure without a send of its own, an MQTT subscriber's, is in it too).
    pub fn due(&self) -> u64 {
        self.ok + self.failed + self.unanswered()
    }

    pub fn unanswered(&self) -> u64 {
        self.unfinished + self.unsent
    }

    /// Failed or unanswered: what `error_rate` counts.
    pub fn not_ok(&self) -> u64 {
        self.failed + self.unanswered()
    }

    /// The share of the requests due that failed or went unanswered (0 to 1).
    pub fn error_rate(&self) -> f64 {
        share(self.not_ok(), self.due())
    }

    /// The summary's requests line: each part named, the share of the requests due.
    pub fn requests_line(&self) -> String {
        let mut line = format!(
            "{} sent, {} completed ({} ok), {} errors",
            self.sent, self.completed, self.ok, self.failed
        );
        if self.unfinished > 0 {
            line.push_str(&format!(", {} unanswered at the cut", self.unfinished));
        }
        if self.unsent > 0 {
            line.push_str(&format!(", {} never sent", self.unsent));
        }
        if self.unanswered() > 0 {
            line.push_str(&format!(
                ": {} of {} due failed ({})",
                self.not_ok(),
                self.due(),
                crate::units::share(self.error_rate())
            ));
        } else {
            line.push_str(&format!(" ({})", crate::units::share(self.error_rate())));
        }
        if self.hops > 0 {
            line.push_str(&format!(
                "; besides, {} redirect hop(s) followed within their steps",
                self.hops
            ));
        }
        line
    }

    /// The lead of a summary with failures: how many of the requests due failed, each
    /// part named with its count, all of one denominator. `None` when none did.
    pub fn failures_line(&self, causes: &str) -> Option<String> {
        if self.not_ok() == 0 {
            return None;
        }
        let mut parts = Vec::new();
        if self.failed > 0 {
            let why = if causes.is_empty() {
                String::new()
            } else {
                format!(" ({causes})")
            };
            parts.push(format!("{} failed when sent{why}", self.failed));
        }
        if self.unfinished > 0 {
            parts.push(format!("{} unanswered at the cut", self.unfinished));
        }
        if self.unsent > 0 {
            parts.push(format!("{} never sent", self.unsent));
        }
        Some(format!(
            "{} of {} requests due failed ({}): {}",
            self.not_ok(),
            self.due(),
            crate::units::share(self.error_rate()),
            parts.join(", ")
        ))
    }
}

/// `part` of `whole`, 0 when `whole` is.
pub fn share(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

/// The throughput line's words: the achieved rate, and — only where the schedule set
/// an offered rate — its share of it (a share of a schedule, at most 100% unless the
/// generator sent more than was due, which it never does).
pub fn throughput_line(achieved: f64, offered: Option<f64>, elapsed: f64) -> String {
    use crate::units::rate;
    match offered {
        // More than the schedule offered: the flow sent beyond it (retries, restarts,
        // loops); not a share of it.
        Some(off) if achieved > off => format!(
            "{} over {elapsed:.2}s, more than the {} the schedule offered (retries, restarts or loops sent beyond it)",
            rate(achieved),
            rate(off)
        ),
        Some(off) if off > 0.0 => format!(
            "{} achieved of {} offered ({}) over {elapsed:.2}s",
            rate(achieved),
            rate(off),
            crate::units::share(achieved / off)
        ),
        _ => format!("{} over {elapsed:.2}s", rate(achieved)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The run a user saw: 600 due, 172 ok, 46 failed, 382 unanswered at the cut.
    fn cut_run() -> Accounting {
        Accounting {
            sent: 218,
            completed: 210,
            ok: 172,
            failed: 46,
            unfinished: 382,
            unsent: 0,
            hops: 0,
        }
    }

    #[test]
    fn the_failures_line_names_each_part_of_one_denominator() {
        let a = cut_run();
        assert_eq!(a.due(), 600);
        assert_eq!(a.ok + a.failed + a.unanswered(), a.due());
        let line = a.failures_line("status 500 40, timeout 6").unwrap();
        assert_eq!(
            line,
            "428 of 600 requests due failed (71.33%): 46 failed when sent (status 500 40, timeout 6), 382 unanswered at the cut"
        );
        assert!((a.error_rate() - 428.0 / 600.0).abs() < 1e-12);
        let req = a.requests_line();
        assert!(
            req.contains("218 sent, 210 completed (172 ok), 46 errors"),
            "{req}"
        );
        assert!(req.contains("428 of 600 due failed (71.33%)"), "{req}");
    }

    #[test]
    fn unsent_requests_are_their_own_part_and_no_failures_say_nothing() {
        let a = Accounting {
            sent: 90,
            completed: 90,
            ok: 90,
            unsent: 10,
            ..Default::default()
        };
        assert_eq!(
            a.failures_line("").unwrap(),
            "10 of 100 requests due failed (10.00%): 10 never sent"
        );
        let fine = Accounting {
            sent: 5,
            completed: 5,
            ok: 5,
            ..Default::default()
        };
        assert_eq!(fine.failures_line(""), None);
        assert_eq!(
            fine.requests_line(),
            "5 sent, 5 completed (5 ok), 0 errors (0.00%)"
        );
    }

    #[test]
    fn hops_are_counted_apart_from_sends() {
        let a = Accounting {
            sent: 10,
            completed: 10,
            ok: 10,
            hops: 10,
            ..Default::default()
        };
        assert_eq!(a.due(), 10);
        let line = a.requests_line();
        assert!(line.starts_with("10 sent, 10 completed (10 ok)"), "{line}");
        assert!(line.contains("10 redirect hop(s) followed"), "{line}");
    }

    #[test]
    fn a_share_of_an_offer_only_where_the_schedule_set_one() {
        assert_eq!(throughput_line(18.0, None, 1.11), "18 req/s over 1.11s");
        assert_eq!(
            throughput_line(99.0, Some(100.0), 2.0),
            "99 req/s achieved of 100 req/s offered (99.00%) over 2.00s"
        );
        let over = throughput_line(10.1, Some(8.0), 2.0);
        assert!(!over.contains('%'), "{over}");
        assert!(
            over.contains("more than the 8 req/s the schedule offered"),
            "{over}"
        );
        assert_eq!(share(1, 0), 0.0);
    }
}
