//! The simulated cluster obeys actions: drain and undrain a card, repartition an idle card,
//! ask a job to checkpoint, requeue it. Durations are the executor's (it waits between
//! steps); each operation here is one instant change, answered with what happened.

use serde::Serialize;

use super::Sim;
use crate::model::{Event, Severity, WorkloadState};

/// One operation on the simulated cluster.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum SimOp {
    Drain {
        node: String,
        index: u32,
    },
    Undrain {
        node: String,
        index: u32,
    },
    /// Destroy the card's instances and create `layout` (`whole` disables MIG).
    Repartition {
        node: String,
        index: u32,
        layout: String,
    },
    /// Ask a running job to checkpoint (the signal a real scheduler would send).
    Checkpoint {
        workload: String,
    },
    /// Stop the job and put it back in the queue.
    Requeue {
        workload: String,
    },
    /// Whether the card is idle now (a question: nothing changes). An executor asks it again
    /// until the card is idle or `up_to_s` simulated seconds have passed, then (`give_back`)
    /// undrains it.
    WaitIdle {
        node: String,
        index: u32,
        up_to_s: u64,
        give_back: bool,
    },
}

/// Why the simulated cluster did not obey an operation (nothing changed).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SimError {
    #[error("no node {0} in the simulated cluster")]
    NoNode(String),
    #[error("no card {node}/{index}")]
    NoCard { node: String, index: u32 },
    /// A repartition of a card that workloads hold (`holders` of them).
    #[error(
        "{node}/{index} is not idle: {} {} it",
        crate::units::count(*holders, "workload", "workloads"),
        if *holders == 1 { "holds" } else { "hold" }
    )]
    NotIdle { node: String, index: u32, holders: u64 },
    /// A repartition of a DynamicMIG card: its layout is the claims'.
    #[error("{node}/{index}: the DRA driver lays this card out per claim")]
    PerClaim { node: String, index: u32 },
    #[error("layout {layout} is not valid for {model}")]
    BadLayout { layout: String, model: String },
    /// A checkpoint asked of a workload that is not running (`state` says what it is).
    #[error("{workload} is {state}, not running")]
    NotRunning { workload: String, state: &'static str },
    #[error("{0} no longer exists")]
    Gone(String),
    /// The simulator no longer takes operations (its task ended).
    #[error("the simulated cluster has stopped")]
    Stopped,
}

impl std::fmt::Display for SimOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Drain { node, index } => write!(f, "drain {node}/{index}"),
            Self::Undrain { node, index } => write!(f, "undrain {node}/{index}"),
            Self::Repartition { node, index, layout } => write!(f, "repartition {node}/{index} to {layout}"),
            Self::Checkpoint { workload } => write!(f, "signal {workload} to checkpoint"),
            Self::Requeue { workload } => write!(f, "requeue {workload}"),
            Self::WaitIdle { node, index, up_to_s, give_back } => write!(
                f,
                "wait until {node}/{index} is idle (at most {}{})",
                crate::units::duration::short(i64::try_from(*up_to_s).unwrap_or(i64::MAX)),
                if *give_back { ", else undrain it" } else { "" }
            ),
        }
    }
}

impl Sim {
    /// Apply one operation now; the answer says what changed, or why nothing did.
    pub fn apply(&mut self, op: &SimOp) -> Result<String, SimError> {
        if let SimOp::WaitIdle { node, index, .. } = op {
            return self.idle(node, *index);
        }
        let now = self.now;
        // Any operation may change what a card can take.
        self.usable = None;
        self.changed = true;
        self.free = None;
        let (text, card) = match op {
            SimOp::Drain { node, index } | SimOp::Undrain { node, index } => {
                self.set_draining(node, *index, matches!(op, SimOp::Drain { .. }))?
            }
            SimOp::Repartition { node, index, layout } => self.repartition(node, *index, layout)?,
            SimOp::Checkpoint { workload } => {
                let j = self.job_mut(workload)?;
                if !j.w.state.is_active() {
                    return Err(SimError::NotRunning { workload: workload.clone(), state: j.w.state.as_str() });
                }
                j.w.state = WorkloadState::Checkpointing;
                j.w.reason = Some("checkpointing: asked by tessera".into());
                (format!("{workload} checkpointing"), j.w.cards.first().cloned())
            }
            // A question, answered before anything is marked changed (above); here for the
            // match to name every operation.
            SimOp::WaitIdle { node, index, .. } => return self.idle(node, *index),
            SimOp::Requeue { workload } => self.requeue(workload)?,
        };
        self.events.push(Event { at: now, card, severity: Severity::Warning, text: format!("tessera: {text}") });
        Ok(text)
    }

    /// Drain a card (`drain`) or undrain it: what changed, and the card.
    fn set_draining(
        &mut self,
        node: &String,
        index: u32,
        drain: bool,
    ) -> Result<(String, Option<crate::model::CardRef>), SimError> {
        let c = self.card_mut(node, index)?;
        c.draining = drain;
        let holders = c.holders().count();
        self.reschedule = true;
        let text = if drain {
            let who = crate::units::count(holders as u64, "running workload continues", "running workloads continue");
            format!("{node}/{index} drained: no new work; {who}")
        } else {
            format!("{node}/{index} undrained: accepts new work")
        };
        Ok((text, Some(crate::model::CardRef::new(node.clone(), index))))
    }

    /// Lay an idle card out as `layout` (`whole`: MIG off): what changed, and the card. A
    /// DynamicMIG card, a held card and a layout the model has not are refused.
    fn repartition(
        &mut self,
        node: &String,
        index: u32,
        layout: &String,
    ) -> Result<(String, Option<crate::model::CardRef>), SimError> {
        let c = self.card_mut(node, index)?;
        if super::build::dynamic(c) {
            return Err(SimError::PerClaim { node: node.clone(), index });
        }
        if c.holders().next().is_some() {
            let holders = c.holders().count() as u64;
            return Err(SimError::NotIdle { node: node.clone(), index, holders });
        }
        let model = c.model.clone();
        c.mig = if layout == "whole" {
            crate::model::MigState::default()
        } else {
            let m = super::build::mig_state(&model, layout);
            if m.instances.is_empty() {
                return Err(SimError::BadLayout { layout: layout.clone(), model });
            }
            m
        };
        self.reschedule = true;
        self.configured = None;
        Ok((format!("{node}/{index} now {layout}"), Some(crate::model::CardRef::new(node.clone(), index))))
    }

    /// Put a workload back in the queue as if just submitted, its cards given back: what
    /// changed, and the first card it held.
    fn requeue(&mut self, workload: &String) -> Result<(String, Option<crate::model::CardRef>), SimError> {
        let now = self.now;
        let i = self.jobs.iter().position(|j| j.w.id == *workload).ok_or_else(|| SimError::Gone(workload.clone()))?;
        let job = self.jobs[i].clone();
        self.hold(&job, false);
        let j = &mut self.jobs[i];
        let card = j.w.cards.first().cloned();
        j.w.state = WorkloadState::Pending;
        j.w.reason = Some("Requeued: preempted by tessera".into());
        j.w.started_at = None;
        j.w.node = None;
        j.w.cards.clear();
        j.w.memory_used_mib = None;
        j.gi = None;
        j.w.submitted_at = Some(now);
        self.reschedule = true;
        Ok((format!("{workload} requeued"), card))
    }

    /// Whether a card is idle now: no workload holds it.
    fn idle(&mut self, node: &str, index: u32) -> Result<String, SimError> {
        let c = self.card_mut(node, index)?;
        match c.holders().count() as u64 {
            0 => Ok(format!("{node}/{index} is idle")),
            holders => Err(SimError::NotIdle { node: node.to_string(), index, holders }),
        }
    }

    fn card_mut(&mut self, node: &str, index: u32) -> Result<&mut crate::model::Card, SimError> {
        let ni = *self.node_index.get(node).ok_or_else(|| SimError::NoNode(node.to_string()))?;
        self.nodes[ni]
            .cards
            .iter_mut()
            .find(|c| c.index == index)
            .ok_or_else(|| SimError::NoCard { node: node.to_string(), index })
    }

    fn job_mut(&mut self, id: &str) -> Result<&mut super::jobs::Job, SimError> {
        self.jobs.iter_mut().find(|j| j.w.id == id).ok_or_else(|| SimError::Gone(id.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sources::sim::SimConfig;
    use chrono::TimeZone;

    fn sim() -> Sim {
        let start = chrono::Utc.with_ymd_and_hms(2026, 3, 1, 12, 0, 0).single().unwrap_or_default();
        Sim::new(SimConfig::new(7, start))
    }

    #[test]
    fn drain_stops_new_work_and_undrain_restores_it() {
        let mut s = sim();
        let node = s.nodes[0].name.clone();
        assert!(s.apply(&SimOp::Drain { node: node.clone(), index: 0 }).is_ok());
        s.advance(std::time::Duration::from_secs(3600));
        let snap = s.snapshot();
        let card = &snap.nodes[0].cards[0];
        assert!(card.draining);
        assert!(s.apply(&SimOp::Undrain { node, index: 0 }).is_ok());
        assert!(!s.nodes[0].cards[0].draining);
        assert!(s.apply(&SimOp::Drain { node: "nope".into(), index: 0 }).is_err());
    }

    #[test]
    fn repartition_needs_an_idle_card_and_a_valid_layout() {
        let mut s = sim();
        let (ni, ci) = s
            .nodes
            .iter()
            .enumerate()
            .find_map(|(ni, n)| n.cards.iter().position(|c| c.holders().next().is_some()).map(|ci| (ni, ci)))
            .unwrap_or_else(|| panic!("a busy card"));
        let (node, index) = (s.nodes[ni].name.clone(), s.nodes[ni].cards[ci].index);
        let busy = s.apply(&SimOp::Repartition { node: node.clone(), index, layout: "whole".into() });
        assert!(busy.err().map(|e| e.to_string()).unwrap_or_default().contains("not idle"));
        // Asking whether it is idle changes nothing.
        let wait = SimOp::WaitIdle { node: node.clone(), index, up_to_s: 60, give_back: false };
        s.changed = false;
        let events = s.events.len();
        assert!(matches!(s.apply(&wait), Err(SimError::NotIdle { .. })));
        assert!(!s.changed && s.events.len() == events);
        // Requeue everything on it, then it is idle.
        let holders: Vec<String> = s.nodes[ni].cards[ci].holders().map(str::to_string).collect();
        for h in holders {
            assert!(s.apply(&SimOp::Requeue { workload: h }).is_ok());
        }
        assert_eq!(s.apply(&wait), Ok(format!("{node}/{index} is idle")));
        let model = s.nodes[ni].cards[ci].model.clone();
        let layout = if crate::model::mig::lookup(&model).is_some_and(|m| m.name.contains("A100-80GB")) {
            "3g.40gb,3g.40gb"
        } else {
            "whole"
        };
        assert!(s.apply(&SimOp::Repartition { node: node.clone(), index, layout: layout.into() }).is_ok());
        assert!(s.apply(&SimOp::Repartition { node, index, layout: "9g.99gb".into() }).is_err());
    }

    #[test]
    fn checkpoint_then_requeue_puts_the_job_back_in_the_queue() {
        let mut s = sim();
        let id =
            s.jobs.iter().find(|j| j.w.state == WorkloadState::Running).map(|j| j.w.id.clone()).unwrap_or_default();
        assert!(s.apply(&SimOp::Checkpoint { workload: id.clone() }).is_ok());
        assert_eq!(s.job_mut(&id).map(|j| j.w.state), Ok(WorkloadState::Checkpointing));
        assert!(s.apply(&SimOp::Requeue { workload: id.clone() }).is_ok());
        let j = s.job_mut(&id).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(j.w.state, WorkloadState::Pending);
        assert!(j.w.cards.is_empty());
        assert!(
            s.apply(&SimOp::Checkpoint { workload: "sim:999999".into() })
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default()
                .contains("no longer exists")
        );
    }
}
