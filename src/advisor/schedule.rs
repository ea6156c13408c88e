//! A MIG schedule suggested from the measured day/night demand. Per GPU model with MIG, it
//! searches the nodes, profile and day window for which laying those cards out as
//! `all-<profile>` by day and whole otherwise leaves the least work waiting over the measured
//! day, counted hour by hour against the whole fleet's capacity (a MIG request needs an
//! instance of its profile, a whole-card request a whole card of its model or of any), and
//! compares it with the cards as they are now and with either layout all day. It is
//! recommended only when it saves GPU-hours of waiting without leaving more requests waiting.
//! Models are taken one after the other, each against the capacity the ones before would
//! leave, so two suggestions never count the same waiting work.

use serde::Serialize;

use super::{Context, Finding, Kind, Severity, Subject, Suggestion};
use crate::model::demand::{DemandHistory, whole_key};
use crate::model::mig::{GpuModel, Profile};
use crate::model::{Card, Fleet, Node};

/// Every hour of the day must be measured: an hour never seen is not an hour without demand.
pub const MIN_HOURS: usize = 24;

/// GPU-hours of waiting a day a schedule must save over every single layout to be worth it.
pub const MIN_GAIN_GPU_H: f64 = 1.0;

/// What a layout plan does over one day.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Outcome {
    /// Units asked for and not there (an instance, or one whole card), summed over the hours:
    /// how many requests would wait, and how long.
    pub waiting_h: f64,
    /// The same in GPU-hours (an instance counts as its share of a card): the measure the
    /// suggestion is chosen by.
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

    /// Less waiting in GPU-hours, then in units, then less idle.
    fn better_than(&self, o: &Outcome) -> bool {
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-9;
        if !close(self.waiting_gpu_h, o.waiting_gpu_h) {
            return self.waiting_gpu_h < o.waiting_gpu_h;
        }
        if !close(self.waiting_h, o.waiting_h) {
            return self.waiting_h < o.waiting_h;
        }
        self.idle_gib_h < o.idle_gib_h - 1e-9
    }
}

/// One hour of the measured day.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HourDemand {
    pub hour: u8,
    /// Instances of the day profile asked for.
    pub small: f64,
    /// Whole cards asked for (for any model, and for this one).
    pub whole: f64,
    /// The suggestion lays the cards out small in this hour.
    pub small_layout: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Suggested {
    pub model: String,
    /// The nodes the schedule covers, and their cards of the model it changes.
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
    /// Worth adding: it saves `MIN_GAIN_GPU_H` over every single layout and leaves no more
    /// requests waiting; else the best found, with `why_not`.
    pub recommended: bool,
    pub why_not: Option<String>,
    /// The `[[schedule]]` to paste into the config.
    pub toml: String,
}

/// Capacity by shape: MIG instances per profile, whole (unshared, MIG off) cards per model.
#[derive(Debug, Clone, Default)]
struct Cap {
    inst: std::collections::BTreeMap<String, f64>,
    whole: std::collections::BTreeMap<String, f64>,
}

impl Cap {
    /// Add (`sign` 1) or take away (-1) what `cards` offer now. Unhealthy and shared
    /// (time-sliced, MPS) cards offer nothing here: shares are another kind of demand.
    fn count<'a>(&mut self, cards: impl Iterator<Item = &'a Card>, sign: f64) {
        for c in cards.filter(|c| usable(c)) {
            if c.mig.enabled {
                for i in &c.mig.instances {
                    *self.inst.entry(i.profile.clone()).or_default() += sign;
                }
            } else {
                *self.whole.entry(crate::model::mig::catalog::model_key(&c.model)).or_default() += sign;
            }
        }
    }
}

/// A card a schedule may lay out: healthy and not shared.
fn usable(c: &Card) -> bool {
    c.health.fault().is_none() && c.sharing.unit.is_none() && !c.sharing_mode().is_some_and(|m| m.unisolated())
}

/// GiB of a whole card per model, from the cards that say.
type Gib = std::collections::BTreeMap<String, f64>;

/// What one hour of `demand` leaves waiting and idle with capacity `cap` changed by `delta`
/// (what a candidate takes away and adds: no copy of the fleet's capacity per candidate).
fn hour(
    demand: &DemandHistory,
    h: usize,
    cap: &Cap,
    delta: &Cap,
    gib: &Gib,
    shares: &dyn Fn(&str) -> (f64, f64),
) -> Outcome {
    let mut o = Outcome::default();
    let Some(hd) = demand.hours.get(h) else { return o };
    let inst = |p: &str| cap.inst.get(p).copied().unwrap_or(0.0) + delta.inst.get(p).copied().unwrap_or(0.0);
    let whole = |m: &str| cap.whole.get(m).copied().unwrap_or(0.0) + delta.whole.get(m).copied().unwrap_or(0.0);
    let mut profiles: std::collections::BTreeSet<&str> = cap.inst.keys().map(String::as_str).collect();
    profiles.extend(delta.inst.keys().map(String::as_str));
    profiles.extend(hd.mean.keys().filter(|k| !k.starts_with("whole")).map(String::as_str));
    for p in profiles {
        let (gpu, p_gib) = shares(p);
        let d = demand.mean(h, p);
        let c = inst(p).max(0.0);
        o.waiting_h += (d - c).max(0.0);
        o.waiting_gpu_h += (d - c).max(0.0) * gpu;
        o.idle_gib_h += (c - d).max(0.0) * p_gib;
    }
    // Whole cards: a model's own demand on its cards first, then demand for any model on
    // what is left.
    let mut models: std::collections::BTreeSet<&str> = cap.whole.keys().map(String::as_str).collect();
    models.extend(delta.whole.keys().map(String::as_str));
    let (mut left, mut left_gib) = (0.0, 0.0);
    for m in &models {
        let c = whole(m).max(0.0);
        let d = demand.mean(h, &whole_key(Some(m)));
        o.waiting_h += (d - c).max(0.0);
        o.waiting_gpu_h += (d - c).max(0.0);
        let l = (c - d).max(0.0);
        left += l;
        left_gib += l * gib.get(*m).copied().unwrap_or(0.0);
    }
    for (k, d) in &hd.mean {
        if let Some(m) = k.strip_prefix("whole:")
            && !models.contains(m)
        {
            o.waiting_h += d;
            o.waiting_gpu_h += d;
        }
    }
    let any = demand.mean(h, &whole_key(None));
    o.waiting_h += (any - left).max(0.0);
    o.waiting_gpu_h += (any - left).max(0.0);
    if left > 0.0 {
        o.idle_gib_h += left_gib * (1.0 - any.min(left) / left);
    }
    o
}

/// The measured day under per-hour capacities, each changed by `delta(h)`.
fn day(
    demand: &DemandHistory,
    caps: &[Cap],
    delta: &dyn Fn(usize) -> Cap,
    gib: &Gib,
    shares: &dyn Fn(&str) -> (f64, f64),
) -> Outcome {
    (0..24).fold(Outcome::default(), |acc, h| acc.add(hour(demand, h, &caps[h], &delta(h), gib, shares)))
}

/// `a` and `b` together.
fn plus(a: &Cap, b: &Cap) -> Cap {
    let mut x = a.clone();
    for (k, v) in &b.inst {
        *x.inst.entry(k.clone()).or_default() += v;
    }
    for (k, v) in &b.whole {
        *x.whole.entry(k.clone()).or_default() += v;
    }
    x
}

fn in_day(s: usize, e: usize, h: usize) -> bool {
    if s < e { h >= s && h < e } else { h >= s || h < e }
}

/// A schedule name from a model name: letters, digits, `.`, `_` and `-` only.
fn schedule_name(model: &str) -> String {
    let mut out = String::from("suggested-");
    for ch in model.to_ascii_lowercase().chars() {
        if ch.is_ascii_alphanumeric() || matches!(ch, '.' | '_' | '-') {
            out.push(ch);
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_end_matches('-').to_string()
}

/// The best schedule for each GPU model with MIG (`recommended` when worth adding), from
/// `demand`; none below `MIN_HOURS` measured hours. Cards `skip` says (covered by a configured
/// schedule) are never suggested again.
pub fn suggest(fleet: &Fleet, demand: &DemandHistory, skip: &dyn Fn(&Node, &Card) -> bool) -> Vec<Suggested> {
    if demand.covered() < MIN_HOURS {
        return Vec::new();
    }
    let mut base = Cap::default();
    base.count(fleet.cards().map(|(_, c)| c), 1.0);
    let mut gib = Gib::new();
    let mut models: Vec<&'static GpuModel> = Vec::new();
    for (_, c) in fleet.cards() {
        if let Some(m) = c.memory_total_mib {
            gib.insert(crate::model::mig::catalog::model_key(&c.model), m as f64 / 1024.0);
        }
        if let Some(m) = c.gpu_model()
            && !models.iter().any(|x| x.name == m.name)
        {
            models.push(m);
        }
    }
    // An instance's share of a card and its GiB, from the first model that has the profile.
    let shares = |p: &str| {
        models
            .iter()
            .find_map(|m| {
                m.profile(p)
                    .map(|x| (f64::from(x.memory_slices) / f64::from(m.memory_slices.max(1)), x.nominal_gb as f64))
            })
            .unwrap_or((1.0 / 8.0, 10.0))
    };
    // Models one after the other, the most waiting saved first, each against the capacity
    // the ones before would leave hour by hour; a model is searched again only when an
    // earlier recommendation changed that capacity.
    let mut caps: Vec<Cap> = vec![base; 24];
    let mut out = Vec::new();
    let mut found: Vec<(&'static GpuModel, Best)> =
        models.iter().filter_map(|m| search(fleet, m, demand, &caps, &gib, &shares, skip).map(|b| (*m, b))).collect();
    while !found.is_empty() {
        let i = (0..found.len()).max_by(|&a, &b| found[a].1.gain().total_cmp(&found[b].1.gain())).unwrap_or(0);
        let (m, best) = found.remove(i);
        let s = describe(fleet, m, demand, &caps, &gib, &shares, &best);
        if s.recommended {
            caps = (0..24).map(|h| plus(&caps[h], best.delta(h))).collect();
            found = found
                .into_iter()
                .filter_map(|(m, _)| search(fleet, m, demand, &caps, &gib, &shares, skip).map(|b| (m, b)))
                .collect();
        }
        out.push(s);
    }
    out
}

/// The best candidate of one model: what it takes away and adds by day and by night.
struct Best {
    outcome: Outcome,
    nodes: Vec<String>,
    profile: &'static Profile,
    start: usize,
    end: usize,
    small: Cap,
    night: Cap,
    current: Outcome,
}

impl Best {
    fn gain(&self) -> f64 {
        self.current.waiting_gpu_h - self.outcome.waiting_gpu_h
    }

    fn delta(&self, h: usize) -> &Cap {
        if in_day(self.start, self.end, h) { &self.small } else { &self.night }
    }
}

fn search(
    fleet: &Fleet,
    m: &'static GpuModel,
    demand: &DemandHistory,
    caps: &[Cap],
    gib: &Gib,
    shares: &dyn Fn(&str) -> (f64, f64),
    skip: &dyn Fn(&Node, &Card) -> bool,
) -> Option<Best> {
    let mine = |node: &Node, c: &Card| c.gpu_model().is_some_and(|x| x.name == m.name) && usable(c) && !skip(node, c);
    let mut nodes: Vec<&str> =
        fleet.nodes.iter().filter(|n| n.cards.iter().any(|c| mine(n, c))).map(|n| n.name.as_str()).collect();
    nodes.sort_unstable();
    // Which nodes: each one alone (the first 16), and the first 2, 4, 8, ... and all of them
    // in name order: enough choice, bounded work.
    let mut sets: Vec<Vec<&str>> = nodes.iter().take(16).map(|n| vec![*n]).collect();
    sets.extend(
        std::iter::successors(Some(2usize), |x| Some(x * 2))
            .take_while(|&x| x < nodes.len())
            .chain((nodes.len() > 1).then_some(nodes.len()))
            .map(|j| nodes[..j].to_vec()),
    );
    let none = Cap::default();
    let current = day(demand, caps, &|_| none.clone(), gib, shares);
    let mut best: Option<Best> = None;
    for chosen in &sets {
        let cards: Vec<&Card> = fleet
            .nodes
            .iter()
            .filter(|n| chosen.contains(&n.name.as_str()))
            .flat_map(|n| n.cards.iter().filter(move |c| mine(n, c)))
            .collect();
        let n = cards.len() as f64;
        let mut gone = Cap::default();
        gone.count(cards.iter().copied(), -1.0);
        let mut night = gone.clone();
        *night.whole.entry(m.name.clone()).or_default() += n;
        let night_hours: Vec<Outcome> = (0..24).map(|h| hour(demand, h, &caps[h], &night, gib, shares)).collect();
        for p in m.profiles.iter().filter(|p| !p.has_media_extensions() && p.max_count > 1) {
            let mut small = gone.clone();
            *small.inst.entry(p.name.clone()).or_default() += n * f64::from(p.max_count);
            let small_hours: Vec<Outcome> = (0..24).map(|h| hour(demand, h, &caps[h], &small, gib, shares)).collect();
            for s in 0..24 {
                for len in 2..=22 {
                    let e = (s + len) % 24;
                    let o = (0..24).fold(Outcome::default(), |acc, h| {
                        acc.add(if in_day(s, e, h) { small_hours[h] } else { night_hours[h] })
                    });
                    if best.as_ref().is_none_or(|b| o.better_than(&b.outcome)) {
                        best = Some(Best {
                            outcome: o,
                            nodes: chosen.iter().map(|x| x.to_string()).collect(),
                            profile: p,
                            start: s,
                            end: e,
                            small: small.clone(),
                            night: night.clone(),
                            current,
                        });
                    }
                }
            }
        }
    }
    best
}

fn describe(
    fleet: &Fleet,
    m: &'static GpuModel,
    demand: &DemandHistory,
    caps: &[Cap],
    gib: &Gib,
    shares: &dyn Fn(&str) -> (f64, f64),
    b: &Best,
) -> Suggested {
    let all_whole = day(demand, caps, &|_| b.night.clone(), gib, shares);
    let all_small = day(demand, caps, &|_| b.small.clone(), gib, shares);
    let s = b.outcome;
    let best_static = [b.current, all_whole, all_small];
    let gpu_floor = best_static.iter().map(|o| o.waiting_gpu_h).fold(f64::INFINITY, f64::min);
    let units_floor = best_static.iter().map(|o| o.waiting_h).fold(f64::INFINITY, f64::min);
    let saved = gpu_floor - s.waiting_gpu_h;
    let why_not = if saved <= 0.0 {
        Some(format!("it leaves {:.1} GPU-hours a day more waiting than the best single layout", -saved))
    } else if saved < MIN_GAIN_GPU_H {
        Some(format!("it saves only {saved:.1} GPU-hours of waiting a day over the best single layout"))
    } else if s.waiting_h > units_floor + 1e-9 {
        Some(format!(
            "it saves {saved:.1} GPU-hours but leaves {:.1} more instance- or card-hours waiting than a single layout",
            s.waiting_h - units_floor
        ))
    } else {
        None
    };
    let cards = fleet
        .nodes
        .iter()
        .filter(|n| b.nodes.contains(&n.name))
        .flat_map(|n| n.cards.iter())
        .filter(|c| c.gpu_model().is_some_and(|x| x.name == m.name) && usable(c))
        .count();
    let (s0, e0) = (b.start, b.end);
    let list = b.nodes.iter().map(|n| format!("\"{n}\"")).collect::<Vec<_>>().join(", ");
    let toml = format!(
        "[[schedule]]\nname = \"{}\"\nnodes = [{list}]\nmodel = \"{}\"\ntimezone = \"UTC\"\nlead = \"15m\"\nmin_hold = \"2h\"\nrunning = \"wait\"\n\
         [[schedule.window]]\nname = \"day\"\nhours = \"{s0:02}:00-{e0:02}:00\"\nmig_config = \"all-{}\"\n\
         [[schedule.window]]\nname = \"night\"\nhours = \"{e0:02}:00-{s0:02}:00\"\nlayout = \"whole\"\n",
        schedule_name(&m.name),
        m.name,
        b.profile.name
    );
    let whole_of = |h: usize| demand.mean(h, &whole_key(None)) + demand.mean(h, &whole_key(Some(&m.name)));
    Suggested {
        model: m.name.clone(),
        nodes: b.nodes.clone(),
        cards,
        profile: b.profile.name.clone(),
        per_card: b.profile.max_count,
        day_start: s0 as u8,
        day_end: e0 as u8,
        hours: (0..24)
            .map(|h| HourDemand {
                hour: h as u8,
                small: demand.mean(h, &b.profile.name),
                whole: whole_of(h),
                small_layout: in_day(s0, e0, h),
            })
            .collect(),
        current: b.current,
        suggested: s,
        all_whole,
        all_small,
        recommended: why_not.is_none(),
        why_not,
        toml,
    }
}

/// The recommended suggestions as findings (info: nothing is wrong now, the day could be laid
/// out better).
pub fn findings(fleet: &Fleet, cx: &Context, out: &mut Vec<Finding>) {
    let Some(demand) = cx.demand else { return };
    let made;
    let found = match cx.suggested {
        Some(s) => s,
        None => {
            made = suggest(fleet, demand, &|_, _| false);
            &made[..]
        }
    };
    for s in found.iter().filter(|s| s.recommended) {
        let better = s.current.waiting_gpu_h - s.suggested.waiting_gpu_h;
        let o = |x: &Outcome| {
            format!(
                "{:.1} GPU-h waiting ({:.1} instance- or card-hours), {:.0} GiB-h idle a day",
                x.waiting_gpu_h, x.waiting_h, x.idle_gib_h
            )
        };
        out.push(Finding {
            kind: Kind::ScheduleSuggestion,
            severity: Severity::Info,
            subject: Subject::Pool { model: s.model.clone() },
            title: format!(
                "{} {} on {}: all-{} {:02}:00-{:02}:00 UTC, whole otherwise: {better:.1} GPU-h less waiting a day",
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
                "model: a MIG request needs an instance of its profile, a whole-card request a whole card; hourly means, not peaks".into(),
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
                .filter(|(n, c)| s.nodes.contains(&n.name) && c.gpu_model().is_some_and(|m| m.name == s.model) && usable(c))
                .map(|(nd, c)| crate::model::CardRef::new(nd.name.clone(), c.index))
                .collect(),
        });
    }
}

#[cfg(test)]
#[path = "schedule_tests.rs"]
mod tests;
