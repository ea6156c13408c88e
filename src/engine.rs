//! The engine: builds a running tessera from settings. It spawns the configured sources,
//! owns the store that merges their updates and the receiver they send on, and holds the
//! action runner with the handles executors need. The console, `snapshot` and the action
//! commands all start here.

use std::time::Duration;

use chrono::{Timelike, Utc};
use tokio::sync::mpsc;

use crate::actions::Env;
use crate::actions::run::Runner;
use crate::config::Config;
use crate::model::SourceKind;
use crate::sources::{SourceUpdate, http, kubernetes, nvml, prometheus, scrape, sim, slurm};
use crate::store::Store;

pub mod fresh;

/// How long a one-shot collection waits for every source's first answer.
pub const COLLECT_TIMEOUT: Duration = Duration::from_secs(20);

/// Why a running tessera could not be built.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("cannot start the runtime: {0}")]
    Runtime(std::io::Error),
    /// The slurmrestd URL (redacted) a JWT would go to in the clear.
    #[error(
        "slurm.rest_url {0}: the JWT over plain http would cross the network readable: use https, or set rest_allow_plain_http = true"
    )]
    PlainJwt(String),
    /// A source's HTTP client could not be built; `section` names the config section.
    #[error("{section}: {why}")]
    Http { section: String, why: http::ClientError },
}

/// A runtime that did not start is a failure; the rest are the config's (usage, exit 2).
impl From<StartError> for crate::error::CmdError {
    fn from(e: StartError) -> Self {
        match e {
            StartError::Runtime(_) => Self::failed(e),
            StartError::PlainJwt(_) | StartError::Http { .. } => Self::usage(e),
        }
    }
}

/// The runtime every command runs its sources on: two workers are plenty for IO-bound tasks.
pub fn runtime() -> Result<tokio::runtime::Runtime, StartError> {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().map_err(StartError::Runtime)
}

/// A running tessera: sources spawned, their updates arriving, the store merging them.
pub struct Engine {
    pub store: Store,
    pub updates: mpsc::Receiver<SourceUpdate>,
    pub runner: Runner,
    /// What starting had to say without stopping (a kept file that could not be read).
    pub notes: Vec<String>,
    /// The run's clock: the scrape targets poll at `epoch + k × refresh`, and the console's
    /// clock ticks a little after, so that the answers of one poll are merged and drawn once.
    pub epoch: tokio::time::Instant,
}

impl Engine {
    /// Start every source the config names. Must run inside a tokio runtime.
    pub fn start(cfg: &Config) -> Result<Self, StartError> {
        let (tx, updates) = mpsc::channel(64);
        let mut store = Store::new();
        let epoch = tokio::time::Instant::now();
        let sim = spawn_all(cfg, &mut store, tx, epoch)?;
        // Real sources: start from the demand an earlier run measured (a file that cannot be
        // read is reported and moved aside; sampling starts afresh).
        let mut notes = Vec::new();
        if sim.is_none()
            && let Some(path) = demand_path()
        {
            match load_demand(&path) {
                Ok(Some(d)) => store.seed_demand(d),
                Ok(None) => {}
                // Unreadable (permissions, IO): left where it is.
                Err(e @ DemandFileError::Read { .. }) => notes.push(format!("demand by hour not loaded: {e}")),
                Err(e @ DemandFileError::Bad { .. }) => {
                    notes.push(format!("demand by hour not loaded: {e}: {}", set_aside(&path)));
                }
            }
        }
        let unauthed = cfg
            .sources
            .scrape
            .iter()
            .any(|u| !cfg.sources.auth.iter().any(|a| crate::url::origin(&a.url) == crate::url::origin(u)));
        if cfg.sources.http.credentials.any() && cfg.sources.prometheus.is_some() && unauthed {
            notes.push(
                "[sources.http] credentials go to the Prometheus server only: scrape targets take theirs from [[sources.auth]]".into(),
            );
        }
        if cfg.sources.http.credentials.any() && cfg.sources.prometheus.is_none() {
            notes.push(
                "[sources.http] credentials are the Prometheus server's, and none is configured: they are not sent (scrape targets take theirs from [[sources.auth]])".into(),
            );
        }
        let env = Env {
            read_only: cfg.read_only,
            sim,
            nvml_lib: cfg.sources.nvml.clone().flatten(),
            command_timeout: cfg.slurm.timeout,
            kubernetes: kubernetes_settings(cfg),
            hold: None,
        };
        Ok(Self { store, updates, runner: Runner::new(cfg, env), notes, epoch })
    }

    /// Apply updates until every source answered once (or the timeout passed), then rebuild.
    pub async fn first_answers(&mut self) {
        let deadline = tokio::time::Instant::now() + COLLECT_TIMEOUT;
        while self.store.any_connecting() {
            match tokio::time::timeout_at(deadline, self.updates.recv()).await {
                Ok(Some(update)) => {
                    self.store.apply_deferred(update, Utc::now());
                }
                Ok(None) | Err(_) => break,
            }
        }
        self.store.no_answer(COLLECT_TIMEOUT);
    }

    /// After the operator said yes at `since`: wait until every live source has answered
    /// with data collected since (at most [`COLLECT_TIMEOUT`]), then rebuild. Says which
    /// sources failed or did not answer again. See `engine/fresh.rs` for why what is queued
    /// is not enough.
    pub async fn catch_up_since(&mut self, since: chrono::DateTime<Utc>) -> fresh::Heard {
        fresh::answers_since(&mut self.store, &mut self.updates, since, COLLECT_TIMEOUT).await
    }

    /// Apply every update that has arrived, then rebuild once.
    pub fn catch_up(&mut self) {
        while let Ok(update) = self.updates.try_recv() {
            self.store.apply_deferred(update, Utc::now());
        }
        self.store.rebuild();
    }
}

/// Where the demand by hour is kept between runs: `demand.json` in the state directory, beside
/// the audit log (`$XDG_STATE_HOME/tessera/`).
pub fn demand_path() -> Option<std::path::PathBuf> {
    crate::files::state_dir().map(|d| d.join("demand.json"))
}

/// Why a kept file was not loaded: it could not be read (left alone) or is not a day of
/// demand (moved aside). Each names the file.
#[derive(Debug, thiserror::Error)]
pub enum DemandFileError {
    #[error("{}: {source}", path.display())]
    Read { path: std::path::PathBuf, source: crate::files::ReadError },
    #[error("{}: {why}", path.display())]
    Bad { path: std::path::PathBuf, why: BadDemand },
}

/// What is wrong with a kept demand file that was read.
#[derive(Debug, thiserror::Error)]
pub enum BadDemand {
    #[error("{0}")]
    Json(#[from] serde_json::Error),
    #[error(transparent)]
    History(#[from] crate::model::demand::HistoryError),
}

/// The demand kept by an earlier run (`None`: there is no file).
pub fn load_demand(path: &std::path::Path) -> Result<Option<crate::model::demand::DemandHistory>, DemandFileError> {
    use std::io::Read;
    let unread = |e: crate::files::ReadError| DemandFileError::Read { path: path.to_path_buf(), source: e };
    let bad = |e: BadDemand| DemandFileError::Bad { path: path.to_path_buf(), why: e };
    if !path.exists() {
        return Ok(None);
    }
    let file = crate::files::open_regular(path).map_err(unread)?;
    // A real file is a few tens of KiB: read no more than 1 MiB of anything else.
    let mut text = String::new();
    file.take(1 << 20).read_to_string(&mut text).map_err(|e| unread(e.into()))?;
    let d: crate::model::demand::DemandHistory = serde_json::from_str(&text).map_err(|e| bad(e.into()))?;
    d.checked().map(Some).map_err(|e| bad(e.into()))
}

/// A kept file that cannot be read is moved aside (`demand.json.bad`), not overwritten.
fn set_aside(path: &std::path::Path) -> String {
    let bad = path.with_extension("json.bad");
    match std::fs::rename(path, &bad) {
        Ok(()) => format!("moved to {}; measuring afresh", bad.display()),
        Err(e) => format!("it could not be moved aside ({e}); measuring afresh"),
    }
}

/// Why the demand by hour was not kept; each names the file or directory.
#[derive(Debug, thiserror::Error)]
pub enum KeepError {
    #[error("{}: {source}", path.display())]
    Io { path: std::path::PathBuf, source: std::io::Error },
    #[error("{0}")]
    Encode(#[from] serde_json::Error),
}

/// Keep the store's demand for the next run when it has a new sample (real sources only: the
/// simulator replays its own). `saved` is the last sample written.
pub fn save_demand(store: &Store, saved: &mut Option<chrono::DateTime<Utc>>) -> Result<(), KeepError> {
    match demand_path() {
        Some(path) => save_demand_to(&path, store, saved),
        None => Ok(()),
    }
}

/// `save_demand` to `path`.
pub fn save_demand_to(
    path: &std::path::Path,
    store: &Store,
    saved: &mut Option<chrono::DateTime<Utc>>,
) -> Result<(), KeepError> {
    let d = store.demand();
    if store.simulated() || d.last.is_none() || d.last == *saved {
        return Ok(());
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| KeepError::Io { path: dir.to_path_buf(), source: e })?;
        crate::files::check_own_dir(dir).map_err(|e| KeepError::Io { path: dir.to_path_buf(), source: e })?;
    }
    let text = serde_json::to_string(d)?;
    crate::files::write_atomic(path, text.as_bytes())
        .map_err(|e| KeepError::Io { path: path.to_path_buf(), source: e })?;
    *saved = d.last;
    Ok(())
}

/// slurmrestd's JWT never goes over plain http unless `[slurm] rest_allow_plain_http` says so
/// (the scheme as parsed: `HTTP://`, `http:host` and a leading space are plain http too).
pub fn check_slurm_rest(c: &crate::config::Slurm) -> Result<(), StartError> {
    let Some(url) = &c.rest_url else { return Ok(()) };
    let plain = crate::url::origin(url.trim()).is_none_or(|o| o.starts_with("http://"));
    if c.rest_token_file.is_some() && plain && !c.rest_allow_plain_http {
        return Err(StartError::PlainJwt(crate::url::redact(url)));
    }
    Ok(())
}

/// Whether any configured source speaks HTTP.
pub fn uses_http(s: &crate::config::Sources) -> bool {
    s.prometheus.is_some() || !s.scrape.is_empty() || s.http.ca_file.is_some()
}

/// The HTTP client of a source: the transport of `[sources.http]`, the Prometheus server's
/// credentials for its origin only (`prometheus`: its base URL), every `[[sources.auth]]` for
/// its own origin, and the sources' memory budget.
pub fn http_client(s: &crate::config::Sources, prometheus: Option<&str>) -> Result<http::Client, StartError> {
    crate::budget::Budget::configure(s.memory_budget.unwrap_or(crate::budget::DEFAULT));
    let in_section = |section: &str| {
        let section = section.to_string();
        move |e: http::ClientError| StartError::Http { section, why: e }
    };
    let mut c = http::Client::new(&s.http).map_err(in_section("sources.http"))?;
    if let Some(base) = prometheus {
        c = c.with_credentials(base, &s.http.credentials).map_err(in_section("sources.http"))?;
    }
    for (i, a) in s.auth.iter().enumerate() {
        c = c.with_credentials(&a.url, &a.credentials).map_err(in_section(&format!("sources.auth[{i}]")))?;
    }
    // Secrets written into the URLs themselves never come back in an echoed error either.
    for url in prometheus.into_iter().chain(s.prometheus.as_deref()).chain(s.scrape.iter().map(String::as_str)) {
        c = c.with_url_secrets(url);
    }
    Ok(c.with_budget(crate::budget::Budget::global()))
}

/// The Prometheus source's settings for the server at `base`.
pub fn prometheus_settings(cfg: &Config, base: &str) -> prometheus::Settings {
    let s = &cfg.sources;
    prometheus::Settings {
        base: base.to_string(),
        query: s.prometheus_query.clone(),
        fields: s.promql.clone(),
        with_queue: s.prometheus_queue,
        node: s.scrape_node,
        api: s.prometheus_api,
        no_federation: Default::default(),
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
    epoch: tokio::time::Instant,
) -> Result<Option<sim::SimHandle>, StartError> {
    let s = &cfg.sources;
    crate::budget::Budget::configure(s.memory_budget.unwrap_or(crate::budget::DEFAULT));
    // NVML first: where it and a metrics source report the same card, its values and MIG
    // placements win (the store ranks sources by registration order).
    let run_sim = spawn_nvml(cfg, store, &tx);
    // Schedulers before the metrics sources: their workloads (kind, reason, request) are the
    // richer record of a job or pod that an exporter's holder labels also name.
    if s.slurm {
        spawn_slurm(cfg, store, &tx)?;
    }
    if let Some(settings) = kubernetes_settings(cfg) {
        let every = cfg.refresh.max(Duration::from_secs(2));
        store.register("kubernetes", SourceKind::Kubernetes, every);
        kubernetes::spawn("kubernetes".into(), settings, every, tx.clone());
    }
    if let Some(base) = &s.prometheus {
        spawn_prometheus(cfg, base, store, &tx)?;
    }
    if !s.scrape.is_empty() {
        spawn_scrapes(cfg, store, &tx, epoch)?;
    }
    if !run_sim {
        return Ok(None);
    }
    Ok(Some(spawn_sim(cfg, store, tx)))
}

/// Start NVML where the config names its library, or where nothing is configured and this
/// host has GPUs. Whether the simulated cluster runs instead (`demo`, or nothing configured
/// and no GPU found).
fn spawn_nvml(cfg: &Config, store: &mut Store, tx: &mpsc::Sender<SourceUpdate>) -> bool {
    let s = &cfg.sources;
    let mut run_sim = s.demo;
    if let Some(lib) = &s.nvml {
        store.register("nvml", SourceKind::Nvml, cfg.refresh);
        nvml::spawn("nvml".into(), lib.clone(), cfg.refresh, tx.clone());
    } else if !s.demo && !s.any_real() {
        // Nothing configured: use this host's GPUs if NVML finds any, else the simulator.
        let unavailable = match nvml::open(None).map(|n| n.device_count()) {
            Ok(Ok(n)) if n > 0 => None,
            Ok(_) => Some("no GPU found".to_string()),
            Err(reason) => Some(reason.to_string()),
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
    run_sim
}

/// Start the Slurm source: its commands, or slurmrestd where a URL is set.
fn spawn_slurm(cfg: &Config, store: &mut Store, tx: &mpsc::Sender<SourceUpdate>) -> Result<(), StartError> {
    let c = &cfg.slurm;
    check_slurm_rest(c)?;
    let rest = c.rest_url.as_ref().map(|url| slurm::Rest {
        url: url.clone(),
        user: c.rest_user.clone(),
        token_file: c.rest_token_file.clone(),
    });
    let client = match &rest {
        Some(_) => Some(http_client(&cfg.sources, None)?),
        None => None,
    };
    let settings =
        slurm::Settings { commands_dir: c.commands_dir.clone(), timeout: c.timeout, rest, kinds: cfg.kinds.clone() };
    let every = cfg.refresh.max(Duration::from_secs(5));
    store.register("slurm", SourceKind::Slurm, every);
    slurm::spawn("slurm".into(), settings, client, every, tx.clone());
    Ok(())
}

/// Start the Prometheus source for the server at `base`.
fn spawn_prometheus(
    cfg: &Config,
    base: &str,
    store: &mut Store,
    tx: &mpsc::Sender<SourceUpdate>,
) -> Result<(), StartError> {
    let client = http_client(&cfg.sources, Some(base))?;
    let every = cfg.refresh.max(Duration::from_secs(5));
    store.register("prometheus", SourceKind::Prometheus, every);
    if cfg.sources.prometheus_queue {
        store.reports_queue("prometheus");
    }
    let settings = prometheus_settings(cfg, base);
    prometheus::spawn(settings, client, every, tx.clone());
    Ok(())
}

/// Start one scrape source per exporter URL (the same source named twice runs once), all
/// sharing one client, one limit on scrapes at once and the run's clock (`epoch`).
fn spawn_scrapes(
    cfg: &Config,
    store: &mut Store,
    tx: &mpsc::Sender<SourceUpdate>,
    epoch: tokio::time::Instant,
) -> Result<(), StartError> {
    let s = &cfg.sources;
    let client = http_client(s, None)?;
    let limit = std::sync::Arc::new(tokio::sync::Semaphore::new(scrape::MAX_CONCURRENT));
    let mut seen = std::collections::HashSet::new();
    let clock = (epoch, cfg.refresh);
    let urls: Vec<String> = s.scrape.iter().filter(|u| seen.insert(scrape::source_name(u))).cloned().collect();
    for (url, node) in urls.iter().zip(scrape::node_names(&urls, s.scrape_node)) {
        store.register(scrape::source_name(url), SourceKind::Scrape, cfg.refresh);
        scrape::spawn(url.clone(), node, client.clone(), limit.clone(), clock, tx.clone());
    }
    Ok(())
}

/// Start the simulated cluster, built off the owner loop; its handle, for executors.
fn spawn_sim(cfg: &Config, store: &mut Store, tx: mpsc::Sender<SourceUpdate>) -> sim::SimHandle {
    let start = Utc::now().with_nanosecond(0).unwrap_or_else(Utc::now);
    let sim_cfg = sim::SimConfig { size: cfg.demo.size, ..sim::SimConfig::new(cfg.demo.seed, start) };
    let name = "sim".to_string();
    store.register(name.clone(), SourceKind::Simulated, cfg.refresh);
    let (refresh, speed) = (cfg.refresh, cfg.demo.speed);
    let (ops_tx, ops) = mpsc::channel(8);
    tokio::spawn(async move {
        // Building a large simulated cluster takes a moment: keep it off the owner loop.
        let Ok(sim) = tokio::task::spawn_blocking(move || {
            let mut s = sim::Sim::new(sim_cfg.clone());
            // The default cluster replays its previous day for the demand by hour (a few
            // hundred milliseconds); a large one (--demo-size) starts without it.
            if sim_cfg.size.is_none() {
                s.seed_demand(sim::Sim::past_day_demand(&sim_cfg));
            }
            s
        })
        .await
        else {
            return;
        };
        sim::run(sim, name, refresh, speed, tx, ops).await;
    });
    sim::SimHandle { tx: ops_tx, speed }
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

#[cfg(test)]
mod tests {

    #[test]
    fn the_slurm_jwt_needs_https_however_the_url_is_written() {
        let c = |url: &str, allow| crate::config::Slurm {
            rest_url: Some(url.into()),
            rest_token_file: Some("/t".into()),
            rest_allow_plain_http: allow,
            ..crate::config::Slurm::default()
        };
        for url in ["http://ctl:6820", "HTTP://ctl:6820", "http:ctl:6820", " http://ctl"] {
            assert!(check_slurm_rest(&c(url, false)).is_err(), "{url}");
            assert!(check_slurm_rest(&c(url, true)).is_ok(), "{url}");
        }
        assert!(check_slurm_rest(&c("https://ctl:6820", false)).is_ok());
    }

    use super::*;
    use crate::model::SourceKind;
    use crate::sources::Partial;

    /// A store with one live scheduler answering at `at` with one 1g.10gb job.
    fn store(at: chrono::DateTime<Utc>) -> Store {
        let mut s = Store::new();
        s.register("slurm", SourceKind::Slurm, Duration::from_secs(10));
        let mut w = crate::model::Workload::new(
            "slurm:1",
            "job",
            crate::model::WorkloadKind::Inference,
            crate::model::WorkloadState::Running,
        );
        w.request.mig_profile = Some("1g.10gb".into());
        let partial = Partial { workloads: vec![w], ..Partial::default() };
        s.apply(SourceUpdate { source: "slurm".into(), kind: SourceKind::Slurm, at, result: Ok(partial) }, at);
        s
    }

    #[test]
    fn demand_is_kept_between_runs_and_a_bad_file_is_named() {
        let dir = std::env::temp_dir().join(format!("tessera-demand-{}", std::process::id()));
        let path = dir.join("tessera/demand.json");
        let at = chrono::TimeZone::with_ymd_and_hms(&Utc, 2026, 3, 2, 9, 0, 0).single().unwrap_or_default();
        let s = store(at);
        assert_eq!(s.demand().mean(9, "1g.10gb"), 1.0, "sampled at the rebuild");
        let mut saved = None;
        save_demand_to(&path, &s, &mut saved).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(saved, Some(at));
        let back = load_demand(&path).unwrap_or_else(|e| panic!("{e}")).unwrap_or_default();
        assert_eq!(&back, s.demand());
        // Nothing new: not written again.
        std::fs::write(&path, "{").unwrap_or_else(|e| panic!("{e}"));
        save_demand_to(&path, &s, &mut saved).unwrap_or_else(|e| panic!("{e}"));
        let err = load_demand(&path).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.starts_with(&path.display().to_string()), "{err}");
        // A bad file is moved aside, not overwritten.
        assert!(set_aside(&path).starts_with("moved to"));
        assert!(path.with_extension("json.bad").exists() && !path.exists());
        // Well-formed JSON that is not a day of demand is refused too.
        std::fs::write(&path, r#"{"hours":[],"last":null}"#).unwrap_or_else(|e| panic!("{e}"));
        assert!(load_demand(&path).err().map(|e| e.to_string()).unwrap_or_default().contains("0 hours, not 24"));
        assert_eq!(load_demand(&dir.join("none.json")).map_err(|e| e.to_string()), Ok(None));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
