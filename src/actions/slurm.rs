//! Slurm as a backend: node drains and resumes with `scontrol`, preemption as a checkpoint
//! signal (`scancel --signal --batch`), a grace period and `scontrol requeue`; and running
//! those commands (never through a shell) with a timeout.

use std::time::Duration;

use futures_util::future::BoxFuture;

use super::{Capabilities, Drain, Env, NeedsCard, Op, Options, Plan, Preempt, Ran, step};
use crate::model::{Card, Node, Workload};
use crate::process::RunError;

/// Why a Slurm command did not do its work.
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum SlurmStepError {
    /// Not a command to run.
    #[error("the Slurm executor cannot run {0:?}")]
    CannotRun(Box<Op>),
    /// The command could not run to its end (not found, timed out, flooded its output).
    #[error("{program}: {source}")]
    Run { program: String, source: RunError },
    /// It ended with an error: its exit code (`None`: a signal) and stderr's first line.
    #[error(
        "{program} exited with {}: {}",
        code.map_or_else(|| "a signal".into(), |c| format!("code {c}")),
        stderr.as_deref().unwrap_or("no message")
    )]
    Exited { program: String, code: Option<i32>, stderr: Option<String> },
}

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

    fn run<'a>(&'a self, op: &'a Op, env: &'a Env) -> BoxFuture<'a, Ran> {
        Box::pin(async move {
            match op {
                Op::Run { program, args } => Ok((run(program, args, env).await?, None)),
                other => Err(SlurmStepError::CannotRun(Box::new(other.clone())).into()),
            }
        })
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

/// Run a command (no shell) with a timeout, holding the action's lock while it runs; stdout's
/// first line, or an error with stderr's.
async fn run(program: &str, args: &[String], env: &Env) -> Result<String, SlurmStepError> {
    let timeout = if env.command_timeout.is_zero() { Duration::from_secs(30) } else { env.command_timeout };
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    // scontrol answers in a line or two: a megabyte is a flood.
    let out = crate::process::run_holding(program, &args, timeout, 1 << 20, env.hold.as_deref())
        .await
        .map_err(|source| SlurmStepError::Run { program: program.to_string(), source })?;
    let first =
        |b: &[u8]| String::from_utf8_lossy(b).lines().map(str::trim).find(|l| !l.is_empty()).map(str::to_string);
    if out.status.success() {
        Ok(first(&out.stdout).unwrap_or_else(|| "ok".into()))
    } else {
        Err(SlurmStepError::Exited {
            program: program.to_string(),
            code: out.status.code(),
            stderr: first(&out.stderr),
        })
    }
}
