//! Execution: run a plan's steps in order, each by its backend (`Capabilities::run`), with
//! per-step progress; stop at the first failure and say exactly which steps ran, never
//! retrying silently; the done steps that can be taken back (`Op::undo`: the DeviceTaintRules
//! of a drain through DRA) are, last first, and the outcome says how. Every executor refuses a plan with blockers and refuses everything in
//! read-only mode, whatever the caller checked before.

use std::time::Duration;

use tokio::sync::mpsc;

use super::{Backend, Env, Op, Outcome, Plan, Progress, Ran, StepResult};

/// Run `plan`. Progress goes to `progress` as it happens.
pub async fn execute(plan: &Plan, env: &Env, progress: Option<mpsc::UnboundedSender<Progress>>) -> Outcome {
    let mut results: Vec<StepResult> = plan
        .steps
        .iter()
        .map(|s| StepResult { what: s.what.clone(), call: s.call.clone(), status: "not run", message: None })
        .collect();
    let refuse = |why: String| Outcome {
        ok: false,
        steps: results.clone(),
        error: Some(why),
        reached: "nothing was changed".into(),
        previous_mode: None,
        rolled_back: Vec::new(),
    };
    if env.read_only {
        return refuse("read-only: the executor refuses every action".into());
    }
    if !plan.allowed() {
        return refuse(format!("refused: {}", super::guard::joined(&plan.blockers)));
    }
    let send = |p: Progress| {
        if let Some(tx) = &progress {
            let _ = tx.send(p);
        }
    };
    let mut previous_mode = None;
    for (i, step) in plan.steps.iter().enumerate() {
        let wait_s = match &step.op {
            Op::Wait { seconds, .. } => Some(real_wait(*seconds, plan.backend, env).as_secs()),
            // A wait for an idle card: at most this long.
            Op::Sim { op: crate::sources::sim::SimOp::WaitIdle { up_to_s, .. } } => {
                Some(real_wait(*up_to_s, plan.backend, env).as_secs())
            }
            _ => None,
        };
        send(Progress::Started { step: i, wait_s });
        let r = run_op(&step.op, plan.backend, env).await;
        match r {
            Ok((message, prev)) => {
                previous_mode = previous_mode.or(prev);
                results[i].status = "done";
                results[i].message = Some(message.clone());
                send(Progress::Done { step: i, message });
            }
            Err(e) => {
                let message = e.to_string();
                results[i].status = "failed";
                results[i].message = Some(message.clone());
                send(Progress::Failed { step: i, message: message.clone() });
                let done: Vec<String> = results[..i].iter().map(|r| r.what.clone()).collect();
                let mut reached = reached_after_failure(&done, &message, e.stopped_at_timeout());
                let rolled_back = roll_back(&plan.steps[..i], plan.backend, env).await;
                if !rolled_back.is_empty() {
                    reached = rolled_back_words(&reached, &rolled_back, e.stopped_at_timeout());
                }
                return Outcome {
                    ok: false,
                    steps: results,
                    error: Some(message),
                    reached,
                    previous_mode,
                    rolled_back,
                };
            }
        }
    }
    let rolled_back = Vec::new();
    Outcome { ok: true, steps: results, error: None, reached: "every step done".into(), previous_mode, rolled_back }
}

/// Take back the done steps that can be, last first; each undo runs even when one before it
/// failed, and says how it went.
async fn roll_back(done: &[super::Step], backend: Backend, env: &Env) -> Vec<StepResult> {
    let mut out = Vec::new();
    for s in done.iter().rev() {
        let Some(undo) = s.op.undo() else { continue };
        let (what, call) = (undo.what, undo.call);
        let (status, message) = match run_op(&undo.op, backend, env).await {
            Ok((m, _)) => ("done", m),
            Err(e) => ("failed", e.to_string()),
        };
        out.push(StepResult { what, call, status, message: Some(message) });
    }
    out
}

/// Where a plan stands after its failure was rolled back.
fn rolled_back_words(reached: &str, undone: &[StepResult], stopped: bool) -> String {
    let failed: Vec<&StepResult> = undone.iter().filter(|r| r.status != "done").collect();
    let n = undone.len();
    let steps = if n == 1 { "1 done step".to_string() } else { format!("{n} done steps") };
    let unknown = if stopped { " (the failed step itself may have taken effect: check the target)" } else { "" };
    if failed.is_empty() {
        return format!("{reached}; rolled back: the {steps} taken back{unknown}");
    }
    let left: Vec<String> =
        failed.iter().map(|r| format!("{}: {}", r.what, r.message.as_deref().unwrap_or_default())).collect();
    format!(
        "{reached}; rollback of the {steps} failed for {} of them, left as they are: {}{unknown}",
        failed.len(),
        left.join("; ")
    )
}

/// Where a plan stands after the step after `done` failed with `message`. A command stopped at
/// its timeout (`process::RunError::Timeout`) may have done its work before it was stopped:
/// what it changed is unknown, never "nothing".
fn reached_after_failure(done: &[String], message: &str, stopped: bool) -> String {
    let n = done.len() + 1;
    let failed = if stopped {
        format!("step {n} was stopped at its timeout, so whether it took effect is unknown ({message})")
    } else {
        format!("step {n} failed: {message}")
    };
    match (done.is_empty(), stopped) {
        (true, false) => format!("step 1 failed; nothing was changed before it ({message})"),
        (true, true) => format!("{failed}; check the target before acting again"),
        (false, _) => format!("steps 1-{} done ({}); {failed}; steps after it did not run", n - 1, done.join("; ")),
    }
}

/// How each backend runs its operations (as `plan::capabilities` names how each plans them).
fn runs(backend: Backend) -> &'static dyn super::Runs {
    match backend {
        Backend::Simulated => &crate::act::sim::Sim,
        Backend::Nvml => &crate::act::nvml::Nvml,
        Backend::Slurm => &crate::act::slurm::Slurm,
        Backend::Kubernetes => &crate::act::kubernetes::Kubernetes,
    }
}

/// A wait in real time: the simulator's seconds pass at its speed.
fn real_wait(seconds: u64, backend: Backend, env: &Env) -> Duration {
    let speed = if backend == Backend::Simulated { env.sim.as_ref().map_or(1.0, |s| s.speed) } else { 1.0 };
    Duration::from_secs(seconds).div_f64(speed.max(0.001))
}

/// A wait here; every other operation by the plan's backend.
async fn run_op(op: &Op, backend: Backend, env: &Env) -> Ran {
    match op {
        Op::Wait { seconds, why } => {
            tokio::time::sleep(real_wait(*seconds, backend, env)).await;
            Ok((format!("waited {seconds} s ({why})"), None))
        }
        _ => runs(backend).run(op, env).await,
    }
}

#[cfg(test)]
mod tests {
    use super::reached_after_failure;
    use crate::actions::StepError;
    use crate::actions::slurm::SlurmStepError;
    use crate::process::RunError;

    /// Where a plan stands after `e` failed the step after `done`: decided on the typed error.
    fn reached(done: &[String], e: &StepError) -> String {
        reached_after_failure(done, &e.to_string(), e.stopped_at_timeout())
    }

    fn timed_out(program: &str) -> StepError {
        let source = RunError::Timeout(std::time::Duration::from_secs(30));
        StepError::Slurm(SlurmStepError::Run { program: program.into(), source })
    }

    /// A command killed at its timeout may have acted: "unknown", not "nothing was changed".
    #[test]
    fn a_step_stopped_at_its_timeout_leaves_the_state_unknown() {
        assert_eq!(
            reached(&[], &timed_out("scontrol")),
            "step 1 was stopped at its timeout, so whether it took effect is unknown (scontrol: no answer within 30s); check the target before acting again"
        );
        let failed =
            SlurmStepError::Exited { program: "scontrol".into(), code: Some(1), stderr: Some("invalid node".into()) };
        assert_eq!(
            reached(&[], &StepError::Slurm(failed)),
            "step 1 failed; nothing was changed before it (scontrol exited with code 1: invalid node)"
        );
        let r = reached(&["Drain the node".into()], &timed_out("scancel"));
        assert!(r.starts_with("steps 1-1 done (Drain the node); step 2 was stopped at its timeout"), "{r}");
        // The words alone decide nothing: a message that says "no answer within" is not a timeout.
        let words =
            SlurmStepError::Exited { program: "x".into(), code: Some(1), stderr: Some("no answer within 5s".into()) };
        assert!(reached(&[], &StepError::Slurm(words)).starts_with("step 1 failed; nothing was changed"));
    }
}
