//! Acting through Dynamic Resource Allocation against the fake API server
//! (tests/common/k8s/dra.rs serving tests/fixtures/dra/): a drain of a DynamicMIG card creates
//! its 26 DeviceTaintRules with tessera's label, a creation refused half-way deletes those
//! created, an undrain deletes only tessera's rules, a server without DeviceTaintRules refuses
//! the drain with the reason, a DRA-held training pod is preempted by eviction, and
//! `tessera drain --kubernetes` shows the objects (`--dry-run`) and audits the rules.

use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use serde_json::{Value, json};
use tessera::actions::execute::execute;
use tessera::actions::plan::plan;
use tessera::actions::{Action, Backend, Env, Op, Options, Outcome, Plan};
use tessera::model::{CardRef, Fleet, SourceKind};
use tessera::sources::SourceUpdate;
use tessera::sources::kubernetes::{self, Settings};
use tessera::store::Store;

mod common;
use common::Temp;
use common::k8s::dra::TAINT_RULES;
use common::k8s::{FakeK8s, TOKEN};

const SLICES: [&str; 2] = ["resourceslices.h100-dynamicmig.json", "resourceslices.h100-static-mig.json"];
/// The fixture's DeviceTaintRules (26 drain gpu-7, one dry-run on gpu-1).
const FIXTURE_RULES: usize = 27;

/// A day after the fixtures' pods started.
fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 8, 20, 12, 0, 0).single().unwrap_or_default()
}

fn settings(k: &FakeK8s, dir: &Temp) -> Settings {
    Settings { kubeconfig: Some(k.kubeconfig(&dir.0)), ..Settings::default() }
}

async fn fleet(s: &Settings) -> Fleet {
    let partial = kubernetes::collect_once(s, Duration::from_secs(20)).await.unwrap_or_else(|e| panic!("{e:?}"));
    let mut store = Store::new();
    store.register("kubernetes", SourceKind::Kubernetes, Duration::from_secs(5));
    let update =
        SourceUpdate { source: "kubernetes".into(), kind: SourceKind::Kubernetes, at: Utc::now(), result: Ok(partial) };
    store.apply(update, Utc::now());
    store.fleet().clone()
}

async fn plan_for(s: &Settings, action: Action) -> Plan {
    let opts = Options::new(&tessera::config::Config::default(), false, now());
    let p = plan(&action, &fleet(s).await, &opts).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(p.backend, Backend::Kubernetes);
    p
}

async fn run(p: &Plan, s: &Settings) -> Outcome {
    let env = Env { kubernetes: Some(s.clone()), command_timeout: Duration::from_secs(10), ..Env::default() };
    execute(p, &env, None).await
}

/// The names of the rules the server holds.
fn rules_held(k: &FakeK8s) -> Vec<String> {
    k.rule_names()
}

fn loaded() -> FakeK8s {
    let k = FakeK8s::start();
    k.load_dra(&SLICES);
    k
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_creates_26_rules_and_undrain_deletes_only_tesseras() {
    let k = loaded();
    let dir = Temp::new("dra-act-drain");
    let s = settings(&k, &dir);
    let p = plan_for(&s, Action::Drain { target: "h100-dyn-01/3".into(), evict: false }).await;
    assert!(p.allowed(), "{}", p.render());
    let o = run(&p, &s).await;
    assert!(o.ok, "{o:#?}");
    let posts: Vec<_> = k.writes().into_iter().filter(|c| c.method == "POST").collect();
    assert_eq!(posts.len(), 26);
    assert!(posts.iter().all(|c| c.path == TAINT_RULES && c.content_type == "application/json"));
    assert!(posts.iter().all(|c| c.body["metadata"]["labels"]["app.kubernetes.io/managed-by"] == json!("tessera")));
    assert!(posts.iter().all(|c| c.body["spec"]["taint"]["effect"] == json!("NoSchedule")));
    assert_eq!(
        posts[0].body["spec"]["deviceSelector"],
        json!({"driver": "gpu.nvidia.com", "pool": "h100-dyn-01", "device": "gpu-3"})
    );
    assert_eq!(rules_held(&k).len(), FIXTURE_RULES + 26);
    assert!(o.steps[0].message.as_deref().is_some_and(|m| m.contains("created (NoSchedule on gpu-3)")), "{o:#?}");

    // The source reads the rules back: the card is drained, by tessera.
    let f = fleet(&s).await;
    let card = f.card(&CardRef::new("h100-dyn-01", 3)).cloned().unwrap_or_default();
    assert!(card.draining);
    assert_eq!(card.dra.as_ref().map(|d| d.tessera_rules().len()), Some(26));

    let before = k.writes().len();
    let p = plan_for(&s, Action::Undrain { target: "h100-dyn-01/3".into(), force: false }).await;
    assert!(p.allowed(), "{}", p.render());
    let o = run(&p, &s).await;
    assert!(o.ok, "{o:#?}");
    let deletes: Vec<_> = k.writes()[before..].to_vec();
    assert_eq!(deletes.len(), 26);
    assert!(
        deletes
            .iter()
            .all(|c| c.method == "DELETE"
                && c.path.starts_with(&format!("{TAINT_RULES}/tessera-drain-h100-dyn-01-gpu-3")))
    );
    let left = rules_held(&k);
    assert_eq!(left.len(), FIXTURE_RULES, "the fixture's rules (gpu-7's drain) stay: {left:?}");
    assert!(left.iter().all(|n| !n.starts_with("tessera-")));
    // The executor itself leaves a rule without tessera's label alone.
    let theirs = Op::KubeDeleteTaintRule { name: "drain-h100-dyn-01-gpu-7".into() };
    let e = tessera::actions::kubernetes::run_op(&theirs, &s).await.map_err(|e| e.to_string());
    assert_eq!(
        e,
        Err("DeviceTaintRule drain-h100-dyn-01-gpu-7 does not carry label app.kubernetes.io/managed-by=tessera: \
             tessera did not make it, so it is left alone"
            .into())
    );
    assert_eq!(rules_held(&k).len(), FIXTURE_RULES);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_refused_half_way_deletes_the_rules_created() {
    let k = loaded();
    let dir = Temp::new("dra-act-rollback");
    let s = settings(&k, &dir);
    let p = plan_for(&s, Action::Drain { target: "h100-dyn-01/4".into(), evict: false }).await;
    assert_eq!(p.steps.len(), 26);
    k.allow_rule_creates(Some(10));
    let o = run(&p, &s).await;
    assert!(!o.ok);
    assert_eq!(o.steps[10].status, "failed", "{o:#?}");
    assert!(o.error.as_deref().is_some_and(|e| e.contains("HTTP 403 Forbidden")), "{o:#?}");
    assert_eq!(o.rolled_back.len(), 10);
    assert!(o.rolled_back.iter().all(|r| r.status == "done"), "{o:#?}");
    // Last created, first taken back.
    let tenth = match &p.steps[9].op {
        Op::KubeCreateTaintRule { name, .. } => name.clone(),
        other => panic!("{other:?}"),
    };
    assert_eq!(o.rolled_back[0].what, format!("Delete DeviceTaintRule {tenth} (roll back)"));
    assert!(o.reached.contains("rolled back: the 10 done steps taken back"), "{}", o.reached);
    let methods: Vec<String> = k.writes().iter().map(|c| c.method.clone()).collect();
    assert_eq!(methods.iter().filter(|m| *m == "POST").count(), 11);
    assert_eq!(methods.iter().filter(|m| *m == "DELETE").count(), 10);
    assert_eq!(rules_held(&k).len(), FIXTURE_RULES, "nothing of the drain is left");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_device_taint_rules_the_drain_is_refused() {
    let k = loaded();
    k.set_dra(Some(false));
    let dir = Temp::new("dra-act-no-rules");
    let s = settings(&k, &dir);
    let p = plan_for(&s, Action::Drain { target: "h100-dyn-01/3".into(), evict: false }).await;
    assert!(!p.allowed());
    let why = tessera::actions::guard::joined(&p.blockers);
    assert!(
        why.starts_with("the API server does not serve DeviceTaintRules (resource.k8s.io/v1beta2)")
            && why.contains("DRADeviceTaintRules feature gate"),
        "{why}"
    );
    // Had it been planned anyway, the creation says the same.
    let op = Op::KubeCreateTaintRule {
        name: "tessera-drain-x".into(),
        object: json!({"apiVersion": "resource.k8s.io/v1beta2", "kind": "DeviceTaintRule",
            "metadata": {"name": "tessera-drain-x"}, "spec": {"taint": {"key": "tessera/drain", "effect": "NoSchedule"}}}),
    };
    let e = tessera::actions::kubernetes::run_op(&op, &s).await.map_err(|e| e.to_string()).err().unwrap_or_default();
    assert!(e.contains("the API server does not serve DeviceTaintRules (HTTP 404)"), "{e}");
    assert!(k.writes().iter().all(|c| c.method != "POST" || c.path == TAINT_RULES));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dra_held_training_pod_is_evicted() {
    let k = loaded();
    let dir = Temp::new("dra-act-preempt");
    let s = settings(&k, &dir);
    let p = plan_for(&s, Action::Preempt { workload: "k8s:training/finetune-llama-0".into(), force: false }).await;
    assert!(p.allowed(), "{}", p.render());
    let o = run(&p, &s).await;
    assert!(o.ok, "{o:#?}");
    let w = k.writes();
    assert_eq!(w.len(), 1);
    assert_eq!(
        (w[0].method.as_str(), w[0].path.as_str()),
        ("POST", "/api/v1/namespaces/training/pods/finetune-llama-0/eviction")
    );
}

#[test]
fn tessera_drain_shows_the_rules_and_audits_them() {
    let k = loaded();
    let dir = Temp::new("dra-act-cli");
    let kubeconfig = k.kubeconfig(&dir.0);
    let state = dir.0.join("state");
    let tessera = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_tessera"))
            .args(args)
            .env("KUBECONFIG", &kubeconfig)
            .env("XDG_STATE_HOME", &state)
            .env("XDG_CONFIG_HOME", dir.0.join("no-config"))
            .env("HOME", &dir.0)
            .env("USER", "tester")
            .output()
            .unwrap_or_else(|e| panic!("cannot run tessera: {e}"));
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, out, err) = tessera(&["drain", "h100-dyn-01/3", "--kubernetes", "--dry-run"]);
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert!(out.contains("26 DeviceTaintRules with effect NoSchedule"), "{out}");
    assert_eq!(out.matches("POST /apis/resource.k8s.io/v1beta2/devicetaintrules {").count(), 26, "{out}");
    assert!(out.contains("\"app.kubernetes.io/managed-by\":\"tessera\""), "{out}");
    assert!(out.contains("dry run: nothing done"));
    assert!(k.writes().is_empty());

    let (code, out, err) = tessera(&["drain", "h100-dyn-01/3", "--kubernetes", "--evict", "--yes"]);
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert_eq!(k.writes().len(), 26);
    assert!(k.writes().iter().all(|c| c.body["spec"]["taint"]["effect"] == json!("NoExecute")));
    let audit = state.join("tessera/audit.jsonl");
    let text = std::fs::read_to_string(&audit).unwrap_or_else(|e| panic!("{}: {e}", audit.display()));
    let records: Vec<Value> = text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    let kinds: Vec<&str> = records.iter().map(|r| r["record"].as_str().unwrap_or_default()).collect();
    assert_eq!(kinds, ["intent", "outcome"]);
    for r in &records {
        let t = &r["taint_rules"];
        assert_eq!((&t["card"], &t["count"]), (&json!("h100-dyn-01/3"), &json!(26)), "{r}");
        assert_eq!(t["created"][0], json!("tessera-evict-h100-dyn-01-gpu-3"));
    }
    assert_eq!(records[0]["plan"]["action"], json!({"action": "drain", "target": "h100-dyn-01/3", "evict": true}));
    assert!(!text.contains(TOKEN));
}
