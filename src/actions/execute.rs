//! Execution: run a plan's steps in order, each by its backend's file, with per-step progress;
//! stop at the first failure and say exactly which steps ran, never retrying silently. Every
//! executor refuses a plan with blockers and refuses everything in read-only mode, whatever
//! the caller checked before.

use std::time::Duration;

use serde::Serialize;
use tokio::sync::mpsc;

use super::{Backend, Op, Plan};
use crate::model::ComputeMode;
use crate::sources::sim::SimHandle;

/// What executors need to reach the backends.
#[derive(Debug, Clone, Default)]
pub struct Env {
    pub read_only: bool,
    pub sim: Option<SimHandle>,
    /// The NVML library (`None`: the system one).
    pub nvml_lib: Option<String>,
    /// Longest one command may take.
    pub command_timeout: Duration,
    pub kubernetes: Option<crate::sources::kubernetes::Settings>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepResult {
    pub what: String,
    pub call: String,
    /// `done`, `failed`, `not run`, or (when the console was left mid-way) `running`.
    pub status: &'static str,
    pub message: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Outcome {
    pub ok: bool,
    pub steps: Vec<StepResult>,
    pub error: Option<String>,
    /// The state reached, in words: what an operator must know after a half-way failure.
    pub reached: String,
    /// The compute mode before an NVML drain, so undrain can restore it.
    pub previous_mode: Option<ComputeMode>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Progress {
    /// A step began; `wait_s` is how long it waits, in real seconds, for a wait step.
    Started {
        step: usize,
        wait_s: Option<u64>,
    },
    Done {
        step: usize,
        message: String,
    },
    Failed {
        step: usize,
        message: String,
    },
}

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
            Err(message) => {
                results[i].status = "failed";
                results[i].message = Some(message.clone());
                send(Progress::Failed { step: i, message: message.clone() });
                let done: Vec<String> = results[..i].iter().map(|r| r.what.clone()).collect();
                let reached = if done.is_empty() {
                    format!("step 1 failed; nothing was changed before it ({message})")
                } else {
                    format!(
                        "steps 1-{i} done ({}); step {} failed: {message}; steps after it did not run",
                        done.join("; "),
                        i + 1
                    )
                };
                return Outcome { ok: false, steps: results, error: Some(message), reached, previous_mode };
            }
        }
    }
    Outcome { ok: true, steps: results, error: None, reached: "every step done".into(), previous_mode }
}

/// A wait in real time: the simulator's seconds pass at its speed.
fn real_wait(seconds: u64, backend: Backend, env: &Env) -> Duration {
    let speed = if backend == Backend::Simulated { env.sim.as_ref().map_or(1.0, |s| s.speed) } else { 1.0 };
    Duration::from_secs(seconds).div_f64(speed.max(0.001))
}

async fn run_op(op: &Op, backend: Backend, env: &Env) -> Result<(String, Option<ComputeMode>), String> {
    let plain = |r: Result<String, String>| r.map(|m| (m, None));
    match op {
        Op::Sim { op } => plain(super::sim::run_op(op, env).await),
        Op::Wait { seconds, why } => {
            tokio::time::sleep(real_wait(*seconds, backend, env)).await;
            Ok((format!("waited {seconds} s ({why})"), None))
        }
        Op::Run { program, args } => plain(super::slurm::run(program, args, env.command_timeout).await),
        Op::NvmlSetComputeMode { .. }
        | Op::NvmlDestroyComputeInstance { .. }
        | Op::NvmlDestroyGpuInstance { .. }
        | Op::NvmlCreateGpuInstance { .. }
        | Op::NvmlVerifyLayout { .. } => {
            let (op, lib) = (op.clone(), env.nvml_lib.clone());
            tokio::task::spawn_blocking(move || super::nvml::run_op(&op, lib.as_deref()))
                .await
                .map_err(|e| format!("NVML step stopped: {e}"))?
        }
        Op::KubePatchNode { .. } | Op::KubeEvict { .. } | Op::KubeWaitLabel { .. } => {
            let settings = env.kubernetes.as_ref().ok_or("Kubernetes is not configured here")?;
            plain(super::kubernetes::run_op(op, settings).await)
        }
    }
}
