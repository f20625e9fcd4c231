//! `strainline history --metric M`: one metric of one case across the stored runs, with
//! its change points ([`crate::report::history`]).

use crate::analysis::changepoint::Params;
use crate::cli::HistoryArgs;
use crate::error::Category;
use crate::exit;
use crate::report::history::{one, write_text, Query};
use crate::store::{Location, Store};

pub fn run(location: &Location, args: HistoryArgs) -> crate::error::Result<i32> {
    let store = Store::open(location).usage()?;
    let history = one(
        &store,
        &Query {
            metric: Some(args.metric.clone()),
            case: args.case.clone(),
            suite: args.suite.clone(),
            suiteless_kind: None,
            label: args.label.clone(),
            since: args.since.clone(),
            last: None,
            params: Params {
                window: args.window.max(3),
                max_p: args.max_p,
                min_magnitude: args.min_change,
            },
        },
    )?;
    let mut out = crate::units::Printable(std::io::stdout().lock());
    super::quiet_pipe(write_text(&mut out, &history))?;
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&history)?)
            .map_err(|e| crate::error::writing(path, e))?;
    }
    Ok(exit::PASSED)
}
