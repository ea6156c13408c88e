//! The cluster during one run: every card's mode and what it holds, each node's host CPU
//! and memory; whether a job fits a card, taking and giving back. Totals (held, used, busy
//! cards, exposure) are kept as jobs come and go, so the metrics integrate them per event.

use super::fleet::Fleet;
use super::job::{Class, Job, milli_of_slices, slices_for};
use super::policy::Policy;
use crate::model::mig::{GpuModel, Placed};

pub mod inst;

use inst::Inst;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// One holder at a time.
    Whole,
    /// Time-sliced or MPS: up to this many holders, packed by compute and memory.
    Shared(u16),
    /// Cut into instances.
    Mig,
    /// DynamicMIG: laid out per job; `insts` are the instances created for the jobs on it
    /// (each held), and a card with none can be taken whole.
    Dynamic,
}

#[derive(Debug, Clone)]
pub struct Card {
    pub node: u32,
    pub model: u16,
    pub mode: Mode,
    /// Its mode with MIG off (a layout of `whole` goes back to it).
    pub base: Mode,
    pub insts: Vec<Inst>,
    pub holders: u16,
    /// Compute held, thousandths of the card: whole 1000, shared the sum of the shares,
    /// MIG the held instances' compute.
    pub held_milli: u32,
    pub used_mem: u64,
    /// Holders by class, for interference: latency-sensitive beside preemptible.
    pub ls: u16,
    pub be: u16,
    /// Out of service (a MIG change) until then.
    pub down_until: i64,
    /// When its layout last changed.
    pub changed_at: i64,
    /// Takes no new work: a scheduled change is due.
    pub closing: bool,
}

#[derive(Debug, Clone)]
pub struct NodeState {
    pub first: u32,
    pub count: u32,
    pub model: u16,
    /// Host CPU and memory left; `i64::MAX` where not limited.
    pub cpu_free: i64,
    pub mem_free: i64,
    /// Cards a whole-card request can take now.
    pub whole_free: u32,
}

/// One part of what a running job holds: a card, or an instance of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Part {
    pub card: u32,
    /// The instance it holds: its index in the card's layout; on a DynamicMIG card the
    /// memory slice the instance created for it starts at.
    pub inst: Option<u8>,
    /// DynamicMIG: the profile of the instance created for it when it starts (destroyed
    /// when it ends).
    pub create: Option<u8>,
    pub milli: u32,
    pub mem: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hold {
    pub node: u32,
    pub parts: Vec<Part>,
}

#[derive(Debug, Clone)]
pub struct Cluster {
    pub cards: Vec<Card>,
    pub nodes: Vec<NodeState>,
    /// Compute slices of a whole card per model (7, the A30 4; 1 without MIG) and memory.
    pub slices: Vec<u8>,
    /// Each model's MIG catalog entry (DynamicMIG cards place their instances by it).
    pub mig: Vec<Option<&'static GpuModel>>,
    pub card_mem: Vec<u64>,
    /// Totals kept current.
    pub held_milli: u64,
    pub used_milli: u64,
    pub busy_per_model: Vec<u32>,
    /// Latency-sensitive holders on cards that also hold preemptible work.
    pub exposed: u32,
    /// Nodes with at least k whole-free cards, k = 1..=8+ (a quick "nothing fits").
    pub whole_hist: Vec<u32>,
}

fn instances(fleet: &Fleet, model: u16, layout: &[Placed]) -> Vec<Inst> {
    let Some(gm) = fleet.models[model as usize].mig else { return Vec::new() };
    layout
        .iter()
        .filter_map(|p| {
            let prof = gm.profile(&p.profile)?;
            let index = gm.profiles.iter().position(|x| std::ptr::eq(x, prof))?;
            Some(Inst {
                profile: index as u8,
                start: p.start,
                size: p.size,
                compute: prof.compute_slices,
                mem_mib: prof.planning_mib(),
                holder: None,
            })
        })
        .collect()
}

impl Cluster {
    /// The fleet under `policy`: MIG layouts where the policy cuts cards (`layouts` per
    /// card, in fleet order, as the fleet or the policy chose them), replicas under `share`.
    pub fn new(fleet: &Fleet, policy: Policy, replicas: u32, layouts: &[Option<Vec<Placed>>]) -> Self {
        let slices: Vec<u8> = fleet.models.iter().map(|m| m.mig.map_or(1, |g| g.compute_slices)).collect();
        let card_mem = fleet.models.iter().map(|m| m.memory_mib).collect();
        let mut cards = Vec::new();
        let mut nodes = Vec::with_capacity(fleet.nodes.len());
        for (ni, n) in fleet.nodes.iter().enumerate() {
            nodes.push(NodeState {
                first: cards.len() as u32,
                count: n.gpus,
                model: n.model,
                cpu_free: if n.cpu_milli == 0 { i64::MAX } else { i64::from(n.cpu_milli) },
                mem_free: if n.mem_mib == 0 { i64::MAX } else { n.mem_mib as i64 },
                whole_free: 0,
            });
            for _ in 0..n.gpus {
                let layout = if policy.static_layouts() { layouts.get(cards.len()).cloned().flatten() } else { None };
                // What the card is without MIG: time-sliced under share, and under the MIG
                // policies where the fleet time-slices it; else whole, or laid out per job
                // under dynamic where the model can do MIG.
                let base = match policy {
                    Policy::Share => Mode::Shared(n.replicas.unwrap_or(replicas).clamp(1, 64) as u16),
                    Policy::Mig | Policy::Schedule | Policy::Adaptive | Policy::Dynamic
                        if n.replicas.is_some_and(|r| r > 1) =>
                    {
                        Mode::Shared(n.replicas.unwrap_or(1).clamp(1, 64) as u16)
                    }
                    Policy::Dynamic if fleet.models[n.model as usize].mig.is_some() => Mode::Dynamic,
                    Policy::Exclusive | Policy::Mig | Policy::Schedule | Policy::Adaptive | Policy::Dynamic => {
                        Mode::Whole
                    }
                };
                let (mode, insts) = match layout {
                    Some(l) if !l.is_empty() => (Mode::Mig, instances(fleet, n.model, &l)),
                    _ => (base, Vec::new()),
                };
                cards.push(Card {
                    node: ni as u32,
                    model: n.model,
                    mode,
                    base,
                    insts,
                    holders: 0,
                    held_milli: 0,
                    used_mem: 0,
                    ls: 0,
                    be: 0,
                    down_until: i64::MIN,
                    changed_at: i64::MIN,
                    closing: false,
                });
            }
        }
        let mut c = Self {
            cards,
            nodes,
            slices,
            mig: fleet.models.iter().map(|m| m.mig).collect(),
            card_mem,
            held_milli: 0,
            used_milli: 0,
            busy_per_model: vec![0; fleet.models.len()],
            exposed: 0,
            whole_hist: vec![0; 9],
        };
        for n in 0..c.nodes.len() {
            c.recount_whole(n as u32, i64::MIN);
        }
        c
    }

    /// Whether card `c` can be taken whole (by a whole-card request, or by any request under
    /// exclusive cards) at `now`: nothing on it, in service, not closing; a MIG card only
    /// through a free instance as big as the card.
    pub fn whole_free(&self, c: usize, now: i64) -> Option<Option<u8>> {
        let card = &self.cards[c];
        if card.holders > 0 || card.down_until > now || card.closing {
            return None;
        }
        match card.mode {
            Mode::Whole | Mode::Shared(_) | Mode::Dynamic => Some(None),
            Mode::Mig => {
                let all = self.slices[card.model as usize];
                card.insts.iter().position(|i| i.compute == all && i.holder.is_none()).map(|i| Some(i as u8))
            }
        }
    }

    fn mem_ok(&self, c: usize, used: u64, need: u64) -> bool {
        let total = self.card_mem[self.cards[c].model as usize];
        total == 0 || used + need <= total
    }

    /// How a one-card share request (`job.milli < 1000`) fits card `c` at `now`, if it does:
    /// a whole card (no sharing on it), a replica, or the smallest free instance that holds
    /// its compute and memory (on a DynamicMIG card, one created for it: `first_fit` takes
    /// the lowest placement, as the scheduler does).
    pub fn share_fit(&self, c: usize, job: &Job, now: i64, first_fit: bool) -> Option<Part> {
        let card = &self.cards[c];
        if card.down_until > now || card.closing {
            return None;
        }
        match card.mode {
            Mode::Whole => (card.holders == 0 && self.mem_ok(c, 0, job.mem_mib)).then_some(Part {
                card: c as u32,
                inst: None,
                create: None,
                milli: 1000,
                mem: job.mem_mib,
            }),
            Mode::Shared(replicas) => (card.holders < replicas
                && card.held_milli + job.milli <= 1000
                && self.mem_ok(c, card.used_mem, job.mem_mib))
            .then_some(Part { card: c as u32, inst: None, create: None, milli: job.milli, mem: job.mem_mib }),
            Mode::Dynamic => self.dynamic_fit(c, job, first_fit),
            Mode::Mig => {
                let all = self.slices[card.model as usize];
                let need = slices_for(job.milli, all);
                card.insts
                    .iter()
                    .enumerate()
                    .filter(|(_, i)| i.holder.is_none() && i.compute >= need && i.mem_mib >= job.mem_mib)
                    .min_by_key(|(_, i)| (i.compute, i.mem_mib))
                    .map(|(k, i)| Part {
                        card: c as u32,
                        inst: Some(k as u8),
                        create: None,
                        milli: milli_of_slices(i.compute, all),
                        mem: i.mem_mib,
                    })
            }
        }
    }

    /// How a one-card share fits DynamicMIG card `c` (in service, not closing): an instance
    /// of the smallest profile that holds it at a placement the counters allow (the lowest
    /// under `first_fit`, else the one that keeps the most placements open), created when it
    /// starts; where no profile holds it, the whole card if nothing is on it.
    pub fn dynamic_fit(&self, c: usize, job: &Job, first_fit: bool) -> Option<Part> {
        let card = &self.cards[c];
        if card.holders > 0 && card.insts.is_empty() {
            // Held whole.
            return None;
        }
        let gm = self.mig[card.model as usize]?;
        let Some(profile) = super::dynamic::profile_for(gm, job.milli, job.mem_mib) else {
            return (card.holders == 0 && self.mem_ok(c, 0, job.mem_mib)).then_some(Part {
                card: c as u32,
                inst: None,
                create: None,
                milli: 1000,
                mem: job.mem_mib,
            });
        };
        let at = super::dynamic::choose(gm, &card.insts, profile, first_fit)?;
        let inst = super::dynamic::instance(gm, profile, at)?;
        Some(Part {
            card: c as u32,
            inst: Some(at.start),
            create: Some(profile),
            milli: milli_of_slices(inst.compute, gm.compute_slices),
            mem: inst.mem_mib,
        })
    }

    /// The free places DynamicMIG card `c` has, as `slots` counts them: all of it where
    /// nothing is on it, none where it is held whole, else the instances of one maximal
    /// completion of its layout beside `with` (an instance about to be created).
    pub fn dynamic_room(&self, c: usize, with: Option<&Part>, out: &mut Vec<(u32, bool)>) {
        let card = &self.cards[c];
        let Some(gm) = self.mig[card.model as usize] else { return };
        let created = with.and_then(|p| {
            let profile = p.create?;
            let pl = gm.profiles.get(usize::from(profile))?.placements.iter().find(|pl| Some(pl.start) == p.inst)?;
            super::dynamic::instance(gm, profile, *pl)
        });
        let whole_taken = with.is_some_and(|p| p.create.is_none());
        if whole_taken || (card.holders > 0 && card.insts.is_empty()) {
            out.push((0, false));
            return;
        }
        if card.insts.is_empty() && created.is_none() {
            out.push((1000, true));
            return;
        }
        let mut insts = card.insts.clone();
        insts.extend(created);
        let all = gm.compute_slices;
        out.extend(super::dynamic::room(gm, &insts).into_iter().map(|s| (milli_of_slices(s, all), false)));
    }

    /// Whether node `n` has the host resources and a model `job` may run on.
    pub fn node_admits(&self, n: usize, job: &Job, fleet: &Fleet) -> bool {
        let node = &self.nodes[n];
        i64::from(job.cpu_milli) <= node.cpu_free
            && (job.host_mem_mib as i64) <= node.mem_free
            && job.may_run_on(&fleet.models[node.model as usize].name)
    }

    /// The free share of each place a request could go on node `n`, thousandths of a card:
    /// a card (whole or shared) or a free MIG instance, with whether a whole-card request
    /// could take it. What the fragmentation measure counts.
    pub fn slots(&self, n: usize, now: i64, out: &mut Vec<(u32, bool)>) {
        out.clear();
        let node = &self.nodes[n];
        for c in node.first as usize..(node.first + node.count) as usize {
            let card = &self.cards[c];
            if card.down_until > now || card.closing {
                continue;
            }
            match card.mode {
                Mode::Whole => out.push(if card.holders == 0 { (1000, true) } else { (0, false) }),
                Mode::Shared(r) => {
                    let free = if card.holders < r { 1000 - card.held_milli } else { 0 };
                    out.push((free, card.holders == 0));
                }
                Mode::Mig => {
                    let all = self.slices[card.model as usize];
                    for i in card.insts.iter().filter(|i| i.holder.is_none()) {
                        out.push((milli_of_slices(i.compute, all), i.compute == all));
                    }
                }
                Mode::Dynamic => self.dynamic_room(c, None, out),
            }
        }
    }

    /// Latency-sensitive holders exposed to preemptible work on the same card: only where
    /// nothing isolates them (time-slicing, MPS); MIG instances are isolated.
    fn exposure(card: &Card) -> u32 {
        if card.be > 0 && matches!(card.mode, Mode::Shared(_)) { u32::from(card.ls) } else { 0 }
    }

    /// Give `job` (index `id`) what `hold` names.
    pub fn take(&mut self, id: u32, job: &Job, hold: &Hold, now: i64) {
        let node = &mut self.nodes[hold.node as usize];
        if node.cpu_free != i64::MAX {
            node.cpu_free -= i64::from(job.cpu_milli);
        }
        if node.mem_free != i64::MAX {
            node.mem_free -= job.host_mem_mib as i64;
        }
        for p in &hold.parts {
            let card = &mut self.cards[p.card as usize];
            let before = Self::exposure(card);
            if card.holders == 0 {
                self.busy_per_model[card.model as usize] += 1;
            }
            card.holders += 1;
            card.held_milli += p.milli;
            card.used_mem += p.mem;
            match job.class {
                Class::Inference => card.ls += 1,
                Class::Training => card.be += 1,
                Class::Other => {}
            }
            match (card.mode, p.inst, p.create) {
                (Mode::Dynamic, Some(start), Some(profile)) => {
                    // The instance is created for it.
                    let made = self.mig[card.model as usize].and_then(|gm| {
                        let pl =
                            gm.profiles.get(usize::from(profile))?.placements.iter().find(|pl| pl.start == start)?;
                        super::dynamic::instance(gm, profile, *pl)
                    });
                    if let Some(mut i) = made {
                        i.holder = Some(id);
                        card.insts.push(i);
                    }
                }
                (Mode::Dynamic, _, _) => {}
                (_, Some(i), _) => card.insts[i as usize].holder = Some(id),
                (_, None, _) => {}
            }
            self.exposed = self.exposed + Self::exposure(card) - before;
            self.held_milli += u64::from(p.milli);
            self.used_milli += u64::from(p.milli.min(job.milli)) * u64::from(job.use_milli) / 1000;
        }
        self.recount_whole(hold.node, now);
    }

    /// Give back what `hold` took for `job`.
    pub fn give_back(&mut self, job: &Job, hold: &Hold, now: i64) {
        let node = &mut self.nodes[hold.node as usize];
        if node.cpu_free != i64::MAX {
            node.cpu_free += i64::from(job.cpu_milli);
        }
        if node.mem_free != i64::MAX {
            node.mem_free += job.host_mem_mib as i64;
        }
        for p in &hold.parts {
            let card = &mut self.cards[p.card as usize];
            let before = Self::exposure(card);
            card.holders -= 1;
            card.held_milli -= p.milli;
            card.used_mem -= p.mem;
            match job.class {
                Class::Inference => card.ls -= 1,
                Class::Training => card.be -= 1,
                Class::Other => {}
            }
            if card.holders == 0 {
                self.busy_per_model[card.model as usize] -= 1;
            }
            match (card.mode, p.inst) {
                // Its instance is destroyed.
                (Mode::Dynamic, Some(start)) => card.insts.retain(|i| i.start != start),
                (Mode::Dynamic, None) => {}
                (_, Some(i)) => card.insts[i as usize].holder = None,
                (_, None) => {}
            }
            self.exposed = self.exposed + Self::exposure(card) - before;
            self.held_milli -= u64::from(p.milli);
            self.used_milli -= u64::from(p.milli.min(job.milli)) * u64::from(job.use_milli) / 1000;
        }
        self.recount_whole(hold.node, now);
    }

    /// Recount node `n`'s whole-free cards and the histogram.
    pub fn recount_whole(&mut self, n: u32, now: i64) {
        let node = &self.nodes[n as usize];
        let before = node.whole_free;
        let after = (node.first..node.first + node.count)
            .filter(|&c| self.whole_free(c as usize, now).is_some())
            .count() as u32;
        let top = self.whole_hist.len() as u32 - 1;
        for k in 1..=before.min(top) {
            self.whole_hist[k as usize] -= 1;
        }
        for k in 1..=after.min(top) {
            self.whole_hist[k as usize] += 1;
        }
        self.nodes[n as usize].whole_free = after;
    }

    /// Some node may have `gpus` whole-free cards (a necessary condition, cheap).
    pub fn may_fit_whole(&self, gpus: u32) -> bool {
        let top = self.whole_hist.len() as u32 - 1;
        self.whole_hist[gpus.clamp(1, top) as usize] > 0
    }

    /// Lay card `c` out as `layout` (`None`: whole), out of service for `down_s`.
    pub fn relayout(&mut self, fleet: &Fleet, c: usize, layout: Option<&[Placed]>, now: i64, down_s: i64) {
        let card = &mut self.cards[c];
        debug_assert_eq!(card.holders, 0);
        match layout {
            Some(l) if !l.is_empty() => {
                card.mode = Mode::Mig;
                card.insts = instances(fleet, card.model, l);
            }
            _ => {
                card.mode = card.base;
                card.insts.clear();
            }
        }
        card.down_until = now + down_s;
        card.changed_at = now;
        card.closing = false;
        let n = card.node;
        self.recount_whole(n, now);
    }

    /// The layout card `c` has now, as placements.
    pub fn layout_of(&self, fleet: &Fleet, c: usize) -> Option<Vec<Placed>> {
        let card = &self.cards[c];
        let gm = fleet.models[card.model as usize].mig?;
        (card.mode == Mode::Mig).then(|| placed(gm, &card.insts))
    }
}

/// Instances as placements of `gm`'s profiles.
pub fn placed(gm: &GpuModel, insts: &[Inst]) -> Vec<Placed> {
    insts
        .iter()
        .filter_map(|i| {
            let p = gm.profiles.get(usize::from(i.profile))?;
            Some(Placed { profile: p.name.clone(), start: i.start, size: i.size })
        })
        .collect()
}
