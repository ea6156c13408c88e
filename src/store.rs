//! The store merges updates of several sources into one fleet and keeps each source's health.
//!
//! Sources are ranked by registration order: where two report the same card (joined by node
//! and UUID, else node and index), the earlier source's known values win and the later one
//! fills what the earlier one does not know.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::model::activity::history::ActivityHistory;
use crate::model::source::Reported;
use crate::model::{Card, Fleet, Node, SourceHealth, SourceKind, SourceStatus, Workload, invariants};
use crate::sources::{Partial, SourceUpdate};

/// Events kept for the card view.
pub const MAX_EVENTS: usize = 500;

/// A source that missed this many intervals is stale.
pub const STALE_AFTER_INTERVALS: u32 = 3;

#[derive(Debug)]
struct Entry {
    status: SourceStatus,
    last: Option<Partial>,
    /// `last`'s nodes and workloads were moved into the merged fleet (the only source): a
    /// later merge without a newer update takes them back from there.
    lent: bool,
    /// Wall-clock time of the last good update.
    last_ok: Option<DateTime<Utc>>,
}

#[derive(Debug, Default)]
pub struct Store {
    entries: Vec<Entry>,
    fleet: Fleet,
    simulated: bool,
    /// Each running workload's activity over time.
    activity: ActivityHistory,
    /// A source sent history (Prometheus, the simulator): seed activity at the next rebuild
    /// (and let the history go at the one after).
    seed: bool,
    /// Demand by hour of the day, sampled at rebuilds (the schedule suggestion's data).
    demand: crate::model::demand::DemandHistory,
    /// An update that needed no merge turned a source live again (stale before): the screen
    /// shows it without a merge.
    health_changed: bool,
}

impl Store {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn register(&mut self, name: impl Into<String>, kind: SourceKind, interval: Duration) {
        self.add(name.into(), kind, SourceHealth::Connecting, interval);
    }

    /// Say that a source reports the queue too (Prometheus with kube-state-metrics or Kueue).
    pub fn reports_queue(&mut self, name: &str) {
        for e in self.entries.iter_mut().filter(|e| e.status.name == name) {
            e.status.queue = true;
        }
        self.rebuild();
    }

    /// Register a source that cannot run, so the header says why.
    pub fn register_unavailable(&mut self, name: impl Into<String>, kind: SourceKind, reason: impl Into<String>) {
        let health = SourceHealth::Unavailable { reason: reason.into() };
        self.add(name.into(), kind, health, Duration::from_secs(1));
    }

    /// A source of this health, nothing heard from it yet; a scheduler reports the queue.
    fn add(&mut self, name: String, kind: SourceKind, health: SourceHealth, interval: Duration) {
        let status = SourceStatus {
            name,
            kind,
            health,
            interval,
            note: None,
            last_ok: None,
            reported: Reported::default(),
            queue: matches!(kind, SourceKind::Slurm | SourceKind::Kubernetes | SourceKind::Simulated),
        };
        self.entries.push(Entry { status, last: None, lent: false, last_ok: None });
        self.rebuild();
    }

    /// The names of the sources whose last word was good data, as of the last update applied
    /// (the merged fleet's list waits for the next rebuild).
    pub fn live_sources(&self) -> Vec<String> {
        self.entries
            .iter()
            .filter(|e| matches!(e.status.health, SourceHealth::Live { .. }))
            .map(|e| e.status.name.clone())
            .collect()
    }

    pub fn fleet(&self) -> &Fleet {
        &self.fleet
    }

    /// The merged fleet, moved out, an empty one left: for a one-shot command done with the
    /// store (a copy of 32,768 cards and their workloads was a third of its memory).
    pub fn take_fleet(&mut self) -> Fleet {
        std::mem::take(&mut self.fleet)
    }

    /// True when any data on screen is simulated.
    pub fn simulated(&self) -> bool {
        self.simulated
    }

    /// Apply one update received at wall-clock `now`. Updates of unknown sources are ignored.
    pub fn apply(&mut self, update: SourceUpdate, now: DateTime<Utc>) {
        self.apply_deferred(update, now);
        self.rebuild();
    }

    /// Apply without rebuilding the merged fleet: for a batch of updates, followed by one
    /// `rebuild` (hundreds of exporters would otherwise rebuild it hundreds of times). Returns
    /// whether the merged fleet needs that rebuild: not for an update that says nothing
    /// changed ([`Partial::unchanged`]) from a source whose data the store holds.
    pub fn apply_deferred(&mut self, update: SourceUpdate, now: DateTime<Utc>) -> bool {
        let Some(e) = self.entries.iter_mut().find(|e| e.status.name == update.source) else { return false };
        match update.result {
            // "Unchanged" from a source that has sent nothing yet says nothing.
            Ok(partial) if partial.unchanged && e.last.is_none() => return false,
            Ok(partial) if partial.unchanged => {
                self.health_changed |= !matches!(e.status.health, SourceHealth::Live { .. });
                e.status.health = SourceHealth::Live { at: now };
                e.last_ok = Some(now);
                e.status.last_ok = Some(now);
                self.fleet.sources = self.entries.iter().map(|e| e.status.clone()).collect();
                return false;
            }
            Ok(mut partial) => {
                e.status.health = SourceHealth::Live { at: now };
                e.status.note = partial.note.take();
                // A wrong number is worse than none: what breaks an invariant becomes unknown.
                if let Some(cut) = partial.cut_to(crate::sources::MAX_CARDS) {
                    e.status.note = Some(e.status.note.take().map_or(cut.clone(), |n| format!("{n}; {cut}")));
                }
                let fixed = invariants::enforce(&mut partial.nodes, &mut partial.workloads);
                if fixed > 0 {
                    let what = format!("{fixed} values over their total or outside 0-100 % shown as unknown");
                    e.status.note = Some(e.status.note.take().map_or(what.clone(), |n| format!("{n}; {what}")));
                }
                e.last_ok = Some(now);
                e.status.last_ok = Some(now);
                e.status.reported = Reported {
                    nodes: partial.nodes.len(),
                    cards: partial.nodes.iter().map(|n| n.cards.len()).sum(),
                    workloads: partial.workloads.len(),
                };
                self.fleet.events.append(&mut partial.events);
                if !partial.history.is_empty() {
                    self.fleet.history = std::mem::take(&mut partial.history);
                    self.seed = true;
                }
                if let Some(d) = partial.demand.take() {
                    self.demand = d;
                }
                let excess = self.fleet.events.len().saturating_sub(MAX_EVENTS);
                self.fleet.events.drain(..excess);
                e.last = Some(partial);
                e.lent = false;
                self.fleet.taken_at = Some(update.at);
            }
            Err(err) => {
                e.status.health = match (err.fatal, e.last_ok) {
                    (false, Some(since)) => SourceHealth::Stale { since, error: Some(err.message) },
                    _ => SourceHealth::Unavailable { reason: err.message },
                };
                // Stale data stays on screen marked stale; an unavailable source shows none.
                if matches!(e.status.health, SourceHealth::Unavailable { .. }) {
                    e.last = None;
                    e.lent = false;
                }
            }
        }
        true
    }

    /// Whether an update that needed no merge changed a source's health since the last call.
    pub fn take_health_changed(&mut self) -> bool {
        std::mem::take(&mut self.health_changed)
    }

    /// Mark sources that missed three intervals as stale. Returns true when anything changed.
    pub fn check_staleness(&mut self, now: DateTime<Utc>) -> bool {
        let mut changed = false;
        for e in &mut self.entries {
            let limit = e.status.interval.checked_mul(STALE_AFTER_INTERVALS).map(chrono::Duration::from_std);
            if let (SourceHealth::Live { at }, Some(Ok(limit))) = (&e.status.health, limit)
                && now - *at > limit
            {
                e.status.health =
                    SourceHealth::Stale { since: *at, error: Some("no update for three intervals".into()) };
                changed = true;
            }
        }
        if changed {
            self.fleet.sources = self.entries.iter().map(|e| e.status.clone()).collect();
        }
        changed
    }

    /// Every source that has not answered within `waited` is said to be unavailable for that:
    /// "connecting" would look like a source about to answer (`snapshot`'s wait ended).
    pub fn no_answer(&mut self, waited: std::time::Duration) {
        let reason = format!("no answer within {}", crate::units::duration::format(waited));
        for e in &mut self.entries {
            if e.status.health == SourceHealth::Connecting {
                e.status.health = SourceHealth::Unavailable { reason: reason.clone() };
            }
        }
        self.rebuild();
    }

    /// True while any source has not answered yet.
    pub fn any_connecting(&self) -> bool {
        self.entries.iter().any(|e| e.status.health == SourceHealth::Connecting)
    }

    /// Merge every source's last data into the fleet.
    pub fn rebuild(&mut self) {
        self.take_back();
        // History is in the fleet of one rebuild, the one after it came (activity and the
        // sparklines are seeded from it then): kept longer, it would hold an hour of every
        // card's series for the whole run (75 MB at 32,768 cards).
        if !self.seed {
            self.fleet.history = Vec::new();
        }
        // One source alone: its data become the fleet as they are, moved, not copied (at
        // 32,768 cards the copy was most of a merge).
        if let [e] = self.entries.as_mut_slice()
            && let Some(p) = e.last.as_mut()
        {
            self.simulated = p.simulated;
            let mut nodes = std::mem::take(&mut p.nodes);
            for n in &mut nodes {
                n.sources.push(e.status.name.clone());
            }
            let workloads = std::mem::take(&mut p.workloads);
            e.lent = true;
            self.finish(nodes, workloads);
            return;
        }
        let mut nodes: Vec<Node> = Vec::new();
        let mut node_at: HashMap<String, usize> = HashMap::new();
        let mut workloads: Vec<Workload> = Vec::new();
        let mut seen: HashSet<String> = HashSet::new();
        let mut workload_at: HashMap<String, usize> = HashMap::new();
        self.simulated = false;
        for (name, p) in self.entries.iter().filter_map(|e| Some((&e.status.name, e.last.as_ref()?))) {
            self.simulated |= p.simulated;
            for n in &p.nodes {
                let i = match node_at.get(&n.name) {
                    Some(&i) => {
                        merge_node(&mut nodes[i], n);
                        i
                    }
                    None => {
                        node_at.insert(n.name.clone(), nodes.len());
                        nodes.push(n.clone());
                        nodes.len() - 1
                    }
                };
                nodes[i].sources.push(name.clone());
            }
            for w in &p.workloads {
                if seen.insert(w.id.clone()) {
                    workload_at.insert(w.id.clone(), workloads.len());
                    workloads.push(w.clone());
                } else if let Some(&i) = workload_at.get(&w.id) {
                    merge_workload(&mut workloads[i], w);
                }
            }
        }
        self.finish(nodes, workloads);
    }

    /// A source whose data the fleet holds (lent) gets a copy back before a merge: the
    /// fleet's values are its own, checked and completed by the last merge (what that merge
    /// derives, it derives again the same).
    fn take_back(&mut self) {
        for e in self.entries.iter_mut().filter(|e| e.lent) {
            e.lent = false;
            if let Some(p) = e.last.as_mut() {
                p.nodes = self.fleet.nodes.clone();
                for n in &mut p.nodes {
                    n.sources.clear();
                }
                p.workloads = self.fleet.workloads.clone();
            }
        }
    }

    /// The merged nodes and workloads become the fleet: placements inferred, allocations
    /// filled, invariants checked, indexes and activity brought up to date.
    fn finish(&mut self, mut nodes: Vec<Node>, workloads: Vec<Workload>) {
        for c in nodes.iter_mut().flat_map(|n| n.cards.iter_mut()) {
            c.infer_mig();
        }
        self.fleet.nodes = nodes;
        self.fleet.workloads = workloads;
        self.fleet.fill_allocations();
        // Each source's values were checked; the merge pairs one source's used with another's
        // total, so check the merged fleet as well.
        invariants::enforce(&mut self.fleet.nodes, &mut self.fleet.workloads);
        self.fleet.index_workloads();
        // Health first: activity samples only what a live source reports.
        self.fleet.sources = self.entries.iter().map(|e| e.status.clone()).collect();
        if std::mem::take(&mut self.seed) {
            self.activity.seed(&self.fleet, &self.fleet.history);
        }
        self.activity.record(&mut self.fleet);
        if let Some(at) = self.fleet.taken_at {
            self.demand.sample(&self.fleet, at);
        }
    }

    /// Show a recorded moment instead of the sources' merge (replay): the fleet as it was, its
    /// values checked again (a recording is a file from anywhere), indexed.
    pub fn show_recorded(
        &mut self,
        mut fleet: Fleet,
        simulated: bool,
        demand: Option<crate::model::demand::DemandHistory>,
    ) {
        invariants::enforce(&mut fleet.nodes, &mut fleet.workloads);
        fleet.index_workloads();
        self.fleet = fleet;
        self.simulated = simulated;
        // The demand of that moment, or none: never another moment's.
        self.demand = demand.unwrap_or_default();
    }

    /// Demand by hour of the day measured so far (and seeded).
    pub fn demand(&self) -> &crate::model::demand::DemandHistory {
        &self.demand
    }

    /// Start from demand measured before (kept between runs).
    pub fn seed_demand(&mut self, d: crate::model::demand::DemandHistory) {
        self.demand = d;
    }
}

fn merge_node(into: &mut Node, from: &Node) {
    into.schedulable &= from.schedulable;
    for (k, v) in &from.labels {
        if into.labels.len() < crate::model::fleet::MAX_LABELS {
            into.labels.entry(k.clone()).or_insert_with(|| v.clone());
        }
    }
    if into.reason.is_none() {
        into.reason.clone_from(&from.reason);
    }
    if into.capacity.is_empty() {
        into.capacity.clone_from(&from.capacity);
    }
    for c in &from.cards {
        let same = |x: &Card| match (&x.uuid, &c.uuid) {
            (Some(a), Some(b)) => a == b,
            _ => x.index == c.index,
        };
        match into.cards.iter_mut().find(|x| same(x)) {
            Some(x) => merge_card(x, c),
            None => into.cards.push(c.clone()),
        }
    }
    into.cards.sort_by_key(|c| c.index);
}

/// A workload two sources name (a scheduler and an exporter's holder labels): the earlier
/// source's record wins, the later one adds what it lacks (cards, memory in use).
fn merge_workload(into: &mut Workload, from: &Workload) {
    fill(&mut into.node, &from.node);
    fill(&mut into.memory_used_mib, &from.memory_used_mib);
    fill(&mut into.started_at, &from.started_at);
    union(&mut into.cards, &from.cards);
}

/// What the earlier source does not know, the later one says.
fn fill<T: Clone>(into: &mut Option<T>, from: &Option<T>) {
    if into.is_none() {
        into.clone_from(from);
    }
}

/// Everything either source lists, each once, in first-seen order.
fn union<T: Clone + PartialEq>(into: &mut Vec<T>, from: &[T]) {
    for x in from {
        if !into.contains(x) {
            into.push(x.clone());
        }
    }
}

fn merge_card(into: &mut Card, from: &Card) {
    macro_rules! fill {
        ($($f:ident).+) => {
            fill(&mut into.$($f).+, &from.$($f).+)
        };
    }
    fill!(uuid);
    fill!(memory_total_mib);
    fill!(memory_used_mib);
    fill!(utilization_pct);
    fill!(temperature_c);
    fill!(power_w);
    fill!(power_limit_w);
    fill!(pci_bus_id);
    fill!(sm_clock_mhz);
    fill!(memory_clock_mhz);
    fill!(compute_mode);
    fill!(health.ecc_volatile_uncorrected);
    fill!(health.last_xid);
    fill!(health.remapped_rows_uncorrectable);
    // Health is unknown only while every source of the card says nothing reads it.
    if from.health.unknown.is_none() {
        into.health.unknown = None;
    }
    fill!(allocation);
    fill!(dra);
    if into.processes.is_empty() {
        into.processes.clone_from(&from.processes);
    }
    // Where the mode was read goes with the mode: a scheduler's label names the origin even
    // where NVML (registered first) counted the contexts.
    if into.sharing.mode.is_none() && from.sharing.mode.is_some() {
        into.sharing.origin.clone_from(&from.sharing.origin);
    }
    fill!(sharing.mode);
    fill!(sharing.replicas);
    fill!(sharing.unit);
    fill!(sharing.replicas_used);
    fill!(sharing.contexts);
    fill!(sharing.mps_server);
    fill!(sharing.mps_memory_limit_mib);
    fill!(sharing.mps_thread_pct);
    fill!(sharing.origin);
    fill!(sharing.compute_partition);
    fill!(sharing.memory_partition);
    fill!(vendor);
    fill!(serial);
    if into.model.is_empty() {
        into.model.clone_from(&from.model);
    }
    into.draining |= from.draining;
    into.health.lost |= from.health.lost;
    merge_mig(&mut into.mig, &from.mig);
    union(&mut into.workloads, &from.workloads);
}

/// The earlier source's MIG view wins where it has one; the later one fills in what it lacks:
/// the instances themselves when the earlier lists none, and per instance (matched by
/// GPU instance id and profile: ids are NVML's in every source, DCGM's GPU_I_ID too, while DCGM
/// has no placement) activity, memory and holders.
fn merge_mig(into: &mut crate::model::MigState, from: &crate::model::MigState) {
    // A source that cannot see the layout (Kubernetes, unprivileged NVML) yields to one that can.
    if into.error.is_some() && into.instances.is_empty() && from.error.is_none() {
        *into = from.clone();
        return;
    }
    if into.instances.is_empty() && !from.instances.is_empty() {
        into.enabled |= from.enabled;
        into.instances.clone_from(&from.instances);
        into.placements = from.placements;
        into.error = None;
        return;
    }
    fill(&mut into.pending, &from.pending);
    // A later source that knows placements corrects an earlier one that had to infer them.
    let placed =
        into.placements != crate::model::Placements::Known && from.placements == crate::model::Placements::Known;
    if placed {
        into.placements = crate::model::Placements::Known;
    }
    for o in &from.instances {
        let same = |i: &&mut crate::model::MigInstance| i.profile == o.profile && i.gi_id == o.gi_id;
        let Some(inst) = into.instances.iter_mut().find(|i| same(i)) else { continue };
        if placed {
            inst.start = o.start;
            inst.size = o.size;
        }
        fill(&mut inst.utilization_pct, &o.utilization_pct);
        fill(&mut inst.memory_used_mib, &o.memory_used_mib);
        union(&mut inst.workloads, &o.workloads);
    }
}

#[cfg(test)]
#[path = "store_tests.rs"]
mod tests;
