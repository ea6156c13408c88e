//! What Dynamic Resource Allocation says of a card: where its allocation comes from, the DRA
//! pool and device it is published as, the device taints on it (the driver's and rules'), the
//! MIG profiles its counter set can still place (DynamicMIG), and the problems of its
//! published objects. Pure data; the Kubernetes source fills it.

use serde::{Deserialize, Serialize};

/// Who hands a card out to workloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Allocation {
    /// A device plugin's extended resources (`nvidia.com/gpu`, `nvidia.com/mig-…`).
    DevicePlugin,
    /// Dynamic Resource Allocation: ResourceSlices and ResourceClaims.
    Dra,
}

impl Allocation {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::DevicePlugin => "device_plugin",
            Self::Dra => "dra",
        }
    }
}

/// A taint on one of the card's devices.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceTaint {
    /// The device it is on (`gpu-7`, `gpu-7-mig-1g10gb-19-0`).
    pub device: String,
    pub key: String,
    pub value: Option<String>,
    /// `None`, `NoSchedule` or `NoExecute`, as the API writes it.
    pub effect: String,
    /// The DeviceTaintRule that put it there; `None`: the driver published it in the slice.
    pub rule: Option<String>,
    /// The rule carries tessera's label (`MANAGED_BY`): tessera made it, and its undrain
    /// deletes it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tessera: bool,
}

/// The label every DeviceTaintRule tessera creates carries; its undrain deletes only rules
/// with it.
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "tessera");

/// Whether the API server serves DeviceTaintRules (resource.k8s.io/v1beta2), which a drain
/// through DRA creates.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaintRules {
    /// Not known (a recording from before, a source that did not say).
    #[default]
    Unknown,
    Served,
    /// API discovery does not list them: Kubernetes before 1.36, or the DRADeviceTaintRules
    /// feature gate off, or resource.k8s.io/v1beta2 not enabled.
    NotServed,
}

impl TaintRules {
    fn is_unknown(&self) -> bool {
        *self == Self::Unknown
    }
}

impl DeviceTaint {
    /// Keeps new claims off the device (`NoSchedule`), or also evicts (`NoExecute`).
    pub fn blocks(&self) -> bool {
        matches!(self.effect.as_str(), "NoSchedule" | "NoExecute")
    }
}

/// A card as Dynamic Resource Allocation publishes it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DraCard {
    /// The driver and pool (`gpu.nvidia.com`, the node's name) its devices are published in.
    pub driver: String,
    pub pool: String,
    /// The whole-GPU device's name where one is published (`gpu-5`); a card under static MIG
    /// publishes only its instances.
    pub device: Option<String>,
    /// Devices published for this card: the whole GPU and every MIG placement (DynamicMIG),
    /// or its instances (static MIG).
    pub devices: u32,
    /// The names of those devices (whole GPU first, then the MIG devices by name), at most
    /// `MAX_DEVICE_NAMES`: a drain taints each by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub device_names: Vec<String>,
    /// Whether DeviceTaintRules can be created for it (a drain needs them).
    #[serde(default, skip_serializing_if = "TaintRules::is_unknown")]
    pub taint_rules: TaintRules,
    /// DynamicMIG: the driver lays the card out per claim from a shared counter set.
    pub dynamic: bool,
    /// The counter set its devices consume (`gpu-0-counter-set`), under DynamicMIG.
    pub counter_set: Option<String>,
    /// DynamicMIG: the MIG profiles the counter set can still place, smallest first; `None`
    /// where that is unknown (a problem below says why).
    pub placeable: Option<Vec<String>>,
    pub taints: Vec<DeviceTaint>,
    /// What is wrong with what was published about this card, in words.
    pub problems: Vec<String>,
    /// The claims could not be read: what holds the card is unknown, so it is never free.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub holders_unknown: bool,
}

/// At most this many device names are kept per card (the API's limit of devices in one
/// slice; an H100 under DynamicMIG publishes 26).
pub const MAX_DEVICE_NAMES: usize = 128;

/// At most this many problems are kept per card: the rest are counted in the last.
pub const MAX_PROBLEMS: usize = 8;

impl DraCard {
    /// Record a problem, bounded.
    pub fn problem(&mut self, text: impl Into<String>) {
        match self.problems.len() {
            n if n < MAX_PROBLEMS => self.problems.push(text.into()),
            n if n == MAX_PROBLEMS => self.problems.push("more problems not shown".into()),
            _ => {}
        }
    }

    /// Every device of the card by name, where all are known (`None` when more were published
    /// than kept, or none are named).
    pub fn all_device_names(&self) -> Option<&[String]> {
        let complete = !self.device_names.is_empty() && self.device_names.len() == self.devices as usize;
        complete.then_some(self.device_names.as_slice())
    }

    /// The DeviceTaintRules tessera made that taint this card's devices, by name, each once.
    pub fn tessera_rules(&self) -> Vec<&str> {
        let mut v: Vec<&str> = self.taints.iter().filter(|t| t.tessera).filter_map(|t| t.rule.as_deref()).collect();
        v.sort_unstable();
        v.dedup();
        v
    }
}
