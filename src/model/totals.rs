//! Fleet totals for the header: cards, mean activity, memory, MIG instances.

use super::fleet::Fleet;
use super::resource::Resource;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Totals {
    pub cards: usize,
    pub mean_util: Option<f64>,
    pub mem_used_mib: u64,
    pub mem_total_mib: u64,
    pub mig_used: usize,
    pub mig_total: usize,
    /// Cards that must not take work: lost, a fatal XID, uncorrectable ECC.
    pub unhealthy: usize,
    /// Cards whose health nothing reads (a DRA driver that publishes no health taints).
    pub health_unknown: usize,
}

impl Totals {
    pub fn compute(fleet: &Fleet) -> Self {
        let mut t = Self::default();
        let (mut sum, mut n) = (0.0, 0usize);
        for (_, c) in fleet.cards() {
            t.cards += 1;
            t.unhealthy += usize::from(c.health.fault().is_some());
            t.health_unknown += usize::from(c.health.fault().is_none() && c.health.unknown.is_some());
            if let Some(u) = c.activity_pct() {
                sum += u;
                n += 1;
            }
            t.mem_used_mib += c.memory_used_mib.unwrap_or(0);
            t.mem_total_mib += c.memory_total_mib.unwrap_or(0);
            t.mig_total += c.mig.instances.len();
            t.mig_used += c.mig.instances.iter().filter(|i| !i.workloads.is_empty() || i.in_use_by_unknown()).count();
        }
        // MIG instances only a scheduler counts (Slurm GRES, Kubernetes resources) on nodes
        // whose cards show none.
        for n in fleet.nodes.iter().filter(|n| n.cards.iter().all(|c| c.mig.instances.is_empty())) {
            for c in n.capacity.iter().filter(|c| matches!(c.resource, Resource::MigInstance { .. })) {
                t.mig_total += c.total as usize;
                t.mig_used += c.used as usize;
            }
        }
        t.mean_util = (n > 0).then(|| sum / n as f64);
        t
    }
}
