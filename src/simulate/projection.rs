//! The console's projection: what the next 24 hours of the demand measured by hour would do
//! on the fleet as it is, and on the fleet after the advice's plan (its repartitions: layout
//! plans, a schedule's cost, packing), as p90 queue wait and GPUs held. The plan's preemptions
//! and drains change no capacity over a day of hourly means, so they are counted and said, not
//! modelled. A simulation on measured means, marked as such wherever it is shown.

use chrono::{DateTime, Timelike, Utc};

use super::{Class, Fleet, Job, Policy, Settings, from_model, replay};
use crate::model::Fleet as ModelFleet;
use crate::model::demand::DemandHistory;
use crate::model::mig::{LayoutSpec, parse_layout};

/// One side of the projection.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Outlook {
    pub p90_wait_s: i64,
    /// Mean share of the fleet's GPUs held.
    pub held: f64,
    pub never_started: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Projection {
    pub as_is: Outlook,
    pub following: Outlook,
    /// Cards the advice's plan lays out anew (what `following` follows).
    pub changes: usize,
    /// The plan's other actions (preemptions, drains, undrains): said, not modelled.
    pub others: usize,
    /// Jobs the measured demand makes over the 24 hours.
    pub jobs: usize,
    /// The plan it followed, to tell when the advice's plan has changed since.
    pub followed: crate::advisor::Followed,
}

/// The measured demand from `now`'s hour on as jobs: each hour's mean of each shape, rounded,
/// arriving at the hour for an hour (a profile: inference; whole cards: training).
pub fn demand_jobs(demand: &DemandHistory, now: DateTime<Utc>) -> Vec<Job> {
    let mut jobs = Vec::new();
    for k in 0..24usize {
        let Some(hour) = demand.hours.get((now.hour() as usize + k) % 24).filter(|h| h.samples > 0) else { continue };
        for (shape, mean) in &hour.mean {
            let n = mean.round().max(0.0) as u32;
            let mut template = Job::new(shape, k as i64 * 3600, 3600, 1);
            if let Some(model) = shape.strip_prefix("whole") {
                template.class = Class::Training;
                if let Some(m) = model.strip_prefix(':') {
                    template.models = vec![super::Model::named(m).name];
                }
            } else {
                let Some((milli, mem)) = super::input::csv::mig_profile(shape) else { continue };
                template.class = Class::Inference;
                template.milli = milli;
                template.mem_mib = mem;
            }
            jobs.extend((0..n.min(10_000)).map(|_| template.clone()));
        }
    }
    jobs
}

fn outlook(jobs: &[Job], fleet: &Fleet, s: &Settings) -> Outlook {
    let r = replay(jobs, fleet, Policy::Mig, s, &mut |_| {});
    Outlook { p90_wait_s: r.wait.p90_s, held: r.held_mean, never_started: r.never_started + r.unplaceable }
}

/// The projection for `fleet` with `demand`, as of `now`, following `plan` (the advice's
/// repartitions, and how many other actions it holds); `None` where no demand is measured.
pub fn project(
    fleet: &ModelFleet,
    demand: &DemandHistory,
    now: DateTime<Utc>,
    min_runtime_s: i64,
    plan: &crate::advisor::Followed,
) -> Option<Projection> {
    let jobs = demand_jobs(demand, now);
    if jobs.is_empty() {
        return None;
    }
    let s = Settings { min_runtime_s, horizon_s: Some(24 * 3600), timeline_points: 24, ..Settings::default() };
    let as_is_fleet = from_model::fleet(fleet);
    let mut following = as_is_fleet.clone();
    let mut changes = 0;
    for (card, layout) in &plan.layouts {
        let Some(node) = following.nodes.iter_mut().find(|n| *n.name == card.node) else { continue };
        let Some(gm) = following.models[node.model as usize].mig else { continue };
        let layout = match parse_layout(gm, layout) {
            Ok(LayoutSpec::Mig(l)) => Some(l),
            Ok(LayoutSpec::Whole) => None,
            Err(_) => continue,
        };
        if node.layouts.len() < node.gpus as usize {
            node.layouts.resize(node.gpus as usize, None);
        }
        if let Some(slot) = node.layouts.get_mut(card.index as usize) {
            *slot = layout;
            changes += 1;
        }
    }
    let others = plan.others;
    let as_is = outlook(&jobs, &as_is_fleet, &s);
    // Nothing laid out anew: the same fleet, the same answer (not simulated twice).
    let following = if changes == 0 { as_is } else { outlook(&jobs, &following, &s) };
    Some(Projection { as_is, following, changes, others, jobs: jobs.len(), followed: plan.clone() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sources::sim::{Sim, SimConfig};
    use chrono::TimeZone;

    #[test]
    fn the_demo_s_day_projects_as_is_and_following() {
        let start = Utc.with_ymd_and_hms(2026, 1, 5, 12, 0, 0).single().unwrap_or_default();
        let cfg = SimConfig::new(42, start);
        let demand = Sim::past_day_demand(&cfg);
        let mut sim = Sim::new(cfg);
        let p = sim.snapshot();
        let mut fleet = ModelFleet { nodes: p.nodes, workloads: p.workloads, ..ModelFleet::default() };
        fleet.index_workloads();
        let plan = crate::advisor::planner::plan(&fleet, start);
        let actions = crate::advisor::Followed {
            layouts: plan.changes.iter().map(|c| (c.card.clone(), c.to.clone())).collect(),
            others: 1,
        };
        let Some(pr) = project(&fleet, &demand, start, 1800, &actions) else { panic!("the demo measures demand") };
        assert!(pr.jobs > 0);
        assert_eq!((pr.changes, pr.others), (plan.changes.len(), 1), "what it follows, and what it only counts");
        assert!((0.0..=1.0).contains(&pr.as_is.held) && (0.0..=1.0).contains(&pr.following.held));
        // The same inputs, the same answer.
        assert_eq!(project(&fleet, &demand, start, 1800, &actions), Some(pr));
        // Following nothing: as is, twice (it said "2 changes advised" with none in the list).
        let none = project(&fleet, &demand, start, 1800, &Default::default()).unwrap_or_else(|| panic!("demand"));
        assert_eq!((none.changes, none.as_is), (0, none.following));
    }

    #[test]
    fn no_demand_measured_no_projection() {
        assert_eq!(
            project(&ModelFleet::default(), &DemandHistory::default(), Utc::now(), 1800, &Default::default()),
            None
        );
    }
}
