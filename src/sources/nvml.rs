//! The NVML source: this host's cards through nvml-wrapper, on a thread of its own (FFI
//! blocks), one collection at a time. MIG instances come from raw calls in `nvml/ffi.rs`,
//! their activity from GPM where the card has it (Hopper and newer); processes are read on a
//! slower cadence; XIDs arrive through an event set, polled.

mod calls;
pub(crate) mod ffi;
mod procfs;

pub use calls::{CallLog, CallRow, Outcomes};

use std::collections::{BTreeMap, HashMap};
use std::ffi::OsStr;
use std::time::Duration;

use chrono::Utc;
use nvml_wrapper::bitmasks::event::EventTypes;
use nvml_wrapper::enum_wrappers::device::{Clock, EccCounter, MemoryError, TemperatureSensor};
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::enums::event::XidError;
use nvml_wrapper::enums::gpm::GpmMetricId;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::gpm::gpm_metrics_get;
use nvml_wrapper::{Device, EventSet, GpmSample, Nvml};
use tokio::sync::mpsc;

use super::{Partial, SourceError, SourceUpdate, backoff};
use crate::model::{
    Card, ComputeInstance, ComputeMode, Event, MigInstance, MigState, Node, Process, Severity, SourceKind, Workload,
    WorkloadKind, WorkloadState,
};

/// The library a driver install provides (the unversioned name needs the development package).
pub const DEFAULT_LIB: &str = "libnvidia-ml.so.1";

/// GPM needs two samples at least this far apart.
const GPM_MIN_GAP: Duration = Duration::from_millis(100);

/// Processes cost a /proc read each; they refresh every this many collections.
pub const PROCESS_EVERY: u64 = 5;

const MIB: u64 = 1024 * 1024;

/// Why NVML could not be loaded and initialised.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The library at `path` cannot be loaded (not there, not a library).
    #[error("cannot load {path}")]
    Load { path: String, source: NvmlError },
    #[error("the NVIDIA driver is not loaded")]
    DriverNotLoaded,
    #[error("no permission to talk to the driver")]
    NoPermission,
    /// Any other failure of the library at `path`.
    #[error("{path}: {source}")]
    Other { path: String, source: NvmlError },
}

/// Load and initialise NVML from `lib` (default: the driver's library).
pub fn open(lib: Option<&str>) -> Result<Nvml, OpenError> {
    let path = lib.unwrap_or(DEFAULT_LIB);
    Nvml::builder().lib_path(OsStr::new(path)).init().map_err(|e| match e {
        NvmlError::LibloadingError(_) => OpenError::Load { path: path.to_string(), source: e },
        NvmlError::DriverNotLoaded => OpenError::DriverNotLoaded,
        NvmlError::NoPermission => OpenError::NoPermission,
        other => OpenError::Other { path: path.to_string(), source: other },
    })
}

/// This host's name: the node the cards belong to.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "localhost".into())
}

/// Collects from one initialised NVML. Keeps the last good view of each card so a card that
/// is lost is marked, not dropped.
pub struct Collector<'n> {
    nvml: &'n Nvml,
    events: Option<EventSet<'n>>,
    node: String,
    last: BTreeMap<u32, Card>,
    /// Per card: whether the compute list could be read, and the processes (MPS clients too).
    processes: HashMap<u32, (bool, Vec<Process>)>,
    /// The MPS control daemon's pid on this host, looked for with the processes.
    mps_daemon: Option<u32>,
    users: HashMap<u32, String>,
    collections: u64,
    /// Whether each card supports GPM (Hopper and newer), asked once.
    gpm_supported: HashMap<u32, bool>,
    /// The last GPM sample per (card, GPU instance), with when it was taken.
    gpm: HashMap<(u32, u32), (std::time::Instant, GpmSample<'n>)>,
    /// Why the current card's MIG instances could not be read.
    mig_error: Option<String>,
    /// What each call answered (the device check prints it).
    calls: CallLog,
}

impl<'n> Collector<'n> {
    pub fn new(nvml: &'n Nvml) -> Self {
        let users = std::fs::read_to_string("/etc/passwd").map(|p| procfs::users(&p)).unwrap_or_default();
        let mut c = Self {
            nvml,
            events: None,
            node: hostname(),
            last: BTreeMap::new(),
            processes: HashMap::new(),
            mps_daemon: None,
            users,
            collections: 0,
            gpm_supported: HashMap::new(),
            gpm: HashMap::new(),
            mig_error: None,
            calls: CallLog::default(),
        };
        c.events = c.register_events();
        c.prime_gpm();
        c
    }

    /// Take a first GPM sample of every instance, so the first collection can already report
    /// per-instance activity (one 100 ms wait, only where GPM exists).
    fn prime_gpm(&mut self) {
        let mut primed = false;
        for index in 0..self.nvml.device_count().unwrap_or(0) {
            let Ok(dev) = self.nvml.device_by_index(index) else { continue };
            if !self.gpm_supported(index, &dev) {
                continue;
            }
            for gi in ffi::gpu_instances(self.nvml, &dev).unwrap_or_default() {
                if let Ok(sample) = dev.gpm_mig_sample(gi.id) {
                    self.gpm.insert((index, gi.id), (std::time::Instant::now(), sample));
                    primed = true;
                }
            }
        }
        if primed {
            std::thread::sleep(GPM_MIN_GAP);
        }
    }

    fn gpm_supported(&mut self, index: u32, dev: &Device<'n>) -> bool {
        if let Some(&known) = self.gpm_supported.get(&index) {
            return known;
        }
        let support = dev.gpm_support();
        self.calls.note("nvmlGpmQueryDeviceSupport", Some(index), &support);
        let supported = support.unwrap_or(false);
        self.gpm_supported.insert(index, supported);
        supported
    }

    /// GPU instance activity (GPM graphics utilisation, percent) since the previous sample;
    /// `None` without GPM or before two samples at least 100 ms apart exist.
    fn gpm_util(&mut self, index: u32, dev: &Device<'n>, gi: u32) -> Option<f64> {
        if !self.gpm_supported(index, dev) {
            return None;
        }
        let now = std::time::Instant::now();
        if let Some((t, _)) = self.gpm.get(&(index, gi))
            && now.duration_since(*t) < GPM_MIN_GAP
        {
            return None;
        }
        let sample = dev.gpm_mig_sample(gi);
        self.calls.note("nvmlGpmMigSampleGet", Some(index), &sample);
        let sample = sample.ok()?;
        let previous = self.gpm.insert((index, gi), (now, sample));
        let (_, prev) = previous?;
        let (_, current) = self.gpm.get(&(index, gi))?;
        let metrics = gpm_metrics_get(self.nvml, &prev, current, &[GpmMetricId::GraphicsUtil]).ok()?;
        metrics.into_iter().next()?.ok().map(|m| m.value.clamp(0.0, 100.0))
    }

    /// An event set with every card that supports XID events; `None` if NVML has none.
    fn register_events(&mut self) -> Option<EventSet<'n>> {
        let set = self.nvml.create_event_set();
        self.calls.note("nvmlEventSetCreate", None, &set);
        let mut set = set.ok()?;
        let mut registered: Vec<u32> = Vec::new();
        for i in 0..self.nvml.device_count().unwrap_or(0) {
            let Ok(dev) = self.nvml.device_by_index(i) else { continue };
            let types = dev.supported_event_types();
            self.calls.note("nvmlDeviceGetSupportedEventTypes", Some(i), &types);
            if types.is_ok_and(|t| t.contains(EventTypes::CRITICAL_XID_ERROR)) {
                set = match dev.register_events(EventTypes::CRITICAL_XID_ERROR, set) {
                    Ok(s) => {
                        registered.push(i);
                        s
                    }
                    // A failed registration frees the set (NVML leaves it undefined): make a new
                    // one and register again the cards that had succeeded.
                    Err(_) => {
                        let mut fresh = self.nvml.create_event_set().ok()?;
                        for &j in &registered {
                            let Ok(d) = self.nvml.device_by_index(j) else { continue };
                            fresh = d.register_events(EventTypes::CRITICAL_XID_ERROR, fresh).ok()?;
                        }
                        fresh
                    }
                };
            }
        }
        Some(set)
    }

    /// What every NVML call this collector made has answered so far.
    pub fn calls(&self) -> Vec<CallRow> {
        self.calls.rows()
    }

    pub fn collect(&mut self) -> Result<Partial, SourceError> {
        let count = self.nvml.device_count();
        self.calls.note("nvmlDeviceGetCount_v2", None, &count);
        let count = count.map_err(|e| SourceError {
            message: format!("device count: {e}"),
            fatal: false,
            unanswered: false,
        })?;
        let slow = self.collections.is_multiple_of(PROCESS_EVERY);
        self.collections += 1;
        let mut events = Vec::new();
        let mut notes: Vec<String> = Vec::new();
        if slow {
            self.mps_daemon = procfs::find(MPS_CONTROL);
        }
        if let Some(pid) = self.mps_daemon {
            // The daemon starts a server for a card when its first client connects.
            notes.push(format!("MPS control daemon running (pid {pid})"));
        }
        let mut cards = Vec::new();
        for index in 0..count {
            let dev = self.nvml.device_by_index(index);
            self.calls.note("nvmlDeviceGetHandleByIndex_v2", Some(index), &dev);
            match dev.and_then(|d| self.card(index, &d, slow)) {
                Ok(card) => {
                    self.last.insert(index, card.clone());
                    cards.push(card);
                }
                Err(e) => {
                    let mut card = self.last.get(&index).cloned().unwrap_or_else(|| Card {
                        index,
                        model: "unknown (lost before first read)".into(),
                        vendor: Some(crate::model::Vendor::Nvidia),
                        ..Card::default()
                    });
                    let lost = matches!(e, NvmlError::GpuLost);
                    if lost && !card.health.lost {
                        let text = format!("GPU lost: {e}");
                        events.push(Event {
                            at: Utc::now(),
                            card: Some(self.card_ref(index)),
                            severity: Severity::Critical,
                            text,
                        });
                    } else if !lost {
                        notes.push(format!("card {index}: {e}; showing its last values"));
                    }
                    card.health.lost |= lost;
                    card.utilization_pct = None;
                    self.last.insert(index, card.clone());
                    cards.push(card);
                }
            }
        }
        // Cards that vanished from the count entirely are lost too.
        let node = self.node.clone();
        for (index, card) in self.last.range_mut(count..) {
            if !card.health.lost {
                let text = format!("card {index} is gone from NVML's device list");
                let r = crate::model::CardRef::new(node.clone(), *index);
                events.push(Event { at: Utc::now(), card: Some(r), severity: Severity::Critical, text });
            }
            card.health.lost = true;
            card.utilization_pct = None;
            cards.push(card.clone());
        }
        notes.extend(cards.iter().filter_map(|c| c.mig.error.as_ref().map(|e| format!("card {}: {e}", c.index))));
        self.drain_events(&mut cards, &mut events);
        let workloads = self.process_workloads(&mut cards);
        let node = Node { cards, ..Node::new(self.node.clone()) };
        let note = (!notes.is_empty()).then(|| notes.join("; "));
        Ok(Partial { nodes: vec![node], workloads, events, note, ..Partial::default() })
    }

    /// Each compute process becomes a workload (`pid:N`, kind other) holding its card or GPU
    /// instance, so holders, the workloads view and "free" mean the same with NVML alone.
    fn process_workloads(&self, cards: &mut [Card]) -> Vec<Workload> {
        let mut out: Vec<Workload> = Vec::new();
        for card in cards.iter_mut().filter(|c| !c.health.lost) {
            // The MPS server is the clients' host, not a workload.
            for p in card.processes.clone().into_iter().filter(|p| p.name.as_deref() != Some(MPS_SERVER)) {
                let id = format!("pid:{}", p.pid);
                let r = self.card_ref(card.index);
                card.add_holder(p.gi_id, &id);
                match out.iter_mut().find(|w| w.id == id) {
                    Some(w) => {
                        if !w.cards.contains(&r) {
                            w.cards.push(r);
                        }
                        w.memory_used_mib = Some(w.memory_used_mib.unwrap_or(0) + p.used_mib.unwrap_or(0));
                    }
                    None => {
                        let name = p.name.clone().unwrap_or_else(|| format!("pid {}", p.pid));
                        let mut w = Workload::new(id, name, WorkloadKind::Other, WorkloadState::Running);
                        w.owner.clone_from(&p.user);
                        w.node = Some(self.node.clone());
                        w.cards = vec![r];
                        w.memory_used_mib = p.used_mib;
                        out.push(w);
                    }
                }
            }
        }
        out
    }

    fn card_ref(&self, index: u32) -> crate::model::CardRef {
        crate::model::CardRef::new(self.node.clone(), index)
    }

    /// XIDs since the last collection, at most 64 a time so a storm cannot stall the thread.
    fn drain_events(&mut self, cards: &mut [Card], events: &mut Vec<Event>) {
        let Some(set) = &self.events else { return };
        for _ in 0..64 {
            let Ok(data) = set.wait(0) else { break };
            let Ok(index) = data.device.index() else { continue };
            if let Some(XidError::Value(xid)) = data.event_data {
                let xid = u32::try_from(xid).unwrap_or(u32::MAX);
                if let Some(c) = cards.iter_mut().find(|c| c.index == index) {
                    c.health.last_xid = Some(xid);
                }
                if let Some(c) = self.last.get_mut(&index) {
                    c.health.last_xid = Some(xid);
                }
                let text = format!("XID {xid}");
                events.push(Event {
                    at: Utc::now(),
                    card: Some(self.card_ref(index)),
                    severity: Severity::Critical,
                    text,
                });
            }
        }
    }

    fn card(&mut self, index: u32, dev: &Device<'n>, slow: bool) -> Result<Card, NvmlError> {
        let name = self.calls.known("nvmlDeviceGetName", index, dev.name())?.unwrap_or_else(|| "unknown".into());
        let mig_mode = self.calls.known("nvmlDeviceGetMigMode", index, dev.mig_mode())?;
        let mig_enabled = mig_mode.as_ref().is_some_and(|m| m.current == 1);
        let memory = self.calls.known("nvmlDeviceGetMemoryInfo_v2", index, dev.memory_info())?;
        let compute_mode = self.calls.known("nvmlDeviceGetComputeMode", index, dev.compute_mode())?.map(|m| match m {
            nvml_wrapper::enum_wrappers::device::ComputeMode::Prohibited => ComputeMode::Prohibited,
            nvml_wrapper::enum_wrappers::device::ComputeMode::ExclusiveProcess => ComputeMode::ExclusiveProcess,
            _ => ComputeMode::Default,
        });
        let mut card = Card {
            index,
            uuid: self.calls.known("nvmlDeviceGetUUID", index, dev.uuid())?,
            model: name,
            // NVML is NVIDIA's library: every card it reads is NVIDIA's.
            vendor: Some(crate::model::Vendor::Nvidia),
            memory_total_mib: memory.as_ref().map(|m| m.total / MIB),
            memory_used_mib: memory.as_ref().map(|m| m.used / MIB),
            // NVML has no utilisation for MIG; never show 0 for unknown.
            utilization_pct: if mig_enabled {
                None
            } else {
                self.calls
                    .known("nvmlDeviceGetUtilizationRates", index, dev.utilization_rates())?
                    .map(|u| f64::from(u.gpu))
            },
            temperature_c: self
                .calls
                .known("nvmlDeviceGetTemperature", index, dev.temperature(TemperatureSensor::Gpu))?
                .map(f64::from),
            power_w: self
                .calls
                .known("nvmlDeviceGetPowerUsage", index, dev.power_usage())?
                .map(|mw| f64::from(mw) / 1000.0),
            power_limit_w: self
                .calls
                .known("nvmlDeviceGetEnforcedPowerLimit", index, dev.enforced_power_limit())?
                .map(|mw| f64::from(mw) / 1000.0),
            compute_mode,
            draining: compute_mode == Some(ComputeMode::Prohibited),
            ..Card::default()
        };
        card.sm_clock_mhz = self.calls.known("nvmlDeviceGetClockInfo", index, dev.clock_info(Clock::SM))?;
        card.memory_clock_mhz = self.calls.known("nvmlDeviceGetClockInfo", index, dev.clock_info(Clock::Memory))?;
        card.pci_bus_id = self.calls.known("nvmlDeviceGetPciInfo_v3", index, dev.pci_info())?.map(|p| p.bus_id);
        card.health.ecc_volatile_uncorrected = self.calls.known(
            "nvmlDeviceGetTotalEccErrors",
            index,
            dev.total_ecc_errors(MemoryError::Uncorrected, EccCounter::Volatile),
        )?;
        card.health.last_xid = self.last.get(&index).and_then(|c| c.health.last_xid);
        self.mig_error = None;
        card.mig = MigState {
            enabled: mig_enabled,
            pending: mig_mode.as_ref().map(|m| m.pending == 1),
            instances: if mig_enabled { self.instances(index, dev, &card.model)? } else { Vec::new() },
            error: None,
            placements: crate::model::Placements::Known,
        };
        card.mig.error = self.mig_error.take();
        if slow || !self.processes.contains_key(&index) {
            self.read_processes(index, dev, mig_enabled)?;
        }
        let (readable, list) = self.processes.get(&index).cloned().unwrap_or_default();
        card.processes = list;
        card.sharing = sharing_of(&card.processes, readable);
        Ok(card)
    }

    /// Read the card's compute processes and MPS clients (none on a MIG card) and keep them
    /// for `index`, with whether the compute processes could be read.
    fn read_processes(&mut self, index: u32, dev: &Device<'n>, mig_enabled: bool) -> Result<(), NvmlError> {
        let compute =
            self.calls.known("nvmlDeviceGetComputeRunningProcesses_v3", index, dev.running_compute_processes())?;
        // MPS clients (Volta and newer; MPS never runs on a MIG card).
        let clients = if mig_enabled {
            None
        } else {
            self.calls.known(
                "nvmlDeviceGetMPSComputeRunningProcesses_v3",
                index,
                dev.mps_running_compute_processes(),
            )?
        };
        let process = |p: nvml_wrapper::struct_wrappers::device::ProcessInfo, mps: bool| Process {
            pid: p.pid,
            name: procfs::name(p.pid),
            user: procfs::uid(p.pid).and_then(|u| self.users.get(&u).cloned()),
            used_mib: match p.used_gpu_memory {
                UsedGpuMemory::Used(b) => Some(b / MIB),
                UsedGpuMemory::Unavailable => None,
            },
            gi_id: p.gpu_instance_id,
            mps,
        };
        let mut list: Vec<Process> =
            clients.clone().unwrap_or_default().into_iter().map(|p| process(p, true)).collect();
        for p in compute.clone().unwrap_or_default() {
            if !list.iter().any(|x| x.pid == p.pid) {
                list.push(process(p, false));
            }
        }
        self.processes.insert(index, (compute.is_some(), list));
        Ok(())
    }

    fn instances(&mut self, index: u32, dev: &Device<'n>, model_name: &str) -> Result<Vec<MigInstance>, NvmlError> {
        let raw = ffi::gpu_instances(self.nvml, dev);
        self.calls.note("nvmlDeviceGetGpuInstances", Some(index), &raw);
        let raw = match raw {
            Ok(r) => r,
            Err(NvmlError::GpuLost) => return Err(NvmlError::GpuLost),
            Err(e) => {
                self.mig_error = Some(format!("cannot list MIG instances: {e} (listing needs root)"));
                return Ok(Vec::new());
            }
        };
        // Memory in use per GPU instance, from the MIG devices (one per compute instance).
        let mut used: HashMap<u32, u64> = HashMap::new();
        let mig_devices = dev.mig_device_count();
        self.calls.note("nvmlDeviceGetMaxMigDeviceCount", Some(index), &mig_devices);
        for j in 0..mig_devices.unwrap_or(0) {
            let md = dev.mig_device_by_index(j);
            self.calls.note("nvmlDeviceGetMigDeviceHandleByIndex", Some(index), &md);
            let Ok(md) = md else { continue };
            let (Ok(gi), Ok(mem)) = (ffi::gpu_instance_id(self.nvml, &md), md.memory_info()) else { continue };
            let e = used.entry(gi).or_default();
            *e = (*e).max(mem.used / MIB);
        }
        let catalog = crate::model::mig::lookup(model_name);
        let activity: HashMap<u32, f64> =
            raw.iter().filter_map(|g| self.gpm_util(index, dev, g.id).map(|u| (g.id, u))).collect();
        // Instances destroyed since: forget their samples.
        self.gpm.retain(|(card, gi), _| *card != index || raw.iter().any(|g| g.id == *gi));
        Ok(raw
            .into_iter()
            .map(|g| {
                let profile = profile_name(catalog, &g);
                MigInstance {
                    gi_id: g.id,
                    profile: profile.clone(),
                    start: u8::try_from(g.start).unwrap_or(u8::MAX),
                    size: u8::try_from(g.size).unwrap_or(0),
                    compute_instances: g
                        .compute_instances
                        .iter()
                        .map(|&(id, slices)| ComputeInstance { ci_id: id, profile: format!("{slices}c.{profile}") })
                        .collect(),
                    memory_total_mib: Some(g.memory_mib),
                    memory_used_mib: used.get(&g.id).copied(),
                    utilization_pct: activity.get(&g.id).copied(),
                    workloads: Vec::new(),
                }
            })
            .collect())
    }
}

/// A GPU instance's profile name: the catalog's for its NVML profile enum (the executor maps
/// names back the same way), else made from its compute slices and memory.
pub(crate) fn profile_name(model: Option<&crate::model::mig::GpuModel>, g: &ffi::GpuInstance) -> String {
    model
        .and_then(|m| m.profiles.iter().find(|p| p.nvml_enum_value == g.profile_enum))
        .map(|p| p.name.clone())
        .unwrap_or_else(|| format!("{}g.{}gb", g.compute_slices, (g.memory_mib as f64 / 1024.0).round()))
}

/// The MPS server's process name, as the MPS control daemon starts it.
pub const MPS_SERVER: &str = "nvidia-cuda-mps-server";
/// The MPS control daemon (`nvidia-cuda-mps-control -d`).
pub const MPS_CONTROL: &str = "nvidia-cuda-mps-control";

/// What a card's process lists say of its sharing: CUDA contexts (every process but the MPS
/// server, whose clients are counted instead) and whether an MPS server serves it. Unknown
/// where the compute list could not be read.
fn sharing_of(processes: &[Process], readable: bool) -> crate::model::Sharing {
    if !readable {
        return crate::model::Sharing::default();
    }
    let server = |p: &Process| p.name.as_deref() == Some(MPS_SERVER);
    let contexts = processes.iter().filter(|p| !server(p)).count();
    crate::model::Sharing {
        contexts: Some(u32::try_from(contexts).unwrap_or(u32::MAX)),
        // Only a sighting is news: no server now says nothing of the node's configuration.
        mps_server: processes.iter().any(|p| p.mps || server(p)).then_some(true),
        origin: Some("NVML process lists".into()),
        ..crate::model::Sharing::default()
    }
}

/// Run the NVML source on its own thread until the receiver goes away. A library that cannot
/// be loaded is reported and retried with a capped backoff.
pub fn spawn(name: String, lib: Option<String>, interval: Duration, tx: mpsc::Sender<SourceUpdate>) {
    std::thread::spawn(move || {
        let mut failures = 0;
        loop {
            match open(lib.as_deref()) {
                Ok(nvml) => {
                    failures = 0;
                    let mut c = Collector::new(&nvml);
                    loop {
                        let result = c.collect();
                        let failed = result.is_err();
                        let update =
                            SourceUpdate { source: name.clone(), kind: SourceKind::Nvml, at: Utc::now(), result };
                        if tx.blocking_send(update).is_err() {
                            return;
                        }
                        if failed {
                            break;
                        }
                        std::thread::sleep(interval);
                    }
                }
                Err(reason) => {
                    let err = SourceError { message: reason.to_string(), fatal: true, unanswered: false };
                    let update =
                        SourceUpdate { source: name.clone(), kind: SourceKind::Nvml, at: Utc::now(), result: Err(err) };
                    if tx.blocking_send(update).is_err() {
                        return;
                    }
                }
            }
            failures += 1;
            std::thread::sleep(backoff(interval, failures, Duration::from_secs(60)));
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(pid: u32, name: Option<&str>, mps: bool) -> Process {
        Process { pid, name: name.map(str::to_string), mps, ..Process::default() }
    }

    #[test]
    fn contexts_count_clients_not_the_mps_server() {
        let mps = [p(10, Some(MPS_SERVER), false), p(11, Some("python"), true), p(12, None, true)];
        let s = sharing_of(&mps, true);
        assert_eq!((s.contexts, s.mps_server), (Some(2), Some(true)));
        let ts = [p(1, Some("python"), false), p(2, Some("tritonserver"), false)];
        let s = sharing_of(&ts, true);
        assert_eq!((s.contexts, s.mps_server), (Some(2), None));
        assert_eq!(sharing_of(&[], false), crate::model::Sharing::default(), "an unreadable list is unknown, not 0");
    }
}
