use proptest::prelude::*;

use super::*;
use crate::model::Card;
use crate::sources::allsmi::AllSmi;
use crate::sources::exposition;
use crate::sources::series::{self, Holder, MapStats, Mapped, NodeName};

/// The scrape's mapping with the dialects these samples need (dcgm-exporter's, all-smi's beside it).
fn map(text: &str, node: &NodeName) -> Mapped {
    series::map(text, node, &[&AllSmi, &Dcgm])
}

fn fixture(name: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/dcgm").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn card<'m>(m: &'m Mapped, node: &str, index: u32) -> &'m Card {
    let n = m.nodes.iter().find(|n| n.name == node).unwrap_or_else(|| panic!("no node {node}"));
    n.cards.iter().find(|c| c.index == index).unwrap_or_else(|| panic!("no card {node}/{index}"))
}

fn approx(a: Option<f64>, b: f64) -> bool {
    a.is_some_and(|a| (a - b).abs() < 1e-9)
}

#[test]
fn a100_mig_sample() {
    let m = map(&fixture("metrics-a100-mig-1g.5gb-exporter-2.4.0rc2.prom"), &NodeName::Label);
    assert_eq!(m.stats, MapStats { parse: m.stats.parse.clone(), ..MapStats::default() });
    assert_eq!((m.stats.parse.samples, m.stats.parse.bad_lines), (21, 0));
    assert_eq!(m.nodes.len(), 1);
    assert_eq!(m.nodes[0].name, "ub20-a100-k8s");
    assert!(m.nodes[0].schedulable);
    assert_eq!(m.nodes[0].cards.len(), 1);
    let c = card(&m, "ub20-a100-k8s", 0);
    assert_eq!(c.uuid.as_deref(), Some("GPU-34319582-d595-d1c7-d1d2-179bcfa61660"));
    assert_eq!(c.model, "", "this exporter version has no modelName");
    assert_eq!((c.sm_clock_mhz, c.memory_clock_mhz), (Some(1215), Some(1215)));
    assert_eq!((c.temperature_c, c.power_w), (Some(61.0), Some(409.692)));
    assert_eq!(c.health.last_xid, None, "XID 0 means none");
    // This old exporter also sent parent series: they give the card's own figures.
    assert_eq!((c.memory_used_mib, c.memory_total_mib), (Some(4845), Some(4845 + 35690)));
    assert!(approx(c.utilization_pct, 99.563));
    assert!(c.mig.enabled);
    assert_eq!(c.mig.instances.len(), 1);
    let i = &c.mig.instances[0];
    assert_eq!((i.gi_id, i.profile.as_str(), i.start, i.size), (13, "1g.5gb", 0, 0), "no model: size unknown");
    assert!(approx(i.utilization_pct, 99.5687));
    assert_eq!((i.memory_used_mib, i.memory_total_mib), (None, None));
    assert!(m.holders.is_empty());

    let fixed = map(&fixture("metrics-a100-mig-1g.5gb-exporter-2.4.0rc2.prom"), &NodeName::Fixed("a100-host".into()));
    assert_eq!(fixed.nodes.len(), 1);
    assert_eq!(fixed.nodes[0].name, "a100-host");
    assert_eq!(fixed.nodes[0].cards, m.nodes[0].cards);
}

#[test]
fn t4_datadog_fixture() {
    let text = fixture("metrics-t4-nonmig.datadog-fixture.prom");
    let m = map(&text, &NodeName::Label);
    assert_eq!(m.stats.unknown_gpu, 14, "the hand-written series without labels");
    assert_eq!((m.stats.blank_sentinels, m.stats.duplicates, m.stats.parse.bad_values), (0, 0, 0));
    let names: Vec<&str> = m.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["424773df46e0", "551bdf382151", "ip-11111"], "sorted by name");

    let t4 = card(&m, "424773df46e0", 0);
    assert_eq!(t4.model, "Tesla T4");
    assert_eq!(t4.uuid.as_deref(), Some("GPU-20c56d28-0da5-6d26-a36a-e7af1ce2586e"));
    assert_eq!((t4.sm_clock_mhz, t4.memory_clock_mhz, t4.temperature_c), (Some(300), Some(405), Some(25.0)));
    assert_eq!(t4.power_w, Some(8.969));
    assert_eq!(t4.utilization_pct, Some(0.0));
    assert_eq!((t4.memory_used_mib, t4.memory_total_mib), (Some(0), Some(15109)));
    assert!(!t4.mig.enabled && t4.mig.instances.is_empty());
    assert_eq!(t4.health, crate::model::Health::default());

    let second = card(&m, "551bdf382151", 0);
    assert_eq!(second.power_limit_w, Some(70.0));
    assert_eq!((second.memory_used_mib, second.memory_total_mib), (None, Some(15109)), "FB_TOTAL alone");

    let a10 = card(&m, "ip-11111", 0);
    assert_eq!(a10.model, "NVIDIA A10G");
    assert_eq!(a10.utilization_pct, None, "DRAM_ACTIVE is not utilisation");
    assert_eq!(
        m.holders,
        vec![Holder {
            node: "ip-11111".into(),
            index: 0,
            gi_id: None,
            namespace: Some("ray-llm".into()),
            pod: Some("ray-1111111".into()),
            container: Some("ray-worker".into()),
            hpc_job: None,
        }]
    );

    // Under one fixed name the three boxes' gpu="0" used to fold into one card (the first
    // values won): three UUIDs are three cards, so the boxes' Hostnames name the nodes, and
    // the note says so.
    let m = map(&text, &NodeName::Fixed("t4".into()));
    assert_eq!(m.nodes.len(), 3);
    assert_eq!(m.stats.hosts_behind_target, 3);
    let c = card(&m, "424773df46e0", 0);
    assert_eq!(c.uuid.as_deref(), Some("GPU-20c56d28-0da5-6d26-a36a-e7af1ce2586e"));
    // No longer filled from another box's card.
    assert_eq!((c.model.as_str(), c.power_w, c.power_limit_w), ("Tesla T4", Some(8.969), None));
    assert_eq!(m.holders.len(), 1);
    assert_eq!(m.holders[0].node, "ip-11111");
}

#[test]
fn readme_docs_example() {
    let m = map(&fixture("metrics-readme-truncated-docs.prom"), &NodeName::Label);
    assert_eq!((m.stats.parse.bad_lines, m.stats.parse.samples, m.stats.blank_sentinels), (2, 3, 1));
    assert!(m.stats.parse.first_error.as_deref().is_some_and(|e| e.starts_with("line 7:")));
    assert_eq!(m.nodes.len(), 1);
    assert_eq!(m.nodes[0].name, "unknown", "no Hostname label");
    let c = card(&m, "unknown", 0);
    assert_eq!(c.uuid.as_deref(), Some("GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52"));
    assert_eq!((c.sm_clock_mhz, c.memory_clock_mhz, c.temperature_c), (Some(139), Some(405), None));
}

fn synthetic() -> Mapped {
    map(&fixture("synthetic-mig-mixed.prom"), &NodeName::Label)
}

#[test]
fn synthetic_node_stats() {
    let m = synthetic();
    let p = &m.stats.parse;
    assert_eq!((p.lines, p.comments, p.samples, p.bad_lines), (113, 29, 83, 0));
    assert_eq!(p.bad_values, 2, "the ERROR line and GPU 6's NaN utilisation");
    assert!(p.first_error.as_deref().is_some_and(|e| e.contains("ERROR - FAILED TO CONVERT TO STRING")));
    assert_eq!((m.stats.blank_sentinels, m.stats.duplicates, m.stats.unknown_gpu), (2, 1, 1));
    assert_eq!(m.nodes.len(), 1);
    let n = &m.nodes[0];
    assert_eq!(n.name, "gpu-a100-07");
    assert_eq!(n.cards.iter().map(|c| c.index).collect::<Vec<_>>(), (0..8).collect::<Vec<_>>());
    assert!(n.cards.iter().all(|c| c.model == "NVIDIA A100-SXM4-80GB"));
    assert_eq!(n.cards.iter().filter(|c| c.mig.enabled).count(), 1);
}

#[test]
fn synthetic_whole_cards() {
    let m = synthetic();
    let c0 = card(&m, "gpu-a100-07", 0);
    assert_eq!(c0.temperature_c, Some(41.0), "the duplicate (99) loses to the first");
    assert_eq!(c0.pci_bus_id.as_deref(), Some("00000000:07:00.0"));
    assert_eq!((c0.memory_used_mib, c0.memory_total_mib), (Some(61234), Some(61234 + 20174 + 512)));
    assert_eq!(c0.utilization_pct, Some(87.0), "GPU_UTIL beats GR_ENGINE_ACTIVE");
    assert_eq!(c0.health.ecc_volatile_uncorrected, Some(2));
    assert_eq!((c0.sm_clock_mhz, c0.memory_clock_mhz, c0.power_w), (Some(1410), Some(1593), Some(310.125)));

    let c4 = card(&m, "gpu-a100-07", 4);
    assert_eq!(c4.health.last_xid, Some(79));
    assert_eq!(c4.temperature_c, Some(70.0));
    assert_eq!(card(&m, "gpu-a100-07", 5).power_w, None, "FP64 blank");
    let c6 = card(&m, "gpu-a100-07", 6);
    assert_eq!(c6.utilization_pct, Some(0.0), "NaN GPU_UTIL ignored: GR_ENGINE_ACTIVE fills in");

    let c7 = card(&m, "gpu-a100-07", 7);
    assert_eq!(c7.uuid.as_deref(), Some("GPU-5a1e0000-0000-4000-8000-000000000007"));
    assert_eq!((c7.temperature_c, c7.power_w, c7.utilization_pct), (Some(45.0), Some(300.75), Some(64.0)));
    assert_eq!((c7.sm_clock_mhz, c7.memory_clock_mhz), (Some(1395), Some(1593)));
    assert_eq!((c7.memory_used_mib, c7.memory_total_mib), (Some(40000), Some(81408)));
}

#[test]
fn synthetic_mig_card() {
    let m = synthetic();
    let c = card(&m, "gpu-a100-07", 3);
    assert!(c.mig.enabled);
    assert_eq!(c.power_w, Some(250.5), "device-wide power is taken once, not tripled");
    assert_eq!((c.temperature_c, c.sm_clock_mhz, c.health.last_xid), (Some(55.0), Some(1410), None));
    assert_eq!(c.utilization_pct, None, "MIG cards have no GPU_UTIL");
    assert_eq!(c.memory_used_mib, Some(20000 + 10 + 5000), "sum over instances");
    assert_eq!(c.memory_total_mib, None);
    type Row<'a> = (u32, &'a str, u8, u8, Option<u64>, Option<u64>);
    let got: Vec<Row> = c
        .mig
        .instances
        .iter()
        .map(|i| (i.gi_id, i.profile.as_str(), i.start, i.size, i.memory_used_mib, i.memory_total_mib))
        .collect();
    assert_eq!(
        got,
        [
            (2, "3g.40gb", 0, 4, Some(20000), Some(40475)),
            (3, "2g.20gb", 0, 2, Some(10), Some(19967)),
            (9, "1g.10gb", 0, 1, Some(5000), Some(9864)),
        ]
    );
    let util: Vec<Option<f64>> = c.mig.instances.iter().map(|i| i.utilization_pct).collect();
    assert_eq!(util, [Some(50.0), Some(25.0), Some(0.0)]);
    assert_eq!(c.activity_pct(), Some((50.0 * 4.0 + 25.0 * 2.0) / 8.0));
}

#[test]
fn synthetic_holders() {
    let m = synthetic();
    let h =
        |index: u32, gi: Option<u32>, ns: Option<&str>, pod: Option<&str>, cont: Option<&str>, job: Option<&str>| {
            Holder {
                node: "gpu-a100-07".into(),
                index,
                gi_id: gi,
                namespace: ns.map(Into::into),
                pod: pod.map(Into::into),
                container: cont.map(Into::into),
                hpc_job: job.map(Into::into),
            }
        };
    let want = vec![
        h(0, None, Some("research"), Some("train-llm-0"), Some("trainer"), None),
        h(1, None, Some("notebooks"), Some("jupyter-alice"), Some("notebook"), None),
        h(3, Some(2), Some("serving"), Some("svc-a,b=c}d"), Some("svc"), None),
        h(3, Some(3), Some("serving"), Some("quote\"d-pod"), Some("app"), None),
        h(3, Some(9), None, None, None, Some("4242")),
        h(4, None, Some("batch"), Some("batch-7"), Some("worker"), None),
        h(7, None, Some("default"), Some("legacy-0"), Some("main"), None),
    ];
    assert_eq!(m.holders, want);
}

#[test]
fn exported_labels_win_as_a_set() {
    let text = r#"DCGM_FI_DEV_GPU_UTIL{gpu="0",Hostname="h",pod="dcgm-exporter-1",namespace="gpu-operator",exported_pod="job-1"} 5
"#;
    let m = map(text, &NodeName::Label);
    assert_eq!(m.holders.len(), 1);
    assert_eq!((m.holders[0].pod.as_deref(), m.holders[0].namespace.as_deref()), (Some("job-1"), None));
}

#[test]
fn time_shared_gpu_and_duplicates() {
    // One GPU shared by two pods: the exporter writes each series once per pod. That is not a
    // duplicate; an exact repeat is.
    let text = r#"DCGM_FI_DEV_GPU_UTIL{gpu="0",Hostname="h",pod="a"} 40
DCGM_FI_DEV_GPU_UTIL{gpu="0",Hostname="h",pod="b"} 40
DCGM_FI_DEV_GPU_UTIL{gpu="0",Hostname="h",pod="a"} 41
DCGM_FI_DEV_GPU_TEMP{gpu="0",Hostname="h",pod="a"} 50
DCGM_FI_DEV_GPU_TEMP{gpu="0",Hostname="h",pod="b"} 50
"#;
    let m = map(text, &NodeName::Label);
    assert_eq!(m.stats.duplicates, 1);
    assert_eq!(m.holders.iter().map(|h| h.pod.as_deref()).collect::<Vec<_>>(), [Some("a"), Some("b")]);
    assert_eq!(card(&m, "h", 0).utilization_pct, Some(40.0));
}

#[test]
fn virtual_gpu_labels_count_replicas_in_use() {
    // --kubernetes-virtual-gpus: one series per pod and replica. Two pods on replicas 0 and 2
    // of card 0, a series without a pod (not a replica in use), and card 1 unshared.
    let text = r#"DCGM_FI_DEV_GPU_UTIL{gpu="0",Hostname="h",pod="a",namespace="n",vgpu="0"} 40
DCGM_FI_DEV_GPU_UTIL{gpu="0",Hostname="h",pod="b",namespace="n",vgpu="2"} 40
DCGM_FI_DEV_FB_USED{gpu="0",Hostname="h",pod="b",namespace="n",vgpu="2"} 900
DCGM_FI_DEV_GPU_TEMP{gpu="0",Hostname="h",vgpu="3"} 50
DCGM_FI_DEV_GPU_UTIL{gpu="1",Hostname="h"} 10
"#;
    let m = map(text, &NodeName::Label);
    let shared = card(&m, "h", 0);
    assert_eq!(shared.sharing.replicas_used, Some(2));
    assert_eq!(shared.sharing.contexts, None, "the exporter cannot count processes");
    assert_eq!(shared.sharing_text(false), "?", "time-slicing or MPS: the exporter does not say which");
    assert_eq!(card(&m, "h", 1).sharing, crate::model::Sharing::default());
    // A flood of replica labels stays bounded.
    let flood: String = (0..5000)
        .map(|i| format!("DCGM_FI_DEV_GPU_UTIL{{gpu=\"0\",Hostname=\"h\",pod=\"p{i}\",vgpu=\"{i}\"}} 1\n"))
        .collect();
    assert_eq!(card(&map(&flood, &NodeName::Label), "h", 0).sharing.replicas_used, None, "past the bound: unknown");
}

#[test]
fn gpu_index_fallbacks_and_sentinels() {
    let text = r#"DCGM_FI_DEV_GPU_TEMP{device="nvidia5",hostname="h"} 40
DCGM_FI_DEV_GPU_TEMP{gpu="x",device="nvidia6",hostname="h"} 41
DCGM_FI_DEV_GPU_TEMP{gpu="",hostname="h"} 42
DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL{nvlink="0",gpu_uuid="GPU-1",model_name="x"} 1
DCGM_FI_DEV_POWER_USAGE{gpu="5",hostname="h"} 140737488355330.0
DCGM_FI_DEV_POWER_USAGE{gpu="5",hostname="h"} 100
DCGM_FI_PROF_PCIE_TX_BYTES{gpu="5",hostname="h"} 150000000000000
DCGM_FI_DEV_XID_ERRORS{gpu="5",hostname="h"} +Inf
DCGM_FI_DEV_GPU_UTIL{gpu="5",hostname="h"} -Inf
DCGM_FI_DEV_SM_CLOCK{gpu="5",hostname="h"} -1
"#;
    let m = map(text, &NodeName::Label);
    assert_eq!(m.stats.unknown_gpu, 2);
    assert_eq!(m.stats.blank_sentinels, 1, "FP64 blank on a mapped field only");
    assert_eq!(m.stats.parse.bad_values, 2, "±Inf");
    assert_eq!(m.stats.duplicates, 0, "a blank does not take the slot");
    let c5 = card(&m, "h", 5);
    assert_eq!((c5.temperature_c, c5.power_w, c5.health.last_xid), (Some(40.0), Some(100.0), None));
    assert_eq!((c5.utilization_pct, c5.sm_clock_mhz), (None, None));
    assert_eq!(card(&m, "h", 6).temperature_c, Some(41.0));
}

#[test]
fn empty_and_garbage_inputs() {
    let m = map("", &NodeName::Label);
    assert!(m.nodes.is_empty() && m.holders.is_empty());
    assert_eq!(m.stats, MapStats::default());
    let m = map("...\n\u{0}\n{\n", &NodeName::Fixed("n".into()));
    assert!(m.nodes.is_empty());
    assert_eq!(m.stats.parse.bad_lines, 3);
}

/// The old names mapped here are the ones the 1.x compatibility list really has.
#[test]
fn old_names_come_from_the_compatibility_list() {
    let csv = fixture("1.x-compatibility-metrics.csv");
    let names: Vec<&str> = csv
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .filter_map(|l| l.split(',').next())
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .collect();
    for old in [
        "dcgm_sm_clock",
        "dcgm_memory_clock",
        "dcgm_gpu_temp",
        "dcgm_power_usage",
        "dcgm_gpu_utilization",
        "dcgm_xid_errors",
        "dcgm_fb_free",
        "dcgm_fb_used",
        "dcgm_fi_prof_gr_engine_active",
    ] {
        assert!(names.contains(&old), "{old} is not in the 1.x list");
        assert!(field(old).is_some(), "{old} is not mapped");
    }
    // Commented out in that list, still mapped for exporters that enable it.
    assert!(csv.contains("# dcgm_ecc_dbe_volatile_total,"));
    assert_eq!(field("dcgm_ecc_dbe_volatile_total"), Some(Field::EccDbe));
}

#[test]
fn generated_fleet_maps_back() {
    let text = generate(4, 8, 4);
    assert_eq!(text, generate(4, 8, 4), "deterministic");
    let m = map(&text, &NodeName::Label);
    let s = &m.stats;
    assert_eq!(
        (s.parse.bad_lines, s.parse.bad_values, s.blank_sentinels, s.duplicates, s.unknown_gpu),
        (0, 0, 0, 0, 0)
    );
    assert_eq!(m.nodes.len(), 4);
    for n in &m.nodes {
        assert_eq!(n.cards.len(), 8, "{}", n.name);
        for c in &n.cards {
            assert!(c.uuid.is_some() && c.pci_bus_id.is_some() && !c.model.is_empty());
            assert!(c.power_w.is_some() && c.temperature_c.is_some() && c.memory_used_mib.is_some());
            if c.index % 4 == 3 {
                assert!(c.mig.enabled, "{}/{}", n.name, c.index);
                assert!(!c.mig.instances.is_empty());
                for i in &c.mig.instances {
                    assert!(i.size > 0, "catalog size for {} on {}", i.profile, c.model);
                    assert!(i.utilization_pct.is_some() && i.memory_total_mib.is_some());
                }
                let slices: u8 = c.mig.instances.iter().map(|i| i.size).sum();
                assert!(slices <= 8);
            } else {
                assert!(!c.mig.enabled && c.utilization_pct.is_some() && c.memory_total_mib.is_some());
            }
        }
    }
    assert!(!m.holders.is_empty());
    assert!(m.holders.iter().any(|h| h.gi_id.is_some()));
    assert_eq!(
        map(&generate(2, 4, 0), &NodeName::Label)
            .nodes
            .iter()
            .filter(|n| n.cards.iter().any(|c| c.mig.enabled))
            .count(),
        0
    );
    assert!(generate(0, 8, 4).is_empty());
}

/// `generate(512, 8, 4)` is about 36 MB and 120k samples; 16 nodes are a 32nd of it.
#[test]
fn generated_size_scales() {
    let text = generate(16, 8, 4);
    let stats = exposition::parse(&text, |_| {});
    let (bytes, samples) = (text.len() * 32, stats.samples * 32);
    assert!((30_000_000..42_000_000).contains(&bytes), "{bytes}");
    assert!((105_000..135_000).contains(&samples), "{samples}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn map_never_panics(text in any::<String>()) {
        let _ = map(&text, &NodeName::Label);
    }

    #[test]
    fn map_never_panics_on_near_dcgm(
        lines in proptest::collection::vec(
            (
                prop_oneof![Just("DCGM_FI_DEV_GPU_UTIL"), Just("DCGM_FI_DEV_FB_USED"), Just("DCGM_FI_DEV_POWER_USAGE"),
                    Just("DCGM_FI_PROF_GR_ENGINE_ACTIVE"), Just("dcgm_gpu_temp"), Just("other")],
                proptest::collection::vec(
                    (prop_oneof![Just("gpu"), Just("device"), Just("GPU_I_ID"), Just("GPU_I_PROFILE"), Just("Hostname"),
                        Just("pod"), Just("exported_pod"), Just("hpc_job"), Just("modelName")],
                     "[0-9a-z\",=}.\\\\ -]{0,6}"),
                    0..6),
                prop_oneof![Just("1".to_string()), Just("NaN".to_string()), Just("9223372036854775794".to_string()),
                    Just("-1e400".to_string()), "[0-9.e+-]{1,8}"],
            ),
            0..20),
        fixed in any::<bool>(),
    ) {
        let mut text = String::new();
        for (name, labels, value) in &lines {
            let labels: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
            text.push_str(&format!("{name}{{{}}} {value}\n", labels.join(",")));
        }
        let node = if fixed { NodeName::Fixed("n".into()) } else { NodeName::Label };
        let m = map(&text, &node);
        for n in &m.nodes {
            prop_assert!(n.cards.windows(2).all(|w| w[0].index < w[1].index));
            for c in &n.cards {
                prop_assert!(c.mig.instances.windows(2).all(|w| w[0].gi_id < w[1].gi_id));
            }
        }
        prop_assert!(m.nodes.windows(2).all(|w| w[0].name < w[1].name));
    }
}

#[test]
fn remapped_rows_and_ecc_reach_health() {
    let text = "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS{gpu=\"2\",UUID=\"GPU-r\",Hostname=\"n1\"} 3\n\
                DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{gpu=\"2\",UUID=\"GPU-r\",Hostname=\"n1\"} 1\n\
                DCGM_FI_DEV_XID_ERRORS{gpu=\"2\",UUID=\"GPU-r\",Hostname=\"n1\"} 48\n";
    let m = map(text, &NodeName::Label);
    let h = &m.nodes[0].cards[0].health;
    assert_eq!((h.remapped_rows_uncorrectable, h.ecc_volatile_uncorrected, h.last_xid), (Some(3), Some(1), Some(48)));
}

#[test]
fn huge_label_values_are_kept_whole() {
    let pod = "p".repeat(200_000);
    let text = format!(
        "DCGM_FI_DEV_GPU_UTIL{{gpu=\"0\",UUID=\"GPU-h\",Hostname=\"n1\",pod=\"{pod}\",namespace=\"ns, with=commas}}\"}} 42\n"
    );
    let m = map(&text, &NodeName::Label);
    assert_eq!(m.nodes[0].cards[0].utilization_pct, Some(42.0));
    assert_eq!(m.holders[0].pod.as_deref().map(str::len), Some(200_000));
    assert_eq!(m.holders[0].namespace.as_deref(), Some("ns, with=commas}"));
}

#[test]
fn many_hosts_behind_one_target_stay_many_cards() {
    // 64 nodes' exporters scraped through one Service: one target, 64 Hostnames, 512 UUIDs.
    let text = generate(64, 8, 0);
    let m = map(&text, &NodeName::Fixed("dcgm-svc".into()));
    let cards: usize = m.nodes.iter().map(|n| n.cards.len()).sum();
    assert_eq!((m.nodes.len(), cards), (64, 512), "the fleet's size on screen is the fleet's size");
    assert_eq!(m.stats.hosts_behind_target, 64);
    assert!(m.nodes.iter().all(|n| n.name.starts_with("gpu-node-")));
    // With the Hostname label stripped, different UUIDs still never merge; the note says why
    // their hosts cannot be told apart.
    let stripped: String = text
        .lines()
        .map(|l| match l.find("Hostname=\"") {
            Some(at) => {
                let end = l[at + 10..].find('"').map_or(l.len(), |e| at + 10 + e + 1);
                format!("{}{}", &l[..at], l[end..].trim_start_matches(','))
            }
            None => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n");
    let m = map(&stripped, &NodeName::Fixed("dcgm-svc".into()));
    let cards: usize = m.nodes.iter().map(|n| n.cards.len()).sum();
    assert_eq!((m.nodes.len(), cards), (1, 512));
    assert_eq!(m.stats.shared_index, 512 - 8);
    assert_eq!(m.stats.hosts_behind_target, 0);
}

/// Found by the input campaign: an exporter's -1 (or 250 %) utilisation was passed on as a
/// number. Out of range is unknown.
#[test]
fn utilisation_out_of_range_is_unknown() {
    for text in [
        "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\"} -1",
        "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\"} 250",
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu=\"0\"} -1",
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu=\"0\"} 1.5",
    ] {
        let m = map(text, &NodeName::Fixed("n".into()));
        assert_eq!(card(&m, "n", 0).utilization_pct, None, "{text}");
    }
    let m = map("DCGM_FI_DEV_GPU_UTIL{gpu=\"0\"} 100", &NodeName::Fixed("n".into()));
    assert_eq!(card(&m, "n", 0).utilization_pct, Some(100.0));
}

/// Found by the input campaign: a DCGM memory-used series beside an all-smi total in bytes
/// (100 bytes: 0 MiB) gave a card with 100 MiB used of 0 MiB. A total below what is used is
/// unknown.
#[test]
fn a_total_below_what_is_used_is_unknown() {
    let text = "DCGM_FI_DEV_FB_USED{gpu=\"6\"} 100\nall_smi_gpu_memory_total_bytes{gpu_index=\"6\"} 100\n";
    let m = map(text, &NodeName::Fixed("n".into()));
    let c = card(&m, "n", 6);
    assert_eq!((c.memory_used_mib, c.memory_total_mib), (Some(100), None));
    let m =
        map("DCGM_FI_DEV_FB_USED{gpu=\"0\"} 100\nDCGM_FI_DEV_FB_TOTAL{gpu=\"0\"} 200\n", &NodeName::Fixed("n".into()));
    assert_eq!(card(&m, "n", 0).memory_total_mib, Some(200), "a consistent total stays");
    // The same on a MIG card, where used is the instances' sum.
    let text =
        "DCGM_FI_DEV_FB_USED{gpu=\"1\",GPU_I_ID=\"0\"} 100\nall_smi_gpu_memory_total_bytes{gpu_index=\"1\"} 100\n";
    let m = map(text, &NodeName::Fixed("n".into()));
    assert_eq!((card(&m, "n", 1).memory_used_mib, card(&m, "n", 1).memory_total_mib), (Some(100), None));
}

#[test]
fn dcgm_exporter_cards_are_nvidia_cards_with_no_partition_mode() {
    let m = map("DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"GPU-a\",Hostname=\"h\"} 5\n", &NodeName::Label);
    let c = card(&m, "h", 0);
    assert_eq!((c.vendor, c.serial.as_deref()), (Some(crate::model::Vendor::Nvidia), None));
    assert_eq!(c.sharing.mode, None);
}

/// One target naming more cards than the largest supported fleet: the cards past
/// `series::MAX_CARDS` are cut, counted and said, and no index is kept for them (100,000 cards
/// took 1.35 GB through `snapshot --json`).
#[test]
fn cards_past_the_largest_fleet_are_cut_and_said() {
    let extra = 10;
    let mut text = String::new();
    for i in 0..series::MAX_CARDS + extra {
        text.push_str(&format!("DCGM_FI_DEV_GPU_TEMP{{gpu=\"{i}\",UUID=\"GPU-{i}\",Hostname=\"h\"}} 64\n"));
    }
    // A card already kept still takes its later series.
    text.push_str("DCGM_FI_DEV_GPU_UTIL{gpu=\"3\",UUID=\"GPU-3\",Hostname=\"h\"} 50\n");
    let m = map(&text, &NodeName::Label);
    assert_eq!(m.nodes.iter().map(|n| n.cards.len()).sum::<usize>(), series::MAX_CARDS);
    assert_eq!(m.stats.cut_cards, extra);
    assert_eq!(card(&m, "h", 3).utilization_pct, Some(50.0));
    let (p, _) = crate::sources::scrape::to_partial(&text, &NodeName::Label);
    assert!(p.note.is_some_and(|n| n.contains("10 cards past 65536 cut")));
}
