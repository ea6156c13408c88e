//! MIG waste: an instance's memory minus what its workload uses (a 15 GB job on a 20 GB
//! instance wastes 5 GB) where a smaller profile would hold the job, per workload and summed
//! per profile, with that profile. Where none would, the unused memory is the catalog's
//! granularity: not waste, said in the profile's summary. Judged on the idle rules' window
//! (one holder, its activity covering it), with a tenth of memory as margin and the compute the
//! job uses: a smaller profile must hold both.

use std::collections::BTreeMap;

use super::{Context, Finding, Kind, Severity, Subject, Suggestion};
use crate::model::mig::best_fit;
use crate::model::{CardRef, Fleet};

/// The memory margin a smaller profile must leave: a tenth of what the job uses.
const MARGIN_DIVISOR: u64 = 10;

pub(super) fn mig_waste(fleet: &Fleet, cx: &Context, out: &mut Vec<Finding>) {
    let min_mib = (cx.advisor.waste_min_gib * 1024.0) as u64;
    // Per profile: instances, memory held, memory wasted.
    let mut per: BTreeMap<String, (usize, u64, u64, f64, Option<String>)> = BTreeMap::new();
    // Per profile: instances whose unused memory no smaller profile would save, and that memory.
    let mut granular: BTreeMap<String, (usize, u64)> = BTreeMap::new();
    for (n, c) in fleet.cards().filter(|(_, c)| c.mig.enabled) {
        let Some(model) = c.gpu_model() else { continue };
        for i in c.mig.instances.iter().filter(|i| !i.workloads.is_empty()) {
            // Right-sizing is judged on the window the idle rules use: one holder whose activity
            // covers it (a finding ten seconds after the instance was made judged seconds).
            let [one] = i.workloads.as_slice() else { continue };
            let Some(a) = fleet.workload(one).and_then(|w| w.activity).filter(|a| a.window_covered()) else { continue };
            // The most its holder was seen using.
            let peak = a.peak_mem_mib;
            let (Some(total), Some(used)) = (i.memory_total_mib, i.memory_used_mib.max(peak)) else { continue };
            let wasted = total.saturating_sub(used);
            if wasted < min_mib {
                continue;
            }
            let r = CardRef::new(n.name.clone(), c.index);
            // Waste only where a smaller profile would hold the job: else it is the catalog's
            // granularity (the smallest instance that holds it is this size).
            // With a margin of memory (a tenth), and the compute it uses: its busiest of now and
            // the window's mean, as a share of this instance's compute slices (a job at 60 % of a
            // 2g needs two slices, not a 1g).
            let need_mib = used + used / MARGIN_DIVISOR;
            let slices = model.profiles.iter().find(|p| p.name == i.profile).map_or(1, |p| p.compute_slices);
            let busy = a.mean_pct.into_iter().chain(a.now_pct).fold(f64::NAN, f64::max);
            let busy = if busy.is_nan() { 100.0 } else { busy.clamp(0.0, 100.0) };
            let need_compute = ((busy / 100.0 * f64::from(slices)).ceil() as u8).clamp(1, slices.max(1));
            let Some(smaller) =
                best_fit(model, need_mib, need_compute).filter(|f| f.profile != i.profile && f.memory_mib < total)
            else {
                let g = granular.entry(i.profile.clone()).or_default();
                g.0 += 1;
                g.1 += wasted;
                continue;
            };
            // The wasted share of the card, a day long.
            let card_mib =
                c.memory_total_mib.unwrap_or(total.max(1) * u64::from(model.memory_slices) / u64::from(i.size.max(1)));
            let gpu_hours = wasted as f64 / card_mib.max(1) as f64 * 24.0;
            let e = per.entry(i.profile.clone()).or_default();
            e.0 += 1;
            e.1 += total;
            e.2 += wasted;
            e.3 += gpu_hours;
            e.4.get_or_insert_with(|| model.name.clone());
            let suggestion = Suggestion::Words {
                text: format!(
                    "a {} instance holds it ({:.1} GiB); next time the card is free, lay it out with {} here",
                    smaller.profile,
                    smaller.memory_mib as f64 / 1024.0,
                    smaller.profile
                ),
            };
            let holder = i.workloads.join(", ");
            out.push(Finding {
                kind: Kind::MigWaste,
                severity: Severity::Info,
                subject: Subject::Instance { card: r.to_string(), gi: i.gi_id, profile: i.profile.clone() },
                title: format!(
                    "{holder} uses {:.1} of {:.1} GiB on {r} {} ({:.1} GiB idle)",
                    used as f64 / 1024.0,
                    total as f64 / 1024.0,
                    i.profile,
                    wasted as f64 / 1024.0
                ),
                evidence: vec![
                    format!(
                        "peak memory in use {:.1} GiB of the instance's {:.1} GiB (the most seen, now included)",
                        used as f64 / 1024.0,
                        total as f64 / 1024.0
                    ),
                    format!(
                        "{} holds it with a tenth to spare ({:.1} GiB) and the {} compute slices it uses ({busy:.0} % \
                         of this instance's {slices}, over the last {} min)",
                        smaller.profile,
                        need_mib as f64 / 1024.0,
                        need_compute,
                        a.covered_s / 60
                    ),
                ],
                gpu_hours_per_day: gpu_hours,
                cost_per_day: cx.money(Some(&model.name), gpu_hours),
                suggestion,
                cards: vec![r],
            });
        }
    }
    for (profile, (count, held, wasted, gpu_hours, model)) in per.into_iter().filter(|(_, v)| v.0 > 1) {
        out.push(Finding {
            kind: Kind::MigWaste,
            severity: Severity::Info,
            subject: Subject::Profile { profile: profile.clone() },
            title: format!("{count} {profile} instances leave {:.1} GiB idle", wasted as f64 / 1024.0),
            evidence: std::iter::once(format!(
                "{:.1} GiB held, {:.0} % of it unused at the holders' peak, by jobs a smaller profile holds",
                held as f64 / 1024.0,
                wasted as f64 * 100.0 / held.max(1) as f64
            ))
            .chain(granular.get(&profile).map(|(n, mib)| {
                format!(
                    "{:.1} GiB unused on {n} more is the catalog's granularity: no smaller profile holds their jobs (not counted)",
                    *mib as f64 / 1024.0
                )
            }))
            .collect(),
            gpu_hours_per_day: gpu_hours,
            cost_per_day: cx.money(model.as_deref(), gpu_hours),
            suggestion: Suggestion::Words {
                text: format!("smaller profiles for these jobs, or more jobs per {profile}"),
            },
            cards: Vec::new(),
        });
    }
}
