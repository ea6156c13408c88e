//! Running the simulated cluster's operations (its plans are `act::sim`'s): each by the running
//! simulator, a wait for an idle card by asking it until the card is idle or the wait is over.

use futures_util::future::BoxFuture;

use super::{Env, Op, Ran, Runs};
use crate::act::sim::Sim;
use crate::sources::sim::{SimError, SimOp};

/// Why the simulator did not run an operation.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SimStepError {
    #[error("the simulated cluster is not running here")]
    NotRunning,
    /// Not one of the simulator's operations.
    #[error("the simulator cannot run {0:?}")]
    CannotRun(Box<Op>),
    /// The simulated cluster's answer.
    #[error(transparent)]
    Sim(#[from] SimError),
    /// A held card's work did not end within the wait: its layout was not changed.
    #[error(
        "{card} is still held ({holders} running) after {waited}: its layout was not changed{}",
        if *given_back { "; the card was given back (undrained)" } else { "" }
    )]
    StillBusy { card: String, holders: String, waited: String, given_back: bool },
}

/// How often the wait asks the simulator whether the card is idle (real time).
const SIM_IDLE_POLL: std::time::Duration = std::time::Duration::from_millis(200);

impl Runs for Sim {
    fn run<'a>(&'a self, op: &'a Op, env: &'a Env) -> BoxFuture<'a, Ran> {
        Box::pin(async move {
            match op {
                Op::Sim { op } => Ok((run_op(op, env).await?, None)),
                other => Err(SimStepError::CannotRun(Box::new(other.clone())).into()),
            }
        })
    }
}

/// Run one operation on the running simulator.
async fn run_op(op: &SimOp, env: &Env) -> Result<String, SimStepError> {
    let sim = env.sim.as_ref().ok_or(SimStepError::NotRunning)?;
    if let SimOp::WaitIdle { up_to_s, give_back, .. } = op {
        return wait_idle(sim, op, *up_to_s, *give_back).await;
    }
    Ok(sim.apply(op.clone()).await?)
}

/// Ask the simulator until the card is idle, for at most `up_to_s` simulated seconds; past
/// that, undrain it where `give_back` (the plan drained it) and fail the step.
async fn wait_idle(
    sim: &crate::sources::sim::SimHandle,
    op: &SimOp,
    up_to_s: u64,
    give_back: bool,
) -> Result<String, SimStepError> {
    let real = std::time::Duration::from_secs(up_to_s).div_f64(sim.speed.max(0.001));
    let deadline = tokio::time::Instant::now() + real;
    loop {
        match sim.apply(op.clone()).await {
            Ok(text) => return Ok(text),
            Err(SimError::NotIdle { node, index, holders }) if tokio::time::Instant::now() >= deadline => {
                let card = format!("{node}/{index}");
                if give_back {
                    sim.apply(SimOp::Undrain { node, index }).await?;
                }
                return Err(SimStepError::StillBusy {
                    card,
                    holders: crate::units::count(holders, "workload", "workloads"),
                    waited: crate::units::duration::short(i64::try_from(up_to_s).unwrap_or(i64::MAX)),
                    given_back: give_back,
                });
            }
            Err(SimError::NotIdle { .. }) => tokio::time::sleep(SIM_IDLE_POLL).await,
            Err(e) => return Err(e.into()),
        }
    }
}
