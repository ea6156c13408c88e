//! Where a job goes: the node and cards (or instances, or replicas) it fits, chosen first
//! fit, best fit or by the least growth of fragmentation.
//!
//! Fragmentation (Weng et al., ATC '23): for a node and a request type, the free GPU share
//! the type cannot use there: all of it where the type does not fit the node at all, else the
//! free share of the places too small for it (whole-card types cannot use a partly taken
//! card). A node's fragmentation is that expectation over the demand's mix of types; the
//! fragmentation-aware placement picks the choice that grows it least.

use super::fleet::Fleet;
use super::job::Job;
use super::policy::Placement;
use super::state::{Cluster, Hold, Mode, Part};

/// The most request types the mix keeps (the commonest).
const MAX_TYPES: usize = 32;

/// One request type of the demand's mix, with its share of the jobs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Kind {
    pub gpus: u32,
    /// 1000: whole cards.
    pub milli: u32,
    pub cpu_milli: u32,
    pub p: f64,
}

impl Kind {
    fn usable(&self, free: u32, wholeable: bool) -> bool {
        if self.milli >= 1000 { wholeable && free >= 1000 } else { free >= self.milli }
    }
}

/// The demand's mix of request types.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Mix {
    pub kinds: Vec<Kind>,
}

impl Mix {
    /// Types by (cards, share, CPU to the core), weighted by how many jobs ask so; under
    /// exclusive cards every request is whole.
    pub fn new(jobs: &[Job], whole_only: bool) -> Self {
        let mut counts: std::collections::HashMap<(u32, u32, u32), u64> = std::collections::HashMap::new();
        for j in jobs {
            let milli = if whole_only { 1000 } else { j.milli };
            *counts.entry((j.gpus, milli, j.cpu_milli / 1000 * 1000)).or_default() += 1;
        }
        let mut v: Vec<((u32, u32, u32), u64)> = counts.into_iter().collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        v.truncate(MAX_TYPES);
        let total: u64 = v.iter().map(|x| x.1).sum::<u64>().max(1);
        let kinds = v
            .into_iter()
            .map(|((gpus, milli, cpu_milli), n)| Kind { gpus, milli, cpu_milli, p: n as f64 / total as f64 })
            .collect();
        Self { kinds }
    }
}

/// A place's (free share, whole-card usable) before and after a choice.
type SlotChange = ((u32, bool), (u32, bool));

/// A node's fragmentation parts, per type: free share in places the type cannot use, and
/// how many places (or whole cards) it can.
#[derive(Debug, Clone)]
struct NodeFrag {
    sum_all: u64,
    unusable: Vec<u64>,
    usable: Vec<u32>,
    cpu_free: i64,
    value: f64,
}

/// The chooser: the mix and a cache of each node's fragmentation, dropped when it changes.
#[derive(Debug, Clone)]
pub struct Chooser {
    pub placement: Placement,
    /// Every request takes whole cards (`Policy::whole_only`).
    pub whole_only: bool,
    mix: Mix,
    cache: Vec<Option<NodeFrag>>,
    slots: Vec<(u32, bool)>,
}

fn hosts(k: &Kind, usable: u32, cpu_free: i64) -> bool {
    i64::from(k.cpu_milli) <= cpu_free && if k.milli >= 1000 { usable >= k.gpus } else { usable >= 1 }
}

impl Chooser {
    pub fn new(placement: Placement, whole_only: bool, mix: Mix, nodes: usize) -> Self {
        Self { placement, whole_only, mix, cache: vec![None; nodes], slots: Vec::new() }
    }

    /// Node `n` changed: its fragmentation is counted afresh when next asked.
    pub fn changed(&mut self, n: u32) {
        if let Some(c) = self.cache.get_mut(n as usize) {
            *c = None;
        }
    }

    pub fn forget_all(&mut self) {
        self.cache.iter_mut().for_each(|c| *c = None);
    }

    fn frag(&mut self, cl: &Cluster, n: usize, now: i64) -> &NodeFrag {
        if self.cache[n].is_none() {
            cl.slots(n, now, &mut self.slots);
            let kinds = &self.mix.kinds;
            let mut f = NodeFrag {
                sum_all: self.slots.iter().map(|s| u64::from(s.0)).sum(),
                unusable: vec![0; kinds.len()],
                usable: vec![0; kinds.len()],
                cpu_free: cl.nodes[n].cpu_free,
                value: 0.0,
            };
            for (i, k) in kinds.iter().enumerate() {
                for &(free, w) in &self.slots {
                    if k.usable(free, w) {
                        f.usable[i] += 1;
                    } else {
                        f.unusable[i] += u64::from(free);
                    }
                }
                let part = if hosts(k, f.usable[i], f.cpu_free) { f.unusable[i] } else { f.sum_all };
                f.value += k.p * part as f64;
            }
            self.cache[n] = Some(f);
        }
        self.cache[n].as_ref().unwrap_or_else(|| unreachable!("filled above"))
    }

    /// Node `n`'s fragmentation after slots change as `changes` says ((free, wholeable) before
    /// and after) and `cpu` is taken.
    fn frag_after(&mut self, cl: &Cluster, n: usize, now: i64, changes: &[SlotChange], cpu: u32) -> f64 {
        let kinds = self.mix.kinds.clone();
        let f = self.frag(cl, n, now);
        let cpu_free = if f.cpu_free == i64::MAX { f.cpu_free } else { f.cpu_free - i64::from(cpu) };
        let mut sum_all = f.sum_all as i64;
        for ((f0, _), (f1, _)) in changes {
            sum_all += i64::from(*f1) - i64::from(*f0);
        }
        let mut value = 0.0;
        for (i, k) in kinds.iter().enumerate() {
            let (mut unusable, mut usable) = (f.unusable[i] as i64, i64::from(f.usable[i]));
            for &((f0, w0), (f1, w1)) in changes {
                if k.usable(f0, w0) {
                    usable -= 1;
                } else {
                    unusable -= i64::from(f0);
                }
                if k.usable(f1, w1) {
                    usable += 1;
                } else {
                    unusable += i64::from(f1);
                }
            }
            let part = if hosts(k, usable.max(0) as u32, cpu_free) { unusable } else { sum_all };
            value += k.p * part as f64;
        }
        value
    }

    /// Where `job` goes now, if it fits anywhere.
    pub fn place(&mut self, cl: &Cluster, fleet: &Fleet, job: &Job, now: i64) -> Option<Hold> {
        let whole = job.milli >= 1000 || self.whole_only;
        if whole {
            if !cl.may_fit_whole(job.gpus) {
                return None;
            }
            self.place_whole(cl, fleet, job, now)
        } else {
            self.place_share(cl, fleet, job, now)
        }
    }

    fn place_whole(&mut self, cl: &Cluster, fleet: &Fleet, job: &Job, now: i64) -> Option<Hold> {
        let mut best: Option<(f64, u32, Hold)> = None;
        for n in 0..cl.nodes.len() {
            let node = &cl.nodes[n];
            if node.whole_free < job.gpus || !cl.node_admits(n, job, fleet) {
                continue;
            }
            let mem = cl.card_mem[node.model as usize];
            if mem != 0 && job.mem_mib > mem {
                continue;
            }
            let mut parts = Vec::with_capacity(job.gpus as usize);
            for c in node.first..node.first + node.count {
                if parts.len() == job.gpus as usize {
                    break;
                }
                if let Some(inst) = cl.whole_free(c as usize, now) {
                    parts.push(Part { card: c, inst, create: None, milli: 1000, mem: job.mem_mib });
                }
            }
            let hold = Hold { node: n as u32, parts };
            let score = match self.placement {
                Placement::FirstFit => return Some(hold),
                Placement::BestFit => f64::from(node.whole_free - job.gpus),
                // The paper's placements are refused for a replay (options); tessera's measure.
                Placement::FragAware | Placement::Fgd | Placement::PaperBestFit | Placement::PaperDotProd => {
                    let changes = vec![((1000, true), (0, false)); job.gpus as usize];
                    let before = self.frag(cl, n, now).value;
                    self.frag_after(cl, n, now, &changes, job.cpu_milli) - before
                }
            };
            let tie = node.whole_free;
            if best.as_ref().is_none_or(|b| (score, tie) < (b.0, b.1)) {
                let exact = self.placement == Placement::BestFit && score == 0.0;
                best = Some((score, tie, hold));
                if exact {
                    break;
                }
            }
        }
        best.map(|b| b.2)
    }

    fn place_share(&mut self, cl: &Cluster, fleet: &Fleet, job: &Job, now: i64) -> Option<Hold> {
        let mut best: Option<(f64, u32, Hold)> = None;
        for n in 0..cl.nodes.len() {
            if !cl.node_admits(n, job, fleet) {
                continue;
            }
            let node = &cl.nodes[n];
            let mut seen: Vec<SlotChange> = Vec::new();
            let mut seen_dynamic: Vec<DynamicKey> = Vec::new();
            let first_fit = self.placement == Placement::FirstFit;
            for c in node.first..node.first + node.count {
                let Some(part) = cl.share_fit(c as usize, job, now, first_fit) else { continue };
                let card = &cl.cards[c as usize];
                if card.mode == Mode::Dynamic {
                    let hold = Hold { node: n as u32, parts: vec![part] };
                    if first_fit {
                        return Some(hold);
                    }
                    let key = (card.insts.iter().map(|i| (i.profile, i.start)).collect(), part.inst, part.create);
                    if seen_dynamic.contains(&key) {
                        continue;
                    }
                    seen_dynamic.push(key);
                    let (score, leftover) = self.dynamic_score(cl, n, c as usize, job, &part, now);
                    if best.as_ref().is_none_or(|b| (score, leftover) < (b.0, b.1)) {
                        best = Some((score, leftover, hold));
                    }
                    continue;
                }
                let (before, after) = slot_change(cl, card, &part);
                let change = (before, after);
                if seen.contains(&change) {
                    continue;
                }
                seen.push(change);
                let hold = Hold { node: n as u32, parts: vec![part] };
                let leftover = before.0 - part.milli.min(before.0);
                // Held beyond the ask (a whole card or a bigger instance for a small job)
                // weighs first, then what is left free beside it.
                let waste = part.milli.saturating_sub(job.milli);
                let score = match self.placement {
                    Placement::FirstFit => return Some(hold),
                    Placement::BestFit => f64::from(waste) * 2000.0 + f64::from(leftover),
                    Placement::FragAware | Placement::Fgd | Placement::PaperBestFit | Placement::PaperDotProd => {
                        let b = self.frag(cl, n, now).value;
                        self.frag_after(cl, n, now, &[change], job.cpu_milli) - b
                    }
                };
                if best.as_ref().is_none_or(|b| (score, leftover) < (b.0, b.1)) {
                    best = Some((score, leftover, hold));
                }
            }
        }
        best.map(|b| b.2)
    }
}

impl Chooser {
    /// A DynamicMIG choice's score (lower is better) and the card's share left free beside
    /// it: best fit weighs the instance's size beyond the ask first, then the free share left
    /// on the card (the fullest card that fits); fragmentation-aware, the growth of the
    /// node's fragmentation, the card's room counted as one maximal completion of its layout
    /// before and after.
    fn dynamic_score(&mut self, cl: &Cluster, n: usize, c: usize, job: &Job, part: &Part, now: i64) -> (f64, u32) {
        let card = &cl.cards[c];
        let leftover = 1000u32.saturating_sub(card.held_milli + part.milli);
        let score = match self.placement {
            Placement::FirstFit | Placement::BestFit => {
                f64::from(part.milli.saturating_sub(job.milli)) * 2000.0 + f64::from(leftover)
            }
            Placement::FragAware | Placement::Fgd | Placement::PaperBestFit | Placement::PaperDotProd => {
                let (mut before, mut after) = (Vec::new(), Vec::new());
                cl.dynamic_room(c, None, &mut before);
                cl.dynamic_room(c, Some(part), &mut after);
                let gone = before.into_iter().map(|s| (s, (0, false)));
                let changes: Vec<SlotChange> = gone.chain(after.into_iter().map(|s| ((0, false), s))).collect();
                let b = self.frag(cl, n, now).value;
                self.frag_after(cl, n, now, &changes, job.cpu_milli) - b
            }
        };
        (score, leftover)
    }
}

/// A DynamicMIG card's instances (profile, start) and the instance a choice creates there:
/// cards alike give alike choices.
type DynamicKey = (Vec<(u8, u8)>, Option<u8>, Option<u8>);

/// The slot a part takes, before and after: (free share, whole-card usable).
fn slot_change(cl: &Cluster, card: &super::state::Card, part: &Part) -> SlotChange {
    match card.mode {
        Mode::Whole => ((1000, true), (0, false)),
        Mode::Shared(r) => {
            let free = 1000 - card.held_milli;
            let after = if card.holders + 1 < r { free - part.milli } else { 0 };
            ((free, card.holders == 0), (after, false))
        }
        Mode::Mig => {
            let all = cl.slices[card.model as usize];
            let inst = &card.insts[part.inst.unwrap_or(0) as usize];
            let free = super::job::milli_of_slices(inst.compute, all);
            ((free, inst.compute == all), (0, false))
        }
        Mode::Dynamic => {
            let free = 1000u32.saturating_sub(card.held_milli);
            ((free, card.holders == 0), (free.saturating_sub(part.milli), false))
        }
    }
}
