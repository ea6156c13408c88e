//! The model's fleet and workloads as a what-if's fleet and jobs: the demo's cluster, a
//! recording's, the live fleet's (the console's projection); the names, classes and
//! priorities a workload's job takes (`input::recording::job` makes the demo's arrivals jobs).

use super::{Class, Fleet, Model, Node};
use crate::model::{Fleet as ModelFleet, WorkloadKind};

/// Training checkpoints this often where nothing says (the simulator's rhythm).
pub const CHECKPOINT_S: u32 = 30 * 60;

/// The fleet of a model fleet (live, recorded or the demo's): each node's cards by model (a
/// node of several models becomes one node per model, `NODE/MODEL`), their MIG layouts as
/// they are where any card of the node has MIG on, and the replicas of time-sliced or MPS
/// cards. The model fleet has no host CPU or memory: not limited.
pub fn fleet(fleet: &ModelFleet) -> Fleet {
    let mut out = Fleet::default();
    for n in &fleet.nodes {
        let mut groups: Vec<(Box<str>, Vec<&crate::model::Card>)> = Vec::new();
        for c in &n.cards {
            let name = model_name(&c.model);
            match groups.iter_mut().find(|(m, _)| *m == name) {
                Some((_, cards)) => cards.push(c),
                None => groups.push((name, vec![c])),
            }
        }
        let several = groups.len() > 1;
        for (name, cards) in groups {
            let m = out.model_index(&name);
            // A model the catalog and the data sheets do not know: the cards' own memory.
            if out.models[m as usize].memory_mib == 0 {
                out.models[m as usize].memory_mib = cards.iter().find_map(|c| c.memory_total_mib).unwrap_or(0);
            }
            let node_name = if several { format!("{}/{name}", n.name) } else { n.name.clone() };
            let mut node = Node::new(&node_name, m, cards.len() as u32);
            // The layouts as they are, whole cards included (a fleet as it is is never
            // re-planned for a demand). A DynamicMIG card's instances are its claims' of the
            // moment, not a layout: it counts whole.
            let dynamic = |c: &&crate::model::Card| c.dra.as_ref().is_some_and(|d| d.dynamic);
            node.dynamic_mig = !cards.is_empty() && cards.iter().all(dynamic);
            if out.models[m as usize].mig.is_some() {
                node.layouts = cards.iter().map(|c| (c.mig.enabled && !dynamic(c)).then(|| c.layout())).collect();
            }
            node.replicas = cards
                .iter()
                .filter(|c| c.sharing_mode().is_some_and(crate::model::SharingMode::unisolated))
                .find_map(|c| c.sharing.replicas.filter(|&r| r > 0));
            out.nodes.push(node);
        }
    }
    out
}

/// A card model as the simulated fleet names it.
pub fn model_name(raw: &str) -> Box<str> {
    if raw.trim().is_empty() {
        return "unknown".into();
    }
    Model::named(raw).name
}

/// The class a workload's kind is.
pub fn class(kind: WorkloadKind) -> Class {
    match kind {
        WorkloadKind::Inference => Class::Inference,
        WorkloadKind::Training => Class::Training,
        WorkloadKind::Other => Class::Other,
    }
}

/// A scheduler's priority, clamped to the engine's.
pub fn priority(p: Option<i64>) -> i32 {
    p.unwrap_or(0).clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32
}
