//! Scenes the demo shows from its first minute, so that every kind of advice has a case: a
//! light service alone on a whole card (oversized), a card with uncorrectable ECC errors under
//! running training (unhealthy but held), and a 4-GPU inference server waiting where only
//! preempting training would make room (a preemption candidate).

use chrono::Duration as Span;

use super::Sim;
use super::jobs::Spot;
use crate::model::{CardRef, Event, Severity, WorkloadKind, WorkloadState};

impl Sim {
    /// Start a steady ~10 % embedding service using ~15 % of the card's memory on the last of
    /// `free`, an hour before the warm-up (so an hour of activity is seen from the start).
    pub(super) fn light_service(&mut self, node: usize, free: &mut Vec<usize>) -> bool {
        let Some(card) = free.pop() else { return false };
        let mut job = self.new_job(WorkloadKind::Inference, None, 1, None);
        job.w.name = format!("search/embed-small-{}", self.next_id - 1);
        job.steady = true;
        job.peak = 10.0;
        job.mem_milli = 150;
        job.duration = Span::hours(36);
        job.w.submitted_at = Some(self.now - Span::minutes(70));
        self.start(job, Spot::Whole { node, cards: vec![card] });
        if let Some(j) = self.jobs.last_mut() {
            j.w.started_at = Some(self.now - Span::hours(1));
            j.ends_at = self.now + Span::hours(35);
        }
        true
    }

    /// The training job on whole cards that will run longest from now (the latest end): its
    /// first card starts reporting
    /// uncorrectable ECC errors (the job still runs there until someone drains and moves it).
    pub(super) fn failing_card(&mut self) {
        let Some(job) = self
            .jobs
            .iter()
            .filter(|j| j.w.kind == WorkloadKind::Training && j.w.state == WorkloadState::Running && j.gi.is_none())
            .max_by_key(|j| (j.ends_at, std::cmp::Reverse(j.w.id.clone())))
        else {
            return;
        };
        let Some(r) = job.w.cards.first().cloned() else { return };
        let Some(&ni) = self.node_index.get(&r.node) else { return };
        let Some(card) = self.nodes[ni].cards.iter_mut().find(|c| c.index == r.index) else { return };
        card.health.ecc_volatile_uncorrected = Some(2);
        self.events.push(Event {
            at: self.now,
            card: Some(CardRef::new(r.node.clone(), r.index)),
            severity: Severity::Critical,
            text: "2 uncorrectable ECC errors (volatile); the job on it keeps running".into(),
        });
    }

    /// A 4-GPU inference server that has waited 40 minutes behind training on every node
    /// that could hold it.
    pub(super) fn big_inference(&mut self) {
        let mut job = self.new_job(WorkloadKind::Inference, None, 4, None);
        job.w.name = format!("llm-core/chat-70b-{}", self.next_id - 1);
        job.w.submitted_at = Some(self.now - Span::minutes(40));
        self.jobs.push(job);
        self.reschedule = true;
    }
}
