//! The capacity answer: the fewest GPUs, picked among the fleet's node types in any counts
//! up to what the fleet has (every type grown alike, up to `MAX_GROWTH` times, only where no
//! fleet within those counts meets it), with which a policy meets a p90 queue-wait target and
//! starts every job the fleet can host; and what decided it (`binding`).
//!
//! Replays are not monotone in capacity (one more node can change where jobs go and so the
//! waits), so the search never extrapolates: every answer is a fleet it replayed. Small
//! fleets (at most `EXHAUSTIVE` count vectors) are searched exhaustively in order of GPUs,
//! so the answer is the true optimum. Larger ones take the best of: each single node type
//! that can host every job, scanned upwards one node at a time (from one node, exact for that
//! type and so never more than the same search gives on a list of only that type; from half
//! the demand's mean load, a heuristic, for a type of more than `SCAN_FROM_ONE` nodes); the
//! proportional cut of the whole fleet (binary search); and a descent from the best of those
//! that lowers one type's count at a time (binary search per type). Last, one node fewer of
//! any type while that still meets the target.

use std::collections::HashMap;

use serde::Serialize;

use super::binding::{self, Binding};
use super::fleet::Fleet;
use super::job::Job;
use super::layouts;
use super::metrics::Report;
use super::node_types::Types;
use super::policy::{Policy, Settings};
use super::replay::Run;

/// Grown fleets go up to this many times the given one.
pub const MAX_GROWTH: usize = 16;
/// Fleets with at most this many count vectors are searched exhaustively.
pub const EXHAUSTIVE: u64 = 512;
/// A single type of at most this many nodes is scanned from one node.
pub const SCAN_FROM_ONE: usize = 256;

/// Nodes of one type in an answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Part {
    pub model: String,
    pub nodes: usize,
    pub gpus: u64,
    /// In words: `7 x G3 (8 GPUs, 96 cores, 768 GiB)`.
    pub text: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Answer {
    pub policy: Policy,
    pub target_p90_wait_s: i64,
    /// `None`: not even `MAX_GROWTH` times the fleet meets it.
    pub gpus: Option<u64>,
    pub nodes: Option<usize>,
    pub p90_wait_s: Option<i64>,
    /// The nodes of each type it takes.
    pub fleet: Vec<Part>,
    /// That size's own replay of the whole demand (waits, held, NOT RUN).
    pub row: Option<Report>,
    /// What decided the answer.
    pub binding: Option<Binding>,
    /// Where a node shape or GPU model binds: the answer for the other jobs alone.
    pub queue_alone_gpus: Option<u64>,
    /// How many times the fleet's own counts the search could take (1: the list as it
    /// is; more where the whole list falls short and every type was grown alike).
    pub grown: usize,
    /// `exhaustive` (the true optimum) or `search` (the best found, see above).
    pub method: &'static str,
    /// Replays the search ran.
    pub runs: u32,
}

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
pub(super) struct Search<'a> {
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
    fn exhaustive(&mut self, bounds: &[usize]) -> Option<Vec<usize>> {
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
    fn single(&mut self, t: usize, bound: usize, cap: u64) -> Option<Vec<usize>> {
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
    fn proportional(&mut self, bounds: &[usize]) -> Option<Vec<usize>> {
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
    fn descend(&mut self, mut counts: Vec<usize>) -> Vec<usize> {
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

/// The fewest GPUs among `types` (counts up to `bounds`) that serve `jobs`, and how found.
fn fewest(search: &mut Search, bounds: &[usize]) -> Option<(Vec<usize>, &'static str)> {
    let configs: u64 = bounds.iter().map(|&b| b as u64 + 1).try_fold(1u64, |a, b| a.checked_mul(b)).unwrap_or(u64::MAX);
    if configs <= EXHAUSTIVE {
        return search.exhaustive(bounds).map(|c| (c, "exhaustive"));
    }
    // Larger fleets: only where the whole of `bounds` meets the target (else grown).
    if !search.feasible(bounds) {
        return None;
    }
    let mut best: Option<Vec<usize>> = Some(bounds.to_vec());
    let gpus = |c: &Option<Vec<usize>>, t: &Types| c.as_ref().map_or(u64::MAX, |c| t.gpus(c));
    for (t, &bound) in bounds.iter().enumerate() {
        if !search.hostable_jobs().all(|j| search.types.hosts(t, j)) {
            continue;
        }
        let cap = gpus(&best, search.types);
        if let Some(c) = search.single(t, bound, cap) {
            best = Some(c);
        }
    }
    if let Some(c) = search.proportional(bounds)
        && search.types.gpus(&c) < gpus(&best, search.types)
    {
        best = Some(c);
    }
    let start = best?;
    let low = search.descend(start.clone());
    let found = if search.types.gpus(&low) < search.types.gpus(&start) { low } else { start };
    Some((found, "search"))
}

/// The fewest GPUs of `fleet`'s node types with which `policy` meets a p90 wait of
/// `target_s` and starts every job the fleet can host, and what decided it.
pub fn fewest_gpus(jobs: &[Job], fleet: &Fleet, policy: Policy, s: &Settings, target_s: i64) -> Answer {
    let types = Types::of(fleet);
    let mut answer = Answer {
        policy,
        target_p90_wait_s: target_s,
        gpus: None,
        nodes: None,
        p90_wait_s: None,
        fleet: Vec::new(),
        row: None,
        binding: None,
        queue_alone_gpus: None,
        grown: 1,
        method: "search",
        runs: 0,
    };
    let mut search = Search::new(jobs, &types, policy, s, target_s);
    // The bounds: the fleet's counts, doubled until some fleet within them meets the target
    // (a smaller one can where the whole cannot: MIG layouts sized to the mix go to other
    // cards on another fleet).
    let mut times = 1;
    let found = loop {
        let b: Vec<usize> = types.all().iter().map(|c| c * times).collect();
        if let Some((c, method)) = fewest(&mut search, &b) {
            break Some((b, c, method));
        }
        if times >= MAX_GROWTH {
            break None;
        }
        times *= 2;
    };
    answer.grown = times;
    let Some((bounds, mut counts, method)) = found else {
        answer.runs = search.runs;
        return answer;
    };
    // One node fewer of any type that still meets it (the search's heuristics can stop
    // short): taken, until none does.
    while let Some(less) = (0..counts.len()).filter(|&t| counts[t] > 0).find_map(|t| {
        let mut less = counts.clone();
        less[t] -= 1;
        search.feasible(&less).then_some(less)
    }) {
        counts = less;
    }
    // The replay the search judged, every job in it: the answer's own row.
    let row = search.replay(&counts);
    let decided = binding::decide(&mut search, &counts, &bounds, |search, rest, b| {
        // The other jobs alone: all of them hostable.
        let mut sub = Search::new(rest, search.types, search.policy, search.s, search.target_s);
        let found = fewest(&mut sub, b).map(|(c, _)| sub.types.gpus(&c));
        search.runs += sub.runs;
        found
    });
    answer.gpus = Some(types.gpus(&counts));
    answer.nodes = Some(counts.iter().sum());
    answer.p90_wait_s = Some(row.wait.p90_s);
    answer.fleet = counts
        .iter()
        .enumerate()
        .filter(|(_, c)| **c > 0)
        .map(|(t, &c)| Part {
            model: types.model(t).to_string(),
            nodes: c,
            gpus: u64::from(types.kinds[t].node.gpus) * c as u64,
            text: types.describe(t, c),
        })
        .collect();
    answer.row = Some(row);
    answer.binding = Some(decided.binding);
    answer.queue_alone_gpus = decided.queue_alone_gpus;
    answer.method = method;
    answer.runs = search.runs;
    answer
}

#[cfg(test)]
#[path = "search_tests.rs"]
mod tests;
