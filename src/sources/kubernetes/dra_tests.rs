//! The DRA picture from the fixtures (tests/fixtures/dra/, sources in its README): cards,
//! layouts, holders, taints and health, both slice layouts, and bad input.

use std::sync::Arc;

use serde_json::{Value, json};

use super::objects::{Claim, Class, Rule, Slice, Template};
use super::{Objects, Picture, picture};
use crate::model::{Card, Placements, Request};
use crate::sources::kubernetes::objects::GpuPod;

pub fn fixture(name: &str) -> Value {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/dra").join(name);
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn items<T: serde::de::DeserializeOwned>(name: &str) -> Vec<Arc<T>> {
    let list = fixture(name);
    let items = list["items"].as_array().cloned().unwrap_or_default();
    items.into_iter().map(|v| Arc::new(serde_json::from_value(v).unwrap_or_else(|e| panic!("{name}: {e}")))).collect()
}

/// The fixtures' objects, slices from `slice_files`.
pub struct Fixture {
    pub slices: Vec<Arc<Slice>>,
    pub claims: Vec<Arc<Claim>>,
    pub templates: Vec<Arc<Template>>,
    pub classes: Vec<Arc<Class>>,
    pub rules: Vec<Arc<Rule>>,
    pub pods: Vec<Arc<GpuPod>>,
}

impl Fixture {
    pub fn load(slice_files: &[&str]) -> Self {
        Self {
            slices: slice_files.iter().flat_map(|f| items::<Slice>(f)).collect(),
            claims: items("resourceclaims.json"),
            templates: items("resourceclaimtemplates.json"),
            classes: items("deviceclasses.json"),
            rules: items("devicetaintrules.json"),
            pods: items("pods.json"),
        }
    }

    pub fn split() -> Self {
        Self::load(&["resourceslices.h100-dynamicmig.json", "resourceslices.h100-static-mig.json"])
    }

    pub fn objects(&self) -> Objects<'_> {
        Objects {
            slices: &self.slices,
            claims: &self.claims,
            templates: &self.templates,
            classes: &self.classes,
            rules: &self.rules,
            rules_served: Some(true),
            ..Objects::default()
        }
    }

    pub fn picture(&self) -> Picture {
        picture(&self.objects(), &self.pods)
    }
}

fn card<'p>(pic: &'p Picture, node: &str, index: u32) -> &'p Card {
    let cards = pic.nodes.get(node).unwrap_or_else(|| panic!("no node {node}: {:?}", pic.nodes.keys()));
    cards.iter().find(|c| c.index == index).unwrap_or_else(|| panic!("no card {node}/{index}"))
}

/// The fixtures' items deserialize into k8s-openapi's typed objects (v1_36), as the API
/// server's clients would read them.
#[test]
fn the_fixtures_are_typed_objects() {
    use k8s_openapi::api::resource::{v1, v1beta2};
    fn typed<T: serde::de::DeserializeOwned>(name: &str) -> usize {
        let list = fixture(name);
        let items = list["items"].as_array().cloned().unwrap_or_default();
        for v in &items {
            serde_json::from_value::<T>(v.clone()).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        items.len()
    }
    assert_eq!(typed::<v1::ResourceSlice>("resourceslices.h100-dynamicmig.json"), 9);
    assert_eq!(typed::<v1::ResourceSlice>("resourceslices.h100-dynamicmig.combined-1.34.json"), 8);
    assert_eq!(typed::<v1::ResourceSlice>("resourceslices.h100-static-mig.json"), 1);
    assert_eq!(typed::<v1::ResourceClaim>("resourceclaims.json"), 7);
    assert_eq!(typed::<v1::ResourceClaimTemplate>("resourceclaimtemplates.json"), 5);
    assert_eq!(typed::<v1::DeviceClass>("deviceclasses.json"), 5);
    assert_eq!(typed::<v1beta2::DeviceTaintRule>("devicetaintrules.json"), 27);
    assert_eq!(typed::<k8s_openapi::api::core::v1::Pod>("pods.json"), 8);
}

#[test]
fn dynamic_mig_cards_are_laid_out_by_what_their_claims_consume() {
    let pic = Fixture::split().picture();
    let cards = &pic.nodes["h100-dyn-01"];
    assert_eq!(cards.iter().map(|c| c.index).collect::<Vec<_>>(), (0..8).collect::<Vec<_>>());
    let gpu0 = card(&pic, "h100-dyn-01", 0);
    assert_eq!(gpu0.uuid.as_deref(), Some("GPU-a3dd6b79-66d4-5dd1-91a5-87589dd2720b"));
    assert_eq!(gpu0.model, "NVIDIA H100 80GB HBM3");
    assert_eq!(gpu0.memory_total_mib, Some(81152));
    assert_eq!(gpu0.layout_text(), "1g.10gb@0,1g.10gb@1,1g.20gb@2,3g.40gb@4");
    assert_eq!(gpu0.mig.placements, Placements::Known);
    assert_eq!(gpu0.sharing_mode(), Some(crate::model::SharingMode::DraDynamic));
    let holders: Vec<Vec<&str>> =
        gpu0.mig.instances.iter().map(|i| i.workloads.iter().map(String::as_str).collect()).collect();
    assert_eq!(
        holders,
        [
            vec!["k8s:inference/embed-0"],
            vec!["k8s:inference/embed-1"],
            vec!["k8s:inference/vllm-a-0", "k8s:inference/vllm-b-0"],
            vec!["k8s:inference/rerank-0"],
        ]
    );
    let dra = gpu0.dra.as_deref().unwrap_or_else(|| panic!("no DRA part"));
    assert!(dra.dynamic && dra.problems.is_empty(), "{:?}", dra.problems);
    assert_eq!(dra.counter_set.as_deref(), Some("gpu-0-counter-set"));
    assert_eq!(dra.devices, 26);
    // 1g.20gb takes slices 2–3 and 3g.40gb 4–7: nothing is left to place.
    assert_eq!(
        gpu0.mig.instances.iter().map(|i| (i.start, i.size)).collect::<Vec<_>>(),
        [(0, 1), (1, 1), (2, 2), (4, 4)]
    );
    assert_eq!(dra.placeable, Some(vec![]));
    assert_eq!(gpu0.free_slice_mask(), Some(0));
    let gpu1 = card(&pic, "h100-dyn-01", 1);
    assert!(!gpu1.mig.enabled);
    assert_eq!(gpu1.workloads, ["k8s:training/finetune-llama-0"]);
    assert_eq!(gpu1.dra.as_ref().and_then(|d| d.placeable.clone()), Some(vec![]));
    let gpu2 = card(&pic, "h100-dyn-01", 2);
    assert!(gpu2.is_idle() && !gpu2.mig.enabled && !gpu2.draining);
    assert_eq!(gpu2.dra.as_ref().and_then(|d| d.placeable.as_ref()).map(Vec::len), Some(7));
    assert_eq!(pic.held["k8s:inference/vllm-b-0"], [crate::model::CardRef::new("h100-dyn-01", 0)]);
    assert!(pic.notes.is_empty(), "{:?}", pic.notes);
}

#[test]
fn the_1_34_layout_gives_the_same_picture() {
    let stat = "resourceslices.h100-static-mig.json";
    let split = Fixture::load(&["resourceslices.h100-dynamicmig.json", stat]).picture();
    let combined = Fixture::load(&["resourceslices.h100-dynamicmig.combined-1.34.json", stat]).picture();
    assert_eq!(split.nodes, combined.nodes);
    assert_eq!(split.held, combined.held);
    assert!(combined.notes.is_empty(), "{:?}", combined.notes);
}

#[test]
fn static_mig_cards_come_from_their_instances_by_parent_uuid() {
    let pic = Fixture::split().picture();
    let cards = &pic.nodes["h100-mig-01"];
    assert_eq!(cards.len(), 8);
    for c in cards {
        assert_eq!(c.layout_text(), "2g.20gb@0,1g.10gb@2,1g.10gb@3,3g.40gb@4", "card {}", c.index);
        assert!(c.uuid.as_deref().is_some_and(|u| u.starts_with("GPU-")));
        assert!(c.health.unknown.is_none(), "the driver reads health on this node");
        assert_eq!(c.sharing_mode(), Some(crate::model::SharingMode::Mig));
    }
    let gpu2 = card(&pic, "h100-mig-01", 2);
    let held: Vec<_> = gpu2.mig.instances.iter().filter(|i| !i.workloads.is_empty()).collect();
    assert_eq!(held.len(), 1);
    assert_eq!((held[0].profile.as_str(), held[0].start), ("2g.20gb", 0));
    assert_eq!(held[0].workloads, ["k8s:inference/ocr-0"]);
    // XID 48 (NoSchedule) makes gpu-3 unhealthy; XID 43 (effect None) is said, not a fault.
    let gpu3 = card(&pic, "h100-mig-01", 3);
    assert_eq!(gpu3.health.fault().as_deref(), Some("XID 48"));
    let gpu5 = card(&pic, "h100-mig-01", 5);
    assert_eq!((gpu5.health.last_xid, gpu5.health.fault()), (Some(43), None));
}

#[test]
fn taints_drain_and_health() {
    let pic = Fixture::split().picture();
    let gpu7 = card(&pic, "h100-dyn-01", 7);
    assert!(gpu7.draining, "26 NoExecute rules cover every device of gpu-7");
    let taints = &gpu7.dra.as_ref().map(|d| d.taints.clone()).unwrap_or_default();
    assert_eq!(taints.len(), 26);
    assert!(taints.iter().all(|t| t.effect == "NoExecute" && t.rule.is_some()));
    // The dry-run rule (effect None) on gpu-1 is listed but keeps nothing off.
    let gpu1 = card(&pic, "h100-dyn-01", 1);
    assert!(!gpu1.draining);
    assert_eq!(gpu1.dra.as_ref().map(|d| d.taints.len()), Some(1));
    // No health source under DynamicMIG: unknown, not healthy.
    for c in &pic.nodes["h100-dyn-01"] {
        assert!(c.health.unknown.is_some(), "card {}", c.index);
    }
}

#[test]
fn pods_with_claims_ask_for_what_their_claims_say() {
    let f = Fixture::split();
    let pic = f.picture();
    let r = |k: &str| pic.requests.get(k).cloned().unwrap_or_else(|| panic!("no request for {k}"));
    let whole = |n: u32| Request { gpus: Some(n), model: Some("NVIDIA H100 80GB HBM3".into()), ..Request::default() };
    let mig = |p: &str| Request {
        gpus: Some(1),
        mig_profile: Some(p.into()),
        model: Some("NVIDIA H100 80GB HBM3".into()),
        ..Request::default()
    };
    assert_eq!(r("training/pretrain-8gpu-0"), whole(8), "the unallocated claim's spec");
    assert_eq!(r("training/finetune-llama-0"), whole(1));
    assert_eq!(r("inference/rerank-0"), mig("3g.40gb"), "firstAvailable, as allocated");
    assert_eq!(r("inference/vllm-a-0"), mig("1g.20gb"), "the shared claim");
    assert_eq!(pic.requests.len(), 8);
}

/// A pending pod whose claim is not made yet asks for what its template says.
#[test]
fn a_pod_without_its_claim_yet_asks_by_its_template() {
    let mut f = Fixture::split();
    f.claims.retain(|c| c.metadata.name.as_deref() != Some("pretrain-8gpu-0-gpus-mk9zf"));
    let pic = f.picture();
    assert_eq!(pic.requests["training/pretrain-8gpu-0"].gpus, Some(8));
}

fn slice(v: Value) -> Arc<Slice> {
    Arc::new(serde_json::from_value(v).unwrap_or_else(|e| panic!("{e}")))
}

/// One DynamicMIG GPU: its counter set (slices 0–7, 132 SMs) and a whole device and two
/// placements, with `extra` devices after them.
fn dynamic_pool(extra: Vec<Value>, counters: Value) -> Vec<Arc<Slice>> {
    let consume = |slices: &[u8], sm: u32| {
        let mut c = serde_json::Map::new();
        for s in slices {
            c.insert(format!("memory-slice-{s}"), json!({"value": "1"}));
        }
        c.insert("multiprocessors".into(), json!({"value": sm.to_string()}));
        json!([{"counterSet": "gpu-0-counter-set", "counters": c}])
    };
    let attrs = |kind: &str, profile: Option<&str>| {
        let mut a = json!({"type": {"string": kind}, "productName": {"string": "NVIDIA H100 80GB HBM3"}});
        if kind == "gpu" {
            a["uuid"] = json!({"string": "GPU-x"});
        } else {
            a["parentUUID"] = json!({"string": "GPU-x"});
            a["profile"] = json!({"string": profile.unwrap_or_default()});
        }
        a
    };
    let mut devices = vec![
        json!({"name": "gpu-0", "attributes": attrs("gpu", None), "consumesCounters": consume(&[0,1,2,3,4,5,6,7], 132)}),
        json!({"name": "gpu-0-mig-3g40gb-9-0", "attributes": attrs("mig", Some("3g.40gb")), "consumesCounters": consume(&[0,1,2,3], 60)}),
        json!({"name": "gpu-0-mig-3g40gb-9-4", "attributes": attrs("mig", Some("3g.40gb")), "consumesCounters": consume(&[4,5,6,7], 60)}),
    ];
    devices.extend(extra);
    let pool = json!({"name": "n1", "generation": 1, "resourceSliceCount": 1});
    vec![slice(json!({"metadata": {"name": "s1"}, "spec": {"driver": "gpu.nvidia.com", "nodeName": "n1", "pool": pool,
        "sharedCounters": [{"name": "gpu-0-counter-set", "counters": counters}], "devices": devices}}))]
}

fn slice_counters() -> Value {
    let mut c = serde_json::Map::new();
    for s in 0..8 {
        c.insert(format!("memory-slice-{s}"), json!({"value": "1"}));
    }
    c.insert("multiprocessors".into(), json!({"value": "132"}));
    Value::Object(c)
}

fn claim(name: &str, devices: &[&str]) -> Arc<Claim> {
    let results: Vec<Value> = devices
        .iter()
        .map(|d| json!({"driver": "gpu.nvidia.com", "pool": "n1", "device": d, "request": "r"}))
        .collect();
    Arc::new(
        serde_json::from_value(json!({"metadata": {"name": name, "namespace": "ns"},
            "status": {"allocation": {"devices": {"results": results}}, "reservedFor": [{"resource": "pods", "name": name}]}}))
        .unwrap_or_else(|e| panic!("{e}")),
    )
}

fn pic_of(slices: &[Arc<Slice>], claims: &[Arc<Claim>]) -> Picture {
    picture(&Objects { slices, claims, ..Objects::default() }, &[])
}

#[test]
fn a_counter_set_consumed_past_its_value_leaves_free_capacity_unknown() {
    let slices = dynamic_pool(vec![], slice_counters());
    // The whole GPU and a 3g placement allocated at once: slices 0–3 twice.
    let pic = pic_of(&slices, &[claim("a", &["gpu-0"]), claim("b", &["gpu-0-mig-3g40gb-9-0"])]);
    let c = card(&pic, "n1", 0);
    let dra = c.dra.as_deref().unwrap_or_else(|| panic!("no DRA part"));
    assert_eq!(dra.placeable, None);
    assert!(
        dra.problems.iter().any(|p| p.contains("consumed past its value: memory-slice-0 2 of 1")),
        "{:?}",
        dra.problems
    );
    assert_eq!(c.mig.placements, Placements::Unknown);
    assert_eq!(c.free_slice_mask(), None, "free is unknown, never a count");
}

#[test]
fn a_device_consuming_an_undeclared_counter_is_a_problem_of_its_card() {
    let mut counters = slice_counters();
    counters.as_object_mut().map(|m| m.remove("multiprocessors"));
    let slices = dynamic_pool(vec![], counters);
    let pic = pic_of(&slices, &[claim("b", &["gpu-0-mig-3g40gb-9-4"])]);
    let dra = card(&pic, "n1", 0).dra.clone().unwrap_or_default();
    assert!(
        dra.problems
            .iter()
            .any(|p| p
                .contains("consumes counter multiprocessors, which counter set gpu-0-counter-set does not declare")),
        "{:?}",
        dra.problems
    );
    assert_eq!(dra.placeable, None);
    // A set no slice declares at all.
    let mut pool = dynamic_pool(vec![], slice_counters());
    Arc::make_mut(&mut pool[0]).spec.shared_counters.items.clear();
    let pic = pic_of(&pool, &[]);
    let dra = card(&pic, "n1", 0).dra.clone().unwrap_or_default();
    assert!(dra.problems.iter().any(|p| p.contains("which no slice of the pool declares")), "{:?}", dra.problems);
    assert_eq!(dra.placeable, None);
}

#[test]
fn a_claim_naming_a_device_no_slice_has_is_said() {
    let slices = dynamic_pool(vec![], slice_counters());
    let pic = pic_of(&slices, &[claim("ghost", &["gpu-9"])]);
    assert!(
        pic.notes.iter().any(|n| n
            .contains("ResourceClaim ns/ghost is allocated device gpu-9 of pool n1, which no ResourceSlice publishes")),
        "{:?}",
        pic.notes
    );
    assert!(card(&pic, "n1", 0).is_idle());
}

#[test]
fn unknown_attribute_types_and_slices_over_the_limits_are_problems() {
    let odd = json!({"name": "gpu-0-mig-1g10gb-19-0", "attributes": {"type": {"string": "mig"},
        "parentUUID": {"string": "GPU-x"}, "profile": {"string": "1g.10gb"}, "weight": {"float": 1.5}}});
    let many: Vec<Value> = (0..200).map(|i| json!({"name": format!("vfio-{i}")})).collect();
    let mut extra = vec![odd];
    extra.extend(many);
    let slices = dynamic_pool(extra, slice_counters());
    assert_eq!(slices[0].spec.devices.items.len(), super::objects::MAX_DEVICES, "kept to the API's most");
    assert_eq!(slices[0].spec.devices.total, 204);
    let pic = pic_of(&slices, &[]);
    let problems = card(&pic, "n1", 0).dra.clone().unwrap_or_default().problems;
    assert!(problems.iter().any(|p| p.contains("204 devices, over the API's 64 (76 not read)")), "{problems:?}");
    assert!(
        problems.iter().any(|p| p.contains("attribute weight has a type the API does not have (float)")),
        "{problems:?}"
    );
    assert!(pic.notes.iter().any(|n| n.contains("over the API's 64")), "{:?}", pic.notes);
}

#[test]
fn garbage_never_panics() {
    for v in [
        json!({"spec": null}),
        json!({"spec": {"devices": [{"name": 3}]}}),
        json!({"spec": {"devices": {"a": 1}}}),
        json!([]),
    ] {
        let _ = serde_json::from_value::<Slice>(v);
    }
    let s = slice(json!({"metadata": {"name": "s"}, "spec": {"driver": "gpu.nvidia.com", "pool": {"name": "p"},
        "devices": [{"name": "gpu-0", "attributes": {"type": {"string": "gpu"}}, "consumesCounters": [{"counterSet": "nope"}]}]}}));
    let pic = pic_of(&[s], &[]);
    assert!(pic.nodes.is_empty(), "a pool for no node shows no cards");
    assert!(!pic.notes.is_empty());
}

mod property {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;

    /// gpu-2 of the DynamicMIG fixture: its 25 MIG placements and its counter set.
    fn gpu2() -> (Vec<super::super::objects::Device>, BTreeMap<String, u64>) {
        let f = Fixture::load(&["resourceslices.h100-dynamicmig.json"]);
        let devices: Vec<_> = f
            .slices
            .iter()
            .flat_map(|s| s.spec.devices.items.iter().cloned())
            .filter(|d| d.name.starts_with("gpu-2-mig-"))
            .collect();
        let set =
            f.slices.iter().flat_map(|s| s.spec.shared_counters.items.iter()).find(|c| &*c.name == "gpu-2-counter-set");
        let values = set.map(|s| s.counters.items.iter().map(|(n, v)| (n.to_string(), v.unwrap_or(0))).collect());
        (devices, values.unwrap_or_default())
    }

    fn consumption(d: &super::super::objects::Device) -> BTreeMap<String, u64> {
        let c = d.consumes_counters.items.iter().flat_map(|c| c.counters.items.iter());
        c.map(|(n, v)| (n.to_string(), v.unwrap_or(0))).collect()
    }

    fn add(into: &mut BTreeMap<String, u64>, from: &BTreeMap<String, u64>) {
        for (k, v) in from {
            *into.entry(k.clone()).or_default() += v;
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        /// Random DynamicMIG allocations that respect the counters (placements tried in a random
        /// order, each taken where the counters still allow it): the layout tessera draws
        /// consumes exactly the counters the allocated devices consume, and what it says can
        /// still be placed is what the counters still allow.
        #[test]
        fn the_layout_drawn_consumes_exactly_the_counters(order in Just((0..25usize).collect::<Vec<_>>()).prop_shuffle(), take in proptest::collection::vec(any::<bool>(), 25)) {
            let (devices, values) = gpu2();
            prop_assert_eq!(devices.len(), 25);
            let mut used: BTreeMap<String, u64> = BTreeMap::new();
            let mut allocated = Vec::new();
            for (i, &d) in order.iter().enumerate() {
                if !take[i] {
                    continue;
                }
                let c = consumption(&devices[d]);
                if c.iter().all(|(k, v)| used.get(k).copied().unwrap_or(0) + v <= values.get(k).copied().unwrap_or(0)) {
                    add(&mut used, &c);
                    allocated.push(devices[d].name.to_string());
                }
            }
            let f = Fixture::load(&["resourceslices.h100-dynamicmig.json"]);
            let claims: Vec<Arc<Claim>> = allocated
                .iter()
                .enumerate()
                .map(|(i, d)| {
                    Arc::new(serde_json::from_value(json!({"metadata": {"name": format!("c{i}"), "namespace": "ns"},
                        "status": {"allocation": {"devices": {"results": [{"driver": "gpu.nvidia.com", "pool": "h100-dyn-01", "device": d, "request": "r"}]}},
                            "reservedFor": [{"resource": "pods", "name": format!("p{i}")}]}})).unwrap_or_default())
                })
                .collect();
            let pic = picture(&Objects { slices: &f.slices, claims: &claims, ..Objects::default() }, &[]);
            let c = card(&pic, "h100-dyn-01", 2);
            let dra = c.dra.clone().unwrap_or_default();
            prop_assert!(dra.problems.is_empty(), "{:?}", dra.problems);
            prop_assert_eq!(c.mig.instances.len(), allocated.len());
            // What the drawn instances consume, each found by its profile and slices.
            let mut drawn: BTreeMap<String, u64> = BTreeMap::new();
            for i in &c.mig.instances {
                let mask = crate::model::mig::catalog::slice_mask(i.start, i.size);
                let d = devices.iter().find(|d| {
                    d.attributes.profile.as_deref() == Some(i.profile.as_str())
                        && super::super::objects::slices(consumption(d).iter().map(|(n, v)| (n.as_str(), Some(*v))), "memory-slice-") == mask
                });
                prop_assert!(d.is_some(), "no placement {}@{}", i.profile, i.start);
                add(&mut drawn, &consumption(d.unwrap_or(&devices[0])));
            }
            drawn.retain(|_, v| *v > 0);
            used.retain(|_, v| *v > 0);
            prop_assert_eq!(&drawn, &used);
            // The free slices are the memory-slice counters left.
            let left: u16 = (0..8u8).filter(|s| !used.contains_key(&format!("memory-slice-{s}"))).fold(0, |m, s| m | 1 << s);
            if !allocated.is_empty() {
                prop_assert_eq!(c.free_slice_mask(), Some(left));
            }
            // Each profile said placeable has a free placement the counters allow, and no other.
            let fits = |d: &super::super::objects::Device| {
                !allocated.iter().any(|a| a == &*d.name)
                    && consumption(d).iter().all(|(k, v)| used.get(k).copied().unwrap_or(0) + v <= values.get(k).copied().unwrap_or(0))
            };
            let mut want: Vec<String> = devices.iter().filter(|d| fits(d)).filter_map(|d| d.attributes.profile.as_deref().map(str::to_string)).collect();
            want.sort();
            want.dedup();
            let mut said = dra.placeable.unwrap_or_default();
            said.sort();
            prop_assert_eq!(said, want);
        }
    }
}

/// The issue's words for the fixtures' pending pod.
#[test]
fn the_pending_pod_is_explained_by_replaying_its_claim() {
    let pic = Fixture::split().picture();
    assert_eq!(
        pic.blockers.get("training/pretrain-8gpu-0").map(String::as_str),
        Some(
            "wants 8 whole H100 on one node (matchAttribute productName): h100-dyn-01 has 5 (gpu-0 carved into MIG, \
             gpu-1 held, gpu-7 tainted NoExecute); h100-mig-01 publishes no whole GPUs (MIG on)"
        )
    );
    assert_eq!(pic.blockers.len(), 1, "running pods are not explained");
    // A selector tessera cannot read is said, not guessed.
    let why = blocker_with_selector("device.attributes['gpu.nvidia.com'].architecture == 'Hopper'");
    assert!(why.starts_with("request gpus has a selector tessera cannot read: device.attributes"), "{why}");
    let why = blocker_with_selector("device.capacity['gpu.nvidia.com'].memory >= quantity('40Gi')");
    assert!(why.starts_with("request gpus has a selector tessera cannot read: device.capacity"), "{why}");
}

/// The fixtures' pending pod's blocker with its template's selector replaced by `expression`
/// (its claim made anew from the template).
fn blocker_with_selector(expression: &str) -> String {
    blocker_with(|e| {
        for s in &mut e.selectors.items {
            if let Some(c) = s.cel.as_mut() {
                c.expression = expression.into();
            }
        }
    })
}

/// The fixtures' pending pod's blocker with `edit` done to its template's requests (its claim
/// made anew from the template); empty where none is said.
fn blocker_with(edit: impl Fn(&mut super::objects::Exact)) -> String {
    let mut f = Fixture::split();
    for t in &mut f.templates {
        for r in &mut Arc::make_mut(t).spec.spec.devices.requests.items {
            r.exactly.iter_mut().for_each(&edit);
        }
    }
    f.claims.retain(|c| c.status.allocation.is_some());
    let pic = f.picture();
    pic.blockers.get("training/pretrain-8gpu-0").cloned().unwrap_or_default()
}

/// A capacity comparison is evaluated on the devices the slices publish: the "80GB" H100
/// publishes 81152Mi, so `memory >= 80Gi` (81920Mi) finds no card, `>= 40Gi` the usual five.
#[test]
fn capacity_selectors_are_evaluated_on_the_published_devices() {
    let forty = "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3' && \
                 device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0";
    assert_eq!(
        blocker_with_selector(forty),
        "wants 8 whole H100 with memory >= 40Gi on one node (matchAttribute productName): h100-dyn-01 has 5 \
         (gpu-0 carved into MIG, gpu-1 held, gpu-7 tainted NoExecute); h100-mig-01 publishes no whole GPUs (MIG on)"
    );
    let eighty = blocker_with_selector("device.capacity[\"gpu.nvidia.com\"].memory.compareTo(quantity(\"80Gi\")) >= 0");
    assert!(
        eighty.starts_with(
            "wants 8 whole GPUs with memory >= 80Gi on one node (matchAttribute productName): h100-dyn-01 has 0 \
             (gpu-0 has memory 81152Mi, gpu-1 has memory 81152Mi,"
        ),
        "{eighty}"
    );
    // Room enough: nothing said.
    let small = "device.capacity['gpu.nvidia.com'].memory.isGreaterThan(quantity('1Gi'))";
    let two = blocker_with(|e| {
        e.count = Some(2);
        for s in &mut e.selectors.items {
            if let Some(c) = s.cel.as_mut() {
                c.expression = small.into();
            }
        }
    });
    assert_eq!(two, "");
    // MIG by capacity: the profiles whose published devices meet it.
    let mig = |expression: &'static str| {
        blocker_with(move |e| {
            e.device_class_name = super::intern::IName(super::intern::intern("mig.nvidia.com"));
            for s in &mut e.selectors.items {
                if let Some(c) = s.cel.as_mut() {
                    c.expression = expression.into();
                }
            }
        })
    };
    assert_eq!(
        mig("device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('90Gi')) >= 0"),
        "wants 8× MIG with memory >= 90Gi: no MIG device the slices publish has it"
    );
    assert_eq!(
        mig("device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0"),
        "wants 8× MIG with memory >= 40Gi: no card can place it now"
    );
    assert_eq!(mig("device.capacity['gpu.nvidia.com'].memory.isLessThan(quantity('40Gi'))"), "");
}

/// Recordings and snapshots carry the DRA part: a DRA card reads back as it was written.
#[test]
fn a_dra_card_round_trips_through_json() {
    let pic = Fixture::split().picture();
    for c in pic.nodes.values().flatten() {
        let back: Card = serde_json::from_value(serde_json::to_value(c).unwrap_or_default()).unwrap_or_default();
        assert_eq!(&back, c);
    }
}

/// Hostile counters: a device taking all 16 slices a mask holds (the shift overflowed), and
/// consumptions whose sum passes u64 (it wrapped and read as fine).
#[test]
fn sixteen_slices_and_huge_counters_neither_panic_nor_read_as_free() {
    let mut counters = slice_counters();
    for s in 8..16 {
        counters[format!("memory-slice-{s}")] = json!({"value": "1"});
    }
    let all: serde_json::Map<String, Value> =
        (0..16).map(|s| (format!("memory-slice-{s}"), json!({"value": "1"}))).collect();
    let wide = json!({"name": "gpu-0-mig-7g80gb-0-0", "attributes": {"type": {"string": "mig"},
        "productName": {"string": "NVIDIA H100 80GB HBM3"}, "parentUUID": {"string": "GPU-x"},
        "profile": {"string": "7g.80gb"}},
        "consumesCounters": [{"counterSet": "gpu-0-counter-set", "counters": all}]});
    let slices = dynamic_pool(vec![wide], counters);
    let pic = pic_of(&slices, &[claim("w", &["gpu-0-mig-7g80gb-0-0"])]);
    assert!(card(&pic, "n1", 0).dra.is_some());

    let mut counters = slice_counters();
    counters["multiprocessors"] = json!({"value": "15Ei"});
    let huge = |name: &str, slice: u8| {
        json!({"name": name, "attributes": {"type": {"string": "mig"},
            "productName": {"string": "NVIDIA H100 80GB HBM3"}, "parentUUID": {"string": "GPU-x"},
            "profile": {"string": "1g.10gb"}},
            "consumesCounters": [{"counterSet": "gpu-0-counter-set",
                "counters": {format!("memory-slice-{slice}"): {"value": "1"}, "multiprocessors": {"value": "15Ei"}}}]})
    };
    let slices = dynamic_pool(vec![huge("gpu-0-mig-1g10gb-19-0", 0), huge("gpu-0-mig-1g10gb-19-1", 1)], counters);
    let pic = pic_of(&slices, &[claim("a", &["gpu-0-mig-1g10gb-19-0"]), claim("b", &["gpu-0-mig-1g10gb-19-1"])]);
    let c = card(&pic, "n1", 0);
    let dra = c.dra.as_deref().unwrap_or_else(|| panic!("no DRA part"));
    assert!(dra.problems.iter().any(|p| p.contains("consumed past its value: multiprocessors")), "{:?}", dra.problems);
    assert_eq!(c.free_slice_mask(), None, "free is unknown, never a count");
}

/// Claims that could not be read (a forbidden watch) never make a DRA card look free: what
/// holds it is unknown, its placeable profiles and free slices too, and it says why; rules
/// not read leave a drain by a rule unknown.
#[test]
fn unread_claims_or_rules_are_unknown_never_free() {
    let slices = dynamic_pool(vec![], slice_counters());
    let why = "list resourceclaims: forbidden";
    let o = Objects {
        slices: &slices,
        claims_unknown: Some(why),
        rules_unknown: Some("list devicetaintrules: forbidden"),
        ..Objects::default()
    };
    let pic = picture(&o, &[]);
    let c = card(&pic, "n1", 0);
    let dra = c.dra.as_deref().unwrap_or_else(|| panic!("no DRA part"));
    assert!(dra.holders_unknown && dra.placeable.is_none(), "{dra:?}");
    assert!(
        dra.problems.iter().any(|p| p.contains("what holds it is unknown") && p.contains(why)),
        "{:?}",
        dra.problems
    );
    assert_eq!(dra.taint_rules, crate::model::dra::TaintRules::Unknown);
    assert!(c.in_use_by_unknown() && !c.is_idle());
    let node = crate::model::Node { name: "n1".into(), schedulable: true, ..crate::model::Node::default() };
    assert_eq!(crate::model::capacity::free_units(&node, c), 0, "never free");
    // Read, the same card is idle and free.
    let pic = pic_of(&slices, &[]);
    let c = card(&pic, "n1", 0);
    assert!(c.is_idle() && crate::model::capacity::free_units(&node, c) > 0);
}

/// An admin-access result (a monitoring DaemonSet reaching every GPU) holds nothing: the
/// device stays free and its counters unconsumed.
#[test]
fn admin_access_results_hold_nothing() {
    let slices = dynamic_pool(vec![], slice_counters());
    let admin: Arc<Claim> = Arc::new(
        serde_json::from_value(json!({"metadata": {"name": "dcgm", "namespace": "mon"},
            "status": {"allocation": {"devices": {"results": [{"driver": "gpu.nvidia.com", "pool": "n1",
                "device": "gpu-0", "request": "r", "adminAccess": true}]}},
                "reservedFor": [{"resource": "pods", "name": "dcgm"}]}}))
        .unwrap_or_else(|e| panic!("{e}")),
    );
    let pic = pic_of(&slices, &[admin, claim("b", &["gpu-0-mig-3g40gb-9-4"])]);
    let c = card(&pic, "n1", 0);
    assert!(!c.holders().any(|h| h.contains("dcgm")), "{:?}", c.holders().collect::<Vec<_>>());
    assert_eq!(c.layout_text(), "3g.40gb@4", "only the real allocation lays the card out");
}

/// What a DynamicMIG card's counters can still place is free MIG capacity in the fleet's one
/// count (it was none: a claim the driver could place now looked like a shortage).
#[test]
fn dynamic_mig_placeable_profiles_are_free_capacity() {
    let at = chrono::TimeZone::with_ymd_and_hms(&chrono::Utc, 2026, 8, 20, 12, 0, 0).single().unwrap_or_default();
    let mut fleet = super::super::dra_fixture::fleet(at);
    fleet.nodes.retain(|n| n.name == "h100-dyn-01");
    let free = crate::model::capacity::Free::compute(&fleet);
    // gpu-2 to gpu-6 are idle (gpu-0 is full, gpu-1 held whole, gpu-7 drained): each places
    // 7 × 1g.10gb, one 1g.10gb+me, 4 × 1g.20gb, 3 × 2g.20gb, 2 × 3g.40gb, one 4g or 7g.
    let want: Vec<(&str, u64)> = vec![
        ("1g.10gb", 35),
        ("1g.10gb+me", 5),
        ("1g.20gb", 20),
        ("2g.20gb", 15),
        ("3g.40gb", 10),
        ("4g.40gb", 5),
        ("7g.80gb", 5),
    ];
    let got: Vec<(&str, u64)> = free.mig.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    assert_eq!(got, want);
    assert_eq!(free.whole.values().sum::<u64>(), 5, "the idle ones are free whole too");
}
