//! The neutral accumulator: an exporter's series mapped into nodes, cards and MIG instances,
//! plus the pods and HPC jobs the exporter names on each card or instance ([`Holder`]).
//!
//! `map` turns one scrape (or several concatenated) into them. It is pure: the scrape itself
//! happens elsewhere. The names are each exporter's, in its dialect (`dcgm.rs`, `allsmi.rs`,
//! `amd.rs`, behind `Dialect`), and so are an exporter's quirks (a reading it writes where it
//! has none, the words a card says of its labels); the rules that follow are the same for all
//! of them:
//!
//! * A card is node + GPU index. A UUID, model name and PCI bus id describe it. Series with no
//!   usable index are counted in [`MapStats::unknown_gpu`] and skipped.
//! * The node is the series' host label ([`NodeName::Label`], "unknown" without one), or a
//!   fixed name ([`NodeName::Fixed`]) where the exporter's hostname is its pod name or a
//!   container id; targets that share one host are named by their label ([`NodeName::Shared`]).
//! * A series with a GPU instance id belongs to that GPU instance (its profile named) and makes
//!   the card a MIG card. Exporters say nothing about placement: `start` is left 0 and `size`
//!   is the catalog's memory slices for the profile where the model and profile are known
//!   (else 0); NVML or the catalog must supply the placement.
//! * A card's utilisation is its percentage; a 0–1 engine-active ratio ×100 is an instance's
//!   activity, and a whole card's only where the percentage is missing.
//! * Memory (MiB) is per instance on MIG; the total is the sum of used, free and reserved
//!   (where sent), else the exporter's total. A MIG card's memory used is the sum over its
//!   instances; its total is known only from a parent series (older exporters sent one).
//! * Device-wide fields (temperature, power, power limit, clocks, last XID, ECC) repeat once
//!   per GPU instance with the parent's value: they are taken once per card (the parent series,
//!   else the lowest instance id that has them), never summed. A last XID of 0 means none.
//! * Holders come from `pod`/`namespace`/`container`, or from `exported_pod`/
//!   `exported_namespace`/`exported_container` when any of those is set (Prometheus renames the
//!   workload's labels, and `pod` is then the exporter's own pod; the three are taken as a
//!   set so the exporter's namespace is never paired with the workload's pod), and an HPC job.
//!   Empty values mean none; a holder needs a pod or an HPC job. One [`Holder`] per card,
//!   instance, pod and HPC job.
//! * NaN and ±Inf in a mapped field are ignored and added to `stats.parse.bad_values`.
//! * A mapped field seen twice for the same card, instance and holder is a duplicate: the
//!   first value is kept and [`MapStats::duplicates`] counts the rest. The same field repeated
//!   for a different pod (a time-shared GPU, where the exporter writes one series per pod) is
//!   not a duplicate; the first value is kept too. Unknown metric names are ignored.
//! * `vgpu`: the replica a pod's series is about. Distinct `vgpu` values with a pod are the
//!   replicas in use on that card (past 256 the count is unknown).
//!
//! Output: nodes sorted by name, cards by index, instances by GPU instance id.

use std::borrow::Cow;
use std::collections::BTreeMap;

/// Per-sample lookups: a fast hash, seeded per process (SipHash was a tenth of a scrape's CPU).
type HashMap<K, V> = foldhash::HashMap<K, V>;

use super::exposition::{self, Sample};
use crate::model::{Card, MigInstance, Node, SharingMode, Vendor};

/// Where a card's node name comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum NodeName {
    /// The `Hostname`/`hostname` label.
    Label,
    /// The given name (the scrape target's host), for exporters whose hostname is a pod name.
    Fixed(String),
    /// A target whose host another target shares (SSH tunnels: `localhost:9001` and
    /// `localhost:9002`): the host its series name (dcgm-exporter's `Hostname`, all-smi's
    /// `instance`), else the given `host:port`. The host alone would fold both into one node.
    Shared(String),
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct MapStats {
    pub parse: super::exposition::ParseStats,
    pub blank_sentinels: usize,
    pub duplicates: usize,
    pub unknown_gpu: usize,
    /// Distinct `Hostname`s behind one target (nodes were named by them), or 0.
    pub hosts_behind_target: usize,
    /// Cards that share a node and an index but not a UUID (no label tells their hosts apart).
    pub shared_index: usize,
    /// Cards past `MAX_CARDS`, left out.
    pub cut_cards: usize,
}

/// The most cards one answer is read into: the largest supported fleet (65,536 cards, the
/// simulator's `--demo-size 4096x16`). A card past it is counted, not kept, and its series
/// are read through: 100,000 cards from one target took 1.35 GB through `snapshot --json`.
pub const MAX_CARDS: usize = crate::sources::MAX_CARDS;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Mapped {
    pub nodes: Vec<Node>,
    pub holders: Vec<Holder>,
    pub stats: MapStats,
}

/// A pod or HPC job the exporter attributes a card (or one GPU instance) to.
#[derive(Debug, Clone, PartialEq)]
pub struct Holder {
    pub node: String,
    pub index: u32,
    pub gi_id: Option<u32>,
    pub namespace: Option<String>,
    pub pod: Option<String>,
    pub container: Option<String>,
    pub hpc_job: Option<String>,
}

/// The fields tessera reads, each a slot per card or GPU instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Field {
    GpuUtil,
    GrActive,
    FbUsed,
    FbFree,
    FbReserved,
    FbTotal,
    Temp,
    Power,
    PowerLimit,
    SmClock,
    MemClock,
    Xid,
    EccDbe,
    RemappedRows,
    /// A MIG instance's activity as a percentage (all-smi's instance rows).
    InstUtil,
}

const FIELDS: usize = 15;

/// What a family is to the accumulator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Family {
    /// About a card (or, with a GPU instance label, one of its instances).
    Card,
    /// A MIG instance's row: one without a usable GPU instance id cannot be placed.
    Instance,
    /// Not about a card (the host's CPU, memory, disks): skipped without a word.
    Skip,
}

/// What a sample's value is, in the model's unit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Reading {
    /// A value for a field, in the model's unit (%, MiB, W, °C, MHz, counts).
    Value(Field, f64),
    /// The exporter's "no value" code.
    Blank,
    /// NaN or ±Inf in a field that is read.
    NonFinite,
    /// Not read (no field, or a value the exporter writes when it read nothing).
    Skip,
}

/// A MIG mode a sample states.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct MigMode {
    pub on: bool,
    /// Read live (a gauge), not once when the exporter started (an info label): it wins.
    pub live: bool,
}

/// One exporter's names, and its corrections to what the shared rules read: the small
/// interface between an exporter and the accumulator. Which dialect reads a sample is decided
/// per sample, by its name ([`Dialect::claims`]), so one scrape may mix exporters.
pub(super) trait Dialect: Sync {
    /// Whether the sample is this exporter's.
    fn claims(&self, name: &str) -> bool;
    /// The family filter: a card's, an instance's, or nothing tessera reads.
    fn family(&self, name: &str) -> Family;
    /// The labels the accumulator reads, in its slots, taken from `labels` (left empty).
    fn labels<'a>(&self, labels: &mut Vec<(&'a str, Cow<'a, str>)>) -> Labels<'a>;
    /// The field the sample feeds and its value in the model's unit (`labels` are the
    /// sample's: a value may mean something else in another mode).
    fn value(&self, name: &str, value: f64, labels: &Labels) -> Reading;
    /// The MIG mode the sample states, if it states one (`labels` are the sample's).
    fn mig_mode(&self, _name: &str, _value: f64, _labels: &Labels) -> Option<MigMode> {
        None
    }
    /// Who makes the cards this exporter reports, where it reads one vendor's only.
    fn vendor(&self) -> Option<Vendor> {
        None
    }
    /// What a card says when this exporter calls MIG on and sends no instance rows.
    fn no_instances(&self) -> &'static str {
        "MIG mode on but no MIG instances exported: instances unknown"
    }
    /// Correct a card this exporter states MIG mode on for, once the shared rules have read
    /// it: a whole-card reading the exporter writes where NVML gives none.
    fn mig_on(&self, _card: &mut Card) {}
    /// Where a card's replica count comes from, as the card says it, when this exporter's
    /// `vgpu` labels name the replicas.
    fn replicas_origin(&self) -> &'static str {
        "the exporter's replica labels"
    }
}

/// No holder on the series.
const NO_HOLDER: u32 = u32::MAX;

/// Per card (series without `GPU_I_ID`) or per GPU instance: the first value of each field,
/// with the holder of the series it came from, and the holders seen there.
#[derive(Default)]
struct Slots {
    vals: [Option<(f64, u32)>; FIELDS],
    holders: Vec<u32>,
}

impl Slots {
    fn get(&self, f: Field) -> Option<f64> {
        self.vals[f as usize].map(|(v, _)| v)
    }

    /// Used and total MiB; a total below what is used (series that disagree: a total from
    /// another exporter, in other units) is unknown, never a wrong bound.
    fn memory(&self) -> (Option<u64>, Option<u64>) {
        let used = self.get(Field::FbUsed).and_then(to_u64);
        let free = self.get(Field::FbFree).and_then(to_u64);
        let total = match (used, free) {
            (Some(u), Some(f)) => {
                Some(u.saturating_add(f).saturating_add(self.get(Field::FbReserved).and_then(to_u64).unwrap_or(0)))
            }
            _ => self.get(Field::FbTotal).and_then(to_u64),
        };
        let total = total.filter(|&t| used.is_none_or(|u| u <= t));
        (used, total)
    }
}

struct InstAcc<'a> {
    gi: u32,
    profile: Option<Cow<'a, str>>,
    slots: Slots,
}

struct CardAcc<'a> {
    /// The node key: the hostname label, or "" under a fixed name.
    node: Cow<'a, str>,
    /// The hostname label where a series of the card carries one.
    host: Option<Cow<'a, str>>,
    index: u32,
    uuid: Option<Cow<'a, str>>,
    model: Option<Cow<'a, str>>,
    pci: Option<Cow<'a, str>>,
    whole: Slots,
    instances: Vec<InstAcc<'a>>,
    /// Distinct `vgpu` labels of series with a holder: replicas in use.
    vgpus: Vec<Cow<'a, str>>,
    /// More distinct `vgpu` labels than are kept: the count is unknown.
    vgpu_overflow: bool,
    /// The dialect of the first series that named a replica.
    vgpus_named_by: Option<&'a dyn Dialect>,
    /// The MIG mode a row states (dcgm-exporter says it only through instances), and the
    /// dialect that stated it.
    mig_mode: Option<(bool, &'a dyn Dialect)>,
    /// What the card says when that mode is on and no instances came.
    no_instances: &'static str,
    vendor: Option<Vendor>,
    serial: Option<Cow<'a, str>>,
    compute_partition: Option<Cow<'a, str>>,
    memory_partition: Option<Cow<'a, str>>,
}

/// The most `vgpu` replicas kept per card: a hostile scrape cannot grow memory without bound.
const MAX_VGPUS: usize = 256;

struct HolderAcc<'a> {
    card: usize,
    gi: Option<u32>,
    namespace: Option<Cow<'a, str>>,
    pod: Option<Cow<'a, str>>,
    container: Option<Cow<'a, str>>,
    hpc_job: Option<Cow<'a, str>>,
}

/// The labels `map` reads from one series, by what they mean; each dialect fills them from its
/// own names. Empty values are none.
#[derive(Default)]
pub(super) struct Labels<'a> {
    /// The GPU index on its node.
    pub gpu: Option<Cow<'a, str>>,
    /// `nvidiaN`, where no index is given.
    pub device: Option<Cow<'a, str>>,
    pub uuid: Option<Cow<'a, str>>,
    pub model: Option<Cow<'a, str>>,
    pub pci: Option<Cow<'a, str>>,
    /// The GPU instance id, and its profile.
    pub gi: Option<Cow<'a, str>>,
    pub profile: Option<Cow<'a, str>>,
    pub host: Option<Cow<'a, str>>,
    pub pod: Option<Cow<'a, str>>,
    pub namespace: Option<Cow<'a, str>>,
    pub container: Option<Cow<'a, str>>,
    pub exported_pod: Option<Cow<'a, str>>,
    pub exported_namespace: Option<Cow<'a, str>>,
    pub exported_container: Option<Cow<'a, str>>,
    pub hpc_job: Option<Cow<'a, str>>,
    pub vgpu: Option<Cow<'a, str>>,
    /// A MIG mode stated as a label (all-smi's `mig_mode_current`).
    pub mig_mode: Option<Cow<'a, str>>,
    /// The board's serial number.
    pub serial: Option<Cow<'a, str>>,
    /// A vendor's partition modes (AMD's compute `spx`…`cpx` and memory `nps1`…`nps8`).
    pub compute_partition: Option<Cow<'a, str>>,
    pub memory_partition: Option<Cow<'a, str>>,
}

impl Labels<'_> {
    fn gpu_index(&self) -> Option<u32> {
        let from_gpu = self.gpu.as_deref().and_then(|g| g.trim().parse().ok());
        from_gpu.or_else(|| self.device.as_deref()?.trim().strip_prefix("nvidia")?.parse().ok())
    }
}

#[derive(Default)]
struct Acc<'a> {
    cards: Vec<CardAcc<'a>>,
    /// Cards by host label and index; several when their UUIDs differ.
    index: HashMap<(Cow<'a, str>, u32), Vec<usize>>,
    /// Cards by UUID: one lookup however many hosts share an index under one target.
    by_uuid: HashMap<Cow<'a, str>, usize>,
    /// Cards first seen in a series without a UUID, by host label and index: the only ones a
    /// new UUID may join.
    no_uuid: HashMap<(Cow<'a, str>, u32), Vec<usize>>,
    holders: Vec<HolderAcc<'a>>,
    stats: Counts,
}

#[derive(Default)]
struct Counts {
    blank_sentinels: usize,
    duplicates: usize,
    unknown_gpu: usize,
    non_finite: usize,
    cut_cards: usize,
}

/// One sample as the dialect that claims it reads it, placed on a GPU index.
struct Read<'a> {
    dialect: &'a dyn Dialect,
    labels: Labels<'a>,
    reading: Reading,
    mig: Option<MigMode>,
    gpu: u32,
}

impl<'a> Acc<'a> {
    /// Read one sample into its card, GPU instance and holder: read, find (or make) the card,
    /// describe it, pick the slots, name the holder, keep the value.
    fn add(&mut self, s: &mut Sample<'a>, fixed: bool, dialects: &[&'a dyn Dialect]) {
        let Some(Read { dialect, labels: mut l, reading, mig, gpu }) = self.read(s, dialects) else { return };
        let node: Cow<'a, str> =
            if fixed { Cow::Borrowed("") } else { l.host.clone().unwrap_or(Cow::Borrowed("unknown")) };
        let Some(ci) = self.card_for(node, gpu, &l, dialect) else { return };
        let Some(card) = self.cards.get_mut(ci) else { return };
        card.describe(ci, &mut l, (mig, dialect), &mut self.by_uuid);
        let gi = l.gi.as_deref().and_then(|g| g.trim().parse::<u32>().ok());
        let Some(slots) = card.slots(gi, l.profile.take()) else { return };
        let holder = holder_of(&mut self.holders, slots, ci, gi, l);
        self.stats.keep(slots, reading, holder);
    }

    /// The sample as the first of `dialects` that claims it reads it, with its GPU index;
    /// `None` where it is about no card, or about one it cannot be placed on (counted).
    fn read(&mut self, s: &mut Sample<'a>, dialects: &[&'a dyn Dialect]) -> Option<Read<'a>> {
        let name = s.name;
        let value = s.value;
        // Detected per sample: the first dialect that claims the name reads it.
        let dialect = dialects.iter().copied().find(|d| d.claims(name))?;
        let family = dialect.family(name);
        if family == Family::Skip {
            // The host's own rows (CPU, memory, disk, processes): nothing about a card.
            return None;
        }
        let l = dialect.labels(&mut s.labels);
        let reading = dialect.value(name, value, &l);
        let mig = dialect.mig_mode(name, value, &l);
        let Some(gpu) = l.gpu_index() else {
            self.stats.unknown_gpu += 1;
            return None;
        };
        if family == Family::Instance && l.gi.as_deref().and_then(|g| g.trim().parse::<u32>().ok()).is_none() {
            // An instance row with no GPU instance id cannot be placed on its card.
            self.stats.unknown_gpu += 1;
            return None;
        }
        Some(Read { dialect, labels: l, reading, mig, gpu })
    }

    /// The card a series on `node` and index `gpu` is about: one already read, else a new one;
    /// `None` for a new card past `MAX_CARDS` (counted).
    fn card_for(&mut self, node: Cow<'a, str>, gpu: u32, l: &Labels<'a>, dialect: &dyn Dialect) -> Option<usize> {
        // Looked up without making entries: a card past `MAX_CARDS` leaves nothing behind.
        let key = (node.clone(), gpu);
        let found = self.find_card(&key, l);
        if found.is_none() && self.cards.len() >= MAX_CARDS {
            self.stats.cut_cards += 1;
            return None;
        }
        Some(found.unwrap_or_else(|| self.new_card(node, key, l.uuid.is_none(), dialect)))
    }

    /// The card already read for a host label and index (`key`) that the series' UUID and host
    /// label agree with, if any.
    fn find_card(&self, key: &(Cow<'a, str>, u32), l: &Labels<'a>) -> Option<usize> {
        let cards = &self.cards;
        let gpu = key.1;
        let no_list: &[usize] = &[];
        let same = self.index.get(key).map_or(no_list, Vec::as_slice);
        // Cards with different UUIDs are different cards, whatever their index says; without
        // a UUID, a different host label (one target fronting many hosts) tells them apart.
        let agree = |a: Option<&str>, b: Option<&str>| a.zip(b).is_none_or(|(a, b)| a == b);
        let anonymous = self.no_uuid.get(key).map_or(no_list, Vec::as_slice);
        match &l.uuid {
            // A known UUID is one lookup; a new one joins only a card that has no UUID yet.
            Some(u) => self.by_uuid.get(u).copied().filter(|&i| cards[i].index == gpu).or_else(|| {
                anonymous
                    .iter()
                    .copied()
                    .filter(|&i| cards[i].uuid.is_none())
                    .find(|&i| agree(cards[i].host.as_deref(), l.host.as_deref()))
            }),
            None => same.iter().copied().find(|&i| agree(cards[i].host.as_deref(), l.host.as_deref())),
        }
    }

    /// A new card on `node` with the index in `key`, listed under `key` (and among the cards
    /// a new UUID may join where its series has none): its position.
    fn new_card(
        &mut self,
        node: Cow<'a, str>,
        key: (Cow<'a, str>, u32),
        no_uuid: bool,
        dialect: &dyn Dialect,
    ) -> usize {
        let cards = &mut self.cards;
        cards.push(CardAcc {
            node,
            host: None,
            index: key.1,
            uuid: None,
            model: None,
            pci: None,
            whole: Slots::default(),
            instances: Vec::new(),
            vgpus: Vec::new(),
            vgpu_overflow: false,
            vgpus_named_by: None,
            mig_mode: None,
            no_instances: dialect.no_instances(),
            vendor: dialect.vendor(),
            serial: None,
            compute_partition: None,
            memory_partition: None,
        });
        self.index.entry(key.clone()).or_default().push(cards.len() - 1);
        if no_uuid {
            self.no_uuid.entry(key.clone()).or_default().push(cards.len() - 1);
        }
        cards.len() - 1
    }

    fn finish(self, node: &NodeName) -> (Vec<Node>, Vec<Holder>, Naming) {
        // One target whose series name several hosts (a Service, a federating endpoint):
        // those hosts are the nodes, or thousands of cards would fold into one node's eight.
        let hosts: std::collections::BTreeSet<&str> = self.cards.iter().filter_map(|c| c.host.as_deref()).collect();
        let by_host = matches!(node, NodeName::Fixed(_)) && hosts.len() > 1;
        let naming = Naming { hosts_behind_target: if by_host { hosts.len() } else { 0 }, shared_index: 0 };
        let name_of = |c: &CardAcc| match (node, c.host.as_deref()) {
            (NodeName::Fixed(_), Some(h)) if by_host => h.to_string(),
            (NodeName::Fixed(n), _) => n.clone(),
            (NodeName::Shared(_), Some(h)) => h.to_string(),
            (NodeName::Shared(n), None) => n.clone(),
            (NodeName::Label, _) => c.node.to_string(),
        };
        let mut holders: Vec<Holder> = self
            .holders
            .into_iter()
            .filter_map(|h| {
                let c = self.cards.get(h.card)?;
                Some(Holder {
                    node: name_of(c),
                    index: c.index,
                    gi_id: h.gi,
                    namespace: h.namespace.map(Cow::into_owned),
                    pod: h.pod.map(Cow::into_owned),
                    container: h.container.map(Cow::into_owned),
                    hpc_job: h.hpc_job.map(Cow::into_owned),
                })
            })
            .collect();
        holders.sort_by(|a, b| (&a.node, a.index, a.gi_id).cmp(&(&b.node, b.index, b.gi_id)));

        let mut nodes: BTreeMap<String, Vec<Card>> = BTreeMap::new();
        for c in self.cards {
            nodes.entry(name_of(&c)).or_default().push(card(c));
        }
        let mut naming = naming;
        let nodes = nodes
            .into_iter()
            .map(|(name, mut cards)| {
                cards.sort_by_key(|c| c.index);
                naming.shared_index += cards.windows(2).filter(|w| w[0].index == w[1].index).count();
                Node { cards, ..Node::new(name) }
            })
            .collect();
        (nodes, holders, naming)
    }
}

impl<'a> CardAcc<'a> {
    /// Fill in what a series says of its card and the card does not know yet: host, UUID
    /// (listed in `by_uuid` as card `ci`), model, bus id, serial, partition modes, the MIG
    /// mode its dialect reads in it, and the `vgpu` replica it is about.
    fn describe(
        &mut self,
        ci: usize,
        l: &mut Labels<'a>,
        (mig, dialect): (Option<MigMode>, &'a dyn Dialect),
        by_uuid: &mut HashMap<Cow<'a, str>, usize>,
    ) {
        fill(&mut self.host, l.host.take());
        if self.uuid.is_none()
            && let Some(u) = &l.uuid
        {
            by_uuid.insert(u.clone(), ci);
        }
        fill(&mut self.uuid, l.uuid.take());
        fill(&mut self.model, l.model.take());
        fill(&mut self.pci, l.pci.take());
        fill(&mut self.serial, l.serial.take());
        fill(&mut self.compute_partition, l.compute_partition.take());
        fill(&mut self.memory_partition, l.memory_partition.take());
        // A live gauge wins; a label read once when the exporter started only fills.
        match mig {
            Some(m) if m.live => self.mig_mode = Some((m.on, dialect)),
            Some(m) if self.mig_mode.is_none() => self.mig_mode = Some((m.on, dialect)),
            _ => {}
        }
        self.note_replica(l, dialect);
    }

    /// Count the `vgpu` replica a series with a holder is about, once, up to `MAX_VGPUS`
    /// (read by `dialect`).
    fn note_replica(&mut self, l: &Labels<'a>, dialect: &'a dyn Dialect) {
        let has_holder = l.pod.is_some() || l.exported_pod.is_some();
        if let Some(v) = l.vgpu.clone().filter(|_| has_holder)
            && !self.vgpus.contains(&v)
        {
            if self.vgpus.len() < MAX_VGPUS {
                self.vgpus.push(v);
                self.vgpus_named_by.get_or_insert(dialect);
            } else {
                self.vgpu_overflow = true;
            }
        }
    }

    /// The slots a series fills: the card's own, or those of its GPU instance `gi` (added on
    /// first sight, its profile filled in).
    fn slots(&mut self, gi: Option<u32>, profile: Option<Cow<'a, str>>) -> Option<&mut Slots> {
        match gi {
            None => Some(&mut self.whole),
            Some(gi) => {
                let at = match self.instances.iter().position(|i| i.gi == gi) {
                    Some(at) => at,
                    None => {
                        self.instances.push(InstAcc { gi, profile: None, slots: Slots::default() });
                        self.instances.len() - 1
                    }
                };
                let inst = self.instances.get_mut(at)?;
                fill(&mut inst.profile, profile);
                Some(&mut inst.slots)
            }
        }
    }
}

/// The holder a series names on card `ci` (instance `gi`): one its slots have seen (same pod
/// and HPC job), else a new one; `NO_HOLDER` where it names neither pod nor HPC job.
fn holder_of<'a>(
    holders: &mut Vec<HolderAcc<'a>>,
    slots: &mut Slots,
    ci: usize,
    gi: Option<u32>,
    l: Labels<'a>,
) -> u32 {
    let exported = l.exported_pod.is_some() || l.exported_namespace.is_some() || l.exported_container.is_some();
    let (pod, namespace, container) = if exported {
        (l.exported_pod, l.exported_namespace, l.exported_container)
    } else {
        (l.pod, l.namespace, l.container)
    };
    if pod.is_none() && l.hpc_job.is_none() {
        return NO_HOLDER;
    }
    let known = slots
        .holders
        .iter()
        .copied()
        .find(|&h| holders.get(h as usize).is_some_and(|x| x.pod == pod && x.hpc_job == l.hpc_job));
    match known {
        Some(h) => h,
        None => {
            let h = u32::try_from(holders.len()).unwrap_or(NO_HOLDER);
            holders.push(HolderAcc { card: ci, gi, namespace, pod, container, hpc_job: l.hpc_job });
            slots.holders.push(h);
            h
        }
    }
}

impl Counts {
    /// Keep a reading's value in its slot if the slot has none: the same field again from the
    /// same holder is a duplicate (counted), from another pod it is not. Blanks and
    /// non-finite values are counted, not kept.
    fn keep(&mut self, slots: &mut Slots, reading: Reading, holder: u32) {
        let (f, value) = match reading {
            Reading::Value(f, v) => (f, v),
            Reading::Blank => {
                self.blank_sentinels += 1;
                return;
            }
            Reading::NonFinite => {
                self.non_finite += 1;
                return;
            }
            Reading::Skip => return,
        };
        match &mut slots.vals[f as usize] {
            Some((_, first)) => {
                if *first == holder {
                    self.duplicates += 1;
                }
            }
            empty => *empty = Some((value, holder)),
        }
    }
}

fn fill<'a>(slot: &mut Option<Cow<'a, str>>, v: Option<Cow<'a, str>>) {
    if slot.is_none() {
        *slot = v;
    }
}

fn to_u64(v: f64) -> Option<u64> {
    (0.0..1.8e19).contains(&v).then(|| v.round() as u64)
}

/// A percentage, or unknown: an exporter's -1 or 250 % is not shown as a number.
fn pct(v: f64) -> Option<f64> {
    (0.0..=100.0).contains(&v).then_some(v)
}

fn to_u32(v: f64) -> Option<u32> {
    (0.0..=f64::from(u32::MAX)).contains(&v).then(|| v.round() as u32)
}

/// A card as its series describe it: its device-wide readings, its GPU instances, its MIG
/// mode, and how it is shared.
fn card(c: CardAcc) -> Card {
    let model = c.model.map(Cow::into_owned).unwrap_or_default();
    let mut instances = c.instances;
    instances.sort_by_key(|i| i.gi);
    let mut card = Card {
        index: c.index,
        uuid: c.uuid.map(Cow::into_owned),
        pci_bus_id: c.pci.map(Cow::into_owned),
        ..Card::default()
    };
    read_device(&mut card, &c.whole, &instances);
    if !instances.is_empty() {
        add_instances(&mut card, instances, &model);
    }
    if let Some((true, dialect)) = c.mig_mode {
        dialect.mig_on(&mut card);
    }
    if card.mig.instances.is_empty() && c.mig_mode.is_some_and(|(on, _)| on) {
        // An exporter says MIG is on and lists no instances: they are unknown, not absent.
        card.mig.enabled = true;
        card.mig.placements = crate::model::Placements::Unknown;
        card.mig.error = Some(c.no_instances.into());
    }
    count_replicas(&mut card, &c.vgpus, c.vgpu_overflow, c.vgpus_named_by);
    read_partitions(&mut card, c.compute_partition, c.memory_partition);
    card.vendor = c.vendor;
    card.serial = c.serial.map(Cow::into_owned);
    card.model = model;
    card
}

/// The card's device-wide readings (its own series, else its lowest instance's), health,
/// utilisation and memory.
fn read_device(card: &mut Card, whole: &Slots, instances: &[InstAcc]) {
    let device = |f: Field| whole.get(f).or_else(|| instances.iter().find_map(|i| i.slots.get(f)));
    card.temperature_c = device(Field::Temp);
    card.power_w = device(Field::Power);
    card.power_limit_w = device(Field::PowerLimit);
    card.sm_clock_mhz = device(Field::SmClock).and_then(to_u32);
    card.memory_clock_mhz = device(Field::MemClock).and_then(to_u32);
    card.health.last_xid = device(Field::Xid).and_then(to_u32).filter(|&x| x != 0);
    card.health.ecc_volatile_uncorrected = device(Field::EccDbe).and_then(to_u64);
    card.health.remapped_rows_uncorrectable = device(Field::RemappedRows).and_then(to_u64);
    // A parent series (whole card, or a MIG card's parent on older exporters) measures the card.
    card.utilization_pct =
        whole.get(Field::GpuUtil).and_then(pct).or_else(|| whole.get(Field::GrActive).and_then(|r| pct(r * 100.0)));
    let (used, total) = whole.memory();
    card.memory_used_mib = used;
    card.memory_total_mib = total;
}

/// Make the card a MIG card with its GPU instances (sorted by id); its memory used is their
/// sum.
fn add_instances(card: &mut Card, instances: Vec<InstAcc>, model: &str) {
    let catalog = crate::model::mig::lookup(model);
    card.mig.enabled = true;
    // Exporters say nothing about placement: the store infers it unless a source knows it.
    card.mig.placements = crate::model::Placements::Inferred;
    card.mig.instances = instances
        .into_iter()
        .map(|i| {
            let profile = i.profile.map(Cow::into_owned).unwrap_or_default();
            let size = catalog.and_then(|m| m.profile(&profile)).map_or(0, |p| p.memory_slices);
            let (used, total) = i.slots.memory();
            MigInstance {
                gi_id: i.gi,
                profile,
                start: 0,
                size,
                memory_used_mib: used,
                memory_total_mib: total,
                utilization_pct: i
                    .slots
                    .get(Field::InstUtil)
                    .and_then(pct)
                    .or_else(|| i.slots.get(Field::GrActive).and_then(|r| pct(r * 100.0))),
                ..MigInstance::default()
            }
        })
        .collect();
    let mut sum = None;
    for u in card.mig.instances.iter().filter_map(|i| i.memory_used_mib) {
        sum = Some(sum.unwrap_or(0u64).saturating_add(u));
    }
    if sum.is_some() {
        card.memory_used_mib = sum;
        // The instances' sum above a parent series' total: that total is not this card's.
        card.memory_total_mib = card.memory_total_mib.filter(|&t| sum.is_none_or(|u| u <= t));
    }
}

/// The replicas in use on the card: its distinct `vgpu` labels (unknown past the bound), as
/// the dialect that named them says.
fn count_replicas(card: &mut Card, vgpus: &[Cow<str>], overflow: bool, named_by: Option<&dyn Dialect>) {
    if !vgpus.is_empty() {
        // Past the bound the count is not known: unknown, not 256.
        card.sharing.replicas_used = u32::try_from(vgpus.len()).ok().filter(|_| !overflow);
        card.sharing.origin = named_by.map(|d| d.replicas_origin().into());
    }
}

/// A partition mode (`none`: the exporter does not know it) is how a card that is not a MIG
/// card is shared.
fn read_partitions(card: &mut Card, compute: Option<Cow<str>>, memory: Option<Cow<str>>) {
    let mode = |m: Option<Cow<str>>| m.map(|m| m.trim().to_ascii_uppercase()).filter(|m| !m.is_empty() && m != "NONE");
    let (compute, memory) = (mode(compute), mode(memory));
    if (compute.is_some() || memory.is_some()) && !card.mig.enabled {
        card.sharing.mode = Some(SharingMode::Partitioned);
        card.sharing.compute_partition = compute;
        card.sharing.memory_partition = memory;
        card.sharing.origin = Some("the exporter's partition labels".into());
    }
}

/// Map a scrape into nodes and holders, each sample read by the first of `dialects` that
/// claims it. Never panics on any input.
pub(super) fn map(text: &str, node: &NodeName, dialects: &[&dyn Dialect]) -> Mapped {
    let fixed = matches!(node, NodeName::Fixed(_) | NodeName::Shared(_));
    let mut acc = Acc::default();
    // A family no dialect reads (the host's rows) is skipped after its name.
    let wanted = |name: &str| dialects.iter().find(|d| d.claims(name)).is_some_and(|d| d.family(name) != Family::Skip);
    let mut parse = exposition::parse_wanted(text, wanted, |s| acc.add(s, fixed, dialects));
    let counts = std::mem::take(&mut acc.stats);
    parse.bad_values += counts.non_finite;
    let (nodes, holders, naming) = acc.finish(node);
    Mapped {
        nodes,
        holders,
        stats: MapStats {
            parse,
            blank_sentinels: counts.blank_sentinels,
            duplicates: counts.duplicates,
            unknown_gpu: counts.unknown_gpu,
            hosts_behind_target: naming.hosts_behind_target,
            shared_index: naming.shared_index,
            cut_cards: counts.cut_cards,
        },
    }
}

/// How nodes were named, for the source's note.
struct Naming {
    hosts_behind_target: usize,
    shared_index: usize,
}
