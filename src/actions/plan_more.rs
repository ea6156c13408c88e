//! Planning of the two destructive actions: repartitioning a card and preempting a workload.

use crate::model::mig::{LayoutSpec, parse_layout};
use crate::model::{Card, Fleet, Node};
use crate::sources::sim::SimOp;

use super::super::guard;
use super::super::{Action, Backend, Op, Plan};
use super::{Options, SIM_CHECKPOINT_S, SIM_MIG_CREATE_S, SIM_MIG_DESTROY_S, program, shell_words, step};

pub(super) fn repartition(p: &mut Plan, fleet: &Fleet, node: &Node, card: Option<&Card>, layout: &str) {
    if p.backend == Backend::Kubernetes {
        return kube_config(p, fleet, node, layout);
    }
    let Some(c) = card else { return };
    p.blockers.extend(guard::repartition(c, layout));
    let Some(model) = c.gpu_model() else { return };
    let Ok(spec) = parse_layout(model, layout) else { return };
    let current: Vec<String> = c.mig.instances.iter().map(|i| format!("{}@{}", i.profile, i.start)).collect();
    let now = if c.mig.enabled { current.join(",") } else { "whole".into() };
    p.summary = format!("Repartition {}/{} ({}): {now} -> {layout}", node.name, c.index, model.name);
    let wanted: Vec<(String, u8)> = match &spec {
        LayoutSpec::Whole => Vec::new(),
        LayoutSpec::Mig(l) => {
            let mut v: Vec<(String, u8, u8)> = l.iter().map(|x| (x.profile.clone(), x.start, x.size)).collect();
            // Largest first, as NVIDIA's tools create them: big placements are the scarce ones.
            v.sort_by(|a, b| b.2.cmp(&a.2).then(a.1.cmp(&b.1)));
            v.into_iter().map(|(p, s, _)| (p, s)).collect()
        }
    };
    match p.backend {
        Backend::Simulated => {
            let n = c.mig.instances.len();
            if n > 0 {
                p.steps.push(step(
                    format!("Destroy the {n} GPU instances and their compute instances"),
                    "simulator: destroy instances",
                    Op::Wait { seconds: SIM_MIG_DESTROY_S, why: "destroying instances".into() },
                ));
            }
            if c.mig.enabled == matches!(spec, LayoutSpec::Whole) {
                p.warnings.push(
                    "this changes MIG mode, which on real hardware needs a GPU reset; the simulator does it in place"
                        .into(),
                );
            }
            let op = SimOp::Repartition { node: node.name.clone(), index: c.index, layout: layout.to_string() };
            p.steps.push(step(format!("Create {layout}"), format!("simulator: {op}"), Op::Sim { op }));
            p.steps.push(step(
                "Wait for the instances to come up",
                "simulator: wait",
                Op::Wait { seconds: SIM_MIG_CREATE_S, why: "instances starting".into() },
            ));
        }
        Backend::Nvml => {
            let whole = matches!(spec, LayoutSpec::Whole);
            if whole == c.mig.enabled {
                let to = if whole { "off" } else { "on" };
                p.blockers.push(if c.mig.pending == Some(!whole) {
                    format!(
                        "this needs MIG mode {to}, which is already pending: it takes effect after a GPU reset \
                         (nvidia-smi -i {} -r); tessera does not reset GPUs",
                        c.index
                    )
                } else {
                    format!(
                        "this needs MIG mode {to}, which takes effect only after a GPU reset (nvidia-smi -i {} -mig {}); \
                         tessera does not change MIG mode or reset GPUs",
                        c.index,
                        u8::from(!whole)
                    )
                });
                return;
            }
            if c.mig.enabled && c.mig.pending == Some(false) {
                p.warnings.push(
                    "MIG mode off is pending on this card: the new instances disappear at its next GPU reset".into(),
                );
            }
            for inst in &c.mig.instances {
                for ci in &inst.compute_instances {
                    p.steps.push(step(
                        format!(
                            "Destroy compute instance {} of GPU instance {} ({})",
                            ci.ci_id, inst.gi_id, inst.profile
                        ),
                        format!("nvmlComputeInstanceDestroy(GPU {} GI {} CI {})", c.index, inst.gi_id, ci.ci_id),
                        Op::NvmlDestroyComputeInstance { index: c.index, gi: inst.gi_id, ci: ci.ci_id },
                    ));
                }
                p.steps.push(step(
                    format!("Destroy GPU instance {} ({}@{})", inst.gi_id, inst.profile, inst.start),
                    format!("nvmlGpuInstanceDestroy(GPU {} GI {})", c.index, inst.gi_id),
                    Op::NvmlDestroyGpuInstance { index: c.index, gi: inst.gi_id },
                ));
            }
            for (profile, start) in &wanted {
                p.steps.push(step(
                    format!("Create GPU instance {profile} at slice {start}, with one full compute instance"),
                    format!(
                        "nvmlDeviceCreateGpuInstanceWithPlacement(GPU {}, {profile}, start {start}); \
                         nvmlGpuInstanceCreateComputeInstance(full)",
                        c.index
                    ),
                    Op::NvmlCreateGpuInstance { index: c.index, profile: profile.clone(), start: *start },
                ));
            }
            p.steps.push(step(
                "Read the layout back and compare it with the plan",
                format!("nvmlDeviceGetGpuInstances(GPU {})", c.index),
                Op::NvmlVerifyLayout { index: c.index, layout: wanted },
            ));
        }
        _ => {}
    }
}

/// Kubernetes repartitions a node by naming a mig-parted config in a label.
fn kube_config(p: &mut Plan, fleet: &Fleet, node: &Node, layout: &str) {
    let name = if layout == "whole" { "all-disabled".to_string() } else { layout.to_string() };
    p.summary = format!("Set MIG config {name} on node {} (GPU Operator)", node.name);
    p.warnings.push(format!(
        "the GPU Operator applies named configs to every GPU of {}; GPU pods there must be gone first",
        node.name
    ));
    if name.contains('@') || name.contains(',') {
        p.blockers.push(format!(
            "Kubernetes takes a named config from the mig-parted ConfigMap (e.g. all-balanced), not a layout: {layout}"
        ));
    }
    // Kubernetes names a pod's node, not its card: every active GPU workload on the node counts.
    let on_node = fleet.workloads.iter().filter(|w| w.state.is_active() && w.node.as_deref() == Some(&node.name));
    let holders: usize = on_node.count().max(node.cards.iter().map(|c| c.holders().count()).sum());
    if holders > 0 {
        p.blockers.push(format!("{holders} workloads hold GPUs on {}: drain (cordon) and wait first", node.name));
    }
    let key = "nvidia.com/mig.config";
    let patch = serde_json::json!({ "metadata": { "labels": { key: name } } });
    p.steps.push(step(
        format!("Label the node {key}={name}"),
        format!("PATCH /api/v1/nodes/{} (merge-patch) {patch}", node.name),
        Op::KubePatchNode { node: node.name.clone(), patch },
    ));
    p.steps.push(step(
        "Follow nvidia.com/mig.config.state to success or failed",
        format!("GET /api/v1/nodes/{} until label nvidia.com/mig.config.state is success", node.name),
        Op::KubeWaitLabel {
            node: node.name.clone(),
            key: "nvidia.com/mig.config.state".into(),
            success: "success".into(),
            failure: "failed".into(),
            timeout_s: 900,
        },
    ));
}

pub(super) fn preempt(action: &Action, id: &str, fleet: &Fleet, o: &Options) -> Result<Plan, String> {
    let w = fleet.workload(id).ok_or_else(|| format!("no workload {id} (it may have finished)"))?;
    let (backend, prefix) = match id.split_once(':').map(|(p, _)| p) {
        Some("sim") => (Backend::Simulated, "sim"),
        Some("slurm") => (Backend::Slurm, "slurm"),
        Some("k8s") => (Backend::Kubernetes, "k8s"),
        _ => return Err(format!("{id}: tessera preempts scheduler jobs (slurm:, k8s:, sim:), not bare processes")),
    };
    let want = match backend {
        Backend::Simulated => crate::model::SourceKind::Simulated,
        Backend::Slurm => crate::model::SourceKind::Slurm,
        _ => crate::model::SourceKind::Kubernetes,
    };
    let source = fleet.sources.iter().find(|s| s.kind == want).map(|s| s.name.clone()).unwrap_or_else(|| prefix.into());
    let health = fleet.sources.iter().find(|s| s.name == source).map(|s| &s.health);
    let mut blockers = guard::common(&o.ctx, &source, health);
    blockers.extend(guard::preempt(w, &o.ctx));
    let second = (blockers.is_empty() && guard::needs_second_confirmation(w, &o.ctx)).then(|| {
        format!("{id} has not run the {}-minute minimum: preempt it anyway?", o.ctx.min_runtime.as_secs() / 60)
    });
    let mut p = Plan {
        action: action.clone(),
        backend,
        source,
        target: id.to_string(),
        summary: format!("Preempt {id} ({}, {}): checkpoint, then back to the queue", w.name, w.kind.as_str()),
        steps: Vec::new(),
        warnings: Vec::new(),
        blockers,
        destructive: true,
        second_confirmation: second,
        card: w.cards.first().cloned(),
    };
    let bare = id.split_once(':').map_or(id, |(_, b)| b);
    match backend {
        Backend::Simulated => {
            let ck = SimOp::Checkpoint { workload: id.into() };
            p.steps.push(step("Ask the job to checkpoint", format!("simulator: {ck}"), Op::Sim { op: ck }));
            p.steps.push(step(
                format!("Wait {SIM_CHECKPOINT_S} s for the checkpoint"),
                "simulator: wait",
                Op::Wait { seconds: SIM_CHECKPOINT_S, why: "checkpointing".into() },
            ));
            let rq = SimOp::Requeue { workload: id.into() };
            p.steps.push(step("Requeue the job", format!("simulator: {rq}"), Op::Sim { op: rq }));
        }
        Backend::Slurm => {
            if w.requeueable == Some(false) {
                p.blockers.push(format!("{id} was submitted with --no-requeue: Slurm would refuse the requeue"));
            }
            let signal = &o.slurm.preempt_signal;
            let args = vec![format!("--signal={signal}"), "--batch".into(), bare.to_string()];
            let scancel = program(o, "scancel");
            p.steps.push(step(
                format!("Signal the job to checkpoint (SIG{signal})"),
                shell_words(&scancel, &args),
                Op::Run { program: scancel, args },
            ));
            let grace = o.slurm.preempt_grace.as_secs();
            p.steps.push(step(
                format!("Wait {grace} s for the checkpoint (slurm.preempt_grace)"),
                format!("sleep {grace}"),
                Op::Wait { seconds: grace, why: "checkpoint grace period".into() },
            ));
            let args = vec!["requeue".to_string(), bare.to_string()];
            let scontrol = program(o, "scontrol");
            p.steps.push(step("Requeue the job", shell_words(&scontrol, &args), Op::Run { program: scontrol, args }));
        }
        _ => {
            let (ns, pod) = bare.split_once('/').unwrap_or(("default", bare));
            p.summary = format!("Evict pod {ns}/{pod} ({}): its controller recreates it", w.kind.as_str());
            p.warnings.push("the Eviction API honours PodDisruptionBudgets: it may be refused (429)".into());
            p.steps.push(step(
                "Evict the pod (graceful termination: SIGTERM, then the grace period)",
                format!("POST /api/v1/namespaces/{ns}/pods/{pod}/eviction"),
                Op::KubeEvict { namespace: ns.into(), pod: pod.into() },
            ));
        }
    }
    Ok(p)
}
