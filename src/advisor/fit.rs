//! "Where can this run?": for a MIG profile, a number of whole GPUs or a workload's request,
//! where it fits now (node, card, instance or free slices), after repartitioning an idle card,
//! after preempting eligible training, or why nowhere; for a workload that waits, first why it
//! waits as its source says it (a DRA claim's blocker as the queue shows it). Pure; `:fit` in
//! the console prints it.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::planner::{Ask, card_layout};
use crate::model::capacity::usable;
use crate::model::mig::Profile;
use crate::model::{Card, CardRef, Fleet, Node, Workload, WorkloadKind, WorkloadState};

/// What is asked about.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Want {
    Profile { profile: String },
    Gpus { count: u32 },
}

impl std::fmt::Display for Want {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Profile { profile } => write!(f, "a {profile} instance"),
            Self::Gpus { count: 1 } => write!(f, "1 whole GPU"),
            Self::Gpus { count } => write!(f, "{count} whole GPUs on one node"),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Answer {
    /// What the query was read as.
    pub wants: String,
    /// Why the workload asked about waits, as the queue says it (for a pod whose DRA claim
    /// is not allocated: what tessera sees blocking it); only for a pending workload.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waits: Option<String>,
    /// Free now: one line per place.
    pub now: Vec<String>,
    /// After repartitioning an idle card (or making idle MIG cards whole).
    pub after_repartition: Vec<String>,
    /// After preempting training past its minimum runtime.
    pub after_preempt: Vec<String>,
    /// Why nowhere, when all three are empty.
    pub nowhere: Option<String>,
}

/// Read `query`: a profile (`3g.40gb`), a GPU count (`4`) or a workload id or name.
pub fn parse(fleet: &Fleet, query: &str) -> Result<Want, QueryError> {
    let q = query.trim();
    if q.is_empty() {
        return Err(QueryError::Empty);
    }
    if let Ok(n) = q.parse::<u32>() {
        return if n == 0 { Err(QueryError::Zero) } else { Ok(Want::Gpus { count: n }) };
    }
    if let Some(w) = named(fleet, q) {
        return Ok(want_of(w));
    }
    let known = fleet.cards().filter_map(|(_, c)| c.gpu_model()).any(|m| m.profile(q).is_some());
    if known || crate::model::mig::catalog::catalog().models.iter().any(|m| m.profile(q).is_some()) {
        return Ok(Want::Profile { profile: q.to_string() });
    }
    Err(QueryError::Unknown(q.into()))
}

/// Why a fit query did not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueryError {
    #[error("fit what? a profile (3g.40gb), a GPU count (4) or a workload")]
    Empty,
    #[error("fit 0 GPUs: nothing to place")]
    Zero,
    #[error("{0}: not a MIG profile, a GPU count or a workload tessera knows")]
    Unknown(String),
}

/// The workload `query` names (by id, else by name), if any.
fn named<'f>(fleet: &'f Fleet, query: &str) -> Option<&'f Workload> {
    let q = query.trim();
    fleet.workload(q).or_else(|| fleet.workloads.iter().find(|w| w.name == q))
}

/// `query` read and answered: where it fits and, for a workload that waits, why it waits.
pub fn answer(fleet: &Fleet, query: &str, now: DateTime<Utc>, min_runtime: Duration) -> Result<Answer, QueryError> {
    let want = parse(fleet, query)?;
    let mut a = fit(fleet, &want, now, min_runtime);
    a.waits = named(fleet, query).filter(|w| w.state == WorkloadState::Pending).and_then(|w| w.reason.clone());
    Ok(a)
}

fn want_of(w: &Workload) -> Want {
    match &w.request.mig_profile {
        Some(p) => Want::Profile { profile: p.clone() },
        None => Want::Gpus { count: w.request.gpus.unwrap_or(1).max(1) },
    }
}

/// Where `want` fits in `fleet` as of `now`; training that has run `min_runtime` may be
/// preempted.
pub fn fit(fleet: &Fleet, want: &Want, now: DateTime<Utc>, min_runtime: Duration) -> Answer {
    let mut a = Answer { wants: want.to_string(), ..Answer::default() };
    let eligible = |id: &str| {
        fleet.workload(id).is_some_and(|w| {
            w.kind == WorkloadKind::Training
                && w.state == WorkloadState::Running
                && w.runtime(now).and_then(|d| d.to_std().ok()).is_some_and(|r| r >= min_runtime)
        })
    };
    match want {
        Want::Profile { profile } => fit_profile(fleet, profile, now, &eligible, &mut a),
        Want::Gpus { count } => fit_gpus(fleet, *count as usize, &eligible, &mut a),
    }
    if a.now.is_empty() && a.after_repartition.is_empty() && a.after_preempt.is_empty() {
        a.nowhere = Some(why_nowhere(fleet, want));
    }
    a
}

/// Where an instance of `profile` fits, on each usable card whose model has it: free now, after
/// the preemption of `eligible` training, or after a repartition of the idle card.
fn fit_profile(fleet: &Fleet, profile: &str, now: DateTime<Utc>, eligible: &impl Fn(&str) -> bool, a: &mut Answer) {
    for (n, c) in fleet.cards().filter(|(n, c)| usable(n, c)) {
        let Some(model) = c.gpu_model() else { continue };
        let Some(p) = model.profile(profile) else { continue };
        let r = CardRef::new(n.name.clone(), c.index);
        if c.mig.enabled {
            fit_on_instances(c, &r, profile, p, eligible, a);
        }
        // The planner's layout for this card and this request alone, as the picker and
        // the layout plan give it; none where the card's layout serves it already.
        let ask = Ask::One { profile: Some(profile.to_string()) };
        if c.is_idle()
            && let Some(layout) = card_layout(fleet, &r, &ask, now)
            && layout != c.layout_text()
        {
            a.after_repartition.push(format!("{r} {} to {layout}", c.layout_text()));
        }
    }
}

/// On MIG card `c` (`r`): its free instances of `profile` (`p` in its model's catalog), those
/// `eligible` training holds, and free slices where one can be created next to what runs.
fn fit_on_instances(
    c: &Card,
    r: &CardRef,
    profile: &str,
    p: &Profile,
    eligible: &impl Fn(&str) -> bool,
    a: &mut Answer,
) {
    for i in c.mig.instances.iter().filter(|i| i.profile == *profile) {
        if i.workloads.is_empty() && !i.in_use_by_unknown() {
            a.now.push(format!("{r} GI {} ({}@{}), free", i.gi_id, i.profile, i.start));
        } else if !i.workloads.is_empty() && i.workloads.iter().all(|w| eligible(w)) {
            a.after_preempt.push(format!(
                "{r} GI {}: preempt {} (training past its minimum runtime)",
                i.gi_id,
                i.workloads.join(", ")
            ));
        }
    }
    // Free slices where the profile can be created next to what runs.
    let count = c.mig.instances.iter().filter(|i| i.profile == *profile).count();
    let free = c.usable_free_slices().unwrap_or(0);
    if count < usize::from(p.max_count)
        && let Some(pl) = p.placements.iter().find(|pl| pl.mask() & !free == 0)
    {
        a.now.push(format!("{r}: free slices {}-{}, create {profile}@{}", pl.start, pl.start + pl.size - 1, pl.start));
    }
}

/// Where `count` whole GPUs fit on one node: idle whole cards now, with idle MIG cards made
/// whole, or with cards `eligible` training holds preempted.
fn fit_gpus(fleet: &Fleet, count: usize, eligible: &impl Fn(&str) -> bool, a: &mut Answer) {
    for n in fleet.nodes.iter().filter(|n| n.schedulable) {
        let whole_idle: Vec<&Card> = n.cards.iter().filter(|c| whole_free(n, c)).collect();
        let mig_idle: Vec<&Card> = n.cards.iter().filter(|c| usable(n, c) && c.mig.enabled && c.is_idle()).collect();
        let preemptible: Vec<(&Card, Vec<&str>)> = n
            .cards
            .iter()
            .filter(|c| usable(n, c) && !c.mig.enabled && !c.is_idle())
            .map(|c| (c, c.holders().collect::<Vec<_>>()))
            .filter(|(_, h)| !h.is_empty() && h.iter().all(|w| eligible(w)))
            .collect();
        let list = |cs: &[&Card]| cs.iter().map(|c| c.index.to_string()).collect::<Vec<_>>().join(",");
        if whole_idle.len() >= count {
            a.now.push(format!("{}: idle whole cards {}", n.name, list(&whole_idle[..count])));
        } else if whole_idle.len() + mig_idle.len() >= count {
            let turn = &mig_idle[..count - whole_idle.len()];
            a.after_repartition.push(format!(
                "{}: make idle MIG cards {} whole{}",
                n.name,
                list(turn),
                if whole_idle.is_empty() { String::new() } else { format!(", with idle cards {}", list(&whole_idle)) }
            ));
        } else if whole_idle.len() + mig_idle.len() + preemptible.len() >= count {
            let need = count - whole_idle.len() - mig_idle.len();
            let mut jobs: Vec<&str> = preemptible[..need].iter().flat_map(|(_, h)| h.iter().copied()).collect();
            jobs.sort_unstable();
            jobs.dedup();
            a.after_preempt.push(format!(
                "{}: preempt {} (training past its minimum runtime)",
                n.name,
                jobs.join(", ")
            ));
        }
    }
}

fn whole_free(n: &Node, c: &Card) -> bool {
    usable(n, c) && !c.mig.enabled && c.is_idle()
}

fn why_nowhere(fleet: &Fleet, want: &Want) -> String {
    match want {
        Want::Profile { profile } => {
            let has =
                fleet.cards().filter(|(_, c)| c.gpu_model().is_some_and(|m| m.profile(profile).is_some())).count();
            let usable_has = fleet
                .cards()
                .filter(|(n, c)| usable(n, c) && c.gpu_model().is_some_and(|m| m.profile(profile).is_some()))
                .count();
            if has == 0 {
                format!("no card here is a model with {profile} (profiles are per model: see tessera layouts)")
            } else if usable_has == 0 {
                format!("the {has} cards whose model has {profile} are drained, unhealthy or on unschedulable nodes")
            } else {
                format!(
                    "all {usable_has} cards whose model has {profile} are busy, with no free slices for it and no training past its minimum runtime to preempt"
                )
            }
        }
        Want::Gpus { count } => {
            let most = fleet.nodes.iter().map(|n| n.cards.len()).max().unwrap_or(0);
            if most < *count as usize {
                format!("no node has {count} cards (the largest has {most})")
            } else {
                format!(
                    "no node has {count} cards free, freeable by repartitioning idle MIG cards, or held by preemptible training"
                )
            }
        }
    }
}

/// The answer as lines for the console's `:fit` panel.
pub fn lines(a: &Answer) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(why) = &a.waits {
        out.push(format!("waits: {why}"));
    }
    let mut section = |title: &str, items: &[String]| {
        if !items.is_empty() {
            out.push(format!("{title}:"));
            out.extend(items.iter().map(|i| format!("  {i}")));
        }
    };
    section("fits now", &a.now);
    section("after repartitioning an idle card", &a.after_repartition);
    section("after preempting", &a.after_preempt);
    if let Some(why) = &a.nowhere {
        out.push(format!("nowhere: {why}"));
    }
    out
}

#[cfg(test)]
#[path = "fit_tests.rs"]
mod tests;
