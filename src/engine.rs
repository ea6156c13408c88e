//! The engine: builds a running tessera from settings. It spawns the configured sources,
//! owns the store that merges their updates and the receiver they send on, and holds the
//! action runner with the handles executors need. The console, `snapshot` and the action
//! commands all start here.

use std::time::Duration;

use chrono::{Timelike, Utc};
use tokio::sync::mpsc;

use crate::actions::execute::Env;
use crate::actions::run::Runner;
use crate::config::Config;
use crate::model::SourceKind;
use crate::sources::{SourceUpdate, http, kubernetes, nvml, prometheus, scrape, sim, slurm};
use crate::store::Store;

/// How long a one-shot collection waits for every source's first answer.
pub const COLLECT_TIMEOUT: Duration = Duration::from_secs(20);

/// The runtime every command runs its sources on: two workers are plenty for IO-bound tasks.
pub fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))
}

/// A running tessera: sources spawned, their updates arriving, the store merging them.
pub struct Engine {
    pub store: Store,
    pub updates: mpsc::Receiver<SourceUpdate>,
    pub runner: Runner,
}

impl Engine {
    /// Start every source the config names. Must run inside a tokio runtime.
    pub fn start(cfg: &Config) -> Result<Self, String> {
        let (tx, updates) = mpsc::channel(64);
        let mut store = Store::new();
        let sim = spawn_all(cfg, &mut store, tx)?;
        let env = Env {
            read_only: cfg.read_only,
            sim,
            nvml_lib: cfg.sources.nvml.clone().flatten(),
            command_timeout: cfg.slurm.timeout,
            kubernetes: kubernetes_settings(cfg),
        };
        Ok(Self { store, updates, runner: Runner::new(cfg, env) })
    }

    /// Apply updates until every source answered once (or the timeout passed), then rebuild.
    pub async fn first_answers(&mut self) {
        let deadline = tokio::time::Instant::now() + COLLECT_TIMEOUT;
        while self.store.any_connecting() {
            match tokio::time::timeout_at(deadline, self.updates.recv()).await {
                Ok(Some(update)) => self.store.apply_deferred(update, Utc::now()),
                Ok(None) | Err(_) => break,
            }
        }
        self.store.rebuild();
    }

    /// Apply every update that has arrived, then rebuild once.
    pub fn catch_up(&mut self) {
        while let Ok(update) = self.updates.try_recv() {
            self.store.apply_deferred(update, Utc::now());
        }
        self.store.rebuild();
    }
}

/// The Kubernetes source's settings, when it is configured.
pub fn kubernetes_settings(cfg: &Config) -> Option<kubernetes::Settings> {
    let context = cfg.sources.kubernetes.clone()?;
    Some(kubernetes::Settings { context, kubeconfig: cfg.kubernetes.kubeconfig.clone(), kinds: cfg.kinds.clone() })
}

/// Start every source the config names, registering each with the store. With no real source
/// configured, or with `demo`, the simulated cluster runs; its handle is returned so executors
/// reach it. Must run inside a tokio runtime.
fn spawn_all(
    cfg: &Config,
    store: &mut Store,
    tx: mpsc::Sender<SourceUpdate>,
) -> Result<Option<sim::SimHandle>, String> {
    let s = &cfg.sources;
    // NVML first: where it and a metrics source report the same card, its values and MIG
    // placements win (the store ranks sources by registration order).
    let mut run_sim = s.demo;
    if let Some(lib) = &s.nvml {
        store.register("nvml", SourceKind::Nvml, cfg.refresh);
        nvml::spawn("nvml".into(), lib.clone(), cfg.refresh, tx.clone());
    } else if !s.demo && !s.any_real() {
        // Nothing configured: use this host's GPUs if NVML finds any, else the simulator.
        let unavailable = match nvml::open(None).map(|n| n.device_count()) {
            Ok(Ok(n)) if n > 0 => None,
            Ok(_) => Some("no GPU found".to_string()),
            Err(reason) => Some(reason),
        };
        match unavailable {
            None => {
                store.register("nvml", SourceKind::Nvml, cfg.refresh);
                nvml::spawn("nvml".into(), None, cfg.refresh, tx.clone());
            }
            Some(reason) => {
                let reason = format!("{reason}; running the simulated cluster");
                store.register_unavailable("nvml", SourceKind::Nvml, reason);
                run_sim = true;
            }
        }
    }
    // Schedulers before the metrics sources: their workloads (kind, reason, request) are the
    // richer record of a job or pod that an exporter's holder labels also name.
    if s.slurm {
        let c = &cfg.slurm;
        let rest = c.rest_url.as_ref().map(|url| slurm::Rest {
            url: url.clone(),
            user: c.rest_user.clone(),
            token_file: c.rest_token_file.clone(),
        });
        let client = match &rest {
            Some(_) => Some(http::Client::new(&s.http).map_err(|e| format!("sources.http: {e}"))?),
            None => None,
        };
        let settings = slurm::Settings {
            commands_dir: c.commands_dir.clone(),
            timeout: c.timeout,
            rest,
            kinds: cfg.kinds.clone(),
        };
        let every = cfg.refresh.max(Duration::from_secs(5));
        store.register("slurm", SourceKind::Slurm, every);
        slurm::spawn("slurm".into(), settings, client, every, tx.clone());
    }
    if let Some(settings) = kubernetes_settings(cfg) {
        let every = cfg.refresh.max(Duration::from_secs(2));
        store.register("kubernetes", SourceKind::Kubernetes, every);
        kubernetes::spawn("kubernetes".into(), settings, every, tx.clone());
    }
    if let Some(base) = &s.prometheus {
        let client = http::Client::new(&s.http).map_err(|e| format!("sources.http: {e}"))?;
        let every = cfg.refresh.max(Duration::from_secs(5));
        store.register("prometheus", SourceKind::Prometheus, every);
        if s.prometheus_queue {
            store.reports_queue("prometheus");
        }
        let settings = prometheus::Settings {
            base: base.clone(),
            query: s.prometheus_query.clone(),
            fields: s.promql.clone(),
            with_queue: s.prometheus_queue,
            node: s.scrape_node,
        };
        prometheus::spawn(settings, client, every, tx.clone());
    }
    if !s.scrape.is_empty() {
        let client = http::Client::new(&s.http).map_err(|e| format!("sources.http: {e}"))?;
        let limit = std::sync::Arc::new(tokio::sync::Semaphore::new(scrape::MAX_CONCURRENT));
        let mut seen = std::collections::HashSet::new();
        for url in s.scrape.iter().filter(|u| seen.insert(scrape::source_name(u))) {
            store.register(scrape::source_name(url), SourceKind::Scrape, cfg.refresh);
            scrape::spawn(url.clone(), s.scrape_node, client.clone(), limit.clone(), cfg.refresh, tx.clone());
        }
    }
    if !run_sim {
        return Ok(None);
    }
    let start = Utc::now().with_nanosecond(0).unwrap_or_else(Utc::now);
    let sim_cfg = sim::SimConfig { size: cfg.demo.size, ..sim::SimConfig::new(cfg.demo.seed, start) };
    let name = "sim".to_string();
    store.register(name.clone(), SourceKind::Simulated, cfg.refresh);
    let (refresh, speed) = (cfg.refresh, cfg.demo.speed);
    let (ops_tx, ops) = mpsc::channel(8);
    tokio::spawn(async move {
        // Building a large simulated cluster takes a moment: keep it off the owner loop.
        let Ok(sim) = tokio::task::spawn_blocking(move || sim::Sim::new(sim_cfg)).await else { return };
        sim::run(sim, name, refresh, speed, tx, ops).await;
    });
    Ok(Some(sim::SimHandle { tx: ops_tx, speed }))
}

/// A store holding one snapshot of the simulated cluster (`seed`, first snapshot at `start`),
/// registered as the engine registers it: the fixture of tests that need a realistic fleet.
#[cfg(test)]
pub(crate) fn simulated_store(seed: u64, start: chrono::DateTime<Utc>) -> Store {
    let mut sim = sim::Sim::new(sim::SimConfig::new(seed, start));
    let mut store = Store::new();
    store.register("sim", SourceKind::Simulated, Duration::from_secs(1));
    let update =
        SourceUpdate { source: "sim".into(), kind: SourceKind::Simulated, at: sim.now(), result: Ok(sim.snapshot()) };
    store.apply(update, start);
    store
}
