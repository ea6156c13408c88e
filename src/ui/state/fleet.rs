//! The fleet view's state: its rows (node headings and cards), the sort, the fleet the rows
//! were built from, and the header's totals.

use super::list::List;

/// The fleet table's rows, how they are sorted, and what they were built from.
#[derive(Debug, Default)]
pub struct FleetList {
    pub list: List<Row>,
    pub sort: SortKey,
    /// The sort runs the other way (`S`).
    pub reverse: bool,
    /// Node names and card indexes of the fleet the rows were built from, so the selection
    /// can be found again by identity in the next fleet, whatever its order.
    pub(super) built_from: Vec<(String, Vec<u32>)>,
    /// Header figures, computed once per fleet update, not per frame.
    pub totals: crate::model::Totals,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SortKey {
    #[default]
    Node,
    Util,
    Memory,
    Temp,
    Power,
    Free,
    /// Unhealthy cards first (lost, fatal XID, uncorrectable ECC), then drained ones.
    Health,
}

impl SortKey {
    pub fn next(self) -> Self {
        match self {
            Self::Node => Self::Util,
            Self::Util => Self::Memory,
            Self::Memory => Self::Temp,
            Self::Temp => Self::Power,
            Self::Power => Self::Free,
            Self::Free => Self::Health,
            Self::Health => Self::Node,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Node => "node",
            Self::Util => "util",
            Self::Memory => "memory",
            Self::Temp => "temp",
            Self::Power => "power",
            Self::Free => "free",
            Self::Health => "health",
        }
    }
}

/// A fleet table row: a node heading (node index) or a card (node index, card index).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Row {
    Node(usize),
    Card(usize, usize),
}

impl super::list::Heading for Row {
    fn heading(&self) -> bool {
        matches!(self, Row::Node(_))
    }
}
