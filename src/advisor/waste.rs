//! MIG waste: an instance's memory minus what its workload uses (a 15 GB job on a 20 GB
//! instance wastes 5 GB) where a smaller profile would hold the job, per workload and summed
//! per profile, with that profile. Where none would, the unused memory is the catalog's
//! granularity: not waste, said in the profile's summary. Judged on the idle rules' window
//! (one holder, its activity covering it), with a tenth of memory as margin and the compute the
//! job uses: a smaller profile must hold both.

use std::collections::BTreeMap;

use super::{Context, Finding, Kind, Severity, Subject, Suggestion};
use crate::model::mig::{Fit, GpuModel, best_fit};
use crate::model::{CardRef, Fleet, MigInstance};

/// The memory margin a smaller profile must leave: a tenth of what the job uses.
const MARGIN_DIVISOR: u64 = 10;

pub(super) fn mig_waste(fleet: &Fleet, cx: &Context, out: &mut Vec<Finding>) {
    let min_mib = (cx.advisor.waste_min_gib * 1024.0) as u64;
    // Per profile: instances, memory held, memory wasted.
    let mut per: BTreeMap<String, ProfileWaste> = BTreeMap::new();
    // Per profile: instances whose unused memory no smaller profile would save, and that memory.
    let mut granular: BTreeMap<String, (usize, u64)> = BTreeMap::new();
    for (n, c) in fleet.cards().filter(|(_, c)| c.mig.enabled) {
        let Some(model) = c.gpu_model() else { continue };
        for i in c.mig.instances.iter().filter(|i| !i.workloads.is_empty()) {
            let Some(j) = Judged::of(fleet, model, i, min_mib) else { continue };
            let r = CardRef::new(n.name.clone(), c.index);
            // Waste only where a smaller profile would hold the job: else it is the catalog's
            // granularity (the smallest instance that holds it is this size).
            let Some(smaller) = best_fit(model, j.need_mib, j.need_compute)
                .filter(|f| f.profile != i.profile && f.memory_mib < j.total)
            else {
                let g = granular.entry(i.profile.clone()).or_default();
                g.0 += 1;
                g.1 += j.wasted;
                continue;
            };
            // The wasted share of the card, a day long.
            let card_mib = c
                .memory_total_mib
                .unwrap_or(j.total.max(1) * u64::from(model.memory_slices) / u64::from(i.size.max(1)));
            let gpu_hours = j.wasted as f64 / card_mib.max(1) as f64 * 24.0;
            let e = per.entry(i.profile.clone()).or_default();
            e.count += 1;
            e.held += j.total;
            e.wasted += j.wasted;
            e.gpu_hours += gpu_hours;
            e.model.get_or_insert_with(|| model.name.clone());
            out.push(instance_finding(cx, r, &model.name, i, &j, &smaller, gpu_hours));
        }
    }
    profile_findings(cx, per, &granular, out);
}

/// The waste of the instances of one profile that a smaller profile would hold: how many,
/// the memory they hold and leave unused, that share of their cards a day, and their model.
#[derive(Default)]
struct ProfileWaste {
    count: usize,
    held: u64,
    wasted: u64,
    gpu_hours: f64,
    model: Option<String>,
}

/// One held instance's memory as right-sizing judges it: what it holds and what its holder
/// used at most, and what a smaller profile must give: the memory with its margin and the
/// compute slices its holder uses.
struct Judged {
    total: u64,
    used: u64,
    wasted: u64,
    need_mib: u64,
    /// The instance's compute slices, and how busy its holder was on them.
    slices: u8,
    busy: f64,
    need_compute: u8,
    /// The minutes the holder's activity covers.
    covered_min: u64,
}

impl Judged {
    /// Instance `i` of a card of `model`, judged; `None` where it is not (not one holder whose
    /// activity covers the window, its memory unknown, or less than `min_mib` unused).
    fn of(fleet: &Fleet, model: &GpuModel, i: &MigInstance, min_mib: u64) -> Option<Self> {
        // Right-sizing is judged on the window the idle rules use: one holder whose activity
        // covers it (a finding ten seconds after the instance was made judged seconds).
        let [one] = i.workloads.as_slice() else { return None };
        let a = fleet.workload(one).and_then(|w| w.activity).filter(|a| a.window_covered())?;
        // The most its holder was seen using.
        let peak = a.peak_mem_mib;
        let (Some(total), Some(used)) = (i.memory_total_mib, i.memory_used_mib.max(peak)) else { return None };
        let wasted = total.saturating_sub(used);
        if wasted < min_mib {
            return None;
        }
        // With a margin of memory (a tenth), and the compute it uses: its busiest of now and
        // the window's mean, as a share of this instance's compute slices (a job at 60 % of a
        // 2g needs two slices, not a 1g).
        let need_mib = used + used / MARGIN_DIVISOR;
        let slices = model.profiles.iter().find(|p| p.name == i.profile).map_or(1, |p| p.compute_slices);
        let busy = a.mean_pct.into_iter().chain(a.now_pct).fold(f64::NAN, f64::max);
        let busy = if busy.is_nan() { 100.0 } else { busy.clamp(0.0, 100.0) };
        let need_compute = ((busy / 100.0 * f64::from(slices)).ceil() as u8).clamp(1, slices.max(1));
        Some(Self { total, used, wasted, need_mib, slices, busy, need_compute, covered_min: a.covered_s / 60 })
    }
}

/// The finding for instance `i` on card `r` (of model `model`), which the `smaller` profile
/// would hold.
fn instance_finding(
    cx: &Context,
    r: CardRef,
    model: &str,
    i: &MigInstance,
    j: &Judged,
    smaller: &Fit,
    gpu_hours: f64,
) -> Finding {
    let Judged { total, used, wasted, need_mib, slices, busy, need_compute, covered_min } = *j;
    let suggestion = Suggestion::Words {
        text: format!(
            "a {} instance holds it ({:.1} GiB); next time the card is free, lay it out with {} here",
            smaller.profile,
            smaller.memory_mib as f64 / 1024.0,
            smaller.profile
        ),
    };
    let holder = i.workloads.join(", ");
    Finding {
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
                covered_min
            ),
        ],
        gpu_hours_per_day: gpu_hours,
        cost_per_day: cx.money(Some(model), gpu_hours),
        suggestion,
        cards: vec![r],
    }
}

/// One finding per profile with more than one instance a smaller profile would hold, with the
/// memory left unused on the others as the catalog's granularity.
fn profile_findings(
    cx: &Context,
    per: BTreeMap<String, ProfileWaste>,
    granular: &BTreeMap<String, (usize, u64)>,
    out: &mut Vec<Finding>,
) {
    for (profile, w) in per.into_iter().filter(|(_, v)| v.count > 1) {
        let ProfileWaste { count, held, wasted, gpu_hours, model } = w;
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
