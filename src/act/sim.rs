//! The simulated cluster's plans: card drains (or a node's cards), repartitions that hold the
//! card and wait for it to be idle, with the time the simulator takes, checkpoint then requeue.

use super::{Capabilities, Drain, NeedsCard, Op, Options, Plan, Preempt, Repartition, step};
use crate::model::mig::LayoutSpec;
use crate::model::{Card, Fleet, Node, Workload};
use crate::sources::sim::SimOp;

/// Simulated seconds the simulator takes for MIG changes and a checkpoint.
const SIM_MIG_DESTROY_S: u64 = 2;
const SIM_MIG_CREATE_S: u64 = 4;
const SIM_CHECKPOINT_S: u64 = 45;
/// How long a repartition waits for its drained card's work to end (simulated seconds).
const SIM_HOLD_WAIT_S: u64 = 1800;

/// The simulated cluster: it drains cards (or a node's cards), repartitions cards and preempts
/// its jobs.
pub struct Sim;

impl Capabilities for Sim {
    fn on_cards(&self) -> bool {
        true
    }

    fn workload_prefix(&self) -> Option<&'static str> {
        Some("sim")
    }

    fn drain(&self) -> Option<Drain> {
        Some(drain)
    }

    fn repartition(&self) -> Option<Repartition> {
        Some(repartition)
    }

    fn preempt(&self) -> Option<Preempt> {
        Some(preempt)
    }
}

fn drain(p: &mut Plan, node: &Node, card: Option<&Card>, on: bool, _: &Options) -> Result<(), NeedsCard> {
    match card {
        Some(c) => drain_card(p, node, c, on),
        None => drain_node(p, node, on),
    }
    Ok(())
}

fn drain_card(p: &mut Plan, node: &Node, c: &Card, on: bool) {
    let verb = if on { "Drain" } else { "Undrain" };
    let (n, index) = (node.name.clone(), c.index);
    p.summary = format!("{verb} {}/{index}: {}", n, if on { "no new work starts on it" } else { "accept new work" });
    let op = if on { SimOp::Drain { node: n.clone(), index } } else { SimOp::Undrain { node: n.clone(), index } };
    p.steps.push(step(format!("{verb} the card"), format!("simulator: {op}"), Op::Sim { op }));
}

/// A whole node: each of its cards, one step each (as cordoning a node stops new work on all
/// of them). Cards already as asked are left out.
fn drain_node(p: &mut Plan, node: &Node, on: bool) {
    let verb = if on { "Drain" } else { "Undrain" };
    let n = node.name.clone();
    let todo: Vec<&Card> = node.cards.iter().filter(|c| c.draining != on).collect();
    p.summary = format!(
        "{verb} {n}: {} of its {} cards ({})",
        todo.len(),
        node.cards.len(),
        if on { "no new work starts on them" } else { "accept new work" }
    );
    if todo.is_empty() {
        let why = format!("every card of {n} is already {}", if on { "drained" } else { "taking work" });
        p.summary = format!("Nothing to do: {why}");
        p.nothing_to_do = Some(why);
        return;
    }
    for c in todo {
        let index = c.index;
        let op = if on { SimOp::Drain { node: n.clone(), index } } else { SimOp::Undrain { node: n.clone(), index } };
        p.steps.push(step(format!("{verb} card {index}"), format!("simulator: {op}"), Op::Sim { op }));
    }
}

fn repartition(p: &mut Plan, _: &Fleet, node: &Node, card: Option<&Card>, layout: &str) -> Result<(), NeedsCard> {
    let c = card.ok_or(NeedsCard)?;
    // From here on the layout is where every instance lands.
    let Some((spec, layout)) = super::layout_on_card(p, node, c, layout) else { return Ok(()) };
    let whole = matches!(spec, LayoutSpec::Whole);
    let n = c.mig.instances.len();
    // The card is held first: new work that arrives while the operator confirms, or while
    // the instances change, cannot take it (a waiting job's plan lost its card to one).
    let hold = !c.draining;
    let (name, index) = (node.name.clone(), c.index);
    if hold {
        let op = SimOp::Drain { node: name.clone(), index };
        p.steps.push(step(
            "Drain the card (no new work takes it while it changes)",
            format!("simulator: {op}"),
            Op::Sim { op },
        ));
    }
    // Then it is changed only once idle: work that took it while the operator confirmed (or
    // that the last update had not shown yet) ends first. The step is in every plan, so a plan
    // is the same whoever holds the card; who does is said in a warning.
    let up_to = crate::units::duration::short(i64::try_from(SIM_HOLD_WAIT_S).unwrap_or(i64::MAX));
    let holders: Vec<&str> = c.holders().collect();
    if p.wait_idle && !holders.is_empty() {
        let given = if hold { "given back (undrained)" } else { "left drained" };
        p.warnings.insert(
            0,
            format!(
                "{name}/{index} was taken while the plan was confirmed ({}): the new plan drains it first so \
                 nothing else lands, waits up to {up_to} for that work to end, then changes it; if the work \
                 has not ended by then, the layout is not changed and the card is {given}",
                holders.join(", ")
            ),
        );
    }
    let op = SimOp::WaitIdle { node: name.clone(), index, up_to_s: SIM_HOLD_WAIT_S, give_back: hold };
    let what = if hold {
        format!("Wait until the card is idle (at most {up_to}; else undrain it and change nothing)")
    } else {
        format!("Wait until the card is idle (at most {up_to}; else change nothing)")
    };
    p.steps.push(step(what, format!("simulator: {op}"), Op::Sim { op }));
    if n > 0 {
        p.steps.push(step(
            format!("Destroy the {n} GPU instances and their compute instances"),
            "simulator: destroy instances",
            Op::Wait { seconds: SIM_MIG_DESTROY_S, why: "destroying instances".into() },
        ));
    }
    if c.mig.enabled == whole {
        p.warnings.push(
            "this changes MIG mode, which on real hardware needs a GPU reset; the simulator does it in place".into(),
        );
    }
    let op = SimOp::Repartition { node: node.name.clone(), index: c.index, layout: layout.to_string() };
    p.steps.push(step(format!("Create {layout}"), format!("simulator: {op}"), Op::Sim { op }));
    p.steps.push(step(
        "Wait for the instances to come up",
        "simulator: wait",
        Op::Wait { seconds: SIM_MIG_CREATE_S, why: "instances starting".into() },
    ));
    if hold {
        let op = SimOp::Undrain { node: name, index };
        p.steps.push(step(
            "Undrain the card: the waiting work can start on it",
            format!("simulator: {op}"),
            Op::Sim { op },
        ));
    }
    Ok(())
}

fn preempt(p: &mut Plan, w: &Workload, _: &str, _: &Options) {
    let id = w.id.as_str();
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
