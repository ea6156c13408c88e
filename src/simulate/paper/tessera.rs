//! tessera's `frag-aware` placement in a packing: the paper's fragmentation measure with
//! host memory counted (a typical pod that finds too little memory on a node cannot use its
//! GPUs, as one that finds too little CPU), its growth compared in steps of `STEP` GPU
//! thousandths instead of FGD's truncated sigmoid, equal steps to the per-seed node ranking.
//!
//! Why: on the trace most pods that fail at high load fail for host memory, which FGD's
//! measure does not see; and comparing the growth exactly packs pods onto the same nodes
//! and strands their CPU and memory (measured: 7.5 % unallocated at 100 % arrived against
//! FGD's 4.8 %), while a coarse step leaves near-equal choices to the random ranking and
//! spreads them. FGD's score moves one point per about 40 thousandths near no change and
//! saturates for large changes; a linear step of 80 neither over-splits small changes nor
//! merges large ones (docs/benchmarks.md gives the steps tried).

use super::frag::{Measure, Summary};
use super::trace::Shape;

/// tessera's measure counts host memory.
pub const WITH_MEM: bool = true;
/// tessera's measure leaves out, at a node, the typical pods held to other models.
pub const NO_ACCESS: bool = false;

/// The step, GPU thousandths, in which growths of fragmentation are compared.
pub const STEP: f64 = 80.0;

/// The score (higher is better) of a change of fragmentation from `before` to `after`.
pub fn step_score(before: f64, after: f64) -> f64 {
    ((before - after) / STEP).floor()
}

/// The score of shape `s` on a node of `model` with host CPU and memory `host` left after
/// it, free GPUs `gpus` summarised as `summary`, fragmentation `before`; `after_share(i)` the
/// free share of GPU `i` once a share lands there. With the GPU a share pod takes (the
/// first of equal scores).
#[allow(clippy::too_many_arguments)]
pub fn score(
    m: &Measure,
    model: u16,
    host: (i64, i64),
    summary: &Summary,
    before: f64,
    gpus: &[u16],
    s: &Shape,
    after_share: impl Fn(usize) -> u16,
) -> ((f64, f64), u16) {
    if !s.is_share() {
        let changes = vec![(1000u16, 0u16); s.gpus as usize];
        return ((step_score(before, m.amount(model, host, summary, &changes)), 0.0), 0);
    }
    let mut best: Option<((f64, f64), u16)> = None;
    for (i, &l) in gpus.iter().enumerate() {
        if u32::from(l) < s.take {
            continue;
        }
        let score = (step_score(before, m.amount(model, host, summary, &[(l, after_share(i))])), 0.0);
        if best.is_none_or(|b| score > b.0) {
            best = Some((score, i as u16));
        }
    }
    best.unwrap_or(((f64::MIN, f64::MIN), 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn growths_compare_in_steps() {
        assert_eq!(step_score(100.0, 100.0), 0.0);
        assert_eq!(step_score(100.0, 150.0), -1.0, "any growth under a step ties with the others under it");
        assert_eq!(step_score(100.0, 179.0), -1.0);
        assert_eq!(step_score(100.0, 181.0), -2.0);
        assert_eq!(step_score(200.0, 100.0), 1.0);
    }
}
