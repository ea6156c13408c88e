//! The packing experiment of "Beware of Fragmentation" (Weng et al., USENIX ATC '23) as its
//! simulator (hkust-adsl/kubernetes-scheduler-simulator) runs it: every pod of the trace,
//! shuffled per seed with Go's `math/rand`, inflated by random draws to a share of the
//! fleet's GPUs, placed one at a time with no departures; each placement scored as the
//! paper's plugins score it, ties to a node ranking drawn per seed; the unallocated GPUs per
//! arrival bucket as its analysis computes them. docs/simulate.md says what differs.

mod choose;
mod cluster;
mod cooked;
pub mod frag;
pub mod gorand;
pub mod order;
pub mod run;
mod tessera;
pub mod trace;

pub use cluster::Cause;
pub use order::Order;
pub use run::{RunOut, RunSpec, Snap};
pub use trace::{Shape, Trace};

use super::{Fleet, Placement};

/// The share of the trace's pods the typical pods cover (the paper's 95 %).
pub const TYPICAL_PERCENT: f64 = 95.0;

/// How the runs go: how many (seeds `seed`, `seed + 1`, ...), to what share of the fleet,
/// in what order, with a holder cap per GPU or none, and the levels to look at.
#[derive(Debug, Clone, PartialEq)]
pub struct Protocol {
    pub runs: u32,
    pub seed: i64,
    pub level: f64,
    pub order: Order,
    pub cap: Option<u32>,
    /// Arrived levels, percent, ascending.
    pub levels: Vec<u32>,
}

/// Every run of every placement, spread over the machine's cores: per placement, its runs
/// in seed order.
pub fn run_all(trace: &Trace, fleet: &Fleet, placements: &[Placement], p: &Protocol) -> Vec<Vec<RunOut>> {
    let access = trace.access(fleet);
    let measure = frag::Measure::new(trace, &access, TYPICAL_PERCENT);
    let ours = frag::Measure { with_mem: tessera::WITH_MEM, no_access: tessera::NO_ACCESS, ..measure.clone() };
    let jobs: Vec<(usize, u32)> = (0..placements.len()).flat_map(|i| (0..p.runs).map(move |r| (i, r))).collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let done: std::sync::Mutex<Vec<Option<RunOut>>> = std::sync::Mutex::new(vec![None; jobs.len()]);
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get()).min(jobs.len()).max(1);
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                loop {
                    let k = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(&(i, r)) = jobs.get(k) else { break };
                    let spec = RunSpec {
                        trace,
                        fleet,
                        measure: &measure,
                        ours: &ours,
                        access: &access,
                        placement: placements[i],
                        seed: p.seed.saturating_add(i64::from(r)),
                        level: p.level,
                        order: p.order,
                        cap: p.cap,
                        levels: &p.levels,
                    };
                    let out = run::run(&spec);
                    if let Ok(mut d) = done.lock() {
                        d[k] = Some(out);
                    }
                }
            });
        }
    });
    let mut done = done.into_inner().unwrap_or_default().into_iter();
    placements.iter().map(|_| (0..p.runs).filter_map(|_| done.next().flatten()).collect()).collect()
}

#[cfg(test)]
mod tests;
#[cfg(test)]
pub mod variants;
