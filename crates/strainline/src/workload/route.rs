//! Paths into routes: `/push/dev-1234` and `/push/dev-98` are one route, `/push/{id}`.
//! A segment is an identifier when it is a number, a UUID, a hex string of 8 or more
//! characters, or any word with two digits or more (`dev-1234`, `a1b2`) — but not an
//! API version (`v1`, `v2.1`). `--route REGEX` covers the rest: a path the expression
//! matches has each capture group replaced by `{NAME}` (named groups) or `{id}`.

use crate::error::Category;
use regex_lite::Regex;

/// The user's route expressions, tried in order before the built-in rules.
#[derive(Debug, Clone, Default)]
pub struct Routes {
    rules: Vec<Regex>,
}

/// A route and the identifier values its placeholders stood for.
#[derive(Debug, Clone, PartialEq)]
pub struct Routed {
    pub route: String,
    pub values: Vec<String>,
}

impl Routes {
    pub fn new(exprs: &[String]) -> crate::error::Result<Routes> {
        let rules = exprs
            .iter()
            .map(|e| {
                let r = Regex::new(e).usage_with(|err| format!("--route '{e}': {err}"))?;
                if r.captures_len() < 2 {
                    return Err(crate::Error::usage(format!(
                        "--route '{e}' has no capture group: put the variable part in \
                         parentheses, e.g. '^/files/(.+)$' or '^/files/(?<name>.+)$'"
                    )));
                }
                Ok(r)
            })
            .collect::<crate::error::Result<_>>()?;
        Ok(Routes { rules })
    }

    /// The route of a path.
    pub fn route(&self, path: &str) -> Routed {
        for r in &self.rules {
            if let Some(c) = r.captures(path) {
                let mut route = String::new();
                let mut values = Vec::new();
                let mut at = 0;
                for (i, name) in r.capture_names().enumerate().skip(1) {
                    if let Some(m) = c.get(i) {
                        route.push_str(&path[at..m.start()]);
                        route.push_str(&format!("{{{}}}", name.unwrap_or("id")));
                        values.push(m.as_str().to_string());
                        at = m.end();
                    }
                }
                route.push_str(&path[at..]);
                return Routed { route, values };
            }
        }
        let mut values = Vec::new();
        let route = path
            .split('/')
            .map(|seg| {
                if is_identifier(seg) {
                    values.push(seg.to_string());
                    "{id}"
                } else {
                    seg
                }
            })
            .collect::<Vec<_>>()
            .join("/");
        Routed { route, values }
    }
}

fn is_identifier(seg: &str) -> bool {
    if seg.is_empty() {
        return false;
    }
    let digits = seg.bytes().filter(u8::is_ascii_digit).count();
    if digits == seg.len() {
        return true;
    }
    let version = seg.len() > 1
        && (seg.starts_with('v') || seg.starts_with('V'))
        && seg[1..].bytes().all(|b| b.is_ascii_digit() || b == b'.');
    if version {
        return false;
    }
    let hex =
        seg.len() >= 8 && digits > 0 && seg.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-');
    hex || digits >= 2
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_collapse_and_words_stay() {
        let r = Routes::default();
        let cases = [
            ("/push/dev-1234", "/push/{id}"),
            ("/users/42/orders/7", "/users/{id}/orders/{id}"),
            ("/o/3f2504e0-4f89-11d3-9a0c-0305e82c3301", "/o/{id}"),
            ("/blob/deadbeef01", "/blob/{id}"),
            ("/api/v1/health", "/api/v1/health"),
            ("/api/v2.1/items", "/api/v2.1/items"),
            ("/static/app.css", "/static/app.css"),
            ("/", "/"),
        ];
        for (path, route) in cases {
            assert_eq!(r.route(path).route, route, "{path}");
        }
        assert_eq!(r.route("/users/42/orders/7").values, ["42", "7"]);
    }

    #[test]
    fn a_route_expression_names_its_groups() {
        let r = Routes::new(&[r"^/files/(?<name>[^/]+)/raw$".into(), r"^/t/(\w+)".into()]).unwrap();
        let x = r.route("/files/report.pdf/raw");
        assert_eq!(x.route, "/files/{name}/raw");
        assert_eq!(x.values, ["report.pdf"]);
        assert_eq!(r.route("/t/abc/x").route, "/t/{id}/x");
        assert!(Routes::new(&["^/files/.+$".into()])
            .unwrap_err()
            .to_string()
            .contains("capture group"));
        assert!(Routes::new(&["(".into()]).is_err());
    }
}
