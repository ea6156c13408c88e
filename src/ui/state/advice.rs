//! The Advice view's state: the findings as listed, their order, the panel in front and what
//! the loop computed beside them (the projection, a schedule change that is due).

use chrono::{DateTime, Utc};

use super::list::List;
use crate::model::CardRef;

/// The findings, how they are ordered and shown, and what came with them.
#[derive(Debug, Default)]
pub struct Advice {
    /// The advisor's findings in `order` (the loop sets them, on a recent fleet: the advisor
    /// is paced by its own cost, every second at 4,096 cards, up to ten at 32,768).
    pub list: List<crate::advisor::Finding>,
    /// The Advice view's order: the most severe first, or the most costly (`s` there).
    pub order: crate::advisor::Order,
    /// A text panel in front of the view until Esc (title, lines): the answer of `:fit`, or a
    /// finding in full (Enter in the Advice view).
    pub panel: Option<(String, Vec<String>)>,
    /// The finding the panel shows, by kind and subject: each advice pass shows it anew, or
    /// marks it gone, and `a` acts on it only while the latest pass has it.
    pub panel_finding: Option<(crate::advisor::Kind, crate::advisor::Subject)>,
    /// Findings by severity (high, warn, info), counted once per update for the header.
    pub counts: (usize, usize, usize),
    /// The data's clock when the findings were made (the advisor is paced: at 600× a pass can
    /// be an hour of simulated time old).
    pub at: Option<DateTime<Utc>>,
    /// Cards some warn or high finding is about: their fleet rows say `advice`.
    pub flagged: std::collections::HashSet<CardRef>,
    /// What the next 24 hours of measured demand would do as is and with the advice's
    /// layout changes (a simulation the loop runs off the render path; `None` until then).
    pub projection: Option<crate::simulate::projection::Projection>,
    /// A schedule change due now or within its lead (the loop sets it with the advice).
    pub banner: Option<crate::schedule::group::Banner>,
}

/// Lines the selected finding takes below the list in a body of `height` lines (none where
/// there is no room for both).
pub fn detail_height(height: usize) -> usize {
    if height >= 14 { 7 } else { 0 }
}

/// Findings the list shows in a body of `height` lines: less the selected finding below, the
/// counts line and the column heads.
pub fn list_rows(height: usize, projection: bool) -> usize {
    height.saturating_sub(detail_height(height) + 2 + usize::from(projection)).max(1)
}
