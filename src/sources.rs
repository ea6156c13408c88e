//! Sources collect data and send whole updates to the owner loop; they never draw.

pub mod dcgm;
pub mod exposition;
pub mod http;
pub mod kinds;
pub mod kubernetes;
pub mod nvml;
pub mod prometheus;
pub mod scrape;
pub mod sim;
pub mod slurm;

use chrono::{DateTime, Timelike, Utc};
use tokio::sync::mpsc;

use crate::model::{Event, Node, SourceKind, Workload};

/// What one collection of one source saw: a fragment of the fleet.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Partial {
    pub nodes: Vec<Node>,
    pub workloads: Vec<Workload>,
    /// Events since the previous update.
    pub events: Vec<Event>,
    /// True when the data is simulated; the header then says SIMULATED.
    pub simulated: bool,
    /// Problems that did not stop the collection (bad lines skipped, say), for the status.
    pub note: Option<String>,
    /// History a source keeps (Prometheus), sent once; empty otherwise.
    pub history: Vec<crate::model::CardHistory>,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct SourceError {
    pub message: String,
    /// The source cannot work at all (no library, bad address); else it may recover.
    pub fatal: bool,
}

/// One message from a source task to the owner loop.
#[derive(Debug, Clone)]
pub struct SourceUpdate {
    pub source: String,
    pub kind: SourceKind,
    pub at: DateTime<Utc>,
    pub result: Result<Partial, SourceError>,
}

/// Capped exponential backoff for a failing source: base, 2×, 4×, … up to `max`.
pub fn backoff(base: std::time::Duration, failures: u32, max: std::time::Duration) -> std::time::Duration {
    let factor = 1u32.checked_shl(failures.min(16)).unwrap_or(u32::MAX);
    base.saturating_mul(factor).min(max)
}

/// The Kubernetes source's settings, when it is configured.
pub fn kubernetes_settings(cfg: &crate::config::Config) -> Option<kubernetes::Settings> {
    let context = cfg.sources.kubernetes.clone()?;
    Some(kubernetes::Settings { context, kubeconfig: cfg.kubernetes.kubeconfig.clone(), kinds: cfg.kinds.clone() })
}

/// What executors need to reach sources that are also backends (the simulator).
#[derive(Debug, Clone, Default)]
pub struct Handles {
    pub sim: Option<sim::SimHandle>,
}

/// Start every source the config names, registering each with the store. With no real source
/// configured, or with `demo`, the simulated cluster runs. Must run inside a tokio runtime.
pub fn spawn_all(
    cfg: &crate::config::Config,
    store: &mut crate::store::Store,
    tx: mpsc::Sender<SourceUpdate>,
) -> Result<Handles, String> {
    let mut handles = Handles::default();
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
        let every = cfg.refresh.max(std::time::Duration::from_secs(5));
        store.register("slurm", SourceKind::Slurm, every);
        slurm::spawn("slurm".into(), settings, client, every, tx.clone());
    }
    if let Some(settings) = kubernetes_settings(cfg) {
        let every = cfg.refresh.max(std::time::Duration::from_secs(2));
        store.register("kubernetes", SourceKind::Kubernetes, every);
        kubernetes::spawn("kubernetes".into(), settings, every, tx.clone());
    }
    if let Some(base) = &s.prometheus {
        let client = http::Client::new(&s.http).map_err(|e| format!("sources.http: {e}"))?;
        let every = cfg.refresh.max(std::time::Duration::from_secs(5));
        store.register("prometheus", SourceKind::Prometheus, every);
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
    if run_sim {
        let start = Utc::now().with_nanosecond(0).unwrap_or_else(Utc::now);
        let sim_cfg = sim::SimConfig { size: cfg.demo.size, ..sim::SimConfig::new(cfg.demo.seed, start) };
        let name = "sim".to_string();
        store.register(name.clone(), SourceKind::Simulated, cfg.refresh);
        let refresh = cfg.refresh;
        let speed = cfg.demo.speed;
        let (ops_tx, ops) = mpsc::channel(8);
        handles.sim = Some(sim::SimHandle { tx: ops_tx, speed });
        tokio::spawn(async move {
            // Building a large simulated cluster takes a moment: keep it off the owner loop.
            let Ok(sim) = tokio::task::spawn_blocking(move || sim::Sim::new(sim_cfg)).await else { return };
            sim::run(sim, name, refresh, speed, tx, ops).await;
        });
    }
    Ok(handles)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn backoff_doubles_then_caps() {
        let s = Duration::from_secs;
        assert_eq!(backoff(s(1), 0, s(60)), s(1));
        assert_eq!(backoff(s(1), 3, s(60)), s(8));
        assert_eq!(backoff(s(1), 10, s(60)), s(60));
        assert_eq!(backoff(s(1), u32::MAX, s(60)), s(60));
    }
}
