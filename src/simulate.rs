//! The what-if engine behind `tessera simulate`: a discrete-event replay of a demand (jobs
//! with arrival, duration and request) on a fleet under a sharing policy, and the packing
//! experiment, with the metrics a capacity plan reads; pure: no clock, no files (the command
//! reads the inputs and prints). Deterministic for a seed.
//!
//! It stands on the project's MIG catalog (profiles, placements, maximal layouts, best fit),
//! the schedule windows and the preemption guard (inference never; training only past
//! `[policy] min_runtime`). docs/simulate.md says what the model includes and ignores.

pub mod adapt;
pub mod binding;
pub mod dynamic;
pub mod fleet;
pub mod from_model;
pub mod input;
pub mod job;
pub mod layouts;
pub mod metrics;
pub mod names;
pub mod node_types;
pub mod not_run;
pub mod packing;
pub mod paper;
pub mod place;
pub mod policy;
pub mod projection;
pub mod replay;
pub mod search;
pub mod state;

pub use fleet::{Fleet, FleetError, Model, Node};
pub use job::{Class, Job};
pub use metrics::{Report, Waits};
pub use packing::{PackError, PackWith, Packing, pack};
pub use policy::{Placement, Policy, Settings, Window};
pub use search::{Answer, fewest_gpus};

/// What the demand looked like before it ran: the notes a run prints above its table.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Prepared {
    /// Jobs whose arrival came before the previous line's (sorted into place).
    pub out_of_order: u64,
    /// Jobs that ask for no GPU (left out).
    pub without_gpu: u64,
}

/// Why a demand cannot run at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DemandError {
    #[error("the demand has no GPU jobs ({without} ask for no GPU)")]
    NoGpuJobs { without: u64 },
}

/// Put `jobs` in arrival order and times from zero; say what was mended. An error where
/// nothing is left to simulate.
pub fn prepare(jobs: &mut [Job], without_gpu: u64) -> Result<Prepared, DemandError> {
    let out_of_order = jobs.windows(2).filter(|w| w[1].submit < w[0].submit).count() as u64;
    jobs.sort_by_key(|j| j.submit);
    if jobs.is_empty() {
        return Err(DemandError::NoGpuJobs { without: without_gpu });
    }
    Ok(Prepared { out_of_order, without_gpu })
}

/// Replay `jobs` (in arrival order) on `fleet` under `policy`; `progress` hears the share
/// of arrivals done.
pub fn replay(jobs: &[Job], fleet: &Fleet, policy: Policy, s: &Settings, progress: &mut dyn FnMut(f64)) -> Report {
    let layouts = layouts::initial(fleet, jobs);
    replay::Run::new(jobs, fleet, policy, &layouts, s).run(progress)
}

/// The stretch of demand time every policy of one comparison is measured over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Period {
    /// The first arrival, seconds of demand time.
    #[serde(rename = "start")]
    pub start_s: i64,
    /// `--horizon`, else the latest end, over every policy, of the work that started.
    #[serde(rename = "end")]
    pub end_s: i64,
}

/// Each policy's replay, all measured over one window.
#[derive(Debug, Clone, PartialEq)]
pub struct Replays {
    pub reports: Vec<Report>,
    pub window: Period,
}

/// Replay `jobs` on `fleet` under each of `policies` and measure every one over the same
/// window: from the first arrival to the horizon, else to the latest end of the work that
/// started under any of them (work that never starts stretches no row). `progress` hears
/// the policy and its share of arrivals done.
pub fn replay_all(
    jobs: &[Job],
    fleet: &Fleet,
    policies: &[Policy],
    s: &Settings,
    progress: &mut dyn FnMut(Policy, f64),
) -> Replays {
    let layouts = layouts::initial(fleet, jobs);
    let mut runs = Vec::with_capacity(policies.len());
    for &p in policies {
        let mut run = replay::Run::new(jobs, fleet, p, &layouts, s);
        run.play(&mut |f| progress(p, f));
        runs.push(run);
    }
    let start_s = jobs.first().map_or(0, |j| j.submit);
    let end_s = runs.iter().map(replay::Run::played_to).max().unwrap_or(start_s).max(start_s);
    let reports = runs.into_iter().map(|r| r.report_until(end_s)).collect();
    Replays { reports, window: Period { start_s, end_s } }
}

#[cfg(test)]
#[path = "simulate_tests.rs"]
mod tests;
