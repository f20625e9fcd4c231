//! Which keys each kind takes (beyond the common ones), and the answer to a key its
//! kind does not take: that kind's keys alone, and the nearest of them.

use super::super::Kind;

/// The keys of a load kind's workload.
pub(super) const WORKLOAD_KEYS: &[&str] = &[
    "url",
    "scenario",
    "method",
    "body",
    "headers",
    "command",
    "connections",
    "threads",
    "timeout",
    "setup",
    "http2",
    "streams",
    "cacert",
    "insecure",
    "reply_field",
];

/// The keys a kind takes beyond the common ones (and, for load kinds, the workload's).
pub(super) fn own_keys(kind: Kind) -> &'static [&'static str] {
    match kind {
        Kind::Bench => &["rate", "duration"],
        Kind::Ramp => &[
            "start",
            "step",
            "step_duration",
            "max_steps",
            "slo_p99",
            "max_error_rate",
        ],
        Kind::Soak => &[
            "rate",
            "duration",
            "leak_budget",
            "horizon",
            "clients",
            "client_period",
            "ram",
        ],
        Kind::Rounds => &["rounds", "ops", "quiesce_url", "settle", "leak_budget"],
        Kind::Crash => &[
            "command",
            "iterations",
            "kill_after",
            "kill_at_log",
            "verify",
        ],
        Kind::Scale => &["command", "sizes"],
        Kind::Harness => &["command"],
    }
}

/// serde's "unknown field `x`, expected one of …" (every kind's keys) said for the one
/// `[[test]]` it is in: the keys of that test's kind alone, and the nearest of them.
pub(super) fn unknown_test_key(text: &str, at: usize, message: &str) -> Option<String> {
    if !message.contains("expected one of `name`, `kind`") {
        return None; // not a [[test]]'s own table (a setup request's, say)
    }
    let key = message.strip_prefix("unknown field `")?.split_once('`')?.0;
    // The test is the nth `[[test]]` header before the key, unless another table
    // (`[target]`, `[[watch]]`) came between them.
    let (mut offset, mut tests, mut in_test) = (0, 0, false);
    for line in text.split_inclusive('\n') {
        if offset > at {
            break;
        }
        let header = line.split('#').next().unwrap_or("").trim();
        if header == "[[test]]" {
            (tests, in_test) = (tests + 1, true);
        } else if header.starts_with('[') {
            in_test &= header.starts_with("[test.") || header.starts_with("[[test.");
        }
        offset += line.len();
    }
    let index = in_test.then(|| tests - 1);
    let table = text.parse::<toml::Table>().ok()?;
    let test = table.get("test")?.as_array()?.get(index?)?.as_table()?;
    let kind = Kind::parse_test(test.get("kind")?.as_str()?)?;
    let mut keys: Vec<&str> = super::super::raw::COMMON_KEYS.to_vec();
    if kind.has_target() {
        keys.extend(WORKLOAD_KEYS);
    }
    keys.extend(own_keys(kind));
    let name = test.get("name").and_then(|n| n.as_str()).unwrap_or("?");
    let nearest = keys
        .iter()
        .map(|k| (edits(k, key), *k))
        .filter(|(d, _)| *d <= 2)
        .min()
        .map(|(_, k)| format!(" — did you mean `{k}`?"))
        .unwrap_or_default();
    Some(format!(
        "test '{}': unknown key `{key}`{nearest} (a {} test takes: {})",
        crate::units::printable(name),
        kind.name(),
        keys.join(", ")
    ))
}

/// The edits (insert, delete, replace) that turn `a` into `b`.
pub(super) fn edits(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let here = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb))
                .min(row[j] + 1)
                .min(here + 1);
            prev = here;
        }
    }
    row[b.len()]
}
