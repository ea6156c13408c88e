//! The row lists of every view, rebuilt from the fleet, the filter and the sort, with the
//! fleet's selection kept on its card by identity.

use super::*;

impl UiState {
    /// Rebuild the row lists from the fleet, the filter and the sort.
    pub fn rebuild(&mut self, fleet: &Fleet) {
        let keep = self.ref_at(self.fleet.list.selected);
        let matcher = self.filter.parsed.over(fleet);
        let mut cards: Vec<(usize, usize)> = Vec::new();
        for (ni, n) in fleet.nodes.iter().enumerate() {
            for (ci, c) in n.cards.iter().enumerate() {
                if self.filter.parsed.is_empty() || matcher.card(n, c) {
                    cards.push((ni, ci));
                }
            }
        }
        self.fleet.list.rows.clear();
        if self.fleet.sort == SortKey::Node {
            let mut last = None;
            for (ni, ci) in cards {
                if last != Some(ni) {
                    self.fleet.list.rows.push(Row::Node(ni));
                    last = Some(ni);
                }
                self.fleet.list.rows.push(Row::Card(ni, ci));
            }
        } else {
            let key = |&(ni, ci): &(usize, usize)| -> f64 {
                let c = &fleet.nodes[ni].cards[ci];
                match self.fleet.sort {
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
            // Largest first (htop's habit); reversed, smallest first. Ties keep fleet order.
            let reverse = self.fleet.reverse;
            keyed.sort_by(|a, b| {
                let by = if reverse { a.0.total_cmp(&b.0) } else { b.0.total_cmp(&a.0) };
                by.then(a.1.cmp(&b.1))
            });
            self.fleet.list.rows.extend(keyed.into_iter().map(|(_, (n, c))| Row::Card(n, c)));
        }
        let shown = |i: &usize| self.filter.parsed.is_empty() || matcher.workload(&fleet.workloads[*i]);
        let mut pending: Vec<usize> = (0..fleet.workloads.len())
            .filter(|&i| fleet.workloads[i].state == WorkloadState::Pending)
            .filter(shown)
            .collect();
        pending.sort_by_key(|&i| {
            let w = &fleet.workloads[i];
            (std::cmp::Reverse(w.priority), w.submitted_at, i)
        });
        self.queue.list.rows = pending;
        let active: Vec<usize> =
            (0..fleet.workloads.len()).filter(|&i| fleet.workloads[i].state.is_active()).filter(shown).collect();
        self.workloads.rows = by_place(fleet, active);
        if let Some(r) = keep
            && let Some(pos) = self.fleet.list.rows.iter().position(|row| match row {
                Row::Card(ni, ci) => {
                    fleet.nodes[*ni].name == r.node
                        && fleet.nodes[*ni].cards.get(*ci).is_some_and(|c| c.index == r.index)
                }
                Row::Node(_) => false,
            })
        {
            self.fleet.list.selected = pos;
        }
        for t in Tab::ALL {
            self.clamp(t);
        }
        if matches!(self.fleet.list.rows.get(self.fleet.list.selected), Some(Row::Node(_))) {
            self.step_in(Tab::Fleet, 1);
        }
        // Most rebuilds (a filter, a sort, a refresh) see the same nodes and cards: keep the
        // list then, rather than copy every node's name again.
        let same = self.fleet.built_from.len() == fleet.nodes.len()
            && self.fleet.built_from.iter().zip(&fleet.nodes).all(|((name, cards), n)| {
                *name == n.name
                    && cards.len() == n.cards.len()
                    && cards.iter().zip(&n.cards).all(|(i, c)| *i == c.index)
            });
        if !same {
            self.fleet.built_from =
                fleet.nodes.iter().map(|n| (n.name.clone(), n.cards.iter().map(|c| c.index).collect())).collect();
        }
    }

    /// The card on fleet row `row`, by identity.
    pub(super) fn ref_at(&self, row: usize) -> Option<CardRef> {
        let Row::Card(ni, ci) = *self.fleet.list.rows.get(row)? else { return None };
        let (name, cards) = self.fleet.built_from.get(ni)?;
        Some(CardRef::new(name.clone(), *cards.get(ci)?))
    }
}

/// Workloads in order of their node's name, then their first card (node name, index), then
/// their place in the fleet. The names are ranked once, so tens of thousands of workloads sort
/// by numbers rather than by comparing names.
fn by_place(fleet: &Fleet, rows: Vec<usize>) -> Vec<usize> {
    let distinct: foldhash::HashSet<&str> = rows
        .iter()
        .flat_map(|&i| {
            let w = &fleet.workloads[i];
            w.node.as_deref().into_iter().chain(w.cards.first().map(|r| r.node.as_str()))
        })
        .collect();
    let mut names: Vec<&str> = distinct.into_iter().collect();
    names.sort_unstable();
    let rank: foldhash::HashMap<&str, u32> = names.iter().enumerate().map(|(i, n)| (*n, i as u32)).collect();
    let of = |n: &str| rank.get(n).copied().unwrap_or(u32::MAX);
    // `None` before any name, as `Option`'s order puts it. Each key is made once, not at
    // every comparison (two lookups a comparison were most of a rebuild at 45,000 workloads).
    let mut keyed: Vec<_> = rows
        .into_iter()
        .map(|i| {
            let w = &fleet.workloads[i];
            (w.node.as_deref().map(of), w.cards.first().map(|r| (of(&r.node), r.index)), i)
        })
        .collect();
    keyed.sort_unstable();
    keyed.into_iter().map(|(_, _, i)| i).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{CardRef, Workload, WorkloadKind};

    #[test]
    fn workloads_sort_by_node_then_first_card_as_the_names_compare() {
        let w = |id: &str, node: Option<&str>, card: Option<(&str, u32)>| {
            let mut w = Workload::new(id, id, WorkloadKind::Training, WorkloadState::Running);
            w.node = node.map(str::to_string);
            w.cards = card.map(|(n, i)| CardRef::new(n.to_string(), i)).into_iter().collect();
            w
        };
        let fleet = Fleet {
            workloads: vec![
                w("a", Some("gpu-b"), Some(("gpu-b", 3))),
                w("b", None, None),
                w("c", Some("gpu-a"), Some(("gpu-a", 1))),
                w("d", Some("gpu-b"), Some(("gpu-b", 0))),
                w("e", Some("gpu-a"), None),
                w("f", None, Some(("gpu-z", 0))),
                w("g", Some("gpu-a"), Some(("gpu-c", 0))),
                w("h", Some("gpu-a"), Some(("gpu-a", 1))),
                w("i", Some("gpu-a10"), Some(("gpu-a10", 2))),
                w("j", Some("gpu-a"), Some(("gpu-a10", 2))),
            ],
            ..Fleet::default()
        };
        let rows: Vec<usize> = (0..fleet.workloads.len()).collect();
        let mut want = rows.clone();
        want.sort_by(|&a, &b| {
            let (wa, wb) = (&fleet.workloads[a], &fleet.workloads[b]);
            (&wa.node, wa.cards.first()).cmp(&(&wb.node, wb.cards.first())).then(a.cmp(&b))
        });
        let got = by_place(&fleet, rows);
        assert_eq!(got, want);
        let ids: String = got.iter().map(|&i| fleet.workloads[i].id.as_str()).collect();
        assert_eq!(ids, "bfechjgida");
    }
}
