//! The MIG profile catalog, read from the embedded `data/mig-profiles.json`, and model lookup
//! from the names NVML, DCGM, Kubernetes labels and Slurm use.

use std::sync::OnceLock;

use serde::Deserialize;

const DATA: &str = include_str!("../../../data/mig-profiles.json");

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize, serde::Serialize)]
pub struct Placement {
    pub start: u8,
    pub size: u8,
}

impl Placement {
    pub fn mask(self) -> u16 {
        slice_mask(self.start, self.size)
    }
}

/// A bit mask of `size` slices starting at `start`; out-of-range slices are dropped.
pub fn slice_mask(start: u8, size: u8) -> u16 {
    let mut m = 0u16;
    for s in start..start.saturating_add(size) {
        if s < 16 {
            m |= 1 << s;
        }
    }
    m
}

#[derive(Debug, Clone, Deserialize)]
pub struct Profile {
    pub name: String,
    /// The id `nvidia-smi mig -lgip` shows; device-specific, read it live where possible.
    pub profile_id: u32,
    /// The value passed to `nvmlDeviceGetGpuInstanceProfileInfo`.
    pub nvml_enum_value: u32,
    pub compute_slices: u8,
    pub memory_slices: u8,
    /// Exact MiB where an NVIDIA source gives it.
    pub memory_mib: Option<u64>,
    /// The GB in the name ("3g.40gb" -> 40).
    pub nominal_gb: u64,
    pub max_count: u8,
    pub placements: Vec<Placement>,
    #[serde(default)]
    attributes: Vec<String>,
    #[serde(default)]
    pub unverified: bool,
}

impl Profile {
    /// A `+me` profile: media extensions, one per card.
    pub fn has_media_extensions(&self) -> bool {
        self.attributes.iter().any(|a| a == "me")
    }

    /// Memory to plan with: the exact MiB where known, else the nominal GB in MiB.
    pub fn planning_mib(&self) -> u64 {
        self.memory_mib.unwrap_or(self.nominal_gb * 1024)
    }

    pub fn allows(&self, p: Placement) -> bool {
        self.placements.contains(&p)
    }
}

#[derive(Debug, Clone, Deserialize)]
pub struct GpuModel {
    pub name: String,
    #[serde(default)]
    pub aliases: Vec<String>,
    #[serde(default)]
    pub nvml_name_patterns: Vec<String>,
    #[serde(default)]
    pub pci_device_ids: Vec<String>,
    pub max_instances: u8,
    pub memory_slices: u8,
    pub compute_slices: u8,
    pub profiles: Vec<Profile>,
    #[serde(default)]
    pub valid_layouts: Vec<Vec<LayoutEntry>>,
}

/// One instance of a layout as the data file writes it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct LayoutEntry {
    pub profile: String,
    pub start: u8,
    pub size: u8,
}

impl GpuModel {
    pub fn profile(&self, name: &str) -> Option<&Profile> {
        let name = name.trim().to_ascii_lowercase();
        let name = name.strip_prefix("mig ").unwrap_or(&name);
        self.profiles.iter().find(|p| p.name == name)
    }

    /// The whole card's nominal memory in GB (the largest profile's name).
    pub fn nominal_gb(&self) -> u64 {
        self.profiles.iter().map(|p| p.nominal_gb).max().unwrap_or(0)
    }

    pub fn all_slices(&self) -> u16 {
        slice_mask(0, self.memory_slices)
    }
}

#[derive(Debug, Default)]
pub struct Catalog {
    pub models: Vec<GpuModel>,
    /// Set when the embedded data failed to parse; a test keeps this `None`.
    pub load_error: Option<String>,
}

#[derive(Deserialize)]
struct File {
    models: Vec<GpuModel>,
}

pub fn catalog() -> &'static Catalog {
    static CATALOG: OnceLock<Catalog> = OnceLock::new();
    CATALOG.get_or_init(|| match serde_json::from_str::<File>(DATA) {
        Ok(f) => Catalog { models: f.models, load_error: None },
        Err(e) => Catalog { models: Vec::new(), load_error: Some(format!("embedded MIG catalog: {e}")) },
    })
}

/// Upper-case words: "NVIDIA-H100-80GB-HBM3" and "nvidia h100 80gb hbm3" both become
/// ["NVIDIA", "H100", "80GB", "HBM3"].
/// Cards without MIG that sharing is common on (time-slicing, MPS): the short name tessera shows
/// for them. MIG does not apply, so an unknown-model warning would mislead. From NVIDIA's MIG
/// user guide (supported GPUs: A30, A100, H100, H200, B200 and later; none of these).
const WITHOUT_MIG: &[&str] =
    &["L4", "L40S", "L40", "L20", "T4", "A10G", "A10", "A16", "A2", "A40", "V100", "P100", "P40", "P4"];

/// The short name of a known card without MIG ("NVIDIA L4" -> "L4", "Tesla-T4" -> "T4").
pub fn without_mig(name: &str) -> Option<&'static str> {
    let w = words(name);
    WITHOUT_MIG.iter().copied().find(|m| w.iter().any(|x| x == m))
}

/// A card's catalog model name, the short name of a known card without MIG (`L4`), or the
/// reported name when tessera does not know it.
pub fn model_key(model: &str) -> String {
    lookup(model)
        .map_or_else(|| without_mig(model).map_or_else(|| model.to_string(), str::to_string), |m| m.name.clone())
}

fn words(s: &str) -> Vec<String> {
    s.split(|c: char| !c.is_ascii_alphanumeric() && c != '.')
        .filter(|w| !w.is_empty())
        .map(str::to_ascii_uppercase)
        .collect()
}

fn contains_seq(hay: &[String], needle: &[String]) -> bool {
    !needle.is_empty() && hay.windows(needle.len()).any(|w| w == needle)
}

/// Families and memory sizes, for names the catalog's patterns do not spell out
/// ("A800-SXM4-80GB", "H100-PCIE-80GB", the Kubernetes product label "NVIDIA-H200-141GB-HBM3e").
const FAMILY_RULES: &[(&[&str], Option<u64>, &str)] = &[
    (&["A30"], None, "A30-24GB"),
    (&["A100", "A800"], Some(40), "A100-SXM4-40GB"),
    (&["A100", "A800"], Some(80), "A100-80GB"),
    (&["H100", "H800"], Some(80), "H100-80GB"),
    (&["H100", "H800"], Some(94), "H100-94GB"),
    (&["H100", "H800"], Some(96), "H100-96GB (GH200)"),
    (&["H20"], Some(96), "H100-96GB (GH200)"),
    (&["H20"], Some(141), "H200-141GB"),
    (&["GH200"], Some(144), "GH200-144GB-HBM3e"),
    (&["GH200"], Some(96), "H100-96GB (GH200)"),
    (&["GH200"], None, "H100-96GB (GH200)"),
    (&["H200"], None, "H200-141GB"),
    (&["GB200"], None, "GB200-186GB"),
    (&["B200"], None, "B200-180GB"),
    (&["H100", "H800"], None, "H100-80GB"),
];

/// The catalog model for a GPU name as NVML, DCGM (`modelName`), Kubernetes
/// (`nvidia.com/gpu.product`, with or without a `-MIG-<profile>` suffix) or Slurm reports it.
/// `None` for a model tessera does not know (MIG planning is then off for that card).
pub fn lookup(name: &str) -> Option<&'static GpuModel> {
    // Few distinct names reach here, but it runs per card per frame: remember the answers
    // (with a fast hash: SipHash of the name was most of a lookup at 32,768 cards).
    thread_local! {
        static CACHE: std::cell::RefCell<foldhash::HashMap<String, Option<usize>>> = Default::default();
    }
    let models = &catalog().models;
    if let Some(hit) = CACHE.with(|c| c.borrow().get(name).copied()) {
        return hit.and_then(|i| models.get(i));
    }
    let found = lookup_uncached(name);
    let index = found.and_then(|m| models.iter().position(|x| std::ptr::eq(x, m)));
    CACHE.with(|c| {
        let mut c = c.borrow_mut();
        if c.len() > 4096 {
            c.clear();
        }
        c.insert(name.to_string(), index);
    });
    found
}

/// Catalog models a name that is none may have meant: those with a word starting with each of
/// its words (`H10` -> the H100s, `a100 40` -> A100-SXM4-40GB), best first; empty when
/// nothing is near.
pub fn suggest(name: &str) -> Vec<&'static str> {
    let asked = words(name);
    if asked.is_empty() {
        return Vec::new();
    }
    catalog()
        .models
        .iter()
        .filter(|m| {
            let mine: Vec<String> = std::iter::once(&m.name).chain(&m.aliases).flat_map(|n| words(n)).collect();
            asked.iter().all(|a| mine.iter().any(|w| w.starts_with(a.as_str())))
        })
        .map(|m| m.name.as_str())
        .collect()
}

fn lookup_uncached(name: &str) -> Option<&'static GpuModel> {
    let mut w = words(name);
    // Kubernetes single strategy: "A100-SXM4-40GB-MIG-1g.5gb" names the parent card first.
    if let Some(i) = w.iter().position(|x| x == "MIG") {
        w.truncate(i);
    }
    if w.first().is_some_and(|x| x == "NVIDIA") {
        w.remove(0);
    }
    if w.is_empty() {
        return None;
    }
    let cat = catalog();
    let by_name = |n: &str| cat.models.iter().find(|m| m.name == n);

    // Exact names, aliases and NVML patterns, longest first so "H100 NVL" beats "H100".
    let mut best: Option<(usize, &GpuModel)> = None;
    for m in &cat.models {
        for p in std::iter::once(&m.name).chain(&m.aliases).chain(&m.nvml_name_patterns) {
            let pw = words(p);
            if contains_seq(&w, &pw) && best.is_none_or(|(n, _)| pw.len() > n) {
                best = Some((pw.len(), m));
            }
        }
    }
    // A pattern of one word ("H200", "GH200") may still lose to a memory-specific rule.
    if let Some((n, m)) = best
        && n > 1
    {
        return Some(m);
    }
    let memory = w.iter().find_map(|x| x.strip_suffix("GB").and_then(|g| g.parse::<u64>().ok()));
    for (families, mem, model) in FAMILY_RULES {
        if w.iter().any(|x| families.contains(&x.as_str())) && (mem.is_none() || *mem == memory) {
            return by_name(model);
        }
    }
    best.map(|(_, m)| m)
}

/// The catalog model for a PCI device id such as `0x233010DE` (any case, with or without `0x`).
pub fn by_pci_device_id(id: &str) -> Option<&'static GpuModel> {
    let norm = |s: &str| s.trim().trim_start_matches("0x").trim_start_matches("0X").to_ascii_uppercase();
    let id = norm(id);
    catalog().models.iter().find(|m| m.pci_device_ids.iter().any(|p| norm(p) == id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slice_masks() {
        assert_eq!(slice_mask(0, 8), 0xff);
        assert_eq!(slice_mask(4, 2), 0b0011_0000);
        assert_eq!(slice_mask(15, 4), 1 << 15);
    }

    #[test]
    fn cards_without_mig_are_named_not_flagged() {
        assert_eq!(without_mig("NVIDIA L4"), Some("L4"));
        assert_eq!(without_mig("Tesla-T4"), Some("T4"));
        assert_eq!(without_mig("NVIDIA-A10G"), Some("A10G"));
        assert_eq!(without_mig("NVIDIA H100 80GB HBM3"), None);
        assert!(lookup("NVIDIA L4").is_none(), "no MIG profiles for an L4");
    }

    fn model_of(name: &str) -> Option<&'static str> {
        lookup(name).map(|m| m.name.as_str())
    }

    #[test]
    fn the_embedded_catalog_loads() {
        assert_eq!(catalog().load_error, None);
        assert_eq!(catalog().models.len(), 10);
    }

    #[test]
    fn names_from_every_source_resolve() {
        let cases = [
            ("NVIDIA A100-SXM4-80GB", "A100-80GB"),
            ("NVIDIA A100 80GB PCIe", "A100-80GB"),
            ("A800-SXM4-80GB", "A100-80GB"),
            ("A100-SXM4-40GB", "A100-SXM4-40GB"),
            ("NVIDIA-A100-SXM4-40GB", "A100-SXM4-40GB"),
            ("A100-PCIE-40GB-MIG-1g.5gb", "A100-SXM4-40GB"),
            ("NVIDIA H100 80GB HBM3", "H100-80GB"),
            ("NVIDIA-H100-80GB-HBM3", "H100-80GB"),
            ("NVIDIA H100 PCIe", "H100-80GB"),
            ("NVIDIA H100 NVL", "H100-94GB"),
            ("NVIDIA H200", "H200-141GB"),
            ("NVIDIA H200 141GB HBM3e", "H200-141GB"),
            ("NVIDIA-H200-MIG-1g.18gb", "H200-141GB"),
            ("NVIDIA A30", "A30-24GB"),
            ("NVIDIA GH200 144G HBM3e", "GH200-144GB-HBM3e"),
            ("NVIDIA GB200", "GB200-186GB"),
            ("NVIDIA B200", "B200-180GB"),
            ("H100-80GB", "H100-80GB"),
        ];
        for (name, want) in cases {
            assert_eq!(model_of(name), Some(want), "{name}");
        }
    }

    /// A near miss gets the models it may have meant; nonsense gets none.
    #[test]
    fn near_misses_are_suggested() {
        assert_eq!(suggest("H10"), ["H100-80GB", "H100-94GB", "H100-96GB (GH200)"]);
        assert_eq!(suggest("a100 40"), ["A100-SXM4-40GB"]);
        assert!(suggest("xyz").is_empty());
        assert!(suggest("").is_empty());
    }

    #[test]
    fn unknown_models_are_none() {
        for name in ["Tesla T4", "NVIDIA GeForce RTX 4090", "", "NVIDIA", "MIG"] {
            assert_eq!(model_of(name), None, "{name}");
        }
    }

    #[test]
    fn pci_ids_resolve() {
        assert_eq!(by_pci_device_id("0x233010DE").map(|m| m.name.as_str()), Some("H100-80GB"));
        assert_eq!(by_pci_device_id("20b210de").map(|m| m.name.as_str()), Some("A100-80GB"));
        assert!(by_pci_device_id("0xdeadbeef").is_none());
    }

    #[test]
    fn documented_facts_per_model() {
        let a100 = lookup("A100-SXM4-40GB").map(|m| m.profile("1g.5gb").map(|p| (p.profile_id, p.memory_mib)));
        assert_eq!(a100, Some(Some((19, Some(4864)))));
        let a30 = lookup("A30").into_iter().next();
        assert_eq!(a30.map(|m| (m.memory_slices, m.compute_slices)), Some((4, 4)));
        for m in &catalog().models {
            assert!(m.profiles.iter().all(|p| !p.placements.is_empty()), "{}", m.name);
            assert!(m.profiles.iter().all(|p| p.placements.iter().all(|pl| pl.size == p.memory_slices)), "{}", m.name);
            assert!(m.profiles.iter().any(|p| p.has_media_extensions()), "{}", m.name);
            let whole = m.profiles.iter().find(|p| p.memory_slices == m.memory_slices);
            assert!(whole.is_some(), "{} has a full-card profile", m.name);
        }
        let h100 = lookup("NVIDIA H100 80GB HBM3")
            .and_then(|m| m.profile("MIG 3g.40gb"))
            .map(|p| (p.profile_id, p.memory_mib));
        assert_eq!(h100, Some((9, Some(40448))));
    }
}
