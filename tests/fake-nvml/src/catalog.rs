//! The MIG reference data (tessera's data/mig-profiles.json), parsed once: models and their GPU
//! instance profiles with placements and counts.

use std::sync::OnceLock;

use serde::Deserialize;

const MIG_PROFILES_JSON: &str = include_str!("../../../data/mig-profiles.json");

/// The parts of mig-profiles.json the fake driver needs; other fields are ignored.
#[derive(Debug, Deserialize)]
pub struct Catalog {
    pub models: Vec<Model>,
}

#[derive(Debug, Deserialize)]
pub struct Model {
    pub name: String,
    /// Memory slices of the whole GPU (8; A30: 4).
    pub memory_slices: u32,
    /// Compute slices of the whole GPU (7; A30: 4): also the most MIG devices it can have.
    pub compute_slices: u32,
    #[serde(default)]
    pub pci_device_ids: Vec<String>,
    pub profiles: Vec<Profile>,
}

#[derive(Debug, Deserialize)]
pub struct Profile {
    /// "3g.40gb", "1g.10gb+me".
    pub name: String,
    /// The device-specific profile id that create / placement calls take.
    pub profile_id: u32,
    /// The NVML_GPU_INSTANCE_PROFILE_* value nvmlDeviceGetGpuInstanceProfileInfo takes.
    pub nvml_enum_value: u32,
    pub compute_slices: u32,
    pub memory_slices: u32,
    pub memory_mib: Option<u64>,
    pub nominal_gb: u64,
    pub max_count: u32,
    pub placements: Vec<Placement>,
    #[serde(default)]
    pub attributes: Vec<String>,
    pub sm_count: Option<u32>,
    pub copy_engines: Option<u32>,
    #[serde(default)]
    pub media: Media,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub struct Placement {
    pub start: u32,
    pub size: u32,
}

/// Media engines of a profile; unknown counts are null and read as 0.
#[derive(Debug, Default, Deserialize)]
pub struct Media {
    pub nvdec: Option<u32>,
    pub nvenc: Option<u32>,
    pub nvjpg: Option<u32>,
    pub ofa: Option<u32>,
}

impl Profile {
    /// Memory of an instance of this profile in MiB (`nominal_gb * 1024` where NVIDIA gives no figure).
    pub fn memory_mib(&self) -> u64 {
        self.memory_mib.unwrap_or(self.nominal_gb * 1024)
    }

    /// Whether this is a media-extension (+me) profile, of which a GPU holds at most one.
    pub fn is_me(&self) -> bool {
        self.attributes.iter().any(|a| a == "me")
    }
}

impl Model {
    pub fn profile_by_id(&self, profile_id: u32) -> Option<&Profile> {
        self.profiles.iter().find(|p| p.profile_id == profile_id)
    }

    pub fn profile_by_enum(&self, nvml_enum: u32) -> Option<&Profile> {
        self.profiles.iter().find(|p| p.nvml_enum_value == nvml_enum)
    }

    pub fn profile_by_name(&self, name: &str) -> Option<&Profile> {
        self.profiles.iter().find(|p| p.name == name)
    }

    /// The first PCI device id listed for the model ("0x20B210DE"), as NVML's pciDeviceId.
    pub fn default_pci_device_id(&self) -> u32 {
        self.pci_device_ids
            .first()
            .and_then(|s| u32::from_str_radix(s.trim_start_matches("0x").trim_start_matches("0X"), 16).ok())
            .unwrap_or(0)
    }
}

/// The parsed catalog, or the parse error (which makes every init fail).
pub fn catalog() -> Result<&'static Catalog, String> {
    static CATALOG: OnceLock<Result<Catalog, String>> = OnceLock::new();
    CATALOG
        .get_or_init(|| serde_json::from_str(MIG_PROFILES_JSON).map_err(|e| format!("data/mig-profiles.json: {e}")))
        .as_ref()
        .map_err(Clone::clone)
}

/// The model named `name` ("A100-80GB").
pub fn model(name: &str) -> Result<&'static Model, String> {
    catalog()?.models.iter().find(|m| m.name == name).ok_or_else(|| format!("unknown mig_model {name:?}"))
}
