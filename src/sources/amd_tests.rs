use super::Amd;
use crate::model::{Card, SharingMode, Vendor};
use crate::sources::allsmi::AllSmi;
use crate::sources::dcgm::Dcgm;
use crate::sources::series::{self, MapStats, Mapped, NodeName};

fn fixture(name: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/amd").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn map(text: &str) -> Mapped {
    series::map(text, &NodeName::Label, &[&Amd])
}

fn card<'m>(m: &'m Mapped, node: &str, index: u32) -> &'m Card {
    let n = m.nodes.iter().find(|n| n.name == node).unwrap_or_else(|| panic!("no node {node}"));
    n.cards.iter().find(|c| c.index == index).unwrap_or_else(|| panic!("no card {node}/{index}"))
}

#[test]
fn spx_cards_with_their_readings_holders_and_partition_mode() {
    let m = map(&fixture("mi300x-spx-constructed.prom"));
    // gpu_nodes_total names no card: skipped without a word; nothing else is off.
    assert_eq!(m.stats, MapStats { parse: m.stats.parse.clone(), ..MapStats::default() });
    assert_eq!((m.stats.parse.bad_lines, m.stats.parse.bad_values), (0, 0));
    assert_eq!(m.nodes.len(), 1);
    assert_eq!(m.nodes[0].cards.len(), 2);
    let c = card(&m, "mi300x-a", 0);
    assert_eq!(c.model, "MI300X");
    assert_eq!(c.vendor, Some(Vendor::Amd));
    assert_eq!(c.serial.as_deref(), Some("692251001124"));
    assert_eq!(c.uuid.as_deref(), Some("5cff74a1-0000-1000-80e5-41f5a2c3e1b0"));
    assert_eq!(c.utilization_pct, Some(87.0));
    assert_eq!((c.memory_used_mib, c.memory_total_mib), (Some(151_234), Some(196_592)));
    assert_eq!(c.power_w, Some(612.0), "gpu_power_usage; gpu_package_power is not read twice");
    assert_eq!(c.temperature_c, Some(71.0), "the junction (hotspot) temperature on MI3xx");
    assert_eq!(c.health.ecc_volatile_uncorrected, Some(0));
    assert!(!c.mig.enabled, "a partition mode is never MIG");
    assert_eq!(c.sharing_mode(), Some(SharingMode::Partitioned));
    assert_eq!(c.sharing_text(true), "SPX NPS1");
    let idle = card(&m, "mi300x-a", 1);
    assert_eq!((idle.utilization_pct, idle.power_w, idle.temperature_c), (Some(0.0), Some(141.0), Some(38.0)));
    // One holder: the pod on GPU 0; GPU 1's empty holder labels are none.
    assert_eq!(m.holders.len(), 1);
    let h = &m.holders[0];
    assert_eq!((h.node.as_str(), h.index, h.gi_id), ("mi300x-a", 0, None));
    assert_eq!((h.namespace.as_deref(), h.pod.as_deref()), (Some("research"), Some("llama-train-0")));
    assert_eq!((h.container.as_deref(), h.hpc_job.as_deref()), (Some("trainer"), None));
}

#[test]
fn cpx_partitions_are_cards_of_their_own_without_the_physical_gpus_activity_and_power() {
    let m = map(&fixture("mi300x-cpx-constructed.prom"));
    assert_eq!(m.stats, MapStats { parse: m.stats.parse.clone(), ..MapStats::default() });
    let cards = &m.nodes[0].cards;
    assert_eq!(cards.len(), 8);
    for c in cards {
        assert_eq!(c.serial.as_deref(), Some("692251002311"), "one physical card's serial on each partition");
        assert_eq!((c.sharing_mode(), c.sharing_text(false).as_str()), (Some(SharingMode::Partitioned), "CPX NPS4"));
        assert!(!c.mig.enabled && c.mig.instances.is_empty());
        assert_eq!(c.uuid, None, "gpu_uuid is optional and not sent here");
        assert_eq!(c.memory_total_mib, Some(24_574));
        // Activity and power are the physical GPU's, sent on partition 0: no partition's own.
        assert_eq!((c.utilization_pct, c.power_w), (None, None), "card {}", c.index);
    }
    assert_eq!(card(&m, "mi300x-b", 0).temperature_c, Some(66.0));
    assert_eq!(card(&m, "mi300x-b", 1).temperature_c, None, "sent on partition 0 only");
    assert_eq!(card(&m, "mi300x-b", 2).memory_used_mib, Some(20_480));
    let held: Vec<(u32, Option<&str>)> = m.holders.iter().map(|h| (h.index, h.hpc_job.as_deref())).collect();
    assert_eq!(held, (0..4).map(|i| (i, Some("81234"))).collect::<Vec<_>>());
}

#[test]
fn detected_per_sample_beside_other_exporters() {
    let text = format!(
        "{}DCGM_FI_DEV_GPU_UTIL{{gpu=\"0\",UUID=\"GPU-n\",Hostname=\"nv-1\"}} 40\nall_smi_gpu_utilization{{gpu_index=\"0\",instance=\"smi-1:9090\"}} 5\n",
        fixture("mi300x-spx-constructed.prom")
    );
    let m = series::map(&text, &NodeName::Label, &[&AllSmi, &Amd, &Dcgm]);
    assert_eq!(m.stats.unknown_gpu, 0);
    let names: Vec<&str> = m.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["mi300x-a", "nv-1", "smi-1"]);
    assert_eq!(card(&m, "mi300x-a", 0).vendor, Some(Vendor::Amd));
    assert_eq!(card(&m, "nv-1", 0).vendor, Some(Vendor::Nvidia));
    assert_eq!(card(&m, "smi-1", 0).vendor, None, "all-smi reads several vendors' cards");
    assert_eq!(card(&m, "nv-1", 0).sharing_mode(), None, "no partition labels, no partition mode");
}

#[test]
fn odd_rows_are_counted_never_fatal() {
    let text = "gpu_gfx_activity{gpu_id=\"0\",hostname=\"h\",gpu_compute_partition_type=\"none\",gpu_memory_partition_type=\"none\"} NaN\n\
                gpu_used_vram{hostname=\"h\"} 5\n\
                gpu_total_vram{gpu_id=\"x\",hostname=\"h\"} 5\n\
                gpu_nodes_total{hostname=\"h\"} 1\n\
                gpu_power_usage{gpu_id=\"0\",hostname=\"h\"} 300\n";
    let m = map(text);
    assert_eq!(m.stats.parse.bad_values, 1, "NaN in a field that is read");
    assert_eq!(m.stats.unknown_gpu, 2, "no gpu_id, and one that is not a number");
    let c = card(&m, "h", 0);
    assert_eq!((c.utilization_pct, c.power_w), (None, Some(300.0)));
    assert_eq!(c.sharing_mode(), None, "`none` is an unknown partition mode");
    assert_eq!(c.vendor, Some(Vendor::Amd));
}

proptest::proptest! {
    #[test]
    fn any_text_maps_without_panicking(text in "(gpu_[a-z_]{0,12}(\\{[a-z_]{0,8}=\"[a-z0-9]{0,4}\"\\})? [0-9.eNa+-]{0,6}\n){0,8}") {
        let _ = map(&text);
    }
}
