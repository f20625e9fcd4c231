//! `{{NAME}}` placeholders in commands, URLs, bodies and headers: a suite's matrix
//! values, `--var`s, and the case's own `port` and `dir`.

use std::collections::BTreeMap;

/// Replaces `{{name}}` with its value.
pub fn substitute(s: &str, vars: &BTreeMap<String, String>) -> String {
    let mut out = s.to_string();
    for (k, v) in vars {
        out = out.replace(&format!("{{{{{k}}}}}"), v);
    }
    out
}
