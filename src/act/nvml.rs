//! NVML's plans: compute mode changes for drain and undrain, MIG instance destroy and create
//! with explicit placements, and reading the layout back; a MIG mode change is refused (it
//! needs a GPU reset). One plan step per call.

use super::{Capabilities, Drain, NeedsCard, Op, Options, Plan, Repartition, step};
use crate::model::mig::LayoutSpec;
use crate::model::{Card, ComputeMode, Fleet, Node};

/// NVML acts on one card: it drains and undrains by compute mode and repartitions within MIG
/// mode.
pub struct Nvml;

impl Capabilities for Nvml {
    fn on_cards(&self) -> bool {
        true
    }

    fn drain(&self) -> Option<Drain> {
        Some(drain)
    }

    fn repartition(&self) -> Option<Repartition> {
        Some(repartition)
    }
}

fn drain(p: &mut Plan, node: &Node, card: Option<&Card>, on: bool, o: &Options) -> Result<(), NeedsCard> {
    let c = card.ok_or(NeedsCard)?;
    let verb = if on { "Drain" } else { "Undrain" };
    let mode = if on { ComputeMode::Prohibited } else { o.previous_mode.unwrap_or(ComputeMode::Default) };
    p.summary = format!("{verb} {}/{}: compute mode {mode:?}", node.name, c.index);
    if on {
        p.warnings.push("running processes continue; no new CUDA context can start on the card".into());
        if c.mig.enabled {
            p.warnings.push(
                "MIG is on: some drivers refuse compute mode changes then; the step fails and nothing changes".into(),
            );
        }
    } else if o.previous_mode.is_none() {
        p.warnings.push("the mode before the drain is not in the audit log: restoring DEFAULT".into());
    }
    let call = format!("nvmlDeviceSetComputeMode(index {}, NVML_COMPUTEMODE_{})", c.index, mode_name(mode));
    p.steps.push(step("Set the compute mode", call, Op::NvmlSetComputeMode { index: c.index, mode }));
    Ok(())
}

/// Destroy every compute and GPU instance, create `wanted` (profile@start, largest first),
/// read the layout back. A change of MIG mode is refused: it needs a GPU reset.
fn repartition(p: &mut Plan, _: &Fleet, node: &Node, card: Option<&Card>, layout: &str) -> Result<(), NeedsCard> {
    let c = card.ok_or(NeedsCard)?;
    let Some((spec, _)) = super::layout_on_card(p, node, c, layout) else { return Ok(()) };
    let whole = matches!(spec, LayoutSpec::Whole);
    let wanted = super::placements(&spec);
    if whole == c.mig.enabled {
        let to = if whole { "off" } else { "on" };
        p.blockers.push(if c.mig.pending == Some(!whole) {
            format!(
                "this needs MIG mode {to}, which is already pending: it takes effect after a GPU reset \
                 (nvidia-smi -i {} -r); tessera does not reset GPUs",
                c.index
            )
            .into()
        } else {
            format!(
                "this needs MIG mode {to}, which takes effect only after a GPU reset (nvidia-smi -i {} -mig {}); \
                 tessera does not change MIG mode or reset GPUs",
                c.index,
                u8::from(!whole)
            )
            .into()
        });
        return Ok(());
    }
    if c.mig.enabled && c.mig.pending == Some(false) {
        p.warnings
            .push("MIG mode off is pending on this card: the new instances disappear at its next GPU reset".into());
    }
    for inst in &c.mig.instances {
        for ci in &inst.compute_instances {
            p.steps.push(step(
                format!("Destroy compute instance {} of GPU instance {} ({})", ci.ci_id, inst.gi_id, inst.profile),
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
    Ok(())
}

/// The compute mode as NVML names it (`NVML_COMPUTEMODE_` and this).
pub fn mode_name(m: ComputeMode) -> &'static str {
    match m {
        ComputeMode::Default => "DEFAULT",
        ComputeMode::ExclusiveProcess => "EXCLUSIVE_PROCESS",
        ComputeMode::Prohibited => "PROHIBITED",
    }
}
