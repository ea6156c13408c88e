use super::*;
use crate::actions::guard::Refusal;
use crate::config::Config;
use crate::model::{ComputeMode, MigState, SourceHealth, SourceStatus, Workload, WorkloadKind, WorkloadState};
use chrono::{DateTime, Utc};

fn now() -> DateTime<Utc> {
    DateTime::from_timestamp(1_800_000_000, 0).unwrap_or_default()
}

fn opts() -> Options {
    Options::new(&Config::default(), false, now())
}

/// One node `n1` reported by one source of `kind`, with an A100 in MIG mode (3g.40gb@0 held
/// by `holder`, 2g.20gb@4) and an idle whole A100.
fn fleet(kind: SourceKind, holder: Option<&str>) -> Fleet {
    let mut mig = Card { index: 0, model: "NVIDIA A100-SXM4-80GB".into(), ..Card::default() };
    mig.mig = MigState::from_layout(&mig.model, "3g.40gb@0,2g.20gb@4");
    if let Some(h) = holder {
        mig.mig.instances[0].workloads.push(h.into());
    }
    let whole = Card { index: 1, model: "NVIDIA A100-SXM4-80GB".into(), ..Card::default() };
    let name = kind.as_str().to_string();
    let node = Node { cards: vec![mig, whole], sources: vec![name.clone()], ..Node::new("n1") };
    let status = SourceStatus {
        name,
        kind,
        health: SourceHealth::Live { at: now() },
        interval: std::time::Duration::from_secs(1),
        note: None,
        last_ok: None,
        reported: Default::default(),
        queue: false,
    };
    let mut f = Fleet { nodes: vec![node], sources: vec![status], ..Fleet::default() };
    let mut w = Workload::new("slurm:7", "train", WorkloadKind::Training, WorkloadState::Running);
    w.started_at = Some(now() - chrono::Duration::hours(2));
    let mut i = Workload::new("slurm:8", "serve", WorkloadKind::Inference, WorkloadState::Running);
    i.started_at = w.started_at;
    f.workloads = vec![w, i];
    f.index_workloads();
    f
}

fn calls(p: &Plan) -> Vec<&str> {
    p.steps.iter().map(|s| s.call.as_str()).collect()
}

#[test]
fn nvml_repartition_destroys_then_creates_largest_first_then_verifies() {
    let f = fleet(SourceKind::Nvml, None);
    let a = Action::Repartition { target: "n1/0".into(), layout: "1g.10gb@6,4g.40gb@0,2g.20gb@4".into() };
    let p = plan(&a, &f, &opts()).unwrap_or_else(|e| panic!("{e}"));
    assert!(p.allowed(), "{:?}", p.blockers);
    assert!(p.destructive);
    assert_eq!(
        calls(&p),
        vec![
            "nvmlComputeInstanceDestroy(GPU 0 GI 1 CI 0)",
            "nvmlGpuInstanceDestroy(GPU 0 GI 1)",
            "nvmlComputeInstanceDestroy(GPU 0 GI 2 CI 0)",
            "nvmlGpuInstanceDestroy(GPU 0 GI 2)",
            "nvmlDeviceCreateGpuInstanceWithPlacement(GPU 0, 4g.40gb, start 0); nvmlGpuInstanceCreateComputeInstance(full)",
            "nvmlDeviceCreateGpuInstanceWithPlacement(GPU 0, 2g.20gb, start 4); nvmlGpuInstanceCreateComputeInstance(full)",
            "nvmlDeviceCreateGpuInstanceWithPlacement(GPU 0, 1g.10gb, start 6); nvmlGpuInstanceCreateComputeInstance(full)",
            "nvmlDeviceGetGpuInstances(GPU 0)",
        ]
    );
}

/// #47: on the simulated cluster a layout change holds its card: drained first (new work that
/// arrives meanwhile cannot take it), undrained last; a card already drained is left drained.
#[test]
fn a_simulated_repartition_holds_its_card_while_it_changes() {
    let mut f = fleet(SourceKind::Simulated, None);
    let a = Action::Repartition { target: "n1/1".into(), layout: "3g.40gb@0,3g.40gb@4".into() };
    let p = plan(&a, &f, &opts()).unwrap_or_else(|e| panic!("{e}"));
    let c = calls(&p);
    assert_eq!(c.first().copied(), Some("simulator: drain n1/1"), "{c:?}");
    assert_eq!(c.last().copied(), Some("simulator: undrain n1/1"), "{c:?}");
    f.nodes[0].cards[1].draining = true;
    let p = plan(&a, &f, &opts()).unwrap_or_else(|e| panic!("{e}"));
    assert!(calls(&p).iter().all(|c| !c.contains("drain")), "{:?}", calls(&p));
}

#[test]
fn mig_mode_changes_and_busy_cards_are_refused() {
    let f = fleet(SourceKind::Nvml, Some("slurm:7"));
    let busy = plan(&Action::Repartition { target: "n1/0".into(), layout: "whole".into() }, &f, &opts());
    let busy = busy.unwrap_or_else(|e| panic!("{e}"));
    assert!(busy.blockers.iter().any(|b| b.to_string().contains("drain it first")), "{:?}", busy.blockers);
    let to_mig = plan(&Action::Repartition { target: "n1/1".into(), layout: "7g.80gb".into() }, &f, &opts());
    let to_mig = to_mig.unwrap_or_else(|e| panic!("{e}"));
    assert!(to_mig.blockers.iter().any(|b| b.to_string().contains("GPU reset")), "{:?}", to_mig.blockers);
    assert!(to_mig.steps.is_empty());
    let invalid = plan(&Action::Repartition { target: "n1/1".into(), layout: "3g.40gb@1".into() }, &f, &opts());
    assert!(invalid.unwrap_or_else(|e| panic!("{e}")).blockers.iter().any(|b| b.to_string().contains("not valid")));
}

#[test]
fn nvml_drain_and_undrain_restore_the_previous_mode() {
    let f = fleet(SourceKind::Nvml, None);
    let p = plan(&Action::Drain { target: "n1/1".into(), evict: false }, &f, &opts()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(calls(&p), vec!["nvmlDeviceSetComputeMode(index 1, NVML_COMPUTEMODE_PROHIBITED)"]);
    let mut o = opts();
    o.previous_mode = Some(ComputeMode::ExclusiveProcess);
    let mut f = f;
    f.nodes[0].cards[1].draining = true;
    let p = plan(&Action::Undrain { target: "n1/1".into(), force: false }, &f, &o).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(calls(&p), vec!["nvmlDeviceSetComputeMode(index 1, NVML_COMPUTEMODE_EXCLUSIVE_PROCESS)"]);
    assert!(plan(&Action::Drain { target: "n1".into(), evict: false }, &f, &opts()).is_err(), "NVML needs a card");
}

#[test]
fn slurm_acts_on_nodes_and_preempts_with_signal_grace_requeue() {
    let f = fleet(SourceKind::Slurm, None);
    let p = plan(&Action::Drain { target: "n1/0".into(), evict: false }, &f, &opts()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(p.backend, Backend::Slurm);
    assert!(p.warnings[0].contains("Slurm drains whole nodes"));
    assert!(calls(&p)[0].starts_with("scontrol update NodeName=n1 State=DRAIN 'Reason=tessera: "), "{}", calls(&p)[0]);
    let p = plan(&Action::Preempt { workload: "slurm:7".into(), force: false }, &f, &opts());
    let p = p.unwrap_or_else(|e| panic!("{e}"));
    assert!(p.allowed(), "{:?}", p.blockers);
    assert_eq!(calls(&p), vec!["scancel --signal=USR1 --batch 7", "sleep 120", "scontrol requeue 7"]);
    let mut g = f.clone();
    g.workloads[0].requeueable = Some(false);
    let p = plan(&Action::Preempt { workload: "slurm:7".into(), force: false }, &g, &opts());
    assert!(p.unwrap_or_else(|e| panic!("{e}")).blockers[0].to_string().contains("--no-requeue"));
    let p = plan(&Action::Preempt { workload: "slurm:8".into(), force: true }, &f, &opts());
    assert!(p.unwrap_or_else(|e| panic!("{e}")).blockers[0].to_string().contains("inference is never preempted"));
    let r = plan(&Action::Repartition { target: "n1/1".into(), layout: "whole".into() }, &f, &opts());
    assert!(r.err().map(|e| e.to_string()).unwrap_or_default().contains("Slurm cannot"));
    assert!(plan(&Action::Preempt { workload: "slurm:99".into(), force: false }, &f, &opts()).is_err());
    assert!(plan(&Action::Preempt { workload: "pid:42".into(), force: false }, &f, &opts()).is_err());
}

#[test]
fn kubernetes_cordons_labels_and_evicts() {
    let mut f = fleet(SourceKind::Kubernetes, None);
    let p = plan(&Action::Drain { target: "n1".into(), evict: false }, &f, &opts()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(calls(&p), vec![r#"PATCH /api/v1/nodes/n1 (merge-patch) {"spec":{"unschedulable":true}}"#]);
    let a = Action::Repartition { target: "n1".into(), layout: "all-balanced".into() };
    let p = plan(&a, &f, &opts()).unwrap_or_else(|e| panic!("{e}"));
    assert!(p.allowed(), "{:?}", p.blockers);
    assert_eq!(
        calls(&p)[0],
        r#"PATCH /api/v1/nodes/n1 (merge-patch) {"metadata":{"labels":{"nvidia.com/mig.config":"all-balanced"}}}"#
    );
    let a = Action::Repartition { target: "n1".into(), layout: "3g.40gb@0".into() };
    assert!(!plan(&a, &f, &opts()).unwrap_or_else(|e| panic!("{e}")).allowed());
    let mut w = Workload::new("k8s:ml/train-0", "train-0", WorkloadKind::Training, WorkloadState::Running);
    w.started_at = Some(now() - chrono::Duration::hours(1));
    f.workloads.push(w);
    f.index_workloads();
    let p = plan(&Action::Preempt { workload: "k8s:ml/train-0".into(), force: false }, &f, &opts());
    assert_eq!(calls(&p.unwrap_or_else(|e| panic!("{e}"))), vec!["POST /api/v1/namespaces/ml/pods/train-0/eviction"]);
}

#[test]
fn stale_sources_and_read_only_refuse() {
    let mut f = fleet(SourceKind::Slurm, None);
    f.sources[0].health = SourceHealth::Stale { since: now(), error: None };
    let p = plan(&Action::Drain { target: "n1".into(), evict: false }, &f, &opts()).unwrap_or_else(|e| panic!("{e}"));
    assert!(p.blockers[0].to_string().contains("stale"));
    let f = fleet(SourceKind::Slurm, None);
    let mut o = opts();
    o.ctx.read_only = true;
    let p = plan(&Action::Drain { target: "n1".into(), evict: false }, &f, &o).unwrap_or_else(|e| panic!("{e}"));
    assert!(p.blockers[0].to_string().contains("read-only"));
    assert!(plan(&Action::Drain { target: "nope/0".into(), evict: false }, &f, &opts()).is_err());
}

#[test]
fn undraining_an_unhealthy_card_needs_force_and_a_second_answer() {
    for kind in [SourceKind::Simulated, SourceKind::Nvml, SourceKind::Slurm] {
        let mut f = fleet(kind, None);
        f.nodes[0].cards[1].draining = true;
        f.nodes[0].cards[1].health.last_xid = Some(79);
        f.nodes[0].reason = Some("drain: tessera: ops: XID 79".into());
        f.nodes[0].schedulable = false;
        let target = if kind == SourceKind::Slurm { "n1" } else { "n1/1" };
        let undrain = |force| Action::Undrain { target: target.into(), force };
        let p = plan(&undrain(false), &f, &opts()).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            matches!(p.blockers.as_slice(), [Refusal::Unhealthy { fault, .. }] if fault.contains("XID 79")),
            "{kind:?}: {:?}",
            p.blockers
        );
        assert!(p.blockers[0].forcible());
        let mut forced = opts();
        forced.ctx.force = true;
        let p = plan(&undrain(true), &f, &forced).unwrap_or_else(|e| panic!("{e}"));
        assert!(p.allowed(), "{kind:?}: {:?}", p.blockers);
        assert!(p.second_confirmation.as_deref().is_some_and(|q| q.contains("unhealthy (")), "{kind:?}");
    }
}

#[test]
fn no_ops_have_nothing_to_do() {
    let mut f = fleet(SourceKind::Nvml, None);
    let p =
        plan(&Action::Undrain { target: "n1/1".into(), force: false }, &f, &opts()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(p.nothing_to_do.as_deref(), Some("n1/1 is not drained"));
    assert!(p.steps.is_empty());
    f.nodes[0].cards[1].draining = true;
    let p = plan(&Action::Drain { target: "n1/1".into(), evict: false }, &f, &opts()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(p.nothing_to_do.as_deref(), Some("n1/1 is already drained"));
    let whole = Action::Repartition { target: "n1/1".into(), layout: "whole".into() };
    let p = plan(&whole, &f, &opts()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((p.nothing_to_do.as_deref(), p.steps.len()), (Some("n1/1 is already whole"), 0));
    // The same layout written in another order is the same layout.
    let same = Action::Repartition { target: "n1/0".into(), layout: "2g.20gb@4,3g.40gb@0".into() };
    assert!(plan(&same, &f, &opts()).unwrap_or_else(|e| panic!("{e}")).nothing_to_do.is_some());
    let other = Action::Repartition { target: "n1/0".into(), layout: "3g.40gb@0,3g.40gb@4".into() };
    assert!(plan(&other, &f, &opts()).unwrap_or_else(|e| panic!("{e}")).nothing_to_do.is_none());
    let s = fleet(SourceKind::Slurm, None);
    let p = plan(&Action::Undrain { target: "n1".into(), force: false }, &s, &opts()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(p.nothing_to_do.as_deref(), Some("n1 is not drained"));
}

#[test]
fn each_backend_says_what_it_can_do() {
    let can = |b: Backend| {
        let c = capabilities(b);
        (c.on_cards(), c.drain().is_some(), c.repartition().is_some(), c.preempt().is_some(), c.workload_prefix())
    };
    assert_eq!(can(Backend::Simulated), (true, true, true, true, Some("sim")));
    assert_eq!(can(Backend::Nvml), (true, true, true, false, None));
    assert_eq!(can(Backend::Slurm), (false, true, false, true, Some("slurm")));
    assert_eq!(can(Backend::Kubernetes), (false, true, true, true, Some("k8s")));
}

/// Only the simulator can wait for a busy card: asked to, the other backends still refuse it.
#[test]
fn only_the_simulator_waits_for_a_busy_card() {
    let f = fleet(SourceKind::Nvml, Some("slurm:7"));
    let mut o = opts();
    o.wait_idle = true;
    let p = plan(&Action::Repartition { target: "n1/0".into(), layout: "whole".into() }, &f, &o);
    let p = p.unwrap_or_else(|e| panic!("{e}"));
    assert!(!p.wait_idle && p.blockers.iter().any(|b| b.is_card_busy()), "{:?}", p.blockers);
    let f = fleet(SourceKind::Simulated, Some("sim:7"));
    let p = plan(&Action::Repartition { target: "n1/0".into(), layout: "whole".into() }, &f, &o);
    let p = p.unwrap_or_else(|e| panic!("{e}"));
    assert!(p.wait_idle && !p.blockers.iter().any(|b| b.is_card_busy()), "{:?}", p.blockers);
}
