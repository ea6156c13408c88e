//! Planning: from an action and the live fleet to the exact steps a backend will take, with
//! warnings and the guards' refusals. Planning never changes anything. This file chooses the
//! backend that can do the action (`Capabilities`) and does what every backend shares; each
//! backend's file (`sim.rs`, `nvml.rs`, `slurm.rs`, `kubernetes.rs`) writes its own steps.

use crate::model::mig::{LayoutSpec, parse_layout};
use crate::model::{Card, CardRef, Fleet, Node, SourceKind};

use super::{Action, Backend, Capabilities, NeedsCard, Options, Plan, Target, guard};

/// Why an action has no plan: its target or workload does not exist, or no backend can do it
/// there (a usage error).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("no node {0}")]
    NoNode(String),
    #[error("no card {0}")]
    NoCard(CardRef),
    #[error("no card with UUID {0}")]
    NoUuid(String),
    #[error("no node or card {0}")]
    NoNodeOrCard(String),
    /// No backend that reports the node can do the action (`what`, in words).
    #[error("no source of {node} can {what}")]
    NoBackend { node: String, what: &'static str },
    /// A backend that acts on one card was given a node.
    #[error("{target}: {} acts on one card: give NODE/INDEX", backend.as_str())]
    NeedsCard { target: String, backend: Backend },
    /// A bare job number that several workloads share (the first two named).
    #[error("{bare} is more than one workload ({first}, {second}, ...): give its prefix")]
    Ambiguous { bare: String, first: String, second: String },
    #[error("no workload {0} (it may have finished)")]
    NoWorkload(String),
    /// No backend preempts workloads of this id's kind.
    #[error("{0}: tessera preempts scheduler jobs (slurm:, k8s:, sim:), not bare processes")]
    NotPreemptible(String),
}

/// A plan that cannot be made is a usage error.
impl From<PlanError> for crate::error::CmdError {
    fn from(e: PlanError) -> Self {
        Self::Usage(e.to_string())
    }
}

/// What `backend` can do, from its own file.
pub fn capabilities(backend: Backend) -> &'static dyn Capabilities {
    match backend {
        Backend::Simulated => &super::sim::Sim,
        Backend::Nvml => &super::nvml::Nvml,
        Backend::Slurm => &super::slurm::Slurm,
        Backend::Kubernetes => &super::kubernetes::Kubernetes,
    }
}

fn kind_of(fleet: &Fleet, source: &str) -> Option<SourceKind> {
    fleet.sources.iter().find(|s| s.name == source).map(|s| s.kind)
}

/// Who would carry out a repartition of a card on `node`, if anyone (the layout planner only
/// proposes what a backend can do).
pub fn repartition_backend(fleet: &Fleet, node: &Node) -> Option<Backend> {
    let any = Action::Repartition { target: String::new(), layout: String::new() };
    backend_for(fleet, node, None, &any).map(|b| b.0)
}

/// The source (and backend) that acts on a node for this action: the first backend, in
/// `Backend::ALL`'s order, that can do it and has a source reporting the node; for a card
/// Kubernetes allocates through DRA (or a node of such cards), Kubernetes first: its
/// scheduler is what must stop placing claims there (an NVML compute mode change would leave
/// DRA placing claims on the card).
fn backend_for(fleet: &Fleet, node: &Node, card: Option<&Card>, action: &Action) -> Option<(Backend, String)> {
    let dra = match card {
        Some(c) => c.dra.is_some(),
        None => node.cards.iter().any(|c| c.dra.is_some()),
    };
    let order = if dra {
        let mut o = vec![Backend::Kubernetes];
        o.extend(Backend::ALL.into_iter().filter(|b| *b != Backend::Kubernetes));
        o
    } else {
        Backend::ALL.to_vec()
    };
    order
        .into_iter()
        .filter(|b| can(capabilities(*b), action))
        .find_map(|b| node.sources.iter().find(|s| kind_of(fleet, s) == Some(b.source_kind())).map(|s| (b, s.clone())))
}

/// Whether a backend can do `action` at all.
fn can(caps: &dyn Capabilities, action: &Action) -> bool {
    match action {
        Action::Drain { .. } | Action::Undrain { .. } => caps.drain().is_some(),
        Action::Repartition { .. } => caps.repartition().is_some(),
        Action::Preempt { .. } => caps.preempt().is_some(),
    }
}

/// Build the plan. `Err` when the target or workload does not exist (a usage error).
pub fn plan(action: &Action, fleet: &Fleet, o: &Options) -> Result<Plan, PlanError> {
    match action {
        Action::Preempt { workload, .. } => preempt(action, workload, fleet, o),
        Action::Drain { target, .. } | Action::Undrain { target, .. } | Action::Repartition { target, .. } => {
            on_target(action, target, fleet, o)
        }
    }
}

/// The plan of a drain, undrain or repartition of `target` (a node or a card): the backend's
/// steps, the guards' refusals, or nothing to do where it is already as asked.
fn on_target(action: &Action, target: &str, fleet: &Fleet, o: &Options) -> Result<Plan, PlanError> {
    let (node, card) = resolve(fleet, target)?;
    let Some((backend, source)) = backend_for(fleet, node, card, action) else {
        let what = match action {
            Action::Repartition { .. } => "repartition MIG (Slurm cannot; run tessera on the GPU node)",
            _ => action.verb(),
        };
        return Err(PlanError::NoBackend { node: node.name.clone(), what });
    };
    let caps = capabilities(backend);
    let mut p = unwritten(action, fleet, o, target, (node, card), (backend, source));
    // `backend_for` chose a backend that can: neither is `None`.
    let wrote = match action {
        Action::Repartition { layout, .. } => caps.repartition().map(|write| write(&mut p, fleet, node, card, layout)),
        _ => caps.drain().map(|write| write(&mut p, node, card, matches!(action, Action::Drain { .. }), o)),
    };
    if wrote == Some(Err(NeedsCard)) {
        return Err(PlanError::NeedsCard { target: target.to_string(), backend });
    }
    // The card acted on; a card-level backend given a node (the simulator's drain of a
    // node's cards) says itself what it leaves alone.
    let on_card = card.filter(|c| caps.on_card(c));
    let node_drain = caps.on_cards() && card.is_none();
    guard_target(&mut p, action, node, on_card, o);
    if let Some(why) = nothing_to_do(action, node, on_card).filter(|_| !node_drain) {
        p.steps.clear();
        p.warnings.clear();
        p.second_confirmation = None;
        p.summary = format!("Nothing to do: {why}");
        p.nothing_to_do = Some(why);
        return Ok(p);
    }
    // A scheduler's drain or cordon may be someone else's: say whose before replacing it.
    if on_card.is_none()
        && !caps.on_cards()
        && let Some(reason) = node.reason.as_deref().filter(|_| !node.schedulable)
        && !reason.contains("tessera:")
    {
        p.warnings.push(format!("{} is already unschedulable, not by tessera: {reason}", node.name));
    }
    Ok(p)
}

/// The plan of `action` on `target` (`node`, or its `card`) by `backend` through `source`,
/// before the backend writes its steps: the source's refusals, and the card it names.
fn unwritten(
    action: &Action,
    fleet: &Fleet,
    o: &Options,
    target: &str,
    (node, card): (&Node, Option<&Card>),
    (backend, source): (Backend, String),
) -> Plan {
    let caps = capabilities(backend);
    Plan {
        action: action.clone(),
        backend,
        source: source.clone(),
        target: target.trim().to_string(),
        summary: String::new(),
        steps: Vec::new(),
        warnings: Vec::new(),
        blockers: guard::common(&o.ctx, &source, fleet.sources.iter().find(|s| s.name == source).map(|s| &s.health)),
        destructive: matches!(action, Action::Repartition { .. }),
        second_confirmation: None,
        nothing_to_do: None,
        // Schedulers act on the whole node, so the action names no card there (but
        // Kubernetes on a DRA card).
        card: card.filter(|c| caps.on_card(c)).map(|c| crate::model::CardRef::new(node.name.clone(), c.index)),
        wait_idle: o.wait_idle && backend == Backend::Simulated && matches!(action, Action::Repartition { .. }),
    }
}

/// The guards on the target itself: an eviction only where it is a DRA card, and an undrain
/// only of cards that may take work (`on_card`, or each card of `node`).
fn guard_target(p: &mut Plan, action: &Action, node: &Node, on_card: Option<&Card>, o: &Options) {
    if matches!(action, Action::Drain { evict: true, .. }) && on_card.and_then(|c| c.dra.as_ref()).is_none() {
        p.blockers.push(guard::Refusal::Backend(
            "--evict drains a DRA card by DeviceTaintRules with effect NoExecute; this target is not one \
             (drain it without --evict, then preempt what runs there)"
                .into(),
        ));
    }
    if let Action::Undrain { .. } = action {
        // A card that fell off the bus or lost memory must not take work unnoticed.
        let faults: Vec<String> = match on_card {
            Some(c) => c.health.fault().into_iter().collect(),
            None => {
                node.cards.iter().filter_map(|c| c.health.fault().map(|f| format!("card {}: {f}", c.index))).collect()
            }
        };
        let (refusals, second) = guard::undrain(&p.target, &faults, &o.ctx);
        p.blockers.extend(refusals);
        p.second_confirmation = second;
    }
}

/// The target is already as asked: drained, not drained, or already in the layout.
fn nothing_to_do(action: &Action, node: &Node, card: Option<&Card>) -> Option<String> {
    // A scheduler's drained node: Slurm's DRAIN states, a Kubernetes cordon.
    let node_drained = || node.reason.as_deref().is_some_and(|r| r.starts_with("drain") || r.contains("cordoned"));
    match (action, card) {
        // Through DRA, an eviction asks for more than a drain: every device kept off by a
        // NoExecute taint.
        (Action::Drain { evict: true, .. }, Some(c)) if c.dra.is_some() => {
            super::kubernetes::evicted(c).then(|| format!("{}/{} is already drained and evicted", node.name, c.index))
        }
        (Action::Drain { .. }, Some(c)) if c.draining => Some(format!("{}/{} is already drained", node.name, c.index)),
        // A DRA card with rules of tessera's left (a drain cut short) still has them to delete.
        (Action::Undrain { .. }, Some(c))
            if !c.draining && c.dra.as_ref().is_none_or(|d| d.tessera_rules().is_empty()) =>
        {
            Some(format!("{}/{} is not drained", node.name, c.index))
        }
        (Action::Drain { .. }, None) if node_drained() => Some(format!("{} is already drained", node.name)),
        (Action::Undrain { .. }, None) if node.schedulable => Some(format!("{} is not drained", node.name)),
        (Action::Repartition { layout, .. }, Some(c)) => {
            let spec = parse_layout(c.gpu_model()?, layout).ok()?;
            let same = match spec {
                LayoutSpec::Whole => !c.mig.enabled,
                LayoutSpec::Mig(_) => {
                    let mut want = super::placements(&spec);
                    let mut have: Vec<(String, u8)> =
                        c.mig.instances.iter().map(|i| (i.profile.clone(), i.start)).collect();
                    want.sort();
                    have.sort();
                    c.mig.enabled && c.mig.error.is_none() && want == have
                }
            };
            same.then(|| format!("{}/{} is already {layout}", node.name, c.index))
        }
        _ => None,
    }
}

fn resolve<'f>(fleet: &'f Fleet, target: &str) -> Result<(&'f Node, Option<&'f Card>), PlanError> {
    match Target::parse(target) {
        Target::Card(r) => {
            let node =
                fleet.nodes.iter().find(|n| n.name == r.node).ok_or_else(|| PlanError::NoNode(r.node.clone()))?;
            let card = node.cards.iter().find(|c| c.index == r.index).ok_or_else(|| PlanError::NoCard(r.clone()))?;
            Ok((node, Some(card)))
        }
        Target::Uuid(u) => fleet
            .nodes
            .iter()
            .find_map(|n| n.cards.iter().find(|c| c.uuid.as_deref() == Some(u.as_str())).map(|c| (n, Some(c))))
            .ok_or(PlanError::NoUuid(u)),
        Target::Node(name) => {
            let node = fleet.nodes.iter().find(|n| n.name == name).ok_or(PlanError::NoNodeOrCard(name))?;
            Ok((node, None))
        }
    }
}

/// The workload `id` names: itself, or a bare job number (`19`) that is exactly one
/// workload's (`sim:19`, `slurm:19`), as an operator types a scheduler's job id.
fn workload_named<'f>(fleet: &'f Fleet, id: &str) -> Result<&'f crate::model::Workload, PlanError> {
    if let Some(w) = fleet.workload(id) {
        return Ok(w);
    }
    let bare = id.trim();
    if !bare.is_empty() && !bare.contains(':') {
        let mut found = fleet.workloads.iter().filter(|w| w.id.split_once(':').is_some_and(|(_, b)| b == bare));
        match (found.next(), found.next()) {
            (Some(w), None) => return Ok(w),
            (Some(a), Some(b)) => {
                return Err(PlanError::Ambiguous { bare: bare.to_string(), first: a.id.clone(), second: b.id.clone() });
            }
            _ => {}
        }
    }
    Err(PlanError::NoWorkload(id.to_string()))
}

fn preempt(action: &Action, id: &str, fleet: &Fleet, o: &Options) -> Result<Plan, PlanError> {
    let w = workload_named(fleet, id)?;
    // From here on the workload's own id: the confirmation asks for it whole.
    let id = w.id.as_str();
    let prefix = id.split_once(':').map_or("", |(p, _)| p);
    let owner = Backend::ALL.into_iter().find(|b| capabilities(*b).workload_prefix() == Some(prefix));
    let Some((backend, write)) = owner.and_then(|b| Some((b, capabilities(b).preempt()?))) else {
        return Err(PlanError::NotPreemptible(id.to_string()));
    };
    let want = backend.source_kind();
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
        nothing_to_do: None,
        card: w.cards.first().cloned(),
        wait_idle: false,
    };
    let bare = id.split_once(':').map_or(id, |(_, b)| b);
    write(&mut p, w, bare, o);
    Ok(p)
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
