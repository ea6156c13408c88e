//! The JSON scenario file the fake driver serves (path in `FAKE_NVML_SCENARIO`): serde types
//! with their defaults, and reading the file.

use serde::Deserialize;

/// Environment variable naming the scenario file.
pub const SCENARIO_ENV: &str = "FAKE_NVML_SCENARIO";

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    #[serde(default = "default_driver_version")]
    pub driver_version: String,
    #[serde(default)]
    pub cards: Vec<CardSpec>,
    #[serde(default)]
    pub events: Vec<EventSpec>,
    /// After this many successful mutating calls, every further one returns NVML_ERROR_UNKNOWN.
    #[serde(default)]
    pub fail_after_mutations: Option<u32>,
    /// Free text for the fixture's reader; ignored.
    #[serde(default)]
    pub comment: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CardSpec {
    pub name: String,
    /// A model name from data/mig-profiles.json; absent: the card is not MIG capable.
    #[serde(default)]
    pub mig_model: Option<String>,
    /// Default: "GPU-00000000-0000-0000-0000-<index as 12 hex digits>".
    #[serde(default)]
    pub uuid: Option<String>,
    /// "00000000:07:00.0" (a 4-digit domain is accepted). Default: bus = index + 1.
    #[serde(default)]
    pub pci_bus_id: Option<String>,
    /// NVML's pciDeviceId ((device << 16) | vendor). Default: the model's first id, else 0.
    #[serde(default)]
    pub pci_device_id: Option<u32>,
    #[serde(default)]
    pub pci_subsystem_id: u32,
    #[serde(default = "default_memory_total_mib")]
    pub memory_total_mib: u64,
    #[serde(default)]
    pub memory_used_mib: u64,
    #[serde(default)]
    pub utilization_gpu: u32,
    #[serde(default)]
    pub utilization_memory: u32,
    #[serde(default = "default_temperature")]
    pub temperature_c: u32,
    #[serde(default = "default_power")]
    pub power_mw: u32,
    #[serde(default = "default_power_limit")]
    pub power_limit_mw: u32,
    #[serde(default = "default_sm_clock")]
    pub sm_clock_mhz: u32,
    #[serde(default = "default_mem_clock")]
    pub mem_clock_mhz: u32,
    #[serde(default)]
    pub ecc_volatile_uncorrected: u64,
    /// Fan speed in percent; absent: no fan (NOT_SUPPORTED, as passively cooled cards).
    #[serde(default)]
    pub fan_speed_pct: Option<u32>,
    /// "default" | "exclusive_process" | "prohibited".
    #[serde(default = "default_compute_mode")]
    pub compute_mode: String,
    #[serde(default)]
    pub mig_enabled: bool,
    /// Pending MIG mode; default: same as `mig_enabled`.
    #[serde(default)]
    pub mig_pending: Option<bool>,
    #[serde(default)]
    pub instances: Vec<InstanceSpec>,
    #[serde(default)]
    pub processes: Vec<ProcessSpec>,
    /// C function names that return NVML_ERROR_NOT_SUPPORTED for this card.
    #[serde(default)]
    pub not_supported: Vec<String>,
    /// C function names that return NVML_ERROR_NO_PERMISSION for this card (as an unprivileged
    /// process gets for some calls on a real driver).
    #[serde(default)]
    pub no_permission: Vec<String>,
    /// After this many successful nvmlDeviceGetHandleByIndex_v2 calls, the next lookup finds the
    /// card lost and every call with its handles returns GPU_IS_LOST (0: lost from the start).
    #[serde(default)]
    pub lost_after: Option<u64>,
    /// GPM (GPU Performance Monitoring): nvmlGpmQueryDeviceSupport reports the card supported and
    /// GPM samples can be taken on it.
    #[serde(default)]
    pub gpm: bool,
    #[serde(default)]
    pub comment: Option<String>,
}

/// A GPU instance created at load time, with `compute_instances` full-size compute instances.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InstanceSpec {
    /// Profile name of the card's model ("3g.40gb").
    pub profile: String,
    /// Placement start in memory slices; default: the lowest free allowed placement.
    #[serde(default)]
    pub start: Option<u32>,
    #[serde(default = "default_compute_instances")]
    pub compute_instances: u32,
    #[serde(default)]
    pub memory_used_mib: u64,
    /// The GPU instance's GPM graphics utilisation in percent (0 to 100), reported by
    /// nvmlGpmMetricsGet for NVML_GPM_METRIC_GRAPHICS_UTIL between two of its samples.
    #[serde(default)]
    pub gpm_util: f64,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProcessSpec {
    pub pid: u32,
    #[serde(default)]
    pub used_mib: u64,
    /// GPU instance the process runs in (MIG cards); absent: reported as 0xFFFFFFFF.
    #[serde(default)]
    pub gpu_instance_id: Option<u32>,
    /// Compute instance; defaults to 0 when `gpu_instance_id` is set.
    #[serde(default)]
    pub compute_instance_id: Option<u32>,
    /// An MPS client: listed by nvmlDeviceGetMPSComputeRunningProcesses_v3, not by the compute
    /// list (which has the MPS server itself, as on a real card).
    #[serde(default)]
    pub mps: bool,
}

/// An XID error delivered once to an event set on which `card` registered XID events.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventSpec {
    pub card: usize,
    pub xid: u64,
}

fn default_driver_version() -> String {
    "550.54.15".to_owned()
}
fn default_memory_total_mib() -> u64 {
    81920
}
fn default_temperature() -> u32 {
    40
}
fn default_power() -> u32 {
    90_000
}
fn default_power_limit() -> u32 {
    400_000
}
fn default_sm_clock() -> u32 {
    1410
}
fn default_mem_clock() -> u32 {
    1593
}
fn default_compute_mode() -> String {
    "default".to_owned()
}
fn default_compute_instances() -> u32 {
    1
}

impl Scenario {
    pub fn parse(text: &str) -> Result<Self, String> {
        serde_json::from_str(text).map_err(|e| format!("invalid scenario: {e}"))
    }

    /// Reads and parses the file named by `FAKE_NVML_SCENARIO`.
    pub fn from_env() -> Result<Self, String> {
        let path = std::env::var_os(SCENARIO_ENV).ok_or_else(|| format!("{SCENARIO_ENV} is not set"))?;
        let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.to_string_lossy()))?;
        Self::parse(&text).map_err(|e| format!("{}: {e}", path.to_string_lossy()))
    }
}
