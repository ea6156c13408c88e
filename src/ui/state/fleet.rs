//! The fleet view's state: its rows (node headings and cards), the sort, the fleet the rows
//! were built from, and the header's totals.

use super::list::List;
use crate::model::{Card, CardRef, Fleet, Node};

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

impl FleetList {
    /// The rows of the cards `shown` lets through: under their node's heading in fleet order,
    /// or sorted by the sort's key without headings.
    pub fn build_rows(&mut self, fleet: &Fleet, shown: impl Fn(&Node, &Card) -> bool) {
        let mut cards: Vec<(usize, usize)> = Vec::new();
        for (ni, n) in fleet.nodes.iter().enumerate() {
            for (ci, c) in n.cards.iter().enumerate() {
                if shown(n, c) {
                    cards.push((ni, ci));
                }
            }
        }
        self.list.rows.clear();
        if self.sort == SortKey::Node {
            let mut last = None;
            for (ni, ci) in cards {
                if last != Some(ni) {
                    self.list.rows.push(Row::Node(ni));
                    last = Some(ni);
                }
                self.list.rows.push(Row::Card(ni, ci));
            }
        } else {
            self.sorted_rows(fleet, cards);
        }
    }

    /// `cards` as rows in the sort's order: largest first (htop's habit); reversed, smallest
    /// first; ties keep fleet order.
    fn sorted_rows(&mut self, fleet: &Fleet, cards: Vec<(usize, usize)>) {
        let sort = self.sort;
        let key = |&(ni, ci): &(usize, usize)| -> f64 {
            let c = &fleet.nodes[ni].cards[ci];
            match sort {
                SortKey::Util => c.activity_pct().unwrap_or(-1.0),
                SortKey::Memory => c.memory_used_mib.map_or(-1.0, |m| m as f64),
                SortKey::Temp => c.temperature_c.unwrap_or(-1.0),
                SortKey::Power => c.power_w.unwrap_or(-1.0),
                // Free capacity, not a count of units: an idle H200 above seven free 1g.
                SortKey::Free => crate::model::capacity::free_gib(&fleet.nodes[ni], c),
                SortKey::Health => f64::from(u8::from(c.health.fault().is_some()) * 2 + u8::from(c.draining)),
                SortKey::Node => 0.0,
            }
        };
        let mut keyed: Vec<(f64, (usize, usize))> = cards.into_iter().map(|c| (key(&c), c)).collect();
        let reverse = self.reverse;
        keyed.sort_by(|a, b| {
            let by = if reverse { a.0.total_cmp(&b.0) } else { b.0.total_cmp(&a.0) };
            by.then(a.1.cmp(&b.1))
        });
        self.list.rows.extend(keyed.into_iter().map(|(_, (n, c))| Row::Card(n, c)));
    }

    /// The row of card `r` in rows built from `fleet`.
    pub fn row_of(&self, fleet: &Fleet, r: &CardRef) -> Option<usize> {
        self.list.rows.iter().position(|row| match row {
            Row::Card(ni, ci) => {
                fleet.nodes[*ni].name == r.node && fleet.nodes[*ni].cards.get(*ci).is_some_and(|c| c.index == r.index)
            }
            Row::Node(_) => false,
        })
    }

    /// Remember the nodes and cards the rows were built from. Most rebuilds (a filter, a
    /// sort, a refresh) see the same nodes and cards: keep the list then, rather than copy
    /// every node's name again.
    pub fn remember(&mut self, fleet: &Fleet) {
        let same = self.built_from.len() == fleet.nodes.len()
            && self.built_from.iter().zip(&fleet.nodes).all(|((name, cards), n)| {
                *name == n.name
                    && cards.len() == n.cards.len()
                    && cards.iter().zip(&n.cards).all(|(i, c)| *i == c.index)
            });
        if !same {
            self.built_from =
                fleet.nodes.iter().map(|n| (n.name.clone(), n.cards.iter().map(|c| c.index).collect())).collect();
        }
    }

    /// The card on row `row`, by identity.
    pub fn ref_at(&self, row: usize) -> Option<CardRef> {
        let Row::Card(ni, ci) = *self.list.rows.get(row)? else { return None };
        let (name, cards) = self.built_from.get(ni)?;
        Some(CardRef::new(name.clone(), *cards.get(ci)?))
    }
}
