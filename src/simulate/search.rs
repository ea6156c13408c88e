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

use serde::Serialize;

use super::binding::{self, Binding};
use super::fleet::Fleet;
use super::job::Job;
use super::metrics::Report;
use super::node_types::Types;
use super::policy::{Policy, Settings};

pub mod space;

use space::Search;

/// Grown fleets go up to this many times the given one.
pub const MAX_GROWTH: usize = 16;
/// Fleets with at most this many count vectors are searched exhaustively.
pub const EXHAUSTIVE: u64 = 512;
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
