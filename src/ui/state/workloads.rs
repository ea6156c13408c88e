//! The workloads view's rows: the active workloads, in order of where they run.

use crate::model::{Fleet, Workload};

/// The active workloads `shown` lets through, by place.
pub fn rows(fleet: &Fleet, shown: impl Fn(&Workload) -> bool) -> Vec<usize> {
    let active: Vec<usize> = (0..fleet.workloads.len())
        .filter(|&i| fleet.workloads[i].state.is_active() && shown(&fleet.workloads[i]))
        .collect();
    by_place(fleet, active)
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
    use crate::model::{CardRef, WorkloadKind, WorkloadState};

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
