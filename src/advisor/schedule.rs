//! A MIG schedule suggested from the measured day/night demand: per GPU model with MIG, the
//! nodes, profile and day window for which laying those cards out as `all-<profile>` by day
//! and whole at night leaves the fewest request-hours waiting over the measured day, counted against the
//! whole fleet's capacity (a MIG request needs an instance of its profile, a whole-card request
//! a whole card of its model or any), with the idle capacity and the waiting of the suggestion
//! against the cards as they are now and against either layout all day. Suggested only when it
//! clearly beats all three.

use serde::Serialize;

use super::{Context, Finding, Kind, Severity, Subject, Suggestion};
use crate::model::Fleet;
use crate::model::demand::{DemandHistory, whole_key};
use crate::model::mig::GpuModel;

/// Hours of the day the history must cover before a schedule is suggested.
pub const MIN_HOURS: usize = 20;

/// Request-hours a day a schedule must save over every single layout to be worth its changes.
pub const MIN_GAIN_H: f64 = 2.0;

/// What a layout plan does over one day.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Outcome {
    /// Requests with no place, in request-hours a day (an instance or a whole card each):
    /// how much work would wait in the queue, and how long. The suggestion minimises this.
    pub waiting_h: f64,
    /// The same in GPU-hours (an instance counts as its share of a card).
    pub waiting_gpu_h: f64,
    /// Capacity laid out and unused, in GiB-hours a day.
    pub idle_gib_h: f64,
}

impl Outcome {
    fn add(self, o: Outcome) -> Outcome {
        Outcome {
            waiting_h: self.waiting_h + o.waiting_h,
            waiting_gpu_h: self.waiting_gpu_h + o.waiting_gpu_h,
            idle_gib_h: self.idle_gib_h + o.idle_gib_h,
        }
    }
}

/// One hour of the measured day.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HourDemand {
    pub hour: u8,
    /// Instances of the day profile asked for.
    pub small: f64,
    /// Whole cards asked for (any model, and this one).
    pub whole: f64,
    /// The suggestion lays the cards out small in this hour.
    pub small_layout: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Suggested {
    pub model: String,
    /// The nodes the schedule covers, and their cards of the model.
    pub nodes: Vec<String>,
    pub cards: usize,
    /// The day window's profile and instances per card.
    pub profile: String,
    pub per_card: u8,
    /// The day window, UTC hours: `start..end` (end may wrap past midnight).
    pub day_start: u8,
    pub day_end: u8,
    pub hours: Vec<HourDemand>,
    /// The day as the cards are laid out now, with the schedule, and with those cards in one
    /// layout all day.
    pub current: Outcome,
    pub suggested: Outcome,
    pub all_whole: Outcome,
    pub all_small: Outcome,
    /// The `[[schedule]]` to paste into the config.
    pub toml: String,
}

/// Capacity by shape: MIG instances per profile, whole (unshared, MIG off) cards per model.
#[derive(Debug, Clone, Default)]
struct Cap {
    inst: std::collections::BTreeMap<String, f64>,
    whole: std::collections::BTreeMap<String, f64>,
    /// GiB of a whole card per model.
    gib: std::collections::BTreeMap<String, f64>,
}

impl Cap {
    fn of<'a>(cards: impl Iterator<Item = &'a crate::model::Card>, sign: f64, into: &mut Cap) {
        for c in cards {
            if c.health.fault().is_some() {
                continue;
            }
            let model = crate::model::capacity::model_key(&c.model);
            if c.mig.enabled {
                for i in &c.mig.instances {
                    *into.inst.entry(i.profile.clone()).or_default() += sign;
                }
            } else if c.sharing.unit.is_none() && c.sharing_mode() != Some(crate::model::SharingMode::TimeSliced) {
                *into.whole.entry(model.clone()).or_default() += sign;
            }
            if let Some(m) = c.memory_total_mib {
                into.gib.insert(model, m as f64 / 1024.0);
            }
        }
    }
}

/// What one hour of `demand` leaves waiting and idle with capacity `cap`.
fn hour(demand: &DemandHistory, h: usize, cap: &Cap, shares: &dyn Fn(&str) -> (f64, f64)) -> Outcome {
    let mut o = Outcome::default();
    let Some(hd) = demand.hours.get(h) else { return o };
    let mut profiles: std::collections::BTreeSet<&str> = cap.inst.keys().map(String::as_str).collect();
    profiles.extend(hd.mean.keys().filter(|k| !k.starts_with("whole")).map(String::as_str));
    for p in profiles {
        let (gpu, gib) = shares(p);
        let d = demand.mean(h, p);
        let c = cap.inst.get(p).copied().unwrap_or(0.0).max(0.0);
        o.waiting_h += (d - c).max(0.0);
        o.waiting_gpu_h += (d - c).max(0.0) * gpu;
        o.idle_gib_h += (c - d).max(0.0) * gib;
    }
    // Whole cards: a model's own demand on its cards first, then demand for any model on
    // what is left.
    let mut left = 0.0;
    let mut left_gib = 0.0;
    for (m, c) in &cap.whole {
        let d = demand.mean(h, &whole_key(Some(m)));
        o.waiting_h += (d - c).max(0.0);
        o.waiting_gpu_h += (d - c).max(0.0);
        let l = (c - d).max(0.0);
        left += l;
        left_gib += l * cap.gib.get(m).copied().unwrap_or(0.0);
    }
    for (k, d) in &hd.mean {
        if let Some(m) = k.strip_prefix("whole:")
            && !cap.whole.contains_key(m)
        {
            o.waiting_h += d;
            o.waiting_gpu_h += d;
        }
    }
    let any = demand.mean(h, &whole_key(None));
    o.waiting_h += (any - left).max(0.0);
    o.waiting_gpu_h += (any - left).max(0.0);
    let used = any.min(left);
    o.idle_gib_h += if left > 0.0 { left_gib * (1.0 - used / left) } else { 0.0 };
    o
}

/// Every model's suggestion from `demand` (none below `MIN_HOURS` measured hours, and none
/// where no two-window schedule leaves clearly less waiting than the cards as they are now or
/// in one layout all day).
pub fn suggest(fleet: &Fleet, demand: &DemandHistory) -> Vec<Suggested> {
    if demand.covered() < MIN_HOURS {
        return Vec::new();
    }
    let mut base = Cap::default();
    Cap::of(fleet.cards().map(|(_, c)| c), 1.0, &mut base);
    // An instance's share of a card and its GiB, from the first model that has the profile.
    let models: Vec<&'static GpuModel> = {
        let mut v: Vec<&'static GpuModel> = Vec::new();
        for (_, c) in fleet.cards() {
            if let Some(m) = c.gpu_model()
                && !v.iter().any(|x| x.name == m.name)
            {
                v.push(m);
            }
        }
        v
    };
    let shares = |p: &str| {
        models
            .iter()
            .find_map(|m| {
                m.profile(p)
                    .map(|x| (f64::from(x.memory_slices) / f64::from(m.memory_slices.max(1)), x.nominal_gb as f64))
            })
            .unwrap_or((1.0 / 7.0, 10.0))
    };
    models.iter().filter_map(|m| for_model(fleet, m, demand, &base, &shares)).collect()
}

fn for_model(
    fleet: &Fleet,
    m: &'static GpuModel,
    demand: &DemandHistory,
    base: &Cap,
    shares: &dyn Fn(&str) -> (f64, f64),
) -> Option<Suggested> {
    let is_m = |c: &crate::model::Card| c.gpu_model().is_some_and(|x| x.name == m.name) && c.health.fault().is_none();
    let mut nodes: Vec<&str> =
        fleet.nodes.iter().filter(|n| n.cards.iter().any(is_m)).map(|n| n.name.as_str()).collect();
    nodes.sort_unstable();
    let day = |cap: &Cap, at: &dyn Fn(usize) -> bool, small: &Cap| {
        (0..24).fold(Outcome::default(), |acc, h| acc.add(hour(demand, h, if at(h) { small } else { cap }, shares)))
    };
    let current = day(base, &|_| false, base);
    let in_day = |s: usize, e: usize, h: usize| if s < e { h >= s && h < e } else { h >= s || h < e };
    type Best<'p> = (Outcome, Vec<&'p str>, &'static crate::model::mig::Profile, usize, usize, Cap, Cap);
    let mut best: Option<Best> = None;
    // Which nodes: each one alone (the first 16), and the first 2, 4, 8, ... and all of them
    // in name order: enough choice, bounded work.
    let mut sets: Vec<Vec<&str>> = nodes.iter().take(16).map(|n| vec![*n]).collect();
    sets.extend(
        std::iter::successors(Some(2usize), |x| Some(x * 2))
            .take_while(|&x| x < nodes.len())
            .chain((nodes.len() > 1).then_some(nodes.len()))
            .map(|j| nodes[..j].to_vec()),
    );
    for chosen in &sets {
        let cards: Vec<&crate::model::Card> = fleet
            .nodes
            .iter()
            .filter(|n| chosen.contains(&n.name.as_str()))
            .flat_map(|n| n.cards.iter().filter(|c| is_m(c)))
            .collect();
        let mut without = base.clone();
        Cap::of(cards.iter().copied(), -1.0, &mut without);
        let n = cards.len() as f64;
        let mut night = without.clone();
        *night.whole.entry(m.name.clone()).or_default() += n;
        for p in m.profiles.iter().filter(|p| !p.has_media_extensions() && p.max_count > 1) {
            let mut small = without.clone();
            *small.inst.entry(p.name.clone()).or_default() += n * f64::from(p.max_count);
            let per_hour: Vec<(Outcome, Outcome)> =
                (0..24).map(|h| (hour(demand, h, &small, shares), hour(demand, h, &night, shares))).collect();
            for s in 0..24 {
                for len in 2..=22 {
                    let e = (s + len) % 24;
                    let o = (0..24).fold(Outcome::default(), |acc, h| {
                        acc.add(if in_day(s, e, h) { per_hour[h].0 } else { per_hour[h].1 })
                    });
                    let key = |x: &Outcome| (x.waiting_h, x.waiting_gpu_h, x.idle_gib_h);
                    let better = best.as_ref().is_none_or(|b| {
                        let (a, b) = (key(&o), key(&b.0));
                        a.0 < b.0 - 1e-9
                            || ((a.0 - b.0).abs() <= 1e-9
                                && (a.1 < b.1 - 1e-9 || ((a.1 - b.1).abs() <= 1e-9 && a.2 < b.2 - 1e-9)))
                    });
                    if better {
                        best = Some((o, chosen.clone(), p, s, e, night.clone(), small.clone()));
                    }
                }
            }
        }
    }
    let (suggested, chosen, p, s, e, night, small) = best?;
    let all_whole = day(&night, &|_| false, &night);
    let all_small = day(&small, &|_| true, &small);
    let static_best = current.waiting_h.min(all_whole.waiting_h).min(all_small.waiting_h);
    // Worth a schedule only when it leaves clearly less waiting (two request-hours a day) than
    // the cards as they are and than either layout all day.
    if suggested.waiting_h > static_best - MIN_GAIN_H {
        return None;
    }
    let chosen: Vec<String> = chosen.iter().map(|n| n.to_string()).collect();
    let cards = fleet
        .nodes
        .iter()
        .filter(|n| chosen.contains(&n.name))
        .flat_map(|n| n.cards.iter().filter(|c| is_m(c)))
        .count();
    let name = format!("suggested-{}", m.name.to_ascii_lowercase());
    let list = chosen.iter().map(|n| format!("\"{n}\"")).collect::<Vec<_>>().join(", ");
    let toml = format!(
        "[[schedule]]\nname = \"{name}\"\nnodes = [{list}]\nmodel = \"{}\"\ntimezone = \"UTC\"\nlead = \"15m\"\nmin_hold = \"2h\"\nrunning = \"wait\"\n\
         [[schedule.window]]\nname = \"day\"\nhours = \"{s:02}:00-{e:02}:00\"\nmig_config = \"all-{}\"\n\
         [[schedule.window]]\nname = \"night\"\nhours = \"{e:02}:00-{s:02}:00\"\nlayout = \"whole\"\n",
        m.name, p.name
    );
    let whole_of = |h: usize| demand.mean(h, &whole_key(None)) + demand.mean(h, &whole_key(Some(&m.name)));
    Some(Suggested {
        model: m.name.clone(),
        nodes: chosen,
        cards,
        profile: p.name.clone(),
        per_card: p.max_count,
        day_start: s as u8,
        day_end: e as u8,
        hours: (0..24)
            .map(|h| HourDemand {
                hour: h as u8,
                small: demand.mean(h, &p.name),
                whole: whole_of(h),
                small_layout: in_day(s, e, h),
            })
            .collect(),
        current,
        suggested,
        all_whole,
        all_small,
        toml,
    })
}

/// The suggestions as findings (info: nothing is wrong now, the day could be laid out better).
pub fn findings(fleet: &Fleet, cx: &Context, out: &mut Vec<Finding>) {
    let Some(demand) = cx.demand else { return };
    let made;
    let found = match cx.suggested {
        Some(s) => s,
        None => {
            made = suggest(fleet, demand);
            &made[..]
        }
    };
    for s in found {
        let better = s.current.waiting_h - s.suggested.waiting_h;
        let o = |x: &Outcome| {
            format!(
                "{:.1} request-hours waiting ({:.1} GPU-h), {:.0} GiB-h idle a day",
                x.waiting_h, x.waiting_gpu_h, x.idle_gib_h
            )
        };
        out.push(Finding {
            kind: Kind::ScheduleSuggestion,
            severity: Severity::Info,
            subject: Subject::Pool { model: s.model.clone() },
            title: format!(
                "{} {} on {}: all-{} {:02}:00-{:02}:00 UTC, whole otherwise: {better:.1} fewer request-hours waiting a day",
                s.cards,
                s.model,
                s.nodes.join(","),
                s.profile,
                s.day_start,
                s.day_end
            ),
            evidence: vec![
                format!("measured demand by hour over {} of 24 hours (running and waiting work)", demand.covered()),
                format!("as laid out now: {}", o(&s.current)),
                format!("suggested: {}", o(&s.suggested)),
                format!("those cards whole all day: {}", o(&s.all_whole)),
                format!("those cards {} × {} all day: {}", s.per_card, s.profile, o(&s.all_small)),
                "model: a MIG request needs an instance of its profile, a whole-card request a whole card; measured means, not peaks".into(),
            ],
            // Not waste held now: the gain is in waiting work, said in the title and evidence.
            gpu_hours_per_day: 0.0,
            cost_per_day: None,
            suggestion: Suggestion::Words {
                text: format!(
                    "add the [[schedule]] that `tessera schedule suggest` prints (day all-{} {:02}:00-{:02}:00 UTC, night whole)",
                    s.profile, s.day_start, s.day_end
                ),
            },
            cards: fleet
                .cards()
                .filter(|(n, c)| s.nodes.contains(&n.name) && c.gpu_model().is_some_and(|m| m.name == s.model))
                .map(|(nd, c)| crate::model::CardRef::new(nd.name.clone(), c.index))
                .collect(),
        });
    }
}

#[cfg(test)]
#[path = "schedule_tests.rs"]
mod tests;
