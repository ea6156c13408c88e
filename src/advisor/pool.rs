//! Pools of one GPU model: scale-in (the pool's mean activity, whole and MIG cards alike, over
//! the last hour under `[policy] scale_in_utilization_pct`: how many cards the present work needs at that target,
//! how many could be released, less the cards waiting work could use; none where work the pool
//! serves has a scale-out), scale-out (work has waited past the threshold with nothing
//! free and nothing to preempt: what to add), and fragmentation (free MIG slices no profile
//! can use next to the instances there, on a card not in a packed layout, that waiting or
//! measured demand could use).

mod packing;
mod scale_in;
mod scale_out;

pub(super) use scale_in::scale_in;
pub(super) use scale_out::scale_out;

use super::{Context, Finding, Kind, Severity, Subject, Suggestion};
use crate::model::capacity::{Free, usable};
use crate::model::mig::GpuModel;
use crate::model::mig::catalog::model_key;
use crate::model::{CardRef, Fleet, Resource, Workload, WorkloadState};

/// Whether card `c` could be one of `resource` (a whole card of its model, or of any): as it
/// is, or laid out whole (a MIG or shared card becomes one once idle).
fn whole_of(c: &crate::model::Card, resource: &crate::model::Resource) -> bool {
    match resource {
        crate::model::Resource::WholeCard { model } => {
            model.as_deref().is_none_or(|m| crate::model::mig::catalog::model_key(&c.model) == m)
        }
        _ => false,
    }
}

/// A card that must be laid out whole first (MIG on, or shared).
fn not_whole(c: &crate::model::Card) -> bool {
    c.mig.enabled || c.sharing.replicas.is_some()
}

/// The work waiting past the threshold for one resource, as scale-out and packing judge it.
struct Late<'f> {
    /// The waiting jobs.
    jobs: Vec<&'f Workload>,
    /// How long the oldest of them has waited, in seconds.
    oldest: u64,
    /// The units they want in all.
    wanted: u64,
    /// The units the largest one request wants.
    biggest: u64,
    /// The most units of the resource free on one node.
    block: u64,
    /// High past twice the threshold, else a warning.
    severity: Severity,
}

impl<'f> Late<'f> {
    /// The jobs of `waiting` that ask for `resource`, with what they want; `None` where none
    /// has a wait to tell.
    fn of(waiting: &[(&'f Workload, Resource)], resource: &Resource, cx: &Context, free: &Free) -> Option<Self> {
        let jobs: Vec<&Workload> = waiting.iter().filter(|(_, r)| r == resource).map(|(w, _)| *w).collect();
        let oldest = jobs.iter().filter_map(|w| w.wait(cx.now)).map(|x| x.num_seconds().max(0) as u64).max()?;
        let units = |w: &&Workload| w.request.asks().1;
        let wanted: u64 = jobs.iter().map(units).sum();
        let biggest = jobs.iter().map(units).max().unwrap_or(0);
        let block = free.largest_block(resource);
        let severity = if oldest >= cx.queue_wait.as_secs() * 2 { Severity::High } else { Severity::Warn };
        Some(Self { jobs, oldest, wanted, biggest, block, severity })
    }
}

/// Free slices no profile can use next to a card's instances, where that is usable capacity
/// lost: the card's layout is not packed (a maximal layout of the catalog, or mig-parted's
/// `all-<profile>`: their free slices are the catalog's, slice 7 under 7 x 1g) and waiting or
/// measured demand wants what a layout of the model would put there.
pub(super) fn fragmentation(fleet: &Fleet, cx: &Context, out: &mut Vec<Finding>) {
    // DynamicMIG cards have no layout to pack: theirs is dra.rs's rule.
    for (n, c) in fleet.cards().filter(|(n, c)| c.mig.enabled && usable(n, c) && !super::dra::dynamic(c)) {
        let (Some(free), Some(model)) = (c.free_slice_mask(), c.gpu_model()) else { continue };
        let mask = free & !c.reachable_slices();
        let stranded = mask.count_ones();
        if stranded == 0 || crate::model::mig::layout::is_packed(model, &c.layout()) {
            continue;
        }
        let Some(wanted) = wanted_there(fleet, cx, model, mask) else { continue };
        let r = CardRef::new(n.name.clone(), c.index);
        let share = f64::from(stranded) / f64::from(model.memory_slices);
        out.push(Finding {
            kind: Kind::Fragmentation,
            severity: Severity::Info,
            subject: Subject::Card { card: r.to_string() },
            title: format!(
                "{r}: {} no profile can use next to {}",
                crate::units::count(stranded, "memory slice", "memory slices"),
                c.layout_text()
            ),
            evidence: vec![
                format!(
                    "free slices {}, of which {stranded} unreachable by any profile; the layout is not one of the {}'s packed layouts",
                    free.count_ones(),
                    model.name
                ),
                wanted,
            ],
            gpu_hours_per_day: share * 24.0,
            cost_per_day: cx.money(Some(&model.name), share * 24.0),
            suggestion: Suggestion::Words {
                text: "a packed layout that gives those slices to the demand when the card is next free (tessera layouts lists them)"
                    .into(),
            },
            cards: vec![r],
        });
    }
}

/// The demand a layout of `model` would give slices `mask` to, in words: the first waiting job
/// that wants a profile with a placement over them or a whole card, else the first such shape
/// of the demand measured by hour.
fn wanted_there(fleet: &Fleet, cx: &Context, model: &GpuModel, mask: u16) -> Option<String> {
    let covers = |p: &str| model.profile(p).is_some_and(|p| p.placements.iter().any(|pl| pl.mask() & mask != 0));
    for w in fleet.workloads.iter().filter(|w| w.state == WorkloadState::Pending && w.request.wants_gpu()) {
        if w.request.shares.is_some() || w.request.model.as_deref().is_some_and(|m| model_key(m) != model.name) {
            continue;
        }
        match &w.request.mig_profile {
            Some(p) if covers(p) => {
                return Some(format!("{} waits for {p}, which a layout of the {} places there", w.id, model.name));
            }
            None => return Some(format!("{} waits for a whole card", w.id)),
            Some(_) => {}
        }
    }
    let whole = crate::model::demand::whole_key(Some(&model.name));
    for (h, hour) in cx.demand?.hours.iter().enumerate() {
        for (key, mean) in hour.mean.iter().filter(|(_, m)| **m > 0.0) {
            let what = if *key == whole || key == "whole" { "whole cards" } else { key.as_str() };
            if what == "whole cards" || covers(key) {
                return Some(format!(
                    "demand measured at {h:02}:00 UTC wants {what} (mean {mean:.1}), which a layout of the {} places there",
                    model.name
                ));
            }
        }
    }
    None
}
