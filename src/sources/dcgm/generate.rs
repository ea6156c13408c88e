//! A generator of realistic dcgm-exporter text, for benchmarks and scale tests.

use std::fmt::Write as _;

/// Where a family's series appear: on whole cards only, on whole cards and once per GPU
/// instance with the parent's value (device-wide), or on whole cards and per instance with the
/// instance's own value.
#[derive(Clone, Copy, PartialEq)]
enum Scope {
    Whole,
    Device,
    Instance,
}

/// The families `generate` writes, in the exporter's order (DCGM field id), with TYPE and HELP
/// as the current default counters and the profiling list give them.
const FAMILIES: &[(&str, &str, &str, Scope)] = &[
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).", Scope::Device),
    ("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz).", Scope::Device),
    ("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C).", Scope::Device),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", Scope::Device),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", Scope::Device),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "Total energy consumption since boot (in mJ).", Scope::Device),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries.", Scope::Device),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", Scope::Whole),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %).", Scope::Whole),
    ("DCGM_FI_DEV_ENC_UTIL", "gauge", "Encoder utilization (in %).", Scope::Whole),
    ("DCGM_FI_DEV_DEC_UTIL", "gauge", "Decoder utilization (in %).", Scope::Whole),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered.", Scope::Device),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).", Scope::Instance),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).", Scope::Instance),
    ("DCGM_FI_DEV_FB_RESERVED", "gauge", "Framebuffer memory reserved (in MiB).", Scope::Instance),
    ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter", "Total number of double-bit volatile ECC errors.", Scope::Device),
    (
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
        "counter",
        "Number of remapped rows for uncorrectable errors",
        Scope::Whole,
    ),
    (
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
        "counter",
        "Number of remapped rows for correctable errors",
        Scope::Whole,
    ),
    ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed", Scope::Whole),
    (
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
        "counter",
        "Total number of NVLink bandwidth counters for all lanes.",
        Scope::Device,
    ),
    ("DCGM_FI_DEV_VGPU_LICENSE_STATUS", "gauge", "vGPU License status", Scope::Device),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Ratio of time the graphics engine is active.", Scope::Instance),
    ("DCGM_FI_PROF_SM_ACTIVE", "gauge", "The ratio of cycles an SM has at least 1 warp assigned.", Scope::Instance),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge", "Ratio of cycles the tensor (HMMA) pipe is active.", Scope::Instance),
    (
        "DCGM_FI_PROF_DRAM_ACTIVE",
        "gauge",
        "Ratio of cycles the device memory interface is active sending or receiving data.",
        Scope::Instance,
    ),
    (
        "DCGM_FI_PROF_PCIE_TX_BYTES",
        "gauge",
        "The rate of data transmitted over the PCIe bus - including both protocol headers and data payloads - in bytes per second.",
        Scope::Whole,
    ),
    (
        "DCGM_FI_PROF_PCIE_RX_BYTES",
        "gauge",
        "The rate of data received over the PCIe bus - including both protocol headers and data payloads - in bytes per second.",
        Scope::Whole,
    ),
];

/// A GPU model as `generate` writes it: modelName, memory (MiB), TDP (W), max SM and memory
/// clocks (MHz), and its MIG profiles for 7, 4, 3, 2 and 1 compute slices.
struct GenModel {
    name: &'static str,
    memory_mib: u64,
    tdp_w: f64,
    sm_clock: u32,
    mem_clock: u32,
    profiles: [&'static str; 5],
}

const GEN_MODELS: [GenModel; 3] = [
    GenModel {
        name: "NVIDIA A100-SXM4-80GB",
        memory_mib: 81920,
        tdp_w: 400.0,
        sm_clock: 1410,
        mem_clock: 1593,
        profiles: ["7g.80gb", "4g.40gb", "3g.40gb", "2g.20gb", "1g.10gb"],
    },
    GenModel {
        name: "NVIDIA H100 80GB HBM3",
        memory_mib: 81559,
        tdp_w: 700.0,
        sm_clock: 1980,
        mem_clock: 2619,
        profiles: ["7g.80gb", "4g.40gb", "3g.40gb", "2g.20gb", "1g.10gb"],
    },
    GenModel {
        name: "NVIDIA H200",
        memory_mib: 143771,
        tdp_w: 700.0,
        sm_clock: 1980,
        mem_clock: 3201,
        profiles: ["7g.141gb", "4g.71gb", "3g.71gb", "2g.35gb", "1g.18gb"],
    },
];

/// MIG layouts as (profile position in `GenModel::profiles`, GPU instance id), as NVML numbers
/// the instances of these layouts.
const GEN_LAYOUTS: [&[(usize, u32)]; 3] = [&[(0, 0)], &[(1, 1), (2, 2)], &[(2, 1), (3, 5), (4, 13)]];

/// PCI bus numbers of an 8-GPU HGX board.
const GEN_BUSES: [u32; 8] = [0x18, 0x2a, 0x3a, 0x5d, 0x9a, 0xab, 0xba, 0xdb];

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// What one generated card or GPU instance reports.
struct GenUnit {
    /// Labels from `gpu` through `pod`, without the braces.
    labels: String,
    util: f64,
    fb_used: u64,
    fb_free: u64,
    fb_reserved: u64,
}

/// Synthetic dcgm-exporter output for benchmarks and tests: `nodes` scrapes of `gpus` cards
/// each, concatenated, with every `mig_every`-th card (counting across nodes; 0 for none) in
/// MIG mode. It is modelled on real output: the full label set in the exporter's order
/// (`gpu`, `UUID`, `pci_bus_id`, `device`, `modelName`, the MIG labels, `Hostname`, the driver
/// version, then `container`, `namespace`, `pod`, empty on idle cards), HELP and TYPE per
/// family, 27 families per whole card, and MIG cards with per-instance series (device-wide
/// values repeated per instance; no utilisation, remapped-row or PCIe-bytes series). Nodes
/// rotate A100-80GB, H100-80GB and H200; MIG cards rotate the layouts 7g, 4g+3g and
/// 3g+2g+1g. The same arguments give the same text. `generate(512, 8, 4)` is about 36 MB and
/// 120k samples (real dcgm-exporter lines run 250 to 350 bytes).
pub fn generate(nodes: usize, gpus: usize, mig_every: usize) -> String {
    let mut out = String::with_capacity(nodes.saturating_mul(gpus).saturating_mul(7_500).min(1 << 30));
    for n in 0..nodes {
        let model = &GEN_MODELS[n % GEN_MODELS.len()];
        let host = format!("gpu-node-{n:03}");
        // Each card: its whole-card unit, or its instances' units (with profile and gi).
        let mut cards: Vec<GenCard> = Vec::with_capacity(gpus);
        for g in 0..gpus {
            cards.push(gen_card(model, &host, n, g, n * gpus + g, mig_every));
        }
        for &(family, kind, help, scope) in FAMILIES {
            let _ = writeln!(out, "# HELP {family} {help}\n# TYPE {family} {kind}");
            for card in &cards {
                if card.mig && scope == Scope::Whole {
                    continue;
                }
                write_series(&mut out, family, model, card);
            }
        }
    }
    out
}

/// One generated card: its index, whether it is in MIG mode, what it (or each of its GPU
/// instances) reports, and the seed its values come from.
struct GenCard {
    g: u32,
    mig: bool,
    units: Vec<GenUnit>,
    seed: u64,
}

/// Where a generated card is and the label text all its series share.
struct GenAt<'m> {
    model: &'m GenModel,
    n: usize,
    g: usize,
    seed: u64,
    /// Labels from `gpu` through `modelName`.
    head: String,
    /// `Hostname` and the driver version.
    tail: String,
}

/// Card `g` of node `n` (number `global` across nodes), named by `host`: in MIG mode where it
/// is a `mig_every`-th card.
fn gen_card(model: &GenModel, host: &str, n: usize, g: usize, global: usize, mig_every: usize) -> GenCard {
    let seed = splitmix(global as u64);
    let uuid = format!(
        "GPU-{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        seed >> 32,
        (seed >> 16) & 0xffff,
        seed & 0xffff,
        splitmix(seed) >> 48,
        splitmix(seed) & 0xffff_ffff_ffff
    );
    let bus = GEN_BUSES[g % GEN_BUSES.len()] + 0x100 * (g / GEN_BUSES.len()) as u32;
    let head = format!(
        "gpu=\"{g}\",UUID=\"{uuid}\",pci_bus_id=\"00000000:{bus:02X}:00.0\",device=\"nvidia{g}\",modelName=\"{}\"",
        model.name
    );
    let tail = format!("Hostname=\"{host}\",DCGM_FI_DRIVER_VERSION=\"550.90.07\"");
    let at = GenAt { model, n, g, seed, head, tail };
    let mig = mig_every > 0 && global % mig_every == mig_every - 1;
    let units = if mig {
        at.mig_units(GEN_LAYOUTS[global / mig_every.max(1) % GEN_LAYOUTS.len()])
    } else {
        vec![at.whole_unit()]
    };
    GenCard { g: g as u32, mig, units, seed }
}

impl GenAt<'_> {
    /// The holder labels of a unit, from its random `r`: empty on a quarter of them, else a
    /// pod named by `what`, the card and the GPU instance `gi`.
    fn holder(&self, r: u64, what: &str, gi: Option<u32>) -> String {
        let (n, g) = (self.n, self.g);
        if r.is_multiple_of(4) {
            "container=\"\",namespace=\"\",pod=\"\"".to_string()
        } else {
            let gi = gi.map(|x| format!("-{x}")).unwrap_or_default();
            format!(
                "container=\"main\",namespace=\"team-{}\",pod=\"{what}-{n}-{g}{gi}-{:05x}\"",
                r % 5,
                (r >> 8) & 0xfffff
            )
        }
    }

    /// The GPU instances of a MIG card in `layout`, each with its share of the card's memory.
    fn mig_units(&self, layout: &[(usize, u32)]) -> Vec<GenUnit> {
        let (model, head, tail) = (self.model, &self.head, &self.tail);
        let mut units = Vec::new();
        for &(p, gi) in layout {
            let profile = model.profiles[p];
            let r = splitmix(self.seed ^ u64::from(gi + 1));
            let mem = crate::model::mig::lookup(model.name)
                .and_then(|m| m.profile(profile))
                .and_then(|p| p.memory_mib)
                .unwrap_or(model.memory_mib / 8);
            let busy = !r.is_multiple_of(4);
            let util = if busy { (r % 1000) as f64 / 1000.0 } else { 0.0 };
            let fb_used = if busy { mem * (20 + r % 75) / 100 } else { 0 };
            units.push(GenUnit {
                labels: format!(
                    "{head},GPU_I_PROFILE=\"{profile}\",GPU_I_ID=\"{gi}\",{tail},{}",
                    self.holder(r, "infer", Some(gi))
                ),
                util,
                fb_used,
                fb_free: mem.saturating_sub(fb_used),
                fb_reserved: 0,
            });
        }
        units
    }

    /// A whole card's one unit, with the driver's reserved memory.
    fn whole_unit(&self) -> GenUnit {
        let (model, seed) = (self.model, self.seed);
        let busy = !seed.is_multiple_of(4);
        let util = if busy { (seed % 1000) as f64 / 1000.0 } else { 0.0 };
        let reserved = model.memory_mib / 160;
        let fb_used = if busy { model.memory_mib * (30 + seed % 65) / 100 } else { 0 };
        GenUnit {
            labels: format!("{},{},{}", self.head, self.tail, self.holder(seed, "train", None)),
            util,
            fb_used,
            fb_free: model.memory_mib.saturating_sub(fb_used + reserved),
            fb_reserved: reserved,
        }
    }
}

/// A card's series of one family: one per unit, device-wide values the same in each.
fn write_series(out: &mut String, family: &str, model: &GenModel, card: &GenCard) {
    let GenCard { g, units, seed, .. } = card;
    // Device-wide values come from the card, the same in every instance's series.
    let card_util = units.iter().map(|u| u.util).sum::<f64>() / units.len().max(1) as f64;
    let temp = 30 + (seed % 11) + (card_util * 45.0) as u64;
    let power = model.tdp_w * (0.15 + 0.8 * card_util);
    for u in units {
        let _ = write!(out, "{family}{{{}}} ", u.labels);
        let r = seed.rotate_left(*g + 7);
        let _ = match family {
            "DCGM_FI_DEV_SM_CLOCK" => {
                writeln!(out, "{}", if card_util > 0.0 { model.sm_clock } else { 210 })
            }
            "DCGM_FI_DEV_MEM_CLOCK" => writeln!(out, "{}", model.mem_clock),
            "DCGM_FI_DEV_MEMORY_TEMP" => writeln!(out, "{}", temp + 6),
            "DCGM_FI_DEV_GPU_TEMP" => writeln!(out, "{temp}"),
            "DCGM_FI_DEV_POWER_USAGE" => writeln!(out, "{power:.6}"),
            "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION" => {
                writeln!(out, "{}", 90_000_000_000 + r % 900_000_000_000)
            }
            "DCGM_FI_DEV_GPU_UTIL" => writeln!(out, "{}", (u.util * 100.0).round()),
            "DCGM_FI_DEV_MEM_COPY_UTIL" => writeln!(out, "{}", (u.util * 40.0).round()),
            "DCGM_FI_DEV_XID_ERRORS" => writeln!(out, "{}", if r % 61 == 0 { 79 } else { 0 }),
            "DCGM_FI_DEV_FB_FREE" => writeln!(out, "{}", u.fb_free),
            "DCGM_FI_DEV_FB_USED" => writeln!(out, "{}", u.fb_used),
            "DCGM_FI_DEV_FB_RESERVED" => writeln!(out, "{}", u.fb_reserved),
            "DCGM_FI_PROF_GR_ENGINE_ACTIVE" => writeln!(out, "{:.6}", u.util),
            "DCGM_FI_PROF_SM_ACTIVE" => writeln!(out, "{:.6}", u.util * 0.9),
            "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE" => writeln!(out, "{:.6}", u.util * 0.6),
            "DCGM_FI_PROF_DRAM_ACTIVE" => writeln!(out, "{:.6}", u.util * 0.45),
            "DCGM_FI_PROF_PCIE_TX_BYTES" | "DCGM_FI_PROF_PCIE_RX_BYTES" => {
                writeln!(out, "{}", (u.util * 2.0e9) as u64 + r % 1_000_000)
            }
            _ => writeln!(out, "0"),
        };
    }
}
