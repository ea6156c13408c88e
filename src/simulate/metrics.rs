//! What a run measured, per policy: the report a row of the table and an entry of the JSON
//! are made of, and the integrals the replay keeps to make it.

use serde::Serialize;

use super::job::Class;
use super::policy::{Placement, Policy};

/// Waits of one class, seconds (nearest-rank percentiles).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Waits {
    pub class: &'static str,
    pub jobs: u64,
    pub p50_s: i64,
    pub p90_s: i64,
    pub p99_s: i64,
}

/// One point of the timeline: GPUs held and jobs waiting at `t` (seconds of demand time).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Point {
    pub t: i64,
    pub held_gpus: f64,
    pub waiting: u32,
}

/// How one job went (kept when asked: the correctness tests read it).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct JobRun {
    pub first_start: Option<i64>,
    pub end: Option<i64>,
    /// Seconds it held cards, all runs together.
    pub ran_s: i64,
    /// Work lost to preemptions (since the last checkpoint) plus the checkpoint reloads.
    pub lost_s: i64,
    /// Its runtime at each preemption.
    pub preempted_after: Vec<i64>,
    pub waited_s: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    pub policy: Policy,
    pub placement: Placement,
    pub gpus: u64,
    pub jobs: u64,
    pub started: u64,
    /// Still waiting when the run ended (at the horizon, or nothing left could start them).
    pub never_started: u64,
    /// Bigger than any node (cards, host CPU or memory, card memory, model): never queued.
    pub unplaceable: u64,
    /// Why what did not run did not (unplaceable and never started), each cause once.
    pub not_run: Vec<super::not_run::NotRun>,
    /// GPU-hours the demand asks for (cards × share × duration).
    pub demand_gpu_hours: f64,
    /// The window measured, from the first arrival: the same for every policy of one run.
    pub span_hours: f64,
    /// Where the window ends, seconds of demand time.
    pub window_end_s: i64,
    /// Mean share of the fleet's GPUs held (whole cards, instances' compute, replicas' shares).
    pub held_mean: f64,
    pub held_peak_gpus: f64,
    /// Real use over held capacity, over the run.
    pub used_of_held: Option<f64>,
    pub waits: Vec<Waits>,
    /// All classes together.
    pub wait: Waits,
    pub preemptions: u64,
    pub lost_gpu_hours: f64,
    pub reconfigurations: u64,
    pub downtime_gpu_hours: f64,
    /// Hours latency-sensitive jobs shared a card with preemptible work.
    pub interference_hours: f64,
    /// Card-hours with nothing on them, and what they cost at `[advisor.prices]`.
    pub idle_gpu_hours: f64,
    pub idle_cost: Option<f64>,
    pub timeline: Vec<Point>,
    #[serde(skip)]
    pub job_runs: Vec<JobRun>,
}

/// Seconds as a wait reads: `0`, `45s`, `12m`, `3.4h`, `2.1d`.
pub fn format_wait(s: i64) -> String {
    match s {
        0 => "0".into(),
        1..=119 => format!("{s}s"),
        120..=7199 => format!("{}m", s / 60),
        7200..=172_799 => format!("{:.1}h", s as f64 / 3600.0),
        _ => format!("{:.1}d", s as f64 / 86_400.0),
    }
}

/// Nearest-rank percentile of sorted values.
pub fn percentile(sorted: &[i64], p: f64) -> i64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

pub fn waits(class: &'static str, mut v: Vec<i64>) -> Waits {
    v.sort_unstable();
    Waits {
        class,
        jobs: v.len() as u64,
        p50_s: percentile(&v, 50.0),
        p90_s: percentile(&v, 90.0),
        p99_s: percentile(&v, 99.0),
    }
}

/// Waits per class (classes with jobs) and over all.
pub fn all_waits(per_class: [Vec<i64>; 3]) -> (Vec<Waits>, Waits) {
    let all: Vec<i64> = per_class.iter().flatten().copied().collect();
    let each =
        Class::ALL.iter().zip(per_class).filter(|(_, v)| !v.is_empty()).map(|(c, v)| waits(c.as_str(), v)).collect();
    (each, waits("all", all))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank() {
        let v: Vec<i64> = (1..=10).collect();
        assert_eq!(percentile(&v, 50.0), 5);
        assert_eq!(percentile(&v, 90.0), 9);
        assert_eq!(percentile(&v, 99.0), 10);
        assert_eq!(percentile(&[], 90.0), 0);
        assert_eq!(percentile(&[7], 1.0), 7);
    }
}
