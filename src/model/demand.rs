//! Demand by hour of the day: how many MIG instances of each profile and how many whole cards
//! the workloads (running and waiting) ask for, as a running mean per UTC hour over the days
//! measured (recent days weigh more). Sampled at most every ten minutes of data time and only
//! while every queue source is live: a down scheduler is not an absence of demand. The advisor's schedule
//! suggestion reads it; the console and `schedule run` keep it between runs.

use std::collections::BTreeMap;

use chrono::{DateTime, Timelike, Utc};
use serde::{Deserialize, Serialize};

use super::fleet::Fleet;
use super::resource::Resource;
use super::source::SourceHealth;
use super::workload::WorkloadState;

/// One sample per this many seconds of data time at most.
pub const SAMPLE_EVERY_S: i64 = 600;

/// Shapes kept per hour (profiles and whole-card models): more than any fleet has.
pub const MAX_SHAPES: usize = 256;

/// The mean follows about a week of samples per hour (6 a day): older days fade.
const WINDOW: u32 = 42;

/// The key of whole-card demand for any model (`whole`) or one model (`whole:H100-80GB`).
pub fn whole_key(model: Option<&str>) -> String {
    model.map_or_else(|| "whole".to_string(), |m| format!("whole:{m}"))
}

/// One UTC hour of the day.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Hour {
    /// Samples taken in this hour (the mean's weight is capped at a week's).
    pub samples: u32,
    /// Mean demand per shape: a MIG profile (`1g.10gb`: instances) or `whole[:MODEL]` (cards).
    pub mean: BTreeMap<String, f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DemandHistory {
    /// Hours 0..24 (UTC).
    pub hours: Vec<Hour>,
    /// The data time of the last sample.
    pub last: Option<DateTime<Utc>>,
}

impl Default for DemandHistory {
    fn default() -> Self {
        Self { hours: vec![Hour::default(); 24], last: None }
    }
}

impl DemandHistory {
    /// Take a sample of `fleet` at data time `at`, if one is due and the queue can be believed.
    /// Returns whether it did.
    pub fn sample(&mut self, fleet: &Fleet, at: DateTime<Utc>) -> bool {
        if self.hours.len() != 24 {
            *self = Self::default();
        }
        if self.last.is_some_and(|l| (at - l).num_seconds().abs() < SAMPLE_EVERY_S) {
            return false;
        }
        // Every queue source live: one that is down would look like no demand of its own.
        let mut queue = fleet.sources.iter().filter(|s| s.queue).peekable();
        let live = queue.peek().is_some() && queue.all(|s| matches!(s.health, SourceHealth::Live { .. }));
        if !live {
            return false;
        }
        let mut now: BTreeMap<String, f64> = BTreeMap::new();
        for w in &fleet.workloads {
            if !matches!(w.state, WorkloadState::Running | WorkloadState::Pending) || !w.request.wants_gpu() {
                continue;
            }
            let (res, n) = w.request.asks();
            let key = match res {
                Resource::MigInstance { profile } => profile,
                Resource::WholeCard { model } => whole_key(model.as_deref()),
                Resource::Shared { .. } => continue,
            };
            if now.len() < MAX_SHAPES || now.contains_key(&key) {
                *now.entry(key).or_default() += n as f64;
            }
        }
        let h = &mut self.hours[at.hour() as usize];
        h.samples = h.samples.saturating_add(1);
        let weight = f64::from(h.samples.min(WINDOW));
        // Shapes not seen now count as 0 in this sample.
        let keys: std::collections::BTreeSet<String> = h.mean.keys().chain(now.keys()).cloned().collect();
        for k in keys {
            // A new shape only while there is room: the kept file stays readable.
            if !h.mean.contains_key(&k) && h.mean.len() >= MAX_SHAPES {
                continue;
            }
            let x = now.get(&k).copied().unwrap_or(0.0);
            let m = h.mean.entry(k).or_insert(0.0);
            *m += (x - *m) / weight;
        }
        self.last = Some(at);
        true
    }

    /// A history read back from a file, checked: 24 hours, finite means not below 0, and
    /// at most `MAX_SHAPES` shapes an hour.
    pub fn checked(self) -> Result<Self, HistoryError> {
        if self.hours.len() != 24 {
            return Err(HistoryError::Hours(self.hours.len()));
        }
        for (h, x) in self.hours.iter().enumerate() {
            if x.mean.len() > MAX_SHAPES {
                return Err(HistoryError::Shapes { hour: h, shapes: x.mean.len() });
            }
            if let Some((k, v)) = x.mean.iter().find(|(_, v)| !v.is_finite() || **v < 0.0) {
                return Err(HistoryError::Mean { hour: h, shape: k.clone(), mean: *v });
            }
        }
        Ok(self)
    }

    /// Hours of the day with at least one sample.
    pub fn covered(&self) -> usize {
        self.hours.iter().filter(|h| h.samples > 0).count()
    }

    /// Mean demand of `key` in hour `h` (0 where none was seen).
    pub fn mean(&self, h: usize, key: &str) -> f64 {
        self.hours.get(h).and_then(|x| x.mean.get(key)).copied().unwrap_or(0.0)
    }
}

/// Why a demand history read back from a file is refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum HistoryError {
    #[error("{0} hours, not 24")]
    Hours(usize),
    #[error("hour {hour}: {shapes} shapes (at most {MAX_SHAPES})")]
    Shapes { hour: usize, shapes: usize },
    /// A mean that is not a finite number at least 0.
    #[error("hour {hour}: {shape} = {mean}")]
    Mean { hour: usize, shape: String, mean: f64 },
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{SourceKind, SourceStatus, Workload, WorkloadKind};
    use chrono::TimeZone;

    fn fleet(jobs: &[(&str, Option<&str>, u32, WorkloadState)], queue_live: bool) -> Fleet {
        let mut f = Fleet::default();
        let mut s = SourceStatus::live("slurm", SourceKind::Slurm, Utc::now());
        if !queue_live {
            s.health = SourceHealth::Unavailable { reason: "down".into() };
        }
        f.sources.push(s);
        for (i, (id, profile, gpus, state)) in jobs.iter().enumerate() {
            let mut w = Workload::new(format!("{id}{i}"), id.to_string(), WorkloadKind::Inference, *state);
            w.request.mig_profile = profile.map(str::to_string);
            w.request.gpus = Some(*gpus);
            f.workloads.push(w);
        }
        f
    }

    fn at(h: u32, m: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 3, 2, h, m, 0).single().unwrap_or_default()
    }

    #[test]
    fn samples_count_instances_and_cards_per_hour_running_and_waiting() {
        use WorkloadState::{Completed, Pending, Running};
        let f = fleet(
            &[
                ("a", Some("1g.10gb"), 1, Running),
                ("b", Some("1g.10gb"), 1, Pending),
                ("c", None, 4, Running),
                ("d", None, 2, Completed),
            ],
            true,
        );
        let mut d = DemandHistory::default();
        assert!(d.sample(&f, at(9, 0)));
        assert_eq!((d.mean(9, "1g.10gb"), d.mean(9, "whole")), (2.0, 4.0));
        // Within ten minutes: no second sample.
        assert!(!d.sample(&f, at(9, 5)));
        // Half the demand at 09:10: the hour's mean is the mean of the two samples.
        let half = fleet(&[("a", Some("1g.10gb"), 1, Running), ("c", None, 2, Running)], true);
        assert!(d.sample(&half, at(9, 10)));
        assert_eq!((d.mean(9, "1g.10gb"), d.mean(9, "whole")), (1.5, 3.0));
        assert_eq!(d.covered(), 1);
        assert_eq!(d.mean(10, "1g.10gb"), 0.0);
    }

    #[test]
    fn no_sample_while_the_queue_source_is_down() {
        let f = fleet(&[("a", Some("1g.10gb"), 1, WorkloadState::Running)], false);
        let mut d = DemandHistory::default();
        assert!(!d.sample(&f, at(9, 0)));
        assert_eq!(d.covered(), 0);
    }

    #[test]
    fn old_days_fade_after_a_week_of_samples() {
        let busy = fleet(&[("a", Some("1g.10gb"), 1, WorkloadState::Running)], true);
        let quiet = fleet(&[], true);
        let mut d = DemandHistory::default();
        for i in 0..200 {
            d.sample(&busy, at(9, 0) + chrono::Duration::days(i));
        }
        for i in 200..242 {
            d.sample(&quiet, at(9, 0) + chrono::Duration::days(i));
        }
        // 42 quiet samples after many busy ones: mostly forgotten, not a 200:42 mean.
        assert!(d.mean(9, "1g.10gb") < 0.4, "{}", d.mean(9, "1g.10gb"));
    }

    #[test]
    fn a_history_round_trips_through_json() {
        let f = fleet(&[("a", Some("1g.10gb"), 1, WorkloadState::Running)], true);
        let mut d = DemandHistory::default();
        d.sample(&f, at(9, 0));
        let text = serde_json::to_string(&d).unwrap_or_default();
        let back: DemandHistory = serde_json::from_str(&text).unwrap_or_default();
        assert_eq!(back, d);
    }
}
