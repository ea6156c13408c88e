//! Kubernetes's plans on the DRA fixtures (tests/fixtures/dra/): a drain by DeviceTaintRules
//! (26 for a DynamicMIG H100, tessera's label, the names), the eviction asked apart, undrain
//! of tessera's rules only, the refusals (no DeviceTaintRule API, rules not tessera's, a
//! DynamicMIG repartition), the static MIG warning, and the preemption of a DRA-held pod.

use chrono::{DateTime, TimeZone, Utc};
use serde_json::{Value, json};

use super::{TAINT_KEY, rule_name};
use crate::act::guard::Refusal;
use crate::act::plan::plan;
use crate::act::{Action, Backend, Op, Options, Plan};
use crate::model::dra::TaintRules;
use crate::model::{CardRef, Fleet};
use crate::sources::kubernetes::dra_fixture;

/// A day after the fixtures' pods started.
fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 8, 20, 12, 0, 0).single().unwrap_or_default()
}

fn opts() -> Options {
    Options::new(&crate::config::Config::default(), false, now())
}

fn planned(fleet: &Fleet, action: Action) -> Plan {
    plan(&action, fleet, &opts()).unwrap_or_else(|e| panic!("{action}: {e}"))
}

fn drain(target: &str, evict: bool) -> Action {
    Action::Drain { target: target.into(), evict }
}

fn undrain(target: &str) -> Action {
    Action::Undrain { target: target.into(), force: false }
}

/// The rules a plan creates, as objects.
fn created(p: &Plan) -> Vec<Value> {
    p.steps
        .iter()
        .filter_map(|s| match &s.op {
            Op::KubeCreateTaintRule { object, .. } => Some(object.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn the_drain_of_gpu_3_creates_26_taint_rules_with_tesseras_label() {
    let fleet = dra_fixture::fleet(now());
    let p = planned(&fleet, drain("h100-dyn-01/3", false));
    assert_eq!(p.backend, Backend::Kubernetes);
    assert!(p.allowed(), "{}", p.render());
    assert_eq!(p.card, Some(CardRef::new("h100-dyn-01", 3)));
    let rules = created(&p);
    assert_eq!(rules.len(), 26, "{}", p.render());
    assert_eq!(p.steps.len(), 26);
    let names: Vec<&str> = rules.iter().filter_map(|r| r["metadata"]["name"].as_str()).collect();
    assert_eq!(names[0], "tessera-drain-h100-dyn-01-gpu-3");
    for name in [
        "tessera-drain-h100-dyn-01-gpu-3-mig-1g10gb-19-0",
        "tessera-drain-h100-dyn-01-gpu-3-mig-1g10gb-19-6",
        "tessera-drain-h100-dyn-01-gpu-3-mig-3g40gb-9-4",
        "tessera-drain-h100-dyn-01-gpu-3-mig-7g80gb-0-0",
    ] {
        assert!(names.contains(&name), "{name} not in {names:?}");
    }
    let mut unique = names.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), 26, "one rule per device");
    for r in &rules {
        assert_eq!(r["apiVersion"], json!("resource.k8s.io/v1beta2"));
        assert_eq!(r["metadata"]["labels"]["app.kubernetes.io/managed-by"], json!("tessera"));
        assert_eq!(r["metadata"]["annotations"]["tessera/card"], json!("h100-dyn-01/3"));
        let sel = &r["spec"]["deviceSelector"];
        assert_eq!((&sel["driver"], &sel["pool"]), (&json!("gpu.nvidia.com"), &json!("h100-dyn-01")));
        assert!(sel["device"].as_str().is_some_and(|d| d == "gpu-3" || d.starts_with("gpu-3-mig-")), "{sel}");
        assert_eq!(r["spec"]["taint"], json!({"key": TAINT_KEY, "effect": "NoSchedule"}));
    }
    // The plan shows each object (as --dry-run prints it), and the question says how many.
    assert!(
        p.steps[0].call.starts_with("POST /apis/resource.k8s.io/v1beta2/devicetaintrules {"),
        "{}",
        p.steps[0].call
    );
    assert!(p.render().contains("\"deviceSelector\""));
    assert!(p.summary.contains("26 DeviceTaintRules with effect NoSchedule"), "{}", p.summary);
    assert_eq!(p.question(), "drain h100-dyn-01/3: create 26 DeviceTaintRules");
    assert!(p.second_confirmation.is_none(), "a drain without --evict asks once");
    assert!(!p.destructive);
}

#[test]
fn evict_makes_the_rules_no_execute_and_asks_apart() {
    let fleet = dra_fixture::fleet(now());
    // gpu-1 is held whole by the training pod.
    let p = planned(&fleet, drain("h100-dyn-01/1", true));
    assert!(p.allowed(), "{}", p.render());
    let rules = created(&p);
    assert_eq!(rules.len(), 26);
    assert!(rules.iter().all(|r| r["spec"]["taint"]["effect"] == json!("NoExecute")));
    assert_eq!(rules[0]["metadata"]["name"], json!("tessera-evict-h100-dyn-01-gpu-1"));
    let q = p.second_confirmation.clone().unwrap_or_default();
    assert!(
        q.contains("26 DeviceTaintRules with effect NoExecute evict") && q.contains("k8s:training/finetune-llama-0"),
        "{q}"
    );
    // --evict on what is not a DRA card: refused, said.
    let mut plain = fleet.clone();
    for c in plain.nodes.iter_mut().flat_map(|n| n.cards.iter_mut()) {
        c.dra = None;
    }
    let p = planned(&plain, drain("h100-dyn-01/1", true));
    assert!(p.blockers.iter().any(|b| b.to_string().starts_with("--evict drains a DRA card")), "{}", p.render());
}

#[test]
fn gpu_7_is_already_drained_and_its_rules_are_not_tesseras() {
    let fleet = dra_fixture::fleet(now());
    let p = planned(&fleet, drain("h100-dyn-01/7", false));
    assert_eq!(p.nothing_to_do.as_deref(), Some("h100-dyn-01/7 is already drained"));
    // Its 26 NoExecute rules were made by someone else: an undrain deletes none of them.
    let p = planned(&fleet, undrain("h100-dyn-01/7"));
    assert!(p.steps.is_empty(), "{}", p.render());
    let [Refusal::NotTesserasRules { card, rules }] = p.blockers.as_slice() else { panic!("{}", p.render()) };
    assert_eq!((card.as_str(), rules.len()), ("h100-dyn-01/7", 26));
    assert!(p.render().contains("tessera deletes only its own (label app.kubernetes.io/managed-by=tessera)"));
    // Evicted already: the rules are NoExecute.
    let p = planned(&fleet, drain("h100-dyn-01/7", true));
    assert_eq!(p.nothing_to_do.as_deref(), Some("h100-dyn-01/7 is already drained and evicted"));
}

/// The fixtures with the rules a plan would create served as well.
fn with_rules(rules: &[Value]) -> Fleet {
    let mut doc = dra_fixture::doc(true);
    if let Some(list) = doc["devicetaintrules"].as_array_mut() {
        list.extend(rules.iter().cloned());
    }
    dra_fixture::fleet_of(&doc, now())
}

#[test]
fn undrain_deletes_only_tesseras_rules() {
    let fleet = dra_fixture::fleet(now());
    let rules = created(&planned(&fleet, drain("h100-dyn-01/3", false)));
    let drained = with_rules(&rules);
    let card = drained.card(&CardRef::new("h100-dyn-01", 3)).cloned().unwrap_or_default();
    assert!(card.draining, "the source reads tessera's rules back as a drain");
    assert_eq!(card.dra.as_ref().map(|d| d.tessera_rules().len()), Some(26));
    assert_eq!(
        planned(&drained, drain("h100-dyn-01/3", false)).nothing_to_do.as_deref(),
        Some("h100-dyn-01/3 is already drained")
    );
    let p = planned(&drained, undrain("h100-dyn-01/3"));
    assert!(p.allowed(), "{}", p.render());
    let deleted: Vec<&str> = p
        .steps
        .iter()
        .filter_map(|s| match &s.op {
            Op::KubeDeleteTaintRule { name } => Some(name.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(deleted.len(), 26);
    assert!(deleted.iter().all(|n| n.starts_with("tessera-drain-h100-dyn-01-gpu-3")), "{deleted:?}");
    assert_eq!(p.question(), "undrain h100-dyn-01/3: delete 26 DeviceTaintRules");
    // Evict after the drain: 26 more rules (NoExecute), the drain's stay; undrain deletes all 52.
    let p = planned(&drained, drain("h100-dyn-01/3", true));
    assert_eq!(created(&p).len(), 26);
    let both = with_rules(&[rules, created(&p)].concat());
    let p = planned(&both, undrain("h100-dyn-01/3"));
    assert_eq!(p.steps.len(), 52, "{}", p.render());
    // A rule of someone else's on the same card stays, and the plan says so.
    let mut theirs = created(&planned(&fleet, drain("h100-dyn-01/4", false)));
    theirs.truncate(1);
    theirs[0]["metadata"]["labels"] = json!({"team": "infra"});
    theirs[0]["metadata"]["name"] = json!("infra-hold-gpu-4");
    let mixed = with_rules(&[created(&planned(&fleet, drain("h100-dyn-01/4", false))), theirs].concat());
    let p = planned(&mixed, undrain("h100-dyn-01/4"));
    assert_eq!(p.steps.len(), 26);
    assert!(p.steps.iter().all(|s| !s.call.contains("infra-hold-gpu-4")));
    assert!(p.warnings.iter().any(|w| w.contains("infra-hold-gpu-4")), "{}", p.render());
}

#[test]
fn without_the_device_taint_rule_api_the_drain_is_refused_with_the_reason() {
    let mut fleet = dra_fixture::fleet(now());
    for d in fleet.nodes.iter_mut().flat_map(|n| n.cards.iter_mut()).filter_map(|c| c.dra.as_deref_mut()) {
        d.taint_rules = TaintRules::NotServed;
    }
    let p = planned(&fleet, drain("h100-dyn-01/3", false));
    assert!(p.blockers.contains(&Refusal::TaintRulesNotServed), "{}", p.render());
    let why = p.blockers.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ");
    assert!(why.contains("DRADeviceTaintRules feature gate") && why.contains("Kubernetes 1.36"), "{why}");
    // Not known (a source that did not say): planned, with a warning.
    let fleet = dra_fixture::fleet_of(&dra_fixture::doc(false), now());
    let p = planned(&fleet, drain("h100-dyn-01/3", false));
    assert!(p.allowed() && p.warnings.iter().any(|w| w.contains("is not known here")), "{}", p.render());
}

#[test]
fn a_card_whose_device_names_are_not_all_known_is_not_drained() {
    let mut fleet = dra_fixture::fleet(now());
    let r = CardRef::new("h100-dyn-01", 3);
    if let Some(d) = fleet
        .nodes
        .iter_mut()
        .flat_map(|n| n.cards.iter_mut())
        .find(|c| c.index == 3)
        .and_then(|c| c.dra.as_deref_mut())
    {
        d.device_names.truncate(10);
    }
    assert!(fleet.card(&r).is_some());
    let p = planned(&fleet, drain("h100-dyn-01/3", false));
    assert!(p.steps.is_empty());
    assert!(
        matches!(p.blockers.as_slice(), [Refusal::DraDevicesUnknown { named: 10, published: 26, .. }]),
        "{}",
        p.render()
    );
}

#[test]
fn repartition_is_refused_under_dynamic_mig_and_static_mig_says_the_driver_restarts() {
    let fleet = dra_fixture::fleet(now());
    let p = planned(&fleet, Action::Repartition { target: "h100-dyn-01/2".into(), layout: "all-balanced".into() });
    let refusal = Refusal::DraDynamic { card: "h100-dyn-01/2".into() };
    assert!(p.blockers.contains(&refusal), "{}", p.render());
    assert!(refusal.to_string().contains("the DRA driver lays this card out per claim"));
    // The node as a whole: refused for its DynamicMIG cards.
    let p = planned(&fleet, Action::Repartition { target: "h100-dyn-01".into(), layout: "all-balanced".into() });
    assert!(p.blockers.iter().any(|b| matches!(b, Refusal::DraDynamic { .. })), "{}", p.render());
    // Static MIG under DRA: the plan says the driver must be restarted to publish the layout.
    let p = planned(&fleet, Action::Repartition { target: "h100-mig-01/5".into(), layout: "all-1g.10gb".into() });
    assert!(!p.blockers.iter().any(|b| matches!(b, Refusal::DraDynamic { .. })), "{}", p.render());
    assert!(p.warnings.iter().any(|w| w.contains("restart its kubelet plugin on h100-mig-01")), "{}", p.render());
}

#[test]
fn a_dra_held_training_pod_is_preempted_by_eviction() {
    let fleet = dra_fixture::fleet(now());
    let p = planned(&fleet, Action::Preempt { workload: "k8s:training/finetune-llama-0".into(), force: false });
    assert!(p.allowed(), "{}", p.render());
    assert_eq!(p.backend, Backend::Kubernetes);
    assert_eq!(p.card, Some(CardRef::new("h100-dyn-01", 1)), "the card its claim holds");
    let [s] = p.steps.as_slice() else { panic!("{}", p.render()) };
    assert_eq!(s.op, Op::KubeEvict { namespace: "training".into(), pod: "finetune-llama-0".into() });
    // Inference on a shared claim is never preempted.
    let p = planned(&fleet, Action::Preempt { workload: "k8s:inference/vllm-a-0".into(), force: false });
    assert!(p.blockers.iter().any(|b| matches!(b, Refusal::Inference { .. })), "{}", p.render());
}

#[test]
fn rule_names_are_object_names() {
    assert_eq!(rule_name(false, "h100-dyn-01", "gpu-3"), "tessera-drain-h100-dyn-01-gpu-3");
    assert_eq!(
        rule_name(true, "h100-dyn-01", "gpu-3-mig-1g10gb-19-0"),
        "tessera-evict-h100-dyn-01-gpu-3-mig-1g10gb-19-0"
    );
    let long = rule_name(false, &"n".repeat(250), "gpu-0");
    assert!(long.len() <= 253 && long.starts_with("tessera-drain-nnn"), "{long}");
    assert_ne!(long, rule_name(false, &"n".repeat(250), "gpu-1"), "a hash of the whole keeps them apart");
    let odd = rule_name(false, "Node_A", "gpu-0");
    assert!(odd.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.'), "{odd}");
}

/// A DRA node that NVML also reads (tessera on the node itself): its drain still goes to
/// Kubernetes (a compute mode change would leave DRA placing claims there), and a DynamicMIG
/// card's repartition is refused by every backend, NVML's too.
#[test]
fn a_dra_card_read_by_nvml_too_is_drained_by_kubernetes_and_never_laid_out() {
    let mut fleet = dra_fixture::fleet(now());
    fleet.sources.push(crate::model::SourceStatus::live("nvml", crate::model::SourceKind::Nvml, now()));
    for n in fleet.nodes.iter_mut().filter(|n| n.name == "h100-dyn-01") {
        n.sources.insert(0, "nvml".into());
    }
    let p = planned(&fleet, drain("h100-dyn-01/3", false));
    assert_eq!(p.backend, Backend::Kubernetes, "{}", p.render());
    let r = planned(&fleet, Action::Repartition { target: "h100-dyn-01/2".into(), layout: "whole".into() });
    assert!(r.blockers.iter().any(|b| matches!(b, Refusal::DraDynamic { .. })), "{}", r.render());
}
