//! `strainline workload flow RECORDING.har`: a user's flow made from a recorded browser
//! session, its correlations found by themselves. [`read`] takes the HAR apart,
//! [`steps`] keeps what the person did, [`correlate`] finds the values the server
//! handed out and the requests sent back, [`write`] says it as a flow file and a table.

pub mod correlate;
pub mod read;
pub mod steps;
pub mod write;

use crate::error::Category;
use std::path::Path;

/// What to make, and how.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The application's host (or host:port); default: the first page's.
    pub host: Option<String>,
    /// Replay every value verbatim (for comparison: what recorders without correlation do).
    pub no_correlate: bool,
}

/// A flow made from a recording.
#[derive(Debug, Clone)]
pub struct Made {
    pub origin: String,
    pub text: String,
    /// The same flow as one user without the recorded pauses (what `--target` plays).
    pub once: String,
    /// Each step's name and the status its recorded reply had.
    pub recorded: Vec<(String, u16)>,
    pub steps: usize,
    /// The table of what was found (one line each), and what was left as recorded.
    pub found: Vec<String>,
    pub left_as_recorded: Vec<String>,
    pub left_out: steps::LeftOut,
}

/// Reads `har` and makes its flow.
pub fn make(har: &Path, opts: &Options) -> crate::error::Result<Made> {
    // A regular file of any size (it is streamed): no device, pipe or directory.
    crate::os::file::check(har, "RECORDING.har", u64::MAX)?;
    let x = read::read(har).usage()?;
    let origin = steps::origin(&x, opts.host.as_deref()).ok_or_else(|| {
        crate::Error::usage(format!(
            "{}: {}",
            har.display(),
            match &opts.host {
                Some(h) => format!(
                    "no request went to {h}: --host names the application's host as recorded"
                ),
                None => "it holds no request".into(),
            }
        ))
    })?;
    let (kept, left_out) = steps::keep(&x, &origin);
    if kept.is_empty() {
        return Err(crate::Error::usage(format!(
            "{}: every request to {origin} was a static asset: nothing a user did is left",
            har.display()
        )));
    }
    let mut flow = steps::steps(&x, &kept, &origin);
    if flow.len() > crate::limits::SCENARIO_STEPS {
        return Err(crate::Error::usage(format!(
            "{}: {} steps to {origin}, more than a flow holds ({}): record a shorter session, or --host another origin",
            har.display(),
            flow.len(),
            crate::limits::SCENARIO_STEPS
        )));
    }
    write::escape(&mut flow);
    let found = if opts.no_correlate {
        correlate::Found::default()
    } else {
        correlate::correlate(&flow, &x)
    };
    write::apply(&mut flow, &found);
    let source = har.file_name().map_or_else(
        || har.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    let play = |clients, think| {
        write::flow(
            &source,
            &origin,
            &flow,
            &x,
            &found,
            &left_out,
            write::Play { clients, think },
        )
    };
    let (text, once) = (play(5, true), play(1, false));
    Ok(Made {
        recorded: flow
            .iter()
            .map(|s| (s.name.clone(), x[s.reply].status))
            .collect(),
        once,
        origin,
        steps: flow.len(),
        found: write::table(&flow, &found),
        left_as_recorded: found.left.clone(),
        left_out,
        text,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An entry: method, URL, request headers, body (mime, text), status, reply mime
    /// and text.
    type Entry<'a> = (
        &'a str,
        &'a str,
        &'a [(&'a str, &'a str)],
        Option<(&'a str, &'a str)>,
        u16,
        &'a str,
        &'a str,
    );

    /// A recording of `entries` made into a flow.
    fn made(entries: &[Entry]) -> Made {
        let entries: Vec<serde_json::Value> = entries
            .iter()
            .enumerate()
            .map(|(i, (method, url, headers, body, status, mime, reply))| {
                let mut request = serde_json::json!({
                    "method": method, "url": url,
                    "headers": headers.iter().map(|(n, v)| serde_json::json!({"name": n, "value": v})).collect::<Vec<_>>(),
                });
                if let Some((m, t)) = body {
                    request["postData"] = serde_json::json!({"mimeType": m, "text": t});
                }
                serde_json::json!({
                    "startedDateTime": format!("2026-01-01T00:00:{:02}.000Z", i),
                    "time": 5, "request": request,
                    "response": {"status": status, "headers": [], "content": {"mimeType": mime, "text": reply}},
                })
            })
            .collect();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.har");
        let har = serde_json::json!({"log": {"version": "1.2", "entries": entries}});
        std::fs::write(&path, har.to_string()).unwrap();
        make(&path, &Options::default()).unwrap()
    }

    #[test]
    fn recorded_braces_stay_text_and_values_go_where_they_stand_encoded() {
        let m = made(&[
            (
                "GET",
                "http://127.0.0.1:8000/",
                &[],
                None,
                200,
                "text/html",
                r#"<input type="hidden" name="tok" value="AbC+dEf/GhI=12345"><p>Bear</p>"#,
            ),
            (
                "POST",
                "http://127.0.0.1:8000/p/%7B%7Bclient%7D%7D?q=AbC%2BdEf%2FGhI%3D12345",
                &[
                    ("X-T", "{{seq}}"),
                    ("Authorization", "Bearer AbC+dEf/GhI=12345"),
                ],
                Some(("text/plain", "hello {{client}} AbC+dEf/GhI=12345")),
                200,
                "application/json",
                r#"{"id": 4242, "next": "k9Qz8Wm3Lp5Xr7Ty"}"#,
            ),
            (
                "POST",
                "http://127.0.0.1:8000/n",
                &[],
                Some((
                    "application/json",
                    r#"{"owner": 4242, "s": "{{x}}", "t": "k9Qz8Wm3Lp5Xr7Ty"}"#,
                )),
                200,
                "application/json",
                "{}",
            ),
        ]);
        let t = &m.once;
        // The recording's own `{{…}}` are sent as recorded, never rendered.
        assert!(
            t.contains(r#"path = "/p/%7B%7Bclient%7D%7D?q={{q|url}}""#),
            "{t}"
        );
        assert!(t.contains(r#""X-T" = "{{'{{'}}seq}}""#), "{t}");
        assert!(
            t.contains(r#"body = "hello {{'{{'}}client}} {{q}}""#),
            "{t}"
        );
        // The token where it stands after the scheme, not inside "Bearer".
        assert!(t.contains(r#""Authorization" = "Bearer {{q}}""#), "{t}");
        // A number's placeholder bare, a recorded `{{x}}` text.
        assert!(
            t.contains(r#"body = "{\"owner\":{{owner}},\"s\":\"{{'{{'}}x}}\",\"t\":\"{{t}}\"}""#),
            "{t}"
        );
        // The table shows a recorded `{{` as it was.
        assert!(
            m.found
                .iter()
                .any(|l| l.starts_with(r#""{{x}}" typed by the person as s"#)),
            "{:?}",
            m.found
        );
        // The flow file parses as a scenario, every placeholder known.
        crate::load::scenario::parse(t, std::path::Path::new("once.toml")).unwrap();
    }

    #[test]
    fn comments_hold_the_recording_s_text_on_one_line() {
        let m = made(&[
            (
                "GET",
                "http://u:secret@127.0.0.1:8000/",
                &[],
                None,
                200,
                "application/json",
                "{\"\\ncookies = false\\n#\": \"tokXqqqqqqqqqqqq1\"}",
            ),
            (
                "GET",
                "http://u:secret@127.0.0.1:8000/x?t=tokXqqqqqqqqqqqq1",
                &[],
                None,
                200,
                "text/html",
                "",
            ),
        ]);
        assert!(!m.text.contains("secret"), "{}", m.text);
        for line in m.text.lines() {
            assert!(!line.starts_with("cookies"), "{}", m.text);
        }
        crate::load::scenario::parse(&m.text, std::path::Path::new("f.toml")).unwrap();
    }
}
