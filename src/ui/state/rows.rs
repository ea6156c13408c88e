//! The row lists of every view, rebuilt from the fleet, the filter and the sort, with the
//! fleet's selection kept on its card by identity.

use super::*;

impl UiState {
    /// Rebuild the row lists from the fleet, the filter and the sort.
    pub fn rebuild(&mut self, fleet: &Fleet) {
        let keep = self.selected_card();
        let matcher = self.filter.parsed.over(fleet);
        let all = self.filter.parsed.is_empty();
        self.fleet.build_rows(fleet, |n, c| all || matcher.card(n, c));
        let shown = |w: &crate::model::Workload| all || matcher.workload(w);
        self.queue.list.rows = queue::rows(fleet, shown);
        self.workloads.rows = workloads::rows(fleet, shown);
        if let Some(pos) = keep.and_then(|r| self.fleet.row_of(fleet, &r)) {
            self.fleet.list.selected = pos;
        }
        for t in Tab::ALL {
            self.clamp(t);
        }
        if matches!(self.fleet.list.current(), Some(Row::Node(_))) {
            self.step_in(Tab::Fleet, 1);
        }
        self.fleet.remember(fleet);
    }

    /// The card on fleet row `row`, by identity.
    pub(super) fn ref_at(&self, row: usize) -> Option<CardRef> {
        self.fleet.ref_at(row)
    }
}
