//! How stored cases line up across runs: which of a run's cases is which of another's
//! (compare, history, the Action).

/// What pairs a case across runs: a suite case's name without its repetition suffix
/// (`bench[a=1]#3` → `bench[a=1]`). A `monitor` or `load` run has one case named after
/// its command, which differs between the versions being compared (`./v1/server`,
/// `./v2/server`): it is keyed by its kind.
pub fn case_key<'a>(name: &'a str, kind: &'a str) -> &'a str {
    if matches!(kind, "monitor" | "load") {
        return kind;
    }
    match name.rsplit_once('#') {
        Some((base, n)) if !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()) => base,
        _ => name,
    }
}

#[cfg(test)]
mod tests {
    use super::case_key;

    #[test]
    fn repetitions_share_a_case_key() {
        assert_eq!(case_key("bench[cost=1]#3", "bench"), "bench[cost=1]");
        assert_eq!(case_key("bench", "bench"), "bench");
        assert_eq!(case_key("issue#a", "bench"), "issue#a");
        assert_eq!(case_key("./v2/server --port 1", "monitor"), "monitor");
    }
}
