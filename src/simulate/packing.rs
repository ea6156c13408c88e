//! Packing (the experiment of "Beware of Fragmentation"): jobs arrive in trace order, then
//! drawn from the trace at random (seeded), and never leave, until the GPUs asked for reach a
//! share of the fleet; at each step, the share of the fleet's GPUs left unallocated.

use serde::Serialize;

use super::fleet::Fleet;
use super::job::Job;
use super::place::{Chooser, Mix};
use super::policy::{Placement, Policy};
use super::state::Cluster;
use crate::model::mig::Placed;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Step {
    /// GPUs asked for so far, as a share of the fleet.
    pub arrived: f64,
    /// GPUs not allocated, as a share of the fleet.
    pub unallocated: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Packing {
    pub policy: Policy,
    pub placement: Placement,
    pub gpus: u64,
    /// One step per percent of arrivals.
    pub steps: Vec<Step>,
    /// GPUs left unallocated when the arrivals reach the target share.
    pub unallocated_gpus: f64,
    /// Jobs that found no room when they came.
    pub failed: u64,
    pub placed: u64,
}

/// A small seeded generator (SplitMix64): the draws beyond the trace's own order.
#[derive(Debug, Clone)]
pub struct Draw(u64);

impl Draw {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub fn draw(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.draw() % n.max(1) as u64) as usize
    }
}

/// How a packing runs: where jobs go, until what share of the fleet is asked for, the seed
/// of the draws past the trace's own jobs, and replicas a card under `share`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PackWith {
    pub placement: Placement,
    pub target: f64,
    pub seed: u64,
    pub replicas: u32,
}

/// Pack `jobs` onto `fleet` until the GPUs asked for reach `with.target` (1.0: the fleet's size).
pub fn pack(jobs: &[Job], fleet: &Fleet, policy: Policy, layouts: &[Option<Vec<Placed>>], with: PackWith) -> Packing {
    let PackWith { placement, target, seed, replicas } = with;
    let gpus = fleet.gpus();
    let mut cl = Cluster::new(fleet, policy, replicas, layouts);
    let whole_only = policy.whole_only(fleet);
    let mut chooser = Chooser::new(placement, whole_only, Mix::new(jobs, whole_only), fleet.nodes.len());
    let mut draw = Draw::new(seed);
    let (mut asked, mut failed, mut placed) = (0.0f64, 0u64, 0u64);
    let mut steps = vec![Step { arrived: 0.0, unallocated: 1.0 }];
    let goal = target * gpus as f64;
    let mut k = 0usize;
    while asked < goal && !jobs.is_empty() {
        let i = if k < jobs.len() { k } else { draw.below(jobs.len()) };
        k += 1;
        let job = &jobs[i];
        asked += job.gpu_equivalents();
        match chooser.place(&cl, fleet, job, 0) {
            Some(hold) => {
                cl.take(i as u32, job, &hold, 0);
                chooser.changed(hold.node);
                placed += 1;
            }
            None => failed += 1,
        }
        let arrived = (asked / gpus as f64).min(target);
        let unallocated = 1.0 - cl.held_milli as f64 / 1000.0 / gpus as f64;
        if arrived >= steps.last().map_or(0.0, |s| s.arrived) + 0.01 || asked >= goal {
            steps.push(Step { arrived, unallocated });
        }
    }
    let unallocated_gpus = gpus as f64 - cl.held_milli as f64 / 1000.0;
    Packing { policy, placement, gpus, steps, unallocated_gpus, failed, placed }
}
