//! The model's fleet and workloads as a what-if's fleet and jobs: the demo's cluster and
//! arrivals, a recording's, the live fleet's (the console's projection).

use super::job::milli_of_slices;
use super::{Class, Fleet, Job};
use crate::model::{Fleet as ModelFleet, Workload, WorkloadKind};

/// Training checkpoints this often where nothing says (the simulator's rhythm).
pub const CHECKPOINT_S: u32 = 30 * 60;
/// A share of a card where the replicas per card are not known: a quarter.
pub const SHARE_MILLI: u32 = 250;

/// The fleet as the model holds it: each node's cards under the node's first card's model,
/// with their MIG layouts and replicas per card.
pub fn fleet(f: &ModelFleet) -> Fleet {
    let mut out = Fleet::default();
    for n in f.nodes.iter().filter(|n| !n.cards.is_empty()) {
        let first = &n.cards[0];
        let name = first
            .gpu_model()
            .map_or_else(|| first.short_model().unwrap_or_else(|| first.model.clone()), |m| m.name.clone());
        let m = out.model_index(&name);
        if out.models[m as usize].memory_mib == 0 {
            out.models[m as usize].memory_mib = first.memory_total_mib.unwrap_or(0);
        }
        let mut node = super::Node::new(&n.name, m, n.cards.len() as u32);
        if first.gpu_model().is_some() {
            node.layouts = n
                .cards
                .iter()
                .map(|c| if c.mig.enabled { Some(c.layout()).filter(|l| !l.is_empty()) } else { None })
                .collect();
        }
        node.replicas = n.cards.iter().find_map(|c| c.sharing.replicas).filter(|&r| r > 1);
        out.nodes.push(node);
    }
    out
}

/// What a workload asks as a job arriving at `submit` (seconds) for `duration` seconds;
/// `None` where it asks for no GPU.
pub fn job(w: &Workload, submit: i64, duration: i64, use_pct: Option<f64>) -> Option<Job> {
    let r = &w.request;
    if !r.wants_gpu() {
        return None;
    }
    let mut j = Job::new(&w.id, submit, duration, r.gpus.unwrap_or(1).max(1));
    if let Some(p) = &r.mig_profile {
        let prof = crate::model::mig::catalog::catalog()
            .models
            .iter()
            .find_map(|m| m.profile(p).map(|pr| (pr.compute_slices, m.compute_slices, pr.planning_mib())));
        let (slices, of, mem) = prof.unwrap_or((1, 7, 0));
        j.gpus = 1;
        j.milli = milli_of_slices(slices, of);
        j.mem_mib = mem;
    } else if let Some(s) = r.shares {
        j.gpus = 1;
        j.milli = (SHARE_MILLI * s.count.max(1)).min(1000);
    }
    if let Some(m) = &r.model {
        j.models = vec![super::Model::named(m).name];
    }
    j.class = match w.kind {
        WorkloadKind::Inference => Class::Inference,
        WorkloadKind::Training => Class::Training,
        WorkloadKind::Other => Class::Other,
    };
    j.priority = w.priority.unwrap_or(0).clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32;
    j.checkpoint_s = (j.class == Class::Training).then_some(CHECKPOINT_S);
    j.use_milli = use_pct.map_or(1000, |p| (p.clamp(0.0, 100.0) * 10.0).round() as u32);
    Some(j)
}
