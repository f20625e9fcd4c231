//! What a scenario's request may put in its request line, and where a redirect goes.
//! A step's path is made of text the user wrote, values a server sent (extractions, a
//! `Location`) and a script's `r.path`, so it is checked after all of them, just before
//! it is sent: a request target is origin-form (RFC 9112 §3.2.1: `/` and RFC 3986's
//! path and query); a byte no request line may carry — a control (CR, LF, NUL, TAB …),
//! a space or DEL — makes the request invalid and it is not sent (a value that would
//! otherwise end the line and smuggle a second request); a byte RFC 3986 does not allow
//! but a browser would send encoded (non-ASCII, `"` `<` `>` `\` `^` `` ` `` `{` `|`
//! `}`) is percent-encoded, as browsers and curl do; a fragment is dropped (no client
//! sends one). A `Location` is followed only within the target: same scheme and
//! authority, or a path; another host, another scheme, a scheme-relative `//host`, a
//! `/\host` (a browser reads it as `//host`) or a malformed value is not followed.

/// Why a rendered request target cannot be sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Invalid {
    /// It does not start with `/` (origin-form) and is not `*`.
    NotOrigin,
    /// It holds a byte no request line may carry (a control, a space or DEL).
    Byte(u8),
}

impl std::fmt::Display for Invalid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Invalid::NotOrigin => write!(f, "the path does not start with '/'"),
            Invalid::Byte(b) => write!(f, "the path holds the byte 0x{b:02x}"),
        }
    }
}

/// Whether a request line may never carry `b`: a control, a space or DEL.
pub fn forbidden(b: u8) -> bool {
    b <= b' ' || b == 0x7f
}

/// Whether RFC 3986 allows `b` in a path or query as it is (`%` included: a path the
/// user wrote with `%41` is already encoded).
fn allowed(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@/?%[]".contains(&b)
}

/// `path` as a valid origin-form request target: percent-encoded where RFC 3986 asks,
/// its fragment dropped, or why it cannot be sent.
pub fn request_target(path: &str) -> Result<std::borrow::Cow<'_, str>, Invalid> {
    let path = path.split_once('#').map_or(path, |(p, _)| p);
    if let Some(&b) = path.as_bytes().iter().find(|&&b| forbidden(b)) {
        return Err(Invalid::Byte(b));
    }
    if path == "*" {
        return Ok(path.into());
    }
    if !path.starts_with('/') {
        return Err(Invalid::NotOrigin);
    }
    if path.bytes().all(allowed) {
        return Ok(path.into());
    }
    let mut out = String::with_capacity(path.len() + 16);
    for b in path.bytes() {
        if allowed(b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    Ok(out.into())
}

/// Makes `path` a valid request target in place ([`request_target`]).
pub fn fit_path(path: &mut String) -> Result<(), Invalid> {
    let fitted = match request_target(path)? {
        std::borrow::Cow::Borrowed(p) if p.len() == path.len() => return Ok(()),
        p => p.into_owned(),
    };
    *path = fitted;
    Ok(())
}

/// Where a redirect from `path` to `location` goes within the target (`authority`,
/// reached over TLS when `secure`): its path, or `None` when it is not followed —
/// another host or scheme, or a `Location` that is not a valid URI reference.
pub fn within(location: &str, path: &str, authority: &str, secure: bool) -> Option<String> {
    if location.is_empty() || location.bytes().any(forbidden) || location.contains('\\') {
        return None; // malformed (a browser would read `/\host` as `//host`)
    }
    if let Some((scheme, rest)) = scheme_of(location) {
        let ours = if secure { "https" } else { "http" };
        let rest = rest.strip_prefix("//")?;
        if !scheme.eq_ignore_ascii_case(ours) {
            return None;
        }
        let (host, p) = rest.split_at(rest.find(['/', '?', '#']).unwrap_or(rest.len()));
        if !host.eq_ignore_ascii_case(authority) {
            return None;
        }
        return Some(match p {
            "" => "/".to_string(),
            p if p.starts_with('/') => p.to_string(),
            p => format!("/{p}"),
        });
    }
    if location.starts_with("//") {
        return None; // scheme-relative: another authority, or ours written oddly
    }
    if location.starts_with('/') {
        return Some(location.to_string());
    }
    // Relative to the current path's directory (a query alone keeps the path).
    let base = path.split(['?', '#']).next().unwrap_or("/");
    if location.starts_with('?') {
        return Some(format!("{base}{location}"));
    }
    let dir = &base[..base.rfind('/').map_or(0, |k| k + 1)];
    Some(format!(
        "{}{location}",
        if dir.is_empty() { "/" } else { dir }
    ))
}

/// A URI's scheme (RFC 3986 §3.1: a letter, then letters, digits, `+`, `-`, `.`,
/// before the first `:`) and what follows it.
fn scheme_of(s: &str) -> Option<(&str, &str)> {
    let (scheme, rest) = s.split_once(':')?;
    let mut b = scheme.bytes();
    (b.next()?.is_ascii_alphabetic() && b.all(|c| c.is_ascii_alphanumeric() || b"+-.".contains(&c)))
        .then_some((scheme, rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_target_carries_no_second_request() {
        for bad in [
            "/ok?x=1 HTTP/1.1\r\nX-Inj: y\r\n\r\nGET /smuggled2",
            "/a\tb",
            "/a\nb",
            "/a\0b",
            "/a b",
            "/a\x7fb",
            "/a\x1bb",
        ] {
            assert!(
                matches!(request_target(bad), Err(Invalid::Byte(_))),
                "{bad:?}"
            );
        }
        assert_eq!(request_target("ok"), Err(Invalid::NotOrigin));
        assert_eq!(request_target(""), Err(Invalid::NotOrigin));
        assert_eq!(request_target("http://x/"), Err(Invalid::NotOrigin));
        assert_eq!(request_target("/a?b=c&d=%41").unwrap(), "/a?b=c&d=%41");
        assert_eq!(request_target("*").unwrap(), "*");
        assert_eq!(
            request_target("/caf\u{e9}?q=\u{fffd}\"<>{}|\\^`").unwrap(),
            "/caf%C3%A9?q=%EF%BF%BD%22%3C%3E%7B%7D%7C%5C%5E%60"
        );
        assert_eq!(request_target("/p#frag ment").unwrap(), "/p");
        for (from, to) in [
            ("/public#/../../admin", "/public"),
            ("/use/x?y#z", "/use/x?y"),
            ("/caf\u{e9}#x", "/caf%C3%A9"),
            ("/plain?q=1", "/plain?q=1"),
        ] {
            let mut p = from.to_string();
            fit_path(&mut p).unwrap();
            assert_eq!(p, to, "the fragment never goes on the wire");
        }
    }

    #[test]
    fn a_redirect_is_followed_within_the_target_alone() {
        let w = |l: &str| within(l, "/dir/page?x=1", "127.0.0.1:8080", false);
        assert_eq!(w("/next").as_deref(), Some("/next"));
        assert_eq!(w("other").as_deref(), Some("/dir/other"));
        assert_eq!(w("?y=2").as_deref(), Some("/dir/page?y=2"));
        assert_eq!(w("http://127.0.0.1:8080").as_deref(), Some("/"));
        assert_eq!(w("HTTP://127.0.0.1:8080/a").as_deref(), Some("/a"));
        assert_eq!(w("http://127.0.0.1:8080?q").as_deref(), Some("/?q"));
        for not in [
            "http://127.0.0.1:9090/x",
            "https://127.0.0.1:8080/x",
            "//127.0.0.1:9090/x",
            "//127.0.0.1:8080/x",
            "/\\127.0.0.1:9090/x",
            "file:///etc/passwd",
            "javascript:alert(1)",
            "http:/x",
            "/a\tb",
            "/a\r\nX: y",
            "",
        ] {
            assert_eq!(w(not), None, "{not:?} is not followed");
        }
        assert_eq!(
            within("https://h:1/s", "/", "h:1", true).as_deref(),
            Some("/s")
        );
    }
}
