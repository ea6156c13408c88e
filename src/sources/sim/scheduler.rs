//! The simulated cluster's scheduler: one round places pending jobs, highest priority and
//! oldest first, on whole cards, MIG instances or replicas of shared cards, and gives the rest
//! the reason a scheduler would. The free capacity is counted once and kept current as jobs
//! take and leave cards, so a kind of request that cannot start costs a look at the counts,
//! not a search of every card (32,768 cards, thousands pending, every five simulated seconds).

use std::collections::{HashMap, HashSet};

use super::Sim;
use super::jobs::{SHARE_BASE, Spot};
use crate::model::{Workload, WorkloadState};

/// What this round has handed out: (node, card, GPU instance or replica, `None` = whole card).
type Taken = HashSet<(usize, usize, Option<u32>)>;

/// Per node, the whole cards a job could ever get there, by catalog model.
pub(super) type Usable = std::sync::Arc<Vec<Vec<(Option<&'static str>, usize)>>>;

/// A kind of request: MIG profile, GPU count, model, shares.
type Key = (Option<String>, Option<u32>, Option<String>, Option<String>);

/// Free capacity: per node, whole cards free by the `card_free` rule (without a round's
/// `taken`); per MIG profile present on a usable card, its instances free. The simulator
/// keeps it current in `hold` and counts it afresh after an operation.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Free {
    whole: Vec<usize>,
    instances: Vec<(String, usize)>,
}

/// What `hold` changes on one card: whether it is free as a whole card, and the profile of
/// the instance it touches with whether that is free (`None`: not a usable instance).
pub(super) type FreeHere = (bool, Option<(String, bool)>);

/// Free capacity as the round began, and what the round has taken from it since. Starts
/// happen after the round, so the counts only shrink while it runs.
struct Round {
    /// Per node, whole cards free at the start.
    free_whole: Vec<usize>,
    /// Per node, whole cards this round has given out.
    taken_whole: Vec<usize>,
    /// Per MIG profile present on a usable card: instances free at the start.
    free_instances: Vec<(String, usize)>,
    /// Per MIG profile, instances this round has given out.
    taken_instances: HashMap<String, usize>,
    /// The whole cards a job could ever get per node, by model (for reasons).
    usable: Usable,
    /// Every MIG profile configured on any card (for reasons).
    configured: Vec<String>,
    /// Instances this round has the DRA driver create, per (node, card).
    created: HashMap<(usize, usize), Vec<crate::model::mig::Placed>>,
    /// Some node is under DynamicMIG: a profile without a free instance may still be created.
    dynamic: bool,
}

/// A DRA claim's reason until the next snapshot says why it waits.
const CLAIM_WAITS: &str = "Resources: cannot allocate all claims";

/// The kind of request a job makes (a DRA claim is a kind of its own): jobs of one kind wait
/// behind the first of them that cannot start.
fn request_key(w: &Workload, claim: bool) -> Key {
    (
        w.request.mig_profile.clone(),
        w.request.gpus,
        w.request.model.clone(),
        if claim { Some("claim".into()) } else { w.request.shares.map(|s| format!("{s:?}")) },
    )
}

impl Sim {
    /// One scheduling round: pending jobs, highest priority and oldest first, each started
    /// where a spot is free or given the reason it waits; the starts happen after the round.
    pub(super) fn schedule(&mut self) {
        let mut order: Vec<usize> =
            (0..self.jobs.len()).filter(|&i| self.jobs[i].w.state == WorkloadState::Pending).collect();
        order.sort_by_key(|&i| (std::cmp::Reverse(self.jobs[i].w.priority), self.jobs[i].w.submitted_at, i));
        let mut round = self.new_round();
        let mut blocked: HashSet<Key> = HashSet::new();
        let mut starts = Vec::new();
        let mut taken: Taken = HashSet::new();
        // Where the last search for a kind of request found its spot: within one round,
        // capacity only shrinks (`taken` grows), so the nodes before it cannot serve that kind
        // now and the next search of the kind starts there.
        let mut resume: HashMap<Key, usize> = HashMap::new();
        for i in order {
            let w = &self.jobs[i].w;
            let claim = self.jobs[i].claim;
            let key = request_key(w, claim);
            if blocked.contains(&key) {
                // Something ahead of it waits for the same thing.
                self.jobs[i].w.reason = Some("Priority".into());
                continue;
            }
            let from = resume.get(&key).copied().unwrap_or(0);
            match self.find_spot(w, claim, &taken, &round, from) {
                Some(spot) => {
                    resume.insert(key, spot.node());
                    self.mark_taken(&spot, w.request.mig_profile.as_ref(), &mut taken, &mut round);
                    starts.push((i, spot));
                }
                None => {
                    // A claim's reason is said when a snapshot is taken (`say_claim_reasons`):
                    // explaining it at every round was most of a round's work at scale.
                    let reason = if claim { CLAIM_WAITS.to_string() } else { self.why_not(w, &round) };
                    blocked.insert(key);
                    self.jobs[i].w.reason = Some(reason);
                }
            }
        }
        for (i, spot) in starts {
            self.start_at(i, spot);
        }
    }

    /// A round that begins with the free capacity as kept (counted afresh where an operation
    /// dropped it), and the usable cards and configured profiles its reasons name.
    fn new_round(&mut self) -> Round {
        let configured = self.configured_profiles();
        let usable = match &self.usable {
            Some(u) => u.clone(),
            None => {
                let u = std::sync::Arc::new(self.nodes.iter().map(|n| self.usable_whole_cards(n)).collect());
                self.usable = Some(std::sync::Arc::clone(&u));
                u
            }
        };
        let free = match &self.free {
            Some(f) => f.clone(),
            None => {
                let f = self.count_free_capacity();
                self.free = Some(f.clone());
                f
            }
        };
        Round {
            taken_whole: vec![0; self.nodes.len()],
            free_whole: free.whole,
            free_instances: free.instances,
            taken_instances: HashMap::new(),
            usable,
            configured,
            created: HashMap::new(),
            dynamic: self.nodes.iter().any(|n| n.cards.first().is_some_and(super::build::dynamic)),
        }
    }

    /// Mark what a job started at `spot` takes this round (`profile`: the MIG profile it asks
    /// for), in `taken` and in the round's counts.
    fn mark_taken(&self, spot: &Spot, profile: Option<&String>, taken: &mut Taken, round: &mut Round) {
        match spot {
            Spot::Whole { node, cards } => {
                cards.iter().for_each(|&c| {
                    taken.insert((*node, c, None));
                });
                round.taken_whole[*node] += cards.len();
            }
            Spot::Mig { node, card, gi } => {
                taken.insert((*node, *card, Some(*gi)));
                if let Some(p) = profile {
                    *round.taken_instances.entry(p.clone()).or_default() += 1;
                }
            }
            // A replica each: the k-th start on a card takes pseudo-instance k.
            Spot::Share { node, card } => {
                let k = (0..).find(|k| !taken.contains(&(*node, *card, Some(SHARE_BASE + k)))).unwrap_or(0);
                taken.insert((*node, *card, Some(SHARE_BASE + k)));
            }
            // The card is no longer whole-free this round.
            Spot::Create { node, card, profile, start, size } => {
                let first = !round.created.contains_key(&(*node, *card));
                if first && self.nodes[*node].cards[*card].mig.instances.is_empty() {
                    taken.insert((*node, *card, None));
                    round.taken_whole[*node] += 1;
                }
                round.created.entry((*node, *card)).or_default().push(crate::model::mig::Placed {
                    profile: profile.clone(),
                    start: *start,
                    size: *size,
                });
            }
        }
    }

    /// Count the free capacity: one pass over the cards (at 32,768 cards memory-bound, so
    /// done once and then kept current, not once a round).
    pub(super) fn count_free_capacity(&self) -> Free {
        let mut free_instances: Vec<(String, usize)> = Vec::new();
        let none = HashSet::new();
        let free_whole = self
            .nodes
            .iter()
            .enumerate()
            .map(|(ni, n)| {
                if !n.schedulable {
                    return 0;
                }
                for c in n.cards.iter().filter(|c| !c.draining && c.health.fault().is_none()) {
                    for i in &c.mig.instances {
                        let free = usize::from(i.workloads.is_empty());
                        // A few profiles, tens of thousands of instances: found by comparison,
                        // no hashing, no key copied twice.
                        match free_instances.iter_mut().find(|(p, _)| *p == i.profile) {
                            Some((_, n)) => *n += free,
                            None => free_instances.push((i.profile.clone(), free)),
                        }
                    }
                }
                (0..n.cards.len()).filter(|&c| self.card_free(ni, c, &none)).count()
            })
            .collect();
        Free { whole: free_whole, instances: free_instances }
    }

    /// Card `ci` of node `ni` and its instance `gi`, as the free counts see them.
    pub(super) fn free_here(&self, ni: usize, ci: usize, gi: Option<u32>) -> FreeHere {
        let whole = self.card_free(ni, ci, &HashSet::new());
        let n = &self.nodes[ni];
        let c = &n.cards[ci];
        let usable = n.schedulable && !c.draining && c.health.fault().is_none();
        let inst = gi
            .and_then(|gi| c.mig.instances.iter().find(|i| i.gi_id == gi))
            .filter(|_| usable)
            .map(|i| (i.profile.clone(), i.workloads.is_empty()));
        (whole, inst)
    }

    /// Move the free counts from `before` to `after` for one card of node `ni`.
    pub(super) fn count_free(&mut self, ni: usize, before: FreeHere, after: FreeHere) {
        let Some(free) = &mut self.free else { return };
        if let Some(w) = free.whole.get_mut(ni) {
            *w = (*w + usize::from(after.0)).saturating_sub(usize::from(before.0));
        }
        for (inst, up) in [(before.1, false), (after.1, true)] {
            let Some((profile, true)) = inst else { continue };
            match free.instances.iter_mut().find(|(p, _)| *p == profile) {
                Some((_, n)) if up => *n += 1,
                Some((_, n)) => *n = n.saturating_sub(1),
                None if up => free.instances.push((profile, 1)),
                None => {}
            }
        }
    }

    fn card_free(&self, node: usize, card: usize, taken: &Taken) -> bool {
        let c = &self.nodes[node].cards[card];
        // The test that fails most often on a busy fleet first.
        c.workloads.is_empty()
            && self.nodes[node].schedulable
            && !c.mig.enabled
            && c.sharing.replicas.is_none()
            && !c.draining
            && c.health.fault().is_none()
            && !taken.contains(&(node, card, None))
    }

    /// The first spot for `w` on nodes from `from` on (a DRA `claim`: on DynamicMIG nodes only).
    fn find_spot(&self, w: &Workload, claim: bool, taken: &Taken, round: &Round, from: usize) -> Option<Spot> {
        // No free instance of the profile left this round: only a DynamicMIG card can still
        // give one (the driver creates it), so only their nodes are looked at.
        let mut only_dynamic = false;
        if let Some(profile) = &w.request.mig_profile
            && w.request.shares.is_none()
        {
            let free = round.free_instances.iter().find(|(p, _)| p == profile).map_or(0, |(_, n)| *n);
            if free <= round.taken_instances.get(profile).copied().unwrap_or(0) {
                if !round.dynamic {
                    return None;
                }
                only_dynamic = true;
            }
        }
        let want_model = w.request.model.as_deref().and_then(crate::model::mig::lookup).map(|m| m.name.as_str());
        for (ni, n) in self.nodes.iter().enumerate().skip(from) {
            let dynamic = n.cards.first().is_some_and(super::build::dynamic);
            if !n.schedulable || ((claim || only_dynamic) && !dynamic) {
                continue;
            }
            if w.request.shares.is_some() {
                // The first card with a replica free (in use, or started this round).
                let free = n.cards.iter().enumerate().find(|(ci, c)| {
                    let starting = taken.iter().filter(|t| t.0 == ni && t.1 == *ci && t.2 >= Some(SHARE_BASE)).count();
                    !c.draining
                        && !c.mig.enabled
                        && c.health.fault().is_none()
                        && c.sharing.replicas.is_some_and(|r| c.workloads.len() + starting < r as usize)
                });
                if let Some((ci, _)) = free {
                    return Some(Spot::Share { node: ni, card: ci });
                }
                continue;
            }
            if let Some(profile) = &w.request.mig_profile {
                for (ci, c) in n.cards.iter().enumerate().filter(|(_, c)| !c.draining && c.health.fault().is_none()) {
                    if let Some(inst) = c.mig.instances.iter().find(|i| {
                        &i.profile == profile && i.workloads.is_empty() && !taken.contains(&(ni, ci, Some(i.gi_id)))
                    }) {
                        return Some(Spot::Mig { node: ni, card: ci, gi: inst.gi_id });
                    }
                }
                if let Some(spot) = self.create_spot(ni, profile, taken, round) {
                    return Some(spot);
                }
                continue;
            }
            let need = w.request.gpus.unwrap_or(1) as usize;
            // Exact: the cards taken this round were free at its start.
            if round.free_whole[ni].saturating_sub(round.taken_whole[ni]) < need {
                continue;
            }
            if want_model.is_some() && self.node_models.get(ni).copied().flatten() != want_model {
                continue;
            }
            let free: Vec<usize> = (0..n.cards.len()).filter(|&c| self.card_free(ni, c, taken)).take(need).collect();
            if free.len() == need {
                return Some(Spot::Whole { node: ni, cards: free });
            }
        }
        None
    }

    /// The first DynamicMIG card of node `ni` whose counters allow `profile` (beside its
    /// instances and those this round creates), at its lowest placement: the scheduler
    /// allocating a claim first fit. Not a card held whole, draining or faulty.
    fn create_spot(&self, ni: usize, profile: &str, taken: &Taken, round: &Round) -> Option<Spot> {
        for (ci, c) in self.nodes[ni].cards.iter().enumerate() {
            if !super::build::dynamic(c) || c.draining || c.health.fault().is_some() || !c.workloads.is_empty() {
                continue;
            }
            let created = round.created.get(&(ni, ci));
            if created.is_none() && taken.contains(&(ni, ci, None)) {
                // A whole-card job took it this round.
                continue;
            }
            let Some(model) = c.gpu_model() else { continue };
            let mut layout: Vec<crate::model::mig::Placed> = c
                .mig
                .instances
                .iter()
                .map(|i| crate::model::mig::Placed { profile: i.profile.clone(), start: i.start, size: i.size })
                .collect();
            layout.extend(created.into_iter().flatten().cloned());
            if let Some(at) = crate::model::mig::layout::first_free(model, &layout, profile) {
                let profile = model.profile(profile).map_or_else(|| profile.to_string(), |p| p.name.clone());
                return Some(Spot::Create { node: ni, card: ci, profile, start: at.start, size: at.size });
            }
        }
        None
    }

    /// Every waiting DRA claim's reason, in the Kubernetes source's words.
    pub(super) fn say_claim_reasons(&mut self) {
        let waiting: Vec<usize> = (0..self.jobs.len())
            .filter(|&i| self.jobs[i].claim && self.jobs[i].w.state == WorkloadState::Pending)
            .collect();
        for i in waiting {
            let why = self.claim_reason(i);
            self.jobs[i].w.reason = Some(why);
        }
    }

    /// Why job `i`'s DRA claim waits, said again only when the DynamicMIG cards changed (what
    /// holds each, its instances, drains, faults) or for another claim.
    fn claim_reason(&mut self, i: usize) -> String {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        for n in self.nodes.iter().filter(|n| n.cards.first().is_some_and(super::build::dynamic)) {
            for c in &n.cards {
                (c.holders().count(), c.mig.instances.len(), c.draining, c.health.fault().is_some()).hash(&mut h);
            }
        }
        let key = h.finish();
        // Keyed by the job's id: finished jobs leave the list, so an index moves.
        if let Some((k, job, why)) = &self.claim_why
            && *k == key
            && *job == self.jobs[i].w.id
        {
            return why.clone();
        }
        let why = self.why_claim_waits(&self.jobs[i].w);
        self.claim_why = Some((key, self.jobs[i].w.id.clone(), why.clone()));
        why
    }

    /// Why a DRA claim for whole GPUs waits, in the words the Kubernetes source uses for a
    /// pending claim: what each DynamicMIG node has and what holds the rest.
    fn why_claim_waits(&self, w: &Workload) -> String {
        let nodes: std::collections::BTreeMap<String, Vec<crate::model::Card>> = self
            .nodes
            .iter()
            .filter(|n| n.cards.first().is_some_and(super::build::dynamic))
            .map(|n| {
                // A drained card is tainted by DeviceTaintRules under DRA: said so.
                let cards = n
                    .cards
                    .iter()
                    .map(|c| {
                        let mut c = c.clone();
                        if c.draining
                            && let Some(d) = c.dra.as_mut()
                        {
                            d.taints.push(crate::model::dra::DeviceTaint {
                                device: format!("gpu-{}", c.index),
                                key: "tessera/drain".into(),
                                value: None,
                                effect: "NoSchedule".into(),
                                rule: Some(format!("drain-gpu-{}", c.index)),
                                tessera: true,
                            });
                        }
                        c
                    })
                    .collect();
                (n.name.clone(), cards)
            })
            .collect();
        let n = w.request.gpus.unwrap_or(1) as usize;
        let want = w.request.model.as_deref().and_then(crate::model::mig::lookup);
        let product = want.and_then(|want| {
            self.nodes.iter().flat_map(|n| &n.cards).find(|c| c.gpu_model().is_some_and(|g| g.name == want.name))
        });
        let product = product.map(|c| c.model.as_str());
        crate::sources::kubernetes::dra::explain::whole_gpus(product, n, " (matchAttribute productName)", &nodes)
            .unwrap_or_else(|| "Resources: cannot allocate all claims".into())
    }

    /// On a schedulable node (others: none), the whole cards a job could ever get there, by
    /// model: not MIG (a DynamicMIG card is whole once its instances go), not shared, not
    /// draining, not lost.
    fn usable_whole_cards(&self, n: &crate::model::Node) -> Vec<(Option<&'static str>, usize)> {
        let mut by_model: Vec<(Option<&'static str>, usize)> = Vec::new();
        if !n.schedulable {
            return by_model;
        }
        // The catalog lookup once per model name on the node (its cards are alike).
        let mut seen: Option<(&str, Option<&'static str>)> = None;
        for c in &n.cards {
            if (c.mig.enabled && !super::build::dynamic(c))
                || c.sharing.replicas.is_some()
                || c.draining
                || c.health.lost
            {
                continue;
            }
            let model = match seen {
                Some((name, m)) if name == c.model => m,
                _ => {
                    let m = c.gpu_model().map(|m| m.name.as_str());
                    seen = Some((c.model.as_str(), m));
                    m
                }
            };
            match by_model.iter_mut().find(|(m, _)| *m == model) {
                Some((_, k)) => *k += 1,
                None => by_model.push((model, 1)),
            }
        }
        by_model
    }

    /// The reason a scheduler would give for a job that cannot start now.
    fn why_not(&self, w: &Workload, round: &Round) -> String {
        if w.request.shares.is_some() {
            return "Resources: every replica of the shared cards is in use".into();
        }
        if let Some(profile) = &w.request.mig_profile {
            // Every card's instances count here, usable or not.
            let exists = round.configured.iter().any(|p| p == profile);
            return if exists {
                format!("Resources: every {profile} instance is in use")
            } else {
                format!("Resources: no {profile} instance is configured")
            };
        }
        // Could it ever start here, once running work ends? Count usable whole cards of the
        // model it asks for on each schedulable node.
        let need = w.request.gpus.unwrap_or(1) as usize;
        let want_model = w.request.model.as_deref().and_then(crate::model::mig::lookup).map(|m| m.name.as_str());
        let fits_node = round.usable.iter().any(|by_model| {
            let count: usize =
                by_model.iter().filter(|(m, _)| want_model.is_none() || *m == want_model).map(|(_, k)| k).sum();
            count >= need
        });
        let what = match (need, want_model) {
            (1, Some(m)) => format!("a whole {m} card"),
            (1, None) => "a whole card".to_string(),
            (n, Some(m)) => format!("{n} whole {m} cards on one node"),
            (n, None) => format!("{n} whole cards on one node"),
        };
        // What one node has free of it now (less what this round gave out).
        let most = (0..self.nodes.len())
            .filter(|&ni| want_model.is_none() || self.node_models.get(ni).copied().flatten() == want_model)
            .map(|ni| {
                let free = round.free_whole.get(ni).copied().unwrap_or(0);
                free.saturating_sub(round.taken_whole.get(ni).copied().unwrap_or(0))
            })
            .max()
            .unwrap_or(0);
        match (fits_node, want_model) {
            (true, _) if most == 0 => format!("Resources: waits for {what}; none free"),
            (true, _) if most < need => format!("Resources: waits for {what}; at most {most} free on one"),
            (true, _) => "Resources".into(),
            (false, Some(m)) => format!("Resources: no node has {need} usable whole {m} cards"),
            (false, None) => format!("Resources: no node has {need} usable whole cards"),
        }
    }
}
