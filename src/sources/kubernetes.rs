//! The Kubernetes source (`--kubernetes[=CONTEXT]`): GPU nodes, their allocatable GPU
//! resources and what bound pods hold, GPU pods as workloads with their pending reasons, and
//! Kueue's pending Workloads with their queue positions. Watches (kube-runtime reflectors) keep
//! the objects current, so a large cluster costs one list and then only its changes; every
//! interval the stores are mapped into one update, and Kueue's visibility API is asked where
//! the pending Workloads stand (in the background, for the next update).

mod answers;
pub mod dra;
#[cfg(test)]
#[path = "kubernetes/dra_fixture_tests.rs"]
pub mod dra_fixture;
pub(crate) mod error;
mod kept;
mod kueue;
mod nodes;
mod objects;
mod partial;
mod pods;
mod resources;
mod visibility;
mod watch;
mod weigh;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use kube::config::{KubeConfigOptions, Kubeconfig};
use tokio::sync::mpsc;
use tokio::time::{Instant, MissedTickBehavior};

use super::{Partial, SourceError, SourceUpdate};
use crate::model::KindRules;
use crate::model::SourceKind;
use objects::KueueWorkload;
use visibility::{Background, Known};
use watch::{State, Watches};

/// How long the first complete list may take before the source says it is still waiting.
const LIST_PATIENCE: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, Default)]
pub struct Settings {
    /// The kubeconfig context; `None` is the current context, or the in-cluster service
    /// account when there is no kubeconfig.
    pub context: Option<String>,
    /// `None` reads `KUBECONFIG` or `~/.kube/config`.
    pub kubeconfig: Option<PathBuf>,
    /// Which workloads are inference or training, by PriorityClass name and namespace.
    pub kinds: KindRules,
}

/// Why no Kubernetes client could be made: the configuration could not be read or inferred.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The kubeconfig file given cannot be read (said by the cause at the bottom of the chain:
    /// kube's own message repeats the path).
    #[error("kubeconfig {}: {}", path.display(), error::root_cause(source))]
    Read { path: PathBuf, source: kube::config::KubeconfigError },
    /// The kubeconfig file given has no usable context or cluster.
    #[error("kubeconfig {}: {source}", path.display())]
    File { path: PathBuf, source: kube::config::KubeconfigError },
    /// The default kubeconfig, for a context named.
    #[error("kubeconfig: {0}")]
    Context(#[source] kube::config::KubeconfigError),
    /// Neither a kubeconfig nor a service account.
    #[error("no Kubernetes configuration: {0}")]
    Infer(#[source] kube::config::InferConfigError),
    /// The configuration read, but no client could be made for `server`.
    #[error("Kubernetes client for {server}: {source}")]
    Client { server: String, source: kube::Error },
}

/// A client for the actions (cordon, labels, eviction). It does not retry on its own: kube's
/// default client repeats a 429/503/504 up to 15 times with backoff, which would ask again, for
/// minutes, for an eviction a PodDisruptionBudget refused; the operator must hear the refusal.
pub async fn client(settings: &Settings) -> Result<kube::Client, ClientError> {
    connect_with(settings, false).await.map(|(c, _)| c)
}

/// The client and the API server's URL as messages may show it.
async fn connect(settings: &Settings) -> Result<(kube::Client, String), ClientError> {
    connect_with(settings, true).await
}

async fn connect_with(settings: &Settings, retry: bool) -> Result<(kube::Client, String), ClientError> {
    let options = KubeConfigOptions { context: settings.context.clone(), ..KubeConfigOptions::default() };
    let config = match (&settings.kubeconfig, &settings.context) {
        (Some(path), _) => {
            // kube's read error repeats the path in quotes; the cause at the bottom is enough.
            let file =
                Kubeconfig::read_from(path).map_err(|source| ClientError::Read { path: path.clone(), source })?;
            kube::Config::from_custom_kubeconfig(file, &options)
                .await
                .map_err(|source| ClientError::File { path: path.clone(), source })?
        }
        (None, Some(_)) => kube::Config::from_kubeconfig(&options).await.map_err(ClientError::Context)?,
        (None, None) => kube::Config::infer().await.map_err(ClientError::Infer)?,
    };
    let mut config = config;
    config.default_retry = retry;
    let server = crate::url::redact(&config.cluster_url.to_string());
    let server = server.trim_end_matches('/').to_string();
    // Every answer passes through the cap and the sources' memory budget (answers.rs).
    let client = kube::client::ClientBuilder::try_from(config)
        .map_err(|source| ClientError::Client { server: server.clone(), source })?
        .with_layer(&answers::CapLayer::new(crate::budget::Budget::global()))
        .build();
    Ok((client, server))
}

fn build(w: &Watches, kueue: &[Arc<KueueWorkload>], kinds: &KindRules, notes: Vec<String>, known: Known) -> Partial {
    let stores = w.dra();
    let (slices, claims, templates, classes, rules) = match &stores {
        Some(d) => (
            d.slices.state(),
            d.claims.state(),
            d.templates.state(),
            d.classes.state(),
            d.rules.as_ref().map(|r| r.state()).unwrap_or_default(),
        ),
        None => Default::default(),
    };
    let rules_served = stores.as_ref().map(|d| d.rules.is_some());
    let (claims_unknown, rules_unknown, slices_unknown) = w.dra_unknown();
    let dra = dra::Objects {
        slices: &slices,
        claims: &claims,
        templates: &templates,
        classes: &classes,
        rules: &rules,
        rules_served,
        claims_unknown: claims_unknown.as_deref(),
        rules_unknown: rules_unknown.as_deref(),
        slices_unknown: slices_unknown.as_deref(),
    };
    let mut p =
        partial::build(&w.nodes.state(), &w.pods.state(), &w.classes.state(), kueue, kinds, &known.positions, &dra);
    let notes: Vec<String> = p.note.take().into_iter().chain(notes).chain(known.note).collect();
    p.note = (!notes.is_empty()).then(|| notes.join("; "));
    p
}

fn err(message: String, fatal: bool) -> SourceError {
    SourceError { message, fatal, unanswered: false }
}

/// Run the source until the receiver goes away. Must run inside a tokio runtime.
pub fn spawn(name: String, settings: Settings, interval: Duration, tx: mpsc::Sender<SourceUpdate>) {
    tokio::spawn(async move {
        let send = |result| SourceUpdate { source: name.clone(), kind: SourceKind::Kubernetes, at: Utc::now(), result };
        // A configuration that cannot be read will not fix itself: that is fatal.
        let (client, server) = match connect(&settings).await {
            Ok(c) => c,
            Err(m) => {
                let _ = tx.send(send(Err(err(m.to_string(), true)))).await;
                return;
            }
        };
        let watches = Watches::start(client, &server);
        let positions = Background::start(settings.clone(), server.clone());
        let started = Instant::now();
        let mut tick = tokio::time::interval(interval.max(Duration::from_millis(100)));
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        // What the last update said: Ok, or the error message.
        let mut last: Option<Result<(), String>> = None;
        // What the last picture sent was built from: the watches' generation, their notes
        // and the Kueue positions. A tick that finds the same sends "unchanged": a
        // 1,000-node DRA cluster is ~200,000 devices to read again for nothing.
        let mut built: Option<(u64, Vec<String>, Known)> = None;
        loop {
            // Send on every tick (the store marks a silent source stale), and at once when
            // health changes, so the first data, a failure and a recovery show without waiting.
            let on_tick = tokio::select! {
                _ = tick.tick() => true,
                () = watches.changed() => false,
            };
            // Read before the state and the stores: a change after it moves it again.
            let generation = watches.generation();
            let result = match watches.state() {
                State::Syncing if !on_tick || started.elapsed() < LIST_PATIENCE => continue,
                State::Syncing => {
                    Err(err(format!("no complete list from {server} after {}s", started.elapsed().as_secs()), false))
                }
                State::Failed(m) if !on_tick && last.as_ref().is_some_and(|l| l.as_ref().err() == Some(&m)) => continue,
                State::Failed(m) => Err(err(m, false)),
                State::Ready { .. } if !on_tick && last == Some(Ok(())) => continue,
                // Mapping ten thousand pods takes milliseconds: no need to leave the runtime.
                State::Ready { notes } => {
                    let kueue = watches.kueue().map(|k| k.state()).unwrap_or_default();
                    // Once an interval, not on every watch event: each round is a request
                    // per LocalQueue.
                    if on_tick {
                        positions.ask(visibility::wanted(&kueue));
                    }
                    let from = (generation, notes, positions.known());
                    if last == Some(Ok(())) && built.as_ref() == Some(&from) {
                        Ok(Partial::unchanged())
                    } else {
                        let (_, notes, known) = from.clone();
                        built = Some(from);
                        Ok(build(&watches, &kueue, &settings.kinds, notes, known))
                    }
                }
            };
            last = Some(result.as_ref().map(|_| ()).map_err(|e| e.message.clone()));
            if tx.send(send(result)).await.is_err() {
                return;
            }
        }
    });
}

/// One collection for `tessera snapshot --kubernetes`: the first complete list of everything,
/// or the first failure, within `timeout`.
pub async fn collect_once(settings: &Settings, timeout: Duration) -> Result<Partial, SourceError> {
    let deadline = Instant::now() + timeout;
    let late = |what: &str| err(format!("{what} within {}s", timeout.as_secs_f64()), false);
    let (client, server) = match tokio::time::timeout_at(deadline, connect(settings)).await {
        Ok(Ok(c)) => c,
        Ok(Err(m)) => return Err(err(m.to_string(), true)),
        Err(_) => return Err(late("could not read the Kubernetes configuration")),
    };
    let watches = Watches::start(client, &server);
    let collect = async {
        loop {
            match watches.state() {
                State::Ready { notes } => {
                    let kueue = watches.kueue().map(|k| k.state()).unwrap_or_default();
                    // Leave a moment for the mapping: positions are not worth the snapshot.
                    let cutoff = deadline.checked_sub(Duration::from_millis(200)).unwrap_or(deadline);
                    let known = visibility::once(settings, &server, &visibility::wanted(&kueue), cutoff).await;
                    return Ok(build(&watches, &kueue, &settings.kinds, notes, known));
                }
                State::Failed(m) => return Err(err(m, false)),
                State::Syncing => watches.changed().await,
            }
        }
    };
    tokio::time::timeout_at(deadline, collect)
        .await
        .unwrap_or_else(|_| Err(late(&format!("no complete answer from {server}"))))
}

/// Objects as the API server sends them (`{"nodes": [...], "pods": [...], "classes": [...],
/// "workloads": [...]}`, each a JSON object of its kind) mapped as one update: the door the
/// fuzz campaign feeds (`crate::inputs`). An object that does not read is left out, as the
/// watch leaves out what it cannot decode.
pub fn from_json(doc: &serde_json::Value) -> Partial {
    fn each<T: serde::de::DeserializeOwned>(doc: &serde_json::Value, key: &str) -> Vec<Arc<T>> {
        doc.get(key)
            .and_then(serde_json::Value::as_array)
            .map(|a| a.iter().filter_map(|v| serde_json::from_value(v.clone()).ok().map(Arc::new)).collect())
            .unwrap_or_default()
    }
    let nodes = each::<objects::GpuNode>(doc, "nodes");
    let pods = each::<objects::GpuPod>(doc, "pods");
    let classes = each::<k8s_openapi::api::scheduling::v1::PriorityClass>(doc, "classes");
    let workloads = each::<objects::KueueWorkload>(doc, "workloads");
    let (slices, claims) = (each::<dra::objects::Slice>(doc, "resourceslices"), each(doc, "resourceclaims"));
    let (templates, classes_dra) = (each(doc, "resourceclaimtemplates"), each(doc, "deviceclasses"));
    let rules = each(doc, "devicetaintrules");
    // A document with a `devicetaintrules` list was read from a server that serves them.
    let rules_served = doc.get("devicetaintrules").map(|_| true);
    let dra = dra::Objects {
        slices: &slices,
        claims: &claims,
        templates: &templates,
        classes: &classes_dra,
        rules: &rules,
        rules_served,
        claims_unknown: None,
        rules_unknown: None,
        slices_unknown: None,
    };
    let positions = visibility::Positions::default();
    partial::build(&nodes, &pods, &classes, &workloads, &KindRules::default(), &positions, &dra)
}
