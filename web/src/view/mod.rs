//! The page's views, one component per part of the page. They show what the controller
//! (`app.rs`) holds and call back into it; none keeps state beyond its own widgets (the
//! tensor table's sort and filter, the selected tensor).

mod drop_zone;
mod groups;
mod header;
mod heatmap;
mod histogram;
mod metadata;
mod progress;
mod report;
mod status;
mod summary;
mod tensor_table;
mod wells;

pub use drop_zone::DropZone;
pub use header::Header;
pub use report::ReportView;
pub use status::StatusLine;
