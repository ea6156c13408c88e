//! Slurm's plans: node drains and resumes with `scontrol`, preemption as a checkpoint signal
//! (`scancel --signal --batch`), a grace period and `scontrol requeue`.

use super::{Capabilities, Drain, NeedsCard, Op, Options, Plan, Preempt, step};
use crate::model::{Card, Node, Workload};

/// Slurm acts on whole nodes: it drains and resumes them and preempts its jobs; it cannot
/// repartition.
pub struct Slurm;

impl Capabilities for Slurm {
    fn workload_prefix(&self) -> Option<&'static str> {
        Some("slurm")
    }

    fn drain(&self) -> Option<Drain> {
        Some(drain)
    }

    fn preempt(&self) -> Option<Preempt> {
        Some(preempt)
    }
}

fn drain(p: &mut Plan, node: &Node, _: Option<&Card>, on: bool, o: &Options) -> Result<(), NeedsCard> {
    let verb = if on { "Drain" } else { "Undrain" };
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
    Ok(())
}

fn preempt(p: &mut Plan, w: &Workload, bare: &str, o: &Options) {
    if w.requeueable == Some(false) {
        p.blockers.push(super::guard::Refusal::NotRequeueable { id: w.id.clone() });
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
