//! The simulated cluster: seeded, deterministic, realistic; the default when nothing else is
//! configured, and `--demo`. It reaches the store through the same channel as real sources.

mod actions;
mod build;
mod jobs;
mod observe;
mod opening;
pub mod rng;
mod scenes;
mod scheduler;

use std::collections::HashMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::mpsc;

use crate::model::{Event, Node, SourceKind, Workload};

use super::{Partial, SourceUpdate};
pub use actions::{SimError, SimOp};
use build::CardModel;
use jobs::Job;
use rng::Rng;

/// How one simulation tick moves the clock; events happen on this grid, whatever the
/// refresh, so the same seed gives the same cluster however time is fed in.
pub const TICK: Duration = Duration::from_secs(5);

/// Simulated history before `start`, so the cluster is busy and the queue has reasons.
pub const WARMUP: Duration = Duration::from_secs(3600);

#[derive(Debug, Clone)]
pub struct SimConfig {
    pub seed: u64,
    /// Simulated time of the first snapshot; the cluster has run for `WARMUP` before it.
    pub start: DateTime<Utc>,
    /// `Some((nodes, gpus))` for `--demo-size`; `None` for the default fleet.
    pub size: Option<(u32, u32)>,
    /// Multiplies the arrival rates (tests use it to overload the queue).
    pub arrival_scale: f64,
}

impl SimConfig {
    pub fn new(seed: u64, start: DateTime<Utc>) -> Self {
        Self { seed, start, size: None, arrival_scale: 1.0 }
    }
}

#[derive(Debug)]
pub struct Sim {
    cfg: SimConfig,
    rng: Rng,
    /// The shared cards' own stream and ids (`sim:rN`): the rest of the cluster draws exactly
    /// as it would without them.
    share_rng: Rng,
    next_replica: u64,
    /// The daytime wave of small inference: its own stream and ids (`sim:dN`).
    wave_rng: Rng,
    next_wave: u64,
    /// The shared scene is laid out: replica jobs arrive from now on.
    shared_ready: bool,
    now: DateTime<Utc>,
    nodes: Vec<Node>,
    models: Vec<CardModel>,
    jobs: Vec<Job>,
    next_id: u64,
    /// Time fed in but not yet a whole tick.
    carry: Duration,
    events: Vec<Event>,
    node_index: HashMap<String, usize>,
    /// Each node's GPU model in the catalog (its first card's; a node's cards are alike):
    /// looked up once, not per scheduling search.
    node_models: Vec<Option<&'static str>>,
    /// Cards that are not shared (arrivals scale with them); sharing never changes.
    unshared: usize,
    /// Something happened since the last snapshot (a step, an operation).
    changed: bool,
    /// The MIG profiles configured on any card, sorted: kept until a repartition.
    configured: Option<Vec<String>>,
    /// Per node, the whole cards a job could ever get there, by model: kept until an
    /// operation changes a card (drain, undrain, repartition).
    usable: Option<scheduler::Usable>,
    /// Free whole cards per node and free MIG instances per profile, kept current as jobs
    /// take and leave cards; counted afresh after an operation changes a card.
    free: Option<scheduler::Free>,
    /// Something changed outside `tick` (an action): schedule on the next tick.
    reschedule: bool,
    /// The waiting DRA claim's reason, with the DynamicMIG cards' state it was said for
    /// (explaining it clones those cards: it is said when a snapshot is taken, and again only
    /// when those cards changed).
    claim_why: Option<(u64, String, String)>,
    /// The first snapshot carries the hour of history before it (as Prometheus sends its own).
    history_sent: bool,
    /// Demand by hour of the previous day, sent with the first snapshot (`seed_demand`).
    demand_seed: Option<crate::model::demand::DemandHistory>,
}

impl Sim {
    pub fn new(cfg: SimConfig) -> Self {
        let built = build::build(cfg.seed, cfg.size);
        // Whole-card and MIG work asks for the models of unshared nodes; shared cards serve
        // replica requests only.
        let models: Vec<CardModel> =
            built.iter().filter(|(n, _)| n.cards.iter().all(|c| c.sharing.unit.is_none())).map(|(_, m)| *m).collect();
        let nodes: Vec<Node> = built.into_iter().map(|(n, _)| n).collect();
        let node_index = nodes.iter().enumerate().map(|(i, n)| (n.name.clone(), i)).collect();
        let node_models =
            nodes.iter().map(|n| n.cards.first().and_then(|c| c.gpu_model()).map(|m| m.name.as_str())).collect();
        let unshared = nodes.iter().flat_map(|n| &n.cards).filter(|c| c.sharing.unit.is_none()).count();
        let mut sim = Self {
            node_index,
            node_models,
            unshared,
            changed: true,
            configured: None,
            usable: None,
            claim_why: None,
            free: None,
            reschedule: true,
            rng: Rng::new(cfg.seed),
            share_rng: Rng::new(cfg.seed ^ 0x5a4e_d0c5),
            next_replica: 1,
            wave_rng: Rng::new(cfg.seed ^ 0x0da7_11fe),
            next_wave: 1,
            shared_ready: false,
            now: cfg.start - WARMUP,
            nodes,
            models,
            jobs: Vec::new(),
            next_id: 1,
            carry: Duration::ZERO,
            events: Vec::new(),
            history_sent: false,
            demand_seed: None,
            cfg,
        };
        sim.populate();
        sim
    }

    pub fn now(&self) -> DateTime<Utc> {
        self.now
    }

    /// Move simulated time forward by `dt`, one tick at a time.
    pub fn advance(&mut self, dt: Duration) {
        self.carry += dt;
        while self.carry >= TICK {
            self.carry -= TICK;
            self.now += TICK;
            self.tick();
            self.changed = true;
        }
    }

    /// The cluster as a source would report it now; events since the last snapshot.
    pub fn snapshot(&mut self) -> Partial {
        self.changed = false;
        self.say_claim_reasons();
        let history = if std::mem::replace(&mut self.history_sent, true) { Vec::new() } else { self.past_history() };
        Partial {
            nodes: self.observed_nodes(),
            workloads: self.jobs.iter().map(|j| j.w.clone()).collect(),
            events: std::mem::take(&mut self.events),
            simulated: true,
            history,
            demand: self.demand_seed.take(),
            ..Partial::default()
        }
    }

    /// Send `d` with the next snapshot, as demand measured before the start.
    pub fn seed_demand(&mut self, d: crate::model::demand::DemandHistory) {
        self.demand_seed = Some(d);
    }

    /// Demand by hour over the simulated day before `cfg.start`: the same cluster replayed from
    /// its seed a day earlier, sampled every ten minutes, as a source with history would send
    /// its own (the schedule suggestion reads it).
    pub fn past_day_demand(cfg: &SimConfig) -> crate::model::demand::DemandHistory {
        use crate::model::demand::{DemandHistory, SAMPLE_EVERY_S};
        let day = chrono::Duration::hours(24);
        let mut sim = Sim::new(SimConfig { start: cfg.start - day, ..cfg.clone() });
        let mut d = DemandHistory::default();
        let every = Duration::from_secs(SAMPLE_EVERY_S.unsigned_abs());
        while sim.now < cfg.start {
            let at = sim.now;
            let fleet = crate::model::Fleet {
                workloads: sim.jobs.iter().map(|j| j.w.clone()).collect(),
                sources: vec![crate::model::SourceStatus::live("sim", SourceKind::Simulated, at)],
                ..crate::model::Fleet::default()
            };
            d.sample(&fleet, at);
            sim.advance(every);
        }
        d
    }
}

/// One job the simulated cluster submits, with the work it does once it runs.
#[derive(Debug, Clone)]
pub struct Arrival {
    pub w: Workload,
    /// When it arrived: its submission, or the start for work already there.
    pub at: DateTime<Utc>,
    /// Work once it runs (for work already running at the start: what it has left).
    pub duration: chrono::Duration,
    /// Its utilisation at full load, percent.
    pub peak_pct: f64,
}

impl Sim {
    /// Every job the simulated cluster submits over `span` from `cfg.start` (work already
    /// there at the start arrives at the start with what it has left): the demand `tessera
    /// simulate --demo` replays, the waiting DRA claim left out. The same seed gives the same
    /// arrivals.
    pub fn demand(cfg: &SimConfig, span: Duration) -> Vec<Arrival> {
        let mut sim = Sim::new(cfg.clone());
        let end = sim.now + span;
        let mut seen = std::collections::HashSet::new();
        let mut out = Vec::new();
        loop {
            // The waiting claim is there to be explained (it never starts live: a card of its
            // node is lost); it is no demand of the day.
            for j in sim.jobs.iter().filter(|j| !j.claim) {
                if seen.insert(j.w.id.clone()) {
                    let running = j.w.state.is_active();
                    let at = if running { sim.now } else { j.w.submitted_at.unwrap_or(sim.now).max(cfg.start) };
                    let duration = if running { j.ends_at - sim.now } else { j.duration };
                    out.push(Arrival { w: j.w.clone(), at, duration, peak_pct: j.peak });
                }
            }
            if sim.now >= end {
                break;
            }
            sim.advance(TICK);
        }
        out.sort_by_key(|a| a.at);
        out
    }
}

/// An operation for the running simulator and where its answer goes.
#[derive(Debug)]
pub struct SimRequest {
    pub op: SimOp,
    pub reply: tokio::sync::oneshot::Sender<Result<String, SimError>>,
}

/// How executors reach the running simulator.
#[derive(Debug, Clone)]
pub struct SimHandle {
    pub tx: mpsc::Sender<SimRequest>,
    /// Simulated seconds per real second: executors scale their waits by it.
    pub speed: f64,
}

impl SimHandle {
    pub async fn apply(&self, op: SimOp) -> Result<String, SimError> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        self.tx.send(SimRequest { op, reply }).await.map_err(|_| SimError::Stopped)?;
        answer.await.map_err(|_| SimError::Stopped)?
    }
}

/// Run the simulator as a source: advance by wall time × `speed`, send a snapshot every
/// `refresh` and after every operation it obeys, until the receiver goes away.
pub async fn run(
    mut sim: Sim,
    name: String,
    refresh: Duration,
    speed: f64,
    tx: mpsc::Sender<SourceUpdate>,
    mut ops: mpsc::Receiver<SimRequest>,
) {
    let mut interval = tokio::time::interval(refresh);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut last = tokio::time::Instant::now();
    let mut ops_open = true;
    loop {
        tokio::select! {
            _ = interval.tick() => {}
            req = ops.recv(), if ops_open => match req {
                Some(SimRequest { op, reply }) => {
                    let _ = reply.send(sim.apply(&op));
                }
                None => ops_open = false,
            },
        }
        let now = tokio::time::Instant::now();
        sim.advance((now - last).mul_f64(speed.max(0.0)));
        last = now;
        // Between its five-second steps the cluster is as it was: say so, not the same
        // 32,768 cards again.
        let result = if sim.changed { Ok(sim.snapshot()) } else { Ok(Partial::unchanged()) };
        let update = SourceUpdate { source: name.clone(), kind: SourceKind::Simulated, at: sim.now(), result };
        if tx.send(update).await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
#[path = "sim_tests.rs"]
mod tests;
