//! One packing run (one seed, one placement): the pods placed one at a time in their order,
//! a failed one dropped for good; after each, the paper's row (GPUs arrived, GPUs allocated)
//! into its arrival bucket; at each level asked, what a planner reads (unallocated GPUs per
//! model, the fragmentation, failures by cause); failures by shape and cause.

use std::fmt::Write;

use super::choose::Chooser;
use super::cluster::{Cause, Cluster};
use super::frag::Measure;
use super::order::{Order, arrivals};
use super::trace::Trace;
use crate::simulate::{Fleet, Placement};

/// What a run is told.
#[derive(Debug, Clone, Copy)]
pub struct RunSpec<'a> {
    pub trace: &'a Trace,
    pub fleet: &'a Fleet,
    pub measure: &'a Measure,
    /// tessera's measure (`frag-aware` places by it).
    pub ours: &'a Measure,
    /// Per spec, per fleet model: may a pod held to the spec run there.
    pub access: &'a [Vec<bool>],
    pub placement: Placement,
    pub seed: i64,
    /// The share of the fleet's GPUs the arrivals reach.
    pub level: f64,
    pub order: Order,
    pub cap: Option<u32>,
    /// Arrived levels (percent, ascending) to take a snapshot at.
    pub levels: &'a [u32],
}

/// The cluster at an arrived level.
#[derive(Debug, Clone, PartialEq)]
pub struct Snap {
    pub level: u32,
    /// Unallocated GPUs per fleet model.
    pub unallocated_by_model: Vec<f64>,
    /// The paper's fragmentation: GPUs, and percent of the idle GPUs.
    pub frag_gpus: f64,
    pub frag_ratio: f64,
    pub failed_by_cause: [u64; 4],
    pub placed: u64,
    pub failed: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RunOut {
    /// Per arrived percent (0..): the paper's unallocated GPU percent (100 − the bucket's
    /// mean allocated percent), `None` where no row fell near it.
    pub buckets: Vec<Option<f64>>,
    pub snaps: Vec<Snap>,
    /// Failed pods per (shape, cause).
    pub failed_shapes: Vec<(u32, Cause, u64)>,
    pub placed: u64,
    pub failed: u64,
    pub unallocated_gpus: f64,
}

/// Python's `round(x, 2)` (half to even on the exact binary value), as the paper's analysis
/// rounds; Rust's formatting rounds the same way.
pub fn round2(x: f64, buf: &mut String) -> f64 {
    buf.clear();
    let _ = write!(buf, "{x:.2}");
    buf.parse().unwrap_or(x)
}

pub fn run(r: &RunSpec) -> RunOut {
    let gpus = r.fleet.gpus().max(1);
    let names: Vec<&str> = r.fleet.nodes.iter().map(|n| &*n.name).collect();
    let a = arrivals(r.trace, r.order, r.seed, r.level, gpus * 1000, &names);
    let mut cl = Cluster::new(r.fleet, &a.ranks, r.cap);
    let by = if r.placement == Placement::FragAware { r.ours } else { r.measure };
    let mut ch = Chooser::new(r.placement, by, r.trace, cl.nodes.len());
    let bucket = |arrived: u64| ((arrived as f64 / gpus as f64) / 10.0).round_ties_even().max(0.0) as usize;
    let top = (r.level * 100.0).ceil() as usize + 2;
    let (mut sums, mut counts) = (vec![0.0f64; top + 1], vec![0u64; top + 1]);
    let (mut arrived, mut placed, mut failed) = (0u64, 0u64, 0u64);
    let mut by_cause = [0u64; 4];
    let mut shapes: std::collections::HashMap<(u32, Cause), u64> = std::collections::HashMap::new();
    let mut snaps = Vec::new();
    let (mut buf, mut last_used, mut last_alloc) = (String::new(), u64::MAX, 0.0);
    for &pod in &a.pods {
        let shape = r.trace.pods[pod as usize];
        let s = &r.trace.shapes[shape as usize];
        let access = &r.access[usize::from(s.spec)];
        arrived += s.total_milli();
        let b = bucket(arrived);
        while snaps.len() < r.levels.len() && (r.levels[snaps.len()] as usize) < b {
            let level = r.levels[snaps.len()];
            snaps.push(snap(&cl, &mut ch, r.measure, level, [placed, failed], by_cause));
        }
        match ch.choose(&cl, r.trace, shape, access) {
            Some((n, taken)) => {
                let taken = taken.to_vec();
                cl.take(n, s, &taken);
                placed += 1;
            }
            None => {
                let cause = cl.cause(s, access);
                by_cause[cause as usize] += 1;
                *shapes.entry((shape, cause)).or_default() += 1;
                failed += 1;
            }
        }
        if cl.used != last_used {
            last_used = cl.used;
            last_alloc = round2((cl.used as f64 / gpus as f64) / 10.0, &mut buf);
        }
        if b <= top {
            sums[b] += last_alloc;
            counts[b] += 1;
        }
    }
    while snaps.len() < r.levels.len() {
        let level = r.levels[snaps.len()];
        snaps.push(snap(&cl, &mut ch, r.measure, level, [placed, failed], by_cause));
    }
    let max_b = (r.level * 100.0).round() as usize;
    let buckets = (0..=max_b)
        .map(|b| {
            let (lo, hi) = (b.saturating_sub(1), (b + 1).min(top));
            let (s, c) = if counts[b] > 0 {
                (sums[b], counts[b])
            } else {
                ((lo..=hi).map(|i| sums[i]).sum(), (lo..=hi).map(|i| counts[i]).sum())
            };
            (c > 0).then(|| round2(100.0 - round2(s / c as f64, &mut buf), &mut buf))
        })
        .collect();
    let mut failed_shapes: Vec<(u32, Cause, u64)> = shapes.into_iter().map(|((s, c), n)| (s, c, n)).collect();
    failed_shapes.sort_unstable();
    RunOut { buckets, snaps, failed_shapes, placed, failed, unallocated_gpus: gpus as f64 - cl.used as f64 / 1000.0 }
}

/// The cluster now; the fragmentation by the paper's measure `m` whatever the placement's.
fn snap(cl: &Cluster, ch: &mut Chooser, m: &Measure, level: u32, counts: [u64; 2], by_cause: [u64; 4]) -> Snap {
    let (mut frag, mut idle) = (0.0, 0.0);
    let same = std::ptr::eq(ch.measure, m);
    for n in 0..cl.nodes.len() {
        frag += if same {
            ch.cached(cl, n).frag
        } else {
            let node = &cl.nodes[n];
            m.amount(node.model, (node.cpu, node.mem), &m.summary(cl.gpus_of(n)), &[])
        };
        idle += cl.gpus_of(n).iter().map(|&l| f64::from(l)).sum::<f64>();
    }
    let unallocated_by_model =
        cl.cap_by_model.iter().zip(&cl.used_by_model).map(|(c, u)| (c - u) as f64 / 1000.0).collect();
    Snap {
        level,
        unallocated_by_model,
        frag_gpus: frag / 1000.0,
        frag_ratio: if idle > 0.0 { 100.0 * frag / idle } else { 0.0 },
        failed_by_cause: by_cause,
        placed: counts[0],
        failed: counts[1],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounding_is_pythons() {
        let mut b = String::new();
        assert_eq!(round2(0.125, &mut b), 0.12);
        assert_eq!(round2(0.375, &mut b), 0.38);
        assert_eq!(round2(2.675, &mut b), 2.67);
        assert_eq!(round2(7765.0 / 6212.0 / 10.0, &mut b), 0.12, "the spec's exact tie");
        let _ = Cause::ALL;
    }
}
