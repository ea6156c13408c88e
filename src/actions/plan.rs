//! Planning: from an action and the live fleet to the exact steps a backend will take, with
//! warnings and the guards' refusals. Planning never changes anything.

use crate::config::Config;
use crate::model::{Card, ComputeMode, Fleet, Node, SourceKind};
use crate::sources::sim::SimOp;

use super::guard::{self, Context};
use super::{Action, Backend, Op, Plan, Step, Target};

/// Settings planning needs beyond the fleet.
#[derive(Debug, Clone)]
pub struct Options {
    pub ctx: Context,
    pub slurm: crate::config::Slurm,
    /// Who acts, for Slurm's reason and the audit (`$USER`).
    pub user: String,
    /// The compute mode a card had before tessera drained it, where the audit log knows it.
    pub previous_mode: Option<ComputeMode>,
}

impl Options {
    pub fn new(cfg: &Config, force: bool, now: chrono::DateTime<chrono::Utc>) -> Self {
        let ctx = Context { read_only: cfg.read_only, force, min_runtime: cfg.policy.min_runtime, now };
        Self { ctx, slurm: cfg.slurm.clone(), user: super::audit::user(), previous_mode: None }
    }
}

/// Simulated seconds the simulator takes for MIG changes and a checkpoint.
const SIM_MIG_DESTROY_S: u64 = 2;
const SIM_MIG_CREATE_S: u64 = 4;
const SIM_CHECKPOINT_S: u64 = 45;

fn step(what: impl Into<String>, call: impl Into<String>, op: Op) -> Step {
    Step { what: what.into(), call: call.into(), op }
}

fn kind_of(fleet: &Fleet, source: &str) -> Option<SourceKind> {
    fleet.sources.iter().find(|s| s.name == source).map(|s| s.kind)
}

/// The source (and backend) that acts on a node for this action, in order of preference.
fn backend_for(fleet: &Fleet, node: &Node, action: &Action) -> Option<(Backend, String)> {
    let prefs: &[Backend] = match action {
        Action::Repartition { .. } => &[Backend::Simulated, Backend::Nvml, Backend::Kubernetes],
        _ => &[Backend::Simulated, Backend::Nvml, Backend::Slurm, Backend::Kubernetes],
    };
    let of = |k: SourceKind| match k {
        SourceKind::Simulated => Some(Backend::Simulated),
        SourceKind::Nvml => Some(Backend::Nvml),
        SourceKind::Slurm => Some(Backend::Slurm),
        SourceKind::Kubernetes => Some(Backend::Kubernetes),
        _ => None,
    };
    prefs.iter().find_map(|want| {
        node.sources.iter().find(|s| kind_of(fleet, s).and_then(of) == Some(*want)).map(|s| (*want, s.clone()))
    })
}

/// Build the plan. `Err` when the target or workload does not exist (a usage error).
pub fn plan(action: &Action, fleet: &Fleet, o: &Options) -> Result<Plan, String> {
    match action {
        Action::Preempt { workload, .. } => preempt(action, workload, fleet, o),
        Action::Drain { target } | Action::Undrain { target } | Action::Repartition { target, .. } => {
            let (node, card) = resolve(fleet, target)?;
            let Some((backend, source)) = backend_for(fleet, node, action) else {
                let what = match action {
                    Action::Repartition { .. } => "repartition MIG (Slurm cannot; run tessera on the GPU node)",
                    _ => action.verb(),
                };
                return Err(format!("no source of {} can {what}", node.name));
            };
            let mut p = Plan {
                action: action.clone(),
                backend,
                source: source.clone(),
                target: target.trim().to_string(),
                summary: String::new(),
                steps: Vec::new(),
                warnings: Vec::new(),
                blockers: guard::common(
                    &o.ctx,
                    &source,
                    fleet.sources.iter().find(|s| s.name == source).map(|s| &s.health),
                ),
                destructive: matches!(action, Action::Repartition { .. }),
                second_confirmation: None,
                // Schedulers act on the whole node, so the action names no card there.
                card: card
                    .filter(|_| matches!(backend, Backend::Simulated | Backend::Nvml))
                    .map(|c| crate::model::CardRef::new(node.name.clone(), c.index)),
            };
            let card_level = matches!(backend, Backend::Simulated | Backend::Nvml);
            if card_level && card.is_none() {
                return Err(format!("{target}: {} acts on one card: give NODE/INDEX", backend.as_str()));
            }
            match action {
                Action::Repartition { layout, .. } => repartition(&mut p, fleet, node, card, layout),
                _ => drain(&mut p, node, card, matches!(action, Action::Drain { .. }), o),
            }
            // A scheduler's drain or cordon may be someone else's: say whose before replacing it.
            if matches!(backend, Backend::Slurm | Backend::Kubernetes)
                && let Some(reason) = node.reason.as_deref().filter(|_| !node.schedulable)
                && !reason.contains("tessera:")
            {
                p.warnings.push(format!("{} is already unschedulable, not by tessera: {reason}", node.name));
            }
            Ok(p)
        }
    }
}

fn resolve<'f>(fleet: &'f Fleet, target: &str) -> Result<(&'f Node, Option<&'f Card>), String> {
    match Target::parse(target) {
        Target::Card(r) => {
            let node = fleet.nodes.iter().find(|n| n.name == r.node).ok_or_else(|| format!("no node {}", r.node))?;
            let card = node.cards.iter().find(|c| c.index == r.index).ok_or_else(|| format!("no card {r}"))?;
            Ok((node, Some(card)))
        }
        Target::Uuid(u) => fleet
            .nodes
            .iter()
            .find_map(|n| n.cards.iter().find(|c| c.uuid.as_deref() == Some(u.as_str())).map(|c| (n, Some(c))))
            .ok_or_else(|| format!("no card with UUID {u}")),
        Target::Node(name) => {
            let node = fleet.nodes.iter().find(|n| n.name == name).ok_or_else(|| format!("no node or card {name}"))?;
            Ok((node, None))
        }
    }
}

fn drain(p: &mut Plan, node: &Node, card: Option<&Card>, on: bool, o: &Options) {
    let verb = if on { "Drain" } else { "Undrain" };
    match (p.backend, card) {
        (Backend::Simulated, Some(c)) => {
            let (n, index) = (node.name.clone(), c.index);
            p.summary =
                format!("{verb} {}/{index}: {}", n, if on { "no new work starts on it" } else { "accept new work" });
            let op =
                if on { SimOp::Drain { node: n.clone(), index } } else { SimOp::Undrain { node: n.clone(), index } };
            p.steps.push(step(format!("{verb} the card"), format!("simulator: {op}"), Op::Sim { op }));
        }
        (Backend::Nvml, Some(c)) => {
            let mode = if on { ComputeMode::Prohibited } else { o.previous_mode.unwrap_or(ComputeMode::Default) };
            p.summary = format!("{verb} {}/{}: compute mode {mode:?}", node.name, c.index);
            if on {
                p.warnings.push("running processes continue; no new CUDA context can start on the card".into());
                if c.mig.enabled {
                    p.warnings.push(
                        "MIG is on: some drivers refuse compute mode changes then; the step fails and nothing changes"
                            .into(),
                    );
                }
            } else if o.previous_mode.is_none() {
                p.warnings.push("the mode before the drain is not in the audit log: restoring DEFAULT".into());
            }
            let call = format!("nvmlDeviceSetComputeMode(index {}, NVML_COMPUTEMODE_{})", c.index, mode_name(mode));
            p.steps.push(step("Set the compute mode", call, Op::NvmlSetComputeMode { index: c.index, mode }));
        }
        (Backend::Slurm, _) => {
            let state = if on { "DRAIN" } else { "RESUME" };
            p.summary = format!("{verb} node {} in Slurm (State={state})", node.name);
            p.warnings.push(format!(
                "Slurm drains whole nodes: all {} GPUs of {} stop taking new jobs; running jobs continue",
                node.cards.len().max(node.capacity.iter().map(|c| c.total as usize).sum()),
                node.name
            ));
            let mut args = vec!["update".to_string(), format!("NodeName={}", node.name), format!("State={state}")];
            if on {
                args.push(format!("Reason=tessera: {}: drained from tessera", o.user));
            }
            let program = program(o, "scontrol");
            let call = shell_words(&program, &args);
            p.steps.push(step(format!("{verb} the node"), call, Op::Run { program, args }));
        }
        (Backend::Kubernetes, _) => {
            p.summary = format!("{} node {} (Kubernetes)", if on { "Cordon" } else { "Uncordon" }, node.name);
            p.warnings.push(format!("Kubernetes cordons whole nodes: no new pods on any GPU of {}", node.name));
            let patch = serde_json::json!({ "spec": { "unschedulable": on } });
            let call = format!("PATCH /api/v1/nodes/{} (merge-patch) {patch}", node.name);
            p.steps.push(step(format!("{verb} the node"), call, Op::KubePatchNode { node: node.name.clone(), patch }));
        }
        _ => p.blockers.push("this backend cannot act on a whole node".into()),
    }
}

fn mode_name(m: ComputeMode) -> &'static str {
    match m {
        ComputeMode::Default => "DEFAULT",
        ComputeMode::ExclusiveProcess => "EXCLUSIVE_PROCESS",
        ComputeMode::Prohibited => "PROHIBITED",
    }
}

fn program(o: &Options, name: &str) -> String {
    o.slurm.commands_dir.as_ref().map_or_else(|| name.to_string(), |d| d.join(name).display().to_string())
}

/// A command as a shell would need it typed, for display only (it is never run by a shell).
fn shell_words(program: &str, args: &[String]) -> String {
    let quote = |a: &str| {
        if a.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_=./:,@".contains(&b)) {
            a.to_string()
        } else {
            format!("'{}'", a.replace('\'', "'\\''"))
        }
    };
    std::iter::once(quote(program)).chain(args.iter().map(|a| quote(a))).collect::<Vec<_>>().join(" ")
}

#[path = "plan_more.rs"]
mod more;
use more::{preempt, repartition};

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
