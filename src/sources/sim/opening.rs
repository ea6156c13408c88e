//! The cluster as the demo opens: a drained card, busy MIG instances and whole cards, a
//! queue that built up while it was full, a DRA claim waiting, and an hour of history run
//! before the first frame.

use chrono::{DateTime, Duration as Span, Utc};

use crate::model::{CardRef, Event, Severity, Workload, WorkloadKind, WorkloadState};

use super::Sim;
use super::jobs::{Job, Spot};

impl Sim {
    /// Start the cluster busy: most instances serve inference, most whole cards train, and
    /// a little queue has built up.
    pub(super) fn populate(&mut self) {
        self.drained_card();
        // Always one notebook holding a whole card at ~2 % for hours: held but idle, the
        // waste an operator should see first.
        let mut notebook = false;
        // And one light service alone on a whole card: a MIG instance would do (oversized).
        let mut light = false;
        for ni in 0..self.nodes.len() {
            self.busy_instances(ni);
            self.busy_whole_cards(ni, &mut notebook, &mut light);
        }
        self.early_queue();
        self.waiting_claim();
        self.date_start_events();
        // History builds the queue with real reasons.
        for _ in 0..(super::WARMUP.as_secs() / super::TICK.as_secs()) {
            self.now += super::TICK;
            self.tick();
        }
        self.failing_card();
        self.big_inference();
        self.shared_scene();
        self.date_start_events();
        // The scenes changed cards: count what they can take afresh.
        self.usable = None;
        self.free = None;
        // The scenes' waiting work gets its reason now: every pending job has one from the
        // first snapshot (the 4-GPU server had none until the first tick).
        self.schedule();
    }

    /// One card has thrown XID 79 (fallen off the bus) and was drained by on-call.
    fn drained_card(&mut self) {
        if let Some(node) = self.nodes.iter_mut().find(|n| n.cards.len() > 7 && n.cards.iter().all(|c| !c.mig.enabled))
        {
            let r = CardRef::new(node.name.clone(), 7);
            if let Some(c) = node.cards.get_mut(7) {
                c.draining = true;
                c.health.last_xid = Some(79);
                // Off the bus: the driver cannot reach it, so nothing reports its telemetry.
                c.health.lost = true;
            }
            self.events.push(Event {
                at: self.now,
                card: Some(r),
                severity: Severity::Critical,
                text: "XID 79: GPU has fallen off the bus; drained".into(),
            });
        }
    }

    /// Node `ni`'s MIG instances: three in four serve inference.
    fn busy_instances(&mut self, ni: usize) {
        for ci in 0..self.nodes[ni].cards.len() {
            let card = &self.nodes[ni].cards[ci];
            if card.mig.enabled {
                let gis: Vec<(u32, String)> = card.mig.instances.iter().map(|i| (i.gi_id, i.profile.clone())).collect();
                for (gi, profile) in gis {
                    if self.rng.chance(0.75) {
                        let mut job = self.new_job(WorkloadKind::Inference, Some(profile), 1, None);
                        job.w.submitted_at = Some(self.now - Span::minutes(self.rng.range(30, 600) as i64));
                        self.start(job, Spot::Mig { node: ni, card: ci, gi });
                    }
                }
            }
        }
    }

    /// Node `ni`'s whole cards: training jobs in chunks of 1, 2 or 4, some left idle; the
    /// first single card not left idle holds the idle `notebook`, and a node of 4 to 7 free
    /// cards may host the `light` service, until each has been placed once.
    fn busy_whole_cards(&mut self, ni: usize, notebook: &mut bool, light: &mut bool) {
        let mut free: Vec<usize> = (0..self.nodes[ni].cards.len())
            .filter(|&c| {
                let card = &self.nodes[ni].cards[c];
                !card.mig.enabled && !card.draining && card.sharing.unit.is_none()
            })
            .collect();
        if !*light && free.len() >= 4 && free.len() < 8 {
            *light = self.light_service(ni, &mut free);
        }
        while !free.is_empty() {
            let n = (*self.rng.pick(&[1usize, 2, 4, 4]).unwrap_or(&1)).min(free.len());
            let cards: Vec<usize> = free.drain(..n).collect();
            let roll = self.rng.f64();
            let first_notebook = !*notebook && n == 1;
            if roll < 0.12 && !first_notebook {
                continue; // left idle
            }
            let kind =
                if first_notebook || (roll < 0.2 && n == 1) { WorkloadKind::Other } else { WorkloadKind::Training };
            *notebook |= first_notebook;
            let mut job = self.new_job(kind, None, n as u32, None);
            if first_notebook {
                job.duration = job.duration.max(Span::hours(12));
            }
            let duration = job.duration;
            let ran = Span::minutes(self.rng.range(5, 600) as i64);
            job.w.submitted_at = Some(self.now - ran - Span::minutes(self.rng.range(1, 60) as i64));
            self.start(job, Spot::Whole { node: ni, cards });
            // It has been running for a while already: started after it was submitted,
            // ending its drawn runtime after that start.
            if let Some(j) = self.jobs.last_mut() {
                j.w.started_at = Some(self.now - ran);
                j.ends_at = self.now - ran + duration;
            }
        }
    }

    /// Work that arrived while the cluster was full: a queue from the first frame.
    fn early_queue(&mut self) {
        let unshared = self.nodes.iter().flat_map(|n| &n.cards).filter(|c| c.sharing.unit.is_none()).count();
        let waiting = (unshared / 6).max(2);
        for i in 0..waiting {
            let mut job = match i % 3 {
                0 => {
                    let profiles = self.wanted_profiles();
                    let p = self.rng.pick(&profiles).cloned();
                    self.new_job(WorkloadKind::Inference, p, 1, None)
                }
                _ => {
                    let gpus = *self.rng.pick(&[1u32, 2, 4, 8]).unwrap_or(&1);
                    self.new_job(WorkloadKind::Training, None, gpus, None)
                }
            };
            job.w.submitted_at = Some(self.now - Span::minutes(self.rng.range(1, 40) as i64));
            self.jobs.push(job);
        }
    }

    /// A pretraining job that asks, through a DRA claim, for 8 whole H100 on one DynamicMIG
    /// node: it waits, and the queue says why in the Kubernetes source's words.
    fn waiting_claim(&mut self) {
        let Some(ni) = self.nodes.iter().position(|n| n.cards.first().is_some_and(super::build::dynamic)) else {
            return;
        };
        let model = self.nodes[ni].cards.first().map(|c| c.model.clone());
        let mut w = Workload::new("sim:c1", "llm-core/pretrain-8gpu-0", WorkloadKind::Training, WorkloadState::Pending);
        w.owner = Some("llm-core".into());
        w.priority = Some(50);
        w.request.gpus = Some(8);
        w.request.model = model;
        w.submitted_at = Some(self.now - Span::minutes(20));
        let mut job = Job::pending(w, self.now, Span::hours(2), 0xc1a1, 95.0, 900);
        job.claim = true;
        self.jobs.push(job);
    }

    /// Work set running as it had been for a while (the first frame's jobs) has its start
    /// moved back after `start`: its "started" events say when it did (they said it started
    /// when the console did).
    /// (The jobs' starts are looked up by id once: at 32,768 cards a scan of the jobs per
    /// event was most of the simulator's start.)
    fn date_start_events(&mut self) {
        let mut started: foldhash::HashMap<&str, Option<DateTime<Utc>>> = foldhash::HashMap::default();
        for j in &self.jobs {
            // The first job of an id, as a scan would find it.
            started.entry(j.w.id.as_str()).or_insert(j.w.started_at);
        }
        for e in &mut self.events {
            let Some((id, _)) = e.text.split_once(" started (") else { continue };
            if let Some(t) = started.get(id).copied().flatten() {
                e.at = t;
            }
        }
        self.events.sort_by_key(|e| e.at);
    }
}
