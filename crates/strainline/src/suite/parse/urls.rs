//! A URL's and a method's shape, checked without resolving anything (`check` on a suite
//! whose URLs hold `{{port}}`), and the files a URL's query names beside the suite.

use std::path::Path;

use crate::error::Category;

/// A URL whose protocol's query options name files (gRPC's `proto=FILE`), with those
/// files relative to the suite file, as a scenario's is; any other URL as written.
pub(super) fn beside_the_suite(suite: &Path, url: &str) -> String {
    let options = crate::load::proto::by_url(url).map_or(&[][..], |p| p.file_options());
    let Some((head, query)) = url.split_once('?').filter(|_| !options.is_empty()) else {
        return url.to_string();
    };
    let dir = suite.parent().unwrap_or(Path::new("."));
    let query: Vec<String> = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((k, f))
                if options.contains(&k) && !Path::new(f).is_absolute() && !f.is_empty() =>
            {
                format!("{k}={}", dir.join(f).display())
            }
            _ => pair.to_string(),
        })
        .collect();
    format!("{head}?{}", query.join("&"))
}

/// The files a URL's query names for its protocol ([`beside_the_suite`]'s), as given.
pub(super) fn files_named(url: &str) -> Vec<(&'static str, String)> {
    let options = crate::load::proto::by_url(url).map_or(&[][..], |p| p.file_options());
    let query = url.split_once('?').map_or("", |(_, q)| q);
    query
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .filter_map(|(k, f)| Some((*options.iter().find(|o| **o == k)?, f.to_string())))
        .filter(|(_, f)| !f.is_empty())
        .collect()
}

/// The schemes of an HTTP request (a probe, a quiesce request).
pub(super) const HTTP_SCHEMES: &[&str] = &["http://", "https://"];
/// The schemes a workload's URL may have: the protocol registry's.
pub(super) fn load_schemes() -> Vec<String> {
    crate::load::proto::prefixes().collect()
}

/// Whether a URL (placeholders allowed) with one of `schemes` is one the load engine
/// can send to.
pub(super) fn url_shape<S: AsRef<str>>(url: &str, schemes: &[S]) -> crate::error::Result<()> {
    let rest = schemes
        .iter()
        .find_map(|s| url.strip_prefix(s.as_ref()))
        .ok_or_else(|| {
            crate::Error::usage(format!(
                "give a URL that starts with {}",
                schemes
                    .iter()
                    .map(AsRef::as_ref)
                    .collect::<Vec<&str>>()
                    .join(" or ")
            ))
        })?;
    if let Some(c) = url.chars().find(|c| c.is_whitespace() || c.is_control()) {
        return Err(crate::Error::usage(format!(
            "it holds {}: write a space as %20",
            if c == ' ' {
                "a space".to_string()
            } else {
                format!("the character {:?}", c)
            }
        )));
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let hostport = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let (host, port) = if let Some(v6) = hostport.strip_prefix('[') {
        let (inside, after) = v6
            .split_once(']')
            .ok_or("its IPv6 address has no closing ] (write e.g. http://[::1]:{{port}}/)")
            .usage()?;
        if inside.is_empty() {
            return Err(crate::Error::usage("its IPv6 address is empty"));
        }
        match after {
            "" => (inside, None),
            p => (
                inside,
                Some(
                    p.strip_prefix(':')
                        .ok_or("after its ] comes no :PORT")
                        .usage()?,
                ),
            ),
        }
    } else {
        match hostport.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (hostport, None),
        }
    };
    if host.is_empty() {
        return Err(crate::Error::usage(
            "it names no host (write e.g. http://127.0.0.1:{{port}}/)",
        ));
    }
    if let Some(p) = port.filter(|p| !p.contains("{{")) {
        if !p.parse::<u16>().is_ok_and(|p| p > 0) {
            return Err(crate::Error::usage(format!(
                "'{p}' is not a port (1-65535)"
            )));
        }
    }
    Ok(())
}

/// An HTTP method: one token (RFC 9110), e.g. GET or POST — as the client will parse it.
pub(super) fn method_shape(m: &str) -> crate::error::Result<()> {
    if hyper::Method::from_bytes(m.as_bytes()).is_err() {
        return Err(crate::Error::usage(format!(
            "method {:?} is not one HTTP method (write e.g. GET or POST)",
            m
        )));
    }
    Ok(())
}
