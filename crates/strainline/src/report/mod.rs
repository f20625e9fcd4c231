//! What people read: terminal summaries, comparison tables, the HTML report with its
//! SVG charts, and the files other tools read (JSON, CSV, Markdown, JUnit XML).

pub mod case;
pub mod compare;
pub mod csv_text;
pub mod export;
pub mod files;
pub mod history;
pub mod html;
pub mod judged;
pub mod load;
pub mod monitor;
pub mod run;
pub mod svg;
pub mod tables;
pub mod timeline;
pub mod workload;

/// A machine-readable document: its schema, the run and the strainline that wrote it,
/// then the body's own fields.
#[derive(serde::Serialize)]
struct Envelope<T: serde::Serialize> {
    schema: &'static str,
    run_id: Option<i64>,
    strainline_version: &'static str,
    #[serde(flatten)]
    body: T,
}

/// `body` as a pretty JSON document of `schema`.
pub fn document<T: serde::Serialize>(schema: &'static str, run_id: Option<i64>, body: T) -> String {
    serde_json::to_string_pretty(&Envelope {
        schema,
        run_id,
        strainline_version: env!("CARGO_PKG_VERSION"),
        body,
    })
    .expect("strainline's documents serialize")
}
