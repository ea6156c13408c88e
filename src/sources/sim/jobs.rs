//! Simulated workloads: arrivals, scheduling with real pending reasons, completions, and
//! metrics that follow a day/night curve (inference) or a checkpoint rhythm (training).

use std::f64::consts::PI;

use chrono::{DateTime, Duration as Span, Timelike, Utc};

use crate::model::{CardRef, Event, Severity, Workload, WorkloadKind, WorkloadState};

use super::Sim;
use super::rng::noise;

#[derive(Debug, Clone)]
pub struct Job {
    pub w: Workload,
    /// How long it runs once started.
    pub duration: Span,
    pub ends_at: DateTime<Utc>,
    /// Seeds this job's metric noise.
    pub key: u64,
    /// Utilisation at full load, percent.
    pub peak: f64,
    /// Memory it uses once running (set from `mem_milli` each time it starts).
    pub mem_mib: u64,
    /// The share of its allocation it uses, in thousandths: fixed for the job's life.
    pub mem_milli: u64,
    /// The GPU instance it holds, for MIG jobs.
    pub gi: Option<u32>,
    /// Runs at `peak` whatever the hour (a light service nobody scaled down).
    pub steady: bool,
    /// Asks through a DRA claim: only DynamicMIG nodes can allocate it, and a claim waits
    /// until it is deleted (nobody gives up on it).
    pub claim: bool,
}

/// Inference load over the day: 20 % at 04:00, 100 % at 16:00 (UTC of the simulated clock).
pub fn load_curve(now: DateTime<Utc>) -> f64 {
    let hour = f64::from(now.hour()) + f64::from(now.minute()) / 60.0;
    0.2 + 0.8 * (0.5 - 0.5 * (2.0 * PI * (hour - 4.0) / 24.0).cos())
}

const CHECKPOINT_EVERY_MIN: i64 = 30;
/// Pending work is withdrawn after waiting this many hours.
const GIVE_UP_H: i64 = 6;
const CHECKPOINT_MIN: i64 = 2;
/// Pseudo GPU instance ids from here mark replicas taken in one scheduling round.
pub(super) const SHARE_BASE: u32 = 1 << 20;
/// Arrivals an hour of the daytime wave.
const WAVE_PER_H: f64 = 6.0;

/// One tick in hours.
const TICK_H: f64 = super::TICK.as_secs_f64() / 3600.0;

impl Job {
    /// A job just submitted at `now`, not placed: `duration` of work once it runs, activity
    /// up to `peak` %, `mem_milli` thousandths of its allocation in use.
    pub(super) fn pending(
        w: Workload,
        now: DateTime<Utc>,
        duration: Span,
        key: u64,
        peak: f64,
        mem_milli: u64,
    ) -> Self {
        Job {
            w,
            duration,
            ends_at: now + duration,
            key,
            peak,
            mem_mib: 0,
            mem_milli,
            gi: None,
            steady: false,
            claim: false,
        }
    }

    pub fn utilization(&self, now: DateTime<Utc>) -> f64 {
        let step = now.timestamp() / 5;
        let n = noise(self.key, step);
        let u = match self.w.kind {
            WorkloadKind::Training => {
                let ran = self.w.started_at.map_or(0, |s| (now - s).num_minutes());
                if ran % CHECKPOINT_EVERY_MIN >= CHECKPOINT_EVERY_MIN - CHECKPOINT_MIN {
                    8.0 + 4.0 * n
                } else {
                    self.peak + 3.0 * n
                }
            }
            WorkloadKind::Inference if self.steady => self.peak + 2.0 * n,
            WorkloadKind::Inference => load_curve(now) * self.peak + 5.0 * n,
            WorkloadKind::Other => 1.5 + 1.5 * n,
        };
        u.clamp(0.0, 100.0)
    }
}

/// Where a pending job could start.
pub(super) enum Spot {
    Whole {
        node: usize,
        cards: Vec<usize>,
    },
    Mig {
        node: usize,
        card: usize,
        gi: u32,
    },
    /// One replica of a time-sliced or MPS card.
    Share {
        node: usize,
        card: usize,
    },
    /// A DynamicMIG card: the DRA driver creates an instance of `profile` at `start` for it
    /// (destroyed when it ends).
    Create {
        node: usize,
        card: usize,
        profile: String,
        start: u8,
        size: u8,
    },
}

impl Spot {
    pub(super) fn node(&self) -> usize {
        match self {
            Spot::Whole { node, .. }
            | Spot::Mig { node, .. }
            | Spot::Share { node, .. }
            | Spot::Create { node, .. } => *node,
        }
    }
}

impl Sim {
    fn id(&mut self) -> String {
        let id = format!("sim:{}", self.next_id);
        self.next_id += 1;
        id
    }

    pub(super) fn new_job(
        &mut self,
        kind: WorkloadKind,
        profile: Option<String>,
        gpus: u32,
        model: Option<String>,
    ) -> Job {
        const TEAMS: &[&str] = &["search", "ads", "vision", "speech", "llm-core", "recsys", "research"];
        const TRAIN: &[&str] =
            &["pretrain-7b", "finetune-llama", "vit-sweep", "asr-conformer", "dlrm-train", "rl-agent"];
        const SERVE: &[&str] = &["embed-svc", "rerank-svc", "chat-svc", "ocr-svc", "tts-svc", "asr-svc"];
        let id = self.id();
        let team = *self.rng.pick(TEAMS).unwrap_or(&"ops");
        let (base, priority, mean_h) = match kind {
            WorkloadKind::Training => (*self.rng.pick(TRAIN).unwrap_or(&"train"), 50, 3.0),
            WorkloadKind::Inference => (*self.rng.pick(SERVE).unwrap_or(&"svc"), 100, 8.0),
            WorkloadKind::Other => ("notebook", 10, 2.0),
        };
        let mut w =
            Workload::new(id.clone(), format!("{team}/{base}-{}", self.next_id - 1), kind, WorkloadState::Pending);
        w.owner = Some(team.to_string());
        w.priority = Some(priority);
        w.request.mig_profile = profile;
        w.request.gpus = Some(gpus);
        w.request.model = model;
        w.submitted_at = Some(self.now);
        let hours = self.rng.exp(mean_h).max(0.3);
        let key = self.rng.next_u64();
        let peak = match kind {
            WorkloadKind::Training => 88.0 + self.rng.f64() * 10.0,
            WorkloadKind::Inference => 40.0 + self.rng.f64() * 55.0,
            WorkloadKind::Other => 3.0,
        };
        let mem_frac = match kind {
            WorkloadKind::Training => 0.82 + self.rng.f64() * 0.14,
            WorkloadKind::Inference => 0.45 + self.rng.f64() * 0.45,
            WorkloadKind::Other => 0.25 + self.rng.f64() * 0.3,
        };
        let duration = Span::seconds((hours * 3600.0) as i64);
        let mem_milli = (mem_frac * 1000.0) as u64;
        Job::pending(w, self.now, duration, key, peak, mem_milli)
    }

    /// Start a new job (one not yet in the list) on `spot`; it becomes the list's last.
    pub(super) fn start(&mut self, job: Job, spot: Spot) {
        let job = self.placed(job, spot);
        self.jobs.push(job);
    }

    /// Start the listed job at `i` on `spot` (a queued job, or one requeued).
    pub(super) fn start_at(&mut self, i: usize, spot: Spot) {
        let Some(job) = self.jobs.get(i).cloned() else { return };
        let job = self.placed(job, spot);
        self.jobs[i] = job;
    }

    /// Create an instance of `profile` at `start` on DynamicMIG card `card` of `node`, as the
    /// DRA driver does when a claim's pod starts: its GPU instance id, with the free counts
    /// kept (a new instance counts free until its job holds it).
    fn create_instance(&mut self, node: usize, card: usize, profile: &str, start: u8, size: u8) -> u32 {
        let before = self.free.as_ref().map(|_| self.free_here(node, card, None));
        let c = &mut self.nodes[node].cards[card];
        let gi = c.mig.instances.iter().map(|i| i.gi_id).max().unwrap_or(0) + 1;
        let memory = c.gpu_model().and_then(|m| m.profile(profile)).map(|p| p.planning_mib());
        c.mig.enabled = true;
        c.mig.placements = crate::model::Placements::Known;
        c.mig.instances.push(crate::model::MigInstance {
            gi_id: gi,
            profile: profile.to_string(),
            start,
            size,
            compute_instances: vec![crate::model::ComputeInstance { ci_id: 0, profile: profile.to_string() }],
            memory_total_mib: memory,
            ..crate::model::MigInstance::default()
        });
        c.mig.instances.sort_by_key(|i| i.start);
        super::build::refresh_placeable(c);
        if let Some(before) = before {
            let after = self.free_here(node, card, Some(gi));
            self.count_free(node, (before.0, None), after);
        }
        gi
    }

    /// Destroy instance `gi` of DynamicMIG card `card` of `node` once nothing holds it: the
    /// driver's cleanup when the claim's pod ends. MIG goes off with the last one.
    fn destroy_instance(&mut self, node: usize, card: usize, gi: u32) {
        let c = &self.nodes[node].cards[card];
        if !c.mig.instances.iter().any(|i| i.gi_id == gi && i.workloads.is_empty()) {
            return;
        }
        let before = self.free.as_ref().map(|_| self.free_here(node, card, Some(gi)));
        let c = &mut self.nodes[node].cards[card];
        c.mig.instances.retain(|i| i.gi_id != gi);
        if c.mig.instances.is_empty() {
            c.mig = crate::model::MigState::default();
        }
        super::build::refresh_placeable(c);
        if let Some(before) = before {
            let after = self.free_here(node, card, None);
            self.count_free(node, before, after);
        }
    }

    /// `job` running on `spot` from now, holding its cards, with its start events.
    fn placed(&mut self, mut job: Job, spot: Spot) -> Job {
        let spot = match spot {
            Spot::Create { node, card, profile, start, size } => {
                let gi = self.create_instance(node, card, &profile, start, size);
                self.events.push(Event {
                    at: self.now,
                    card: Some(CardRef::new(self.nodes[node].name.clone(), self.nodes[node].cards[card].index)),
                    severity: Severity::Info,
                    text: format!("DRA driver created MIG {profile}@{start} for {}", job.w.id),
                });
                Spot::Mig { node, card, gi }
            }
            other => other,
        };
        let (node, refs, alloc) = match &spot {
            Spot::Whole { node, cards } => {
                let n = &self.nodes[*node];
                let refs: Vec<CardRef> =
                    cards.iter().map(|&c| CardRef::new(n.name.clone(), n.cards[c].index)).collect();
                let alloc = cards.iter().filter_map(|&c| n.cards[c].memory_total_mib).sum::<u64>();
                (*node, refs, alloc)
            }
            Spot::Mig { node, card, gi } => {
                let n = &self.nodes[*node];
                let c = &n.cards[*card];
                job.gi = Some(*gi);
                let alloc =
                    c.mig.instances.iter().find(|i| i.gi_id == *gi).and_then(|i| i.memory_total_mib).unwrap_or(0);
                (*node, vec![CardRef::new(n.name.clone(), c.index)], alloc)
            }
            Spot::Share { node, card } => {
                let n = &self.nodes[*node];
                let c = &n.cards[*card];
                // Time-slicing isolates no memory: a replica can reach the whole card. MPS
                // limits each client to its share.
                let alloc = c.sharing.mps_memory_limit_mib.or(c.memory_total_mib).unwrap_or(0);
                (*node, vec![CardRef::new(n.name.clone(), c.index)], alloc)
            }
            // Made a `Mig` spot above.
            Spot::Create { node, card, .. } => {
                let n = &self.nodes[*node];
                (*node, vec![CardRef::new(n.name.clone(), n.cards[*card].index)], 0)
            }
        };
        // The same share of whatever it is given, on its first start and after a requeue.
        job.mem_mib = alloc * job.mem_milli / 1000;
        job.w.request.gpu_memory_mib = Some(alloc);
        job.w.memory_used_mib = Some(job.mem_mib);
        job.w.state = WorkloadState::Running;
        job.w.reason = None;
        job.w.started_at = Some(self.now);
        job.w.node = Some(self.nodes[node].name.clone());
        job.ends_at = self.now + job.duration;
        for r in &refs {
            self.events.push(Event {
                at: self.now,
                card: Some(r.clone()),
                severity: Severity::Info,
                text: format!("{} started ({})", job.w.id, job.w.name),
            });
        }
        job.w.cards = refs;
        self.hold(&job, true);
        job
    }

    /// Add (or remove) the job as a holder of its cards or instance.
    pub(super) fn hold(&mut self, job: &Job, on: bool) {
        for r in &job.w.cards {
            let Some(&ni) = self.node_index.get(&r.node) else { continue };
            let Some(ci) = self.nodes[ni].cards.iter().position(|c| c.index == r.index) else { continue };
            let before = self.free.as_ref().map(|_| self.free_here(ni, ci, job.gi));
            let card = &mut self.nodes[ni].cards[ci];
            let list = card.holders_mut(job.gi);
            list.retain(|w| *w != job.w.id);
            if on {
                list.push(job.w.id.clone());
            }
            if let Some(before) = before {
                let after = self.free_here(ni, ci, job.gi);
                self.count_free(ni, before, after);
            }
            if super::build::dynamic(&self.nodes[ni].cards[ci]) {
                match job.gi {
                    Some(gi) if !on => self.destroy_instance(ni, ci, gi),
                    _ => super::build::refresh_placeable(&mut self.nodes[ni].cards[ci]),
                }
            }
        }
    }

    pub(super) fn tick(&mut self) {
        let now = self.now;
        // Completions, taken out in one pass (one `remove` each moved the rest of the list:
        // most of a tick at 32,768 cards), then handled last first as before.
        let done: Vec<Job> = self.jobs.extract_if(.., |j| j.w.state.is_active() && j.ends_at <= now).collect();
        for job in done.iter().rev() {
            self.hold(job, false);
            for r in &job.w.cards {
                self.events.push(Event {
                    at: now,
                    card: Some(r.clone()),
                    severity: Severity::Info,
                    text: format!("{} completed", job.w.id),
                });
            }
        }
        // People give up on work that waited too long; this also keeps the queue bounded.
        let before = self.jobs.len();
        self.jobs.retain(|j| {
            j.w.state != WorkloadState::Pending
                || j.claim
                || j.w.submitted_at.is_none_or(|s| now - s < Span::hours(GIVE_UP_H))
        });
        let gave_up = self.jobs.len() != before;
        let arrived = self.arrivals() || gave_up;
        // Nothing freed and nothing new: the last decisions still stand.
        if !done.is_empty() || arrived || self.reschedule {
            self.reschedule = false;
            self.schedule();
        }
    }

    fn arrivals(&mut self) -> bool {
        let before = self.jobs.len();
        // Whole-card and MIG arrivals scale with the unshared cards (32 in the default fleet).
        let unshared = self.unshared;
        let scale = self.cfg.arrival_scale * (unshared as f64 / 32.0);
        let per_tick = super::TICK.as_secs_f64() / 3600.0 * scale;
        // About 2.5 training jobs an hour at ~2.7 GPUs for ~3 h: near, not over, capacity.
        if self.rng.chance(2.5 * per_tick) {
            let gpus = *self.rng.pick(&[1u32, 1, 1, 2, 2, 4, 8]).unwrap_or(&1);
            let model =
                if self.rng.chance(0.5) { self.rng.pick(&self.models).map(|m| m.nvml_name.to_string()) } else { None };
            let job = self.new_job(WorkloadKind::Training, None, gpus, model);
            self.jobs.push(job);
        }
        if self.rng.chance(2.0 * per_tick) {
            // Mostly profiles some card has; sometimes one that needs a repartition.
            let profiles: Vec<String> =
                if self.rng.chance(0.8) { self.configured_profiles() } else { self.wanted_profiles() };
            let profile = self.rng.pick(&profiles).cloned();
            let job = self.new_job(WorkloadKind::Inference, profile, 1, None);
            self.jobs.push(job);
        }
        if self.rng.chance(0.5 * per_tick) {
            let job = self.new_job(WorkloadKind::Other, None, 1, None);
            self.jobs.push(job);
        }
        // Small services asking for a replica of a shared card, where there are shared cards.
        let shared_scale = self.cfg.arrival_scale * TICK_H;
        if self.shared_ready && self.share_rng.chance(1.5 * shared_scale) {
            let job = self.replica_job(WorkloadKind::Inference);
            self.jobs.push(job);
        }
        // A daytime wave of small inference (office-hours embedding and OCR services): 1g.10gb
        // services arrive 08:00-18:00 UTC for about three hours each, the demand a day layout
        // serves.
        // The wave's stream draws every tick, whatever the hour, so that when it starts
        // (the clock's second) never shifts its draws.
        let roll = self.wave_rng.chance(WAVE_PER_H * self.cfg.arrival_scale * TICK_H);
        if (8..18).contains(&self.now.hour()) && roll {
            let job = self.wave_job();
            self.jobs.push(job);
        }
        self.jobs.len() != before
    }

    pub(super) fn configured_profiles(&mut self) -> Vec<String> {
        if let Some(c) = &self.configured {
            return c.clone();
        }
        let c = self.count_configured_profiles();
        self.configured = Some(c.clone());
        c
    }

    fn count_configured_profiles(&self) -> Vec<String> {
        // Sorted and distinct; tens of thousands of instances at scale, a handful of profiles:
        // deduplicated as they come, sorted once.
        let mut distinct: Vec<&str> = Vec::new();
        for p in self.nodes.iter().flat_map(|n| &n.cards).flat_map(|c| &c.mig.instances).map(|i| i.profile.as_str()) {
            if distinct.last() != Some(&p) && !distinct.contains(&p) {
                distinct.push(p);
            }
        }
        distinct.sort_unstable();
        distinct.into_iter().map(str::to_string).collect()
    }

    /// Profiles inference asks for: the small ones of each model, including some no card has.
    pub(super) fn wanted_profiles(&self) -> Vec<String> {
        let mut out = Vec::new();
        // One model per node: the distinct ones (four, where there are thousands of nodes).
        let mut models: Vec<&str> = self.models.iter().map(|m| m.nvml_name).collect();
        models.sort_unstable();
        models.dedup();
        for m in models {
            if let Some(model) = crate::model::mig::lookup(m) {
                out.extend(
                    model
                        .profiles
                        .iter()
                        .filter(|p| p.compute_slices <= 3 && !p.has_media_extensions())
                        .map(|p| p.name.clone()),
                );
            }
        }
        out.sort();
        out.dedup();
        out
    }
}
