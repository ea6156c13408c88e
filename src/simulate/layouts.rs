//! The MIG layouts a run starts from: the fleet's own where it has them (the demo, a
//! recording, `--layout`), else a static layout sized to the demand's mix: whole cards for
//! the share of demand that asks for whole cards, the catalog's maximal layouts for the rest,
//! chosen card by card to cover the instances the demand needs at once on average.

use std::collections::BTreeMap;

use super::fleet::Fleet;
use super::job::{Job, slices_for};
use crate::model::mig::layout::maximal_layouts;
use crate::model::mig::{GpuModel, Placed, best_fit};

/// Per card of the fleet, in order: its starting layout (`None`: whole).
pub fn initial(fleet: &Fleet, jobs: &[Job]) -> Vec<Option<Vec<Placed>>> {
    let mut planned: Vec<std::vec::IntoIter<Option<Vec<Placed>>>> = fleet
        .models
        .iter()
        .map(|m| {
            let Some(gm) = m.mig else { return Vec::new().into_iter() };
            let cards: u32 = fleet
                .nodes
                .iter()
                .filter(|n| fleet.models[n.model as usize].name == m.name && n.layouts.is_empty())
                .map(|n| n.gpus)
                .sum();
            let mine: Vec<&Job> = jobs.iter().filter(|j| j.may_run_on(&m.name)).collect();
            for_mix(gm, &mine, cards as usize).into_iter()
        })
        .collect();
    let mut out = Vec::with_capacity(fleet.gpus() as usize);
    for n in &fleet.nodes {
        for k in 0..n.gpus as usize {
            if !n.layouts.is_empty() {
                out.push(n.layouts.get(k).cloned().flatten());
            } else {
                out.push(planned[n.model as usize].next().flatten());
            }
        }
    }
    out
}

/// Layouts for `cards` cards of `gm` serving `jobs`' mix.
pub fn for_mix(gm: &'static GpuModel, jobs: &[&Job], cards: usize) -> Vec<Option<Vec<Placed>>> {
    let all = gm.compute_slices;
    let mut whole = 0.0f64;
    let mut per_profile: BTreeMap<String, (u8, f64)> = BTreeMap::new();
    for j in jobs {
        let secs = j.duration as f64;
        if j.milli >= 1000 {
            whole += f64::from(j.gpus) * secs * f64::from(all);
            continue;
        }
        let need = slices_for(j.milli, all);
        match best_fit(gm, j.mem_mib, need) {
            Some(fit) => {
                let e = per_profile.entry(fit.profile).or_insert((fit.compute_slices, 0.0));
                e.1 += secs * f64::from(fit.compute_slices);
            }
            None => whole += secs * f64::from(all),
        }
    }
    let shared: f64 = per_profile.values().map(|v| v.1).sum();
    let total = whole + shared;
    if cards == 0 || shared <= 0.0 {
        return vec![None; cards];
    }
    let whole_cards = ((whole / total) * cards as f64).round() as usize;
    let cut = cards - whole_cards.min(cards);
    // Instances wanted of each profile across the cut cards.
    let mut want: BTreeMap<String, f64> = per_profile
        .iter()
        .map(|(p, (slices, s))| (p.clone(), s / shared * cut as f64 * f64::from(all) / f64::from(*slices)))
        .collect();
    let layouts = maximal_layouts(gm);
    let mut out = vec![None; whole_cards.min(cards)];
    for _ in 0..cut {
        let score = |l: &Vec<Placed>| -> f64 {
            let mut counts: BTreeMap<&str, f64> = BTreeMap::new();
            for p in l {
                *counts.entry(p.profile.as_str()).or_default() += 1.0;
            }
            counts
                .iter()
                .map(|(p, n)| {
                    let slices = gm.profile(p).map_or(0, |x| x.compute_slices);
                    n.min(*want.get(*p).unwrap_or(&0.0)) * f64::from(slices)
                })
                .sum()
        };
        let best = layouts.iter().map(|l| (score(l), l)).fold(None::<(f64, &Vec<Placed>)>, |b, x| match b {
            Some(b) if b.0 >= x.0 => Some(b),
            _ => Some(x),
        });
        match best {
            Some((s, l)) if s > 0.0 => {
                for p in l {
                    if let Some(w) = want.get_mut(&p.profile) {
                        *w = (*w - 1.0).max(0.0);
                    }
                }
                out.push(Some(l.clone()));
            }
            // The mix is covered: the rest serve whole-card work.
            _ => out.push(None),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::mig::lookup;

    fn job(milli: u32, mem_gib: u64) -> Job {
        let mut j = Job::new("j", 0, 3600, 1);
        j.milli = milli;
        j.mem_mib = mem_gib * 1024;
        j
    }

    #[test]
    fn small_inference_gets_small_instances_and_training_whole_cards() {
        let Some(gm) = lookup("A100-80GB") else { panic!("catalog") };
        let jobs: Vec<Job> = (0..14).map(|_| job(142, 8)).chain((0..2).map(|_| job(1000, 0))).collect();
        let refs: Vec<&Job> = jobs.iter().collect();
        let l = for_mix(gm, &refs, 4);
        assert_eq!(l.len(), 4);
        assert_eq!(l.iter().filter(|x| x.is_none()).count(), 2, "{l:?}");
        let small = l.iter().flatten().flatten().filter(|p| p.profile == "1g.10gb").count();
        assert_eq!(small, 14, "{l:?}");
    }

    #[test]
    fn whole_only_demand_keeps_cards_whole() {
        let Some(gm) = lookup("H100-80GB") else { panic!("catalog") };
        let jobs = [job(1000, 0)];
        let refs: Vec<&Job> = jobs.iter().collect();
        assert_eq!(for_mix(gm, &refs, 3), vec![None, None, None]);
    }
}
