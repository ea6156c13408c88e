//! Invariants every fleet on screen must hold, whatever the sources said: memory used never
//! exceeds its total (card, MIG instance, workload), utilisation stays within 0–100 %,
//! temperature and power are readings a card can give, and nothing unusable counts as free. `violations` lists what is broken (for tests);
//! `enforce` turns a broken value into unknown, because a wrong number is worse than none.

use super::capacity;
use super::fleet::{Fleet, Node};
use super::workload::Workload;

fn over(used: Option<u64>, total: Option<u64>) -> bool {
    matches!((used, total), (Some(u), Some(t)) if u > t)
}

fn bad_pct(p: Option<f64>) -> bool {
    p.is_some_and(|p| !(0.0..=100.0).contains(&p))
}

/// A temperature no working card reports: below -40 C (the coldest rated ambient) or above
/// 150 C (past every shutdown threshold), or not a number (-273 C is a sensor's "none").
fn bad_temp(t: Option<f64>) -> bool {
    t.is_some_and(|t| !(-40.0..=150.0).contains(&t))
}

/// Watts below zero, or not a number.
fn bad_watts(w: Option<f64>) -> bool {
    w.is_some_and(|w| !(w >= 0.0 && w.is_finite()))
}

/// Everything in `fleet` that breaks an invariant, in words.
pub fn violations(fleet: &Fleet) -> Vec<String> {
    let mut out = Vec::new();
    for (n, c) in fleet.cards() {
        let at = format!("{}/{}", n.name, c.index);
        if over(c.memory_used_mib, c.memory_total_mib) {
            out.push(format!("{at}: memory {:?} over {:?} MiB", c.memory_used_mib, c.memory_total_mib));
        }
        if bad_pct(c.utilization_pct) {
            out.push(format!("{at}: utilisation {:?}", c.utilization_pct));
        }
        if bad_temp(c.temperature_c) {
            out.push(format!("{at}: temperature {:?} C", c.temperature_c));
        }
        for (what, w) in [("power", c.power_w), ("power limit", c.power_limit_w)] {
            if bad_watts(w) {
                out.push(format!("{at}: {what} {w:?} W"));
            }
        }
        for i in &c.mig.instances {
            if over(i.memory_used_mib, i.memory_total_mib) {
                out.push(format!(
                    "{at} {}@{}: memory {:?} over {:?}",
                    i.profile, i.start, i.memory_used_mib, i.memory_total_mib
                ));
            }
            if bad_pct(i.utilization_pct) {
                out.push(format!("{at} {}@{}: utilisation {:?}", i.profile, i.start, i.utilization_pct));
            }
        }
        if let (Some(u), Some(r)) = (c.sharing.replicas_used, c.sharing.replicas)
            && u > r
        {
            out.push(format!("{at}: {u} replicas in use of {r}"));
        }
        if capacity::free_units(n, c) > 0 && !capacity::usable(n, c) {
            out.push(format!("{at}: unusable but counted free"));
        }
    }
    for w in &fleet.workloads {
        if over(w.memory_used_mib, w.request.gpu_memory_mib) {
            out.push(format!("{}: memory {:?} over {:?}", w.id, w.memory_used_mib, w.request.gpu_memory_mib));
        }
    }
    out
}

/// Replace every value that breaks an invariant by unknown; the count of values replaced.
pub fn enforce(nodes: &mut [Node], workloads: &mut [Workload]) -> usize {
    let mut fixed = 0;
    let mut clear = |used: &mut Option<u64>, total: Option<u64>| {
        if over(*used, total) {
            *used = None;
            fixed += 1;
        }
    };
    for c in nodes.iter_mut().flat_map(|n| n.cards.iter_mut()) {
        clear(&mut c.memory_used_mib, c.memory_total_mib);
        let replicas = c.sharing.replicas.map(u64::from);
        let mut used = c.sharing.replicas_used.map(u64::from);
        clear(&mut used, replicas);
        c.sharing.replicas_used = used.and_then(|u| u32::try_from(u).ok());
        for i in &mut c.mig.instances {
            clear(&mut i.memory_used_mib, i.memory_total_mib);
        }
    }
    for w in workloads.iter_mut() {
        clear(&mut w.memory_used_mib, w.request.gpu_memory_mib);
    }
    let mut pct = |p: &mut Option<f64>| {
        if bad_pct(*p) {
            *p = None;
            fixed += 1;
        }
    };
    for c in nodes.iter_mut().flat_map(|n| n.cards.iter_mut()) {
        pct(&mut c.utilization_pct);
        for i in &mut c.mig.instances {
            pct(&mut i.utilization_pct);
        }
    }
    for c in nodes.iter_mut().flat_map(|n| n.cards.iter_mut()) {
        if bad_temp(c.temperature_c) {
            c.temperature_c = None;
            fixed += 1;
        }
        for w in [&mut c.power_w, &mut c.power_limit_w] {
            if bad_watts(*w) {
                *w = None;
                fixed += 1;
            }
        }
    }
    fixed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Card, WorkloadKind, WorkloadState};

    /// A reading no card can give (-273 C, negative watts, 5,000 C) is unknown, not shown.
    #[test]
    fn impossible_readings_become_unknown() {
        let card =
            Card { temperature_c: Some(-273.0), power_w: Some(-12.0), power_limit_w: Some(-1.0), ..Card::default() };
        let hot = Card { index: 1, temperature_c: Some(5000.0), power_w: Some(f64::NAN), ..Card::default() };
        let fine = Card { index: 2, temperature_c: Some(-5.0), power_w: Some(0.0), ..Card::default() };
        let mut nodes = vec![Node { cards: vec![card, hot, fine], ..Node::new("n") }];
        let fleet = Fleet { nodes: nodes.clone(), ..Fleet::default() };
        assert_eq!(violations(&fleet).len(), 5, "{:?}", violations(&fleet));
        assert_eq!(enforce(&mut nodes, &mut []), 5);
        let c = &nodes[0].cards;
        assert_eq!((c[0].temperature_c, c[0].power_w, c[0].power_limit_w), (None, None, None));
        assert_eq!((c[1].temperature_c, c[1].power_w), (None, None));
        assert_eq!((c[2].temperature_c, c[2].power_w), (Some(-5.0), Some(0.0)), "cold and idle are real");
    }

    #[test]
    fn values_over_their_total_become_unknown() {
        let card = Card {
            memory_total_mib: Some(81920),
            memory_used_mib: Some(23_514_931),
            utilization_pct: Some(140.0),
            sharing: crate::model::Sharing { replicas: Some(4), replicas_used: Some(6), ..Default::default() },
            ..Card::default()
        };
        let mut nodes = vec![Node { cards: vec![card], ..Node::new("n") }];
        let mut w = Workload::new("sim:40", "train", WorkloadKind::Training, WorkloadState::Running);
        w.request.gpu_memory_mib = Some(327_680);
        w.memory_used_mib = Some(94_059_520);
        let mut ws = vec![w];
        let fleet = Fleet { nodes: nodes.clone(), workloads: ws.clone(), ..Fleet::default() };
        assert_eq!(violations(&fleet).len(), 4);
        assert_eq!(enforce(&mut nodes, &mut ws), 4);
        assert_eq!(nodes[0].cards[0].sharing.replicas_used, None, "6 of 4 replicas is unknown, not 6");
        assert_eq!((nodes[0].cards[0].memory_used_mib, ws[0].memory_used_mib), (None, None));
        let fleet = Fleet { nodes, workloads: ws, ..Fleet::default() };
        assert!(violations(&fleet).is_empty());
    }
}
