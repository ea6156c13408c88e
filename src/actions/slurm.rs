//! Running Slurm's operations (its plans are `act::slurm`'s): its commands, never through a
//! shell, with a timeout.

use std::time::Duration;

use futures_util::future::BoxFuture;

use super::{Env, Op, Ran, Runs};
use crate::act::slurm::Slurm;
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

impl Runs for Slurm {
    fn run<'a>(&'a self, op: &'a Op, env: &'a Env) -> BoxFuture<'a, Ran> {
        Box::pin(async move {
            match op {
                Op::Run { program, args } => Ok((run(program, args, env).await?, None)),
                other => Err(SlurmStepError::CannotRun(Box::new(other.clone())).into()),
            }
        })
    }
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
