use super::AllSmi;
use crate::model::Placements;
use crate::sources::dcgm::Dcgm;
use crate::sources::series::{self, MapStats, Mapped, NodeName};

/// The scrape's mapping with the dialects these samples need (all-smi's, dcgm-exporter's beside it).
fn map(text: &str, node: &NodeName) -> Mapped {
    series::map(text, node, &[&AllSmi, &Dcgm])
}

fn fixture(name: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/allsmi").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn all_smi_api_rows_map_like_dcgm_exporter_ones() {
    let m = map(&fixture("api-0.25.0-from-source.prom"), &NodeName::Label);
    // The host's rows (CPU, memory, disk, processes, energy) are skipped without a word.
    assert_eq!(m.stats, MapStats { parse: m.stats.parse.clone(), ..MapStats::default() });
    assert_eq!(m.stats.parse.bad_lines, 0);
    // ... read no further than their names.
    let host_rows = fixture("api-0.25.0-from-source.prom")
        .lines()
        .filter(|l| l.starts_with("all_smi_") && !l.starts_with("all_smi_gpu_") && !l.starts_with("all_smi_mig_"))
        .count();
    assert!(host_rows > 0);
    assert_eq!(m.stats.parse.skipped, host_rows);
    assert_eq!(m.nodes.len(), 1);
    assert_eq!(m.nodes[0].name, "gpu-node1");
    let cards = &m.nodes[0].cards;
    assert_eq!(cards.len(), 2);
    let c = &cards[0];
    assert_eq!((c.index, c.uuid.as_deref()), (0, Some("GPU-5b7e2c1a-9f0d-4c3e-8a61-2d4f0e9b7c11")));
    assert_eq!(c.model, "NVIDIA H100 80GB HBM3");
    assert_eq!(c.utilization_pct, Some(87.0));
    // Bytes to MiB: 40 GiB used of 85,520,809,984 bytes (81,559 MiB).
    assert_eq!((c.memory_used_mib, c.memory_total_mib), (Some(40_960), Some(81_559)));
    // The limit all-smi sends is the one read at its start: not shown as the current one.
    assert_eq!((c.temperature_c, c.power_w, c.power_limit_w), (Some(61.0), Some(412.337), None));
    assert_eq!(c.sm_clock_mhz, None, "the graphics clock is not shown as the SM clock");
    assert!(!c.mig.enabled);

    let c = &cards[1];
    assert_eq!(c.temperature_c, None, "all-smi writes 0 when the read failed");
    assert_eq!(c.utilization_pct, None, "all-smi's 0 on a MIG card is no reading");
    assert_eq!(c.activity_pct(), None, "instances unknown: activity unknown, not idle");
    assert!(c.mig.enabled, "mig_mode_current=\"1\"");
    assert!(c.mig.instances.is_empty());
    assert_eq!(c.mig.placements, Placements::Unknown);
    assert!(c.mig.error.as_deref().is_some_and(|e| e.contains("instances unknown")), "{:?}", c.mig.error);
    assert!(m.holders.is_empty(), "all-smi names no pods");
}

/// The mock server's MIG rows (`ALL_SMI_MOCK_MIG=1`), in its template's format
/// (`src/mock/templates/mig.rs` at v0.25.0).
const MOCK_MIG: &str = r#"# HELP all_smi_gpu_utilization GPU utilization percentage
# TYPE all_smi_gpu_utilization gauge
all_smi_gpu_utilization{gpu="NVIDIA A100-SXM4-80GB", instance="node-0001", gpu_uuid="3F2A9C1D-7B4E-0A6C-91D2-5E8F3B7A0C44", gpu_index="0"} 45.23
# HELP all_smi_gpu_memory_used_bytes GPU memory used in bytes
# TYPE all_smi_gpu_memory_used_bytes gauge
all_smi_gpu_memory_used_bytes{gpu="NVIDIA A100-SXM4-80GB", instance="node-0001", gpu_uuid="3F2A9C1D-7B4E-0A6C-91D2-5E8F3B7A0C44", gpu_index="0"} 9663676416
# HELP all_smi_gpu_mig_mode NVIDIA MIG mode (1=enabled, 0=disabled) per parent GPU
# TYPE all_smi_gpu_mig_mode gauge
all_smi_gpu_mig_mode{gpu_index="0", gpu_uuid="3F2A9C1D-7B4E-0A6C-91D2-5E8F3B7A0C44", gpu="NVIDIA A100-SXM4-80GB", instance="node-0001", host="node-0001"} 1
# HELP all_smi_mig_instance_utilization_gpu Per-MIG-instance GPU SM utilization percentage (0-100)
# TYPE all_smi_mig_instance_utilization_gpu gauge
all_smi_mig_instance_utilization_gpu{gpu_index="0", gpu_uuid="3F2A9C1D-7B4E-0A6C-91D2-5E8F3B7A0C44", gpu="NVIDIA A100-SXM4-80GB", instance="node-0001", host="node-0001", mig_instance="0", mig_uuid="MIG-mock-0-0", mig_profile="1g.10gb", gpu_instance_id="9", compute_instance_id="0"} 42
all_smi_mig_instance_utilization_gpu{gpu_index="0", gpu_uuid="3F2A9C1D-7B4E-0A6C-91D2-5E8F3B7A0C44", gpu="NVIDIA A100-SXM4-80GB", instance="node-0001", host="node-0001", mig_instance="1", mig_uuid="MIG-mock-0-1", mig_profile="3g.40gb", gpu_instance_id="2", compute_instance_id="0"} 0
all_smi_mig_instance_utilization_gpu{gpu_index="0", gpu_uuid="3F2A9C1D-7B4E-0A6C-91D2-5E8F3B7A0C44", gpu="NVIDIA A100-SXM4-80GB", instance="node-0001", host="node-0001", mig_instance="2", mig_uuid="MIG-mock-0-2", mig_profile="1g.10gb", gpu_instance_id="", compute_instance_id=""} 7
# HELP all_smi_mig_instance_memory_used_bytes Per-MIG-instance framebuffer memory used
# TYPE all_smi_mig_instance_memory_used_bytes gauge
all_smi_mig_instance_memory_used_bytes{gpu_index="0", gpu_uuid="3F2A9C1D-7B4E-0A6C-91D2-5E8F3B7A0C44", gpu="NVIDIA A100-SXM4-80GB", instance="node-0001", host="node-0001", mig_instance="0", mig_uuid="MIG-mock-0-0", mig_profile="1g.10gb", gpu_instance_id="9", compute_instance_id="0"} 4294967296
all_smi_mig_instance_memory_used_bytes{gpu_index="0", gpu_uuid="3F2A9C1D-7B4E-0A6C-91D2-5E8F3B7A0C44", gpu="NVIDIA A100-SXM4-80GB", instance="node-0001", host="node-0001", mig_instance="1", mig_uuid="MIG-mock-0-1", mig_profile="3g.40gb", gpu_instance_id="2", compute_instance_id="0"} 5368709120
# HELP all_smi_mig_instance_memory_total_bytes Per-MIG-instance framebuffer total carve-out
# TYPE all_smi_mig_instance_memory_total_bytes gauge
all_smi_mig_instance_memory_total_bytes{gpu_index="0", gpu_uuid="3F2A9C1D-7B4E-0A6C-91D2-5E8F3B7A0C44", gpu="NVIDIA A100-SXM4-80GB", instance="node-0001", host="node-0001", mig_instance="0", mig_uuid="MIG-mock-0-0", mig_profile="1g.10gb", gpu_instance_id="9", compute_instance_id="0"} 10737418240
all_smi_mig_instance_memory_total_bytes{gpu_index="0", gpu_uuid="3F2A9C1D-7B4E-0A6C-91D2-5E8F3B7A0C44", gpu="NVIDIA A100-SXM4-80GB", instance="node-0001", host="node-0001", mig_instance="1", mig_uuid="MIG-mock-0-1", mig_profile="3g.40gb", gpu_instance_id="2", compute_instance_id="0"} 42949672960
"#;

#[test]
fn mig_instance_rows_become_instances_and_an_unplaceable_row_is_counted() {
    let m = map(MOCK_MIG, &NodeName::Label);
    assert_eq!(m.stats.unknown_gpu, 1, "the row with gpu_instance_id=\"\" cannot be placed");
    let c = &m.nodes[0].cards[0];
    assert!(c.mig.enabled);
    assert_eq!(c.mig.error, None);
    let got: Vec<_> = c
        .mig
        .instances
        .iter()
        .map(|i| (i.gi_id, i.profile.as_str(), i.size, i.memory_used_mib, i.memory_total_mib, i.utilization_pct))
        .collect();
    assert_eq!(
        got,
        vec![
            (2, "3g.40gb", 4, Some(5_120), Some(40_960), Some(0.0)),
            (9, "1g.10gb", 1, Some(4_096), Some(10_240), Some(42.0)),
        ]
    );
    // A MIG card's memory used is its instances' sum, as for dcgm-exporter.
    assert_eq!(c.memory_used_mib, Some(9_216));
}

#[test]
fn a_dcgm_and_an_all_smi_exposition_read_together() {
    // A federating endpoint can serve both: each row is read by its own exporter's rules.
    let dcgm = "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"GPU-d\",Hostname=\"dcgm-host\",modelName=\"NVIDIA A100-SXM4-80GB\"} 55\n";
    let text = format!("{dcgm}{MOCK_MIG}");
    let m = map(&text, &NodeName::Label);
    let names: Vec<_> = m.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["dcgm-host", "node-0001"]);
    assert_eq!(m.nodes[0].cards[0].utilization_pct, Some(55.0));
    // all-smi's `gpu` label is the model name, never read as an index.
    assert_eq!(m.nodes[1].cards[0].model, "NVIDIA A100-SXM4-80GB");
}

#[test]
fn the_mock_servers_capture_maps_every_card_and_instance() {
    let m = map(&fixture("mock-0.25.0-mig.prom"), &NodeName::Label);
    assert_eq!(m.stats.parse.bad_lines, 0, "{:?}", m.stats.parse);
    assert_eq!((m.stats.unknown_gpu, m.stats.duplicates), (0, 0));
    assert_eq!(m.nodes.len(), 1);
    assert_eq!(m.nodes[0].name, "node-0001");
    let cards = &m.nodes[0].cards;
    assert_eq!(cards.len(), 8);
    for c in cards {
        assert_eq!(c.model, "NVIDIA B200 192GB HBM3");
        assert!(c.uuid.is_some());
        assert!(c.mig.enabled, "all_smi_gpu_mig_mode 1");
        let got: Vec<_> = c.mig.instances.iter().map(|i| (i.gi_id, i.profile.as_str(), i.memory_total_mib)).collect();
        assert_eq!(
            got,
            vec![
                (1, "1g.5gb", Some(5_120)),
                (2, "1g.5gb", Some(5_120)),
                (3, "2g.10gb", Some(10_240)),
                (4, "3g.20gb", Some(20_480)),
                (5, "7g.40gb", Some(40_960)),
            ]
        );
        // The instances' memory, not the parent's: a MIG card's used is their sum.
        let sum: u64 = c.mig.instances.iter().filter_map(|i| i.memory_used_mib).sum();
        assert_eq!(c.memory_used_mib, Some(sum));
        assert_eq!(c.memory_total_mib, Some(196_608), "206,158,430,208 bytes");
        assert_eq!(c.utilization_pct, None, "no whole-card use with MIG on");
        assert!(c.mig.instances.iter().all(|i| i.utilization_pct.is_some_and(|u| (0.0..=100.0).contains(&u))));
    }
}

#[test]
fn the_host_is_all_smis_own_name_also_behind_a_federating_prometheus() {
    // Federated: `instance` is the scrape target, all-smi's own value is `exported_instance`.
    let federated = "all_smi_gpu_utilization{gpu=\"NVIDIA H100 80GB HBM3\", instance=\"10.0.0.5:9090\", exported_instance=\"gpu-node7\", gpu_uuid=\"GPU-x\", gpu_index=\"0\"} 50\n";
    let m = map(federated, &NodeName::Label);
    assert_eq!(m.nodes[0].name, "gpu-node7");
    // Without the exporter's name, the target's host, never its port.
    let target = "all_smi_gpu_utilization{gpu=\"NVIDIA H100 80GB HBM3\", instance=\"10.0.0.5:9090\", gpu_uuid=\"GPU-x\", gpu_index=\"0\"} 50\n";
    assert_eq!(map(target, &NodeName::Label).nodes[0].name, "10.0.0.5");
}

#[test]
fn the_live_mig_gauge_wins_over_the_label_read_at_all_smis_start() {
    // all-smi's info labels are read once; MIG was turned off since.
    let text = "all_smi_gpu_info{gpu=\"NVIDIA A100-SXM4-80GB\", instance=\"n\", gpu_uuid=\"GPU-x\", gpu_index=\"0\", mig_mode_current=\"1\"} 1\n\
                all_smi_gpu_mig_mode{gpu_index=\"0\", gpu_uuid=\"GPU-x\", gpu=\"NVIDIA A100-SXM4-80GB\", instance=\"n\", host=\"n\"} 0\n\
                all_smi_gpu_utilization{gpu=\"NVIDIA A100-SXM4-80GB\", instance=\"n\", gpu_uuid=\"GPU-x\", gpu_index=\"0\"} 30\n";
    let c = &map(text, &NodeName::Label).nodes[0].cards[0];
    assert!(!c.mig.enabled);
    assert_eq!(c.utilization_pct, Some(30.0));
}
