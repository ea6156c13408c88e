//! Operator actions run: a plan (`crate::act`, re-exported here) is confirmed, planned again,
//! audited, executed step by step with progress by its backend, verified, and audited again.
//! The runner, the lock, the audit log and each backend's execution.

pub mod audit;
pub mod execute;
pub mod kubernetes;
pub mod lock;
pub mod nvml;
pub mod run;
pub mod sim;
pub mod slurm;

use std::time::Duration;

use futures_util::future::BoxFuture;
use serde::Serialize;

pub use crate::act::{
    Action, Backend, Capabilities, Drain, NeedsCard, Op, Options, Plan, Preempt, Repartition, Step, Target, guard,
    plan, user,
};
use crate::model::ComputeMode;
use crate::sources::sim::SimHandle;

/// How a backend runs the operations of its plans. Each backend's file implements it for its
/// backend; `execute::runs` names the implementation of each `Backend`.
pub trait Runs: Sync {
    /// Run one operation of its plans (a wait is the executor's own).
    fn run<'a>(&'a self, op: &'a Op, env: &'a Env) -> BoxFuture<'a, Ran>;
}

/// What an operation reports: its message and, for a compute mode change, the mode before.
pub type Ran = Result<(String, Option<ComputeMode>), StepError>;

/// Why one operation failed, in its backend's words (the text is the step's message). The one
/// place besides `plan::capabilities` that names every backend.
#[derive(Debug, thiserror::Error)]
pub enum StepError {
    #[error(transparent)]
    Sim(#[from] sim::SimStepError),
    #[error(transparent)]
    Nvml(#[from] nvml::NvmlStepError),
    #[error(transparent)]
    Slurm(#[from] slurm::SlurmStepError),
    #[error(transparent)]
    Kubernetes(#[from] kubernetes::KubeStepError),
}

impl StepError {
    /// The step was stopped at its timeout, so whether it took effect is unknown (a command
    /// killed at its timeout, an API call with no answer in time).
    pub fn stopped_at_timeout(&self) -> bool {
        match self {
            Self::Slurm(slurm::SlurmStepError::Run { source: crate::process::RunError::Timeout(_), .. })
            | Self::Kubernetes(kubernetes::KubeStepError::NoAnswer { .. }) => true,
            Self::Sim(_) | Self::Nvml(_) | Self::Slurm(_) | Self::Kubernetes(_) => false,
        }
    }
}

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
    /// The target's lock while an approved plan runs: each command a step starts is given it
    /// (as its standard input), so the lock is held as long as that command runs, even if
    /// tessera is gone.
    pub hold: Option<std::sync::Arc<std::fs::File>>,
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
    /// After a failure: the done steps taken back (`Op::undo`, last first), each with how it
    /// went; empty where nothing is taken back.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rolled_back: Vec<StepResult>,
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
