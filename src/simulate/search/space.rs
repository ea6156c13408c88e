//! The search space of a capacity answer: count vectors of the fleet's node types, each
//! judged by a replay that is remembered, and the walks over them (every vector, one type
//! alone, a proportional cut, a descent one type at a time).

use std::collections::HashMap;

use crate::simulate::fleet::Fleet;
use crate::simulate::job::Job;
use crate::simulate::layouts;
use crate::simulate::metrics::Report;
use crate::simulate::node_types::Types;
use crate::simulate::policy::{Policy, Settings};
use crate::simulate::replay::Run;

/// A single type of at most this many nodes is scanned from one node.
pub const SCAN_FROM_ONE: usize = 256;

/// Replay `jobs` on `fleet` under `policy`, MIG layouts sized to the demand's mix (today's
/// cards' layouts were chosen for today's fleet, and copied would keep a job of a whole node
/// from any node).
pub fn probe(jobs: &[Job], fleet: &Fleet, policy: Policy, s: &Settings) -> Report {
    let mut fleet = fleet.clone();
    fleet.nodes.iter_mut().for_each(|n| n.layouts.clear());
    let l = layouts::initial(&fleet, jobs);
    Run::new(jobs, &fleet, policy, &l, s).run(&mut |_| {})
}

/// The search over count vectors of `types`, with its memory of what it replayed.
pub(in crate::simulate) struct Search<'a> {
    pub jobs: &'a [Job],
    pub types: &'a Types,
    pub policy: Policy,
    pub s: &'a Settings,
    pub target_s: i64,
    /// Per job: some node type of the fleet can host it. The others never run at any size:
    /// a size is judged on the rest (and its replay, the answer's row, is of every job).
    pub hostable: Vec<bool>,
    unhostable: u64,
    seen: HashMap<Vec<usize>, bool>,
    pub runs: u32,
}

impl<'a> Search<'a> {
    pub fn new(jobs: &'a [Job], types: &'a Types, policy: Policy, s: &'a Settings, target_s: i64) -> Self {
        let hostable: Vec<bool> = jobs.iter().map(|j| (0..types.kinds.len()).any(|t| types.hosts(t, j))).collect();
        let unhostable = hostable.iter().filter(|h| !**h).count() as u64;
        Self { jobs, types, policy, s, target_s, hostable, unhostable, seen: HashMap::new(), runs: 0 }
    }

    /// The jobs some node type of the fleet can host.
    pub fn hostable_jobs(&self) -> impl Iterator<Item = &'a Job> + '_ {
        self.jobs.iter().zip(&self.hostable).filter(|(_, h)| **h).map(|(j, _)| j)
    }

    /// Whether replay `r` meets the target and starts every job the fleet can host.
    pub fn meets(&self, r: &Report) -> bool {
        r.wait.p90_s <= self.target_s && r.never_started == 0 && r.unplaceable == self.unhostable
    }

    /// Jobs the fleet can host that replay `r` could not place on its smaller fleet.
    pub fn lost_hosts(&self, r: &Report) -> u64 {
        r.unplaceable.saturating_sub(self.unhostable)
    }

    pub fn replay(&mut self, counts: &[usize]) -> Report {
        self.runs += 1;
        probe(self.jobs, &self.types.fleet(counts), self.policy, self.s)
    }

    /// Meets the target and starts every job the fleet can host.
    pub fn feasible(&mut self, counts: &[usize]) -> bool {
        if counts.iter().all(|&c| c == 0) {
            return false;
        }
        if let Some(&f) = self.seen.get(counts) {
            return f;
        }
        let r = self.replay(counts);
        let ok = self.meets(&r);
        self.seen.insert(counts.to_vec(), ok);
        ok
    }

    /// Every count vector up to `bounds`, fewest GPUs first: the first feasible one.
    pub(super) fn exhaustive(&mut self, bounds: &[usize]) -> Option<Vec<usize>> {
        let mut all: Vec<Vec<usize>> = vec![Vec::new()];
        for &b in bounds {
            all = all.into_iter().flat_map(|v| (0..=b).map(move |c| [v.clone(), vec![c]].concat())).collect();
        }
        all.sort_by_key(|c| (self.types.gpus(c), c.iter().sum::<usize>(), c.clone()));
        all.into_iter().find(|c| self.feasible(c))
    }

    /// Type `t` alone, one node more at a time, up to `bound` nodes and below `cap` GPUs:
    /// from one node (exact) where the type has at most `SCAN_FROM_ONE` nodes, else from
    /// half the demand's mean load.
    pub(super) fn single(&mut self, t: usize, bound: usize, cap: u64) -> Option<Vec<usize>> {
        let per = u64::from(self.types.kinds[t].node.gpus).max(1);
        let from = if bound <= SCAN_FROM_ONE {
            1
        } else {
            (mean_load_gpus(self.jobs) / 2.0 / per as f64).floor().max(1.0) as usize
        };
        let mut counts = vec![0; self.types.kinds.len()];
        for k in from..=bound {
            if k as u64 * per >= cap {
                return None;
            }
            counts[t] = k;
            if self.feasible(&counts) {
                return Some(counts);
            }
        }
        None
    }

    /// The smallest proportional cut of `bounds` that is feasible (binary search).
    pub(super) fn proportional(&mut self, bounds: &[usize]) -> Option<Vec<usize>> {
        let total: usize = bounds.iter().sum();
        let cut = |k: usize| -> Vec<usize> {
            bounds.iter().map(|&b| if total == 0 { 0 } else { (b * k).div_ceil(total) }).collect()
        };
        let (mut lo, mut hi) = (0usize, total);
        let mut best = None;
        while lo + 1 < hi {
            let mid = (lo + hi) / 2;
            let c = cut(mid);
            if self.feasible(&c) {
                hi = mid;
                best = Some(c);
            } else {
                lo = mid;
            }
        }
        best
    }

    /// Lower one type's count at a time (binary search each), bigger nodes first, while the
    /// whole stays feasible; again until a pass changes nothing (three at most).
    pub(super) fn descend(&mut self, mut counts: Vec<usize>) -> Vec<usize> {
        let mut order: Vec<usize> = (0..counts.len()).collect();
        order.sort_by_key(|&t| std::cmp::Reverse(self.types.kinds[t].node.gpus));
        for _ in 0..3 {
            let before = counts.clone();
            for &t in &order {
                let (mut lo, mut hi) = (0usize, counts[t]);
                if hi == 0 {
                    continue;
                }
                let mut c = counts.clone();
                c[t] = 0;
                if self.feasible(&c) {
                    counts = c;
                    continue;
                }
                while lo + 1 < hi {
                    let mid = (lo + hi) / 2;
                    c[t] = mid;
                    if self.feasible(&c) {
                        hi = mid;
                    } else {
                        lo = mid;
                    }
                }
                counts[t] = hi;
            }
            if counts == before {
                break;
            }
        }
        counts
    }
}

/// GPU-equivalents the demand keeps busy on average from its first arrival to its last
/// end (where a big type's scan starts: a heuristic, since a p90 target lets a tenth of
/// the jobs wait past that end).
fn mean_load_gpus(jobs: &[Job]) -> f64 {
    let (first, last) = (jobs.first().map_or(0, |j| j.submit), jobs.iter().map(|j| j.submit + j.duration).max());
    let span = (last.unwrap_or(first) - first).max(1) as f64;
    jobs.iter().map(Job::gpu_seconds).sum::<f64>() / span
}
