//! The MIG layout planner: which idle cards to lay out how so that the most waiting work
//! starts. It weighs each waiting request by priority and wait, then proposes per-card layouts
//! (NVIDIA placements from the catalog) that serve the most weight, then set aside the least
//! memory in instances nobody waits for, then touch the fewest cards. Cards with holders are
//! never changed. Pure; `planner_tests.rs` checks it against exhaustive search.
//!
//! The search: idle cards of one model and one present layout are interchangeable, so they
//! form a class; a move turns one card of a class into one of the model's maximal layouts (or
//! a whole card). Problems small enough are searched exhaustively; larger ones by a lazy
//! greedy construction (from no card decided, the decision that serves the most added weight)
//! polished one and two cards at a time. The result is never worse than changing nothing.
//! Only cards a backend can change are candidates: the simulator any, NVML within the card's
//! MIG mode (a mode change needs a GPU reset); Kubernetes changes whole nodes by named
//! configs, so its cards are left to the `all-<profile>` picker; a DRA card under DynamicMIG
//! is never one (the driver lays it out per claim).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use crate::model::capacity::usable;
use crate::model::mig::catalog::model_key;
use crate::model::mig::{GpuModel, Placed, catalog};
use crate::model::{CardRef, Fleet, Workload, WorkloadState};

mod search;
pub use search::EXACT_COMBINATIONS;

/// A card the greedy construction has not decided yet: it supplies nothing.
const OPEN: usize = usize::MAX;

/// One card the plan changes.
#[derive(Debug, Clone, PartialEq)]
pub struct CardChange {
    pub card: CardRef,
    /// The catalog model name.
    pub model: String,
    /// `whole` or `profile@start,...`, as `repartition` takes it.
    pub from: String,
    pub to: String,
    /// The waiting workloads the new layout would start, heaviest first.
    pub serves: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Plan {
    pub changes: Vec<CardChange>,
    /// Every workload the plan starts, heaviest first.
    pub served: Vec<String>,
    /// The same that nothing needs changing for: free instances and idle cards today.
    pub served_now: Vec<String>,
    /// The objective: served weight, then memory set aside unused (MiB), then cards touched.
    pub score: Score,
}

/// What the planner maximises, compared in order: weight served, less memory in new
/// instances that serve nobody, fewer cards changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Score {
    pub weight: u64,
    pub unused_mib: std::cmp::Reverse<u64>,
    pub touched: std::cmp::Reverse<u32>,
}

/// How much a waiting workload counts: higher priority and longer waits first. Priority is
/// the scheduler's number (clamped to 0..10^9: Slurm's multifactor priorities run to millions);
/// the wait counts in minutes, capped at a week, plus an hour so that new work still counts.
pub fn weight(w: &Workload, now: DateTime<Utc>) -> u64 {
    let prio = w.priority.unwrap_or(0).clamp(0, 1_000_000_000) as u64;
    let wait = w.wait(now).map_or(0, |d| d.num_minutes().clamp(0, 7 * 24 * 60) as u64);
    (1 + prio) * (60 + wait)
}

/// Supply and changed-card units of a choice, kept up to date move by move.
#[derive(Debug, Clone)]
struct Tally {
    supply: Vec<u32>,
    touched: Vec<u32>,
    n: u32,
}

impl Tally {
    fn apply(&mut self, units: &[u32], changed: bool, add: bool) {
        for (u, &k) in units.iter().enumerate() {
            if add {
                self.supply[u] += k;
            } else {
                self.supply[u] -= k;
            }
            if changed {
                if add {
                    self.touched[u] += k;
                } else {
                    self.touched[u] -= k;
                }
            }
        }
        if changed {
            if add {
                self.n += 1;
            } else {
                self.n -= 1;
            }
        }
    }
}

/// What one unit of capacity is: a whole card of a model, or a MIG instance of a profile.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Unit {
    model: usize,
    profile: Option<String>,
    /// A memory slice a layout leaves that no profile can use: it serves nobody, and counts as
    /// memory set aside unused (a layout that strands a slice no longer wins a tie on memory
    /// over one that serves the same and strands none).
    stranded: bool,
}

/// A layout a card may get (`None`: a whole card) and the units it supplies, by unit kind.
type CardOption = (Option<Vec<Placed>>, Vec<u32>);
/// A waiting workload: its weight and id.
type Member = (u64, String);

/// The requests for one profile (or for whole cards), heaviest first, and its units.
#[derive(Debug, Clone, Default)]
struct Family {
    /// Each request's group.
    order: Vec<usize>,
    /// Each request's weight, and the sums of the first k (`prefix[k]`).
    weights: Vec<u64>,
    prefix: Vec<u64>,
    units: Vec<usize>,
    /// Some request names its model (else any unit of the profile serves any request).
    named: bool,
}

/// The planning problem in counts: unit kinds, what each card option supplies, the demand.
#[derive(Debug, Clone, Default)]
pub(crate) struct Problem {
    units: Vec<Unit>,
    unit_mib: Vec<u64>,
    /// Per model: name, and its options (`None` = whole card) with what each supplies.
    models: Vec<(String, Vec<CardOption>)>,
    /// Supply that is not the planner's to change: free instances on held cards.
    fixed: Vec<u32>,
    /// Candidate cards: (card, model, the option it has now).
    pub(crate) cards: Vec<(CardRef, usize, usize)>,
    /// Per candidate: its MIG mode may not change (NVML: that needs a GPU reset).
    mode_fixed: Vec<bool>,
    /// Demand groups: accepted units in preference order, members heaviest first.
    groups: Vec<(Vec<usize>, Vec<Member>)>,
    /// Whether each group names its model (then its one accepted unit is that model's).
    named: Vec<bool>,
    /// Requests for one profile (or whole cards), heaviest first.
    families: Vec<Family>,
}

/// Requests by (profile or `None` for a whole card, model index or `None` for any).
type Demand = BTreeMap<(Option<String>, Option<usize>), Vec<Member>>;

/// Waiting work of one unit: a MIG instance of a profile or one whole card, of a named model
/// or any. Multi-unit requests are not the planner's (they need several units on one card or
/// node): preemption and scale-out speak for them.
fn waiting(fleet: &Fleet, now: DateTime<Utc>, model_ix: &BTreeMap<String, usize>) -> Demand {
    let mut groups = Demand::new();
    for w in fleet.workloads.iter().filter(|w| w.state == WorkloadState::Pending) {
        if w.request.gpus.unwrap_or(1) > 1 {
            continue;
        }
        let model = match w.request.model.as_deref().map(model_key) {
            Some(k) => match model_ix.get(&k) {
                Some(&m) => Some(m),
                None => continue,
            },
            None => None,
        };
        groups.entry((w.request.mig_profile.clone(), model)).or_default().push((weight(w, now), w.id.clone()));
    }
    groups
}

impl Problem {
    pub(crate) fn new(fleet: &Fleet, now: DateTime<Utc>) -> Self {
        Self::build(fleet, now, None, &Pinned::new())
    }

    /// The problem over `fleet`; with `only`, that card is the one candidate (idle and steady,
    /// whatever backend: the question is which layout, not who applies it) and every other
    /// card's free capacity is fixed supply.
    /// `pinned` cards are not candidates: a schedule's window in force sets their layout.
    fn build(fleet: &Fleet, now: DateTime<Utc>, only: Option<&CardRef>, pinned: &Pinned) -> Self {
        let mut p = Problem::default();
        let mut model_ix: BTreeMap<String, usize> = BTreeMap::new();
        let mut keys: std::collections::HashMap<&str, String> = std::collections::HashMap::new();
        // A node's backend, asked once for its cards (they come node by node).
        let mut node_backend: Option<(&crate::model::Node, Option<crate::act::Backend>)> = None;
        for (node, card) in fleet.cards().filter(|(n, c)| usable(n, c)) {
            let key = keys.entry(card.model.as_str()).or_insert_with(|| model_key(&card.model)).clone();
            let m = match model_ix.get(&key) {
                Some(&m) => m,
                None => {
                    let m = p.add_model(&key, catalog::lookup(&card.model));
                    model_ix.insert(key, m);
                    m
                }
            };
            let r = CardRef::new(node.name.clone(), card.index);
            // What the repartition guard asks of a card, and a backend that can change it.
            let backend = match node_backend {
                Some((n, b)) if std::ptr::eq(n, node) => b,
                _ => {
                    let b = crate::act::plan::repartition_backend(fleet, node);
                    node_backend = Some((node, b));
                    b
                }
            };
            // A time-sliced or MPS card serves replicas: the device plugin's config changes too,
            // which is not a repartition.
            let shared = !card.mig.enabled && card.sharing.replicas.is_some();
            let idle = card.is_idle() && card.processes.is_empty() && card.mig.error.is_none() && !shared;
            let steady = card.mig.pending.is_none_or(|pending| pending == card.mig.enabled);
            let mode_fixed = backend == Some(crate::act::Backend::Nvml);
            let can = match backend {
                Some(crate::act::Backend::Simulated) => true,
                Some(crate::act::Backend::Nvml) => card.mig.enabled,
                _ => false,
            };
            // A DynamicMIG card has no layout to plan: the DRA driver lays it out per claim.
            let dynamic = super::dra::dynamic(card);
            let candidate = !dynamic
                && match only {
                    Some(o) => *o == r,
                    None => can && !pinned.contains(&r),
                };
            if idle && steady && candidate {
                let now_opt = if card.mig.enabled { p.option_of(m, Some(card.layout())) } else { Some(0) };
                if let Some(o) = now_opt {
                    p.cards.push((r, m, o));
                    p.mode_fixed.push(mode_fixed);
                    continue;
                }
            }
            // Held, or not tessera's to change: what is free on it stays as it is.
            if idle && !card.mig.enabled {
                let u = p.unit(m, None, card.memory_total_mib.unwrap_or(0));
                p.fixed[u] += 1;
            }
            if card.mig.enabled {
                for i in card.mig.instances.iter().filter(|i| i.workloads.is_empty() && !i.in_use_by_unknown()) {
                    let u = p.unit(m, Some(i.profile.clone()), i.memory_total_mib.unwrap_or(0));
                    p.fixed[u] += 1;
                }
            }
        }
        // Supplies made before a later unit kind existed are shorter: pad them.
        let n = p.units.len();
        for (_, opts) in &mut p.models {
            for (_, s) in opts.iter_mut() {
                s.resize(n, 0);
            }
        }
        let demand = waiting(fleet, now, &model_ix);
        p.add_demand(demand);
        p
    }

    fn add_model(&mut self, name: &str, model: Option<&'static GpuModel>) -> usize {
        let m = self.models.len();
        self.models.push((name.to_string(), Vec::new()));
        let card_mib = model.map_or(0, |g| g.profiles.iter().map(|p| p.planning_mib()).max().unwrap_or(0));
        let whole = self.unit(m, None, card_mib);
        let mut opts = vec![(None, self.supply_of(&[whole]))];
        if let Some(g) = model {
            for layout in crate::model::mig::layout::maximal_layouts(g).iter().cloned() {
                let mut units: Vec<usize> = layout
                    .iter()
                    .map(|pl| {
                        let mib = g.profile(&pl.profile).map_or(0, |x| x.planning_mib());
                        self.unit(m, Some(pl.profile.clone()), mib)
                    })
                    .collect();
                units.extend(self.stranded_units(m, g, &layout, card_mib));
                opts.push((Some(layout), self.supply_of(&units)));
            }
        }
        self.models[m].1 = opts;
        m
    }

    /// The option index of `layout` for model `m`, added when it is not a maximal layout.
    fn option_of(&mut self, m: usize, layout: Option<Vec<Placed>>) -> Option<usize> {
        let mut layout = layout?;
        layout.sort_by_key(|p| p.start);
        if let Some(o) = self.models[m].1.iter().position(|(l, _)| l.as_ref() == Some(&layout)) {
            return Some(o);
        }
        let g = catalog::lookup(&self.models[m].0)?;
        crate::model::mig::validate(g, &layout).ok()?;
        let mut units: Vec<usize> = layout
            .iter()
            .map(|pl| self.unit(m, Some(pl.profile.clone()), g.profile(&pl.profile).map_or(0, |x| x.planning_mib())))
            .collect();
        let card_mib = g.profiles.iter().map(|p| p.planning_mib()).max().unwrap_or(0);
        units.extend(self.stranded_units(m, g, &layout, card_mib));
        let supply = self.supply_of(&units);
        self.models[m].1.push((Some(layout), supply));
        Some(self.models[m].1.len() - 1)
    }

    /// One stranded unit for each memory slice `layout` leaves uncovered, a slice's memory each.
    fn stranded_units(&mut self, m: usize, g: &GpuModel, layout: &[Placed], card_mib: u64) -> Vec<usize> {
        let covered: u32 =
            layout.iter().map(|pl| g.profile(&pl.profile).map_or(0, |x| u32::from(x.memory_slices))).sum();
        let left = u32::from(g.memory_slices).saturating_sub(covered);
        if left == 0 {
            return Vec::new();
        }
        let slice_mib = card_mib / u64::from(g.memory_slices.max(1));
        let u = self.unit_of(Unit { model: m, profile: None, stranded: true }, slice_mib);
        vec![u; left as usize]
    }

    fn unit(&mut self, model: usize, profile: Option<String>, mib: u64) -> usize {
        self.unit_of(Unit { model, profile, stranded: false }, mib)
    }

    fn unit_of(&mut self, u: Unit, mib: u64) -> usize {
        if let Some(i) = self.units.iter().position(|x| *x == u) {
            return i;
        }
        self.units.push(u);
        self.unit_mib.push(mib);
        self.fixed.push(0);
        for (_, opts) in &mut self.models {
            for (_, s) in opts.iter_mut() {
                s.push(0);
            }
        }
        self.units.len() - 1
    }

    fn supply_of(&self, units: &[usize]) -> Vec<u32> {
        let mut s = vec![0; self.units.len()];
        for &u in units {
            s[u] += 1;
        }
        s
    }

    /// Demand in groups by (profile, model): units that serve none of them are left out.
    fn add_demand(&mut self, groups: Demand) {
        let mut families: BTreeMap<Option<String>, Vec<(u64, String, usize)>> = BTreeMap::new();
        for ((profile, model), mut members) in groups {
            let n = self.units.len();
            let accepts: Vec<usize> = (0..n)
                .filter(|&u| {
                    !self.units[u].stranded
                        && self.units[u].profile == profile
                        && model.is_none_or(|m| self.units[u].model == m)
                })
                .collect();
            if accepts.is_empty() {
                continue;
            }
            members.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
            let g = self.groups.len();
            let fam = families.entry(profile).or_default();
            fam.extend(members.iter().map(|(w, id)| (*w, id.clone(), g)));
            self.groups.push((accepts, members));
            self.named.push(model.is_some());
        }
        for (profile, mut members) in families {
            members.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
            let units = (0..self.units.len())
                .filter(|&u| !self.units[u].stranded && self.units[u].profile == profile)
                .collect();
            let weights: Vec<u64> = members.iter().map(|m| m.0).collect();
            let prefix = std::iter::once(0)
                .chain(weights.iter().scan(0, |s, w| {
                    *s += w;
                    Some(*s)
                }))
                .collect();
            let order: Vec<usize> = members.iter().map(|m| m.2).collect();
            let named = order.iter().any(|&g| self.named[g]);
            self.families.push(Family { order, weights, prefix, units, named });
        }
    }

    /// Supply of everything: fixed plus each card's chosen option.
    fn supply(&self, choice: &[usize]) -> Vec<u32> {
        let mut s = self.fixed.clone();
        for (&(_, m, _), &o) in self.cards.iter().zip(choice).filter(|(_, o)| **o != OPEN) {
            for (x, y) in s.iter_mut().zip(&self.models[m].1[o].1) {
                *x += y;
            }
        }
        s
    }

    /// Units of each kind on cards that change.
    fn touched(&self, choice: &[usize]) -> (Vec<u32>, u32) {
        let mut t = vec![0; self.units.len()];
        let mut n = 0;
        for (&(_, m, now), &o) in self.cards.iter().zip(choice) {
            if o != now && o != OPEN {
                n += 1;
                for (x, y) in t.iter_mut().zip(&self.models[m].1[o].1) {
                    *x += y;
                }
            }
        }
        (t, n)
    }

    /// How many members of each group each unit kind serves, serving the most weight: per
    /// profile, requests heaviest first, each taken while the taken set can still be placed
    /// (requests naming a model within that model's units, all within the profile's). The
    /// sets that can be placed form a matroid, so taking the heaviest first is optimal.
    fn matching(&self, supply: &[u32]) -> Vec<Vec<(usize, u32)>> {
        let mut out = vec![Vec::new(); self.groups.len()];
        let mut named = vec![0u32; supply.len()];
        for Family { order, units, .. } in &self.families {
            let room: u32 = units.iter().map(|&u| supply[u]).sum();
            let mut taken = 0;
            // (group, members taken), in the order groups first took one.
            let mut got: Vec<(usize, u32)> = Vec::new();
            for &g in order {
                if taken == room {
                    break;
                }
                if self.named[g] {
                    let u = self.groups[g].0[0];
                    if named[u] == supply[u] {
                        continue;
                    }
                    named[u] += 1;
                }
                taken += 1;
                match got.iter_mut().find(|(x, _)| *x == g) {
                    Some((_, n)) => *n += 1,
                    None => got.push((g, 1)),
                }
            }
            // Place: named requests on their model's units, the rest on what is left.
            let mut left: Vec<u32> = units.iter().map(|&u| supply[u] - named[u]).collect();
            for (g, n) in got {
                if self.named[g] {
                    out[g].push((self.groups[g].0[0], n));
                    continue;
                }
                let mut want = n;
                for (i, &u) in units.iter().enumerate() {
                    let t = want.min(left[i]);
                    if t > 0 {
                        left[i] -= t;
                        want -= t;
                        out[g].push((u, t));
                    }
                }
            }
        }
        out
    }

    pub(crate) fn score(&self, choice: &[usize]) -> Score {
        let (touched, n) = self.touched(choice);
        self.eval(&Tally { supply: self.supply(choice), touched, n })
    }

    /// The weight served and the units used, as `matching` places them, without building the
    /// per-group placement (the search's hot path).
    fn served(&self, supply: &[u32]) -> (u64, Vec<u32>) {
        let mut weight = 0;
        let mut used = vec![0u32; supply.len()];
        for f in &self.families {
            let room: u32 = f.units.iter().map(|&u| supply[u]).sum();
            let mut any = 0u32;
            if f.named {
                let mut taken = 0;
                for (&g, &w) in f.order.iter().zip(&f.weights) {
                    if taken == room {
                        break;
                    }
                    if self.named[g] {
                        let u = self.groups[g].0[0];
                        if used[u] == supply[u] {
                            continue;
                        }
                        used[u] += 1;
                    } else {
                        any += 1;
                    }
                    taken += 1;
                    weight += w;
                }
            } else {
                let n = room.min(f.order.len() as u32);
                weight += f.prefix[n as usize];
                any = n;
            }
            for &u in &f.units {
                let t = any.min(supply[u] - used[u]);
                used[u] += t;
                any -= t;
            }
        }
        (weight, used)
    }

    fn eval(&self, t: &Tally) -> Score {
        let (weight, used) = self.served(&t.supply);
        // Units on unchanged cards are used first; what stays unused is new.
        let unused: u64 =
            (0..self.units.len()).map(|u| u64::from(t.touched[u].min(t.supply[u] - used[u])) * self.unit_mib[u]).sum();
        Score { weight, unused_mib: std::cmp::Reverse(unused), touched: std::cmp::Reverse(t.n) }
    }

    /// `t` with card `card` at option `o` added (`add`) or taken away.
    fn moved(&self, t: &Tally, card: usize, o: usize, add: bool) -> Tally {
        let mut t = t.clone();
        t.apply(&self.models[self.cards[card].1].1[o].1, o != self.cards[card].2, add);
        t
    }

    pub(crate) fn options(&self, card: usize) -> usize {
        self.models[self.cards[card].1].1.len()
    }

    /// Whether card `card` may take option `o` (option 0 is a whole card: not for a MIG card
    /// whose mode may not change).
    pub(crate) fn allowed(&self, card: usize, o: usize) -> bool {
        !(self.mode_fixed[card] && o == 0)
    }

    /// Cards of one class are interchangeable: model, present option, mode fixed.
    fn class(&self, card: usize) -> (usize, usize, bool) {
        (self.cards[card].1, self.cards[card].2, self.mode_fixed[card])
    }

    /// Option `o` of model `m` as `repartition` takes it: `whole` or `profile@start,...`.
    fn text(&self, m: usize, o: usize) -> String {
        match &self.models[m].1[o].0 {
            None => "whole".to_string(),
            Some(l) => l.iter().map(ToString::to_string).collect::<Vec<_>>().join(","),
        }
    }

    /// The plan of a choice: which cards change to what, and whom each serves.
    fn plan(&self, choice: &[usize]) -> Plan {
        let supply = self.supply(choice);
        let matched = self.matching(&supply);
        // Units left on unchanged cards and fixed supply serve first, then changed cards in order.
        let (touched, _) = self.touched(choice);
        let mut stay: Vec<u32> = supply.iter().zip(&touched).map(|(s, t)| s - t).collect();
        let mut on_changed: Vec<(usize, Vec<u32>, Vec<String>)> = self
            .cards
            .iter()
            .zip(choice)
            .enumerate()
            .filter(|(_, (c, o))| c.2 != **o)
            .map(|(i, (c, &o))| (i, self.models[c.1].1[o].1.clone(), Vec::new()))
            .collect();
        let mut plan = Plan::default();
        let mut served: Vec<(u64, String)> = Vec::new();
        for ((_, members), got) in self.groups.iter().zip(&matched) {
            let mut next = members.iter();
            for &(u, k) in got {
                for _ in 0..k {
                    let Some((w, id)) = next.next() else { break };
                    served.push((*w, id.clone()));
                    if stay[u] > 0 {
                        stay[u] -= 1;
                        plan.served_now.push(id.clone());
                    } else if let Some(c) = on_changed.iter_mut().find(|c| c.1[u] > 0) {
                        c.1[u] -= 1;
                        c.2.push(id.clone());
                    }
                }
            }
        }
        served.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        plan.served = served.into_iter().map(|(_, id)| id).collect();
        let rank: std::collections::HashMap<&str, usize> =
            plan.served.iter().enumerate().map(|(i, id)| (id.as_str(), i)).collect();
        for (i, _, mut serves) in on_changed.into_iter().filter(|c| !c.2.is_empty()) {
            serves.sort_by_key(|id| rank.get(id.as_str()).copied().unwrap_or(usize::MAX));
            let (card, m, now) = &self.cards[i];
            plan.changes.push(CardChange {
                card: card.clone(),
                model: self.models[*m].0.clone(),
                from: self.text(*m, *now),
                to: self.text(*m, choice[i]),
                serves,
            });
        }
        plan.score = self.score(choice);
        plan
    }
}

/// The plan for `fleet` as of `now`.
pub fn plan(fleet: &Fleet, now: DateTime<Utc>) -> Plan {
    let p = Problem::new(fleet, now);
    let choice = p.search();
    p.plan(&choice)
}

/// Cards the planner leaves as they are (a schedule's window in force sets their layout).
pub type Pinned = std::collections::HashSet<CardRef>;

/// [`plan`] with `pinned` cards left as they are: what is free on them stays supply.
pub fn plan_around(fleet: &Fleet, now: DateTime<Utc>, pinned: &Pinned) -> Plan {
    if pinned.is_empty() {
        return plan(fleet, now);
    }
    let p = Problem::build(fleet, now, None, pinned);
    let choice = p.search();
    p.plan(&choice)
}

/// What one card is asked to serve.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ask {
    /// The fleet's waiting work, every other card as it is (the repartition picker).
    Waiting,
    /// One single-unit request, for a MIG instance of this profile (`None`: the whole card),
    /// and nothing else (`:fit`).
    One { profile: Option<String> },
}

/// The one answer to "the layout of this idle card that serves this request", which the
/// repartition picker, `:fit` and the layout plan share: the planner over card `r` alone,
/// with its objective (the most weight served, then the least memory in instances nobody
/// waits for, then no change) and its tie-break (the first of the model's options: whole,
/// then the maximal layouts as `tessera layouts` numbers them). `None` when the card is not
/// idle, its layout cannot be read, or no layout of it serves anything asked.
pub fn card_layout(fleet: &Fleet, r: &CardRef, ask: &Ask, now: DateTime<Utc>) -> Option<String> {
    let mut p = Problem::build(fleet, now, Some(r), &Pinned::new());
    let i = p.cards.iter().position(|c| c.0 == *r)?;
    let m = p.cards[i].1;
    if let Ask::One { profile } = ask {
        // This card alone: nothing else supplies, nothing else waits.
        p.fixed.iter_mut().for_each(|x| *x = 0);
        (p.groups, p.named, p.families) = (Vec::new(), Vec::new(), Vec::new());
        p.add_demand(Demand::from([((profile.clone(), Some(m)), vec![(1, String::new())])]));
    }
    let choice = p.search();
    let mut without = choice.clone();
    without[i] = OPEN;
    (p.score(&choice).weight > p.score(&without).weight).then(|| p.text(m, choice[i]))
}

#[cfg(test)]
#[path = "planner_tests.rs"]
mod tests;
