//! Fleet, nodes, cards and MIG instances as the console sees them.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::card_ref::CardRef;
use super::event::Event;
use super::mig::catalog::{self, GpuModel, slice_mask};
use super::source::SourceStatus;
use super::workload::Workload;

mod card_sharing;

/// Everything tessera knows at one moment: merged from every source.
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize)]
pub struct Fleet {
    pub taken_at: Option<DateTime<Utc>>,
    pub sources: Vec<SourceStatus>,
    pub nodes: Vec<Node>,
    pub workloads: Vec<Workload>,
    /// Recent events, oldest first, bounded by the store.
    pub events: Vec<Event>,
    /// Recent history of cards from a source that keeps it (Prometheus, the simulator), to seed
    /// activity and sparklines: in the merged fleet only of the rebuild after it came.
    #[serde(skip)]
    pub history: Vec<CardHistory>,
    /// Workload id -> position in `workloads`; `index_workloads` builds it. foldhash: tens of
    /// thousands of ids are indexed at every merge.
    #[serde(skip)]
    pub workload_index: foldhash::HashMap<String, usize>,
    /// Node name -> position in `nodes`, rebuilt with the workload index.
    #[serde(skip)]
    pub node_index: foldhash::HashMap<String, usize>,
}

#[derive(Debug, Clone, Default, Serialize, serde::Deserialize, PartialEq)]
pub struct Node {
    pub name: String,
    /// False when the node is cordoned or drained at the scheduler.
    pub schedulable: bool,
    /// Why the node is not schedulable, where the scheduler says.
    pub reason: Option<String>,
    pub cards: Vec<Card>,
    /// GPU resources as a scheduler (Slurm GRES, Kubernetes allocatable) counts them: what
    /// the scheduler can hand out, which can differ from what the cards show. Empty where no
    /// scheduler reports on this node.
    pub capacity: Vec<Capacity>,
    /// Names of the sources that reported this node, in rank order (the store fills it): an
    /// action goes to the backend that can act on the node.
    pub sources: Vec<String>,
    /// The node's labels where a scheduler keeps them (Kubernetes), for schedules that pick
    /// cards by label; at most `MAX_LABELS`, each cut to `MAX_LABEL_LEN`.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub labels: std::collections::BTreeMap<String, String>,
}

impl Node {
    /// A schedulable node of this name with nothing else known yet.
    pub fn new(name: impl Into<String>) -> Self {
        Self { name: name.into(), schedulable: true, ..Self::default() }
    }

    /// The card of index `index`: where the cards are numbered from 0 without gaps (nearly
    /// always) at its own position, else by halving where they are in order, else by a scan.
    /// A 512-card node looked each card up by scanning: quadratic in cards per node.
    pub fn card_at(&self, index: u32) -> Option<&Card> {
        let cards = &self.cards;
        if let Some(c) = usize::try_from(index).ok().and_then(|i| cards.get(i)).filter(|c| c.index == index) {
            return Some(c);
        }
        match cards.binary_search_by_key(&index, |c| c.index) {
            Ok(i) => cards.get(i),
            Err(_) => cards.iter().find(|c| c.index == index),
        }
    }
}

/// Labels kept per node: enough for any real node, bounded for a hostile one.
pub const MAX_LABELS: usize = 128;
/// Characters kept of a label's key or value (Kubernetes allows 63 + a 253-character prefix).
pub const MAX_LABEL_LEN: usize = 317;

/// One schedulable GPU resource on a node: whole cards of a model or MIG instances of a profile.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Capacity {
    pub resource: super::resource::Resource,
    /// Units the scheduler can allocate (allocatable, not raw capacity).
    pub total: u64,
    /// Units allocated to running workloads.
    pub used: u64,
    /// A whole-card request takes these units too: replicas the device plugin advertises as
    /// `nvidia.com/gpu` (time-slicing or MPS without `renameByDefault`).
    pub whole_requests: bool,
}

impl Capacity {
    pub fn free(&self) -> u64 {
        self.total.saturating_sub(self.used)
    }
}

/// NVML compute modes; `Prohibited` is how a card is drained locally.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ComputeMode {
    Default,
    ExclusiveProcess,
    Prohibited,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct Health {
    /// Volatile (since boot) uncorrected ECC errors.
    pub ecc_volatile_uncorrected: Option<u64>,
    /// The last XID error seen, not a count.
    pub last_xid: Option<u32>,
    /// Memory rows remapped after uncorrectable errors (a card near its remap limit needs
    /// service).
    pub remapped_rows_uncorrectable: Option<u64>,
    /// The card stopped answering (NVML GPU_IS_LOST or it vanished from a source).
    pub lost: bool,
    /// Why nothing reads this card's health, where the only sources of it say so (a DRA
    /// driver that publishes no health taints): the card is "health unknown", not healthy.
    /// Any source that reads health clears it in the merge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unknown: Option<String>,
}

/// XIDs after which a card must not take work until someone has looked at it: 48 (double-bit
/// ECC error), 79 (fallen off the bus), 94/95 (contained/uncontained ECC error). From NVIDIA's
/// XID catalog (docs.nvidia.com/deploy/xid-errors).
pub const FATAL_XIDS: &[u32] = &[48, 79, 94, 95];

impl Health {
    /// Why the card must not take work, if it must not: lost, a fatal XID, uncorrectable ECC.
    pub fn fault(&self) -> Option<String> {
        if self.lost {
            return Some("lost, not answering".into());
        }
        if let Some(x) = self.last_xid.filter(|x| FATAL_XIDS.contains(x)) {
            return Some(format!("XID {x}"));
        }
        match self.ecc_volatile_uncorrected {
            Some(n) if n > 0 => Some(format!("{n} uncorrectable ECC errors")),
            _ => None,
        }
    }
}

/// Who made a card, where a source says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Vendor {
    Nvidia,
    Amd,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct Card {
    pub index: u32,
    pub uuid: Option<String>,
    /// The model name as the source reported it ("NVIDIA H100 80GB HBM3").
    pub model: String,
    /// Who made the card, where a source says (an exporter's dialect: dcgm-exporter's cards
    /// are NVIDIA's, the AMD Device Metrics Exporter's AMD's).
    pub vendor: Option<Vendor>,
    /// The board's serial number, where a source reports it (the partitions of one AMD card
    /// share it).
    pub serial: Option<String>,
    pub pci_bus_id: Option<String>,
    pub memory_total_mib: Option<u64>,
    pub memory_used_mib: Option<u64>,
    pub utilization_pct: Option<f64>,
    pub temperature_c: Option<f64>,
    pub power_w: Option<f64>,
    pub power_limit_w: Option<f64>,
    pub sm_clock_mhz: Option<u32>,
    pub memory_clock_mhz: Option<u32>,
    pub compute_mode: Option<ComputeMode>,
    pub draining: bool,
    pub health: Health,
    pub mig: MigState,
    /// Workload ids holding the whole card (MIG holders are on the instances).
    pub workloads: Vec<String>,
    /// Compute processes on the card (all of them, MIG or not), where a source can see them.
    pub processes: Vec<Process>,
    /// How the card is shared (time-slicing, MPS), where a source says.
    pub sharing: super::sharing::Sharing,
    /// Who hands the card out (a device plugin or DRA), where a scheduler says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocation: Option<super::dra::Allocation>,
    /// What Dynamic Resource Allocation publishes of the card, on a DRA node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dra: Option<Box<super::dra::DraCard>>,
}

/// A card's recent activity and memory use (percent), oldest first, one point per `step_s`.
/// Points are `f32`: they are shown as sparkline cells and summed as `f32` in the activity
/// buckets, and a history at 32,768 cards (two hours a minute apart) took 132 MB as `f64`.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct CardHistory {
    pub card: CardRef,
    /// The MIG instance (GPU instance id) the series is of; `None`: the whole card.
    pub gi: Option<u32>,
    pub step_s: u64,
    pub util: Vec<Option<f32>>,
    pub mem_pct: Vec<Option<f32>>,
    /// Memory in use in MiB on the same grid, where the source has it (for peak memory).
    pub mem_mib: Vec<Option<f32>>,
}

/// A compute process on a card, as NVML reports it, with name and user from the host.
#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct Process {
    pub pid: u32,
    pub name: Option<String>,
    pub user: Option<String>,
    pub used_mib: Option<u64>,
    /// The GPU instance it runs in, on a MIG card.
    pub gi_id: Option<u32>,
    /// A client of an MPS server (NVML's MPS compute process list), not a context of its own.
    pub mps: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct MigState {
    pub enabled: bool,
    /// The mode after the next reset, where it differs or is reported.
    pub pending: Option<bool>,
    pub instances: Vec<MigInstance>,
    /// Why the instances could not be read (listing them needs privileges), if so: then
    /// `instances` is empty because it is unknown, not because the card is free.
    pub error: Option<String>,
    /// Where the instances' placements come from.
    pub placements: Placements,
}

/// Whether the instances' start slices are the driver's or tessera's inference.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Placements {
    /// Reported by a source that knows them (NVML, the simulator).
    #[default]
    Known,
    /// No source reported them (dcgm-exporter has none): tessera placed the instances by the
    /// rule an unplaced layout follows (a search of NVIDIA's valid placements, largest first). The count of
    /// free slices is right; which slices they are is a best guess.
    Inferred,
    /// Not reported, and no valid layout holds these instances: free slices are unknown.
    Unknown,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct MigInstance {
    pub gi_id: u32,
    pub profile: String,
    /// First memory slice, as NVML placements count.
    pub start: u8,
    /// Memory slices occupied.
    pub size: u8,
    pub compute_instances: Vec<ComputeInstance>,
    pub memory_total_mib: Option<u64>,
    pub memory_used_mib: Option<u64>,
    /// Activity where a source can measure it (GPM, DCGM profiling); NVML alone cannot.
    pub utilization_pct: Option<f64>,
    pub workloads: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct ComputeInstance {
    pub ci_id: u32,
    pub profile: String,
}

/// Activity at or above this, with no holder, means someone uses the card or instance (the
/// idle threshold: below it a held card counts as idle, see `activity::IDLE_BELOW_PCT`).
pub const IN_USE_PCT: f64 = super::activity::IDLE_BELOW_PCT;
/// Memory in use at or above this on a whole card with no holder (the driver and persistence
/// daemon take a few hundred MiB on an idle card).
pub const IN_USE_CARD_MIB: u64 = 1024;
/// The same for a MIG instance (an empty one reports a few MiB).
pub const IN_USE_INSTANCE_MIB: u64 = 256;

impl MigInstance {
    pub fn in_use_by_unknown(&self) -> bool {
        self.workloads.is_empty()
            && (self.utilization_pct.is_some_and(|u| u >= IN_USE_PCT)
                || self.memory_used_mib.is_some_and(|m| m >= IN_USE_INSTANCE_MIB))
    }
}

impl MigState {
    /// The instances of a layout text (`3g.40gb@0,...`), with GPU instance ids numbered as the
    /// driver would; the default (MIG off) for `whole` or anything invalid.
    pub fn from_layout(model_name: &str, text: &str) -> MigState {
        use super::mig::{LayoutSpec, parse_layout};
        let Some(model) = catalog::lookup(model_name) else { return MigState::default() };
        let Ok(LayoutSpec::Mig(layout)) = parse_layout(model, text) else { return MigState::default() };
        let instances = layout
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let profile = model.profile(&p.profile);
                MigInstance {
                    gi_id: 1 + i as u32,
                    profile: p.profile.clone(),
                    start: p.start,
                    size: p.size,
                    compute_instances: vec![ComputeInstance { ci_id: 0, profile: p.profile.clone() }],
                    memory_total_mib: profile.map(|pr| pr.planning_mib()),
                    ..MigInstance::default()
                }
            })
            .collect();
        MigState { enabled: true, pending: None, instances, error: None, placements: Placements::Known }
    }
}

impl Card {
    /// The catalog entry for this card's model, if tessera knows it.
    pub fn gpu_model(&self) -> Option<&'static GpuModel> {
        catalog::lookup(&self.model)
    }

    /// The short name of a known card without MIG (`L4`, `T4`), for display.
    pub fn short_model(&self) -> Option<String> {
        catalog::without_mig(&self.model).map(str::to_string)
    }

    /// Anyone on the card: whole-card holders or any instance's holders.
    pub fn holders(&self) -> impl Iterator<Item = &str> {
        self.workloads.iter().chain(self.mig.instances.iter().flat_map(|i| i.workloads.iter())).map(String::as_str)
    }

    /// Utilisation of a whole card, or for a MIG card the slice-weighted mean of its
    /// instances' activity (free slices count as idle). `None` when any part is unknown, and
    /// for a MIG card whose instances could not be read (their list is empty because it is
    /// unknown, not because the card is idle).
    pub fn activity_pct(&self) -> Option<f64> {
        if !self.mig.enabled {
            return self.utilization_pct;
        }
        if self.mig.error.is_some() {
            return None;
        }
        let slices = self.gpu_model().map_or(8.0, |m| f64::from(m.memory_slices));
        let mut sum = 0.0;
        for i in &self.mig.instances {
            // An instance of no known size (a profile the catalog does not have for this
            // model) has no weight to give: the mean is unknown, not that instance idle.
            if i.size == 0 {
                return None;
            }
            sum += i.utilization_pct? * f64::from(i.size);
        }
        Some(sum / slices)
    }

    /// The holder list of GPU instance `gi` when the card has it, else the whole card's.
    pub fn holders_mut(&mut self, gi: Option<u32>) -> &mut Vec<String> {
        match gi.and_then(|gi| self.mig.instances.iter().position(|i| i.gi_id == gi)) {
            Some(i) => &mut self.mig.instances[i].workloads,
            None => &mut self.workloads,
        }
    }

    /// Record `id` as a holder of instance `gi` (or the card), once.
    pub fn add_holder(&mut self, gi: Option<u32>, id: &str) {
        let list = self.holders_mut(gi);
        if !list.iter().any(|w| w == id) {
            list.push(id.to_string());
        }
    }

    /// The layout in the one text form `repartition` takes and `snapshot` prints: `whole`, or
    /// `profile@start` joined by commas in slice order.
    pub fn layout_text(&self) -> String {
        if !self.mig.enabled {
            return "whole".into();
        }
        let mut parts: Vec<(u8, &str)> = self.mig.instances.iter().map(|i| (i.start, i.profile.as_str())).collect();
        parts.sort();
        parts.into_iter().map(|(s, p)| format!("{p}@{s}")).collect::<Vec<_>>().join(",")
    }

    pub fn is_idle(&self) -> bool {
        self.holders().next().is_none() && !self.in_use_by_unknown()
    }

    /// Busy with no known holder: activity or memory in use that no source attributes (an
    /// exporter on a Slurm node names no pod). Such a card or instance is never free.
    pub fn in_use_by_unknown(&self) -> bool {
        // A DRA card whose claims could not be read: who holds it is not known.
        if self.dra.as_ref().is_some_and(|d| d.holders_unknown) {
            return true;
        }
        if self.mig.enabled {
            return self.mig.instances.iter().any(MigInstance::in_use_by_unknown);
        }
        self.workloads.is_empty()
            && self.processes.is_empty()
            && (self.utilization_pct.is_some_and(|u| u >= IN_USE_PCT)
                || self.memory_used_mib.is_some_and(|m| m >= IN_USE_CARD_MIB))
    }

    /// Place instances no source placed (see `Placements::Inferred`), and take a MIG card's
    /// memory total from the catalog where no source reported one.
    pub fn infer_mig(&mut self) {
        let Some(model) = self.gpu_model() else { return };
        if self.mig.enabled && self.memory_total_mib.is_none() {
            self.memory_total_mib = model
                .profiles
                .iter()
                .filter(|p| p.memory_slices == model.memory_slices)
                .map(super::mig::Profile::planning_mib)
                .max();
        }
        if self.mig.placements != Placements::Inferred || self.mig.instances.is_empty() {
            return;
        }
        let text: Vec<&str> = self.mig.instances.iter().map(|i| i.profile.as_str()).collect();
        let Ok(super::mig::LayoutSpec::Mig(placed)) = super::mig::parse_layout(model, &text.join(",")) else {
            self.mig.placements = Placements::Unknown;
            return;
        };
        let mut taken = vec![false; self.mig.instances.len()];
        for p in placed {
            if let Some(i) = (0..taken.len()).find(|&i| !taken[i] && self.mig.instances[i].profile == p.profile) {
                taken[i] = true;
                self.mig.instances[i].start = p.start;
                self.mig.instances[i].size = p.size;
            }
        }
        self.mig.instances.sort_by_key(|i| i.start);
    }

    /// Memory slices not covered by any instance (bit i = slice i), for a MIG card.
    pub fn free_slice_mask(&self) -> Option<u16> {
        // Unreadable instances or unknown placements: what is free is unknown, never "all".
        if self.mig.placements == Placements::Unknown || self.mig.error.is_some() {
            return None;
        }
        let model = self.gpu_model()?;
        let all = slice_mask(0, model.memory_slices);
        Some(all & !self.used_slice_mask())
    }

    /// The instances as a layout (profile and placement), for the MIG rules.
    pub fn layout(&self) -> Vec<super::mig::Placed> {
        self.mig
            .instances
            .iter()
            .map(|i| super::mig::Placed { profile: i.profile.clone(), start: i.start, size: i.size })
            .collect()
    }

    /// Slices some profile could still occupy next to the current instances (bit i = slice
    /// i); every slice when the model is unknown.
    pub fn reachable_slices(&self) -> u16 {
        self.gpu_model().map_or(u16::MAX, |m| super::mig::layout::reachable_slices(m, &self.layout()))
    }

    /// Free slices some profile could still use next to the current instances; the rest of
    /// the free slices are stranded (slice 7 under 7×1g).
    pub fn usable_free_slices(&self) -> Option<u16> {
        Some(self.free_slice_mask()? & self.reachable_slices())
    }

    pub fn used_slice_mask(&self) -> u16 {
        self.mig.instances.iter().fold(0, |m, i| m | slice_mask(i.start, i.size))
    }
}

impl Fleet {
    pub fn cards(&self) -> impl Iterator<Item = (&Node, &Card)> {
        self.nodes.iter().flat_map(|n| n.cards.iter().map(move |c| (n, c)))
    }

    /// A card by reference: through the node index when it is current, else by scanning.
    pub fn card(&self, r: &CardRef) -> Option<&Card> {
        self.node_card(r).map(|(_, c)| c)
    }

    /// A card by reference with the node it is on.
    pub fn node_card(&self, r: &CardRef) -> Option<(&Node, &Card)> {
        // The index may be older than `nodes` (a test edits them): trust it only if it agrees.
        let indexed = self.node_index.get(&r.node).and_then(|&i| self.nodes.get(i)).filter(|n| n.name == r.node);
        let node = indexed.or_else(|| self.nodes.iter().find(|n| n.name == r.node))?;
        node.card_at(r.index).map(|c| (node, c))
    }

    /// A workload by id: through the index when it is current, else by scanning.
    pub fn workload(&self, id: &str) -> Option<&Workload> {
        if self.workload_index.len() == self.workloads.len() {
            return self.workload_index.get(id).and_then(|&i| self.workloads.get(i));
        }
        self.workloads.iter().find(|w| w.id == id)
    }

    /// A running workload's GPU memory, where no source said: the total of the MIG instances
    /// or whole cards it holds, so its used memory is always shown against what it has.
    pub fn fill_allocations(&mut self) {
        let mut held: foldhash::HashMap<&str, u64> = foldhash::HashMap::default();
        for c in self.nodes.iter().flat_map(|n| &n.cards) {
            if c.mig.enabled {
                for i in &c.mig.instances {
                    for id in &i.workloads {
                        *held.entry(id.as_str()).or_default() += i.memory_total_mib.unwrap_or(0);
                    }
                }
            } else {
                for id in &c.workloads {
                    *held.entry(id.as_str()).or_default() += c.memory_total_mib.unwrap_or(0);
                }
            }
        }
        for w in self.workloads.iter_mut().filter(|w| w.request.gpu_memory_mib.is_none()) {
            w.request.gpu_memory_mib = held.get(w.id.as_str()).copied().filter(|&m| m > 0);
        }
    }

    /// Rebuild the workload id and node name indexes after `workloads` or `nodes` changed.
    pub fn index_workloads(&mut self) {
        self.workload_index = self.workloads.iter().enumerate().map(|(i, w)| (w.id.clone(), i)).collect();
        self.node_index = self.nodes.iter().enumerate().map(|(i, n)| (n.name.clone(), i)).collect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_card_is_found_by_its_index_however_the_cards_are_numbered() {
        let node = |indexes: &[u32]| Node {
            cards: indexes.iter().map(|&index| Card { index, ..Card::default() }).collect(),
            ..Node::default()
        };
        let found = |n: &Node, i: u32| n.card_at(i).map(|c| c.index);
        let dense = node(&[0, 1, 2, 3]);
        assert_eq!((found(&dense, 2), found(&dense, 4)), (Some(2), None));
        let gaps = node(&[0, 2, 5, 7]);
        assert_eq!((found(&gaps, 5), found(&gaps, 7), found(&gaps, 1)), (Some(5), Some(7), None));
        let unsorted = node(&[3, 0, 7, 1]);
        for i in [3, 0, 7, 1] {
            assert_eq!(found(&unsorted, i), Some(i));
        }
        assert_eq!(found(&unsorted, 2), None);
        assert_eq!(found(&node(&[]), 0), None);
    }

    #[test]
    fn free_slices_of_a_mig_card() {
        let mut card = Card { model: "NVIDIA A100-SXM4-80GB".into(), ..Card::default() };
        card.mig.enabled = true;
        card.mig.instances.push(MigInstance { profile: "3g.40gb".into(), start: 0, size: 4, ..MigInstance::default() });
        assert_eq!(card.free_slice_mask(), Some(0xf0));
        card.model = "Mystery GPU".into();
        assert_eq!(card.free_slice_mask(), None);
    }

    #[test]
    fn a_mig_cards_activity_is_unknown_where_an_instance_or_the_list_is() {
        let mut card = Card { model: "NVIDIA A100-SXM4-80GB".into(), ..Card::default() };
        card.mig.enabled = true;
        let inst = |size, util| MigInstance { size, utilization_pct: util, ..MigInstance::default() };
        card.mig.instances = vec![inst(4, Some(50.0)), inst(1, Some(100.0))];
        assert_eq!(card.activity_pct(), Some((50.0 * 4.0 + 100.0) / 8.0));
        card.mig.instances[1].utilization_pct = None;
        assert_eq!(card.activity_pct(), None, "an instance unknown");
        // A profile the catalog has no size for (all-smi's mock serves 1g.5gb on a B200).
        card.mig.instances = vec![inst(4, Some(50.0)), inst(0, Some(40.0))];
        assert_eq!(card.activity_pct(), None, "a size unknown: not weighed as nothing");
        card.mig.instances.clear();
        card.mig.error = Some("instances unknown".into());
        assert_eq!(card.activity_pct(), None, "the list unknown: not an idle card");
    }
}
