//! What people read: terminal summaries, comparison tables, the HTML report with its
//! SVG charts, and the files other tools read (JSON, CSV, Markdown, JUnit XML).

pub mod compare;
pub mod files;
pub mod html;
pub mod load;
pub mod monitor;
pub mod run;
pub mod svg;
