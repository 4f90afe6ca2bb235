//! θ reports and how they are shown: the one JSON schema every face writes (CLI `--json`,
//! browser export, HTTP API; `docs/report.schema.json`), a model's summary (§4 of
//! `docs/z-measure.md`), what the faces draw (heatmap, histogram, colours, number
//! formats) and the static HTML page. The measure itself is [`crate::zmeasure`]'s; this
//! module only presents what it returns.

mod format;
mod heatmap;
mod histogram;
pub mod html;
mod schema;
mod summary;

pub use format::{human_bytes, human_count, theta_color};
pub use heatmap::Heatmap;
pub use histogram::Histogram;
pub use schema::{ModelReport, RankRow, Report, Status, TensorReport};
pub use summary::{GroupSummary, Summary, Well, WELLS};
