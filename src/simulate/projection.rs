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
    /// Above [`SAMPLE_ABOVE_CARDS`]: the cards simulated and the fleet's cards (a sample of
    /// the nodes with the same share of the demand); `None`: the whole fleet.
    pub sampled: Option<(u32, u32)>,
}

/// Above this many cards the projection simulates a sample: every k-th node (and every node
/// the plan lays out anew) with the same share of the demand's jobs. Placing a job looks at
/// every card, and the demand grows with the fleet, so the cost grows with the square of the
/// cards: the whole of 32,768 cards took a core for minutes, 4,096 most of a second, a
/// sample of about 2,048 a fifth of one.
pub const SAMPLE_ABOVE_CARDS: u32 = 2048;

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
    let (as_is_fleet, sampled) = sample(from_model::fleet(fleet), plan);
    let jobs_made = jobs.len();
    let jobs = match sampled {
        Some((kept, of)) => share(jobs, kept, of),
        None => jobs,
    };
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
    Some(Projection { as_is, following, changes, others, jobs: jobs_made, followed: plan.clone(), sampled })
}

/// The fleet to simulate: all of it up to [`SAMPLE_ABOVE_CARDS`] cards; above, every k-th
/// node and the nodes `plan` lays out anew, with (cards kept, cards in all).
fn sample(fleet: Fleet, plan: &crate::advisor::Followed) -> (Fleet, Option<(u32, u32)>) {
    let total: u32 = fleet.nodes.iter().map(|n| n.gpus).sum();
    if total <= SAMPLE_ABOVE_CARDS {
        return (fleet, None);
    }
    let k = total.div_ceil(SAMPLE_ABOVE_CARDS) as usize;
    let planned: std::collections::HashSet<&str> = plan.layouts.iter().map(|(c, _)| c.node.as_str()).collect();
    let Fleet { models, nodes } = fleet;
    let nodes: Vec<_> = nodes
        .into_iter()
        .enumerate()
        .filter(|(i, n)| i % k == 0 || planned.contains(&*n.name))
        .map(|(_, n)| n)
        .collect();
    let kept = nodes.iter().map(|n| n.gpus).sum();
    (Fleet { models, nodes }, Some((kept, total)))
}

/// `kept` of every `of` jobs, spread evenly over the list (its hours and shapes alike).
fn share(jobs: Vec<Job>, kept: u32, of: u32) -> Vec<Job> {
    let (kept, of) = (u64::from(kept), u64::from(of.max(1)));
    jobs.into_iter()
        .enumerate()
        .filter(|(i, _)| (*i as u64 + 1) * kept / of > *i as u64 * kept / of)
        .map(|(_, j)| j)
        .collect()
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
        // It reads the fleet's nodes alone: the console hands it no more (#50: a whole clone
        // at 32,768 cards was most of the console's peak memory).
        let nodes_only = ModelFleet { nodes: fleet.nodes.clone(), ..ModelFleet::default() };
        assert_eq!(project(&nodes_only, &demand, start, 1800, &actions), Some(pr.clone()));
        // The same inputs, the same answer.
        assert_eq!(project(&fleet, &demand, start, 1800, &actions), Some(pr));
        // Following nothing: as is, twice (it said "2 changes advised" with none in the list).
        let none = project(&fleet, &demand, start, 1800, &Default::default()).unwrap_or_else(|| panic!("demand"));
        assert_eq!((none.changes, none.as_is), (0, none.following));
    }

    /// #50: above 2,048 cards every k-th node is simulated, with the nodes the plan lays out,
    /// and the same share of the demand's jobs, spread over the list.
    #[test]
    fn a_large_fleet_is_sampled_with_its_share_of_the_demand() {
        let mut fleet = Fleet::default();
        let m = fleet.model_index("H100-80GB");
        fleet.nodes = (0..4096).map(|i| super::super::Node::new(&format!("n{i:04}"), m, 8)).collect();
        let plan = crate::advisor::Followed {
            layouts: vec![(crate::model::CardRef::new("n0003".to_string(), 0), "whole".to_string())],
            others: 0,
        };
        let (small, sampled) = sample(fleet.clone(), &plan);
        // k = 16: nodes 0, 16, 32, ... and the planned n0003.
        assert_eq!(small.nodes.len(), 257);
        assert!(small.nodes.iter().any(|n| &*n.name == "n0003"));
        assert_eq!(sampled, Some((257 * 8, 32_768)));
        let jobs: Vec<Job> = (0..1000).map(|i| Job::new(&format!("j{i}"), i, 3600, 1)).collect();
        let kept = share(jobs, 257 * 8, 32_768);
        assert_eq!(kept.len(), 62, "1000 × 2,056 / 32,768, rounded down");
        assert!(kept.last().is_some_and(|j| j.submit > 900), "spread to the end of the list");
        // A fleet at the line is simulated whole.
        fleet.nodes.truncate(256);
        assert_eq!(sample(fleet, &plan).1, None);
    }

    #[test]
    fn no_demand_measured_no_projection() {
        assert_eq!(
            project(&ModelFleet::default(), &DemandHistory::default(), Utc::now(), 1800, &Default::default()),
            None
        );
    }
}
