//! Variants of a trace for the placements' tests and the benchmark, made as the paper's
//! repository made its own (from the default trace, resource triples kept): more pods
//! sharing a GPU, more pods held to GPU models, more pods of several GPUs. Deterministic.

use crate::simulate::{Fleet, Job};

/// The sharing shares of the default trace (thousandths of a GPU).
const SHARES: [u32; 20] =
    [50, 110, 140, 160, 220, 230, 270, 290, 320, 330, 350, 370, 440, 460, 470, 480, 550, 590, 650, 810];

/// Every other whole one-GPU pod asks a share instead (the trace's shares in turn).
pub fn more_sharing(jobs: &[Job]) -> Vec<Job> {
    let mut k = 0usize;
    jobs.iter()
        .map(|j| {
            let mut j = j.clone();
            if j.gpus == 1 && j.milli == 1000 {
                if k.is_multiple_of(2) {
                    j.milli = SHARES[(k / 2) % SHARES.len()];
                }
                k += 1;
            }
            j
        })
        .collect()
}

/// One GPU pod in three is held to the model of a node drawn by GPUs (the fleet's mix).
pub fn more_models(jobs: &[Job], fleet: &Fleet) -> Vec<Job> {
    let cards: Vec<u16> = fleet.nodes.iter().flat_map(|n| std::iter::repeat_n(n.model, n.gpus as usize)).collect();
    let mut k = 0usize;
    jobs.iter()
        .map(|j| {
            let mut j = j.clone();
            if j.gpus > 0 {
                if k.is_multiple_of(3) && !cards.is_empty() {
                    let m = cards[(k / 3).wrapping_mul(7919) % cards.len()];
                    j.models = vec![fleet.models[m as usize].name.clone()];
                }
                k += 1;
            }
            j
        })
        .collect()
}

/// One whole one-GPU pod in four asks 2, 4 or 8 whole GPUs in turn.
pub fn more_multi_gpu(jobs: &[Job]) -> Vec<Job> {
    let mut k = 0usize;
    jobs.iter()
        .map(|j| {
            let mut j = j.clone();
            if j.gpus == 1 && j.milli == 1000 {
                if k.is_multiple_of(4) {
                    j.gpus = [2, 4, 8][(k / 4) % 3];
                }
                k += 1;
            }
            j
        })
        .collect()
}
