//! `strainline workload flow RECORDING.har`: a user's flow made from a recorded browser
//! session, its correlations found by themselves. [`read`] takes the HAR apart,
//! [`steps`] keeps what the person did, [`correlate`] finds the values the server
//! handed out and the requests sent back, [`write`] says it as a flow file and a table.

pub mod correlate;
pub mod read;
pub mod steps;
pub mod write;

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
    pub steps: usize,
    /// The table of what was found (one line each), and what was left as recorded.
    pub found: Vec<String>,
    pub left_as_recorded: Vec<String>,
    pub left_out: steps::LeftOut,
}

/// Reads `har` and makes its flow.
pub fn make(har: &Path, opts: &Options) -> crate::error::Result<Made> {
    let x = read::read(har).map_err(|e| crate::Error::usage(e.to_string()))?;
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
    let text = write::flow(&source, &origin, &flow, &x, &found, &left_out);
    Ok(Made {
        origin,
        steps: flow.len(),
        found: write::table(&flow, &found),
        left_as_recorded: found.left.clone(),
        left_out,
        text,
    })
}
