//! θ reports and how they are shown: the one JSON schema every face writes (CLI `--json`,
//! browser export, HTTP API; `docs/report.schema.json`), a model's summary (§4 of
//! `docs/z-measure.md`), what the faces draw (heatmap, θ by layer, histogram, colours,
//! number formats) and the static HTML page; and how a compare report
//! ([`crate::compare`]) is shown: its 1 − cos heatmap, θ(A)/θ(B) scatter, dθ by layer and
//! static page. The measure itself is [`crate::zmeasure`]'s, the comparison
//! [`crate::compare`]'s; this module only presents what they return.

pub mod adapter;
mod adapter_figures;
mod compare_heatmap;
mod compare_html;
mod compare_text;
mod csv;
mod expert_heatmap;
pub mod formats;
mod fragment;
mod heatmap;
mod histogram;
pub mod html;
pub mod inspect;
pub mod inspect_text;
mod json;
mod kinds;
mod layer_plot;
mod page;
pub mod quantize;
mod readable;
pub mod recipe;
mod scatter;
mod schema;
pub mod sensitivity_html;
mod sensitivity_text;
pub mod summary;
pub mod surgery;
mod tensor_report;
mod text;

pub use compare_heatmap::{CompareHeatmap, DiffCell, DIFF_FLOOR};
pub use compare_html::{changed_figures, render_compare, SAME_POSITIONS};
pub use csv::prediction as prediction_csv;
pub use csv::sensitivity as sensitivity_csv;
pub use expert_heatmap::{caption as experts_caption, ExpertHeatmap};
pub use formats::{AnyReport, Format, Kind, Mark, Shown, FORMATS};
pub use fragment::ViewState;
pub use heatmap::{hatch_style, sigma_color, sigma_legend, Heatmap, NEIGHBOUR_SIGMAS, NOISY_STYLE, OUTSIDE_LABEL};
pub use heatmap::{SIGMA_MARK, TYPICAL_SIGMA};
pub use histogram::Histogram;
pub use layer_plot::{d_theta_by_layer_svg, kind_of, theta_by_layer_svg};
pub use readable::{adapter_facts, update_figures};
pub use readable::{
    cell_style, contrast_ratio, diff_color, diff_position, diff_rgb, hex, human_bytes, human_count, ink,
};
pub use readable::{
    relative_luminance, sci, sigma_rgb, theta_color, theta_legend, theta_rgb, IDENTICAL_COLOR, THETA_SCALE,
};
pub use scatter::theta_scatter_svg;
pub use schema::{Measured, ModelReport, RankRow, Report, RANKING_NOTE};
pub use summary::{GroupSummary, Summary, Well, WELLS};
pub use tensor_report::{Status, TensorReport};
