//! The page's views, one component per part of the page. They show what the controller
//! (`app.rs`) hands them as props (its types are in `crate::state`, not in `app.rs`) and
//! call back into it through callbacks; none keeps state beyond its own widgets (the
//! tensor and pair tables' sort and filter, in `sortable`, and the selected row).

mod check;
mod compare_report;
mod diff_heatmap;
mod drop_zone;
mod experts;
mod groups;
mod header;
mod heatmap;
mod histogram;
mod inspect;
mod measure_mode;
mod metadata;
mod pair_table;
mod progress;
mod quantize;
mod report;
mod sensitivity;
mod sortable;
mod status;
mod summary;
mod tensor_table;
mod url_field;
mod wells;

pub use check::CheckView;
pub use compare_report::CompareView;
pub use drop_zone::{CompareInputs, DropZone, ModeTabs};
pub use header::Header;
pub use inspect::InspectView;
pub use measure_mode::MeasureModePicker;
pub use quantize::QuantizeView;
pub use report::ReportView;
pub use status::StatusLine;
pub use url_field::UrlField;
