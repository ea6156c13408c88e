//! For the schedule tests: an action as the simulated cluster's own operation, applied the
//! way the runner's simulator backend would (a preemption is the checkpoint signal).

use crate::act::Action;
use crate::sources::sim::SimOp;

/// The simulator operation that carries `a` out.
pub fn sim_op(a: &Action) -> SimOp {
    let card = |t: &str| {
        let (n, i) = t.rsplit_once('/').unwrap_or_default();
        (n.to_string(), i.parse().unwrap_or(0))
    };
    match a {
        Action::Drain { target, .. } => {
            let (node, index) = card(target);
            SimOp::Drain { node, index }
        }
        Action::Undrain { target, .. } => {
            let (node, index) = card(target);
            SimOp::Undrain { node, index }
        }
        Action::Repartition { target, layout } => {
            let (node, index) = card(target);
            SimOp::Repartition { node, index, layout: layout.clone() }
        }
        Action::Preempt { workload, .. } => SimOp::Checkpoint { workload: workload.clone() },
    }
}
