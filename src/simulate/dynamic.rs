//! DynamicMIG as NVIDIA's DRA driver does it (`simulate --policy dynamic`): a card is laid out
//! per claim. A share of a card asks for the smallest MIG profile that holds its compute and
//! memory; the instance goes at a placement the card's counters still allow (its memory
//! slices free, the card's compute slices and the profile's count not exceeded: the MIG
//! catalog's placements, which are what the driver publishes as devices), is created when
//! the job starts and destroyed when it ends. The Kubernetes scheduler takes the first
//! device that fits, so the lowest free placement (devices in name order); tessera's
//! placements take the one that leaves the most placements open.

use super::state::inst::Inst;
use crate::model::mig::{GpuModel, Placement};

/// The profile (index into the model's catalog profiles) a share of `milli` thousandths of a
/// card with `mem_mib` of card memory asks for: the smallest that holds both (fewest memory
/// slices, then compute slices, then memory), media extensions left out, as `best_fit`
/// chooses. `None`: no profile holds it (the job takes the whole GPU device).
pub fn profile_for(gm: &GpuModel, milli: u32, mem_mib: u64) -> Option<u8> {
    let need = super::job::slices_for(milli, gm.compute_slices);
    gm.profiles
        .iter()
        .enumerate()
        .filter(|(_, p)| !p.has_media_extensions())
        .filter(|(_, p)| p.planning_mib() >= mem_mib && p.compute_slices >= need)
        .min_by_key(|(_, p)| (p.memory_slices, p.compute_slices, p.planning_mib()))
        .map(|(i, _)| i as u8)
}

/// What the card's instances consume: memory slices (a mask) and compute slices.
fn consumed(insts: &[Inst]) -> (u16, u8) {
    insts.iter().fold((0, 0), |(mask, compute), i| {
        (mask | Placement { start: i.start, size: i.size }.mask(), compute.saturating_add(i.compute))
    })
}

/// Whether the counters let profile `p` go at `pl` beside `insts`.
pub fn allows(gm: &GpuModel, insts: &[Inst], p: u8, pl: Placement) -> bool {
    let Some(prof) = gm.profiles.get(usize::from(p)) else { return false };
    let (mask, compute) = consumed(insts);
    let count = insts.iter().filter(|i| i.profile == p).count();
    pl.mask() & mask == 0
        && compute.saturating_add(prof.compute_slices) <= gm.compute_slices
        && count < usize::from(prof.max_count)
}

/// The placements of profile `p` the counters allow now, lowest start first.
pub fn free_placements(gm: &GpuModel, insts: &[Inst], p: u8) -> Vec<Placement> {
    let Some(prof) = gm.profiles.get(usize::from(p)) else { return Vec::new() };
    let mut v: Vec<Placement> = prof.placements.iter().copied().filter(|&pl| allows(gm, insts, p, pl)).collect();
    v.sort_unstable();
    v
}

/// The instance of profile `p` at `pl`, held by nobody yet.
pub fn instance(gm: &GpuModel, p: u8, pl: Placement) -> Option<Inst> {
    let prof = gm.profiles.get(usize::from(p))?;
    Some(Inst {
        profile: p,
        start: pl.start,
        size: pl.size,
        compute: prof.compute_slices,
        mem_mib: prof.planning_mib(),
        holder: None,
    })
}

/// How many (profile, placement) pairs of the plain profiles the counters allow beside
/// `insts`: the room a card keeps open.
fn open_pairs(gm: &GpuModel, insts: &[Inst]) -> usize {
    gm.profiles
        .iter()
        .enumerate()
        .filter(|(_, p)| !p.has_media_extensions())
        .map(|(i, p)| p.placements.iter().filter(|&&pl| allows(gm, insts, i as u8, pl)).count())
        .sum()
}

/// Where profile `p` goes on a card holding `insts`: the lowest free placement under first
/// fit (the scheduler's), else the one after which the most placements stay open (then the
/// lowest). `None`: the counters allow it nowhere.
pub fn choose(gm: &GpuModel, insts: &[Inst], p: u8, first_fit: bool) -> Option<Placement> {
    let free = free_placements(gm, insts, p);
    if first_fit {
        return free.first().copied();
    }
    let mut with: Vec<Inst> = insts.to_vec();
    let mut best: Option<(usize, Placement)> = None;
    for pl in free {
        let Some(i) = instance(gm, p, pl) else { continue };
        with.push(i);
        let open = open_pairs(gm, &with);
        with.pop();
        if best.is_none_or(|b| open > b.0) {
            best = Some((open, pl));
        }
    }
    best.map(|b| b.1)
}

/// The room a card holding `insts` has left, as the instances of one maximal completion:
/// the largest plain profile the counters allow at its lowest free placement, again and
/// again. The compute slices of each (what fragmentation counts as free places).
pub fn room(gm: &GpuModel, insts: &[Inst]) -> Vec<u8> {
    let mut with: Vec<Inst> = insts.to_vec();
    let mut out = Vec::new();
    let mut order: Vec<u8> = (0..gm.profiles.len() as u8)
        .filter(|&i| gm.profiles.get(usize::from(i)).is_some_and(|p| !p.has_media_extensions()))
        .collect();
    order.sort_by_key(|&i| {
        gm.profiles.get(usize::from(i)).map(|p| std::cmp::Reverse((p.compute_slices, p.memory_slices)))
    });
    'grow: loop {
        for &p in &order {
            if let Some(i) = free_placements(gm, &with, p).first().and_then(|&pl| instance(gm, p, pl)) {
                out.push(i.compute);
                with.push(i);
                continue 'grow;
            }
        }
        return out;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::mig::lookup;

    fn h100() -> &'static GpuModel {
        let Some(m) = lookup("H100-80GB") else { panic!("catalog") };
        m
    }

    fn index(gm: &GpuModel, name: &str) -> u8 {
        let Some(i) = gm.profiles.iter().position(|p| p.name == name) else { panic!("{name}") };
        i as u8
    }

    fn held(gm: &GpuModel, name: &str, start: u8) -> Inst {
        let p = index(gm, name);
        let Some(size) = gm.profiles[usize::from(p)].placements.iter().find(|pl| pl.start == start).map(|pl| pl.size)
        else {
            panic!("{name}@{start}")
        };
        let Some(mut i) = instance(gm, p, Placement { start, size }) else { panic!("instance") };
        i.holder = Some(0);
        i
    }

    #[test]
    fn a_share_asks_for_the_smallest_profile_that_holds_it() {
        let gm = h100();
        // A seventh of the compute and 8 GiB: 1g.10gb; with 15 GiB, 1g.20gb; half the card: 4g.
        assert_eq!(profile_for(gm, 142, 8 * 1024), Some(index(gm, "1g.10gb")));
        assert_eq!(profile_for(gm, 142, 15 * 1024), Some(index(gm, "1g.20gb")));
        assert_eq!(profile_for(gm, 300, 0), Some(index(gm, "3g.40gb")));
        assert_eq!(profile_for(gm, 500, 0), Some(index(gm, "4g.40gb")));
        assert_eq!(profile_for(gm, 142, 200 * 1024), None);
    }

    #[test]
    fn first_fit_takes_the_lowest_placement_the_counters_allow() {
        let gm = h100();
        let one = index(gm, "1g.10gb");
        let three = index(gm, "3g.40gb");
        assert_eq!(choose(gm, &[], one, true).map(|p| p.start), Some(0));
        // The fixture's gpu-0: 1g.10gb@0, 1g.10gb@1, 1g.20gb@2, 3g.40gb@4: a 1g.10gb has no
        // room left (its placements 0–6 all touch a used slice), nor a 3g.
        let gpu0 = [held(gm, "1g.10gb", 0), held(gm, "1g.10gb", 1), held(gm, "1g.20gb", 2), held(gm, "3g.40gb", 4)];
        assert_eq!(choose(gm, &gpu0, one, true), None);
        assert_eq!(choose(gm, &gpu0, three, true), None);
        assert!(room(gm, &gpu0).is_empty());
        // A 3g first fit goes at 0 and leaves the 4g nowhere; tessera's placement puts it at 4.
        let four = index(gm, "4g.40gb");
        let Some(ff) = choose(gm, &[], three, true) else { panic!("room") };
        assert_eq!(ff.start, 0);
        let Some(at0) = instance(gm, three, ff) else { panic!("instance") };
        assert_eq!(choose(gm, &[at0], four, true), None);
        let Some(smart) = choose(gm, &[], three, false) else { panic!("room") };
        assert_eq!(smart.start, 4);
        let Some(at4) = instance(gm, three, smart) else { panic!("instance") };
        assert_eq!(choose(gm, &[at4], four, true).map(|p| p.start), Some(0));
    }

    #[test]
    fn the_counters_bound_compute_and_each_profiles_count() {
        let gm = h100();
        let one = index(gm, "1g.10gb");
        let mut insts = Vec::new();
        while let Some(pl) = choose(gm, &insts, one, true) {
            let Some(i) = instance(gm, one, pl) else { panic!("instance") };
            insts.push(i);
        }
        assert_eq!(insts.len(), 7, "seven 1g.10gb on an H100");
        // Slice 7 is free but no profile can use it beside them: no room.
        assert!(room(gm, &insts).is_empty());
        assert_eq!(room(gm, &[]), vec![7]);
        assert_eq!(room(gm, &[held(gm, "3g.40gb", 4)]), vec![4]);
    }
}
