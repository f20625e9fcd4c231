//! The `spike` kind against the testbed, whose recovery is known: `--pool 1 --delay
//! 10ms` serves at most 100 pushes a second, first come first served, so a spike above
//! that builds a backlog that drains at the service rate less the base rate.

use crate::common::*;

/// A spike suite of the testbed serving `--pool 1 --delay 10ms` (and `more` of its
/// flags); `keys` end the test.
fn spike(s: &Scratch, more: &str, keys: &str) -> std::process::Output {
    run_suite(
        s,
        &format!(
            "[target]\ncommand = [\"TB\", \"serve\", \"--listen\", \"127.0.0.1:{{{{port}}}}\", \"--pool\", \"1\", \"--delay\", \"10ms\"{more}]\n\
             ready = \"http://127.0.0.1:{{{{port}}}}/health\"\n\
             [[test]]\nname = \"burst\"\nkind = \"spike\"\n{PUSH}\n{keys}\n"
        ),
        &["--no-tui"],
    )
}

/// The stored replies of each second of the run's one case.
fn per_second(s: &Scratch) -> Vec<f64> {
    per_second_at(s).into_iter().map(|(_, n)| n).collect()
}

/// The same, each at its second's end.
fn per_second_at(s: &Scratch) -> Vec<(f64, f64)> {
    let conn = rusqlite::Connection::open(s.path("results.db")).unwrap();
    let mut q = conn
        .prepare("SELECT t, value FROM series WHERE name = 'completed_per_second' ORDER BY t")
        .unwrap();
    let values = q
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap);
    values.collect()
}

#[test]
fn a_spike_s_backlog_drains_in_the_time_the_service_rate_gives() {
    let _bench = measuring();
    let s = Scratch::new();
    // 50/s for 4 s, 150/s for 8 s, 50/s for 16 s.
    let out = spike(
        &s,
        "",
        "rate = 50\nfactor = 3\nbefore = \"4s\"\nduring = \"8s\"\nafter = \"16s\"\n\
         gates = [\"recovery_time < 20s\", \"spike_error_rate < 1%\"]",
    );
    let text = stdout(&out);
    assert_exit(&out, 0);
    let case = &case_metrics(&s)[0];
    // The service rate, as the target kept it during the spike (seconds 5–12): at most
    // the 100 a second its 10 ms gives.
    let seconds = per_second(&s);
    let served = seconds[4..12].iter().sum::<f64>() / 8.0;
    assert!((85.0..=101.0).contains(&served), "{seconds:?}");
    // The backlog at the spike's end, and the time it takes to drain at what is left
    // of the service rate after the base load.
    let backlog = (150.0 - served) * 8.0;
    let drain = backlog / (served - 50.0);
    let recovery = stored_metric(case, "recovery_time").expect("it recovered");
    assert!(
        (recovery - drain).abs() <= 0.2 * drain,
        "recovery {recovery}s against a drain of {drain:.2}s ({backlog:.0} requests at {:.1}/s): {seconds:?}\n{text}",
        served - 50.0
    );
    // The worst second waited for at least the whole backlog (the last request of the
    // spike waits for every one before it).
    let peak = stored_metric(case, "spike_p99").unwrap() / 1000.0;
    assert!(
        peak >= 0.8 * backlog / served,
        "worst p99 {peak}s against a wait of {:.2}s",
        backlog / served
    );
    assert_eq!(stored_metric(case, "spike_error_rate"), Some(0.0));
    let before = stored_metric(case, "before_p99").unwrap();
    assert!((10.0..30.0).contains(&before), "{before}");
    assert!(stored_metric(case, "rss_left").is_some());
    assert_has(
        &text,
        "spike: 50 req/s for 4.00s, 3× (150 req/s) for 8.00s, 50 req/s for 16.00s",
    );
    assert_has(
        &text,
        &format!("recovered {recovery:.0}s after the spike's end (to the second): 3 seconds in a row with p99 ≤"),
    );
    assert_has(
        &text,
        "(the before-spike p99 +50%, at least +1ms and its worst second)",
    );
    assert_has(&text, "target memory: ");
}

#[test]
fn a_target_that_cannot_drain_fails_with_recovery_not_within_its_window() {
    let _bench = measuring();
    let s = Scratch::new();
    // 85/s against at most 100: 170/s for 4 s leaves ~300 requests that drain at ~10/s.
    // Each push keeps 20 KB: the memory the run left behind is known.
    let out = spike(
        &s,
        ", \"--leak-bytes\", \"20000\"",
        "rate = 85\nfactor = 2\nbefore = \"3s\"\nduring = \"4s\"\nafter = \"8s\"\n\
         gates = [\"recovery_time < 20s\"]",
    );
    let text = stdout(&out);
    assert_exit(&out, 1);
    assert_has(&text, "recovery: not within 8.00s of the spike's end");
    assert_has(&text, "the last second outside it: p99 ");
    assert_has(&text, "FAILED");
    let case = &case_metrics(&s)[0];
    assert_eq!(case["status"], "failed");
    // No recovery time is stored, so its gate is not passed: it is undecided.
    assert_eq!(stored_metric(case, "recovery_time"), None);
    assert!(stored_metric(case, "spike_p99").unwrap() > 1000.0);
    // What it left behind: from the middle of the before-spike window (2 s) to the
    // middle of the last 3 s (13.5 s), each push served kept 20 KB.
    let kept: f64 = per_second_at(&s)
        .iter()
        .filter(|(t, _)| *t > 2.5 && *t <= 13.5)
        .map(|(_, n)| n)
        .sum::<f64>()
        * 20_000.0;
    let left = stored_metric(case, "rss_left").unwrap();
    assert!(
        (left - kept).abs() <= 0.3 * kept,
        "rss_left {left} against {kept} kept by the pushes served"
    );
}
