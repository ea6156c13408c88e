//! One module per screen region or view; each draws from borrowed state and returns nothing.

pub mod advice;
pub mod card;
pub mod dra;
pub mod fleet;
pub mod footer;
pub mod group;
pub mod header;
pub mod help;
pub mod modal;
pub mod panel;
pub mod queue;
pub mod replay;
pub mod sources;
pub mod workload;
pub mod workloads;

use ratatui::style::Style;
use ratatui::text::Span;

use super::widgets::text::{pad, rpad};

/// A left-aligned cell of exactly `w` columns followed by one space.
pub fn cell(s: &str, w: usize, style: Style, ascii: bool) -> Span<'static> {
    Span::styled(format!("{} ", pad(s, w, ascii)), style)
}

/// A right-aligned cell of exactly `w` columns followed by one space.
pub fn rcell(s: &str, w: usize, style: Style, ascii: bool) -> Span<'static> {
    Span::styled(format!("{} ", rpad(s, w, ascii)), style)
}

pub fn pct(v: Option<f64>) -> String {
    v.map_or_else(|| "N/A".into(), |u| format!("{}%", crate::units::whole(u)))
}
