//! The fake driver's state, built from a scenario: cards, opaque handle encoding, device queries,
//! event sets, GPM samples and failure injection. Pure Rust without pointers; errors are NVML return codes.

mod events;
mod gpm;
mod handle;
mod mig;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, VecDeque};

use nvml_wrapper_sys::bindings::{
    nvmlComputeMode_enum_NVML_COMPUTEMODE_DEFAULT as COMPUTEMODE_DEFAULT,
    nvmlComputeMode_enum_NVML_COMPUTEMODE_EXCLUSIVE_PROCESS as COMPUTEMODE_EXCLUSIVE_PROCESS,
    nvmlComputeMode_enum_NVML_COMPUTEMODE_EXCLUSIVE_THREAD as COMPUTEMODE_EXCLUSIVE_THREAD,
    nvmlComputeMode_enum_NVML_COMPUTEMODE_PROHIBITED as COMPUTEMODE_PROHIBITED,
    nvmlReturn_enum_NVML_ERROR_DRIVER_NOT_LOADED, nvmlReturn_enum_NVML_ERROR_GPU_IS_LOST,
    nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT, nvmlReturn_enum_NVML_ERROR_NO_PERMISSION,
    nvmlReturn_enum_NVML_ERROR_NOT_SUPPORTED, nvmlReturn_enum_NVML_ERROR_UNKNOWN, nvmlReturn_t,
};

pub use gpm::{GPM_MIN_INTERVAL, GpmMetricInfo, GpmMetricValue, GpmSample, metric_info};
pub use handle::Handle;
pub use mig::{CiProfile, ComputeInstance, GpuInstance};

use crate::catalog::{self, Model};
use crate::scenario::{CardSpec, EventSpec, Scenario};

/// An NVML return code used as an error (never NVML_SUCCESS).
pub type Ret = nvmlReturn_t;
pub type NvmlResult<T> = Result<T, Ret>;

pub const INVALID_ARGUMENT: Ret = nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT;
pub const NOT_SUPPORTED: Ret = nvmlReturn_enum_NVML_ERROR_NOT_SUPPORTED;
pub const UNKNOWN: Ret = nvmlReturn_enum_NVML_ERROR_UNKNOWN;
pub const NO_PERMISSION: Ret = nvmlReturn_enum_NVML_ERROR_NO_PERMISSION;

/// NVML's "no GPU / compute instance" id in process and event records.
pub const NO_ID: u32 = 0xFFFF_FFFF;
/// Handles leave room for this many cards; more are refused.
pub const MAX_CARDS: usize = 256;

/// A resolved device handle: a physical card, or a MIG device (GPU instance, compute instance) on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dev {
    pub card: usize,
    pub mig: Option<(u32, u32)>,
}

#[derive(Debug, Clone)]
pub struct PciInfo {
    pub domain: u32,
    pub bus: u32,
    pub device: u32,
    pub bus_id: String,
    pub bus_id_legacy: String,
    pub device_id: u32,
    pub subsystem_id: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Process {
    pub pid: u32,
    pub used_mib: u64,
    pub gi: u32,
    pub ci: u32,
    /// An MPS client (the MPS list), else a compute context (the compute list).
    pub mps: bool,
}

#[derive(Debug, Clone)]
pub struct Card {
    pub index: usize,
    pub spec: CardSpec,
    pub model: Option<&'static Model>,
    pub uuid: String,
    pub pci: PciInfo,
    pub compute_mode: u32,
    pub mig_enabled: bool,
    pub mig_pending: bool,
    pub gis: BTreeMap<u32, GpuInstance>,
    pub processes: Vec<Process>,
    handle_calls: u64,
    lost: bool,
}

/// Why a scenario could not be loaded: the file itself (init returns DRIVER_NOT_LOADED) or a
/// MIG layout that breaks NVIDIA's rules (init returns UNKNOWN).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoadError {
    Invalid(String),
    Rules(String),
}

impl LoadError {
    pub fn code(&self) -> Ret {
        match self {
            LoadError::Invalid(_) => nvmlReturn_enum_NVML_ERROR_DRIVER_NOT_LOADED,
            LoadError::Rules(_) => UNKNOWN,
        }
    }
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LoadError::Invalid(m) | LoadError::Rules(m) => f.write_str(m),
        }
    }
}

#[derive(Debug)]
pub struct State {
    /// nvmlInit calls not yet matched by nvmlShutdown (NVML reference-counts init).
    pub refs: u32,
    pub driver_version: String,
    pub cards: Vec<Card>,
    events: VecDeque<EventSpec>,
    /// Event set id -> (card -> registered event type mask).
    event_sets: BTreeMap<u32, BTreeMap<usize, u64>>,
    next_event_set: u32,
    /// GPM sample id -> what it recorded (None: allocated, not yet filled).
    gpm_samples: BTreeMap<u32, Option<GpmSample>>,
    next_gpm_sample: u32,
    fail_after_mutations: Option<u32>,
    mutations: u32,
}

fn compute_mode_value(name: &str) -> Option<u32> {
    match name {
        "default" => Some(COMPUTEMODE_DEFAULT),
        "exclusive_process" => Some(COMPUTEMODE_EXCLUSIVE_PROCESS),
        "prohibited" => Some(COMPUTEMODE_PROHIBITED),
        _ => None,
    }
}

/// Parses "00000000:07:00.0" (or a 4-digit domain) into domain, bus and device.
fn parse_bus_id(s: &str) -> Option<(u32, u32, u32)> {
    let mut parts = s.split(':');
    let (domain, bus, rest) = (parts.next()?, parts.next()?, parts.next()?);
    let (device, _function) = rest.split_once('.')?;
    if parts.next().is_some() {
        return None;
    }
    let hex = |x: &str| u32::from_str_radix(x, 16).ok();
    Some((hex(domain)?, hex(bus)?, hex(device)?))
}

/// Whether `func` is listed in `list`, either exactly or by its name without a `_vN` suffix.
fn listed(list: &[String], func: &str) -> bool {
    let base = match func.rsplit_once("_v") {
        Some((base, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => base,
        _ => func,
    };
    list.iter().any(|n| n == func || n == base)
}

impl Card {
    fn new(index: usize, spec: CardSpec) -> Result<Card, LoadError> {
        let invalid = |m: String| LoadError::Invalid(format!("cards[{index}]: {m}"));
        let model = spec.mig_model.as_deref().map(catalog::model).transpose().map_err(invalid)?;
        let bus_id = spec.pci_bus_id.clone().unwrap_or_else(|| format!("00000000:{:02X}:00.0", index + 1));
        let (domain, bus, device) =
            parse_bus_id(&bus_id).ok_or_else(|| invalid(format!("bad pci_bus_id {bus_id:?}")))?;
        let compute_mode = compute_mode_value(&spec.compute_mode)
            .ok_or_else(|| invalid(format!("bad compute_mode {:?}", spec.compute_mode)))?;
        if model.is_none() && (spec.mig_enabled || spec.mig_pending == Some(true)) {
            return Err(invalid("MIG mode set on a card without mig_model".to_owned()));
        }
        if let Some(i) = spec.instances.iter().position(|i| !(0.0..=100.0).contains(&i.gpm_util)) {
            return Err(invalid(format!(
                "instances[{i}]: gpm_util {} is not a percentage",
                spec.instances[i].gpm_util
            )));
        }
        let processes = spec
            .processes
            .iter()
            .map(|p| Process {
                pid: p.pid,
                used_mib: p.used_mib,
                gi: p.gpu_instance_id.unwrap_or(NO_ID),
                ci: p.compute_instance_id.unwrap_or(if p.gpu_instance_id.is_some() { 0 } else { NO_ID }),
                mps: p.mps,
            })
            .collect();
        Ok(Card {
            index,
            model,
            uuid: spec.uuid.clone().unwrap_or_else(|| format!("GPU-00000000-0000-0000-0000-{index:012x}")),
            pci: PciInfo {
                domain,
                bus,
                device,
                bus_id: format!("{domain:08X}:{bus:02X}:{device:02X}.0"),
                bus_id_legacy: format!("{domain:04X}:{bus:02X}:{device:02X}.0"),
                device_id: spec.pci_device_id.unwrap_or_else(|| model.map_or(0, Model::default_pci_device_id)),
                subsystem_id: spec.pci_subsystem_id,
            },
            compute_mode,
            mig_enabled: spec.mig_enabled,
            mig_pending: spec.mig_pending.unwrap_or(spec.mig_enabled),
            gis: BTreeMap::new(),
            processes,
            handle_calls: 0,
            lost: spec.lost_after == Some(0),
            spec,
        })
    }

    /// Lost: `lost_after` 0, or a handle lookup came after `lost_after` successful ones.
    pub fn is_lost(&self) -> bool {
        self.lost
    }
}

impl State {
    pub fn load(scenario: Scenario) -> Result<State, LoadError> {
        if scenario.cards.len() > MAX_CARDS {
            return Err(LoadError::Invalid(format!("more than {MAX_CARDS} cards")));
        }
        if let Some(e) = scenario.events.iter().find(|e| e.card >= scenario.cards.len()) {
            return Err(LoadError::Invalid(format!("event for card {} which does not exist", e.card)));
        }
        let mut cards = Vec::with_capacity(scenario.cards.len());
        for (index, spec) in scenario.cards.into_iter().enumerate() {
            let mut card = Card::new(index, spec)?;
            card.load_instances().map_err(|m| LoadError::Rules(format!("cards[{index}]: {m}")))?;
            cards.push(card);
        }
        Ok(State {
            refs: 1,
            driver_version: scenario.driver_version,
            cards,
            events: scenario.events.into(),
            event_sets: BTreeMap::new(),
            next_event_set: 1,
            gpm_samples: BTreeMap::new(),
            next_gpm_sample: 1,
            fail_after_mutations: scenario.fail_after_mutations,
            mutations: 0,
        })
    }

    pub fn device_count(&self) -> u32 {
        self.cards.len() as u32
    }

    /// nvmlDeviceGetHandleByIndex_v2. After `lost_after` successful lookups of a card, the next
    /// one finds it lost, and from then on every call with its handles returns GPU_IS_LOST; until
    /// then the handles work.
    pub fn handle_by_index(&mut self, index: u32) -> NvmlResult<Handle> {
        let card = self.cards.get_mut(index as usize).ok_or(INVALID_ARGUMENT)?;
        if card.spec.lost_after.is_some_and(|n| card.handle_calls >= n) {
            card.lost = true;
        }
        if card.is_lost() {
            return Err(nvmlReturn_enum_NVML_ERROR_GPU_IS_LOST);
        }
        if listed(&card.spec.not_supported, "nvmlDeviceGetHandleByIndex_v2") {
            return Err(NOT_SUPPORTED);
        }
        card.handle_calls += 1;
        Ok(Handle::Device(card.index))
    }

    /// The card `card`, failing as the C function `func` would for it: lost, or listed in
    /// `not_supported` or `no_permission`.
    pub fn card_for(&self, card: usize, func: &str) -> NvmlResult<&Card> {
        let c = self.cards.get(card).ok_or(INVALID_ARGUMENT)?;
        if c.is_lost() {
            return Err(nvmlReturn_enum_NVML_ERROR_GPU_IS_LOST);
        }
        if listed(&c.spec.not_supported, func) {
            return Err(NOT_SUPPORTED);
        }
        if listed(&c.spec.no_permission, func) {
            return Err(NO_PERMISSION);
        }
        Ok(c)
    }

    /// Resolves a device handle (physical or MIG) passed to the C function `func`.
    pub fn device(&self, raw: usize, func: &str) -> NvmlResult<Dev> {
        let (card, mig) = match Handle::decode(raw) {
            Some(Handle::Device(card)) => (card, None),
            Some(Handle::Mig { card, gi, ci }) => (card, Some((gi, ci))),
            _ => return Err(INVALID_ARGUMENT),
        };
        let c = self.cards.get(card).ok_or(INVALID_ARGUMENT)?;
        if let Some((gi, ci)) = mig {
            c.gis.get(&gi).and_then(|g| g.cis.get(&ci)).ok_or(INVALID_ARGUMENT)?;
        }
        self.card_for(card, func)?;
        Ok(Dev { card, mig })
    }

    /// Resolves a handle that must be a physical card (MIG device handles: NOT_SUPPORTED).
    pub fn physical(&self, raw: usize, func: &str) -> NvmlResult<&Card> {
        let dev = self.device(raw, func)?;
        if dev.mig.is_some() {
            return Err(NOT_SUPPORTED);
        }
        Ok(&self.cards[dev.card])
    }

    /// The GPU instance handle `raw` as (card, GPU instance id).
    pub fn gpu_instance(&self, raw: usize, func: &str) -> NvmlResult<(usize, u32)> {
        let Some(Handle::Gi { card, gi }) = Handle::decode(raw) else { return Err(INVALID_ARGUMENT) };
        self.cards.get(card).and_then(|c| c.gis.get(&gi)).ok_or(INVALID_ARGUMENT)?;
        self.card_for(card, func)?;
        Ok((card, gi))
    }

    /// The compute instance handle `raw` as (card, GPU instance id, compute instance id).
    pub fn compute_instance(&self, raw: usize, func: &str) -> NvmlResult<(usize, u32, u32)> {
        let Some(Handle::Ci { card, gi, ci }) = Handle::decode(raw) else { return Err(INVALID_ARGUMENT) };
        self.cards.get(card).and_then(|c| c.gis.get(&gi)).and_then(|g| g.cis.get(&ci)).ok_or(INVALID_ARGUMENT)?;
        self.card_for(card, func)?;
        Ok((card, gi, ci))
    }

    /// Runs a mutating call: NVML_ERROR_UNKNOWN once `fail_after_mutations` successes are spent;
    /// a success counts towards it.
    pub fn mutate<T>(&mut self, f: impl FnOnce(&mut State) -> NvmlResult<T>) -> NvmlResult<T> {
        if self.fail_after_mutations.is_some_and(|n| self.mutations >= n) {
            return Err(UNKNOWN);
        }
        let out = f(self)?;
        self.mutations += 1;
        Ok(out)
    }

    pub fn set_compute_mode(&mut self, raw: usize, mode: u32) -> NvmlResult<()> {
        let card = self.physical(raw, "nvmlDeviceSetComputeMode")?.index;
        if mode == COMPUTEMODE_EXCLUSIVE_THREAD {
            return Err(NOT_SUPPORTED);
        }
        if ![COMPUTEMODE_DEFAULT, COMPUTEMODE_PROHIBITED, COMPUTEMODE_EXCLUSIVE_PROCESS].contains(&mode) {
            return Err(INVALID_ARGUMENT);
        }
        self.mutate(|s| {
            s.cards[card].compute_mode = mode;
            Ok(())
        })
    }

    /// Memory (total, used) in bytes: the card's, or a MIG device's GPU instance's.
    pub fn memory(&self, dev: Dev) -> (u64, u64) {
        let card = &self.cards[dev.card];
        let (total, used) = match dev.mig.and_then(|(gi, _)| card.gis.get(&gi)) {
            Some(g) => (g.profile.memory_mib(), g.memory_used_mib),
            None => (card.spec.memory_total_mib, card.spec.memory_used_mib),
        };
        (total * 1024 * 1024, used * 1024 * 1024)
    }

    /// Compute processes on the device: all of the card's, or those of one MIG device; `mps`:
    /// the MPS clients instead.
    pub fn processes(&self, dev: Dev, mps: bool) -> Vec<Process> {
        let all = self.cards[dev.card].processes.iter().filter(|p| p.mps == mps);
        match dev.mig {
            None => all.copied().collect(),
            Some((gi, ci)) => all.filter(|p| p.gi == gi && p.ci == ci).copied().collect(),
        }
    }

    /// The device's name: the card's, or "<card name> MIG <profile>" for a MIG device.
    pub fn name(&self, dev: Dev) -> String {
        let card = &self.cards[dev.card];
        match dev.mig.and_then(|(gi, ci)| card.gis.get(&gi).map(|g| g.mig_name(ci))) {
            Some(profile) => format!("{} MIG {profile}", card.spec.name),
            None => card.spec.name.clone(),
        }
    }

    /// The device's UUID: the card's, or "MIG-<card uuid without GPU->-<gi>-<ci>" for a MIG device.
    pub fn uuid(&self, dev: Dev) -> String {
        let card = &self.cards[dev.card];
        match dev.mig {
            Some((gi, ci)) => format!("MIG-{}-{gi}-{ci}", card.uuid.trim_start_matches("GPU-")),
            None => card.uuid.clone(),
        }
    }
}
