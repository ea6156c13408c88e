//! Scenes the demo shows from its first minute, so that every kind of advice has a case: a
//! light service alone on a whole card (oversized), a card with uncorrectable ECC errors under
//! running training (unhealthy but held), and a 4-GPU inference server waiting where only
//! preempting training would make room (a preemption candidate); and on the shared nodes,
//! interference, crowding and a time-sliced card MIG could isolate.

use chrono::Duration as Span;

use super::Sim;
use super::jobs::{Job, Spot};
use crate::model::{CardRef, Event, Severity, ShareUnit, Shares, Workload, WorkloadKind, WorkloadState};

impl Sim {
    /// Start a steady ~10 % embedding service using ~15 % of the card's memory on the last of
    /// `free`, an hour before the warm-up (so an hour of activity is seen from the start).
    pub(super) fn light_service(&mut self, node: usize, free: &mut Vec<usize>) -> bool {
        let Some(card) = free.pop() else { return false };
        let mut job = self.new_job(WorkloadKind::Inference, None, 1, None);
        job.w.name = format!("search/embed-small-{}", self.next_id - 1);
        job.w.owner = Some("search".into());
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
        job.w.owner = Some("llm-core".into());
        job.w.submitted_at = Some(self.now - Span::minutes(40));
        self.jobs.push(job);
        self.reschedule = true;
    }
}

impl Sim {
    /// Cards a replica job could run on.
    pub(super) fn shared_cards(&self) -> usize {
        self.nodes.iter().flat_map(|n| &n.cards).filter(|c| c.sharing.replicas.is_some()).count()
    }

    /// One service of the daytime wave: 1g.10gb, about three hours of service once it runs,
    /// drawn from the wave's own stream.
    pub(super) fn wave_job(&mut self) -> Job {
        let id = format!("sim:d{}", self.next_wave);
        self.next_wave += 1;
        let r = &mut self.wave_rng;
        let team = *r.pick(&["search", "ads", "vision", "speech"]).unwrap_or(&"ops");
        let base = *r.pick(&["embed-wave", "ocr-wave", "rerank-wave"]).unwrap_or(&"svc");
        let mut w = Workload::new(
            id,
            format!("{team}/{base}-d{}", self.next_wave - 1),
            WorkloadKind::Inference,
            WorkloadState::Pending,
        );
        w.owner = Some(team.to_string());
        w.priority = Some(100);
        w.request.mig_profile = Some("1g.10gb".into());
        w.request.gpus = Some(1);
        w.submitted_at = Some(self.now);
        let duration = Span::seconds((r.exp(3.0).max(0.5) * 3600.0) as i64);
        let (peak, milli, key) = (30.0 + r.f64() * 40.0, 500 + r.range(0, 400), r.next_u64());
        Job::pending(w, self.now, duration, key, peak, milli)
    }

    /// A job asking for one replica of a shared card, drawn from the shared stream.
    pub(super) fn replica_job(&mut self, kind: WorkloadKind) -> Job {
        const SERVE: &[&str] = &["embed-svc", "rerank-svc", "ocr-svc", "tts-svc", "asr-svc", "moderation-svc"];
        const TRAIN: &[&str] = &["finetune-vit-small", "lora-tune", "rl-agent-small"];
        let id = format!("sim:r{}", self.next_replica);
        self.next_replica += 1;
        let r = &mut self.share_rng;
        let team = *r.pick(&["search", "ads", "vision", "speech", "recsys"]).unwrap_or(&"ops");
        let (base, priority, peak, milli, hours) = match kind {
            WorkloadKind::Training => (*r.pick(TRAIN).unwrap_or(&"train"), 50, 80.0 + r.f64() * 10.0, 350, 4.0),
            _ => (*r.pick(SERVE).unwrap_or(&"svc"), 100, 15.0 + r.f64() * 25.0, 120 + r.range(0, 100), 10.0),
        };
        let mut w =
            Workload::new(id, format!("{team}/{base}-r{}", self.next_replica - 1), kind, WorkloadState::Pending);
        w.owner = Some(team.to_string());
        w.priority = Some(priority);
        w.request.shares = Some(Shares { unit: ShareUnit::Replica, count: 1 });
        w.submitted_at = Some(self.now);
        let duration = Span::seconds((r.exp(hours).max(0.5) * 3600.0) as i64);
        let key = r.next_u64();
        Job::pending(w, self.now, duration, key, peak, milli)
    }

    /// Start `job` on a replica of card `card` of node `name`, begun `ago` minutes back.
    fn start_replica(&mut self, mut job: Job, name: &str, card: usize, mem_milli: Option<u64>, ago: i64) {
        let Some(&node) = self.node_index.get(name) else { return };
        if let Some(m) = mem_milli {
            job.mem_milli = m;
        }
        job.w.submitted_at = Some(self.now - Span::minutes(ago + 3));
        self.start(job, Spot::Share { node, card });
        if let Some(j) = self.jobs.last_mut() {
            j.w.started_at = Some(self.now - Span::minutes(ago));
            // The scene lasts a while: at least two more hours.
            j.ends_at = self.now + j.duration.max(Span::hours(2));
        }
    }

    /// The shared nodes' first hour: training beside inference on a time-sliced L4 and on
    /// the MPS card (interference), an L4 with every replica taken and memory nearly full
    /// (crowded), two small services time-sliced on an A30 that MIG could isolate, and a
    /// few services on the other L4s.
    pub(super) fn shared_scene(&mut self) {
        if self.shared_cards() == 0 {
            return;
        }
        self.shared_ready = true;
        let train = self.replica_job(WorkloadKind::Training);
        self.start_replica(train, "gpu-l4-01", 0, None, 50);
        for _ in 0..2 {
            let svc = self.replica_job(WorkloadKind::Inference);
            self.start_replica(svc, "gpu-l4-01", 0, Some(150), 90);
        }
        for _ in 0..4 {
            let svc = self.replica_job(WorkloadKind::Inference);
            self.start_replica(svc, "gpu-l4-01", 1, Some(236), 120);
        }
        for card in 2..8 {
            let n = self.share_rng.range(1, 4);
            for _ in 0..n {
                let svc = self.replica_job(WorkloadKind::Inference);
                self.start_replica(svc, "gpu-l4-01", card, None, 75);
            }
        }
        let svc = self.replica_job(WorkloadKind::Inference);
        self.start_replica(svc, "gpu-l4-02", 0, Some(700), 80);
        let train = self.replica_job(WorkloadKind::Training);
        self.start_replica(train, "gpu-l4-02", 0, Some(800), 65);
        // 4 GB and 9 GB of a 24 GB A30: a 1g.6gb and a 2g.12gb instance would hold them.
        for milli in [165, 370] {
            let svc = self.replica_job(WorkloadKind::Inference);
            self.start_replica(svc, "gpu-a30-01", 0, Some(milli), 100);
        }
    }
}
