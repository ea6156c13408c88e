//! Pools of one GPU model: scale-in (the pool's mean activity, whole and MIG cards alike, over
//! the last hour under `[policy] scale_in_utilization_pct`: how many cards the present work needs at that target,
//! how many could be released, less the cards waiting work could use; none where work the pool
//! serves has a scale-out), scale-out (work has waited past the threshold with nothing
//! free and nothing to preempt: what to add), and fragmentation (free MIG slices no profile
//! can use next to the instances there, on a card not in a packed layout, that waiting or
//! measured demand could use).

use std::collections::BTreeMap;

use super::{Context, Finding, Kind, Severity, Subject, Suggestion, minutes};
use crate::model::activity::HOUR_MIN;
use crate::model::capacity::{Free, usable};
use crate::model::mig::GpuModel;
use crate::model::mig::catalog::model_key;
use crate::model::{CardRef, Fleet, QueueSummary, Resource, ShareUnit, WorkloadState};

/// One pool: its usable cards, their activity summed over the last hour, whether every
/// holder is covered, and what its cards serve.
struct Pool {
    cards: usize,
    sum: f64,
    known: bool,
    serves: Serves,
}

/// What a pool's usable cards serve, as free capacity counts it (`model::capacity::Free`,
/// `card_would_serve`): a card that is not MIG-enabled and not shared (or shared by a
/// scheduler that also hands it out whole) serves whole-card requests of its model or of any;
/// a card of a MIG-capable model serves that model's profiles (the layout planner lays an idle
/// card out anew); a shared card serves shares in its unit, of its model or of any.
#[derive(Default)]
struct Serves {
    whole: bool,
    mig: Option<&'static GpuModel>,
    /// The share units, with the most replicas one card of the pool has in each.
    shared: BTreeMap<ShareUnit, u32>,
}

impl Serves {
    /// The part of one card a unit of `resource` takes on this pool (a whole card: 1; a MIG
    /// instance: its memory slices over the card's; a share: one of the card's replicas), or
    /// `None` where the pool's cards do not serve it.
    fn card_share(&self, key: &str, resource: &Resource) -> Option<f64> {
        let mine = |m: &Option<String>| m.as_deref().is_none_or(|m| m == key);
        match resource {
            Resource::WholeCard { model } => (self.whole && mine(model)).then_some(1.0),
            Resource::MigInstance { profile } => {
                let m = self.mig?;
                let p = m.profile(profile)?;
                Some(f64::from(p.memory_slices) / f64::from(m.memory_slices.max(1)))
            }
            Resource::Shared { unit, model } => {
                let replicas = self.shared.get(unit).filter(|_| mine(model))?;
                Some(1.0 / f64::from((*replicas).max(1)))
            }
        }
    }
}

/// What a waiting request is for, in words (`whole cards`, `MIG 1g.10gb`, `replicas`), ranked
/// whole cards first.
fn wanted(resource: &Resource) -> (u8, String) {
    match resource {
        Resource::WholeCard { .. } => (0, "whole cards".into()),
        Resource::MigInstance { profile } => (1, format!("MIG {profile}")),
        Resource::Shared { unit, .. } => (2, unit.plural().into()),
    }
}

/// Runs after `scale_out`: a pool whose cards serve work with a scale-out finding has none,
/// and that finding says so.
pub(super) fn scale_in(fleet: &Fleet, cx: &Context, target_pct: f64, out: &mut Vec<Finding>) {
    // Per model: cards, activity summed over the last hour (a whole card: its holder's mean; a
    // MIG card: its instances' holders' means weighted by slices; idle parts add 0), and
    // whether every holder is covered, its hour or at least 30 minutes of it (else: no
    // activity data, no finding).
    let mut pools: BTreeMap<String, Pool> = BTreeMap::new();
    // Work younger than an hour counts its covered 30-minute mean.
    let mean = |id: &str| {
        let a = fleet.workload(id).and_then(|w| w.activity)?;
        a.mean_1h_pct.or(a.mean_pct.filter(|_| a.window_covered()))
    };
    for (n, c) in fleet.cards().filter(|(n, c)| usable(n, c)) {
        let e = pools.entry(model_key(&c.model)).or_insert_with(|| Pool {
            cards: 0,
            sum: 0.0,
            known: true,
            serves: Serves::default(),
        });
        e.cards += 1;
        // What it serves, busy or not: as `Free::compute` counts a card.
        let shared = c.sharing.replicas.is_some() && (n.capacity.is_empty() || c.sharing.replicas_used.is_none());
        e.serves.whole |= !c.mig.enabled && (!shared || n.capacity.iter().any(|x| x.whole_requests));
        e.serves.mig = e.serves.mig.or(c.gpu_model());
        if let (Some(unit), Some(replicas)) = (c.sharing.unit, c.sharing.replicas) {
            let most = e.serves.shared.entry(unit).or_default();
            *most = (*most).max(replicas);
        }
        // Busy with nobody to ask: the pool's activity is unknown.
        if c.in_use_by_unknown() {
            e.known = false;
            continue;
        }
        if c.mig.enabled {
            // An instance weighs its share of the card's compute (a 1g of seven is 1/7).
            let Some(model) = c.gpu_model() else {
                e.known = false;
                continue;
            };
            let compute = f64::from(model.profiles.iter().map(|p| p.compute_slices).max().unwrap_or(1).max(1));
            for i in c.mig.instances.iter().filter(|i| !i.workloads.is_empty()) {
                let share = model.profile(&i.profile).map_or(0.0, |p| f64::from(p.compute_slices)) / compute;
                let means: Vec<Option<f64>> = i.workloads.iter().map(|h| mean(h)).collect();
                if means.iter().any(Option::is_none) {
                    e.known = false;
                }
                e.sum += means.into_iter().flatten().fold(0.0, f64::max) * share;
            }
            continue;
        }
        let holders: Vec<&str> = c.holders().collect();
        if holders.is_empty() {
            continue;
        }
        e.known &= holders.iter().all(|h| mean(h).is_some());
        e.sum += holders.iter().filter_map(|h| mean(h)).fold(0.0, f64::max);
    }
    // What the queue asks for: capacity that waiting work could use is not for release.
    let pending: Vec<(Resource, u64)> =
        fleet.workloads.iter().filter(|w| w.state == WorkloadState::Pending).map(|w| w.request.asks()).collect();
    for (model, Pool { cards, sum, known, serves }) in pools {
        if !known || cards < 2 {
            continue;
        }
        let mean = sum / cards as f64;
        if mean >= target_pct {
            continue;
        }
        let needed = ((sum / target_pct.max(1.0)).ceil() as usize).max(1);
        let spare = cards.saturating_sub(needed);
        if spare == 0 {
            continue;
        }
        // The waiting work this pool's cards serve, and the cards it could use (a hair under a
        // whole card is a card: float sums of slices and replicas).
        let mut jobs: BTreeMap<(u8, String), usize> = BTreeMap::new();
        let mut served: Vec<String> = Vec::new();
        let mut could_use = 0.0;
        for (r, n) in &pending {
            let Some(share) = serves.card_share(&model, r) else { continue };
            could_use += share * *n as f64;
            *jobs.entry(wanted(r)).or_default() += 1;
            served.push(r.to_string());
        }
        let kept = ((could_use - 1e-9).ceil().max(0.0) as usize).min(spare);
        let waiting = waiting_text(&jobs);
        // Work it serves has a scale-out: the pool has no cards to give, and the scale-out
        // says why no scale-in stands beside it.
        let mut withheld = false;
        for f in out.iter_mut().filter(|f| f.kind == Kind::ScaleOut) {
            if matches!(&f.subject, Subject::Resource { resource } if served.contains(resource)) {
                f.evidence.push(format!("scale-in of {spare} {model} withheld: {waiting}"));
                withheld = true;
            }
        }
        let left = spare - kept;
        if withheld || left == 0 {
            continue;
        }
        let mut evidence = vec![format!(
            "mean activity {mean:.0} % over the last {} (30m for work younger than that) across {cards} usable cards, MIG instances weighted by their share of compute (target {target_pct:.0} %)",
            minutes((HOUR_MIN * 60) as u64)
        )];
        if kept > 0 {
            evidence.push(format!(
                "{} kept for waiting work: {waiting}",
                crate::units::count(kept as u64, "card", "cards")
            ));
        }
        let gpu_hours = left as f64 * 24.0;
        out.push(Finding {
            kind: Kind::ScaleIn,
            severity: Severity::Info,
            subject: Subject::Pool { model: model.clone() },
            title: format!("{model} cards average {mean:.0} %: {needed} of {cards} would carry the work"),
            evidence,
            gpu_hours_per_day: gpu_hours,
            cost_per_day: cx.money(Some(&model), gpu_hours),
            suggestion: Suggestion::Words {
                text: format!(
                    "release or lend {}, or pack the work onto {needed} (scale-in)",
                    crate::units::count(left as u64, &format!("{model} card"), &format!("{model} cards"))
                ),
            },
            cards: Vec::new(),
        });
    }
}

/// Waiting jobs by what they want: `2 jobs wait for whole cards, 1 for MIG 1g.10gb`.
fn waiting_text(jobs: &BTreeMap<(u8, String), usize>) -> String {
    let mut parts = jobs.iter().enumerate().map(|(i, ((_, what), n))| {
        if i == 0 {
            format!("{} for {what}", crate::units::count(*n as u64, "job waits", "jobs wait"))
        } else {
            format!("{n} for {what}")
        }
    });
    let first = parts.next().unwrap_or_default();
    parts.fold(first, |acc, p| acc + ", " + &p)
}

pub(super) fn scale_out(fleet: &Fleet, cx: &Context, free: &Free, served: &[String], out: &mut Vec<Finding>) {
    let q = QueueSummary::with_free(fleet, cx.now, free);
    // The waiting work past the threshold that no repartition or preemption would start, with
    // what it asks for: once, not once per resource.
    let served: std::collections::HashSet<&str> = served.iter().map(String::as_str).collect();
    let waiting: Vec<(&crate::model::Workload, crate::model::Resource)> = fleet
        .workloads
        .iter()
        .filter(|w| w.state == WorkloadState::Pending && !served.contains(w.id.as_str()))
        .filter(|w| w.wait(cx.now).and_then(|x| x.to_std().ok()).is_some_and(|x| x >= cx.queue_wait))
        .map(|w| (w, w.request.asks().0))
        .collect();
    // Short overall, or a request larger than any one node has free.
    for d in q.demand.iter().filter(|d| d.wanted > d.free || d.largest_request > d.largest_block) {
        let late: Vec<&crate::model::Workload> =
            waiting.iter().filter(|(_, r)| *r == d.resource).map(|(w, _)| *w).collect();
        let Some(oldest) = late.iter().filter_map(|w| w.wait(cx.now)).map(|x| x.num_seconds().max(0) as u64).max()
        else {
            continue;
        };
        // Short: what the late work wants beyond what is free, and never less than the largest
        // late request beyond what one node has free (a multi-GPU job needs one node).
        let units = |w: &&crate::model::Workload| w.request.asks().1;
        let wanted: u64 = late.iter().map(units).sum();
        let biggest = late.iter().map(units).max().unwrap_or(0);
        let block = free.largest_block(&d.resource);
        let severity = if oldest >= cx.queue_wait.as_secs() * 2 { Severity::High } else { Severity::Warn };
        // Whole cards: what no node could give even empty is short; a request one node could
        // give once emptied is packing, not a shortage (1,428 free, at most 6 on one node, an
        // 8-GPU job: "add capacity for 2" was wrong).
        let most = most_on_one_node(fleet, &d.resource);
        let beyond_any_node = most.map_or(biggest.saturating_sub(block), |m| biggest.saturating_sub(m));
        // Idle cards drained (for this, or held back by an operator) are not missing hardware.
        let withheld = drained_idle(fleet, &d.resource);
        let short = wanted.saturating_sub(free.of(&d.resource) + withheld).max(beyond_any_node);
        if short == 0 {
            if biggest > block
                && let Some(f) =
                    packing(fleet, &d.resource, &late, biggest, block, free.of(&d.resource), oldest, severity)
            {
                out.push(f);
            }
            continue;
        }
        // A share is a part of a card: GPU-hours count the cards the shares make up, at the
        // replicas per card the shared cards of that kind have (unknown there: not counted).
        let (per_gpu, place) = match &d.resource {
            crate::model::Resource::Shared { unit, model } => {
                (replicas_per_card(fleet, *unit, model.as_deref()), "card (node, where cards are not told apart)")
            }
            _ => (Some(1.0), "node"),
        };
        let gpu_hours = per_gpu.map_or(0.0, |r| short as f64 / r * 24.0);
        out.push(Finding {
            kind: Kind::ScaleOut,
            severity,
            subject: Subject::Resource { resource: d.resource.to_string() },
            title: format!(
                "{} waits for {}: {short} short, the oldest for {}",
                late.len(),
                d.resource,
                minutes(oldest)
            ),
            // What is free against what is wanted, and what one node has free where a request
            // needs several together: "6 free, at most 3 on one node; 1 waiting ... wants 8 together".
            evidence: vec![format!(
                "{} free{}; {} waiting past the threshold ({}) {}",
                crate::units::grouped(free.of(&d.resource)),
                if biggest > 1 { format!(", at most {block} on one {place}") } else { String::new() },
                late.len(),
                minutes(cx.queue_wait.as_secs()),
                match (late.len(), biggest > 1) {
                    (1, true) => format!("wants {wanted} together"),
                    (1, false) => format!("wants {wanted}"),
                    (_, true) => format!("want {wanted} in all, the largest {biggest} together"),
                    (_, false) => format!("want {wanted} in all"),
                }
            )],
            gpu_hours_per_day: gpu_hours,
            cost_per_day: None,
            suggestion: Suggestion::Words {
                text: format!("add capacity for {short} × {} (or repartition a free card for it)", d.resource),
            },
            cards: Vec::new(),
        });
    }
}

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

/// Idle whole cards of `resource` that are drained: capacity held back, not missing.
fn drained_idle(fleet: &Fleet, resource: &crate::model::Resource) -> u64 {
    fleet
        .cards()
        .filter(|(n, c)| {
            n.schedulable && c.draining && c.is_idle() && c.health.fault().is_none() && whole_of(c, resource)
        })
        .filter(|(_, c)| !not_whole(c))
        .count() as u64
}

/// A card that must be laid out whole first (MIG on, or shared).
fn not_whole(c: &crate::model::Card) -> bool {
    c.mig.enabled || c.sharing.replicas.is_some()
}

/// For whole cards: the most cards of `resource` one node has, free or not, whole or to be laid
/// out whole (`None` for other resources, whose blocks this does not judge).
fn most_on_one_node(fleet: &Fleet, resource: &crate::model::Resource) -> Option<u64> {
    matches!(resource, crate::model::Resource::WholeCard { .. }).then(|| {
        fleet
            .nodes
            .iter()
            .filter(|n| n.schedulable)
            .map(|n| n.cards.iter().filter(|c| c.health.fault().is_none() && whole_of(c, resource)).count() as u64)
            .max()
            .unwrap_or(0)
    })
}

/// A multi-card request that fits the fleet but no node's free cards: the node with the fewest
/// busy cards of the resource among those with enough of them, to drain so it empties.
#[allow(clippy::too_many_arguments)]
fn packing(
    fleet: &Fleet,
    resource: &crate::model::Resource,
    late: &[&crate::model::Workload],
    biggest: u64,
    block: u64,
    free_all: u64,
    oldest: u64,
    severity: Severity,
) -> Option<Finding> {
    let (node, drained, busy, relayout) = fleet
        .nodes
        .iter()
        .filter(|n| n.schedulable)
        .filter_map(|n| {
            let mine: Vec<&crate::model::Card> =
                n.cards.iter().filter(|c| c.health.fault().is_none() && whole_of(c, resource)).collect();
            // Held: what must end or move (a card drained for this is the drain under way);
            // MIG or shared: to lay out whole once idle.
            let busy: Vec<&crate::model::Card> = mine.iter().copied().filter(|c| !c.is_idle()).collect();
            let relayout: Vec<&crate::model::Card> = mine.iter().copied().filter(|c| not_whole(c)).collect();
            (mine.len() as u64 >= biggest).then_some((n, mine, busy, relayout))
        })
        // A node already drained for it first (its plan under way), then the least to do.
        .min_by_key(|(n, mine, busy, relayout)| {
            (!mine.iter().all(|c| c.draining), busy.len() + relayout.len(), n.name.clone())
        })
        .map(|(n, mine, busy, relayout)| (n, mine.iter().all(|c| c.draining), busy, relayout))?;
    let holders: Vec<String> = {
        let mut h: Vec<String> = busy.iter().flat_map(|c| c.holders().map(str::to_string)).collect();
        h.sort();
        h.dedup();
        h
    };
    let cards: Vec<CardRef> = busy.iter().map(|c| CardRef::new(node.name.clone(), c.index)).collect();
    let who = if holders.is_empty() {
        "nobody".to_string()
    } else {
        holders.iter().take(6).cloned().collect::<Vec<_>>().join(", ")
    };
    let relaid = if relayout.is_empty() {
        String::new()
    } else {
        let n = crate::units::count(relayout.len() as u64, "card", "cards");
        format!("; {n} to lay out whole once idle (MIG or shared now)")
    };
    let remedy = match (busy.len(), relayout.len()) {
        (0, r) => format!("laying out {r} of {}'s cards whole", node.name),
        (b, 0) => format!("emptying {} ({b} busy)", node.name),
        (b, r) => format!("emptying {} ({b} busy) and laying out {r} of its cards whole", node.name),
    };
    // The node is held first (drained: nothing new lands on the cards it frees), its MIG cards
    // laid out whole as they empty, then given back for the job (a card laid out whole on an
    // undrained node went to the next small job).
    let first_mig = relayout.iter().find(|c| c.mig.enabled && c.is_idle());
    let suggestion = match (drained, first_mig) {
        (false, _) => Suggestion::Action {
            action: crate::act::Action::Drain { target: node.name.clone(), evict: false },
            why: if busy.is_empty() {
                format!(
                    "no new work lands on {} while its cards are laid out whole for the {biggest}-card job",
                    node.name
                )
            } else {
                format!(
                    "no new work lands on {}; as its {} end (or their training is preempted) and its cards are laid \
                     out whole, the {biggest}-card job fits",
                    node.name,
                    crate::units::count(busy.len() as u64, "busy card", "busy cards")
                )
            },
        },
        // Drained for it: what is left is said, one plan per subject (the next pass must not
        // offer a second action for the same wait).
        (true, mig) => {
            let next = match (busy.is_empty(), mig, relayout.is_empty()) {
                (true, _, true) => format!("it is empty and whole: undrain {} for the {biggest}-card job", node.name),
                (_, Some(c), _) => format!(
                    "repartition {}/{} whole (idle now), and its other MIG cards as they empty, then undrain {}",
                    node.name, c.index, node.name
                ),
                _ => format!(
                    "waiting for its work to end ({} busy); lay its cards out whole, then undrain {}",
                    busy.len(),
                    node.name
                ),
            };
            Suggestion::InProgress {
                action: crate::act::Action::Drain { target: node.name.clone(), evict: false },
                text: format!("{} is drained for the {biggest}-card job: {next}", node.name),
            }
        }
    };
    Some(Finding {
        kind: Kind::Packing,
        severity,
        subject: Subject::Resource { resource: resource.to_string() },
        title: format!(
            "{}: {} free, at most {block} on one node; packing, not a shortage: {remedy} would give it, the oldest \
             waiting {}",
            if late.len() == 1 {
                format!("1 job waits for {resource}, {biggest} together")
            } else {
                format!(
                    "{} jobs wait for {resource}, the largest {biggest} together",
                    crate::units::grouped(late.len() as u64)
                )
            },
            crate::units::grouped(free_all),
            minutes(oldest)
        ),
        evidence: vec![
            format!("{}: {} busy, held by {who}{relaid}", node.name, busy.len()),
            format!(
                "no node lacks the cards: {} has enough once its work ends or moves; nothing needs to be bought",
                node.name
            ),
        ],
        // The waiting request, a day long.
        gpu_hours_per_day: biggest as f64 * 24.0,
        cost_per_day: None,
        suggestion,
        cards,
    })
}

/// The replicas per card of the shared cards counting in `unit` (of `model`, where named),
/// where they all agree.
fn replicas_per_card(fleet: &Fleet, unit: crate::model::ShareUnit, model: Option<&str>) -> Option<f64> {
    let mut seen = fleet
        .cards()
        .filter(|(_, c)| c.sharing.unit == Some(unit))
        .filter(|(_, c)| model.is_none_or(|m| crate::model::mig::catalog::model_key(&c.model) == m))
        .filter_map(|(_, c)| c.sharing.replicas);
    let first = seen.next()?;
    seen.all(|r| r == first).then_some(f64::from(first.max(1)))
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
