//! `nvidia-smi -q -x`, read into the fields the device check compares: the XML of driver 450
//! and later (nvsmi_device_v10 to v12: `power_readings` or `gpu_power_readings`, ECC as
//! `sram_`/`dram_` counters or as `double_bit` totals). `N/A`, `[Not Supported]` and the like
//! read as unknown.

/// The longest text kept from the file (a driver version, a name, a UUID are tens of
/// characters); a longer one is cut, ending in `…`.
pub const MAX_TEXT: usize = 256;
/// The most `<gpu>` elements a file may hold: one host's cards (16 on the largest boards).
pub const MAX_GPUS: usize = 256;
/// The largest file read: a card takes about 27 KB (`MAX_GPUS` of them 7 MB).
pub const MAX_XML: u64 = 8 << 20;
/// The most XML nodes parsed: a card has about 1,000 (elements and their texts).
const MAX_NODES: u32 = 600_000;

/// One `<gpu>` as nvidia-smi reports it; `None` is a value nvidia-smi did not give.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SmiGpu {
    /// The `id` attribute: the PCI bus id.
    pub bus_id: Option<String>,
    pub name: Option<String>,
    pub uuid: Option<String>,
    pub memory_total_mib: Option<f64>,
    pub memory_used_mib: Option<f64>,
    pub utilization_pct: Option<f64>,
    pub temperature_c: Option<f64>,
    /// The power draw: `power_draw` (older files) or the 1 s average of newer ones.
    pub power_w: Option<f64>,
    /// The instantaneous draw where the file has it apart (what NVML gives on GA100 and older).
    pub power_instant_w: Option<f64>,
    pub power_limit_w: Option<f64>,
    pub ecc_volatile_uncorrected: Option<f64>,
    /// Lower-case, as tessera writes it: `default`, `exclusive_process`, `prohibited`.
    pub compute_mode: Option<String>,
    pub mig_enabled: Option<bool>,
    pub mig_pending: Option<bool>,
    /// GPU instances (id, memory total in MiB) from the MIG devices, one per instance.
    pub mig_instances: Vec<(u32, Option<f64>)>,
    /// Compute processes (type C or M+C): pid and used memory in MiB.
    pub processes: Vec<(u32, Option<f64>)>,
}

/// What the file says besides its cards.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SmiLog {
    pub driver_version: Option<String>,
    pub gpus: Vec<SmiGpu>,
}

/// Why a text is not `nvidia-smi -q -x` output.
#[derive(Debug, thiserror::Error)]
pub enum SmiError {
    #[error("not XML: {0}")]
    NotXml(#[from] roxmltree::Error),
    #[error("not nvidia-smi -q -x output: the root element is <{0}>")]
    Root(String),
    #[error(
        "not nvidia-smi -q -x output: an internal DTD subset or an entity declaration (nvidia-smi only names an external DTD; entities can expand without bound)"
    )]
    Entities,
    #[error("{0} GPUs in one file: more than a host has (at most {MAX_GPUS} are read)")]
    TooMany(usize),
}

/// Parse the XML; an error says what is wrong with it.
pub fn parse(text: &str) -> Result<SmiLog, SmiError> {
    // nvidia-smi writes a DOCTYPE naming its external DTD; nothing is fetched from it. An
    // internal subset is where entities are declared (one used 60,000 times took 13.7 GB):
    // refused before parsing.
    if internal_subset(text) || text.contains("<!ENTITY") {
        return Err(SmiError::Entities);
    }
    let options = roxmltree::ParsingOptions { allow_dtd: true, nodes_limit: MAX_NODES, ..Default::default() };
    let doc = roxmltree::Document::parse_with_options(text, options)?;
    let root = doc.root_element();
    if root.tag_name().name() != "nvidia_smi_log" {
        return Err(SmiError::Root(cut(root.tag_name().name())));
    }
    let n = children(root, "gpu").count();
    if n > MAX_GPUS {
        return Err(SmiError::TooMany(n));
    }
    Ok(SmiLog { driver_version: text_of(root, &["driver_version"]), gpus: children(root, "gpu").map(gpu).collect() })
}

/// Whether the DOCTYPE has an internal subset (`<!DOCTYPE x [ ... ]>`).
fn internal_subset(text: &str) -> bool {
    let Some(at) = text.find("<!DOCTYPE") else { return false };
    let rest = &text[at..];
    rest[..rest.find('>').unwrap_or(rest.len())].contains('[')
}

/// `t`, cut to `MAX_TEXT` characters and `…` when longer.
pub fn cut(t: &str) -> String {
    match t.char_indices().nth(MAX_TEXT) {
        Some((end, _)) => format!("{}…", &t[..end]),
        None => t.to_string(),
    }
}

fn children<'a, 'i>(n: roxmltree::Node<'a, 'i>, name: &'static str) -> impl Iterator<Item = roxmltree::Node<'a, 'i>> {
    n.children().filter(move |c| c.is_element() && c.tag_name().name() == name)
}

fn find<'a, 'i>(n: roxmltree::Node<'a, 'i>, path: &[&str]) -> Option<roxmltree::Node<'a, 'i>> {
    let mut at = n;
    for step in path {
        at = at.children().find(|c| c.is_element() && c.tag_name().name() == *step)?;
    }
    Some(at)
}

/// The text at `path`, trimmed; `None` when absent, empty or one of nvidia-smi's unknowns.
fn text_of(n: roxmltree::Node, path: &[&str]) -> Option<String> {
    let t = find(n, path)?.text()?.trim();
    let unknown = t.is_empty()
        || t.eq_ignore_ascii_case("N/A")
        || t.starts_with('[')
        || t.eq_ignore_ascii_case("Unknown Error")
        || t.eq_ignore_ascii_case("None");
    (!unknown).then(|| cut(t))
}

/// The number a value starts with: "67.03 W" -> 67.03, "81920 MiB" -> 81920, "27 C" -> 27.
fn number(s: &str) -> Option<f64> {
    let end = s.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-')).unwrap_or(s.len());
    s[..end].parse::<f64>().ok().filter(|v| v.is_finite())
}

fn num(n: roxmltree::Node, path: &[&str]) -> Option<f64> {
    text_of(n, path).as_deref().and_then(number)
}

fn enabled(n: roxmltree::Node, path: &[&str]) -> Option<bool> {
    match text_of(n, path)?.to_ascii_lowercase().as_str() {
        "enabled" => Some(true),
        "disabled" => Some(false),
        _ => None,
    }
}

/// The first power value found under either parent nvidia-smi has used, leaf by leaf.
fn power(g: roxmltree::Node, leaves: &[&str]) -> Option<f64> {
    leaves.iter().find_map(|leaf| ["gpu_power_readings", "power_readings"].iter().find_map(|p| num(g, &[p, leaf])))
}

fn gpu(g: roxmltree::Node) -> SmiGpu {
    SmiGpu {
        bus_id: g.attribute("id").map(cut).or_else(|| text_of(g, &["pci", "pci_bus_id"])),
        name: text_of(g, &["product_name"]),
        uuid: text_of(g, &["uuid"]),
        memory_total_mib: num(g, &["fb_memory_usage", "total"]),
        memory_used_mib: num(g, &["fb_memory_usage", "used"]),
        utilization_pct: num(g, &["utilization", "gpu_util"]),
        temperature_c: num(g, &["temperature", "gpu_temp"]),
        power_w: power(g, &["power_draw", "average_power_draw"]),
        power_instant_w: power(g, &["instant_power_draw"]),
        // NVML's enforced limit: named so in older files, the current limit in v12.
        power_limit_w: power(g, &["enforced_power_limit", "current_power_limit", "power_limit"]),
        ecc_volatile_uncorrected: ecc(g),
        compute_mode: text_of(g, &["compute_mode"]).map(|m| m.to_ascii_lowercase()),
        mig_enabled: enabled(g, &["mig_mode", "current_mig"]),
        mig_pending: enabled(g, &["mig_mode", "pending_mig"]),
        mig_instances: mig(g),
        processes: processes(g),
    }
}

/// Volatile uncorrectable ECC errors: SRAM and DRAM (v12; SRAM split into parity and SECDED on
/// newer drivers), or the double-bit total of older files.
fn ecc(g: roxmltree::Node) -> Option<f64> {
    let v = find(g, &["ecc_errors", "volatile"])?;
    let sram = num(v, &["sram_uncorrectable"]).or_else(|| {
        let parts = [num(v, &["sram_uncorrectable_parity"]), num(v, &["sram_uncorrectable_secded"])];
        parts.iter().any(Option::is_some).then(|| parts.iter().flatten().sum())
    });
    let dram = num(v, &["dram_uncorrectable"]);
    if sram.is_some() || dram.is_some() {
        return Some(sram.unwrap_or(0.0) + dram.unwrap_or(0.0));
    }
    num(v, &["double_bit", "total"])
}

/// GPU instances from the MIG devices (one per compute instance): each id once, with the
/// largest memory total its devices report.
fn mig(g: roxmltree::Node) -> Vec<(u32, Option<f64>)> {
    let Some(list) = find(g, &["mig_devices"]) else { return Vec::new() };
    let mut out: Vec<(u32, Option<f64>)> = Vec::new();
    for d in children(list, "mig_device") {
        let Some(id) = num(d, &["gpu_instance_id"]).and_then(|v| u32::try_from(v as i64).ok()) else { continue };
        let total = num(d, &["fb_memory_usage", "total"]);
        match out.iter_mut().find(|(i, _)| *i == id) {
            Some((_, t)) => {
                *t = match (*t, total) {
                    (Some(a), Some(b)) => Some(a.max(b)),
                    (a, b) => a.or(b),
                }
            }
            None => out.push((id, total)),
        }
    }
    out.sort_by_key(|(i, _)| *i);
    out
}

fn processes(g: roxmltree::Node) -> Vec<(u32, Option<f64>)> {
    let Some(list) = find(g, &["processes"]) else { return Vec::new() };
    let mut out: Vec<(u32, Option<f64>)> = children(list, "process_info")
        .filter(|p| text_of(*p, &["type"]).is_none_or(|t| t.contains('C')))
        .filter_map(|p| {
            let pid = num(p, &["pid"]).and_then(|v| u32::try_from(v as i64).ok())?;
            Some((pid, num(p, &["used_memory"])))
        })
        .collect();
    out.sort_by_key(|(p, _)| *p);
    out.dedup_by_key(|(p, _)| *p);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> SmiLog {
        let path = format!("{}/tests/fixtures/nvidia-smi/{name}", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        parse(&text).unwrap_or_else(|e| panic!("{name}: {e}"))
    }

    #[test]
    fn a_real_mig_capture_reads_with_its_instances() {
        // Driver 535, DTD v12, A100-SXM4-80GB in MIG mode with four 1g.20gb devices.
        let log = fixture("nvidia-smi-q-x.a100-sxm4-80gb-mig-4gi.driver535.xml");
        assert_eq!(log.driver_version.as_deref(), Some("535.54.03"));
        assert_eq!(log.gpus.len(), 1, "attached_gpus says 4, the file holds one <gpu>");
        let g = &log.gpus[0];
        assert_eq!(g.name.as_deref(), Some("NVIDIA A100-SXM4-80GB"));
        assert_eq!(g.uuid.as_deref(), Some("GPU-513536b6-7d19-9063-b049-1e69664bb298"));
        assert_eq!(g.bus_id.as_deref(), Some("00000000:01:00.0"));
        assert_eq!((g.memory_total_mib, g.memory_used_mib), (Some(81920.0), Some(50.0)));
        assert_eq!(g.utilization_pct, None, "MIG: no utilisation");
        assert_eq!((g.temperature_c, g.power_w, g.power_limit_w), (Some(27.0), Some(67.03), Some(500.0)));
        assert_eq!(g.ecc_volatile_uncorrected, Some(0.0));
        assert_eq!(g.compute_mode.as_deref(), Some("default"));
        assert_eq!((g.mig_enabled, g.mig_pending), (Some(true), Some(true)));
        let ids: Vec<u32> = g.mig_instances.iter().map(|(i, _)| *i).collect();
        assert_eq!(ids, [3, 4, 5, 6]);
        assert!(g.mig_instances.iter().all(|(_, t)| *t == Some(19968.0)));
    }

    #[test]
    fn a_real_driver_580_capture_reads() {
        // Driver 580, DTD v13, an idle H200 without MIG, captured by the device check (the
        // serial and UUID replaced); NVML agreed with it on every compared field.
        let log = fixture("nvidia-smi-q-x.h200-nonmig.driver580.xml");
        assert_eq!(log.driver_version.as_deref(), Some("580.159.04"));
        let g = &log.gpus[0];
        assert_eq!(g.name.as_deref(), Some("NVIDIA H200"));
        assert_eq!((g.memory_total_mib, g.memory_used_mib), (Some(143771.0), Some(0.0)));
        assert_eq!((g.utilization_pct, g.temperature_c, g.power_limit_w), (Some(0.0), Some(36.0), Some(700.0)));
        assert!(g.power_w.is_some_and(|w| (70.0..90.0).contains(&w)), "{:?}", g.power_w);
        assert_eq!(g.ecc_volatile_uncorrected, Some(0.0));
        assert_eq!(g.compute_mode.as_deref(), Some("default"));
        assert_eq!((g.mig_enabled, g.mig_pending), (Some(false), Some(false)));
        assert!(g.processes.is_empty() && g.mig_instances.is_empty());
    }

    #[test]
    fn older_files_and_unknowns_read_as_they_are() {
        // Driver 510: `power_readings`, volatile ECC all N/A.
        let g = fixture("nvidia-smi-q-x.a100-sxm4-40gb-mig.driver510.xml").gpus.remove(0);
        assert_eq!(g.power_w, Some(66.92));
        assert_eq!(g.ecc_volatile_uncorrected, None, "N/A is unknown, not 0");
        // A T4 without MIG: graphics processes are not compute processes.
        let g = fixture("nvidia-smi-q-x.tesla-t4-nonmig.xml").gpus.remove(0);
        assert_eq!(g.mig_enabled, None);
        assert_eq!(g.utilization_pct, Some(0.0));
        assert_eq!(g.processes, vec![(5762, Some(1005.0))]);
    }

    #[test]
    fn what_is_not_nvidia_smi_output_is_refused() {
        assert!(parse("<html></html>").is_err_and(|e| e.to_string().contains("root element is <html>")));
        assert!(parse("nvidia-smi: command failed").is_err_and(|e| e.to_string().starts_with("not XML")));
        let log = parse(
            "<nvidia_smi_log><gpu id=\"x\"><power_readings><power_draw>[Not Supported]</power_draw></power_readings></gpu></nvidia_smi_log>",
        );
        assert_eq!(log.map(|l| l.gpus[0].power_w).map_err(|e| e.to_string()), Ok(None));
    }

    /// An entity expanded 60,000 times passed 13.7 GB: nvidia-smi's files only name an
    /// external DTD, so any internal subset or entity declaration is refused unread.
    #[test]
    fn an_internal_subset_or_an_entity_is_refused() {
        let bomb = format!(
            "<?xml version=\"1.0\"?><!DOCTYPE nvidia_smi_log [<!ENTITY a \"{}\">]><nvidia_smi_log><driver_version>{}</driver_version></nvidia_smi_log>",
            "x".repeat(1000),
            "&a;".repeat(60)
        );
        let e = parse(&bomb).map(|l| l.driver_version.map(|d| d.len())).map_err(|e| e.to_string());
        assert!(e.as_ref().is_err_and(|e| e.contains("internal DTD subset")), "{e:?}");
        let subset = "<!DOCTYPE nvidia_smi_log [ ]><nvidia_smi_log></nvidia_smi_log>";
        assert!(parse(subset).is_err(), "an empty internal subset is refused too");
        let real = "<?xml version=\"1.0\" ?>\n<!DOCTYPE nvidia_smi_log SYSTEM \"nvsmi_device_v12.dtd\">\n<nvidia_smi_log></nvidia_smi_log>";
        assert!(parse(real).is_ok(), "an external DTD is what real files name");
    }

    /// A 1 MB driver version was read and printed whole: texts are cut to `MAX_TEXT`.
    #[test]
    fn long_texts_are_cut() {
        let log = parse(&format!(
            "<nvidia_smi_log><driver_version>{}</driver_version><gpu id=\"{}\"><uuid>GPU-1</uuid></gpu></nvidia_smi_log>",
            "9".repeat(1 << 20),
            "b".repeat(5000)
        ))
        .unwrap_or_else(|e| panic!("{e}"));
        let d = log.driver_version.unwrap_or_default();
        assert!(d.chars().count() <= MAX_TEXT + 1 && d.ends_with('…'), "{} chars", d.len());
        assert!(log.gpus[0].bus_id.as_ref().is_some_and(|b| b.chars().count() <= MAX_TEXT + 1));
    }

    /// More GPUs than a host has are refused, not read.
    #[test]
    fn more_gpus_than_a_host_has_are_refused() {
        let gpus = "<gpu id=\"x\"></gpu>".repeat(MAX_GPUS + 1);
        let e = parse(&format!("<nvidia_smi_log>{gpus}</nvidia_smi_log>")).map(|l| l.gpus.len());
        assert!(e.as_ref().is_err_and(|e| e.to_string().contains("GPUs")), "{e:?}");
        let gpus = "<gpu id=\"x\"></gpu>".repeat(MAX_GPUS);
        assert_eq!(
            parse(&format!("<nvidia_smi_log>{gpus}</nvidia_smi_log>")).map(|l| l.gpus.len()).ok(),
            Some(MAX_GPUS)
        );
    }
}
