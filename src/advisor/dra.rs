//! Dynamic Resource Allocation's cards in the advice: an allocated claim no pod uses holds its
//! devices idle (held but idle, for a claim holder), and a DynamicMIG card's counter set
//! fragmented: free memory slices enough for a waiting claim's profile but in no placement
//! of it, with the pods whose move would free the whole card. DynamicMIG cards get no layout
//! plans (the planner leaves them out: the driver lays them out per claim).

use super::{Context, Finding, Kind, Severity, Subject, Suggestion};
use crate::model::capacity::usable;
use crate::model::mig::GpuModel;
use crate::model::mig::catalog::model_key;
use crate::model::{Card, CardRef, Fleet, WorkloadState};

/// The card is laid out per claim by the DRA driver (DynamicMIG).
pub(super) fn dynamic(c: &Card) -> bool {
    c.dra.as_ref().is_some_and(|d| d.dynamic)
}

/// Claims allocated on a DRA card that no pod uses (`claim:NS/NAME` holders): the devices are
/// held and nothing runs on them.
pub(super) fn claims_held_idle(fleet: &Fleet, cx: &Context, out: &mut Vec<Finding>) {
    for (n, c) in fleet.cards().filter(|(_, c)| c.dra.is_some()) {
        let r = CardRef::new(n.name.clone(), c.index);
        let mut held: Vec<(&str, String, f64)> = c
            .workloads
            .iter()
            .filter(|w| w.starts_with("claim:"))
            .map(|w| (w.as_str(), "the whole card".to_string(), 1.0))
            .collect();
        let slices = c.gpu_model().map_or(0, |m| m.memory_slices);
        for i in &c.mig.instances {
            for w in i.workloads.iter().filter(|w| w.starts_with("claim:")) {
                let share = if slices > 0 { f64::from(i.size) / f64::from(slices) } else { 0.0 };
                held.push((w.as_str(), format!("{}@{}", i.profile, i.start), share));
            }
        }
        for (claim, what, share) in held {
            let name = claim.trim_start_matches("claim:");
            out.push(Finding {
                kind: Kind::HeldIdle,
                severity: Severity::Warn,
                subject: Subject::Card { card: r.to_string() },
                title: format!("claim {name} holds {what} of {r} and no pod uses it"),
                evidence: vec![
                    format!("ResourceClaim {name} is allocated on {r} ({}) with an empty reservedFor", c.model),
                    "an allocated claim keeps its devices from every other claim until it is deleted or \
                     deallocated"
                        .into(),
                ],
                gpu_hours_per_day: share * 24.0,
                cost_per_day: cx.money(Some(&c.model), share * 24.0),
                suggestion: Suggestion::Words {
                    text: format!(
                        "start the pod it was made for, or delete it (kubectl delete resourceclaim -n {})",
                        name.replacen('/', " ", 1)
                    ),
                },
                cards: vec![r.clone()],
            });
        }
    }
}

/// A DynamicMIG card whose free slices would hold a waiting claim's profile by count but
/// in none of its placements.
pub(super) fn fragmentation(fleet: &Fleet, cx: &Context, out: &mut Vec<Finding>) {
    for (n, c) in fleet.cards().filter(|(n, c)| dynamic(c) && c.mig.enabled && usable(n, c)) {
        let (Some(free), Some(model)) = (c.free_slice_mask(), c.gpu_model()) else { continue };
        if free == 0 {
            continue;
        }
        let Some((who, profile, size)) = blocked_profile(fleet, c, model, free) else { continue };
        let r = CardRef::new(n.name.clone(), c.index);
        let stranded = free.count_ones();
        let share = f64::from(stranded) / f64::from(model.memory_slices);
        let mut evidence = vec![
            format!(
                "{who} waits for {profile} ({size} memory slices); {r} has {stranded} free ({}) but no placement of \
                 {profile} lies in them: the instances {} sit across them",
                slices(free),
                c.layout_text()
            ),
            "the DRA driver places each claim first-fit as it is allocated, so free slices split this way stay \
             split until the instances around them go"
                .into(),
        ];
        let pods: Vec<&str> = c.holders().collect();
        if !pods.is_empty() {
            let mut line = format!(
                "moving {} ({}) would free {r} whole",
                crate::units::count(pods.len() as u64, "holder", "holders"),
                pods.join(", ")
            );
            if let Some(room) = room_elsewhere(fleet, c, &r) {
                line.push_str(&format!("; {room}"));
            }
            evidence.push(line);
        }
        out.push(Finding {
            kind: Kind::Fragmentation,
            severity: Severity::Info,
            subject: Subject::Card { card: r.to_string() },
            title: format!(
                "{r}: {} free under DynamicMIG, but {profile} fits in no placement there",
                crate::units::count(u64::from(stranded), "memory slice", "memory slices"),
            ),
            evidence,
            gpu_hours_per_day: share * 24.0,
            cost_per_day: cx.money(Some(&model.name), share * 24.0),
            suggestion: Suggestion::Words {
                text: "when its holders restart, let them land on other cards (drain it, then undrain once they \
                       moved); DynamicMIG has no layout to change"
                    .into(),
            },
            cards: vec![r],
        });
    }
}

/// The first waiting claim of this model whose MIG profile needs no more slices than are free
/// but has no placement in them (its id, the profile, the slices it takes).
fn blocked_profile(fleet: &Fleet, c: &Card, model: &GpuModel, free: u16) -> Option<(String, String, u8)> {
    let pending = fleet.workloads.iter().filter(|w| w.state == WorkloadState::Pending && w.request.wants_gpu());
    for w in pending {
        if w.request.model.as_deref().is_some_and(|m| model_key(m) != model.name) {
            continue;
        }
        let Some(p) = w.request.mig_profile.as_deref().and_then(|p| model.profile(p)) else { continue };
        let by_count = u32::from(p.memory_slices) <= free.count_ones();
        let placed = p.placements.iter().any(|pl| pl.mask() & free == pl.mask());
        // The counters may say more than the slices (compute, engines): trust them where known.
        let counters = c.dra.as_ref().and_then(|d| d.placeable.as_ref()).is_none_or(|v| !v.contains(&p.name));
        if by_count && !placed && counters {
            return Some((w.id.clone(), p.name.clone(), p.memory_slices));
        }
    }
    None
}

/// Other DynamicMIG cards of the model that can still place every profile the card's
/// instances have, in words.
fn room_elsewhere(fleet: &Fleet, c: &Card, r: &CardRef) -> Option<String> {
    let mut profiles: Vec<&str> = c.mig.instances.iter().map(|i| i.profile.as_str()).collect();
    profiles.sort_unstable();
    profiles.dedup();
    let others: Vec<String> = fleet
        .cards()
        .filter(|(n, o)| dynamic(o) && o.model == c.model && usable(n, o) && !(n.name == r.node && o.index == r.index))
        .filter(|(_, o)| {
            let placeable = o.dra.as_ref().and_then(|d| d.placeable.as_ref());
            let whole_free = o.is_idle() && !o.mig.enabled;
            whole_free || placeable.is_some_and(|p| profiles.iter().all(|x| p.iter().any(|y| y == x)))
        })
        .map(|(n, o)| format!("{}/{}", n.name, o.index))
        .collect();
    match others.as_slice() {
        [] => None,
        [one] => Some(format!("{one} can still place their profiles ({})", profiles.join(", "))),
        [first, ..] => Some(format!(
            "{} cards can still place their profiles ({}), e.g. {first}",
            others.len(),
            profiles.join(", ")
        )),
    }
}

/// A slice mask as `0,4-7`.
fn slices(mask: u16) -> String {
    let on: Vec<u16> = (0..16).filter(|i| mask & (1 << i) != 0).collect();
    let mut parts = Vec::new();
    let mut i = 0;
    while i < on.len() {
        let start = on[i];
        while i + 1 < on.len() && on[i + 1] == on[i] + 1 {
            i += 1;
        }
        parts.push(if on[i] == start { start.to_string() } else { format!("{start}-{}", on[i]) });
        i += 1;
    }
    parts.join(",")
}
