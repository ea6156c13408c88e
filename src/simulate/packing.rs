//! Packing (the experiment of "Beware of Fragmentation"): the runs of the paper's protocol
//! (paper.rs) per placement, summed up as a planner reads them: the unallocated GPUs per
//! arrived percent (median and min–max over the runs), and at each level asked the
//! unallocated GPUs per model, the fragmentation and the failed pods by cause and shape.

use serde::Serialize;

use super::fleet::Fleet;
use super::job::Job;
use super::paper::{self, Cause, Protocol, RunOut, Trace};
use super::policy::{Placement, Policy};

/// The unallocated GPUs at one arrived percent: shares of the fleet, the median of the runs
/// and their least and most.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Step {
    pub arrived: f64,
    pub unallocated: f64,
    pub unallocated_min: f64,
    pub unallocated_max: f64,
}

/// Unallocated GPUs of one model (median of the runs).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelGpus {
    pub model: String,
    pub gpus: u64,
    pub unallocated: f64,
}

/// What a planner reads at one arrived level (medians of the runs).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Level {
    pub arrived: f64,
    pub unallocated: f64,
    pub unallocated_min: f64,
    pub unallocated_max: f64,
    pub unallocated_by_model: Vec<ModelGpus>,
    /// The paper's fragmentation: idle GPUs the typical pods could not use, as GPUs and as
    /// a share of the idle ones.
    pub frag_gpus: f64,
    pub frag_ratio: f64,
    pub placed: f64,
    pub failed: f64,
    pub failed_by_cause: std::collections::BTreeMap<&'static str, f64>,
}

/// Failed pods of one shape for one cause, per run (mean).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FailedShape {
    pub shape: String,
    pub cause: Cause,
    pub per_run: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Packing {
    pub policy: Policy,
    pub placement: Placement,
    pub gpus: u64,
    pub runs: u32,
    pub seeds: Vec<i64>,
    /// One step per arrived percent.
    pub steps: Vec<Step>,
    pub levels: Vec<Level>,
    /// GPUs left unallocated when the arrivals end (median of the runs).
    pub unallocated_gpus: f64,
    /// Pods that found no room when they came, and those placed (median of the runs).
    pub failed: u64,
    pub placed: u64,
    pub failed_by_shape: Vec<FailedShape>,
}

/// Why a packing cannot run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PackError {
    #[error("the pod list has no GPU job ({pods} pods, none asks for a GPU)")]
    NoGpuJob { pods: usize },
    #[error("no node of the fleet can host any of the GPU jobs, even empty ({why})")]
    NothingFits { why: String },
    #[error(
        "--policy {0}: a packing compares placements on whole or shared cards: --policy share (the default) or exclusive"
    )]
    Policy(&'static str),
}

/// How a packing runs: the placements to compare and the protocol.
#[derive(Debug, Clone, PartialEq)]
pub struct PackWith {
    pub placements: Vec<Placement>,
    pub protocol: Protocol,
}

/// The median of `v` (the mean of the middle two for an even count), as numpy's.
pub fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len() % 2 == 1 { v[m] } else { (v[m - 1] + v[m]) / 2.0 }
}

fn band(values: impl Iterator<Item = f64>) -> (f64, f64, f64) {
    let mut v: Vec<f64> = values.filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return (f64::NAN, f64::NAN, f64::NAN);
    }
    let m = median(&mut v);
    (m, v[0], v[v.len() - 1])
}

/// Pack `jobs` (in trace order; CPU-only ones, `gpus` 0, take host CPU and memory) onto
/// `fleet` under `policy` as `with` says: a summary per placement.
pub fn pack(jobs: &[&Job], fleet: &Fleet, policy: Policy, with: &PackWith) -> Result<Vec<Packing>, PackError> {
    let whole_only = match policy {
        Policy::Exclusive => true,
        Policy::Share => false,
        other @ (Policy::Mig | Policy::Schedule | Policy::Adaptive | Policy::Dynamic) => {
            return Err(PackError::Policy(other.as_str()));
        }
    };
    let trace = Trace::new(jobs, whole_only);
    check(&trace, fleet)?;
    let outs = paper::run_all(&trace, fleet, &with.placements, &with.protocol);
    Ok(with
        .placements
        .iter()
        .zip(outs)
        .map(|(p, runs)| summary(&trace, fleet, policy, *p, &with.protocol, &runs))
        .collect())
}

/// A trace with no GPU job, or a fleet none of whose nodes could take any GPU job empty.
fn check(trace: &Trace, fleet: &Fleet) -> Result<(), PackError> {
    let gpu_shapes: Vec<&paper::Shape> = trace.shapes.iter().filter(|s| s.gpus > 0).collect();
    if gpu_shapes.is_empty() {
        return Err(PackError::NoGpuJob { pods: trace.pods.len() });
    }
    let access = trace.access(fleet);
    let fits = |s: &paper::Shape, n: &super::fleet::Node| {
        (n.cpu_milli == 0 || s.cpu <= n.cpu_milli)
            && (n.mem_mib == 0 || s.mem <= n.mem_mib)
            && s.gpus <= n.gpus
            && access[usize::from(s.spec)][n.model as usize]
    };
    if gpu_shapes.iter().any(|s| fleet.nodes.iter().any(|n| fits(s, n))) {
        return Ok(());
    }
    let most = fleet.nodes.iter().map(|n| n.gpus).max().unwrap_or(0);
    let least = gpu_shapes.iter().map(|s| s.gpus).min().unwrap_or(0);
    let why = if least > most {
        format!("the smallest asks {least} GPUs, the largest node has {most}")
    } else {
        "each asks more host CPU or memory, or other GPU models, than any node has".to_string()
    };
    Err(PackError::NothingFits { why })
}

fn summary(
    trace: &Trace,
    fleet: &Fleet,
    policy: Policy,
    placement: Placement,
    p: &Protocol,
    runs: &[RunOut],
) -> Packing {
    let gpus = fleet.gpus();
    let buckets = runs.iter().map(|r| r.buckets.len()).max().unwrap_or(0);
    let steps = (0..buckets)
        .filter_map(|b| {
            let (m, lo, hi) = band(runs.iter().filter_map(|r| r.buckets.get(b).copied().flatten()));
            m.is_finite().then_some(Step {
                arrived: b as f64 / 100.0,
                unallocated: m / 100.0,
                unallocated_min: lo / 100.0,
                unallocated_max: hi / 100.0,
            })
        })
        .collect::<Vec<_>>();
    let levels = p
        .levels
        .iter()
        .enumerate()
        .map(|(i, &level)| {
            let snaps: Vec<&paper::Snap> = runs.iter().filter_map(|r| r.snaps.get(i)).collect();
            let step = steps.iter().find(|s| (s.arrived * 100.0).round() as u32 == level);
            let med = |f: &dyn Fn(&paper::Snap) -> f64| band(snaps.iter().map(|s| f(s))).0;
            let by_model = fleet
                .models
                .iter()
                .enumerate()
                .map(|(m, model)| ModelGpus {
                    model: model.name.to_string(),
                    gpus: fleet.nodes.iter().filter(|n| n.model as usize == m).map(|n| u64::from(n.gpus)).sum(),
                    unallocated: med(&|s| s.unallocated_by_model.get(m).copied().unwrap_or(0.0)),
                })
                .collect();
            Level {
                arrived: f64::from(level) / 100.0,
                unallocated: step.map_or(f64::NAN, |s| s.unallocated),
                unallocated_min: step.map_or(f64::NAN, |s| s.unallocated_min),
                unallocated_max: step.map_or(f64::NAN, |s| s.unallocated_max),
                unallocated_by_model: by_model,
                frag_gpus: med(&|s| s.frag_gpus),
                frag_ratio: med(&|s| s.frag_ratio) / 100.0,
                placed: med(&|s| s.placed as f64),
                failed: med(&|s| s.failed as f64),
                failed_by_cause: Cause::ALL
                    .iter()
                    .map(|c| (c.as_str(), med(&|s| s.failed_by_cause[*c as usize] as f64)))
                    .collect(),
            }
        })
        .collect();
    let mut shapes: std::collections::BTreeMap<(String, Cause), u64> = std::collections::BTreeMap::new();
    for r in runs {
        for &(s, c, n) in &r.failed_shapes {
            *shapes.entry((trace.shapes[s as usize].label(&trace.specs), c)).or_default() += n;
        }
    }
    let n = runs.len().max(1) as f64;
    let mut failed_by_shape: Vec<FailedShape> =
        shapes.into_iter().map(|((shape, cause), k)| FailedShape { shape, cause, per_run: k as f64 / n }).collect();
    failed_by_shape.sort_by(|a, b| b.per_run.total_cmp(&a.per_run).then(a.shape.cmp(&b.shape)));
    Packing {
        policy,
        placement,
        gpus,
        runs: runs.len() as u32,
        seeds: (0..runs.len() as i64).map(|i| p.seed.saturating_add(i)).collect(),
        steps,
        levels,
        unallocated_gpus: band(runs.iter().map(|r| r.unallocated_gpus)).0,
        failed: band(runs.iter().map(|r| r.failed as f64)).0.round() as u64,
        placed: band(runs.iter().map(|r| r.placed as f64)).0.round() as u64,
        failed_by_shape,
    }
}
