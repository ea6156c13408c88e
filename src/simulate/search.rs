//! The capacity answer: the fewest GPUs (the fleet cut or grown along its proportional
//! order, so the mix of models stays) with which a policy meets a p90 queue-wait target and
//! starts every job it started on the whole fleet. A binary search over the number of nodes:
//! it takes more GPUs never to wait longer, which holds for the queue's rules in practice,
//! not in every corner. MIG layouts are sized to the demand's mix at every size tried.

use serde::Serialize;

use super::fleet::Fleet;
use super::job::Job;
use super::layouts;
use super::policy::{Policy, Settings};
use super::replay::Run;

/// Grown fleets go up to this many times the given one.
pub const MAX_GROWTH: usize = 16;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Answer {
    pub policy: Policy,
    pub target_p90_wait_s: i64,
    /// `None`: not even `MAX_GROWTH` times the fleet meets it.
    pub gpus: Option<u64>,
    pub nodes: Option<usize>,
    pub p90_wait_s: Option<i64>,
    /// Replays the search ran.
    pub runs: u32,
}

/// The fleet repeated `times` times (nodes renamed `NAME+k`).
pub fn grown(fleet: &Fleet, times: usize) -> Fleet {
    let mut f = fleet.clone();
    for k in 1..times {
        f.nodes.extend(
            fleet.nodes.iter().map(|n| super::fleet::Node { name: format!("{}+{k}", n.name).into(), ..n.clone() }),
        );
    }
    f
}

/// Replay `jobs` on `fleet` under `policy`: p90 wait and jobs left unstarted. A fleet of
/// another size gets MIG layouts sized to the demand's mix, not today's cards' layouts (which
/// were chosen for today's fleet, and copied would keep a job of a whole node from any node).
fn probe(jobs: &[Job], fleet: &Fleet, policy: Policy, s: &Settings) -> (i64, u64, u64) {
    let mut fleet = fleet.clone();
    fleet.nodes.iter_mut().for_each(|n| n.layouts.clear());
    let fleet = &fleet;
    let l = layouts::initial(fleet, jobs);
    let r = Run::new(jobs, fleet, policy, &l, s).run(&mut |_| {});
    (r.wait.p90_s, r.never_started, r.unplaceable)
}

pub fn fewest_gpus(jobs: &[Job], fleet: &Fleet, policy: Policy, s: &Settings, target_s: i64) -> Answer {
    let mut runs = 0u32;
    let mut answer = Answer { policy, target_p90_wait_s: target_s, gpus: None, nodes: None, p90_wait_s: None, runs };
    // The largest fleet tried: the given one, doubled until it meets the target.
    let mut times = 1;
    let (big, unplaceable, big_p90) = loop {
        let f = grown(fleet, times);
        let (p90, never, unplaceable) = probe(jobs, &f, policy, s);
        runs += 1;
        if p90 <= target_s && never == 0 {
            break (f, unplaceable, p90);
        }
        if times >= MAX_GROWTH {
            answer.runs = runs;
            return answer;
        }
        times *= 2;
    };
    let order = big.proportional_order();
    let (mut lo, mut hi) = (0usize, order.len());
    let mut best = (hi, None);
    while lo + 1 < hi {
        let mid = (lo + hi) / 2;
        let f = big.subset(&order[..mid]);
        let (p90, never, u) = probe(jobs, &f, policy, s);
        runs += 1;
        if p90 <= target_s && never == 0 && u == unplaceable {
            hi = mid;
            best = (mid, Some(p90));
        } else {
            lo = mid;
        }
    }
    // No smaller fleet met it: the whole of `big`, as it was measured (its own node order).
    let (f, p90) = match best.1 {
        Some(p) => (big.subset(&order[..best.0]), p),
        None => (big, big_p90),
    };
    answer.gpus = Some(f.gpus());
    answer.nodes = Some(f.nodes.len());
    answer.p90_wait_s = Some(p90);
    answer.runs = runs;
    answer
}
